"""A cluster's replay split over partition-hash buckets (``jbod_model.buckets``) is the replay of the model.

For generated valid streams cut into arbitrary batches and ``B`` buckets, each bucket an
:class:`~jbod_model.changes.IncrementalReplayer` over its own store fed :func:`~jbod_model.buckets.split_entries`
(open transactions carried per bucket):

* at every offset, the union of the buckets' owned steps (:func:`~jbod_model.buckets.owned_step`) is the single
  replayer's step — the same offsets, the same bronze entries, the same feature, broker, topic, partition and
  replica changes — so tables written from the owned rows equal the single replayer's at every split;
* every bucket's shared state (features, brokers, topics, configs) is the pure image's, its partitions are exactly
  the pure image's partitions of its bucket, and its broker → partitions index is that of its partitions;
* a snapshot loaded over bucketed stored images (a re-bootstrap) changes the same rows as over one store.
"""

from __future__ import annotations

import zlib
from collections import Counter
from dataclasses import replace
from itertools import pairwise
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from test_changes_properties import Tables, _pure_images
from test_replay_properties import SETTINGS, valid_streams

from jbod_model.buckets import (
    SHARED_OWNER,
    entry_buckets,
    entry_owner,
    owned_routed_step,
    owned_step,
    partition_bucket,
    split_entries,
)
from jbod_model.changes import DictImageStore, IncrementalReplayer, ReplicaGroup, Step, replay_incrementally
from jbod_model.image import MetadataImage
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import NoOpRecord, PartitionChangeRecord, PartitionRecord, TopicRecord
from jbod_model.replay import Replayer
from jbod_model.uuid import Uuid

BUCKET_COUNTS = st.sampled_from([1, 2, 3, 7])


def _signature(step: Step) -> dict[str, Any]:
    """A step's content, order-free (rows within a step carry no order)."""
    return {"entries": Counter((e.offset, repr(e.record)) for e in step.entries),
            "aborted": Counter((e.offset, repr(e.record)) for e in step.aborted),
            "features": Counter(map(repr, step.features)), "brokers": Counter(map(repr, step.brokers)),
            "topics": Counter(map(repr, step.topics)), "partitions": Counter(map(repr, step.partitions)),
            "replicas": Counter(map(repr, step.replica_changes())), "timestamp": step.timestamp,
            "snapshot": step.snapshot}


def _union(steps: list[Step]) -> dict[str, Any]:
    out = _signature(steps[0])
    for step in steps[1:]:
        sig = _signature(step)
        for key in ("entries", "aborted", "features", "brokers", "topics", "partitions", "replicas"):
            out[key] = out[key] + sig[key]
        assert (sig["snapshot"], sig["timestamp"]) == (out["snapshot"], out["timestamp"])
    return out


def _assert_bucket_images(stores: list[DictImageStore], image: MetadataImage) -> None:
    buckets = len(stores)
    for bucket, store in enumerate(stores):
        mine = store.image()
        assert dict(mine.features.levels) == dict(image.features.levels)
        assert dict(mine.cluster.brokers) == dict(image.cluster.brokers)
        assert {t.id: t.name for t in mine.topics.by_id.values()} == {t.id: t.name for t in image.topics.by_id.values()}
        assert dict(mine.configs.resources) == dict(image.configs.resources)
        assert {(t.id, pid): p for t, pid, p in mine.topics.partitions()} == {
            (t.id, pid): p for t, pid, p in image.topics.partitions()
            if partition_bucket(t.id, pid, buckets) == bucket}
        index: dict[int, dict[Any, Any]] = {}
        for (tid, pid), part in store.partitions.items():
            for b, d in zip(part.replicas, part.directories, strict=True):  # the last of a broker listed twice
                index.setdefault(b, {})[(tid, pid)] = d
        assert index == store.broker_partitions


@SETTINGS
@given(data=st.data())
def test_buckets_together_replay_as_one_replayer_at_every_split(data: st.DataObject) -> None:
    stream = data.draw(valid_streams())
    buckets = data.draw(BUCKET_COUNTS)
    # The buckets' replayers as the operator makes them (a broker change's replica rows grouped) or not: either
    # way the union of their rows is the single replayer's (ungrouped, the reference).
    grouped = data.draw(st.booleans())
    entries = stream.entries()
    pure = _pure_images(entries)
    n = len(entries)
    cuts = sorted(data.draw(st.lists(st.integers(1, max(1, n - 1)), unique=True, max_size=10))) if n > 1 else []
    single = DictImageStore()
    single_pending: tuple[LogEntry, ...] = ()
    stores = [DictImageStore() for _ in range(buckets)]
    pendings: list[tuple[LogEntry, ...]] = [() for _ in range(buckets)]
    tables = Tables()
    for lo, hi in pairwise([0, *cuts, n]):
        want, single_pending = replay_incrementally(single, entries[lo:hi], single_pending)
        got: dict[int, list[Step]] = {}
        for bucket, part in enumerate(split_entries(entries[lo:hi], buckets)):
            steps, pendings[bucket] = replay_incrementally(stores[bucket], part, pendings[bucket],
                                                           group_replicas=grouped)
            for step in steps:
                owned = owned_step(step, bucket, buckets)
                # The operator's second implementation, for a replayer fed its bucket's entries: the same step.
                assert owned_routed_step(step, bucket, buckets) == owned
                got.setdefault(step.offset, []).append(owned)
        assert sorted(got) == [s.offset for s in want]
        for step in want:
            assert _union(got[step.offset]) == _signature(step), f"step at offset {step.offset}"
            for owned in got[step.offset]:
                tables.apply(owned)
            tables.assert_equals(pure[step.offset])
        if not single_pending:
            assert not any(pendings)
            _assert_bucket_images(stores, pure[entries[hi - 1].offset])
    assert not any(pendings)


@SETTINGS
@given(data=st.data())
def test_a_snapshot_loaded_over_buckets_changes_what_it_changes_over_one_store(data: st.DataObject) -> None:
    old = data.draw(valid_streams())
    new = data.draw(valid_streams())
    buckets = data.draw(BUCKET_COUNTS)
    old_entries = old.entries()
    a_cut = data.draw(st.integers(1, len(old_entries)))
    snapshot_image = Replayer().replay_all(new.entries())
    snapshot = [LogEntry(offset=i, record=r) for i, r in enumerate(snapshot_image.to_records())]
    end = a_cut + data.draw(st.integers(0, 3))

    single = DictImageStore()
    _, pending = replay_incrementally(single, old_entries[:a_cut])
    replayer = IncrementalReplayer(single, pending)
    want = replayer.load_snapshot(snapshot, end)
    single.apply(replayer.writes())

    stores = [DictImageStore() for _ in range(buckets)]
    got = []
    for bucket, (store, part, snap) in enumerate(zip(stores, split_entries(old_entries[:a_cut], buckets),
                                                     split_entries(snapshot, buckets), strict=True)):
        _, pending = replay_incrementally(store, part, group_replicas=True)
        replayer = IncrementalReplayer(store, pending, group_replicas=True)
        step = replayer.load_snapshot(snap, end)
        got.append(owned_step(step, bucket, buckets))
        assert owned_routed_step(step, bucket, buckets) == got[-1]
        store.apply(replayer.writes())
    assert _union(got) == _signature(want)
    _assert_bucket_images(stores, single.image())


def _owned_by_filtering(step: Step, bucket: int, buckets: int) -> Step:
    """``owned_step``'s rule stated row by row (its first implementation): the entries the bucket owns, the
    partition and replica rows of its partitions, and the cluster-wide rows in the shared bucket only."""
    if buckets == 1:
        return step
    shared = bucket == SHARED_OWNER
    return replace(step, entries=tuple(e for e in step.entries if entry_owner(e, buckets) == bucket),
                   aborted=tuple(e for e in step.aborted if entry_owner(e, buckets) == bucket),
                   features=step.features if shared else (), brokers=step.brokers if shared else (),
                   topics=step.topics if shared else (),
                   partitions=tuple(p for p in step.partitions
                                    if partition_bucket(p.topic_id, p.partition_id, buckets) == bucket),
                   replicas=tuple(r for r in step.replicas if partition_bucket(r.key[0], r.key[1], buckets) == bucket),
                   replica_groups=tuple(g for g in (_group_of_bucket(g, bucket, buckets) for g in step.replica_groups)
                                        if g.partitions))


def _group_of_bucket(group: ReplicaGroup, bucket: int, buckets: int) -> ReplicaGroup:
    kept = [(key, name) for key, name in zip(group.partitions, group.topic_names, strict=True)
            if partition_bucket(key[0], key[1], buckets) == bucket]
    return replace(group, partitions=tuple(k for k, _ in kept), topic_names=tuple(n for _, n in kept))


@SETTINGS
@given(data=st.data())
def test_owned_step_is_the_row_by_row_filter_for_any_step_and_bucket(data: st.DataObject) -> None:
    """``owned_step`` keeps a step whole without rebuilding it when all of it is the bucket's, and filters each kind
    of row only where some are not: the same step as filtering every row by its bucket. Fed the steps of one
    replayer of the whole stream (every partition in every step, so most rows are other buckets') and the steps of
    the buckets' own replayers, for every bucket."""
    entries = data.draw(valid_streams()).entries()
    buckets = data.draw(st.sampled_from([2, 3, 7]))
    grouped = data.draw(st.booleans())
    steps, _ = replay_incrementally(DictImageStore(), entries, group_replicas=grouped)
    for step in steps:
        for bucket in range(buckets):
            assert owned_step(step, bucket, buckets) == _owned_by_filtering(step, bucket, buckets)
    for bucket, part in enumerate(split_entries(entries, buckets)):
        for step in replay_incrementally(DictImageStore(), part, group_replicas=grouped)[0]:
            owned = owned_step(step, bucket, buckets)
            assert owned == _owned_by_filtering(step, bucket, buckets)
            if owned == step:
                assert owned is step  # kept whole, not rebuilt


@given(msb=st.integers(-(1 << 63), (1 << 63) - 1), lsb=st.integers(-(1 << 63), (1 << 63) - 1),
       pid=st.integers(0, (1 << 31) - 1), buckets=st.integers(1, 64))
def test_routing_sends_a_partition_record_to_its_bucket_and_shared_records_everywhere(
        msb: int, lsb: int, pid: int, buckets: int) -> None:
    topic = Uuid(msb, lsb)
    bucket = partition_bucket(topic, pid, buckets)
    assert 0 <= bucket < buckets
    # The documented hash: CRC-32 of the id's 16 bytes then the partition id's 4, big-endian (computed in two parts).
    assert bucket == zlib.crc32(topic.to_bytes() + pid.to_bytes(4, "big")) % buckets
    assert partition_bucket(Uuid(msb, lsb), pid, buckets) == bucket  # an equal id, not the same object
    for record in (PartitionRecord(topic_id=topic, partition_id=pid),
                   PartitionChangeRecord(topic_id=topic, partition_id=pid)):
        assert entry_owner(LogEntry(offset=pid, record=record), buckets) == bucket
        assert list(entry_buckets(LogEntry(offset=pid, record=record), buckets)) == [bucket]
    # A NoOp goes to its offset's bucket: a quiet cluster's log, mostly NoOps, spreads evenly over the buckets.
    assert list(entry_buckets(LogEntry(offset=pid, record=NoOpRecord()), buckets)) == [pid % buckets]
    assert Counter(entry_owner(LogEntry(offset=pid + k, record=NoOpRecord()), buckets)
                   for k in range(buckets)) == Counter(range(buckets))
    assert list(entry_buckets(LogEntry(offset=pid, record=TopicRecord(name="t", topic_id=topic)), buckets)) == list(
        range(buckets))
    assert entry_owner(LogEntry(offset=pid, record=TopicRecord(name="t", topic_id=topic)), buckets) == 0


def test_the_bucket_hash_is_fixed() -> None:
    """The bucket of a partition is part of a checkpoint's layout: the hash must not change between versions."""
    topic = Uuid.from_string("MkU3OEp9SdyVT1Nuah1rHg")
    # CRC-32 of the 16 id bytes and the 4-byte big-endian partition id, computed once by hand (zlib.crc32).
    assert [partition_bucket(topic, pid, 1 << 16) for pid in range(3)] == [53997, 57979, 46017]
    assert partition_bucket(topic, 0, 1) == 0
