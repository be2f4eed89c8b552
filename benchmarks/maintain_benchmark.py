"""What ``jbod maintain`` costs and buys (a benchmark, not a test).

A scheduled ``jbod run`` commits one small Parquet file per table and micro-batch, so a table that has seen a few
hundred runs is a few hundred files, and every reader lists and opens them all. This builds ``--tables`` tables of
the job's ``records`` schema with ``--batches`` appended commits each (``--rows`` rows a commit, like a micro-batch of
a quiet cluster), then measures: a full read of one table through the Delta log before, the maintenance of all of
them (``pipelines.lakehouse.maintenance.maintain``: compaction, vacuum with ``--force`` and retention 0 so the
compacted files go too, a checkpoint, log clean-up), and the same read after.

Run: ``python benchmarks/maintain_benchmark.py [--tables 5] [--batches 192] [--rows 200] [--json]``.

Measured on this project's 2-core box (defaults: 5 tables × 192 commits × 200 rows, 16 MB of Parquet): maintenance
of the 5 tables 1.2 s (about 0.25 s a table); reading one table 104 ms before, 20 ms after (1 file instead of 192,
and a checkpoint instead of 192 JSON commits).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from pipelines.config.profiles import MaintenanceSettings
from pipelines.lakehouse.maintenance import maintain
from pipelines.lakehouse.tables import APPEND_TABLES, read_table


def _batch(schema: pa.Schema, start: int, rows: int) -> pa.Table:
    offsets = list(range(start, start + rows))
    columns: dict[str, Any] = {}
    for f in schema:
        if f.name == "cluster_id":
            columns[f.name] = ["bench"] * rows
        elif pa.types.is_integer(f.type):
            columns[f.name] = offsets
        elif pa.types.is_string(f.type):
            columns[f.name] = [f"{f.name}-{o}" for o in offsets]
        else:
            columns[f.name] = [None] * rows
    return pa.table({name: pa.array(values, schema.field(name).type) for name, values in columns.items()},
                    schema=schema)


def _read_ms(path: Path, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        read_table(path.parent, path.name)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", type=int, default=5)
    parser.add_argument("--batches", type=int, default=192)
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--json", action="store_true", help="Print the results as JSON only.")
    args = parser.parse_args()
    schema = APPEND_TABLES["records"]
    root = Path(tempfile.mkdtemp(prefix="kraft-jbod-maintain-"))
    try:
        started = time.perf_counter()
        for t in range(args.tables):
            path = root / f"t{t}"
            for b in range(args.batches):
                write_deltalake(str(path), _batch(schema, b * args.rows, args.rows), mode="append")
        build_s = time.perf_counter() - started
        first = root / "t0"
        files_before = len(DeltaTable(str(first)).file_uris())
        size = sum(p.stat().st_size for p in root.rglob("*.parquet"))
        read_before = _read_ms(first)
        run = maintain(root, MaintenanceSettings(retention_hours=0), force=True)
        read_after = _read_ms(first)
        result = {"tables": args.tables, "batches": args.batches, "rows_per_batch": args.rows,
                  "megabytes": round(size / 1e6, 1), "build_seconds": round(build_s, 1),
                  "files_before": files_before, "files_after": len(DeltaTable(str(first)).file_uris()),
                  "maintain_seconds": round(run.seconds, 2), "read_ms_before": round(read_before, 1),
                  "read_ms_after": round(read_after, 1), "all_ok": run.ok}
        if args.json:
            print(json.dumps(result))
        else:
            for key, value in result.items():
                print(f"{key:>16}: {value}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
