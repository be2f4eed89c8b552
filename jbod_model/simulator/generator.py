"""Generated runs: random fault schedules for the property tests, and clusters of a given size for the CLI and the
scale benchmark.

:func:`random_run` draws a sequence of operations — topic creation, deletion and re-creation, disk failures
(data and metadata dirs), clean and unclean restarts (with the failed disks kept, removed or replaced), intra-broker
moves, reassignments and their cancellation, controller overload and broker isolation — with random gaps between
them (some only milliseconds, to land inside in-flight windows), then lets the cluster settle. The choices use
their own generator seeded from the run's seed, so a run is reproducible from ``(seed, spec)`` alone.

:func:`sized_run` builds a cluster of ``brokers`` × ``dirs`` and creates ``partitions`` partitions over ``topics``
topics in batched CreateTopics requests, optionally failing some disks afterwards; with an
:class:`~jbod_model.simulator.output.OutputWriter` as sink the log goes straight to disk.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import StrEnum

from jbod_model.simulator.cluster import FailedDirPolicy, Simulation, SimulationError
from jbod_model.simulator.config import MetadataDirPlacement, SimulationConfig
from jbod_model.simulator.output import SimulationResult, SimulationSink


class Operation(StrEnum):
    """What a random run may do."""

    CREATE_TOPIC = "CREATE_TOPIC"
    DELETE_TOPIC = "DELETE_TOPIC"
    RECREATE_TOPIC = "RECREATE_TOPIC"
    FAIL_DIR = "FAIL_DIR"
    FAIL_METADATA_DIR = "FAIL_METADATA_DIR"
    RESTART = "RESTART"
    CRASH_RESTART = "CRASH_RESTART"
    MOVE = "MOVE"
    REASSIGN = "REASSIGN"
    CANCEL_REASSIGNMENT = "CANCEL_REASSIGNMENT"
    OVERLOAD = "OVERLOAD"
    ISOLATE = "ISOLATE"


#: Relative frequencies of the operations (faults are common: that is what the properties are about).
DEFAULT_WEIGHTS: dict[Operation, int] = {
    Operation.CREATE_TOPIC: 4, Operation.DELETE_TOPIC: 1, Operation.RECREATE_TOPIC: 1, Operation.FAIL_DIR: 4,
    Operation.FAIL_METADATA_DIR: 1, Operation.RESTART: 2, Operation.CRASH_RESTART: 1, Operation.MOVE: 3,
    Operation.REASSIGN: 2, Operation.CANCEL_REASSIGNMENT: 1, Operation.OVERLOAD: 1, Operation.ISOLATE: 1,
}


@dataclass(frozen=True, slots=True)
class RandomRunSpec:
    """The shape of a random run: cluster size, initial topics, how many operations and how far apart."""

    brokers: int = 4
    dirs: int = 3
    initial_topics: int = 2
    max_partitions: int = 6
    operations: int = 12
    max_gap_ms: int = 8000
    settle_timeout_ms: int = 900_000
    #: Brokers with 1..``dirs`` log dirs, some keeping the metadata log in their first data dir.
    heterogeneous: bool = False
    #: The metadata.version the cluster is bootstrapped at.
    metadata_version: int = SimulationConfig().metadata_version


def random_run(seed: int, spec: RandomRunSpec = RandomRunSpec(), *, sink: SimulationSink | None = None,
               configure: Callable[[SimulationConfig], SimulationConfig] | None = None) -> SimulationResult:
    """One random run (see the module docstring); the result's ``quiescent`` says whether it settled."""
    ops = random.Random(seed * 7919 + 17)
    config = SimulationConfig.uniform(brokers=spec.brokers, dirs=spec.dirs, racks=2,
                                      metadata_version=spec.metadata_version)
    if spec.heterogeneous:
        config = replace(config, brokers=tuple(
            replace(b, dirs=ops.randint(1, spec.dirs),
                    metadata_dir=MetadataDirPlacement.SHARED if ops.random() < 0.3 else MetadataDirPlacement.SEPARATE)
            for b in config.brokers))
    if configure is not None:
        config = configure(config)
    sim = Simulation(config, seed, sink=sink, name=f"random-{seed}",
                     description=f"random run: {spec.operations} operations on {spec.brokers} brokers × "
                                 f"{'up to ' if spec.heterogeneous else ''}{spec.dirs} dirs")
    sim.start_brokers()
    sim.run_until_quiescent(timeout_ms=60_000)
    topics: list[str] = []
    counter = 0

    def create() -> None:
        nonlocal counter
        name = f"topic-{counter}"
        counter += 1
        rf = ops.randint(1, min(3, spec.brokers))
        try:
            sim.create_topic(name, ops.randint(1, spec.max_partitions), rf)
            topics.append(name)
        except SimulationError:
            pass  # e.g. too few unfenced brokers right now: CreateTopics refused

    for _ in range(spec.initial_topics):
        create()
    choices = list(DEFAULT_WEIGHTS)
    weights = [DEFAULT_WEIGHTS[o] for o in choices]
    for _ in range(spec.operations):
        sim.run_for(ops.choice((0, 1, 5, 50, 150, ops.randint(0, spec.max_gap_ms))))
        _apply(sim, ops.choices(choices, weights)[0], ops, topics, create, spec)
    sim.run_until_quiescent(timeout_ms=spec.settle_timeout_ms)
    return sim.result()


def _apply(sim: Simulation, op: Operation, ops: random.Random, topics: list[str], create: Callable[[], None],
           spec: RandomRunSpec) -> None:
    brokers = sorted(sim.brokers)
    running = [b for b in brokers if sim.broker(b).running]
    live_topics = [t for t in topics if t in sim.image.topics.by_name]
    if op is Operation.CREATE_TOPIC:
        create()
    elif op in (Operation.DELETE_TOPIC, Operation.RECREATE_TOPIC) and live_topics:
        name = ops.choice(live_topics)
        sim.delete_topic(name)
        topics.remove(name)
        if op is Operation.RECREATE_TOPIC:
            sim.run_for(ops.choice((0, 10, 500)))
            try:
                sim.create_topic(name, ops.randint(1, spec.max_partitions), ops.randint(1, min(3, len(brokers))))
                topics.append(name)
            except SimulationError:
                pass
    elif op is Operation.FAIL_DIR and running:
        broker = sim.broker(ops.choice(running))
        online = broker.online_data_dirs()
        if online:
            sim.fail_dir(broker.id, ops.choice(online).name)
    elif op is Operation.FAIL_METADATA_DIR and running:
        sim.fail_metadata_dir(ops.choice(running))
    elif op in (Operation.RESTART, Operation.CRASH_RESTART):
        b = ops.choice(brokers)
        policy = ops.choice(list(FailedDirPolicy))
        broker = sim.broker(b)
        if broker.running:
            sim.stop_broker(b, clean=op is Operation.RESTART)
            sim.run_until(lambda: not broker.running, timeout_ms=sim.timings.controlled_shutdown_timeout_ms + 1000)
            sim.run_for(ops.randint(100, 15_000))
        else:
            policy = FailedDirPolicy.REPLACE if ops.random() < 0.7 else policy
        if policy is FailedDirPolicy.REMOVE and all(d.failed for d in broker.data_dirs):
            policy = FailedDirPolicy.REPLACE  # removing every disk leaves nothing to start with
        if not broker.running:
            sim.start_broker(b, failed_dirs=policy)
    elif op is Operation.MOVE and running:
        broker = sim.broker(ops.choice(running))
        movable = sorted((tp for tp, log in broker.logs.items() if not log.directory.failed and tp not in broker.moves),
                         key=lambda tp: (str(tp.topic_id), tp.partition_id))
        targets = broker.online_data_dirs()
        if movable and len(targets) > 1:
            tp = ops.choice(movable)
            current = broker.logs[tp].directory
            broker.alter_replica_log_dir(tp, ops.choice([d for d in targets if d is not current]))
    elif op is Operation.REASSIGN and live_topics:
        name = ops.choice(live_topics)
        topic = sim.image.topics.by_id[sim.topic_id(name)]
        pid = ops.choice(sorted(topic.partitions))
        rf = len(topic.partitions[pid].replicas)
        sim.reassign(name, pid, ops.sample(brokers, min(rf, len(brokers))))
    elif op is Operation.CANCEL_REASSIGNMENT and live_topics:
        name = ops.choice(live_topics)
        topic = sim.image.topics.by_id[sim.topic_id(name)]
        sim.reassign(name, ops.choice(sorted(topic.partitions)), None)
    elif op is Operation.OVERLOAD:
        sim.overload_controller(ops.randint(1000, 40_000), brokers=[ops.choice(brokers)])
    elif op is Operation.ISOLATE:
        sim.isolate_broker(ops.choice(brokers), ops.randint(1000, 20_000))


def sized_run(*, brokers: int, dirs: int, partitions: int, topics: int = 0, replication_factor: int = 3,
              seed: int = 0, failures: int = 0, sink: SimulationSink | None = None,
              partitions_per_request: int = 20_000, request_interval_ms: int = 1000, monitor: bool | None = None,
              track_truth: bool = True, progress: Callable[[Simulation, int], None] | None = None,
              config: SimulationConfig | None = None) -> Simulation:
    """A cluster of ``brokers`` × ``dirs`` with ``partitions`` partitions spread over ``topics`` topics (default:
    about 1000 partitions per topic), created ``partitions_per_request`` at a time ``request_interval_ms`` apart;
    then ``failures`` random data dirs fail. Monitoring is on for small clusters only (``monitor`` None). Returns the
    settled simulation (``.result()`` gives the outputs); ``progress(sim, partitions_created)`` is called after each
    CreateTopics."""
    if partitions < 0 or brokers < 1 or dirs < 1:
        raise SimulationError("brokers and dirs must be at least 1 and partitions not negative")
    topic_count = topics if topics > 0 else max(1, -(-partitions // 1000))
    base = config if config is not None else SimulationConfig.uniform(brokers=brokers, dirs=dirs)
    small = partitions * replication_factor <= 20_000
    base = replace(base, monitor=small if monitor is None else monitor, track_truth=track_truth)
    sim = Simulation(base, seed, sink=sink, name="generated",
                     description=f"{brokers} brokers × {dirs} dirs, {partitions} partitions in {topic_count} "
                                 f"topic(s), RF {replication_factor}, {failures} disk failure(s)")
    sim.start_brokers()
    if not sim.run_until_quiescent(timeout_ms=120_000):
        raise SimulationError("the brokers did not register and unfence")
    sizes = [partitions // topic_count + (1 if i < partitions % topic_count else 0) for i in range(topic_count)]
    width = len(str(topic_count - 1))
    batch: list[tuple[str, int | None, int | None, None, None]] = []
    in_batch = created = 0
    for i, size in enumerate(sizes):
        if size == 0:
            continue
        batch.append((f"topic-{i:0{width}d}", size, replication_factor, None, None))
        in_batch += size
        if in_batch >= partitions_per_request or i == len(sizes) - 1:
            sim.create_topics(batch)
            created += in_batch
            batch, in_batch = [], 0
            if progress is not None:
                progress(sim, created)
            sim.run_for(request_interval_ms)
    if not sim.run_until_quiescent(timeout_ms=3_600_000):
        raise SimulationError("the cluster did not settle after creating the topics")
    rng = random.Random(seed * 31 + 7)
    for _ in range(failures):
        candidates = [(b.id, d.name) for b in sim.brokers.values() if b.running
                      for d in b.online_data_dirs()]
        if not candidates:
            break
        sim.fail_dir(*rng.choice(candidates))
        sim.run_for(rng.randint(0, 5000))
    sim.run_until_quiescent(timeout_ms=3_600_000)
    return sim
