"""CPU of the Spark job's source without Spark: what a reading task spends on a benchmark cluster's log (a benchmark,
not a test).

Two numbers, each the best of ``--repeat`` passes in this process:

* ``decode_cpu_seconds``: the log decoded into entries alone (``MetadataLog.log_entries``), what every command that
  reads a log pays (``jbod image --full-log``, the report over a log dir);
* ``source_cpu_seconds``: the source's whole work — ``read_range`` over the log in the job's micro-batch ranges,
  every record's input row (its JSON, its bucket) and each bucket's packets written as files, exactly as a reading
  task makes them (``pipelines.streaming.source.range_packets``), the collector paused as the task pauses it.

The source's tasks are a stage of their own before each micro-batch's operator stage (docs/state-design.md, "A full
run's stages"), so their CPU is on the run's path twice over on two cores. Compare two checkouts by running this
file with ``PYTHONPATH=<checkout>``::

    python benchmarks/source_benchmark.py [--partitions 200011] [--metadata-version 4.0-IV0] [--buckets 4]
                                          [--batch 500000] [--repeat 2]
"""

from __future__ import annotations

import argparse
import itertools
import json
import tempfile
import time

from clusters import benchmark_cluster  # beside this script (run as a script, like every benchmark)

from jbod_model.slots import gc_paused
from jbod_model.storage.metadata_dir import MetadataLog
from pipelines.streaming.source import discover, range_packets


def _decode(log_dir: str) -> tuple[float, int, int]:
    """CPU seconds, entries, the offset after the last."""
    start = time.process_time()
    count, last = 0, -1
    with gc_paused():
        for entry in MetadataLog.open([log_dir]).log_entries():
            count, last = count + 1, entry.offset
    return time.process_time() - start, count, last + 1


def _source(log_dir: str, end_offset: int, buckets: int, batch: int) -> tuple[float, int]:
    cluster = discover([log_dir])[0]
    # The job's ranges: a first one from the log's start ("next" -1), then one per micro-batch of ``batch`` offsets.
    cuts = [-1, *range(batch, end_offset, batch), end_offset]
    packets = 0
    with tempfile.TemporaryDirectory(prefix="source-benchmark-") as parts:
        start = time.process_time()
        for first, end in itertools.pairwise(cuts):
            packets += sum(1 for _ in range_packets(cluster, {"next": first, "snap": -1}, {"next": end, "snap": -1},
                                                    final=end == cuts[-1], buckets=buckets, key_partitions=2,
                                                    parts_root=parts))
        return time.process_time() - start, packets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=200_011)
    parser.add_argument("--metadata-version", help="the cluster's log at this metadata.version (clusters.py)")
    parser.add_argument("--buckets", type=int, default=4)
    parser.add_argument("--batch", type=int, default=500_000, help="entries per micro-batch (the job's cap)")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    cluster = benchmark_cluster(args.partitions, metadata_version=args.metadata_version)
    log_dir = str(cluster.root / "metadata")
    decode, records, end_offset = min(_decode(log_dir) for _ in range(args.repeat))
    source, packets = min(_source(log_dir, end_offset, args.buckets, args.batch) for _ in range(args.repeat))
    print(json.dumps({"cluster": cluster.shape.key, "metadata_version": args.metadata_version, "records": records,
                      "decode_cpu_seconds": round(decode, 2), "decode_us_per_record": round(decode / records * 1e6, 2),
                      "source_cpu_seconds": round(source, 2), "source_us_per_record": round(source / records * 1e6, 2),
                      "buckets": args.buckets, "batch": args.batch, "packets": packets}, indent=2))


if __name__ == "__main__":
    main()
