"""What one batch costs :class:`jbod_model.invariants.InvariantTracker` while 100k+ placements are pending (a
benchmark, not a test).

The cluster: ``B`` brokers with two log directories each and ``N`` partitions of replication factor 3 created at
metadata.version 3.6-IV2 (no directories), then the upgrade to 3.7-IV2 and every broker re-registering with its
directories (``BrokerRegistrationTracker``). From there every replica is MIGRATING on an unfenced broker: pending
(I12) until its broker sends AssignReplicasToDirs — ``3·N`` pending placements at once. The tracker starts from that
image, then is fed batches, kind after kind (median ms per batch):

* ``assign`` — one AssignReplicasToDirs outcome: PartitionChangeRecords giving 3 partitions' replicas a directory;
* ``isr`` — one ISR shrink (AlterPartition) on one partition;
* ``noop`` — a NoOpRecord batch (most batches of a real log);
* ``delete`` — a topic deletion (RemoveTopicRecord of a topic of 20 partitions);
* ``broker`` — a new broker registering (one batch): broker state changed, so the tracker rescans every partition
  (and runs every image check) — not a batch that touches a few partitions, shown for scale.

``--baseline FILE`` also times another version of ``jbod_model/invariants.py`` on the same batches, e.g. the one
before pending placements were indexed: ``git show <rev>:jbod_model/invariants.py > /tmp/old_invariants.py``.

Run: ``python benchmarks/tracker_benchmark.py [--partitions 35000] [--brokers 30] [--batches 200]
[--baseline /tmp/old_invariants.py] [--json]`` (seconds; with the baseline below, about 25 minutes: its full rescans
are quadratic).

Measured on this project's 2-core box (shared with other work at the time, so the absolute numbers are a little
pessimistic): ``--partitions 35000 --batches 200``, i.e. 105,000 pending placements, median ms per batch. Before:
the tracker as of commit 6a5589e (every touched partition and every deleted topic scanned all pending placements,
and every batch looked at every clock for I12); after: placements indexed by topic and partition, overdue clocks
popped from deadline heaps.

=============================  ============  ==========
batch                          before (ms)   after (ms)
=============================  ============  ==========
assign (3 partitions)                 89.7        0.24
isr (1 partition)                     40.7        0.10
noop                                  18.6        0.01
delete (a topic, 20 parts)            45.6        0.09
broker (full rescan)               566,242         591
building the tracker (full)        394,887         456
=============================  ============  ==========

The last two rows are full rescans: before, one cost O(partitions × pending) — each partition scanned every pending
placement — now O(partitions + pending).
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from jbod_model import invariants
from jbod_model.image import MetadataImage
from jbod_model.metadata_version import FEATURE_NAME
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import (
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    FeatureLevelRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from jbod_model.replay import replay_records
from jbod_model.uuid import Uuid

RF = 3
PARTITIONS_PER_TOPIC = 20
START_TS = 1_700_000_000_000
KINDS = ("assign", "isr", "noop", "delete", "broker")


def _dirs(broker: int) -> tuple[Uuid, Uuid]:
    return Uuid(0x1000 + broker, 1), Uuid(0x1000 + broker, 2)


def upgraded_cluster(brokers: int, partitions: int) -> tuple[MetadataImage, list[Uuid]]:
    """The image after the upgrade to 3.7-IV2 (see the module docstring) and the topic ids."""
    records: list[Record] = [FeatureLevelRecord(name=FEATURE_NAME, feature_level=14)]
    for b in range(1, brokers + 1):
        ep = (BrokerEndpoint(name="PLAINTEXT", host=f"broker-{b}", port=9092, security_protocol=0),)
        records.append(RegisterBrokerRecord(version=2, broker_id=b, broker_epoch=100 + b, incarnation_id=Uuid(7, b),
                                            end_points=ep, fenced=True))
        records.append(BrokerRegistrationChangeRecord(broker_id=b, broker_epoch=100 + b, fenced=-1))
    topics = []
    for t in range(partitions // PARTITIONS_PER_TOPIC):
        tid = Uuid(0x2000 + t, 0x3000 + t)
        topics.append(tid)
        records.append(TopicRecord(name=f"topic-{t}", topic_id=tid))
        for p in range(PARTITIONS_PER_TOPIC):
            first = (t * PARTITIONS_PER_TOPIC + p) % brokers
            replicas = tuple((first + i) % brokers + 1 for i in range(RF))
            records.append(PartitionRecord(version=0, topic_id=tid, partition_id=p, replicas=replicas,
                                           isr=replicas, leader=replicas[0], leader_epoch=0, partition_epoch=0))
    records.append(FeatureLevelRecord(name=FEATURE_NAME, feature_level=17))
    for b in range(1, brokers + 1):
        # BrokerRegistrationTracker: the same incarnation and epoch, now with its directories (KAFKA-16757/16952).
        ep = (BrokerEndpoint(name="PLAINTEXT", host=f"broker-{b}", port=9092, security_protocol=0),)
        records.append(RegisterBrokerRecord(version=3, broker_id=b, broker_epoch=100 + b, incarnation_id=Uuid(7, b),
                                            end_points=ep, fenced=False, log_dirs=_dirs(b)))
    return replay_records(records), topics


def batches(kind: str, image: MetadataImage, topics: list[Uuid], count: int, first_offset: int,
            brokers: int) -> list[list[LogEntry]]:
    """``count`` batches of one kind, at consecutive offsets from ``first_offset``, each touching other partitions
    (so every batch really changes something)."""
    out: list[list[LogEntry]] = []
    offset = first_offset
    for i in range(count):
        records: list[Record]
        if kind == "assign":
            records = []
            for j in range(3):
                n = 3 * i + j
                tid, pid = topics[n // PARTITIONS_PER_TOPIC], n % PARTITIONS_PER_TOPIC
                part = image.topics.get_partition(tid, pid)
                assert part is not None
                records.append(PartitionChangeRecord(version=1, topic_id=tid, partition_id=pid,
                                                     directories=tuple(_dirs(b)[n % 2] for b in part.replicas)))
        elif kind == "isr":
            tid, pid = topics[-1 - i // PARTITIONS_PER_TOPIC], i % PARTITIONS_PER_TOPIC
            part = image.topics.get_partition(tid, pid)
            assert part is not None
            records = [PartitionChangeRecord(version=1, topic_id=tid, partition_id=pid, isr=part.isr[:2])]
        elif kind == "noop":
            records = [NoOpRecord()]
        elif kind == "delete":
            records = [RemoveTopicRecord(topic_id=topics[len(topics) // 2 + i])]
        else:
            b = brokers + 1 + i
            ep = (BrokerEndpoint(name="PLAINTEXT", host=f"broker-{b}", port=9092, security_protocol=0),)
            records = [RegisterBrokerRecord(version=3, broker_id=b, broker_epoch=offset, incarnation_id=Uuid(7, b),
                                            end_points=ep, fenced=True, log_dirs=_dirs(b))]
        out.append([LogEntry(offset=offset + k, record=r, batch_base_offset=offset, timestamp=START_TS + offset)
                    for k, r in enumerate(records)])
        offset += len(records)
    return out


def load_invariants(path: Path) -> ModuleType:
    """Another version of ``jbod_model/invariants.py``, importable beside the current one."""
    spec = importlib.util.spec_from_file_location("baseline_invariants", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file executes
    spec.loader.exec_module(module)
    return module


def measure(module: ModuleType, image: MetadataImage, topics: list[Uuid], count: int,
            brokers: int) -> dict[str, Any]:
    """Build one tracker from ``image``, then time ``feed_batch`` per batch, kind after kind (the kinds touch
    different partitions, so every batch was made for the image it meets)."""
    gc.collect()
    started = time.perf_counter()
    tracker = module.InvariantTracker(image)
    out: dict[str, Any] = {"build_s": round(time.perf_counter() - started, 3),
                           "pending": len(tracker.pending_placements())}
    offset = image.last_offset + 1
    for kind in KINDS:
        times = []
        for batch in batches(kind, image, topics, count if kind != "broker" else 1, offset, brokers):
            started = time.perf_counter()
            tracker.feed_batch(batch)
            times.append(time.perf_counter() - started)
            offset = batch[-1].offset + 1
        out[kind] = round(1000 * statistics.median(times), 3)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=35_000)
    parser.add_argument("--brokers", type=int, default=30)
    parser.add_argument("--batches", type=int, default=200, help="batches measured per kind")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="another jbod_model/invariants.py to time on the same batches")
    parser.add_argument("--json", action="store_true", help="print the results as JSON only")
    args = parser.parse_args(argv)
    count = min(args.batches, args.partitions // PARTITIONS_PER_TOPIC // 2, args.partitions // 3 // 2)

    started = time.perf_counter()
    image, topics = upgraded_cluster(args.brokers, args.partitions)
    setup = time.perf_counter() - started
    results = {"partitions": args.partitions, "brokers": args.brokers, "batches_per_kind": count,
               "setup_s": round(setup, 1), "current": measure(invariants, image, topics, count, args.brokers)}
    if args.baseline is not None:
        results["baseline"] = measure(load_invariants(args.baseline), image, topics, count, args.brokers)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"{args.partitions:,} partitions on {args.brokers} brokers after the upgrade to 3.7-IV2: "
          f"{results['current']['pending']:,} pending placements (image built in {setup:.1f} s); "
          f"{count} batches per kind, median ms per batch")
    columns = ["current"] + (["baseline"] if "baseline" in results else [])
    print(f"{'batch':<8}" + "".join(f"{c:>12}" for c in columns))
    for kind in KINDS:
        print(f"{kind:<8}" + "".join(f"{results[c][kind]:>12.3f}" for c in columns))
    print(f"{'build s':<8}" + "".join(f"{results[c]['build_s']:>12.3f}" for c in columns))
    return 0


if __name__ == "__main__":
    sys.exit(main())
