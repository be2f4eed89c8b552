"""The named scenarios: each runs, settles, breaks only what it says it breaks, writes outputs that read back to the
same image (segments, snapshot, JSONL stream through StreamRunner, meta.properties), and shows the behaviour it is
named after."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

from jbod_model.directory_id import MIGRATING, UNASSIGNED
from jbod_model.invariants import Severity
from jbod_model.meta_properties import inventory, read_file
from jbod_model.records.control import ControlEntry, LeaderChangeMessage
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import (
    BeginTransactionRecord,
    BrokerRegistrationChangeRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
)
from jbod_model.replay import replay_entries
from jbod_model.replicas import OfflineReason, offline_replicas
from jbod_model.simulator.checks import KnownIssue, TlaProperty, explain
from jbod_model.simulator.history import DirectoryStatus, HappeningKind
from jbod_model.simulator.output import SimulationResult, write_result
from jbod_model.simulator.scenarios import SCENARIOS, run_scenario
from jbod_model.simulator.truth import TruthReason, compare_with_image
from jbod_model.storage.log_reader import read_entries
from jbod_model.storage.metadata_dir import MetadataLog
from jbod_model.stream import RequestEntry, StreamRunner, load_jsonl
from jbod_model.uuid import Uuid

NAMES = list(SCENARIOS)


@cache
def result_of(name: str, seed: int = 0) -> SimulationResult:
    return run_scenario(name, seed)


def happened(result: SimulationResult, kind: HappeningKind) -> list[str]:
    return [h.detail for h in result.happenings if h.kind is kind]


def test_the_library_has_the_required_scenarios() -> None:
    required = {"demo", "single-disk-failure", "disk-failure-during-placement", "broker-restart-with-failed-disk",
                "intra-broker-move", "move-reverted-by-disk-failure", "reassignment-during-failure",
                "topic-recreated-while-dir-offline", "mv-upgrade-3.6-to-3.7", "zk-migration-migrating-dirs",
                "single-to-multi-dir", "last-dir-fails-broker-halts", "unreported-failure-timeout"}
    assert required <= set(SCENARIOS)
    pains = {p for s in SCENARIOS.values() for p in s.pains}
    assert {f"S{i}" for i in range(1, 11)} <= pains  # operators-and-peers §2.2
    assert all(s.description for s in SCENARIOS.values())


@pytest.mark.parametrize("name", NAMES)
def test_scenario_settles_and_breaks_only_what_it_expects(name: str) -> None:
    scenario = SCENARIOS[name]
    result = result_of(name)
    assert result.quiescent
    assert {v.property for v in result.violations} == set(scenario.expected_violations)
    errors = {v.invariant for v in result.invariant_violations if v.severity is Severity.ERROR}
    assert errors == set(scenario.expected_invariants)
    assert result.stats.last_offset > 0


@pytest.mark.parametrize("name", NAMES)
def test_scenario_writes_outputs_that_read_back(name: str, tmp_path: Path) -> None:
    result = result_of(name)
    assert result.stream is not None and result.log is not None
    paths = write_result(result, tmp_path, segment_bytes=4096)
    # The segments: a LEADER_CHANGE control batch at offset 0, then the records, replaying to the same image.
    first = next(iter(read_entries(paths.segments[0])))
    assert isinstance(first, ControlEntry) and first.offset == 0 and isinstance(first.record, LeaderChangeMessage)
    log = MetadataLog.open(paths.metadata_dir)
    full = list(log.read(from_snapshot=False))
    assert [(e.offset, e.record, e.timestamp, e.leader_epoch) for e in full] == \
        [(e.offset, e.record, e.timestamp, e.leader_epoch) for e in result.log]
    assert replay_entries(full).same_state(result.image)
    assert paths.snapshot is not None
    assert replay_entries(log.read(from_snapshot=True)).same_state(result.image)
    # records.jsonl is the same log.
    records = load_jsonl(paths.records)
    assert [(e.offset, e.record) for e in records if isinstance(e, LogEntry)] == [(e.offset, e.record)
                                                                                 for e in result.log]
    # stream.jsonl through the StreamRunner reproduces the image and every record at its offset.
    runner = StreamRunner()
    replayed: list[tuple[int, object]] = []
    stream = load_jsonl(paths.stream)
    for event in runner.run(stream):
        replayed.extend((e.offset, e.record) for e in event.entries)
    replayed.extend((e.offset, e.record) for e in stream if isinstance(e, LogEntry))
    assert runner.image.same_state(result.image)
    assert sorted(replayed, key=lambda r: r[0]) == [(e.offset, e.record) for e in result.log]
    # One meta.properties per disk in use; the inventory joins them to the log's directory ids.
    in_use = {d.directory_id for d in result.directories
              if d.status not in (DirectoryStatus.REPLACED, DirectoryStatus.REMOVED)}
    inv = inventory([tmp_path])
    assert inv.ok, inv.all_findings
    assert {row.directory_id for row in inv.rows} == in_use
    for meta in paths.meta_properties:
        props = read_file(meta)
        assert props.cluster_id == result.cluster_id
        assert meta.parent.parent.name == f"broker-{props.node_id}"
    assert len(paths.timeline.read_text().splitlines()) == len(result.timeline)
    summary = json.loads(paths.summary.read_text())
    assert summary["scenario"] == name and summary["lastOffset"] == result.stats.last_offset


@pytest.mark.parametrize("name", NAMES)
def test_scenario_truth_agrees_with_metadata_unless_expected(name: str) -> None:
    result = result_of(name)
    mismatches = compare_with_image(result.timeline, result.image)
    expected = TlaProperty.GROUND_TRUTH_MATCHES_REPLICA_VIEW in SCENARIOS[name].expected_violations
    assert bool(mismatches) == expected


def test_scenarios_are_deterministic_for_a_seed() -> None:
    a, b = run_scenario("demo", 3), run_scenario("demo", 3)
    assert a.stream == b.stream and a.log == b.log and a.timeline == b.timeline
    c = run_scenario("demo", 4)
    assert c.cluster_id != a.cluster_id


def test_unknown_scenario_is_refused() -> None:
    with pytest.raises(Exception, match="unknown scenario"):
        run_scenario("no-such-scenario")


# -- what each scenario shows ---------------------------------------------------------------------------------


def test_demo_ends_with_the_failed_disks_replicas_offline() -> None:
    result = result_of("demo")
    offline = offline_replicas(result.image)
    assert offline and {r.broker_id for r in offline} == {2}
    assert {r.offline_reason for r in offline} == {OfflineReason.DIRECTORY_OFFLINE}
    failed = next(d for d in result.directories if d.status is DirectoryStatus.FAILED)
    assert {r.directory for r in offline} == {failed.directory_id}
    assert happened(result, HappeningKind.REPLICA_NOT_CREATED)  # KAFKA-16234: not re-created elsewhere
    invoices = result.image.topics.by_id[result.image.topics.by_name["invoices"]]
    for part in invoices.partitions.values():  # created after the failure: never on the dead disk
        assert failed.directory_id not in part.directories


def test_single_disk_failure_moves_leadership_in_the_same_batch() -> None:
    result = result_of("single-disk-failure")
    assert result.log is not None
    brcr = next(e for e in result.log if isinstance(e.record, BrokerRegistrationChangeRecord) and e.record.log_dirs)
    batch = [e.record for e in result.log if e.batch_base_offset == brcr.batch_base_offset]
    assert any(isinstance(r, PartitionChangeRecord) for r in batch)
    scratch = result.image.topics.by_id[result.image.topics.by_name["scratch"]]
    assert scratch.partitions[0].isr == (2,) and scratch.partitions[0].leader == -1  # the last ISR member stays


def test_disk_failure_during_placement_demotes_through_the_late_assignment() -> None:
    result = result_of("disk-failure-during-placement")
    assert result.stream is not None and result.log is not None
    # Both brokers' late assignments name dirs already reported offline; the controller still records them and
    # demotes those replicas (R6.5): every replica on a failed disk is offline and out of the ISR.
    failed = {(d.broker_id, d.directory_id) for d in result.directories if d.status is DirectoryStatus.FAILED}
    assert len(failed) == 2
    for topic, _pid, part in result.image.topics.partitions():
        for b, d in zip(part.replicas, part.directories, strict=True):
            if (b, d) in failed:
                assert b not in part.isr and part.leader != b, topic.name
    assert sum(1 for i in result.timeline if i.is_open) == len(offline_replicas(result.image))


def test_broker_restart_with_failed_disk_registers_without_it() -> None:
    result = result_of("broker-restart-with-failed-disk")
    failed = next(d for d in result.directories if d.status is DirectoryStatus.FAILED)
    reg = result.image.cluster.brokers[1]
    assert failed.directory_id not in reg.directories and len(reg.directories) == 2
    assert not reg.fenced
    assert {r.broker_id for r in offline_replicas(result.image)} == {1}


def test_moves_promote_only_after_the_assignment_and_revert_on_failure() -> None:
    done = result_of("intra-broker-move")
    assert len(happened(done, HappeningKind.MOVE_COMPLETED)) == 2
    reverted = result_of("move-reverted-by-disk-failure")
    states = happened(reverted, HappeningKind.MOVE_REVERTED)
    assert any("ACCEPTED" in s for s in states) and any("QUEUED" in s for s in states)
    assert not happened(reverted, HappeningKind.MOVE_COMPLETED)


def test_reassignment_during_failure_is_cancelled_then_completes_for_the_other_partition() -> None:
    image = result_of("reassignment-during-failure").image
    orders = image.topics.by_id[image.topics.by_name["orders"]]
    assert orders.partitions[0].replicas == (1, 2, 3) and not orders.partitions[0].adding_replicas
    assert set(orders.partitions[1].replicas) == {1, 2, 4} and not orders.partitions[1].removing_replicas


def test_pending_assignments_are_dropped_not_retried_forever() -> None:
    dropped = happened(result_of("pending-assignment-dropped"), HappeningKind.ASSIGNMENT_DROPPED)
    assert any("KAFKA-17190" in d for d in dropped) and any("KAFKA-16886" in d for d in dropped)


def test_topic_recreated_while_dir_offline_gets_new_replicas_on_online_dirs() -> None:
    result = result_of("topic-recreated-while-dir-offline")
    failed = next(d for d in result.directories if d.status is DirectoryStatus.FAILED)
    orders = result.image.topics.by_id[result.image.topics.by_name["orders"]]
    assert all(failed.directory_id not in p.directories for p in orders.partitions.values())
    assert not offline_replicas(result.image)


def test_last_dir_failure_halts_and_the_session_expiry_fences() -> None:
    result = result_of("last-dir-fails-broker-halts")
    assert any("all log dirs have failed" in h for h in happened(result, HappeningKind.BROKER_HALTED))
    reg = result.image.cluster.brokers[3]
    assert reg.fenced and len(reg.directories) == 1  # the last failure was never reported
    assert {r.offline_reason for r in offline_replicas(result.image)} == {OfflineReason.BROKER_FENCED}
    assert {i.reason for i in result.timeline if i.is_open} == {TruthReason.BROKER_HALTED}


def test_metadata_dir_failure_halts_the_broker() -> None:
    result = result_of("metadata-dir-fails-broker-halts")
    halts = happened(result, HappeningKind.BROKER_HALTED)
    assert len(halts) == 2 and all("metadata log dir" in h for h in halts)
    assert result.image.cluster.brokers[2].fenced and result.image.cluster.brokers[3].fenced


def test_unreported_failure_shuts_the_broker_down_after_the_timeout() -> None:
    result = result_of("unreported-failure-timeout")
    failed_at = next(h.time_ms for h in result.happenings if h.kind is HappeningKind.DIR_FAILED)
    timeout = next(h.time_ms for h in result.happenings if h.kind is HappeningKind.DIR_FAILURE_TIMEOUT)
    assert timeout - failed_at == 30_000
    # While the controller did not know, the truth already said offline: the intervals start at the failure.
    dir_intervals = [i for i in result.timeline if i.reason is TruthReason.DIRECTORY_FAILED and i.broker_id == 2]
    assert dir_intervals and min(i.start_ms for i in dir_intervals) == failed_at


def test_jbod_below_3_7_iv2_never_moves_leaders_off_the_dead_disk() -> None:
    result = result_of("jbod-on-old-mv-disk-failure")
    assert not offline_replicas(result.image)  # the metadata says everything is fine
    assert any(i.is_open for i in result.timeline)  # it is not


def test_mv_upgrade_reregisters_with_the_same_incarnation_then_resolves_migrating() -> None:
    result = result_of("mv-upgrade-3.6-to-3.7")
    assert result.log is not None
    assert len(happened(result, HappeningKind.BROKER_REREGISTERED)) == 3
    legacy = result.image.topics.by_id[result.image.topics.by_name["legacy"]]
    first = next(e.record for e in result.log if isinstance(e.record, PartitionRecord))
    assert first.version == 0  # written at 3.6: no Directories
    for part in legacy.partitions.values():
        assert MIGRATING not in part.directories and UNASSIGNED not in part.directories


def test_zk_migration_writes_migrating_then_brokers_assign_real_dirs() -> None:
    result = result_of("zk-migration-migrating-dirs")
    assert result.log is not None
    assert any(isinstance(e.record, RegisterBrokerRecord) and e.record.is_migrating_zk_broker for e in result.log)
    assert any(isinstance(e.record, BeginTransactionRecord) and e.record.name == "Bulk Migration" for e in result.log)
    for _topic, _pid, part in result.image.topics.partitions():
        assert MIGRATING not in part.directories
    assert not any(reg.is_migrating_zk_broker for reg in result.image.cluster.brokers.values())


def test_single_dir_brokers_get_concrete_ids_without_assignments() -> None:
    result = result_of("single-dir-broker-concrete-uuid")
    assert result.log is not None
    single = {b: reg.directories[0] for b, reg in result.image.cluster.brokers.items() if b in (1, 2)}
    for record in (e.record for e in result.log if isinstance(e.record, PartitionRecord)):
        for b, d in zip(record.replicas, record.directories, strict=True):
            if b in single:
                assert d == single[b]


def test_the_known_kafka_issue_scenarios_are_recognised() -> None:
    for name, issue in (("unfenced-onto-failed-dir", KnownIssue.UNFENCE_ONTO_OFFLINE_DIR),
                        ("fast-restart-with-new-disk", KnownIssue.ASSIGNMENT_BEFORE_REGISTRATION)):
        result = result_of(name)
        assert result.log is not None
        explained = explain(result.log, result.directories, result.violations, result.invariant_violations)
        assert explained.clean and explained.known[issue] > 0, name


def test_happenings_carry_time_and_offset() -> None:
    result = result_of("demo")
    times = [h.time_ms for h in result.happenings]
    assert times == sorted(times)
    failure = next(h for h in result.happenings if h.kind is HappeningKind.DIR_FAILED)
    assert failure.broker_id == 2 and isinstance(failure.directory, Uuid) and failure.offset > 0


def test_requests_in_the_stream_are_controller_requests_in_order() -> None:
    result = result_of("demo")
    assert result.stream is not None
    offsets = [e.offset for e in result.stream if e.offset is not None]
    assert offsets == sorted(offsets)
    assert {e.request.TYPE_NAME for e in result.stream if isinstance(e, RequestEntry)} >= {
        "BROKER_REGISTRATION_REQUEST", "BROKER_HEARTBEAT_REQUEST", "ASSIGN_REPLICAS_TO_DIRS_REQUEST",
        "CREATE_TOPICS_REQUEST", "ALTER_PARTITION_REQUEST"}
