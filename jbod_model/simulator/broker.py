"""A simulated broker: the broker side of KIP-858 as Kafka 3.9 ships it.

One :class:`SimBroker` bundles the broker components whose behaviour decides what reaches the metadata log:

* **LogManager** (``kafka.log.LogManager``) — the data log dirs with their ``directory.id``, the logs in each, the
  future logs of intra-broker moves; a new log goes to the least-loaded online dir (``nextLogDirs``: fewest logs,
  current and future); the broker halts when its last dir fails;
* **BrokerLifecycleManager** (``kafka.server.BrokerLifecycleManager``) — registration with the online dir ids,
  heartbeats (STARTING → RECOVERY → RUNNING, controlled shutdown), the *cumulative* ``OfflineLogDirs`` since the
  process started, acknowledged by a successful heartbeat, and the ``log.dir.failure.timeout.ms`` shutdown when a
  failure is not acknowledged in time (KAFKA-15649); ``BrokerRegistrationTracker`` re-registers the same
  incarnation when metadata.version reaches 3.7-IV2 while its registration lists no dirs (KAFKA-16162/16757);
* **ReplicaManager** (``kafka.server.ReplicaManager``) — ``applyDelta``: create the replica's log in its assigned
  dir, or in the least-loaded one when it is UNASSIGNED or when the broker has no offline dirs
  (``Partition.createLogInAssignedDirectoryId``, KAFKA-16234), never for a partition of the same topic id whose log
  sits in a failed dir (``HostedPartition.Offline``, KAFKA-16157); report any difference between the metadata's
  dir and the log's actual dir (``maybeUpdateTopicAssignment``, only at MV ≥ 3.7-IV2, KAFKA-16131);
  ``handleLogDirFailure``: stop the dir's replicas and future replicas, halt if it held the metadata log;
* **ReplicaAlterLogDirsThread** — intra-broker moves: future replica, the AssignReplicasToDirs after the first
  catch-up, promotion only once the controller accepted it, and the revert when a dir fails mid-move (KAFKA-16297);
* **AssignmentsManager** (``org.apache.kafka.server.AssignmentsManager``) — queue, batch (at most 2250 per
  request), retry with backoff; drop assignments whose partition is gone or whose broker is no longer a replica
  before sending (KAFKA-17190) and stop retrying on NOT_LEADER_OR_FOLLOWER (KAFKA-16886).

Physical state (disks, logs) survives a restart; process state (queues, timers, the metadata view) does not.
The broker talks to the controller only through its :class:`BrokerHost` (the simulation), which delivers requests
with latency, may lose or expire them, and schedules every callback on the simulated clock.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from jbod_model.controller.context import TopicIdPartition
from jbod_model.controller.messages import (
    ApiRequest,
    ApiResponse,
    AssignReplicasToDirsDirectory,
    AssignReplicasToDirsPartition,
    AssignReplicasToDirsRequest,
    AssignReplicasToDirsResponse,
    AssignReplicasToDirsTopic,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationFeature,
    BrokerRegistrationListener,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
)
from jbod_model.directory_id import UNASSIGNED
from jbod_model.errors_codes import Errors
from jbod_model.image import MetadataImage
from jbod_model.metadata_version import FEATURE_NAME
from jbod_model.simulator.config import MAX_ASSIGNMENTS_PER_REQUEST, BrokerSpec, Timings, exponential_backoff
from jbod_model.simulator.events import Callback, Timer
from jbod_model.simulator.history import HappeningKind
from jbod_model.uuid import Uuid

ResponseHandler = Callable[[ApiResponse | None], None]
#: ``SecurityProtocol.PLAINTEXT``.
PLAINTEXT = 0
KRAFT_VERSION_FEATURE = "kraft.version"


class BrokerState(StrEnum):
    """``org.apache.kafka.metadata.BrokerState`` as BrokerLifecycleManager moves through it."""

    NOT_RUNNING = "NOT_RUNNING"
    STARTING = "STARTING"
    RECOVERY = "RECOVERY"
    RUNNING = "RUNNING"
    PENDING_CONTROLLED_SHUTDOWN = "PENDING_CONTROLLED_SHUTDOWN"


class StopCause(StrEnum):
    """Why a broker process is not running."""

    NEVER_STARTED = "NEVER_STARTED"
    CONTROLLED_SHUTDOWN = "CONTROLLED_SHUTDOWN"
    #: ``log.dir.failure.timeout.ms`` expired with a failure the controller never acknowledged (KAFKA-15649).
    FAILURE_TIMEOUT = "FAILURE_TIMEOUT"
    CRASHED = "CRASHED"
    #: ``Exit.halt``: the metadata log dir failed.
    HALTED_METADATA_DIR = "HALTED_METADATA_DIR"
    #: ``Exit.halt``: every log dir failed (LogManager).
    HALTED_ALL_DIRS = "HALTED_ALL_DIRS"
    #: ``Exit.halt``: a dir failed while the broker runs in ZK-migration mode (KAFKA-16431).
    HALTED_MIGRATION = "HALTED_MIGRATION"

    @property
    def halted(self) -> bool:
        return self in (StopCause.HALTED_METADATA_DIR, StopCause.HALTED_ALL_DIRS, StopCause.HALTED_MIGRATION)


class MoveState(StrEnum):
    """``ReplicaAlterLogDirsThread.ReassignmentState`` (Effective = the move is over and forgotten)."""

    NONE = "NONE"
    QUEUED = "QUEUED"
    ACCEPTED = "ACCEPTED"


class BrokerHost(Protocol):
    """What a broker needs from the simulation: the clock, randomness, the network to the controller, the
    metadata log, and somewhere to report what happened."""

    @property
    def now_ms(self) -> int: ...

    @property
    def rng(self) -> random.Random: ...

    @property
    def timings(self) -> Timings: ...

    @property
    def cluster_id(self) -> str: ...

    @property
    def max_supported_metadata_version(self) -> int: ...

    def after(self, delay_ms: int, callback: Callback) -> Timer: ...

    def send(self, broker_id: int, request: ApiRequest, on_response: ResponseHandler) -> None: ...

    def can_fetch(self, broker_id: int) -> bool: ...

    def latest_metadata(self) -> tuple[MetadataImage, int]: ...

    def happened(self, kind: HappeningKind, broker_id: int | None, detail: str = "",
                 directory: Uuid | None = None) -> None: ...

    def replicas_changed(self, broker_id: int, partitions: Iterable[TopicIdPartition]) -> None: ...

    def broker_process_changed(self, broker: SimBroker) -> None: ...


@dataclass(slots=True, eq=False)
class SimLogDir:
    """One disk mounted at ``broker-<id>/<name>``, formatted with ``directory_id`` (its meta.properties).

    ``logs`` and ``futures`` are the partitions whose current / future (``-future``) log lives here. A failed
    disk keeps them: the data is still on it, unreachable."""

    name: str
    directory_id: Uuid
    holds_metadata: bool = False
    is_data_dir: bool = True
    failed_at_ms: int | None = None
    logs: set[TopicIdPartition] = field(default_factory=set)
    futures: set[TopicIdPartition] = field(default_factory=set)

    @property
    def failed(self) -> bool:
        return self.failed_at_ms is not None

    @property
    def load(self) -> int:
        """``LogManager.nextLogDirs`` counts every log in a dir, current and future."""
        return len(self.logs) + len(self.futures)


@dataclass(slots=True, eq=False)
class LocalLog:
    """A replica's current log on this broker. ``caught_up_ms``: from then on the follower fetches at the log end
    (a leader may add it back to the ISR)."""

    tp: TopicIdPartition
    directory: SimLogDir
    caught_up_ms: int


@dataclass(slots=True, eq=False)
class IntraBrokerMove:
    """A KIP-113 move (AlterReplicaLogDirs) in progress: ``PromotionState`` of ReplicaAlterLogDirsThread."""

    tp: TopicIdPartition
    source: SimLogDir
    destination: SimLogDir
    original_dir: Uuid
    state: MoveState = MoveState.NONE
    timer: Timer | None = None


@dataclass(slots=True, eq=False)
class PendingAssignment:
    """``org.apache.kafka.server.Assignment``: one partition's directory to report, and what to run on success."""

    tp: TopicIdPartition
    directory_id: Uuid
    submitted_ms: int
    reason: str
    on_success: Callback | None = None


def tp_order(tp: TopicIdPartition) -> tuple[int, int, int]:
    """A cheap deterministic order for partitions (Kafka iterates hash maps here)."""
    return (tp.topic_id.msb, tp.topic_id.lsb, tp.partition_id)


class AssignmentsManager:
    """The broker's AssignReplicasToDirs queue (``org.apache.kafka.server.AssignmentsManager``, 3.9).

    ``ready`` holds the latest assignment per partition (a newer one replaces an older one: that is how a queued
    move is "cancelled locally" by its revert); at most one request is in flight. A send is scheduled 100 ms
    after the latest submission (the backoff's initial interval, to batch), at once when more than 2250 are ready,
    or after the exponential backoff following a global failure. Before sending, assignments whose topic or
    partition is gone or whose broker is no longer a replica in the broker's metadata are dropped (KAFKA-17190).
    A per-partition error re-queues the assignment, except NOT_LEADER_OR_FOLLOWER which drops it (KAFKA-16886)."""

    __slots__ = ("_broker", "_timer", "dropped", "inflight", "previous_global_failures", "ready", "requests_sent")

    def __init__(self, broker: SimBroker) -> None:
        self._broker = broker
        self.ready: dict[TopicIdPartition, PendingAssignment] = {}
        self.inflight: dict[TopicIdPartition, PendingAssignment] = {}
        self.previous_global_failures = 0
        self._timer: Timer | None = None
        self.requests_sent = 0
        self.dropped = 0

    @property
    def queued(self) -> int:
        """The ``QueuedReplicaToDirAssignments`` metric: ready plus in flight."""
        return len(self.ready) + len(self.inflight)

    def has(self, tp: TopicIdPartition) -> bool:
        return tp in self.ready or tp in self.inflight

    def reset(self) -> None:
        """A new process starts with an empty queue."""
        self.ready = {}
        self.inflight = {}
        self.previous_global_failures = 0
        self._timer = None

    def on_assignment(self, tp: TopicIdPartition, directory_id: Uuid, reason: str,
                      on_success: Callback | None = None) -> None:
        host = self._broker.host
        self.ready.pop(tp, None)  # re-inserted last: the newest assignment for a partition wins
        self.ready[tp] = PendingAssignment(tp, directory_id, host.now_ms, reason, on_success)
        self._reschedule()

    def _reschedule(self) -> None:
        """``rescheduleMaybeSendAssignmentsEvent`` with ``AssignmentsManagerDeadlineFunction``: keep an earlier
        deadline already scheduled."""
        host = self._broker.host
        t = host.timings
        if self.previous_global_failures > 0:
            delay = exponential_backoff(self.previous_global_failures, initial_ms=t.assignment_backoff_initial_ms,
                                        max_ms=t.assignment_backoff_max_ms, rng=host.rng)
        elif len(self.ready) > MAX_ASSIGNMENTS_PER_REQUEST and not self.inflight:
            delay = 0
        else:
            delay = t.assignment_backoff_initial_ms
        at = host.now_ms + delay
        if self._timer is not None and not self._timer.cancelled and self._timer.at_ms <= at:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._broker.schedule(delay, self._maybe_send)

    def _maybe_send(self) -> None:
        self._timer = None
        if self.inflight or not self.ready:
            return
        broker = self._broker
        image = broker.image
        batch: dict[TopicIdPartition, PendingAssignment] = {}
        invalid: list[PendingAssignment] = []
        for tp in list(self.ready):
            if len(batch) >= MAX_ASSIGNMENTS_PER_REQUEST:
                break
            assignment = self.ready.pop(tp)
            if image is not None and broker.is_replica_in(image, tp):
                batch[tp] = assignment
            else:
                invalid.append(assignment)
        if invalid:
            self.dropped += len(invalid)
            broker.host.happened(HappeningKind.ASSIGNMENT_DROPPED, broker.id,
                                 f"{len(invalid)} assignment(s) dropped before sending: partition gone or broker no "
                                 "longer a replica (KAFKA-17190)")
        if not batch:
            if self.ready:
                self._reschedule()
            return
        self._send(batch)

    def _send(self, batch: dict[TopicIdPartition, PendingAssignment]) -> None:
        broker = self._broker
        image = broker.image
        reg = image.cluster.brokers.get(broker.id) if image is not None else None
        # Kafka sends the epoch its metadata image holds for this broker (image.cluster().brokerEpoch).
        epoch = reg.epoch if reg is not None else broker.epoch
        by_dir: dict[Uuid, dict[Uuid, list[int]]] = {}
        for assignment in batch.values():
            topics = by_dir.setdefault(assignment.directory_id, {})
            topics.setdefault(assignment.tp.topic_id, []).append(assignment.tp.partition_id)
        request = AssignReplicasToDirsRequest(broker_id=broker.id, broker_epoch=epoch, directories=tuple(
            AssignReplicasToDirsDirectory(id=dir_id, topics=tuple(
                AssignReplicasToDirsTopic(topic_id=topic_id, partitions=tuple(
                    AssignReplicasToDirsPartition(partition_index=p) for p in partitions))
                for topic_id, partitions in topics.items()))
            for dir_id, topics in by_dir.items()))
        self.inflight = batch
        self.requests_sent += 1
        broker.send(request, lambda response: self._handle_response(batch, response))

    def _handle_response(self, sent: dict[TopicIdPartition, PendingAssignment], response: ApiResponse | None) -> None:
        self.inflight = {}
        try:
            if not isinstance(response, AssignReplicasToDirsResponse) or response.error_code != Errors.NONE:
                # A global failure (timeout, STALE_BROKER_EPOCH, UNSUPPORTED_VERSION …): everything is retried.
                self.previous_global_failures += 1
                for tp, assignment in sent.items():
                    self.ready.setdefault(tp, assignment)
                return
            self.previous_global_failures = 0
            remaining = dict(sent)
            for directory in response.directories:
                for topic in directory.topics:
                    for partition in topic.partitions:
                        tp = TopicIdPartition(topic.topic_id, partition.partition_index)
                        if tp not in remaining:
                            continue  # not in the request: nothing to do (Kafka logs it)
                        assignment = remaining.pop(tp)
                        if partition.error_code == Errors.NONE:
                            if assignment.on_success is not None:
                                assignment.on_success()
                        elif partition.error_code == Errors.NOT_LEADER_OR_FOLLOWER:
                            self.dropped += 1
                            self._broker.host.happened(
                                HappeningKind.ASSIGNMENT_DROPPED, self._broker.id,
                                f"assignment of {tp.topic_id}-{tp.partition_id} dropped after NOT_LEADER_OR_FOLLOWER "
                                "(KAFKA-16886)", assignment.directory_id)
                        else:
                            self.ready.setdefault(tp, assignment)
            for tp, assignment in remaining.items():
                self.ready.setdefault(tp, assignment)
        finally:
            if self.ready:
                self._reschedule()


class SimBroker:
    """One broker (see the module docstring). The simulation owns it and calls :meth:`start`, :meth:`stop`,
    :meth:`begin_controlled_shutdown`, :meth:`fail_dir`, :meth:`alter_replica_log_dir` and :meth:`request_fetch`."""

    def __init__(self, spec: BrokerSpec, host: BrokerHost, data_dirs: list[SimLogDir],
                 metadata_dir: SimLogDir | None) -> None:
        self.spec = spec
        self.id = spec.broker_id
        self.host = host
        #: The configured ``log.dirs``, in order (the shared metadata dir, if any, is the first).
        self.data_dirs = data_dirs
        #: The dedicated ``metadata.log.dir`` disk, or None when the metadata log lives in ``data_dirs[0]``.
        self.metadata_dir = metadata_dir
        self.state = BrokerState.NOT_RUNNING
        self.stop_cause = StopCause.NEVER_STARTED
        self.generation = 0
        self.incarnation_id: Uuid | None = None
        self.epoch = -1
        self.previous_epoch = -1
        self.registered = False
        self.zk_mode = False
        # Metadata publisher state.
        self.image: MetadataImage | None = None
        self.applied_offset = -1
        self.dirty: set[TopicIdPartition] = set()
        self._fetch_timer: Timer | None = None
        self._published = False
        # BrokerLifecycleManager state.
        self._caught_up = False
        self.ready_to_unfence = False
        self.offline_dirs: dict[Uuid, bool] = {}
        self._heartbeat_timer: Timer | None = None
        self._heartbeat_in_flight = False
        self._failed_attempts = 0
        self._got_shutdown_response = False
        self._shutdown_complete = False
        self._shutdown_cause = StopCause.CONTROLLED_SHUTDOWN
        self._reregistering = False
        # Physical state: survives restarts.
        self.logs: dict[TopicIdPartition, LocalLog] = {}
        #: Replicas whose log is on a disk this process did not load (failed, removed or replaced).
        self.lost: dict[TopicIdPartition, Uuid] = {}
        self.moves: dict[TopicIdPartition, IntraBrokerMove] = {}
        #: ReplicaManager.allPartitions: the partitions this process has taken on (from its metadata publishes).
        self.hosted: set[TopicIdPartition] = set()
        #: Partitions this process refused to create (reported once).
        self._refused: set[TopicIdPartition] = set()
        #: The LogDirs this process registers with: ``logManager.directoryIdsSet`` when it started.
        self.registration_dirs: tuple[Uuid, ...] = ()
        self.assignments = AssignmentsManager(self)

    # -- views ---------------------------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self.state is not BrokerState.NOT_RUNNING

    @property
    def all_dirs(self) -> list[SimLogDir]:
        return self.data_dirs + ([self.metadata_dir] if self.metadata_dir is not None else [])

    def online_data_dirs(self) -> list[SimLogDir]:
        return [d for d in self.data_dirs if not d.failed]

    def dir_by_name(self, name: str) -> SimLogDir:
        for d in self.all_dirs:
            if d.name == name:
                return d
        raise KeyError(f"broker {self.id} has no log dir named {name!r}: {[d.name for d in self.all_dirs]}")

    def dir_by_id(self, directory_id: Uuid) -> SimLogDir | None:
        for d in self.data_dirs:
            if d.directory_id == directory_id:
                return d
        return None

    def has_offline_dirs(self) -> bool:
        """``LogManager.hasOfflineLogDirs``: a configured log dir is offline (failed now or at startup)."""
        return any(d.failed for d in self.data_dirs)

    def is_replica_in(self, image: MetadataImage, tp: TopicIdPartition) -> bool:
        """``Assignment.valid``: the topic and partition exist and this broker is one of its replicas."""
        part = image.topics.get_partition(tp.topic_id, tp.partition_id)
        return part is not None and self.id in part.replicas

    def move_expects(self, tp: TopicIdPartition, directory: Uuid) -> bool:
        """A move whose assignment to ``directory`` is queued or accepted: metadata naming the future replica's dir
        is expected, not a mismatch to correct (the promotion follows)."""
        move = self.moves.get(tp)
        return move is not None and move.state is not MoveState.NONE and move.destination.directory_id == directory

    def in_flight(self, tp: TopicIdPartition) -> bool:
        """The broker knows the metadata may be stale for ``tp``: an assignment is queued or sent, or a move runs."""
        return tp in self.moves or self.assignments.has(tp)

    # -- scheduling guarded by process generation ----------------------------------------------------------------

    def schedule(self, delay_ms: int, callback: Callback) -> Timer:
        """Run ``callback`` after ``delay_ms`` if this process is still the one running by then."""
        generation = self.generation

        def guarded() -> None:
            if self.generation == generation:
                callback()

        return self.host.after(delay_ms, guarded)

    def send(self, request: ApiRequest, on_response: ResponseHandler) -> None:
        """Send to the controller; a response reaching a process that has since stopped is dropped."""
        generation = self.generation

        def guarded(response: ApiResponse | None) -> None:
            if self.generation == generation:
                on_response(response)

        self.host.send(self.id, request, guarded)

    def _draw(self, span: tuple[int, int]) -> int:
        return self.host.timings.draw(self.host.rng, span)

    # -- process lifecycle ---------------------------------------------------------------------------------------

    def start(self, incarnation_id: Uuid, *, zk_mode: bool = False) -> None:
        """Start a new process (``KafkaRaftServer`` / ``BrokerServer.startup``): load the logs of the online dirs,
        then register. A disk that failed before is offline at startup: its logs are not loaded."""
        if self.running:
            raise RuntimeError(f"broker {self.id} is already running")
        self.generation += 1
        self.state = BrokerState.STARTING
        self.zk_mode = zk_mode
        self.incarnation_id = incarnation_id
        self.registered = False
        self.epoch = -1
        self.image = None
        self.applied_offset = -1
        self.dirty = set()
        self._fetch_timer = None
        self._published = False
        self._caught_up = False
        self.ready_to_unfence = False
        self.offline_dirs = {}
        self._heartbeat_timer = None
        self._heartbeat_in_flight = False
        self._failed_attempts = 0
        self._got_shutdown_response = False
        self._shutdown_complete = False
        self._reregistering = False
        self.assignments.reset()
        self.hosted = set()
        self._refused = set()
        host = self.host
        configured = {id(d) for d in self.data_dirs}
        for tp, log in list(self.logs.items()):
            if log.directory.failed or id(log.directory) not in configured:
                # LogManager.loadLogs skips offline and unconfigured dirs: the replica's data stays on that disk.
                self._lose(tp, log)
            else:
                # A restarted follower starts behind its leader.
                log.caught_up_ms = host.now_ms + self._draw(host.timings.replica_catch_up_ms)
        host.happened(HappeningKind.BROKER_STARTED, self.id,
                      f"incarnation {incarnation_id}{' (ZooKeeper mode, migrating)' if zk_mode else ''}; online "
                      f"log dirs {[d.name for d in self.online_data_dirs()]}")
        metadata_disk = self.metadata_dir if self.metadata_dir is not None else self.data_dirs[0]
        if metadata_disk.failed:
            self._halt(StopCause.HALTED_METADATA_DIR, f"the metadata log dir {metadata_disk.name} is offline")
            return
        if not self.online_data_dirs():
            self._halt(StopCause.HALTED_ALL_DIRS, "no log dir is online")
            return
        # BrokerServer passes logManager.directoryIdsSet to BrokerLifecycleManager once, at startup: a dir that fails
        # later is still registered (then reported offline by the heartbeat).
        self.registration_dirs = tuple(d.directory_id for d in self.online_data_dirs())
        host.broker_process_changed(self)
        self._send_registration()
        # The metadata loader catches up with the log and publishes on its own, registered or not (BrokerServer
        # installs the publishers before it waits for the registration's initial catch-up).
        self.request_fetch()

    def stop(self, cause: StopCause, detail: str = "") -> None:
        """The process ends: timers and queues are dropped, moves are abandoned (their future logs discarded)."""
        if not self.running:
            return
        clean = cause is StopCause.CONTROLLED_SHUTDOWN and self._shutdown_complete
        # KIP-966: a clean shutdown lets the next registration carry this epoch as PreviousBrokerEpoch.
        self.previous_epoch = self.epoch if clean else -1
        self.generation += 1
        self.state = BrokerState.NOT_RUNNING
        self.stop_cause = cause
        self.registered = False
        self.image = None
        self.dirty = set()
        self.assignments.reset()
        for move in self.moves.values():
            move.destination.futures.discard(move.tp)
        self.moves.clear()
        kind = HappeningKind.BROKER_HALTED if cause.halted else HappeningKind.BROKER_STOPPED
        self.host.happened(kind, self.id, detail or cause.value)
        self.host.broker_process_changed(self)

    def _halt(self, cause: StopCause, detail: str) -> None:
        self.state = BrokerState.STARTING if not self.running else self.state
        self.stop(cause, f"Exit.halt: {detail}")

    def begin_controlled_shutdown(self, cause: StopCause = StopCause.CONTROLLED_SHUTDOWN) -> None:
        """``BrokerLifecycleManager.beginControlledShutdown``: from RUNNING, heartbeat with WantShutDown until the
        controller says ShouldShutDown (or give up after ``controlled_shutdown_timeout_ms``); in any other state,
        stop at once."""
        if not self.running:
            return
        self._shutdown_cause = cause
        if self.state is not BrokerState.RUNNING:
            self.stop(cause)
            return
        self.state = BrokerState.PENDING_CONTROLLED_SHUTDOWN
        self.host.happened(HappeningKind.BROKER_SHUTDOWN_STARTED, self.id, cause.value)
        self._schedule_heartbeat(0)
        self.schedule(self.host.timings.controlled_shutdown_timeout_ms,
                      lambda: self.stop(cause, f"{cause.value} (controlled shutdown did not complete in time)"))

    # -- registration and heartbeats (BrokerLifecycleManager) ----------------------------------------------------

    def registration_request(self) -> BrokerRegistrationRequest:
        assert self.incarnation_id is not None
        return BrokerRegistrationRequest(
            broker_id=self.id, cluster_id=self.host.cluster_id, incarnation_id=self.incarnation_id,
            listeners=(BrokerRegistrationListener(name="PLAINTEXT", host=f"broker-{self.id}", port=9092,
                                                  security_protocol=PLAINTEXT),),
            features=(BrokerRegistrationFeature(name=FEATURE_NAME, min_supported_version=1,
                                                max_supported_version=self.host.max_supported_metadata_version),
                      BrokerRegistrationFeature(name=KRAFT_VERSION_FEATURE, min_supported_version=0,
                                                max_supported_version=1)),
            rack=self.spec.rack, is_migrating_zk_broker=self.zk_mode,
            log_dirs=self.registration_dirs, previous_broker_epoch=self.previous_epoch)

    def _send_registration(self) -> None:
        self.send(self.registration_request(), self._on_registration_response)

    def _on_registration_response(self, response: ApiResponse | None) -> None:
        if not isinstance(response, BrokerRegistrationResponse) or response.error_code != Errors.NONE:
            self._failed_attempts += 1
            t = self.host.timings
            self.schedule(exponential_backoff(self._failed_attempts - 1, initial_ms=t.lifecycle_backoff_initial_ms,
                                              max_ms=t.lifecycle_backoff_max_ms, rng=self.host.rng),
                          self._send_registration)
            return
        self._failed_attempts = 0
        again = self.registered
        self.registered = True
        self.epoch = response.broker_epoch
        self._reregistering = False
        self.host.happened(HappeningKind.BROKER_REREGISTERED if again else HappeningKind.BROKER_REGISTERED, self.id,
                           f"epoch {self.epoch}, log dirs {[d.name for d in self.online_data_dirs()]}")
        self._schedule_heartbeat(0)

    def _schedule_heartbeat(self, delay_ms: int) -> None:
        if self._heartbeat_timer is not None:
            self._heartbeat_timer.cancel()
        self._heartbeat_timer = self.schedule(delay_ms, self._send_heartbeat)

    def _send_heartbeat(self) -> None:
        self._heartbeat_timer = None
        if not self.registered or self._heartbeat_in_flight:
            return  # KAFKA-15950: one heartbeat at a time; the response schedules the next
        reported = tuple(self.offline_dirs)
        request = BrokerHeartbeatRequest(
            broker_id=self.id, broker_epoch=self.epoch, current_metadata_offset=self.applied_offset,
            want_fence=not self.ready_to_unfence,
            want_shut_down=self.state is BrokerState.PENDING_CONTROLLED_SHUTDOWN,
            offline_log_dirs=reported)
        self._heartbeat_in_flight = True
        self.send(request, lambda response: self._on_heartbeat_response(response, reported))

    def _on_heartbeat_response(self, response: ApiResponse | None, reported: tuple[Uuid, ...]) -> None:
        self._heartbeat_in_flight = False
        t = self.host.timings
        if not isinstance(response, BrokerHeartbeatResponse) or response.error_code != Errors.NONE:
            self._failed_attempts += 1
            self._schedule_heartbeat(exponential_backoff(
                self._failed_attempts - 1, initial_ms=t.lifecycle_backoff_initial_ms,
                max_ms=t.lifecycle_backoff_max_ms, rng=self.host.rng))
            return
        self._failed_attempts = 0
        for directory in reported:
            if self.offline_dirs.get(directory) is False:
                self.offline_dirs[directory] = True
                self.host.happened(HappeningKind.DIR_FAILURE_REPORTED, self.id,
                                   "the controller acknowledged the offline dir", directory)
        if self.state is BrokerState.STARTING:
            if response.is_caught_up:
                self.state = BrokerState.RECOVERY
                self._caught_up = True
                self._maybe_ready_to_unfence()
            self._schedule_heartbeat(t.starting_heartbeat_ms)
        elif self.state is BrokerState.RECOVERY:
            if not response.is_fenced:
                self.state = BrokerState.RUNNING
                self.host.happened(HappeningKind.BROKER_UNFENCED, self.id, f"epoch {self.epoch}")
            self._schedule_heartbeat(t.heartbeat_interval_ms)
        elif self.state is BrokerState.PENDING_CONTROLLED_SHUTDOWN:
            if response.should_shut_down:
                self._shutdown_complete = True
                self.stop(self._shutdown_cause)
                return
            first = not self._got_shutdown_response
            self._got_shutdown_response = True
            self._schedule_heartbeat(t.controlled_shutdown_heartbeat_ms if first else t.heartbeat_interval_ms)
        else:
            self._schedule_heartbeat(t.heartbeat_interval_ms)

    def _maybe_ready_to_unfence(self) -> None:
        """``BrokerServer.startup``: ready to unfence once the controller said we caught up and the first metadata
        was published. (Kafka does not wait for directory assignments here, whatever the KIP says: R10.2.)"""
        if self._caught_up and self._published and not self.ready_to_unfence:
            self.ready_to_unfence = True
            self._schedule_heartbeat(0)

    # -- metadata (BrokerMetadataPublisher → ReplicaManager.applyDelta) ------------------------------------------

    def request_fetch(self) -> None:
        """New records were committed: publish them after the fetch lag (coalesced)."""
        if not self.running or self._fetch_timer is not None:
            return
        self._fetch_timer = self.schedule(self._draw(self.host.timings.metadata_fetch_delay_ms), self._publish)

    def _publish(self) -> None:
        self._fetch_timer = None
        if not self.host.can_fetch(self.id):
            self._fetch_timer = self.schedule(self.host.timings.request_timeout_ms, self._publish)
            return
        image, offset = self.host.latest_metadata()
        previous = self.image
        first = not self._published
        self.image = image
        self.applied_offset = offset
        if first:
            # The first publish is a delta from the empty image: every partition this broker holds.
            keys: set[TopicIdPartition] = set(self.logs)
            for topic, pid, part in image.topics.partitions():
                if self.id in part.replicas:
                    keys.add(TopicIdPartition(topic.id, pid))
            self.dirty = set()
        else:
            keys, self.dirty = self.dirty, set()
        self._track_registration(previous, image)
        self._apply_delta(keys, previous, image, first)
        self._published = True
        self._maybe_ready_to_unfence()

    def _track_registration(self, previous: MetadataImage | None, image: MetadataImage) -> None:
        """``BrokerRegistrationTracker``: at MV ≥ 3.7-IV2 a registration listing no dirs is re-sent with the same
        incarnation (KAFKA-16162, KAFKA-16757), when the MV or this broker's registration changed."""
        if self.zk_mode or not self.registered or self._reregistering:
            return
        reg = image.cluster.brokers.get(self.id)
        if reg is None or reg.incarnation_id != self.incarnation_id:
            return
        changed = (previous is None or previous.metadata_version != image.metadata_version
                   or previous.cluster.brokers.get(self.id) is not reg)
        if changed and image.metadata_version.is_directory_assignment_supported() and not reg.directories:
            self._reregistering = True
            self._send_registration()

    def _apply_delta(self, keys: Iterable[TopicIdPartition], previous: MetadataImage | None, image: MetadataImage,
                     first: bool) -> None:
        dirs_supported = image.metadata_version.is_directory_assignment_supported() and not self.zk_mode
        for tp in sorted(keys, key=tp_order):
            part = image.topics.get_partition(tp.topic_id, tp.partition_id)
            if part is None or self.id not in part.replicas:
                self._stop_replica(tp)
                continue
            assigned = part.directories[part.replicas.index(self.id)]
            self.hosted.add(tp)
            log = self.logs.get(tp)
            created = False
            if log is None:
                log = self._create_log(tp, assigned)
                created = log is not None
            if log is None or log.directory.failed or not dirs_supported:
                continue
            if created or first:
                changed = True
            else:
                prev = previous.topics.get_partition(tp.topic_id, tp.partition_id) if previous is not None else None
                changed = (prev is None or self.id not in prev.replicas
                           or prev.directories[prev.replicas.index(self.id)] != assigned)
            actual = log.directory.directory_id
            if changed and actual != assigned and not self.move_expects(tp, assigned):
                # ReplicaManager.maybeUpdateTopicAssignment: the broker is the authority on placement.
                self.assignments.on_assignment(tp, actual, "Applying metadata delta")

    def _online_dir(self, directory: Uuid) -> SimLogDir | None:
        d = self.dir_by_id(directory)
        return d if d is not None and not d.failed else None

    def least_loaded_dir(self) -> SimLogDir | None:
        """``LogManager.nextLogDirs``: the online dir with the fewest logs (ties: configuration order)."""
        best: SimLogDir | None = None
        for d in self.data_dirs:
            if not d.failed and (best is None or d.load < best.load):
                best = d
        return best

    def _create_log(self, tp: TopicIdPartition, assigned: Uuid) -> LocalLog | None:
        """``Partition.createLogInAssignedDirectoryId`` + ``LogManager.getOrCreateLog``."""
        target = self._online_dir(assigned)
        if target is None:
            if assigned != UNASSIGNED and self.has_offline_dirs():
                # KAFKA-16234: it may be one of the offline dirs; do not fill the healthy disks with its replicas.
                if tp not in self._refused:
                    self._refused.add(tp)
                    self.host.happened(HappeningKind.REPLICA_NOT_CREATED, self.id,
                                       f"{tp.topic_id}-{tp.partition_id}: assigned dir is not online and the broker "
                                       "has offline dirs", assigned)
                    self.host.replicas_changed(self.id, (tp,))
                return None
            target = self.least_loaded_dir()
            if target is None:
                return None
        return self.place_log(tp, target)

    def place_log(self, tp: TopicIdPartition, directory: SimLogDir, *, caught_up: bool = False) -> LocalLog:
        """Create ``tp``'s log in ``directory`` (also used for logs that predate the simulation, e.g. ZK mode)."""
        now = self.host.now_ms
        log = LocalLog(tp, directory, now if caught_up else now + self._draw(self.host.timings.replica_catch_up_ms))
        directory.logs.add(tp)
        self.logs[tp] = log
        self.lost.pop(tp, None)
        self.host.replicas_changed(self.id, (tp,))
        return log

    def _lose(self, tp: TopicIdPartition, log: LocalLog) -> None:
        """The process no longer has ``tp``'s log (its disk is offline, unconfigured or replaced); the data stays on
        that disk, which the ground truth remembers."""
        del self.logs[tp]
        log.directory.logs.discard(tp)
        self.lost[tp] = log.directory.directory_id

    def _stop_replica(self, tp: TopicIdPartition) -> None:
        """``ReplicaManager.stopPartitions`` for a partition this broker no longer hosts: delete its log (a log on a
        failed disk cannot be deleted; it is simply forgotten), cancel its move."""
        if tp in self.moves:
            self._remove_move(tp, revert=True)
        self.hosted.discard(tp)
        self._refused.discard(tp)
        log = self.logs.pop(tp, None)
        lost = self.lost.pop(tp, None)
        if log is not None:
            log.directory.logs.discard(tp)
        if log is not None or lost is not None:
            self.host.replicas_changed(self.id, (tp,))

    # -- disk failures (ReplicaManager.handleLogDirFailure) ------------------------------------------------------

    def fail_dir(self, directory: SimLogDir) -> None:
        """React to ``directory`` failing (the caller marked it failed). Its replicas and future replicas stop;
        moves touching it are reverted; then the broker halts (metadata dir, last dir, ZK-migration mode) or
        propagates the failure: the dir joins the cumulative OfflineLogDirs and a heartbeat goes out at once,
        with a shutdown scheduled ``log.dir.failure.timeout.ms`` later unless it is acknowledged by then."""
        if not self.running:
            return
        for tp in sorted(directory.futures, key=tp_order):
            self._remove_move(tp, revert=True)
        affected = sorted(directory.logs, key=tp_order)
        for tp in affected:
            if tp in self.moves:
                self._remove_move(tp, revert=True)
            if tp not in self.hosted:
                # Not taken on by ReplicaManager yet (no publish since the process started): nothing is marked
                # HostedPartition.Offline, LogManager just drops the log; the first publish treats it as absent.
                self._lose(tp, self.logs[tp])
        self.host.replicas_changed(self.id, affected)
        if self.zk_mode:
            self._halt(StopCause.HALTED_MIGRATION, f"log dir {directory.name} failed during migration mode")
            return
        if not self.online_data_dirs():
            self._halt(StopCause.HALTED_ALL_DIRS, f"all log dirs have failed (last: {directory.name})")
            return
        if directory.holds_metadata:
            self._halt(StopCause.HALTED_METADATA_DIR, f"the metadata log dir {directory.name} has failed")
            return
        if not directory.is_data_dir:
            return
        self.offline_dirs[directory.directory_id] = False
        if self.registered:
            self._schedule_heartbeat(0)
        failed_id = directory.directory_id
        self.schedule(self.host.timings.log_dir_failure_timeout_ms, lambda: self._check_failure_timeout(failed_id))

    def fail_metadata_dir(self) -> None:
        """The dedicated metadata dir failed: the broker halts (``ReplicaManager.handleLogDirFailure``)."""
        if self.running:
            self._halt(StopCause.HALTED_METADATA_DIR, "the metadata log dir has failed")

    def _check_failure_timeout(self, directory: Uuid) -> None:
        """``OfflineDirBrokerFailureEvent`` (KAFKA-15649): the controller never acknowledged the failure."""
        if self.offline_dirs.get(directory) is False:
            self.host.happened(HappeningKind.DIR_FAILURE_TIMEOUT, self.id,
                               "shutting down: could not communicate the offline log dir to the controller",
                               directory)
            self.begin_controlled_shutdown(StopCause.FAILURE_TIMEOUT)

    # -- intra-broker moves (AlterReplicaLogDirs → ReplicaAlterLogDirsThread) ------------------------------------

    def alter_replica_log_dir(self, tp: TopicIdPartition, destination: SimLogDir) -> str | None:
        """Start moving ``tp`` to ``destination``; returns why not, or None when started (or already there)."""
        if self.state is not BrokerState.RUNNING:
            return f"broker {self.id} is not running"
        log = self.logs.get(tp)
        if log is None:
            return f"broker {self.id} has no log for {tp.topic_id}-{tp.partition_id}"
        if log.directory.failed or destination.failed or not destination.is_data_dir:
            return "KAFKA_STORAGE_ERROR"
        if log.directory is destination:
            return None
        if tp in self.moves:
            return f"{tp.topic_id}-{tp.partition_id} is already moving"
        move = IntraBrokerMove(tp, log.directory, destination, log.directory.directory_id)
        destination.futures.add(tp)
        self.moves[tp] = move
        move.timer = self.schedule(self._draw(self.host.timings.future_catch_up_ms),
                                   lambda: self._future_caught_up(move))
        self.host.happened(HappeningKind.MOVE_STARTED, self.id,
                           f"{tp.topic_id}-{tp.partition_id}: {log.directory.name} -> {destination.name}",
                           destination.directory_id)
        return None

    def _future_caught_up(self, move: IntraBrokerMove) -> None:
        """The future replica caught up for the first time: ask the controller first, promote after
        (``maybePromoteFutureReplica``); without directory support (MV < 3.7-IV2) promote at once."""
        if self.moves.get(move.tp) is not move:
            return
        image = self.image
        if image is None or not image.metadata_version.is_directory_assignment_supported():
            self._promote(move, accepted=False)
            return
        move.state = MoveState.QUEUED
        self.assignments.on_assignment(move.tp, move.destination.directory_id, "Future replica promotion",
                                       lambda: self._move_accepted(move))

    def _move_accepted(self, move: IntraBrokerMove) -> None:
        if self.moves.get(move.tp) is not move:
            return
        move.state = MoveState.ACCEPTED
        move.timer = self.schedule(self._draw(self.host.timings.promotion_delay_ms),
                                   lambda: self._promote(move, accepted=True))

    def _promote(self, move: IntraBrokerMove, *, accepted: bool) -> None:
        """``maybeReplaceCurrentWithFutureReplica``: the future log becomes the current one."""
        if self.moves.get(move.tp) is not move:
            return
        log = self.logs.get(move.tp)
        if log is None or log.directory.failed or move.destination.failed:
            return
        del self.moves[move.tp]
        log.directory.logs.discard(move.tp)
        move.destination.futures.discard(move.tp)
        move.destination.logs.add(move.tp)
        source = log.directory
        log.directory = move.destination
        self.host.happened(HappeningKind.MOVE_COMPLETED, self.id,
                           f"{move.tp.topic_id}-{move.tp.partition_id}: {source.name} -> {move.destination.name}"
                           f"{'' if accepted else ' (no directory assignment below 3.7-IV2)'}",
                           move.destination.directory_id)

    def _remove_move(self, tp: TopicIdPartition, *, revert: bool) -> None:
        """``ReplicaAlterLogDirsThread.removePartitions``: drop the future replica; if the controller may already
        point at it (queued or accepted), assign the partition back to its original dir (KAFKA-16297)."""
        move = self.moves.pop(tp, None)
        if move is None:
            return
        if move.timer is not None:
            move.timer.cancel()
        move.destination.futures.discard(tp)
        if revert and move.state is not MoveState.NONE:
            self.assignments.on_assignment(tp, move.original_dir, "Reverting reassignment for canceled future replica")
        self.host.happened(HappeningKind.MOVE_REVERTED, self.id,
                           f"{tp.topic_id}-{tp.partition_id}: move to {move.destination.name} abandoned in state "
                           f"{move.state.value}", move.original_dir)

    # -- follower state for the leader's ISR decisions ------------------------------------------------------------

    def follower_caught_up(self, tp: TopicIdPartition, now_ms: int) -> bool:
        """The replica fetches at its leader's log end: the process runs, the log is on an online dir and has
        caught up."""
        if self.state not in (BrokerState.RUNNING, BrokerState.RECOVERY):
            return False
        log = self.logs.get(tp)
        return log is not None and not log.directory.failed and log.caught_up_ms <= now_ms

    def hosts_online_log(self, tp: TopicIdPartition) -> bool:
        log = self.logs.get(tp)
        return self.running and log is not None and not log.directory.failed
