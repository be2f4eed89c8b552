"""Hypothesis strategies for metadata records of every type and version, drawn from their Kafka schemas (``kfield``
specs): shared by the binary codec's property tests and the fast decoders' equality tests."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from jbod_model.records.metadata import TYPED_RECORDS, MetadataRecord
from jbod_model.records.schema import INT_RANGES, FieldSpec, Message, fields_of
from jbod_model.uuid import Uuid

_INT64 = st.integers(*INT_RANGES["int64"])
_UUIDS = st.builds(Uuid, _INT64, _INT64)
# UTF-8 cannot encode lone surrogates, and Kafka strings are at most 0x7FFF bytes.
_TEXT = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=12)


def _scalar(spec: FieldSpec, type_name: str, version: int) -> st.SearchStrategy[Any]:
    if type_name in INT_RANGES:
        return st.integers(*INT_RANGES[type_name])
    if type_name == "bool":
        return st.booleans()
    if type_name == "float64":
        return st.floats(allow_nan=False)
    if type_name == "string":
        return _TEXT
    if type_name == "bytes":
        return st.binary(max_size=12)
    if type_name == "uuid":
        return _UUIDS
    if type_name == "struct":
        assert spec.struct is not None
        return message_strategy(spec.struct, version)
    raise AssertionError(type_name)


def field_strategy(spec: FieldSpec, version: int) -> st.SearchStrategy[Any]:
    """Any value the field can hold at ``version``; its default when the field does not exist there."""
    if not spec.present_in(version):
        return st.just(spec.default)
    if spec.is_array:
        base: st.SearchStrategy[Any] = st.lists(_scalar(spec, spec.element_type, version), max_size=4).map(tuple)
    else:
        base = _scalar(spec, spec.type, version)
    if spec.nullable_in(version):
        return st.none() | base
    return base


def message_strategy(cls: type[Message], version: int) -> st.SearchStrategy[Any]:
    kwargs: dict[str, st.SearchStrategy[Any]] = {s.name: field_strategy(s, version) for s in fields_of(cls)}
    if issubclass(cls, MetadataRecord):
        kwargs["version"] = st.just(version)
    return st.builds(cls, **kwargs)


RECORD_VERSIONS = [(cls, v) for cls in TYPED_RECORDS.values()
                   for v in range(cls.VALID_VERSIONS[0], cls.VALID_VERSIONS[1] + 1)]
