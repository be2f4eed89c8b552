"""Property tests of the binary codec, with strategies derived generically from the FieldSpec schema.

* records → bytes → records is the identity, for every typed metadata record at every version it has, and for
  the typed control records;
* encoding is canonical: the bytes of a decoded record encode back to the same bytes;
* arbitrary bytes never make the decoder fail with anything but :class:`DecodeError`.
"""

from __future__ import annotations

import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from record_strategies import RECORD_VERSIONS, message_strategy

from jbod_model.errors import DecodeError
from jbod_model.records.binary import (
    UnknownRecordWarning,
    decode_message,
    decode_record,
    encode_message,
    encode_record,
    read_unsigned_varint,
    read_varint,
    read_varlong,
    write_unsigned_varint,
    write_varint,
    write_varlong,
)
from jbod_model.records.control import TYPED_CONTROL_RECORDS, decode_control_record, encode_control_key
from jbod_model.records.metadata import TYPED_RECORDS, MetadataRecord
from jbod_model.records.schema import Message


@pytest.mark.parametrize(("cls", "version"), RECORD_VERSIONS, ids=[f"{c.TYPE_NAME}-v{v}" for c, v in RECORD_VERSIONS])
@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_record_round_trip(cls: type[MetadataRecord], version: int, data: st.DataObject) -> None:
    record = data.draw(message_strategy(cls, version))
    value = encode_record(record)
    decoded = decode_record(value)
    assert decoded == record
    assert encode_record(decoded) == value


@pytest.mark.parametrize("cls", list(TYPED_CONTROL_RECORDS.values()), ids=lambda c: c.__name__)
@settings(max_examples=60)
@given(data=st.data())
def test_control_round_trip(cls: type[Message], data: st.DataObject) -> None:
    record = data.draw(message_strategy(cls, 0))
    value = encode_message(record, 0)
    assert decode_message(cls, value, 0) == record
    control_type = cls.CONTROL_TYPE  # type: ignore[attr-defined]
    assert decode_control_record(encode_control_key(control_type), value) == record


@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_round_trip(n: int) -> None:
    data = write_varint(n)
    assert read_varint(data, 0, len(data)) == (n, len(data))


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trip(n: int) -> None:
    data = write_varlong(n)
    assert read_varlong(data, 0, len(data)) == (n, len(data))


@given(st.integers(0, 2**32 - 1))
def test_unsigned_varint_round_trip(n: int) -> None:
    data = write_unsigned_varint(n)
    assert read_unsigned_varint(data, 0, len(data)) == (n, len(data))
    assert len(data) <= 5


@settings(max_examples=500)
@given(st.binary(max_size=64))
def test_arbitrary_bytes_only_ever_raise_decode_error(blob: bytes) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnknownRecordWarning)
        try:
            record = decode_record(b"\x01" + blob)
        except DecodeError:
            return
    # Whatever decoded must encode back to exactly the bytes it came from, or to a canonical form that decodes
    # to the same record (a bool byte of 2 reads as True and writes as 1; unknown tags are skipped).
    assert decode_record(encode_record(record)) == record


@settings(max_examples=300)
@given(st.sampled_from(sorted(TYPED_RECORDS)), st.binary(max_size=48))
def test_typed_bodies_from_random_bytes(api_key: int, body: bytes) -> None:
    try:
        record = decode_record(b"\x01" + write_unsigned_varint(api_key) + b"\x00" + body)
    except DecodeError:
        return
    assert decode_record(encode_record(record)) == record
