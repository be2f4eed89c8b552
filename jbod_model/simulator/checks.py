"""The KIP-858 TLA+ model's properties (``Kip858.tla``, ../shared/reference/kip858-tla.md), checked on a simulated
cluster whose physical state is known.

The TLA+ model has one broker, one controller, no restarts and no intra-broker moves; here they are checked over
whole clusters with all of those:

* **UpdatesOnlyOfflinePartitions** (safety, after every controller write): the controller removes a broker from a
  partition's ISR or leadership only when that replica is really unavailable — its broker fenced, shutting down
  or gone, or its log on a failed disk (or absent). Exempt: a replica whose broker has an assignment queued or in
  flight, or a move running, for it — the broker knows the metadata is stale and is correcting it; that window is
  the one KIP-858 says it "minimizes" for moves, and the TLA+ model has no moves.
* **BrokerHoldsPartitionsInASingleLogDir** (safety): no partition has a current log in two dirs of one broker, and
  a future log is never in the current log's dir.
* **AlwaysEventuallyAnyOfflineReplicaGetsLeadershipUpdate** (liveness, at quiescence): a replica whose log is on a
  failed disk of a running broker is neither leader nor in the ISR — except as the last ISR member of a leaderless
  partition, which Kafka keeps when ELR is off (I15).
* **AlwaysEventuallyControllerKnowsAssignments** (liveness, at quiescence): for every replica not in flight, the
  metadata's directory is the dir that holds its log.
* **AlwaysEventuallyControllerKnowsAllOfflineLogDirs** (liveness, at quiescence): each running broker's
  registration lists exactly its online dirs.
* **AlwaysEventuallyBrokerCatchesUpWithMetadataAssignments** (liveness, at quiescence): every running broker has
  published the latest metadata.
* **GroundTruthMatchesReplicaView** (not in TLA+): the ground-truth timeline and Kafka's offline-replica
  definition agree on every replica (``jbod_model.simulator.truth.compare_with_image``).

The liveness properties are "always eventually": they are checked once the simulation is quiescent (nothing
queued, nothing in flight, every running broker unfenced and caught up).

Two Kafka 3.9 behaviours break some of these on purpose-built schedules; :func:`explain` recognises them in a run's
log so that property runs can tell them from anything new (the scenarios ``unfenced-onto-failed-dir`` and
``fast-restart-with-new-disk`` reproduce them):

* :attr:`KnownIssue.UNFENCE_ONTO_OFFLINE_DIR` — semantics quirk §6.4: one heartbeat both unfences a broker and
  reports an offline dir, and both record groups are computed from the pre-heartbeat state, so the unfence
  election can make the broker leader of a leaderless partition on the dir it is reporting offline, while the
  offline-dir handling (seeing no leader to move) writes nothing: I14, I16 and the leadership-update liveness
  property break for that partition until its leader changes.
* :attr:`KnownIssue.ASSIGNMENT_ELECTS_ONTO_OFFLINE_DIR` — the same staleness in ``handleAssignReplicasToDirs``:
  the directory PartitionChangeRecord of a leaderless partition also runs an election (R6.4) and may pick the
  requesting broker, while the ISR/leader records for an assignment into an offline dir are built from the
  pre-request state (R6.5), see no leader, and write nothing: I14/I17 break for that partition.
* :attr:`KnownIssue.ASSIGNMENT_BEFORE_REGISTRATION` — AssignmentsManager (3.9) sends the broker epoch it finds in
  its metadata image; a new incarnation whose registration is held up (old session still live, controller
  overloaded) sends under the previous incarnation's epoch, and the controller accepts an assignment to a disk the
  broker has not registered yet (I21).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from jbod_model.controller.context import TopicIdPartition
from jbod_model.image import MetadataImage
from jbod_model.invariants import Severity, Violation
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import (
    NO_LEADER,
    NO_LEADER_CHANGE,
    BrokerRegistrationChangeRecord,
    BrokerRegistrationFencingChange,
    PartitionChangeRecord,
    RemoveTopicRecord,
)
from jbod_model.simulator.broker import SimBroker
from jbod_model.simulator.history import DirectoryInfo
from jbod_model.simulator.truth import OfflineInterval, compare_with_image
from jbod_model.uuid import Uuid


class TlaProperty(StrEnum):
    """The properties checked, named as in ``Kip858.tla``."""

    UPDATES_ONLY_OFFLINE_PARTITIONS = "UpdatesOnlyOfflinePartitions"
    BROKER_HOLDS_PARTITIONS_IN_A_SINGLE_LOG_DIR = "BrokerHoldsPartitionsInASingleLogDir"
    ANY_OFFLINE_REPLICA_GETS_LEADERSHIP_UPDATE = "AlwaysEventuallyAnyOfflineReplicaGetsLeadershipUpdate"
    CONTROLLER_KNOWS_ASSIGNMENTS = "AlwaysEventuallyControllerKnowsAssignments"
    CONTROLLER_KNOWS_ALL_OFFLINE_LOG_DIRS = "AlwaysEventuallyControllerKnowsAllOfflineLogDirs"
    BROKER_CATCHES_UP_WITH_METADATA = "AlwaysEventuallyBrokerCatchesUpWithMetadataAssignments"
    GROUND_TRUTH_MATCHES_REPLICA_VIEW = "GroundTruthMatchesReplicaView"

    @property
    def is_safety(self) -> bool:
        return self in (TlaProperty.UPDATES_ONLY_OFFLINE_PARTITIONS,
                        TlaProperty.BROKER_HOLDS_PARTITIONS_IN_A_SINGLE_LOG_DIR)


@dataclass(frozen=True, slots=True)
class PropertyViolation:
    """One breach of a property, with where and when."""

    property: TlaProperty
    message: str
    time_ms: int | None = None
    offset: int | None = None
    topic_id: Uuid | None = None
    partition_id: int | None = None
    broker_id: int | None = None
    directory: Uuid | None = None

    def __str__(self) -> str:
        when = f" at {self.time_ms} ms (offset {self.offset})" if self.time_ms is not None else ""
        return f"{self.property.value}{when}: {self.message}"


def _where(tp: TopicIdPartition) -> str:
    return f"{tp.topic_id}-{tp.partition_id}"


def demoted_replicas(before: MetadataImage, after: MetadataImage,
                     partitions: Iterable[TopicIdPartition]) -> list[tuple[TopicIdPartition, int]]:
    """(partition, broker) pairs a write removed from the ISR or from leadership while leaving them replicas."""
    out: list[tuple[TopicIdPartition, int]] = []
    for tp in partitions:
        old = before.topics.get_partition(tp.topic_id, tp.partition_id)
        new = after.topics.get_partition(tp.topic_id, tp.partition_id)
        if old is None or new is None:
            continue
        for r in new.replicas:
            if (r in old.isr and r not in new.isr) or (old.leader == r and new.leader != r):
                out.append((tp, r))
    return out


def check_updates_only_offline(before: MetadataImage, after: MetadataImage, partitions: Iterable[TopicIdPartition],
                               brokers: Mapping[int, SimBroker], *, time_ms: int,
                               offset: int) -> list[PropertyViolation]:
    """UpdatesOnlyOfflinePartitions for one controller write (see the module docstring)."""
    out: list[PropertyViolation] = []
    for tp, r in demoted_replicas(before, after, partitions):
        reg = after.cluster.brokers.get(r)
        if reg is None or reg.fenced or reg.in_controlled_shutdown:
            continue  # fencing, shutdown and unregistration demote on purpose
        broker = brokers.get(r)
        if broker is None or not broker.hosts_online_log(tp) or broker.in_flight(tp):
            continue
        log = broker.logs[tp]
        out.append(PropertyViolation(
            TlaProperty.UPDATES_ONLY_OFFLINE_PARTITIONS,
            f"broker {r} was removed from the ISR/leadership of {_where(tp)} although its replica is healthy in "
            f"{log.directory.name} ({log.directory.directory_id}) and nothing is in flight",
            time_ms=time_ms, offset=offset, topic_id=tp.topic_id, partition_id=tp.partition_id, broker_id=r,
            directory=log.directory.directory_id))
    return out


def check_single_log_dir(brokers: Mapping[int, SimBroker], *, time_ms: int | None = None,
                         offset: int | None = None) -> list[PropertyViolation]:
    """BrokerHoldsPartitionsInASingleLogDir over every broker's disks (running or not: disks outlive processes)."""
    out: list[PropertyViolation] = []
    for broker in brokers.values():
        seen: dict[TopicIdPartition, str] = {}
        for d in broker.data_dirs:
            for tp in d.logs:
                if tp in seen:
                    out.append(PropertyViolation(
                        TlaProperty.BROKER_HOLDS_PARTITIONS_IN_A_SINGLE_LOG_DIR,
                        f"broker {broker.id} holds {_where(tp)} in {seen[tp]} and {d.name}", time_ms=time_ms,
                        offset=offset, topic_id=tp.topic_id, partition_id=tp.partition_id, broker_id=broker.id))
                seen[tp] = d.name
            for tp in d.futures & d.logs:
                out.append(PropertyViolation(
                    TlaProperty.BROKER_HOLDS_PARTITIONS_IN_A_SINGLE_LOG_DIR,
                    f"broker {broker.id} has the future log of {_where(tp)} in its current dir {d.name}",
                    time_ms=time_ms, offset=offset, topic_id=tp.topic_id, partition_id=tp.partition_id,
                    broker_id=broker.id))
    return out


def check_quiescent(image: MetadataImage, brokers: Mapping[int, SimBroker],
                    timeline: Iterable[OfflineInterval] | None, *, last_offset: int,
                    time_ms: int | None = None) -> list[PropertyViolation]:
    """The liveness properties and (with a ``timeline``) the ground-truth comparison, for a quiescent cluster."""
    out: list[PropertyViolation] = []
    dirs_supported = image.metadata_version.is_directory_assignment_supported()

    def violation(prop: TlaProperty, message: str, tp: TopicIdPartition | None = None,
                  broker_id: int | None = None, directory: Uuid | None = None) -> None:
        out.append(PropertyViolation(prop, message, time_ms=time_ms, offset=last_offset,
                                     topic_id=tp.topic_id if tp else None, partition_id=tp.partition_id if tp else None,
                                     broker_id=broker_id, directory=directory))

    for broker in sorted(brokers.values(), key=lambda b: b.id):
        if not broker.running:
            continue
        b = broker.id
        if broker.applied_offset < last_offset:
            violation(TlaProperty.BROKER_CATCHES_UP_WITH_METADATA,
                      f"broker {b} published offset {broker.applied_offset}, the log ends at {last_offset}",
                      broker_id=b)
        for tp in sorted(broker.logs, key=lambda t: (str(t.topic_id), t.partition_id)):
            log = broker.logs[tp]
            part = image.topics.get_partition(tp.topic_id, tp.partition_id)
            if part is None or b not in part.replicas:
                continue
            assigned = part.directories[part.replicas.index(b)]
            if log.directory.failed:
                last_member = part.isr == (b,) and part.leader == NO_LEADER
                if part.leader == b or (b in part.isr and not last_member):
                    violation(TlaProperty.ANY_OFFLINE_REPLICA_GETS_LEADERSHIP_UPDATE,
                              f"broker {b}'s replica of {_where(tp)} is on failed dir {log.directory.name} but the "
                              f"broker is still {'leader' if part.leader == b else 'in the ISR'} "
                              f"(leader {part.leader}, ISR {list(part.isr)})", tp, b, log.directory.directory_id)
            if dirs_supported and not broker.zk_mode and not broker.in_flight(tp) \
                    and assigned != log.directory.directory_id:
                violation(TlaProperty.CONTROLLER_KNOWS_ASSIGNMENTS,
                          f"broker {b} holds {_where(tp)} in {log.directory.name} ({log.directory.directory_id}) "
                          f"but the metadata says {assigned}", tp, b, assigned)
        reg = image.cluster.brokers.get(b)
        if dirs_supported and reg is not None and reg.incarnation_id == broker.incarnation_id:
            online = {d.directory_id for d in broker.online_data_dirs()}
            if set(reg.directories) != online:
                violation(TlaProperty.CONTROLLER_KNOWS_ALL_OFFLINE_LOG_DIRS,
                          f"broker {b} has online dirs {sorted(str(d) for d in online)} but its registration lists "
                          f"{sorted(str(d) for d in reg.directories)}", broker_id=b)
    out.extend(check_single_log_dir(brokers, time_ms=time_ms, offset=last_offset))
    for mismatch in compare_with_image(timeline, image) if timeline is not None else ():
        out.append(PropertyViolation(TlaProperty.GROUND_TRUTH_MATCHES_REPLICA_VIEW, mismatch.describe(),
                                     time_ms=time_ms, offset=last_offset, topic_id=mismatch.topic_id,
                                     partition_id=mismatch.partition, broker_id=mismatch.broker_id))
    return out


class KnownIssue(StrEnum):
    """Kafka behaviours that break a property or invariant on purpose-built schedules (see the module docstring)."""

    UNFENCE_ONTO_OFFLINE_DIR = "UNFENCE_ONTO_OFFLINE_DIR"
    ASSIGNMENT_ELECTS_ONTO_OFFLINE_DIR = "ASSIGNMENT_ELECTS_ONTO_OFFLINE_DIR"
    ASSIGNMENT_BEFORE_REGISTRATION = "ASSIGNMENT_BEFORE_REGISTRATION"


@dataclass(frozen=True, slots=True)
class Explanation:
    """A run's findings split into those a known issue explains and the rest."""

    unexplained: tuple[PropertyViolation, ...]
    unexplained_invariants: tuple[Violation, ...]
    known: Counter[KnownIssue] = field(default_factory=Counter)

    @property
    def clean(self) -> bool:
        return not self.unexplained and not self.unexplained_invariants


ReplicaKey = tuple[Uuid, int, int]


Window = tuple[int, int | None, KnownIssue]


def stale_election_windows(log: Sequence[LogEntry]) -> dict[ReplicaKey, list[Window]]:
    """Where a batch elected a broker whose directory for the partition the same batch takes offline (the two
    known issues above): (topic, partition, broker) → offset windows from that batch until a later record moved
    the leadership (or removed the topic), with the issue."""
    windows: dict[ReplicaKey, list[Window]] = {}
    open_keys: dict[tuple[Uuid, int], tuple[ReplicaKey, int]] = {}
    batch: list[LogEntry] = []

    def close_batch() -> None:
        unfenced = {r.broker_id for r in (e.record for e in batch) if isinstance(r, BrokerRegistrationChangeRecord)
                    and r.fenced == BrokerRegistrationFencingChange.UNFENCE}
        shrunk = {r.broker_id for r in (e.record for e in batch) if isinstance(r, BrokerRegistrationChangeRecord)
                  and r.log_dirs}
        for e in batch:
            r = e.record
            if not isinstance(r, PartitionChangeRecord) or r.leader < 0:
                continue
            if r.leader in unfenced & shrunk:
                issue = KnownIssue.UNFENCE_ONTO_OFFLINE_DIR
            elif r.directories is not None and r.replicas is None and r.isr is None:
                # Only AssignReplicasToDirs writes a directory change that elects without touching replicas/ISR.
                issue = KnownIssue.ASSIGNMENT_ELECTS_ONTO_OFFLINE_DIR
            else:
                continue
            key = (r.topic_id, r.partition_id, r.leader)
            windows.setdefault(key, []).append((e.offset, None, issue))
            open_keys[(r.topic_id, r.partition_id)] = (key, len(windows[key]) - 1)

    for entry in log:
        if batch and entry.batch_base_offset != batch[0].batch_base_offset:
            close_batch()
            batch = []
        batch.append(entry)
        record = entry.record
        moved: list[tuple[Uuid, int]] = []
        if isinstance(record, PartitionChangeRecord) and record.leader != NO_LEADER_CHANGE:
            moved = [(record.topic_id, record.partition_id)]
        elif isinstance(record, RemoveTopicRecord):
            moved = [k for k in open_keys if k[0] == record.topic_id]
        for tp in moved:
            opened = open_keys.pop(tp, None)
            if opened is not None:
                key, index = opened
                start, _, issue = windows[key][index]
                windows[key][index] = (start, entry.offset, issue)
    if batch:
        close_batch()
    return windows


def explain(log: Sequence[LogEntry], directories: Iterable[DirectoryInfo], violations: Iterable[PropertyViolation],
            invariant_violations: Iterable[Violation]) -> Explanation:
    """Split a run's findings into those explained by a :class:`KnownIssue` and the rest (ERROR invariants only)."""
    windows = stale_election_windows(log)
    own_disks = {(d.broker_id, d.directory_id) for d in directories}
    known: Counter[KnownIssue] = Counter()

    def issue_at(topic_id: Uuid | None, partition_id: int | None, broker_id: int | None,
                 offset: int | None) -> KnownIssue | None:
        if topic_id is None or partition_id is None or broker_id is None or offset is None:
            return None
        for start, end, issue in windows.get((topic_id, partition_id, broker_id), ()):
            if start <= offset and (end is None or offset < end):
                return issue
        return None

    unexplained: list[PropertyViolation] = []
    for v in violations:
        issue = issue_at(v.topic_id, v.partition_id, v.broker_id, v.offset)
        if v.property is TlaProperty.ANY_OFFLINE_REPLICA_GETS_LEADERSHIP_UPDATE and issue is not None:
            known[issue] += 1
        else:
            unexplained.append(v)
    unexplained_invariants: list[Violation] = []
    for iv in invariant_violations:
        if iv.severity is not Severity.ERROR:
            continue
        issue = issue_at(iv.topic_id, iv.partition_id, iv.broker_id, iv.offset)
        if iv.invariant in ("I14", "I16", "I17") and issue is not None:
            known[issue] += 1
        elif iv.invariant == "I21" and (iv.broker_id, iv.directory) in own_disks:
            # The broker named one of its own disks before the controller knew it.
            known[KnownIssue.ASSIGNMENT_BEFORE_REGISTRATION] += 1
        else:
            unexplained_invariants.append(iv)
    return Explanation(tuple(unexplained), tuple(unexplained_invariants), known)
