"""kafka-dump-log --cluster-metadata-decoder text → LogEntry + events (formats reference §4.1)."""

from __future__ import annotations

import io
import json
import textwrap
from pathlib import Path

import pytest

from jbod_model.dumplog import (
    UNKNOWN_OFFSET,
    BatchHeader,
    BootstrapSnapshotStarted,
    ControlRecordEvent,
    DumpLayout,
    DumpLogReader,
    DumpProblem,
    ErrorPolicy,
    FileStarted,
    LogStartOffset,
    ProblemKind,
    SnapshotStarted,
    TrailingBytes,
    iter_dump_log,
    payload_json,
)
from jbod_model.errors import DecodeError
from jbod_model.records.control import (
    ControlEntry,
    ControlMessage,
    ControlRecordType,
    KRaftVersionRecord,
    LeaderChangeMessage,
    SnapshotHeaderRecord,
    Voter,
    VotersRecord,
)
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import (
    BeginTransactionRecord,
    EndTransactionRecord,
    FeatureLevelRecord,
    OpaqueRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    ZkMigrationStateRecord,
)
from jbod_model.uuid import Uuid

# ------------------------------------------------------------------------------------------------------------
# Builders for synthetic dumps, in exactly the layout DumpLogSegments prints (one line per batch or record).


def batch(base: int, last: int, *, epoch: int, control: bool, ts: int, position: int = 0, size: int = 100,
          crc: int = 1234567890) -> str:
    return (f"baseOffset: {base} lastOffset: {last} count: {last - base + 1} baseSequence: -1 "
            f"lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: {epoch} "
            f"isTransactional: false isControl: {str(control).lower()} deleteHorizonMs: OptionalLong.empty "
            f"position: {position} CreateTime: {ts} size: {size} magic: 2 compresscodec: none crc: {crc} "
            "isvalid: true")


def rec(offset: int, ts: int, suffix: str, *, key_size: int = -1, value_size: int = 24,
        ts_type: str = "CreateTime") -> str:
    return (f"| offset: {offset} {ts_type}: {ts} keySize: {key_size} valueSize: {value_size} sequence: -1 "
            f"headerKeys: [] {suffix}")


BEGIN = '{"type":"BEGIN_TRANSACTION_RECORD","version":0,"data":{"name":"Bootstrap records"}}'
MV20 = '{"type":"FEATURE_LEVEL_RECORD","version":0,"data":{"name":"metadata.version","featureLevel":20}}'
ZK = '{"type":"ZK_MIGRATION_STATE_RECORD","version":0,"data":{"zkMigrationState":0}}'
END = '{"type":"END_TRANSACTION_RECORD","version":0,"data":{}}'
# Real Kafka 3.7 output (Strimzi), formats reference §4.1.
PARTITION_V1 = (
    '{"type":"PARTITION_RECORD","version":1,"data":{"partitionId":0,"topicId":"xOxBrcYuSRWgtFuZIBiXIA",'
    '"replicas":[5,3,4],"isr":[5,3,4],"removingReplicas":[],"addingReplicas":[],"leader":5,"leaderEpoch":0,'
    '"partitionEpoch":0,"directories":["SaZDxfHKu3NMZ7OnFP7YnA","uHY7hO6-42Q7O4k0zLMmtg","p2UpbSD99eygD2ZToiSMzg"]}}'
)
REGISTER_V3 = (
    '{"type":"REGISTER_BROKER_RECORD","version":3,"data":{"brokerId":1,"isMigratingZkBroker":false,'
    '"incarnationId":"Yl3kKq5cRm6Fq0uYQ8b9Qw","brokerEpoch":7,"endPoints":[{"name":"PLAINTEXT","host":"localhost",'
    '"port":9092,"securityProtocol":0}],"features":[{"name":"metadata.version","minSupportedVersion":1,'
    '"maxSupportedVersion":20}],"rack":null,"fenced":true,"inControlledShutdown":false,'
    '"logDirs":["Teb3PFb009qvAZgMDEFH4g"]}}'
)
LEADER_CHANGE_JSON = '{"version":0,"leaderId":1,"voters":[{"voterId":1}],"grantingVoters":[{"voterId":1}]}'

T0, T1 = 1738908227548, 1738908227638
PR_12084 = "apache-kafka-pr-12084-checkpoint-dump.partial.txt"
PR_19729 = "apache-kafka-pr-19729-kraft-voters-dump.before.txt"
LOG = "data/__cluster_metadata-0/00000000000000000000.log"

# The tiny otus 3.8 log (SOURCES.md sample 6) as the Scala tool prints it, followed by a snapshot section.
SCALA_DUMP = "\n".join([
    f"Dumping {LOG}",
    "Log starting offset: 0",
    batch(0, 0, epoch=1, control=True, ts=T0, size=91, crc=3440531446),
    rec(0, T0, "controlType: LEADER_CHANGE(2)", key_size=4, value_size=19),
    batch(1, 4, epoch=1, control=False, ts=T1, position=91, size=145),
    rec(1, T1, f"payload: {BEGIN}"),
    rec(2, T1, f"payload: {MV20}"),
    rec(3, T1, f"payload: {ZK}"),
    rec(4, T1, f"payload: {END}"),
    "Dumping data/__cluster_metadata-0/00000000000000003006-0000000002.checkpoint",
    "Snapshot end offset: 3006, epoch: 2",
    batch(0, 0, epoch=2, control=True, ts=T1),
    rec(0, T1, 'SnapshotHeader {"version":0,"lastContainedLogTimestamp":1710774451597}', key_size=4),
    batch(1, 2, epoch=2, control=False, ts=T1, position=83),
    rec(1, T1, f"payload: {PARTITION_V1}", value_size=113),
    rec(2, T1, f"payload: {REGISTER_V3}"),
    batch(3, 3, epoch=2, control=True, ts=T1, position=300),
    rec(3, T1, 'SnapshotFooter {"version":0}', key_size=4),
    "",
])

JAVA_DUMP = "\n".join([
    "Dumping /var/lib/kafka/data/__cluster_metadata-0/00000000000000000000.log",
    "Log starting offset: 0",
    batch(0, 0, epoch=1, control=True, ts=T0),
    rec(0, T0, f"LeaderChange: {LEADER_CHANGE_JSON}", key_size=4, value_size=19),
    batch(1, 2, epoch=1, control=False, ts=T1, position=91),
    rec(1, T1, f"payload: {MV20}"),
    rec(2, T1, f"payload: {END}"),
    "Dumping /var/lib/kafka/data/bootstrap.checkpoint",
    "KRaft bootstrap snapshot",
    batch(0, 0, epoch=0, control=True, ts=T0),
    rec(0, T0, 'SnapshotHeader {"version":0,"lastContainedLogTimestamp":0}', key_size=4),
    batch(1, 1, epoch=0, control=False, ts=T0, position=80),
    rec(1, T0, f"payload: {MV20}"),
    batch(2, 2, epoch=0, control=True, ts=T0, position=170),
    rec(2, T0, 'SnapshotFooter {"version":0}', key_size=4),
])


def read(text: str, policy: ErrorPolicy | str = ErrorPolicy.FAIL) -> DumpLogReader:
    return DumpLogReader.from_text(text, source="dump.txt", policy=policy)


def offsets(reader: DumpLogReader) -> list[int]:
    return [e.offset for e in reader.entries()]


# ------------------------------------------------------------------------------------------------------------
# Real dumps (../shared/kraft-metadata-samples/text-dumps)


@pytest.mark.samples
def test_real_checkpoint_dump_pr_12084(samples_dir: Path) -> None:
    reader = DumpLogReader.from_path(samples_dir / "text-dumps" / PR_12084)
    path = ("/var/folders/xs/1lh3bwpj2674ch_3wyqbcv6c0000gn/T/kafka-3001968433464842910/kafka-269189/"
            "00000000000000000000-0000000000.checkpoint")
    # The excerpt stops right after the first data batch line: no metadata record is shown.
    assert list(reader.entries()) == []
    events = list(reader.events())
    assert [type(e) for e in events] == [FileStarted, SnapshotStarted, BatchHeader, ControlRecordEvent,
                                         BatchHeader, DumpProblem]
    assert events[0] == FileStarted(line=1, path=path)
    assert events[1] == SnapshotStarted(line=2, file=path, end_offset=0, epoch=0)
    header = events[2]
    assert isinstance(header, BatchHeader)
    assert (header.base_offset, header.last_offset, header.count, header.is_control,
            header.partition_leader_epoch, header.max_timestamp) == (0, 0, 1, True, 0, 1653548892941)
    assert (header.size, header.crc, header.is_valid, header.position) == (83, 3406426388, True, 0)
    assert events[3] == ControlRecordEvent(
        line=4, file=path, offset=0, timestamp=1653548892941, control_type=ControlRecordType.SNAPSHOT_HEADER,
        type_id=3, data={"version": 0, "lastContainedLogTimestamp": 10000}, batch_base_offset=0,
        leader_epoch=0, message=SnapshotHeaderRecord(last_contained_log_timestamp=10000))
    assert events[3].to_entry() == ControlEntry(
        offset=0, record=SnapshotHeaderRecord(last_contained_log_timestamp=10000), batch_base_offset=0,
        leader_epoch=0, timestamp=1653548892941, source=path)
    data_batch = events[4]
    assert isinstance(data_batch, BatchHeader)
    assert (data_batch.base_offset, data_batch.last_offset, data_batch.count, data_batch.is_control,
            data_batch.position) == (1, 4, 4, False, 83)
    report = reader.report()
    assert report.layout is DumpLayout.UNKNOWN
    assert report.files == (path,)
    assert (report.entries, report.batches, report.control_records, report.ignored_lines) == (0, 2, 1, 0)
    # Truncation is reported, never fatal, and drops nothing the dump showed.
    assert [(p.kind, p.offset) for p in report.problems] == [(ProblemKind.RECORD_COUNT_MISMATCH, 1)]
    assert report.skipped == ()


@pytest.mark.samples
def test_real_kraft_voters_dump_pr_19729(samples_dir: Path) -> None:
    reader = DumpLogReader.from_path(samples_dir / "text-dumps" / PR_19729)
    assert list(reader.entries()) == []  # a control batch only
    controls = list(reader.control_records())
    assert [(c.offset, c.control_type, c.type_id) for c in controls] == [
        (0, ControlRecordType.LEADER_CHANGE, 2),
        (1, ControlRecordType.KRAFT_VERSION, 5),
        (2, ControlRecordType.KRAFT_VOTERS, 6),
    ]
    assert {(c.batch_base_offset, c.leader_epoch, c.timestamp) for c in controls} == {(0, 1, 1747299887693)}
    assert all(c.file == "try_KAFKA-19069/00000000000000000000.log" for c in controls)
    assert controls[0].data is None  # the pre-KAFKA-19069 tool printed no LeaderChange content
    assert controls[0].message is None
    assert controls[0].to_entry() is None
    assert controls[1].data == {"version": 0, "kRaftVersion": 1}
    assert controls[1].message == KRaftVersionRecord(kraft_version=1)
    voters = controls[2].message
    assert isinstance(voters, VotersRecord)
    (voter,) = voters.voters
    assert (voter.voter_id, voter.voter_directory_id) == (1, Uuid.from_string("tpx8pd1IQDqJwMfGzXj6GA"))
    assert [(e.name, e.host, e.port) for e in voter.endpoints] == [("CONTROLLER", "localhost", 9093)]
    assert controls[2].data == {"version": 0, "voters": [{
        "voterId": 1, "voterDirectoryId": "tpx8pd1IQDqJwMfGzXj6GA",
        "endpoints": [{"name": "CONTROLLER", "host": "localhost", "port": 9093}],
        "kRaftVersionFeature": {"minSupportedVersion": 0, "maxSupportedVersion": 1}}]}
    starts = [e for e in reader.events() if isinstance(e, LogStartOffset)]
    assert starts == [LogStartOffset(line=2, file="try_KAFKA-19069/00000000000000000000.log", offset=0)]
    report = reader.report()
    assert report.layout is DumpLayout.SCALA
    assert report.clean
    assert (report.batches, report.control_records) == (1, 3)


@pytest.mark.samples
def test_synthetic_line_builders_match_real_kafka_output(samples_dir: Path) -> None:
    real = (samples_dir / "text-dumps" / PR_19729).read_text().splitlines()
    assert batch(0, 2, epoch=1, control=True, ts=1747299887693, size=174, crc=3714449884) == real[2]
    assert rec(0, 1747299887693, "controlType: LEADER_CHANGE(2)", key_size=4, value_size=19) == real[3]


@pytest.mark.samples
@pytest.mark.parametrize("width", [60, 72, 100])
def test_real_dump_hard_wrapped_like_the_pr_reads_the_same(samples_dir: Path, width: int) -> None:
    text = (samples_dir / "text-dumps" / PR_19729).read_text()
    wrapped = "\n".join(textwrap.fill(line, width, break_long_words=False, break_on_hyphens=False)
                        for line in text.splitlines())
    assert wrapped.count("\n") > text.count("\n")
    original = [(c.offset, c.control_type, c.data) for c in read(text).control_records()]
    again = [(c.offset, c.control_type, c.data) for c in read(wrapped).control_records()]
    assert again == original


@pytest.mark.samples
def test_real_dump_inside_prose_and_markdown(samples_dir: Path) -> None:
    text = (samples_dir / "text-dumps" / PR_12084).read_text()
    pasted = (f"Here is the output of the tool:\n\n```\n$ bin/kafka-dump-log.sh --files x\n{text}```\n\n"
              "Thanks!\n")
    reader = read(pasted)
    assert [c.data for c in reader.control_records()] == [{"version": 0, "lastContainedLogTimestamp": 10000}]
    assert reader.report().ignored_lines == 5  # the two sentences, both fences and the shell prompt


# ------------------------------------------------------------------------------------------------------------
# Synthetic dumps: both layouts


def test_scala_layout_entries_offsets_and_provenance() -> None:
    reader = read(SCALA_DUMP)
    entries = list(reader.entries())
    assert [type(e.record) for e in entries] == [
        BeginTransactionRecord, FeatureLevelRecord, ZkMigrationStateRecord, EndTransactionRecord,
        PartitionRecord, RegisterBrokerRecord]
    assert offsets(reader) == [1, 2, 3, 4, 1, 2]  # snapshot offsets are local to the snapshot
    first = entries[0]
    assert first == LogEntry(offset=1, record=BeginTransactionRecord(name="Bootstrap records"),
                             batch_base_offset=1, leader_epoch=1, timestamp=T1, source=LOG)
    assert entries[1].record == FeatureLevelRecord(name="metadata.version", feature_level=20)
    partition = entries[4]
    assert isinstance(partition.record, PartitionRecord)
    assert partition.record.replicas == (5, 3, 4)
    assert partition.record.directories[0] == Uuid.from_string("SaZDxfHKu3NMZ7OnFP7YnA")
    assert (partition.batch_base_offset, partition.leader_epoch) == (1, 2)
    assert partition.source == "data/__cluster_metadata-0/00000000000000003006-0000000002.checkpoint"
    broker = entries[5].record
    assert isinstance(broker, RegisterBrokerRecord)
    assert broker.log_dirs == (Uuid.from_string("Teb3PFb009qvAZgMDEFH4g"),)

    controls = list(reader.control_records())
    assert [(c.control_type, c.offset, c.leader_epoch) for c in controls] == [
        (ControlRecordType.LEADER_CHANGE, 0, 1),
        (ControlRecordType.SNAPSHOT_HEADER, 0, 2),
        (ControlRecordType.SNAPSHOT_FOOTER, 3, 2),
    ]
    assert [type(e) for e in reader.events() if not isinstance(e, (BatchHeader, ControlRecordEvent))] == [
        FileStarted, LogStartOffset, FileStarted, SnapshotStarted]
    report = reader.report()
    assert report.layout is DumpLayout.SCALA
    assert report.clean
    assert (report.entries, report.batches, report.control_records) == (6, 5, 3)


def test_items_interleave_records_and_events_in_dump_order() -> None:
    kinds = [type(i).__name__ for i in read(SCALA_DUMP).items()][:9]
    assert kinds == ["FileStarted", "LogStartOffset", "BatchHeader", "ControlRecordEvent", "BatchHeader",
                     "LogEntry", "LogEntry", "LogEntry", "LogEntry"]


def test_java_layout_leader_change_json_and_bootstrap_snapshot() -> None:
    reader = read(JAVA_DUMP)
    assert offsets(reader) == [1, 2, 1]
    leader_change = next(reader.control_records())
    assert leader_change.control_type is ControlRecordType.LEADER_CHANGE
    assert leader_change.data == json.loads(LEADER_CHANGE_JSON)
    assert leader_change.message == LeaderChangeMessage(leader_id=1, voters=(Voter(voter_id=1),),
                                                        granting_voters=(Voter(voter_id=1),))
    assert any(isinstance(e, BootstrapSnapshotStarted) for e in reader.events())
    bootstrap = list(reader.entries())[-1]
    assert bootstrap.source == "/var/lib/kafka/data/bootstrap.checkpoint"
    assert (bootstrap.leader_epoch, bootstrap.batch_base_offset) == (0, 1)
    assert reader.report().layout is DumpLayout.JAVA


def test_both_layouts_in_one_text_are_mixed() -> None:
    assert read(SCALA_DUMP + "\n" + JAVA_DUMP).report().layout is DumpLayout.MIXED


def test_log_append_time_and_no_timestamp_type() -> None:
    text = "\n".join([
        batch(7, 8, epoch=3, control=False, ts=99),
        rec(7, 55, f"payload: {END}", ts_type="LogAppendTime"),
        rec(8, -1, f"payload: {END}", ts_type="NoTimestampType"),
    ])
    assert [e.timestamp for e in read(text).entries()] == [55, None]


def test_end_txn_marker_and_unknown_control_type() -> None:
    text = "\n".join([
        batch(0, 1, epoch=1, control=True, ts=T0),
        rec(0, T0, "endTxnMarker: COMMIT coordinatorEpoch: 5", key_size=4),
        rec(1, T0, "controlType: UNKNOWN(9)", key_size=4),
    ])
    controls = list(read(text).control_records())
    assert [(c.control_type, c.type_id, c.data) for c in controls] == [
        (ControlRecordType.COMMIT, 1, {"coordinatorEpoch": 5}),
        (None, 9, None),
    ]


def test_iter_dump_log_streams_from_an_open_file() -> None:
    items = list(iter_dump_log(io.StringIO(SCALA_DUMP), source="dump.txt"))
    assert [i.offset for i in items if isinstance(i, LogEntry)] == [1, 2, 3, 4, 1, 2]


def test_from_path_names_the_text_file_in_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad-dump.txt"
    bad.write_text(f"{batch(0, 0, epoch=1, control=False, ts=T0)}\n{rec(0, T0, 'payload: {nope')}\n")
    with pytest.raises(DecodeError) as info:
        list(DumpLogReader.from_path(bad).entries())
    assert (info.value.source, info.value.line) == (str(bad), 2)
    assert str(bad) in str(info.value)


# ------------------------------------------------------------------------------------------------------------
# --skip-record-metadata


def test_scala_skip_record_metadata_offsets_from_batch_lines() -> None:
    text = "\n".join([
        f"Dumping {LOG}",
        "Log starting offset: 0",
        batch(0, 0, epoch=1, control=True, ts=T0),
        "",  # the control record prints as an empty line
        batch(1, 3, epoch=1, control=False, ts=T1),
        f" payload: {BEGIN}",
        f" payload: {MV20}",
        f" payload: {END}",
    ])
    reader = read(text)
    entries = list(reader.entries())
    assert offsets(reader) == [1, 2, 3]
    assert all((e.batch_base_offset, e.leader_epoch, e.timestamp) == (1, 1, T1) for e in entries)
    assert list(reader.control_records()) == []
    report = reader.report()
    assert report.layout is DumpLayout.SCALA
    assert report.unknown_offsets == 0
    assert report.clean


def test_java_skip_record_metadata() -> None:
    text = "\n".join([
        batch(10, 11, epoch=4, control=False, ts=T1),
        f"| payload: {MV20}",
        f"| payload: {ZK}",
        batch(12, 12, epoch=4, control=True, ts=T1),
        "",
        batch(13, 13, epoch=5, control=False, ts=T1 + 1),
        f"| payload: {END}",
    ])
    reader = read(text)
    assert offsets(reader) == [10, 11, 13]
    assert [e.leader_epoch for e in reader.entries()] == [4, 4, 5]
    assert reader.report().layout is DumpLayout.JAVA


def test_skip_record_metadata_without_batch_line_marks_offsets_unknown() -> None:
    reader = read(f" payload: {MV20}\n payload: {END}\n")
    entries = list(reader.entries())
    assert [e.offset for e in entries] == [UNKNOWN_OFFSET, UNKNOWN_OFFSET]
    assert {(e.batch_base_offset, e.leader_epoch, e.timestamp) for e in entries} == {(None, None, None)}
    assert reader.report().unknown_offsets == 2


def test_corrupt_payload_under_skip_record_metadata_keeps_later_offsets_aligned() -> None:
    text = "\n".join([batch(1, 3, epoch=1, control=False, ts=T1), f" payload: {MV20}",
                      ' payload: {"type":"NO_OP_RECORD","version":0,"data":', f" payload: {END}"])
    reader = read(text, policy=ErrorPolicy.SKIP)
    assert offsets(reader) == [1, 3]
    problems = reader.report().problems
    assert [(p.kind, p.offset, p.line) for p in problems] == [(ProblemKind.INVALID_JSON, 2, 3)]
    with pytest.raises(DecodeError, match="payload at offset 2 is not valid JSON: truncated"):
        list(read(text).entries())


def test_reader_takes_text_given_where_lines_are_expected() -> None:
    assert offsets(DumpLogReader(SCALA_DUMP)) == [1, 2, 3, 4, 1, 2]


def test_more_payload_lines_than_the_batch_holds() -> None:
    text = "\n".join([batch(5, 5, epoch=1, control=False, ts=T0), f" payload: {MV20}", f" payload: {END}"])
    reader = read(text)
    assert offsets(reader) == [5, UNKNOWN_OFFSET]
    assert [p.kind for p in reader.report().problems] == [ProblemKind.RECORD_COUNT_MISMATCH]


# ------------------------------------------------------------------------------------------------------------
# Wrapped lines, garbage text


@pytest.mark.parametrize("width", [50, 64, 80, 120])
def test_hard_wrapped_dump_reads_like_the_original(width: int) -> None:
    wrapped = "\n".join(textwrap.fill(line, width, break_long_words=False, break_on_hyphens=False)
                        for line in SCALA_DUMP.splitlines())
    assert wrapped.count("\n") > SCALA_DUMP.count("\n")
    original, again = read(SCALA_DUMP), read(wrapped)
    assert list(again.entries()) == [
        LogEntry(e.offset, e.record, e.batch_base_offset, e.leader_epoch, e.timestamp, e.source)
        for e in original.entries()]
    assert [(c.offset, c.control_type, c.data) for c in again.control_records()] == [
        (c.offset, c.control_type, c.data) for c in original.control_records()]
    assert again.report().clean


def test_wrap_inside_a_json_string_is_joined_with_one_space() -> None:
    line = rec(1, T1, f"payload: {BEGIN}")
    head, tail = line.split(" records", 1)  # break at the space inside "Bootstrap records"
    reader = read(f"{batch(1, 1, epoch=1, control=False, ts=T1)}\n{head}\nrecords{tail}\n")
    assert [e.record for e in reader.entries()] == [BeginTransactionRecord(name="Bootstrap records")]


def test_wrap_just_before_payload_is_not_taken_for_the_skip_variant() -> None:
    line = rec(2, T1, f"payload: {MV20}")
    head, tail = line.split(" payload: ")
    reader = read(f"{batch(2, 2, epoch=1, control=False, ts=T1)}\n{head}\npayload: {tail}\n")
    assert offsets(reader) == [2]
    assert reader.report().layout is DumpLayout.UNKNOWN


def test_continuation_lines_are_only_joined_while_the_json_is_open() -> None:
    text = "\n".join([
        batch(1, 1, epoch=1, control=False, ts=T1),
        rec(1, T1, f"payload: {MV20}"),
        "This sentence follows a complete line and is prose, not a continuation.",
    ])
    reader = read(text)
    assert offsets(reader) == [1]
    assert reader.report().ignored_lines == 1


def test_garbage_text_around_and_between_records_is_ignored() -> None:
    lines = SCALA_DUMP.splitlines()
    noisy = ["# Incident 4711: metadata dump", "```text", "| Column | Other |", "|---|---|",
             "Dumping the whole log took 3 seconds.", "baseOffset is explained below", "payload",
             *lines[:5], "  (batch 1 follows)  ", "", *lines[5:], "```", "Found nothing else of interest."]
    reader = read("\n".join(noisy))
    assert offsets(reader) == offsets(read(SCALA_DUMP))
    report = reader.report()
    assert report.clean
    assert report.ignored_lines == 10


def test_dumping_line_wrapped_before_a_long_path() -> None:
    text = "Dumping\n/var/lib/kafka/data/__cluster_metadata-0/00000000000000000000.log\nDumping\nis slow\n"
    reader = read(text)
    assert reader.report().files == ("/var/lib/kafka/data/__cluster_metadata-0/00000000000000000000.log",)
    assert reader.report().ignored_lines == 2


def test_indented_dump_lines_are_read() -> None:
    indented = "\n".join(f"    {line}" for line in JAVA_DUMP.splitlines())
    assert offsets(read(indented)) == [1, 2, 1]


def test_wrapped_batch_line_keeps_its_fields() -> None:
    line = batch(1, 1, epoch=6, control=False, ts=T1)
    head, tail = line.split(" isControl:")
    reader = read(f"{head}\nisControl:{tail}\n{rec(1, T1, f'payload: {END}')}")
    assert [(e.batch_base_offset, e.leader_epoch) for e in reader.entries()] == [(1, 6)]


# ------------------------------------------------------------------------------------------------------------
# Corrupted payloads and other problems

GOOD_THEN_BAD_THEN_GOOD = "\n".join([
    f"Dumping {LOG}",
    batch(1, 3, epoch=1, control=False, ts=T1),
    rec(1, T1, f"payload: {MV20}"),
    rec(2, T1, 'payload: {"type":"TOPIC_RECORD","version":0,"data":{"name":"orders","topicId":'),
    rec(3, T1, f"payload: {END}"),
])


def test_truncated_payload_fails_under_fail_policy() -> None:
    with pytest.raises(DecodeError) as info:
        list(read(GOOD_THEN_BAD_THEN_GOOD).entries())
    assert (info.value.source, info.value.line) == ("dump.txt", 4)
    assert "offset 2" in info.value.reason
    assert "truncated" in info.value.reason


def test_truncated_payload_is_skipped_and_reported_under_skip_policy() -> None:
    reader = read(GOOD_THEN_BAD_THEN_GOOD, policy="skip")
    assert offsets(reader) == [1, 3]
    problems = reader.report().problems
    assert [(p.line, p.kind, p.offset, p.file) for p in problems] == [(4, ProblemKind.INVALID_JSON, 2, LOG)]
    assert reader.report().skipped == problems
    assert problems[0].text.startswith("| offset: 2 ")


def test_truncated_payload_followed_by_prose_swallows_only_until_a_known_line() -> None:
    text = "\n".join([batch(1, 2, epoch=1, control=False, ts=T1),
                      rec(1, T1, 'payload: {"type":"NO_OP_RECORD","version":0,"data":'),
                      "some prose that got pasted", rec(2, T1, f"payload: {END}")])
    reader = read(text, policy=ErrorPolicy.SKIP)
    assert offsets(reader) == [2]
    (problem,) = reader.report().problems
    assert (problem.line, problem.kind) == (2, ProblemKind.INVALID_JSON)


def test_broken_json_is_not_joined_with_following_lines() -> None:
    text = "\n".join([batch(1, 1, epoch=1, control=False, ts=T1),
                      rec(1, T1, 'payload: {"type":"TOPIC_RECORD","version":0,"data":{"name":"t"]}'),
                      "trailing prose"])
    reader = read(text, policy=ErrorPolicy.SKIP)
    (problem,) = reader.report().problems
    assert problem.kind is ProblemKind.INVALID_JSON
    assert reader.report().ignored_lines == 1
    with pytest.raises(DecodeError, match="not valid JSON"):
        list(read(text).entries())


@pytest.mark.parametrize(("payload", "message"), [
    ('{"type":"PARTITION_RECORD","version":0,"data":{"partitionId":0,"topicId":"xOxBrcYuSRWgtFuZIBiXIA",'
     '"replicas":"5,3,4","isr":[5],"removingReplicas":[],"addingReplicas":[],"leader":5,"leaderEpoch":0,'
     '"partitionEpoch":0}}', "expected a JSON array"),
    ('{"type":"TOPIC_RECORD","version":0,"data":{"name":"t","topicId":"not-a-uuid"}}', "topicId"),
    ('{"type":"MYSTERY_RECORD","version":0,"data":{}}', "unknown record type"),
    ('{"type":"TOPIC_RECORD","version":0,"data":{"name":"t"}}', "required field 'topicId'"),
    ("[1,2,3]", "not a JSON object"),
    ('{"type":"NO_OP_RECORD","version":0,"data":{},"x":NaN}', "not valid JSON"),
])
def test_payload_that_does_not_fit_the_schema(payload: str, message: str) -> None:
    text = "\n".join([batch(1, 2, epoch=1, control=False, ts=T1), rec(1, T1, f"payload: {payload}"),
                      rec(2, T1, f"payload: {END}")])
    with pytest.raises(DecodeError, match=message) as info:
        list(read(text).entries())
    assert info.value.line == 2
    reader = read(text, policy=ErrorPolicy.SKIP)
    assert offsets(reader) == [2]
    assert [p.line for p in reader.report().skipped] == [2]


def test_newer_record_version_is_kept_opaque_not_rejected() -> None:
    text = "\n".join([batch(1, 1, epoch=1, control=False, ts=T1),
                      rec(1, T1, 'payload: {"type":"TOPIC_RECORD","version":9,'
                                 '"data":{"name":"t","future":1}}')])
    (entry,) = read(text).entries()
    assert entry.record == OpaqueRecord(api_key=2, version=9, type_name="TOPIC_RECORD",
                                        data={"name": "t", "future": 1})


def test_kafka_error_at_payload_is_reported_not_raised() -> None:
    text = "\n".join([
        batch(1, 3, epoch=1, control=False, ts=T1),
        rec(1, T1, f"payload: {MV20}"),
        rec(2, T1, "payload: Error at 2, skipping. Unknown metadata id 99"),
        rec(3, T1, f"payload: {END}"),
    ])
    for policy in ErrorPolicy:
        reader = read(text, policy=policy)
        assert offsets(reader) == [1, 3]
        (problem,) = reader.report().skipped
        assert (problem.kind, problem.offset, problem.line) == (ProblemKind.KAFKA_DECODE_ERROR, 2, 3)
        assert "Unknown metadata id 99" in problem.reason


def test_found_invalid_bytes_is_reported_not_raised() -> None:
    tail = "Found 17 invalid bytes at the end of 00000000000000000000.log"
    text = "\n".join([*JAVA_DUMP.splitlines()[:7], tail])
    reader = read(text)
    assert offsets(reader) == [1, 2]
    report = reader.report()
    assert report.trailing_bytes == (TrailingBytes(line=8, file_name="00000000000000000000.log", count=17),)
    assert not report.clean
    assert report.problems == ()


def test_broken_control_record_json() -> None:
    text = "\n".join([batch(0, 0, epoch=1, control=True, ts=T0),
                      rec(0, T0, 'SnapshotHeader {"version":0,"lastContainedLogTimestamp":}', key_size=4)])
    with pytest.raises(DecodeError, match="SnapshotHeader JSON at offset 0"):
        list(read(text).events())
    assert [p.kind for p in read(text, policy="skip").report().problems] == [ProblemKind.INVALID_JSON]


def test_control_record_json_that_does_not_fit_its_schema() -> None:
    text = "\n".join([batch(0, 0, epoch=1, control=True, ts=T0),
                      rec(0, T0, 'KRaftVersion {"version":0,"kRaftVersion":"one"}', key_size=4)])
    with pytest.raises(DecodeError, match="KRaftVersion JSON at offset 0"):
        list(read(text).events())
    assert [p.kind for p in read(text, policy="skip").report().problems] == [ProblemKind.SCHEMA_MISMATCH]


def test_record_line_without_payload() -> None:
    text = "\n".join([batch(0, 0, epoch=1, control=False, ts=T0),
                      "| offset: 0 CreateTime: 1 keySize: -1 valueSize: 24 sequence: -1 headerKeys: []"])
    with pytest.raises(DecodeError, match="has no payload"):
        list(read(text).entries())
    assert [p.kind for p in read(text, policy="skip").report().problems] == [ProblemKind.MISSING_PAYLOAD]


def test_malformed_batch_and_record_lines() -> None:
    text = "\n".join(["baseOffset: 0 lastOffset: 0 count: 1 isvalid: true",
                      "| offset: x CreateTime: 1 keySize: -1 valueSize: 24 payload: {}",
                      "| offset: 3 CreateTime: 1 keySize: -1 valueSize: 24 sequence: -1 headerKeys: [] junk"])
    with pytest.raises(DecodeError, match="batch line without a readable partitionLeaderEpoch"):
        list(read(text).entries())
    reader = read(text, policy="skip")
    assert [(p.kind, p.line) for p in reader.report().problems] == [
        (ProblemKind.MALFORMED_BATCH_LINE, 1), (ProblemKind.MALFORMED_RECORD_LINE, 2),
        (ProblemKind.MALFORMED_RECORD_LINE, 3)]
    assert [p.line for p in reader.report().skipped] == [2, 3]
    assert list(reader.entries()) == []


def test_unknown_policy_is_rejected() -> None:
    with pytest.raises(ValueError, match="'lenient'"):
        DumpLogReader.from_text("", policy="lenient")


def test_empty_text() -> None:
    report = read("").report()
    assert (report.entries, report.layout, report.clean) == (0, DumpLayout.UNKNOWN, True)


# ------------------------------------------------------------------------------------------------------------
# payload_json: the same text Kafka prints


@pytest.mark.parametrize("payload", [BEGIN, MV20, ZK, END, PARTITION_V1, REGISTER_V3])
def test_payload_json_reproduces_kafka_text(payload: str) -> None:
    (entry,) = read("\n".join([batch(1, 1, epoch=1, control=False, ts=T1),
                               rec(1, T1, f"payload: {payload}")])).entries()
    assert payload_json(entry.record) == payload


def test_payload_json_drops_default_tagged_fields_like_kafka() -> None:
    record = PartitionRecord(version=2, partition_id=1, topic_id=Uuid.from_string("xOxBrcYuSRWgtFuZIBiXIA"),
                             replicas=(1,), isr=(1,), leader=1, leader_epoch=0, partition_epoch=0,
                             directories=(Uuid.from_string("Teb3PFb009qvAZgMDEFH4g"),))
    assert payload_json(record) == (
        '{"type":"PARTITION_RECORD","version":2,"data":{"partitionId":1,"topicId":"xOxBrcYuSRWgtFuZIBiXIA",'
        '"replicas":[1],"isr":[1],"removingReplicas":[],"addingReplicas":[],"leader":1,"leaderEpoch":0,'
        '"partitionEpoch":0,"directories":["Teb3PFb009qvAZgMDEFH4g"]}}')


# ------------------------------------------------------------------------------------------------------------
# Every real binary file, printed as the Java tool prints it, reads back to what the binary reader decodes.

_CONTROL_LABEL = {
    ControlRecordType.LEADER_CHANGE: "LeaderChange: ",
    ControlRecordType.SNAPSHOT_HEADER: "SnapshotHeader ",
    ControlRecordType.SNAPSHOT_FOOTER: "SnapshotFooter ",
    ControlRecordType.KRAFT_VERSION: "KRaftVersion ",
    ControlRecordType.KRAFT_VOTERS: "KRaftVoters ",
}
_SEGMENT = "__cluster_metadata-0/00000000000000000000.log"
_BINARY_SAMPLES = [
    f"greenlemont-3node-kafka3.5/data/kafka1/{_SEGMENT}",
    "greenlemont-3node-kafka3.5/data/kafka1/__cluster_metadata-0/00000000000000028869-0000000189.checkpoint",
    "greenlemont-3node-kafka3.5/data/kafka1/bootstrap.checkpoint",
    f"indus-local-test-rig-kafka4.2/kafka-data/{_SEGMENT}",
    "indus-local-test-rig-kafka4.2/kafka-data/__cluster_metadata-0/"
    "00000000000000046533-0000000004.checkpoint",
    "indus-local-test-rig-kafka4.2/kafka-data/bootstrap.checkpoint",
    f"otus-kafka-kafka3.8/data/{_SEGMENT}",
    "otus-kafka-kafka3.8/data/bootstrap.checkpoint",
]


@pytest.mark.samples
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n.endswith(_SEGMENT) else n
                                  for n in _BINARY_SAMPLES])
def test_real_binary_file_round_trips_through_dump_text(samples_dir: Path, name: str) -> None:
    from jbod_model.records.json_codec import dumps, message_to_json
    from jbod_model.storage.log_reader import iter_batches

    path = samples_dir / name
    lines, entries, controls = [f"Dumping {path}"], [], []
    for b in iter_batches(path):
        h = b.header
        lines.append(batch(h.base_offset, h.last_offset, epoch=h.partition_leader_epoch, control=h.is_control,
                           ts=h.max_timestamp, position=h.position, size=h.size, crc=h.crc))
        for c in b.controls:
            assert isinstance(c.record, ControlMessage)  # every real control record has a typed schema
            label = _CONTROL_LABEL[ControlRecordType(c.control_type)]
            content = label + dumps(message_to_json(c.record, 0))
            lines.append(rec(c.offset, c.timestamp or 0, content, key_size=4))
            controls.append(c)
        for e in b.entries:
            lines.append(rec(e.offset, e.timestamp or 0, f"payload: {payload_json(e.record)}"))
            entries.append(e)
    reader = read("\n".join(lines))
    assert list(reader.entries()) == entries
    assert [c.to_entry() for c in reader.control_records()] == controls
    assert reader.report().clean


# ------------------------------------------------------------------------------------------------------------
# Binary → dump-log text (jbod inspect): Kafka's own lines for the otus 3.8 log (formats reference §4.1).


@pytest.mark.samples
def test_inspect_prints_the_otus_log_as_kafka_does(samples_dir: Path) -> None:
    from jbod_model.storage.dump_format import dump_file

    path = samples_dir / f"otus-kafka-kafka3.8/data/{_SEGMENT}"
    lines = list(dump_file(path))
    assert lines[:4] == [
        f"Dumping {path}",
        "Log starting offset: 0",
        batch(0, 0, epoch=1, control=True, ts=T0, size=91, crc=3440531446),
        rec(0, T0, "controlType: LEADER_CHANGE(2)", key_size=4, value_size=19),
    ]
    assert lines[5] == rec(1, T1, f"payload: {BEGIN}", value_size=24)
    assert lines[6] == rec(2, T1, f"payload: {MV20}", value_size=23)


@pytest.mark.samples
@pytest.mark.parametrize("name", [
    "indus-local-test-rig-kafka4.2/kafka-data/__cluster_metadata-0/00000000000000046533-0000000004.checkpoint",
    "greenlemont-3node-kafka3.5/data/kafka1/bootstrap.checkpoint",
    f"otus-kafka-kafka3.8/data/{_SEGMENT}",
])
def test_inspect_output_reads_back_to_the_binary_records(samples_dir: Path, name: str) -> None:
    from jbod_model.storage.dump_format import dump_file
    from jbod_model.storage.log_reader import read_log_entries

    path = samples_dir / name
    reader = read("\n".join(dump_file(path)))
    binary = [(e.offset, e.record, e.leader_epoch, e.timestamp) for e in read_log_entries(path)]
    assert [(e.offset, e.record, e.leader_epoch, e.timestamp) for e in reader.entries()] == binary
    assert reader.report().clean


def test_inspect_reports_a_torn_tail_like_kafka(tmp_path: Path) -> None:
    from jbod_model.records.metadata import NoOpRecord
    from jbod_model.storage.dump_format import dump_file
    from jbod_model.storage.log_writer import encode_data_batch

    path = tmp_path / "00000000000000000000.log"
    good = encode_data_batch([NoOpRecord()], base_offset=0, leader_epoch=1, timestamp=5)
    path.write_bytes(good + good[:30])
    lines = list(dump_file(path, policy="skip"))
    assert lines[-1] == f"Found 30 invalid bytes at the end of {path.name}"
    assert sum(line.startswith("| offset:") for line in lines) == 1
