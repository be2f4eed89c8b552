"""Scale of the cluster simulator: a large KRaft cluster written as a real metadata log (a benchmark, not a test).

Simulates ``--brokers`` brokers × ``--dirs`` log dirs (default 300 × 8) and ``--partitions`` partitions (default
2,000,000, about 1000 per topic, RF 3): the brokers register and unfence, CreateTopics requests create the
partitions 20,000 at a time, every broker places its new replicas in its least-loaded dir and reports them with
batched AssignReplicasToDirs (≤ 2250 per request), and the cluster settles. Everything goes straight to disk through
``OutputWriter`` as it is committed — rolled segments, stream.jsonl (the requests), optionally records.jsonl — and a
snapshot of the final image is streamed at the end; no record is kept in memory. What does stay in memory is the
cluster's state: the controller's metadata image and each broker's log placement (it grows with the partition
count, not with the log's length).

Measured: wall time per phase, peak RSS (``ru_maxrss``), bytes of the log, the snapshot and the JSONL, record and
request counts. ``--verify`` re-reads every segment and the snapshot and counts their records.

Run: ``python benchmarks/simulate_large.py [--brokers 300 --dirs 8 --partitions 2000000] [--out DIR] [--keep]``.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

from jbod_model.simulator.cluster import Simulation
from jbod_model.simulator.config import SimulationConfig
from jbod_model.simulator.generator import sized_run
from jbod_model.simulator.output import OutputWriter
from jbod_model.storage.log_reader import ReadReport, iter_decoded


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def count_records(paths: list[Path]) -> tuple[int, int]:
    """(data records, control records) in the given files, decoding every batch (CRC checked)."""
    report = ReadReport()
    for path in paths:
        for _batch in iter_decoded(path, report=report):
            pass
    return report.records, report.control_records


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", type=int, default=300)
    parser.add_argument("--dirs", type=int, default=8)
    parser.add_argument("--partitions", type=int, default=2_000_000)
    parser.add_argument("--topics", type=int, default=0, help="default: about 1000 partitions per topic")
    parser.add_argument("--rf", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--partitions-per-request", type=int, default=20_000)
    parser.add_argument("--segment-mb", type=int, default=256, help="roll segments at this size (Kafka: 1024)")
    parser.add_argument("--records-jsonl", action="store_true", help="also write records.jsonl (large)")
    parser.add_argument("--out", type=Path, default=None, help="output directory (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary output directory")
    parser.add_argument("--verify", action="store_true", help="re-read the segments and the snapshot afterwards")
    args = parser.parse_args()

    out = args.out if args.out is not None else Path(tempfile.mkdtemp(prefix="simulate-large-"))
    config = SimulationConfig.uniform(brokers=args.brokers, dirs=args.dirs, monitor=False)
    writer = OutputWriter(out, config, segment_bytes=args.segment_mb * 1024 * 1024,
                          write_records_jsonl=args.records_jsonl)
    started = time.perf_counter()
    last = [started]

    def progress(sim: Simulation, created: int) -> None:
        now = time.perf_counter()
        if now - last[0] >= 30 or created >= args.partitions:
            last[0] = now
            print(f"  {created:>9,} partitions created  {now - started:7.1f} s  simulated {sim.now_ms / 1000:7.1f} s  "
                  f"log {writer.log_bytes / 1e6:8.1f} MB  peak RSS {peak_rss_mb():7.0f} MB", file=sys.stderr,
                  flush=True)

    print(f"simulating {args.brokers} brokers × {args.dirs} dirs, {args.partitions:,} partitions (RF {args.rf}) "
          f"into {out}", file=sys.stderr)
    sim = sized_run(brokers=args.brokers, dirs=args.dirs, partitions=args.partitions, topics=args.topics,
                    replication_factor=args.rf, seed=args.seed, sink=writer, config=config, monitor=False,
                    partitions_per_request=args.partitions_per_request, progress=progress)
    simulated = time.perf_counter()
    result = sim.result(checks=False)
    paths = writer.finish(result)
    finished = time.perf_counter()

    size = lambda p: p.stat().st_size if p is not None and p.exists() else 0  # noqa: E731
    summary = {
        "brokers": args.brokers, "dirs": args.dirs, "partitions": args.partitions, "rf": args.rf,
        "topics": len(result.image.topics.by_id), "simulatedSeconds": result.end_time_ms / 1000,
        "wallSeconds": {"simulate": round(simulated - started, 1), "snapshotAndFiles": round(finished - simulated, 1),
                        "total": round(finished - started, 1)},
        "peakRssMB": round(peak_rss_mb()),
        "records": writer.records, "batches": writer.batches, "recordsPerSecond": round(
            writer.records / (simulated - started)),
        "requests": result.stats.requests, "recordTypes": result.stats.records,
        "logBytes": writer.log_bytes, "segments": len(paths.segments), "snapshotBytes": size(paths.snapshot),
        "streamJsonlBytes": size(paths.stream), "recordsJsonlBytes": size(paths.records) if args.records_jsonl else 0,
        "events": result.stats.events, "quiescent": result.quiescent, "out": str(out),
    }
    if args.verify:
        began = time.perf_counter()
        records, controls = count_records(list(paths.segments))
        snapshot_records, _ = count_records([paths.snapshot]) if paths.snapshot is not None else (0, 0)
        summary["verify"] = {"logRecords": records, "controlRecords": controls, "snapshotRecords": snapshot_records,
                             "seconds": round(time.perf_counter() - began, 1),
                             "ok": records == writer.records and controls == 1}
    print(json.dumps(summary, indent=2))
    if args.out is None and not args.keep:
        shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
