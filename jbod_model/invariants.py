"""Named invariants of KRaft metadata with JBOD log directories: operators-and-peers.md §4, I1–I21.

Each invariant is an :class:`Invariant` in :data:`INVARIANTS` (name, title, severity, scope, rationale and the
Kafka class or KAFKA ticket it comes from) together with its check, in the manner of kafka-tlaplus'
``kip_966_properties.tla`` ``INV:`` blocks. A check never raises for a violation: it returns
:class:`Violation` rows that name the invariant, the partition/broker/directory and the offset.

Scopes (``Invariant.scope``):

* ``image`` — a predicate over one :class:`MetadataImage`, run by :func:`check_image` (I1 as a model-sanity
  check, I2, I4, I5, I6, I13, I14, I15, I18).
* ``record`` — one replay step: (image before, the committed entries of one batch, image after), run by
  :func:`check_step` (I1, I3, I7, I8, I9, I10, I11, I16, I17, I19). Step checks look at the state *just before
  each record* (a best-effort walk through the batch), so they also explain a batch that replay refused.
* ``history`` — needs more than one step; :class:`InvariantTracker` keeps the minimal history (I12 pending
  placements, I20 snapshot = replay, I21 directories a broker ever registered, and I9's carried-over warning).

The §4.1 look-alikes are deliberately *not* flagged: an assigned directory missing from its broker's online
list after a disk failure is the definition of an offline replica (I13), not corruption — I21 asks only that
the broker registered it at some time; UNASSIGNED on a multi-directory broker is pending, not wrong (I12 warns
after a threshold); the last ISR member may stay in the ISR of a partition on an offline directory when ELR is
off (I15, I16); an empty BrokerRegistrationChangeRecord.LogDirs means "no change" and an empty registration
list written before 3.7-IV2 means "everything online" (KAFKA-16162).

The per-row predicates (``partition_directories_length_ok`` …) are public and small so the great-expectations
layer (``pipelines.quality``) can apply them to table rows under the same invariant names; a few exist for that layer
only: ``directories_length_ok`` (raw arrays), ``replica_pending_placement`` and ``registration_carried_over`` (the
I12 and I9 clocks, also used by the tracker), ``replica_directory_registered`` (I21), ``jbod_supported`` (I22),
``online_directory_on_disk`` and ``disk_directory_id_ok`` (I24), and ``fault_invariant`` (which invariant a replay
fault's message says replay enforced). :data:`EXTERNAL_INVARIANTS` names I22–I25 (scope ``external``: they need
meta.properties, broker configs, DescribeLogDirs or cordons, never read here); :func:`invariant` finds any of
I1–I25."""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence, Sized
from contextlib import suppress
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from enum import StrEnum
from types import MappingProxyType
from typing import Final

from jbod_model.directory_id import LOST, MIGRATING, UNASSIGNED, DirectoryState, is_reserved
from jbod_model.errors import ReplayFault
from jbod_model.gaps import current_gap
from jbod_model.image import (
    EMPTY_IMAGE,
    BrokerRegistration,
    ClusterImage,
    MetadataImage,
    PartitionRegistration,
)
from jbod_model.metadata_version import FEATURE_NAME, UNSET, MetadataVersion
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import (
    NO_LEADER,
    NO_LEADER_CHANGE,
    BeginTransactionRecord,
    BrokerRegistrationChangeRecord,
    BrokerRegistrationFencingChange,
    BrokerRegistrationInControlledShutdownChange,
    FeatureLevelRecord,
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
from jbod_model.replicas import ReplicaState, partition_replicas
from jbod_model.uuid import Uuid

PartitionKey = tuple[Uuid, int]
Entries = Sequence[LogEntry]
ReplicaKey = tuple[Uuid, int, int]


class Severity(StrEnum):
    """§4 severities: ERROR must never happen (a replay error or a controller bug); WARNING is an allowed
    transient state that should not persist."""

    ERROR = "ERROR"
    WARNING = "WARNING"


class Scope(StrEnum):
    """What a check needs: one record step, one image, or history across steps."""

    RECORD = "record"
    IMAGE = "image"
    HISTORY = "history"
    #: Needs data from outside the log (meta.properties, broker config, DescribeLogDirs, cordons): I22–I25, checked by
    #: the data-quality layer (``pipelines.quality``) when those inputs exist.
    EXTERNAL = "external"


class Kind(StrEnum):
    """§4's split: *structural* invariants hold per record / replay step (I1–I12); *semantic* ones hold per
    materialized state (I13–I21)."""

    STRUCTURAL = "structural"
    SEMANTIC = "semantic"
    #: §4's "needs outside inputs (X)" group, I22–I25.
    EXTERNAL = "external"


@dataclass(frozen=True, slots=True)
class Violation:
    """One breach of a named invariant. ``offset`` is the record that breached it (step checks) or the image's
    last offset (image checks). ``severity`` is the invariant's own, except where a check downgrades it (I9
    for a registration carried over from before 3.7-IV2 is a warning)."""

    invariant: str
    message: str
    topic_id: Uuid | None = None
    partition_id: int | None = None
    broker_id: int | None = None
    directory: Uuid | None = None
    offset: int | None = None
    severity: Severity = Severity.ERROR


ImageCheck = Callable[[MetadataImage], list[Violation]]
StepCheck = Callable[[MetadataImage, Sequence[LogEntry], MetadataImage], list[Violation]]
PartitionCheck = Callable[[MetadataImage, Uuid, int, PartitionRegistration], list[Violation]]


@dataclass(frozen=True, slots=True)
class Invariant:
    """A named invariant (operators-and-peers.md §4) and its checks.

    ``image_check`` takes an image, ``step_check`` takes (image before, entries of one batch, image after);
    ``partition_check`` is the per-partition core of a partition-wise image check (used by the tracker to
    check only what a batch touched). History-scope invariants have no callable here:
    :class:`InvariantTracker` runs them."""

    name: str
    title: str
    severity: Severity
    scope: Scope
    kind: Kind
    rationale: str
    source: str
    image_check: ImageCheck | None = field(default=None, repr=False, compare=False)
    step_check: StepCheck | None = field(default=None, repr=False, compare=False)
    partition_check: PartitionCheck | None = field(default=None, repr=False, compare=False)


def _v(name: str, message: str, *, topic_id: Uuid | None = None, partition_id: int | None = None,
       broker_id: int | None = None, directory: Uuid | None = None, offset: int | None = None,
       severity: Severity | None = None) -> Violation:
    inv = INVARIANTS[name]
    return Violation(invariant=name, message=f"{name} {inv.title}: {message}", topic_id=topic_id,
                     partition_id=partition_id, broker_id=broker_id, directory=directory, offset=offset,
                     severity=severity or inv.severity)


def _tp(topic_id: Uuid, partition_id: int) -> str:
    """Kafka's ``TopicIdPartition`` spelling, as its tests sort partition change records (semantics §7.4)."""
    return f"{topic_id}-{partition_id}"


def _image_offset(image: MetadataImage) -> int | None:
    return image.last_offset if image.last_offset >= 0 else None


def replica_directory(partition: PartitionRegistration, broker_id: int) -> Uuid | None:
    """``PartitionRegistration.directory`` without raising: None when not a replica or the arrays disagree (a broker
    listed twice: its first place's)."""
    try:
        return partition.directories[partition.replicas.index(broker_id)]
    except (ValueError, IndexError):
        return None


def _default_dir(reg: BrokerRegistration | None, mv: MetadataVersion) -> Uuid:
    """Mirrors ``ClusterControlManager.defaultDir`` (R7.1): where the controller places a new replica."""
    if not mv.is_directory_assignment_supported():
        return MIGRATING
    if reg is None:
        return UNASSIGNED
    if not reg.directories:
        return MIGRATING
    if len(reg.directories) == 1:
        return reg.directories[0]
    return UNASSIGNED


def _mv_known(mv: MetadataVersion) -> bool:
    """Before any FeatureLevelRecord (e.g. a log whose start was deleted) the gate is unknown: don't guess."""
    return mv != UNSET


# ----------------------------------------------------------------------------------------------------------
# Per-row predicates (reusable on table rows)


def directories_length_ok(replicas: Sized, directories: Sized) -> bool:
    """I1 on raw arrays (replica ids; directory ids or their text): one directory per replica. For rows that cannot
    become a :class:`PartitionRegistration` (its constructor refuses a non-empty array of the wrong length), e.g. a
    table row."""
    return len(directories) == len(replicas)


def partition_directories_length_ok(partition: PartitionRegistration) -> bool:
    """I1 on a partition: one directory per replica (``PartitionRegistration`` constructor, R1.1/R1.2)."""
    return directories_length_ok(partition.replicas, partition.directories)


def partition_record_directories_length_ok(record: PartitionRecord) -> bool:
    """I1 on a PartitionRecord: from v1 on, Directories is "sorted in the same exact order as the Replicas
    field" (PartitionRecord.json); v0 has no Directories field at all."""
    return record.version < 1 or len(record.directories) == len(record.replicas)


def partition_change_directories_length_ok(record: PartitionChangeRecord,
                                           current_replicas: Sequence[int] | None) -> bool:
    """I1 on a PartitionChangeRecord: non-null Directories match the new Replicas, else the current ones
    (``PartitionRegistration.merge``, KAFKA-16583). True when nothing can be compared."""
    if record.directories is None:
        return True
    replicas = record.replicas if record.replicas is not None else current_replicas
    return replicas is None or len(record.directories) == len(replicas)


def partition_replicas_unique(partition: PartitionRegistration) -> bool:
    """I2: no broker twice in Replicas (``DirectoryId.createAssignmentMap`` "Duplicate broker ID in
    assignment")."""
    return len(set(partition.replicas)) == len(partition.replicas)


def partition_isr_subset_of_replicas(partition: PartitionRegistration) -> bool:
    """I2: the ISR is a duplicate-free subset of Replicas (``PartitionChangeBuilder`` derives it from
    replicas)."""
    return len(set(partition.isr)) == len(partition.isr) and set(partition.isr) <= set(partition.replicas)


def directory_placeholder_ok(directory: Uuid) -> bool:
    """I4: a reserved id (msb 0, lsb < 100) in a Directories array is one of MIGRATING, UNASSIGNED, LOST."""
    return not is_reserved(directory) or directory in (MIGRATING, UNASSIGNED, LOST)


def partition_placeholders_ok(partition: PartitionRegistration) -> bool:
    """I4 over a partition's directories."""
    return all(directory_placeholder_ok(d) for d in partition.directories)


def broker_directories_unreserved(broker: BrokerRegistration) -> bool:
    """I4: a registration lists no reserved id at all, ZERO included (``registerBroker`` "Reserved directory
    ID in request"; ``MetaPropertiesEnsemble.verify``)."""
    return not any(is_reserved(d) for d in broker.directories)


def broker_directories_unique(broker: BrokerRegistration) -> bool:
    """I5: no directory twice in one registration (``registerBroker`` "Duplicate directory ID in request")."""
    return len(set(broker.directories)) == len(broker.directories)


def directory_state_allowed(mv: MetadataVersion) -> bool:
    """Whether any record may carry directory state at ``mv``, so that I3 holds for every record there without
    reading it: the metadata.version is unknown or ≥ 3.7-IV2 (``MetadataVersion.isDirectoryAssignmentSupported``)."""
    return not _mv_known(mv) or mv.is_directory_assignment_supported()


def record_free_of_directory_state(record: Record, mv: MetadataVersion) -> bool:
    """I3: below 3.7-IV2 no broker record carries LogDirs and partition records are version 0 (the version
    ``partitionRecordVersion``/``partitionChangeRecordVersion`` give there, which has no Directories field).
    BrokerRegistrationChangeRecord versions do not follow the metadata.version, so only its LogDirs count.
    True while the metadata.version is unknown or ≥ 3.7-IV2 (:func:`directory_state_allowed`)."""
    if directory_state_allowed(mv):
        return True
    if isinstance(record, (RegisterBrokerRecord, BrokerRegistrationChangeRecord)):
        return not record.log_dirs
    if isinstance(record, (PartitionRecord, PartitionChangeRecord)):
        return record.version == 0
    return True


def broker_record_epoch_ok(registration: BrokerRegistration | None, epoch: int) -> bool:
    """I7: a BrokerRegistrationChange/Fence/Unfence/UnregisterBroker record names a registered broker and
    carries its current epoch (``ClusterControlManager`` "no broker registration with that epoch found")."""
    return registration is not None and registration.epoch == epoch


def registration_change_shrinks_directories(record: BrokerRegistrationChangeRecord,
                                            current: Iterable[Uuid]) -> bool:
    """I8: a non-empty LogDirs is a subset of the broker's current online directories (the only writer is
    ``handleDirectoriesOffline``: registration dirs minus the failed ones). Empty LogDirs means "no
    change"."""
    return not record.log_dirs or set(record.log_dirs) <= set(current)


def registration_has_directories(record: RegisterBrokerRecord, mv: MetadataVersion) -> bool:
    """I9 (the error half): a registration written at metadata.version ≥ 3.7-IV2 lists its directories
    (``registerBroker`` "No directories specified in request")."""
    return not mv.is_directory_assignment_supported() or bool(record.log_dirs)


def partition_record_has_directories(record: PartitionRecord, mv: MetadataVersion) -> bool:
    """I10 on a PartitionRecord: at ≥ 3.7-IV2 it is v1+ with an explicit Directories array (KAFKA-15886). Its
    length is I1's business."""
    if not mv.is_directory_assignment_supported():
        return True
    return record.version >= 1 and (bool(record.directories) or not record.replicas)


def replica_is_offline(cluster: ClusterImage, broker_id: int, directory: Uuid) -> bool:
    """I13, written down independently of ``jbod_model.replicas``: Kafka's
    ``KRaftMetadataCache.getOfflineReplicas`` with ``DirectoryId.isOnline``. Offline ⇔ broker unregistered, or
    fenced, or the directory is LOST, or it is neither MIGRATING nor UNASSIGNED and the broker lists online
    directories that do not include it (an empty list means every directory is online, KAFKA-16162; reserved
    ids 3..99 are thus offline unless the list is empty)."""
    reg = cluster.brokers.get(broker_id)
    if reg is None or reg.fenced:
        return True
    if directory in (MIGRATING, UNASSIGNED):
        return False
    if directory == LOST:
        return True
    return bool(reg.directories) and directory not in reg.directories


def replica_state_consistent(cluster: ClusterImage, partition: PartitionRegistration,
                             state: ReplicaState) -> bool:
    """I13 on one replica-view row: its directory is the partition's, its directory state classifies it, and
    its offline flag (and the presence of a reason) agree with :func:`replica_is_offline`."""
    return (replica_directory(partition, state.broker_id) == state.directory
            and replica_flags_consistent(cluster, state.broker_id, state.directory, state.directory_state,
                                         state.offline, state.offline_reason is not None))


def replica_flags_consistent(cluster: ClusterImage, broker_id: int, directory: Uuid, directory_state: DirectoryState,
                             offline: bool, has_reason: bool) -> bool:
    """I13 on what a replica-view row says of its own directory — the part of :func:`replica_state_consistent` its
    partition does not enter: the directory state classifies the directory, and the offline flag (and the presence
    of a reason) agree with :func:`replica_is_offline`. Millions of rows name a few hundred (broker, directory)
    pairs, so a caller can decide this once per distinct row of these values."""
    expected = replica_is_offline(cluster, broker_id, directory)
    return directory_state == DirectoryState.of(directory) and offline == expected and has_reason == expected


def partition_leader_ok(cluster: ClusterImage, partition: PartitionRegistration) -> bool:
    """I14: a leader is a replica, in the ISR, registered and unfenced, and its directory is online for it
    (``ReplicationControlManager.LeaderAcceptor``, ``PartitionChangeBuilder.isValidNewLeader``). Controlled
    shutdown is not checked: a shutting-down broker keeps partitions nobody else can lead."""
    leader = partition.leader
    if leader == NO_LEADER:
        return True
    if leader not in partition.replicas or leader not in partition.isr:
        return False
    reg = cluster.brokers.get(leader)
    if reg is None or reg.fenced:
        return False
    directory = replica_directory(partition, leader)
    return directory is None or reg.has_online_dir(directory)  # None: an I1 breach, reported there


def partition_isr_nonempty_ok(partition: PartitionRegistration, mv: MetadataVersion) -> bool:
    """I15: without ELR (KIP-966) the ISR never empties — the last member stays with leader -1. ELR needs
    metadata.version ≥ 4.0-IV0 (3.9 branch) *and* a config the log does not show, so from there on it is
    allowed."""
    return bool(partition.isr) or mv.is_elr_supported()


def partition_reassignment_ok(partition: PartitionRegistration) -> bool:
    """I18: Adding ⊆ Replicas, Removing ⊆ Replicas, Adding ∩ Removing = ∅
    (``PartitionReassignmentReplicas``)."""
    replicas = set(partition.replicas)
    adding, removing = set(partition.adding_replicas), set(partition.removing_replicas)
    return adding <= replicas and removing <= replicas and not adding & removing


def replica_demoted(partition: PartitionRegistration, broker_id: int) -> bool:
    """I16/I17: the broker neither leads nor sits in the ISR — or is the legal last ISR member (ISR = [b],
    leader -1) that ``generateLeaderAndIsrUpdates`` keeps when ELR is off (R9.3)."""
    if partition.leader == broker_id:
        return False
    return broker_id not in partition.isr or (partition.isr == (broker_id,) and partition.leader == NO_LEADER)


def replica_pending_placement(registration: BrokerRegistration | None, directory: Uuid,
                              mv: MetadataVersion) -> bool:
    """I12's clock runs for this replica: at metadata.version ≥ 3.7-IV2 its directory is a placeholder
    (UNASSIGNED or MIGRATING) on a registered, unfenced broker — the broker will send AssignReplicasToDirs. A
    fenced or unregistered broker stops the clock (it cannot send anything). Pending is *not* a violation (§4.1):
    only pending for longer than a threshold is."""
    return (mv.is_directory_assignment_supported() and directory in PLACEHOLDERS
            and registration is not None and not registration.fenced)


def registration_carried_over(registration: BrokerRegistration, mv: MetadataVersion) -> bool:
    """I9's warning clock runs: at metadata.version ≥ 3.7-IV2 the registration lists no directories, i.e. it was
    written before the upgrade (an empty list then means "every directory online", KAFKA-16162) and the broker has
    not re-registered yet (``BrokerRegistrationTracker``, KAFKA-16757)."""
    return mv.is_directory_assignment_supported() and not registration.directories


def replica_directory_registered(directory: Uuid, ever_registered: Collection[Uuid]) -> bool:
    """I21 on one replica: a placeholder, or a directory its broker has listed in a registration at some time
    (now or in the past). Not "is online now": after a disk failure that is the definition of an offline replica
    (I13, §4.1)."""
    return is_reserved(directory) or directory in ever_registered


def jbod_supported(configured_log_dirs: int, mv: MetadataVersion) -> bool:
    """I22: more than one configured data directory needs metadata.version ≥ 3.7-IV2 — below it the controller
    cannot move leaders off a failed disk (KAFKA-16606). True while the metadata.version is unknown."""
    return configured_log_dirs <= 1 or not _mv_known(mv) or mv.is_directory_assignment_supported()


def online_directory_on_disk(directory: Uuid, disk_directory_ids: Collection[Uuid]) -> bool:
    """I24 on one of a broker's online directories: some ``meta.properties`` of that broker's disks carries it as
    ``directory.id`` (``KafkaRaftServer.initializeLogDirs`` registers exactly those)."""
    return directory in disk_directory_ids


def disk_directory_id_ok(directory: Uuid) -> bool:
    """I24 on one disk: its ``directory.id`` is not reserved (``MetaPropertiesEnsemble.verify``; I4)."""
    return not is_reserved(directory)


#: Replay refuses some breaches outright (``ReplayFault``), so they reach the tables only as a replay fault: the
#: reason's text (``jbod_model.replay`` / ``jbod_model.image``, mirroring Kafka's messages) → the invariant.
REPLAY_FAULT_INVARIANTS: tuple[tuple[str, str], ...] = (
    ("already assigned to broker", "I6"),
    ("no broker registration found for broker", "I7"),
    ("no broker registration with epoch", "I7"),
    ("lengths for replicas", "I1"),
    ("InvalidReplicaDirectoriesException", "I1"),
)


def fault_invariant(message: str) -> str | None:
    """The invariant a replay fault's message says replay enforced (I1, I6, I7), or None for another fault (an
    unknown topic, a transaction out of order …)."""
    for needle, name in REPLAY_FAULT_INVARIANTS:
        if needle in message:
            return name
    return None


# ----------------------------------------------------------------------------------------------------------
# Walking a batch: the state just before each record


#: What each PartitionChangeRecord of a batch did, by its index in the batch, as the batch's replay saw it: the
#: partition before the record, and what the record made of it (None: no partition, or replay refused the change).
_PartitionTrace = Mapping[int, tuple[PartitionRegistration | None, PartitionRegistration | None]]


class _Kinds:
    """What one batch holds that the step checks' early exits ask about, found in one pass. Each check used to walk
    the whole batch to learn it acts on nothing there: at 200 k partitions most records are the thousands of
    leader moves of a broker's fencing batch, which carry neither Replicas nor Directories, and four of the log
    suite's five checks walked each of them for nothing (docs/data-quality.md, "fourteenth round")."""

    __slots__ = ("directories_listed", "directories_set", "replicas_set", "types")

    def __init__(self, entries: Entries) -> None:
        types: set[type] = set()
        replicas_set = directories_set = directories_listed = False
        for entry in entries:
            rec = entry.record
            types.add(type(rec))
            if isinstance(rec, PartitionChangeRecord):
                replicas_set = replicas_set or rec.replicas is not None
                directories_set = directories_set or rec.directories is not None
            elif isinstance(rec, BrokerRegistrationChangeRecord) and rec.log_dirs:
                directories_listed = True
        self.types = frozenset(types)
        #: A PartitionChangeRecord with Replicas; one with Directories.
        self.replicas_set, self.directories_set = replicas_set, directories_set
        #: A BrokerRegistrationChangeRecord that lists LogDirs (an empty list changes nothing: R4.4, R5.5).
        self.directories_listed = directories_listed

    def has(self, *types: type) -> bool:
        """Whether a record of the batch is an instance of one of ``types``."""
        return any(issubclass(t, types) for t in self.types)


def _recording_of(entries: Entries) -> _Recording | None:
    """The recording :func:`check_step` shares while it runs the checks on ``entries`` (None: a check called alone)."""
    shared = _SHARED.get()
    return shared[2] if shared is not None and shared[1] is entries else None


def _kinds(entries: Entries) -> _Kinds:
    """The kinds of ``entries``: the shared recording's, else found now."""
    recording = _recording_of(entries)
    return recording.kinds if recording is not None else _Kinds(entries)


#: The records whose effect a :data:`_PartitionTrace` holds, or that only change partitions: a traced recording
#: never looks a partition up (every walk asks for the current record's own partition alone).
_TRACED = (PartitionRecord, PartitionChangeRecord, RemoveTopicRecord)


class _Recording:
    """What a batch's records do to brokers, partitions and metadata.version, entry by entry: per key the values
    it took and at which entry. Best effort and never raising: a record that replay would refuse is skipped, so
    checks can explain a refused batch too. Recorded lazily, as far as a :class:`_Walk` has come; one recording
    serves every step check of :func:`check_step` (each check used to walk the batch again, merging every
    PartitionChangeRecord once per check).

    With a ``trace`` of the batch's replay (:meth:`InvariantTracker.end_batch` replays every batch it checks), a
    PartitionChangeRecord's partition before and after come from the trace instead of a second merge: the replay
    merged each one already, and a batch that replayed with nothing left out agrees with the recording
    (``tests/properties/test_step_walk_properties.py``). Only brokers and metadata.version are recorded then, all
    at once."""

    __slots__ = ("_brokers", "_changed", "_entries", "_gone", "_partitions", "_topics", "image", "kinds", "mvs",
                 "recorded", "trace")

    def __init__(self, image: MetadataImage, entries: Sequence[LogEntry], trace: _PartitionTrace | None = None) -> None:
        self.image = image
        self._entries = entries
        self.trace = trace
        self.kinds = _Kinds(entries)
        self.recorded = 0  # entries [0, recorded) are recorded
        # key -> [(index of the entry that set it, value)], ascending; None = unregistered / topic removed.
        self._brokers: dict[int, list[tuple[int, BrokerRegistration | None]]] = {}
        self._partitions: dict[PartitionKey, list[tuple[int, PartitionRegistration | None]]] = {}
        # Topic id -> its partition ids in _partitions: a RemoveTopicRecord finds its own (a batch that creates a
        # large topic and removes another must not scan every partition it created).
        self._topics: dict[Uuid, set[int]] = {}
        # Topic id -> the first entry that removed it: from then on, the base image's partitions are hidden.
        self._gone: dict[Uuid, int] = {}
        # Entry index -> the metadata.version after it (FeatureLevelRecords of metadata.version only).
        self.mvs: dict[int, MetadataVersion] = {}
        # Entry index -> what a PartitionChangeRecord made of its partition (None: no partition, or refused).
        self._changed: dict[int, PartitionRegistration | None] = {}
        if trace is not None:
            for i, entry in enumerate(entries):
                if not isinstance(entry.record, _TRACED):
                    self._advance(i, entry.record)
            self.recorded = len(entries)

    def broker(self, broker_id: int, at: int) -> BrokerRegistration | None:
        """The broker's registration just before entry ``at``."""
        for i, reg in reversed(self._brokers.get(broker_id, ())):
            if i < at:
                return reg
        return self.image.cluster.brokers.get(broker_id)

    def partition(self, topic_id: Uuid, partition_id: int, at: int) -> PartitionRegistration | None:
        """The partition just before entry ``at``."""
        for i, part in reversed(self._partitions.get((topic_id, partition_id), ())):
            if i < at:
                if part is not None:
                    return part
                break
        gone = self._gone.get(topic_id)
        if gone is not None and gone < at:
            return None
        return self.image.topics.get_partition(topic_id, partition_id)

    def previous(self, at: int) -> PartitionRegistration | None:
        """The partition of entry ``at`` (a PartitionChangeRecord) just before it."""
        if self.trace is not None:
            return self.trace[at][0]
        record = self._entries[at].record
        assert isinstance(record, PartitionChangeRecord)
        return self.partition(record.topic_id, record.partition_id, at)

    def changed(self, at: int) -> PartitionRegistration | None:
        """What entry ``at`` (a PartitionChangeRecord) made of its partition; None when there was no partition or
        replay would refuse the change."""
        if self.trace is not None:
            return self.trace[at][1]
        return self._changed.get(at)

    def record_through(self, index: int) -> None:
        """Record the entries up to and including ``index``."""
        while self.recorded <= index:
            i = self.recorded
            self._advance(i, self._entries[i].record)
            self.recorded += 1

    def _set_broker(self, i: int, broker_id: int, reg: BrokerRegistration | None) -> None:
        self._brokers.setdefault(broker_id, []).append((i, reg))

    def _set_partition(self, i: int, topic_id: Uuid, partition_id: int, part: PartitionRegistration) -> None:
        self._partitions.setdefault((topic_id, partition_id), []).append((i, part))
        self._topics.setdefault(topic_id, set()).add(partition_id)

    def _advance(self, i: int, record: Record) -> None:
        after = i + 1
        if isinstance(record, RegisterBrokerRecord):
            self._set_broker(i, record.broker_id, BrokerRegistration.from_record(record))
        elif isinstance(record, UnregisterBrokerRecord):
            self._set_broker(i, record.broker_id, None)
        elif isinstance(record, (FenceBrokerRecord, UnfenceBrokerRecord)):
            reg = self.broker(record.id, after)
            if reg is not None:
                self._set_broker(i, record.id, replace(reg, fenced=isinstance(record, FenceBrokerRecord)))
        elif isinstance(record, BrokerRegistrationChangeRecord):
            reg = self.broker(record.broker_id, after)
            if reg is not None:
                fenced = reg.fenced
                if record.fenced == BrokerRegistrationFencingChange.FENCE:
                    fenced = True
                elif record.fenced == BrokerRegistrationFencingChange.UNFENCE:
                    fenced = False
                entering = BrokerRegistrationInControlledShutdownChange.IN_CONTROLLED_SHUTDOWN
                shutdown = reg.in_controlled_shutdown or record.in_controlled_shutdown == entering
                dirs = tuple(sorted(record.log_dirs)) if record.log_dirs else reg.directories
                self._set_broker(i, record.broker_id, replace(reg, fenced=fenced, in_controlled_shutdown=shutdown,
                                                              directories=dirs))
        elif isinstance(record, PartitionRecord):
            with suppress(ReplayFault):
                part = PartitionRegistration.from_record(record)
                self._set_partition(i, record.topic_id, record.partition_id, part)
        elif isinstance(record, PartitionChangeRecord):
            prev = self.partition(record.topic_id, record.partition_id, after)
            new = None
            if prev is not None:
                with suppress(ReplayFault):
                    new = prev.merge(record)
                    self._set_partition(i, record.topic_id, record.partition_id, new)
            self._changed[i] = new
        elif isinstance(record, RemoveTopicRecord):
            self._gone.setdefault(record.topic_id, i)
            for pid in self._topics.pop(record.topic_id, ()):
                values = self._partitions[(record.topic_id, pid)]
                if values[-1][1] is not None:
                    values.append((i, None))
        elif isinstance(record, FeatureLevelRecord) and record.name == FEATURE_NAME:
            self.mvs[i] = MetadataVersion(record.feature_level)


class _Walk:
    """Brokers, partitions and metadata.version as they stand before the current record of a batch (``at``), read
    from the batch's :class:`_Recording`."""

    __slots__ = ("_recording", "at", "mv")

    def __init__(self, recording: _Recording) -> None:
        self._recording = recording
        self.at = 0
        self.mv = recording.image.metadata_version

    def broker(self, broker_id: int) -> BrokerRegistration | None:
        return self._recording.broker(broker_id, self.at)

    def previous(self) -> PartitionRegistration | None:
        """The current record's partition (it is a PartitionChangeRecord) just before it."""
        return self._recording.previous(self.at)

    def changed(self) -> PartitionRegistration | None:
        """What the current record, a PartitionChangeRecord, makes of its partition: ``previous().merge``
        (None when there is no partition or replay would refuse the change)."""
        return self._recording.changed(self.at)


#: The recording :func:`check_step` shares among its step checks: (image before, entries, recording).
_SHARED: ContextVar[tuple[MetadataImage, Sequence[LogEntry], _Recording] | None] = ContextVar(
    "jbod_step_recording", default=None)


def _walk(image: MetadataImage, entries: Sequence[LogEntry]) -> Iterator[tuple[LogEntry, _Walk]]:
    """Each entry with the walk positioned just before it (consume in order; don't keep the walk)."""
    shared = _SHARED.get()
    if shared is not None and shared[0] is image and shared[1] is entries:
        recording = shared[2]
    else:
        recording = _Recording(image, entries)
    walk = _Walk(recording)
    for j, entry in enumerate(entries):
        if recording.recorded <= j:
            recording.record_through(j)
        walk.at = j
        yield entry, walk
        mv = recording.mvs.get(j)
        if mv is not None:
            walk.mv = mv


def _has(entries: Sequence[LogEntry], *types: type) -> bool:
    """Fast path: most batches are NoOpRecords (>95 % of real logs) and need no walk at all."""
    return any(isinstance(e.record, types) for e in entries)


def _over_partitions(check: PartitionCheck) -> ImageCheck:
    def image_check(image: MetadataImage) -> list[Violation]:
        out: list[Violation] = []
        for topic, pid, part in image.topics.partitions():
            out.extend(check(image, topic.id, pid, part))
        return out
    return image_check


# ----------------------------------------------------------------------------------------------------------
# Image-scope checks


def _p_i1(image: MetadataImage, tid: Uuid, pid: int, part: PartitionRegistration) -> list[Violation]:
    if partition_directories_length_ok(part):
        return []
    return [_v("I1", f"partition {_tp(tid, pid)} has {len(part.directories)} directories for replicas "
                     f"{list(part.replicas)}", topic_id=tid, partition_id=pid, offset=_image_offset(image))]


def _p_i2(image: MetadataImage, tid: Uuid, pid: int, part: PartitionRegistration) -> list[Violation]:
    out = []
    if not partition_replicas_unique(part):
        out.append(_v("I2", f"partition {_tp(tid, pid)} lists a broker twice in replicas "
                            f"{list(part.replicas)}", topic_id=tid, partition_id=pid,
                      offset=_image_offset(image)))
    if not partition_isr_subset_of_replicas(part):
        out.append(_v("I2", f"partition {_tp(tid, pid)} has ISR {list(part.isr)}, not a duplicate-free "
                            f"subset of replicas {list(part.replicas)}", topic_id=tid, partition_id=pid,
                      offset=_image_offset(image)))
    return out


def _p_i4(image: MetadataImage, tid: Uuid, pid: int, part: PartitionRegistration) -> list[Violation]:
    return [_v("I4", f"partition {_tp(tid, pid)} records reserved id {d} (not MIGRATING/UNASSIGNED/LOST) for "
                     f"broker {b}", topic_id=tid, partition_id=pid, broker_id=b, directory=d,
               offset=_image_offset(image))
            for b, d in zip(part.replicas, part.directories, strict=False) if not directory_placeholder_ok(d)]


def _check_i4(image: MetadataImage) -> list[Violation]:
    out = _over_partitions(_p_i4)(image)
    for reg in image.cluster.brokers.values():
        if not broker_directories_unreserved(reg):
            for d in reg.directories:
                if is_reserved(d):
                    out.append(_v("I4", f"broker {reg.id} lists reserved id {d} among its log directories",
                                  broker_id=reg.id, directory=d, offset=_image_offset(image)))
    return out


def _check_i5(image: MetadataImage) -> list[Violation]:
    out = []
    for reg in image.cluster.brokers.values():
        if not broker_directories_unique(reg):
            seen: set[Uuid] = set()
            for d in reg.directories:
                if d in seen:
                    out.append(_v("I5", f"broker {reg.id} lists directory {d} more than once",
                                  broker_id=reg.id, directory=d, offset=_image_offset(image)))
                seen.add(d)
    return out


def _check_i6(image: MetadataImage) -> list[Violation]:
    owners: dict[Uuid, set[int]] = {}
    for reg in image.cluster.brokers.values():
        for d in reg.directories:
            owners.setdefault(d, set()).add(reg.id)
    return [_v("I6", f"directory {d} is registered by brokers {sorted(ids)}", broker_id=min(ids), directory=d,
               offset=_image_offset(image))
            for d, ids in owners.items() if len(ids) > 1]


def check_replica_view(image: MetadataImage, rows: Iterable[ReplicaState]) -> list[Violation]:
    """I13 on a derived replica table (``replica_view`` or the pipeline's ``offline_replicas`` source):
    exactly one row per replica of every partition, each consistent with :func:`replica_is_offline`."""
    offset = _image_offset(image)
    out: list[Violation] = []
    seen: set[ReplicaKey] = set()
    for row in rows:
        key = (row.topic_id, row.partition_id, row.broker_id)
        part = image.topics.get_partition(row.topic_id, row.partition_id)
        where = f"replica {row.broker_id} of {_tp(row.topic_id, row.partition_id)}"
        if key in seen:
            out.append(_v("I13", f"{where} appears twice in the replica view", topic_id=row.topic_id,
                          partition_id=row.partition_id, broker_id=row.broker_id, offset=offset))
            continue
        seen.add(key)
        if part is None or row.broker_id not in part.replicas:
            out.append(_v("I13", f"{where} is not a replica in the image", topic_id=row.topic_id,
                          partition_id=row.partition_id, broker_id=row.broker_id, offset=offset))
        elif not replica_state_consistent(image.cluster, part, row):
            expected = replica_is_offline(image.cluster, row.broker_id, row.directory)
            out.append(_v("I13", f"{where} in {row.directory} says offline={row.offline} "
                                 f"(reason {row.offline_reason}, state {row.directory_state.value}); Kafka's "
                                 f"getOfflineReplicas says offline={expected} for directory "
                                 f"{replica_directory(part, row.broker_id)}",
                          topic_id=row.topic_id, partition_id=row.partition_id, broker_id=row.broker_id,
                          directory=row.directory, offset=offset))
    for topic, pid, part in image.topics.partitions():
        for b in part.replicas:
            if (topic.id, pid, b) not in seen:
                out.append(_v("I13", f"replica {b} of {_tp(topic.id, pid)} is missing from the replica view",
                              topic_id=topic.id, partition_id=pid, broker_id=b, offset=offset))
    return out


def _p_i13(image: MetadataImage, tid: Uuid, pid: int, part: PartitionRegistration) -> list[Violation]:
    if not partition_directories_length_ok(part):
        return []  # the view cannot be built; I1 reports the partition
    out = []
    for row in partition_replicas(image.cluster, tid, pid, part):
        if not replica_state_consistent(image.cluster, part, row):
            out.append(_v("I13", f"replica view row for broker {row.broker_id} of {_tp(tid, pid)} says "
                                 f"offline={row.offline} ({row.offline_reason}); Kafka's definition says "
                                 f"offline={replica_is_offline(image.cluster, row.broker_id, row.directory)}",
                          topic_id=tid, partition_id=pid, broker_id=row.broker_id, directory=row.directory,
                          offset=_image_offset(image)))
    return out


def _p_i14(image: MetadataImage, tid: Uuid, pid: int, part: PartitionRegistration) -> list[Violation]:
    if partition_leader_ok(image.cluster, part):
        return []
    leader = part.leader
    reg = image.cluster.brokers.get(leader)
    directory = replica_directory(part, leader)
    if leader not in part.replicas:
        why = f"is not a replica ({list(part.replicas)})"
    elif leader not in part.isr:
        why = f"is not in the ISR {list(part.isr)}"
    elif reg is None:
        why = "is not registered"
    elif reg.fenced:
        why = "is fenced"
    else:
        why = f"has its directory {directory} offline (online: {[str(d) for d in reg.directories]})"
    return [_v("I14", f"leader {leader} of {_tp(tid, pid)} {why}", topic_id=tid, partition_id=pid,
               broker_id=leader, directory=directory, offset=_image_offset(image))]


def _p_i15(image: MetadataImage, tid: Uuid, pid: int, part: PartitionRegistration) -> list[Violation]:
    if partition_isr_nonempty_ok(part, image.metadata_version):
        return []
    return [_v("I15", f"partition {_tp(tid, pid)} has an empty ISR at metadata.version "
                      f"{image.metadata_version} (no ELR)", topic_id=tid, partition_id=pid,
               offset=_image_offset(image))]


def _p_i18(image: MetadataImage, tid: Uuid, pid: int, part: PartitionRegistration) -> list[Violation]:
    if partition_reassignment_ok(part):
        return []
    return [_v("I18", f"partition {_tp(tid, pid)}: replicas {list(part.replicas)}, adding "
                      f"{list(part.adding_replicas)}, removing {list(part.removing_replicas)}",
               topic_id=tid, partition_id=pid, offset=_image_offset(image))]


# ----------------------------------------------------------------------------------------------------------
# Step-scope checks: (image before, committed entries of one batch, image after)


def _check_i1_step(before: MetadataImage, entries: Entries, after: MetadataImage) -> list[Violation]:
    if not _kinds(entries).has(PartitionRecord, PartitionChangeRecord):
        return []
    out = []
    for entry, walk in _walk(before, entries):
        rec = entry.record
        if isinstance(rec, PartitionRecord) and not partition_record_directories_length_ok(rec):
            where = _tp(rec.topic_id, rec.partition_id)
            out.append(_v("I1", f"PartitionRecord v{rec.version} for {where} has "
                                f"{len(rec.directories)} directories for replicas {list(rec.replicas)}",
                          topic_id=rec.topic_id, partition_id=rec.partition_id, offset=entry.offset))
        elif isinstance(rec, PartitionChangeRecord) and rec.directories is not None:
            prev = walk.previous()
            current = prev.replicas if prev is not None else None
            if not partition_change_directories_length_ok(rec, current):
                replicas = rec.replicas if rec.replicas is not None else current
                out.append(_v("I1", f"PartitionChangeRecord for {_tp(rec.topic_id, rec.partition_id)} has "
                                    f"{len(rec.directories)} directories for replicas {list(replicas or ())}",
                              topic_id=rec.topic_id, partition_id=rec.partition_id, offset=entry.offset))
    return out


def _check_i3(before: MetadataImage, entries: Entries, after: MetadataImage) -> list[Violation]:
    relevant = (RegisterBrokerRecord, BrokerRegistrationChangeRecord, PartitionRecord, PartitionChangeRecord,
                FeatureLevelRecord)
    if not _kinds(entries).has(*relevant):
        return []
    out = []
    for entry, walk in _walk(before, entries):
        rec = entry.record
        if isinstance(rec, FeatureLevelRecord):
            # A downgrade below 3.7-IV2 cannot represent directory state (``handleLoss``): flag what survives.
            if (rec.name == FEATURE_NAME and rec.feature_level > 0
                    and walk.mv.is_directory_assignment_supported()
                    and not MetadataVersion(rec.feature_level).is_directory_assignment_supported()):
                out.extend(_directory_state_below_gate(after, entry.offset))
            continue
        if record_free_of_directory_state(rec, walk.mv):
            continue
        if isinstance(rec, (PartitionRecord, PartitionChangeRecord)):
            where = _tp(rec.topic_id, rec.partition_id)
            out.append(_v("I3", f"{rec.TYPE_NAME} v{rec.version} for {where} at "
                                f"metadata.version {walk.mv} (partition records are v0 there)",
                          topic_id=rec.topic_id, partition_id=rec.partition_id, offset=entry.offset))
        elif isinstance(rec, (RegisterBrokerRecord, BrokerRegistrationChangeRecord)):
            out.append(_v("I3", f"{rec.TYPE_NAME} for broker {rec.broker_id} carries LogDirs "
                                f"{[str(d) for d in rec.log_dirs]} at metadata.version {walk.mv}",
                          broker_id=rec.broker_id, directory=rec.log_dirs[0], offset=entry.offset))
    return out


def _directory_state_below_gate(image: MetadataImage, offset: int) -> list[Violation]:
    out = []
    for reg in image.cluster.brokers.values():
        if reg.directories:
            out.append(_v("I3", f"broker {reg.id} keeps log directories after metadata.version fell to "
                                f"{image.metadata_version}", broker_id=reg.id, offset=offset))
    for topic, pid, part in image.topics.partitions():
        if any(d != MIGRATING for d in part.directories):
            out.append(_v("I3", f"partition {_tp(topic.id, pid)} keeps directories after metadata.version "
                                f"fell to {image.metadata_version}", topic_id=topic.id, partition_id=pid,
                          offset=offset))
    return out


def _check_i7(before: MetadataImage, entries: Entries, after: MetadataImage) -> list[Violation]:
    if not _kinds(entries).has(BrokerRegistrationChangeRecord, FenceBrokerRecord, UnfenceBrokerRecord,
                               UnregisterBrokerRecord):
        return []
    out = []
    for entry, walk in _walk(before, entries):
        rec = entry.record
        if isinstance(rec, (BrokerRegistrationChangeRecord, UnregisterBrokerRecord)):
            broker_id, epoch = rec.broker_id, rec.broker_epoch
        elif isinstance(rec, (FenceBrokerRecord, UnfenceBrokerRecord)):
            broker_id, epoch = rec.id, rec.epoch
        else:
            continue
        reg = walk.broker(broker_id)
        if not broker_record_epoch_ok(reg, epoch):
            now = "is not registered" if reg is None else f"has epoch {reg.epoch}"
            out.append(_v("I7", f"{rec.TYPE_NAME} for broker {broker_id} carries epoch {epoch}, but the "
                                f"broker {now}", broker_id=broker_id, offset=entry.offset))
    return out


def _check_i8(before: MetadataImage, entries: Entries, after: MetadataImage) -> list[Violation]:
    if not _kinds(entries).directories_listed:  # only a listed LogDirs can grow
        return []
    out = []
    for entry, walk in _walk(before, entries):
        rec = entry.record
        if not isinstance(rec, BrokerRegistrationChangeRecord) or not rec.log_dirs:
            continue
        reg = walk.broker(rec.broker_id)
        if reg is None:
            continue  # I7's case
        if not registration_change_shrinks_directories(rec, reg.directories):
            grown = sorted(set(rec.log_dirs) - set(reg.directories))
            out.append(_v("I8", f"BrokerRegistrationChangeRecord for broker {rec.broker_id} adds "
                                f"{[str(d) for d in grown]} to its online directories "
                                f"{[str(d) for d in reg.directories]}; only a RegisterBrokerRecord brings a "
                                "directory back", broker_id=rec.broker_id, directory=grown[0],
                          offset=entry.offset))
    return out


def _check_i9(before: MetadataImage, entries: Entries, after: MetadataImage) -> list[Violation]:
    if not _kinds(entries).has(RegisterBrokerRecord):
        return []
    out = []
    for entry, walk in _walk(before, entries):
        rec = entry.record
        if isinstance(rec, RegisterBrokerRecord) and not registration_has_directories(rec, walk.mv):
            out.append(_v("I9", f"RegisterBrokerRecord v{rec.version} for broker {rec.broker_id} has no "
                                f"LogDirs at metadata.version {walk.mv}", broker_id=rec.broker_id,
                          offset=entry.offset))
    return out


def _is_migration_batch(entries: Sequence[LogEntry]) -> bool:
    """ZK migration writes its partitions as PartitionRecord v0 (semantics R13.1) inside a transaction the
    controller names "Bulk Migration"; those are not the controller's own placements."""
    return any(isinstance(e.record, BeginTransactionRecord) and e.record.name
               and "migration" in e.record.name.lower() for e in entries)


def _zk_or_unknown(reg: BrokerRegistration | None) -> bool:
    return reg is None or reg.is_migrating_zk_broker


def _check_i10(before: MetadataImage, entries: Entries, after: MetadataImage) -> list[Violation]:
    kinds = _kinds(entries)
    if not (kinds.has(PartitionRecord) or kinds.replicas_set):  # what the walk below acts on
        return []
    migration = _is_migration_batch(entries)
    out = []
    for entry, walk in _walk(before, entries):
        rec = entry.record
        if not walk.mv.is_directory_assignment_supported():
            continue
        if isinstance(rec, PartitionRecord):
            if partition_record_has_directories(rec, walk.mv) or migration:
                continue
            if rec.version == 0 and all(_zk_or_unknown(walk.broker(b)) for b in rec.replicas):
                continue  # a migrating ZK broker's partition, written by the migration driver (R13.1)
            where = _tp(rec.topic_id, rec.partition_id)
            out.append(_v("I10", f"PartitionRecord v{rec.version} for {where} at "
                                 f"metadata.version {walk.mv} carries no Directories",
                          topic_id=rec.topic_id, partition_id=rec.partition_id, offset=entry.offset))
        elif isinstance(rec, PartitionChangeRecord) and rec.replicas is not None and rec.directories is None:
            prev = walk.previous()
            if prev is None or not partition_directories_length_ok(prev):
                continue
            # What PartitionChangeBuilder would compute (R8.2): surviving replicas keep their directory, new
            # ones get defaultDir. Directories may be omitted only when that equals the current array — e.g.
            # an all-MIGRATING partition after an upgrade stays all-MIGRATING (R8.6).
            current = dict(zip(prev.replicas, prev.directories, strict=True))
            expected = tuple(current[b] if b in current else _default_dir(walk.broker(b), walk.mv)
                             for b in rec.replicas)
            if expected != prev.directories:
                where = _tp(rec.topic_id, rec.partition_id)
                out.append(_v("I10", f"PartitionChangeRecord for {where} changes replicas "
                                     f"{list(prev.replicas)} -> {list(rec.replicas)} without Directories; "
                                     f"the controller would have written {[str(d) for d in expected]}",
                              topic_id=rec.topic_id, partition_id=rec.partition_id, offset=entry.offset))
    return out


def _check_i11(before: MetadataImage, entries: Entries, after: MetadataImage) -> list[Violation]:
    kinds = _kinds(entries)
    if not (kinds.has(PartitionRecord) or kinds.replicas_set):  # only a creation or a new replica is placed
        return []
    out = []
    for entry, walk in _walk(before, entries):
        rec = entry.record
        if not walk.mv.is_directory_assignment_supported():
            continue
        placed: list[tuple[int, Uuid]] = []
        if isinstance(rec, PartitionRecord):
            tid, pid = rec.topic_id, rec.partition_id
            # Partition epoch 0 = a creation (R7.3); a later epoch is a snapshot of a partition that has
            # changed since, whose directories say nothing about placement.
            if rec.partition_epoch <= 0 and partition_record_directories_length_ok(rec):
                placed = list(zip(rec.replicas, rec.directories, strict=False))
        elif isinstance(rec, PartitionChangeRecord) and rec.replicas is not None:
            tid, pid = rec.topic_id, rec.partition_id
            prev = walk.previous()
            new = walk.changed()
            if prev is None or new is None:
                continue
            placed = [(b, d) for b, d in zip(new.replicas, new.directories, strict=False)
                      if b not in prev.replicas]
        for b, d in placed:
            reg = walk.broker(b)
            if reg is not None and len(reg.directories) == 1 and d != reg.directories[0]:
                out.append(_v("I11", f"new replica {b} of {_tp(tid, pid)} placed in {d}, but broker {b} has "
                                     f"the single directory {reg.directories[0]}", topic_id=tid,
                              partition_id=pid, broker_id=b, directory=d, offset=entry.offset))
    return out


class _HostedIndex:
    """(broker id, directory) -> the partitions whose replica on that broker sits in that directory, for one image,
    kept up to date by :class:`InvariantTracker` from batch to batch, so that I16 looks only at the partitions in
    the directories that went offline instead of scanning every partition of the image (Kafka's ``BrokersToIsrs`` is
    the controller's like index, by ISR; this one is by placement, which is what I16's candidates are). By broker
    alone, a failed directory's check looked at every partition of its broker: six times as many on a broker with
    six disks.

    Built lazily, from the image of the first batch that needs it: a tracker that never sees a directory failure
    never pays for it. It knows which image it describes and only advances from that one; when the tracker's image
    and the index part ways (a caller replaying on its own), it is dropped and rebuilt from the next image."""

    __slots__ = ("_by_place", "_image")

    def __init__(self) -> None:
        self._image: MetadataImage | None = None
        self._by_place: dict[tuple[int, Uuid], set[PartitionKey]] = {}

    def hosted(self, image: MetadataImage, places: Iterable[tuple[int, Uuid]]) -> set[PartitionKey]:
        """The partitions of ``image`` with a replica on any of ``places`` (broker id, directory)."""
        if self._image is not image:
            self._build(image)
        out: set[PartitionKey] = set()
        for place in places:
            out |= self._by_place.get(place, set())
        return out

    def advance(self, before: MetadataImage, entries: Entries, after: MetadataImage,
                kinds: _Kinds | None = None) -> None:
        """Follow one batch that took ``before`` to ``after``. Only PartitionRecords, PartitionChangeRecords with
        Replicas or Directories and RemoveTopicRecords change where a partition's replicas are
        (``PartitionRegistration.merge`` keeps the arrays of a change without them); the index takes each such
        key's places from ``before`` and ``after``, so the order of the batch's records does not matter. With the
        batch's ``kinds``, a batch without any of those records is passed over without a walk."""
        if self._image is not before:
            self._image = None  # not built, or describing another image: rebuilt when next needed
            return
        if kinds is not None and not (kinds.replicas_set or kinds.directories_set
                                      or kinds.has(PartitionRecord, RemoveTopicRecord)):
            self._image = after
            return
        keys: set[PartitionKey] = set()
        for entry in entries:
            rec = entry.record
            if isinstance(rec, PartitionRecord) or (isinstance(rec, PartitionChangeRecord)
                                                     and (rec.replicas is not None or rec.directories is not None)):
                keys.add((rec.topic_id, rec.partition_id))
            elif isinstance(rec, RemoveTopicRecord):
                topic = before.topics.by_id.get(rec.topic_id)
                if topic is not None:
                    keys.update((rec.topic_id, pid) for pid in topic.partitions)
        for key in keys:
            tid, pid = key
            old = _places(before.topics.get_partition(tid, pid))
            new = _places(after.topics.get_partition(tid, pid))
            for place in old - new:
                hosted = self._by_place.get(place)
                if hosted is not None:
                    hosted.discard(key)
            for place in new - old:
                self._by_place.setdefault(place, set()).add(key)
        self._image = after

    def _build(self, image: MetadataImage) -> None:
        by_place: dict[tuple[int, Uuid], set[PartitionKey]] = {}
        for topic in image.topics.by_id.values():
            for pid, part in topic.partitions.items():
                key = (topic.id, pid)  # one tuple for the partition's places: 6 M places at 2 M partitions
                for place in _places(part):
                    by_place.setdefault(place, set()).add(key)
        self._by_place, self._image = by_place, image


def _places(part: PartitionRegistration | None) -> set[tuple[int, Uuid]]:
    """A partition's (replica, directory) pairs: a superset of where :func:`replica_directory` places each replica (a
    broker listed twice, which I2 reports, gets both directories); none while the directories are unset (before
    3.7-IV2)."""
    return set() if part is None else set(zip(part.replicas, part.directories, strict=False))


#: The broker index :class:`InvariantTracker` lends I16 while it checks a batch: (image after, index).
_HOSTED: ContextVar[tuple[MetadataImage, _HostedIndex] | None] = ContextVar("jbod_hosted_index", default=None)


def _i16_partition(tid: Uuid, pid: int, part: PartitionRegistration, brokers: set[int],
                   failed: Mapping[tuple[int, Uuid], int]) -> list[Violation]:
    """I16 on one partition of the image after the batch: each failed broker's replica that the batch left
    leading or in the ISR."""
    out = []
    for b in brokers & set(part.replicas):
        gone = replica_directory(part, b)
        if gone is None or (b, gone) not in failed or replica_demoted(part, b):
            continue
        role = "leading" if part.leader == b else "in the ISR of"
        out.append(_v("I16", f"directory {gone} of broker {b} went offline, but the batch left broker "
                             f"{b} {role} {_tp(tid, pid)} (leader {part.leader}, ISR {list(part.isr)})",
                      topic_id=tid, partition_id=pid, broker_id=b, directory=gone, offset=failed[(b, gone)]))
    return out


def _check_i16(before: MetadataImage, entries: Entries, after: MetadataImage) -> list[Violation]:
    if not _kinds(entries).directories_listed:  # no directory can have gone offline
        return []
    failed: dict[tuple[int, Uuid], int] = {}  # (broker, directory gone offline) -> offset of the change
    for entry, walk in _walk(before, entries):
        rec = entry.record
        if isinstance(rec, BrokerRegistrationChangeRecord) and rec.log_dirs:  # empty = no change (R4.4, R5.5)
            reg = walk.broker(rec.broker_id)
            if reg is not None:
                for d in set(reg.directories) - set(rec.log_dirs):
                    failed.setdefault((rec.broker_id, d), entry.offset)
    if not failed:
        return []
    brokers = {b for b, _ in failed}
    lent = _HOSTED.get()
    if lent is not None and lent[0] is after:
        return _i16_indexed(after, brokers, failed, lent[1])
    out = []
    # The loops of TopicsImage.partitions inlined, in its order: without a tracker's index this scans every
    # partition of the image, and most partitions of a large cluster have no failed broker.
    for topic in after.topics.by_id.values():
        for pid, part in topic.partitions.items():
            if not brokers.isdisjoint(part.replicas):
                out.extend(_i16_partition(topic.id, pid, part, brokers, failed))
    return out


def _i16_indexed(after: MetadataImage, brokers: set[int], failed: Mapping[tuple[int, Uuid], int],
                 index: _HostedIndex) -> list[Violation]:
    """I16's scan, faster (proven equal by ``tests/properties/test_step_walk_properties.py``): only the partitions
    with a replica in a failed directory, from the tracker's index; the violations in the scan's order (the
    image's), which is looked up only for the topics that have one."""
    found: dict[PartitionKey, list[Violation]] = {}
    for tid, pid in index.hosted(after, failed):
        part = after.topics.get_partition(tid, pid)
        if part is not None and (hits := _i16_partition(tid, pid, part, brokers, failed)):
            found[(tid, pid)] = hits
    if len(found) <= 1:
        return [v for hits in found.values() for v in hits]
    topics = {tid for tid, _ in found}
    return [v for topic in after.topics.by_id.values() if topic.id in topics
            for pid in topic.partitions if (topic.id, pid) in found for v in found[(topic.id, pid)]]


def _check_i17(before: MetadataImage, entries: Entries, after: MetadataImage) -> list[Violation]:
    if not _kinds(entries).directories_set:  # no assignment in the batch
        return []
    offline_assignments: dict[ReplicaKey, tuple[Uuid, int]] = {}
    for entry, walk in _walk(before, entries):
        rec = entry.record
        if not isinstance(rec, PartitionChangeRecord) or rec.directories is None:
            continue
        prev = walk.previous()
        new = walk.changed()
        if prev is None or new is None:
            continue
        for b, d in zip(new.replicas, new.directories, strict=False):
            reg = walk.broker(b)
            if reg is not None and replica_directory(prev, b) != d and not reg.has_online_dir(d):
                offline_assignments[(rec.topic_id, rec.partition_id, b)] = (d, entry.offset)
    out = []
    for (tid, pid, b), (d, offset) in offline_assignments.items():
        part = after.topics.get_partition(tid, pid)
        if (part is None or replica_directory(part, b) != d or after.cluster.has_online_dir(b, d)
                or replica_demoted(part, b)):
            continue
        role = "leader" if part.leader == b else "in the ISR"
        out.append(_v("I17", f"replica {b} of {_tp(tid, pid)} was assigned to directory {d}, which is "
                             f"offline for it, but stays {role} "
                             f"(leader {part.leader}, ISR {list(part.isr)})",
                      topic_id=tid, partition_id=pid, broker_id=b, directory=d, offset=offset))
    return out


def _check_i19(before: MetadataImage, entries: Entries, after: MetadataImage) -> list[Violation]:
    kinds = _kinds(entries)
    if not kinds.has(PartitionChangeRecord, RegisterBrokerRecord):
        return []
    recording = _recording_of(entries)
    trace = None if recording is None else recording.trace  # set when the tracker that replayed the batch checks it
    if trace is not None and not kinds.has(RegisterBrokerRecord) and _epochs_step_by_one(entries, trace):
        return []
    out = []
    # Per partition: [base partition epoch, base leader epoch, changes, changes with a Leader, last offset].
    expected: dict[PartitionKey, list[int]] = {}
    # Partitions with a change replay refuses: the batch did not apply, so there is nothing to expect.
    unknowable: set[PartitionKey] = set()
    for entry, walk in _walk(before, entries):
        rec = entry.record
        if isinstance(rec, PartitionRecord):
            key = (rec.topic_id, rec.partition_id)
            expected[key] = [rec.partition_epoch, rec.leader_epoch, 0, 0, entry.offset]
            unknowable.discard(key)
        elif isinstance(rec, RemoveTopicRecord):
            for key in [k for k in expected if k[0] == rec.topic_id]:
                del expected[key]
        elif isinstance(rec, PartitionChangeRecord):
            key = (rec.topic_id, rec.partition_id)
            prev = walk.previous()
            if prev is None:
                continue
            if walk.changed() is None:  # replay refuses the change
                unknowable.add(key)
                continue
            if key not in expected:
                expected[key] = [prev.partition_epoch, prev.leader_epoch, 0, 0, entry.offset]
            counts = expected[key]
            counts[2] += 1
            counts[3] += int(rec.leader != NO_LEADER_CHANGE)
            counts[4] = entry.offset
        elif isinstance(rec, RegisterBrokerRecord):
            prev_reg = walk.broker(rec.broker_id)
            if prev_reg is None:
                continue
            # A new incarnation gets the controller's next write offset as epoch, so it always grows. A
            # re-sent registration of the same incarnation keeps its epoch on 3.9 (KAFKA-16952) but got a new
            # one on 3.7.x/3.8 (KAFKA-16757), so only a *lower* epoch is wrong in every shipped version.
            same = rec.incarnation_id == prev_reg.incarnation_id
            if (rec.broker_epoch < prev_reg.epoch) if same else (rec.broker_epoch <= prev_reg.epoch):
                kind = "same" if same else "new"
                out.append(_v("I19", f"RegisterBrokerRecord for broker {rec.broker_id} ({kind} incarnation) "
                                     f"has epoch {rec.broker_epoch} after epoch {prev_reg.epoch}",
                              broker_id=rec.broker_id, offset=entry.offset))
    for (tid, pid), (pe, le, changes, leader_changes, offset) in expected.items():
        part = after.topics.get_partition(tid, pid)
        if part is None or changes == 0 or (tid, pid) in unknowable:
            continue
        if part.partition_epoch != pe + changes or part.leader_epoch != le + leader_changes:
            out.append(_v("I19", f"partition {_tp(tid, pid)} went through {changes} change(s), "
                                 f"{leader_changes} with a Leader field, from epochs (partition {pe}, leader "
                                 f"{le}) to (partition {part.partition_epoch}, leader {part.leader_epoch}); "
                                 f"expected ({pe + changes}, {le + leader_changes})",
                          topic_id=tid, partition_id=pid, offset=offset))
    return out


def _epochs_step_by_one(entries: Entries, trace: _PartitionTrace) -> bool:
    """I19's partition half, faster (proven equal by ``tests/properties/test_step_walk_properties.py``), for a batch
    its tracker replayed: True when each change in the replay's trace took its partition one partition epoch on,
    and one leader epoch on exactly when it carries a Leader. Then :func:`_check_i19` finds nothing in the batch's
    partitions: the trace is the replay that made the image after, so a partition's changes chain from one to the
    next (a PartitionRecord or a RemoveTopicRecord between two starts I19's count again), and the last one's
    epochs are the first one's plus the changes counted. False (the reference decides) on anything else."""
    for j, (prev, new) in trace.items():
        rec = entries[j].record
        if (prev is None or new is None or not isinstance(rec, PartitionChangeRecord)
                or new.partition_epoch != prev.partition_epoch + 1
                or new.leader_epoch != prev.leader_epoch + (rec.leader != NO_LEADER_CHANGE)):
            return False
    return True


# ----------------------------------------------------------------------------------------------------------
# The registry


def _inv(name: str, title: str, severity: Severity, scope: Scope, kind: Kind, *, rationale: str, source: str,
         image_check: ImageCheck | None = None, step_check: StepCheck | None = None,
         partition_check: PartitionCheck | None = None) -> Invariant:
    if partition_check is not None and image_check is None:
        image_check = _over_partitions(partition_check)
    return Invariant(name=name, title=title, severity=severity, scope=scope, kind=kind, rationale=rationale,
                     source=source, image_check=image_check, step_check=step_check,
                     partition_check=partition_check)


_E, _W = Severity.ERROR, Severity.WARNING
_S, _M = Kind.STRUCTURAL, Kind.SEMANTIC

#: Every invariant of §4 computable from the log or the image, I1–I21, by name.
INVARIANTS: Mapping[str, Invariant] = MappingProxyType({inv.name: inv for inv in (
    _inv("I1", "directories match replicas", _E, Scope.RECORD, _S,
         rationale="Directories is positional: one entry per replica, in replica order.",
         source="PartitionRecord.json; PartitionRegistration.checkDirectories "
                "(InvalidReplicaDirectoriesException)",
         step_check=_check_i1_step, partition_check=_p_i1),
    _inv("I2", "replicas unique, ISR within replicas", _E, Scope.IMAGE, _S,
         rationale="A replica→directory map needs distinct brokers; the ISR is drawn from the replicas.",
         source="DirectoryId.createAssignmentMap; PartitionChangeBuilder",
         partition_check=_p_i2),
    _inv("I3", "no directory state below 3.7-IV2", _E, Scope.RECORD, _S,
         rationale="Below metadata.version 3.7-IV2 records carry no directories; every replica is MIGRATING.",
         source="MetadataVersion.isDirectoryAssignmentSupported; PartitionRegistration.toRecord handleLoss; "
                "KAFKA-16583, KAFKA-16131",
         step_check=_check_i3),
    _inv("I4", "only defined placeholders", _E, Scope.IMAGE, _S,
         rationale="Reserved ids in Directories are MIGRATING/UNASSIGNED/LOST; brokers never register one.",
         source="DirectoryId.reserved; ClusterControlManager.registerBroker "
                "'Reserved directory ID in request'",
         image_check=_check_i4, partition_check=_p_i4),
    _inv("I5", "no duplicate directory in a registration", _E, Scope.IMAGE, _S,
         rationale="Each of a broker's log directories has its own id.",
         source="ClusterControlManager.registerBroker 'Duplicate directory ID in request'",
         image_check=_check_i5),
    _inv("I6", "a directory belongs to one broker", _E, Scope.IMAGE, _S,
         rationale="directory.id lives in the disk's meta.properties: one disk, one broker.",
         source="ClusterControlManager.registerBroker / updateDirectories "
                "'BUG: directory … already assigned'",
         image_check=_check_i6),
    _inv("I7", "broker records carry the registration's epoch", _E, Scope.RECORD, _S,
         rationale="Change, fence, unfence and unregister records name one registration by its epoch.",
         source="ClusterControlManager.replayRegistrationChange / replay(UnregisterBrokerRecord)",
         step_check=_check_i7),
    _inv("I8", "a change record only shrinks online directories", _E, Scope.RECORD, _S,
         rationale="Directories go offline by a registration change and come back only by re-registration.",
         source="ReplicationControlManager.handleDirectoriesOffline; KAFKA-15364",
         step_check=_check_i8),
    _inv("I9", "registrations list directories at ≥ 3.7-IV2", _E, Scope.RECORD, _S,
         rationale="New registrations list directories; carried-over empty ones are re-sent soon (warning).",
         source="ClusterControlManager.registerBroker 'No directories specified'; KAFKA-16162; "
                "KAFKA-16757 BrokerRegistrationTracker",
         step_check=_check_i9),
    _inv("I10", "replica changes carry directories at ≥ 3.7-IV2", _E, Scope.RECORD, _S,
         rationale="Without Directories a replica change keeps the old positional array, which then lies.",
         source="KAFKA-15886; KAFKA-16583; PartitionChangeBuilder.setAssignmentChanges",
         step_check=_check_i10),
    _inv("I11", "single-directory brokers get their directory", _W, Scope.RECORD, _S,
         rationale="A new replica on a broker with one online directory is placed there, never UNASSIGNED.",
         source="ClusterControlManager.defaultDir; KAFKA-15886",
         step_check=_check_i11),
    _inv("I12", "placeholders resolve", _W, Scope.HISTORY, _S,
         rationale="UNASSIGNED/MIGRATING on an unfenced broker is resolved by AssignReplicasToDirs soon.",
         source="DirectoryId javadoc; ReplicaManager.maybeUpdateTopicAssignment; KAFKA-16886, KAFKA-17190"),
    _inv("I13", "offline replicas as Kafka computes them", _E, Scope.IMAGE, _M,
         rationale="The replica view says offline exactly when Kafka's metadata cache does.",
         source="KRaftMetadataCache.getOfflineReplicas; DirectoryId.isOnline; KAFKA-15362",
         partition_check=_p_i13),
    _inv("I14", "leader in ISR, unfenced, on an online directory", _E, Scope.IMAGE, _M,
         rationale="The controller elects only acceptable leaders: in the ISR, active, directory online.",
         source="ReplicationControlManager.LeaderAcceptor; PartitionChangeBuilder.isValidNewLeader",
         partition_check=_p_i14),
    _inv("I15", "ISR non-empty without ELR", _E, Scope.IMAGE, _M,
         rationale="Without ELR the last ISR member stays (leader -1) instead of emptying the ISR.",
         source="PartitionChangeBuilder (KIP-966); KAFKA-16624",
         partition_check=_p_i15),
    _inv("I16", "a directory failure is handled in its batch", _E, Scope.RECORD, _M,
         rationale="When a directory goes offline its broker leaves leadership and ISR of its partitions "
                   "atomically.",
         source="ReplicationControlManager.handleDirectoriesOffline → generateLeaderAndIsrUpdates; "
                "KAFKA-15364",
         step_check=_check_i16),
    _inv("I17", "assignment into an offline directory demotes", _E, Scope.RECORD, _M,
         rationale="Assigning a replica into an offline directory also removes it from leadership and ISR.",
         source="ReplicationControlManager.handleAssignReplicasToDirs ('offline-dir-assignment')",
         step_check=_check_i17),
    _inv("I18", "reassignment fields consistent", _E, Scope.IMAGE, _M,
         rationale="Adding and removing replicas are disjoint subsets of the replicas.",
         source="PartitionReassignmentReplicas",
         partition_check=_p_i18),
    _inv("I19", "epochs move in fixed steps", _E, Scope.RECORD, _M,
         rationale="A change bumps the partition epoch by 1, the leader epoch by 1 iff it has a Leader "
                   "field; a new broker incarnation has a higher epoch.",
         source="PartitionRegistration.merge; ClusterControlManager.registerBroker; KAFKA-15021, KAFKA-16952",
         step_check=_check_i19),
    _inv("I20", "snapshots agree with replay", _E, Scope.HISTORY, _M,
         rationale="A snapshot equals the replay of the log up to its end offset.",
         source="KIP-630 / KIP-631; MetadataLoader"),
    _inv("I21", "a replica's directory was registered by its broker", _E, Scope.HISTORY, _M,
         rationale="A broker assigns its replicas only to its own directories, registered at some point.",
         source="ReplicationControlManager.handleAssignReplicasToDirs; directory uniqueness (I6)"),
)})

#: §4's invariants that need inputs from outside the metadata log, I22–I25, by name. No check here: the model never
#: reads disks or configs. ``pipelines.quality`` checks them when the inputs exist (meta.properties inventory, broker
#: configuration) and reports them skipped, with the reason, when they do not.
EXTERNAL_INVARIANTS: Mapping[str, Invariant] = MappingProxyType({inv.name: inv for inv in (
    _inv("I22", "JBOD needs metadata.version ≥ 3.7-IV2", _E, Scope.EXTERNAL, Kind.EXTERNAL,
         rationale="Below 3.7-IV2 the controller cannot fail leaders over when one of several log dirs fails.",
         source="KAFKA-16606 (PR #15834); KAFKA-16969; Strimzi PR #11697"),
    _inv("I23", "metadata placement matches the disks", _W, Scope.EXTERNAL, Kind.EXTERNAL,
         rationale="A replica's recorded directory is the one holding its log, once in-flight moves settle.",
         source="ReplicaManager.maybeUpdateTopicAssignment; KAFKA-16297, KAFKA-16082, KAFKA-2556"),
    _inv("I24", "registered directories match the disks", _E, Scope.EXTERNAL, Kind.EXTERNAL,
         rationale="A broker registers the directory.id of each of its online data dirs, unique and unreserved.",
         source="KafkaRaftServer.initializeLogDirs; MetaPropertiesEnsemble.verify; ReplicaManager.handleLogDirFailure"),
    _inv("I25", "cordoned directories get no new replicas", _W, Scope.EXTERNAL, Kind.EXTERNAL,
         rationale="Cordoned directories are online directories of the broker and receive no new placements.",
         source="KIP-1066 / KAFKA-19774 (PR #21273); KAFKA-20441; KAFKA-20901"),
)})


def invariant(name: str) -> Invariant:
    """Any §4 invariant by name, I1–I25 (:data:`INVARIANTS` or :data:`EXTERNAL_INVARIANTS`)."""
    found = INVARIANTS.get(name) or EXTERNAL_INVARIANTS.get(name)
    if found is None:
        raise KeyError(f"no invariant named {name!r} (I1–I25)")
    return found

def _selected(names: Iterable[str] | None) -> list[Invariant]:
    if names is None:
        return list(INVARIANTS.values())
    return [INVARIANTS[n] for n in names]


def check_image(image: MetadataImage, names: Iterable[str] | None = None) -> list[Violation]:
    """Run every image-scope check (or the named ones) on ``image``; never raises for a violation."""
    out: list[Violation] = []
    for inv in _selected(names):
        if inv.image_check is not None:
            out.extend(inv.image_check(image))
    return out


def check_step(image_before: MetadataImage, entries: Sequence[LogEntry], image_after: MetadataImage,
               names: Iterable[str] | None = None) -> list[Violation]:
    """Run every step-scope check (or the named ones) on one batch. ``entries`` are the records that took
    ``image_before`` to ``image_after`` — the *committed* ones (an aborted transaction's records excluded)."""
    return _check_step(image_before, entries, image_after, names, None)


def _check_step(image_before: MetadataImage, entries: Sequence[LogEntry], image_after: MetadataImage,
                names: Iterable[str] | None, hosted: _HostedIndex | None,
                trace: _PartitionTrace | None = None) -> list[Violation]:
    out: list[Violation] = []
    recording = _Recording(image_before, entries, trace)
    if hosted is not None:
        hosted.advance(image_before, entries, image_after, recording.kinds)
    token = _SHARED.set((image_before, entries, recording))
    lent = _HOSTED.set(None if hosted is None else (image_after, hosted))
    try:
        for inv in _selected(names):
            if inv.step_check is not None:
                out.extend(inv.step_check(image_before, entries, image_after))
    finally:
        _HOSTED.reset(lent)
        _SHARED.reset(token)
    return out


# ----------------------------------------------------------------------------------------------------------
# I20: snapshot = replay


def _field_differences(a: BrokerRegistration | PartitionRegistration,
                       b: BrokerRegistration | PartitionRegistration) -> list[str]:
    return [f.name for f in dataclasses.fields(a) if getattr(a, f.name) != getattr(b, f.name)]


def snapshot_differences(snapshot: MetadataImage, replayed: MetadataImage) -> list[Violation]:
    """I20: every difference between a snapshot's image and the image replayed up to the snapshot's end
    offset: features, brokers (LogDirs included), topics, partitions (Directories included) and configs. Empty
    when they agree (``same_state``)."""
    offset = _image_offset(replayed)
    out: list[Violation] = []
    s_levels, r_levels = snapshot.features.levels, replayed.features.levels
    for name in sorted(set(s_levels) | set(r_levels)):
        if s_levels.get(name) != r_levels.get(name):
            out.append(_v("I20", f"feature {name}: snapshot {s_levels.get(name)}, replay "
                                 f"{r_levels.get(name)}", offset=offset))
    s_brokers, r_brokers = snapshot.cluster.brokers, replayed.cluster.brokers
    for b in sorted(set(s_brokers) | set(r_brokers)):
        sb, rb = s_brokers.get(b), r_brokers.get(b)
        if sb is None or rb is None:
            out.append(_v("I20", f"broker {b} is only in the {'replay' if sb is None else 'snapshot'}",
                          broker_id=b, offset=offset))
        elif sb != rb:
            out.append(_v("I20", f"broker {b} differs in {_field_differences(sb, rb)}", broker_id=b,
                          offset=offset))
    s_topics, r_topics = snapshot.topics.by_id, replayed.topics.by_id
    for tid in sorted(set(s_topics) | set(r_topics), key=str):
        st, rt = s_topics.get(tid), r_topics.get(tid)
        if st is None or rt is None:
            out.append(_v("I20", f"topic {tid} is only in the {'replay' if st is None else 'snapshot'}",
                          topic_id=tid, offset=offset))
            continue
        if st.name != rt.name:
            out.append(_v("I20", f"topic {tid} is named {st.name!r} in the snapshot, {rt.name!r} in the "
                                 "replay", topic_id=tid, offset=offset))
        for pid in sorted(set(st.partitions) | set(rt.partitions)):
            sp, rp = st.partitions.get(pid), rt.partitions.get(pid)
            if sp is None or rp is None:
                out.append(_v("I20", f"partition {_tp(tid, pid)} is only in the "
                                     f"{'replay' if sp is None else 'snapshot'}",
                              topic_id=tid, partition_id=pid, offset=offset))
            elif sp != rp:
                out.append(_v("I20", f"partition {_tp(tid, pid)} differs in {_field_differences(sp, rp)}",
                              topic_id=tid, partition_id=pid, offset=offset))
    s_conf, r_conf = snapshot.configs.resources, replayed.configs.resources
    for key in sorted(set(s_conf) | set(r_conf)):
        if dict(s_conf.get(key, {})) != dict(r_conf.get(key, {})):
            out.append(_v("I20", f"configs of resource {key} differ", offset=offset))
    return out


# ----------------------------------------------------------------------------------------------------------
# History: the tracker


@dataclass(frozen=True, slots=True)
class PendingPlacement:
    """A replica whose directory is still a placeholder (UNASSIGNED or MIGRATING) on a registered, unfenced
    broker at metadata.version ≥ 3.7-IV2 (I12), since the given offset and batch time."""

    topic_id: Uuid
    partition_id: int
    broker_id: int
    directory: Uuid
    since_offset: int
    since_timestamp: int | None


@dataclass(slots=True)
class _Clock:
    directory: Uuid
    since_offset: int
    since_timestamp: int | None
    reported: bool = False
    #: Creation order: a pending placement's clock is created when its key enters ``_pending`` and dropped with
    #: it, so sorting by ``seq`` gives ``_pending``'s iteration order (the order I12 warnings are reported in).
    seq: int = 0


#: A heap entry of the I12 deadlines: (since_offset or since_timestamp, clock seq, replica key).
_Deadline = tuple[int, int, ReplicaKey]


class InvariantTracker:
    """Checks a metadata log incrementally, batch by batch, keeping only the history the history-scope
    invariants need: per broker the directories it ever registered (I21), per placeholder replica when it
    became pending (I12), per carried-over registration since when it lacks directories (I9's warning).

    Feed it entries (``feed`` groups them by ``batch_base_offset``; ``end_batch`` closes the last batch) or
    whole batches (``feed_batch``); it replays them itself, honouring metadata transactions like ``Replayer``.
    A pipeline that replays on its own calls ``observe_batch`` with the committed entries and the resulting
    image. To start from a snapshot, pass its image: a snapshot's records are not placements, so don't feed
    them.

    ``max_pending_offsets`` / ``max_pending_ms`` bound how long a placeholder may stay (I12) or a registration
    may lack directories after the upgrade (I9); ``None`` disables a bound. ``image_checks`` runs the
    image-scope checks after each batch (only on touched partitions unless brokers or the metadata.version
    changed). ``history_checks=False`` skips the history (I12, I21, I9's warning) and its bookkeeping, for a
    caller that wants only the step checks of a long log (``pipelines.quality``'s log suite checks those from
    the history tables instead). ``step_names`` runs only the named step checks (default: all of them), for a
    caller that reads only some invariants' violations (the log suite: those that need a whole batch).

    A batch that changes no broker and not the metadata.version costs what it touches — its partitions, the topics it
    deletes, the clocks that fall due — however many placements are pending (all of a large cluster's replicas
    after the upgrade to 3.7-IV2); one that does rescans every partition, whose pending state depends on brokers."""

    def __init__(self, image: MetadataImage = EMPTY_IMAGE, *, max_pending_offsets: int | None = 10_000,
                 max_pending_ms: int | None = 600_000, image_checks: bool = True,
                 step_checks: bool = True, history_checks: bool = True,
                 step_names: Iterable[str] | None = None) -> None:
        self._image = image
        self._max_offsets = max_pending_offsets
        self._max_ms = max_pending_ms
        self._image_checks = image_checks
        self._step_checks = step_checks
        # Resolved once: an unknown name fails here, not at the first batch.
        self._step_names = None if step_names is None else tuple(i.name for i in _selected(step_names))
        self._history_checks = history_checks
        # I16's broker -> partitions index, kept across batches (only when I16 runs).
        runs_i16 = step_checks and (self._step_names is None or "I16" in self._step_names)
        self._hosted = _HostedIndex() if runs_i16 else None
        self._buffer: list[LogEntry] = []
        self._buffer_base: int | None = None
        self._transactions = TransactionBuffer()
        # The latest skipped range when the buffered batch's first entry was read (policy skip): a
        # transaction the batch leaves open is interrupted by a later one (TransactionBuffer.offer).
        self._buffer_gap: str | None = None
        self._registered: dict[int, set[Uuid]] = {}
        self._registrants: dict[Uuid, set[int]] = {}
        self._pending: dict[ReplicaKey, _Clock] = {}
        # _pending indexed by topic, then partition, then broker: a batch finds the placements of the partitions
        # it touches (or of a deleted topic) without scanning every pending placement — after an upgrade to
        # 3.7-IV2 every replica of a large cluster is MIGRATING, i.e. pending, at once.
        self._pending_index: dict[Uuid, dict[int, set[int]]] = {}
        # The partitions with a placeholder directory (UNASSIGNED or MIGRATING) whatever their brokers' state:
        # the only ones a broker change can make pending, so that one rescans these, not every partition (a
        # large cluster's placements are almost all done; its brokers restart and fence all the time). Kept by
        # the batches that touch partitions or delete topics; rebuilt by a metadata.version change.
        self._placeholders: dict[Uuid, set[int]] = {}
        # The clocks as min-heaps of when they started (offset; batch time where known), so a batch finds the
        # overdue ones without looking at every clock. Entries of dropped clocks stay until popped or compacted.
        self._by_offset: list[_Deadline] = []
        self._by_time: list[_Deadline] = []
        self._seq = 0
        self._carried: dict[int, _Clock] = {}
        for reg in image.cluster.brokers.values():
            self._remember_dirs(reg.id, reg.directories)
        start = image.last_offset if image.last_offset >= 0 else 0
        self._rescan(image, start, None)

    # -- public API -----------------------------------------------------------------------------------------

    @property
    def image(self) -> MetadataImage:
        """The image after the last completed batch."""
        return self._image

    def feed(self, entry: LogEntry) -> list[Violation]:
        """Buffer one entry; when it starts a new batch (a different ``batch_base_offset``), the buffered
        batch is replayed and checked first and its violations returned. Entries without a batch base offset
        stay in the current batch until :meth:`end_batch`."""
        out: list[Violation] = []
        base = entry.batch_base_offset
        if self._buffer and base is not None and self._buffer_base is not None and base != self._buffer_base:
            out = self.end_batch()
        if not self._buffer:
            self._buffer_base, self._buffer_gap = base, current_gap()
        self._buffer.append(entry)
        return out

    def end_batch(self) -> list[Violation]:
        """Replay and check the buffered batch. Raises :class:`ReplayFault` (and drops the batch) when it
        cannot be replayed — that is a fault, not a violation."""
        entries, self._buffer, self._buffer_base = self._buffer, [], None
        committed = self._transactions.settle_all(entries, self._buffer_gap)
        if not committed:
            return []
        delta = MetadataDelta(self._image)
        # The step checks read what each PartitionChangeRecord did from this replay (_Recording's trace) — unless a
        # skipped range lies behind the batch: then replay may leave a record out that the recording keeps, and
        # the recording decides alone, as for a caller that replays on its own.
        trace: dict[int, tuple[PartitionRegistration | None, PartitionRegistration | None]] | None = \
            {} if self._step_checks and current_gap() is None else None
        for j, entry in enumerate(committed):
            record = entry.record
            try:
                if trace is not None and isinstance(record, PartitionChangeRecord):
                    done = delta.replay_change(record, entry.offset)
                    # Without a skipped range, replay merges the change or raises: nothing is left out.
                    assert done is not None
                    trace[j] = done
                else:
                    delta.replay(record, entry.offset)
            except ReplayFault as fault:
                raise fault.located(offset=entry.offset, source=entry.source) from None
        return self._observe(committed, delta.apply(), trace)

    def feed_batch(self, entries: Iterable[LogEntry]) -> list[Violation]:
        """Replay and check one whole batch (closing any batch still buffered first)."""
        out = self.end_batch() if self._buffer else []
        self._buffer, self._buffer_gap = list(entries), current_gap()
        return out + self.end_batch()

    def observe_batch(self, entries: Sequence[LogEntry], image_after: MetadataImage) -> list[Violation]:
        """Check one batch that the caller replayed: ``entries`` are its committed records, ``image_after``
        the image they produced from :attr:`image`. Updates the history and returns every violation."""
        return self._observe(entries, image_after, None)

    def _observe(self, entries: Sequence[LogEntry], image_after: MetadataImage,
                 trace: _PartitionTrace | None) -> list[Violation]:
        if not entries:
            return []
        before = self._image
        out: list[Violation] = []
        if self._step_checks:
            # The checks move the brokers' index to the image after first (_check_step).
            out.extend(_check_step(before, entries, image_after, self._step_names, self._hosted, trace))
        if self._image_checks:
            out.extend(self._check_touched(image_after, entries))
        if self._history_checks:
            out.extend(self._history(before, entries, image_after))
        self._image = image_after
        return out

    def check_snapshot(self, snapshot: MetadataImage) -> list[Violation]:
        """I20: compare a snapshot's image with the replay so far. Call it when the tracker has replayed
        exactly up to the snapshot's end offset (the tracker keeps no older images)."""
        return snapshot_differences(snapshot, self._image)

    def pending_placements(self) -> list[PendingPlacement]:
        """Replicas currently pending a directory (I12), sorted by topic id string, partition, broker."""
        return sorted((PendingPlacement(topic_id=t, partition_id=p, broker_id=b, directory=c.directory,
                                        since_offset=c.since_offset, since_timestamp=c.since_timestamp)
                       for (t, p, b), c in self._pending.items()),
                      key=lambda x: (str(x.topic_id), x.partition_id, x.broker_id))

    def directories_ever_registered(self, broker_id: int) -> frozenset[Uuid]:
        """Every directory ``broker_id`` has listed in a registration seen so far (I21's history)."""
        return frozenset(self._registered.get(broker_id, ()))

    # -- internals ------------------------------------------------------------------------------------------

    def _check_touched(self, image: MetadataImage, entries: Sequence[LogEntry]) -> list[Violation]:
        if _changes_brokers_or_gate(entries):
            return check_image(image)  # broker state or the gate changed: any partition may be affected
        out: list[Violation] = []
        for tid, pid in _touched_partitions(entries):
            part = image.topics.get_partition(tid, pid)
            if part is None:
                continue
            for inv in INVARIANTS.values():
                if inv.partition_check is not None:
                    out.extend(inv.partition_check(image, tid, pid, part))
        return out

    def _remember_dirs(self, broker_id: int, dirs: Iterable[Uuid]) -> None:
        for d in dirs:
            self._registered.setdefault(broker_id, set()).add(d)
            self._registrants.setdefault(d, set()).add(broker_id)

    def _history(self, before: MetadataImage, entries: Sequence[LogEntry],
                 after: MetadataImage) -> list[Violation]:
        out: list[Violation] = []
        now = entries[-1].offset
        now_ts = next((e.timestamp for e in reversed(entries) if e.timestamp is not None), None)
        for entry in entries:
            rec = entry.record
            if isinstance(rec, (RegisterBrokerRecord, BrokerRegistrationChangeRecord)):
                self._remember_dirs(rec.broker_id, rec.log_dirs)
        touched = _touched_partitions(entries)
        out.extend(self._check_i21(before, after, touched))
        removed = {e.record.topic_id for e in entries if isinstance(e.record, RemoveTopicRecord)}
        for tid in removed:
            self._placeholders.pop(tid, None)
        for tid, pid in touched:
            self._note_placeholders(after, tid, pid)
        if _changes_brokers_or_gate(entries):
            self._rescan(after, now, now_ts, everything=_has(entries, FeatureLevelRecord))
        else:
            for tid in removed:
                for pid, brokers in self._pending_index.pop(tid, {}).items():
                    for b in brokers:
                        del self._pending[(tid, pid, b)]
            for tid, pid in touched:
                self._rescan_partition(after, tid, pid, now, now_ts)
        out.extend(self._overdue(now, now_ts))
        return out

    def _check_i21(self, before: MetadataImage, after: MetadataImage,
                   touched: Mapping[PartitionKey, int]) -> list[Violation]:
        out = []
        for (tid, pid), offset in touched.items():
            part = after.topics.get_partition(tid, pid)
            if part is None:
                continue
            prev = before.topics.get_partition(tid, pid)
            for b, d in zip(part.replicas, part.directories, strict=False):
                if prev is not None and replica_directory(prev, b) == d:
                    continue  # directories this batch did not set
                if replica_directory_registered(d, self._registered.get(b, ())):
                    continue
                others = sorted(self._registrants.get(d, set()) - {b})
                why = f"only broker(s) {others} registered it" if others else "no broker ever registered it"
                out.append(_v("I21", f"replica {b} of {_tp(tid, pid)} is assigned to directory {d}, but "
                                     f"{why}", topic_id=tid, partition_id=pid, broker_id=b, directory=d,
                              offset=offset))
        return out

    def _note_placeholders(self, image: MetadataImage, tid: Uuid, pid: int) -> None:
        """Keep :attr:`_placeholders` right for one partition as ``image`` has it."""
        part = image.topics.get_partition(tid, pid)
        if part is not None and any(d in PLACEHOLDERS for d in part.directories):
            self._placeholders.setdefault(tid, set()).add(pid)
        else:
            parts = self._placeholders.get(tid)
            if parts is not None:
                parts.discard(pid)
                if not parts:
                    del self._placeholders[tid]

    def _rescan(self, image: MetadataImage, now: int, now_ts: int | None, *, everything: bool = True) -> None:
        """Recompute every pending placement and carried-over registration (after broker or gate changes). Only
        the partitions with a placeholder directory can be pending; with ``everything`` (the start, a
        metadata.version change) every partition is looked at and that index rebuilt, else the index says which."""
        live: set[ReplicaKey] = set()
        if everything:
            self._placeholders = {}
            for topic, pid, _ in image.topics.partitions():
                self._note_placeholders(image, topic.id, pid)
        for tid, pids in self._placeholders.items():
            for pid in pids:
                live.update(self._rescan_partition(image, tid, pid, now, now_ts))
        for key in [k for k in self._pending if k not in live]:
            self._drop_pending(key)
        for b, reg in image.cluster.brokers.items():
            if registration_carried_over(reg, image.metadata_version):
                self._carried.setdefault(b, _Clock(MIGRATING, now, now_ts))
            else:
                self._carried.pop(b, None)
        for b in [b for b in self._carried if b not in image.cluster.brokers]:
            del self._carried[b]

    def _rescan_partition(self, image: MetadataImage, tid: Uuid, pid: int, now: int,
                          now_ts: int | None) -> set[ReplicaKey]:
        part = image.topics.get_partition(tid, pid)
        pending: set[ReplicaKey] = set()
        if part is not None and image.metadata_version.is_directory_assignment_supported():
            for b, d in zip(part.replicas, part.directories, strict=False):
                if replica_pending_placement(image.cluster.brokers.get(b), d, image.metadata_version):
                    pending.add((tid, pid, b))
                    clock = self._pending.get((tid, pid, b))
                    if clock is None:
                        self._add_pending((tid, pid, b), _Clock(d, now, now_ts))
                    else:
                        clock.directory = d
        brokers = self._pending_index.get(tid, {}).get(pid, ())
        for key in [(tid, pid, b) for b in brokers if (tid, pid, b) not in pending]:
            self._drop_pending(key)
        return pending

    def _add_pending(self, key: ReplicaKey, clock: _Clock) -> None:
        self._seq += 1
        clock.seq = self._seq
        self._pending[key] = clock
        self._pending_index.setdefault(key[0], {}).setdefault(key[1], set()).add(key[2])
        # Without a bound there is nothing to wait for: keep no deadline.
        if self._max_offsets is not None:
            heapq.heappush(self._by_offset, (clock.since_offset, clock.seq, key))
        if self._max_ms is not None and clock.since_timestamp is not None:
            heapq.heappush(self._by_time, (clock.since_timestamp, clock.seq, key))

    def _drop_pending(self, key: ReplicaKey) -> None:
        del self._pending[key]
        partitions = self._pending_index[key[0]]
        brokers = partitions[key[1]]
        brokers.discard(key[2])
        if not brokers:
            del partitions[key[1]]
            if not partitions:
                del self._pending_index[key[0]]

    def _pop_overdue(self, heap: list[_Deadline], cutoff: int, found: dict[int, ReplicaKey]) -> None:
        """Pop the deadlines that started before ``cutoff`` (the clocks now overdue) into ``found`` (seq → key),
        skipping entries of clocks dropped (or replaced) since, or already reported."""
        while heap and heap[0][0] < cutoff:
            _, seq, key = heapq.heappop(heap)
            clock = self._pending.get(key)
            if clock is not None and clock.seq == seq and not clock.reported:
                found[seq] = key

    def _compact(self, heap: list[_Deadline]) -> None:
        """Rebuild a heap that holds mostly entries of dropped clocks (placements resolved in time) from the live
        ones, so it stays proportional to what is pending (amortised: it at least halves)."""
        if len(heap) > 64 and len(heap) > 2 * len(self._pending):
            live = [(since, seq, key) for since, seq, key in heap
                    if (clock := self._pending.get(key)) is not None and clock.seq == seq]
            heapq.heapify(live)
            heap[:] = live

    def _is_overdue(self, clock: _Clock, now: int, now_ts: int | None) -> bool:
        if self._max_offsets is not None and now - clock.since_offset > self._max_offsets:
            return True
        return (self._max_ms is not None and now_ts is not None and clock.since_timestamp is not None
                and now_ts - clock.since_timestamp > self._max_ms)

    def _overdue(self, now: int, now_ts: int | None) -> list[Violation]:
        out = []
        # A clock is overdue when now - since exceeds a bound; in creation order, as _pending iterates.
        found: dict[int, ReplicaKey] = {}
        if self._max_offsets is not None:
            self._pop_overdue(self._by_offset, now - self._max_offsets, found)
        if self._max_ms is not None and now_ts is not None:
            self._pop_overdue(self._by_time, now_ts - self._max_ms, found)
        self._compact(self._by_offset)
        self._compact(self._by_time)
        for seq in sorted(found):
            tid, pid, b = found[seq]
            clock = self._pending[(tid, pid, b)]
            clock.reported = True
            out.append(_v("I12", f"replica {b} of {_tp(tid, pid)} has been {clock.directory} "
                                 f"({DirectoryState.of(clock.directory).value}) since offset "
                                 f"{clock.since_offset} on an unfenced broker",
                          topic_id=tid, partition_id=pid, broker_id=b, directory=clock.directory,
                          offset=now))
        for b, clock in self._carried.items():
            if not clock.reported and self._is_overdue(clock, now, now_ts):
                clock.reported = True
                out.append(_v("I9", f"broker {b}'s registration has listed no directories since offset "
                                    f"{clock.since_offset} at metadata.version ≥ 3.7-IV2; it should have "
                                    "re-registered (BrokerRegistrationTracker)", broker_id=b, offset=now,
                              severity=Severity.WARNING))
        return out


#: The directories of a placement not made yet (I12): the broker will assign the replica a real one.
PLACEHOLDERS: Final = (UNASSIGNED, MIGRATING)


def _changes_brokers_or_gate(entries: Entries) -> bool:
    """Broker state or the metadata.version gate changed: any partition's derived state may have changed."""
    return _has(entries, RegisterBrokerRecord, BrokerRegistrationChangeRecord, FenceBrokerRecord,
                UnfenceBrokerRecord, UnregisterBrokerRecord, FeatureLevelRecord)


def _touched_partitions(entries: Sequence[LogEntry]) -> dict[PartitionKey, int]:
    """Partitions a batch's PartitionRecords / PartitionChangeRecords touched, with the last touching
    offset."""
    out: dict[PartitionKey, int] = {}
    for entry in entries:
        rec = entry.record
        if isinstance(rec, (PartitionRecord, PartitionChangeRecord)):
            out[(rec.topic_id, rec.partition_id)] = entry.offset
    return out
