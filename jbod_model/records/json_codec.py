"""The JSON form of records and messages, identical to what ``kafka-dump-log --cluster-metadata-decoder`` prints.

Mirrors Kafka's generated ``*JsonConverter`` classes and ``MetadataJsonConverters``: keys are the spec names with
the first letter lowercased, in declaration order; uuids print as their 22-character base64url string; bytes as
standard base64; a tagged field is printed only when it differs from its default; fields that do not exist at the
record's version are absent. A record prints as ``{"type": "PARTITION_RECORD", "version": 1, "data": {…}}``.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any, TypeVar, cast

import orjson

from jbod_model.errors import InputError
from jbod_model.records.metadata import (
    RECORD_API_KEYS,
    TYPED_RECORDS,
    MetadataRecord,
    OpaqueRecord,
    Record,
)
from jbod_model.records.schema import FieldSpec, Message, fields_of, validate_message
from jbod_model.uuid import Uuid

M = TypeVar("M", bound=Message)


def message_to_json(message: Message, version: int) -> dict[str, Any]:
    """The ``data`` object of a message at ``version`` (Kafka's ``XJsonConverter.write``)."""
    out: dict[str, Any] = {}
    for spec, value in message.iter_fields():
        if not spec.present_in(version):
            continue
        if spec.tag is not None and value == spec.default:
            continue
        out[spec.json_name] = _value_to_json(spec, value, version)
    return out


def _value_to_json(spec: FieldSpec, value: Any, version: int) -> Any:
    if value is None:
        return None
    if spec.is_array:
        return [_scalar_to_json(spec.element_type, item, version) for item in value]
    return _scalar_to_json(spec.type, value, version)


def _scalar_to_json(type_name: str, value: Any, version: int) -> Any:
    if type_name == "uuid":
        return str(value)
    if type_name == "bytes":
        return base64.b64encode(value).decode("ascii")
    if type_name == "struct":
        return message_to_json(value, version)
    return value


def message_from_json(cls: type[M], data: Any, version: int, where: str = "") -> M:
    """Build a message from its ``data`` object (Kafka's ``XJsonConverter.read``): a missing untagged field is an
    error, a missing tagged field takes its default, unknown keys are ignored."""
    label = where or cls.__name__
    if not isinstance(data, Mapping):
        raise InputError(f"{label}: expected a JSON object, got {type(data).__name__}")
    kwargs: dict[str, Any] = {}
    for spec in fields_of(cls):
        if not spec.present_in(version):
            continue
        key = next((k for k in (spec.json_name, *spec.aliases) if k in data), None)
        if key is None:
            if spec.tag is None:
                raise InputError(f"{label}: required field '{spec.json_name}' is missing (version {version})")
            continue
        kwargs[spec.name] = _value_from_json(spec, data[key], version, f"{label}.{spec.json_name}")
    if issubclass(cls, MetadataRecord):
        kwargs["version"] = version
    try:
        message = cls(**kwargs)
    except TypeError as e:  # pragma: no cover - a schema declaration error
        raise InputError(f"{label}: {e}") from e
    validate_message(message, version)
    return message


def _value_from_json(spec: FieldSpec, value: Any, version: int, label: str) -> Any:
    if value is None:
        if not spec.nullable_in(version):
            raise InputError(f"{label} is not nullable in version {version}")
        return None
    if spec.is_array:
        if not isinstance(value, list):
            raise InputError(f"{label}: expected a JSON array, got {type(value).__name__}")
        return tuple(_scalar_from_json(spec, spec.element_type, item, version, f"{label}[{i}]")
                     for i, item in enumerate(value))
    return _scalar_from_json(spec, spec.type, value, version, label)


def _scalar_from_json(spec: FieldSpec, type_name: str, value: Any, version: int, label: str) -> Any:
    if type_name == "uuid":
        if not isinstance(value, str):
            raise InputError(f"{label}: expected a base64 uuid string, got {value!r}")
        try:
            return Uuid.from_string(value)
        except InputError as e:
            raise InputError(f"{label}: {e}") from e
    if type_name == "bytes":
        if not isinstance(value, str):
            raise InputError(f"{label}: expected a base64 string, got {value!r}")
        try:
            return base64.b64decode(value, validate=True)
        except binascii.Error as e:
            raise InputError(f"{label}: {e}") from e
    if type_name == "struct":
        assert spec.struct is not None
        return message_from_json(spec.struct, value, version, label)
    if type_name == "float64" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value  # ints, bools and strings are checked by validate_message


def record_to_json(record: Record) -> dict[str, Any]:
    """``{"type", "version", "data"}`` as dump-log prints it. An opaque record read from bytes whose schema is
    unknown has ``"data": null`` and its body as ``"payload"`` (standard base64)."""
    if isinstance(record, OpaqueRecord):
        out: dict[str, Any] = {"type": record.type_name, "version": record.version, "data": record.data}
        if record.payload is not None and record.data is None:
            out["payload"] = base64.b64encode(record.payload).decode("ascii")
        return out
    return {"type": record.TYPE_NAME, "version": record.version, "data": message_to_json(record, record.version)}


def record_from_json(obj: Mapping[str, Any], where: str = "") -> Record:
    """Inverse of :func:`record_to_json`. Unknown types, and known types at a version newer than the model knows,
    become :class:`OpaqueRecord` with the data kept verbatim."""
    label = where or "record"
    type_name = obj.get("type")
    version = obj.get("version")
    if not isinstance(type_name, str):
        raise InputError(f"{label}: 'type' must be a string, got {type_name!r}")
    if isinstance(version, bool) or not isinstance(version, int) or not 0 <= version <= 0x7FFF:
        raise InputError(f"{label}: 'version' must be an integer 0..32767, got {version!r}")
    api_key = RECORD_API_KEYS.get(type_name)
    if api_key is None and type_name.startswith("UNKNOWN_") and type_name[8:].isdigit():
        api_key = int(type_name[8:])
    if api_key is None:
        raise InputError(f"{label}: unknown record type {type_name!r}")
    cls = TYPED_RECORDS.get(api_key)
    if cls is None or not cls.VALID_VERSIONS[0] <= version <= cls.VALID_VERSIONS[1]:
        payload = obj.get("payload")
        try:
            raw = base64.b64decode(payload, validate=True) if isinstance(payload, str) else None
        except binascii.Error as e:
            raise InputError(f"{label}: 'payload' is not base64: {e}") from e
        return OpaqueRecord(api_key=api_key, version=version, type_name=type_name, data=obj.get("data"),
                            payload=raw)
    return cast(Record, message_from_json(cls, obj.get("data"), version, f"{label} {type_name} v{version}"))


def dumps(obj: Any) -> str:
    """Compact JSON as Jackson's ``ObjectNode.toString`` prints it: no spaces, non-ASCII emitted raw."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def dumps_without_floats(obj: Any) -> str:
    """:func:`dumps` of a document that holds no float — a record's data, a table row, an image — by orjson, several
    times faster on the hot paths (the Spark operator's rows and state values, the image JSON). The two write the
    same text except for floats (exponents, non-finite values), and orjson refuses integers beyond 64 bits, for which
    this falls back to :func:`dumps`."""
    try:
        return orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS).decode("utf-8")
    except orjson.JSONEncodeError:
        return dumps(obj)
