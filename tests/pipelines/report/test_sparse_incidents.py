"""The incidents ``report --tables`` gives (a :class:`~jbod_model.report.SparseIncidentTracker` over the tables the
job's own operator writes) against a :class:`~jbod_model.report.ReportTracker` replaying the same records, on the
cases the generated logs of the hypothesis property rarely reach: a directory failure that ends by the broker
returning with the disk, and one whose replica already left the failed disk in the failure's own batch — which the
tracker dates by the next record on the partition (here one that changes nothing but the partition epoch), so the
sparse tracker must follow it from the failure's batch on although nothing about it changes later."""

from __future__ import annotations

import itertools
import weakref
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from report_support import batches, register
from test_quality_support import write_lakehouse

from jbod_model.records.metadata import (
    NO_LEADER,
    BrokerRegistrationChangeRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)
from jbod_model.report import (
    NEVER,
    FirstSeen,
    FollowAsks,
    HostedChange,
    IncidentKind,
    PartitionKey,
    ReportHistory,
    ReportTracker,
    Resolution,
)
from jbod_model.uuid import Uuid
from pipelines.lakehouse import tables as lakehouse_tables
from pipelines.lakehouse.tables import metadata_image
from pipelines.report import load
from pipelines.report.load import TablePartitions, load_from_tables, replica_spans

A1, A2, B1, B2 = (Uuid.from_bytes(bytes([0x40 + i]) * 16) for i in range(4))
ORDERS = Uuid.from_string("YNY5hm01SZ-bAGeCLAGqWA")
OTHER = Uuid.from_bytes(bytes([0x77]) * 16)


#: Offsets 0-6: two brokers with two disks each; orders-0 [1,2] on A1/B1 (leader 1), orders-1 [2,1] on B2/A1,
#: orders-2 [1] on A1 alone.
PRELUDE: list[tuple[int, list[Record]]] = [
    (0, [FeatureLevelRecord(name="metadata.version", feature_level=21)]),
    (1, [register(1, 1, (A1, A2)), register(2, 2, (B1, B2))]),
    (2, [TopicRecord(name="orders", topic_id=ORDERS),
         PartitionRecord(version=1, topic_id=ORDERS, partition_id=0, replicas=(1, 2), isr=(1, 2), leader=1,
                         directories=(A1, B1)),
         PartitionRecord(version=1, topic_id=ORDERS, partition_id=1, replicas=(2, 1), isr=(2, 1), leader=2,
                         directories=(B2, A1)),
         PartitionRecord(version=1, topic_id=ORDERS, partition_id=2, replicas=(1,), isr=(1,), leader=1,
                         directories=(A1,))]),
]
RECOVERY: list[tuple[int, list[Record]]] = [
    (300, [register(1, 20, (A1, A2), fenced=True)]),  # the broker restarts with the disk back
    (310, [BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=20, fenced=-1)]),  # unfenced
    (330, [PartitionChangeRecord(topic_id=ORDERS, partition_id=2, leader=1),
           PartitionChangeRecord(topic_id=ORDERS, partition_id=0, isr=(2, 1)),
           PartitionChangeRecord(topic_id=ORDERS, partition_id=1, isr=(2, 1))]),
]


def _both(tables: Path, groups: list[tuple[int, list[Record]]]) -> tuple[ReportHistory, ReportHistory]:
    entries = batches(*groups)
    write_lakehouse(tables, "c", entries, batch_size=3)
    got, _ = load_from_tables(tables, "c")
    tracker = ReportTracker()
    tracker.feed_all(entries)
    assert got.history is not None
    return got.history, tracker.history()


def test_a_directory_failure_that_ends_with_the_disk_back(tmp_path: Path) -> None:
    failure = (60, [  # what handleDirectoriesOffline writes for A1, in one batch
        PartitionChangeRecord(topic_id=ORDERS, partition_id=0, isr=(2,), leader=2),
        PartitionChangeRecord(topic_id=ORDERS, partition_id=1, isr=(2,)),
        PartitionChangeRecord(topic_id=ORDERS, partition_id=2, leader=NO_LEADER),
        BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=1, log_dirs=(A2,)),
    ])
    got, want = _both(tmp_path, [*PRELUDE, failure, *RECOVERY])
    assert got == want
    incident = next(i for i in want.incidents if i.kind is IncidentKind.DIRECTORY_FAILURE)
    assert incident.resolution is Resolution.DIRECTORY_RETURNED and len(incident.partitions) == 3


def test_a_replica_moved_off_the_disk_in_the_failure_batch_is_dated_by_its_next_record(tmp_path: Path) -> None:
    moved_first = (60, [  # offsets 7-9: orders-2's only replica leaves A1 in the failure's own batch
        PartitionChangeRecord(topic_id=ORDERS, partition_id=0, isr=(2,), leader=2),
        PartitionChangeRecord(topic_id=ORDERS, partition_id=2, directories=(A2,)),
        BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=1, log_dirs=(A2,)),
    ])
    # Offset 10: a batch that does not touch orders-2 (its version from the failure's batch lasts past it, yet no
    # follow-up looks at it there); offset 11: a record on it that changes only the partition epoch.
    elsewhere = (75, [PartitionChangeRecord(topic_id=ORDERS, partition_id=1)])
    untouched = (90, [PartitionChangeRecord(topic_id=ORDERS, partition_id=2)])
    got, want = _both(tmp_path, [*PRELUDE, moved_first, elsewhere, untouched, *RECOVERY])
    assert got == want
    incident = next(i for i in want.incidents if i.kind is IncidentKind.DIRECTORY_FAILURE)
    assert incident.directory == A1
    moved = {p.partition.partition_id: p.moved for p in incident.partitions}
    assert moved[2] is not None and moved[2].offset == 11  # dated by that record, not by the batch before it


def test_a_partition_two_incidents_follow_is_looked_at_for_each(tmp_path: Path) -> None:
    """Broker 1's disk A1 fails in the batch that fences broker 2 (offsets 7-9): orders-0 is followed for both
    incidents. Broker 2's follow-up ends first (back, 10; in the ISR again, 11); broker 1's replica of orders-0 leaves
    A1 only later (12) — where the sparse tracker must still look, though its look at 11 was for the other incident."""
    failure = (60, [PartitionChangeRecord(topic_id=ORDERS, partition_id=0, isr=(1,)),
                    FenceBrokerRecord(id=2, epoch=2),
                    BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=1, log_dirs=(A2,))])
    later = [(70, [UnfenceBrokerRecord(id=2, epoch=2)]),
             (80, [PartitionChangeRecord(topic_id=ORDERS, partition_id=0, isr=(1, 2))]),
             (90, [PartitionChangeRecord(topic_id=ORDERS, partition_id=0, directories=(A2, B1))])]
    got, want = _both(tmp_path, [*PRELUDE, failure, *later])
    assert got == want
    incident = next(i for i in want.incidents if i.kind is IncidentKind.DIRECTORY_FAILURE)
    moved = {p.partition.partition_id: p.moved for p in incident.partitions}
    assert moved[0] is not None and moved[0].offset == 12


@pytest.mark.parametrize("radix", [True, False], ids=["radix", "comparison sort"])
def test_the_partitions_read_from_the_tables_are_the_image_at_every_offset(tmp_path: Path, radix: bool,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """What :class:`TablePartitions` gives the sparse tracker (where the followed partitions first show what a
    follow-up learns, and each broker's hosted replicas, as columns) is what the tables' image at each offset
    gives — with each broker's replicas grouped by a radix sort of the broker ids, and by a comparison sort where
    the ids span too much for one."""
    if not radix:
        monkeypatch.setattr(load, "_RADIX_SPAN", 1)
    failure = (60, [
        PartitionChangeRecord(topic_id=ORDERS, partition_id=0, isr=(2,), leader=2),
        PartitionChangeRecord(topic_id=ORDERS, partition_id=2, directories=(A2,)),
        BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=1, log_dirs=(A2,)),
    ])
    leaves = (400, [PartitionChangeRecord(topic_id=ORDERS, partition_id=0, replicas=(2,), isr=(2,), leader=2,
                                          directories=(B1,))])  # broker 1's replica of orders-0 goes
    # A second topic, created and changed, then deleted (its partition ends with no record naming it).
    other = [(410, [TopicRecord(name="other", topic_id=OTHER),
                    PartitionRecord(version=1, topic_id=OTHER, partition_id=0, replicas=(1,), isr=(1,), leader=1,
                                    directories=(A2,))]),
             (420, [PartitionChangeRecord(topic_id=OTHER, partition_id=0, leader=NO_LEADER, isr=(1,))]),
             (430, [RemoveTopicRecord(topic_id=OTHER)])]
    entries = batches(*PRELUDE, failure, *RECOVERY, leaves, *other)
    write_lakehouse(tmp_path, "c", entries, batch_size=3)
    last = entries[-1].offset
    partitions = TablePartitions(tmp_path, "c", last, None)
    # Every partition (and one never created) with every broker, a replica of it or not: the follow-ups' columns.
    pairs = [((topic, p), b) for topic in (ORDERS, OTHER) for p in range(4 if topic == ORDERS else 1)
             for b in (1, 2, 3)]
    images = {}
    for offset in range(last + 1):
        image = metadata_image(tmp_path, "c", offset)
        images[offset] = {(t.id, p): (t.name, part) for t, p, part in image.topics.partitions()}
    # Where a follow-up first sees each thing (``first_seen``): the state after each batch, as the image at its end
    # gives it — for every pair, with every failed directory, from every offset, with the batches ending at every
    # offset and at every third (a state replaced inside a batch is never seen).
    # Asked by key alone, and with the store's own numbers that ``hosted_change`` handed out (every other ask; the
    # rest by key, as the base image's incidents are).
    asks = [(pk, b, directory) for (pk, b) in pairs for directory in (None, A1, A2, B1)]
    handed: dict[PartitionKey, int] = {}
    for before, broker in itertools.product(range(last), (1, 2, 3)):
        change = partitions.hosted_change(broker, before, before + 1, frozenset({A1, A2, B1, B2}))
        handed.update(zip(change.keys, change.handles, strict=True))
    assert {pk for pk, _ in pairs} - handed.keys() == {(ORDERS, 3)}  # never created
    for ends in (list(range(last + 1)), list(range(2, last + 1, 3))):
        for after in range(last + 1):
            for handles in ((), [handed.get(pk, -1) if i % 2 else -1 for i, (pk, _, _) in enumerate(asks)]):
                wanted = FollowAsks([pk for pk, _, _ in asks], [b for _, b, _ in asks], [d for _, _, d in asks],
                                    [after] * len(asks), handles)
                assert partitions.first_seen(wanted, ends) == FirstSeen.of_states(
                    wanted, ends, lambda pk, offset: None if pk not in images[offset] else images[offset][pk][1]), after
    # What a broker change reads as columns (``hosted_change``) is what the registrations give, between any two
    # offsets, with any directories failing: the broker's partitions that changed in between or sit in one of them.
    for before, after in itertools.combinations(range(last + 1), 2):
        then, now = images[before], images[after]
        for broker, failing in itertools.product((1, 2), (frozenset(), frozenset({A1}), frozenset({A2, B1}))):
            hosted = {pk: state for pk, state in then.items() if broker in state[1].replicas}
            hit = {pk: state for pk, state in hosted.items()
                   if now.get(pk) != state or state[1].directory(broker) in failing}
            assert partitions.hosted_change(broker, before, after, failing) == HostedChange.of_registrations(
                broker, len(hosted), hit, now)


#: A broker's replica intervals as chains: the broker, a start, the lengths of intervals that follow one another (a
#: partition's versions that keep the replica), and whether the last one is open.
_CHAINS = st.lists(st.tuples(st.sampled_from([1, 2, 7]), st.integers(0, 30),
                             st.lists(st.integers(0, 6), min_size=1, max_size=4), st.booleans()), max_size=12)


@given(_CHAINS)
@example([(1, 0, [5], False), (2, 5, [4], False)])  # one broker's last end is the next one's first start
@example([(1, 20, [3, 3], True), (1, 0, [4], False), (1, 10, [2], False)])  # a broker's starts out of order
def test_a_brokers_replicas_counted_from_its_spans_are_its_intervals_at_every_offset(
        chains: list[tuple[int, int, list[int], bool]]) -> None:
    """What :func:`replica_spans` gives ``hosted_change`` to count a broker's replicas with — its spans' starts and
    ends, sorted, the chained intervals joined — counts, at every offset, the broker's intervals that hold it: with
    the intervals grouped by broker in any order within a broker, one broker's last end equal to the next one's
    first start, and open intervals."""
    intervals: list[tuple[int, int, int]] = []
    for broker, first, lengths, open_ended in chains:
        start = first
        for i, length in enumerate(lengths):
            end = NEVER if open_ended and i == len(lengths) - 1 else start + length
            intervals.append((broker, start, end))
            start = end
    intervals.sort(key=lambda x: x[0])  # grouped by broker; stable: each broker's in the order drawn
    brokers, starts, ends = (np.array([x[k] for x in intervals], np.int64) for k in range(3))
    span_starts, span_ends, ranges = replica_spans(brokers, starts, ends)
    assert set(ranges) == {b for b, _, _ in intervals}
    for broker in (1, 2, 7):
        lo, hi = ranges.get(broker, (0, 0))
        for t in range(60):
            counted = (int(np.searchsorted(span_starts[lo:hi], t, "right"))
                       - int(np.searchsorted(span_ends[lo:hi], t, "right")))
            assert counted == sum(b == broker and s <= t < e for b, s, e in intervals), (broker, t)


def test_the_c_heap_is_trimmed_once_the_partitions_versions_are_let_go(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """glibc keeps the C memory freed with the partitions' versions (numpy's arrays) resident, about 100 MB at 200 k
    partitions, and the next read grew on top of it (the report's peak): the report hands it back
    (``malloc_trim``) once they are gone, before the offline intervals are read."""
    made: list[weakref.ref[TablePartitions]] = []
    init = TablePartitions.__init__

    def tracked(self: TablePartitions, *args: object) -> None:
        init(self, *args)  # type: ignore[arg-type]
        made.append(weakref.ref(self))

    read: list[bool] = []
    spans = load.offline_spans

    def reading(*args: object) -> object:
        read.append(True)
        return spans(*args)  # type: ignore[arg-type]

    trims: list[bool] = []  # at each trim: whether the versions were let go and the offline intervals not read yet
    monkeypatch.setattr(TablePartitions, "__init__", tracked)
    monkeypatch.setattr(load, "offline_spans", reading)
    monkeypatch.setattr(lakehouse_tables, "_MALLOC_TRIM",
                        lambda pad: trims.append(pad == 0 and bool(made) and made[0]() is None and not read))
    got, want = _both(tmp_path, [*PRELUDE, *RECOVERY])
    assert got == want and read
    assert any(trims)
