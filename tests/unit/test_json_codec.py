"""The JSON form of records must equal what kafka-dump-log --cluster-metadata-decoder prints, both ways."""

from __future__ import annotations

import json

import pytest

from jbod_model.errors import InputError
from jbod_model.metadata_version import MetadataVersion
from jbod_model.records.json_codec import dumps, record_from_json, record_to_json
from jbod_model.records.metadata import (
    BrokerRegistrationChangeRecord,
    OpaqueRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
)
from jbod_model.uuid import Uuid

# Lines printed by Kafka (formats reference §3.6/§4.1, from real files).
KAFKA_PRINTED = [
    '{"type":"PARTITION_RECORD","version":1,"data":{"partitionId":0,"topicId":"xOxBrcYuSRWgtFuZIBiXIA",'
    '"replicas":[5,3,4],"isr":[5,3,4],"removingReplicas":[],"addingReplicas":[],"leader":5,"leaderEpoch":0,'
    '"partitionEpoch":0,"directories":["SaZDxfHKu3NMZ7OnFP7YnA","uHY7hO6-42Q7O4k0zLMmtg","p2UpbSD99eygD2ZToiSMzg"]}}',
    '{"type":"PARTITION_CHANGE_RECORD","version":2,"data":{"partitionId":0,"topicId":"YNY5hm01SZ-bAGeCLAGqWA",'
    '"isr":[],"leader":-1,"eligibleLeaderReplicas":[1],"lastKnownElr":[1]}}',
    '{"type":"BROKER_REGISTRATION_CHANGE_RECORD","version":1,"data":{"brokerId":1,"brokerEpoch":7,'
    '"inControlledShutdown":1}}',
    '{"type":"BEGIN_TRANSACTION_RECORD","version":0,"data":{"name":"Bootstrap records"}}',
    '{"type":"FEATURE_LEVEL_RECORD","version":0,"data":{"name":"metadata.version","featureLevel":20}}',
    '{"type":"NO_OP_RECORD","version":0,"data":{}}',
]


@pytest.mark.parametrize("line", KAFKA_PRINTED)
def test_kafka_printed_json_round_trips_byte_for_byte(line: str) -> None:
    record = record_from_json(json.loads(line))
    assert dumps(record_to_json(record)) == line


def test_tagged_defaults_are_omitted_and_untagged_fields_always_printed() -> None:
    tid = Uuid.from_string("YNY5hm01SZ-bAGeCLAGqWA")
    data = record_to_json(PartitionChangeRecord(topic_id=tid, partition_id=3))["data"]
    assert data == {"partitionId": 3, "topicId": str(tid)}
    data = record_to_json(PartitionChangeRecord(topic_id=tid, partition_id=3, directories=()))["data"]
    assert data["directories"] == []  # [] (reset to MIGRATING) is not the default null, so it prints
    data = record_to_json(PartitionRecord(version=2, topic_id=tid, partition_id=0, leader_recovery_state=1))["data"]
    assert data["leaderRecoveryState"] == 1
    assert list(data)[:8] == ["partitionId", "topicId", "replicas", "isr", "removingReplicas", "addingReplicas",
                              "leader", "leaderRecoveryState"]


def test_fields_absent_at_a_version_are_not_printed() -> None:
    v0 = record_to_json(PartitionRecord(version=0, partition_id=0))["data"]
    assert "directories" not in v0
    rbr_v2 = record_to_json(RegisterBrokerRecord(version=2, broker_id=1))["data"]
    assert "logDirs" not in rbr_v2 and "isMigratingZkBroker" in rbr_v2
    brcr_v0 = record_to_json(BrokerRegistrationChangeRecord(version=0, broker_id=1, broker_epoch=2, fenced=-1))
    assert brcr_v0["data"] == {"brokerId": 1, "brokerEpoch": 2, "fenced": -1}


def test_kafka_3_7_spelling_of_last_known_elr_is_accepted() -> None:
    record = record_from_json({"type": "PARTITION_CHANGE_RECORD", "version": 2,
                               "data": {"partitionId": 0, "topicId": "YNY5hm01SZ-bAGeCLAGqWA",
                                        "lastKnownELR": [2]}})
    assert isinstance(record, PartitionChangeRecord) and record.last_known_elr == (2,)


def test_unknown_types_and_newer_versions_are_carried_opaquely() -> None:
    acl = {"type": "ACCESS_CONTROL_ENTRY_RECORD", "version": 0, "data": {"id": "x"}}
    record = record_from_json(acl)
    assert isinstance(record, OpaqueRecord) and record.api_key == 18
    assert record_to_json(record) == acl
    newer = {"type": "REGISTER_BROKER_RECORD", "version": 4, "data": {"brokerId": 1, "cordonedLogDirs": []}}
    record = record_from_json(newer)
    assert isinstance(record, OpaqueRecord) and record.version == 4 and record_to_json(record) == newer


@pytest.mark.parametrize(("obj", "message"), [
    ({"type": "NOT_A_RECORD", "version": 0, "data": {}}, "unknown record type"),
    ({"type": "PARTITION_RECORD", "version": "1", "data": {}}, "version"),
    ({"type": "PARTITION_RECORD", "version": 1, "data": {"partitionId": 0}}, "required field 'topicId'"),
    ({"type": "TOPIC_RECORD", "version": 0, "data": {"name": "t", "topicId": "short"}}, "topicId"),
    ({"type": "PARTITION_CHANGE_RECORD", "version": 0,
      "data": {"partitionId": 0, "topicId": "YNY5hm01SZ-bAGeCLAGqWA", "leader": 1 << 40}}, "out of range"),
    ({"type": "PARTITION_RECORD", "version": 1, "data": {
        "partitionId": 0, "topicId": "YNY5hm01SZ-bAGeCLAGqWA", "replicas": None, "isr": [],
        "removingReplicas": [], "addingReplicas": [], "leader": 1, "leaderEpoch": 0, "partitionEpoch": 0,
        "directories": []}}, "not nullable"),
])
def test_malformed_json_is_rejected_with_the_field_named(obj: dict[str, object], message: str) -> None:
    with pytest.raises(InputError, match=message):
        record_from_json(obj)


def test_metadata_version_gates() -> None:
    assert not MetadataVersion.from_name("3.7-IV1").is_directory_assignment_supported()
    assert MetadataVersion.from_name("3.7-IV2").is_directory_assignment_supported()
    assert MetadataVersion(17).register_broker_record_version() == 3
    assert MetadataVersion(11).register_broker_record_version() == 2
    assert MetadataVersion(7).register_broker_record_version() == 1
    assert MetadataVersion(6).register_broker_record_version() == 0
    assert [MetadataVersion(lv).partition_record_version() for lv in (16, 17, 21, 22)] == [0, 1, 1, 2]
    assert MetadataVersion(29).name == "4.2-IV1"
    with pytest.raises(InputError):
        MetadataVersion.from_name("9.9-IV9")
