"""The history half of :class:`jbod_model.invariants.InvariantTracker` (I12 pending placements) against a brute-force
reference that rescans the whole image after every batch.

The tracker updates its pending placements incrementally — only the partitions a batch touches, the topics it
deletes, or everything when brokers or the metadata.version change — and finds overdue clocks from deadline heaps
instead of looking at every clock. The reference does none of that: after each batch it recomputes the set of
pending placements from the image with :func:`replica_pending_placement`, keeps a clock per placement (started at the
batch that first showed it pending), and calls overdue every unreported clock past a bound. Both must agree after
every batch on: which replicas are pending, in which directory, since which offset and time; which I12 warnings a
batch raises; and their order (the order the placements became pending, i.e. by non-decreasing start offset).

Streams: simulator scenarios and random runs at 3.7-IV2 (placements pending until AssignReplicasToDirs, an upgrade that
turns every replica MIGRATING, deletions, fencing) and hypothesis' ``valid_streams``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import pytest
from hypothesis import given
from test_replay_properties import SETTINGS, Stream, valid_streams

from jbod_model.directory_id import UNASSIGNED
from jbod_model.image import MetadataImage
from jbod_model.invariants import InvariantTracker, replica_pending_placement
from jbod_model.metadata_version import FEATURE_NAME
from jbod_model.records.entry import LogEntry, group_batches
from jbod_model.records.metadata import (
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    FeatureLevelRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
    TopicRecord,
)
from jbod_model.simulator.generator import RandomRunSpec, random_run
from jbod_model.simulator.scenarios import run_scenario
from jbod_model.uuid import Uuid

Key = tuple[Uuid, int, int]
#: Small bounds, so that warnings are raised often; (offsets, ms).
BOUNDS: tuple[tuple[int | None, int | None], ...] = ((3, None), (None, 2_000), (4, 500), (0, None))


@dataclass
class _RefClock:
    directory: Uuid
    since_offset: int
    since_timestamp: int | None
    reported: bool = False


class _Reference:
    """I12 by brute force: every batch rescans every partition of the image."""

    def __init__(self, max_offsets: int | None, max_ms: int | None) -> None:
        self.max_offsets, self.max_ms = max_offsets, max_ms
        self.clocks: dict[Key, _RefClock] = {}

    def observe(self, image: MetadataImage, batch: Sequence[LogEntry]) -> list[Key]:
        """The clocks after ``batch`` (whose result is ``image``); returns the keys that became overdue."""
        now = batch[-1].offset
        now_ts = next((e.timestamp for e in reversed(batch) if e.timestamp is not None), None)
        mv = image.metadata_version
        pending: dict[Key, Uuid] = {}
        for topic, pid, part in image.topics.partitions():
            for b, d in zip(part.replicas, part.directories, strict=False):
                if replica_pending_placement(image.cluster.brokers.get(b), d, mv):
                    pending[(topic.id, pid, b)] = d
        for key in [k for k in self.clocks if k not in pending]:
            del self.clocks[key]
        for key, d in pending.items():
            clock = self.clocks.setdefault(key, _RefClock(d, now, now_ts))
            clock.directory = d
        overdue = []
        for key, clock in self.clocks.items():
            late = ((self.max_offsets is not None and now - clock.since_offset > self.max_offsets)
                    or (self.max_ms is not None and now_ts is not None and clock.since_timestamp is not None
                        and now_ts - clock.since_timestamp > self.max_ms))
            if late and not clock.reported:
                clock.reported = True
                overdue.append(key)
        return overdue


def assert_tracker_matches_reference(batches: Sequence[Sequence[LogEntry]], max_offsets: int | None,
                                     max_ms: int | None) -> int:
    """Feed both, compare after every batch; returns how many I12 warnings were compared (to show it is not
    vacuous)."""
    tracker = InvariantTracker(max_pending_offsets=max_offsets, max_pending_ms=max_ms)
    reference = _Reference(max_offsets, max_ms)
    warned = 0
    for batch in batches:
        got = [v for v in tracker.feed_batch(batch) if v.invariant == "I12"]
        want = reference.observe(tracker.image, batch)
        where = f"batch at offset {batch[0].offset}"
        assert [(p.topic_id, p.partition_id, p.broker_id, p.directory, p.since_offset, p.since_timestamp)
                for p in tracker.pending_placements()] == sorted(
            ((*k, c.directory, c.since_offset, c.since_timestamp) for k, c in reference.clocks.items()),
            key=lambda x: (str(x[0]), x[1], x[2])), where
        got_keys: list[Key] = []
        for v in got:
            assert v.topic_id is not None and v.partition_id is not None and v.broker_id is not None
            got_keys.append((v.topic_id, v.partition_id, v.broker_id))
        assert Counter(got_keys) == Counter(want), where
        starts = [reference.clocks[k].since_offset for k in got_keys]
        assert starts == sorted(starts), f"{where}: warnings in the order the placements became pending"
        assert all(v.directory == reference.clocks[k].directory and v.offset == batch[-1].offset
                   for v, k in zip(got, got_keys, strict=True)), where
        warned += len(got)
    return warned


@pytest.mark.parametrize("bounds", BOUNDS, ids=str)
def test_simulated_runs_agree_with_the_reference(bounds: tuple[int | None, int | None]) -> None:
    logs = [run_scenario(name).log for name in ("mv-upgrade-3.6-to-3.7", "zk-migration-migrating-dirs",
                                                "pending-assignment-dropped", "topic-recreated-while-dir-offline",
                                                "disk-failure-during-placement")]
    logs += [random_run(seed, RandomRunSpec(operations=12, metadata_version=17, heterogeneous=True)).log
             for seed in range(6)]
    warned = 0
    for log in logs:
        assert log is not None
        warned += assert_tracker_matches_reference(list(group_batches(log)), *bounds)
    assert warned > 0, "the bounds are small enough to raise warnings"


@SETTINGS
@given(stream=valid_streams())
def test_generated_streams_agree_with_the_reference(stream: Stream) -> None:
    offset = 0
    batches = []
    for records in stream.batches:
        batches.append([LogEntry(offset=offset + i, record=r, batch_base_offset=offset, timestamp=1000 * offset)
                        for i, r in enumerate(records)])
        offset += len(records)
    for bounds in BOUNDS:
        assert_tracker_matches_reference(batches, *bounds)


def test_a_placement_pending_again_gets_a_new_clock() -> None:
    """Replica 1 is pending (offset 6), placed (7), dropped and re-added UNASSIGNED by a reassignment (8, 9): the
    warning counts from 9, not from the first clock, whose deadline (offset 10) passes first."""
    ep = (BrokerEndpoint(name="PLAINTEXT", host="h", port=9092, security_protocol=0),)
    t, d1, d1b, d2 = Uuid(9, 9), Uuid(1, 101), Uuid(1, 102), Uuid(2, 201)
    records: list[Record] = [
        FeatureLevelRecord(name=FEATURE_NAME, feature_level=21),
        RegisterBrokerRecord(version=3, broker_id=1, broker_epoch=1, incarnation_id=Uuid(7, 1), end_points=ep,
                             log_dirs=(d1, d1b)),
        RegisterBrokerRecord(version=3, broker_id=2, broker_epoch=2, incarnation_id=Uuid(7, 2), end_points=ep,
                             log_dirs=(d2, Uuid(2, 202))),
        BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=1, fenced=-1),
        BrokerRegistrationChangeRecord(broker_id=2, broker_epoch=2, fenced=-1),
        TopicRecord(name="t", topic_id=t),
        PartitionRecord(version=1, topic_id=t, partition_id=0, replicas=(1, 2), isr=(1, 2), leader=1,
                        directories=(UNASSIGNED, d2)),
        PartitionChangeRecord(version=1, topic_id=t, partition_id=0, directories=(d1, d2)),
        PartitionChangeRecord(version=1, topic_id=t, partition_id=0, replicas=(2,), isr=(2,), leader=2,
                              directories=(d2,)),
        PartitionChangeRecord(version=1, topic_id=t, partition_id=0, replicas=(2, 1), directories=(d2, UNASSIGNED)),
        *[NoOpRecord() for _ in range(6)],
    ]
    batches = [[LogEntry(offset=i, record=r, batch_base_offset=i)] for i, r in enumerate(records)]
    assert assert_tracker_matches_reference(batches, 3, None) == 1
    tracker = InvariantTracker(max_pending_offsets=3)
    warnings = [v for b in batches for v in tracker.feed_batch(b) if v.invariant == "I12"]
    assert [(v.offset, v.broker_id) for v in warnings] == [(13, 1)] and "since offset 9 " in warnings[0].message
