"""Operator reports: what is broken now, on which disk, since when, and what happened in between.

Operators know their disks by path (``kafka-log-dirs``, JMX, every UI); the metadata log knows them by Uuid; only
``meta.properties`` joins the two, and nothing keeps the history (../shared/reference/operators-and-peers.md
§1–2). A report joins them: every directory is named through :func:`format_directory` (``broker 3 /mnt/d2
(P2aL9r4s…)`` when the inventory knows the path), and the history comes from trackers fed while the log is
replayed.

The module separates *input* from *computation* so that the same report can be built from a replay here or from
the Spark job's Delta tables later:

* **History** — :class:`IncidentTracker` follows directory failures and broker fencing incrementally (fed
  :class:`~jbod_model.records.entry.LogEntry` values or whole batches, from any source), keeping only what the
  timeline needs: per incident the partitions it hit and what became of them, plus a compact series of offline
  replica counts. :class:`ReportTracker` runs it beside an :class:`~jbod_model.invariants.InvariantTracker` (whose
  placement clocks give the age of pending placements) over one replay, and hands out a frozen
  :class:`ReportHistory`.
* **Computation** — :func:`build_report` takes an image, optional :class:`DirectoryPaths` (from the inventory
  rows) and an optional :class:`ReportHistory`, and returns a frozen :class:`JbodReport`: offline replicas grouped by
  disk, leaderless and under-min-ISR partitions, pending placements with their age, per-disk replica and leader
  counts, incidents and the timeline. Anything that can produce an image and a history (a Delta-table reader, a
  notebook) gets the same report; renderers only format it.

Every rule is the model's: offline replicas are :func:`jbod_model.replicas.offline_reason` (Kafka's metadata
cache), min ISR is :meth:`ControllerContext.topic_effective_min_isr`, pending placements are I12's clocks.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import operator
from abc import ABC, abstractmethod
from array import array
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Final, Protocol, TypeVar

from jbod_model.controller.context import ControllerConfig, ControllerContext
from jbod_model.directory_id import MIGRATING, UNASSIGNED, DirectoryState, is_reserved
from jbod_model.errors import InputError, ReplayFault
from jbod_model.gaps import current_gap
from jbod_model.image import (
    EMPTY_IMAGE,
    BrokerRegistration,
    MetadataImage,
    PartitionRegistration,
)
from jbod_model.invariants import InvariantTracker
from jbod_model.meta_properties import DirInventoryRow
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import (
    NO_LEADER,
    BrokerRegistrationChangeRecord,
    FenceBrokerRecord,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)
from jbod_model.replay import MetadataDelta, TransactionBuffer
from jbod_model.replicas import OfflineReason, offline_reason
from jbod_model.slots import gc_paused, slot_constructor
from jbod_model.stream import RequestEntry, StreamEntry, StreamRunner
from jbod_model.uuid import Uuid

PartitionKey = tuple[Uuid, int]
#: (topic id, partition id, broker id): one replica.
ReplicaKey = tuple[Uuid, int, int]

#: How many characters of a directory id follow its path: enough to tell disks apart, short enough to read.
SHORT_ID_CHARS: Final = 8
#: How many partitions a one-line summary names before saying "and N more".
SUMMARY_PARTITIONS: Final = 5


# ---------------------------------------------------------------------------------------------------------------
# Positions, directories and partitions as operators read them


@dataclass(frozen=True, slots=True)
class LogPosition:
    """A place in the metadata log: a record's offset and its batch's append time in ms since the epoch (None when
    the input has no timestamps: JSONL without them, or records the reference controller wrote)."""

    offset: int
    timestamp: int | None = None

    def offsets_until(self, later: LogPosition) -> int:
        return later.offset - self.offset

    def ms_until(self, later: LogPosition) -> int | None:
        if self.timestamp is None or later.timestamp is None:
            return None
        return later.timestamp - self.timestamp


@dataclass(frozen=True, slots=True)
class DirLocation:
    """Where a directory id is mounted, as its ``meta.properties`` says."""

    node_id: int | None
    path: str


#: Ids found at several locations, each with them all (:attr:`DirectoryPaths.conflicts`).
_Conflicts = tuple[tuple[Uuid, tuple[DirLocation, ...]], ...]


@dataclass(frozen=True, slots=True)
class DirectoryPaths:
    """Directory id → location: the join between the metadata's Uuids and the operators' paths.

    Build it from ``jbod dirs`` rows (:meth:`from_inventory`), or from the ``dir_inventory`` table, whose rows are
    the same (``pipelines.lakehouse.tables.directory_paths``). An id found at two locations (a copied disk image, a
    mislabelled backup) keeps the first by (node, path) and is listed in ``conflicts``; the inventory's own findings
    already flag it as an error.
    """

    locations: Mapping[Uuid, DirLocation] = field(default_factory=lambda: MappingProxyType({}))
    conflicts: _Conflicts = ()

    @classmethod
    def from_inventory(cls, rows: Iterable[DirInventoryRow]) -> DirectoryPaths:
        seen: dict[Uuid, list[DirLocation]] = {}
        ordered = sorted((r for r in rows if r.directory_id is not None),
                         key=lambda r: (r.node_id is None, r.node_id or 0, r.path))
        for row in ordered:
            assert row.directory_id is not None
            seen.setdefault(row.directory_id, []).append(DirLocation(node_id=row.node_id, path=row.path))
        return cls(locations=MappingProxyType({d: locs[0] for d, locs in seen.items()}),
                   conflicts=tuple((d, tuple(locs)) for d, locs in seen.items() if len(locs) > 1))

    def __reduce__(self) -> tuple[Callable[..., DirectoryPaths], tuple[dict[Uuid, DirLocation], _Conflicts]]:
        # A read-only mapping does not pickle: a fleet report hands the paths to the processes that report clusters.
        return _directory_paths, (dict(self.locations), self.conflicts)

    def get(self, directory: Uuid) -> DirLocation | None:
        return self.locations.get(directory)

    def __len__(self) -> int:
        return len(self.locations)

    def overlay(self, preferred: DirectoryPaths) -> DirectoryPaths:
        """These locations with ``preferred``'s on top: an id that ``preferred`` places wins there (what an
        operator passes on the command line is fresher than a table loaded earlier); the rest stay."""
        locations = {**self.locations, **preferred.locations}
        conflicts = (*preferred.conflicts, *((d, locs) for d, locs in self.conflicts if d not in preferred.locations))
        return DirectoryPaths(locations=MappingProxyType(locations), conflicts=conflicts)

    def directories_at(self, path: str, node_id: int | None = None,
                       online: frozenset[Uuid] = frozenset()) -> tuple[Uuid, ...]:
        """The directory ids mounted at ``path`` (on ``node_id`` when given), in (node, id) order: a path names
        one disk only together with its node, since every broker of a cluster usually has ``/mnt/d1``. When
        several ids share the path and some are ``online`` (registered by a broker now), only those: the others
        are disks replaced there before (retired inventory rows)."""
        found = [(loc.node_id, d) for d, loc in self.locations.items()
                 if loc.path == path and (node_id is None or loc.node_id == node_id)]
        if len(found) > 1 and any(d in online for _node, d in found):
            found = [(n, d) for n, d in found if d in online]
        return tuple(d for _node, d in sorted(found, key=lambda f: (f[0] is None, f[0] or 0, str(f[1]))))


def _directory_paths(locations: dict[Uuid, DirLocation], conflicts: _Conflicts) -> DirectoryPaths:
    return DirectoryPaths(locations=MappingProxyType(locations), conflicts=conflicts)


def format_directory(directory: Uuid, paths: DirectoryPaths | None = None, broker_id: int | None = None) -> str:
    """How every report names a directory: ``broker 3 /mnt/d2 (P2aL9r4s…)`` when the inventory knows its path, the
    bare Uuid otherwise, and the placeholder's name (``UNASSIGNED``, ``MIGRATING``, ``LOST``) for a reserved id —
    its 22 base64 characters mean nothing to a person.

    The broker is the metadata's owner of the replica or directory (``broker_id``), else the node whose
    ``meta.properties`` holds the path: the report is about what the metadata says, the path is what the
    operator needs to find the disk.
    """
    if is_reserved(directory):
        return DirectoryState.of(directory).value
    loc = paths.get(directory) if paths is not None else None
    if loc is None:
        return str(directory)
    node = broker_id if broker_id is not None else loc.node_id
    prefix = f"broker {node} " if node is not None else ""
    return f"{prefix}{loc.path} ({str(directory)[:SHORT_ID_CHARS]}…)"


@dataclass(frozen=True, slots=True)
class DirectoryRef:
    """A directory as a report shows it: the Uuid, the broker the metadata places it on, the path and node from
    the inventory (None when unknown), its placeholder state, and the :func:`format_directory` label."""

    directory: Uuid
    broker_id: int | None
    path: str | None
    node_id: int | None
    state: DirectoryState
    label: str


def directory_ref(directory: Uuid, paths: DirectoryPaths | None = None, broker_id: int | None = None) -> DirectoryRef:
    loc = paths.get(directory) if paths is not None and not is_reserved(directory) else None
    return DirectoryRef(directory=directory, broker_id=broker_id, path=loc.path if loc else None,
                        node_id=loc.node_id if loc else None, state=DirectoryState.of(directory),
                        label=format_directory(directory, paths, broker_id))


@dataclass(frozen=True, slots=True)
class PartitionRef:
    """A partition by topic id, with the topic's name when it was seen (names outlive nothing: a deleted topic's
    name is the one it had then)."""

    topic_id: Uuid
    topic_name: str
    partition_id: int

    @property
    def label(self) -> str:
        """Kafka's ``TopicPartition.toString``: ``orders-0``."""
        return f"{self.topic_name}-{self.partition_id}"


def _partition_order(ref: PartitionRef) -> tuple[str, int, str]:
    return (ref.topic_name, ref.partition_id, str(ref.topic_id))


_Item = TypeVar("_Item")


def in_partition_order(items: Iterable[_Item], name_and_id: Callable[[_Item], tuple[str, int]],
                       ref_of: Callable[[_Item], PartitionRef]) -> list[_Item]:
    """``items`` sorted by their partitions' :func:`_partition_order`: by ``name_and_id`` (an ``attrgetter`` of
    the topic's name and the partition id: a key built in C), and by the topic id's text only when two topics of one
    name are among them (a topic deleted and created again), which a sort on the first two parts would leave in
    their given order. A report sorts hundreds of thousands of partitions so; the full key formatted an id for each."""
    out = sorted(items, key=name_and_id)
    # Two topics of one name show as equal neighbours once sorted: compared in C, where a set of the keys hashed
    # every one of them (4.4 s of a 2 M cluster's report).
    keys = list(map(name_and_id, out))
    if any(map(operator.eq, keys, itertools.islice(keys, 1, None))):
        out.sort(key=lambda item: _partition_order(ref_of(item)))
    return out


_NAME_AND_ID: Final = operator.attrgetter("topic_name", "partition_id")


def _same(ref: PartitionRef) -> PartitionRef:
    return ref


#: An offline replica's topic name and partition id, for :func:`in_partition_order`.
_PARTITION_NAME_AND_ID: Final = operator.attrgetter("partition.topic_name", "partition.partition_id")


def _offline_replica_ref(replica: OfflineReplica) -> PartitionRef:
    return replica.partition


def format_partitions(refs: Sequence[PartitionRef], limit: int = SUMMARY_PARTITIONS, *, in_order: bool = False) -> str:
    """``orders-0, orders-2 and 3 more``: a one-line list that stays one line on a 1,000-partition disk.
    ``in_order``: the caller's list is in partition order already (a subset of an incident's partitions, which
    :meth:`_Incident.freeze` sorted), so it is neither checked nor sorted: the check alone read every partition of
    every list, millions of them in a 2 M-partition cluster's timeline, to show the first few."""
    # The report's lists come in partition order already (subsets of an incident's or a disk's sorted partitions):
    # strictly ascending names and ids need no sort, nor the check for two topics of one name a sort makes.
    if in_order:
        ordered = refs
    else:
        keys = list(map(_NAME_AND_ID, refs))
        ordered = (refs if all(map(operator.lt, keys, itertools.islice(keys, 1, None)))
                   else in_partition_order(refs, _NAME_AND_ID, _same))
    # Only the labels shown: a failed disk's list holds thousands of partitions.
    labels = [r.label for r in ordered[:limit]]
    if len(ordered) <= limit:
        return ", ".join(labels)
    return f"{', '.join(labels)} and {len(ordered) - limit} more"


_UNITS: Final = (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1))


def format_duration_ms(ms: int) -> str:
    """``850 ms``, ``42s``, ``5m 3s``, ``2h 5m``, ``3d 4h``: the two largest units, as an incident log says it."""
    if ms < 1000:
        return f"{ms} ms"
    seconds = ms // 1000
    for (name, size), (next_name, next_size) in itertools.pairwise(_UNITS):
        if seconds >= size:
            rest = seconds % size // next_size
            return f"{seconds // size}{name} {rest}{next_name}" if rest else f"{seconds // size}{name}"
    return f"{seconds}s"


def format_span(start: LogPosition, end: LogPosition) -> str:
    """``120 offsets (5m 3s)``: how long something lasted in the log, and on the clock when both times are known."""
    offsets = start.offsets_until(end)
    ms = start.ms_until(end)
    text = f"{offsets} offset{'s' if offsets != 1 else ''}"
    return text if ms is None else f"{text} ({format_duration_ms(ms)})"


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else (plural or word + 's')}"


# ---------------------------------------------------------------------------------------------------------------
# History: incidents


class IncidentKind(StrEnum):
    """What went wrong."""

    #: A log directory left its broker's online set while the broker stayed registered.
    DIRECTORY_FAILURE = "DIRECTORY_FAILURE"
    #: A broker stopped serving: fenced, or unregistered while unfenced.
    BROKER_OFFLINE = "BROKER_OFFLINE"


class Trigger(StrEnum):
    """Which record showed it (the metadata never says "offline"; an online set shrinks, a flag flips)."""

    #: A BrokerRegistrationChangeRecord: LogDirs without the directory (``handleDirectoriesOffline``), or fenced.
    REGISTRATION_CHANGE = "REGISTRATION_CHANGE"
    #: A RegisterBrokerRecord: the broker restarted without the directory, or registered fenced.
    REREGISTRATION = "REREGISTRATION"
    #: A FenceBrokerRecord (older metadata versions, or session expiry written that way).
    FENCE = "FENCE"
    #: An UnregisterBrokerRecord.
    UNREGISTRATION = "UNREGISTRATION"
    #: Already so in the image the history starts from (a snapshot): when it began is not in the input.
    BASE_IMAGE = "BASE_IMAGE"


class Resolution(StrEnum):
    """How an incident ended."""

    #: The broker registered again with the directory online.
    DIRECTORY_RETURNED = "DIRECTORY_RETURNED"
    #: Every replica the failed directory held now lives elsewhere (moved, reassigned, or its topic deleted).
    DIRECTORY_EVACUATED = "DIRECTORY_EVACUATED"
    #: The broker was unfenced.
    BROKER_UNFENCED = "BROKER_UNFENCED"


@dataclass(frozen=True, slots=True)
class AffectedPartition:
    """One partition an incident hit, what happened to it in the incident's own batch (the controller writes the
    leader/ISR changes and the registration change atomically), and when it recovered.

    ``lost_leadership``: the broker led it before the batch and not after. ``lost_isr``: the broker left its ISR in
    the batch. ``leaderless``: no leader after the batch. Then the first position at which it had a leader again
    (``leader_restored``), the broker was back in its ISR (``isr_restored``), the broker's replica left the failed
    directory or the broker left the replica set (``moved``), or the topic was deleted (``deleted``). A position
    stays None when it has not happened (yet).
    """

    partition: PartitionRef
    lost_leadership: bool
    lost_isr: bool
    leaderless: bool
    leader_restored: LogPosition | None = None
    isr_restored: LogPosition | None = None
    moved: LogPosition | None = None
    deleted: LogPosition | None = None


@dataclass(frozen=True, slots=True)
class Incident:
    """A directory failure or a broker going offline, from the record that showed it to the one that ended it.

    ``replicas_offline`` counts the broker's replicas the incident took offline (on the directory, or on the
    broker); ``partitions`` lists, for a directory failure, every partition with a replica on it, and for a broker
    going offline the partitions that lost the broker from leadership or ISR in the same batch or were left
    leaderless (a fenced broker's followers outside the ISR need no follow-up), in partition order (topic name,
    partition id, topic id: :func:`in_partition_order`).
    """

    id: int
    kind: IncidentKind
    broker_id: int
    directory: Uuid | None
    trigger: Trigger
    started: LogPosition
    replicas_offline: int
    partitions: tuple[AffectedPartition, ...]
    ended: LogPosition | None = None
    resolution: Resolution | None = None

    @property
    def is_open(self) -> bool:
        return self.ended is None

    @property
    def lost_leadership(self) -> tuple[AffectedPartition, ...]:
        return tuple(p for p in self.partitions if p.lost_leadership)

    @property
    def lost_isr(self) -> tuple[AffectedPartition, ...]:
        return tuple(p for p in self.partitions if p.lost_isr)

    @property
    def leaderless(self) -> tuple[AffectedPartition, ...]:
        return tuple(p for p in self.partitions if p.leaderless)


@dataclass(frozen=True, slots=True)
class SeriesPoint:
    """The cluster's health after one batch: offline replicas, partitions without a leader, failed directories
    (open directory-failure incidents). The tracker keeps a point only when a count changed."""

    at: LogPosition
    offline_replicas: int
    leaderless_partitions: int
    failed_directories: int


@dataclass(frozen=True, slots=True)
class ReportHistory:
    """Everything a report needs from the past, as a plain value: the range of the log it covers (``since`` is the
    starting image's position, ``until`` the last batch seen), incidents, the offline series, and since when each
    currently leaderless partition and each pending placement has been so.

    A :class:`ReportTracker` produces it from a replay; a reader of the Spark job's tables can produce the same.
    """

    since: LogPosition
    until: LogPosition
    incidents: tuple[Incident, ...] = ()
    offline_series: tuple[SeriesPoint, ...] = ()
    leaderless_since: Mapping[PartitionKey, LogPosition] = field(default_factory=lambda: MappingProxyType({}))
    pending_since: Mapping[ReplicaKey, LogPosition] = field(default_factory=lambda: MappingProxyType({}))
    #: Closed incidents forgotten to bound memory (``max_closed_incidents``), oldest first.
    dropped_incidents: int = 0


# -- feeding: batches and transactions --------------------------------------------------------------------------


class BatchFeed(ABC):
    """Turns a stream of :class:`LogEntry` values into committed batches, replays each once, and hands it to
    :meth:`observe_batch` with the image it produced.

    Entries are grouped by ``batch_base_offset`` (the controller writes a reaction — ISR shrinks and the
    registration change — as one batch, and "in the same batch" is what ties a failure to its effects); an entry
    without one is a batch of its own, since nothing says what it was written with. Metadata transactions are
    honoured as by :class:`~jbod_model.replay.Replayer`: their records become visible together at the
    EndTransactionRecord, and not at all after an AbortTransactionRecord.

    A caller that replays on its own (and so knows the image after each batch) calls :meth:`observe_batch`
    directly with committed entries.
    """

    def __init__(self) -> None:
        self._buffer: list[LogEntry] = []
        self._buffer_base: int | None = None
        self._transactions = TransactionBuffer()
        # The latest skipped range when the buffered batch's first entry was read (policy skip): a
        # transaction the batch leaves open is interrupted by a later one (TransactionBuffer.offer).
        self._buffer_gap: str | None = None

    @property
    @abstractmethod
    def image(self) -> MetadataImage:
        """The image after the last observed batch."""

    @abstractmethod
    def observe_batch(self, entries: Sequence[LogEntry], image_after: MetadataImage) -> None:
        """Take one committed batch: ``entries`` replayed onto :attr:`image` gave ``image_after``."""

    def feed(self, entry: LogEntry) -> None:
        """Buffer one entry; a new batch closes the buffered one first."""
        base = entry.batch_base_offset
        if self._buffer and (base is None or self._buffer_base is None or base != self._buffer_base):
            self.end_batch()
        if not self._buffer:
            self._buffer_base, self._buffer_gap = base, current_gap()
        self._buffer.append(entry)

    def feed_all(self, entries: Iterable[LogEntry]) -> None:
        """Feed entries and close the last batch."""
        for entry in entries:
            self.feed(entry)
        self.end_batch()

    def feed_batch(self, entries: Iterable[LogEntry]) -> None:
        """Take one whole batch (closing any batch still buffered first)."""
        self.end_batch()
        self._buffer = list(entries)
        self._buffer_base, self._buffer_gap = None, current_gap()
        self.end_batch()

    def end_batch(self) -> None:
        """Replay and observe the buffered batch. Raises :class:`ReplayFault` (dropping the batch) when it
        cannot be replayed."""
        entries, self._buffer, self._buffer_base = self._buffer, [], None
        committed = self._transactions.settle_all(entries, self._buffer_gap)
        if not committed:
            return
        delta = MetadataDelta(self.image)
        for entry in committed:
            try:
                delta.replay(entry.record, entry.offset)
            except ReplayFault as fault:
                raise fault.located(offset=entry.offset, source=entry.source) from None
        self.observe_batch(committed, delta.apply())


# -- the incident tracker ---------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Affected:
    """An :class:`AffectedPartition` while it is followed (mutable: recoveries are filled in as batches arrive;
    callers only ever get frozen copies)."""

    ref: PartitionRef
    lost_leadership: bool
    lost_isr: bool
    leaderless: bool
    leader_restored: LogPosition | None = None
    isr_restored: LogPosition | None = None
    moved: LogPosition | None = None
    deleted: LogPosition | None = None

    def freeze(self) -> AffectedPartition:
        # Positionally, without the frozen keyword __init__: a 200 k cluster's report freezes 633 k of them.
        return _new_affected_partition(self.ref, self.lost_leadership, self.lost_isr, self.leaderless,
                                       self.leader_restored, self.isr_restored, self.moved, self.deleted)


# Built once per partition an incident hits (hundreds of thousands in a large cluster's report), without their
# keyword ``__init__`` (``jbod_model.slots``; none of them has a ``__post_init__``). Every field, in order.
#: ``(partition, lost_leadership, lost_isr, leaderless, leader_restored, isr_restored, moved, deleted)``
_new_affected_partition: Final = slot_constructor(AffectedPartition)
#: ``(ref, lost_leadership, lost_isr, leaderless, leader_restored, isr_restored, moved, deleted)``
_new_affected: Final = slot_constructor(_Affected)
#: ``(topic_id, topic_name, partition_id)``
_new_partition_ref: Final = slot_constructor(PartitionRef)
#: An incident's partition's topic name and partition id, for :func:`in_partition_order`.
_AFFECTED_NAME_AND_ID: Final = operator.attrgetter("ref.topic_name", "ref.partition_id")


def _affected_ref(a: _Affected) -> PartitionRef:
    return a.ref


@dataclass(slots=True)
class _Incident:
    """An :class:`Incident` while it is tracked (mutable; frozen by :meth:`freeze` for callers)."""

    id: int
    kind: IncidentKind
    broker_id: int
    directory: Uuid | None
    trigger: Trigger
    started: LogPosition
    replicas_offline: int
    partitions: dict[PartitionKey, _Affected]
    ended: LogPosition | None = None
    resolution: Resolution | None = None
    #: How many of ``partitions`` have neither moved nor gone: a directory failure is evacuated when none has. Kept
    #: by :meth:`IncidentTracker._follow_up` so that each follow-up does not look at every partition of a disk.
    staying: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self.staying = sum(1 for a in self.partitions.values() if a.moved is None and a.deleted is None)

    def freeze(self) -> Incident:
        parts = tuple(a.freeze() for a in in_partition_order(self.partitions.values(), _AFFECTED_NAME_AND_ID,
                                                             _affected_ref))
        return Incident(id=self.id, kind=self.kind, broker_id=self.broker_id, directory=self.directory,
                        trigger=self.trigger, started=self.started, replicas_offline=self.replicas_offline,
                        partitions=parts, ended=self.ended, resolution=self.resolution)


def _settled(incident: _Incident, a: _Affected) -> bool:
    """Nothing more to learn about this partition: gone, moved, or recovered from everything it lost once the
    incident is over (a directory failure's replica may still move off the disk while it is open)."""
    if a.deleted is not None or a.moved is not None:
        return True
    leader_ok = not a.leaderless or a.leader_restored is not None
    isr_ok = not a.lost_isr or a.isr_restored is not None
    return leader_ok and isr_ok and incident.ended is not None


def _moved(incident: _Incident, directory: Uuid | None) -> bool:
    """The incident's broker no longer holds a replica of the partition where it hit it, given the broker's
    directory of the partition now (None: out of the replica set): out of the replica set, or, while a directory
    failure is open, in another directory."""
    return _moved_off(_open_failure(incident), directory)


def _open_failure(incident: _Incident) -> Uuid | None:
    """The failed directory of a directory failure still open; None for any other incident."""
    return incident.directory if incident.kind is IncidentKind.DIRECTORY_FAILURE and incident.ended is None else None


def _moved_off(failed: Uuid | None, directory: Uuid | None) -> bool:
    """:func:`_moved` given the incident's :func:`_open_failure`."""
    return directory is None or (failed is not None and directory != failed)


#: What a follow-up reads of a partition after a batch, as one incident's broker sees it: the leader, whether the
#: broker is in the ISR, and the broker's directory of it (None: it holds no replica of it). None: the partition is
#: gone.
Seen = tuple[int, bool, Uuid | None] | None


def seen_by(part: PartitionRegistration | None, broker_id: int) -> Seen:
    """:data:`Seen` read off a registration (None: the partition is gone)."""
    if part is None:
        return None
    b = broker_id
    return part.leader, b in part.isr, part.directory(b) if b in part.replicas else None


@dataclass(frozen=True, slots=True)
class FollowAsks:
    """Followed partitions to look ahead for, as parallel columns, item i of each one (partition, incident following
    it) pair: what :meth:`PartitionHistory.first_seen` reads of the partition's states after ``afters[i]`` as
    broker ``broker_ids[i]`` sees it, ``directories[i]`` being the disk whose failure hit it (None: the incident is
    not a directory failure)."""

    partitions: Sequence[PartitionKey]
    broker_ids: Sequence[int]
    directories: Sequence[Uuid | None]
    afters: Sequence[int]
    #: The store's own number for each partition, where its :meth:`PartitionHistory.hosted_change` gave one
    #: (:attr:`HostedChange.handles`; -1: none), so that it need not look the partition up again.
    handles: Sequence[int] = ()

    def __len__(self) -> int:
        return len(self.partitions)


@dataclass(frozen=True, slots=True)
class FirstSeen:
    """For each pair of a :class:`FollowAsks`, the first batch end after the pair's ``after`` at which the
    partition's state (the one after the batch, as a follow-up reads it: :func:`seen_by`) shows each thing a
    follow-up can learn — a leader, the broker in the ISR, the broker outside the replicas, the broker's replica in
    another directory than the pair's, the partition gone (only where it existed at ``after``). :data:`NEVER`
    where no batch end does; a state that starts and is replaced inside one batch is never seen. Each column an
    ``array('q')`` (as :class:`SparseIncidentTracker` keeps them: a large cluster's report asks for millions)."""

    leader: Sequence[int]
    in_isr: Sequence[int]
    out: Sequence[int]
    off_disk: Sequence[int]
    gone: Sequence[int]

    @classmethod
    def of_states(cls, asks: FollowAsks, ends: Sequence[int],
                  state_at: Callable[[PartitionKey, int], PartitionRegistration | None]) -> FirstSeen:
        """The columns read off the registrations themselves (``state_at(pk, offset)``: the partition after the
        batch that ends at ``offset``, or at an ask's ``after``; None: it does not exist then): what a store's
        must equal."""
        columns: tuple[array[int], ...] = tuple(array("q") for _ in range(5))
        for pk, b, failed, after in zip(asks.partitions, asks.broker_ids, asks.directories, asks.afters,
                                        strict=True):
            first = [NEVER] * 5
            existed = state_at(pk, after) is not None
            for end in ends:
                if end <= after:
                    continue
                seen = seen_by(state_at(pk, end), b)
                if seen is None:
                    if existed and first[4] == NEVER:
                        first[4] = end
                    continue
                leader, in_isr, directory = seen
                for i, shown in enumerate((leader != NO_LEADER, in_isr, directory is None,
                                           directory is not None and failed is not None and directory != failed)):
                    if shown and first[i] == NEVER:
                        first[i] = end
            for column, value in zip(columns, first, strict=True):
                column.append(value)
        return cls(*columns)


def _trigger_of(record: Record) -> Trigger:
    """The trigger named by the last broker record of a batch for that broker."""
    if isinstance(record, RegisterBrokerRecord):
        return Trigger.REREGISTRATION
    if isinstance(record, UnregisterBrokerRecord):
        return Trigger.UNREGISTRATION
    if isinstance(record, FenceBrokerRecord):
        return Trigger.FENCE
    return Trigger.REGISTRATION_CHANGE


def _pk_order(pk: PartitionKey) -> tuple[str, int]:
    return (str(pk[0]), pk[1])


class IncidentTracker(BatchFeed):
    """Follows directory failures and brokers going offline through a metadata log, batch by batch.

    A directory failure is a directory leaving a registered broker's online set: a BrokerRegistrationChangeRecord
    whose LogDirs lack it (``handleDirectoriesOffline``), or a RegisterBrokerRecord without it (the broker restarted
    without the disk). It ends when a registration lists it again, or when every replica it held lives elsewhere.
    A broker goes offline when it is fenced or unregistered while unfenced, and is back when unfenced. For each
    incident the tracker records which partitions lost the broker as leader or from the ISR *in the same batch*,
    then follows those partitions until they have a leader again, the broker is back in their ISR, or the replica
    moved — and no further.

    Memory is bounded by the cluster, not the log: the current image, an index broker → partitions it hosts (to
    find a failed disk's replicas without scanning every partition), the offline replicas, per incident the
    partitions it hit, at most ``max_closed_incidents`` finished incidents (older ones are dropped and counted) and
    at most ``max_series_points`` points of the offline series (thinned, keeping peaks).

    Start it from the image the log continues from (a snapshot's, or empty); what is already broken there becomes
    an incident with trigger :attr:`Trigger.BASE_IMAGE`.
    """

    def __init__(self, image: MetadataImage = EMPTY_IMAGE, *, max_closed_incidents: int | None = 1000,
                 max_series_points: int = 10_000) -> None:
        super().__init__()
        if max_series_points < 3:
            raise ValueError("max_series_points must be at least 3")
        self._image = image
        self._max_closed = max_closed_incidents
        self._max_points = max_series_points
        self._since = LogPosition(image.last_offset)
        self._last_ts: int | None = None
        self._next_id = 1
        self._incidents: dict[int, _Incident] = {}
        self._closed: deque[int] = deque()
        self._dropped = 0
        self._open_dirs: dict[tuple[int, Uuid], _Incident] = {}
        self._open_brokers: dict[int, _Incident] = {}
        self._watch: dict[PartitionKey, list[tuple[_Incident, _Affected]]] = {}
        self._last_dirs: dict[int, frozenset[Uuid]] = {}
        self._hosted: dict[int, set[PartitionKey]] = {}
        self._offline: dict[ReplicaKey, OfflineReason] = {}
        self._leaderless: dict[PartitionKey, LogPosition] = {}
        self._series: list[SeriesPoint] = []
        self._seed(image)

    # -- results --------------------------------------------------------------------------------------------

    @property
    def image(self) -> MetadataImage:
        return self._image

    @property
    def since(self) -> LogPosition:
        """Where the history starts: the position of the starting image."""
        return self._since

    @property
    def until(self) -> LogPosition:
        """The last position observed, with the latest timestamp seen."""
        return LogPosition(self._image.last_offset, self._last_ts)

    def incidents(self) -> tuple[Incident, ...]:
        """Every incident kept, in the order they started."""
        return tuple(i.freeze() for i in self._incidents.values())

    def open_incidents(self) -> tuple[Incident, ...]:
        return tuple(i.freeze() for i in self._incidents.values() if i.ended is None)

    def offline_series(self) -> tuple[SeriesPoint, ...]:
        return tuple(self._series)

    def leaderless_since(self) -> Mapping[PartitionKey, LogPosition]:
        return MappingProxyType(dict(self._leaderless))

    @property
    def dropped_incidents(self) -> int:
        return self._dropped

    def history(self, pending_since: Mapping[ReplicaKey, LogPosition]) -> ReportHistory:
        """What this tracker knows as a :class:`ReportHistory`, with the placement clocks (which it does not keep)
        from elsewhere: an :class:`InvariantTracker` fed the same batches, or
        :func:`jbod_model.report_rows.pending_since` on the tables' rows."""
        return ReportHistory(since=self.since, until=self.until, incidents=self.incidents(),
                             offline_series=self.offline_series(), leaderless_since=self.leaderless_since(),
                             pending_since=MappingProxyType(dict(pending_since)), dropped_incidents=self._dropped)

    # -- observing ------------------------------------------------------------------------------------------

    def observe_batch(self, entries: Sequence[LogEntry], image_after: MetadataImage) -> None:
        if not entries:
            return
        before = self._image
        ts = next((e.timestamp for e in entries if e.timestamp is not None), None)
        touched: dict[PartitionKey, int] = {}
        removed: dict[Uuid, int] = {}
        brokers: dict[int, tuple[int, Record]] = {}
        for entry in entries:
            rec = entry.record
            if isinstance(rec, (PartitionRecord, PartitionChangeRecord)):
                touched[(rec.topic_id, rec.partition_id)] = entry.offset
            elif isinstance(rec, RemoveTopicRecord):
                removed[rec.topic_id] = entry.offset
            elif isinstance(rec, (RegisterBrokerRecord, BrokerRegistrationChangeRecord, UnregisterBrokerRecord)):
                brokers[rec.broker_id] = (entry.offset, rec)
            elif isinstance(rec, (FenceBrokerRecord, UnfenceBrokerRecord)):
                brokers[rec.id] = (entry.offset, rec)
        gone: dict[PartitionKey, int] = {}
        for tid, offset in removed.items():
            topic = before.topics.by_id.get(tid)
            for pid in topic.partitions if topic is not None else ():
                if (tid, pid) not in touched:
                    gone[(tid, pid)] = offset
        self._observe(before, image_after, touched, gone,
                      {b: (offset, _trigger_of(rec)) for b, (offset, rec) in brokers.items()},
                      LogPosition(entries[-1].offset, ts))

    def _observe(self, before: MetadataImage, after: MetadataImage, touched: Mapping[PartitionKey, int],
                 gone: Mapping[PartitionKey, int], brokers: Mapping[int, tuple[int, Trigger]],
                 at_end: LogPosition) -> None:
        """One batch, from what it did: the partitions its records touched and those its topic removals deleted
        (each with the offset of its last record on it), the brokers its records named (the last record's offset
        and the trigger it names), and where it ended (its last committed offset, its first time)."""
        ts = at_end.timestamp
        if ts is not None:
            self._last_ts = ts
        closed_before = len(self._closed)
        # 1. What became of partitions earlier incidents hit (before this batch's own incidents start: a leader
        #    lost and re-elected in one batch was never missing). Follow-ups are dated by their batch: the
        #    controller answers one AlterPartition or reassignment with one batch, and the timeline groups by it.
        self._follow_ups(after, (*touched, *gone), at_end)
        # 2. Broker transitions start and end incidents, judged against the index as it was before the batch.
        changed = [b for b in sorted(brokers)
                   if before.cluster.brokers.get(b) != after.cluster.brokers.get(b)]
        for b in changed:
            offset, trigger = brokers[b]
            self._broker_transition(b, before, after, LogPosition(offset, ts), trigger)
        self._forget_closed(closed_before)
        # 3. Indexes and the series.
        for pk, offset in gone.items():
            self._index(after, pk, before.topics.get_partition(*pk), None, LogPosition(offset, ts))
        for pk, offset in touched.items():
            self._index(after, pk, before.topics.get_partition(*pk), after.topics.get_partition(*pk),
                        LogPosition(offset, ts))
        for b in changed:
            reg = after.cluster.brokers.get(b)
            if reg is not None and reg.directories:
                self._last_dirs[b] = frozenset(reg.directories)
            self._reindex_broker(after, b)
        self._image = after
        self._add_point(at_end)

    # -- incidents ------------------------------------------------------------------------------------------

    def _broker_transition(self, b: int, before: MetadataImage, after: MetadataImage, at: LogPosition,
                           trigger: Trigger) -> None:
        old, new = before.cluster.brokers.get(b), after.cluster.brokers.get(b)
        new_dirs = frozenset(new.directories) if new is not None else frozenset()
        for (owner, d), incident in list(self._open_dirs.items()):
            if owner == b and d in new_dirs:
                self._close(incident, at, Resolution.DIRECTORY_RETURNED)
        for d in sorted(self._failing_dirs(b, old, new)):
            if (b, d) not in self._open_dirs:
                self._start_directory_failure(b, d, before, after, at, trigger)
        was_up = old is not None and not old.fenced
        is_up = new is not None and not new.fenced
        if was_up and not is_up:
            self._start_broker_offline(b, before, after, at, trigger)
        elif is_up and b in self._open_brokers:
            self._close(self._open_brokers[b], at, Resolution.BROKER_UNFENCED)

    def _failing_dirs(self, b: int, old: BrokerRegistration | None,
                      new: BrokerRegistration | None) -> frozenset[Uuid]:
        """The directories of broker ``b`` whose failure its registration's change from ``old`` to ``new`` starts
        (unless one is open already): listed before, not after.

        Compared with the last registration that listed directories: a broker that unregistered and comes back
        without a disk has lost it as surely as one whose registration shrank. An empty list means "predates
        directory assignment, all online" (KAFKA-16162), never "all failed"."""
        new_dirs = frozenset(new.directories) if new is not None else frozenset()
        old_dirs = frozenset(old.directories) if old is not None else self._last_dirs.get(b, frozenset())
        if new is None or not old_dirs or not new_dirs:
            return frozenset()
        return old_dirs - new_dirs

    def _affected(self, pk: PartitionKey, b: int, before: MetadataImage,
                  after: MetadataImage) -> tuple[PartitionRegistration, _Affected] | None:
        part = before.topics.get_partition(*pk)
        topic = before.topics.by_id.get(pk[0])
        if part is None or topic is None or b not in part.replicas:
            return None
        now = after.topics.get_partition(*pk)
        return part, _Affected(
            ref=PartitionRef(pk[0], topic.name, pk[1]),
            lost_leadership=part.leader == b and (now is None or now.leader != b),
            lost_isr=b in part.isr and (now is None or b not in now.isr),
            leaderless=now is not None and now.leader == NO_LEADER)

    def _start_directory_failure(self, b: int, d: Uuid, before: MetadataImage, after: MetadataImage,
                                 at: LogPosition, trigger: Trigger) -> None:
        partitions: dict[PartitionKey, _Affected] = {}
        # In no particular order: an incident's partitions are sorted when it is frozen for callers, and nothing
        # else depends on their order.
        for pk in self._hosted.get(b, ()):
            found = self._affected(pk, b, before, after)
            if found is not None and found[0].directory(b) == d:
                partitions[pk] = found[1]
        self._open(_Incident(id=self._next_id, kind=IncidentKind.DIRECTORY_FAILURE, broker_id=b, directory=d,
                             trigger=trigger, started=at, replicas_offline=len(partitions), partitions=partitions))

    def _start_broker_offline(self, b: int, before: MetadataImage, after: MetadataImage, at: LogPosition,
                              trigger: Trigger) -> None:
        hosted = self._hosted.get(b, ())
        partitions: dict[PartitionKey, _Affected] = {}  # in no particular order, as for a directory failure
        for pk in hosted:
            found = self._affected(pk, b, before, after)
            if found is None:
                continue
            part, a = found
            # Only what the fencing changed needs following; a follower outside the ISR just waits for unfencing.
            a.leaderless = a.leaderless and part.leader != NO_LEADER
            if a.lost_leadership or a.lost_isr or a.leaderless:
                partitions[pk] = a
        self._open(_Incident(id=self._next_id, kind=IncidentKind.BROKER_OFFLINE, broker_id=b, directory=None,
                             trigger=trigger, started=at, replicas_offline=len(hosted), partitions=partitions))

    def _open(self, incident: _Incident) -> None:
        self._next_id += 1
        self._incidents[incident.id] = incident
        if incident.kind is IncidentKind.DIRECTORY_FAILURE:
            assert incident.directory is not None
            self._open_dirs[(incident.broker_id, incident.directory)] = incident
        else:
            self._open_brokers[incident.broker_id] = incident
        self._watch_partitions(incident)

    def _watch_partitions(self, incident: _Incident) -> None:
        """Follow the partitions an incident just opened hit."""
        # A partition followed for an earlier, finished incident of the same broker is followed by this one now:
        # the old follow-up can no longer be told apart from the new.
        watch, b = self._watch, incident.broker_id
        for pk, a in incident.partitions.items():
            earlier = watch.get(pk)
            if earlier is None:  # most partitions an incident hits are followed by no other (a list of one)
                watch[pk] = [(incident, a)]
                continue
            watchers = [(i, x) for i, x in earlier if not (i.broker_id == b and i.ended is not None)]
            watchers.append((incident, a))
            watch[pk] = watchers

    def _close(self, incident: _Incident, at: LogPosition, resolution: Resolution) -> None:
        incident.ended, incident.resolution = at, resolution
        if incident.kind is IncidentKind.DIRECTORY_FAILURE:
            assert incident.directory is not None
            self._open_dirs.pop((incident.broker_id, incident.directory), None)
        else:
            self._open_brokers.pop(incident.broker_id, None)
        self._unwatch_settled(incident)
        self._closed.append(incident.id)

    def _unwatch_settled(self, incident: _Incident) -> None:
        """Stop following the partitions an incident just closed has nothing more to learn of."""
        for pk, a in incident.partitions.items():
            if _settled(incident, a):
                self._unwatch(pk, incident)

    def _forget_closed(self, first: int) -> None:
        """Keep at most ``max_closed_incidents`` closed incidents, forgetting the oldest. Those the batch closed (from
        ``first`` on in ``_closed``) count as closed in the order they ended, then by id: the order a tracker visits
        a batch's partitions in (the records' order in a replay, the keys' order in the sparse tracker) must not
        decide which of them is forgotten."""
        if len(self._closed) - first > 1:
            batch = [self._closed.pop() for _ in range(len(self._closed) - first)]
            self._closed.extend(sorted(batch, key=lambda i: (self._ended_offset(i), i)))
        if self._max_closed is not None:
            while len(self._closed) > self._max_closed:
                old = self._incidents.pop(self._closed.popleft())
                for pk in old.partitions:
                    self._unwatch(pk, old)
                self._dropped += 1

    def _ended_offset(self, incident_id: int) -> int:
        ended = self._incidents[incident_id].ended
        assert ended is not None
        return ended.offset

    def _unwatch(self, pk: PartitionKey, incident: _Incident) -> None:
        watchers = [(i, a) for i, a in self._watch.get(pk, ()) if i is not incident]
        if watchers:
            self._watch[pk] = watchers
        else:
            self._watch.pop(pk, None)

    def _follow_ups(self, after: MetadataImage, keys: Iterable[PartitionKey], at: LogPosition) -> None:
        """Step 1 of a batch: follow up each of ``keys`` (the partitions its records touched or deleted) in the
        image after it."""
        for pk in keys:
            self._follow_up(pk, after.topics.get_partition(*pk), at)

    def _follow_up(self, pk: PartitionKey, part: PartitionRegistration | None, at: LogPosition) -> None:
        watchers = self._watch.get(pk)
        if not watchers:
            return
        keep: list[tuple[_Incident, _Affected]] = []
        evacuating: list[_Incident] = []
        for incident, a in watchers:
            staying = a.moved is None and a.deleted is None
            seen = seen_by(part, incident.broker_id)
            if seen is None:
                a.deleted = a.deleted or at
            else:
                leader, in_isr, directory = seen
                if a.leaderless and a.leader_restored is None and leader != NO_LEADER:
                    a.leader_restored = at
                if a.lost_isr and a.isr_restored is None and in_isr:
                    a.isr_restored = at
                if a.moved is None and _moved(incident, directory):
                    a.moved = at
            if staying and (a.moved is not None or a.deleted is not None):
                incident.staying -= 1
            if _settled(incident, a):
                if incident.kind is IncidentKind.DIRECTORY_FAILURE and incident.ended is None:
                    evacuating.append(incident)
            else:
                keep.append((incident, a))
        if keep:
            self._watch[pk] = keep
        else:
            self._watch.pop(pk, None)
        for incident in evacuating:
            if incident.ended is None and incident.partitions and not incident.staying:
                self._close(incident, at, Resolution.DIRECTORY_EVACUATED)

    # -- state: hosted replicas, offline replicas, leaderless partitions --------------------------------------

    def _seed(self, image: MetadataImage) -> None:
        at = self._since
        for t, p, registration in image.topics.partitions():
            self._index(image, (t.id, p), None, registration, at)
        for broker in image.cluster.brokers.values():
            if broker.directories:
                self._last_dirs[broker.id] = frozenset(broker.directories)
        failed: dict[tuple[int, Uuid], dict[PartitionKey, _Affected]] = {}
        for (tid, pid, b), reason in sorted(self._offline.items(), key=lambda kv: (str(kv[0][0]), kv[0][1:])):
            if reason is not OfflineReason.DIRECTORY_OFFLINE:
                continue
            part = image.topics.get_partition(tid, pid)
            topic = image.topics.by_id.get(tid)
            assert part is not None and topic is not None
            failed.setdefault((b, part.directory(b)), {})[(tid, pid)] = _Affected(
                ref=PartitionRef(tid, topic.name, pid), lost_leadership=False, lost_isr=False,
                leaderless=part.leader == NO_LEADER)
        for (b, d), partitions in sorted(failed.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
            self._open(_Incident(id=self._next_id, kind=IncidentKind.DIRECTORY_FAILURE, broker_id=b, directory=d,
                                 trigger=Trigger.BASE_IMAGE, started=at, replicas_offline=len(partitions),
                                 partitions=partitions))
        for b in sorted(image.cluster.brokers):
            if image.cluster.brokers[b].fenced:
                self._open(_Incident(id=self._next_id, kind=IncidentKind.BROKER_OFFLINE, broker_id=b,
                                     directory=None, trigger=Trigger.BASE_IMAGE, started=at,
                                     replicas_offline=len(self._hosted.get(b, ())), partitions={}))
        if image.last_offset >= 0:
            self._add_point(at)

    def _index(self, image: MetadataImage, pk: PartitionKey, old: PartitionRegistration | None,
               new: PartitionRegistration | None, at: LogPosition) -> None:
        tid, pid = pk
        for b in old.replicas if old is not None else ():
            hosted = self._hosted.get(b)
            if hosted is not None:
                hosted.discard(pk)
                if not hosted:
                    del self._hosted[b]
            self._offline.pop((tid, pid, b), None)
        if new is None:
            self._leaderless.pop(pk, None)
            return
        for b, d in zip(new.replicas, new.directories, strict=True):
            self._hosted.setdefault(b, set()).add(pk)
            self._set_offline(image, pk, b, d)
        if new.leader == NO_LEADER:
            self._leaderless.setdefault(pk, at)
        else:
            self._leaderless.pop(pk, None)

    def _reindex_broker(self, image: MetadataImage, b: int) -> None:
        """The offline state of every replica the broker hosts, after its registration changed."""
        for pk in self._hosted.get(b, ()):
            part = image.topics.get_partition(*pk)
            if part is not None:
                self._set_offline(image, pk, b, part.directory(b))

    def _set_offline(self, image: MetadataImage, pk: PartitionKey, b: int, d: Uuid) -> None:
        reason = offline_reason(image.cluster, b, d)
        if reason is None:
            self._offline.pop((pk[0], pk[1], b), None)
        else:
            self._offline[(pk[0], pk[1], b)] = reason

    def _add_point(self, at: LogPosition) -> None:
        self._series = add_series_point(self._series, SeriesPoint(
            at=at, offline_replicas=len(self._offline), leaderless_partitions=len(self._leaderless),
            failed_directories=len(self._open_dirs)), self._max_points)


def add_series_point(series: list[SeriesPoint], point: SeriesPoint, max_points: int) -> list[SeriesPoint]:
    """The offline series with the point after one more batch: kept only when a count changed, and the series
    halved (:func:`_thin`) once it holds more than ``max_points``. Returns the list to keep (``series`` itself, or
    the thinned copy)."""
    if series:
        last = series[-1]
        if (last.offline_replicas, last.leaderless_partitions, last.failed_directories) == (
                point.offline_replicas, point.leaderless_partitions, point.failed_directories):
            return series
    series.append(point)
    return _thin(series) if len(series) > max_points else series


def _thin(points: list[SeriesPoint]) -> list[SeriesPoint]:
    """Halve a series, keeping the first and last points and the worse of each pair in between: a plot of a long
    log must still show every outage's peak."""
    middle = points[1:-1]
    kept = [max(middle[i:i + 2], key=lambda p: (p.offline_replicas, p.leaderless_partitions, p.failed_directories))
            for i in range(0, len(middle), 2)]
    return [points[0], *kept, points[-1]]


# -- the incidents from stored partition states -----------------------------------------------------------------


class PartitionHistory(Protocol):
    """The partitions' states as stored beside the log (the Spark job's history tables, read by
    ``pipelines.report.load``), which a :class:`SparseIncidentTracker` reads instead of replaying every partition
    record. A state "at" offset N is the one after every record that took effect by N."""

    def first_seen(self, asks: FollowAsks, ends: Sequence[int]) -> FirstSeen:
        """:class:`FirstSeen` of each pair of ``asks``, among the batch ends ``ends`` (ascending, the last one the
        last offset the store holds states for)."""

    def next_touches(self, keys: Iterable[PartitionKey], after: int) -> Mapping[PartitionKey, int]:
        """For each of ``keys``, the first offset after ``after`` at which a committed PartitionRecord or
        PartitionChangeRecord on it takes effect, whether it changes the state or not (absent: never)."""

    def hosted_change(self, broker_id: int, before: int, after: int, failing: frozenset[Uuid]) -> HostedChange:
        """What the offsets (before, after] did to the partitions the broker hosted at ``before``: the columns of
        :class:`HostedChange` for those that changed in between or sit in one of the ``failing`` directories (those
        whose failure the broker's change can start, :meth:`IncidentTracker._failing_dirs`)."""


@dataclass(frozen=True, slots=True)
class HostedChange:
    """What one batch did to the partitions a broker hosted before it, as parallel columns (item i of each is one
    partition): the facts :meth:`IncidentTracker._affected` and :func:`_moved` read off a partition's registrations
    before and after the batch, here read from stored columns so that a broker change builds no registration.

    ``hosted`` counts every partition the broker hosted before the batch (the replicas a fencing takes offline);
    the columns hold only those the batch can have hit — changed in it, or in a directory whose failure it can
    start (listed before it, not after). Any other one kept its leader, ISR and directory, so neither rule can pick
    it: a fencing's rule picks only what lost something in the batch, and a directory failure's only what sits in
    that directory. (A partition in a directory that failed in an earlier batch is not read again at every later
    change of the broker: at 2 M partitions that was most of the rows read, each broker's whole history scanned.)"""

    broker_id: int
    hosted: int
    keys: Sequence[PartitionKey]
    #: The topic's name before the batch.
    names: Sequence[str]
    #: The broker's directory of the partition before the batch.
    directories: Sequence[Uuid]
    leaders: Sequence[int]
    #: Whether the broker was in the ISR before the batch.
    in_isr: Sequence[bool]
    #: Whether the partition still exists after the batch.
    exists_after: Sequence[bool]
    #: The leader after the batch (:data:`NO_LEADER` where the partition is gone).
    leaders_after: Sequence[int]
    in_isr_after: Sequence[bool]
    #: The broker's directory of the partition after the batch; None where it no longer holds a replica of it.
    directories_after: Sequence[Uuid | None]
    #: The store's own number for each partition, handed back to it in :attr:`FollowAsks.handles` (empty: none): a
    #: large cluster's report asks for millions of followed partitions, and looking each one's key up again in a
    #: store of millions cost more than reading its states. The store's business: not compared.
    handles: Sequence[int] = field(default=(), compare=False)

    @classmethod
    def of_registrations(cls, broker_id: int, hosted: int,
                         before: Mapping[PartitionKey, tuple[str, PartitionRegistration]],
                         after: Mapping[PartitionKey, tuple[str, PartitionRegistration]]) -> HostedChange:
        """The columns read off the registrations themselves (``before``: the partitions to hold, each with its
        topic's name, as the batch found them; ``after``: those that still exist after it): what a store's columns
        must equal."""
        b = broker_id
        keys = list(before)
        olds = [before[pk][1] for pk in keys]
        news = [after[pk][1] if pk in after else None for pk in keys]
        return cls(broker_id=b, hosted=hosted, keys=keys, names=[before[pk][0] for pk in keys],
                   directories=[part.directory(b) for part in olds], leaders=[part.leader for part in olds],
                   in_isr=[b in part.isr for part in olds], exists_after=[now is not None for now in news],
                   leaders_after=[NO_LEADER if now is None else now.leader for now in news],
                   in_isr_after=[now is not None and b in now.isr for now in news],
                   directories_after=[now.directory(b) if now is not None and b in now.replicas else None
                                      for now in news])

    def affected(self) -> list[_Affected]:
        """:meth:`IncidentTracker._affected` of every partition held, in column order: whether the broker lost
        its leadership (led it before, not after), its ISR membership (in it before, not after), and whether the
        partition is leaderless after the batch."""
        return self._affected(range(len(self.keys)))

    def _affected(self, rows: Iterable[int]) -> list[_Affected]:
        """:meth:`affected` of the rows at ``rows`` (column positions), in that order."""
        b = self.broker_id
        keys, names, leaders, in_isr = self.keys, self.names, self.leaders, self.in_isr
        exists_after, leaders_after, in_isr_after = self.exists_after, self.leaders_after, self.in_isr_after
        out = []
        for i in rows:
            (tid, pid), now, lead = keys[i], exists_after[i], leaders_after[i]
            out.append(_new_affected(_new_partition_ref(tid, names[i], pid), leaders[i] == b and (not now or lead != b),
                                     in_isr[i] and not (now and in_isr_after[i]), now and lead == NO_LEADER,
                                     None, None, None, None))
        return out

    def directory_failure(self, directory: Uuid) -> dict[PartitionKey, _Affected]:
        """The partitions a failure of ``directory`` hit (:meth:`IncidentTracker._start_directory_failure`): those
        the broker held there, each with what it lost (built for those rows alone, not for every partition the
        broker holds)."""
        rows = [i for i, d in enumerate(self.directories) if d == directory]
        return dict(zip([self.keys[i] for i in rows], self._affected(rows), strict=True))

    def broker_offline(self) -> dict[PartitionKey, _Affected]:
        """The partitions the broker's going offline hit (:meth:`IncidentTracker._start_broker_offline`): those
        that lost it as leader or from the ISR, or lost their leader in the batch."""
        out: dict[PartitionKey, _Affected] = {}
        for pk, led, a in zip(self.keys, self.leaders, self.affected(), strict=True):
            a.leaderless = a.leaderless and led != NO_LEADER
            if a.lost_leadership or a.lost_isr or a.leaderless:
                out[pk] = a
        return out

    def moved(self, incident: _Incident) -> list[PartitionKey]:
        """Of the incident's partitions, those the broker no longer holds where it was hit after the batch
        (:func:`_moved` on the registration after it); a partition gone in the batch is not among them."""
        # :func:`_moved` with the incident's open failure looked up once, not once a partition.
        failed, hit = _open_failure(incident), incident.partitions
        return [pk for pk, now, d in zip(self.keys, self.exists_after, self.directories_after, strict=True)
                if now and pk in hit and _moved_off(failed, d)]

    def handles_of(self, incident: _Incident) -> array[int]:
        """The store's number (:attr:`handles`) of each partition of an incident these columns opened, in the order
        the incident holds them — the columns' order, in which :meth:`directory_failure` and :meth:`broker_offline`
        pick them; -1 each where the store gave none."""
        partitions = incident.partitions
        if not self.handles:
            return array("q", [-1]) * len(partitions)
        handles = array("q", [h for pk, h in zip(self.keys, self.handles, strict=True) if pk in partitions])
        if len(handles) != len(partitions):
            raise AssertionError(f"incident {incident.id} holds partitions its broker's columns do not")
        return handles


class _Follow:
    """Where the follow-up of each partition an incident hit first sees each thing (:class:`FirstSeen`): item i of
    each column is the incident's i-th partition, in the order it holds them. The sparse tracker's alone
    (:meth:`SparseIncidentTracker._follow_through`): as machine integers, since a 2 M-partition cluster's report
    follows millions of partitions, and five integer objects on each cost about a gigabyte."""

    __slots__ = ("cuts", "gone", "in_isr", "leader", "off_disk", "out")

    def __init__(self, size: int) -> None:
        never = array("q", [NEVER]) * size
        self.leader, self.in_isr, self.out, self.off_disk, self.gone = (array("q", never) for _ in range(5))
        #: The batch end at which a later incident of the broker took a partition's follow-up over, for the few
        #: that one did (:meth:`SparseIncidentTracker._watch_partitions`).
        self.cuts: dict[PartitionKey, int] = {}

    def columns(self) -> tuple[array[int], array[int], array[int], array[int], array[int]]:
        return self.leader, self.in_isr, self.out, self.off_disk, self.gone


class SparseIncidentTracker(IncidentTracker):
    """The :class:`IncidentTracker`'s incidents without replaying every batch: the same rules (its own methods),
    run only at the batches where they can change something, on images that hold the brokers alone; what those
    rules read of the partitions comes as columns from a :class:`PartitionHistory`.

    Why that is enough: an incident starts or ends only in a batch that changes a broker's registration (the broker
    records are replayed, a few hundred in a log of millions); it reads the broker's hosted partitions as they were
    before the batch and, of those, only the ones the batch changed (a fencing's ISR shrinks) or that sit in a
    directory failing in the batch (:meth:`IncidentTracker._failing_dirs`) — any other unchanged partition can
    neither have lost anything in the batch nor be on the failed disk. Those are read as columns
    (``hosted_change``), and the rules that pick an incident's partitions run over the columns
    (:class:`HostedChange`), so a broker change builds no registration.

    Nor is a followed partition looked at batch by batch. What a follow-up (:meth:`IncidentTracker._follow_up`)
    records is each thing it learns the first time it sees it — a leader, the broker back in the ISR, the replica
    moved, the partition gone — until the pair is settled or a later incident of the broker takes it over, and a
    follow-up sees the state after a batch that touches the partition, which is a batch that changes it but for a
    state that held already when the incident started (a replica moved in the failure's own batch): that one is
    seen at the next record on the partition (``next_touches``), or its deletion. So :meth:`_follow_through` asks
    the store once per incident, when it opens, where each pair first shows each of those things
    (``first_seen``), and :meth:`_stops` decides in closed form where the follow-up stopped: at the first of the
    deletion, the move (off the failed disk counts only while the failure is open), the recoveries it lost once the
    incident ended, and a later incident of the broker opening on the partition after this one ended. A directory
    failure ends evacuated at the batch where the last of its partitions moved or went, if that comes before the
    disk returns: it is known when the failure opens, and closed at that batch, in the order of the batch's other
    closes.

    The offline replicas and leaderless partitions, which the tracker counts for its series, are not kept here
    (:func:`jbod_model.report_rows.offline_series` counts them from stored intervals): :meth:`run` gives the
    number of open directory failures after each batch instead.
    """

    def __init__(self, image: MetadataImage = EMPTY_IMAGE, *, max_closed_incidents: int | None = 1000,
                 max_series_points: int = 10_000) -> None:
        self._sparse = False
        self._changes: dict[int, HostedChange] = {}
        # Every incident by broker, in the order they opened: a new one takes over the partitions the broker's
        # ended incidents still follow.
        self._by_broker: dict[int, list[_Incident]] = {}
        # The batch end each closed incident ended at (a follow-up in that batch still sees it open).
        self._closed_at: dict[int, int] = {}
        # Of a closed incident, a batch end by which each of its follow-ups has stopped (:meth:`_watched_until`).
        self._watched: dict[int, int] = {}
        # The directory failures due to end evacuated, by batch index (:meth:`_follow_through`).
        self._evacuated: dict[int, list[_Incident]] = {}
        # By incident id, where each of its follow-ups first sees each thing (:meth:`_follow_through`).
        self._follow: dict[int, _Follow] = {}
        self._batch = -1
        self._batch_end = -1
        super().__init__(image, max_closed_incidents=max_closed_incidents, max_series_points=max_series_points)
        # The base image's incidents are found by the tracker's own seeding (it indexes the whole image once); the
        # index of hosted partitions it built is not read again (a broker change reads ``hosted_change``), nor the
        # follow-ups it registered (:meth:`run` follows those incidents through from the start).
        self._sparse = True
        self._hosted.clear()
        self._watch.clear()

    def _index(self, image: MetadataImage, pk: PartitionKey, old: PartitionRegistration | None,
               new: PartitionRegistration | None, at: LogPosition) -> None:
        if not self._sparse:
            super()._index(image, pk, old, new, at)

    def _reindex_broker(self, image: MetadataImage, b: int) -> None:
        if not self._sparse:
            super()._reindex_broker(image, b)

    def _add_point(self, at: LogPosition) -> None:
        if not self._sparse:
            super()._add_point(at)

    # A broker change's incidents from the columns of :meth:`PartitionHistory.hosted_change` (``_changes``, set by
    # :meth:`run` for the batch), not from registrations in the images: the same rules, one column at a time.

    def _start_directory_failure(self, b: int, d: Uuid, before: MetadataImage, after: MetadataImage,
                                 at: LogPosition, trigger: Trigger) -> None:
        if not self._sparse:
            super()._start_directory_failure(b, d, before, after, at, trigger)
            return
        partitions = self._changes[b].directory_failure(d)
        self._open(_Incident(id=self._next_id, kind=IncidentKind.DIRECTORY_FAILURE, broker_id=b, directory=d,
                             trigger=trigger, started=at, replicas_offline=len(partitions), partitions=partitions))

    def _start_broker_offline(self, b: int, before: MetadataImage, after: MetadataImage, at: LogPosition,
                              trigger: Trigger) -> None:
        if not self._sparse:
            super()._start_broker_offline(b, before, after, at, trigger)
            return
        change = self._changes[b]
        self._open(_Incident(id=self._next_id, kind=IncidentKind.BROKER_OFFLINE, broker_id=b, directory=None,
                             trigger=trigger, started=at, replicas_offline=change.hosted,
                             partitions=change.broker_offline()))

    # The follow-ups in closed form: no partition is watched batch by batch.

    def _watch_partitions(self, incident: _Incident) -> None:
        b = incident.broker_id
        if not self._sparse:
            super()._watch_partitions(incident)
        else:
            # The reference's take-over (a partition an ended incident of the broker still follows is followed by
            # this one now): the earlier follow-up stops at this batch, whose own follow-ups came first.
            at = self._batch_end
            for earlier in self._by_broker.get(b, ()):
                if earlier.ended is None or earlier.id not in self._incidents or self._watched_until(earlier) <= at:
                    continue
                cuts = self._follow[earlier.id].cuts  # followed: else it would have been watched until -1
                # The partitions both hit, intersected in C (over the smaller of the two).
                for pk in earlier.partitions.keys() & incident.partitions.keys():
                    if at < cuts.get(pk, NEVER):
                        cuts[pk] = at
        self._by_broker.setdefault(b, []).append(incident)

    def _unwatch_settled(self, incident: _Incident) -> None:
        if not self._sparse:
            super()._unwatch_settled(incident)
            return
        self._closed_at[incident.id] = self._batch_end

    def _unwatch(self, pk: PartitionKey, incident: _Incident) -> None:
        if not self._sparse:
            super()._unwatch(pk, incident)

    def _follow_ups(self, after: MetadataImage, keys: Iterable[PartitionKey], at: LogPosition) -> None:
        if not self._sparse:
            super()._follow_ups(after, keys, at)
            return
        # The directory failures whose last partition moved off the disk or went in this batch, if still open.
        for incident in self._evacuated.pop(self._batch, ()):
            if incident.ended is None:  # not ended by its disk's return already (only ended ones are forgotten)
                self._close(incident, at, Resolution.DIRECTORY_EVACUATED)

    def _stops(self, incident: _Incident) -> Iterable[tuple[_Affected, int, int, int, int, int]]:
        """Each partition the incident hit, the batch end at which its follow-up stopped (:data:`NEVER`: it had not
        by the last batch), the one at which it first saw the replica moved (:func:`_moved`: off the failed disk
        while a directory failure is open, or out of the replica set), and those at which it first saw a leader,
        the broker in the ISR and the partition gone (:class:`_Follow`). -1 for each where it is not followed
        yet."""
        follow = self._follow.get(incident.id)
        if follow is None:
            for a in incident.partitions.values():
                yield a, -1, -1, -1, -1, -1
            return
        ended = self._closed_at.get(incident.id, NEVER)
        off_disk_counts = incident.kind is IncidentKind.DIRECTORY_FAILURE
        cuts = follow.cuts
        # Comparisons, not min() and max(): this runs for every followed pair, twice for most (hundreds of
        # thousands at 200 k partitions), and a builtin's call cost more than the rule it computes.
        for (pk, a), leader, in_isr, out, off_disk, gone in zip(incident.partitions.items(), *follow.columns(),
                                                                 strict=True):
            moved = out
            if off_disk_counts and off_disk <= ended and off_disk < moved:
                moved = off_disk
            # The follow-up stops at the first of: the partition gone, the replica moved, and (once the incident
            # ended) the last of the recoveries it lost.
            stop = gone if gone < moved else moved
            recovered = ended
            if a.leaderless and leader > recovered:
                recovered = leader
            if a.lost_isr and in_isr > recovered:
                recovered = in_isr
            if recovered < stop:  # noqa: PLR1730 - comparisons, not min(): see above
                stop = recovered
            if cuts:
                cut = cuts.get(pk, NEVER)
                if cut < stop:  # noqa: PLR1730 - as above
                    stop = cut
            yield a, stop, moved, leader, in_isr, gone

    def _watched_until(self, incident: _Incident) -> int:
        """A batch end by which every follow-up of a closed incident has stopped: where the last one did when it
        closed (a later take-over only stops them sooner)."""
        until = self._watched.get(incident.id)
        if until is None:
            until = max((stop for _, stop, _, _, _, _ in self._stops(incident)), default=-1)
            self._watched[incident.id] = until
        return until

    def _follow_through(self, incidents: Sequence[_Incident], after: int, ends: Sequence[int],
                        partitions: PartitionHistory, fresh: Mapping[int, set[PartitionKey]],
                        pending: list[int], handles: Mapping[int, array[int]]) -> None:
        """Where each partition the ``incidents`` (opened in the batch that ends at ``after``) hit first shows each
        thing a follow-up learns (:class:`FirstSeen`, onto the incident's :class:`_Follow`), and the batch at which
        each directory failure will have been evacuated if its disk does not return first (pushed onto
        ``pending``). ``fresh``: by incident id, the partitions whose replica the incident found moved already — a
        follow-up first sees them at the next record on the partition or its deletion, and from there on.
        ``handles``: by incident id, the store's number of each of its partitions (:meth:`HostedChange.handles_of`;
        absent: none)."""
        asked = [incident for incident in incidents if incident.partitions]
        if not asked:
            return
        for incident in asked:
            self._follow[incident.id] = _Follow(len(incident.partitions))
        total = sum(len(incident.partitions) for incident in asked)
        self._first_seen([(incident, None) for incident in asked], array("q", [after]) * total, ends, partitions,
                         handles)
        moved = [(incident, i, pk) for incident in asked if (found := fresh.get(incident.id))
                 for i, pk in enumerate(incident.partitions) if pk in found]
        if moved:
            touches = partitions.next_touches({pk for _, _, pk in moved}, after)
            looked: dict[int, tuple[_Incident, list[int], list[int]]] = {}
            for incident, i, pk in moved:
                follow = self._follow[incident.id]
                k = len(ends) if (touch := touches.get(pk)) is None else bisect.bisect_left(ends, touch)
                first = min(follow.gone[i], ends[k] if k < len(ends) else NEVER)
                if first == NEVER:
                    follow.leader[i] = follow.in_isr[i] = follow.out[i] = follow.off_disk[i] = NEVER
                else:
                    _, positions, froms = looked.setdefault(incident.id, (incident, [], []))
                    positions.append(i)
                    froms.append(ends[bisect.bisect_left(ends, first) - 1])
            if looked:
                self._first_seen([(incident, positions) for incident, positions, _ in looked.values()],
                                 array("q", [f for _, _, froms in looked.values() for f in froms]), ends, partitions,
                                 handles)
        for incident in asked:
            if incident.kind is not IncidentKind.DIRECTORY_FAILURE:
                continue
            follow = self._follow[incident.id]
            gone = max(map(min, follow.gone, follow.out, follow.off_disk))
            if gone != NEVER:
                k = bisect.bisect_left(ends, gone)
                self._evacuated.setdefault(k, []).append(incident)
                heapq.heappush(pending, k)

    def _first_seen(self, hit: Sequence[tuple[_Incident, Sequence[int] | None]], afters: Sequence[int],
                    ends: Sequence[int], partitions: PartitionHistory, handles: Mapping[int, array[int]]) -> None:
        """Ask the store where the partitions of ``hit`` (each incident with the positions of those of its partitions
        to ask for, None: all) first show each thing after the batch end beside each in ``afters``, onto the
        incidents' :class:`_Follow` (none taken over yet)."""
        keys: list[PartitionKey] = []
        brokers, directories, numbers = array("q"), [], array("q")
        for incident, positions in hit:
            own = list(incident.partitions)
            known = handles.get(incident.id)
            n = len(own) if positions is None else len(positions)
            if positions is None:
                keys.extend(own)
                numbers.extend(known if known is not None else array("q", [-1]) * n)
            else:
                keys.extend([own[i] for i in positions])
                numbers.extend(array("q", [known[i] for i in positions]) if known is not None
                               else array("q", [-1]) * n)
            brokers.extend(array("q", [incident.broker_id]) * n)
            directories.extend([_failed_disk(incident)] * n)
        seen = partitions.first_seen(FollowAsks(keys, brokers, directories, afters, numbers), ends)
        columns = [_int_column(c) for c in (seen.leader, seen.in_isr, seen.out, seen.off_disk, seen.gone)]
        lo = 0
        for incident, positions in hit:
            mine = self._follow[incident.id].columns()
            if positions is None:
                hi = lo + len(incident.partitions)
                for column, got in zip(mine, columns, strict=True):
                    column[:] = got[lo:hi]
            else:
                hi = lo + len(positions)
                for column, got in zip(mine, columns, strict=True):
                    for i, value in zip(positions, got[lo:hi], strict=True):
                        column[i] = value
            lo = hi

    def _settle(self, positions: Mapping[int, LogPosition]) -> None:
        """What each follow-up of the incidents kept recorded, from where it first saw each thing and where it
        stopped (``positions``: each batch end's :class:`LogPosition`)."""
        for incident in self._incidents.values():
            for a, stopped, moved, leader, in_isr, gone in self._stops(incident):
                # Nothing seen is past where a follow-up stops; what was never seen (NEVER) stays None.
                stop = stopped if stopped < NEVER else NEVER - 1
                if gone <= stop:
                    a.deleted = positions[gone]
                if moved <= stop:
                    a.moved = positions[moved]
                if a.leaderless and leader <= stop:
                    a.leader_restored = positions[leader]
                if a.lost_isr and in_isr <= stop:
                    a.isr_restored = positions[in_isr]

    def run(self, ends: Sequence[int], first_times: Sequence[int | None],
            broker_entries: Mapping[int, Sequence[LogEntry]], partitions: PartitionHistory) -> list[int]:
        """Observe the batches that end at ``ends`` (each one's last committed offset; ``first_times``: each one's
        first batch time, what the tracker dates with), of which ``broker_entries`` gives, by batch index, the
        committed broker records (RegisterBroker, BrokerRegistrationChange, UnregisterBroker, FenceBroker,
        UnfenceBroker) in the order they took effect. Returns the number of open directory failures after each
        batch."""
        start = self._image.last_offset
        cluster = MetadataImage(features=self._image.features, cluster=self._image.cluster, last_offset=start)
        pending = list(broker_entries)
        heapq.heapify(pending)
        # The base image's incidents, followed from its offset.
        self._follow_through(list(self._incidents.values()), start, ends, partitions, {}, pending, {})
        open_dirs: list[int] = []
        last_ts = None
        done = -1
        dropped = self._dropped
        while pending:
            k = heapq.heappop(pending)
            if k <= done:
                continue
            open_dirs.extend([len(self._open_dirs)] * (k - done - 1))
            done = k
            prev, end = ends[k - 1] if k else start, ends[k]
            named: dict[int, tuple[int, Trigger]] = {}
            after = cluster
            entries = broker_entries.get(k, ())
            if entries:
                delta = MetadataDelta(cluster)
                for entry in entries:
                    rec = entry.record
                    try:
                        delta.replay(rec, entry.offset)
                    except ReplayFault as fault:
                        raise fault.located(offset=entry.offset, source=entry.source) from None
                    if isinstance(rec, (FenceBrokerRecord, UnfenceBrokerRecord)):
                        broker = rec.id
                    elif isinstance(rec, (RegisterBrokerRecord, BrokerRegistrationChangeRecord,
                                          UnregisterBrokerRecord)):
                        broker = rec.broker_id
                    else:
                        raise InputError(f"the record at offset {entry.offset} is not a broker record")
                    named[broker] = (entry.offset, _trigger_of(rec))
                after = delta.apply()
            # What the batch's broker changes read, as columns: the changed brokers' hosted partitions before and
            # after the batch (``hosted_change``).
            self._changes = {}
            for b in sorted(named):
                old, reg = cluster.cluster.brokers.get(b), after.cluster.brokers.get(b)
                if old == reg:
                    continue
                self._changes[b] = partitions.hosted_change(b, prev, end, self._failing_dirs(b, old, reg))
            first_new = self._next_id
            self._batch, self._batch_end = k, end
            self._observe(_partial(cluster, prev), _partial(after, end), {}, {}, named,
                          LogPosition(end, first_times[k]))
            cluster = MetadataImage(features=after.features, cluster=after.cluster, last_offset=end)
            open_dirs.append(len(self._open_dirs))
            opened = [self._incidents[i] for i in range(first_new, self._next_id) if i in self._incidents]
            changes = self._changes
            fresh = {i.id: set(changes[i.broker_id].moved(i)) for i in opened}
            handles = {i.id: changes[i.broker_id].handles_of(i) for i in opened}
            self._changes = {}
            self._follow_through(opened, end, ends, partitions, fresh, pending, handles)
            if self._dropped != dropped:  # incidents forgotten (max_closed_incidents): their columns go with them
                dropped = self._dropped
                for gone in [i for i in self._follow if i not in self._incidents]:
                    del self._follow[gone]
        open_dirs.extend([len(self._open_dirs)] * (len(ends) - done - 1))
        self._settle(_BatchPositions(ends, first_times))
        for ts in first_times:
            if ts is not None:
                last_ts = ts
        if last_ts is not None:
            self._last_ts = last_ts
        if ends:
            self._image = MetadataImage(features=cluster.features, cluster=cluster.cluster, last_offset=ends[-1])
        return open_dirs


#: A batch end no batch reaches: :class:`FirstSeen`'s "never", and a follow-up that has not stopped.
NEVER: Final = 2 ** 63 - 1


class _BatchPositions(dict[int, LogPosition]):
    """Each batch end's :class:`LogPosition` (its offset, its first time), made when first asked for: a log has a
    batch per few records (139 k at 200 k partitions), and the follow-ups recorded name a few of them."""

    def __init__(self, ends: Sequence[int], first_times: Sequence[int | None]) -> None:
        super().__init__()
        self._ends, self._first_times = ends, first_times

    def __missing__(self, end: int) -> LogPosition:
        k = bisect.bisect_left(self._ends, end)
        if k == len(self._ends) or self._ends[k] != end:
            raise KeyError(end)
        self[end] = position = LogPosition(end, self._first_times[k])
        return position


def _int_column(values: Sequence[int]) -> array[int]:
    """A :class:`FirstSeen` column as machine integers (a store may give an ``array('q')`` already)."""
    return values if isinstance(values, array) and values.typecode == "q" else array("q", values)


def _failed_disk(incident: _Incident) -> Uuid | None:
    """The disk whose failure the incident is (None: a broker gone offline): a follow-up sees a replica in any other
    directory of the broker as moved off it while the failure is open."""
    return incident.directory if incident.kind is IncidentKind.DIRECTORY_FAILURE else None


def _partial(image: MetadataImage, offset: int) -> MetadataImage:
    """``image``'s features and brokers without partitions, at ``offset``: all the sparse tracker's rules read of an
    image (the partitions they read come as columns)."""
    return MetadataImage(features=image.features, cluster=image.cluster, last_offset=offset)


# -- one replay, every history the report needs -----------------------------------------------------------------


class ReportTracker(BatchFeed):
    """Feeds one replay to an :class:`IncidentTracker` and to an :class:`InvariantTracker` with its checks off (only
    its placement clocks are used: since when each replica has been UNASSIGNED or MIGRATING, I12), so a report's
    history costs one replay. :meth:`history` freezes what they know."""

    def __init__(self, image: MetadataImage = EMPTY_IMAGE, *, max_closed_incidents: int | None = 1000,
                 max_series_points: int = 10_000) -> None:
        super().__init__()
        self._incidents = IncidentTracker(image, max_closed_incidents=max_closed_incidents,
                                          max_series_points=max_series_points)
        self._placements = InvariantTracker(image, max_pending_offsets=None, max_pending_ms=None,
                                            image_checks=False, step_checks=False)

    @property
    def image(self) -> MetadataImage:
        return self._incidents.image

    @property
    def incident_tracker(self) -> IncidentTracker:
        return self._incidents

    def observe_batch(self, entries: Sequence[LogEntry], image_after: MetadataImage) -> None:
        self._incidents.observe_batch(entries, image_after)
        self._placements.observe_batch(entries, image_after)

    def history(self) -> ReportHistory:
        return self._incidents.history({(p.topic_id, p.partition_id, p.broker_id):
                                        LogPosition(p.since_offset, p.since_timestamp)
                                        for p in self._placements.pending_placements()})


def run_and_track(runner: StreamRunner, entries: Iterable[StreamEntry], tracker: BatchFeed) -> int:
    """Run a stream (records and controller requests) through ``runner`` and feed ``tracker`` every record in log
    order — the input's records and those the controller wrote for each request — closing its last batch. Returns
    how many records were fed. The tracker replays on its own, so it sees exactly the batches of the log whatever
    the runner does in between."""
    fed = 0
    for entry in entries:
        if isinstance(entry, RequestEntry):
            for event in runner.run([entry]):
                for written in event.entries:
                    tracker.feed(written)
                    fed += 1
        else:
            for _ in runner.run([entry]):
                pass  # a record yields no event
            tracker.feed(entry)
            fed += 1
    tracker.end_batch()
    return fed


# ---------------------------------------------------------------------------------------------------------------
# The report


class DiskState(StrEnum):
    """A (broker, directory) pair as the metadata sees it."""

    #: In the broker's online set (or the broker predates directory assignment: all online).
    ONLINE = "ONLINE"
    #: Not online: failed, gone with an unregistered broker, or LOST — and still holding replicas.
    OFFLINE = "OFFLINE"
    #: Not a disk: replicas whose placement is UNASSIGNED or MIGRATING.
    PLACEHOLDER = "PLACEHOLDER"


class BrokerState(StrEnum):
    ACTIVE = "ACTIVE"
    CONTROLLED_SHUTDOWN = "CONTROLLED_SHUTDOWN"
    FENCED = "FENCED"
    #: Not registered, yet still named in replica sets.
    UNREGISTERED = "UNREGISTERED"


def _broker_state(reg: BrokerRegistration | None) -> BrokerState:
    if reg is None:
        return BrokerState.UNREGISTERED
    if reg.fenced:
        return BrokerState.FENCED
    if reg.in_controlled_shutdown:
        return BrokerState.CONTROLLED_SHUTDOWN
    return BrokerState.ACTIVE


@dataclass(frozen=True, slots=True)
class DiskStat:
    """One broker × directory: how many replicas it holds, how many of them lead, how many are offline."""

    broker_id: int
    directory: DirectoryRef
    state: DiskState
    broker_state: BrokerState
    replicas: int
    leaders: int
    offline_replicas: int


@dataclass(frozen=True, slots=True)
class BrokerRow:
    broker_id: int
    state: BrokerState
    epoch: int | None
    online_directories: tuple[DirectoryRef, ...]
    replicas: int
    leaders: int
    offline_replicas: int


@dataclass(frozen=True, slots=True)
class OfflineReplica:
    """An offline replica: where the metadata places it, why it is offline (Kafka's first matching reason), and
    whether it is still in the ISR (the last ISR member is kept when no other can take over)."""

    partition: PartitionRef
    broker_id: int
    directory: DirectoryRef
    reason: OfflineReason
    in_isr: bool


@dataclass(frozen=True, slots=True)
class OfflineGroup:
    """The offline replicas of one broker × directory, with the incident that explains them when the history has
    one (``since``: when the directory failed or the broker went offline)."""

    broker_id: int
    directory: DirectoryRef
    reasons: tuple[OfflineReason, ...]
    replicas: tuple[OfflineReplica, ...]
    incident_id: int | None = None
    since: LogPosition | None = None


@dataclass(frozen=True, slots=True)
class PartitionStatus:
    """A partition in trouble (leaderless or under min ISR) with what a person needs to act on it."""

    partition: PartitionRef
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    elr: tuple[int, ...]
    min_isr: int
    offline_replicas: tuple[OfflineReplica, ...]
    leaderless_since: LogPosition | None = None


#: Positional constructors (:func:`~jbod_model.slots.slot_constructor`) of the rows :func:`build_report` makes one of
#: per partition and per offline replica: the keyword ``__init__`` of a frozen dataclass stores each field through
#: ``object.__setattr__``.
_new_offline_replica: Final = slot_constructor(OfflineReplica)
_new_partition_status: Final = slot_constructor(PartitionStatus)


@dataclass(frozen=True, slots=True)
class PendingPlacement:
    """A replica whose directory is still a placeholder on a multi-directory broker, and for how long (None when
    the history does not know when it began)."""

    partition: PartitionRef
    broker_id: int
    state: DirectoryState
    broker_directories: int
    since: LogPosition | None
    age_offsets: int | None
    age_ms: int | None


class EventKind(StrEnum):
    """Timeline entries, derived from incidents."""

    DIRECTORY_FAILED = "DIRECTORY_FAILED"
    BROKER_OFFLINE = "BROKER_OFFLINE"
    LEADER_RESTORED = "LEADER_RESTORED"
    ISR_RESTORED = "ISR_RESTORED"
    REPLICAS_MOVED = "REPLICAS_MOVED"
    PARTITIONS_DELETED = "PARTITIONS_DELETED"
    DIRECTORY_RETURNED = "DIRECTORY_RETURNED"
    DIRECTORY_EVACUATED = "DIRECTORY_EVACUATED"
    BROKER_UNFENCED = "BROKER_UNFENCED"


_EVENT_ORDER: Final = {kind: i for i, kind in enumerate(EventKind)}


@dataclass(frozen=True, slots=True)
class TimelineEvent:
    """One line of the incident timeline: where, what, which incident, which partitions, in words."""

    at: LogPosition
    kind: EventKind
    incident_id: int
    broker_id: int
    directory: DirectoryRef | None
    partitions: tuple[PartitionRef, ...]
    summary: str


@dataclass(frozen=True, slots=True)
class IncidentRow:
    """An incident as a report lists it: the tracker's record, its directory named for people, a title, and how
    long it lasted (until the report's position when still open)."""

    incident: Incident
    directory: DirectoryRef | None
    title: str
    duration_offsets: int
    duration_ms: int | None


@dataclass(frozen=True, slots=True)
class InventoryJoin:
    """How well the inventory covers the metadata: directories the metadata names without a known path
    (``unmapped``: give their meta.properties), inventory directories the metadata never names (``unknown``:
    another cluster, a spare disk, or a directory lost before the history began), directories whose
    meta.properties names another node than the broker that registered them (``node_mismatches``), and ids found
    at two places (``conflicts``)."""

    directories: int
    matched: int
    unmapped: tuple[DirectoryRef, ...]
    unknown: tuple[tuple[Uuid, DirLocation], ...]
    node_mismatches: tuple[DirectoryRef, ...]
    conflicts: tuple[tuple[Uuid, tuple[DirLocation, ...]], ...]


@dataclass(frozen=True, slots=True)
class ReportSummary:
    brokers: int
    fenced_brokers: int
    disks: int
    offline_disks: int
    topics: int
    partitions: int
    replicas: int
    offline_replicas: int
    leaderless_partitions: int
    under_min_isr_partitions: int
    pending_placements: int
    open_incidents: int


@dataclass(frozen=True, slots=True)
class JbodReport:
    """Everything ``jbod report`` shows, computed; renderers only format it (docs/report-json.md).

    ``as_of`` is the image's position (with the last timestamp the history saw); ``history_since`` where the
    history starts (None: the report was built from an image alone, without timeline or ages).
    """

    as_of: LogPosition
    history_since: LogPosition | None
    metadata_version: str
    feature_level: int
    summary: ReportSummary
    brokers: tuple[BrokerRow, ...]
    disks: tuple[DiskStat, ...]
    offline: tuple[OfflineGroup, ...]
    leaderless: tuple[PartitionStatus, ...]
    under_min_isr: tuple[PartitionStatus, ...]
    pending: tuple[PendingPlacement, ...]
    incidents: tuple[IncidentRow, ...]
    timeline: tuple[TimelineEvent, ...]
    offline_series: tuple[SeriesPoint, ...]
    inventory: InventoryJoin | None
    dropped_incidents: int = 0


@dataclass(slots=True)
class _Count:
    replicas: int = 0
    leaders: int = 0
    offline: int = 0


@dataclass(frozen=True, slots=True)
class _Disk:
    """What :func:`build_report` reads of a (broker, directory) pair for each replica recorded in it, found once for
    the pair: a replica's offline reason and whether it is an unresolved placement read nothing but the broker's
    registration and the directory (:func:`~jbod_model.replicas.offline_reason`), and a report walks
    every replica of the cluster."""

    count: _Count
    #: Why its replicas are offline (None: online).
    reason: OfflineReason | None
    #: Its replicas are placements to chase (a placeholder on an unfenced broker with a choice of directories, at a
    #: metadata version with directory assignment): the broker's directory count, else None.
    pending_choices: int | None


def _disk_state(reg: BrokerRegistration | None, directory: Uuid) -> DiskState:
    if directory in (UNASSIGNED, MIGRATING):
        return DiskState.PLACEHOLDER
    # LOST (and any other reserved id) is never online; a real id is online iff the registration lists it.
    if reg is None or not reg.has_online_dir(directory):
        return DiskState.OFFLINE
    return DiskState.ONLINE


def _disk_order(stat: DiskStat) -> tuple[int, bool, str, str]:
    ref = stat.directory
    return (stat.broker_id, stat.state is DiskState.PLACEHOLDER, ref.path or "\uffff", str(ref.directory))


# The collector paused: a 200 k-partition report builds hundreds of thousands of rows beside the image's objects, and
# each full collection walked them all (0.6 s at 200 k, docs/performance.md).
@gc_paused()
def build_report(image: MetadataImage, *, paths: DirectoryPaths | None = None, history: ReportHistory | None = None,
                 config: ControllerConfig | None = None) -> JbodReport:
    """The report of ``image``: the state now, joined with paths when given, and with the history when given.

    ``config`` carries the static broker defaults the log cannot know (``min.insync.replicas`` when neither the
    topic nor the cluster-wide dynamic default sets it; Kafka's default is 1).
    """
    if history is not None and history.until.offset != image.last_offset:
        # Ages and "since" are measured to the image's offset: a history of another point in the log would lie.
        raise InputError(f"the history ends at offset {history.until.offset} but the image is at offset "
                         f"{image.last_offset}: build both from the same replay (or the same as-of offset)")
    ctx = ControllerContext(image=image, config=config or ControllerConfig())
    cluster = image.cluster
    refs: dict[tuple[int | None, Uuid], DirectoryRef] = {}

    def ref(directory: Uuid, broker_id: int | None) -> DirectoryRef:
        key = (broker_id, directory)
        if key not in refs:
            refs[key] = directory_ref(directory, paths, broker_id)
        return refs[key]

    as_of = LogPosition(image.last_offset, history.until.timestamp if history is not None else None)
    open_dirs: dict[tuple[int, Uuid], Incident] = {}
    open_brokers: dict[int, Incident] = {}
    for incident in history.incidents if history is not None else ():
        if incident.is_open and incident.directory is not None:
            open_dirs[(incident.broker_id, incident.directory)] = incident
        elif incident.is_open:
            open_brokers[incident.broker_id] = incident

    counts: dict[tuple[int, Uuid], _Count] = {}
    for broker in cluster.brokers.values():
        for d in broker.directories:
            counts[(broker.id, d)] = _Count()
    for incident in open_dirs.values():
        assert incident.directory is not None
        counts.setdefault((incident.broker_id, incident.directory), _Count())
    offline_by_disk: dict[tuple[int, Uuid], list[OfflineReplica]] = {}
    leaderless: list[PartitionStatus] = []
    under_min_isr: list[PartitionStatus] = []
    pending: list[PendingPlacement] = []
    gate = image.metadata_version.is_directory_assignment_supported()
    disks_seen: dict[tuple[int, Uuid], _Disk] = {}

    def disk_of(b: int, d: Uuid) -> _Disk:
        count = counts.get((b, d))
        if count is None:  # not setdefault: that would build a _Count for each of a cluster's replicas
            count = counts[(b, d)] = _Count()
        reg = cluster.brokers.get(b)
        # A placeholder on a single-directory broker can only mean that directory; only on a broker with a choice
        # is it an unresolved placement an operator may need to chase (I12 on multi-dir brokers).
        choices = (len(reg.directories) if gate and d in (UNASSIGNED, MIGRATING) and reg is not None
                   and not reg.fenced and len(reg.directories) > 1 else None)
        disk = disks_seen[(b, d)] = _Disk(count, offline_reason(cluster, b, d), choices)
        return disk
    n_partitions = n_replicas = 0
    for topic in sorted(image.topics.by_id.values(), key=lambda t: (t.name, str(t.id))):
        min_isr = ctx.topic_effective_min_isr(topic.name)
        for pid in sorted(topic.partitions):
            part = topic.partitions[pid]
            pref = _new_partition_ref(topic.id, topic.name, pid)
            n_partitions += 1
            offline_here: list[OfflineReplica] = []
            for b, d in zip(part.replicas, part.directories, strict=True):
                n_replicas += 1
                disk = disks_seen.get((b, d)) or disk_of(b, d)
                count = disk.count
                count.replicas += 1
                count.leaders += int(part.leader == b)
                if disk.reason is not None:
                    count.offline += 1
                    replica = _new_offline_replica(pref, b, ref(d, b), disk.reason, b in part.isr)
                    offline_here.append(replica)
                    offline_by_disk.setdefault((b, d), []).append(replica)
                if disk.pending_choices is not None:
                    since = history.pending_since.get((topic.id, pid, b)) if history is not None else None
                    pending.append(PendingPlacement(
                        partition=pref, broker_id=b, state=DirectoryState.of(d),
                        broker_directories=disk.pending_choices, since=since,
                        age_offsets=since.offsets_until(as_of) if since is not None else None,
                        age_ms=since.ms_until(as_of) if since is not None else None))
            # Positionally (slot constructors): one of these per partition, one per offline replica.
            status = _new_partition_status(
                pref, part.leader, part.replicas, part.isr, part.elr, min_isr, tuple(offline_here),
                (history.leaderless_since.get((topic.id, pid)) if history is not None and part.leader == NO_LEADER
                 else None))
            if part.leader == NO_LEADER:
                leaderless.append(status)
            if len(part.isr) < min_isr:
                under_min_isr.append(status)

    disks = sorted((DiskStat(broker_id=b, directory=ref(d, b), state=_disk_state(cluster.brokers.get(b), d),
                             broker_state=_broker_state(cluster.brokers.get(b)), replicas=c.replicas,
                             leaders=c.leaders, offline_replicas=c.offline)
                    for (b, d), c in counts.items()), key=_disk_order)
    offline_groups = []
    for (b, d), replicas in sorted(offline_by_disk.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
        explaining = open_dirs.get((b, d)) or open_brokers.get(b)
        offline_groups.append(OfflineGroup(
            broker_id=b, directory=ref(d, b), reasons=tuple(sorted({r.reason for r in replicas}, key=list(
                OfflineReason).index)),
            replicas=tuple(in_partition_order(replicas, _PARTITION_NAME_AND_ID, _offline_replica_ref)),
            incident_id=explaining.id if explaining is not None else None,
            since=explaining.started if explaining is not None else None))

    broker_ids = sorted(set(cluster.brokers) | {s.broker_id for s in disks})
    brokers = []
    for b in broker_ids:
        registration = cluster.brokers.get(b)
        mine = [s for s in disks if s.broker_id == b]
        brokers.append(BrokerRow(
            broker_id=b, state=_broker_state(registration),
            epoch=registration.epoch if registration is not None else None,
            online_directories=tuple(ref(d, b) for d in registration.directories) if registration else (),
            replicas=sum(s.replicas for s in mine), leaders=sum(s.leaders for s in mine),
            offline_replicas=sum(s.offline_replicas for s in mine)))

    incidents = history.incidents if history is not None else ()
    incident_rows = tuple(_incident_row(i, as_of, paths) for i in incidents)
    real_disks = [s for s in disks if s.state is not DiskState.PLACEHOLDER]
    summary = ReportSummary(
        brokers=len(cluster.brokers), fenced_brokers=sum(r.fenced for r in cluster.brokers.values()),
        disks=len(real_disks), offline_disks=sum(s.state is DiskState.OFFLINE for s in real_disks),
        topics=len(image.topics.by_id), partitions=n_partitions, replicas=n_replicas,
        offline_replicas=sum(len(g.replicas) for g in offline_groups), leaderless_partitions=len(leaderless),
        under_min_isr_partitions=len(under_min_isr), pending_placements=len(pending),
        open_incidents=sum(i.is_open for i in incidents))
    mv = image.metadata_version
    return JbodReport(
        as_of=as_of, history_since=history.since if history is not None else None, metadata_version=mv.name,
        feature_level=mv.feature_level, summary=summary, brokers=tuple(brokers), disks=tuple(disks),
        offline=tuple(offline_groups), leaderless=tuple(leaderless), under_min_isr=tuple(under_min_isr),
        pending=tuple(pending), incidents=incident_rows, timeline=timeline_events(incidents, paths),
        offline_series=history.offline_series if history is not None else (),
        inventory=_inventory_join(image, paths, incidents, disks) if paths is not None else None,
        dropped_incidents=history.dropped_incidents if history is not None else 0)


def _inventory_join(image: MetadataImage, paths: DirectoryPaths, incidents: Sequence[Incident],
                    disks: Sequence[DiskStat]) -> InventoryJoin:
    named: dict[Uuid, int] = {}
    for s in disks:
        if not is_reserved(s.directory.directory):
            named.setdefault(s.directory.directory, s.broker_id)
    for incident in incidents:
        if incident.directory is not None:
            named.setdefault(incident.directory, incident.broker_id)
    refs = [directory_ref(d, paths, b) for d, b in sorted(named.items(), key=lambda kv: (kv[1], str(kv[0])))]
    return InventoryJoin(
        directories=len(paths), matched=sum(r.path is not None for r in refs),
        unmapped=tuple(r for r in refs if r.path is None),
        unknown=tuple(sorted(((d, loc) for d, loc in paths.locations.items() if d not in named),
                             key=lambda kv: (kv[1].node_id is None, kv[1].node_id or 0, kv[1].path))),
        node_mismatches=tuple(r for r in refs if r.node_id is not None and r.node_id != r.broker_id),
        conflicts=paths.conflicts)


# -- incidents and the timeline in words ------------------------------------------------------------------------


def incident_title(incident: Incident, paths: DirectoryPaths | None = None) -> str:
    """``broker 2 /mnt/d1 (Y8UXxSTr…) failed`` / ``broker 2 offline (fenced)``."""
    if incident.directory is not None:
        what = format_directory(incident.directory, paths, incident.broker_id)
        if not what.startswith("broker "):
            what = f"broker {incident.broker_id} directory {what}"
        verb = "already offline at the start" if incident.trigger is Trigger.BASE_IMAGE else "failed"
        return f"{what} {verb}"
    how = {Trigger.UNREGISTRATION: "unregistered", Trigger.REREGISTRATION: "re-registered fenced",
           Trigger.BASE_IMAGE: "already fenced at the start"}.get(incident.trigger, "fenced")
    return f"broker {incident.broker_id} offline ({how})"


def _incident_row(incident: Incident, as_of: LogPosition, paths: DirectoryPaths | None) -> IncidentRow:
    end = incident.ended or as_of
    return IncidentRow(incident=incident,
                       directory=(directory_ref(incident.directory, paths, incident.broker_id)
                                  if incident.directory is not None else None),
                       title=incident_title(incident, paths), duration_offsets=incident.started.offsets_until(end),
                       duration_ms=incident.started.ms_until(end))


_TRIGGER_WORDS: Final = {
    Trigger.REGISTRATION_CHANGE: "BrokerRegistrationChangeRecord",
    Trigger.REREGISTRATION: "RegisterBrokerRecord",
    Trigger.FENCE: "FenceBrokerRecord",
    Trigger.UNREGISTRATION: "UnregisterBrokerRecord",
    Trigger.BASE_IMAGE: "the starting image",
}


def _start_summary(incident: Incident, title: str) -> str:
    b = incident.broker_id
    head = f"{title}: {_plural(incident.replicas_offline, 'replica')} offline ({_TRIGGER_WORDS[incident.trigger]})"
    if incident.trigger is Trigger.BASE_IMAGE:
        return head
    # One pass over the incident's partitions (in partition order) for the three lists.
    lost_leader: list[PartitionRef] = []
    lost_isr: list[PartitionRef] = []
    leaderless: list[PartitionRef] = []
    for p in incident.partitions:
        if p.lost_leadership:
            lost_leader.append(p.partition)
        if p.lost_isr:
            lost_isr.append(p.partition)
        if p.leaderless:
            leaderless.append(p.partition)
    parts = []
    if lost_leader:
        parts.append(f"{_plural(len(lost_leader), 'partition')} lost broker {b} as leader "
                     f"({format_partitions(lost_leader, in_order=True)})")
    if lost_isr:
        parts.append(f"{len(lost_isr)} dropped broker {b} from the ISR ({format_partitions(lost_isr, in_order=True)})")
    if leaderless:
        parts.append(f"{len(leaderless)} left without a leader ({format_partitions(leaderless, in_order=True)})")
    elif parts:
        parts.append("none left without a leader")
    if not parts:
        return f"{head}; no leader or ISR changed in the same batch"
    return f"{head}; in the same batch {', '.join(parts)}"


def timeline_events(incidents: Iterable[Incident], paths: DirectoryPaths | None = None) -> tuple[TimelineEvent, ...]:
    """The incident timeline: each incident's start (with what its batch did), the follow-ups grouped by position
    (leaders back, broker back in ISRs, replicas moved off, partitions deleted), and its end, ordered by offset."""
    events: list[TimelineEvent] = []
    for incident in incidents:
        b = incident.broker_id
        dref = directory_ref(incident.directory, paths, b) if incident.directory is not None else None
        title = incident_title(incident, paths)
        name = dref.label if dref is not None else f"broker {b}"
        if dref is not None and not name.startswith("broker "):
            name = f"broker {b} directory {name}"

        def add(at: LogPosition, kind: EventKind, partitions: Sequence[PartitionRef], summary: str,
                incident: Incident = incident, dref: DirectoryRef | None = dref) -> None:
            # Not sorted again: every list here is a subset of the incident's partitions, taken in their order.
            events.append(TimelineEvent(at=at, kind=kind, incident_id=incident.id, broker_id=incident.broker_id,
                                        directory=dref, partitions=tuple(partitions), summary=summary))

        hit = [p.partition for p in incident.partitions
               if p.lost_leadership or p.lost_isr or p.leaderless]
        start_kind = (EventKind.DIRECTORY_FAILED if incident.kind is IncidentKind.DIRECTORY_FAILURE
                      else EventKind.BROKER_OFFLINE)
        add(incident.started, start_kind, hit, _start_summary(incident, title))
        groups: dict[tuple[int, EventKind], tuple[LogPosition, list[PartitionRef]]] = {}
        # Each follow-up field looked at in turn, without a tuple of the four made per partition: an incident of a
        # failed disk lists thousands, and the report hundreds of thousands (a fifth of build_report at 200 k).
        for p in incident.partitions:
            if (at := p.leader_restored) is not None:
                groups.setdefault((at.offset, EventKind.LEADER_RESTORED), (at, []))[1].append(p.partition)
            if (at := p.isr_restored) is not None:
                groups.setdefault((at.offset, EventKind.ISR_RESTORED), (at, []))[1].append(p.partition)
            if (at := p.moved) is not None:
                groups.setdefault((at.offset, EventKind.REPLICAS_MOVED), (at, []))[1].append(p.partition)
            if (at := p.deleted) is not None:
                groups.setdefault((at.offset, EventKind.PARTITIONS_DELETED), (at, []))[1].append(p.partition)
        for (_, kind), (at, refs) in groups.items():
            listed = format_partitions(refs, in_order=True)
            # Only this event's summary is made (a dict of the four made every one, its spans formatted twice).
            if kind is EventKind.LEADER_RESTORED:
                summary = f"{listed}: leader elected again after {format_span(incident.started, at)}"
            elif kind is EventKind.ISR_RESTORED:
                summary = f"broker {b} back in the ISR of {listed} after {format_span(incident.started, at)}"
            elif kind is EventKind.REPLICAS_MOVED:
                summary = (f"{listed}: replica moved off {name}" if dref is not None
                           else f"{listed}: broker {b} removed from the replicas")
            else:
                summary = f"{listed}: topic deleted"
            add(at, kind, refs, summary)
        if incident.ended is not None and incident.resolution is not None:
            span = format_span(incident.started, incident.ended)
            end_kind, summary = {
                Resolution.DIRECTORY_RETURNED: (EventKind.DIRECTORY_RETURNED,
                                                f"{name} online again after {span} (broker {b} registered with it)"),
                Resolution.DIRECTORY_EVACUATED: (EventKind.DIRECTORY_EVACUATED,
                                                 f"{name}: every replica it held now lives elsewhere, {span} after "
                                                 "it failed"),
                Resolution.BROKER_UNFENCED: (EventKind.BROKER_UNFENCED, f"broker {b} unfenced after {span}"),
            }[incident.resolution]
            add(incident.ended, end_kind, [], summary)
    events.sort(key=lambda e: (e.at.offset, e.incident_id, _EVENT_ORDER[e.kind]))
    return tuple(events)
