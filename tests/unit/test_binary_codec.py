"""The flexible-version message codec, the metadata record frame and control records, on hand-checked bytes.

The hex examples are the real bytes quoted in ``shared/reference/metadata-log-formats.md`` §1.4 and §3.6.
"""

from __future__ import annotations

import warnings

import pytest

from jbod_model.errors import DecodeError, InputError
from jbod_model.records.binary import (
    UnknownRecordWarning,
    decode_message,
    decode_record,
    encode_message,
    encode_record,
    read_unsigned_varint,
    read_unsigned_varlong,
    read_varint,
    read_varlong,
    write_unsigned_varint,
    write_varint,
    write_varlong,
)
from jbod_model.records.control import (
    ControlRecordType,
    KRaftVersionFeature,
    KRaftVersionRecord,
    LeaderChangeMessage,
    OpaqueControlRecord,
    SnapshotFooterRecord,
    SnapshotHeaderRecord,
    Voter,
    VoterEndpoint,
    VotersRecord,
    VotersRecordVoter,
    decode_control_record,
    encode_control_key,
    encode_control_record,
)
from jbod_model.records.metadata import (
    BeginTransactionRecord,
    BrokerRegistrationChangeRecord,
    NoOpRecord,
    OpaqueRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
)
from jbod_model.uuid import Uuid


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", "").replace("|", ""))


# --- ByteUtils ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "encoded"), [(0, "00"), (-1, "01"), (1, "02"), (24, "30"), (29, "3a"),
                                                (-64, "7f"), (64, "8001"), (2**31 - 1, "feffffff0f"),
                                                (-(2**31), "ffffffff0f")])
def test_zigzag_varint_matches_byteutils(value: int, encoded: str) -> None:
    assert write_varint(value).hex() == encoded
    assert read_varint(h(encoded), 0, len(encoded) // 2) == (value, len(encoded) // 2)


def test_varlong_round_trips_extremes() -> None:
    for value in (0, -1, 2**63 - 1, -(2**63), 1738908227548):
        data = write_varlong(value)
        assert read_varlong(data, 0, len(data)) == (value, len(data))
    assert len(write_varlong(-(2**63))) == 10


def test_unsigned_varint_rejects_more_than_five_bytes() -> None:
    with pytest.raises(DecodeError, match="too long"):
        read_unsigned_varint(h("ffffffffff01"), 0, 6)
    with pytest.raises(DecodeError, match="too long"):
        read_unsigned_varlong(h("ff" * 10 + "01"), 0, 11)


def test_unsigned_varint_stops_at_the_buffer_end() -> None:
    with pytest.raises(DecodeError, match="past the end"):
        read_unsigned_varint(h("8080"), 0, 2)


def test_write_unsigned_varint_range() -> None:
    assert write_unsigned_varint(300).hex() == "ac02"
    with pytest.raises(InputError):
        write_unsigned_varint(-1)
    with pytest.raises(InputError):
        write_varint(2**31)


# --- real record values (formats doc §3.6) ------------------------------------------------------------------

PARTITION_RECORD_V1 = h("01 03 01 00000000 8a38facab2924d34a2ab8e08ea0a839d 02 00000001 02 00000001 01 01"
                        " 00000001 00000000 00000000 02 42906e8870f1cdfa6723807a6ad0f9a6 00")
PARTITION_CHANGE_V2 = h("01 05 02 | 00000000 | 60d639866d35499f9b0067822c01aa58 | 04 | 00 01 01 | 01 04 ffffffff"
                        " | 06 05 02 00000001 | 07 05 02 00000001")
UNFENCE = h("01 11 00 | 00000001 | 000000000000000b | 01 | 00 01 ff")
REMOVE_TOPIC = h("01 09 00 | 7d527867 56504c1f 9364d0c1 4b8e23f6 | 00")
BEGIN_TXN = h("01 17 00 | 01 | 00 12 | 12") + b"Bootstrap records"


def test_partition_record_v1_real_bytes() -> None:
    record = decode_record(PARTITION_RECORD_V1)
    assert record == PartitionRecord(
        version=1, partition_id=0, topic_id=Uuid.from_string("ijj6yrKSTTSiq44I6gqDnQ"), replicas=(1,), isr=(1,),
        leader=1, leader_epoch=0, partition_epoch=0, directories=(Uuid.from_string("QpBuiHDxzfpnI4B6atD5pg"),))
    assert encode_record(record) == PARTITION_RECORD_V1


def test_partition_change_v2_tags_in_ascending_order() -> None:
    record = decode_record(PARTITION_CHANGE_V2)
    assert isinstance(record, PartitionChangeRecord)
    assert (record.isr, record.leader, record.eligible_leader_replicas, record.last_known_elr) == ((), -1, (1,), (1,))
    assert record.replicas is None and record.directories is None and record.leader_recovery_state == -1
    assert encode_record(record) == PARTITION_CHANGE_V2


def test_directories_written_after_elr_tags() -> None:
    # Directories is declared before the ELR fields but has tag 8: it must come last in binary.
    record = PartitionChangeRecord(version=2, partition_id=1, topic_id=Uuid(1, 2), directories=(Uuid(0, 2),),
                                   eligible_leader_replicas=(3,))
    body = encode_message(record, 2)
    assert body[20:].hex() == "02" + "06" + "05" + "0200000003" + "08" + "11" + "02" + Uuid(0, 2).to_bytes().hex()


def test_broker_registration_change_unfence() -> None:
    record = decode_record(UNFENCE)
    assert record == BrokerRegistrationChangeRecord(version=0, broker_id=1, broker_epoch=11, fenced=-1)
    assert encode_record(record) == UNFENCE


def test_remove_topic_and_begin_transaction() -> None:
    assert encode_record(decode_record(REMOVE_TOPIC)) == REMOVE_TOPIC
    begin = decode_record(BEGIN_TXN)
    assert begin == BeginTransactionRecord(name="Bootstrap records")
    assert encode_record(begin) == BEGIN_TXN


def test_noop_is_four_bytes_and_shared() -> None:
    assert encode_record(NoOpRecord()) == h("01140000")
    assert decode_record(h("01140000")) is decode_record(bytearray(h("01140000")))


def test_register_broker_v3_log_dirs_tag() -> None:
    record = RegisterBrokerRecord(version=3, broker_id=1, incarnation_id=Uuid(5, 6), broker_epoch=7,
                                  log_dirs=(Uuid(9, 10),))
    value = encode_record(record)
    assert value.endswith(h("00 01 00") + h("01 00 11 02") + Uuid(9, 10).to_bytes())
    assert decode_record(value) == record
    # At v2 the tag does not exist: a non-default log_dirs cannot be written.
    with pytest.raises(InputError, match="non-default"):
        encode_message(RegisterBrokerRecord(version=3, log_dirs=(Uuid(1, 1),)), 2)


# --- tagged-field rules -------------------------------------------------------------------------------------


def test_tagged_fields_in_any_order_and_unknown_tags_skipped() -> None:
    # Same PartitionChangeRecord with tags written 7, 99 (unknown), 1, 0, 6.
    shuffled = h("01 05 02 00000000 60d639866d35499f9b0067822c01aa58 05 | 07 05 02 00000001 | 63 03 aabbcc"
                 " | 01 04 ffffffff | 00 01 01 | 06 05 02 00000001")
    assert decode_record(shuffled) == decode_record(PARTITION_CHANGE_V2)


def test_tagged_field_size_must_match_its_value() -> None:
    bad = h("01 11 00 | 00000001 | 000000000000000b | 01 | 00 02 ff00")
    with pytest.raises(DecodeError, match="size 2"):
        decode_record(bad)


def test_tagged_field_larger_than_the_body() -> None:
    with pytest.raises(DecodeError, match="claims 100"):
        decode_record(h("01 11 00 | 00000001 | 000000000000000b | 01 | 00 64 ff"))


# --- frame rules --------------------------------------------------------------------------------------------


def test_frame_version_zero_and_unknown_are_rejected() -> None:
    with pytest.raises(DecodeError, match=r"2\.8"):
        decode_record(h("00 14 00 00"))
    with pytest.raises(DecodeError, match="unknown frame version 2"):
        decode_record(h("02 14 00 00"))
    with pytest.raises(DecodeError, match="empty"):
        decode_record(b"")


def test_garbage_after_a_typed_body() -> None:
    with pytest.raises(DecodeError, match=r"Found 2 byte\(s\) of garbage after REMOVE_TOPIC_RECORD v0"):
        decode_record(REMOVE_TOPIC + b"\x00\x00")


def test_truncated_body() -> None:
    with pytest.raises(DecodeError):
        decode_record(REMOVE_TOPIC[:-5])


def test_unknown_api_key_is_kept_opaque_with_a_warning() -> None:
    value = h("01 0e 00") + b"\x07payload"  # CLIENT_QUOTA_RECORD: no schema here
    with pytest.warns(UnknownRecordWarning, match="CLIENT_QUOTA_RECORD"):
        record = decode_record(value + b"!")  # a value not seen before, so the warning is not cached away
    assert record == OpaqueRecord(api_key=14, version=0, type_name="CLIENT_QUOTA_RECORD", payload=b"\x07payload!")
    assert encode_record(record) == value + b"!"
    with pytest.warns(UnknownRecordWarning, match="UNKNOWN_999"):
        assert decode_record(h("01 e707 00 00")) == OpaqueRecord(999, 0, "UNKNOWN_999", payload=b"\x00")


def test_typed_record_at_a_newer_version_is_kept_opaque() -> None:
    value = h("01 03 09") + b"future body bytes"
    with pytest.warns(UnknownRecordWarning, match="newer"):
        record = decode_record(value)
    assert isinstance(record, OpaqueRecord) and record.type_name == "PARTITION_RECORD" and record.version == 9
    assert encode_record(record) == value


def test_opaque_warning_is_issued_once_per_type_and_version() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        decode_record(h("01 0b 05") + b"a" * 30)
        decode_record(h("01 0b 05") + b"b" * 30)
    assert len([w for w in caught if issubclass(w.category, UnknownRecordWarning)]) == 1


def test_frame_api_key_and_version_limits() -> None:
    with pytest.raises(DecodeError, match="apiKey"):
        decode_record(h("01 808002 00 00"))
    with pytest.raises(DecodeError, match="version"):
        decode_record(h("01 14 808002 00"))


# --- nullability, lengths, hostile counts -------------------------------------------------------------------


def test_null_in_a_non_nullable_array() -> None:
    bad = h("01 03 00 00000000") + bytes(16) + h("00 01 01 01 00000001 00000000 00000000 00")
    with pytest.raises(DecodeError, match="non-nullable field replicas was serialized as null"):
        decode_record(bad)


def test_hostile_array_length_is_refused_before_allocating() -> None:
    bad = h("01 03 00 00000000") + bytes(16) + h("ffffffff0f")
    with pytest.raises(DecodeError, match="Tried to read"):
        decode_record(bad)


def test_string_longer_than_a_java_short() -> None:
    from jbod_model.records.metadata import TopicRecord

    with pytest.raises(DecodeError, match="invalid length"):
        decode_record(h("01 02 00") + write_unsigned_varint(0x8001) + b"x" * 0x8000 + bytes(17))
    with pytest.raises(InputError, match="too long"):
        encode_record(TopicRecord(name="x" * 0x8000))


def test_invalid_utf8_is_a_decode_error() -> None:
    with pytest.raises(DecodeError, match="UTF-8"):
        decode_record(h("01 02 00 03 ff fe") + bytes(17))


def test_encoding_a_bad_value_names_the_field() -> None:
    with pytest.raises(InputError, match="partitionId"):
        encode_message(PartitionRecord(partition_id=2**40), 2)
    with pytest.raises(InputError, match="not nullable"):
        encode_message(PartitionRecord(replicas=None), 2)  # type: ignore[arg-type]


def test_encode_rejects_versions_outside_the_schema() -> None:
    with pytest.raises(InputError, match="versions 0-2"):
        encode_message(PartitionRecord(), 3)


# --- control records ----------------------------------------------------------------------------------------

LEADER_CHANGE_VALUE = h("0000 00000001 02 00000001 00 02 00000001 00 00")


def test_leader_change_real_bytes() -> None:
    record = decode_control_record(h("0000 0002"), LEADER_CHANGE_VALUE)
    assert record == LeaderChangeMessage(leader_id=1, voters=(Voter(voter_id=1),), granting_voters=(Voter(voter_id=1),))
    assert encode_control_record(record) == (h("00000002"), LEADER_CHANGE_VALUE)


def test_snapshot_header_footer_and_kraft_version() -> None:
    header = SnapshotHeaderRecord(last_contained_log_timestamp=10000)
    assert len(encode_message(header, 0)) == 11  # valueSize 11 in the PR 12084 dump
    assert decode_control_record(encode_control_key(3), encode_message(header, 0)) == header
    assert encode_message(SnapshotFooterRecord(), 0) == h("0000 00")
    kraft = KRaftVersionRecord(kraft_version=1)
    assert len(encode_message(kraft, 0)) == 5  # valueSize 5 in the PR 19729 dump
    assert decode_control_record(encode_control_key(5), encode_message(kraft, 0)) == kraft


def test_voters_record_matches_the_dump_size() -> None:
    voters = VotersRecord(voters=(VotersRecordVoter(
        voter_id=1, voter_directory_id=Uuid.from_string("tpx8pd1IQDqJwMfGzXj6GA"),
        endpoints=(VoterEndpoint(name="CONTROLLER", host="localhost", port=9093),),
        kraft_version_feature=KRaftVersionFeature(min_supported_version=0, max_supported_version=1)),))
    value = encode_message(voters, 0)
    assert len(value) == 55  # valueSize 55 in the PR 19729 dump
    assert decode_control_record(encode_control_key(ControlRecordType.KRAFT_VOTERS), value) == voters


def test_unknown_and_transaction_marker_control_types_are_opaque() -> None:
    commit = decode_control_record(h("0000 0001"), h("0000 00000005"))
    assert commit == OpaqueControlRecord(control_type=1, key=h("00000001"), payload=h("000000000005"))
    future = decode_control_record(h("0000 0063"), b"\x01\x02")
    assert isinstance(future, OpaqueControlRecord) and future.control_type == 99
    newer_key = decode_control_record(h("0001 0002"), LEADER_CHANGE_VALUE)
    assert isinstance(newer_key, OpaqueControlRecord) and newer_key.key_version == 1
    assert encode_control_record(newer_key) == (h("00010002"), LEADER_CHANGE_VALUE)
    assert ControlRecordType.from_value(42) is None


def test_bad_control_keys_and_values() -> None:
    with pytest.raises(DecodeError, match="at least 4 bytes"):
        decode_control_record(h("0000"), LEADER_CHANGE_VALUE)
    with pytest.raises(DecodeError, match="Invalid version"):
        decode_control_record(h("ffff 0002"), LEADER_CHANGE_VALUE)
    with pytest.raises(DecodeError, match="null value"):
        decode_control_record(h("0000 0002"), None)
    with pytest.raises(DecodeError, match="garbage"):
        decode_control_record(h("0000 0002"), LEADER_CHANGE_VALUE + b"\x00")


def test_decode_message_positions_are_offsets_into_the_buffer() -> None:
    with pytest.raises(DecodeError) as info:
        decode_message(RemoveTopicRecord, bytes(10), 0)
    assert info.value.position == 0
    assert decode_message(RemoveTopicRecord, b"\xff" + bytes(17), 0, start=1) == RemoveTopicRecord()


def test_control_json_matches_the_real_dump_lines() -> None:
    # Lines printed by kafka-dump-log in the PR 12084 / 19729 descriptions (shared/.../text-dumps).
    from jbod_model.records.json_codec import dumps, message_from_json, message_to_json

    header = SnapshotHeaderRecord(last_contained_log_timestamp=10000)
    assert f"{header.DUMP_LABEL} {dumps(message_to_json(header, 0))}" == (
        'SnapshotHeader {"version":0,"lastContainedLogTimestamp":10000}')
    kraft = KRaftVersionRecord(kraft_version=1)
    assert f"{kraft.DUMP_LABEL} {dumps(message_to_json(kraft, 0))}" == 'KRaftVersion {"version":0,"kRaftVersion":1}'
    voters_json = ('{"version":0,"voters":[{"voterId":1,"voterDirectoryId":"tpx8pd1IQDqJwMfGzXj6GA","endpoints":'
                   '[{"name":"CONTROLLER","host":"localhost","port":9093}],"kRaftVersionFeature":'
                   '{"minSupportedVersion":0,"maxSupportedVersion":1}}]}')
    import json

    voters = message_from_json(VotersRecord, json.loads(voters_json), 0)
    assert dumps(message_to_json(voters, 0)) == voters_json
    assert len(encode_message(voters, 0)) == 55
