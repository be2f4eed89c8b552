"""The incident rules over columns (:class:`~jbod_model.report.HostedChange`, what a
:class:`~jbod_model.report.SparseIncidentTracker` decides a broker change's incidents with) equal the
:class:`~jbod_model.report.IncidentTracker`'s own rules over registrations, on generated clusters: brokers with two
disks each, partitions with random replicas, directories, ISR, leader and ELR, then a batch that fences, unfences,
unregisters or re-registers brokers, or drops a disk from their registration, beside partition changes (the leader
moved away or lost, the ISR shrunk, a replica moved to another disk or off the broker), then batches that follow the
partitions up (changes, records that change nothing but the epoch, unfencing). The sparse tracker reads the states
from the images themselves (:class:`_Images`, a :class:`~jbod_model.report.PartitionHistory` whose columns are read
off the registrations by :meth:`HostedChange.of_registrations` and, for the follow-ups,
:meth:`FirstSeen.of_states`); ``tests/pipelines/report/test_sparse_incidents.py`` checks that the tables'
columns equal those."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from hypothesis import example, given, settings
from hypothesis import strategies as st
from report_support import batches, register
from test_replay_properties import SETTINGS

from jbod_model.image import MetadataImage, PartitionRegistration
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import (
    NO_LEADER,
    NO_LEADER_CHANGE,
    BrokerRegistrationChangeRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)
from jbod_model.replay import replay_entries
from jbod_model.report import (
    FirstSeen,
    FollowAsks,
    HostedChange,
    IncidentTracker,
    PartitionKey,
    SparseIncidentTracker,
)
from jbod_model.uuid import Uuid

BROKERS = (1, 2, 3)
DIRS = {b: (Uuid.from_bytes(bytes([16 * b + 1]) * 16), Uuid.from_bytes(bytes([16 * b + 2]) * 16)) for b in BROKERS}
TOPICS = (Uuid.from_bytes(bytes([0xA1]) * 16), Uuid.from_bytes(bytes([0xB2]) * 16))
BROKER_RECORDS = (RegisterBrokerRecord, BrokerRegistrationChangeRecord, FenceBrokerRecord, UnfenceBrokerRecord,
                  UnregisterBrokerRecord)


@st.composite
def _placement(draw: st.DrawFn, replicas: Sequence[int]) -> tuple[tuple[Uuid, ...], tuple[int, ...], int]:
    """Directories, ISR and leader for a replica set: the leader in the ISR, or none."""
    directories = tuple(DIRS[b][draw(st.integers(0, 1))] for b in replicas)
    isr = tuple(b for b in replicas if draw(st.booleans()))
    leader = draw(st.sampled_from(isr)) if isr and draw(st.integers(0, 4)) else NO_LEADER
    return directories, isr, leader


@st.composite
def _partition(draw: st.DrawFn, tid: Uuid, pid: int) -> PartitionRecord:
    replicas = tuple(draw(st.permutations(BROKERS))[:draw(st.integers(1, 3))])
    directories, isr, leader = draw(_placement(replicas))
    elr = tuple(b for b in replicas if b not in isr and draw(st.booleans()))
    return PartitionRecord(version=2, topic_id=tid, partition_id=pid, replicas=replicas, isr=isr, leader=leader,
                           directories=directories, eligible_leader_replicas=elr)


@st.composite
def _change(draw: st.DrawFn, tid: Uuid, pid: int, replicas: dict[PartitionKey, tuple[int, ...]]) -> Record:
    """A change of a partition (whose replicas are ``replicas``', kept up to date): its leader, ISR, a replica's
    disk or the replica set, or nothing but the epoch."""
    kind = draw(st.sampled_from(["leader", "isr", "disk", "move", "nothing"]))
    now = replicas[(tid, pid)]
    if kind == "nothing":
        return PartitionChangeRecord(topic_id=tid, partition_id=pid)
    if kind == "move":
        now = replicas[(tid, pid)] = tuple(draw(st.permutations(BROKERS))[:draw(st.integers(1, 3))])
        directories, isr, leader = draw(_placement(now))
        return PartitionChangeRecord(topic_id=tid, partition_id=pid, replicas=now, directories=directories,
                                     isr=isr, leader=leader)
    if kind == "leader":
        return PartitionChangeRecord(topic_id=tid, partition_id=pid, leader=draw(st.sampled_from((NO_LEADER, *now))))
    if kind == "isr":
        return PartitionChangeRecord(topic_id=tid, partition_id=pid, isr=tuple(b for b in now if draw(st.booleans())),
                                     leader=draw(st.sampled_from((NO_LEADER_CHANGE, NO_LEADER))))
    # "disk": the same replicas, each on one of its broker's disks.
    return PartitionChangeRecord(topic_id=tid, partition_id=pid,
                                 directories=tuple(DIRS[b][draw(st.integers(0, 1))] for b in now))


@st.composite
def _broker_record(draw: st.DrawFn, epochs: dict[int, int]) -> Record:
    """Fenced, unfenced, unregistered, re-registered with or without a disk, or a disk dropped (``epochs``: each
    registered broker's epoch, kept up to date)."""
    b = draw(st.sampled_from(BROKERS))
    epoch = epochs.get(b)
    kinds = ["fence", "fence-change", "unfence", "unfence-change", "unregister", "register", "drop-disk",
             "lose-disk-on-restart"] if epoch is not None else ["register", "lose-disk-on-restart"]
    kind = draw(st.sampled_from(kinds))
    if kind == "fence":
        return FenceBrokerRecord(id=b, epoch=epoch)
    if kind == "fence-change":
        return BrokerRegistrationChangeRecord(broker_id=b, broker_epoch=epoch, fenced=1)
    if kind == "unfence":
        return UnfenceBrokerRecord(id=b, epoch=epoch)
    if kind == "unfence-change":
        return BrokerRegistrationChangeRecord(broker_id=b, broker_epoch=epoch, fenced=-1)
    if kind == "unregister":
        del epochs[b]
        return UnregisterBrokerRecord(broker_id=b, broker_epoch=epoch)
    kept = DIRS[b] if kind == "register" else (DIRS[b][draw(st.integers(0, 1))],)
    if kind == "drop-disk":
        return BrokerRegistrationChangeRecord(broker_id=b, broker_epoch=epoch, log_dirs=kept)
    epochs[b] = max(epochs.values(), default=1) + 1
    return register(b, epochs[b], kept, fenced=draw(st.booleans()))


@st.composite
def logs(draw: st.DrawFn) -> list[LogEntry]:
    """A cluster, then batches of broker records and partition changes."""
    prelude: list[Record] = [FeatureLevelRecord(name="metadata.version", feature_level=21)]
    prelude += [register(b, 1, DIRS[b], fenced=draw(st.integers(0, 3)) == 0) for b in BROKERS]
    replicas: dict[PartitionKey, tuple[int, ...]] = {}
    for n, tid in enumerate(TOPICS):
        prelude.append(TopicRecord(name=f"t{n}", topic_id=tid))
        for pid in range(draw(st.integers(1, 4))):
            created = draw(_partition(tid, pid))
            prelude.append(created)
            replicas[(tid, pid)] = created.replicas
    groups: list[tuple[int, list[Record]]] = [(0, prelude)]
    epochs = dict.fromkeys(BROKERS, 1)
    for k in range(draw(st.integers(1, 4))):
        # Broker records and partition changes each in the order drawn (each names the epoch or replicas the ones
        # before it left), interleaved at random.
        brokers = [draw(_broker_record(epochs)) for _ in range(draw(st.integers(0, 2)))]
        changes: list[Record] = []
        for _ in range(draw(st.integers(0, 4))):
            if not replicas:
                break
            tid, pid = draw(st.sampled_from(sorted(replicas, key=lambda pk: (str(pk[0]), pk[1]))))
            if draw(st.integers(0, 7)) == 0:
                # The topic deleted: its partitions are gone (no change names them after this).
                changes.append(RemoveTopicRecord(topic_id=tid))
                replicas = {pk: r for pk, r in replicas.items() if pk[0] != tid}
            else:
                changes.append(draw(_change(tid, pid, replicas)))
        records: list[Record] = []
        while brokers or changes:
            records.append((brokers if brokers and (not changes or draw(st.booleans())) else changes).pop(0))
        groups.append((10 * (k + 1), records))
    return batches(*[(s, r) for s, r in groups if r])


class _Images:
    """A :class:`~jbod_model.report.PartitionHistory` over the image after each batch (the states at batch ends,
    all a tracker asks for), the columns of a broker change read off the registrations."""

    def __init__(self, start: MetadataImage, ends: Sequence[int], images: Sequence[MetadataImage],
                 entries: Sequence[Sequence[LogEntry]]) -> None:
        self._start, self._ends, self._images, self._entries = start, ends, images, entries

    def _at(self, offset: int) -> dict[PartitionKey, tuple[str, PartitionRegistration]]:
        image = self._start
        for end, later in zip(self._ends, self._images, strict=True):
            if end <= offset:
                image = later
        return {(t.id, p): (t.name, part) for t, p, part in image.topics.partitions()}

    def first_seen(self, asks: FollowAsks, ends: Sequence[int]) -> FirstSeen:
        # Exactly the states after each batch (the tables' versions inside a batch are never seen).
        return FirstSeen.of_states(asks, ends, lambda pk, offset: _state(self._at(offset), pk))

    def next_touches(self, keys: Iterable[PartitionKey], after: int) -> dict[PartitionKey, int]:
        out: dict[PartitionKey, int] = {}
        for pk in keys:
            for end, batch in zip(self._ends, self._entries, strict=True):
                if end > after and any(isinstance(e.record, PartitionChangeRecord | PartitionRecord) and (
                        e.record.topic_id, e.record.partition_id) == pk for e in batch):
                    out[pk] = end
                    break
        return out

    def hosted_change(self, broker_id: int, before: int, after: int, failing: frozenset[Uuid]) -> HostedChange:
        then, now = self._at(before), self._at(after)
        hosted = {pk: state for pk, state in then.items() if broker_id in state[1].replicas}
        hit = {pk: state for pk, state in hosted.items()
               if now.get(pk) != state or state[1].directory(broker_id) in failing}
        return HostedChange.of_registrations(broker_id, len(hosted), hit, now)


def _state(states: dict[PartitionKey, tuple[str, PartitionRegistration]],
           pk: PartitionKey) -> PartitionRegistration | None:
    state = states.get(pk)
    return None if state is None else state[1]


def _split(entries: Sequence[LogEntry]) -> list[list[LogEntry]]:
    out: list[list[LogEntry]] = []
    for e in entries:
        if out and out[-1][0].batch_base_offset == e.batch_base_offset:
            out[-1].append(e)
        else:
            out.append([e])
    return out


#: A replica moved off the broker in the batch that fences it (the incident finds it moved already), then its topic
#: deleted: the tracker dates the deletion though no record names the partition.
MOVED_THEN_DELETED = batches(
    (0, [FeatureLevelRecord(name="metadata.version", feature_level=21), register(1, 1, DIRS[1]),
         register(2, 1, DIRS[2]), TopicRecord(name="t0", topic_id=TOPICS[0]),
         PartitionRecord(version=2, topic_id=TOPICS[0], partition_id=0, replicas=(1,), isr=(1,), leader=1,
                         directories=(DIRS[1][0],))]),
    (10, [PartitionChangeRecord(topic_id=TOPICS[0], partition_id=0, replicas=(2,), isr=(2,), leader=2,
                                directories=(DIRS[2][0],)), FenceBrokerRecord(id=1, epoch=1)]),
    (20, [RemoveTopicRecord(topic_id=TOPICS[0])]))


#: Two disks fail at once, one on broker 1 (t0-0 and t1-0 on it), one on broker 3 (t1-1); then t1 is removed, then
#: t0. The replay sees broker 3's incident end first (its one partition goes with t1), the sparse tracker visits t0's
#: key first: which of the two a tracker keeping one closed incident forgets must not depend on that order.
CLOSED_IN_ONE_BATCH = batches(
    (0, [FeatureLevelRecord(name="metadata.version", feature_level=21), register(1, 1, DIRS[1], fenced=True),
         register(3, 1, DIRS[3], fenced=True), TopicRecord(name="t0", topic_id=TOPICS[0]),
         PartitionRecord(version=2, topic_id=TOPICS[0], partition_id=0, replicas=(1,), isr=(), leader=-1,
                         directories=(DIRS[1][0],)),
         TopicRecord(name="t1", topic_id=TOPICS[1]),
         PartitionRecord(version=2, topic_id=TOPICS[1], partition_id=0, replicas=(1,), isr=(), leader=-1,
                         directories=(DIRS[1][0],)),
         PartitionRecord(version=2, topic_id=TOPICS[1], partition_id=1, replicas=(3,), isr=(), leader=-1,
                         directories=(DIRS[3][0],))]),
    (10, [register(1, 2, (DIRS[1][1],)),
          BrokerRegistrationChangeRecord(version=2, broker_id=3, broker_epoch=1, log_dirs=(DIRS[3][1],))]),
    (20, [RemoveTopicRecord(topic_id=TOPICS[1]), RemoveTopicRecord(topic_id=TOPICS[0])]))


#: One batch starts two incidents on t0-0: broker 1's disk fails under it, and broker 2 is fenced and leaves its ISR.
#: Broker 2 is back (20) and in the ISR again (30), which settles its follow-up; only then does broker 1's replica
#: leave the failed disk (40), evacuating it. The sparse tracker must still look at 40, though the follow-up it
#: looked at 30 for was the other incident's.
TWO_INCIDENTS_ONE_PARTITION = batches(
    (0, [FeatureLevelRecord(name="metadata.version", feature_level=21), register(1, 1, DIRS[1]),
         register(2, 1, DIRS[2]), TopicRecord(name="t0", topic_id=TOPICS[0]),
         PartitionRecord(version=2, topic_id=TOPICS[0], partition_id=0, replicas=(1, 2), isr=(1, 2), leader=1,
                         directories=(DIRS[1][0], DIRS[2][0]))]),
    (10, [PartitionChangeRecord(topic_id=TOPICS[0], partition_id=0, isr=(1,)), FenceBrokerRecord(id=2, epoch=1),
          BrokerRegistrationChangeRecord(version=2, broker_id=1, broker_epoch=1, log_dirs=(DIRS[1][1],))]),
    (20, [UnfenceBrokerRecord(id=2, epoch=1)]),
    (30, [PartitionChangeRecord(topic_id=TOPICS[0], partition_id=0, isr=(1, 2))]),
    (40, [PartitionChangeRecord(topic_id=TOPICS[0], partition_id=0, directories=(DIRS[1][1], DIRS[2][0]))]))


#: Broker 1's disk fails under t0-0 [1, 2], and its ISR loses broker 1 (10); the disk returns (20) with the ISR not
#: yet restored, so the ended incident still follows the partition.
FAILED_AND_BACK: list[tuple[int, list[Record]]] = [
    (0, [FeatureLevelRecord(name="metadata.version", feature_level=21), register(1, 1, DIRS[1]),
         register(2, 1, DIRS[2]), TopicRecord(name="t0", topic_id=TOPICS[0]),
         PartitionRecord(version=2, topic_id=TOPICS[0], partition_id=0, replicas=(1, 2), isr=(1, 2), leader=2,
                         directories=(DIRS[1][0], DIRS[2][0]))]),
    (10, [PartitionChangeRecord(topic_id=TOPICS[0], partition_id=0, isr=(2,)),
          BrokerRegistrationChangeRecord(version=2, broker_id=1, broker_epoch=1, log_dirs=(DIRS[1][1],))]),
    (20, [BrokerRegistrationChangeRecord(version=2, broker_id=1, broker_epoch=1, log_dirs=DIRS[1])])]
#: The ISR restored (40): the end of both logs below.
ISR_RESTORED = (40, [PartitionChangeRecord(topic_id=TOPICS[0], partition_id=0, isr=(2, 1))])

#: Then the same disk fails again (30), and the new incident takes the partition over from the ended one; the ISR is
#: restored (40). Only the new incident could record that, and it had nothing to await: the ended one's follow-up
#: stopped at 30.
TAKEN_OVER = batches(*FAILED_AND_BACK, (30, [BrokerRegistrationChangeRecord(
    version=2, broker_id=1, broker_epoch=1, log_dirs=(DIRS[1][1],))]), ISR_RESTORED)

#: Then the replica moves to broker 1's other disk (30) — not a move off a failed disk any more, since the failure is
#: over — and the ISR is restored (40).
MOVED_AFTER_THE_DISK_RETURNED = batches(*FAILED_AND_BACK, (30, [PartitionChangeRecord(
    topic_id=TOPICS[0], partition_id=0, directories=(DIRS[1][1], DIRS[2][0]))]), ISR_RESTORED)


@settings(SETTINGS, max_examples=600)
@given(log=logs(), max_closed=st.sampled_from([None, 1]))
@example(log=MOVED_THEN_DELETED, max_closed=None)
@example(log=CLOSED_IN_ONE_BATCH, max_closed=1)
@example(log=TWO_INCIDENTS_ONE_PARTITION, max_closed=None)
@example(log=TAKEN_OVER, max_closed=None)
@example(log=MOVED_AFTER_THE_DISK_RETURNED, max_closed=None)
def test_the_incidents_decided_over_columns_are_the_trackers(log: list[LogEntry], max_closed: int | None) -> None:
    """Every incident, with the partitions it hit, what each lost and what became of it, equal — whatever broker
    records and partition changes the batches hold, with closed incidents kept or forgotten at once."""
    prelude, *later = _split(log)
    start = replay_entries(prelude)
    reference = IncidentTracker(start, max_closed_incidents=max_closed)
    images: list[MetadataImage] = []
    image = start
    for batch in later:
        image = replay_entries(batch, image)
        images.append(image)
        reference.observe_batch(batch, image)
    sparse = SparseIncidentTracker(start, max_closed_incidents=max_closed)
    ends = [batch[-1].offset for batch in later]
    sparse.run(ends, [batch[0].timestamp for batch in later],
               {k: [e for e in batch if isinstance(e.record, BROKER_RECORDS)]
                for k, batch in enumerate(later)}, _Images(start, ends, images, later))
    assert sparse.incidents() == reference.incidents()
    assert sparse.dropped_incidents == reference.dropped_incidents
    # What the tracker keeps of a forgotten incident's follow-ups goes with it (millions of pairs at 2 M partitions).
    assert sparse._follow.keys() <= sparse._incidents.keys()
