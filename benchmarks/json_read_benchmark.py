"""What reading a record back from its JSON costs (``record_from_json``), per record type and version: the generated
reader the job's operator, the log suite of ``jbod check`` and the tables' readers use, against the reference reader
(a benchmark, not a test).

The records are the benchmark cluster's PartitionRecords and PartitionChangeRecords — most of a log — each read at
the version it was written (1: the simulator's, as Kafka 3.7–3.9 writes them) and again at version 2, as Kafka
writes them from the metadata.version that supports ELR (4.0; the 4.2 sample's log). Best of ``--repeat``
passes, in µs a record, and the records/s that makes.

Run: ``python benchmarks/json_read_benchmark.py [--partitions 200011] [--records 300000] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from typing import Any

import orjson
from clusters import benchmark_cluster  # beside this script (run as a script, like every benchmark)

from jbod_model.records.json_codec import record_from_json, record_to_json, typed_record_reader
from jbod_model.records.metadata import PartitionChangeRecord, PartitionRecord
from jbod_model.slots import gc_paused
from jbod_model.stream import entry_from_json


def _best_us(objs: list[dict[str, Any]], fast: bool, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        with gc_paused():
            start = time.perf_counter()
            for obj in objs:
                record_from_json(obj, fast=fast)
            best = min(best, time.perf_counter() - start)
    return best / len(objs) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=200_011)
    parser.add_argument("--records", type=int, default=300_000, help="records of each type read (the first ones)")
    parser.add_argument("--reference-records", type=int, default=30_000,
                        help="of those, how many the (slower) reference reader reads")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    cluster = benchmark_cluster(args.partitions)
    by_type: dict[type, list[Any]] = {PartitionRecord: [], PartitionChangeRecord: []}
    with (cluster.root / "records.jsonl").open("rb") as lines:
        for line in lines:
            entry = entry_from_json(orjson.loads(line), "records.jsonl")
            found = by_type.get(type(entry.record))
            if found is not None and len(found) < args.records:
                found.append(entry.record)
    out: dict[str, Any] = {"cluster": cluster.shape.key}
    for cls, records in by_type.items():
        for version in (1, 2):
            objs = [record_to_json(dataclasses.replace(r, version=version)) for r in records]
            fast = typed_record_reader(cls.TYPE_NAME, version) is not None
            us = _best_us(objs, True, args.repeat)
            reference = _best_us(objs[:args.reference_records], False, args.repeat)
            out[f"{cls.TYPE_NAME} v{version}"] = {
                "records": len(objs), "generated_reader": fast, "us_per_record": round(us, 2),
                "records_per_second": round(1e6 / us), "reference_us_per_record": round(reference, 2)}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
