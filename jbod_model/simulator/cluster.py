"""The cluster simulator: brokers (``jbod_model.simulator.broker``) driving the reference controller on a simulated
clock.

:class:`Simulation` is both the world and the script's handle on it. It owns

* the **clock and event queue** (``events.EventQueue``) and one seeded ``random.Random``: a run is a function of
  its configuration, its seed and the script;
* the **controller** (:class:`~jbod_model.controller.ReferenceController`, started after the quorum's LEADER_CHANGE
  record at offset 0, bootstrapped with a FeatureLevelRecord), plus what the controller does not model because it
  needs a clock: heartbeat session expiry (``fence_stale_broker`` after ``broker.session.timeout.ms`` without a
  heartbeat), expired requests when the controller is overloaded (heartbeats then only refresh liveness, R5.6), and
  the effects of RPCs it does not model, written as records the way Kafka's controller would (topic deletion's
  RemoveTopicRecord, an UpdateFeatures FeatureLevelRecord, ZK-migration registrations and bulk migration);
* the **network** between brokers and controller (latency, isolation, overload);
* the **partition leaders' ISR expansion** (``Partition.maybeExpandIsr`` → AlterPartition), so replicas that come
  back or are added by a reassignment rejoin the ISR;
* the **outputs**: every handled request and committed batch go to a sink; the ground truth of which replica is
  physically offline (``truth.GroundTruth``); the narrative (``history.Happening``); and, when monitoring, the
  TLA+ safety properties and the named invariants (``jbod_model.invariants``) after every write.

A script calls actions (``create_topic``, ``fail_dir``, ``restart_broker`` …) that take effect now, and advances the
clock with ``run_for`` / ``run_until`` / ``run_until_quiescent``. What is not modelled is listed in docs/simulator.md.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from enum import StrEnum

from jbod_model.controller.context import ControllerConfig, TopicIdPartition
from jbod_model.controller.controller import ReferenceController, write_records
from jbod_model.controller.messages import (
    AlterPartitionBrokerState,
    AlterPartitionPartitionData,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    AlterPartitionRequest,
    AlterPartitionTopicData,
    ApiRequest,
    ApiResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
    ReassignablePartition,
    ReassignableTopic,
)
from jbod_model.errors import JbodError
from jbod_model.errors_codes import Errors
from jbod_model.image import EMPTY_IMAGE, MetadataImage
from jbod_model.invariants import InvariantTracker, Severity, Violation
from jbod_model.metadata_version import FEATURE_NAME, MetadataVersion
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import (
    NO_LEADER,
    BeginTransactionRecord,
    BrokerEndpoint,
    BrokerFeature,
    EndTransactionRecord,
    FeatureLevelRecord,
    NoOpRecord,
    OpaqueRecord,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    ZkMigrationStateRecord,
)
from jbod_model.simulator.broker import (
    BrokerState,
    MoveState,
    ResponseHandler,
    SimBroker,
    SimLogDir,
    StopCause,
    tp_order,
)
from jbod_model.simulator.checks import (
    PropertyViolation,
    check_quiescent,
    check_single_log_dir,
    check_updates_only_offline,
)
from jbod_model.simulator.config import (
    BrokerSpec,
    MetadataDirPlacement,
    SimulationConfig,
    Timings,
    random_directory_id,
    random_uuid,
)
from jbod_model.simulator.events import Callback, EventQueue, Timer
from jbod_model.simulator.history import DirectoryInfo, DirectoryStatus, Happening, HappeningKind
from jbod_model.simulator.output import MemorySink, SimulationResult, SimulationSink, SimulationStats
from jbod_model.simulator.truth import GroundTruth, PhysicalStatus, TruthReason
from jbod_model.stream import RequestEntry
from jbod_model.uuid import Uuid

#: ``ZkMigrationState`` wire values.
ZK_MIGRATION_PRE_MIGRATION = 2
ZK_MIGRATION_MIGRATION = 1
#: The name Kafka's KRaftMigrationDriver gives the bulk-migration metadata transaction.
BULK_MIGRATION_TRANSACTION = "Bulk Migration"


class SimulationError(JbodError):
    """A script asked for something the simulated cluster refused (e.g. a CreateTopics error)."""


class FailedDirPolicy(StrEnum):
    """What a restart does with a disk that failed (``log.dirs`` as the operator left it)."""

    #: The disk stays in ``log.dirs`` but cannot be read: it is offline from startup, left out of the
    #: registration, and its replicas stay offline rather than being re-created elsewhere (KAFKA-16234).
    KEEP = "keep"
    #: The disk is taken out of ``log.dirs``: no offline dir, so its replicas are re-created on the others.
    REMOVE = "remove"
    #: A new, freshly formatted disk (new ``directory.id``) replaces it at the same path.
    REPLACE = "replace"


class Simulation:
    """A simulated KRaft cluster (see the module docstring)."""

    def __init__(self, config: SimulationConfig, seed: int = 0, *, sink: SimulationSink | None = None,
                 name: str = "custom", description: str = "") -> None:
        self.config = config
        self.seed = seed
        self.name = name
        self.description = description
        self._rng = random.Random(seed)
        self.queue = EventQueue()
        self.cluster_id = config.cluster_id or str(random_uuid(self._rng))
        self._memory = sink is None
        self.sink: SimulationSink = sink if sink is not None else MemorySink()
        self.controller = ReferenceController(EMPTY_IMAGE, ControllerConfig(
            cluster_id=self.cluster_id, unclean_leader_election_enable=config.unclean_leader_election_enable,
            default_num_partitions=config.default_partitions,
            default_replication_factor=config.default_replication_factor),
            # Offset 0 holds the quorum leader's LEADER_CHANGE control record.
            next_offset=1)
        self.brokers: dict[int, SimBroker] = {}
        self._retired: list[DirectoryInfo] = []
        self._last_contact: dict[int, int] = {}
        self._overloaded: dict[int | None, int] = {}
        self._isolated: dict[int, int] = {}
        self._under_replicated: set[TopicIdPartition] = set()
        self._alter_inflight: set[TopicIdPartition] = set()
        self._topic_names: dict[Uuid, str] = {}
        self._happenings: list[Happening] = []
        self._requests: dict[str, int] = {}
        self._records: dict[str, int] = {}
        self._batches = 0
        self._last_meaningful_offset = 0
        self.truth: GroundTruth | None = GroundTruth() if config.track_truth else None
        #: Cached "some broker is down, lost logs or has a failed disk" (None = recompute).
        self._abnormal: bool | None = None
        self._tracker: InvariantTracker | None = InvariantTracker(EMPTY_IMAGE) if config.monitor else None
        self._violations: list[PropertyViolation] = []
        self._invariant_violations: list[Violation] = []
        for spec in config.brokers:
            self._add_broker(spec)
        # The first controller's bootstrap: the finalized metadata.version.
        self._write_outside([FeatureLevelRecord(name=FEATURE_NAME, feature_level=config.metadata_version)])
        t = config.timings
        self.queue.after(t.session_check_interval_ms, self._check_sessions)
        self.queue.after(t.isr_check_interval_ms, self._check_isr)
        if config.noop_interval_ms:
            self.queue.after(config.noop_interval_ms, self._write_noop)

    # -- BrokerHost ----------------------------------------------------------------------------------------------

    @property
    def now_ms(self) -> int:
        return self.queue.now_ms

    @property
    def rng(self) -> random.Random:
        return self._rng

    @property
    def timings(self) -> Timings:
        return self.config.timings

    @property
    def max_supported_metadata_version(self) -> int:
        return self.config.max_supported_metadata_version

    def after(self, delay_ms: int, callback: Callback) -> Timer:
        return self.queue.after(delay_ms, callback)

    def latest_metadata(self) -> tuple[MetadataImage, int]:
        return self.controller.image, self.controller.next_offset - 1

    def can_fetch(self, broker_id: int) -> bool:
        return not self.is_isolated(broker_id)

    def happened(self, kind: HappeningKind, broker_id: int | None, detail: str = "",
                 directory: Uuid | None = None) -> None:
        self._happenings.append(Happening(self.now_ms, self.controller.next_offset, kind, broker_id, directory,
                                          detail))

    def replicas_changed(self, broker_id: int, partitions: Iterable[TopicIdPartition]) -> None:
        if self.truth is None or not self._truth_needed():
            return
        image = self.controller.image
        for tp in partitions:
            self._truth_update(image, tp, broker_id)

    def broker_process_changed(self, broker: SimBroker) -> None:
        """A process started or stopped: every replica it holds may have changed status."""
        self._abnormal = None
        if self.truth is None:
            return
        image = self.controller.image
        for tp in self._replicas_of(image, broker):
            self._truth_update(image, tp, broker.id)

    def send(self, broker_id: int, request: ApiRequest, on_response: ResponseHandler) -> None:
        """A broker → controller RPC: delivered after the network latency, unless the broker is isolated (lost) or
        the controller is overloaded for it (expired in the queue: a heartbeat still refreshes liveness)."""
        t = self.timings
        latency = t.draw(self._rng, t.rpc_latency_ms)
        self.queue.after(latency, lambda: self._arrive(broker_id, request, on_response, latency))

    # -- views ---------------------------------------------------------------------------------------------------

    @property
    def image(self) -> MetadataImage:
        return self.controller.image

    @property
    def last_offset(self) -> int:
        return self.controller.next_offset - 1

    def broker(self, broker_id: int) -> SimBroker:
        try:
            return self.brokers[broker_id]
        except KeyError:
            raise SimulationError(f"no broker {broker_id}; brokers are {sorted(self.brokers)}") from None

    def topic_id(self, name: str) -> Uuid:
        topic_id = self.image.topics.by_name.get(name)
        if topic_id is None:
            raise SimulationError(f"no topic named {name!r}")
        return topic_id

    def partition_key(self, topic: str, partition: int) -> TopicIdPartition:
        return TopicIdPartition(self.topic_id(topic), partition)

    def replica_dir(self, broker_id: int, topic: str, partition: int) -> str:
        """The name of the dir holding ``broker_id``'s current log of ``topic``-``partition``."""
        log = self.broker(broker_id).logs.get(self.partition_key(topic, partition))
        if log is None:
            raise SimulationError(f"broker {broker_id} has no log for {topic}-{partition}")
        return log.directory.name

    def other_dir(self, broker_id: int, topic: str, partition: int) -> str:
        """An online data dir of ``broker_id`` other than the one holding ``topic``-``partition``."""
        current = self.replica_dir(broker_id, topic, partition)
        for d in self.broker(broker_id).online_data_dirs():
            if d.name != current:
                return d.name
        raise SimulationError(f"broker {broker_id} has no other online dir than {current}")

    def move_state(self, broker_id: int, topic: str, partition: int) -> MoveState | None:
        """The state of ``broker_id``'s move of ``topic``-``partition``, None when none runs."""
        move = self.broker(broker_id).moves.get(self.partition_key(topic, partition))
        return None if move is None else move.state

    def replicas_of(self, topic: str, partition: int) -> tuple[int, ...]:
        part = self.image.topics.get_partition(self.topic_id(topic), partition)
        if part is None:
            raise SimulationError(f"no partition {topic}-{partition}")
        return part.replicas

    @property
    def happenings(self) -> list[Happening]:
        return list(self._happenings)

    @property
    def violations(self) -> list[PropertyViolation]:
        return list(self._violations)

    @property
    def invariant_violations(self) -> list[Violation]:
        return list(self._invariant_violations)

    # -- brokers and their disks ---------------------------------------------------------------------------------

    def _new_dir(self, broker_id: int, name: str, *, holds_metadata: bool = False,
                 is_data_dir: bool = True) -> SimLogDir:
        return SimLogDir(name=name, directory_id=random_directory_id(self._rng), holds_metadata=holds_metadata,
                         is_data_dir=is_data_dir)

    def _add_broker(self, spec: BrokerSpec) -> SimBroker:
        if spec.broker_id in self.brokers:
            raise SimulationError(f"broker {spec.broker_id} already exists")
        shared = spec.metadata_dir is MetadataDirPlacement.SHARED
        data = [self._new_dir(spec.broker_id, f"data-{i}", holds_metadata=shared and i == 0)
                for i in range(spec.dirs)]
        metadata = None if shared else self._new_dir(spec.broker_id, "metadata", holds_metadata=True,
                                                     is_data_dir=False)
        broker = SimBroker(spec, self, data, metadata)
        self.brokers[spec.broker_id] = broker
        return broker

    def add_broker(self, spec: BrokerSpec) -> SimBroker:
        """Add a broker (not started) to the cluster."""
        return self._add_broker(spec)

    def start_broker(self, broker_id: int, *, failed_dirs: FailedDirPolicy = FailedDirPolicy.KEEP,
                     add_dirs: int = 0, remove_dirs: Sequence[str] = (), zk_mode: bool = False) -> None:
        """Start ``broker_id``'s process with a new incarnation. Before it starts, failed disks are handled per
        ``failed_dirs``, the disks named in ``remove_dirs`` leave ``log.dirs`` (failed or not: removing a disk that
        still holds replicas, Strimzi #9640), and ``add_dirs`` new empty disks join it (a broker moving from one to
        several log dirs). ``zk_mode`` starts it as a ZooKeeper-mode broker in migration."""
        broker = self.broker(broker_id)
        if broker.running:
            raise SimulationError(f"broker {broker_id} is already running")
        for name in remove_dirs:
            d = broker.dir_by_name(name)
            if d not in broker.data_dirs:
                raise SimulationError(f"{name} is not one of broker {broker_id}'s log.dirs")
            self._retire(broker, d, DirectoryStatus.REMOVED)
            broker.data_dirs.remove(d)
            self.happened(HappeningKind.DIR_REMOVED, broker_id,
                          f"{d.name} removed from log.dirs with {len(d.logs)} replica(s) on it", d.directory_id)
        for i, d in enumerate(list(broker.data_dirs)):
            if not d.failed or failed_dirs is FailedDirPolicy.KEEP:
                continue
            self._retire(broker, d, DirectoryStatus.REPLACED if failed_dirs is FailedDirPolicy.REPLACE
                         else DirectoryStatus.REMOVED)
            if failed_dirs is FailedDirPolicy.REPLACE:
                new = self._new_dir(broker_id, d.name, holds_metadata=d.holds_metadata)
                broker.data_dirs[i] = new
                self.happened(HappeningKind.DIR_REPLACED, broker_id, f"{d.name}: new disk {new.directory_id} "
                                                                     f"replaces {d.directory_id}", new.directory_id)
            else:
                broker.data_dirs.remove(d)
                self.happened(HappeningKind.DIR_REMOVED, broker_id, f"{d.name} removed from log.dirs",
                              d.directory_id)
        meta = broker.metadata_dir
        if meta is not None and meta.failed and failed_dirs is not FailedDirPolicy.KEEP:
            self._retire(broker, meta, DirectoryStatus.REPLACED)
            broker.metadata_dir = self._new_dir(broker_id, meta.name, holds_metadata=True, is_data_dir=False)
            self.happened(HappeningKind.DIR_REPLACED, broker_id, f"{meta.name}: new metadata disk",
                          broker.metadata_dir.directory_id)
        taken = {d.name for d in broker.data_dirs} | {d.name for d in self._retired if d.broker_id == broker_id}
        for _ in range(add_dirs):
            n = 0
            while f"data-{n}" in taken:
                n += 1
            taken.add(f"data-{n}")
            new = self._new_dir(broker_id, f"data-{n}")
            broker.data_dirs.append(new)
            self.happened(HappeningKind.DIR_ADDED, broker_id, f"{new.name} added to log.dirs", new.directory_id)
        if not broker.data_dirs:
            raise SimulationError(f"broker {broker_id} has no log dir left to start with")
        broker.start(random_uuid(self._rng), zk_mode=zk_mode)

    def _retire(self, broker: SimBroker, d: SimLogDir, status: DirectoryStatus) -> None:
        self._retired.append(DirectoryInfo(broker_id=broker.id, name=d.name, path=f"broker-{broker.id}/{d.name}",
                                           directory_id=d.directory_id, holds_metadata=d.holds_metadata,
                                           is_data_dir=d.is_data_dir, status=status, failed_at_ms=d.failed_at_ms))

    def start_brokers(self, broker_ids: Iterable[int] | None = None, *, zk_mode: bool = False) -> None:
        """Start several brokers (all, by default)."""
        for broker_id in sorted(self.brokers if broker_ids is None else broker_ids):
            self.start_broker(broker_id, zk_mode=zk_mode)

    def stop_broker(self, broker_id: int, *, clean: bool = True) -> None:
        """A controlled shutdown (``clean``) or a crash (``kill -9``)."""
        broker = self.broker(broker_id)
        if clean:
            broker.begin_controlled_shutdown()
        else:
            broker.stop(StopCause.CRASHED)

    def restart_broker(self, broker_id: int, *, clean: bool = True, downtime_ms: int = 1000,
                       failed_dirs: FailedDirPolicy = FailedDirPolicy.KEEP, add_dirs: int = 0,
                       remove_dirs: Sequence[str] = (), zk_mode: bool = False) -> None:
        """Stop (controlled or crash), wait for the process to end, stay down ``downtime_ms``, start again."""
        broker = self.broker(broker_id)
        if broker.running:
            self.stop_broker(broker_id, clean=clean)
            limit = self.timings.controlled_shutdown_timeout_ms + 1000
            if not self.run_until(lambda: not broker.running, timeout_ms=limit):
                raise SimulationError(f"broker {broker_id} did not stop within {limit} ms")
        self.run_for(downtime_ms)
        self.start_broker(broker_id, failed_dirs=failed_dirs, add_dirs=add_dirs, remove_dirs=remove_dirs,
                          zk_mode=zk_mode)

    def fail_dir(self, broker_id: int, dir_name: str) -> Uuid:
        """The disk ``dir_name`` of ``broker_id`` fails now (an I/O error the LogDirFailureChannel reports).
        Returns its directory id."""
        broker = self.broker(broker_id)
        d = broker.dir_by_name(dir_name)
        if d.failed:
            return d.directory_id
        d.failed_at_ms = self.now_ms
        self._abnormal = None
        self.happened(HappeningKind.DIR_FAILED, broker_id,
                      f"{d.name} failed ({len(d.logs)} replica(s), {len(d.futures)} future replica(s))"
                      f"{'; it holds the metadata log' if d.holds_metadata else ''}", d.directory_id)
        if d.is_data_dir:
            broker.fail_dir(d)
        else:
            broker.fail_metadata_dir()
        self.replicas_changed(broker_id, list(d.logs))
        return d.directory_id

    def fail_metadata_dir(self, broker_id: int) -> Uuid:
        """The disk holding ``broker_id``'s metadata log fails (the dedicated one, or the first log dir)."""
        broker = self.broker(broker_id)
        d = broker.metadata_dir if broker.metadata_dir is not None else broker.data_dirs[0]
        return self.fail_dir(broker_id, d.name)

    # -- admin operations ----------------------------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int | None = None, replication_factor: int | None = None, *,
                     assignments: Sequence[Sequence[int]] | None = None,
                     configs: dict[str, str] | None = None) -> Uuid:
        """CreateTopics (``Admin.createTopics``): automatic placement with ``partitions`` × ``replication_factor``
        (cluster defaults when None), or a manual ``assignments`` list. Returns the topic id."""
        return self.create_topics([(name, partitions, replication_factor, assignments, configs)])[0]

    def create_topics(self, topics: Sequence[tuple[str, int | None, int | None, Sequence[Sequence[int]] | None,
                                                   dict[str, str] | None]]) -> list[Uuid]:
        """Several topics in one CreateTopics request: ``(name, partitions, rf, assignments, configs)`` each."""
        creatables = []
        for name, partitions, rf, assignments, configs in topics:
            manual = tuple(CreatableReplicaAssignment(partition_index=i, broker_ids=tuple(replicas))
                           for i, replicas in enumerate(assignments or ()))
            creatables.append(CreatableTopic(
                name=name, num_partitions=-1 if manual else (partitions if partitions is not None else -1),
                replication_factor=-1 if manual else (rf if rf is not None else -1),
                assignments=manual,
                configs=tuple(CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items())))
        response = self._handle(CreateTopicsRequest(topics=tuple(creatables)))
        assert isinstance(response, CreateTopicsResponse)
        ids = []
        for result in response.topics:
            if result.error_code != Errors.NONE:
                raise SimulationError(f"CreateTopics {result.name}: {Errors.from_code(result.error_code)} "
                                      f"{result.error_message or ''}".rstrip())
            ids.append(result.topic_id)
            self.happened(HappeningKind.TOPIC_CREATED, None,
                          f"{result.name} ({result.topic_id}): {result.num_partitions} partition(s) × "
                          f"{result.replication_factor}")
        return ids

    def create_partitions(self, topic: str, total: int) -> None:
        """CreatePartitions: grow ``topic`` to ``total`` partitions (automatic placement)."""
        response = self._handle(CreatePartitionsRequest(topics=(CreatePartitionsTopic(name=topic, count=total),)))
        assert isinstance(response, CreatePartitionsResponse)
        error = response.results[0].error_code
        if error != Errors.NONE:
            raise SimulationError(f"CreatePartitions {topic}: {Errors.from_code(error)} "
                                  f"{response.results[0].error_message or ''}".rstrip())
        self.happened(HappeningKind.PARTITIONS_CREATED, None, f"{topic} now has {total} partition(s)")

    def delete_topic(self, name: str) -> None:
        """DeleteTopics: the reference controller does not model the RPC, so its outcome — one RemoveTopicRecord
        (``ReplicationControlManager.deleteTopic``) — is committed as Kafka's controller would."""
        topic_id = self.topic_id(name)
        self._write_outside([RemoveTopicRecord(topic_id=topic_id)])
        self.happened(HappeningKind.TOPIC_DELETED, None, f"{name} ({topic_id})")

    def reassign(self, topic: str, partition: int, replicas: Sequence[int] | None) -> Errors:
        """AlterPartitionReassignments for one partition (``replicas`` None cancels). Returns the partition's
        error code; the leader completes it with AlterPartition once the new replicas caught up."""
        response = self._handle(AlterPartitionReassignmentsRequest(topics=(ReassignableTopic(name=topic, partitions=(
            ReassignablePartition(partition_index=partition,
                                  replicas=None if replicas is None else tuple(replicas)),)),)))
        assert isinstance(response, AlterPartitionReassignmentsResponse)
        code = response.responses[0].partitions[0].error_code if response.responses else response.error_code
        known = Errors.from_code(code)
        error = known if known is not None else Errors.UNKNOWN_SERVER_ERROR
        self.happened(HappeningKind.REASSIGNMENT_REQUESTED, None,
                      f"{topic}-{partition} -> {'cancel' if replicas is None else list(replicas)}: {error.name}")
        return error

    def alter_replica_log_dir(self, broker_id: int, topic: str, partition: int, dir_name: str) -> str | None:
        """AlterReplicaLogDirs, sent to the broker: move one replica to another of its dirs. Returns the broker's
        refusal, or None."""
        broker = self.broker(broker_id)
        return broker.alter_replica_log_dir(self.partition_key(topic, partition), broker.dir_by_name(dir_name))

    def set_metadata_version(self, level: int | str) -> None:
        """UpdateFeatures for metadata.version: the reference controller does not model the RPC, so its outcome —
        a FeatureLevelRecord — is committed as Kafka's controller would."""
        feature_level = MetadataVersion.from_name(level).feature_level if isinstance(level, str) else level
        before = self.image.metadata_version
        self._write_outside([FeatureLevelRecord(name=FEATURE_NAME, feature_level=feature_level)])
        self.happened(HappeningKind.METADATA_VERSION_CHANGED, None,
                      f"{before} -> {MetadataVersion(feature_level)}")

    def overload_controller(self, duration_ms: int, brokers: Iterable[int] | None = None) -> None:
        """For ``duration_ms``, requests from ``brokers`` (all when None) expire in the controller's queue: nothing
        is handled, but a heartbeat still refreshes the broker's liveness (R5.6), so it is not fenced — the
        situation KAFKA-15649's ``log.dir.failure.timeout.ms`` exists for."""
        until = self.now_ms + duration_ms
        targets: list[int | None] = [None] if brokers is None else list(brokers)
        for b in targets:
            self._overloaded[b] = max(self._overloaded.get(b, 0), until)
        who = "every broker" if brokers is None else str(sorted(b for b in targets if b is not None))
        self.happened(HappeningKind.CONTROLLER_OVERLOADED, None, f"requests from {who} expire until {until} ms")

    def isolate_broker(self, broker_id: int, duration_ms: int) -> None:
        """Cut ``broker_id`` off from the controller for ``duration_ms``: its requests are lost, it fetches no
        metadata; after ``broker.session.timeout.ms`` the controller fences it."""
        self._isolated[broker_id] = max(self._isolated.get(broker_id, 0), self.now_ms + duration_ms)
        self.happened(HappeningKind.BROKER_ISOLATED, broker_id, f"until {self.now_ms + duration_ms} ms")

    def note(self, text: str) -> None:
        """Add a line to the narrative (scenario commentary)."""
        self.happened(HappeningKind.NOTE, None, text)

    # -- ZooKeeper migration (KIP-866 + KIP-858) -----------------------------------------------------------------

    def begin_zk_migration(self) -> None:
        """The KRaft controller quorum starts in pre-migration mode (bootstrap ZkMigrationStateRecord)."""
        self._write_outside([ZkMigrationStateRecord(zk_migration_state=ZK_MIGRATION_PRE_MIGRATION)])
        self.happened(HappeningKind.ZK_MIGRATION, None, "controller quorum in PRE_MIGRATION")

    def migrate_zk_topics(self, topics: Sequence[tuple[str, int, int]]) -> list[Uuid]:
        """``KRaftMigrationDriver``'s bulk migration: the topics that lived in ZooKeeper (name, partitions, rf) are
        written as TopicRecords and PartitionRecords v0 — no Directories, so every replica reads as MIGRATING —
        in one "Bulk Migration" transaction; their logs already exist on the ZK-mode brokers (placed in the
        least-loaded dir, as LogManager did). Then the migration state becomes MIGRATION."""
        brokers = sorted(b for b, br in self.brokers.items() if br.running)
        if not brokers:
            raise SimulationError("no broker is running to host the migrated topics")
        records: list[Record] = [BeginTransactionRecord(name=BULK_MIGRATION_TRANSACTION)]
        placements: list[tuple[TopicIdPartition, tuple[int, ...]]] = []
        ids = []
        offset = self.controller.next_offset + 1
        start = 0
        for name, partitions, rf in topics:
            topic_id = self.controller.context().topic_id_factory(name, offset)
            ids.append(topic_id)
            records.append(TopicRecord(name=name, topic_id=topic_id))
            offset += 1
            for p in range(partitions):
                replicas = tuple(brokers[(start + p + i) % len(brokers)] for i in range(rf))
                records.append(PartitionRecord(version=0, partition_id=p, topic_id=topic_id, replicas=replicas,
                                               isr=replicas, leader=replicas[0], leader_epoch=0, partition_epoch=0))
                placements.append((TopicIdPartition(topic_id, p), replicas))
                offset += 1
            start += partitions
        records.append(EndTransactionRecord())
        for tp, replicas in placements:
            for b in replicas:
                broker = self.brokers[b]
                target = broker.least_loaded_dir()
                if target is not None and tp not in broker.logs:
                    broker.place_log(tp, target, caught_up=True)
        self._write_outside(records)
        self._write_outside([ZkMigrationStateRecord(zk_migration_state=ZK_MIGRATION_MIGRATION)])
        self.happened(HappeningKind.ZK_MIGRATION, None,
                      f"bulk migration of {len(topics)} topic(s), {len(placements)} partition(s); state MIGRATION")
        return ids

    def _register_zk_broker(self, request: BrokerRegistrationRequest) -> BrokerRegistrationResponse:
        """``ClusterControlManager.registerBroker`` for a migrating ZK broker with migration enabled. The reference
        controller runs without ``zookeeper.metadata.migration.enable`` and refuses it, so the record Kafka writes
        (a fenced registration with IsMigratingZkBroker and, at MV ≥ 3.7-IV2, its LogDirs) is committed here."""
        mv = self.image.metadata_version
        epoch = self.controller.next_offset
        record = RegisterBrokerRecord(
            version=mv.register_broker_record_version(), broker_id=request.broker_id,
            is_migrating_zk_broker=True, incarnation_id=request.incarnation_id, broker_epoch=epoch,
            end_points=tuple(BrokerEndpoint(name=lst.name, host=lst.host, port=lst.port,
                                            security_protocol=lst.security_protocol) for lst in request.listeners),
            features=tuple(BrokerFeature(name=f.name, min_supported_version=f.min_supported_version,
                                         max_supported_version=f.max_supported_version) for f in request.features),
            rack=request.rack, fenced=True, in_controlled_shutdown=False,
            log_dirs=request.log_dirs if mv.is_directory_assignment_supported() else ())
        self._write_outside([record])
        self._last_contact[request.broker_id] = self.now_ms
        return BrokerRegistrationResponse(version=request.version, error_code=Errors.NONE, broker_epoch=epoch)

    # -- running -------------------------------------------------------------------------------------------------

    def run_for(self, duration_ms: int) -> None:
        """Advance the clock by ``duration_ms``, running every event due."""
        self.queue.run_until(self.now_ms + max(duration_ms, 0))

    def run_until(self, predicate: Callable[[], bool], *, timeout_ms: int) -> bool:
        """Run until ``predicate`` holds (checked after every event) or ``timeout_ms`` passed; returns whether it
        held."""
        if predicate():
            return True
        return self.queue.run_until(self.now_ms + timeout_ms, predicate)

    def run_until_quiescent(self, *, timeout_ms: int = 600_000, step_ms: int = 250) -> bool:
        """Run until :meth:`is_quiescent` holds (checked every ``step_ms``) or ``timeout_ms`` passed."""
        deadline = self.now_ms + timeout_ms
        while self.now_ms < deadline:
            if self.is_quiescent():
                return True
            self.run_for(min(step_ms, deadline - self.now_ms))
        return self.is_quiescent()

    def is_quiescent(self) -> bool:
        """Nothing left to settle: no fault window open; every running broker unfenced, caught up with the
        metadata, with empty assignment queues, no moves, no unacknowledged offline dir; every stopped broker
        fenced; no follower waiting to rejoin an ISR."""
        now = self.now_ms
        if any(until > now for until in self._overloaded.values()) or any(
                until > now for until in self._isolated.values()):
            return False
        if self._alter_inflight:
            return False
        image = self.controller.image
        for broker in self.brokers.values():
            reg = image.cluster.brokers.get(broker.id)
            if not broker.running:
                if reg is not None and not reg.fenced:
                    return False
                continue
            if broker.state is not BrokerState.RUNNING or broker.dirty or broker.assignments.queued or broker.moves:
                return False
            if broker.applied_offset < self._last_meaningful_offset:
                return False
            if not all(broker.offline_dirs.values()):
                return False
            if reg is None or reg.fenced or reg.incarnation_id != broker.incarnation_id:
                return False
        return not self._isr_candidates(include_catching_up=True)

    def result(self, *, checks: bool = True) -> SimulationResult:
        """The run so far. When quiescent (and ``checks``), the end-of-run property checks are added to the
        violations."""
        image = self.controller.image
        quiescent = self.is_quiescent()
        timeline = self.truth.intervals() if self.truth is not None else ()
        violations = list(self._violations)
        if quiescent and checks:
            violations.extend(check_quiescent(image, self.brokers, timeline if self.truth is not None else None,
                                              last_offset=self.last_offset, time_ms=self.now_ms))
        memory = self.sink if isinstance(self.sink, MemorySink) and self._memory else None
        return SimulationResult(
            name=self.name, description=self.description, seed=self.seed, config=self.config,
            cluster_id=self.cluster_id, image=image, end_time_ms=self.now_ms, quiescent=quiescent,
            stream=tuple(memory.stream) if memory is not None else None,
            log=tuple(memory.log) if memory is not None else None,
            timeline=timeline, directories=self.directories(), happenings=tuple(self._happenings),
            violations=tuple(violations), invariant_violations=tuple(self._invariant_violations),
            stats=SimulationStats(requests=dict(sorted(self._requests.items())),
                                  records=dict(sorted(self._records.items())), batches=self._batches,
                                  last_offset=self.last_offset, events=self.queue.executed))

    def directories(self) -> tuple[DirectoryInfo, ...]:
        """Every simulated disk: those in use now, then the replaced and removed ones."""
        out: list[DirectoryInfo] = []
        for broker in sorted(self.brokers.values(), key=lambda b: b.id):
            for d in broker.all_dirs:
                out.append(DirectoryInfo(broker_id=broker.id, name=d.name, path=f"broker-{broker.id}/{d.name}",
                                         directory_id=d.directory_id, holds_metadata=d.holds_metadata,
                                         is_data_dir=d.is_data_dir,
                                         status=DirectoryStatus.FAILED if d.failed else DirectoryStatus.ONLINE,
                                         failed_at_ms=d.failed_at_ms))
        return tuple(out + self._retired)

    # -- the controller side -------------------------------------------------------------------------------------

    def is_isolated(self, broker_id: int) -> bool:
        """Whether ``broker_id`` is cut off from the controller right now."""
        return self._isolated.get(broker_id, -1) > self.now_ms

    def is_overloaded(self, broker_id: int) -> bool:
        """Whether requests from ``broker_id`` expire in the controller's queue right now."""
        now = self.now_ms
        return self._overloaded.get(broker_id, -1) > now or self._overloaded.get(None, -1) > now

    def _arrive(self, broker_id: int, request: ApiRequest, on_response: ResponseHandler, latency: int) -> None:
        t = self.timings
        if self.is_isolated(broker_id):
            self.queue.after(max(t.request_timeout_ms - latency, 0), lambda: on_response(None))
            return
        if self.is_overloaded(broker_id):
            if isinstance(request, BrokerHeartbeatRequest):
                # An expired heartbeat still counts as contact (BrokerHeartbeatManager.touch is skipped, liveness is
                # not): the broker stays unfenced while its offline dirs go unprocessed.
                self._last_contact[broker_id] = self.now_ms
            self.queue.after(max(t.request_timeout_ms - latency, 0), lambda: on_response(None))
            return
        response = self._handle(request)
        self.queue.after(t.draw(self._rng, t.rpc_latency_ms), lambda: on_response(response))

    def _handle(self, request: ApiRequest) -> ApiResponse:
        """Handle one request at the controller now: it goes to the stream, its records are committed as one
        batch."""
        if isinstance(request, BrokerRegistrationRequest) and request.is_migrating_zk_broker:
            return self._register_zk_broker(request)
        before = self.controller.image
        offset = self.controller.next_offset
        handled = self.controller.handle_request(request)
        self.sink.on_request(RequestEntry(offset=offset, request=request))
        self._requests[request.TYPE_NAME] = self._requests.get(request.TYPE_NAME, 0) + 1
        response = handled.response
        # A session is kept alive by processed heartbeats and started by a registration (BrokerHeartbeatManager).
        alive = (isinstance(request, (BrokerHeartbeatRequest, BrokerRegistrationRequest))
                 and isinstance(response, (BrokerHeartbeatResponse, BrokerRegistrationResponse))
                 and response.error_code == Errors.NONE)
        if alive:
            assert isinstance(request, (BrokerHeartbeatRequest, BrokerRegistrationRequest))
            self._last_contact[request.broker_id] = self.now_ms
        self._committed(handled.entries, before, outside=False)
        return response

    def _write_outside(self, records: list[Record]) -> list[LogEntry]:
        """Commit records no modelled request produced (bootstrap, deletions, feature updates, fencing on session
        expiry, ZK migration), as one batch."""
        before = self.controller.image
        entries = write_records(self.controller, records)
        self._committed(entries, before, outside=True)
        return entries

    def _write_noop(self) -> None:
        """``metadata.max.idle.interval.ms``: the active controller appends a NoOpRecord when idle."""
        self._write_outside([NoOpRecord()])
        if self.config.noop_interval_ms:
            self.queue.after(self.config.noop_interval_ms, self._write_noop)

    def _check_sessions(self) -> None:
        """``QuorumController``'s periodic check: fence every unfenced broker whose session expired
        (``maybeFenceOneStaleBroker``, repeated until none is left)."""
        timeout = self.timings.session_timeout_ms
        for broker_id, hb in sorted(self.controller.state.heartbeats.items()):
            if hb.fenced:
                continue
            if self.now_ms - self._last_contact.get(broker_id, self.now_ms) > timeout:
                before = self.controller.image
                entries = self.controller.fence_stale_broker(broker_id)
                self._committed(entries, before, outside=True)
                self.happened(HappeningKind.BROKER_SESSION_EXPIRED, broker_id,
                              f"no heartbeat for more than {timeout} ms: fenced")
        self.queue.after(self.timings.session_check_interval_ms, self._check_sessions)

    def _committed(self, entries: Sequence[LogEntry], before: MetadataImage, *, outside: bool) -> None:
        """Everything that follows one committed batch: stamp it (offsets, leader epoch, the clock), hand it to the
        sink, tell the brokers which partitions changed, keep the ISR bookkeeping, the truth and the monitors."""
        if not entries:
            return
        ts = self.config.start_time_ms + self.now_ms
        base = entries[0].offset
        epoch = self.config.leader_epoch
        stamped = [LogEntry(e.offset, e.record, base, epoch, ts) for e in entries]
        self.sink.on_batch(stamped, outside=outside)
        self._batches += 1
        after = self.controller.image
        touched: dict[TopicIdPartition, None] = {}
        meaningful = False
        for entry in entries:
            record = entry.record
            name = record.type_name if isinstance(record, OpaqueRecord) else record.TYPE_NAME
            self._records[name] = self._records.get(name, 0) + 1
            if isinstance(record, NoOpRecord):
                continue
            meaningful = True
            if isinstance(record, (PartitionRecord, PartitionChangeRecord)):
                touched[TopicIdPartition(record.topic_id, record.partition_id)] = None
            elif isinstance(record, RemoveTopicRecord):
                old = before.topics.by_id.get(record.topic_id)
                if old is not None:
                    for pid in old.partitions:
                        touched[TopicIdPartition(record.topic_id, pid)] = None
            elif isinstance(record, TopicRecord):
                self._topic_names[record.topic_id] = record.name
        if meaningful:
            self._last_meaningful_offset = entries[-1].offset
        brokers = self.brokers
        truth_keys: list[tuple[TopicIdPartition, int]] = []
        watch_truth = self.truth is not None and self._truth_needed()
        for tp in touched:
            old_part = before.topics.get_partition(tp.topic_id, tp.partition_id)
            new_part = after.topics.get_partition(tp.topic_id, tp.partition_id)
            replicas = set(old_part.replicas) if old_part is not None else set()
            if new_part is not None:
                replicas.update(new_part.replicas)
                if len(new_part.isr) < len(new_part.replicas):
                    self._under_replicated.add(tp)
                else:
                    self._under_replicated.discard(tp)
            else:
                self._under_replicated.discard(tp)
            for r in replicas:
                broker = brokers.get(r)
                if broker is not None and broker.running:
                    broker.dirty.add(tp)
                if watch_truth:
                    truth_keys.append((tp, r))
        for broker in brokers.values():
            if broker.running:
                broker.request_fetch()
        for tp, r in truth_keys:
            self._truth_update(after, tp, r)
        if self._tracker is not None:
            self._monitor(before, stamped, after, touched)

    def _monitor(self, before: MetadataImage, entries: list[LogEntry], after: MetadataImage,
                 touched: dict[TopicIdPartition, None]) -> None:
        assert self._tracker is not None
        now, offset = self.now_ms, entries[-1].offset
        self._invariant_violations.extend(self._tracker.observe_batch(entries, after))
        self._violations.extend(check_updates_only_offline(before, after, touched, self.brokers, time_ms=now,
                                                           offset=offset))
        self._violations.extend(check_single_log_dir(self.brokers, time_ms=now, offset=offset))

    # -- ISR expansion (Partition.maybeExpandIsr → AlterPartitionManager) ----------------------------------------

    def _isr_candidates(self, *, include_catching_up: bool = False
                        ) -> dict[int, list[tuple[TopicIdPartition, tuple[int, ...]]]]:
        """Per leader, the partitions it would ask to grow, with the new ISR. A leader (in its own metadata view,
        running, its log online) adds a replica that is caught up and, in its view, registered, unfenced and not
        shutting down (KIP-841). ``include_catching_up`` also counts followers that will qualify once caught up
        (for the quiescence check)."""
        out: dict[int, list[tuple[TopicIdPartition, tuple[int, ...]]]] = {}
        if not self._under_replicated:
            return out
        image = self.controller.image
        now = self.now_ms
        for tp in sorted(self._under_replicated - self._alter_inflight, key=tp_order):
            part = image.topics.get_partition(tp.topic_id, tp.partition_id)
            if part is None or part.leader == NO_LEADER:
                continue
            leader = self.brokers.get(part.leader)
            if leader is None or leader.state is not BrokerState.RUNNING or leader.image is None \
                    or self.is_isolated(leader.id) or not leader.hosts_online_log(tp):
                continue
            view = leader.image.topics.get_partition(tp.topic_id, tp.partition_id)
            if view is None or view.leader != leader.id:
                continue
            adds = []
            for r in view.replicas:
                if r in view.isr:
                    continue
                follower = self.brokers.get(r)
                reg = leader.image.cluster.brokers.get(r)
                if follower is None or reg is None or reg.fenced or reg.in_controlled_shutdown:
                    continue
                if follower.follower_caught_up(tp, now if not include_catching_up else 1 << 62):
                    adds.append(r)
            if adds:
                out.setdefault(leader.id, []).append((tp, (*view.isr, *adds)))
        return out

    def _check_isr(self) -> None:
        for leader_id, items in sorted(self._isr_candidates().items()):
            leader = self.brokers[leader_id]
            assert leader.image is not None
            view = leader.image
            by_topic: dict[Uuid, list[AlterPartitionPartitionData]] = {}
            for tp, new_isr in items:
                part = view.topics.get_partition(tp.topic_id, tp.partition_id)
                assert part is not None
                states = tuple(AlterPartitionBrokerState(
                    broker_id=b, broker_epoch=view.cluster.brokers[b].epoch if b in view.cluster.brokers else -1)
                    for b in new_isr)
                by_topic.setdefault(tp.topic_id, []).append(AlterPartitionPartitionData(
                    partition_index=tp.partition_id, leader_epoch=part.leader_epoch, new_isr_with_epochs=states,
                    leader_recovery_state=part.leader_recovery_state, partition_epoch=part.partition_epoch))
                self._alter_inflight.add(tp)
            reg = view.cluster.brokers.get(leader_id)
            request = AlterPartitionRequest(
                broker_id=leader_id, broker_epoch=reg.epoch if reg is not None else leader.epoch,
                topics=tuple(AlterPartitionTopicData(topic_id=tid, partitions=tuple(parts))
                             for tid, parts in by_topic.items()))
            keys = [tp for tp, _ in items]

            def done(_response: ApiResponse | None, keys: list[TopicIdPartition] = keys) -> None:
                # Errors (stale epochs, NEW_LEADER_ELECTED …) need no handling: the next check looks again.
                self._alter_inflight.difference_update(keys)

            self.send(leader_id, request, done)
        self.queue.after(self.timings.isr_check_interval_ms, self._check_isr)

    # -- ground truth --------------------------------------------------------------------------------------------

    def _truth_needed(self) -> bool:
        """Partition changes can only open or close an interval while something is down, lost or already open."""
        assert self.truth is not None
        if self.truth.open_count:
            return True
        if self._abnormal is None:
            self._abnormal = any(not b.running or b.lost or any(d.failed for d in b.data_dirs)
                                 for b in self.brokers.values())
        return self._abnormal

    def _replicas_of(self, image: MetadataImage, broker: SimBroker) -> set[TopicIdPartition]:
        keys: set[TopicIdPartition] = set(broker.logs) | set(broker.lost)
        for topic, pid, part in image.topics.partitions():
            if broker.id in part.replicas:
                keys.add(TopicIdPartition(topic.id, pid))
        return keys

    def physical_status(self, image: MetadataImage, tp: TopicIdPartition, broker_id: int) -> PhysicalStatus | None:
        """Why the replica is physically offline now, or None (online, being created, or not a replica)."""
        part = image.topics.get_partition(tp.topic_id, tp.partition_id)
        if part is None or broker_id not in part.replicas:
            return None
        broker = self.brokers.get(broker_id)
        if broker is None:
            return (TruthReason.BROKER_STOPPED, None)
        log = broker.logs.get(tp)
        lost = broker.lost.get(tp)
        directory = log.directory.directory_id if log is not None else lost
        if not broker.running:
            reason = TruthReason.BROKER_HALTED if broker.stop_cause.halted else TruthReason.BROKER_STOPPED
            return (reason, directory)
        if log is not None:
            return (TruthReason.DIRECTORY_FAILED, directory) if log.directory.failed else None
        if lost is not None:
            return (TruthReason.DIRECTORY_FAILED, lost)
        if tp in broker.hosted:
            return (TruthReason.NOT_CREATED, part.directories[part.replicas.index(broker_id)])
        return None

    def _truth_update(self, image: MetadataImage, tp: TopicIdPartition, broker_id: int) -> None:
        assert self.truth is not None
        name = self._topic_names.get(tp.topic_id, str(tp.topic_id))
        self.truth.update((tp.topic_id, tp.partition_id, broker_id), name,
                          self.physical_status(image, tp, broker_id), self.now_ms, self.controller.next_offset)


def errors_only(violations: Iterable[Violation]) -> list[Violation]:
    """The ERROR-severity invariant violations (warnings such as I12's slow placement are allowed transients)."""
    return [v for v in violations if v.severity is Severity.ERROR]

