"""Incremental replay over a keyed store (``jbod_model.changes``) is the replay of the model, whatever the batches.

For generated valid streams (the controller-lite of ``test_replay_properties``) split into arbitrary batches, with a
store written back after every batch and open transactions carried over:

* the stored image equals :class:`~jbod_model.replay.Replayer`'s after every batch;
* folding every step's row changes into "tables" (features, brokers, topics, partitions, replicas) gives, at every
  step's offset, exactly the image and the replica view of the pure replay up to that offset — what the Spark job's
  history tables promise ("state as of offset N");
* the broker → partitions index equals the one derived from the stored partitions;
* a snapshot loaded over any stored image (a stream re-bootstrapping after the log was truncated past it) leaves
  exactly the snapshot's image, and its step's changes turn the old rows into the snapshot's.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from test_replay_properties import SETTINGS, Stream, valid_streams

from jbod_model.changes import DictImageStore, IncrementalReplayer, Step, replay_incrementally
from jbod_model.image import MetadataImage
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import NoOpRecord, PartitionChangeRecord
from jbod_model.replay import Replayer, replay_entries
from jbod_model.replicas import replica_view


class Tables:
    """Rows keyed like the Spark job's current tables, changed only through steps."""

    def __init__(self) -> None:
        self.features: dict[str, int] = {}
        self.brokers: dict[int, Any] = {}
        self.topics: dict[Any, str] = {}
        self.partitions: dict[Any, Any] = {}
        self.replicas: dict[Any, Any] = {}

    def apply(self, step: Step) -> None:
        for maps, changes in ((self.features, step.features), (self.brokers, step.brokers),
                              (self.topics, step.topics)):
            for c in changes:
                assert maps.get(c.key) == c.old, f"stale old value for {c.key} at {step.offset}"
                if c.new is None:
                    del maps[c.key]
                else:
                    maps[c.key] = c.new
        for p in step.partitions:
            key = (p.topic_id, p.partition_id)
            assert self.partitions.get(key) == p.old
            if p.new is None:
                del self.partitions[key]
            else:
                self.partitions[key] = p.new
        for r in step.replica_changes():
            assert self.replicas.get(r.key) == r.old, f"stale replica {r.key} at {step.offset}"
            if r.new is None:
                del self.replicas[r.key]
            else:
                self.replicas[r.key] = r.new

    def assert_equals(self, image: MetadataImage) -> None:
        assert self.features == dict(image.features.levels)
        assert self.brokers == dict(image.cluster.brokers)
        assert self.topics == {t.id: t.name for t in image.topics.by_id.values()}
        assert self.partitions == {(t.id, pid): p for t, pid, p in image.topics.partitions()}
        assert self.replicas == {(r.topic_id, r.partition_id, r.broker_id): r for r in replica_view(image)}


def _pure_images(entries: list[LogEntry]) -> dict[int, MetadataImage]:
    """The pure replay's image after every offset at which it is visible (outside open transactions)."""
    replayer = Replayer()
    out = {}
    for e in entries:
        replayer.replay(e)
        if not replayer.in_transaction:
            out[e.offset] = replayer.image
    return out


@SETTINGS
@given(data=st.data())
def test_any_batching_gives_the_pure_images_and_replica_views(data: st.DataObject) -> None:
    stream = data.draw(valid_streams())
    entries = stream.entries()
    pure = _pure_images(entries)
    n = len(entries)
    cuts = sorted(data.draw(st.lists(st.integers(1, max(1, n - 1)), unique=True, max_size=10))) if n > 1 else []
    store = DictImageStore()
    tables = Tables()
    pending: tuple[LogEntry, ...] = ()
    last_step = -1
    for lo, hi in pairwise([0, *cuts, n]):
        steps, pending = replay_incrementally(store, entries[lo:hi], pending)
        for step in steps:
            assert step.offset > last_step
            last_step = step.offset
            tables.apply(step)
            tables.assert_equals(pure[step.offset])
        if not pending:
            assert store.image().same_state(pure[entries[hi - 1].offset])
        index = {}
        for (tid, pid), part in store.partitions.items():
            for b, d in zip(part.replicas, part.directories, strict=True):  # the last of a broker listed twice
                index.setdefault(b, {})[(tid, pid)] = d
        assert index == store.broker_partitions
    assert not pending
    final = pure[entries[-1].offset]
    assert store.image().same_state(final)
    assert store.last_offset() == final.last_offset


def _boundaries(stream: Stream) -> list[int]:
    """Entry counts at the end of each batch: cuts that never fall inside a metadata transaction."""
    out, n = [], 0
    for batch in stream.batches:
        n += len(batch)
        out.append(n)
    return out


@SETTINGS
@given(data=st.data())
def test_a_snapshot_loaded_over_any_image_gives_exactly_the_snapshots_image(data: st.DataObject) -> None:
    """``MetadataDelta.finishSnapshot`` semantics: for any image A (stored, possibly inside an open transaction) and
    any snapshot S — a later state of the same cluster, as a stream that fell behind the log's start sees it, or
    another cluster whose ids collide with A's (the generator's counters restart) — loading S over A gives exactly
    S's image, the step's row changes turn A's rows into S's, and records after the snapshot replay as in a
    replay that never had a gap."""
    old = data.draw(valid_streams())
    old_entries = old.entries()
    a_cut = data.draw(st.integers(1, len(old_entries)))
    same_cluster = data.draw(st.booleans())
    new = old if same_cluster else data.draw(valid_streams())
    new_entries = new.entries()
    s_cut = data.draw(st.sampled_from([b for b in _boundaries(new) if not same_cluster or b >= a_cut]))
    snapshot_image = Replayer().replay_all(new_entries[:s_cut])
    snapshot = [LogEntry(offset=i, record=r) for i, r in enumerate(snapshot_image.to_records())]
    end = s_cut if same_cluster else max(a_cut, s_cut) + data.draw(st.integers(0, 3))

    store = DictImageStore()
    tables = Tables()
    steps, pending = replay_incrementally(store, old_entries[:a_cut])
    for step in steps:
        tables.apply(step)
    plain = Replayer()
    for e in old_entries[:a_cut]:
        plain.replay(e)

    replayer = IncrementalReplayer(store, pending)
    step = replayer.load_snapshot(snapshot, end)
    store.apply(replayer.writes())
    tables.apply(step)
    fresh = replay_entries(snapshot)
    tables.assert_equals(fresh)
    assert store.image().same_state(fresh) and store.last_offset() == end - 1
    assert step.offset == end - 1 and step.aborted == pending
    index: dict[int, dict[Any, Any]] = {}
    for (tid, pid), part in store.partitions.items():
        for b, d in zip(part.replicas, part.directories, strict=True):  # the last of a broker listed twice
            index.setdefault(b, {})[(tid, pid)] = d
    assert index == store.broker_partitions
    assert plain.load_snapshot(snapshot, end) == pending
    assert plain.image.same_state(fresh) and plain.image.last_offset == end - 1

    if same_cluster:
        pure = _pure_images(old_entries)
        steps, pending = replay_incrementally(store, old_entries[s_cut:])
        for step in steps:
            tables.apply(step)
            tables.assert_equals(pure[step.offset])
        assert not pending and store.image().same_state(pure[old_entries[-1].offset])


class _ReferenceSteps(IncrementalReplayer):
    """The incremental replayer with every step on the reference path (no single-record fast path)."""

    __slots__ = ()

    def _single_record_step(self, entry: LogEntry, offset: int) -> Step | None:
        return None


def _against_the_reference_steps(data: st.DataObject,
                                 compare: Callable[[IncrementalReplayer, _ReferenceSteps, LogEntry], None]) -> None:
    """A generated valid stream cut into arbitrary batches, replayed entry by entry by an :class:`IncrementalReplayer`
    and by :class:`_ReferenceSteps` over stores of their own (``compare`` replays each entry on both and compares),
    the writes compared after every batch and the stored images at the end."""
    entries = data.draw(valid_streams()).entries()
    n = len(entries)
    cuts = sorted(data.draw(st.lists(st.integers(1, max(1, n - 1)), unique=True, max_size=6))) if n > 1 else []
    fast_store, reference_store = DictImageStore(), DictImageStore()
    fast_pending: tuple[LogEntry, ...] = ()
    reference_pending: tuple[LogEntry, ...] = ()
    for lo, hi in pairwise([0, *cuts, n]):
        fast = IncrementalReplayer(fast_store, fast_pending)
        reference = _ReferenceSteps(reference_store, reference_pending)
        for entry in entries[lo:hi]:
            compare(fast, reference, entry)
        assert fast.writes() == reference.writes()
        fast_store.apply(fast.writes())
        reference_store.apply(reference.writes())
        fast_pending, reference_pending = fast.pending_transaction(), reference.pending_transaction()
    assert fast_store.image().same_state(reference_store.image())


@SETTINGS
@given(data=st.data())
def test_the_single_record_fast_path_gives_the_reference_steps_and_writes(data: st.DataObject) -> None:
    """``IncrementalReplayer._single_record_step`` (NoOps, leader and ISR changes) is a second implementation of
    ``_step``: over any batching, the same steps, the same writes and the same stored image."""
    def compare(fast: IncrementalReplayer, reference: _ReferenceSteps, entry: LogEntry) -> None:
        assert fast.replay(entry) == reference.replay(entry), f"the steps differ at offset {entry.offset}"

    _against_the_reference_steps(data, compare)


@SETTINGS
@given(data=st.data())
def test_a_partition_change_replayed_alone_is_the_step_replay_would_give(data: st.DataObject) -> None:
    """``IncrementalReplayer.replay_partition_change`` is a second implementation of ``replay`` for the changes that
    move no replica: over any batching, each entry it takes is one whose reference step holds that entry alone and
    one partition change — the same topic name and registration after — and nothing else; each entry it leaves to
    ``replay`` gets the reference step there; the writes and the stored image are the reference's. It must take
    every leader or ISR change of a known partition outside a transaction (checked against the record itself)."""
    def compare(fast: IncrementalReplayer, reference: _ReferenceSteps, entry: LogEntry) -> None:
        in_transaction = fast.in_transaction
        taken = fast.replay_partition_change(entry)
        expected = reference.replay(entry)
        record = entry.record
        moves_none = (isinstance(record, PartitionChangeRecord) and record.replicas is None
                      and record.directories is None and record.adding_replicas is None
                      and record.removing_replicas is None)
        if taken is None:
            assert not (moves_none and not in_transaction and expected is not None
                        and expected.partitions and expected.partitions[0].old is not None
                        and expected.partitions[0].old.directories), \
                f"a change that moves no replica left to replay() at offset {entry.offset}"
            assert fast.replay(entry) == expected, f"the steps differ at offset {entry.offset}"
            return
        assert moves_none
        assert expected is not None, f"no step at offset {entry.offset}"
        (change,) = expected.partitions
        assert (expected.entries, expected.offset, expected.timestamp) == ((entry,), entry.offset, entry.timestamp)
        assert not (expected.aborted or expected.features or expected.brokers or expected.topics
                    or expected.replicas or expected.replica_groups or expected.snapshot)
        assert (change.topic_id, change.partition_id) == (record.topic_id, record.partition_id)
        assert taken == (change.topic_name, change.new), f"the change differs at offset {entry.offset}"

    _against_the_reference_steps(data, compare)


@SETTINGS
@given(data=st.data())
def test_a_noop_replayed_alone_is_the_step_replay_would_give(data: st.DataObject) -> None:
    """``IncrementalReplayer.replay_noop`` is a second implementation of ``replay`` for a NoOpRecord outside a
    metadata transaction: over any batching, each entry it takes is one whose reference step holds that entry alone
    and changes nothing, it takes every such NoOp, and each entry it leaves gets the reference step from ``replay``;
    the writes (the log's offset among them) and the stored image are the reference's."""
    def compare(fast: IncrementalReplayer, reference: _ReferenceSteps, entry: LogEntry) -> None:
        in_transaction = fast.in_transaction
        taken = fast.replay_noop(entry)
        expected = reference.replay(entry)
        if not taken:
            assert in_transaction or not isinstance(entry.record, NoOpRecord), f"a NoOp left at {entry.offset}"
            assert fast.replay(entry) == expected, f"the steps differ at offset {entry.offset}"
            return
        assert expected == Step(offset=entry.offset, timestamp=entry.timestamp, entries=(entry,)), \
            f"the step differs at offset {entry.offset}"

    _against_the_reference_steps(data, compare)
