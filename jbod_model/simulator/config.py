"""What a simulation runs: the cluster's shape, the broker and controller timings, and seeded identifiers.

Timings default to Kafka's shipped configuration (``KafkaConfig`` / ``KRaftConfigs`` / ``ServerLogConfigs`` on the
3.9 branch) wherever one exists: ``broker.heartbeat.interval.ms`` 2000, ``broker.session.timeout.ms`` 9000,
``log.dir.failure.timeout.ms`` 30000, and the AssignmentsManager's ``STANDARD_BACKOFF`` (100 ms, ×2, 10 s, 2 %
jitter). The rest (RPC latency, metadata fetch lag, replica catch-up) are properties of a real cluster's hardware
and load, not settings; they are drawn uniformly from the given ``(low, high)`` ranges with the seeded generator.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from enum import StrEnum

from jbod_model.directory_id import is_reserved
from jbod_model.metadata_version import LATEST_PRODUCTION
from jbod_model.uuid import ONE_UUID, ZERO_UUID, Uuid

#: ``AssignReplicasToDirsRequest.MAX_ASSIGNMENTS_PER_REQUEST``: the broker-side batching limit.
MAX_ASSIGNMENTS_PER_REQUEST = 2250
#: The epoch of the single simulated controller leadership (the LEADER_CHANGE control batch at offset 0).
DEFAULT_LEADER_EPOCH = 1
#: 2024-06-01T00:00:00Z: batch timestamps are this plus the simulated clock, so a run is reproducible.
DEFAULT_START_TIME_MS = 1_717_200_000_000
#: The controller's node id (``node.id`` of the KRaft quorum's only voter).
DEFAULT_CONTROLLER_ID = 3000


class MetadataDirPlacement(StrEnum):
    """Where a broker keeps the cluster metadata log (``metadata.log.dir``)."""

    #: ``metadata.log.dir`` names its own disk, beside the data log dirs (the KIP's recommended layout).
    SEPARATE = "separate"
    #: ``metadata.log.dir`` is unset, so the metadata log lives in the first of ``log.dirs`` (Kafka's default):
    #: that data dir failing halts the broker (``ReplicaManager.handleLogDirFailure``).
    SHARED = "shared"


@dataclass(frozen=True, slots=True)
class BrokerSpec:
    """One broker: its id, how many data log dirs it has (``log.dirs``), its rack and metadata dir placement."""

    broker_id: int
    dirs: int = 3
    rack: str | None = None
    metadata_dir: MetadataDirPlacement = MetadataDirPlacement.SEPARATE

    def __post_init__(self) -> None:
        if self.broker_id < 0:
            raise ValueError(f"broker id must not be negative, got {self.broker_id}")
        if self.dirs < 1:
            raise ValueError(f"broker {self.broker_id} needs at least one log dir, got {self.dirs}")


Range = tuple[int, int]


@dataclass(frozen=True, slots=True)
class Timings:
    """Broker and controller timings in milliseconds (see the module docstring for their sources)."""

    #: ``broker.heartbeat.interval.ms``.
    heartbeat_interval_ms: int = 2000
    #: ``broker.session.timeout.ms``: the controller fences a broker it has not heard from for this long.
    session_timeout_ms: int = 9000
    #: How often the controller looks for expired sessions (``QuorumController``'s periodic fencing check).
    session_check_interval_ms: int = 1000
    #: BrokerLifecycleManager's heartbeat period while STARTING (10 ms) and after the first controlled-shutdown
    #: response (50 ms).
    starting_heartbeat_ms: int = 10
    controlled_shutdown_heartbeat_ms: int = 50
    #: BrokerLifecycleManager's ``resendExponentialBackoff`` (registration and heartbeat retries): 100 ms doubling
    #: up to ``broker.session.timeout.ms``.
    lifecycle_backoff_initial_ms: int = 100
    lifecycle_backoff_max_ms: int = 9000
    #: AssignmentsManager ``STANDARD_BACKOFF``: the batching delay and the retry backoff after a global failure.
    assignment_backoff_initial_ms: int = 100
    assignment_backoff_max_ms: int = 10_000
    #: ``log.dir.failure.timeout.ms`` (KAFKA-15649, 3.8+): shut down when a failure is not acknowledged in time.
    log_dir_failure_timeout_ms: int = 30_000
    #: How long a broker waits for its controlled shutdown before stopping anyway.
    controlled_shutdown_timeout_ms: int = 9000
    #: One-way broker ⇄ controller latency.
    rpc_latency_ms: Range = (1, 3)
    #: A request that gets no answer (lost or expired in the controller's queue) fails after this long.
    request_timeout_ms: int = 4000
    #: The lag between a record's commit and a broker's metadata publisher seeing it.
    metadata_fetch_delay_ms: Range = (2, 20)
    #: How long a new or restarted follower needs to catch up with its leader.
    replica_catch_up_ms: Range = (300, 1500)
    #: ReplicaAlterLogDirsThread: time until a future replica first catches up with the current one.
    future_catch_up_ms: Range = (1000, 3000)
    #: The second catch-up after the controller accepted the move, before the future replica is promoted.
    promotion_delay_ms: Range = (2, 10)
    #: How often partition leaders look for followers to add back to the ISR (AlterPartition).
    isr_check_interval_ms: int = 500

    def draw(self, rng: random.Random, span: Range) -> int:
        """A value of ``span`` drawn with the seeded generator."""
        low, high = span
        return low if high <= low else rng.randint(low, high)


@dataclass(frozen=True, slots=True)
class SimulationConfig:
    """Everything a run needs besides its seed and script.

    ``metadata_version`` is the feature level finalized at bootstrap (default: the 3.9 branch's latest production
    level, 3.9-IV0 = 21). ``cluster_id`` None draws one from the seed. ``max_supported_metadata_version`` is what
    the simulated brokers' software supports (3.9: 21). ``noop_interval_ms`` makes the active controller append a
    NoOpRecord that often (``metadata.max.idle.interval.ms``, 500 in Kafka); off by default to keep small runs
    small. ``track_truth`` keeps the ground-truth offline timeline; ``monitor`` checks the TLA+ properties and the
    named invariants after every controller write (off for very large runs).
    """

    brokers: tuple[BrokerSpec, ...] = ()
    metadata_version: int = LATEST_PRODUCTION.feature_level
    cluster_id: str | None = None
    controller_id: int = DEFAULT_CONTROLLER_ID
    leader_epoch: int = DEFAULT_LEADER_EPOCH
    start_time_ms: int = DEFAULT_START_TIME_MS
    timings: Timings = field(default_factory=Timings)
    max_supported_metadata_version: int = LATEST_PRODUCTION.feature_level
    default_replication_factor: int = 3
    default_partitions: int = 1
    unclean_leader_election_enable: bool = False
    noop_interval_ms: int | None = None
    track_truth: bool = True
    monitor: bool = True

    @classmethod
    def uniform(cls, brokers: int = 3, dirs: int = 3, *, first_broker_id: int = 1, racks: int = 0,
                metadata_dir: MetadataDirPlacement = MetadataDirPlacement.SEPARATE,
                **kwargs: object) -> SimulationConfig:
        """``brokers`` identical brokers with ``dirs`` log dirs each, ids from ``first_broker_id``; ``racks`` > 0
        spreads them round-robin over racks ``rack-0`` …"""
        specs = tuple(BrokerSpec(broker_id=first_broker_id + i, dirs=dirs,
                                 rack=f"rack-{i % racks}" if racks > 0 else None, metadata_dir=metadata_dir)
                      for i in range(brokers))
        return cls(brokers=specs, **kwargs)  # type: ignore[arg-type]


def random_uuid(rng: random.Random) -> Uuid:
    """``Uuid.randomUuid`` from the seeded generator: a version-4 id, re-drawn while it is ZERO, ONE or prints
    with a leading '-'."""
    while True:
        raw = bytearray(rng.getrandbits(128).to_bytes(16, "big"))
        raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
        raw[8] = (raw[8] & 0x3F) | 0x80  # IETF variant
        candidate = Uuid.from_bytes(bytes(raw))
        if candidate not in (ZERO_UUID, ONE_UUID) and not str(candidate).startswith("-"):
            return candidate


def random_directory_id(rng: random.Random) -> Uuid:
    """``DirectoryId.random`` from the seeded generator: never one of the reserved ids (nor ZERO/ONE)."""
    while True:
        candidate = random_uuid(rng)
        if not is_reserved(candidate):
            return candidate


def exponential_backoff(attempts: int, *, initial_ms: int, max_ms: int, rng: random.Random,
                        multiplier: float = 2.0, jitter: float = 0.02) -> int:
    """``org.apache.kafka.common.utils.ExponentialBackoff.backoff``: ``initial × multiplier^attempts`` with ±jitter,
    capped at ``max_ms``."""
    if initial_ms >= max_ms:
        return max_ms
    term = initial_ms * multiplier ** max(attempts, 0)
    factor = rng.uniform(1 - jitter, 1 + jitter) if jitter > 0 else 1.0
    return min(int(factor * term), max_ms)
