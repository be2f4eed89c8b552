"""The churn workload: a JBOD cluster's metadata log over hours of operation, written fast at any size.

:func:`churn_log` (in memory) and :func:`churn_run` (streamed to a :class:`~jbod_model.simulator.output.SimulationSink`,
e.g. the files of ``jbod simulate --workload churn``) write the KRaft metadata log of a cluster over time —
metadata.version 3.9-IV0, brokers registering with several log directories and unfencing, topics whose replicas are
placed on directories, then a random sequence of operations: ISR changes, directory failures, fencing and
unfencing, moves of replicas to another directory, topic deletions (and re-creations), configs, metadata
transactions and the NoOpRecords that make up most of a real log — and, when :class:`ChurnSpec` asks for them,
broker restarts (a failed disk replaced, or removed with its replicas reported LOST) and partition reassignments.
Every record replays without a fault, and the log upholds every invariant of ``jbod_model.invariants`` that Kafka's
controller upholds. The same spec gives the same log, and more operations extend it (an incremental benchmark's
"1 % more" is the same spec with more operations).

Unlike :class:`~jbod_model.simulator.cluster.Simulation` there is no clock, no network and no broker process: the
workload plays the brokers' side directly, one request at a time, so it runs at the speed of the reference
controller (a 200k-partition cluster with a million records in minutes). It does not compute a ground truth
timeline. Whatever Kafka's controller decides is decided by the reference controller (``jbod_model.controller``),
which the workload drives as brokers would and whose records it writes as they come:

* unfencing — a broker's heartbeat once it caught up (``processBrokerHeartbeat`` → ``handleBrokerUnfenced``: the
  BrokerRegistrationChangeRecord, then leaderless partitions may elect it);
* fencing — the broker's session expires (``maybeFenceOneStaleBroker`` → ``handleBrokerFenced``): in the same batch
  and *before* the BrokerRegistrationChangeRecord that fences it, PartitionChangeRecords move its leaderships away
  and take it out of every ISR (the last ISR member stays, leaderless);
* a directory failure — the broker's heartbeat reports it offline (``handleDirectoriesOffline``: leadership and ISR
  moves of the partitions in it, then the change record listing the remaining online directories);
* ISR changes — a leader's AlterPartition (shrink by a follower, or expand back to the followers that can fetch);
* moves to another directory, and replicas re-created on a replacement disk — the broker's AssignReplicasToDirs;
* LOST — a broker restarted without a failed disk (taken out of ``log.dirs``) assigns the replicas it held there to
  ``DirectoryId.LOST`` (an offline directory it can no longer name): the controller persists it and keeps the
  replicas out of ISR and leadership (semantics §4.5: LOST is never online). Kafka 3.9's broker re-creates such
  replicas on its other disks instead (scenario ``disk-removed-with-replicas``); the workload reports them LOST so
  that logs carry the reserved id as other brokers' versions and tools write it;
* reassignments — AlterPartitionReassignments (``alterPartitionReassignments``: adding/removing replicas), the new
  replica's AssignReplicasToDirs, then the leader's AlterPartition that completes it; some stay in flight.

The workload writes itself only what the reference controller does not model or what a broker chooses: broker
registrations, topic creation, topic deletion (RemoveTopicRecord), configs, transactions and NoOpRecords. A topic is
created as a manual assignment (``kafka-topics --replica-assignment``): replicas drawn at random with an active
leader first, ISR = the active replicas (``createTopic``). One simplification: each replica is placed directly in a
random online directory of its broker, as if its AssignReplicasToDirs were folded into the creation (Kafka writes
UNASSIGNED for a multi-directory broker, then a PartitionChangeRecord once the broker reports the directory).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from jbod_model.controller import ControllerContext, ReferenceController, handle_request
from jbod_model.controller.context import TopicIdPartition
from jbod_model.controller.messages import (
    AlterPartitionBrokerState,
    AlterPartitionPartitionData,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionTopicData,
    ApiRequest,
    AssignReplicasToDirsDirectory,
    AssignReplicasToDirsPartition,
    AssignReplicasToDirsRequest,
    AssignReplicasToDirsResponse,
    AssignReplicasToDirsTopic,
    BrokerHeartbeatRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from jbod_model.directory_id import LOST, UNASSIGNED, is_reserved
from jbod_model.errors_codes import Errors
from jbod_model.image import MetadataImage
from jbod_model.metadata_version import FEATURE_NAME, LATEST_PRODUCTION, MetadataVersion
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import (
    NO_LEADER,
    BeginTransactionRecord,
    BrokerEndpoint,
    ConfigRecord,
    EndTransactionRecord,
    FeatureLevelRecord,
    NoOpRecord,
    OpaqueRecord,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from jbod_model.simulator.config import MAX_ASSIGNMENTS_PER_REQUEST, SimulationConfig
from jbod_model.simulator.history import DirectoryInfo, DirectoryStatus, Happening, HappeningKind
from jbod_model.simulator.output import MemorySink, SimulationResult, SimulationSink, SimulationStats
from jbod_model.stream import RequestEntry
from jbod_model.uuid import Uuid

_TOPIC_CONFIG = 2
#: The leader epoch of every batch (one controller leader for the whole log).
_LEADER_EPOCH = 1


@dataclass(frozen=True, slots=True)
class ChurnSpec:
    """The shape of a churn workload: the cluster, then ``operations`` random operations."""

    brokers: int = 3
    dirs_per_broker: int = 2
    topics: int = 4
    partitions_per_topic: int = 3
    #: The total number of partitions, spread over ``topics`` as evenly as possible; None means
    #: ``topics × partitions_per_topic``.
    partitions: int | None = None
    replication_factor: int = 2
    #: Operations after the cluster is built (each writes one or a few records; a fencing or a disk failure writes
    #: one per partition it touches).
    operations: int = 40
    #: The share of NoOpRecords among operations (real logs are > 95 % NoOps).
    noop_share: float = 0.3
    #: The share of the other operations that fence a broker (its session expires) or, when one is fenced, unfence it
    #: again (its heartbeat). Fencing writes a PartitionChangeRecord per partition whose ISR the broker is in, so
    #: None (the default) scales it to the cluster: 2/13 on small clusters, less as brokers host more partitions,
    #: about one fencing record per operation on average whatever the size.
    fence_share: float | None = None
    #: Weight of broker restarts among the other operations, where the eleven base operations weigh 1 each
    #: (0: none, and the log is the same as without this field).
    restart_weight: float = 0.0
    #: The share of restarts of a broker with failed disks that take those disks out of ``log.dirs`` (their replicas
    #: become LOST) rather than replace them with new disks (their replicas are re-created there).
    lost_share: float = 0.5
    #: Weight of partition reassignments among the other operations (like ``restart_weight``).
    reassign_weight: float = 0.0
    #: Weight of a topic deletion (and the creation of a topic of the same size) among the other operations (1, like
    #: the other base operations, unless set). Large clusters want it rare: each re-creation writes a
    #: PartitionRecord per partition.
    delete_weight: float = 1.0
    seed: int = 7
    #: The metadata.version the log is bootstrapped at (a feature level; the controller's default, 3.9-IV0). From 4.0
    #: (ELR supported) the partition records are written at version 2, as Kafka 4.x writes them.
    metadata_version: int = LATEST_PRODUCTION.feature_level
    start_time_ms: int = 1_700_000_000_000
    #: The offset of the first record (1 when offset 0 holds the quorum's LEADER_CHANGE control batch).
    first_offset: int = 0

    def topic_sizes(self) -> list[int]:
        """The partition count of each initial topic."""
        if self.partitions is None:
            return [self.partitions_per_topic] * self.topics
        topics = max(1, self.topics)
        return [self.partitions // topics + (1 if i < self.partitions % topics else 0) for i in range(topics)]


def _uuid(rng: random.Random) -> Uuid:
    while True:
        candidate = Uuid(rng.getrandbits(64) - (1 << 63), rng.getrandbits(64) - (1 << 63))
        if not is_reserved(candidate) and not str(candidate).startswith("-"):
            return candidate


def _partition_errors(response: object) -> list[int]:
    """The refusals in an AlterPartition, AssignReplicasToDirs or AlterPartitionReassignments response: its non-zero
    per-partition error codes, except an AlterPartition's NEW_LEADER_ELECTED — the ISR that completes a
    reassignment removing the leader is written all the same (``ReplicationControlManager.alterPartition``)."""
    if isinstance(response, AlterPartitionResponse):
        return [p.error_code for t in response.topics for p in t.partitions
                if p.error_code and p.error_code != Errors.NEW_LEADER_ELECTED]
    if isinstance(response, AssignReplicasToDirsResponse):
        return [p.error_code for d in response.directories for t in d.topics for p in t.partitions if p.error_code]
    if isinstance(response, AlterPartitionReassignmentsResponse):
        return [response.error_code] if response.error_code else [
            p.error_code for t in response.responses for p in t.partitions if p.error_code]
    return []


class _Churn:
    """Writes the log through a :class:`ReferenceController`, which holds the state written so far (image and
    heartbeat sessions): the workload's own records are replayed into it, the controller's are written by it."""

    def __init__(self, spec: ChurnSpec, sink: SimulationSink) -> None:
        self.spec = spec
        self.sink = sink
        self.rng = random.Random(spec.seed)
        self.controller = ReferenceController(next_offset=spec.first_offset)
        self.time = spec.start_time_ms
        #: The live partitions in creation order (random picks must not depend on hash order); a topic's partitions
        #: are contiguous, ``topic_order`` and ``topic_sizes`` say where.
        self.keys: list[tuple[Uuid, int]] = []
        self.topic_order: list[Uuid] = []
        self.topic_sizes: list[int] = []
        #: The directories each broker registered with at its last start.
        self.registered_dirs: dict[int, tuple[Uuid, ...]] = {}
        #: Every directory a broker ever registered, and the disks taken out or replaced.
        self.all_dirs: dict[int, list[Uuid]] = {}
        self.retired: dict[Uuid, DirectoryStatus] = {}
        #: Each disk's name (``data-N``): a replacement disk takes the name of the disk it replaced.
        self.dir_names: dict[Uuid, str] = {}
        self.happenings: list[Happening] = []
        self.records: Counter[str] = Counter()
        self.requests: Counter[str] = Counter()
        self.batches = 0
        #: The version of the PartitionRecords the workload writes itself (the controller picks its own alike).
        self.record_version = MetadataVersion(spec.metadata_version).partition_record_version()

    @property
    def image(self) -> MetadataImage:
        return self.controller.image

    def _sent(self, entries: Sequence[LogEntry], *, outside: bool) -> None:
        self.sink.on_batch(entries, outside=outside)
        self.batches += 1
        for e in entries:
            r = e.record
            self.records[r.type_name if isinstance(r, OpaqueRecord) else r.TYPE_NAME] += 1

    def emit(self, records: Sequence[Record]) -> None:
        """One write of the workload's own records: they land in one batch with one append time."""
        self.time += self.rng.randint(1, 500)
        base = self.controller.next_offset
        entries = []
        for i, record in enumerate(records):
            entry = LogEntry(offset=base + i, record=record, batch_base_offset=base, leader_epoch=_LEADER_EPOCH,
                             timestamp=self.time)
            self.controller.replay(entry)
            entries.append(entry)
        self._sent(entries, outside=True)

    def commit(self, written: Sequence[LogEntry], *, outside: bool = True) -> None:
        """One write of the reference controller (already at the next offsets, one batch, replayed by it): stamped
        with the batch's append time and leader epoch."""
        if not written:
            return
        self.time += self.rng.randint(1, 500)
        self._sent([replace(e, leader_epoch=_LEADER_EPOCH, timestamp=self.time, source=None) for e in written],
                   outside=outside)

    def request(self, request: ApiRequest) -> None:
        """A broker's request to the controller; its records (if any) are one write. The workload only sends
        requests the controller accepts: a refusal (top level or per partition) is a bug here."""
        offset = self.controller.next_offset
        handled = self.controller.handle_request(request)
        assert handled.error is None and not _partition_errors(handled.response), \
            f"{type(request).__name__} refused: {handled.response}"
        self.sink.on_request(RequestEntry(offset=offset, request=request))
        self.requests[request.TYPE_NAME] += 1
        self.commit(handled.entries, outside=False)

    def happened(self, kind: HappeningKind, broker_id: int | None, detail: str = "",
                 directory: Uuid | None = None) -> None:
        self.happenings.append(Happening(self.time - self.spec.start_time_ms, self.controller.next_offset, kind,
                                         broker_id, directory, detail))

    def heartbeat(self, broker_id: int, offline_dirs: tuple[Uuid, ...] = ()) -> None:
        """A heartbeat from a broker that has caught up with the log (so a fenced one is unfenced)."""
        reg = self.image.cluster.brokers[broker_id]
        self.request(BrokerHeartbeatRequest(broker_id=broker_id, broker_epoch=reg.epoch,
                                            current_metadata_offset=self.controller.next_offset - 1,
                                            offline_log_dirs=offline_dirs))

    def isr_data(self, ctx: ControllerContext, key: tuple[Uuid, int], *,
                 shrink: bool) -> AlterPartitionPartitionData | None:
        """A leader's AlterPartition data for one partition: drop a random follower from the ISR, or add back every
        follower that can fetch (active, its replica's directory online). None when the partition has no leader or
        nothing to change."""
        part = ctx.image.topics.get_partition(*key)
        if part is None or part.leader == NO_LEADER:
            return None
        if shrink:
            followers = [b for b in part.isr if b != part.leader]
            if not followers:
                return None
            dropped = self.rng.choice(followers)
            isr = [b for b in part.isr if b != dropped]
        else:
            isr = [b for b in part.replicas
                   if b in part.isr or (ctx.is_active(b) and ctx.has_online_dir(b, part.directory(b)))]
            if len(isr) == len(part.isr):
                return None
        brokers = ctx.image.cluster.brokers
        return AlterPartitionPartitionData(
            partition_index=key[1], leader_epoch=part.leader_epoch, partition_epoch=part.partition_epoch,
            leader_recovery_state=part.leader_recovery_state,
            new_isr_with_epochs=tuple(AlterPartitionBrokerState(broker_id=b, broker_epoch=brokers[b].epoch)
                                      for b in isr))

    def alter_isr(self, ctx: ControllerContext, key: tuple[Uuid, int], *,
                  shrink: bool) -> AlterPartitionRequest | None:
        """The leader's AlterPartition for one partition (see :meth:`isr_data`)."""
        data = self.isr_data(ctx, key, shrink=shrink)
        if data is None:
            return None
        part = ctx.image.topics.get_partition(*key)
        assert part is not None
        leader = part.leader
        return AlterPartitionRequest(broker_id=leader, broker_epoch=ctx.image.cluster.brokers[leader].epoch,
                                     topics=(AlterPartitionTopicData(topic_id=key[0], partitions=(data,)),))

    def expand_isrs(self, keys: Sequence[tuple[Uuid, int]]) -> None:
        """Each leader's AlterPartition adding back the followers that can fetch, for ``keys`` (one request per
        leader, partitions grouped by topic): replicas re-created or added come back into the ISR."""
        ctx = self.controller.context()
        by_leader: dict[int, dict[Uuid, list[AlterPartitionPartitionData]]] = {}
        for key in keys:
            data = self.isr_data(ctx, key, shrink=False)
            if data is None:
                continue
            part = ctx.image.topics.get_partition(*key)
            assert part is not None
            by_leader.setdefault(part.leader, {}).setdefault(key[0], []).append(data)
        for leader in sorted(by_leader):
            topics = tuple(AlterPartitionTopicData(topic_id=t, partitions=tuple(parts))
                           for t, parts in by_leader[leader].items())
            self.request(AlterPartitionRequest(broker_id=leader,
                                               broker_epoch=self.image.cluster.brokers[leader].epoch, topics=topics))

    def assign(self, broker: int, placements: Sequence[tuple[tuple[Uuid, int], Uuid]]) -> None:
        """The broker's AssignReplicasToDirs for ``placements`` (partition → directory), at most
        ``MAX_ASSIGNMENTS_PER_REQUEST`` per request as the AssignmentsManager batches them."""
        for start in range(0, len(placements), MAX_ASSIGNMENTS_PER_REQUEST):
            chunk = placements[start:start + MAX_ASSIGNMENTS_PER_REQUEST]
            by_dir: dict[Uuid, dict[Uuid, list[int]]] = {}
            for (topic_id, pid), directory in chunk:
                by_dir.setdefault(directory, {}).setdefault(topic_id, []).append(pid)
            directories = tuple(AssignReplicasToDirsDirectory(id=d, topics=tuple(
                AssignReplicasToDirsTopic(topic_id=t, partitions=tuple(AssignReplicasToDirsPartition(partition_index=p)
                                                                       for p in pids))
                for t, pids in topics.items())) for d, topics in by_dir.items())
            self.request(AssignReplicasToDirsRequest(broker_id=broker,
                                                     broker_epoch=self.image.cluster.brokers[broker].epoch,
                                                     directories=directories))

    # -- operations ------------------------------------------------------------------------------------------

    def register(self, broker_id: int, dirs: tuple[Uuid, ...] | None = None) -> None:
        """A broker (re)starts: RegisterBrokerRecord with a new incarnation and epoch, fenced until its heartbeat."""
        epoch = self.controller.next_offset - self.spec.first_offset + 100
        if dirs is None:
            dirs = tuple(sorted(_uuid(self.rng) for _ in range(self.spec.dirs_per_broker)))
        self.registered_dirs[broker_id] = dirs
        known = self.all_dirs.setdefault(broker_id, [])
        for d in dirs:
            if d not in known:
                known.append(d)
                self.dir_names.setdefault(d, f"data-{len(known) - 1}")
        endpoint = BrokerEndpoint(name="PLAINTEXT", host=f"broker-{broker_id}", port=9092, security_protocol=0)
        self.emit([RegisterBrokerRecord(version=3, broker_id=broker_id, broker_epoch=epoch,
                                        incarnation_id=_uuid(self.rng), end_points=(endpoint,), fenced=True,
                                        rack=f"rack-{broker_id % 3}", log_dirs=dirs)])

    def unfence(self, broker_id: int) -> None:
        self.heartbeat(broker_id)

    def create_topic(self, index: int, size: int) -> None:
        spec, rng = self.spec, self.rng
        ctx = self.controller.context()
        brokers = sorted(ctx.image.cluster.brokers)
        active = [b for b in brokers if ctx.is_active(b)]
        if not active:
            return  # every broker fenced: Kafka refuses the creation (INVALID_REPLICA_ASSIGNMENT)
        topic_id = _uuid(rng)
        name = f"topic-{index}"
        self.topic_order.append(topic_id)
        self.topic_sizes.append(size)
        records: list[Record] = [TopicRecord(name=name, topic_id=topic_id)]
        cluster = ctx.image.cluster.brokers
        for pid in range(size):
            leader = rng.choice(active)
            others = [b for b in brokers if b != leader]
            replicas = [leader, *rng.sample(others, min(spec.replication_factor, len(brokers)) - 1)]
            isr = [b for b in replicas if ctx.is_active(b)]
            dirs = [rng.choice(cluster[b].directories) for b in replicas]
            self.keys.append((topic_id, pid))
            records.append(PartitionRecord(version=self.record_version, partition_id=pid, topic_id=topic_id,
                                           replicas=tuple(replicas), isr=tuple(isr), leader=leader, leader_epoch=0,
                                           partition_epoch=0, directories=tuple(dirs)))
        # Kafka writes a topic and its partitions atomically; large topics span several batches.
        for chunk_start in range(0, len(records), 500):
            self.emit(records[chunk_start:chunk_start + 500])

    def isr_change(self) -> None:
        if not self.keys:
            return
        key = self.rng.choice(self.keys)
        request = self.alter_isr(self.controller.context(), key, shrink=self.rng.random() < 0.5)
        if request is not None:
            self.request(request)

    def fail_directory(self) -> None:
        # A running broker reports it; one with a single directory left would halt instead.
        brokers = self.image.cluster.brokers
        candidates = [b for b, reg in brokers.items() if not reg.fenced and len(reg.directories) > 1]
        if not candidates:
            return
        broker = self.rng.choice(sorted(candidates))
        failed = self.rng.choice(brokers[broker].directories)
        # OfflineLogDirs is cumulative since the broker started: every directory it registered and lost.
        online = brokers[broker].directories
        self.happened(HappeningKind.DIR_FAILED, broker, "the disk failed; the broker reports it offline", failed)
        self.heartbeat(broker, tuple(d for d in self.registered_dirs[broker] if d not in online or d == failed))

    def fence_or_unfence(self) -> None:
        """A broker bounces: while one is fenced it comes back (its heartbeat unfences it), else a random broker's
        session expires. So at most one broker is fenced at a time, as in a rolling restart."""
        brokers = self.image.cluster.brokers
        fenced = sorted(b for b, reg in brokers.items() if reg.fenced)
        if fenced:
            self.unfence(fenced[0])
        else:
            self.commit(self.controller.fence_stale_broker(self.rng.choice(sorted(brokers))))

    def reassign_directory(self) -> None:
        if not self.keys:
            return
        key = self.rng.choice(self.keys)
        part = self.image.topics.get_partition(*key)
        assert part is not None
        brokers = self.image.cluster.brokers
        # An intra-broker move (AlterReplicaLogDirs) of a healthy replica, reported by the running broker once the
        # copy caught up. A replica on a failed directory has nothing to copy from.
        movers = [b for b in part.replicas if not brokers[b].fenced and len(brokers[b].directories) > 1
                  and brokers[b].has_online_dir(part.directory(b))]
        if not movers:
            return
        broker = movers[0]
        target = self.rng.choice([d for d in brokers[broker].directories if d != part.directory(broker)])
        topic = AssignReplicasToDirsTopic(topic_id=key[0],
                                          partitions=(AssignReplicasToDirsPartition(partition_index=key[1]),))
        self.request(AssignReplicasToDirsRequest(broker_id=broker, broker_epoch=brokers[broker].epoch,
                                                 directories=(AssignReplicasToDirsDirectory(id=target,
                                                                                            topics=(topic,)),)))

    def delete_topic(self) -> int | None:
        """Delete a random topic (never the last one); returns its partition count, None when nothing was
        deleted."""
        if len(self.topic_order) <= 1:
            return None
        position = self.rng.randrange(len(self.topic_order))
        topic_id = self.topic_order.pop(position)
        size = self.topic_sizes.pop(position)
        name = self.image.topics.by_id[topic_id].name
        # By position (a topic's partitions are contiguous): comparing Uuids over every partition of a large cluster
        # would dominate the workload's time.
        start = sum(self.topic_sizes[:position])
        del self.keys[start:start + size]
        self.emit([ConfigRecord(resource_type=_TOPIC_CONFIG, resource_name=name, name="retention.ms",
                                value="1000")])
        self.emit([RemoveTopicRecord(topic_id=topic_id)])
        return size

    def transaction(self) -> None:
        """ISR changes of the first partitions in one metadata transaction (each computed from the state before
        it: they touch different partitions), with a config change so it is never empty."""
        if not self.keys:
            return
        ctx = self.controller.context()
        records: list[Record] = [BeginTransactionRecord(name="synthetic")]
        for key in self.keys[:3]:
            request = self.alter_isr(ctx, key, shrink=False)
            if request is None:
                request = self.alter_isr(ctx, key, shrink=True)
            if request is not None:
                result = handle_request(ctx, request)
                assert result.error is None and not _partition_errors(result.response), \
                    f"AlterPartition refused: {result.response}"
                records.extend(result.records)
        name = ctx.image.topics.by_id[self.keys[0][0]].name
        records.append(ConfigRecord(resource_type=_TOPIC_CONFIG, resource_name=name, name="segment.ms",
                                    value=str(self.rng.randint(1, 10**6))))
        records.append(EndTransactionRecord())
        # Kafka may split a transaction over several batches: write it as two.
        half = len(records) // 2
        self.emit(records[:half])
        self.emit(records[half:])

    def restart(self) -> None:
        """A broker restarts, preferably one that lost disks (that is why operators restart them): its session
        expires while it is down, it registers again with its disks — each failed one replaced by a new disk, or
        (``lost_share``) taken out of ``log.dirs`` — and unfences once caught up. Replicas the metadata still places
        on a failed disk are then re-created on a new disk (AssignReplicasToDirs, then the leaders take them back
        into the ISR) or, with the disk gone, reported LOST."""
        rng = self.rng
        brokers = self.image.cluster.brokers
        damaged = sorted(b for b, reg in brokers.items() if len(reg.directories) < len(self.registered_dirs[b]))
        broker = rng.choice(damaged) if damaged else rng.choice(sorted(brokers))
        if not brokers[broker].fenced:
            self.commit(self.controller.fence_stale_broker(broker))
        online = self.image.cluster.brokers[broker].directories
        failed = [d for d in self.registered_dirs[broker] if d not in online]
        lose = bool(failed) and rng.random() < self.spec.lost_share
        new = [] if lose else [_uuid(rng) for _ in failed]
        for old, replacement in zip(failed, new, strict=False):
            self.dir_names[replacement] = self.dir_names[old]
        for d in failed:
            self.retired[d] = DirectoryStatus.REMOVED if lose else DirectoryStatus.REPLACED
            self.happened(HappeningKind.DIR_REMOVED if lose else HappeningKind.DIR_REPLACED, broker, "", d)
        self.register(broker, tuple(sorted((*online, *new))))
        self.happened(HappeningKind.BROKER_REREGISTERED, broker, f"restarted with {len(online) + len(new)} disk(s)")
        self.unfence(broker)
        if not failed:
            return
        gone = set(failed)
        stranded: list[tuple[Uuid, int]] = []
        for topic, pid, part in self.image.topics.partitions():
            if broker in part.replicas and part.directory(broker) in gone:
                stranded.append((topic.id, pid))
        stranded.sort(key=lambda k: TopicIdPartition(*k).sort_key)
        if lose:
            self.assign(broker, [(key, LOST) for key in stranded])
            return
        self.assign(broker, [(key, rng.choice(new)) for key in stranded])
        self.expand_isrs(stranded)

    def reassign(self) -> None:
        """An operator's reassignment of a random partition: one replica replaced by another broker
        (AlterPartitionReassignments). Most complete: the new replica's broker places it on a disk and the leader
        takes it into the ISR, which ends the reassignment; the rest stay in flight."""
        rng = self.rng
        if not self.keys:
            return
        key = rng.choice(self.keys)
        part = self.image.topics.get_partition(*key)
        assert part is not None
        if part.adding_replicas or part.removing_replicas:
            return
        ctx = self.controller.context()
        candidates = [b for b in sorted(self.image.cluster.brokers) if b not in part.replicas and ctx.is_active(b)]
        if not candidates:
            return
        out, added = rng.choice(part.replicas), rng.choice(candidates)
        target = tuple(added if r == out else r for r in part.replicas)
        name = self.image.topics.by_id[key[0]].name
        self.request(AlterPartitionReassignmentsRequest(topics=(ReassignableTopic(name=name, partitions=(
            ReassignablePartition(partition_index=key[1], replicas=target),)),)))
        if rng.random() < 0.2:
            return  # still copying
        part = self.image.topics.get_partition(*key)
        assert part is not None
        if added in part.replicas and part.directory(added) == UNASSIGNED:
            self.assign(added, [(key, rng.choice(self.image.cluster.brokers[added].directories))])
        self.expand_isrs([key])


def _directories(churn: _Churn) -> tuple[DirectoryInfo, ...]:
    """Every disk the run used, named ``data-N`` per broker (a replacement takes its failed disk's name and path)."""
    out: list[DirectoryInfo] = []
    brokers = churn.image.cluster.brokers
    for broker_id in sorted(churn.all_dirs):
        reg = brokers.get(broker_id)
        for d in churn.all_dirs[broker_id]:
            status = churn.retired.get(d)
            if status is None:
                status = DirectoryStatus.ONLINE if reg is not None and d in reg.directories else DirectoryStatus.FAILED
            name = churn.dir_names[d]
            out.append(DirectoryInfo(broker_id=broker_id, name=name, path=f"broker-{broker_id}/{name}",
                                     directory_id=d, holds_metadata=False, is_data_dir=True, status=status))
    return tuple(out)


def churn_run(spec: ChurnSpec = ChurnSpec(), sink: SimulationSink | None = None, *, name: str = "churn",
              progress: Callable[[int], None] | None = None) -> SimulationResult:
    """Run the workload (see the module docstring), handing every request and batch to ``sink`` (kept in memory
    when None: the result's ``log``). ``progress(operations_done)`` is called every 10,000 operations."""
    memory = MemorySink() if sink is None else None
    churn = _Churn(spec, sink if sink is not None else memory or MemorySink())
    churn.emit([FeatureLevelRecord(name=FEATURE_NAME, feature_level=spec.metadata_version)])
    for b in range(1, spec.brokers + 1):
        churn.register(b)
    for b in range(1, spec.brokers + 1):
        churn.unfence(b)
    for t, size in enumerate(spec.topic_sizes()):
        churn.create_topic(t, size)
    ops: list[Callable[[], object]] = [churn.isr_change] * 6 + [churn.reassign_directory] * 2 + [
        churn.fail_directory, churn.delete_topic, churn.transaction]
    fence_share = spec.fence_share
    if fence_share is None:
        # A fence writes about RF·P/B records (every partition whose ISR the broker is in), half the bounces fence.
        partitions = max(1, sum(spec.topic_sizes()) * spec.replication_factor)
        fence_share = min(2 / 13, 2 * spec.brokers / partitions)
    extra = spec.restart_weight + spec.reassign_weight
    weighted = bool(extra) or spec.delete_weight != 1.0
    # With other weights the operation is drawn by weight; the eleven equally likely base operations are drawn as
    # before, so that specs without them generate the same log as before.
    choices = [*ops, churn.restart, churn.reassign]
    weights = [spec.delete_weight if op == churn.delete_topic else 1.0 for op in ops] + [
        spec.restart_weight, spec.reassign_weight]
    topic_index = len(spec.topic_sizes())
    for done in range(spec.operations):
        if progress is not None and done % 10_000 == 0 and done:
            progress(done)
        if churn.rng.random() < spec.noop_share:
            churn.emit([NoOpRecord()])
            continue
        if churn.rng.random() < fence_share:
            churn.fence_or_unfence()
            continue
        op = churn.rng.choices(choices, weights)[0] if weighted else churn.rng.choice(ops)
        if op == churn.delete_topic:
            deleted = churn.delete_topic()
            churn.create_topic(topic_index, deleted if deleted is not None else spec.partitions_per_topic)
            topic_index += 1
        else:
            op()
    image = churn.image
    # Drawn from its own generator: the log's random choices stay those of the seed alone.
    cluster_id = str(_uuid(random.Random(spec.seed * 7919 + 1)))
    config = SimulationConfig.uniform(brokers=spec.brokers, dirs=spec.dirs_per_broker,
                                      start_time_ms=spec.start_time_ms, cluster_id=cluster_id, track_truth=False,
                                      monitor=False)
    return SimulationResult(
        name=name, description=f"churn workload: {spec.brokers} brokers × {spec.dirs_per_broker} dirs, "
                               f"{sum(spec.topic_sizes())} partitions, RF {spec.replication_factor}, "
                               f"{spec.operations} operations",
        seed=spec.seed, config=config, cluster_id=cluster_id, image=image,
        end_time_ms=churn.time - spec.start_time_ms, quiescent=False,
        stream=tuple(memory.stream) if memory is not None else None,
        log=tuple(memory.log) if memory is not None else None, timeline=(), directories=_directories(churn),
        happenings=tuple(churn.happenings), violations=(), invariant_violations=(),
        stats=SimulationStats(requests=dict(sorted(churn.requests.items())),
                              records=dict(sorted(churn.records.items())), batches=churn.batches,
                              last_offset=churn.controller.next_offset - 1, events=0))


def churn_log(spec: ChurnSpec = ChurnSpec()) -> list[LogEntry]:
    """The entries of one churn workload, in memory (see the module docstring)."""
    result = churn_run(spec)
    assert result.log is not None
    return list(result.log)
