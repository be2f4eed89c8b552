"""The generated fast decoders (``jbod_model.records.binary``, ``fast=True``) equal the reference decoder, and the
slot constructors (``jbod_model.slots``) build what the dataclass constructors build.

For every typed metadata record at every version it has, and for the control records: a record's bytes decode to
the same record either way; and any bytes — valid encodings, encodings with bytes flipped, cut or added, and noise —
give the same outcome either way: the same record and end position, or the same :class:`DecodeError` (message and
position). Long strings and arrays (multi-byte varints) and nulls exercise the fast path's hand-over to the
reference decoder.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from record_strategies import RECORD_VERSIONS, message_strategy

from jbod_model.errors import DecodeError
from jbod_model.image import PartitionRegistration
from jbod_model.records.binary import (
    UnknownRecordWarning,
    decode_message,
    decode_record,
    encode_message,
    encode_record,
    write_unsigned_varint,
)
from jbod_model.records.control import TYPED_CONTROL_RECORDS
from jbod_model.records.entry import LogEntry, new_log_entry
from jbod_model.records.metadata import (
    BrokerEndpoint,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
)
from jbod_model.records.schema import Message
from jbod_model.slots import slot_constructor
from jbod_model.uuid import Uuid


def _outcome(value: bytes, fast: bool) -> tuple[Any, ...]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnknownRecordWarning)
        try:
            return "record", decode_record(value, use_cache=False, fast=fast)
        except DecodeError as e:
            return "error", e.reason, e.position


def _message_outcome(cls: type[Message], value: bytes, version: int, fast: bool) -> tuple[Any, ...]:
    try:
        return "message", decode_message(cls, value, version, fast=fast)
    except DecodeError as e:
        return "error", e.reason, e.position


def _assert_same(value: bytes) -> None:
    # Twice fast: the first call of a record type registers its generated decoder, the second uses it.
    reference = _outcome(value, fast=False)
    assert _outcome(value, fast=True) == reference
    assert _outcome(value, fast=True) == reference


_IDS = [f"{c.TYPE_NAME}-v{v}" for c, v in RECORD_VERSIONS]


@pytest.mark.parametrize(("cls", "version"), RECORD_VERSIONS, ids=_IDS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fast_decode_equals_reference(cls: type[MetadataRecord], version: int, data: st.DataObject) -> None:
    record = data.draw(message_strategy(cls, version))
    value = encode_record(record)
    fast = decode_record(value, use_cache=False, fast=True)
    assert fast == record
    assert fast == decode_record(value, use_cache=False, fast=False)
    assert encode_record(fast) == value


@pytest.mark.parametrize(("cls", "version"), RECORD_VERSIONS, ids=_IDS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fast_decode_of_damaged_bytes_equals_reference(cls: type[MetadataRecord], version: int,
                                                       data: st.DataObject) -> None:
    value = bytearray(encode_record(data.draw(message_strategy(cls, version))))
    edit = data.draw(st.sampled_from(["flip", "cut", "add"]))
    # Damage the body only: a damaged frame is checked before any body decoder runs, and could name a record
    # type without a schema, whose once-per-type warning other tests expect to see first.
    at = data.draw(st.integers(3, len(value) - 1))
    if edit == "flip":
        value[at] = data.draw(st.integers(0, 255))
    elif edit == "cut":
        del value[at:at + data.draw(st.integers(1, 4))]
    else:
        value[at:at] = data.draw(st.binary(min_size=1, max_size=4))
    _assert_same(bytes(value))


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(RECORD_VERSIONS), st.binary(max_size=48))
def test_fast_decode_of_random_bodies_equals_reference(cls_version: tuple[type[MetadataRecord], int],
                                                       body: bytes) -> None:
    cls, version = cls_version
    _assert_same(b"\x01" + write_unsigned_varint(cls.API_KEY) + write_unsigned_varint(version) + body)


@pytest.mark.parametrize("cls", list(TYPED_CONTROL_RECORDS.values()), ids=lambda c: c.__name__)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_fast_decode_of_control_records_equals_reference(cls: type[Message], data: st.DataObject) -> None:
    value = encode_message(data.draw(message_strategy(cls, 0)), 0)
    noise = data.draw(st.binary(max_size=3))
    for blob in (value, value + noise, value[:-1]):
        assert _message_outcome(cls, blob, 0, fast=True) == _message_outcome(cls, blob, 0, fast=False)


_LONG_INTS = st.lists(st.integers(-(2**31), 2**31 - 1), min_size=127, max_size=300).map(tuple)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(isr=_LONG_INTS, name=st.text(min_size=127, max_size=200))
def test_long_fields_hand_over_to_the_reference_decoder(isr: tuple[int, ...], name: str) -> None:
    """Counts and lengths above 126 take a multi-byte varint, which the fast path leaves to the reference."""
    ids = tuple(Uuid(i, -i) for i in range(len(isr)))
    for record in (
        PartitionChangeRecord(partition_id=1, topic_id=Uuid(1, 2), isr=isr, leader=3),
        PartitionChangeRecord(partition_id=1, topic_id=Uuid(1, 2), replicas=isr, directories=ids),
        PartitionRecord(partition_id=0, topic_id=Uuid(1, 2), replicas=isr, isr=isr, directories=ids),
        RegisterBrokerRecord(broker_id=1, incarnation_id=Uuid(3, 4), rack=name,
                             end_points=(BrokerEndpoint(name=name, host="h", port=9092),)),
    ):
        value = encode_record(record)
        assert decode_record(value, use_cache=False, fast=True) == record
        _assert_same(value)


def test_shared_ids_are_equal_to_fresh_ones() -> None:
    """The fast path shares one Uuid instance per id; it must still be the id the bytes say."""
    record = PartitionChangeRecord(partition_id=7, topic_id=Uuid(-5, 9), directories=(Uuid(1, 1), Uuid(-1, -1)))
    value = encode_record(record)
    first = decode_record(value, use_cache=False)
    second = decode_record(value, use_cache=False)
    assert isinstance(first, PartitionChangeRecord) and isinstance(second, PartitionChangeRecord)
    assert first == second == record
    assert first.topic_id is second.topic_id
    assert first.directories == (Uuid(1, 1), Uuid(-1, -1))


_SMALL_INTS = st.lists(st.integers(0, 9), max_size=4).map(tuple)


@settings(max_examples=100, deadline=None)
@given(replicas=_SMALL_INTS, isr=_SMALL_INTS, ints=st.lists(st.integers(-5, 5), min_size=4, max_size=4),
       offset=st.integers(0, 2**40), source=st.none() | st.text(max_size=5))
def test_slot_constructors_build_what_the_dataclass_constructor_builds(
        replicas: tuple[int, ...], isr: tuple[int, ...], ints: list[int], offset: int, source: str | None) -> None:
    directories = tuple(Uuid(r, 1) for r in replicas)
    fields = (replicas, directories, isr, (), isr, replicas, (), *ints)
    built = slot_constructor(PartitionRegistration)(*fields)
    assert built == PartitionRegistration(*fields)
    assert repr(built) == repr(PartitionRegistration(*fields))
    entry = new_log_entry(offset, NoOpRecord(), offset, ints[0], ints[1], source)
    assert entry == LogEntry(offset, NoOpRecord(), offset, ints[0], ints[1], source)
