"""Named scenarios: short scripts over :class:`~jbod_model.simulator.cluster.Simulation`, deterministic for a seed.

Each :class:`Scenario` names the operator pains it reproduces (operators-and-peers.md §2.2 S1–S10, the table's
rows, KAFKA tickets) and the properties it is *expected* to break — a scenario that shows a known Kafka limitation
(JBOD below 3.7-IV2, a dir failure in ZK-migration mode) breaks one on purpose, and says so. ``demo`` is the run the
main job replays by default. Run one with :func:`run_scenario` (or ``Scenario.run(seed)``); list them with
:data:`SCENARIOS`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from jbod_model.simulator.broker import MoveState
from jbod_model.simulator.checks import TlaProperty
from jbod_model.simulator.cluster import FailedDirPolicy, Simulation, SimulationError
from jbod_model.simulator.config import BrokerSpec, MetadataDirPlacement, SimulationConfig
from jbod_model.simulator.output import SimulationResult, SimulationSink

#: Builds the scenario's Simulation from its configuration (the seed, sink and names are bound by the caller).
SimFactory = Callable[[SimulationConfig], Simulation]
Script = Callable[[SimFactory], Simulation]

MV_3_6 = 14  # 3.6-IV2
MV_3_7_IV2 = 17
SETTLE_MS = 600_000


@dataclass(frozen=True, slots=True)
class Scenario:
    """A named, seeded run: ``run(seed)`` builds and runs it and returns the result."""

    name: str
    description: str
    script: Script = field(repr=False, compare=False)
    pains: tuple[str, ...] = ()
    expected_violations: frozenset[TlaProperty] = frozenset()
    #: Named invariants (jbod_model.invariants, ERROR severity) the scenario's metadata log is expected to break.
    expected_invariants: frozenset[str] = frozenset()

    def run(self, seed: int = 0, *, sink: SimulationSink | None = None,
            configure: Callable[[SimulationConfig], SimulationConfig] | None = None) -> SimulationResult:
        """Run the script with ``seed``; ``sink`` streams the output (e.g. an OutputWriter); ``configure`` may adjust
        the scenario's configuration (e.g. turn monitoring off)."""
        def factory(config: SimulationConfig) -> Simulation:
            return Simulation(configure(config) if configure is not None else config, seed, sink=sink,
                              name=self.name, description=self.description)

        return self.script(factory).result()


_REGISTRY: dict[str, Scenario] = {}
#: Every scenario by name, in registration order.
SCENARIOS: Mapping[str, Scenario] = MappingProxyType(_REGISTRY)


def scenario(name: str, description: str, *, pains: tuple[str, ...] = (),
             expected: frozenset[TlaProperty] = frozenset(),
             expected_invariants: frozenset[str] = frozenset()) -> Callable[[Script], Script]:
    """Register a script under ``name``."""
    def register(script: Script) -> Script:
        if name in _REGISTRY:
            raise ValueError(f"scenario {name!r} is registered twice")
        _REGISTRY[name] = Scenario(name, description, script, pains, expected, expected_invariants)
        return script

    return register


def run_scenario(name: str, seed: int = 0, *, sink: SimulationSink | None = None) -> SimulationResult:
    """Run the scenario called ``name``."""
    try:
        chosen = SCENARIOS[name]
    except KeyError:
        raise SimulationError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}") from None
    return chosen.run(seed, sink=sink)


def _must(ok: bool, what: str) -> None:
    if not ok:
        raise SimulationError(f"scenario step did not happen: {what}")


def _ready(sim: Simulation, *, zk_mode: bool = False) -> Simulation:
    """Start every broker and wait until they are registered and unfenced."""
    sim.start_brokers(zk_mode=zk_mode)
    _must(sim.run_until_quiescent(timeout_ms=SETTLE_MS), "brokers registered and unfenced")
    return sim


def _settle(sim: Simulation) -> Simulation:
    _must(sim.run_until_quiescent(timeout_ms=SETTLE_MS), "the cluster settles")
    return sim


# ------------------------------------------------------------------------------------------------------------
# The demo


@scenario("demo", "4 brokers × 3 log dirs on 2 racks, 3 topics; one of broker 2's disks fails (it leaves the ISR "
                  "and leadership of the replicas there in the same batch), broker 2 is restarted with the dead disk "
                  "still configured (registers without it, its replicas there stay offline), and a topic created "
                  "afterwards lands on the healthy disks only.", pains=("S3", "S4"))
def _demo(new: SimFactory) -> Simulation:
    sim = _ready(new(SimulationConfig.uniform(brokers=4, dirs=3, racks=2)))
    sim.create_topic("orders", 12, 3)
    sim.create_topic("payments", 6, 3)
    sim.create_topic("audit", 4, 2)
    sim.run_for(10_000)
    sim.fail_dir(2, "data-1")
    sim.run_for(30_000)
    sim.note("broker 2 is restarted with the failed disk still in log.dirs")
    sim.restart_broker(2, failed_dirs=FailedDirPolicy.KEEP)
    sim.run_for(20_000)
    sim.create_topic("invoices", 8, 3)
    return _settle(sim)


@scenario("disk-replaced", "The aftermath of a disk failure, repaired: broker 2's failed disk is replaced (a new "
                           "directory.id at the same path); on restart the broker has no offline dir, re-creates the "
                           "lost replicas on its disks, assigns them and the leaders add them back to the ISR.",
          pains=("S4", "KAFKA-16234"))
def _disk_replaced(new: SimFactory) -> Simulation:
    sim = _ready(new(SimulationConfig.uniform(brokers=4, dirs=3, racks=2)))
    sim.create_topic("orders", 12, 3)
    sim.create_topic("payments", 6, 3)
    _settle(sim)
    sim.fail_dir(2, "data-1")
    sim.run_for(30_000)
    sim.restart_broker(2, failed_dirs=FailedDirPolicy.REPLACE)
    return _settle(sim)


# ------------------------------------------------------------------------------------------------------------
# Disk failures


@scenario("single-disk-failure", "One of broker 2's three dirs fails: the BrokerRegistrationChangeRecord drops it and "
                                 "in the same batch the broker leaves the ISR and leadership of its replicas there; a "
                                 "single-replica partition keeps ISR=[2] with no leader.", pains=("S3", "I16", "I15"))
def _single_disk_failure(new: SimFactory) -> Simulation:
    sim = _ready(new(SimulationConfig.uniform(brokers=3, dirs=3)))
    sim.create_topic("events", 9, 3)
    sim.create_topic("scratch", assignments=[[2], [1], [2]])
    _settle(sim)
    sim.fail_dir(2, sim.replica_dir(2, "scratch", 0))
    return _settle(sim)


@scenario("disk-failure-during-placement", "A topic is created; one broker's chosen dir fails while its "
                                           "AssignReplicasToDirs is still queued, another's while it is in flight: the "
                                           "late assignments name offline dirs and the controller demotes those "
                                           "replicas (the TLA+ liveness case).",
          pains=("TLA+ AlwaysEventuallyAnyOfflineReplicaGetsLeadershipUpdate",))
def _disk_failure_during_placement(new: SimFactory) -> Simulation:
    sim = _ready(new(SimulationConfig.uniform(brokers=3, dirs=3)))
    sim.create_topic("fresh", 12, 3)
    b1, b2 = sim.broker(1), sim.broker(2)
    _must(sim.run_until(lambda: bool(b1.assignments.ready), timeout_ms=5000), "broker 1 queues assignments")
    queued = next(iter(b1.assignments.ready.values()))
    sim.fail_dir(1, b1.logs[queued.tp].directory.name)
    _must(sim.run_until(lambda: bool(b2.assignments.inflight), timeout_ms=5000), "broker 2 sends assignments")
    inflight = next(iter(b2.assignments.inflight.values()))
    sim.fail_dir(2, b2.logs[inflight.tp].directory.name)
    return _settle(sim)


@scenario("broker-restart-with-failed-disk", "Broker 1 loses a dir, then restarts with it still configured: it "
                                             "registers without it (new incarnation), does not re-create its replicas "
                                             "on the healthy dirs (KAFKA-16234), and they stay offline; a topic "
                                             "created afterwards lands on the survivors.", pains=("S4", "KAFKA-16234"))
def _broker_restart_with_failed_disk(new: SimFactory) -> Simulation:
    sim = _ready(new(SimulationConfig.uniform(brokers=3, dirs=3)))
    sim.create_topic("orders", 9, 3)
    _settle(sim)
    sim.fail_dir(1, "data-0")
    _settle(sim)
    sim.restart_broker(1, failed_dirs=FailedDirPolicy.KEEP)
    _settle(sim)
    sim.create_topic("after-restart", 6, 3)
    return _settle(sim)


@scenario("fast-restart-with-new-disk", "Broker 2 crashes after a disk failure and comes back with the disk replaced "
                                        "before its old session expires: registration is refused "
                                        "(DUPLICATE_BROKER_REGISTRATION) until the session is fenced, but the first "
                                        "metadata publish already re-creates the lost replicas on the new disk and "
                                        "AssignmentsManager sends them under the old incarnation's epoch (3.9 reads it "
                                        "from the metadata image): the controller accepts assignments to a directory "
                                        "no broker has registered yet (I21) and treats them as offline. Any delay of "
                                        "the new registration (e.g. an overloaded controller) opens the same window.",
          pains=("KAFKA-17190", "I21"), expected_invariants=frozenset({"I21"}))
def _fast_restart_new_disk(new: SimFactory) -> Simulation:
    sim = _ready(new(SimulationConfig.uniform(brokers=3, dirs=3)))
    sim.create_topic("orders", 9, 3)
    _settle(sim)
    sim.fail_dir(2, "data-1")
    sim.run_for(2000)
    sim.restart_broker(2, clean=False, downtime_ms=500, failed_dirs=FailedDirPolicy.REPLACE)
    return _settle(sim)


@scenario("unfenced-onto-failed-dir", "Broker 3 is cut off from the controller; meanwhile the dir holding the only "
                                      "replica of solo-0 fails and the session expires (solo-0 leaderless, ISR=[3]). "
                                      "Its first heartbeat back both unfences it and reports the dir, both computed "
                                      "from the pre-heartbeat state (semantics quirk §6.4): the unfence election makes "
                                      "it leader on the dead dir, the offline-dir handling sees a leaderless partition "
                                      "and writes nothing. A leader on an offline dir that nothing corrects.",
          pains=("semantics quirk §6.4", "I14", "I16"),
          expected=frozenset({TlaProperty.ANY_OFFLINE_REPLICA_GETS_LEADERSHIP_UPDATE}),
          expected_invariants=frozenset({"I14", "I16"}))
def _unfenced_onto_failed_dir(new: SimFactory) -> Simulation:
    sim = _ready(new(SimulationConfig.uniform(brokers=3, dirs=3)))
    sim.create_topic("solo", assignments=[[3]])
    sim.create_topic("orders", 6, 3)
    _settle(sim)
    sim.isolate_broker(3, 15_000)
    sim.fail_dir(3, sim.replica_dir(3, "solo", 0))
    return _settle(sim)


@scenario("last-dir-fails-broker-halts", "Broker 3's data dirs fail one after another: the first two are reported "
                                         "(LogDirs shrinks), the last one halts the broker, which is fenced when its "
                                         "session expires — not a directory event.", pains=("S10",))
def _last_dir_fails(new: SimFactory) -> Simulation:
    sim = _ready(new(SimulationConfig.uniform(brokers=3, dirs=3)))
    sim.create_topic("orders", 9, 3)
    _settle(sim)
    for name in ("data-0", "data-1", "data-2"):
        sim.fail_dir(3, name)
        sim.run_for(5000)
    return _settle(sim)


@scenario("metadata-dir-fails-broker-halts", "The disk holding broker 2's metadata log fails: the broker halts "
                                             "(ReplicaManager.handleLogDirFailure) and is fenced, even though its data "
                                             "dirs are fine; broker 3 keeps its metadata log in its first data dir "
                                             "(metadata.log.dir unset) and halts when that dir fails.",
          pains=("S10", "KAFKA-16195"))
def _metadata_dir_fails(new: SimFactory) -> Simulation:
    specs = (BrokerSpec(1), BrokerSpec(2), BrokerSpec(3, metadata_dir=MetadataDirPlacement.SHARED))
    sim = _ready(new(SimulationConfig(brokers=specs)))
    sim.create_topic("orders", 9, 3)
    _settle(sim)
    sim.fail_metadata_dir(2)
    sim.run_for(15_000)
    sim.fail_dir(3, "data-0")
    return _settle(sim)


@scenario("unreported-failure-timeout", "Broker 2's heartbeats expire in an overloaded controller (liveness is "
                                        "refreshed, the offline dir never processed) when one of its dirs fails: its "
                                        "leaders stay on the dead disk until log.dir.failure.timeout.ms (30 s) shuts "
                                        "it down and it is fenced.", pains=("KAFKA-15649",))
def _unreported_failure(new: SimFactory) -> Simulation:
    sim = _ready(new(SimulationConfig.uniform(brokers=3, dirs=3)))
    sim.create_topic("orders", 9, 3)
    _settle(sim)
    sim.overload_controller(60_000, brokers=[2])
    sim.fail_dir(2, "data-0")
    sim.run_for(60_000)
    sim.restart_broker(2)
    return _settle(sim)


@scenario("jbod-on-old-mv-disk-failure", "JBOD brokers at metadata.version 3.6: a dir fails, the heartbeat's "
                                         "OfflineLogDirs is accepted but ignored, so no leader moves and the replicas "
                                         "stay 'online' in the metadata while physically dead — the indefinite "
                                         "unavailability KAFKA-16606 warned about (its gate was reverted).",
          pains=("KAFKA-16606", "KAFKA-16969", "operators-and-peers row 3"),
          expected=frozenset({TlaProperty.ANY_OFFLINE_REPLICA_GETS_LEADERSHIP_UPDATE,
                              TlaProperty.GROUND_TRUTH_MATCHES_REPLICA_VIEW}))
def _jbod_old_mv(new: SimFactory) -> Simulation:
    sim = _ready(new(SimulationConfig.uniform(brokers=3, dirs=2, metadata_version=MV_3_6)))
    sim.create_topic("orders", 6, 3)
    _settle(sim)
    sim.fail_dir(1, "data-0")
    return _settle(sim)


# ------------------------------------------------------------------------------------------------------------
# Moves and reassignments


@scenario("intra-broker-move", "Two replicas move between dirs of their broker (AlterReplicaLogDirs): the future "
                               "replica catches up, the broker assigns the partition to the new dir, and promotes the "
                               "future replica only once the controller accepted it.", pains=("S5", "KIP-113"))
def _intra_broker_move(new: SimFactory) -> Simulation:
    sim = _ready(new(SimulationConfig.uniform(brokers=3, dirs=3)))
    sim.create_topic("orders", 6, 3)
    _settle(sim)
    sim.alter_replica_log_dir(1, "orders", 0, sim.other_dir(1, "orders", 0))
    sim.alter_replica_log_dir(2, "orders", 1, sim.other_dir(2, "orders", 1))
    return _settle(sim)


@scenario("move-reverted-by-disk-failure", "Two moves interrupted by disk failures: broker 1's destination dir fails "
                                           "after the controller accepted the move but before the promotion (the "
                                           "broker reverts the assignment to the source); broker 2's source dir fails "
                                           "while the move is queued (the revert names the dead source dir, so the "
                                           "controller demotes the replica).", pains=("S5", "KAFKA-16297"))
def _move_reverted(new: SimFactory) -> Simulation:
    sim = _ready(new(SimulationConfig.uniform(brokers=3, dirs=3)))
    sim.create_topic("orders", 6, 3)
    _settle(sim)
    destination = sim.other_dir(1, "orders", 0)
    sim.alter_replica_log_dir(1, "orders", 0, destination)
    _must(sim.run_until(lambda: sim.move_state(1, "orders", 0) is MoveState.ACCEPTED, timeout_ms=10_000),
          "broker 1's move is accepted")
    sim.fail_dir(1, destination)
    _settle(sim)
    source = sim.replica_dir(2, "orders", 1)
    sim.alter_replica_log_dir(2, "orders", 1, sim.other_dir(2, "orders", 1))
    _must(sim.run_until(lambda: sim.move_state(2, "orders", 1) is MoveState.QUEUED, timeout_ms=10_000),
          "broker 2's move is queued")
    sim.fail_dir(2, source)
    return _settle(sim)


@scenario("crash-mid-intra-broker-move", "Broker 1 crashes after the controller accepted a move and before the "
                                         "promotion; on restart the metadata names the future replica's dir while the "
                                         "log is still in the source, and the broker corrects it with "
                                         "AssignReplicasToDirs (the model discards the abandoned future replica).",
          pains=("S5", "KAFKA-16082"))
def _crash_mid_move(new: SimFactory) -> Simulation:
    sim = _ready(new(SimulationConfig.uniform(brokers=3, dirs=3)))
    sim.create_topic("orders", 6, 3)
    _settle(sim)
    sim.alter_replica_log_dir(1, "orders", 0, sim.other_dir(1, "orders", 0))
    _must(sim.run_until(lambda: sim.move_state(1, "orders", 0) is MoveState.ACCEPTED, timeout_ms=10_000),
          "the move is accepted")
    sim.restart_broker(1, clean=False, downtime_ms=12_000)
    return _settle(sim)


@scenario("reassignment-during-failure", "Two reassignments meet disk failures: the new replica of orders-0 on broker "
                                         "4 lands on a dir that fails while it catches up, so the reassignment cannot "
                                         "finish and is cancelled; a removing replica of orders-1 fails and the "
                                         "reassignment still completes through AlterPartition.",
          pains=("R11", "I18"))
def _reassignment_during_failure(new: SimFactory) -> Simulation:
    sim = _ready(new(SimulationConfig.uniform(brokers=4, dirs=3)))
    sim.create_topic("orders", assignments=[[1, 2, 3], [1, 2, 3], [2, 3, 1]])
    _settle(sim)
    tp0 = sim.partition_key("orders", 0)
    sim.reassign("orders", 0, [1, 2, 4])
    _must(sim.run_until(lambda: tp0 in sim.broker(4).logs, timeout_ms=5000), "broker 4 creates orders-0")
    sim.fail_dir(4, sim.replica_dir(4, "orders", 0))
    sim.run_for(10_000)
    sim.reassign("orders", 0, None)
    sim.reassign("orders", 1, [1, 2, 4])
    sim.fail_dir(3, sim.replica_dir(3, "orders", 1))
    return _settle(sim)


@scenario("pending-assignment-dropped", "Assignments that lost their reason: a topic deleted while its assignments "
                                        "are queued (dropped before sending, KAFKA-17190) and a replica reassigned "
                                        "away while its assignment is in flight (NOT_LEADER_OR_FOLLOWER, no retry: "
                                        "KAFKA-16886).", pains=("S6", "KAFKA-17190", "KAFKA-16886"))
def _pending_assignment_dropped(new: SimFactory) -> Simulation:
    sim = _ready(new(SimulationConfig.uniform(brokers=3, dirs=3)))
    sim.create_topic("doomed", 6, 3)
    _must(sim.run_until(lambda: bool(sim.broker(1).assignments.ready), timeout_ms=5000), "assignments queued")
    sim.delete_topic("doomed")
    _settle(sim)
    sim.create_topic("moving", assignments=[[1, 2, 3]])
    b3 = sim.broker(3)
    _must(sim.run_until(lambda: bool(b3.assignments.inflight), timeout_ms=5000), "broker 3 sends its assignment")
    sim.reassign("moving", 0, [1, 2])
    return _settle(sim)


# ------------------------------------------------------------------------------------------------------------
# Topics


@scenario("topic-recreated-while-dir-offline", "orders is deleted and re-created with the same name while the dir "
                                               "holding its old replica on broker 1 is offline: the new topic id gets "
                                               "new replicas on the online dirs (KAFKA-16157).",
          pains=("S7", "KAFKA-16157"))
def _topic_recreated(new: SimFactory) -> Simulation:
    sim = _ready(new(SimulationConfig.uniform(brokers=3, dirs=3)))
    sim.create_topic("orders", assignments=[[1, 2, 3], [2, 3, 1], [3, 1, 2]])
    _settle(sim)
    sim.fail_dir(1, sim.replica_dir(1, "orders", 0))
    _settle(sim)
    sim.delete_topic("orders")
    sim.run_for(2000)
    sim.create_topic("orders", assignments=[[1, 2, 3], [2, 3, 1], [3, 1, 2]])
    _settle(sim)
    sim.restart_broker(1)
    return _settle(sim)


@scenario("disk-removed-with-replicas", "An operator takes a healthy disk that still holds replicas out of broker "
                                        "2's log.dirs: with no offline dir the broker re-creates those replicas, "
                                        "empty, on its other dirs and re-assigns them: for the single-replica "
                                        "partition that is data loss nobody reports.",
          pains=("Strimzi #9640", "row 14"))
def _disk_removed(new: SimFactory) -> Simulation:
    sim = _ready(new(SimulationConfig.uniform(brokers=3, dirs=3)))
    sim.create_topic("orders", 6, 3)
    sim.create_topic("solo", assignments=[[2], [2]])
    _settle(sim)
    sim.restart_broker(2, remove_dirs=[sim.replica_dir(2, "solo", 0)])
    return _settle(sim)


# ------------------------------------------------------------------------------------------------------------
# Upgrades and migrations


@scenario("mv-upgrade-3.6-to-3.7", "JBOD brokers registered at metadata.version 3.6 (no LogDirs, every replica "
                                   "MIGRATING); the upgrade to 3.7-IV2 makes each re-register with the same "
                                   "incarnation and its dirs (BrokerRegistrationTracker); new topics get real dirs at "
                                   "once, old ones after the rolling restart.",
          pains=("S1", "KAFKA-16162", "KAFKA-16757", "KAFKA-16131"))
def _mv_upgrade(new: SimFactory) -> Simulation:
    sim = _ready(new(SimulationConfig.uniform(brokers=3, dirs=2, metadata_version=MV_3_6)))
    sim.create_topic("legacy", 6, 3)
    _settle(sim)
    sim.set_metadata_version(MV_3_7_IV2)
    _settle(sim)
    sim.create_topic("modern", 6, 3)
    _settle(sim)
    for broker_id in sorted(sim.brokers):
        sim.restart_broker(broker_id)
        _settle(sim)
    return sim


@scenario("reassignment-under-old-mv", "A reassignment at metadata.version 3.6 writes PartitionChangeRecords v0 "
                                       "without Directories; after the upgrade and a rolling restart the moved "
                                       "replicas get their real dirs like every other.", pains=("S2", "KAFKA-16583"))
def _reassignment_old_mv(new: SimFactory) -> Simulation:
    sim = _ready(new(SimulationConfig.uniform(brokers=4, dirs=2, metadata_version=MV_3_6)))
    sim.create_topic("orders", assignments=[[1, 2, 3], [2, 3, 1]])
    _settle(sim)
    sim.reassign("orders", 0, [2, 3, 4])
    _settle(sim)
    sim.set_metadata_version(MV_3_7_IV2)
    _settle(sim)
    for broker_id in sorted(sim.brokers):
        sim.restart_broker(broker_id)
        _settle(sim)
    return sim


@scenario("zk-migration-migrating-dirs", "ZooKeeper-mode brokers register with their dirs during a migration, the "
                                         "bulk migration writes their partitions without Directories (MIGRATING), and "
                                         "the rolling restart into KRaft mode replaces MIGRATING with the real dirs "
                                         "through AssignReplicasToDirs.", pains=("S9", "KIP-866", "row 17"))
def _zk_migration(new: SimFactory) -> Simulation:
    sim = new(SimulationConfig.uniform(brokers=3, dirs=3))
    sim.begin_zk_migration()
    _ready(sim, zk_mode=True)
    sim.migrate_zk_topics([("legacy", 6, 3), ("clicks", 3, 2)])
    _settle(sim)
    for broker_id in sorted(sim.brokers):
        sim.restart_broker(broker_id)
        _settle(sim)
    return sim


@scenario("zk-migration-dir-failure", "A dir fails on a ZooKeeper-mode broker during the migration: the broker halts "
                                      "(KAFKA-16431). Restarted in KRaft mode with the dead disk still configured, it "
                                      "cannot re-create the MIGRATING replicas that lived there, yet MIGRATING counts "
                                      "as online: the metadata shows replicas that do not exist.",
          pains=("KAFKA-16431", "row 17"),
          expected=frozenset({TlaProperty.GROUND_TRUTH_MATCHES_REPLICA_VIEW}))
def _zk_migration_failure(new: SimFactory) -> Simulation:
    sim = new(SimulationConfig.uniform(brokers=3, dirs=3))
    sim.begin_zk_migration()
    _ready(sim, zk_mode=True)
    sim.migrate_zk_topics([("legacy", 6, 3)])
    _settle(sim)
    sim.fail_dir(3, "data-0")
    _settle(sim)
    for broker_id in sorted(sim.brokers):
        sim.restart_broker(broker_id)
        _settle(sim)
    return sim


@scenario("single-to-multi-dir", "Single-dir brokers (new replicas get the concrete dir id, no assignment needed) "
                                 "are restarted one by one with two more log dirs: old replicas keep their dir, new "
                                 "topics spread over the new ones through AssignReplicasToDirs, and a move rebalances.",
          pains=("S8", "I11", "KIP-858 migration plan"))
def _single_to_multi(new: SimFactory) -> Simulation:
    sim = _ready(new(SimulationConfig.uniform(brokers=3, dirs=1)))
    sim.create_topic("orders", 6, 3)
    _settle(sim)
    for broker_id in sorted(sim.brokers):
        sim.restart_broker(broker_id, add_dirs=2)
        _settle(sim)
    sim.create_topic("spread", 6, 3)
    _settle(sim)
    sim.alter_replica_log_dir(1, "orders", 0, "data-1")
    return _settle(sim)


@scenario("single-dir-broker-concrete-uuid", "A mixed cluster: single-dir brokers get their replicas' dir id straight "
                                             "from the controller (defaultDir), multi-dir brokers get UNASSIGNED and "
                                             "report; a 2-dir broker that loses one dir has one online dir left and "
                                             "gets concrete ids from then on.", pains=("S8", "I11", "KAFKA-15886"))
def _mixed_dirs(new: SimFactory) -> Simulation:
    specs = (BrokerSpec(1, dirs=1), BrokerSpec(2, dirs=1), BrokerSpec(3, dirs=3), BrokerSpec(4, dirs=2))
    sim = _ready(new(SimulationConfig(brokers=specs)))
    sim.create_topic("orders", 8, 3)
    _settle(sim)
    sim.fail_dir(4, "data-1")
    _settle(sim)
    sim.create_topic("after", 8, 3)
    return _settle(sim)
