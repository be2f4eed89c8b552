"""Minimal partition changes: the port of ``PartitionChangeBuilder`` with its reassignment helpers (3.9).

Mirrors ``org.apache.kafka.controller.PartitionChangeBuilder``, ``PartitionReassignmentReplicas`` and
``PartitionReassignmentRevert``. A builder starts from the current :class:`PartitionRegistration`, takes
targets (ISR, replicas, removing/adding, directories, election type, leader recovery state) and ``build()``
returns the *smallest* PartitionChangeRecord that moves the partition there — or None when nothing would
change (``changeRecordIsNoOp``). It never touches the image.

Directory semantics (R8): ``targetDirectories`` starts as replica → directory of the current partition;
:meth:`PartitionChangeBuilder.set_directory` overrides one entry; at the end of ``build()`` and only at
metadata.version ≥ 3.7-IV2 the directories of the target replica list are recomputed (a replica without an
entry gets ``DefaultDirProvider.default_dir``) and emitted iff they differ from the current array. Leader
election only accepts a replica whose directory is online (:class:`LeaderAcceptor`, R2.4).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from jbod_model.directory_id import create_assignment_map
from jbod_model.errors import RequestRejected
from jbod_model.errors_codes import Errors
from jbod_model.image import ClusterImage, PartitionRegistration
from jbod_model.metadata_version import MetadataVersion
from jbod_model.records.metadata import (
    NO_LEADER,
    NO_LEADER_CHANGE,
    LeaderRecoveryState,
    PartitionChangeRecord,
)
from jbod_model.uuid import Uuid

#: ``MetadataVersion.IBP_3_2_IV0``: from here an unclean election marks the leader RECOVERING (KIP-704).
IBP_3_2_IV0 = 3

IntPredicate = Callable[[int], bool]


class DefaultDirProvider(Protocol):
    """Mirrors ``org.apache.kafka.metadata.placement.DefaultDirProvider``: where a new replica goes (R7.1)."""

    def default_dir(self, broker_id: int) -> Uuid: ...


class _UnsetDefaultDirProvider:
    """The builder's initial provider: Java throws ``IllegalStateException("DefaultDirProvider is not
    set")``."""

    def default_dir(self, broker_id: int) -> Uuid:
        raise AssertionError("DefaultDirProvider is not set")


class Election(Enum):
    """``PartitionChangeBuilder.Election``."""

    #: Elect the preferred (first) replica if it is in the ISR and acceptable.
    PREFERRED = "PREFERRED"
    #: Elect from the ISR to keep the partition online.
    ONLINE = "ONLINE"
    #: Prefer the ISR but fall back to any acceptable replica (data loss possible).
    UNCLEAN = "UNCLEAN"


def change_record_is_no_op(record: PartitionChangeRecord) -> bool:
    """Mirrors ``PartitionChangeBuilder.changeRecordIsNoOp`` (R8.5): a record with only Directories is a
    change."""
    return (record.isr is None and record.eligible_leader_replicas is None and record.last_known_elr is None
            and record.leader == NO_LEADER_CHANGE and record.replicas is None
            and record.removing_replicas is None and record.adding_replicas is None
            and record.leader_recovery_state == LeaderRecoveryState.NO_CHANGE and record.directories is None)


class LeaderAcceptor:
    """Mirrors ``ReplicationControlManager.LeaderAcceptor`` (R2.4): a replica may lead only if the base
    predicate accepts it (default: registered, unfenced, not in controlled shutdown) **and** its directory for
    this partition — as recorded *before* the change — is online on its broker."""

    __slots__ = ("_base", "_cluster", "_partition")

    def __init__(self, cluster: ClusterImage, partition: PartitionRegistration,
                 is_acceptable_leader: IntPredicate | None = None) -> None:
        self._cluster = cluster
        self._partition = partition
        self._base = is_acceptable_leader if is_acceptable_leader is not None else (
            lambda b: is_active(cluster, b))

    def __call__(self, broker_id: int) -> bool:
        if not self._base(broker_id):
            return False
        # PartitionRegistration.directory throws for a non-replica, as Java's does (IllegalArgumentException).
        return self._cluster.has_online_dir(broker_id, self._partition.directory(broker_id))


def is_active(cluster: ClusterImage, broker_id: int) -> bool:
    """Mirrors ``ClusterControlManager.isActive``: registered, not fenced, not in controlled shutdown."""
    reg = cluster.brokers.get(broker_id)
    return reg is not None and not reg.fenced and not reg.in_controlled_shutdown


# ------------------------------------------------------------------------------------------------------------
# Reassignment helpers


@dataclass(frozen=True, slots=True)
class CompletedReassignment:
    """``PartitionReassignmentReplicas.CompletedReassignment``."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class PartitionReassignmentReplicas:
    """Mirrors ``PartitionReassignmentReplicas``: the replica list of a reassignment in progress.

    :meth:`of_target` is the Java constructor from (current, target) assignments (R11.1): the target replicas
    in the given order followed by the removing ones (ascending); adding = target − current (ascending).
    """

    removing: tuple[int, ...]
    adding: tuple[int, ...]
    replicas: tuple[int, ...]

    @classmethod
    def of_target(cls, current: Sequence[int], target: Sequence[int]) -> PartitionReassignmentReplicas:
        removing = tuple(sorted(set(current) - set(target)))
        adding = tuple(sorted(set(target) - set(current)))
        return cls(removing=removing, adding=adding, replicas=(*target, *removing))

    @classmethod
    def of_partition(cls, partition: PartitionRegistration) -> PartitionReassignmentReplicas:
        return cls(removing=partition.removing_replicas, adding=partition.adding_replicas,
                   replicas=partition.replicas)

    def is_reassignment_in_progress(self) -> bool:
        return bool(self.removing or self.adding)

    def maybe_complete_reassignment(self, target_isr: Sequence[int]) -> CompletedReassignment | None:
        """Mirrors ``maybeCompleteReassignment`` (R11.2): complete once the ISR (minus removing replicas) is
        non-empty and covers every remaining replica."""
        if not self.is_reassignment_in_progress():
            return None
        new_isr = tuple(target_isr)
        new_replicas = self.replicas
        if self.removing:
            new_isr = tuple(r for r in target_isr if r not in self.removing)
            if not new_isr:
                return None
            new_replicas = tuple(r for r in self.replicas if r not in self.removing)
            if not new_replicas:
                return None
        if not set(new_replicas) <= set(new_isr):
            return None
        return CompletedReassignment(replicas=new_replicas, isr=new_isr)

    def original_replicas(self) -> tuple[int, ...]:
        """The replicas minus those being added, in current order."""
        return tuple(r for r in self.replicas if r not in self.adding)


def is_reassignment_in_progress(partition: PartitionRegistration) -> bool:
    """``PartitionReassignmentReplicas.isReassignmentInProgress(PartitionRegistration)``."""
    return bool(partition.removing_replicas or partition.adding_replicas)


@dataclass(frozen=True, slots=True)
class PartitionReassignmentRevert:
    """Mirrors ``PartitionReassignmentRevert`` (R11.3): replicas = current − adding (current order), ISR = ISR
    − adding; when that leaves the ISR empty the first remaining replica is put in it, which is an unclean
    election (the caller must check the topic allows it)."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    unclean: bool

    @classmethod
    def of(cls, partition: PartitionRegistration) -> PartitionReassignmentRevert:
        ongoing = PartitionReassignmentReplicas.of_partition(partition)
        replicas = ongoing.original_replicas()
        isr = tuple(r for r in partition.isr if r not in ongoing.adding)
        if isr:
            return cls(replicas=replicas, isr=isr, unclean=False)
        if not replicas:
            # Unreachable in practice: it needs a partition that had no replicas before the reassignment.
            raise RequestRejected(Errors.INVALID_REPLICA_ASSIGNMENT,
                                  "Invalid replica assignment: addingReplicas contains all replicas.")
        return cls(replicas=replicas, isr=(replicas[0],), unclean=True)


# ------------------------------------------------------------------------------------------------------------
# The builder


@dataclass(frozen=True, slots=True)
class _ElectionResult:
    node: int
    unclean: bool


class _RecordDraft:
    """The mutable PartitionChangeRecord under construction (Java mutates its generated record in place)."""

    __slots__ = ("adding_replicas", "directories", "eligible_leader_replicas", "isr", "last_known_elr", "leader",
                 "leader_recovery_state", "removing_replicas", "replicas")

    def __init__(self) -> None:
        self.isr: tuple[int, ...] | None = None
        self.leader: int = NO_LEADER_CHANGE
        self.replicas: tuple[int, ...] | None = None
        self.removing_replicas: tuple[int, ...] | None = None
        self.adding_replicas: tuple[int, ...] | None = None
        self.leader_recovery_state: int = LeaderRecoveryState.NO_CHANGE
        self.directories: tuple[Uuid, ...] | None = None
        self.eligible_leader_replicas: tuple[int, ...] | None = None
        self.last_known_elr: tuple[int, ...] | None = None


class PartitionChangeBuilder:
    """Mirrors ``org.apache.kafka.controller.PartitionChangeBuilder`` (3.9): set targets, then :meth:`build`.

    Fluent setters return ``self``. ``is_acceptable_leader`` is normally a :class:`LeaderAcceptor`. The
    builder is a local, single-use object; the partition it starts from is never modified.
    """

    __slots__ = ("_default_dir_provider", "_election", "_elr_enabled", "_is_acceptable_leader", "_min_isr", "_mv",
                 "_partition", "_partition_id", "_target_adding", "_target_directories", "_target_elr",
                 "_target_isr", "_target_last_known_elr", "_target_leader_recovery_state", "_target_removing",
                 "_target_replicas", "_topic_id", "_unclean_shutdown_replicas", "_use_last_known_leader",
                 "_zk_migration_enabled")

    def __init__(self, partition: PartitionRegistration, topic_id: Uuid, partition_id: int,
                 is_acceptable_leader: IntPredicate, metadata_version: MetadataVersion, min_isr: int) -> None:
        self._partition = partition
        self._topic_id = topic_id
        self._partition_id = partition_id
        self._is_acceptable_leader = is_acceptable_leader
        self._mv = metadata_version
        self._min_isr = min_isr
        self._zk_migration_enabled = False
        self._elr_enabled = False
        # Whether the last known leader may be elected in a balanced recovery (KIP-966); Java's default is
        # true.
        self._use_last_known_leader = True
        self._target_isr: tuple[int, ...] = partition.isr
        self._target_replicas: tuple[int, ...] = partition.replicas
        self._target_removing: tuple[int, ...] = partition.removing_replicas
        self._target_adding: tuple[int, ...] = partition.adding_replicas
        self._target_elr: tuple[int, ...] = partition.elr
        self._target_last_known_elr: tuple[int, ...] = partition.last_known_elr
        self._target_leader_recovery_state = partition.leader_recovery_state
        self._target_directories: dict[int, Uuid] = create_assignment_map(partition.replicas, partition.directories)
        self._unclean_shutdown_replicas: tuple[int, ...] | None = None
        self._election = Election.ONLINE
        self._default_dir_provider: DefaultDirProvider = _UnsetDefaultDirProvider()

    # -- setters ---------------------------------------------------------------------------------------------

    def set_target_isr(self, target_isr: Sequence[int]) -> PartitionChangeBuilder:
        self._target_isr = tuple(target_isr)
        return self

    def set_target_replicas(self, target_replicas: Sequence[int]) -> PartitionChangeBuilder:
        self._target_replicas = tuple(target_replicas)
        return self

    def set_unclean_shutdown_replicas(self, replicas: Sequence[int]) -> PartitionChangeBuilder:
        self._unclean_shutdown_replicas = tuple(replicas)
        return self

    def set_election(self, election: Election) -> PartitionChangeBuilder:
        self._election = election
        return self

    def set_target_removing(self, target_removing: Sequence[int]) -> PartitionChangeBuilder:
        self._target_removing = tuple(target_removing)
        return self

    def set_target_adding(self, target_adding: Sequence[int]) -> PartitionChangeBuilder:
        self._target_adding = tuple(target_adding)
        return self

    def set_target_leader_recovery_state(self, state: int) -> PartitionChangeBuilder:
        self._target_leader_recovery_state = state
        return self

    def set_zk_migration_enabled(self, enabled: bool) -> PartitionChangeBuilder:
        self._zk_migration_enabled = enabled
        return self

    def set_eligible_leader_replicas_enabled(self, enabled: bool) -> PartitionChangeBuilder:
        self._elr_enabled = enabled
        return self

    def set_use_last_known_leader_in_balanced_recovery(self, enabled: bool) -> PartitionChangeBuilder:
        self._use_last_known_leader = enabled
        return self

    def set_directory(self, broker_id: int, directory: Uuid) -> PartitionChangeBuilder:
        """Override the directory of one replica (AssignReplicasToDirs, R6.4)."""
        self._target_directories[broker_id] = directory
        return self

    def set_default_dir_provider(self, provider: DefaultDirProvider) -> PartitionChangeBuilder:
        self._default_dir_provider = provider
        return self

    @property
    def target_isr(self) -> tuple[int, ...]:
        return self._target_isr

    # -- election --------------------------------------------------------------------------------------------

    def _is_valid_new_leader(self, replica: int) -> bool:
        # A valid leader is in the target ISR, or in the ELR when the ISR is empty (KIP-966).
        in_isr = replica in self._target_isr or (not self._target_isr and replica in self._target_elr)
        return in_isr and self._is_acceptable_leader(replica)

    def _can_elect_last_known_leader(self) -> bool:
        if not self._elr_enabled or not self._use_last_known_leader:
            return False
        if self._target_elr or self._target_isr:
            return False
        # The last known leader is only usable when LastKnownElr holds exactly that one broker.
        return len(self._partition.last_known_elr) == 1

    def _elect_leader(self) -> _ElectionResult:
        if self._election is Election.PREFERRED:
            return self._elect_preferred_leader()
        return self._elect_any_leader()

    def _elect_preferred_leader(self) -> _ElectionResult:
        preferred = self._target_replicas[0]
        if self._is_valid_new_leader(preferred):
            return _ElectionResult(preferred, False)
        if self._is_valid_new_leader(self._partition.leader):
            return _ElectionResult(self._partition.leader, False)
        for replica in self._target_replicas[1:]:
            if self._is_valid_new_leader(replica):
                return _ElectionResult(replica, False)
        if self._can_elect_last_known_leader():
            return _ElectionResult(self._partition.last_known_elr[0], True)
        return _ElectionResult(NO_LEADER, False)

    def _elect_any_leader(self) -> _ElectionResult:
        if self._is_valid_new_leader(self._partition.leader):
            # The current leader meets every constraint: keep it.
            return _ElectionResult(self._partition.leader, False)
        for replica in self._target_replicas:
            if self._is_valid_new_leader(replica):
                return _ElectionResult(replica, False)
        if self._can_elect_last_known_leader():
            return _ElectionResult(self._partition.last_known_elr[0], True)
        if self._election is Election.UNCLEAN:
            for replica in self._target_replicas:
                if self._is_acceptable_leader(replica):
                    return _ElectionResult(replica, True)
        return _ElectionResult(NO_LEADER, False)

    def _try_election(self, record: _RecordDraft) -> None:
        result = self._elect_leader()
        if result.node == self._partition.leader:
            return
        if result.node in self._target_elr:
            # Elected from the ELR: it becomes the whole ISR and leaves the ELR.
            self._target_isr = (result.node,)
            self._target_elr = tuple(r for r in self._target_elr if r != result.node)
        record.leader = result.node
        if result.unclean:
            # An unclean election forces the ISR to the new leader alone — data may be lost.
            record.isr = (result.node,)
            if (self._partition.leader_recovery_state != LeaderRecoveryState.RECOVERING
                    and self._mv.is_at_least(IBP_3_2_IV0)):
                record.leader_recovery_state = LeaderRecoveryState.RECOVERING

    # -- epoch bumps -----------------------------------------------------------------------------------------

    def _trigger_leader_epoch_bump_for_replica_reassignment_if_needed(self, record: _RecordDraft) -> None:
        if record.leader != NO_LEADER_CHANGE:
            return  # the leader is changing anyway, so its epoch is bumped
        if not set(self._partition.replicas) <= set(self._target_replicas):
            # A replica is dropped: force a leader epoch bump by "changing" the leader to itself (R9.4).
            record.leader = self._partition.leader

    def _trigger_leader_epoch_bump_for_isr_shrink_if_needed(self, record: _RecordDraft) -> None:
        # Only before 3.6-IV0 (KAFKA-15021: brokers needed it) or during ZK migration (ZK-mode brokers need
        # it).
        if not (self._mv.is_leader_epoch_bump_required_on_isr_shrink() or self._zk_migration_enabled):
            return
        if record.leader != NO_LEADER_CHANGE or record.isr is None:
            return
        if not set(self._partition.isr) <= set(record.isr):
            record.leader = self._partition.leader

    # -- reassignment and ELR --------------------------------------------------------------------------------

    def _complete_reassignment_if_needed(self) -> None:
        replicas = PartitionReassignmentReplicas(removing=self._target_removing, adding=self._target_adding,
                                                 replicas=self._target_replicas)
        completed = replicas.maybe_complete_reassignment(self._target_isr)
        if completed is None:
            return
        self._target_isr = completed.isr
        self._target_replicas = completed.replicas
        self._target_removing = ()
        self._target_adding = ()

    def _maybe_populate_target_elr(self) -> None:
        if not self._elr_enabled:
            return
        if len(self._target_isr) >= self._min_isr:
            self._target_elr = ()
            self._target_last_known_elr = ()
            return
        target_isr = set(self._target_isr)
        unclean = self._unclean_shutdown_replicas
        # Java collects into a HashSet; small non-negative Integer keys iterate ascending, so sorted()
        # matches.
        candidates = set(self._target_elr) | set(self._partition.isr)
        self._target_elr = tuple(sorted(r for r in candidates
                                        if r not in target_isr and (unclean is None or r not in unclean)))
        candidates |= set(self._target_last_known_elr)
        self._target_last_known_elr = tuple(sorted(r for r in candidates
                                                   if r not in target_isr and r not in self._target_elr))

    def _maybe_update_record_elr(self, record: _RecordDraft) -> None:
        clean_election = record.isr is None
        if not clean_election or not self._elr_enabled:
            # An unclean election or disabled ELR clears both ELR fields.
            self._target_elr = ()
            self._target_last_known_elr = ()
        if self._target_elr != self._partition.elr:
            record.eligible_leader_replicas = self._target_elr
        if (self._use_last_known_leader and len(self._partition.last_known_elr) == 1
                and (record.leader == NO_LEADER
                     or (record.leader == NO_LEADER_CHANGE and self._partition.leader == NO_LEADER))):
            # The stored last known leader is kept while the partition stays leaderless.
            self._target_last_known_elr = self._partition.last_known_elr
        if self._use_last_known_leader:
            return  # LastKnownElr then holds the last known leader, set by _maybe_update_last_known_leader
        if self._target_last_known_elr != self._partition.last_known_elr:
            record.last_known_elr = self._target_last_known_elr

    def _maybe_update_last_known_leader(self, record: _RecordDraft) -> None:
        if not self._use_last_known_leader or not self._elr_enabled:
            return
        partition = self._partition
        if (record.isr is not None and not record.isr
                and (len(partition.last_known_elr) != 1 or partition.last_known_elr[0] != partition.leader)):
            # Only the first time the partition becomes leaderless.
            record.last_known_elr = (partition.leader,)
        elif ((record.leader >= 0 or NO_LEADER not in (partition.leader, record.leader))
              and partition.last_known_elr):
            # The partition has, or keeps, a valid leader: forget the last known one.
            record.last_known_elr = ()

    def _set_assignment_changes(self, record: _RecordDraft) -> None:
        if self._target_replicas:
            if self._mv.is_directory_assignment_supported():
                # Java evaluates the default for every replica (eager getOrDefault, R8.3), so an unset
                # provider fails even when every replica has a directory; providers must be side-effect free.
                directories = tuple(self._target_directories.get(r, self._default_dir_provider.default_dir(r))
                                    for r in self._target_replicas)
                if directories != self._partition.directories:
                    record.directories = directories
            if self._target_replicas != self._partition.replicas:
                record.replicas = self._target_replicas
        if self._target_removing != self._partition.removing_replicas:
            record.removing_replicas = self._target_removing
        if self._target_adding != self._partition.adding_replicas:
            record.adding_replicas = self._target_adding

    def build(self) -> PartitionChangeRecord | None:
        """Mirrors ``PartitionChangeBuilder.build``: the minimal PartitionChangeRecord, or None for a no-op.

        The record version is ``partitionChangeRecordVersion(MV)``.
        """
        record = _RecordDraft()
        self._complete_reassignment_if_needed()
        self._maybe_populate_target_elr()
        self._try_election(record)
        self._trigger_leader_epoch_bump_for_replica_reassignment_if_needed(record)
        self._maybe_update_record_elr(record)
        # Without ELR the ISR never becomes empty: the last member stays (R9.3).
        if (record.isr is None and (self._target_isr or self._elr_enabled)
                and self._target_isr != self._partition.isr):
            record.isr = self._target_isr
        self._trigger_leader_epoch_bump_for_isr_shrink_if_needed(record)
        self._maybe_update_last_known_leader(record)
        self._set_assignment_changes(record)
        if self._target_leader_recovery_state != self._partition.leader_recovery_state:
            record.leader_recovery_state = self._target_leader_recovery_state
        version = self._mv.partition_change_record_version()
        result = PartitionChangeRecord(
            version=version, partition_id=self._partition_id, topic_id=self._topic_id, isr=record.isr,
            leader=record.leader, replicas=record.replicas, removing_replicas=record.removing_replicas,
            adding_replicas=record.adding_replicas, leader_recovery_state=record.leader_recovery_state,
            directories=record.directories if version >= 1 else None,
            # Java's serializer refuses a non-default ELR field below v2; ELR state only exists from v2
            # anyway.
            eligible_leader_replicas=record.eligible_leader_replicas if version >= 2 else None,
            last_known_elr=record.last_known_elr if version >= 2 else None)
        return None if change_record_is_no_op(result) else result
