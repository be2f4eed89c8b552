"""What ``jbod maintain`` costs on a job's tables that were never folded, and the next time (a benchmark, not a test).

The job only appends (docs/tables.md "Writes"), so the tables of a long ``jbod run`` hold every appended row until
``jbod maintain`` folds them (``pipelines.lakehouse.tables.fold_versions``). This copies the tables of ``TABLES``
(not ``_checkpoints`` nor any other ``_`` folder) into a scratch folder, runs ``jbod maintain --tables COPY --json``
on the copy twice — the first fold, then one with nothing new to fold — each as a child process measured with GNU
``time`` (wall, CPU, peak RSS), and prints each table's seconds and rows folded. The tables given are not touched.

Run: ``python benchmarks/fold_benchmark.py TABLES [--work DIR] [--json]`` — e.g. the tables ``jbod run`` wrote for
the 200 k or the 2 M benchmark cluster (``benchmarks/tables_benchmark.py`` builds them).

Measured on this project's 2-core box (docs/performance.md, "The first fold at 2 M partitions").
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from clusters import run_measured  # beside this script (run as a script, like every benchmark)


def _copy(tables: Path, into: Path) -> None:
    for child in sorted(tables.iterdir()):
        if child.is_dir() and not child.name.startswith(("_", ".")):
            shutil.copytree(child, into / child.name)


def _maintain(tables: Path, log: Path) -> dict[str, Any]:
    with (log.with_suffix(".json")).open("wb") as out, log.with_suffix(".err").open("wb") as err:
        run = run_measured([sys.executable, "-m", "pipelines.cli", "maintain", "--tables", str(tables), "--json"],
                           out, err)
    if run.returncode != 0:
        raise SystemExit(f"jbod maintain exited {run.returncode}: see {log.with_suffix('.err')}")
    report = json.loads(log.with_suffix(".json").read_text())
    return {"seconds": round(run.seconds, 1), "cpu_seconds": round(run.cpu_seconds, 1),
            "peak_rss_mb": round(run.rss_bytes / 2**20), "ok": report["ok"],
            "tables": {r["table"]: {"seconds": r["seconds"], "rows_folded": r["rowsFolded"]}
                       for r in report["results"] if r["rowsFolded"] or r["seconds"] >= 0.5}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tables", type=Path, help="A tables directory written by `jbod run` (left unchanged).")
    parser.add_argument("--work", type=Path, help="Scratch folder for the copy (default: a temporary one).")
    parser.add_argument("--json", action="store_true", help="Print the results as JSON only.")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kraft-jbod-fold-", dir=args.work))
    try:
        copy = work / "tables"
        copy.mkdir()
        _copy(args.tables, copy)
        result = {"tables": str(args.tables), "first": _maintain(copy, work / "first"),
                  "again": _maintain(copy, work / "again")}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps(result))
        return
    for run in ("first", "again"):
        r = result[run]
        print(f"{run}: {r['seconds']} s wall, {r['cpu_seconds']} s CPU, peak RSS {r['peak_rss_mb']} MB, ok={r['ok']}")
        for name, t in r["tables"].items():
            print(f"  {name:<28} {t['seconds']:>8.1f} s {t['rows_folded']:>12,} rows folded")


if __name__ == "__main__":
    main()
