""":func:`jbod_model.invariants.check_step` records each batch once and lets every step check read that recording;
each step check called on its own records the batch itself, lazily, as it walks. Both must find the same
violations, in the same order, on any batch — valid ones from hypothesis' ``valid_streams``, and the same records
with some dropped and regrouped, which breaks invariants (and replay) in every way a walk must survive: changes to
partitions that are not there, epochs that skip, directories that are offline, topics removed mid-batch.

:class:`jbod_model.invariants.InvariantTracker` lends I16 a broker -> partitions index it keeps across batches;
I16 through a tracker must find what I16 scanning the whole image finds, batch after batch, in the same order.

A tracker that replays a batch itself hands the step checks what its replay made of each PartitionChangeRecord
instead of letting the recording merge them again; it must find what the recording alone finds — also when that
replay's merge skips epochs, which I19 then reads from the trace alone (``_epochs_step_by_one``)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from unittest.mock import patch

from hypothesis import given
from hypothesis import strategies as st
from test_replay_properties import SETTINGS, Stream, valid_streams

from jbod_model.errors import ReplayFault
from jbod_model.image import EMPTY_IMAGE, MetadataImage, PartitionRegistration
from jbod_model.invariants import INVARIANTS, InvariantTracker, Violation, check_step
from jbod_model.metadata_version import FEATURE_NAME
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import (
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    FeatureLevelRecord,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from jbod_model.replay import TransactionBuffer, replay_entries
from jbod_model.uuid import Uuid


def one_by_one(before: MetadataImage, entries: list[LogEntry], after: MetadataImage) -> list[Violation]:
    """Every step check called directly, in check_step's order (each records the batch itself)."""
    return [v for inv in INVARIANTS.values() if inv.step_check is not None
            for v in inv.step_check(before, entries, after)]


def broken_batches(stream: Stream, data: st.DataObject) -> Iterator[tuple[MetadataImage, list[LogEntry],
                                                                           MetadataImage]]:
    """The stream's records with some dropped, regrouped in batches of 1..12: (image before, batch, image after);
    a batch replay refuses leaves the image as it was (the checks explain it against the image before)."""
    records = stream.records
    kept = data.draw(st.lists(st.booleans(), min_size=len(records), max_size=len(records)), label="kept")
    sizes = data.draw(st.lists(st.integers(1, 12), min_size=len(records), max_size=len(records)), label="sizes")
    chosen = [r for r, keep in zip(records, kept, strict=True) if keep or data.draw(st.booleans())]
    image, offset, i = EMPTY_IMAGE, 0, 0
    while i < len(chosen):
        batch = [LogEntry(offset=offset + k, record=r, batch_base_offset=offset)
                 for k, r in enumerate(chosen[i:i + sizes[i]])]
        try:
            after = replay_entries(batch, image)
        except ReplayFault:
            after = image
        yield image, batch, after
        image, offset, i = after, offset + len(batch), i + len(batch)


#: A metadata.version with directory assignment (3.7-IV2): partitions name their replicas' directories.
_DIRS_LEVEL = 21


#: The operations of a batch, weighted: reassignments after a failure are what the index must follow.
_OPERATIONS = ("create", "reassign", "reassign", "move", "move", "remove", "fail", "fail", "reregister")


def _register(b: int, epoch: int, dirs: tuple[Uuid, ...]) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(version=3, broker_id=b, incarnation_id=Uuid(b, epoch), broker_epoch=epoch,
                                end_points=(BrokerEndpoint(name="PLAINTEXT", host=f"broker{b}", port=9092),),
                                fenced=False, log_dirs=dirs)


@st.composite
def failing_batches(draw: st.DrawFn) -> list[tuple[MetadataImage, list[LogEntry], MetadataImage]]:
    """Batches of a cluster whose brokers have several directories and whose replicas sit in them, where
    directories fail without their replicas being demoted (I16's violations, across several partitions and
    topics), mixed in one batch with what changes which partitions a broker hosts and where: topics created and
    removed, replicas reassigned (into other directories), replicas moved between their broker's directories,
    brokers re-registered with fresh directories."""
    n_dirs = 0

    def fresh_dirs() -> tuple[Uuid, ...]:
        nonlocal n_dirs
        first, n_dirs = n_dirs + 1, n_dirs + draw(st.integers(2, 3))
        return tuple(Uuid(-1, k) for k in range(first, n_dirs + 1))

    brokers = range(1, draw(st.integers(2, 4)) + 1)
    records: list[Record] = [FeatureLevelRecord(name=FEATURE_NAME, feature_level=_DIRS_LEVEL)]
    records += [_register(b, 10, fresh_dirs()) for b in brokers]
    image = replay_entries([LogEntry(offset=k, record=r) for k, r in enumerate(records)])
    offset, epoch, topics, out = len(records), 10, 0, []
    for _ in range(draw(st.integers(1, 16))):
        batch: list[Record] = []
        view = image  # what the operations are drawn from (a later operation may find its partition gone)
        for op in draw(st.lists(st.sampled_from(_OPERATIONS), min_size=1, max_size=4)):
            regs = view.cluster.brokers
            parts = sorted(((t.id, pid) for t, pid, _ in view.topics.partitions()), key=str)
            if op == "create":
                topics += 1
                tid = Uuid(topics, topics)
                batch.append(TopicRecord(name=f"t{topics}", topic_id=tid))
                for pid in range(draw(st.integers(1, 4))):
                    replicas = tuple(draw(st.lists(st.sampled_from(sorted(regs)), min_size=1, max_size=3,
                                                   unique=True)))
                    batch.append(PartitionRecord(version=1, topic_id=tid, partition_id=pid, replicas=replicas,
                                                 isr=replicas, leader=replicas[0],
                                                 directories=tuple(draw(st.sampled_from(regs[b].directories))
                                                                   for b in replicas)))
            elif op == "reassign" and parts:
                tid, pid = draw(st.sampled_from(parts))
                replicas = tuple(draw(st.lists(st.sampled_from(sorted(regs)), min_size=1, max_size=3, unique=True)))
                batch.append(PartitionChangeRecord(version=2, topic_id=tid, partition_id=pid, replicas=replicas,
                                                   isr=replicas, leader=replicas[0],
                                                   directories=tuple(draw(st.sampled_from(regs[b].directories))
                                                                     for b in replicas)))
            elif op == "move" and parts:
                # The replicas stay, their directories change (what AssignReplicasToDirs writes): only Directories.
                tid, pid = draw(st.sampled_from(parts))
                current = view.topics.get_partition(tid, pid)
                assert current is not None
                batch.append(PartitionChangeRecord(version=2, topic_id=tid, partition_id=pid,
                                                   directories=tuple(draw(st.sampled_from(regs[b].directories))
                                                                     for b in current.replicas)))
            elif op == "remove" and view.topics.by_id:
                batch.append(RemoveTopicRecord(topic_id=draw(st.sampled_from(sorted(view.topics.by_id, key=str)))))
            elif op == "fail":
                b = draw(st.sampled_from(sorted(regs)))
                dirs = regs[b].directories
                if len(dirs) > 1:  # LogDirs [] means "no change": one directory at least stays online
                    online = draw(st.lists(st.sampled_from(dirs), min_size=1, max_size=len(dirs) - 1, unique=True))
                    batch.append(BrokerRegistrationChangeRecord(version=2, broker_id=b, broker_epoch=regs[b].epoch,
                                                                log_dirs=tuple(sorted(online))))
            elif op == "reregister":
                epoch += 10
                batch.append(_register(draw(st.sampled_from(sorted(regs))), epoch, fresh_dirs()))
            try:
                view = replay_entries([LogEntry(offset=offset + k, record=r) for k, r in enumerate(batch)], image)
            except ReplayFault:
                batch.pop()
        if not batch:
            continue
        entries = [LogEntry(offset=offset + k, record=r, batch_base_offset=offset) for k, r in enumerate(batch)]
        after = replay_entries(entries, image)
        out.append((image, entries, after))
        image, offset = after, offset + len(entries)
    return out


@SETTINGS
@given(stream=valid_streams(), data=st.data())
def test_a_shared_recording_finds_what_each_check_finds_alone(stream: Stream, data: st.DataObject) -> None:
    for before, batch, after in broken_batches(stream, data):
        assert check_step(before, batch, after) == one_by_one(before, batch, after), f"batch {batch[0].offset}"


@SETTINGS
@given(stream=valid_streams(), data=st.data())
def test_the_step_checks_read_the_trackers_replay_as_the_recording_would(stream: Stream,
                                                                          data: st.DataObject) -> None:
    for before, batch, _ in broken_batches(stream, data):
        options = {"image_checks": False, "history_checks": False}
        tracker = InvariantTracker(before, **options)  # type: ignore[arg-type]
        try:
            found = tracker.feed_batch(batch)  # replays the batch: the recording is its trace
        except ReplayFault:
            continue  # a refused batch has no trace; the recording explains it alone, as check_step's test shows
        committed = TransactionBuffer().settle_all(batch, None)
        alone = InvariantTracker(before, **options)  # type: ignore[arg-type]
        assert alone.observe_batch(committed, tracker.image) == found, f"batch {batch[0].offset}"


@SETTINGS
@given(stream=valid_streams(), data=st.data(), every=st.integers(1, 3),
       field=st.sampled_from(["partition_epoch", "leader_epoch"]))
def test_the_trackers_step_checks_find_the_epochs_its_replay_skipped_as_the_recording_would(
        stream: Stream, data: st.DataObject, every: int, field: str) -> None:
    # I19 on a batch the tracker replayed reads the replay's trace, and passes over the batch when each change there
    # moved its epochs by one step (_epochs_step_by_one). A merge that skips an epoch on some partitions (a bug I19
    # exists to catch) must be found there as the recording, merging again with the same merge, finds it.
    merge = PartitionRegistration.merge

    def skipping(part: PartitionRegistration, record: PartitionChangeRecord) -> PartitionRegistration:
        new = merge(part, record)
        return replace(new, **{field: getattr(new, field) + 1}) if record.partition_id % every == 0 else new

    with patch.object(PartitionRegistration, "merge", skipping):
        for before, batch, _ in broken_batches(stream, data):
            options = {"image_checks": False, "history_checks": False}
            tracker = InvariantTracker(before, **options)  # type: ignore[arg-type]
            try:
                found = tracker.feed_batch(batch)
            except ReplayFault:
                continue
            committed = TransactionBuffer().settle_all(batch, None)
            alone = InvariantTracker(before, **options)  # type: ignore[arg-type]
            assert alone.observe_batch(committed, tracker.image) == found, f"batch {batch[0].offset}"


@SETTINGS
@given(batches=failing_batches())
def test_i16_through_the_trackers_index_finds_what_the_scan_finds(
        batches: list[tuple[MetadataImage, list[LogEntry], MetadataImage]]) -> None:
    tracker = InvariantTracker(batches[0][0] if batches else EMPTY_IMAGE, image_checks=False, history_checks=False,
                               step_names=["I16"])
    for before, batch, after in batches:
        assert tracker.image is before
        # check_step without a tracker scans every partition of the image after.
        assert tracker.observe_batch(batch, after) == check_step(before, batch, after, ["I16"]), \
            f"batch {batch[0].offset}"
