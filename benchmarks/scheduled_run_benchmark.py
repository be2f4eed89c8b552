"""``jbod run`` as a scheduled job runs it — a new process each time, timed from its start to its exit — on a cached
benchmark cluster (``benchmarks/clusters.py``; the 200 k-partition log by default):

1. the log without its last segment is replayed once, untimed: the tables and checkpoint each repeat starts from;
2. then, each repeat, on a copy of them: ``jbod run`` with the last segment added (+2.7 % records at 200 k), and
   ``jbod run`` again with nothing new (a scheduled run over a quiet cluster).

``benchmarks/spark_benchmark.py`` times the job inside one process from its query's start; this one times what an
operator's scheduler waits for: the interpreter, the imports, the JVM and the session, the query, the summary.
``--compare DIR`` runs the same with another checkout's code (``PYTHONPATH=DIR``), alternated with this one's, both
on the same tables; each run's summary (where every cluster stands) must be the same.

    python benchmarks/scheduled_run_benchmark.py [--partitions 200011] [--repeat 3] [--compare DIR] [--out DIR]
                                                  [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from jbod_model.storage.files import METADATA_PARTITION_DIR

HERE = Path(__file__).resolve().parents[1]


def _jbod_run(code: Path, inputs: Path, tables: Path) -> tuple[float, dict[str, Any]]:
    """``jbod run --json`` in a new process with ``code`` on its path: its wall time and its summary."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pipelines.cli", "run", "--input", str(inputs), "--tables",
                           str(tables), "--json"], cwd=code, env={**os.environ, "PYTHONPATH": str(code)},
                          capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"jbod run ({code}) failed:\n{done.stderr}")
    return seconds, json.loads(done.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=200_011)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--compare", type=Path, help="another checkout, run alternately with this one")
    parser.add_argument("--out", type=Path, help="work folder (default: a new temporary one)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from clusters import benchmark_cluster  # noqa: PLC0415 - beside this script; run as a script

    cluster = benchmark_cluster(args.partitions)
    work = args.out or Path(tempfile.mkdtemp(prefix="kraft-jbod-scheduled-"))
    shutil.rmtree(work / "in", ignore_errors=True)
    node = work / "in" / "node-1"
    part_dir = node / METADATA_PARTITION_DIR
    part_dir.mkdir(parents=True)
    source = cluster.node_dir / METADATA_PARTITION_DIR
    segments = sorted(source.glob("*.log"))
    for segment in segments[:-1]:
        os.link(segment, part_dir / segment.name)
    for meta in cluster.node_dir.glob("meta.properties"):
        shutil.copy2(meta, node / meta.name)
    start = work / "tables-start"
    shutil.rmtree(start, ignore_errors=True)
    _jbod_run(HERE, work / "in", start)
    os.link(segments[-1], part_dir / segments[-1].name)

    codes = {"this": HERE, **({"compare": args.compare.resolve()} if args.compare else {})}
    times: dict[str, dict[str, list[float]]] = {name: {"added": [], "nothing_new": []} for name in codes}
    seen: list[Any] = []
    for _ in range(args.repeat):
        for name, code in codes.items():
            tables = work / "tables"
            shutil.rmtree(tables, ignore_errors=True)
            shutil.copytree(start, tables)
            added, after = _jbod_run(code, work / "in", tables)
            quiet, again = _jbod_run(code, work / "in", tables)
            times[name]["added"].append(round(added, 2))
            times[name]["nothing_new"].append(round(quiet, 2))
            seen += [after["clusters"], again["clusters"]]
    if any(s != seen[0] for s in seen):
        raise SystemExit("the runs' summaries differ")
    added_offsets = int(cluster.summary["lastOffset"]) + 1 - int(segments[-1].stem)
    out = {"partitions": args.partitions, "offsets_added": added_offsets, "runs": {
            name: {kind: {"seconds": t, "median": statistics.median(t)} for kind, t in kinds.items()}
            for name, kinds in times.items()}}
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for name, kinds in out["runs"].items():
            print(f"{name} ({codes[name]}): " + "; ".join(
                f"{kind} median {v['median']:.2f} s {v['seconds']}" for kind, v in kinds.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
