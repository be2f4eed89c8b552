"""One cluster's replay split over partition-hash buckets, so that a cluster can use more than one core.

Replay is a fold over the log, but most of the log is about one partition at a time: a PartitionChangeRecord reads
and writes one partition registration, and the replica rows it changes are that partition's. What else a
partition's replay and its replica view depend on — the brokers (registered, fenced, which directories are online),
the topics (names, existence), the features, the configs, metadata transactions — is small and changes rarely. So a
cluster's entries can be replayed by ``B`` independent :class:`~jbod_model.changes.IncrementalReplayer`\\ s, one per
*bucket*:

* a PartitionRecord or PartitionChangeRecord goes to one bucket, :func:`partition_bucket` of its
  ``(topic id, partition id)``;
* a NoOpRecord goes to one bucket, its offset's modulo ``B`` (:func:`entry_owner`): it changes nothing, but its
  bronze row (and the step it is) must be written once. Spread by offset, not all in one bucket: a quiet
  cluster's log is mostly NoOps (a controller writes one every half second), and one bucket holding them all was
  one core replaying most of such a log;
* every other record — brokers, topics, RemoveTopicRecord, features, configs, transaction markers, producer ids,
  records this model does not image — goes to every bucket: each bucket keeps its own copy of that small, shared
  state, and applies a broker change or a topic deletion to its own partitions.

Each bucket then holds exactly its partitions (and the broker → partition index of its partitions) plus a full copy
of everything shared, and :func:`owned_step` says which of a bucket's step rows are its to write: the rows of its
partitions and replicas, the bronze rows of the entries it owns (:func:`entry_owner`), and — bucket 0 only — the
feature, broker and topic rows every bucket computes alike. The property test
``tests/properties/test_buckets_properties.py`` proves, for generated streams cut into arbitrary batches and any
``B``, that at every offset the union of the buckets' owned steps is the single replayer's step, and that the
buckets' images together are the pure replay's image.

What a split cannot reproduce alone (the consumer's to handle, see docs/state-design.md): a replay fault on a
partition record is seen only by its bucket, so halting the whole cluster at it needs the consumer to stop the
other buckets' output at that offset (:func:`cluster_halt` says where and which fault row is the cluster's,
:func:`past_halt` which rows go); the reference controller (request streams) reads the
whole image, so request streams run in one bucket.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Final

from jbod_model.errors import InputError
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import NoOpRecord, PartitionChangeRecord, PartitionRecord, Record
from jbod_model.uuid import Uuid

if TYPE_CHECKING:
    # For annotations only: the Spark job's planning processes import this module (a row's bucket) and not the
    # replay, which imports the reference controller.
    from jbod_model.changes import PartitionChange, ReplicaChange, ReplicaGroup, Step

#: The bucket that owns cluster-wide rows (features, brokers, topics) and the bronze rows of shared records.
SHARED_OWNER = 0


def check_buckets(buckets: int) -> int:
    """``buckets`` if it is a usable bucket count (1 or more), else an :class:`InputError`."""
    if buckets < 1:
        raise InputError(f"a cluster needs at least one replay bucket, got {buckets}")
    return buckets


def partition_bucket(topic_id: Uuid, partition_id: int, buckets: int) -> int:
    """The bucket of a partition: CRC-32 of the topic id's 16 bytes and the partition id's 4 (big-endian, as on
    the wire), modulo ``buckets``. Stable across processes and Python versions (unlike ``hash``), so a bucket's
    partitions stay its own across micro-batches and restarts."""
    if buckets == 1:
        return 0
    # CRC-32 runs over its input left to right: the topic id's share is computed once per topic and continued
    # with the partition id's 4 bytes (zlib.crc32(b, zlib.crc32(a)) == zlib.crc32(a + b)).
    topic_crc = _TOPIC_CRC.get(topic_id)
    if topic_crc is None:
        if len(_TOPIC_CRC) >= _TOPIC_CRC_MAX:
            _TOPIC_CRC.clear()
        topic_crc = _TOPIC_CRC[topic_id] = zlib.crc32(topic_id.to_bytes())
    return zlib.crc32(_PARTITION_ID.pack(partition_id & 0xFFFFFFFF), topic_crc) % buckets


#: CRC-32 of recent topic ids' 16 bytes (a pure function of the id; bounded, simply cleared when full).
_TOPIC_CRC: dict[Uuid, int] = {}
_TOPIC_CRC_MAX = 1 << 16
_PARTITION_ID = struct.Struct(">I")


def entry_owner(entry: LogEntry, buckets: int) -> int:
    """The bucket that writes the entry's bronze row: its partition's bucket for a partition record, its offset's
    (modulo ``buckets``) for a NoOp, else :data:`SHARED_OWNER`."""
    record = entry.record
    if isinstance(record, _PARTITION_RECORDS):
        return partition_bucket(record.topic_id, record.partition_id, buckets)
    if type(record) is NoOpRecord:
        return entry.offset % buckets
    return SHARED_OWNER


def is_shared(record: Record) -> bool:
    """Whether every bucket replays the record: all but partition records and NoOps (see the module docstring)."""
    return not isinstance(record, _UNSHARED_RECORDS)


# Tuples, not ``A | B``: a union written in a function body is built anew on every call.
_PARTITION_RECORDS: Final = (PartitionRecord, PartitionChangeRecord)
_UNSHARED_RECORDS: Final = (PartitionRecord, PartitionChangeRecord, NoOpRecord)


def entry_buckets(entry: LogEntry, buckets: int) -> range:
    """Every bucket that replays ``entry``: all of them for a shared record, else its owner alone."""
    if is_shared(entry.record):
        return range(buckets)
    owner = entry_owner(entry, buckets)
    return range(owner, owner + 1)


def split_entries(entries: list[LogEntry], buckets: int) -> list[list[LogEntry]]:
    """``entries`` (in offset order) as each bucket replays them, in the same order."""
    out: list[list[LogEntry]] = [[] for _ in range(check_buckets(buckets))]
    for entry in entries:
        for bucket in entry_buckets(entry, buckets):
            out[bucket].append(entry)
    return out


def owned_step(step: Step, bucket: int, buckets: int) -> Step:
    """The part of a bucket's ``step`` that is the bucket's to write (see the module docstring): the union over the
    buckets of their owned steps at one offset is the single replayer's step at that offset."""
    if buckets == 1:
        return step
    if len(step.entries) == 1 and _one_partition_owned(step, bucket, buckets):
        return step
    shared = bucket == SHARED_OWNER
    # Each filter hands back the step's own tuple when it keeps all of it: most steps are all the bucket's (a
    # partition record in its bucket, a NoOp in its offset's), and a shared record's step in another bucket keeps its
    # rows (thousands for a fenced broker) and loses its entries.
    entries = _owned_entries(step.entries, bucket, buckets)
    aborted = _owned_entries(step.aborted, bucket, buckets)
    partitions = _owned_partitions(step.partitions, bucket, buckets)
    replicas = _owned_replicas(step.replicas, bucket, buckets)
    groups = _owned_groups(step.replica_groups, bucket, buckets)
    if (entries is step.entries and aborted is step.aborted and partitions is step.partitions
            and replicas is step.replicas and groups is step.replica_groups
            and (shared or not (step.features or step.brokers or step.topics))):
        return step
    return replace(step, entries=entries, aborted=aborted, features=step.features if shared else (),
                   brokers=step.brokers if shared else (), topics=step.topics if shared else (),
                   partitions=partitions, replicas=replicas, replica_groups=groups)


def owned_routed_step(step: Step, bucket: int, buckets: int) -> Step:
    """:func:`owned_step` of a step made by a replayer fed exactly its bucket's entries (:func:`split_entries`,
    :func:`entry_buckets`: the Spark job's source routes them so) over a store holding exactly its partitions: a
    second implementation, proven equal to :func:`owned_step` on such steps by
    ``tests/properties/test_buckets_properties.py``.

    Such a replayer's partition, replica and replica-group rows are all of its own partitions — it never reads or
    receives another bucket's — so none is filtered, and no partition's bucket is computed (the reference's filters
    computed one per row: ≈ 8 % of the operator's CPU at 200 k partitions, most of it for the thousands of replicas
    a fenced broker reaches). What is left to drop is what every bucket computes alike and the shared owner writes:
    the feature, broker and topic rows, and the bronze rows of shared records (a partition record's and a NoOp's
    are the bronze rows of the one bucket they reach)."""
    if buckets == 1 or bucket == SHARED_OWNER:
        return step
    entries = _unshared_entries(step.entries)
    aborted = _unshared_entries(step.aborted)
    if entries is step.entries and aborted is step.aborted and not (step.features or step.brokers or step.topics):
        return step
    return replace(step, entries=entries, aborted=aborted, features=(), brokers=(), topics=())


def writes_routed_bronze_row(record: Record, bucket: int, buckets: int) -> bool:
    """Whether a bucket fed exactly its routed entries writes ``record``'s bronze row: what :func:`owned_routed_step`
    keeps of a step's entries — every one in a single bucket and in the shared owner, a partition record's and a
    NoOp's in the bucket it reaches (the only one). For a caller that writes a record's rows without its step."""
    return buckets == 1 or bucket == SHARED_OWNER or isinstance(record, _UNSHARED_RECORDS)


def _unshared_entries(entries: tuple[LogEntry, ...]) -> tuple[LogEntry, ...]:
    """The entries of ``entries`` that reach one bucket — partition records and NoOps (``entries`` itself when all
    are)."""
    for entry in entries:
        if not isinstance(entry.record, _UNSHARED_RECORDS):
            return tuple(e for e in entries if isinstance(e.record, _UNSHARED_RECORDS))
    return entries


def _one_partition_owned(step: Step, bucket: int, buckets: int) -> bool:
    """Whether ``step`` — one entry — is a partition record's step about its own partition alone, in ``bucket``: all
    of it is the bucket's (nearly every step of a log). False says nothing: the filters of :func:`owned_step`
    decide then. One bucket computed for the record, its partition row and its replica rows."""
    record = step.entries[0].record
    if (step.aborted or step.features or step.brokers or step.topics or step.replica_groups
            or not isinstance(record, _PARTITION_RECORDS)):
        return False
    topic_id, partition_id = record.topic_id, record.partition_id
    for change in step.partitions:
        if change.partition_id != partition_id or change.topic_id != topic_id:
            return False
    for replica in step.replicas:
        state = replica.new if replica.new is not None else replica.old
        assert state is not None
        if state.partition_id != partition_id or state.topic_id != topic_id:
            return False
    return partition_bucket(topic_id, partition_id, buckets) == bucket


def _owned_entries(entries: tuple[LogEntry, ...], bucket: int, buckets: int) -> tuple[LogEntry, ...]:
    """The entries whose bronze rows are ``bucket``'s (``entries`` itself when all are)."""
    for i, entry in enumerate(entries):
        if entry_owner(entry, buckets) != bucket:
            return entries[:i] + tuple(e for e in entries[i + 1:] if entry_owner(e, buckets) == bucket)
    return entries


def _owned_partitions(changes: tuple[PartitionChange, ...], bucket: int,
                      buckets: int) -> tuple[PartitionChange, ...]:
    """The partition rows of ``bucket``'s partitions (``changes`` itself when all are)."""
    for i, change in enumerate(changes):
        if partition_bucket(change.topic_id, change.partition_id, buckets) != bucket:
            return changes[:i] + tuple(c for c in changes[i + 1:]
                                       if partition_bucket(c.topic_id, c.partition_id, buckets) == bucket)
    return changes


def _owned_replicas(changes: tuple[ReplicaChange, ...], bucket: int, buckets: int) -> tuple[ReplicaChange, ...]:
    """The replica rows of ``bucket``'s partitions (``changes`` itself when all are). A partition's rows come
    together in a step (``IncrementalReplayer`` emits them partition by partition), so its bucket is computed once
    for a run of rows of the same partition."""
    kept: list[ReplicaChange] | None = None
    last_topic: Uuid | None = None
    last_partition = -1
    owned = True
    for i, change in enumerate(changes):
        # ReplicaChange.key's topic and partition, read without building the key.
        state = change.new if change.new is not None else change.old
        assert state is not None
        topic_id, partition_id = state.topic_id, state.partition_id
        if topic_id is not last_topic or partition_id != last_partition:
            owned = partition_bucket(topic_id, partition_id, buckets) == bucket
            last_topic, last_partition = topic_id, partition_id
        if not owned:
            if kept is None:
                kept = list(changes[:i])
        elif kept is not None:
            kept.append(change)
    return changes if kept is None else tuple(kept)


def _owned_groups(groups: tuple[ReplicaGroup, ...], bucket: int, buckets: int) -> tuple[ReplicaGroup, ...]:
    """The replica groups cut to ``bucket``'s partitions, empty ones dropped (``groups`` itself when all are the
    bucket's: a bucket's replayer reaches a broker's partitions through the bucket's own index)."""
    out: list[ReplicaGroup] | None = None
    for i, group in enumerate(groups):
        kept = [j for j, (topic_id, partition_id) in enumerate(group.partitions)
                if partition_bucket(topic_id, partition_id, buckets) == bucket]
        if len(kept) == len(group.partitions):
            if out is not None:
                out.append(group)
            continue
        if out is None:
            out = list(groups[:i])
        if kept:
            out.append(replace(group, partitions=tuple(group.partitions[j] for j in kept),
                               topic_names=tuple(group.topic_names[j] for j in kept)))
    return groups if out is None else tuple(out)


def halted_after(fault_offsets: list[int | None]) -> int | None:
    """Where a cluster whose buckets reported these faults stops: the earliest faulting offset (None: no fault, or
    none located). The pure replay stops at the first entry it refuses; a bucket that did not see that entry went
    on past it, and its output from that offset on is not the cluster's."""
    located = [o for o in fault_offsets if o is not None]
    return min(located) if located else None


def cluster_halt(earlier: int | None, faults: Sequence[tuple[int, int]]) -> tuple[int | None, int | None]:
    """A cluster's halt after one batch: ``earlier`` is where an earlier batch halted it (None: it had not),
    ``faults`` the ``(offset, bucket)`` of each fault its buckets reported in this batch. Returns the offset the
    cluster now stops at and the index in ``faults`` of the one fault that is the cluster's to report — the
    earliest (on a record several buckets replay, each reports it: the lowest bucket's stands for all), or None
    when the cluster had already halted at or before it (that halt was reported then)."""
    if not faults:
        return earlier, None
    first = min(range(len(faults)), key=faults.__getitem__)
    at = faults[first][0]
    stop = halted_after([earlier, at])
    return stop, first if earlier is None or at < earlier else None


def past_halt(offset: int | None, stop: int | None) -> bool:
    """Whether a bucket's row of the step at ``offset`` falls at or after the cluster's halt at ``stop`` and is
    not the cluster's (the pure replay never got there). A row with no offset (a controller response) and a
    cluster that has not halted keep their rows."""
    return stop is not None and offset is not None and offset >= stop
