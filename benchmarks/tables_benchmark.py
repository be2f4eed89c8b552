"""How long the operator's questions take when answered from the Spark job's Delta tables (issue #14 item 1).

Times, in one run and as separate processes (what an operator at the console waits for, interpreter start and
imports included), each of::

    jbod image  --tables T --json
    jbod whatif --tables T --fail-dir DIR --json       (DIR: an online directory of the latest image, picked here)
    jbod report --tables T --json

at the latest offset and again with ``--as-of-offset N`` (N: the middle of the cluster's applied offsets, unless
``--as-of-offset`` is given), and prints each one's wall seconds and peak RSS (GNU ``time``'s ``%M`` of the child).
With ``--text`` the same commands print their tables instead of JSON, into a file (what ``jbod report > out.txt``
or ``| less`` gets: no terminal, the tables not wrapped).
On tables that hold several clusters (a fleet: ``benchmarks/fleet_tables.py`` builds one) the commands above read
``--cluster`` (default: the first), and ``--only fleet`` (the default there) also times issue #14 item 3::

    jbod report --tables T --all-clusters --json [--jobs J]
With ``--duckdb RECORDS.jsonl`` it also times the DuckDB baseline (``../shared/bench/duckdb_baseline.py``, a
whole-log image in SQL) in the same run, as the speed anchor the project's benchmarks quote ratios against::

    python benchmarks/tables_benchmark.py TABLES [--cluster C] [--as-of-offset N] [--repeat 3] [--json]
        [--duckdb ~/.cache/kraft-jbod/clusters/<shape>/records.jsonl] [--only image whatif report fleet]
        [--jobs J] [--text]

The goals (issue #14): ≤ 5 s each at 200 k partitions, peak RSS ≤ 2 GiB; the fleet of 50 clusters of 20 k
partitions ≤ 30 s. Read-only: the tables are never written
(``jbod maintain`` would fold them; copy them first to time folded tables). Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from clusters import DUCKDB_BASELINE, run_measured  # beside this script (run as a script, like every benchmark)

from pipelines.lakehouse.tables import as_of_image, clusters, query, resolve_cluster

GOAL_SECONDS = 5.0
GOAL_RSS_MB = 2048


@dataclass(frozen=True, slots=True)
class Run:
    """One timed command: wall seconds, the child's peak RSS, its exit code and output size."""

    seconds: float
    rss_mb: float
    returncode: int
    out_bytes: int


def timed(argv: list[str]) -> Run:
    """Run ``argv`` to completion: its wall time and its own peak RSS (:func:`clusters.run_measured`)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        run = run_measured(argv, out, err)
        size = out.seek(0, os.SEEK_END)
        if run.returncode != 0:
            err.seek(0)
            sys.stderr.write(f"{' '.join(argv)} failed ({run.returncode}):\n{err.read().decode()[-2000:]}\n")
    return Run(run.seconds, run.rss_bytes / 2**20, run.returncode, size)


def middle_offset(tables: Path, cluster: str) -> int:
    """The applied offset halfway through the cluster's log (by count of applied records, not by value)."""
    where = f"cluster_id = '{cluster}' AND applied_offset IS NOT NULL"
    bounds = query(tables, "records", f"SELECT MIN(applied_offset) AS lo, MAX(applied_offset) AS hi FROM t "
                                      f"WHERE {where}").to_pylist()[0]
    return (int(bounds["lo"]) + int(bounds["hi"])) // 2


def online_dir(tables: Path, cluster: str, as_of_offset: int | None) -> str:
    """A directory holding replicas and online in the image (as of the offset): the busiest, so that the what-if
    has work to do."""
    doc = as_of_image(tables, cluster, as_of_offset)
    online = {d for b in doc["brokers"] if not b["fenced"] for d in b["logDirs"]}
    counts: dict[str, int] = {}
    for r in doc["replicas"]:
        if r["directory"] in online and not r["offline"]:
            counts[r["directory"]] = counts.get(r["directory"], 0) + 1
    if not counts:
        raise SystemExit(f"no online directory holds a replica in {tables} (cluster {cluster})")
    return max(sorted(counts), key=lambda d: counts[d])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tables", type=Path)
    ap.add_argument("--cluster")
    ap.add_argument("--as-of-offset", type=int, help="default: the middle of the log")
    ap.add_argument("--repeat", type=int, default=1, help="runs per command; the median is reported")
    ap.add_argument("--only", nargs="+", choices=("image", "whatif", "report", "fleet"),
                    help="default: all of them (fleet only on tables of several clusters)")
    ap.add_argument("--jobs", type=int, help="the fleet report's --jobs (default: its own, one per core)")
    ap.add_argument("--duckdb", type=Path, help="records.jsonl of the same cluster: time the DuckDB baseline too")
    ap.add_argument("--json", action="store_true", help="print the results as one JSON document")
    ap.add_argument("--text", action="store_true", help="time the commands' tables (stdout a file), not their JSON")
    args = ap.parse_args()

    jbod = shutil.which("jbod") or sys.exit("the jbod script is not on PATH (pip install -e .)")
    known = clusters(args.tables)
    cluster = resolve_cluster(args.tables, args.cluster if args.cluster or len(known) < 2 else known[0])
    only = args.only or ("image", "whatif", "report", *(("fleet",) if len(known) > 1 else ()))
    mid = args.as_of_offset if args.as_of_offset is not None else middle_offset(args.tables, cluster)
    base = ["--tables", str(args.tables), "--cluster", cluster, *(() if args.text else ("--json",))]
    commands: list[tuple[str, list[str]]] = []
    kind = " (text)" if args.text else ""
    for label, as_of in ((f"latest{kind}", None), (f"as-of {mid}{kind}", mid)):
        at = [] if as_of is None else ["--as-of-offset", str(as_of)]
        if "image" in only:
            commands.append((f"image {label}", [jbod, "image", *base, *at]))
        if "whatif" in only:
            commands.append((f"whatif {label}", [jbod, "whatif", *base, *at, "--fail-dir",
                                                 online_dir(args.tables, cluster, as_of)]))
        if "report" in only:
            commands.append((f"report {label}", [jbod, "report", *base, *at]))
    if "fleet" in only:
        jobs = [] if args.jobs is None else ["--jobs", str(args.jobs)]
        commands.append((f"report --all-clusters ({len(known)})", [jbod, "report", "--tables", str(args.tables),
                                                                    "--all-clusters", "--json", *jobs]))
    scratch = tempfile.TemporaryDirectory()
    if args.duckdb is not None:
        commands.append(("duckdb baseline (whole log)", [sys.executable, str(DUCKDB_BASELINE), str(args.duckdb),
                                                         "--out", str(Path(scratch.name) / "image.json")]))
    results: dict[str, dict[str, float | list[float] | int]] = {}
    for label, argv in commands:
        runs = [timed(argv) for _ in range(args.repeat)]
        secs = [r.seconds for r in runs]
        results[label] = {"seconds": round(statistics.median(secs), 2), "runs": [round(s, 2) for s in secs],
                          "rss_mb": round(max(r.rss_mb for r in runs)), "exit": max(r.returncode for r in runs),
                          "out_bytes": runs[-1].out_bytes}
        if not args.json:
            r = results[label]
            ok = "ok" if r["seconds"] <= GOAL_SECONDS and r["rss_mb"] <= GOAL_RSS_MB else "over the goal"  # type: ignore[operator]
            print(f"{label:34s} {r['seconds']:7.2f} s  peak RSS {r['rss_mb']:6} MB  exit {r['exit']}  "
                  f"({ok}; runs {r['runs']})", flush=True)
    scratch.cleanup()
    if args.json:
        print(json.dumps({"tables": str(args.tables), "cluster": cluster, "asOfOffset": mid, "results": results},
                         indent=2))


if __name__ == "__main__":
    main()
