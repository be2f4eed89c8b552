"""Uuid (Kafka's string form, parse errors, signed ordering) and DirectoryId (reserved range, is_online R2.1)."""

from __future__ import annotations

import copy
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jbod_model.directory_id import (
    LOST,
    MIGRATING,
    UNASSIGNED,
    DirectoryState,
    create_assignment_map,
    is_online,
    is_reserved,
    random_directory_id,
)
from jbod_model.errors import InputError
from jbod_model.uuid import METADATA_TOPIC_ID, ONE_UUID, ZERO_UUID, Uuid

signed64 = st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1)
uuids = st.builds(Uuid, signed64, signed64)
#: Ids around the reserved range as often as elsewhere: the placeholders, reserved 3..99, negative lsb, lsb 100.
near_reserved = st.builds(Uuid, st.sampled_from([0, 0, 1, -1]), st.integers(min_value=-3, max_value=102))
any_ids = st.one_of(uuids, near_reserved)


def test_reserved_constants_print_as_kafka_does() -> None:
    assert str(MIGRATING) == "AAAAAAAAAAAAAAAAAAAAAA"
    assert str(UNASSIGNED) == "AAAAAAAAAAAAAAAAAAAAAQ"
    assert str(LOST) == "AAAAAAAAAAAAAAAAAAAAAg"
    assert MIGRATING == ZERO_UUID and UNASSIGNED == ONE_UUID == METADATA_TOPIC_ID


def test_real_sample_id_round_trips_through_bytes() -> None:
    # PARTITION_RECORD v1 of the formats reference: 42906e88… prints as QpBuiHDxzfpnI4B6atD5pg.
    u = Uuid.from_bytes(bytes.fromhex("42906e8870f1cdfa6723807a6ad0f9a6"))
    assert str(u) == "QpBuiHDxzfpnI4B6atD5pg"
    assert Uuid.from_string("QpBuiHDxzfpnI4B6atD5pg") == u
    assert u.to_bytes().hex() == "42906e8870f1cdfa6723807a6ad0f9a6"


@given(uuids)
def test_string_round_trip_is_22_urlsafe_chars(u: Uuid) -> None:
    text = str(u)
    assert len(text) == 22 and "+" not in text and "/" not in text and "=" not in text
    assert Uuid.from_string(text) == u


def test_padding_is_optional_on_parse() -> None:
    assert Uuid.from_string("QpBuiHDxzfpnI4B6atD5pg==") == Uuid.from_string("QpBuiHDxzfpnI4B6atD5pg")


@pytest.mark.parametrize("text", [
    "QpBuiHDxzfpnI4B6atD5pg==AAAA",   # longer than 24 characters
    "QpBuiHDxzfpnI4B6atD5",           # decodes to 15 bytes
    "QpBuiHDxzfpnI4B6atD5pgAA",       # decodes to 18 bytes
    "QpBuiHDxzfpnI4B6atD5p+",         # '+' is not in the URL-safe alphabet
    "QpBuiHDxzfpnI4B6atD5p/",
    "not a uuid at all!!!!!",
    "",
])
def test_invalid_strings_are_rejected_like_uuid_from_string(text: str) -> None:
    with pytest.raises(InputError):
        Uuid.from_string(text)


def test_order_is_signed_msb_then_signed_lsb() -> None:
    # A first character in g..z, 0..9, '-' or '_' sets the top bit: a negative msb sorts first (semantics S5).
    high_bit = Uuid.from_string("3MWIr3xXTmyvq1d0FZ8Wbg")
    low = Uuid.from_string("QpBuiHDxzfpnI4B6atD5pg")
    assert high_bit.msb < 0 < low.msb
    assert sorted([low, high_bit]) == [high_bit, low]
    assert Uuid(0, -1) < Uuid(0, 0) < Uuid(0, 1)


@given(uuids, uuids)
def test_order_matches_signed_pairs(a: Uuid, b: Uuid) -> None:
    assert (a < b) == ((a.msb, a.lsb) < (b.msb, b.lsb))


def test_reserved_range_is_msb_zero_lsb_below_100_signed() -> None:
    assert is_reserved(MIGRATING) and is_reserved(UNASSIGNED) and is_reserved(LOST)
    assert is_reserved(Uuid(0, 99))
    assert not is_reserved(Uuid(0, 100))
    assert is_reserved(Uuid(0, -5))  # Java's signed compare: negative lsb is "< 100"
    assert not is_reserved(Uuid(1, 0))


def test_random_directory_ids_are_never_reserved_nor_dash_prefixed() -> None:
    for _ in range(500):
        d = random_directory_id()
        assert not is_reserved(d)
        assert not str(d).startswith("-")


D1 = Uuid.from_string("QpBuiHDxzfpnI4B6atD5pg")
D2 = Uuid.from_string("3MWIr3xXTmyvq1d0FZ8Wbg")


def test_is_online_r2_1() -> None:
    online = [D1]
    assert is_online(UNASSIGNED, online) and is_online(MIGRATING, online)
    assert not is_online(LOST, online) and not is_online(LOST, [])
    assert is_online(D1, online) and not is_online(D2, online)
    # KAFKA-16162: an empty online list (registration before 3.7-IV2) means every directory is online.
    assert is_online(D2, [])
    # Any other reserved id is offline when the list is non-empty, online when it is empty.
    assert not is_online(Uuid(0, 7), online) and is_online(Uuid(0, 7), [])


def test_directory_state_classification() -> None:
    assert DirectoryState.of(MIGRATING) is DirectoryState.MIGRATING
    assert DirectoryState.of(UNASSIGNED) is DirectoryState.UNASSIGNED
    assert DirectoryState.of(LOST) is DirectoryState.LOST
    assert DirectoryState.of(Uuid(0, 50)) is DirectoryState.RESERVED
    assert DirectoryState.of(D1) is DirectoryState.ASSIGNED


@given(any_ids, st.lists(any_ids, max_size=4))
def test_is_online_and_directory_state_read_on_the_halves_as_by_equality(d: Uuid, online: list[Uuid]) -> None:
    """``is_online`` and ``DirectoryState.of`` tell the placeholders apart on the id's halves; the rule, stated with
    equality to the placeholders as Kafka's ``DirectoryId`` does, gives the same answers for any id."""
    by_equality = True if d in (UNASSIGNED, MIGRATING) else False if d == LOST else (not online or d in online)
    assert is_online(d, online) is by_equality
    state = (DirectoryState.MIGRATING if d == MIGRATING else DirectoryState.UNASSIGNED if d == UNASSIGNED
             else DirectoryState.LOST if d == LOST else DirectoryState.RESERVED if is_reserved(d)
             else DirectoryState.ASSIGNED)
    assert DirectoryState.of(d) is state


@given(uuids)
def test_an_id_hashes_copies_and_pickles_by_value(u: Uuid) -> None:
    """An id is the tuple of its halves: its hash is the value's (``hash((msb, lsb))``), equal ids hash alike, a copy
    or a pickled id is equal and still a Uuid, and the id is immutable."""
    twin = Uuid(u.msb, u.lsb)
    assert hash(u) == hash((u.msb, u.lsb)) == hash(twin) == hash(u)
    assert pickle.loads(pickle.dumps(u)) == u and copy.deepcopy(u) == u and copy.copy(u) == u
    assert type(pickle.loads(pickle.dumps(u))) is Uuid and type(copy.deepcopy(u)) is Uuid
    assert tuple(u) == (u.msb, u.lsb) and repr(u) == f"Uuid({u})"
    with pytest.raises(AttributeError):
        u.msb = 0  # type: ignore[misc]
    with pytest.raises(AttributeError):
        u.other = 0  # type: ignore[attr-defined]
    assert {twin: 1}[u] == 1


def test_create_assignment_map_errors() -> None:
    assert create_assignment_map([1, 2], [D1, D2]) == {1: D1, 2: D2}
    with pytest.raises(InputError, match="lengths"):
        create_assignment_map([1, 2], [D1])
    with pytest.raises(InputError, match="Duplicate broker ID"):
        create_assignment_map([1, 1], [D1, D2])
