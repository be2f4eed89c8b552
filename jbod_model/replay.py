"""Replay: the only way an image changes. Mirrors ``org.apache.kafka.image.MetadataDelta`` (``replay`` per record,
``apply`` to a new image) with the controller-side consistency checks of ``ClusterControlManager.replay`` and
``ReplicationControlManager.replay`` — a record those would refuse is a :class:`ReplayFault` naming the record and
its offset.

Replay is batch-boundary invariant: applying a record list through any split into deltas gives the same image
(a property test checks this, as Kafka's ``RecordTestUtils`` harness does). :class:`Replayer` adds Kafka's
metadata-transaction handling (``MetadataBatchLoader``): records between Begin/EndTransactionRecord become visible
together, and an AbortTransactionRecord discards them.

A snapshot can also be loaded over a non-empty image, as ``MetadataLoader.handleLoadSnapshot`` does for a node that
fell behind the log's start: ``MetadataDelta(image, snapshot=True)`` replays the snapshot's records and
:meth:`MetadataDelta.finish_snapshot` (``MetadataDelta.finishSnapshot``) deletes whatever the old image held that
the snapshot does not — the result is exactly the image of the snapshot (:func:`load_snapshot`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Final

from immutables import Map as PersistentMap

from jbod_model.errors import InputError, ReplayFault
from jbod_model.gaps import absorb as absorb_gap_consequence
from jbod_model.gaps import current_gap
from jbod_model.image import (
    EMPTY_IMAGE,
    BrokerRegistration,
    ClusterImage,
    ConfigResourceType,
    ConfigurationsImage,
    FeaturesImage,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
    TopicsImage,
)
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import (
    AbortTransactionRecord,
    BeginTransactionRecord,
    BrokerRegistrationChangeRecord,
    BrokerRegistrationFencingChange,
    BrokerRegistrationInControlledShutdownChange,
    ConfigRecord,
    EndTransactionRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    NoOpRecord,
    OpaqueRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    Record,
    RegisterBrokerRecord,
    RegisterControllerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    ZkMigrationStateRecord,
)
from jbod_model.slots import gc_paused
from jbod_model.uuid import Uuid

_REMOVED = None
#: The records that open, close or abort a metadata transaction (:class:`TransactionBuffer`).
_TRANSACTION_RECORDS = (BeginTransactionRecord, EndTransactionRecord, AbortTransactionRecord)


@dataclass(slots=True)
class _TopicChange:
    """Pending changes to one topic (``TopicDelta``)."""

    name: str
    id: Uuid
    # The image's own mapping, never copied or mutated here: a state-backed (lazy) image only loads the partitions
    # a record touches. None for a topic created in this delta.
    base: Mapping[int, PartitionRegistration] | None
    changed: dict[int, PartitionRegistration] = field(default_factory=dict)

    def get(self, partition_id: int) -> PartitionRegistration | None:
        part = self.changed.get(partition_id)
        if part is None and self.base is not None:
            part = self.base.get(partition_id)
        return part


def _partitions_after(base: Mapping[int, PartitionRegistration] | None,
                      changed: Mapping[int, PartitionRegistration]) -> Mapping[int, PartitionRegistration]:
    """A topic's partitions after a delta: ``base`` with ``changed`` laid over it, as a new persistent map that shares
    every untouched entry with ``base`` (Kafka's ``TopicDelta.apply`` builds the new ``TopicImage`` the same way, on
    ``ImmutableMap``: a hash array mapped trie). The delta may keep replaying after ``apply``, and an image never
    changes, so nothing here is mutated. Copying the topic's whole dict instead cost every batch of a long log each
    touched topic's size, however little the batch changed: at 200 k partitions a fifth of the log suite's tracker
    (``benchmarks/step_checks_benchmark.py``)."""
    if isinstance(base, PersistentMap):
        return base.update(changed)
    # A dict from a snapshot, the tables or an image built by hand, or the Spark operator's state-backed mapping (read
    # through its items: Map() takes any other mapping for a sequence of pairs): converted once, and every later
    # batch's change of the topic updates the persistent map.
    return PersistentMap(() if base is None else base.items()).update(changed)


@dataclass(frozen=True, slots=True)
class DeltaChanges:
    """The net effect of a delta on its base image.

    ``brokers`` maps a broker id to its new registration, or None when it was unregistered. ``removed_topics``
    names topics whose id was deleted (a topic id can be both removed and, re-created, in ``created_topics``);
    ``partitions`` holds every partition registration written by the delta (of existing or created topics).
    ``features`` maps a feature to its new level, None when removed; ``configs`` maps a resource to its pending
    key → value map (None values delete a key), or None when the resource's configs were dropped.
    """

    features: Mapping[str, int | None]
    brokers: Mapping[int, BrokerRegistration | None]
    created_topics: Mapping[Uuid, str]
    removed_topics: Mapping[Uuid, str]
    partitions: Mapping[tuple[Uuid, int], PartitionRegistration]
    configs: Mapping[tuple[int, str], Mapping[str, str | None] | None]
    last_offset: int


class MetadataDelta:
    """Changes accumulated on top of an image. Mirrors ``MetadataDelta``: ``replay`` each record, then ``apply``.

    Only the families touched are rebuilt by :meth:`apply`; everything else is shared with the base image.
    """

    __slots__ = ("_base", "_brokers", "_configs", "_features", "_last_offset", "_removed_topics", "_snapshot",
                 "_topic_by_identity", "_topics")

    def __init__(self, image: MetadataImage = EMPTY_IMAGE, *, snapshot: bool = False) -> None:
        """``snapshot``: the records to replay are a snapshot that replaces ``image`` (``MetadataLoader`` loading a
        snapshot into its current image); :meth:`finish_snapshot` must follow them."""
        self._base = image
        # A snapshot is a whole image: its records are checked against each other only, so until finish_snapshot()
        # the image it replaces is invisible to lookups. (Kafka's image-side MetadataDelta checks nothing; this
        # model's replay carries the controller's checks, which would refuse e.g. a TopicRecord for an id the old
        # image holds, or a directory an old broker had.)
        self._snapshot = snapshot
        self._features: dict[str, int | None] = {}
        self._brokers: dict[int, BrokerRegistration | None] = {}
        self._topics: dict[Uuid, _TopicChange] = {}
        # _topics by the identity of the id object a record holds (see _topic), cleared whenever a topic is removed
        # or replaced in _topics. Each value keeps its id object alive, so an id() here is never reused.
        self._topic_by_identity: dict[int, tuple[Uuid, _TopicChange]] = {}
        self._removed_topics: dict[Uuid, str] = {}
        self._configs: dict[tuple[int, str], dict[str, str | None] | None] = {}
        self._last_offset = image.last_offset

    # -- lookups that see pending changes -------------------------------------------------------------------

    def broker(self, broker_id: int) -> BrokerRegistration | None:
        if broker_id in self._brokers:
            return self._brokers[broker_id]
        return None if self._snapshot else self._base.cluster.brokers.get(broker_id)

    def partition(self, topic_id: Uuid, partition_id: int) -> PartitionRegistration | None:
        """The partition as the records replayed so far left it (``TopicsDelta``'s view of its topic)."""
        change = self._topic(topic_id)
        return None if change is None else change.get(partition_id)

    def _topic(self, topic_id: Uuid) -> _TopicChange | None:
        # Ids decoded from a log are shared instances (one per id), so nearly every partition record's topic is
        # found by identity, without the dataclass's Python-level __hash__ that a lookup in _topics costs.
        known = self._topic_by_identity.get(id(topic_id))
        if known is not None and known[0] is topic_id:
            return known[1]
        change = self._topics.get(topic_id)
        if change is None:
            if topic_id in self._removed_topics or self._snapshot:
                return None
            topic = self._base.topics.by_id.get(topic_id)
            if topic is None:
                return None
            change = _TopicChange(name=topic.name, id=topic.id, base=topic.partitions)
            self._topics[topic_id] = change
        self._topic_by_identity[id(topic_id)] = (topic_id, change)
        return change

    def _topic_id_by_name(self, name: str) -> Uuid | None:
        for change in self._topics.values():
            if change.name == name:
                return change.id
        if self._snapshot:
            return None
        tid = self._base.topics.by_name.get(name)
        return None if tid is None or tid in self._removed_topics else tid

    # -- replay ----------------------------------------------------------------------------------------------

    def replay(self, record: Record, offset: int | None = None) -> None:
        """Apply one record to the delta (``MetadataDelta.replay``). Raises ReplayFault with the offset set —
        unless the fault is a consequence of a range skipped under policy ``skip`` (:mod:`jbod_model.gaps`): then
        the record is left out (it changed nothing) and provenance moves past it."""
        try:
            self._replay(record)
        except ReplayFault as fault:
            located = fault.located(offset=offset)
            if not absorb_gap_consequence(located):
                raise located from None
        if offset is not None:
            self._last_offset = offset

    def replay_change(self, record: PartitionChangeRecord, offset: int | None = None,
                      ) -> tuple[PartitionRegistration, PartitionRegistration] | None:
        """:meth:`replay` of a PartitionChangeRecord that also says what it did: its partition before and after,
        found by the one lookup the replay makes (asking :meth:`partition` before and after :meth:`replay` took two
        more, a tenth of the log suite's tracker at 200 k partitions). None when the record was left out, as a
        consequence of a skipped range (:meth:`replay`)."""
        try:
            done = self._replay_change(record)
        except ReplayFault as fault:
            located = fault.located(offset=offset)
            if not absorb_gap_consequence(located):
                raise located from None
            done = None
        if offset is not None:
            self._last_offset = offset
        return done

    def _replay_change(self, record: PartitionChangeRecord) -> tuple[PartitionRegistration, PartitionRegistration]:
        change = self._topic(record.topic_id)
        if change is None:
            raise ReplayFault(f"Can't find topic with ID {record.topic_id}", record=record)
        prev = change.get(record.partition_id)
        if prev is None:
            raise ReplayFault(f"Unable to find partition {record.topic_id}:{record.partition_id}", record=record)
        new = change.changed[record.partition_id] = prev.merge(record)
        return prev, new

    def _replay(self, record: Record) -> None:
        # The cases are tried in order: the record types that make up almost all of a log come first.
        match record:
            case PartitionChangeRecord():
                self._replay_change(record)
            case PartitionRecord():
                change = self._topic(record.topic_id)
                if change is None:
                    raise ReplayFault(f"Can't find topic with ID {record.topic_id}", record=record)
                change.changed[record.partition_id] = PartitionRegistration.from_record(record)
            case NoOpRecord():
                pass
            case RegisterBrokerRecord():
                self._replay_register_broker(record)
            case UnregisterBrokerRecord():
                self._require_epoch(record, record.broker_id, record.broker_epoch)
                self._brokers[record.broker_id] = _REMOVED
            case FenceBrokerRecord():
                reg = self._require_epoch(record, record.id, record.epoch)
                self._brokers[record.id] = replace(reg, fenced=True)
            case UnfenceBrokerRecord():
                reg = self._require_epoch(record, record.id, record.epoch)
                self._brokers[record.id] = replace(reg, fenced=False)
            case BrokerRegistrationChangeRecord():
                self._replay_registration_change(record)
            case TopicRecord():
                self._replay_topic(record)
            case RemoveTopicRecord():
                change = self._topic(record.topic_id)
                if change is None:
                    raise ReplayFault(f"Can't find topic with ID {record.topic_id} to remove", record=record)
                del self._topics[record.topic_id]
                self._topic_by_identity.clear()
                # Keep the name the *base* image knows the id by: apply() must drop that name, even when the id was
                # re-created (under another name) and removed again within this delta.
                self._removed_topics.setdefault(record.topic_id, change.name)
                # MetadataDelta.replay(RemoveTopicRecord) also drops the topic's configs.
                self._configs[(ConfigResourceType.TOPIC, change.name)] = None
            case FeatureLevelRecord():
                self._features[record.name] = record.feature_level if record.feature_level != 0 else None
            case ConfigRecord():
                key = (record.resource_type, record.resource_name)
                pending = self._configs.get(key)
                if pending is None:
                    base = {} if key in self._configs or self._snapshot \
                        else dict(self._base.configs.resources.get(key, {}))
                    pending = dict[str, str | None](base)
                    self._configs[key] = pending
                pending[record.name] = record.value
            case (ProducerIdsRecord() | ZkMigrationStateRecord() | RegisterControllerRecord()
                  | BeginTransactionRecord() | EndTransactionRecord() | AbortTransactionRecord()
                  | OpaqueRecord()):
                # No effect on what this model images (controllers, producer ids, ZK migration, ACLs, quotas…).
                pass

    def _require_epoch(self, record: Record, broker_id: int, epoch: int) -> BrokerRegistration:
        """``ClusterControlManager`` refuses broker records for an unknown broker or another epoch (R4.3, I7)."""
        reg = self.broker(broker_id)
        if reg is None:
            raise ReplayFault(f"no broker registration found for broker {broker_id}", record=record)
        if reg.epoch != epoch:
            raise ReplayFault(f"no broker registration with epoch {epoch} found for broker {broker_id} "
                              f"(current epoch {reg.epoch})", record=record)
        return reg

    def _replay_register_broker(self, record: RegisterBrokerRecord) -> None:
        """``ClusterControlManager.replay(RegisterBrokerRecord)`` + ``updateDirectories`` (R4.1): a directory may
        belong to one broker only."""
        new = BrokerRegistration.from_record(record)
        if new.directories:
            # Every other broker's directories by id, the first broker found keeping each (the order of the
            # search): one hashed lookup per directory instead of comparing it with every directory of the
            # cluster (360 ids at 60 brokers × 6 disks, for each of a restarting broker's directories).
            owners: dict[Uuid, int] = {}
            for other_id, other in self._all_brokers():
                if other_id != new.id:
                    for taken in other.directories:
                        owners.setdefault(taken, other_id)
            for directory in new.directories:
                owner = owners.get(directory)
                if owner is not None:
                    raise ReplayFault(f"directory {directory} is already assigned to broker {owner}", record=record)
        self._brokers[new.id] = new

    def _all_brokers(self) -> Iterable[tuple[int, BrokerRegistration]]:
        for broker_id, reg in () if self._snapshot else self._base.cluster.brokers.items():
            if broker_id not in self._brokers:
                yield broker_id, reg
        for broker_id, maybe in self._brokers.items():
            if maybe is not None:
                yield broker_id, maybe

    def _replay_registration_change(self, record: BrokerRegistrationChangeRecord) -> None:
        """``ClusterControlManager.replay(BrokerRegistrationChangeRecord)`` with ``cloneWith`` (R4.3, R4.4)."""
        reg = self._require_epoch(record, record.broker_id, record.broker_epoch)
        try:
            fencing = BrokerRegistrationFencingChange(record.fenced)
        except ValueError:
            raise ReplayFault(f"unknown value for fenced field: {record.fenced}", record=record) from None
        try:
            shutdown = BrokerRegistrationInControlledShutdownChange(record.in_controlled_shutdown)
        except ValueError:
            raise ReplayFault(f"unknown value for inControlledShutdown field: {record.in_controlled_shutdown}",
                              record=record) from None
        fenced = reg.fenced
        if fencing is BrokerRegistrationFencingChange.FENCE:
            fenced = True
        elif fencing is BrokerRegistrationFencingChange.UNFENCE:
            fenced = False
        in_shutdown = reg.in_controlled_shutdown or (
            shutdown is BrokerRegistrationInControlledShutdownChange.IN_CONTROLLED_SHUTDOWN)
        # R4.4: an empty LogDirs list means "no change" — it cannot say "no online directories" (R5.5).
        directories = tuple(sorted(record.log_dirs)) if record.log_dirs else reg.directories
        for directory in directories:
            if directory not in reg.directories:
                owner = next((b for b, r in self._all_brokers() if b != reg.id and directory in r.directories),
                             None)
                if owner is not None:
                    raise ReplayFault(f"directory {directory} is already assigned to broker {owner}",
                                      record=record)
        updated = replace(reg, fenced=fenced, in_controlled_shutdown=in_shutdown, directories=directories)
        if updated != reg:
            self._brokers[reg.id] = updated

    def _replay_topic(self, record: TopicRecord) -> None:
        if self._topic(record.topic_id) is not None:
            raise ReplayFault(f"topic ID {record.topic_id} already exists", record=record)
        existing = self._topic_id_by_name(record.name)
        if existing is not None:
            raise ReplayFault(f"topic name {record.name!r} already exists with ID {existing}", record=record)
        # The id stays in _removed_topics: apply() must still drop the base topic (and its name) that the re-created
        # one replaces; _topic() finds the re-created topic in _topics first.
        self._topics[record.topic_id] = _TopicChange(name=record.name, id=record.topic_id, base=None)
        self._topic_by_identity.clear()

    # -- snapshots -------------------------------------------------------------------------------------------

    def finish_snapshot(self) -> None:
        """``MetadataDelta.finishSnapshot``: everything of the replaced image that the snapshot did not replay is
        deleted — features (``FeaturesDelta``), brokers (``ClusterDelta``), topics (``TopicsDelta``) and config
        resources (``ConfigurationsDelta``). A topic the snapshot holds replaces the old one whole, partitions
        included (``TopicsDelta.replay(TopicRecord)`` starts it from an empty ``TopicImage``), and a resource's
        configs are the snapshot's keys only. Called by :meth:`changes` and :meth:`apply` if the caller did not;
        afterwards the delta is an ordinary one (further records replay on the snapshot's state)."""
        if not self._snapshot:
            return
        base = self._base
        for name in base.features.levels:
            self._features.setdefault(name, None)
        for broker_id in base.cluster.brokers:
            self._brokers.setdefault(broker_id, _REMOVED)
        for topic_id, topic in base.topics.by_id.items():
            # Every old topic id goes, even one the snapshot re-creates: apply() removes it with the name the old
            # image knew it by, then adds the snapshot's topic (DeltaChanges allows an id both removed and created).
            self._removed_topics[topic_id] = topic.name
        for resource in base.configs.resources:
            self._configs.setdefault(resource, None)
        self._snapshot = False

    # -- what changed ----------------------------------------------------------------------------------------

    def changes(self) -> DeltaChanges:
        """What this delta changes, without building a new image: for consumers that keep the image elsewhere
        (the Spark job's state store) and write back only what changed (``MetadataDelta.topicsDelta()`` etc.)."""
        self.finish_snapshot()
        partitions: dict[tuple[Uuid, int], PartitionRegistration] = {}
        created: dict[Uuid, str] = {}
        for topic_id, change in self._topics.items():
            if change.base is None:
                created[topic_id] = change.name
            for pid, part in change.changed.items():
                partitions[(topic_id, pid)] = part
        return DeltaChanges(
            features=dict(self._features), brokers=dict(self._brokers), created_topics=created,
            removed_topics=dict(self._removed_topics),
            partitions=partitions,
            configs={k: (None if v is None else dict(v)) for k, v in self._configs.items()},
            last_offset=self._last_offset)

    # -- apply -----------------------------------------------------------------------------------------------

    def apply(self) -> MetadataImage:
        """A new image with every pending change (``MetadataDelta.apply``); unchanged families are shared."""
        self.finish_snapshot()
        base = self._base
        features = base.features
        if self._features:
            levels = dict(base.features.levels)
            for name, level in self._features.items():
                if level is None:
                    levels.pop(name, None)
                else:
                    levels[name] = level
            features = FeaturesImage(levels)
        cluster = base.cluster
        if self._brokers:
            brokers = dict(base.cluster.brokers)
            for broker_id, reg in self._brokers.items():
                if reg is None:
                    brokers.pop(broker_id, None)
                else:
                    brokers[broker_id] = reg
            cluster = ClusterImage(brokers)
        topics = base.topics
        if self._topics or self._removed_topics:
            by_id = dict(base.topics.by_id)
            by_name = dict(base.topics.by_name)
            for topic_id, name in self._removed_topics.items():
                if by_id.pop(topic_id, None) is not None:
                    by_name.pop(name, None)
            for topic_id, change in self._topics.items():
                if change.base is not None and not change.changed:
                    continue
                partitions = _partitions_after(change.base, change.changed)
                by_id[topic_id] = TopicImage(name=change.name, id=topic_id, partitions=partitions)
                by_name[change.name] = topic_id
            topics = TopicsImage(by_id=by_id, by_name=by_name)
        configs = base.configs
        if self._configs:
            resources = dict(base.configs.resources)
            for key, pending in self._configs.items():
                live = {} if pending is None else {k: v for k, v in pending.items() if v is not None}
                if live:
                    resources[key] = live
                else:
                    resources.pop(key, None)
            configs = ConfigurationsImage(resources)
        return MetadataImage(features=features, cluster=cluster, topics=topics, configs=configs,
                             last_offset=self._last_offset)


@dataclass(frozen=True, slots=True)
class Settled:
    """What a metadata transaction buffer releases for one entry: the entries to replay now (a record outside any
    transaction, a committed transaction's records, or an AbortTransactionRecord alone) and those it discarded."""

    apply: tuple[LogEntry, ...]
    aborted: tuple[LogEntry, ...] = ()


#: What :meth:`TransactionBuffer.offer` is told of the skipped ranges when its caller does not say: ask the active
#: collector (:func:`jbod_model.gaps.current_gap`) as the entry is offered.
ASK: Final = object()
#: The skipped range an open transaction began after, for a buffer resumed from stored entries: not known, so the
#: first one it is told of stands for it (a gap since then was told to the buffer that stored them).
_RESUMED: Final = object()


class TransactionBuffer:
    """Kafka's ``MetadataBatchLoader`` transaction handling, written once for every replayer: records between
    Begin/EndTransactionRecord are held and released together at the end; an AbortTransactionRecord discards them
    (only the abort itself is replayed, to advance provenance past them). A Begin inside an open transaction, or an
    End/Abort outside one, is a replay fault.

    Under policy ``skip`` a range skipped while a transaction is open may have held its end (:meth:`interrupt`):
    the buffer notices one when the active collector's latest range (``gaps.current_gap``) is not the one the
    transaction began after."""

    __slots__ = ("_gap", "_open", "_pending")

    def __init__(self) -> None:
        self._pending: list[LogEntry] = []
        self._open = False
        self._gap: object = None

    @property
    def open(self) -> bool:
        """A transaction has begun and not ended."""
        return self._open

    @property
    def pending(self) -> tuple[LogEntry, ...]:
        """The entries of the open transaction (empty when none is open)."""
        return tuple(self._pending) if self._open else ()

    def resumed(self) -> None:
        """The open transaction was offered again from stored entries (a micro-batch's pending transaction): the
        skipped range it began after is not known here, so the first one seen stands for it."""
        if self._open:
            self._gap = _RESUMED

    def offer(self, entry: LogEntry, gap: object = ASK) -> Settled | None:
        """Take one entry; return what it settles, or None while a transaction stays open. ``gap``: the latest
        skipped range when the entry was read (:data:`ASK`: ask the active collector now) — a caller that buffers
        entries before offering them says which range each was read after."""
        interrupted: tuple[LogEntry, ...] = ()
        begins = isinstance(entry.record, BeginTransactionRecord)
        if self._open or begins:
            seen = current_gap() if gap is ASK else gap
            if self._open and seen != self._gap:
                if self._gap is _RESUMED or seen is None:
                    self._gap = seen  # resumed, or no collector active now: nothing says a range came since
                else:
                    interrupted = self.interrupt()
            if begins:
                self._gap = seen
        settled = self._begin(entry) if begins else self._offer(entry)
        if not interrupted:
            return settled
        return Settled(settled.apply if settled is not None else (),
                       aborted=interrupted + (settled.aborted if settled is not None else ()))

    def _begin(self, entry: LogEntry) -> Settled | None:
        dropped: tuple[LogEntry, ...] = ()
        if self._open:
            fault = ReplayFault("BeginTransactionRecord inside an open transaction", record=entry.record,
                                offset=entry.offset, source=entry.source)
            # Under policy skip the open transaction's end may have been in a skipped range: its outcome is
            # unknown, so its records are dropped (as an abort would) and the new transaction begins.
            if not absorb_gap_consequence(fault, self._pending[1:]):
                raise fault
            dropped = self.drop()
        self._open, self._pending = True, [entry]
        return Settled((), aborted=dropped) if dropped else None

    def _offer(self, entry: LogEntry) -> Settled | None:
        record = entry.record
        if self._open:
            self._pending.append(entry)
            if isinstance(record, EndTransactionRecord):
                return Settled(self.drop())
            if isinstance(record, AbortTransactionRecord):
                return Settled((entry,), aborted=self.drop()[:-1])
            return None
        if isinstance(record, (EndTransactionRecord, AbortTransactionRecord)):
            fault = ReplayFault(f"{record.TYPE_NAME} without a BeginTransactionRecord", record=record,
                                offset=entry.offset, source=entry.source)
            # Its BeginTransactionRecord may have been in a skipped range (policy skip): the records since were
            # replayed as they came; the end itself changes nothing.
            if not absorb_gap_consequence(fault):
                raise fault
        return Settled((entry,))

    def interrupt(self) -> tuple[LogEntry, ...]:
        """A range was skipped while a transaction was open (policy ``skip``): its End or Abort may have been in it,
        so whether it committed is unknown. Its records read before the range are left out — a gap consequence
        (``jbod_model.gaps``) at its BeginTransactionRecord, their partitions, topics and brokers unknown after it —
        and the transaction is closed: the records after the range replay as they come, since nothing tells
        whether they were part of it (an End or Abort still to come is then one without a Begin, which changes
        nothing). Without it, every record after a lost End would wait for it forever, and the image would stay
        silently at the transaction's start. Returns the entries left out (none when no transaction is open)."""
        if not self._open:
            return ()
        begin = self._pending[0]
        fault = ReplayFault(f"a range was skipped before its metadata transaction ended, so whether it committed "
                            f"is unknown; its {len(self._pending) - 1} record(s) read before the range were left "
                            "out", record=begin.record, offset=begin.offset, source=begin.source)
        if not absorb_gap_consequence(fault, self._pending[1:]):
            raise fault
        return self.drop()

    def settle_all(self, entries: Iterable[LogEntry], gap: object = ASK) -> list[LogEntry]:
        """The entries that become visible now, of ``entries`` offered in order (a transaction still open spans
        calls); ``gap`` as for :meth:`offer`, for all of them (one batch, read after one skipped range)."""
        out: list[LogEntry] = []
        for entry in entries:
            if not self._open and not isinstance(entry.record, _TRANSACTION_RECORDS):
                out.append(entry)  # settles as itself (offer's last case), without a Settled per record
                continue
            settled = self.offer(entry, gap)
            if settled is not None:
                out.extend(settled.apply)
        return out

    def drop(self) -> tuple[LogEntry, ...]:
        """Close the open transaction and return its entries (``MetadataBatchLoader.resetToImage`` drops them when a
        snapshot is loaded); empty when none is open."""
        dropped = self.pending
        self._pending, self._open = [], False
        return dropped


class Replayer:
    """Replays a stream of log entries into images, honouring metadata transactions like Kafka's
    ``MetadataBatchLoader``: records inside Begin/EndTransaction are applied together at the end, and discarded
    on AbortTransaction. ``image`` is always the state after the last *committed* record."""

    __slots__ = ("_delta", "_image", "_transactions")

    def __init__(self, image: MetadataImage = EMPTY_IMAGE) -> None:
        self._image = image
        self._delta: MetadataDelta | None = None
        self._transactions = TransactionBuffer()

    @property
    def image(self) -> MetadataImage:
        """The image after every entry replayed so far (outside an open transaction)."""
        if self._delta is not None:
            self._image = self._delta.apply()
            self._delta = None
        return self._image

    @property
    def in_transaction(self) -> bool:
        return self._transactions.open

    def broker(self, broker_id: int) -> BrokerRegistration | None:
        """``image.cluster.brokers.get(broker_id)`` without materialising the image: the pending delta answers for
        the brokers it changed. (Materialising copies every touched topic's partitions; the controller asks this
        on every broker fencing change, hundreds of times in a large log.)"""
        if self._delta is not None:
            return self._delta.broker(broker_id)
        return self._image.cluster.brokers.get(broker_id)

    def replay(self, entry: LogEntry) -> None:
        """Replay one entry; raises ReplayFault naming the entry's source and offset."""
        if not self._transactions.open and not isinstance(entry.record, _TRANSACTION_RECORDS):
            # Outside a transaction a plain record settles as itself: skip the buffer (this runs per record).
            self._replay_now(entry)
            return
        settled = self._transactions.offer(entry)
        for e in settled.apply if settled is not None else ():
            self._replay_now(e)

    def _replay_now(self, entry: LogEntry) -> None:
        if self._delta is None:
            self._delta = MetadataDelta(self._image)
        try:
            # Every replay step validates before it changes anything, so after a fault the delta still holds
            # exactly the good records before it: nothing good is lost.
            self._delta.replay(entry.record, entry.offset)
        except ReplayFault as fault:
            raise fault.located(offset=entry.offset, source=entry.source) from None

    # The collector paused: a snapshot's or a log's entries become hundreds of thousands of long-lived
    # registrations, and each full pass walked them all (0.7 s of a 3 s `jbod image DIR --json` at 200 k
    # partitions, docs/performance.md).
    @gc_paused()
    def replay_all(self, entries: Iterable[LogEntry]) -> MetadataImage:
        for entry in entries:
            self.replay(entry)
        return self.image

    def load_snapshot(self, entries: Iterable[LogEntry], end_offset: int) -> tuple[LogEntry, ...]:
        """Load a snapshot over the current image (``MetadataLoader.handleLoadSnapshot``): the image becomes exactly
        the snapshot's, with provenance ``end_offset - 1``. A node does this when the log it follows no longer
        holds the offsets it needs (they were deleted after a newer snapshot). The entries of a metadata
        transaction still open are dropped, as ``MetadataBatchLoader.resetToImage`` drops them (their end lies
        in what the snapshot covers), and returned. Snapshot records carry offsets local to the file."""
        image = self.image
        check_snapshot_offset(image.last_offset, end_offset)
        dropped = self._transactions.drop()
        self._image = load_snapshot(image, entries, end_offset)
        return dropped


def load_snapshot(image: MetadataImage, entries: Iterable[LogEntry], end_offset: int) -> MetadataImage:
    """The image after loading a snapshot over ``image`` (``MetadataLoader.loadSnapshot``: replay into a
    ``MetadataDelta`` of the current image, ``finishSnapshot()``, ``apply``): equal to the replay of the snapshot
    alone into an empty image, with provenance ``end_offset - 1`` (the last offset the snapshot contains)."""
    delta = MetadataDelta(image, snapshot=True)
    for e in entries:
        try:
            delta.replay(e.record)
        except ReplayFault as fault:
            raise fault.located(offset=e.offset, source=e.source) from None
    delta.finish_snapshot()
    return replace(delta.apply(), last_offset=end_offset - 1)


def check_snapshot_offset(last_offset: int, end_offset: int) -> None:
    """A snapshot older than the image would move the state back in time (and history would run backwards)."""
    if last_offset >= 0 and end_offset - 1 < last_offset:
        raise InputError(f"the snapshot ending at offset {end_offset} is older than the image (at offset "
                         f"{last_offset}): loading it would move the state back in time")


def replay_entries(entries: Iterable[LogEntry], image: MetadataImage = EMPTY_IMAGE) -> MetadataImage:
    """Replay entries onto ``image`` (empty by default) and return the resulting image."""
    return Replayer(image).replay_all(entries)


#: The records whose replay can change an image's configurations (``ConfigurationsDelta``): a ConfigRecord sets or
#: deletes a key, a RemoveTopicRecord drops its topic's configs by the topic's name — which its TopicRecord gives — and
#: the transaction markers decide whether and when the records between them take effect (``MetadataBatchLoader``).
#: No other record reads or writes configurations, so replaying only these gives the configurations a replay of the
#: whole log gives (:func:`configurations_of`).
CONFIGURATION_RECORDS: Final = (ConfigRecord, TopicRecord, RemoveTopicRecord, BeginTransactionRecord,
                                 EndTransactionRecord, AbortTransactionRecord)


def configurations_of(entries: Iterable[LogEntry], image: MetadataImage = EMPTY_IMAGE) -> ConfigurationsImage:
    """The configurations after replaying ``entries`` onto ``image``, from their :data:`CONFIGURATION_RECORDS`
    alone (the others are skipped unread): what ``jbod whatif --tables`` needs of a log whose every other part
    of the image a table holds. ``image`` needs only the configurations and the topics of the log's base (the
    snapshot's, with or without partitions)."""
    return replay_entries((e for e in entries if isinstance(e.record, CONFIGURATION_RECORDS)), image).configs


def replay_records(records: Iterable[Record], image: MetadataImage = EMPTY_IMAGE,
                   first_offset: int = 0) -> MetadataImage:
    """Replay bare records, numbering them with consecutive offsets from ``first_offset``."""
    return replay_entries((LogEntry(offset=first_offset + i, record=r) for i, r in enumerate(records)), image)
