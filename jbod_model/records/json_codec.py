"""The JSON form of records and messages, identical to what ``kafka-dump-log --cluster-metadata-decoder`` prints.

Mirrors Kafka's generated ``*JsonConverter`` classes and ``MetadataJsonConverters``: keys are the spec names with
the first letter lowercased, in declaration order; uuids print as their 22-character base64url string; bytes as
standard base64; a tagged field is printed only when it differs from its default; fields that do not exist at the
record's version are absent. A record prints as ``{"type": "PARTITION_RECORD", "version": 1, "data": {…}}``.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final, TypeVar, cast

import orjson

from jbod_model.errors import InputError
from jbod_model.records.metadata import (
    RECORD_API_KEYS,
    TYPED_RECORDS,
    MetadataRecord,
    OpaqueRecord,
    Record,
)
from jbod_model.records.schema import (
    INT_RANGES,
    FieldSpec,
    Message,
    VersionedMessage,
    check_value,
    fields_of,
    validate_message,
)
from jbod_model.slots import slot_constructor
from jbod_model.uuid import Uuid

M = TypeVar("M", bound=Message)


def message_to_json(message: Message, version: int, *, fast: bool = True) -> dict[str, Any]:
    """The ``data`` object of a message at ``version`` (Kafka's ``XJsonConverter.write``). ``fast``: written by the
    message class's generated writer for that version (the same object; :func:`_build_fast_to_json`)."""
    if fast:
        writer = _FAST_TO_JSON.get((type(message), version))
        if writer is None:
            writer = _FAST_TO_JSON[(type(message), version)] = _build_fast_to_json(type(message), version)
        return writer(message)
    out: dict[str, Any] = {}
    for spec, value in message.iter_fields():
        if not spec.present_in(version):
            continue
        if spec.tag is not None and value == spec.default:
            continue
        out[spec.json_name] = _value_to_json(spec, value, version)
    return out


#: (message class, version) → its generated JSON writer.
_FAST_TO_JSON: dict[tuple[type[Message], int], Callable[[Message], dict[str, Any]]] = {}


def _build_fast_to_json(cls: type[Message], version: int) -> Callable[[Message], dict[str, Any]]:
    """A second implementation of :func:`message_to_json` for one message class at one version, proven equal to it
    by ``tests/properties/test_fast_json_properties.py``: straight-line code over the fields present at ``version``
    (the reference asks every field of the class whether it is), ints, bools, strings and ids written inline, any
    other kind (structs, bytes) through the reference's own :func:`_value_to_json`. The source of the Spark job
    writes every record it reads as JSON: the reference's generator and per-value dispatch were most of that."""
    lines = ["def fast(m):", "    out = {}"]
    namespace: dict[str, Any] = {"value_to_json": _value_to_json, "version": version}
    for i, spec in enumerate(fields_of(cls)):
        if not spec.present_in(version):
            continue
        namespace[f"spec{i}"], namespace[f"default{i}"] = spec, spec.default
        element = spec.element_type if spec.is_array else spec.type
        if element == "uuid" and spec.is_array:
            write = "None if v is None else [str(x) for x in v]"
        elif element == "uuid":
            write = "None if v is None else str(v)"
        elif element in INT_RANGES or element in ("bool", "string"):
            write = "None if v is None else list(v)" if spec.is_array else "v"
        else:
            write = f"value_to_json(spec{i}, v, version)"
        lines.append(f"    v = m.{spec.name}")
        if spec.tag is not None:
            lines.append(f"    if not (v == default{i}):")
            lines.append(f"        out[{spec.json_name!r}] = {write}")
        else:
            lines.append(f"    out[{spec.json_name!r}] = {write}")
    lines.append("    return out")
    exec(compile("\n".join(lines), f"<fast JSON writer of {cls.__name__} v{version}>", "exec"), namespace)
    return cast("Callable[[Message], dict[str, Any]]", namespace["fast"])


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


def record_from_json(obj: Mapping[str, Any], where: str = "", *, fast: bool = True) -> Record:
    """Inverse of :func:`record_to_json`. Unknown types, and known types at a version newer than the model knows,
    become :class:`OpaqueRecord` with the data kept verbatim. ``fast``: read through the record type's generated
    reader where it has one (the same record, or the same error, as :func:`message_from_json`)."""
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
    data = obj.get("data")
    reader = _fast_reader(cls, version) if fast else None
    if reader is not None:
        record = reader(data)
        if record is not None:
            return cast(Record, record)
    return cast(Record, message_from_json(cls, data, version, f"{label} {type_name} v{version}"))


def typed_record_reader(type_name: str, version: int) -> Callable[[Any], Record | None] | None:
    """What :func:`record_from_json` does with the ``data`` of a record of a known type at a version the model
    knows, when that type has a generated reader: the reader, which returns the record or None (then
    :func:`record_from_json` reads it and says what is wrong). None for any other type or version. For callers that
    read many records whose type and version are already separate values (the Spark operator's input rows)."""
    key = (type_name, version)
    found = _READERS_BY_NAME.get(key, _UNBUILT)
    if found is _UNBUILT:
        api_key = RECORD_API_KEYS.get(type_name)
        cls = None if api_key is None else TYPED_RECORDS.get(api_key)
        found = None
        if cls is not None and type(version) is int and cls.VALID_VERSIONS[0] <= version <= cls.VALID_VERSIONS[1]:
            found = _fast_reader(cls, version)
        if api_key is not None:  # only known type names are kept: the map stays as small as the schema
            _READERS_BY_NAME[key] = found
    return cast("Callable[[Any], Record | None] | None", found)


def _fast_reader(cls: type[Message], version: int) -> _FastFromJson | None:
    reader = _FAST_FROM_JSON.get((cls, version), _UNBUILT)
    if reader is _UNBUILT:
        reader = _FAST_FROM_JSON[(cls, version)] = _build_fast_from_json(cls, version)
    return cast("_FastFromJson | None", reader)


# ---------------------------------------------------------------------------------------------------------------
# Fast path: a generated reader per record type and version


_FastFromJson = Callable[[Any], Any]
_UNBUILT: Any = object()
#: (record class, version) → its generated reader, or None where :func:`message_from_json` reads it alone.
_FAST_FROM_JSON: dict[tuple[type[Message], int], _FastFromJson | None] = {}
#: (type name, version) → :func:`typed_record_reader`'s answer.
_READERS_BY_NAME: dict[tuple[str, int], _FastFromJson | None] = {}
#: Uuids read so far by their text: a log names the same topics and directories again and again.
_UUID_TEXTS: dict[str, Uuid] = {}
_UUID_TEXTS_MAX = 1 << 16
_MISSING: Any = object()


def _uuid_from_text(text: str) -> Uuid | None:
    """``Uuid.from_string`` through a bounded cache; None for a text it refuses (the reference reader says why)."""
    found = _UUID_TEXTS.get(text)
    if found is None:
        try:
            found = Uuid.from_string(text)
        except InputError:
            return None
        if len(_UUID_TEXTS) >= _UUID_TEXTS_MAX:
            _UUID_TEXTS.clear()
        _UUID_TEXTS[text] = found
    return found


def _build_fast_from_json(cls: type[Message], version: int) -> _FastFromJson | None:
    """A second implementation of :func:`message_from_json` for one record class at one version, proven equal to it
    by ``tests/properties/test_fast_json_properties.py``: straight-line code for the record's fields, checking what
    :func:`~jbod_model.records.schema.validate_message` checks as it reads. It returns the same record, or None for
    any data it does not read exactly as the reference does (a missing or mistyped field, a null, anything out of
    range): the reference then reads it, and raises the error it names. None (no fast reader) for a class with a
    field kind it does not cover (structs, bytes, floats). A field's JSON aliases are read as the reference reads
    them: from the metadata.version that supports ELR (4.0), Kafka writes PartitionRecord and
    PartitionChangeRecord at version 2, whose ``lastKnownElr`` also reads as ``lastKnownELR``; refusing aliases left
    those, most of a 4.x log, to the reference at ≈ 35–63 µs a record against ≈ 4–6 µs here
    (``benchmarks/json_read_benchmark.py``).

    The untagged fields are read first. Most records of a log carry few of their tagged fields (a leader change is
    a PartitionChangeRecord's two ids and its leader, of eleven fields at version 2): once as many keys have been
    read as the object has, every other field is missing and keeps its default, so the rest are not looked up. The
    values wait in local variables, not a dict, until the record is built (:func:`_construct_lines`)."""
    specs = [spec for spec in fields_of(cls) if spec.present_in(version)]  # the others keep their defaults
    namespace: dict[str, Any] = {"MISSING": _MISSING, "uuid": _uuid_from_text, "cls": cls}
    for spec in specs:
        element = spec.element_type if spec.is_array else spec.type
        if element not in INT_RANGES and element not in ("bool", "string", "uuid"):
            return None
        if spec.tag is not None:
            try:  # a missing tagged field keeps its default: the reference still checks it
                check_value(spec, spec.default, version, cls.__name__)
            except InputError:
                return None
    built = _construct_lines(cls, version, namespace)
    if built is None:
        return None
    construct, defaults = built
    lines = ["def fast(data):", "    if type(data) is not dict:", "        return None", *defaults]
    untagged = [spec for spec in specs if spec.tag is None]
    tagged = [spec for spec in specs if spec.tag is not None]
    for spec in untagged:
        lines.extend(_field_lines(spec, version))
    if tagged:
        # Every key read already (no tagged field given, and no key the schema does not know): done.
        lines.append(f"    if len(data) == {len(untagged)}:")
        lines.extend("    " + line for line in construct)
        for spec in tagged:
            lines.extend(_field_lines(spec, version))
    lines.extend(construct)
    exec(compile("\n".join(lines), f"<fast JSON reader of {cls.__name__} v{version}>", "exec"), namespace)
    fast: _FastFromJson = namespace["fast"]
    return fast


def _field_lines(spec: FieldSpec, version: int) -> list[str]:
    """The generated reader's lines for one field: its value checked as :func:`validate_message` checks it and kept
    in its local variable (:func:`_local`), or ``return None`` where the reference reads it otherwise."""
    element = spec.element_type if spec.is_array else spec.type
    lines = [f"    v = data.get({spec.json_name!r}, MISSING)"]
    for alias in spec.aliases:  # the first of the name and its aliases the object has, as the reference takes it
        lines += ["    if v is MISSING:", f"        v = data.get({alias!r}, MISSING)"]
    if spec.tag is None:
        lines += ["    if v is MISSING:", "        return None"]  # the reference names the missing field
        lines.append("    if v is None:")
    else:
        lines += ["    if v is MISSING:", "        pass"]  # a missing tagged field keeps its default
        lines.append("    elif v is None:")
    nullable_kind = element in ("string",) or spec.is_array
    lines.append(f"        {_local(spec.name)} = None" if spec.nullable_in(version) and nullable_kind
                 else "        return None")
    lines.append("    else:")
    if spec.is_array:
        lines.append("        if type(v) is not list:")
        lines.append("            return None")
        if element == "uuid":
            lines.append("        v = tuple(uuid(x) if type(x) is str else None for x in v)")
            lines.append("        if None in v:")
            lines.append("            return None")
        else:
            lines.append("        v = tuple(v)")
            lines.append("        for x in v:")
            lines.append(f"            if {_scalar_refused('x', element)}:")
            lines.append("                return None")
    elif element == "uuid":
        lines.append("        if type(v) is not str:")
        lines.append("            return None")
        lines.append("        v = uuid(v)")
        lines.append("        if v is None:")
        lines.append("            return None")
    else:
        lines.append(f"        if {_scalar_refused('v', element)}:")
        lines.append("            return None")
    lines.append(f"        {_local(spec.name)} = v")
    return lines


def _local(name: str) -> str:
    """The generated reader's local variable for field ``name``."""
    return f"f_{name}"


def _construct_lines(cls: type[Message], version: int,
                     namespace: dict[str, Any]) -> tuple[list[str], list[str]] | None:
    """The generated reader's last lines — the instance of ``cls`` holding the fields' local variables
    (:func:`_local`) — and its first ones, which set each local to its field's default. The instance is the object
    ``cls(**fields)`` builds, made by :func:`jbod_model.slots.slot_constructor` without its keyword matching. Its one
    ``__post_init__`` (``VersionedMessage``: the version is valid) is not run: the reader's callers have checked the
    version (:func:`record_from_json`, :func:`typed_record_reader`). None for a class with anything else on
    construction, or a field without a default: the reference reads it (no record class is one today)."""
    fields = dataclasses.fields(cls)
    if (getattr(cls, "__post_init__", None) not in (None, VersionedMessage.__post_init__)
            or any(f.default is dataclasses.MISSING for f in fields)):
        return None
    versioned = issubclass(cls, MetadataRecord)
    own = [f for f in fields if not (versioned and f.name == "version")]  # the version is the reader's own
    for i, f in enumerate(own):
        namespace[f"default{i}"] = f.default
    namespace["make"] = slot_constructor(cls)
    values = ", ".join(str(version) if versioned and f.name == "version" else _local(f.name) for f in fields)
    return [f"    return make({values})"], [f"    {_local(f.name)} = default{i}" for i, f in enumerate(own)]


def _scalar_refused(name: str, type_name: str) -> str:
    """A Python test that is true when the JSON value ``name`` is not a valid ``type_name`` (``check_value``)."""
    if type_name in INT_RANGES:
        lo, hi = INT_RANGES[type_name]
        return f"type({name}) is not int or not {lo} <= {name} <= {hi}"
    return f"type({name}) is not {'bool' if type_name == 'bool' else 'str'}"


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


#: How many parts of a text one piece joins — an image's rows (:func:`jbod_model.image_json.image_json_pieces`), a
#: list's items (:func:`dumps_pieces`): a write of about a megabyte, and never a copy of the whole text.
PIECE_ROWS: Final = 4096


class Slices:
    """A list a document holds as consecutive slices, made one at a time while :func:`dumps_pieces` writes them:
    what a writer gives for a list too large to hold whole beside its text (``slices``: an iterable, read once, of
    lists — the list is their concatenation — or of a slice's text already made: its items' JSON joined by ``,``,
    without brackets, the empty string for none)."""

    __slots__ = ("slices",)

    def __init__(self, slices: Iterable[list[Any] | str]) -> None:
        self.slices = slices


def dumps_pieces(doc: Mapping[str, Any], *, rows: int = PIECE_ROWS) -> Iterator[str]:
    """:func:`dumps_without_floats` of ``doc`` (an object whose keys are strings) in consecutive pieces, to be
    written one after the other: each list among its values is encoded ``rows`` items at a time, and a
    :class:`Slices` value a slice at a time, as the list they make. The text of a 2 M-partition image from the
    tables is 1.7 GB: encoded whole it was held three times over (orjson's bytes, the str, the bytes the output
    encodes), beside the document itself."""
    yield "{"
    for i, (key, value) in enumerate(doc.items()):
        head = ("," if i else "") + dumps_without_floats(key) + ":"
        if isinstance(value, Slices):
            parts: Iterable[list[Any] | str] = value.slices
        elif isinstance(value, list) and len(value) > rows:
            parts = (value[lo:lo + rows] for lo in range(0, len(value), rows))
        else:
            yield head + dumps_without_floats(value)
            continue
        yield head + "["
        # A list's text is "[" + its items joined by "," + "]": each slice's without its brackets.
        first = True
        for part in parts:
            text = part if isinstance(part, str) else dumps_without_floats(part)[1:-1] if part else ""
            if text:
                yield ("" if first else ",") + text
                first = False
        yield "]"
    yield "}"
