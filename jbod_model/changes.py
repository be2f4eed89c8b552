"""Incremental replay over keyed storage: replay a few entries on top of an image that lives elsewhere (a state
store), learn exactly which rows of every view changed at which offset, and write back only those keys.

This is what a streaming consumer of the metadata log needs (the Spark job keeps one cluster's image in a keyed state
store; any key-value store would do), and the reason it lives here rather than in the consumer: every rule — replay,
metadata transactions, which replicas a change affects and why a replica is offline — is the model's.

* :class:`ImageReader` is the read side of such a store: one broker, topic, partition or config at a time, plus an
  index *broker → partitions hosting a replica there* (Kafka's controller keeps the same kind of index,
  ``BrokersToIsrs``), so that fencing a broker reads the partitions it hosts and nothing else.
* :class:`IncrementalReplayer` replays entries onto a :class:`~jbod_model.image.MetadataImage` whose mappings are
  lazy views of the reader plus the batch's pending writes (``MetadataDelta`` keeps a reference to a topic's
  partition map and only ``get``\\ s from it, so a record reads only the keys it touches). Each *visible step* — a
  record outside a metadata transaction, a whole committed transaction at its EndTransactionRecord, an
  AbortTransactionRecord, a snapshot load — yields a :class:`Step` naming every feature, broker, topic, partition and
  replica whose value changed, with the value before and after; :meth:`IncrementalReplayer.writes` gives the net
  :class:`ImageWrites` to store at the end of the batch, and :meth:`IncrementalReplayer.pending_transaction` the
  entries of a transaction still open (they are replayed again, unchanged, at the start of the next batch).
* :class:`DictImageStore` is an in-memory store with the same contract: the reference the tests compare against and
  a way to run the incremental path without any store.

Steps follow :class:`~jbod_model.replay.Replayer` exactly (the image after step *k* equals the replay of every entry
up to the step's offset), so a consumer that records each step's changes as of the step's offset can answer "the
state as of offset N" for any N, whatever batches it was fed in.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Generic, Protocol, TypeGuard, TypeVar, cast

from jbod_model.controller.context import ControllerConfig, ControllerState
from jbod_model.controller.controller import ReferenceController
from jbod_model.directory_id import DirectoryState
from jbod_model.errors import InputError, ReplayFault
from jbod_model.image import (
    BrokerRegistration,
    ClusterImage,
    ConfigurationsImage,
    FeaturesImage,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
    TopicsImage,
)
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import NoOpRecord, PartitionChangeRecord, PartitionRecord, Record
from jbod_model.replay import DeltaChanges, MetadataDelta, TransactionBuffer, check_snapshot_offset
from jbod_model.replicas import (
    OfflineReason,
    ReplicaState,
    new_replica_state,
    partition_replicas,
    registration_offline_reason,
    registration_replica,
)
from jbod_model.slots import slot_constructor
from jbod_model.uuid import Uuid

K = TypeVar("K")
V = TypeVar("V")

PartitionKey = tuple[Uuid, int]
ConfigKey = tuple[int, str]
#: (topic id, partition id, broker id): the identity of one replica.
ReplicaKey = tuple[Uuid, int, int]


# ---------------------------------------------------------------------------------------------------------------
# Partition id sets


class RangeSet:
    """A set of non-negative ints held as sorted, disjoint, non-adjacent ``[start, end)`` ranges.

    A topic's partition ids are almost always ``0..n-1`` (Kafka creates them contiguously and never deletes one
    alone), so storing them as ranges keeps a 100,000-partition topic's id set to one pair.
    """

    __slots__ = ("_ranges",)

    def __init__(self, ranges: Iterable[tuple[int, int]] = ()) -> None:
        self._ranges: list[tuple[int, int]] = []
        for start, end in ranges:
            self.add_range(start, end)

    @classmethod
    def of(cls, values: Iterable[int]) -> RangeSet:
        out = cls()
        for v in values:
            out.add(v)
        return out

    def add_range(self, start: int, end: int) -> None:
        """Add every id in ``[start, end)``; overlapping or adjacent ranges merge."""
        if start < 0:
            raise InputError(f"partition ids are non-negative, got {start}")
        if end <= start:
            return
        lo = bisect.bisect_left(self._ranges, (start, start))
        if lo > 0 and self._ranges[lo - 1][1] >= start:
            lo -= 1
        hi = lo
        new_start, new_end = start, end
        while hi < len(self._ranges) and self._ranges[hi][0] <= end:
            new_start = min(new_start, self._ranges[hi][0])
            new_end = max(new_end, self._ranges[hi][1])
            hi += 1
        self._ranges[lo:hi] = [(new_start, new_end)]

    def add(self, value: int) -> None:
        if value < 0:
            raise InputError(f"partition ids are non-negative, got {value}")
        i = bisect.bisect_right(self._ranges, (value, 1 << 62))
        if i > 0 and self._ranges[i - 1][0] <= value < self._ranges[i - 1][1]:
            return
        joins_left = i > 0 and self._ranges[i - 1][1] == value
        joins_right = i < len(self._ranges) and self._ranges[i][0] == value + 1
        if joins_left and joins_right:
            self._ranges[i - 1:i + 1] = [(self._ranges[i - 1][0], self._ranges[i][1])]
        elif joins_left:
            self._ranges[i - 1] = (self._ranges[i - 1][0], value + 1)
        elif joins_right:
            self._ranges[i] = (value, self._ranges[i][1])
        else:
            self._ranges.insert(i, (value, value + 1))

    def __contains__(self, value: object) -> bool:
        if not isinstance(value, int):
            return False
        i = bisect.bisect_right(self._ranges, (value, 1 << 62))
        return i > 0 and self._ranges[i - 1][0] <= value < self._ranges[i - 1][1]

    def __iter__(self) -> Iterator[int]:
        for start, end in self._ranges:
            yield from range(start, end)

    def __len__(self) -> int:
        return sum(end - start for start, end in self._ranges)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RangeSet) and self._ranges == other._ranges

    def __hash__(self) -> int:
        return hash(tuple(self._ranges))

    def __repr__(self) -> str:
        return f"RangeSet({self._ranges!r})"

    def ranges(self) -> tuple[tuple[int, int], ...]:
        return tuple(self._ranges)

    def copy(self) -> RangeSet:
        out = RangeSet()
        out._ranges = list(self._ranges)
        return out


# ---------------------------------------------------------------------------------------------------------------
# Storage contract


@dataclass(frozen=True, slots=True)
class StoredTopic:
    """A topic as a store keeps it: its name and the ids of its partitions (ranges, see :class:`RangeSet`)."""

    name: str
    partition_ids: tuple[tuple[int, int], ...] = ()


class ImageReader(Protocol):
    """Keyed reads of an image held in a store. Absent keys read as None (or empty)."""

    def last_offset(self) -> int:
        """The offset of the last step stored (-1 when none): the image's provenance."""

    def feature_levels(self) -> Mapping[str, int]:
        """Every finalized feature (a handful: read whole)."""

    def broker(self, broker_id: int) -> BrokerRegistration | None: ...

    def broker_ids(self) -> Iterable[int]:
        """Every registered broker id (brokers are few; ``MetadataDelta`` scans them for directory ownership)."""

    def topic(self, topic_id: Uuid) -> StoredTopic | None: ...

    def topic_name(self, topic_id: Uuid) -> str | None:
        """A topic's name alone (None: no such topic). Every partition record asks only whether its topic exists; a
        store keeps the topic's partition-id ranges beside its name, and a replay bucket's share of a topic's ids
        is many short ranges, which need not be parsed for that."""

    def topic_ids(self) -> Iterable[Uuid]:
        """Every topic id (only a whole-image reader, e.g. the reference controller, iterates them)."""

    def topic_id_by_name(self, name: str) -> Uuid | None: ...

    def partition(self, topic_id: Uuid, partition_id: int) -> PartitionRegistration | None: ...

    def partitions_on_broker(self, broker_id: int) -> Mapping[PartitionKey, Uuid]:
        """The partitions with a replica on ``broker_id`` (any order), each with that replica's directory
        (:func:`replica_directories`)."""

    def config(self, resource: ConfigKey) -> Mapping[str, str] | None: ...

    def config_resources(self) -> Iterable[ConfigKey]: ...


@dataclass(slots=True)
class ImageWrites:
    """The net writes of a batch of steps: every key whose stored value changed (None = delete).

    ``broker_partitions`` is the index delta: broker → partition key → the directory of the broker's replica (it is
    new on the broker, or in another directory) or None (no longer on the broker). ``last_offset`` is the
    provenance after the batch.
    """

    last_offset: int
    features: dict[str, int | None] = field(default_factory=dict)
    brokers: dict[int, BrokerRegistration | None] = field(default_factory=dict)
    topics: dict[Uuid, StoredTopic | None] = field(default_factory=dict)
    topic_names: dict[str, Uuid | None] = field(default_factory=dict)
    partitions: dict[PartitionKey, PartitionRegistration | None] = field(default_factory=dict)
    broker_partitions: dict[int, dict[PartitionKey, Uuid | None]] = field(default_factory=dict)
    configs: dict[ConfigKey, Mapping[str, str] | None] = field(default_factory=dict)

    def is_empty(self) -> bool:
        return not (self.features or self.brokers or self.topics or self.topic_names or self.partitions
                    or self.broker_partitions or self.configs)


# ---------------------------------------------------------------------------------------------------------------
# What a step changed


@dataclass(frozen=True, slots=True)
class Change(Generic[K, V]):
    """One key whose value changed in a step: None before = created, None after = removed."""

    key: K
    old: V | None
    new: V | None


@dataclass(frozen=True, slots=True)
class PartitionChange:
    """A partition registration that changed (created, changed or removed with its topic)."""

    topic_id: Uuid
    partition_id: int
    topic_name: str
    old: PartitionRegistration | None
    new: PartitionRegistration | None


@dataclass(frozen=True, slots=True)
class ReplicaChange:
    """A row of the replica view that changed: a replica appeared, moved directory, went offline or online (or
    changed why), or disappeared (reassigned away, topic deleted)."""

    topic_name: str
    old: ReplicaState | None
    new: ReplicaState | None

    @property
    def key(self) -> ReplicaKey:
        state = self.new if self.new is not None else self.old
        assert state is not None
        return state.topic_id, state.partition_id, state.broker_id


@dataclass(frozen=True, slots=True)
class ReplicaGroup:
    """Replica rows that one step changed alike: the replicas recorded in ``directory`` on ``broker_id``, of the
    ``partitions`` reached only through that broker, whose registration changed (fenced, unfenced, registered,
    a directory gone offline or back). A replica's state reads only its directory and its broker's registration
    (``replicas.registration_offline_reason``), so every replica of the group goes from ``old_reason`` to
    ``new_reason`` (None: online) in the same ``directory_state``: one change decided once, with the partitions it
    reached. :meth:`changes` gives the group's :class:`ReplicaChange` rows.

    A fenced broker hosts a share of the cluster's partitions (10 k replicas at 200 k partitions and 60 brokers):
    a consumer writing rows (the Spark job's operator) computes the shared columns once per group instead of
    building two :class:`~jbod_model.replicas.ReplicaState` and a :class:`ReplicaChange` per replica."""

    broker_id: int
    directory: Uuid
    directory_state: DirectoryState
    old_reason: OfflineReason | None
    new_reason: OfflineReason | None
    #: ``(topic id, partition id)`` of each replica, in the step's order.
    partitions: tuple[PartitionKey, ...]
    #: The topic's name of each replica (after the step), parallel to ``partitions``.
    topic_names: tuple[str, ...]

    def changes(self) -> Iterator[ReplicaChange]:
        """The group's rows, one per replica, as :meth:`IncrementalReplayer.replay` gives them ungrouped."""
        broker_id, directory, state = self.broker_id, self.directory, self.directory_state
        old_reason, new_reason = self.old_reason, self.new_reason
        for (topic_id, partition_id), name in zip(self.partitions, self.topic_names, strict=True):
            yield _new_replica_change(
                name, new_replica_state(topic_id, partition_id, broker_id, directory, state, old_reason is not None,
                                        old_reason),
                new_replica_state(topic_id, partition_id, broker_id, directory, state, new_reason is not None,
                                  new_reason))


@dataclass(frozen=True, slots=True)
class Step:
    """One visible change of the image: what became true at ``offset`` (the image's ``last_offset`` after it).

    ``entries`` are the entries applied by the step (one record; a committed transaction from its Begin to its End;
    a snapshot's records), ``aborted`` the entries an AbortTransactionRecord discarded (or, for a snapshot loaded
    over a non-empty image, those of the transaction it found open). ``timestamp`` is the last applied entry's (ms,
    None when the input has none).
    """

    offset: int
    timestamp: int | None
    entries: tuple[LogEntry, ...]
    aborted: tuple[LogEntry, ...] = ()
    features: tuple[Change[str, int], ...] = ()
    brokers: tuple[Change[int, BrokerRegistration], ...] = ()
    topics: tuple[Change[Uuid, str], ...] = ()
    partitions: tuple[PartitionChange, ...] = ()
    replicas: tuple[ReplicaChange, ...] = ()
    snapshot: bool = False
    #: Replica rows of brokers whose registration changed, grouped (only from a replayer made with
    #: ``group_replicas=True``; otherwise they are among ``replicas``).
    replica_groups: tuple[ReplicaGroup, ...] = ()

    def is_empty(self) -> bool:
        """True when nothing in the image changed (a NoOpRecord, a record this model does not image)."""
        return not (self.features or self.brokers or self.topics or self.partitions or self.replicas
                    or self.replica_groups)

    def replica_changes(self) -> Iterator[ReplicaChange]:
        """Every replica row of the step: ``replicas``, then each group's rows."""
        yield from self.replicas
        for group in self.replica_groups:
            yield from group.changes()


# The row types built once per record or per changed replica (a fenced broker: thousands in one step), without
# their keyword ``__init__`` (``jbod_model.slots``; none of them has a ``__post_init__``). Every field, in order.
#: ``(offset, timestamp, entries, aborted, features, brokers, topics, partitions, replicas, snapshot,
#: replica_groups)``
_new_step: Final = slot_constructor(Step)
#: ``(topic_name, old, new)``
_new_replica_change: Final = slot_constructor(ReplicaChange)
#: ``(topic_id, partition_id, topic_name, old, new)``
_new_partition_change: Final = slot_constructor(PartitionChange)
#: What a dict lookup returns for an absent key where None is a stored value (a deletion).
_ABSENT: Final = object()
#: What a broker's registration change does to its replicas in one directory: the offline reason before and after
#: (None: online) and the directory's state.
_Effect = tuple[OfflineReason | None, OfflineReason | None, DirectoryState]
#: The replicas a broker's registration change reaches in one of its directories
#: (:meth:`IncrementalReplayer._broker_replica_effects`): broker id, directory, effect, partitions.
_BrokerReach = tuple[int, Uuid, _Effect, list[PartitionKey]]


# ---------------------------------------------------------------------------------------------------------------
# Lazy views


class _OverlayMapping(Mapping[K, V]):
    """A stored mapping seen through pending writes (None in the overlay = deleted)."""

    __slots__ = ("_get", "_iter", "_overlay")

    def __init__(self, get: Callable[[K], V | None], keys: Callable[[], Iterable[K]],
                 overlay: Mapping[K, V | None]) -> None:
        self._get = get
        self._iter = keys
        self._overlay = overlay

    def __getitem__(self, key: K) -> V:
        value = self._overlay[key] if key in self._overlay else self._get(key)
        if value is None:
            raise KeyError(key)
        return value

    def get(self, key: K, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key: object) -> bool:
        return self.get(key) is not None  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[K]:
        for key, value in self._overlay.items():
            if value is not None:
                yield key
        for key in self._iter():
            if key not in self._overlay:
                yield key

    def __len__(self) -> int:
        return sum(1 for _ in self)


class _PartitionsView(Mapping[int, PartitionRegistration]):
    """One topic's partitions: pending writes first, then the store."""

    __slots__ = ("_ids", "_replayer", "_topic_id")

    def __init__(self, replayer: IncrementalReplayer, topic_id: Uuid, ids: RangeSet) -> None:
        self._replayer = replayer
        self._topic_id = topic_id
        self._ids = ids

    def __getitem__(self, partition_id: int) -> PartitionRegistration:
        value = self._replayer._partition(self._topic_id, partition_id)
        if value is None:
            raise KeyError(partition_id)
        return value

    def get(self, partition_id: int, default: Any = None) -> Any:
        value = self._replayer._partition(self._topic_id, partition_id)
        return default if value is None else value

    def __contains__(self, partition_id: object) -> bool:
        return isinstance(partition_id, int) and self.get(partition_id) is not None

    def __iter__(self) -> Iterator[int]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)


class _TopicsView(Mapping[Uuid, TopicImage]):
    """Topics by id, built on demand; a topic's partition map is a :class:`_PartitionsView`."""

    __slots__ = ("_replayer",)

    def __init__(self, replayer: IncrementalReplayer) -> None:
        self._replayer = replayer

    def __getitem__(self, topic_id: Uuid) -> TopicImage:
        name = self._replayer._topic_name(topic_id)
        if name is None:
            raise KeyError(topic_id)
        return TopicImage(name=name, id=topic_id,
                          partitions=_PartitionsView(self._replayer, topic_id, self._replayer._topic_ids(topic_id)))

    def get(self, topic_id: Uuid, default: Any = None) -> Any:
        try:
            return self[topic_id]
        except KeyError:
            return default

    def __contains__(self, topic_id: object) -> bool:
        return isinstance(topic_id, Uuid) and self._replayer._topic_name(topic_id) is not None

    def __iter__(self) -> Iterator[Uuid]:
        overlay = self._replayer._writes.topics
        for topic_id, topic in overlay.items():
            if topic is not None:
                yield topic_id
        for topic_id in self._replayer._reader.topic_ids():
            if topic_id not in overlay:
                yield topic_id

    def __len__(self) -> int:
        return sum(1 for _ in self)


# ---------------------------------------------------------------------------------------------------------------
# The incremental replayer


class IncrementalReplayer:
    """Replays entries on top of a stored image, one visible step at a time (see the module docstring).

    ``pending`` are the entries of a metadata transaction left open by the previous batch
    (:meth:`pending_transaction`); they are replayed first, exactly as if the batches had been one. With
    ``group_replicas``, the replica rows a broker's registration change reaches through the broker alone come as
    :class:`ReplicaGroup`\\ s in ``Step.replica_groups`` (the same rows, :meth:`Step.replica_changes`).
    """

    __slots__ = (
        "_broker_index",
        "_brokers",
        "_group_replicas",
        "_partitions",
        "_reader",
        "_topic_id_sets",
        "_topic_names",
        "_topics",
        "_transactions",
        "_writes",
    )

    def __init__(self, reader: ImageReader, pending: Sequence[LogEntry] = (), *,
                 group_replicas: bool = False) -> None:
        self._reader = reader
        self._group_replicas = group_replicas
        # Stored values read so far: the store does not change during a batch, and each read may be a round trip.
        self._partitions: dict[PartitionKey, PartitionRegistration | None] = {}
        self._topics: dict[Uuid, StoredTopic | None] = {}
        # Topic names read alone (ImageReader.topic_name): the topics whose partition ids the batch never needs.
        self._topic_names: dict[Uuid, str | None] = {}
        self._brokers: dict[int, BrokerRegistration | None] = {}
        self._broker_index: dict[int, Mapping[PartitionKey, Uuid]] = {}
        self._writes = ImageWrites(last_offset=reader.last_offset())
        # Partition-id sets of topics touched in this batch (copied from the store once, then kept current).
        self._topic_id_sets: dict[Uuid, RangeSet] = {}
        self._transactions = TransactionBuffer()
        for entry in pending:
            if self.replay(entry) is not None:
                raise InputError("the pending entries of an open transaction must not complete a step")
        self._transactions.resumed()

    # -- reads through the pending writes ------------------------------------------------------------------

    def _partition(self, topic_id: Uuid, partition_id: int) -> PartitionRegistration | None:
        # One lookup per map on the common paths (every record reads its partition; a fenced broker thousands).
        key = (topic_id, partition_id)
        pending = self._writes.partitions.get(key, _ABSENT)
        if pending is not _ABSENT:
            return cast("PartitionRegistration | None", pending)
        stored = self._partitions.get(key, _ABSENT)
        if stored is _ABSENT:
            stored = self._partitions[key] = self._reader.partition(topic_id, partition_id)
        return cast("PartitionRegistration | None", stored)

    def _stored_topic(self, topic_id: Uuid) -> StoredTopic | None:
        stored = self._topics.get(topic_id, _ABSENT)
        if stored is _ABSENT:
            stored = self._topics[topic_id] = self._reader.topic(topic_id)
        return cast("StoredTopic | None", stored)

    def _broker(self, broker_id: int) -> BrokerRegistration | None:
        """A broker's registration after the steps so far (None: not registered)."""
        if broker_id in self._writes.brokers:
            return self._writes.brokers[broker_id]
        return self._stored_broker(broker_id)

    def _stored_broker(self, broker_id: int) -> BrokerRegistration | None:
        if broker_id not in self._brokers:
            self._brokers[broker_id] = self._reader.broker(broker_id)
        return self._brokers[broker_id]

    def _topic_name(self, topic_id: Uuid) -> str | None:
        pending = self._writes.topics.get(topic_id, _ABSENT)
        if pending is not _ABSENT:
            return None if pending is None else cast("StoredTopic", pending).name
        stored = self._topics.get(topic_id, _ABSENT)
        if stored is not _ABSENT:
            return None if stored is None else cast("StoredTopic", stored).name
        name = self._topic_names.get(topic_id, _ABSENT)
        if name is _ABSENT:
            name = self._topic_names[topic_id] = self._reader.topic_name(topic_id)
        return cast("str | None", name)

    def _topic_ids(self, topic_id: Uuid) -> RangeSet:
        ids = self._topic_id_sets.get(topic_id)
        if ids is None:
            topic = self._writes.topics[topic_id] if topic_id in self._writes.topics \
                else self._stored_topic(topic_id)
            ids = RangeSet(topic.partition_ids) if topic is not None else RangeSet()
            self._topic_id_sets[topic_id] = ids
        return ids

    def partitions_on_broker(self, broker_id: int) -> Mapping[PartitionKey, Uuid]:
        """The partitions hosting a replica on ``broker_id``, each with that replica's directory, pending writes
        included (:meth:`ImageReader.partitions_on_broker`)."""
        stored = self._broker_index.get(broker_id)
        if stored is None:
            stored = self._broker_index[broker_id] = self._reader.partitions_on_broker(broker_id)
        changes = self._writes.broker_partitions.get(broker_id)
        if not changes:
            return stored
        out = dict(stored)
        for key, directory in changes.items():
            if directory is None:
                out.pop(key, None)
            else:
                out[key] = directory
        return out

    @property
    def image(self) -> MetadataImage:
        """The image after every step so far, as lazy views of the store and the pending writes."""
        w, r = self._writes, self._reader
        levels = _OverlayMapping[str, int](lambda n: r.feature_levels().get(n), r.feature_levels,
                                           w.features)
        brokers = _OverlayMapping[int, BrokerRegistration](self._stored_broker, r.broker_ids, w.brokers)
        by_name = _OverlayMapping[str, Uuid](r.topic_id_by_name, lambda: _stored_names(r), w.topic_names)
        configs = _OverlayMapping[ConfigKey, Mapping[str, str]](r.config, r.config_resources, w.configs)
        return MetadataImage(features=FeaturesImage(levels), cluster=ClusterImage(brokers),
                             topics=TopicsImage(by_id=_TopicsView(self), by_name=by_name),
                             configs=ConfigurationsImage(configs), last_offset=w.last_offset)

    @property
    def last_offset(self) -> int:
        return self._writes.last_offset

    @property
    def in_transaction(self) -> bool:
        return self._transactions.open

    def interrupt_transaction(self) -> Step | None:
        """A range was skipped (policy ``skip``) while a metadata transaction may be open: its outcome is unknown
        (:meth:`~jbod_model.replay.TransactionBuffer.interrupt`). Returns the step that leaves its records out, or
        None when none is open. A caller that learns of a skipped range by a row of its own (the Spark source's
        ``gap`` rows) says so here, at the range, rather than with the next record (which may come in a later
        micro-batch, after the transaction was stored and resumed)."""
        dropped = self._transactions.interrupt()
        return self._step([], self.last_offset, aborted=dropped) if dropped else None

    def pending_transaction(self) -> tuple[LogEntry, ...]:
        """The entries of a metadata transaction still open (empty when none): store them with the batch."""
        return self._transactions.pending

    def writes(self) -> ImageWrites:
        """The net writes of every step so far, with the partition-id sets of the topics touched folded in."""
        for topic_id, ids in self._topic_id_sets.items():
            name = self._topic_name(topic_id)
            if name is None:
                continue
            stored = self._writes.topics.get(topic_id) if topic_id in self._writes.topics \
                else self._stored_topic(topic_id)
            if stored is None or stored.partition_ids != ids.ranges():
                self._writes.topics[topic_id] = StoredTopic(name, ids.ranges())
        return self._writes

    # -- replay ----------------------------------------------------------------------------------------------

    def replay(self, entry: LogEntry) -> Step | None:
        """Replay one entry; return the step it completes, or None (inside an open transaction). Metadata
        transactions are handled as :class:`~jbod_model.replay.Replayer` handles them (``MetadataBatchLoader``)."""
        kind = type(entry.record)
        if (kind is PartitionChangeRecord or kind is NoOpRecord or kind is PartitionRecord) \
                and not self._transactions.open:
            # Outside a transaction such a record settles alone (``TransactionBuffer.offer``'s last case): skip
            # the buffer for the records that make up nearly all of a log.
            fast = self._single_record_step(entry, entry.offset)
            return fast if fast is not None else self._step([entry], entry.offset)
        settled = self._transactions.offer(entry)
        if settled is None:
            return None
        if len(settled.apply) == 1 and not settled.aborted:
            fast = self._single_record_step(settled.apply[0], entry.offset)
            if fast is not None:
                return fast
        return self._step(list(settled.apply), entry.offset, aborted=settled.aborted)

    def replay_partition_change(self, entry: LogEntry) -> tuple[str, PartitionRegistration] | None:
        """Replay ``entry`` if it is a PartitionChangeRecord that moves no replica (no Replicas, Directories,
        AddingReplicas or RemovingReplicas: a leader, ISR, ELR or recovery-state change) of a known partition,
        outside any metadata transaction; return its topic's name and the partition's registration after it. Any
        other entry, or one that would fault, is left alone (None): give it to :meth:`replay`.

        A second implementation of :meth:`replay` for the records that make up most of a busy log (61 % of the
        benchmark clusters' records), for a caller that writes each step's rows at once (the Spark operator):
        :meth:`replay`'s step for such an entry is ``entries=(entry,)`` at its offset and one partition change —
        the partition, this name, the registration before it and this one after it — and nothing else; here that
        step is not built. The registration is Kafka's merge (``PartitionRegistration.merge``) as in
        :meth:`_single_record_step`. Proven equal to :meth:`replay`, steps and writes, by
        ``tests/properties/test_changes_properties.py``."""
        record = entry.record
        if self._transactions.open or not moves_no_replica(record):
            return None
        topic_id, partition_id = record.topic_id, record.partition_id
        name = self._topic_name(topic_id)
        if name is None:
            return None
        old = self._partition(topic_id, partition_id)
        if old is None:
            return None
        try:
            new = old.merge(record)
        except ReplayFault:
            return None
        if new.directories != old.directories:
            # A registration holding no directories gets MIGRATING ones from any change (``defaultToMigrating``):
            # its replicas' rows change then, which only replay() says.
            return None
        w = self._writes
        w.last_offset = entry.offset
        w.partitions[(topic_id, partition_id)] = new
        return name, new

    def replay_noop(self, entry: LogEntry) -> bool:
        """Replay ``entry`` if it is a NoOpRecord outside any metadata transaction, and say whether it was one. A
        second implementation of :meth:`replay` for the record a controller writes every idle half second (most of
        a quiet cluster's log): :meth:`replay`'s step for it is ``entries=(entry,)`` at its offset and changes
        nothing; here the log's offset moves and no step is built. Proven equal to :meth:`replay` by
        ``tests/properties/test_changes_properties.py``."""
        if type(entry.record) is not NoOpRecord or self._transactions.open:
            return False
        self._writes.last_offset = entry.offset
        return True

    def _single_record_step(self, entry: LogEntry, offset: int) -> Step | None:
        """The step of one record that can change at most one partition's registration and its own replicas'
        states, or None for any other record (and for one that would fault): :meth:`_step` handles those.

        A second implementation of :meth:`_step` for the records that make up nearly all of a log — NoOpRecords,
        PartitionChangeRecords (a leader, an ISR, a directory, a reassignment) and PartitionRecords — proven equal to
        it by ``tests/properties/test_changes_properties.py``. It skips building the views of the image before and
        after, a :class:`~jbod_model.replay.MetadataDelta` and the replica states of other partitions: a replica's
        state reads only its partition's replicas and directories and the brokers' registrations
        (``replicas.partition_replicas``), and a partition record changes no registration, so a change that keeps
        both arrays changes no replica state, and one that changes them changes only its own partition's."""
        record = entry.record
        kind = type(record)
        w = self._writes
        if kind is NoOpRecord:
            w.last_offset = offset
            return _new_step(offset, entry.timestamp, (entry,), (), (), (), (), (), (), False, ())
        if kind is not PartitionChangeRecord and kind is not PartitionRecord:
            return None
        record = cast("PartitionChangeRecord | PartitionRecord", record)
        topic_id, partition_id = record.topic_id, record.partition_id
        name = self._topic_name(topic_id)
        if name is None:
            return None  # an unknown topic: the reference path raises the fault
        old = self._partition(topic_id, partition_id)
        try:
            if kind is PartitionRecord:
                new = PartitionRegistration.from_record(record)  # type: ignore[arg-type]
            elif old is None:
                return None  # an unknown partition: the reference path raises the fault
            else:
                new = old.merge(record)  # type: ignore[arg-type]
        except ReplayFault:
            return None
        key = (topic_id, partition_id)
        replicas: tuple[ReplicaChange, ...] = ()
        # Whether a replica came, went or changed directory: an ISR or leader change (most of them) moves none.
        moved = old is None or new.replicas != old.replicas or new.directories != old.directories
        if moved:
            # By broker, the last replica of a broker winning (as the comparison of views keyed by broker keeps it).
            placed_before, placed_after = replica_directories(old), replica_directories(new)
            replicas = self._partition_replica_changes(name, key, placed_before, placed_after)
        w.last_offset = offset
        # Every PartitionChangeRecord bumps the partition epoch: the epochs tell most registrations apart cheaply.
        if old is not None and new.partition_epoch == old.partition_epoch and new == old:
            return _new_step(offset, entry.timestamp, (entry,), (), (), (), (), (), (), False, ())
        w.partitions[key] = new
        if old is None:
            # An existing partition's id is in its topic's id set already (added when it was created).
            self._topic_ids(topic_id).add(partition_id)
        if moved:
            _index_writes(w, key, placed_before, placed_after)
        return _new_step(offset, entry.timestamp, (entry,), (), (), (), (),
                         (_new_partition_change(topic_id, partition_id, name, old, new),), replicas, False, ())

    def _partition_replica_changes(self, name: str, key: PartitionKey, olds: Mapping[int, Uuid],
                                   news: Mapping[int, Uuid]) -> tuple[ReplicaChange, ...]:
        """The replica rows one partition's new registration changes, the brokers' registrations unchanged — its
        replicas' directories by broker before (``olds``) and after (``news``), :func:`replica_directories`: as
        :meth:`_apply` compares a partition's replica views (:func:`_replica_changes`), keyed and ordered by
        broker.

        A second implementation of that comparison for this case, proven equal with the rest of the fast path by
        ``tests/properties/test_changes_properties.py``: a replica's state reads only its partition and directory
        and its broker's registration (``replicas.registration_replica``), and the registrations are the same on
        both sides, so a broker whose directory is the same before and after has the same state — only the brokers
        that came, went or moved directory get their states built and compared."""
        topic_id, partition_id = key
        out = []
        for broker_id in sorted(olds.keys() | news.keys()):
            old_dir, new_dir = olds.get(broker_id), news.get(broker_id)
            if old_dir is not None and new_dir is not None and old_dir == new_dir:
                continue
            reg = self._broker(broker_id)
            out.append(_new_replica_change(
                name,
                None if old_dir is None else registration_replica(reg, topic_id, partition_id, broker_id, old_dir),
                None if new_dir is None else registration_replica(reg, topic_id, partition_id, broker_id, new_dir)))
        return tuple(out)

    def load_snapshot(self, entries: Sequence[LogEntry], end_offset: int) -> Step:
        """Load a snapshot over the image as one step at ``end_offset - 1`` (the offset the snapshot stands for; its
        records carry offsets local to the file, as ``jbod_model.sources`` rebases them).

        Into an empty image this is the start of a stream that begins at a snapshot. Over a non-empty one it is
        what Kafka's ``MetadataLoader.handleLoadSnapshot`` does for a node that fell behind the log's start (the
        offsets it needed were deleted after a newer snapshot): ``MetadataDelta.finishSnapshot`` semantics, so the
        step's changes are the whole difference between the old image and the snapshot's — keys the snapshot lacks
        are removed (their rows close, offline intervals end) — and the image after it equals a fresh replay of
        the snapshot (:func:`jbod_model.replay.load_snapshot`). A metadata transaction still open is dropped
        (``MetadataBatchLoader.resetToImage``): its entries are the step's ``aborted``."""
        check_snapshot_offset(self._writes.last_offset, end_offset)
        dropped = self._transactions.drop()
        return self._step(list(entries), end_offset - 1, aborted=dropped, snapshot=True)

    def _step(self, entries: list[LogEntry], offset: int, *, aborted: tuple[LogEntry, ...] = (),
              snapshot: bool = False) -> Step:
        before = self.image
        delta = MetadataDelta(before, snapshot=snapshot)
        for e in entries:
            try:
                delta.replay(e.record, None if snapshot else e.offset)
            except ReplayFault as fault:
                raise fault.located(offset=e.offset, source=e.source) from None
        if snapshot:
            delta.finish_snapshot()
        return self._apply(before, delta.changes(), offset, entries, aborted, snapshot)

    def _apply(self, before: MetadataImage, ch: DeltaChanges, offset: int, entries: list[LogEntry],
               aborted: tuple[LogEntry, ...], snapshot: bool) -> Step:
        """Turn a step's :class:`DeltaChanges` into row changes and pending writes. Every "before" value is read
        first: the views of ``before`` read the pending writes live."""
        w = self._writes
        # -- 1. before -----------------------------------------------------------------------------------------
        features = [Change(name, before.features.levels.get(name), level) for name, level in ch.features.items()]
        features = [c for c in features if c.old != c.new]
        brokers = [Change(b, before.cluster.brokers.get(b), reg) for b, reg in ch.brokers.items()]
        brokers = [c for c in brokers if c.old != c.new]
        partition_keys: dict[PartitionKey, None] = dict.fromkeys(ch.partitions)
        names_before: dict[Uuid, str | None] = {}
        for topic_id in (*ch.removed_topics, *ch.created_topics):
            old_topic = before.topics.by_id.get(topic_id)
            names_before[topic_id] = None if old_topic is None else old_topic.name
            if old_topic is not None:
                partition_keys.update(dict.fromkeys((topic_id, pid) for pid in old_topic.partitions))
        # Replicas that may change: those of the partitions above, and every replica on a broker whose registration
        # changed in a way ``offline_reason`` looks at. A partition reached only through such a broker keeps its
        # registration, so only its replicas on those brokers can change, and a replica's state reads nothing but
        # its directory and its broker's registration (``replicas.registration_offline_reason``): those replicas
        # are compared alone (``via_brokers``), not the whole partition before and after. A broker going fenced
        # reaches a 1/brokers share of the cluster's partitions.
        via_brokers = [group for change in brokers if _offline_relevant(change.old, change.new)
                       for group in self._broker_replica_effects(change, partition_keys)]
        old_parts = {key: before.topics.get_partition(*key) for key in partition_keys}
        old_replicas = {key: [] if part is None else list(partition_replicas(before.cluster, key[0], key[1], part))
                        for key, part in old_parts.items()}
        for topic_id in (*{key[0]: None for key in partition_keys},
                         *{key[0]: None for _, _, _, keys in via_brokers for key in keys}):
            if topic_id not in names_before:
                names_before[topic_id] = self._topic_name(topic_id)

        def name_after(topic_id: Uuid) -> str | None:
            if topic_id in ch.created_topics:
                return ch.created_topics[topic_id]
            if topic_id in ch.removed_topics:
                return None
            return names_before.get(topic_id)

        topics = [Change(t, names_before[t], name_after(t)) for t in dict.fromkeys((*ch.removed_topics,
                                                                                   *ch.created_topics))]
        topics = [c for c in topics if c.old != c.new]
        new_parts: dict[PartitionKey, PartitionRegistration | None] = {}
        for key in partition_keys:
            topic_id = key[0]
            if topic_id in ch.created_topics:
                new_parts[key] = ch.partitions.get(key)
            elif topic_id in ch.removed_topics:
                new_parts[key] = None
            else:
                new_parts[key] = ch.partitions.get(key, old_parts[key])
        # -- 2. writes -----------------------------------------------------------------------------------------
        for fc in features:
            w.features[fc.key] = fc.new
        for bc in brokers:
            w.brokers[bc.key] = bc.new
        for topic_id in ch.removed_topics:
            old_name = names_before[topic_id]
            if old_name is not None:
                w.topic_names[old_name] = None
            w.topics[topic_id] = None
            self._topic_id_sets[topic_id] = RangeSet()
        for topic_id, name in ch.created_topics.items():
            w.topics[topic_id] = StoredTopic(name)
            w.topic_names[name] = topic_id
            self._topic_id_sets[topic_id] = RangeSet()
        partitions: list[PartitionChange] = []
        for key, new_part in new_parts.items():
            topic_id, pid = key
            old_part = old_parts[key]
            if new_part is not None:
                self._topic_ids(topic_id).add(pid)
            if old_part == new_part:
                continue
            w.partitions[key] = new_part
            part_topic = name_after(topic_id) if new_part is not None else names_before[topic_id]
            partitions.append(PartitionChange(topic_id, pid, part_topic or "", old_part, new_part))
            _index_writes(w, key, replica_directories(old_part), replica_directories(new_part))
        for resource, pending in ch.configs.items():
            # DeltaChanges.configs holds each resource's whole pending map (None values delete a key).
            live = {} if pending is None else {k: v for k, v in pending.items() if v is not None}
            w.configs[resource] = live or None
        w.last_offset = offset
        # -- 3. replica rows after -------------------------------------------------------------------------------
        after_cluster = self.image.cluster
        replicas: list[ReplicaChange] = []
        for key, olds in old_replicas.items():
            topic_id, pid = key
            new_part = new_parts.get(key, old_parts[key])
            news = [] if new_part is None else list(partition_replicas(after_cluster, topic_id, pid, new_part))
            if olds == news:
                continue
            name = (name_after(topic_id) if new_part is not None else names_before[topic_id]) or ""
            replicas.extend(_replica_changes(name, olds, news))
        groups: tuple[ReplicaGroup, ...] = ()
        if self._group_replicas:
            groups = self._replica_groups_via_brokers(via_brokers, name_after)
        else:
            replicas.extend(self._replicas_via_brokers(via_brokers, name_after))
        last = entries[-1] if entries else None
        return Step(offset=offset, timestamp=last.timestamp if last is not None else None, entries=tuple(entries),
                    aborted=aborted, features=tuple(features), brokers=tuple(brokers), topics=tuple(topics),
                    partitions=tuple(partitions), replicas=tuple(replicas), snapshot=snapshot,
                    replica_groups=groups)


    def _replicas_via_brokers(self, via_brokers: Sequence[_BrokerReach],
                              name_after: Callable[[Uuid], str | None]) -> list[ReplicaChange]:
        """The replica rows that changed on partitions reached only through brokers whose registration changed
        (see :meth:`_apply`, :meth:`_broker_replica_effects`): each such replica's state under the broker's old and
        new registration. The same rows as comparing the partitions' whole replica views before and after (row
        order within a step carries no meaning)."""
        out: list[ReplicaChange] = []
        names = _topic_names(via_brokers, name_after)
        for broker_id, directory, (old_reason, new_reason, state), keys in via_brokers:
            for topic_id, pid in keys:
                out.append(_new_replica_change(
                    names[topic_id],
                    new_replica_state(topic_id, pid, broker_id, directory, state, old_reason is not None, old_reason),
                    new_replica_state(topic_id, pid, broker_id, directory, state, new_reason is not None, new_reason)))
        return out

    def _replica_groups_via_brokers(self, via_brokers: Sequence[_BrokerReach],
                                    name_after: Callable[[Uuid], str | None]) -> tuple[ReplicaGroup, ...]:
        """:meth:`_replicas_via_brokers`'s rows as :class:`ReplicaGroup`\\ s, one per (broker, directory) whose
        replicas changed."""
        names = _topic_names(via_brokers, name_after)
        return tuple(ReplicaGroup(broker_id, directory, effect[2], effect[0], effect[1], tuple(keys),
                                  tuple([names[key[0]] for key in keys]))
                     for broker_id, directory, effect, keys in via_brokers)

    def _broker_replica_effects(self, change: Change[int, BrokerRegistration],
                                skip: Mapping[PartitionKey, None]) -> list[_BrokerReach]:
        """What a broker's registration change does to its replicas outside the partitions in ``skip`` (those the
        step changed, compared whole): per directory of the broker's replicas whose state it changes, ``(broker id,
        directory, (reason before, reason after, directory state), the partitions)``.

        A replica's state reads only its directory and its broker's registration
        (``replicas.registration_offline_reason``), so it is decided once per (broker, directory), from the brokers'
        index alone: no partition is read. A fenced broker reaches thousands of partitions in a handful of
        directories."""
        hosted = self.partitions_on_broker(change.key)
        effects: dict[Uuid, _Effect] = {}
        for directory in dict.fromkeys(hosted.values()):
            before = registration_offline_reason(change.old, directory)
            after = registration_offline_reason(change.new, directory)
            if before != after:
                effects[directory] = (before, after, DirectoryState.of(directory))
        if not effects:
            return []
        if len(effects) == 1:
            [(only, _)] = effects.items()
            groups = {only: [key for key, directory in hosted.items() if directory == only and key not in skip]}
        else:
            groups = {directory: [] for directory in effects}
            for key, directory in hosted.items():
                keys = groups.get(directory)
                if keys is not None and key not in skip:
                    keys.append(key)
        return [(change.key, directory, effects[directory], keys) for directory, keys in groups.items() if keys]


def _topic_names(via_brokers: Sequence[_BrokerReach], name_after: Callable[[Uuid], str | None]) -> dict[Uuid, str]:
    """The topic name (after the step) of each partition the brokers reach, by topic id."""
    return {topic_id: name_after(topic_id) or ""
            for topic_id in {key[0]: None for _, _, _, keys in via_brokers for key in keys}}


def moves_no_replica(record: Record) -> TypeGuard[PartitionChangeRecord]:
    """Whether ``record`` is a PartitionChangeRecord that moves no replica: no Replicas, Directories,
    AddingReplicas or RemovingReplicas — a leader, ISR, ELR or recovery-state change, most of a busy log
    (:meth:`IncrementalReplayer.replay_partition_change`)."""
    return (type(record) is PartitionChangeRecord and record.replicas is None and record.directories is None
            and record.adding_replicas is None and record.removing_replicas is None)


def replica_directories(part: PartitionRegistration | None) -> dict[int, Uuid]:
    """Each replica's broker id → its directory (``PartitionRegistration.directories``): what the brokers' index
    (:meth:`ImageReader.partitions_on_broker`) holds of a partition. For a broker listed twice (the model replays
    such a registration as Kafka stores it), the last one's directory, as a replica view keyed by broker keeps it."""
    return {} if part is None else dict(zip(part.replicas, part.directories, strict=True))


def _index_writes(w: ImageWrites, key: PartitionKey, before: Mapping[int, Uuid], after: Mapping[int, Uuid]) -> None:
    """The brokers' index entries a partition's change moves, from its replicas' directories by broker before and
    after (:func:`replica_directories`): a broker that left, one that came, one whose replica changed directory."""
    if before == after:
        return
    for broker_id in before.keys() - after.keys():
        w.broker_partitions.setdefault(broker_id, {})[key] = None
    for broker_id, directory in after.items():
        if before.get(broker_id) != directory:
            w.broker_partitions.setdefault(broker_id, {})[key] = directory


def _replica_changes(name: str, olds: Sequence[ReplicaState],
                     news: Sequence[ReplicaState]) -> tuple[ReplicaChange, ...]:
    """The replica rows of one partition of topic ``name`` that differ between its replica views before (``olds``)
    and after (``news``), keyed and ordered by broker: a broker only on one side gives a row with the other side
    None."""
    if olds == news:
        return ()
    old_by_broker = {r.broker_id: r for r in olds}
    new_by_broker = {r.broker_id: r for r in news}
    out = []
    for broker_id in sorted(old_by_broker.keys() | new_by_broker.keys()):
        o, n = old_by_broker.get(broker_id), new_by_broker.get(broker_id)
        if o != n:
            out.append(ReplicaChange(name, o, n))
    return tuple(out)


def _offline_relevant(old: BrokerRegistration | None, new: BrokerRegistration | None) -> bool:
    """Whether a registration change can change ``replicas.offline_reason`` for the broker's replicas: it reads
    only whether the broker is registered, fenced, and which directories are online."""
    if old is None or new is None:
        return True
    return old.fenced != new.fenced or old.directories != new.directories


def _stored_names(reader: ImageReader) -> Iterator[str]:
    for topic_id in reader.topic_ids():
        topic = reader.topic(topic_id)
        if topic is not None:
            yield topic.name


# ---------------------------------------------------------------------------------------------------------------
# An in-memory store


class DictImageStore:
    """An :class:`ImageReader` over plain dicts that applies :class:`ImageWrites`: the reference store for tests,
    and the incremental path without any external store."""

    def __init__(self) -> None:
        self._last_offset = -1
        self.features: dict[str, int] = {}
        self.brokers: dict[int, BrokerRegistration] = {}
        self.topics: dict[Uuid, StoredTopic] = {}
        self.topic_names: dict[str, Uuid] = {}
        self.partitions: dict[PartitionKey, PartitionRegistration] = {}
        self.broker_partitions: dict[int, dict[PartitionKey, Uuid]] = {}
        self.configs: dict[ConfigKey, Mapping[str, str]] = {}
        #: Every key read, by kind: tests use it to check that a batch reads only what it touches.
        self.reads: dict[str, int] = {}

    def _count(self, kind: str) -> None:
        self.reads[kind] = self.reads.get(kind, 0) + 1

    def last_offset(self) -> int:
        return self._last_offset

    def feature_levels(self) -> Mapping[str, int]:
        return self.features

    def broker(self, broker_id: int) -> BrokerRegistration | None:
        self._count("broker")
        return self.brokers.get(broker_id)

    def broker_ids(self) -> Iterable[int]:
        return list(self.brokers)

    def topic(self, topic_id: Uuid) -> StoredTopic | None:
        self._count("topic")
        return self.topics.get(topic_id)

    def topic_name(self, topic_id: Uuid) -> str | None:
        self._count("topic")
        topic = self.topics.get(topic_id)
        return None if topic is None else topic.name

    def topic_ids(self) -> Iterable[Uuid]:
        self._count("topic_scan")
        return list(self.topics)

    def topic_id_by_name(self, name: str) -> Uuid | None:
        return self.topic_names.get(name)

    def partition(self, topic_id: Uuid, partition_id: int) -> PartitionRegistration | None:
        self._count("partition")
        return self.partitions.get((topic_id, partition_id))

    def partitions_on_broker(self, broker_id: int) -> Mapping[PartitionKey, Uuid]:
        self._count("broker_partitions")
        return dict(self.broker_partitions.get(broker_id, {}))

    def config(self, resource: ConfigKey) -> Mapping[str, str] | None:
        return self.configs.get(resource)

    def config_resources(self) -> Iterable[ConfigKey]:
        return list(self.configs)

    def apply(self, writes: ImageWrites) -> None:
        """Store a batch's writes."""
        self._last_offset = writes.last_offset
        _put_all(self.features, writes.features)
        _put_all(self.brokers, writes.brokers)
        _put_all(self.topics, writes.topics)
        _put_all(self.topic_names, writes.topic_names)
        _put_all(self.partitions, writes.partitions)
        _put_all(self.configs, writes.configs)
        for broker_id, keys in writes.broker_partitions.items():
            hosted = self.broker_partitions.setdefault(broker_id, {})
            for key, directory in keys.items():
                if directory is None:
                    hosted.pop(key, None)
                else:
                    hosted[key] = directory
            if not hosted:
                del self.broker_partitions[broker_id]

    def image(self) -> MetadataImage:
        """The stored image, materialized (for comparisons)."""
        by_id = {tid: TopicImage(name=t.name, id=tid,
                                 partitions={pid: self.partitions[(tid, pid)] for pid in RangeSet(t.partition_ids)})
                 for tid, t in self.topics.items()}
        return MetadataImage(features=FeaturesImage(dict(self.features)), cluster=ClusterImage(dict(self.brokers)),
                             topics=TopicsImage(by_id=by_id, by_name=dict(self.topic_names)),
                             configs=ConfigurationsImage(dict(self.configs)), last_offset=self._last_offset)


def _put_all(target: dict[K, V], writes: Mapping[K, V | None]) -> None:
    for key, value in writes.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = value


def replay_incrementally(store: DictImageStore, entries: Iterable[LogEntry], pending: Sequence[LogEntry] = (), *,
                         group_replicas: bool = False) -> tuple[list[Step], tuple[LogEntry, ...]]:
    """Replay one batch onto ``store`` and store its writes; return the steps and the still-open transaction."""
    replayer = IncrementalReplayer(store, pending, group_replicas=group_replicas)
    steps = [s for s in (replayer.replay(e) for e in entries) if s is not None]
    store.apply(replayer.writes())
    return steps, replayer.pending_transaction()


# ---------------------------------------------------------------------------------------------------------------
# Request streams: the reference controller across batches


def resume_controller(image: MetadataImage, *, state: ControllerState | None, next_offset: int,
                      pending: Sequence[LogEntry] = (), config: ControllerConfig | None = None,
                      ) -> ReferenceController:
    """A :class:`~jbod_model.controller.controller.ReferenceController` that continues where one stopped at the end
    of a batch: the image (lazy views are fine), the controller-only state, the next write offset, and the entries
    of a metadata transaction still open (replayed again; they only buffer). ``state`` None starts a controller on
    ``image`` as ``ReferenceController`` does (every broker registered at the image's offset)."""
    controller = ReferenceController(image, config, next_offset=next_offset, state=state)
    for entry in pending:
        controller.replay(entry)
    return controller


def response_partition_errors(response: Mapping[str, Any]) -> list[tuple[str | None, int, int]]:
    """``(topic id or name, partition index, error code)`` of every per-partition result in a response's JSON
    (AssignReplicasToDirs, AlterPartition, AlterPartitionReassignments, …), in document order."""
    out: list[tuple[str | None, int, int]] = []

    def walk(node: Any, topic: str | None) -> None:
        if isinstance(node, Mapping):
            here = node.get("topicId", node.get("name", node.get("topicName", topic)))
            topic_here = here if isinstance(here, str) else topic
            index = node.get("partitionIndex", node.get("partitionId"))
            code = node.get("errorCode")
            if isinstance(index, int) and isinstance(code, int):
                out.append((topic_here, index, code))
            for value in node.values():
                walk(value, topic_here)
        elif isinstance(node, list):
            for item in node:
                walk(item, topic)

    walk(response, None)
    return out
