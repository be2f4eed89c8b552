"""One cluster's replay split over partition-hash buckets, so that a cluster can use more than one core.

Replay is a fold over the log, but most of the log is about one partition at a time: a PartitionChangeRecord reads
and writes one partition registration, and the replica rows it changes are that partition's. What else a
partition's replay and its replica view depend on — the brokers (registered, fenced, which directories are online),
the topics (names, existence), the features, the configs, metadata transactions — is small and changes rarely. So a
cluster's entries can be replayed by ``B`` independent :class:`~jbod_model.changes.IncrementalReplayer`\\ s, one per
*bucket*:

* a PartitionRecord or PartitionChangeRecord goes to one bucket, :func:`partition_bucket` of its
  ``(topic id, partition id)``;
* a NoOpRecord goes to bucket 0 only: it changes nothing, but its bronze row (and the step it is) must be written
  once;
* every other record — brokers, topics, RemoveTopicRecord, features, configs, transaction markers, producer ids,
  records this model does not image — goes to every bucket: each bucket keeps its own copy of that small, shared
  state, and applies a broker change or a topic deletion to its own partitions.

Each bucket then holds exactly its partitions (and the broker → partition index of its partitions) plus a full copy
of everything shared, and :func:`owned_step` says which of a bucket's step rows are its to write: the rows of its
partitions and replicas, the bronze rows of the records it owns (:func:`record_owner`), and — bucket 0 only — the
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

import zlib
from collections.abc import Sequence
from dataclasses import replace

from jbod_model.changes import Step
from jbod_model.errors import InputError
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import NoOpRecord, PartitionChangeRecord, PartitionRecord, Record
from jbod_model.uuid import Uuid

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
    return zlib.crc32(topic_id.to_bytes() + (partition_id & 0xFFFFFFFF).to_bytes(4, "big")) % buckets


def record_owner(record: Record, buckets: int) -> int:
    """The bucket that writes the record's bronze row: its partition's bucket for a partition record, else
    :data:`SHARED_OWNER`."""
    if isinstance(record, PartitionRecord | PartitionChangeRecord):
        return partition_bucket(record.topic_id, record.partition_id, buckets)
    return SHARED_OWNER


def is_shared(record: Record) -> bool:
    """Whether every bucket replays the record: all but partition records and NoOps (see the module docstring)."""
    return not isinstance(record, PartitionRecord | PartitionChangeRecord | NoOpRecord)


def record_buckets(record: Record, buckets: int) -> range:
    """Every bucket that replays ``record``: all of them for a shared record, else its owner alone."""
    if is_shared(record):
        return range(buckets)
    owner = record_owner(record, buckets)
    return range(owner, owner + 1)


def split_entries(entries: list[LogEntry], buckets: int) -> list[list[LogEntry]]:
    """``entries`` (in offset order) as each bucket replays them, in the same order."""
    out: list[list[LogEntry]] = [[] for _ in range(check_buckets(buckets))]
    for entry in entries:
        for bucket in record_buckets(entry.record, buckets):
            out[bucket].append(entry)
    return out


def owned_step(step: Step, bucket: int, buckets: int) -> Step:
    """The part of a bucket's ``step`` that is the bucket's to write (see the module docstring): the union over the
    buckets of their owned steps at one offset is the single replayer's step at that offset."""
    if buckets == 1:
        return step
    shared = bucket == SHARED_OWNER
    entries = tuple(e for e in step.entries if record_owner(e.record, buckets) == bucket)
    aborted = tuple(e for e in step.aborted if record_owner(e.record, buckets) == bucket)
    partitions = tuple(p for p in step.partitions if partition_bucket(p.topic_id, p.partition_id, buckets) == bucket)
    replicas = tuple(r for r in step.replicas if partition_bucket(r.key[0], r.key[1], buckets) == bucket)
    if (len(entries) == len(step.entries) and len(aborted) == len(step.aborted)
            and len(partitions) == len(step.partitions) and len(replicas) == len(step.replicas)
            and (shared or not (step.features or step.brokers or step.topics))):
        return step  # all of it is the bucket's: most steps (a partition record in its bucket, a NoOp in bucket 0)
    return replace(step, entries=entries, aborted=aborted, features=step.features if shared else (),
                   brokers=step.brokers if shared else (), topics=step.topics if shared else (),
                   partitions=partitions, replicas=replicas)


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
