"""The stream runner and its JSON Lines form: records replayed, requests handled, events in order, deterministic;
plus the bundled example ``pipelines/examples/demo-disk-failure.jsonl``."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from jbod_model.controller import ControllerConfig
from jbod_model.controller.messages import BrokerHeartbeatRequest, BrokerRegistrationRequest
from jbod_model.errors import DecodeError, InputError
from jbod_model.records.entry import LogEntry
from jbod_model.records.json_codec import dumps
from jbod_model.records.metadata import FeatureLevelRecord, NoOpRecord, PartitionChangeRecord
from jbod_model.replicas import OfflineReason, offline_replicas
from jbod_model.stream import (
    RequestEntry,
    StreamRunner,
    entry_to_json,
    entry_to_line,
    load_jsonl,
    parse_jsonl_line,
    read_jsonl,
    run_stream,
    write_jsonl,
)
from jbod_model.uuid import Uuid

DEMO = Path(__file__).resolve().parents[2] / "pipelines" / "examples" / "demo-disk-failure.jsonl"
FAILED_DIR = Uuid.from_string("Y8UXxSTrSB2pCc9s439Vkw")  # broker 2's first directory in the demo

FEATURE_LINE = ('{"offset":0,"type":"FEATURE_LEVEL_RECORD","version":0,"data":{"name":"metadata.version",'
                '"featureLevel":21}}')
REGISTER_LINE = ('{"type":"BROKER_REGISTRATION_REQUEST","data":{"brokerId":1,"clusterId":"c",'
                 '"incarnationId":"VD5ciprSTqW1UEebruuD-A","listeners":[],"features":[{"name":"metadata.version",'
                 '"minSupportedVersion":1,"maxSupportedVersion":21}],"rack":null,"isMigratingZkBroker":false,'
                 '"logDirs":["NXGV69yVQ06uYL_ESF8CWA"],"previousBrokerEpoch":-1}}')


# -- parsing and writing ----------------------------------------------------------------------------------------


def test_parse_a_record_line_and_a_request_line() -> None:
    record = parse_jsonl_line(FEATURE_LINE, 1)
    assert record == LogEntry(offset=0, record=FeatureLevelRecord(name="metadata.version", feature_level=21))
    request = parse_jsonl_line(REGISTER_LINE, 2, source="s.jsonl")
    assert isinstance(request, RequestEntry)
    assert request.offset is None and request.source == "s.jsonl"
    assert isinstance(request.request, BrokerRegistrationRequest) and request.request.version == 4  # latest
    assert parse_jsonl_line("   ", 3) is None


def test_optional_record_keys_and_round_trip() -> None:
    line = ('{"offset":7,"type":"NO_OP_RECORD","version":0,"data":{},"timestamp":1700000000000,"leaderEpoch":3,'
            '"batchBaseOffset":6}')
    entry = parse_jsonl_line(line, 1)
    assert entry == LogEntry(offset=7, record=NoOpRecord(), batch_base_offset=6, leader_epoch=3,
                             timestamp=1700000000000)
    assert entry_to_line(entry) == line
    request = parse_jsonl_line('{"offset":9,' + REGISTER_LINE[1:], 2)
    assert request is not None
    assert json.loads(entry_to_line(request)) == {**json.loads(REGISTER_LINE), "offset": 9, "version": 4}


@pytest.mark.parametrize(("line", "fragment"), [
    ("{not json", "line 4: not valid JSON"),
    ('["a"]', "line 4: expected a JSON object"),
    ('{"type":"NO_OP_RECORD","version":0,"data":{}}', "line 4: a record needs an integer 'offset'"),
    ('{"offset":true,"type":"NO_OP_RECORD","version":0,"data":{}}', "line 4: 'offset' must be an integer"),
    ('{"offset":-1,"type":"NO_OP_RECORD","version":0,"data":{}}', "line 4: 'offset' must not be negative"),
    ('{"offset":1,"type":"NOPE_RECORD","version":0,"data":{}}', "line 4"),
    ('{"type":"FETCH_REQUEST","data":{}}', "line 4: unknown request type 'FETCH_REQUEST'"),
    ('{"type":"BROKER_HEARTBEAT_REQUEST","version":5,"data":{}}', "line 4"),
    ('{"type":"BROKER_HEARTBEAT_REQUEST","data":{"brokerId":1}}', "line 4"),
    ('{"type":"BROKER_HEARTBEAT_REQUEST","version":"1","data":{}}', "line 4: 'version' must be an integer"),
])
def test_bad_lines_raise_decode_error_naming_the_line(line: str, fragment: str) -> None:
    with pytest.raises(DecodeError, match=fragment.replace("(", r"\(").replace("[", r"\[")):
        list(read_jsonl(["", FEATURE_LINE, "", line]))


def test_writer_and_reader_round_trip_the_demo() -> None:
    entries = load_jsonl(DEMO)
    out = io.StringIO()
    assert write_jsonl(entries, out) == len(entries)
    assert out.getvalue() == DEMO.read_text()
    assert [entry_to_json(e) for e in read_jsonl(out.getvalue().splitlines())] == [entry_to_json(e) for e in entries]


# -- running -----------------------------------------------------------------------------------------------------


def test_records_are_replayed_and_requests_yield_events_in_order() -> None:
    entries = list(read_jsonl([FEATURE_LINE, REGISTER_LINE]))
    heartbeat = RequestEntry(offset=None, request=BrokerHeartbeatRequest(
        broker_id=1, broker_epoch=1, current_metadata_offset=1), source="test")
    runner = StreamRunner()
    events = list(runner.run([*entries, heartbeat, LogEntry(offset=5, record=NoOpRecord())]))
    assert [e.type for e in events] == ["BROKER_REGISTRATION_REQUEST", "BROKER_HEARTBEAT_REQUEST"]
    register, beat = (e.to_json() for e in events)
    assert register["response"] == {"throttleTimeMs": 0, "errorCode": 0, "brokerEpoch": 1}
    assert [(r["offset"], r["type"], r["version"]) for r in register["records"]] == [
        (1, "REGISTER_BROKER_RECORD", 3)]
    assert beat["response"]["isFenced"] is False
    assert beat["records"] == [{"offset": 2, "type": "BROKER_REGISTRATION_CHANGE_RECORD", "version": 0,
                                "data": {"brokerId": 1, "brokerEpoch": 1, "fenced": -1}}]
    assert events[1].entries[0].source == "test"
    assert runner.image.last_offset == 5 and not runner.image.cluster.brokers[1].fenced


def test_a_record_behind_the_written_log_is_refused() -> None:
    entries = list(read_jsonl([FEATURE_LINE, REGISTER_LINE]))
    with pytest.raises(InputError, match=r"offset 1 .*next offset is 2"):
        list(StreamRunner().run([*entries, LogEntry(offset=1, record=NoOpRecord())]))


def test_top_level_errors_carry_kafka_s_message() -> None:
    runner = StreamRunner(config=ControllerConfig(cluster_id="expected"))
    (event,) = runner.run(read_jsonl([FEATURE_LINE, REGISTER_LINE]))
    body = event.to_json()
    assert body["response"]["errorCode"] == 104 and body["records"] == []
    assert body["errorMessage"] == "Expected cluster ID expected, but got cluster ID c"


def test_runs_are_deterministic() -> None:
    first, image1 = run_stream(load_jsonl(DEMO))
    second, image2 = run_stream(load_jsonl(DEMO))
    assert [dumps(e.to_json()) for e in first] == [dumps(e.to_json()) for e in second]
    assert image1 == image2


# -- the bundled example ------------------------------------------------------------------------------------------


def test_demo_disk_failure() -> None:
    events, image = run_stream(load_jsonl(DEMO))
    assert all(e.response.to_json().get("errorCode", 0) == 0 for e in events)
    orders, payments = image.topics.by_name["orders"], image.topics.by_name["payments"]
    assert len(image.topics.by_id[orders].partitions) == 3 and len(image.topics.by_id[payments].partitions) == 2
    # Every replica of every broker was assigned to one of its two real directories.
    for _, _, part in image.topics.partitions():
        for broker, directory in zip(part.replicas, part.directories, strict=True):
            assert directory in image.cluster.brokers[broker].directories or directory == FAILED_DIR

    offline = offline_replicas(image)
    assert offline  # broker 2's replicas in the failed directory, and only those
    assert {(r.broker_id, r.directory, r.offline_reason) for r in offline} == {
        (2, FAILED_DIR, OfflineReason.DIRECTORY_OFFLINE)}
    on_failed = {(t.id, pid) for t, pid, p in image.topics.partitions() if 2 in p.replicas
                 and p.directory(2) == FAILED_DIR}
    assert {(r.topic_id, r.partition_id) for r in offline} == on_failed
    for t, pid, p in image.topics.partitions():
        if (t.id, pid) in on_failed:
            assert p.leader != 2 and 2 not in p.isr
    assert not image.cluster.brokers[2].fenced  # no fencing for a directory failure
    assert FAILED_DIR not in image.cluster.brokers[2].directories

    first_report, repeat = events[-2], events[-1]
    assert first_report.type == repeat.type == "BROKER_HEARTBEAT_REQUEST"
    kinds = [e.record.TYPE_NAME for e in first_report.entries]
    assert kinds[-1] == "BROKER_REGISTRATION_CHANGE_RECORD" and set(kinds[:-1]) == {"PARTITION_CHANGE_RECORD"}
    assert any(isinstance(e.record, PartitionChangeRecord) and e.record.leader == 3 for e in first_report.entries)
    assert repeat.entries == ()  # the cumulative repeat changes nothing (R5.4)
