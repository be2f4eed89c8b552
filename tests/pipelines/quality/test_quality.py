"""``pipelines.quality`` on tables, without Spark: every kind of violation injected into a clean lakehouse (the
bundled demo, written by the job's own operator and Delta writer) makes exactly the expectation for it fail — and
nothing else; the clean tables pass; the results carry a sample of the offending rows with their offsets; the
checks agree with ``jbod_model.invariants`` where both apply.

Injections edit the tables as pandas DataFrames (``TableSet.with_tables``). Where a rule is about a *source* table
(partitions, brokers) and the job derives others from it (replica_assignments, offline_replicas), :func:`rederive`
recomputes the derived rows with the model, as the job would have — so the injected row breaks only the source rule.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import weakref
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from test_quality_support import (
    DEMO_CLUSTER,
    SYNTHETIC,
    bad_logs,
    demo_lakehouse,
    demo_log,
    record_row,
    synthetic_lakehouse,
    write_lakehouse,
)

from jbod_model.directory_id import UNASSIGNED
from jbod_model.errors import ReplayFault
from jbod_model.image import BrokerRegistration, ClusterImage, PartitionRegistration
from jbod_model.invariants import (
    EXTERNAL_INVARIANTS,
    INVARIANTS,
    REPLAY_FAULT_INVARIANTS,
    Scope,
    check_image,
    fault_invariant,
    invariant,
)
from jbod_model.meta_properties import MetaProperties, MetaPropertiesVersion, to_text
from jbod_model.metadata_version import FEATURE_NAME, MetadataVersion
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import (
    AbortTransactionRecord,
    BeginTransactionRecord,
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from jbod_model.replay import MetadataDelta, replay_entries, replay_records
from jbod_model.replicas import partition_replicas
from jbod_model.simulator.churn import churn_log
from jbod_model.uuid import Uuid
from pipelines.config.profiles import SUITE_NAMES, QualitySettings
from pipelines.quality import (
    CHECKS,
    FRAMES,
    SKIPS,
    CheckResult,
    ExternalInputs,
    GxRunner,
    TableSet,
    build_frames,
    check_cluster,
    checks_for,
    column_of,
)
from pipelines.quality.frames import Build, column_ints
from pipelines.quality.suites import READS, frames_apart, frames_as_built, semantic

ORDERS = "KfaKMz6vRniukx00uvRwwA"
PAYMENTS = "jVaGuYd1RguOT2X2Imx41g"
NXG, BQ = "NXGV69yVQ06uYL_ESF8CWA", "BQ-LPFdpRnmFTqeC4c0zkw"   # broker 1's disks
Y8U, JBZ = "Y8UXxSTrSB2pCc9s439Vkw", "JbzRyYgxSHyV9F8hM29Rbg"  # broker 2's (Y8U fails at offset 32)
MKV, TKH = "MKv6YMH9TJCAPloPsswckQ", "TKhUioecQoa8mVZoh91UrA"  # broker 3's
RESERVED_7 = str(Uuid(0, 7))
SMALL_THRESHOLDS = QualitySettings(pending_placement_max_offsets=5, pending_placement_max_ms=1000)


@pytest.fixture(scope="module")
def runner() -> GxRunner:
    """One ephemeral GX context for the module: suites are re-registered per run, the context is reused."""
    return GxRunner()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_lakehouse(tmp_path_factory.mktemp("demo") / "tables")


def clean(root: Path) -> TableSet:
    return TableSet(DEMO_CLUSTER, root).load_all(
        ["features", "feature_history", "brokers", "broker_history", "partitions", "replica_assignments",
         "replica_assignment_history", "offline_replicas", "records", "replay_faults"])


def run(runner: GxRunner, tables: TableSet, settings: QualitySettings | None = None,
        inputs: ExternalInputs | None = None) -> list[CheckResult]:
    return check_cluster(tables, runner, settings=settings, inputs=inputs or ExternalInputs())


def failed(results: list[CheckResult]) -> set[str]:
    return {r.expectation for r in results if r.status in ("failed", "error")}


def result(results: list[CheckResult], name: str) -> CheckResult:
    return next(r for r in results if r.expectation == name)


# -------------------------------------------------------------------------------------------------------------
# Editing tables


def edit(frame: pd.DataFrame, where: Callable[[pd.DataFrame], Any], **values: Any) -> pd.DataFrame:
    """A copy of ``frame`` with ``values`` set on the (single) row ``where`` selects."""
    out = frame.copy()
    index = out.index[where(out)]
    assert len(index) == 1, f"{len(index)} rows matched"
    for column, value in values.items():
        out.at[index[0], column] = value
    return out


def part(topic: str, pid: int) -> Callable[[pd.DataFrame], Any]:
    return lambda f: (f["topic_id"] == topic) & (f["partition_id"] == pid)


def replica(topic: str, pid: int, broker: int) -> Callable[[pd.DataFrame], Any]:
    return lambda f: (f["topic_id"] == topic) & (f["partition_id"] == pid) & (f["broker_id"] == broker)


def current(broker: int) -> Callable[[pd.DataFrame], Any]:
    return lambda f: (f["broker_id"] == broker) & f["valid_to_offset"].isna()


def record_at(offset: int) -> Callable[[pd.DataFrame], Any]:
    return lambda f: f["offset"] == offset


def with_data(tables: TableSet, offset: int, change: Callable[[dict[str, Any]], None], **columns: Any) -> TableSet:
    """Edit the JSON data of the bronze record at ``offset``."""
    recs = tables.table("records")
    data = json.loads(recs.loc[recs["offset"] == offset, "data"].iloc[0])
    change(data)
    return tables.with_tables(records=edit(recs, record_at(offset), data=json.dumps(data), **columns))


def append_records(tables: TableSet, *rows: dict[str, Any]) -> TableSet:
    recs = tables.table("records")
    return tables.with_tables(records=pd.concat([recs, pd.DataFrame(list(rows))], ignore_index=True))


def rederive(tables: TableSet) -> TableSet:
    """replica_assignments and the open offline intervals, recomputed with the model from partitions and brokers."""
    brokers = {int(r.broker_id): BrokerRegistration(
        id=int(r.broker_id), epoch=int(r.broker_epoch), incarnation_id=Uuid.from_string(r.incarnation_id),
        fenced=bool(r.fenced), directories=tuple(Uuid.from_string(d) for d in r.log_dirs))
        for r in tables.table("brokers").itertuples()}
    cluster = ClusterImage(brokers=brokers)
    old = tables.table("replica_assignments").set_index(["topic_id", "partition_id", "broker_id"])
    rows, intervals = [], []
    for p in tables.table("partitions").itertuples():
        reg = PartitionRegistration(replicas=tuple(p.replicas), isr=tuple(p.isr), leader=int(p.leader),
                                    directories=tuple(Uuid.from_string(d) for d in p.directories))
        for r in partition_replicas(cluster, Uuid.from_string(p.topic_id), int(p.partition_id), reg):
            key = (p.topic_id, int(p.partition_id), r.broker_id)
            since = old["since_offset"].get(key, p.since_offset)
            reason = r.offline_reason.value if r.offline_reason else None
            common = {"cluster_id": DEMO_CLUSTER, "topic_id": p.topic_id, "partition_id": p.partition_id,
                      "broker_id": r.broker_id, "topic_name": p.topic_name, "directory": str(r.directory),
                      "directory_state": r.directory_state.value}
            rows.append({**common, "offline": r.offline, "offline_reason": reason, "since_offset": since})
            if r.offline:
                intervals.append({**common, "reason": reason, "start_offset": since, "end_offset": None})
    offline = tables.table("offline_replicas")
    closed = offline[offline["end_offset"].notna()]
    return tables.with_tables(replica_assignments=pd.DataFrame(rows),
                              offline_replicas=pd.concat([closed, pd.DataFrame(intervals)], ignore_index=True))


def fault_message(records: list[Any]) -> str:
    """The message of the ReplayFault the model raises for the last of ``records``."""
    image = replay_records(records[:-1])
    delta = MetadataDelta(image)
    with pytest.raises(ReplayFault) as caught:
        delta.replay(records[-1], len(records) - 1)
    return str(caught.value)


def fault_row(offset: int, message: str) -> pd.DataFrame:
    return pd.DataFrame([{"cluster_id": DEMO_CLUSTER, "seq": offset, "offset": offset, "source": "test",
                          "error": "ReplayFault", "message": message}])


# -------------------------------------------------------------------------------------------------------------
# The catalogue


def test_every_expectation_names_a_known_invariant_with_one_source_of_truth() -> None:
    assert len({c.name for c in CHECKS} | {s.name for s in SKIPS}) == len(CHECKS) + len(SKIPS)
    covered = {c.invariant for c in CHECKS} | {s.invariant for s in SKIPS}
    assert covered - {None} == {f"I{n}" for n in range(1, 26)}, "every §4 invariant is checked or skipped"
    for c in CHECKS:
        assert c.suite in SUITE_NAMES and c.name.startswith(f"{c.invariant}." if c.invariant else "replay.")
        meta = c.meta(QualitySettings())
        if c.invariant is not None:
            definition = invariant(c.invariant)
            assert meta["rationale"] == definition.rationale and meta["source"] == definition.source
            if c.severity is None:
                assert meta["severity"] == definition.severity.value.lower()
        assert meta["severity"] in ("error", "warning")
    assert result_severity("I9.carried_over_registration_offsets") == "warning"
    assert result_severity("I12.pending_placement_offsets") == "warning"
    assert set(EXTERNAL_INVARIANTS) == {"I22", "I23", "I24", "I25"}
    assert all(i.scope == Scope.EXTERNAL for i in EXTERNAL_INVARIANTS.values()) and "I22" not in INVARIANTS


def result_severity(name: str) -> str:
    return next(c for c in CHECKS if c.name == name).severity_name


def test_unknown_suite_is_an_input_error() -> None:
    from jbod_model.errors import InputError

    with pytest.raises(InputError, match="unknown suite"):
        checks_for(["structural", "nope"])


def test_replay_fault_messages_map_to_their_invariants() -> None:
    """The classification reads the model's own fault messages: each mapped needle occurs in a real fault."""
    ep = (BrokerEndpoint(name="PLAINTEXT", host="h", port=1, security_protocol=0),)
    d1, d2 = Uuid.from_string(NXG), Uuid.from_string(BQ)
    reg1 = RegisterBrokerRecord(version=3, broker_id=1, broker_epoch=1, incarnation_id=Uuid(1, 1), end_points=ep,
                                log_dirs=(d1,))
    dup = RegisterBrokerRecord(version=3, broker_id=2, broker_epoch=2, incarnation_id=Uuid(2, 2), end_points=ep,
                               log_dirs=(d1, d2))
    assert fault_invariant(fault_message([reg1, dup])) == "I6"
    assert fault_invariant(fault_message([reg1, FenceBrokerRecord(id=1, epoch=7)])) == "I7"
    assert fault_invariant(fault_message([FenceBrokerRecord(id=3, epoch=1)])) == "I7"
    topic = TopicRecord(name="t", topic_id=Uuid(5, 5))
    bad = PartitionRecord(version=1, partition_id=0, topic_id=Uuid(5, 5), replicas=(1, 2), isr=(1,), leader=1,
                          directories=(d1,))
    assert fault_invariant(fault_message([reg1, topic, bad])) == "I1"
    assert fault_invariant(fault_message([PartitionChangeRecord(topic_id=Uuid(9, 9), partition_id=0)])) is None
    assert {name for _, name in REPLAY_FAULT_INVARIANTS} == {"I1", "I6", "I7"}


# -------------------------------------------------------------------------------------------------------------
# Clean tables pass


def test_the_demo_passes_every_suite(runner: GxRunner, demo: Path) -> None:
    results = run(runner, clean(demo))
    assert failed(results) == set()
    statuses = {r.expectation: r.status for r in results}
    # What needs outside inputs is skipped with the reason, as is what cannot be checked yet.
    skipped = {n for n, s in statuses.items() if s == "skipped"}
    assert skipped == {"I22.jbod_needs_3_7_iv2", "I24.disk_directory_ids_unreserved",
                       "I24.disk_directory_ids_unique", "I24.online_directories_on_disk",
                       "I20.snapshot_equals_replay", "I23.placement_matches_disks",
                       "I25.cordoned_directories_get_no_replicas"}
    assert "cordon" in result(results, "I25.cordoned_directories_get_no_replicas").note
    # Not vacuous: the rules looked at the demo's rows.
    assert result(results, "I13.replica_view_matches").element_count == 15
    assert result(results, "I13.offline_intervals_match").element_count == 3
    assert result(results, "I21.directory_registered_by_broker").element_count == 15
    assert result(results, "I8.change_only_shrinks_directories").element_count == 1


def test_the_offline_directory_of_the_demo_is_not_a_false_alarm(runner: GxRunner, demo: Path) -> None:
    """§4.1: after broker 2's disk failed, its replicas still name the failed disk — offline (I13), not corrupt
    (I21 asks only that broker 2 registered it once); the disk failure was handled in its batch (I16)."""
    tables = clean(demo)
    offline = tables.table("replica_assignments")
    assert set(offline.loc[offline["offline"], "directory"]) == {Y8U}
    results = run(runner, tables)
    for name in ("I13.replica_view_matches", "I21.directory_registered_by_broker", "I14.leader_acceptable",
                 "I16.directory_failure_handled_in_batch"):
        assert result(results, name).status == "passed"


# -------------------------------------------------------------------------------------------------------------
# One injection, one failing expectation


def _reg_record(broker: int, epoch: int, incarnation: Uuid, dirs: tuple[str, ...]) -> RegisterBrokerRecord:
    ep = (BrokerEndpoint(name="PLAINTEXT", host=f"broker-{broker}.demo", port=9092, security_protocol=0),)
    return RegisterBrokerRecord(version=3, broker_id=broker, broker_epoch=epoch, incarnation_id=incarnation,
                                end_points=ep, log_dirs=tuple(Uuid.from_string(d) for d in dirs))


def _i1(t: TableSet) -> TableSet:
    return t.with_tables(partitions=edit(t.table("partitions"), part(ORDERS, 0), directories=[NXG, Y8U]))


def _i2_isr(t: TableSet) -> TableSet:
    return t.with_tables(partitions=edit(t.table("partitions"), part(ORDERS, 0), isr=[1, 3, 7]))


def _i2_replicas(t: TableSet) -> TableSet:
    return t.with_tables(partitions=edit(t.table("partitions"), part(PAYMENTS, 0), replicas=[1, 2, 2], isr=[1, 2]))


def _i4_partition(t: TableSet) -> TableSet:
    # orders-1 is [2, 3, 1]: broker 1 (a follower) gets reserved id 7.
    return rederive(t.with_tables(partitions=edit(t.table("partitions"), part(ORDERS, 1),
                                                  directories=[JBZ, TKH, RESERVED_7])))


def _i4_broker(t: TableSet) -> TableSet:
    return rederive(t.with_tables(brokers=edit(t.table("brokers"), lambda f: f["broker_id"] == 3,
                                               log_dirs=[MKV, TKH, RESERVED_7])))


def _i5(t: TableSet) -> TableSet:
    return rederive(t.with_tables(brokers=edit(t.table("brokers"), lambda f: f["broker_id"] == 1,
                                               log_dirs=[BQ, NXG, NXG])))


def _i6_now(t: TableSet) -> TableSet:
    return rederive(t.with_tables(brokers=edit(t.table("brokers"), lambda f: f["broker_id"] == 3,
                                               log_dirs=[MKV, TKH, NXG])))


def _i6_history(t: TableSet) -> TableSet:
    hist = t.table("broker_history")
    extra = hist[current(3)(hist)].copy()
    extra["log_dirs"] = [[MKV, TKH, NXG]]
    extra["valid_from_offset"], extra["valid_to_offset"] = 10, 20
    return t.with_tables(broker_history=pd.concat([hist, extra], ignore_index=True))


def _i8(t: TableSet) -> TableSet:
    # broker 2's change record at offset 32 "adds" a disk it never had, instead of only dropping the failed one.
    return with_data(t, 32, lambda d: d.update(logDirs=[JBZ, str(Uuid(77, 77))]))


def _i9_carried_over(t: TableSet) -> TableSet:
    brokers = edit(t.table("brokers"), lambda f: f["broker_id"] == 1, log_dirs=[])
    hist = edit(t.table("broker_history"), current(1), log_dirs=[])
    return t.with_tables(brokers=brokers, broker_history=hist)


def _i12(t: TableSet) -> TableSet:
    # orders-2 is [3, 1, 2]: broker 3's replica never left UNASSIGNED (created so at offset 10; the log ends at 32).
    unassigned = str(UNASSIGNED)
    t = rederive(t.with_tables(partitions=edit(t.table("partitions"), part(ORDERS, 2),
                                               directories=[unassigned, NXG, Y8U])))
    hist = t.table("replica_assignment_history")
    hist = edit(hist, lambda f: replica(ORDERS, 2, 3)(f) & f["valid_to_offset"].isna(), directory=unassigned,
                directory_state="UNASSIGNED")
    return t.with_tables(replica_assignment_history=hist)


def _i13_view(t: TableSet) -> TableSet:
    return t.with_tables(replica_assignments=edit(t.table("replica_assignments"), replica(ORDERS, 0, 1),
                                                  offline=True, offline_reason="BROKER_FENCED"))


@pytest.mark.parametrize("packed", [True, False], ids=["keys-packed", "keys-too-wide-to-pack"])
def test_the_replica_view_frame_names_each_row_that_is_not_a_replica_as_kafka_sees_it(
        demo: Path, packed: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ``replicas`` frame (I13) over edited ``replica_assignments``: a replica's row dropped is a row "missing",
    one written twice is "a second row" after its first, one for a broker the partition does not have is "not a
    replica"; every other row agrees with Kafka's rule. The partition's directory and offset of a missing row come
    from the ``partitions`` row. The same where the keys' spans are too wide to pack into one integer."""
    if not packed:
        monkeypatch.setattr(semantic, "key_packing", lambda columns: None)
    t = clean(demo)
    rows = t.table("replica_assignments")
    twice = rows[replica(PAYMENTS, 1, 2)(rows)]
    stranger = twice.assign(broker_id=99)
    edited = pd.concat([rows[~replica(ORDERS, 0, 1)(rows)], twice, stranger], ignore_index=True)
    frame = FRAMES["replicas"](Build(t.with_tables(replica_assignments=edited), QualitySettings(),
                                     ExternalInputs())).data
    view = column_of("I13.replica_view_matches")
    wrong = frame[~frame[view].astype(bool)]
    assert [(r.topic_id, r.partition_id, r.broker_id, r.why) for r in wrong.itertuples()] == [
        (PAYMENTS, 1, 2, "a second row for this replica"), (PAYMENTS, 1, 99, "not a replica of any partition"),
        (ORDERS, 0, 1, "missing from replica_assignments")]
    assert len(frame) == len(edited) + 1 and frame["row"].tolist() == list(range(len(frame)))
    # The later of the two rows is the second one, not the first.
    assert wrong["row"].iloc[0] == len(edited) - 2
    partition = t.table("partitions")[part(ORDERS, 0)(t.table("partitions"))].iloc[0]
    missing = wrong.iloc[-1]
    assert missing["offset"] == partition["since_offset"]
    assert missing["directory"] == list(partition["directories"])[list(partition["replicas"]).index(1)]
    clean_frame = FRAMES["replicas"](Build(t, QualitySettings(), ExternalInputs())).data
    assert clean_frame[view].astype(bool).all() and len(clean_frame) == len(rows)


@pytest.mark.parametrize("packed", [True, False], ids=["keys-packed", "keys-too-wide-to-pack"])
def test_a_missing_replica_has_its_own_place_in_its_partitions_directories(demo: Path, packed: bool,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Every replica of a partition missing from ``replica_assignments``: each is named once, with the directory at
    its own place in the partition's Directories and the partition row's offset — the last row's, where the
    partition is listed twice, at the place of its first. The same where the keys' spans are too wide to pack into
    one integer (the frames' merge instead)."""
    if not packed:
        monkeypatch.setattr(semantic, "key_packing", lambda columns: None)
    t = clean(demo)
    rows, partitions = t.table("replica_assignments"), t.table("partitions")
    listed = partitions[part(ORDERS, 1)(partitions)]
    edited = pd.concat([listed.assign(since_offset=90), partitions, listed.assign(since_offset=99)],
                       ignore_index=True)
    frame = FRAMES["replicas"](Build(t.with_tables(replica_assignments=rows[~part(ORDERS, 1)(rows)],
                                                   partitions=edited), QualitySettings(), ExternalInputs())).data
    missing = frame[frame["why"] == "missing from replica_assignments"]
    row = listed.iloc[0]
    assert [(r.topic_id, r.partition_id, r.broker_id, r.directory, r.offset) for r in missing.itertuples()] == [
        (ORDERS, 1, int(b), d, 99) for b, d in zip(row["replicas"], row["directories"], strict=True)]
    assert len(set(row["directories"])) == len(row["replicas"]) > 1  # not vacuous: each place has its own disk


def test_the_offline_intervals_frame_names_each_disagreement_between_intervals_and_replicas(demo: Path) -> None:
    """The ``offline_intervals`` frame (I13) over edited ``offline_replicas``: each open interval meets the offline
    replica it stands for. An offline replica without one, an interval of an online replica, two open intervals of
    one replica (both rows, whatever else is wrong with them) and an interval whose reason is not the replica's are
    each named, with the offset of the interval (or of the replica's row, where there is no interval); a closed
    interval plays no part."""
    t = clean(demo)
    intervals = t.table("offline_replicas")
    both = intervals[replica(ORDERS, 0, 2)(intervals)]
    online = both.assign(partition_id=1, broker_id=1, directory=NXG, start_offset=40)
    closed = both.assign(partition_id=1, broker_id=3, directory=MKV, start_offset=20, end_offset=25)
    edited = pd.concat([edit(intervals[~replica(PAYMENTS, 1, 2)(intervals)], replica(ORDERS, 2, 2),
                             reason="BROKER_FENCED"), both.assign(reason="BROKER_FENCED"), online, closed],
                       ignore_index=True)
    frame = FRAMES["offline_intervals"](Build(t.with_tables(offline_replicas=edited), QualitySettings(),
                                              ExternalInputs())).data
    match = column_of("I13.offline_intervals_match")
    assert sorted((r.topic_id, r.partition_id, r.broker_id, r.offset, bool(r[match]), r.why)
                  for _, r in frame.iterrows()) == [
        (ORDERS, 0, 2, 32, False, "two open intervals for one replica"),
        (ORDERS, 0, 2, 32, False, "two open intervals for one replica"),
        (ORDERS, 1, 1, 40, False, "open interval, but the replica is online (or gone)"),
        (ORDERS, 2, 2, 32, False, f"interval {Y8U}/BROKER_FENCED vs replica {Y8U}/DIRECTORY_OFFLINE"),
        (PAYMENTS, 1, 2, 32, False, "offline replica without an open interval")]
    assert frame["row"].tolist() == list(range(len(frame)))
    clean_frame = FRAMES["offline_intervals"](Build(t, QualitySettings(), ExternalInputs())).data
    assert clean_frame[match].astype(bool).all() and len(clean_frame) == 3
    assert clean_frame["why"].isna().all()


def test_a_partitions_row_is_read_whole_into_its_registration(demo: Path) -> None:
    """Each column of a ``partitions`` row reaches its registration (``Build.partitions``, read a column at a time),
    a row whose directories do not match its replicas or do not parse forms none, and the frame still judges such a
    row's other predicates on the row's own values."""
    t = clean(demo)
    table = t.table("partitions")
    row = table[part(ORDERS, 0)(table)].iloc[0]
    replicas = [int(b) for b in row["replicas"]]
    edited = edit(table, part(ORDERS, 0), isr=replicas[:1], adding_replicas=replicas[1:2],
                  removing_replicas=replicas[2:], eligible_leader_replicas=replicas[1:], last_known_elr=replicas[:2],
                  leader=replicas[0], leader_recovery_state=1, leader_epoch=17, partition_epoch=23)
    edited = edit(edited, part(PAYMENTS, 1), directories=[NXG], isr=[99])
    edited = edit(edited, part(PAYMENTS, 0), directories=["not an id"] * len(table[part(PAYMENTS, 0)(table)].iloc[0][
        "replicas"]))
    build = Build(t.with_tables(partitions=edited), QualitySettings(), ExternalInputs())
    assert build.partitions[(ORDERS, 0)] == PartitionRegistration(
        replicas=tuple(replicas), directories=tuple(Uuid.from_string(d) for d in row["directories"]),
        isr=tuple(replicas[:1]), adding_replicas=tuple(replicas[1:2]), removing_replicas=tuple(replicas[2:]),
        elr=tuple(replicas[1:]), last_known_elr=tuple(replicas[:2]), leader=replicas[0], leader_recovery_state=1,
        leader_epoch=17, partition_epoch=23)
    assert build.partitions[(PAYMENTS, 1)] is None and build.partitions[(PAYMENTS, 0)] is None
    frame = FRAMES["partitions"](build).data
    broken = frame[(frame["topic_id"] == PAYMENTS) & (frame["partition_id"] == 1)].iloc[0]
    assert not broken[column_of("I1.directories_match_replicas")]
    assert not broken[column_of("I2.isr_within_replicas")] and list(broken["isr"]) == [99]
    assert frame[column_of("I2.isr_within_replicas")].sum() == len(frame) - 1


def _i13_intervals(t: TableSet) -> TableSet:
    offline = t.table("offline_replicas")
    return t.with_tables(offline_replicas=offline[~replica(PAYMENTS, 1, 2)(offline)])


def _i14(t: TableSet) -> TableSet:
    # Broker 2 leads orders-0 although its replica is on the failed disk Y8U.
    return t.with_tables(partitions=edit(t.table("partitions"), part(ORDERS, 0), isr=[1, 2, 3], leader=2))


def _i15(t: TableSet) -> TableSet:
    return t.with_tables(partitions=edit(t.table("partitions"), part(PAYMENTS, 1), isr=[], leader=-1))


def _i18(t: TableSet) -> TableSet:
    return t.with_tables(partitions=edit(t.table("partitions"), part(ORDERS, 1), adding_replicas=[9]))


def _i21(t: TableSet) -> TableSet:
    # payments-0's replica on broker 3 was (per history) put on broker 1's disk.
    hist = edit(t.table("replica_assignment_history"),
                lambda f: replica(PAYMENTS, 0, 3)(f) & f["valid_to_offset"].isna(), directory=BQ)
    return t.with_tables(replica_assignment_history=hist)


def _i3(t: TableSet) -> TableSet:
    # The metadata.version record says 3.6-IV2: every registration with LogDirs is then out of place.
    return with_data(t, 0, lambda d: d.update(featureLevel=14))


def _i9_error(t: TableSet) -> TableSet:
    return with_data(t, 3, lambda d: d.update(logDirs=[]))


def _fault(needle_records: Callable[[], list[Any]]) -> Callable[[TableSet], TableSet]:
    def inject(t: TableSet) -> TableSet:
        return t.with_tables(replay_faults=fault_row(33, fault_message(needle_records())))
    return inject


def _dup_dir_records() -> list[Any]:
    return [_reg_record(1, 1, Uuid(1, 1), (NXG,)), _reg_record(2, 2, Uuid(2, 2), (NXG,))]


def _epoch_records() -> list[Any]:
    return [_reg_record(1, 1, Uuid(1, 1), (NXG,)), FenceBrokerRecord(id=1, epoch=9)]


def _length_records() -> list[Any]:
    return [TopicRecord(name="t", topic_id=Uuid(5, 5)),
            PartitionRecord(version=1, partition_id=0, topic_id=Uuid(5, 5), replicas=(1, 2), isr=(1,), leader=1,
                            directories=(Uuid.from_string(NXG),))]


def _other_fault_records() -> list[Any]:
    return [PartitionChangeRecord(topic_id=Uuid(9, 9), partition_id=0)]


def _i10(t: TableSet) -> TableSet:
    # payments-1 created by a PartitionRecord v0 (no Directories) at 3.9: the controller never writes that.
    return with_data(t, 13, lambda d: d.pop("directories"), version=0)


def _i11(t: TableSet) -> TableSet:
    # After its disk failed broker 2 has one directory; a new partition placed there as UNASSIGNED breaks I11.
    rec = PartitionRecord(version=1, partition_id=3, topic_id=Uuid.from_string(ORDERS), replicas=(2,), isr=(2,),
                          leader=2, directories=(UNASSIGNED,))
    return append_records(t, record_row(DEMO_CLUSTER, 33, rec))


def _i16(t: TableSet) -> TableSet:
    # The directory failure (offset 32) without the ISR/leader changes the controller writes in its batch (29–31).
    recs = t.table("records")
    return t.with_tables(records=recs[~recs["offset"].isin([29, 30, 31])])


def _i17(t: TableSet) -> TableSet:
    # Broker 1's replica of orders-0 assigned to broker 2's failed disk, and broker 1 stays leader.
    rec = PartitionChangeRecord(topic_id=Uuid.from_string(ORDERS), partition_id=0,
                                directories=tuple(Uuid.from_string(d) for d in (Y8U, Y8U, MKV)))
    return append_records(t, record_row(DEMO_CLUSTER, 33, rec))


def _i19(t: TableSet) -> TableSet:
    # Broker 1 re-registers with a new incarnation but a lower epoch.
    return append_records(t, record_row(DEMO_CLUSTER, 33, _reg_record(1, 0, Uuid(4, 4), (NXG, BQ))))


INJECTIONS: dict[str, tuple[Callable[[TableSet], TableSet], set[str], QualitySettings | None]] = {
    "I1 directories shorter than replicas": (_i1, {"I1.directories_match_replicas"}, None),
    "I2 ISR member that is no replica": (_i2_isr, {"I2.isr_within_replicas"}, None),
    # A duplicate broker makes the replica→directory map undefined (createAssignmentMap refuses it), so the replica
    # view derived from the partition cannot match it either.
    "I2 broker twice in replicas": (_i2_replicas, {"I2.replicas_unique", "I13.replica_view_matches"}, None),
    "I3 LogDirs below 3.7-IV2": (_i3, {"I3.no_directory_state_below_3_7_iv2"}, None),
    "I4 undefined placeholder in a partition": (_i4_partition, {"I4.partition_placeholders_defined"}, None),
    "I4 reserved id registered by a broker": (_i4_broker, {"I4.broker_directories_unreserved"}, None),
    "I5 directory twice in a registration": (_i5, {"I5.broker_directories_unique"}, None),
    "I6 directory of two brokers now": (_i6_now, {"I6.directory_owned_by_one_broker"}, None),
    "I6 directory of two brokers in history": (_i6_history, {"I6.directory_owned_once_over_time"}, None),
    "I6 registration refused by replay": (_fault(_dup_dir_records), {"I6.replay_refused"}, None),
    "I7 wrong epoch refused by replay": (_fault(_epoch_records), {"I7.replay_refused"}, None),
    "I1 length mismatch refused by replay": (_fault(_length_records), {"I1.replay_refused"}, None),
    "another replay fault": (_fault(_other_fault_records), {"replay.no_other_fault"}, None),
    "I8 change record adds a directory": (_i8, {"I8.change_only_shrinks_directories"}, None),
    "I9 registration without LogDirs at 3.9": (_i9_error, {"I9.registration_lists_directories"}, None),
    "I9 carried-over registration too old": (_i9_carried_over, {"I9.carried_over_registration_offsets"},
                                             SMALL_THRESHOLDS),
    "I10 partition record without Directories": (_i10, {"I10.replica_changes_carry_directories"}, None),
    "I11 UNASSIGNED on a single-directory broker": (_i11, {"I11.single_directory_broker_placement"}, None),
    "I12 stuck UNASSIGNED placement": (_i12, {"I12.pending_placement_offsets"}, SMALL_THRESHOLDS),
    "I13 replica view disagrees": (_i13_view, {"I13.replica_view_matches", "I13.offline_intervals_match"}, None),
    "I13 open offline interval missing": (_i13_intervals, {"I13.offline_intervals_match"}, None),
    "I14 leader on an offline directory": (_i14, {"I14.leader_acceptable"}, None),
    "I15 empty ISR without ELR": (_i15, {"I15.isr_not_empty"}, None),
    "I16 directory failure not handled in its batch": (_i16, {"I16.directory_failure_handled_in_batch"}, None),
    "I17 assignment into an offline directory": (_i17, {"I17.offline_assignment_demotes"}, None),
    "I18 adding replica outside replicas": (_i18, {"I18.reassignment_consistent"}, None),
    "I19 new incarnation with a lower epoch": (_i19, {"I19.epochs_move_in_fixed_steps"}, None),
    "I21 directory only another broker registered": (_i21, {"I21.directory_registered_by_broker"}, None),
}


@pytest.mark.parametrize("case", list(INJECTIONS))
def test_an_injected_violation_fails_exactly_its_expectation(runner: GxRunner, demo: Path, case: str) -> None:
    inject, expected, settings = INJECTIONS[case]
    results = run(runner, inject(clean(demo)), settings)
    assert failed(results) == expected
    for name in expected:
        r = result(results, name)
        assert r.status == "failed" and r.success is False and (r.unexpected_count or 0) >= 1
        assert r.sample and "offset" in r.sample[0], "the sample names the offending row and its offset"


def test_the_thresholds_decide_warnings(runner: GxRunner, demo: Path) -> None:
    """The same stuck placement passes under the default thresholds (10 000 offsets, 10 min)."""
    results = run(runner, _i12(clean(demo)))
    assert failed(results) == set()
    assert result(results, "I12.pending_placement_offsets").element_count == 1


def test_severity_of_results(runner: GxRunner, demo: Path) -> None:
    results = run(runner, _i12(clean(demo)), SMALL_THRESHOLDS)
    r = result(results, "I12.pending_placement_offsets")
    assert (r.severity, r.invariant, r.suite) == ("warning", "I12", "history")
    # The edited history has the replica UNASSIGNED from its creation (offset 10) on, the last record is offset 32.
    sample = r.sample[0]
    assert (sample["topic_name"], sample["partition_id"], sample["broker_id"], sample["offset"]) == (
        "orders", 2, 3, 10)
    assert sample["age_offsets"] == 22 and sample["directory"] == str(UNASSIGNED)


def test_a_sample_does_not_depend_on_the_order_rows_are_read_in(runner: GxRunner, demo: Path) -> None:
    """Delta hands a table's rows back in no fixed order: two stuck placements, a one-row sample, the current
    replicas read in either order — the same row is shown (the first by key)."""
    unassigned = str(UNASSIGNED)
    t = _i12(clean(demo))
    # orders-1 is [2, 3, 1]: broker 3's replica is stuck too.
    t = rederive(t.with_tables(partitions=edit(t.table("partitions"), part(ORDERS, 1),
                                               directories=[JBZ, unassigned, BQ])))
    t = t.with_tables(replica_assignment_history=edit(
        t.table("replica_assignment_history"), lambda f: replica(ORDERS, 1, 3)(f) & f["valid_to_offset"].isna(),
        directory=unassigned, directory_state="UNASSIGNED"))
    settings = QualitySettings(pending_placement_max_offsets=5, pending_placement_max_ms=1000, sample_rows=1)
    current = t.table("replica_assignments")
    samples = []
    for order in (current, current.iloc[::-1].reset_index(drop=True)):
        r = result(run(runner, t.with_tables(replica_assignments=order), settings), "I12.pending_placement_offsets")
        assert r.unexpected_count == 2 and len(r.sample) == 1
        samples.append(r.sample)
    assert samples[0] == samples[1]
    assert (samples[0][0]["topic_name"], samples[0][0]["partition_id"], samples[0][0]["broker_id"]) == (
        "orders", 1, 3)


def test_suites_can_be_chosen(runner: GxRunner, demo: Path) -> None:
    results = check_cluster(_i14(clean(demo)), runner, suites=["structural"])
    assert {r.suite for r in results} == {"structural"} and failed(results) == set()
    results = check_cluster(_i14(clean(demo)), runner, suites=["semantic"])
    assert failed(results) == {"I14.leader_acceptable"}


# -------------------------------------------------------------------------------------------------------------
# External inputs (I22, I24)


def write_disks(root: Path, disks: dict[int, list[str]], cluster_id: str = DEMO_CLUSTER) -> Path:
    for node, ids in disks.items():
        for i, d in enumerate(ids):
            folder = root / f"broker-{node}" / f"disk{i}"
            folder.mkdir(parents=True)
            meta = MetaProperties(version=MetaPropertiesVersion.V1, cluster_id=cluster_id, node_id=node,
                                  directory_id=Uuid.from_string(d))
            (folder / "meta.properties").write_text(to_text(meta), encoding="utf-8")
    return root


DEMO_DISKS = {1: [NXG, BQ], 2: [Y8U, JBZ], 3: [MKV, TKH]}


def test_external_checks_pass_on_the_demo_disks(runner: GxRunner, demo: Path, tmp_path: Path) -> None:
    results = run(runner, clean(demo), inputs=ExternalInputs(dirs=(write_disks(tmp_path, DEMO_DISKS),)))
    assert failed(results) == set()
    assert result(results, "I24.online_directories_on_disk").element_count == 5  # 2 + 1 (one failed) + 2
    assert result(results, "I22.jbod_needs_3_7_iv2").element_count == 3


def test_i24_registered_directory_missing_on_disk(runner: GxRunner, demo: Path, tmp_path: Path) -> None:
    disks = {**DEMO_DISKS, 3: [MKV]}
    results = run(runner, clean(demo), inputs=ExternalInputs(dirs=(write_disks(tmp_path, disks),)))
    assert failed(results) == {"I24.online_directories_on_disk"}
    assert result(results, "I24.online_directories_on_disk").sample[0]["directory"] == TKH


def test_i24_directory_id_on_two_disks(runner: GxRunner, demo: Path, tmp_path: Path) -> None:
    disks = {**DEMO_DISKS, 3: [MKV, TKH, NXG]}
    results = run(runner, clean(demo), inputs=ExternalInputs(dirs=(write_disks(tmp_path, disks),)))
    assert failed(results) == {"I24.disk_directory_ids_unique"}


def test_i22_several_log_dirs_below_3_7_iv2(runner: GxRunner, demo: Path, tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text("process.roles=broker\nnode.id=1\nlog.dirs=/data/d0,/data/d1\n", encoding="utf-8")
    tables = clean(demo)
    old = tables.with_tables(features=edit(tables.table("features"), lambda f: f["name"] == "metadata.version",
                                           level=14))
    results = run(runner, old, inputs=ExternalInputs(broker_configs=(config,)))
    assert failed(results) == {"I22.jbod_needs_3_7_iv2"}
    assert run(runner, tables, inputs=ExternalInputs(broker_configs=(config,))) and \
        "I22.jbod_needs_3_7_iv2" not in failed(run(runner, tables, inputs=ExternalInputs(broker_configs=(config,))))


# -------------------------------------------------------------------------------------------------------------
# Agreement with the model


def _bare_fence() -> list[LogEntry]:
    """The synthetic cluster, then the broker leading most partitions fenced by a lone BrokerRegistrationChangeRecord:
    without the leadership moves ``handleBrokerFenced`` writes before it, so it keeps leading while fenced."""
    log = churn_log(SYNTHETIC)
    image = replay_entries(log)
    leaders = Counter(p.leader for _, _, p in image.topics.partitions() if p.leader >= 0)
    broker = min(leaders, key=lambda b: (-leaders[b], b))
    fence = BrokerRegistrationChangeRecord(broker_id=broker, broker_epoch=image.cluster.brokers[broker].epoch, fenced=1)
    last = log[-1]
    return [*log, LogEntry(offset=last.offset + 1, record=fence, batch_base_offset=last.offset + 1, leader_epoch=1,
                           timestamp=(last.timestamp or 0) + 1)]


def _unfenced_onto_failed_dir() -> list[LogEntry]:
    """Kafka 3.9's own I14 breach (docs/simulator.md, known issue 1): one heartbeat unfences a broker and reports the
    directory of ``solo-0`` offline; the unfence election makes it leader there on the dead directory."""
    from jbod_model.simulator.scenarios import run_scenario

    log = run_scenario("unfenced-onto-failed-dir").log
    assert log is not None
    return list(log)


LEADER_BREAKS: dict[str, Callable[[], list[LogEntry]]] = {
    "fenced leaders (injected)": _bare_fence,
    "leader on an offline directory (Kafka quirk)": _unfenced_onto_failed_dir,
}


@pytest.mark.parametrize("case", list(LEADER_BREAKS))
def test_leader_checks_agree_with_the_model_where_they_fail(runner: GxRunner, tmp_path: Path, case: str) -> None:
    """Where leaders break I14 — a fenced broker left leading (injected), a leader elected onto an offline directory
    (reproduced from Kafka 3.9 by the simulator) — the model's I14 and the table check flag the same partitions."""
    log = LEADER_BREAKS[case]()
    write_lakehouse(tmp_path, "leaders", log, batch_size=17)
    want = sorted((str(v.topic_id), v.partition_id) for v in check_image(replay_entries(log)) if v.invariant == "I14")
    assert want, "the log breaks I14"
    results = check_cluster(TableSet("leaders", tmp_path), runner, suites=["semantic"])
    r = result(results, "I14.leader_acceptable")
    assert r.unexpected_count == len(want)
    assert sorted((s["topic_id"], s["partition_id"]) for s in r.sample) == want
    assert failed(results) == {"I14.leader_acceptable"}


def test_the_synthetic_cluster_passes_every_suite(runner: GxRunner, tmp_path: Path) -> None:
    """The generator writes what Kafka's controller would (fencing moves leadership away first): nothing fails."""
    synthetic_lakehouse(tmp_path)
    results = check_cluster(TableSet("synthetic", tmp_path), runner)
    assert failed(results) == set()
    assert result(results, "I14.leader_acceptable").element_count == len(list(
        replay_entries(churn_log(SYNTHETIC)).topics.partitions()))


def test_the_records_frame_reads_each_records_metadata_version_as_of_just_before_it(demo: Path) -> None:
    """Each directory record is judged (I3, I9) at the metadata.version in force just before it: the level of the
    last FeatureLevelRecord at a lower offset, so a downgrade later in the log changes only the records after it."""
    tables = clean(demo)
    recs = tables.table("records")
    last = int(recs["offset"].max())
    downgrade = FeatureLevelRecord(name=FEATURE_NAME, feature_level=14)  # 3.6-IV2
    again = _reg_record(1, 99, Uuid(1, 99), (NXG,))
    tables = append_records(tables, record_row(DEMO_CLUSTER, last + 1, downgrade),
                            record_row(DEMO_CLUSTER, last + 2, again))
    levels = recs.loc[recs["type"] == FeatureLevelRecord.TYPE_NAME, "data"].map(json.loads).tolist()
    assert [d["name"] for d in levels] == [FEATURE_NAME]  # the demo's one, at its start
    frame = FRAMES["records"](Build(tables, QualitySettings(), ExternalInputs())).data
    by_offset = dict(zip(frame["offset"], frame["metadata_version"], strict=True))
    assert {v for o, v in by_offset.items() if o <= last} == {str(MetadataVersion(levels[0]["featureLevel"]))}
    assert by_offset[last + 2] == str(MetadataVersion(14))
    flag = column_of("I3.no_directory_state_below_3_7_iv2")
    assert frame.loc[frame["offset"] <= last, flag].all()
    assert frame.loc[frame["offset"] == last + 2, flag].tolist() == [False]


def test_the_frames_are_built_with_the_collector_paused(runner: GxRunner, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Every frame builder runs with the cyclic collector off (its full passes walked the decoded records and
    registrations again and again: a third of the check's CPU at 200 k partitions), and it is on again for the
    validation, with the same results."""
    synthetic_lakehouse(tmp_path)
    seen: list[bool] = []
    real = dict(FRAMES)
    for name, builder in real.items():
        def watched(build: Any, builder: Callable[[Any], Any] = builder) -> Any:
            seen.append(gc.isenabled())
            return builder(build)
        monkeypatch.setitem(FRAMES, name, watched)  # type: ignore[arg-type]
    assert gc.isenabled()
    results = check_cluster(TableSet("synthetic", tmp_path), runner)
    assert gc.isenabled()
    assert seen and not any(seen)
    assert failed(results) == set()


def test_each_frame_is_validated_as_soon_as_it_is_built_and_then_let_go(runner: GxRunner, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The check never holds every frame at once (at 2 M partitions they were most of its 15 GB): each frame's
    expectations run before the next frame is built, with the collector on again, and the frame is then let go —
    with the same results as the frames built all at once."""
    synthetic_lakehouse(tmp_path)
    events: list[tuple[str, str]] = []
    alive: list[weakref.ref[Any]] = []
    skipped: dict[str, bool] = {}
    for name, builder in dict(FRAMES).items():
        def watched(build: Any, builder: Callable[[Any], Any] = builder, name: str = name) -> Any:
            events.append(("built", name))
            # A frame given earlier is gone by now (its data frame holds no cycles: reference counting frees it).
            assert all(ref() is None for ref in alive), "an earlier frame is still held"
            frame = builder(build)
            alive.append(weakref.ref(frame.data))
            skipped[name] = frame.skip is not None  # no external inputs: nothing to validate
            return frame
        monkeypatch.setitem(FRAMES, name, watched)  # type: ignore[arg-type]
    validate = runner.validate

    def validated(suite: str, frame: Any, *args: Any) -> Any:
        assert gc.isenabled()
        events.append(("validated", frame.name))
        return validate(suite, frame, *args)
    monkeypatch.setattr(runner, "validate", validated)
    results = check_cluster(TableSet("synthetic", tmp_path), runner)
    built = [name for kind, name in events if kind == "built"]
    assert built == list(dict.fromkeys(c.frame for c in CHECKS))
    # Built, then validated (once per suite that reads it, unless it could not be built), before the next is built.
    expected = [event for name in built for event in [("built", name)] + [("validated", name)] * (
        0 if skipped[name] else len({c.suite for c in CHECKS if c.frame == name}))]
    assert events == expected and not all(skipped.values())
    assert failed(results) == set()


@pytest.mark.parametrize("cluster", ["synthetic", "stuck-unassigned"])
def test_each_table_is_read_once_and_let_go_once_no_frame_still_to_build_reads_it(
        cluster: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A frame's ``READS`` name every table it reads through its ``Build`` (and ``partitions`` when it reads their
    registrations); once a frame is validated, what no frame still to build reads is let go — at 2 M partitions
    the partitions' table and registrations and the 6 M replica rows held gigabytes through every later frame —
    and no table is read twice. The stuck placement reaches the pending placements' read of ``broker_history``."""
    if cluster == "synthetic":
        synthetic_lakehouse(tmp_path)
    else:
        write_lakehouse(tmp_path, cluster, bad_logs()[cluster])
    tables = TableSet(cluster, tmp_path)
    building: list[str] = []
    used: dict[str, set[str]] = {}
    misses: Counter[str] = Counter()
    table, apart, registrations = TableSet.table, TableSet.lists_apart, Build.partitions

    def read(self: TableSet, name: str) -> Any:
        used[building[-1]].add(name)
        misses[name] += name not in self.held
        return table(self, name)

    def read_apart(self: TableSet, name: str) -> Any:  # a table not held is read, and not held (Build holds it)
        used[building[-1]].add(name)
        misses[name] += name not in self.held
        return apart(self, name)

    def partitions(self: Build) -> Any:
        used[building[-1]].add("partitions")
        return registrations.fget(self)  # type: ignore[attr-defined]
    monkeypatch.setattr(TableSet, "table", read)
    monkeypatch.setattr(TableSet, "lists_apart", read_apart)
    monkeypatch.setattr(Build, "partitions", property(partitions))
    names = list(dict.fromkeys(c.frame for c in CHECKS))
    for name, builder in dict(FRAMES).items():
        def watched(build: Build, builder: Callable[[Any], Any] = builder, name: str = name) -> Any:
            later = frozenset().union(*(READS[n] for n in names[names.index(name):]))
            assert build.held <= later, f"{sorted(build.held - later)} held when {name} is built"
            building.append(name)
            used[name] = set()
            return builder(build)
        monkeypatch.setitem(FRAMES, name, watched)  # type: ignore[arg-type]
    for _ in frames_as_built(tables, CHECKS):
        pass
    assert building == names
    assert {name: sorted(used[name] - READS[name]) for name in names} == {name: [] for name in names}
    assert misses and max(misses.values()) == 1, misses
    assert tables.held == frozenset()
    assert {"partitions", "replica_assignments", "broker_history"} <= set(misses)


def test_the_frames_built_in_a_second_process_are_the_ones_built_here(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """With two cores and a large log, the log suite's frame is built in a second process while this one builds the
    others (``build_frames(workers=2)``): every frame is what one process builds. Not vacuous:
    the log holds an I10 violation (a PartitionRecord v0, without Directories, at metadata.version 3.9). This
    process's frames are read with its scans planned on one core then (the other process has the other), and on
    every core when it builds them all alone."""
    from pipelines.lakehouse import tables as lakehouse_tables
    from pipelines.quality import suites

    scans: list[str | None] = []
    records = suites.FRAMES["records"]

    def watched(build: Build) -> Any:
        scans.append(lakehouse_tables.engine_settings().get("datafusion.execution.target_partitions"))
        return records(build)

    monkeypatch.setitem(suites.FRAMES, "records", watched)  # type: ignore[index]
    log = [dataclasses.replace(e, record=dataclasses.replace(e.record, version=0, directories=()))
           if e.offset == 13 else e for e in demo_log()]
    write_lakehouse(tmp_path, "i10", log)
    checks = checks_for(SUITE_NAMES)
    tables = TableSet("i10", tmp_path)
    names = list(dict.fromkeys(c.frame for c in checks))
    assert frames_apart(tables, names, workers=2, apart_from_records=0) == ["log_violations"]
    here = build_frames(TableSet("i10", tmp_path), checks)
    apart = build_frames(TableSet("i10", tmp_path), checks, workers=2, apart_from_records=0)
    assert list(apart) == list(here)
    for name, frame in here.items():
        pd.testing.assert_frame_equal(apart[name].data, frame.data)
        assert dataclasses.replace(apart[name], data=None) == dataclasses.replace(frame, data=None)  # type: ignore[arg-type]
    assert here["log_violations"].data["invariant"].tolist() == ["I10"]
    assert scans == [None, "1"]
    assert lakehouse_tables.engine_settings() == dict(lakehouse_tables._ENGINE_SETTINGS)


def test_records_of_an_aborted_transaction_are_left_out_of_the_frames_of_applied_records(tmp_path: Path) -> None:
    """A transaction the controller aborted is in the ``records`` table, never applied (``applied_offset`` null):
    the records read as the replay applied them are the table's applied rows, and the bronze records' frame built
    from the tables' directory is the frame built from the tables loaded whole — without the aborted records."""
    log = demo_log()
    last = log[-1].offset
    aborted = [LogEntry(offset=last + 1, record=BeginTransactionRecord(name="aborted"), batch_base_offset=last + 1),
               LogEntry(offset=last + 2, record=_reg_record(1, 9, Uuid(7, 7), (NXG,)), batch_base_offset=last + 1),
               LogEntry(offset=last + 3, record=AbortTransactionRecord(), batch_base_offset=last + 1)]
    write_lakehouse(tmp_path, "aborted", [*log, *aborted])
    whole = TableSet("aborted", tmp_path).table("records")
    assert whole.loc[whole["offset"] == last + 2, "applied_offset"].isna().all()
    columns = ["offset", "snapshot_index", "type", "data"]
    read = pd.concat(list(TableSet("aborted", tmp_path).records(columns, applied=True))).reset_index(drop=True)
    applied = whole[whole["applied_offset"].notna()].sort_values("offset", kind="stable")
    pd.testing.assert_frame_equal(read, applied[columns].reset_index(drop=True))
    frame = FRAMES["records"](Build(TableSet("aborted", tmp_path), QualitySettings(), ExternalInputs())).data
    loaded = TableSet("aborted", tmp_path).load_all(["records", "features"])
    pd.testing.assert_frame_equal(frame, FRAMES["records"](Build(loaded, QualitySettings(), ExternalInputs())).data)
    assert last + 2 not in set(frame["offset"]) and last in set(applied["offset"])


def test_the_records_read_a_range_of_offsets_at_a_time_are_the_table_and_the_frames_are_the_same(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``TableSet.records`` reads the log a range of offsets at a time, so that no frame builder holds it whole: the
    ranges joined are the table's rows in offset order (a snapshot's by index), and every frame built from them is
    the frame built from one range, whatever the range's size — one offset, or a Kafka batch cut in two. Three
    clusters: a churn log in many batches, one with an I10 breach (a PartitionRecord v0 at 3.9), one that starts
    from a snapshot and then fails a disk without moving its leaders (I16)."""
    breach = [dataclasses.replace(e, record=dataclasses.replace(e.record, version=0, directories=()))
              if e.offset == 13 else e for e in demo_log()]
    failure = BrokerRegistrationChangeRecord(version=2, broker_id=1, broker_epoch=1, log_dirs=(Uuid.from_string(BQ),))
    write_lakehouse(tmp_path, "churn", churn_log(SYNTHETIC), batch_size=17)
    write_lakehouse(tmp_path, "i10", breach)
    write_lakehouse(tmp_path, "from-snapshot", [LogEntry(offset=33, record=failure, batch_base_offset=33)],
                    snapshot=(replay_entries(demo_log()).to_records(), 33))
    names = ["records", "log_violations", "registration_changes", "replica_directory_history"]
    columns = ["offset", "snapshot_index", "type", "origin", "data"]
    found = set()
    for cluster in ("churn", "i10", "from-snapshot"):
        whole = TableSet(cluster, tmp_path).table("records").sort_values(["offset", "snapshot_index"], kind="stable")
        one = {name: FRAMES[name](Build(TableSet(cluster, tmp_path), QualitySettings(), ExternalInputs()))
               for name in names}
        found |= set(one["log_violations"].data["invariant"])
        for size in (1, 2, 5):
            read = list(TableSet(cluster, tmp_path).records(columns, chunk_offsets=size))
            assert len(read) == (whole["offset"].max() - whole["offset"].min()) // size + 1
            pd.testing.assert_frame_equal(pd.concat(read).reset_index(drop=True),
                                          whole[columns].reset_index(drop=True))
            monkeypatch.setattr("pipelines.quality.inputs.RECORD_CHUNK_OFFSETS", size)
            for name in names:
                frame = FRAMES[name](Build(TableSet(cluster, tmp_path), QualitySettings(), ExternalInputs()))
                pd.testing.assert_frame_equal(frame.data, one[name].data)
                assert frame.note == one[name].note
            monkeypatch.undo()
    assert found == {"I10", "I16"}


def test_the_frames_are_built_in_one_process_where_a_second_would_not_pay_or_could_not_see_them(
        demo: Path) -> None:
    names = list(dict.fromkeys(c.frame for c in checks_for(SUITE_NAMES)))
    assert frames_apart(TableSet(DEMO_CLUSTER, demo), names, workers=1, apart_from_records=0) == []
    assert frames_apart(TableSet(DEMO_CLUSTER, demo), names, workers=2) == []  # 33 records: not worth a process
    assert frames_apart(TableSet(DEMO_CLUSTER, demo), ["log_violations"], workers=2,
                        apart_from_records=0) == []  # nothing left to build here
    assert frames_apart(clean(demo), names, workers=2, apart_from_records=0) == []  # edited tables: only here


# -------------------------------------------------------------------------------------------------------------
# A replay that starts from a snapshot


def test_a_replay_from_a_snapshot_after_the_disk_failure_passes(runner: GxRunner, tmp_path: Path) -> None:
    """The log's start was deleted: the job starts from a snapshot taken after broker 2's disk failed. Its
    partitions name the failed disk, which broker 2's registration in the snapshot no longer lists: offline (I13),
    not corrupt — I21 does not judge what a snapshot loaded, as the model's tracker does not."""
    log = demo_log()
    image = replay_entries(log)
    after = [LogEntry(offset=33 + i, record=NoOpRecord(), batch_base_offset=33 + i) for i in range(3)]
    write_lakehouse(tmp_path, "from-snapshot", after, snapshot=(image.to_records(), 33))
    tables = TableSet("from-snapshot", tmp_path)
    results = check_cluster(tables, runner)
    assert failed(results) == set()
    assert result(results, "I13.offline_intervals_match").element_count == 3
    assert "(from the snapshot the replay started with)" in (result(
        results, "I16.directory_failure_handled_in_batch").note or "")


def test_the_log_suite_checks_the_records_after_a_snapshot(runner: GxRunner, tmp_path: Path) -> None:
    """After the snapshot, broker 1 reports its disk NXG failed without the controller moving its leaderships."""
    image = replay_entries(demo_log())
    failure = BrokerRegistrationChangeRecord(version=2, broker_id=1, broker_epoch=1,
                                             log_dirs=(Uuid.from_string(BQ),))
    write_lakehouse(tmp_path, "from-snapshot", [LogEntry(offset=33, record=failure, batch_base_offset=33)],
                    snapshot=(image.to_records(), 33))
    results = check_cluster(TableSet("from-snapshot", tmp_path), runner)
    assert failed(results) == {"I14.leader_acceptable", "I16.directory_failure_handled_in_batch"}


@pytest.mark.parametrize("column", [
    pd.Series([3, 1 << 40, -2], dtype="int64"),
    pd.Series([3, 1 << 40, -2], dtype="Int64"),
    pd.Series([3, None, -2], dtype="Int64"),
    pd.Series([3.0, float("nan"), -2.0], dtype="float64"),
    pd.Series([3, None, -2], dtype="object"),
], ids=["int64", "Int64", "Int64 with a null", "float64 with NaN", "object"])
def test_the_log_suites_integer_columns_are_python_ints_and_none_whatever_pandas_made_of_them(
        column: pd.Series) -> None:
    """The log suite reads a million values of each integer column (offsets, batches, versions, times): a column
    without a null is converted whole, the others value by value; either way every value is an ``int`` (the
    entries' offsets and times, and the violations' rows, hold them) or None."""
    values = column_ints(column)
    expected = [int(v) if pd.notna(v) else None for v in column]
    assert values == expected
    assert [type(v) for v in values] == [type(v) for v in expected]
