"""The simulator's parts: the event queue, seeded ids and backoff, the broker rules that decide what reaches the log
(AssignmentsManager batching, cumulative OfflineLogDirs, session expiry, duplicate registration, halts, the failure
timeout), the output writers (segment rolling, streamed snapshot, output dir hygiene), the ground truth and the
known-issue classifier."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from jbod_model.directory_id import is_reserved
from jbod_model.errors_codes import Errors
from jbod_model.invariants import Severity, Violation
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import (
    BrokerRegistrationChangeRecord,
    BrokerRegistrationFencingChange,
    NoOpRecord,
    TopicRecord,
)
from jbod_model.replay import replay_records
from jbod_model.replicas import OfflineReason
from jbod_model.simulator.broker import StopCause
from jbod_model.simulator.checks import KnownIssue, PropertyViolation, TlaProperty, explain
from jbod_model.simulator.cluster import FailedDirPolicy, Simulation, SimulationError
from jbod_model.simulator.config import (
    MAX_ASSIGNMENTS_PER_REQUEST,
    BrokerSpec,
    MetadataDirPlacement,
    SimulationConfig,
    exponential_backoff,
    random_directory_id,
    random_uuid,
)
from jbod_model.simulator.events import EventQueue
from jbod_model.simulator.generator import sized_run
from jbod_model.simulator.history import HappeningKind
from jbod_model.simulator.output import MemorySink, OutputWriter, SegmentRoller, prepare_output_dir, snapshot_records
from jbod_model.simulator.truth import GroundTruth, TruthReason, compare_with_image
from jbod_model.storage.files import parse_segment_name
from jbod_model.storage.log_reader import read_entries
from jbod_model.stream import RequestEntry
from jbod_model.uuid import Uuid


def ready(brokers: int = 3, dirs: int = 3, seed: int = 0, **config: object) -> Simulation:
    sim = Simulation(SimulationConfig.uniform(brokers=brokers, dirs=dirs, **config), seed)
    sim.start_brokers()
    assert sim.run_until_quiescent()
    return sim


def requests_of(sim: Simulation, type_name: str) -> list[RequestEntry]:
    assert isinstance(sim.sink, MemorySink)
    return [e for e in sim.sink.stream if isinstance(e, RequestEntry) and type_name == e.request.TYPE_NAME]


# -- clock and randomness -------------------------------------------------------------------------------------


def test_event_queue_runs_in_time_then_insertion_order_and_honours_cancellation() -> None:
    queue = EventQueue()
    seen: list[str] = []
    queue.schedule(20, lambda: seen.append("b"))
    queue.schedule(10, lambda: seen.append("a"))
    queue.schedule(20, lambda: seen.append("c"))
    queue.schedule(15, lambda: seen.append("never")).cancel()
    assert queue.run_until(100) is False
    assert seen == ["a", "b", "c"] and queue.now_ms == 100
    queue.after(5, lambda: seen.append("d"))
    assert queue.run_until(200, stop=lambda: "d" in seen) and queue.now_ms == 105


def test_seeded_ids_are_reproducible_and_never_reserved() -> None:
    a, b = random.Random(7), random.Random(7)
    ids = [random_directory_id(a) for _ in range(200)]
    assert ids == [random_directory_id(b) for _ in range(200)]
    assert len(set(ids)) == 200 and not any(is_reserved(u) for u in ids)
    assert not str(random_uuid(random.Random(1))).startswith("-")


def test_exponential_backoff_doubles_with_jitter_up_to_the_cap() -> None:
    rng = random.Random(0)
    values = [exponential_backoff(n, initial_ms=100, max_ms=10_000, rng=rng) for n in range(10)]
    assert 98 <= values[0] <= 102 and 196 <= values[1] <= 204
    assert values[-1] == 10_000


# -- broker rules ---------------------------------------------------------------------------------------------


def test_assignments_are_batched_at_most_2250_per_request() -> None:
    sim = Simulation(SimulationConfig.uniform(brokers=2, dirs=2, monitor=False), 0)
    sim.start_brokers()
    assert sim.run_until_quiescent()
    sim.create_topic("big", 5000, 1)
    assert sim.run_until_quiescent()
    sizes = [sum(len(t.partitions) for d in e.request.directories for t in d.topics)  # type: ignore[attr-defined]
             for e in requests_of(sim, "ASSIGN_REPLICAS_TO_DIRS_REQUEST")]
    assert max(sizes) == MAX_ASSIGNMENTS_PER_REQUEST and sum(sizes) == 5000
    for _topic, _pid, part in sim.image.topics.partitions():
        assert not is_reserved(part.directories[0])


def test_heartbeats_report_the_cumulative_offline_dirs() -> None:
    sim = ready()
    first = sim.fail_dir(1, "data-0")
    sim.run_for(3000)
    second = sim.fail_dir(1, "data-1")
    sim.run_for(3000)
    reported = [e.request.offline_log_dirs for e in requests_of(sim, "BROKER_HEARTBEAT_REQUEST")  # type: ignore[attr-defined]
                if e.request.broker_id == 1]  # type: ignore[attr-defined]
    assert (first,) in reported and reported[-1] == (first, second)
    assert set(sim.image.cluster.brokers[1].directories).isdisjoint({first, second})


def test_a_crashed_broker_is_fenced_when_its_session_expires() -> None:
    sim = ready()
    sim.stop_broker(2, clean=False)
    crashed = sim.now_ms
    assert sim.run_until(lambda: sim.image.cluster.brokers[2].fenced, timeout_ms=20_000)
    assert 9000 < sim.now_ms - crashed <= 11_000
    assert isinstance(sim.sink, MemorySink)
    fence = [e for e in sim.sink.stream if isinstance(e, LogEntry)
             and isinstance(e.record, BrokerRegistrationChangeRecord)
             and e.record.fenced == BrokerRegistrationFencingChange.FENCE]
    assert fence, "the session-expiry fencing is committed outside any request and must be in the stream"


def test_a_fast_restart_is_refused_until_the_old_session_expires() -> None:
    sim = ready()
    sim.restart_broker(3, clean=False, downtime_ms=100)
    assert sim.run_until_quiescent()
    codes = [r.request for r in requests_of(sim, "BROKER_REGISTRATION_REQUEST")]
    assert len([c for c in codes if c.broker_id == 3]) > 2  # type: ignore[attr-defined]
    assert any("incarnation" in h.detail for h in sim.happenings if h.kind is HappeningKind.BROKER_STARTED)


def test_the_shared_metadata_dir_halts_the_broker_when_it_fails() -> None:
    specs = (BrokerSpec(1), BrokerSpec(2, metadata_dir=MetadataDirPlacement.SHARED), BrokerSpec(3))
    sim = Simulation(SimulationConfig(brokers=specs), 0)
    sim.start_brokers()
    assert sim.run_until_quiescent()
    sim.fail_dir(2, "data-1")
    sim.run_for(100)
    assert sim.broker(2).running
    sim.fail_dir(2, "data-0")
    assert sim.broker(2).stop_cause is StopCause.HALTED_METADATA_DIR


def test_failed_disk_policies_on_restart() -> None:
    sim = ready()
    sim.create_topic("t", 6, 3)
    assert sim.run_until_quiescent()
    failed = sim.fail_dir(1, "data-0")
    assert sim.run_until_quiescent()
    sim.restart_broker(1, failed_dirs=FailedDirPolicy.REMOVE)
    assert sim.run_until_quiescent()
    assert [d.name for d in sim.broker(1).data_dirs] == ["data-1", "data-2"]
    assert failed not in sim.image.cluster.brokers[1].directories
    # No offline dir any more: the replicas of the removed disk are re-created on the others (KAFKA-16234).
    assert not sim.broker(1).lost
    sim.restart_broker(1, add_dirs=1)
    assert sim.run_until_quiescent()
    assert [d.name for d in sim.broker(1).data_dirs] == ["data-1", "data-2", "data-3"]
    assert len(sim.image.cluster.brokers[1].directories) == 3


def test_the_failure_timeout_shuts_down_a_broker_that_cannot_report() -> None:
    sim = ready()
    sim.overload_controller(50_000, brokers=[1])
    sim.fail_dir(1, "data-2")
    sim.run_for(31_000)
    assert sim.broker(1).state.value == "PENDING_CONTROLLED_SHUTDOWN" or not sim.broker(1).running
    sim.run_for(20_000)
    assert sim.broker(1).stop_cause is StopCause.FAILURE_TIMEOUT
    assert sim.image.cluster.brokers[1].fenced


def test_an_isolated_broker_is_fenced_and_comes_back() -> None:
    sim = ready()
    sim.isolate_broker(2, 15_000)
    assert sim.run_until(lambda: sim.image.cluster.brokers[2].fenced, timeout_ms=15_000)
    assert sim.run_until_quiescent()
    assert not sim.image.cluster.brokers[2].fenced


def test_script_errors_are_reported() -> None:
    sim = ready()
    with pytest.raises(SimulationError, match="already exists"):
        sim.create_topic("t", 1, 1)
        sim.create_topic("t", 1, 1)
    with pytest.raises(SimulationError, match="no broker 9"):
        sim.broker(9)
    with pytest.raises(SimulationError, match="no topic"):
        sim.delete_topic("missing")
    assert sim.reassign("t", 0, [1, 2, 99]) is Errors.INVALID_REPLICA_ASSIGNMENT


def test_sized_run_builds_the_requested_cluster() -> None:
    sim = sized_run(brokers=4, dirs=2, partitions=50, topics=5, replication_factor=2, failures=1)
    image = sim.image
    assert len(image.topics.by_id) == 5
    assert sum(len(t.partitions) for t in image.topics.by_id.values()) == 50
    assert sum(1 for h in sim.happenings if h.kind is HappeningKind.DIR_FAILED) == 1
    assert sim.is_quiescent()


# -- outputs --------------------------------------------------------------------------------------------------


def test_segments_roll_at_batch_boundaries_and_stay_contiguous(tmp_path: Path) -> None:
    roller = SegmentRoller(tmp_path, segment_bytes=200, leader_epoch=3, leader_id=3000, timestamp_ms=1000)
    offset = 1
    for i in range(20):
        roller.append([LogEntry(offset + k, NoOpRecord(), offset, 3, 1000 + i) for k in range(3)])
        offset += 3
    roller.close()
    assert len(roller.segments) > 2
    bases = [parse_segment_name(p.name) for p in roller.segments]
    assert bases[0] == 0 and bases == sorted(bases)
    read = [e.offset for p in roller.segments for e in read_entries(p)]
    assert read == list(range(offset))
    other = tmp_path / "other"
    other.mkdir()
    gappy = SegmentRoller(other, segment_bytes=10, leader_epoch=1, leader_id=1, timestamp_ms=0)
    with pytest.raises(ValueError, match="contiguous"):
        gappy.append([LogEntry(5, NoOpRecord(), 5, 1, 0)])


def test_the_streamed_snapshot_equals_the_image_records() -> None:
    sim = ready(seed=4)
    sim.create_topic("t", 4, 2, configs={"retention.ms": "1000"})
    assert sim.run_until_quiescent()
    assert list(snapshot_records(sim.image)) == sim.image.to_records()


def test_output_dirs_are_reused_but_never_mixed(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not empty"):
        prepare_output_dir(tmp_path)
    run = tmp_path / "run"
    sim = ready()
    writer = OutputWriter(run, sim.config)
    writer.finish(sim.result())
    assert (run / "summary.json").is_file() and (run / "broker-1" / "data-0" / "meta.properties").is_file()
    prepare_output_dir(run)
    assert list(run.iterdir()) == []


def test_memory_and_streaming_sinks_see_the_same_records(tmp_path: Path) -> None:
    memory = ready(seed=9)
    writer = OutputWriter(tmp_path, SimulationConfig.uniform(brokers=3, dirs=3))
    streamed = Simulation(SimulationConfig.uniform(brokers=3, dirs=3), 9, sink=writer)
    streamed.start_brokers()
    assert streamed.run_until_quiescent()
    assert isinstance(memory.sink, MemorySink)
    assert writer.records == len(memory.sink.log)
    result = streamed.result()
    assert result.stream is None and result.log is None
    paths = writer.finish(result)
    assert paths.snapshot is not None and paths.snapshot.is_file()


# -- ground truth and known issues ----------------------------------------------------------------------------


def test_ground_truth_intervals_open_split_and_close() -> None:
    truth = GroundTruth()
    tid = Uuid(1, 2)
    key = (tid, 0, 1)
    truth.update(key, "t", (TruthReason.DIRECTORY_FAILED, Uuid(3, 4)), 10, 5)
    truth.update(key, "t", (TruthReason.DIRECTORY_FAILED, Uuid(3, 4)), 20, 6)  # unchanged: no new interval
    truth.update(key, "t", (TruthReason.BROKER_STOPPED, Uuid(3, 4)), 30, 7)
    truth.update(key, "t", None, 40, 8)
    intervals = truth.intervals()
    assert [(i.reason, i.start_ms, i.end_ms) for i in intervals] == [
        (TruthReason.DIRECTORY_FAILED, 10, 30), (TruthReason.BROKER_STOPPED, 30, 40)]
    assert intervals[0].to_json()["endOffset"] == 7


def test_compare_with_image_reports_both_directions() -> None:
    tid = Uuid(5, 6)
    image = replay_records([TopicRecord(name="t", topic_id=tid)])
    truth = GroundTruth()
    truth.update((tid, 0, 1), "t", (TruthReason.DIRECTORY_FAILED, None), 0, 0)
    mismatches = compare_with_image(truth.intervals(), image)
    assert len(mismatches) == 1 and mismatches[0].metadata is None
    assert "physically offline" in mismatches[0].describe()
    assert TruthReason.NOT_CREATED.agrees_with(OfflineReason.DIRECTORY_OFFLINE)
    assert not TruthReason.BROKER_HALTED.agrees_with(OfflineReason.DIRECTORY_OFFLINE)


def test_explain_leaves_anything_unknown_unexplained() -> None:
    odd = PropertyViolation(TlaProperty.UPDATES_ONLY_OFFLINE_PARTITIONS, "made up", topic_id=Uuid(1, 1),
                            partition_id=0, broker_id=1, offset=3)
    inv = Violation(invariant="I14", message="made up", topic_id=Uuid(1, 1), partition_id=0, broker_id=1, offset=3)
    warning = Violation(invariant="I12", message="slow", severity=Severity.WARNING)
    explained = explain([], [], [odd], [inv, warning])
    assert explained.unexplained == (odd,) and explained.unexplained_invariants == (inv,)
    assert not explained.clean and not explained.known
    assert KnownIssue.UNFENCE_ONTO_OFFLINE_DIR.value == "UNFENCE_ONTO_OFFLINE_DIR"
