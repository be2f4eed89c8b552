"""The generated JSON readers of records (``record_from_json(..., fast=True)``, ``jbod_model.records.json_codec``)
read exactly what the reference reader (``message_from_json``) reads, and the generated writers
(``message_to_json(..., fast=True)``) write what the reference writer writes.

For every typed metadata record at every version: a record's JSON reads back as the same record either way; and
JSON damaged the ways input goes wrong — a field dropped, or given null, a value of another kind or out of range —
gives the same outcome either way: the same record, or the same error message.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from record_strategies import RECORD_VERSIONS, message_strategy

from jbod_model.errors import InputError
from jbod_model.records.json_codec import (
    Slices,
    dumps_pieces,
    dumps_without_floats,
    message_to_json,
    record_from_json,
    record_to_json,
    typed_record_reader,
)
from jbod_model.records.metadata import MetadataRecord
from jbod_model.records.schema import fields_of

_IDS = [f"{c.TYPE_NAME}-v{v}" for c, v in RECORD_VERSIONS]

#: Values of every JSON kind, for a field's value to be replaced with.
_ODD_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-(1 << 70), 1 << 70), st.text(max_size=30),
                        st.lists(st.integers(-(1 << 40), 1 << 40), max_size=3),
                        st.lists(st.one_of(st.text(max_size=24), st.none()), max_size=2), st.just({}),
                        st.floats(allow_nan=False), st.just("AAAAAAAAAAAAAAAAAAAAAA"))


def _outcome(obj: dict[str, Any], fast: bool) -> tuple[Any, ...]:
    try:
        return "record", record_from_json(obj, fast=fast)
    except InputError as e:
        return "error", str(e)


def _assert_same(obj: dict[str, Any]) -> None:
    reference = _outcome(obj, fast=False)
    # Twice fast: the first call of a record type builds its reader, the second uses it.
    assert _outcome(obj, fast=True) == reference
    assert _outcome(obj, fast=True) == reference


@pytest.mark.parametrize(("cls", "version"), RECORD_VERSIONS, ids=_IDS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fast_json_read_equals_reference(cls: type[MetadataRecord], version: int, data: st.DataObject) -> None:
    record = data.draw(message_strategy(cls, version))
    obj = record_to_json(record)
    assert record_from_json(obj, fast=True) == record
    _assert_same(obj)


@pytest.mark.parametrize(("cls", "version"), RECORD_VERSIONS, ids=_IDS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fast_json_read_of_damaged_data_equals_reference(cls: type[MetadataRecord], version: int,
                                                         data: st.DataObject) -> None:
    obj = record_to_json(data.draw(message_strategy(cls, version)))
    body = dict(obj["data"])
    keys = sorted(body)
    aliased = {spec.json_name: spec.aliases for spec in fields_of(cls) if spec.aliases and spec.json_name in body}
    damage = data.draw(st.sampled_from(("drop", "replace", "add", *(("alias",) if aliased else ()))
                                       if keys else ("add",)))
    if damage == "alias":
        # A field under its alias, or under both names (the reference reads the first of name and aliases).
        key = data.draw(st.sampled_from(sorted(aliased)))
        value = body[key] if data.draw(st.booleans()) else body.pop(key)
        body[data.draw(st.sampled_from(aliased[key]))] = value if data.draw(st.booleans()) else data.draw(_ODD_VALUES)
    elif damage == "add":
        # A key the schema does not know (ignored by the reference): the reader must not count it as a field read.
        body[data.draw(st.text(max_size=8).filter(lambda k: k not in body))] = data.draw(_ODD_VALUES)
    elif damage == "drop":
        del body[data.draw(st.sampled_from(keys))]
    else:
        body[data.draw(st.sampled_from(keys))] = data.draw(_ODD_VALUES)
    _assert_same({**obj, "data": body})


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(RECORD_VERSIONS), _ODD_VALUES)
def test_fast_json_read_of_any_data_equals_reference(cls_version: tuple[type[MetadataRecord], int],
                                                     value: Any) -> None:
    cls, version = cls_version
    _assert_same({"type": cls.TYPE_NAME, "version": version, "data": value})


@pytest.mark.parametrize(("cls", "version"), RECORD_VERSIONS, ids=_IDS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fast_json_write_equals_reference(cls: type[MetadataRecord], version: int, data: st.DataObject) -> None:
    """The same ``data`` object — keys, their order, values and their types — for any record at any version."""
    record = data.draw(message_strategy(cls, version))
    reference = message_to_json(record, version, fast=False)
    for _ in range(2):  # the first call builds the writer, the second uses it
        written = message_to_json(record, version)
        assert written == reference
        assert list(written) == list(reference)
        assert repr(written) == repr(reference)


_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.text(max_size=6),
                       lambda kids: st.lists(kids, max_size=5) | st.dictionaries(st.text(max_size=4), kids, max_size=4),
                       max_leaves=20)


@given(doc=st.dictionaries(st.text(max_size=6), _VALUES | st.lists(_VALUES, max_size=25), max_size=5),
       rows=st.integers(1, 7))
def test_a_document_written_in_pieces_is_its_text(doc: dict[str, Any], rows: int) -> None:
    """``dumps_pieces`` (``jbod image --tables --json``'s output) joins to exactly ``dumps_without_floats``' text,
    however its lists are cut — integers beyond 64 bits, which orjson refuses, included."""
    assert "".join(dumps_pieces(doc, rows=rows)) == dumps_without_floats(doc)


@given(doc=st.dictionaries(st.text(max_size=6), st.lists(_VALUES, max_size=25), max_size=5), data=st.data())
def test_a_list_given_in_slices_is_written_as_the_list(doc: dict[str, list[Any]], data: st.DataObject) -> None:
    """A list given as :class:`Slices` (``jbod image --tables --json``: the rows made a slice at a time) is written
    as the list the slices make, whatever the cuts, empty slices included."""

    def sliced(items: list[Any]) -> Slices:
        cuts = sorted(data.draw(st.lists(st.integers(0, len(items)), max_size=6)))
        bounds = [0, *cuts, len(items)]
        return Slices(iter([items[a:b] for a, b in pairwise(bounds)]))

    assert "".join(dumps_pieces({k: sliced(v) for k, v in doc.items()})) == dumps_without_floats(doc)


def test_a_version_2_partition_change_reads_its_last_known_elr_under_either_name_as_the_reference_does() -> None:
    """Kafka writes PartitionChangeRecord v2 from the metadata.version with ELR on; its ``lastKnownElr`` also reads
    as ``lastKnownELR``. The generated reader reads it (a 4.x log's records took the reference's way before, about
    nine times slower), and the first of the two names present wins, as in the reference."""
    base = {"partitionId": 7, "topicId": "Fjoo2cUvnTp7V8lK7NPi-w", "leader": 2}
    for extra, elr in (({"lastKnownElr": [1, 2]}, (1, 2)), ({"lastKnownELR": [1, 2]}, (1, 2)),
                       ({"lastKnownElr": [3], "lastKnownELR": [1, 2]}, (3,)),
                       ({"lastKnownELR": [1, 2], "lastKnownElr": [3]}, (3,)),
                       ({"lastKnownElr": [3], "lastKnownELR": "not a list"}, (3,))):
        obj = {"type": "PARTITION_CHANGE_RECORD", "version": 2, "data": {**base, **extra}}
        _assert_same(obj)
        assert record_from_json(obj, fast=True).last_known_elr == elr
    assert typed_record_reader("PARTITION_CHANGE_RECORD", 2) is not None
    assert typed_record_reader("PARTITION_RECORD", 2) is not None
