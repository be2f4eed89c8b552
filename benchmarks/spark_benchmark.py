"""End-to-end benchmark of the Spark job against the pure model.

Generates a large JBOD cluster log (``jbod_model.simulator.churn``: brokers with several disks, topics, ISR churn,
disk failures, fencing, reassignments, deletions, transactions and mostly NoOps), writes it as a node's metadata log
dir, then measures:

1. the pure model: read the log and replay it (``jbod_model``, one process, no Spark);
2. the Spark job (``pipelines.streaming.job.run_job``, local[2], deltalake tables) on the same log, from an empty
   checkpoint — throughput in entries/s and the ratio to the pure model;
3. an incremental run after appending 1 % more records to the log (same checkpoint): what a scheduled job pays per
   run once the cluster is loaded.

Usage: ``python benchmarks/spark_benchmark.py [--partitions N] [--operations N] [--out DIR] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from jbod_model.image_json import image_to_json
from jbod_model.replay import Replayer
from jbod_model.simulator.churn import ChurnSpec, churn_log
from jbod_model.simulator.output import append_to_segment, write_metadata_dir
from jbod_model.sources import open_inputs
from jbod_model.storage.files import METADATA_PARTITION_DIR, segment_file_name
from pipelines.lakehouse.tables import as_of_image
from pipelines.streaming.job import run_job, spark_session


def _pure_replay(node: Path) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    loaded = open_inputs([node], from_snapshot=False)
    replayer = Replayer(loaded.base_image)
    for entry in loaded.entries:
        replayer.replay(entry)  # type: ignore[arg-type]
    image = replayer.image
    return time.perf_counter() - started, image_to_json(image)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--brokers", type=int, default=24)
    parser.add_argument("--topics", type=int, default=200)
    parser.add_argument("--partitions-per-topic", type=int, default=25)
    parser.add_argument("--operations", type=int, default=60_000)
    parser.add_argument("--noop-share", type=float, default=0.7)
    parser.add_argument("--out", type=Path, default=None, help="Work directory (default: a temporary one).")
    parser.add_argument("--json", action="store_true", help="Print the results as JSON only.")
    args = parser.parse_args(argv)

    spec = ChurnSpec(brokers=args.brokers, dirs_per_broker=3, topics=args.topics,
                         partitions_per_topic=args.partitions_per_topic, replication_factor=3,
                         operations=args.operations, noop_share=args.noop_share, seed=2024)
    work = args.out or Path(tempfile.mkdtemp(prefix="kraft-jbod-bench-"))
    shutil.rmtree(work / "in", ignore_errors=True)
    shutil.rmtree(work / "tables", ignore_errors=True)
    shutil.rmtree(work / "checkpoint", ignore_errors=True)

    started = time.perf_counter()
    base = churn_log(spec)
    # The generator is deterministic: more operations extend the same log, so the extra 1 % continues it.
    extended = churn_log(replace(spec, operations=int(spec.operations * 1.01) + 1))
    assert [e.offset for e in extended[: len(base)]] == [e.offset for e in base]
    extra = list(extended[len(base):])
    while extra and extra[0].batch_base_offset is not None and extra[0].batch_base_offset < len(base):
        extra.pop(0)  # never split a batch across the two runs' files
    node = write_metadata_dir(work / "in" / "node-1", base, cluster_id="bench", records_per_segment=50_000)
    generated = time.perf_counter() - started

    pure_seconds, pure_image = _pure_replay(node)

    spark_started = time.perf_counter()
    spark = spark_session("local[2]")
    session_seconds = time.perf_counter() - spark_started
    tables, checkpoint = work / "tables", work / "checkpoint"
    first = run_job([work / "in"], tables, checkpoint, spark=spark)
    first_seconds = first.seconds
    got = as_of_image(tables, "bench")
    assert got == pure_image, "the tables differ from the pure model"

    segments = sorted((node / METADATA_PARTITION_DIR).glob("*.log"))
    new_segment = node / METADATA_PARTITION_DIR / segment_file_name(extra[0].offset) if extra else segments[-1]
    new_segment.touch()
    append_to_segment(new_segment, extra)
    second = run_job([work / "in"], tables, checkpoint, spark=spark)
    _, pure_after = _pure_replay(node)
    assert as_of_image(tables, "bench") == pure_after, "the incremental run differs from the pure model"
    spark.stop()

    image = pure_image
    results = {
        "entries": len(base),
        "brokers": len(image["brokers"]),
        "partitions": len(image["partitions"]),
        "replicas": len(image["replicas"]),
        "generate_seconds": round(generated, 2),
        "pure_model_seconds": round(pure_seconds, 2),
        "pure_model_entries_per_second": round(len(base) / pure_seconds),
        "spark_session_seconds": round(session_seconds, 2),
        "spark_job_seconds": round(first_seconds, 2),
        "spark_entries_per_second": round(len(base) / first_seconds),
        "spark_over_pure_ratio": round(first_seconds / pure_seconds, 1),
        "spark_output_rows": first.rows,
        "incremental_entries": len(extra),
        "incremental_seconds": round(second.seconds, 2),
        "incremental_output_rows": second.rows,
        "work_dir": str(work),
    }
    if args.json:
        print(json.dumps(results))
    else:
        for key, value in results.items():
            print(f"{key:32} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
