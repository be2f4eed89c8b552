"""What one micro-batch's Delta writes cost as the tables grow (a benchmark, not a test).

Builds ``replica_assignments`` and ``replica_assignment_history`` (the job's tables, ``pipelines.lakehouse.tables``)
holding ``N`` keys of one cluster — topics of 25 partitions, replication factor 3, random Kafka-style topic ids — in
the layout a real run leaves: the bootstrap's big commits (``--bootstrap-rows`` rows a file, in snapshot order, which
is random in ``topic_id``) plus a tail of small files from later micro-batches (``--tail-files``). The history table
holds each key's open version and, for half of the keys, an older closed one. Then it times
``DeltaRsWriter.write_batch`` of a micro-batch touching ``--keys`` random existing keys (a new value for each),
three times, and reports the median seconds, what the last commit did to each table (operation, rows copied from
old files, files added and removed), and what reading the current state and the state as of an offset then costs.
Every size is measured twice: as written, and after ``jbod maintain`` (``pipelines.lakehouse.maintenance.maintain``:
folding and compaction). It also times the initial load: one batch creating ``--load-keys`` keys in empty tables.

The tables are built from the schemas the writer creates, so the same script measures any version of the writer:
run it with ``PYTHONPATH`` at an older checkout for the "before" numbers. An anchor in the same run (the machine is
shared, timings are noisy): DuckDB updating the same keys of an in-memory table of the same ``N`` rows.

Run: ``python benchmarks/merge_benchmark.py [--sizes 100000 6000000] [--keys 100] [--json]``.

Measured on this project's 2-core box (delta-rs 1.6.6, shared with other jobs), 100 keys a batch, median seconds
per ``write_batch`` (both tables); numbers and the analysis are in docs/state-design.md ("Cost of a batch's
writes").
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from pipelines.config.profiles import MaintenanceSettings
from pipelines.lakehouse.maintenance import maintain
from pipelines.lakehouse.tables import ENTITIES, DeltaRsWriter, batch_tables, event_row, read_table

CLUSTER = "bench"
PARTITIONS_PER_TOPIC = 25
REPLICATION = 3
BROKERS = 100
ENTITY = ENTITIES["replica"]
#: Offsets of the bootstrap's rows; the measured batches come after it.
BOOT_OFFSET = 1_000


def _topic_id(rng: random.Random) -> str:
    return base64.urlsafe_b64encode(rng.randbytes(16)).decode().rstrip("=")


def _keys(n: int, rng: random.Random) -> list[tuple[str, int, int]]:
    """``n`` replica keys, in the order a snapshot lists them (topics in no particular id order)."""
    keys: list[tuple[str, int, int]] = []
    while len(keys) < n:
        topic = _topic_id(rng)
        for p in range(PARTITIONS_PER_TOPIC):
            first = rng.randrange(BROKERS)
            keys.extend((topic, p, (first + r) % BROKERS) for r in range(REPLICATION))
    return keys[:n]


def _columns(keys: list[tuple[str, int, int]], schema: pa.Schema, extra: dict[str, Any]) -> pa.Table:
    """Rows of ``keys`` in ``schema`` — the table's schema as stored, whatever the writer's layout (a column this
    script does not know, such as the append-only layout's ``removed``, is false)."""
    n = len(keys)
    values: dict[str, Any] = {
        "cluster_id": [CLUSTER] * n, "topic_id": [k[0] for k in keys], "partition_id": [k[1] for k in keys],
        "broker_id": [k[2] for k in keys], "topic_name": [f"topic-{k[0][:6]}" for k in keys],
        "directory": [f"dir-{k[2]}-{k[1] % 3}" for k in keys], "directory_state": ["ASSIGNED"] * n,
        "offline": [False] * n, "offline_reason": [None] * n, **extra}
    return pa.table({f.name: pa.array(values[f.name], f.type) if f.name in values else pa.array([False] * n, f.type)
                     for f in schema}, schema=schema)


def _times(n: int, value: int | None) -> pa.Array:
    return pa.array([value] * n, pa.int64()).cast(pa.timestamp("us", tz="UTC"))


def _stored_schema(path: Path) -> pa.Schema:
    return pa.schema(DeltaTable(str(path)).schema().to_arrow())


def build(root: Path, n: int, bootstrap_rows: int, tail_files: int, rng: random.Random) -> list[tuple[str, int, int]]:
    """Write both tables with ``n`` keys; return the keys."""
    keys = _keys(n, rng)
    current = root / "replica_assignments"
    history = root / "replica_assignment_history"
    DeltaRsWriter(root, "bench-build").ensure_tables()
    current_schema, history_schema = _stored_schema(current), _stored_schema(history)
    tail = min(len(keys) // 2, tail_files * 300)
    head = len(keys) - tail
    chunks = [keys[i:min(i + bootstrap_rows, head)] for i in range(0, head, bootstrap_rows)]
    chunks += [keys[i:i + 300] for i in range(head, len(keys), 300)]
    for chunk in chunks:
        m = len(chunk)
        write_deltalake(str(current), _columns(chunk, current_schema, {
            "since_offset": [BOOT_OFFSET] * m, "since_time": _times(m, BOOT_OFFSET * 1000)}), mode="append")
        old = chunk[: m // 2]
        write_deltalake(str(history), pa.concat_tables([
            _columns(old, history_schema, {
                "valid_from_offset": [1] * len(old), "valid_from_time": _times(len(old), 1000),
                "valid_to_offset": [BOOT_OFFSET] * len(old), "valid_to_time": _times(len(old), BOOT_OFFSET * 1000)}),
            _columns(chunk, history_schema, {
                "valid_from_offset": [BOOT_OFFSET] * m, "valid_from_time": _times(m, BOOT_OFFSET * 1000),
                "valid_to_offset": [None] * m, "valid_to_time": _times(m, None)})]), mode="append")
    return keys


def batch_rows(keys: list[tuple[str, int, int]], count: int, offset: int, rng: random.Random) -> dict[str, pa.Table]:
    """A micro-batch's operator rows (as ``plan_batch`` takes them): one change event for each of ``count`` random
    existing keys — the replica moved to another directory."""
    rows = []
    for i, key in enumerate(rng.sample(keys, count) if count < len(keys) else keys):
        value = {"topic_name": f"topic-{key[0][:6]}", "directory": f"moved-{offset}", "directory_state": "ASSIGNED",
                 "offline": False, "offline_reason": None}
        rows.append({"cluster_id": CLUSTER, "ord": i, **event_row(ENTITY.name, key, offset + i, offset + i, value)})
    return batch_tables(rows)


def _last_commit(path: Path) -> dict[str, Any]:
    """What the table's last commit did: its operation, the rows a MERGE copied out of the files it rewrote (0 for
    an append), the files it added and removed."""
    commit = DeltaTable(str(path)).history(1)[0]
    metrics = commit.get("operationMetrics", {})
    return {"operation": commit.get("operation"), "rows_copied": int(metrics.get("num_target_rows_copied", 0)),
            "files_added": int(metrics.get("num_target_files_added", metrics.get("num_added_files", 0))),
            "files_removed": int(metrics.get("num_target_files_removed", metrics.get("num_removed_files", 0)))}


def measure(root: Path, keys: list[tuple[str, int, int]], count: int, rng: random.Random, first_batch: int,
            repeat: int = 3) -> dict[str, Any]:
    writer = DeltaRsWriter(root, "bench")
    seconds: list[float] = []
    for b in range(first_batch, first_batch + repeat):
        rows = batch_rows(keys, count, BOOT_OFFSET + 1000 * (b + 1), rng)
        started = time.perf_counter()
        writer.write_batch(b, rows)
        seconds.append(time.perf_counter() - started)
    files = len(DeltaTable(str(root / "replica_assignments")).file_uris())
    return {"seconds": round(statistics.median(seconds), 3), "current_files": files,
            "current": _last_commit(root / "replica_assignments"),
            "history": _last_commit(root / "replica_assignment_history")}


def _timed(fn: Callable[[], pa.Table]) -> tuple[float, int]:
    started = time.perf_counter()
    rows = fn().num_rows
    return round(time.perf_counter() - started, 3), rows


def reads(root: Path) -> dict[str, Any]:
    """Seconds (and rows) to read the current state — the ``replica_assignments`` rows — and the state as of the
    bootstrap's offset from the history (the query ``as_of_image`` runs), through
    ``pipelines.lakehouse.tables.read_table``."""
    current_s, current_rows = _timed(lambda: read_table(root, "replica_assignments"))
    as_of = (f"cluster_id = '{CLUSTER}' AND valid_from_offset <= {BOOT_OFFSET} AND (valid_to_offset IS NULL OR "
             f"valid_to_offset > {BOOT_OFFSET})")
    as_of_s, as_of_rows = _timed(lambda: read_table(root, "replica_assignment_history", as_of))
    return {"current_seconds": current_s, "current_rows": current_rows, "as_of_seconds": as_of_s,
            "as_of_rows": as_of_rows}


def initial_load(count: int, rng: random.Random) -> float:
    """Seconds to write one batch creating ``count`` keys in empty tables (a bootstrap's batch)."""
    root = Path(tempfile.mkdtemp(prefix="kraft-jbod-load-"))
    try:
        writer = DeltaRsWriter(root, "bench")
        writer.ensure_tables()
        rows = batch_rows(_keys(count, rng), count, BOOT_OFFSET, rng)
        started = time.perf_counter()
        writer.write_batch(0, rows)
        return round(time.perf_counter() - started, 3)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def duckdb_anchor(keys: list[tuple[str, int, int]], count: int, rng: random.Random, repeat: int = 3) -> float:
    """The same batch in DuckDB (an in-memory table of the same keys, ``count`` of them updated by key): the
    speed anchor of this run."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t (topic_id VARCHAR, partition_id INTEGER, broker_id INTEGER, directory VARCHAR, "
                "PRIMARY KEY (topic_id, partition_id, broker_id))")
    arrow = pa.table({"topic_id": [k[0] for k in keys], "partition_id": pa.array([k[1] for k in keys], pa.int32()),
                      "broker_id": pa.array([k[2] for k in keys], pa.int32()),
                      "directory": [f"dir-{k[2]}" for k in keys]})
    con.register("arrow", arrow)
    con.execute("INSERT INTO t SELECT * FROM arrow")
    seconds = []
    for b in range(repeat):
        batch = rng.sample(keys, count)
        src = pa.table({"topic_id": [k[0] for k in batch], "partition_id": pa.array([k[1] for k in batch], pa.int32()),
                        "broker_id": pa.array([k[2] for k in batch], pa.int32())})
        con.register("src", src)
        started = time.perf_counter()
        con.execute(f"UPDATE t SET directory = 'moved-{b}' FROM src WHERE t.topic_id = src.topic_id AND "
                    "t.partition_id = src.partition_id AND t.broker_id = src.broker_id")
        seconds.append(time.perf_counter() - started)
    con.close()
    return round(statistics.median(seconds), 4)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 6_000_000])
    parser.add_argument("--keys", type=int, default=100, help="Keys a measured micro-batch touches.")
    parser.add_argument("--bootstrap-rows", type=int, default=60_000,
                        help="Rows a bootstrap file holds (20,000 partition records a micro-batch × RF 3).")
    parser.add_argument("--tail-files", type=int, default=50, help="Small files of later micro-batches.")
    parser.add_argument("--load-keys", type=int, default=60_000,
                        help="Keys the timed initial-load batch creates (0: skip it).")
    parser.add_argument("--json", action="store_true", help="Print the results as JSON only.")
    args = parser.parse_args()
    results: list[dict[str, Any]] = []
    if args.load_keys:
        results.append({"initial_load_keys": args.load_keys,
                        "seconds": initial_load(args.load_keys, random.Random(args.load_keys))})
        if not args.json:
            print(json.dumps(results[-1]), flush=True)
    for n in args.sizes:
        rng = random.Random(n)
        root = Path(tempfile.mkdtemp(prefix="kraft-jbod-merge-"))
        try:
            keys = build(root, n, args.bootstrap_rows, args.tail_files, rng)
            as_written = measure(root, keys, args.keys, rng, first_batch=0)
            as_written["reads"] = reads(root)
            maintain(root, MaintenanceSettings(retention_hours=0), force=True,
                     only=["replica_assignments", "replica_assignment_history"])
            compacted = measure(root, keys, args.keys, rng, first_batch=10)
            compacted["reads"] = reads(root)
            anchor = duckdb_anchor(keys, args.keys, rng)
            results.append({"keys_in_table": n, "as_written": as_written, "after_maintain": compacted,
                            "duckdb_seconds": anchor})
        finally:
            shutil.rmtree(root, ignore_errors=True)
        if not args.json:
            print(json.dumps(results[-1]), flush=True)
    if args.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
