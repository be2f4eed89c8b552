"""Kafka's binary message encoding driven by the :class:`FieldSpec` schema: varints, flexible versions, frame.

Three layers, each mirroring a Kafka class:

* **ByteUtils** (``clients/.../utils/ByteUtils.java``): unsigned varints (LEB128, at most 5 bytes for an int
  and 10 for a long) and the zigzag ``varint``/``varlong`` used by the record-batch format.
* **Generated message code** (``generator/.../MessageDataGenerator.java``, flexible versions only, because
  every KRaft metadata and control message is ``"flexibleVersions": "0+"``): untagged fields in declaration
  order, compact strings/bytes/arrays (unsigned varint ``len+1``, ``0`` = null), then the tagged-fields
  section. :func:`encode_message` / :func:`decode_message`.
* **MetadataRecordSerde / AbstractApiMessageSerde**: the frame ``frameVersion apiKey version body``.
  :func:`encode_record` / :func:`decode_record`.

Speed matters: a real metadata log is >95 % NoOpRecords and a long-lived cluster has millions of records. So
the per-(class, version) decode plan is built once (runs of fixed-width fields collapse into one
``struct.Struct``), records whose value is tiny are memoised by their bytes (records are immutable, so sharing
one instance is safe), and nothing introspects dataclasses at decode time.
"""

from __future__ import annotations

import dataclasses
import struct
import warnings
from collections.abc import Callable, Sequence
from dataclasses import MISSING, dataclass
from typing import Any, Final, TypeVar

from jbod_model.errors import DecodeError, InputError
from jbod_model.records.metadata import TYPED_RECORDS, MetadataRecord, OpaqueRecord, Record, type_name_of
from jbod_model.records.schema import MAX_VERSION, FieldSpec, Message, VersionedMessage, fields_of, validate_message
from jbod_model.slots import writable_twin
from jbod_model.uuid import Uuid

#: Anything ``struct.unpack_from`` and indexing accept; decoding never copies the input.
Buffer = bytes | bytearray | memoryview

M = TypeVar("M", bound=Message)

#: ``AbstractApiMessageSerde.DEFAULT_FRAME_VERSION``: the only frame version a released KRaft writes.
DEFAULT_FRAME_VERSION: Final = 1

#: The generated readers refuse strings longer than a Java short (``"string field X had invalid length"``).
MAX_STRING_LENGTH: Final = 0x7FFF


class UnknownRecordWarning(UserWarning):
    """A metadata record of an api key this model has no schema for, or of a newer version than it knows. The
    record is kept as an :class:`OpaqueRecord` (never dropped); the warning is issued once per type and
    version."""


# ------------------------------------------------------------------------------------------------------------
# ByteUtils


def _read_leb128(buf: Buffer, pos: int, end: int, max_bytes: int, what: str) -> tuple[int, int]:
    """LEB128 with at most ``max_bytes`` bytes; returns ``(value, next position)`` (the caller masks the value)."""
    value = 0
    shift = 0
    start = pos
    limit = 7 * max_bytes
    while True:
        if pos >= end:
            raise DecodeError(f"unsigned {what} runs past the end of its buffer", position=start)
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift >= limit:
            raise DecodeError(f"{what.capitalize()} is too long: more than {max_bytes} bytes", position=start)


def read_unsigned_varint(buf: Buffer, pos: int, end: int) -> tuple[int, int]:
    """Mirrors ``ByteUtils.readUnsignedVarint``: LEB128, at most 5 bytes; returns ``(value, next position)``.

    The value is masked to 32 bits as Java's ``int`` arithmetic would; callers range-check it."""
    value, pos = _read_leb128(buf, pos, end, 5, "varint")
    return value & 0xFFFFFFFF, pos


def read_unsigned_varlong(buf: Buffer, pos: int, end: int) -> tuple[int, int]:
    """Mirrors ``ByteUtils.readUnsignedVarlong``: LEB128, at most 10 bytes, masked to 64 bits."""
    value, pos = _read_leb128(buf, pos, end, 10, "varlong")
    return value & 0xFFFFFFFFFFFFFFFF, pos


def read_varint(buf: Buffer, pos: int, end: int) -> tuple[int, int]:
    """Mirrors ``ByteUtils.readVarint``: a zigzag-encoded int32."""
    u, pos = read_unsigned_varint(buf, pos, end)
    return (u >> 1) ^ -(u & 1), pos


def read_varlong(buf: Buffer, pos: int, end: int) -> tuple[int, int]:
    """Mirrors ``ByteUtils.readVarlong``: a zigzag-encoded int64."""
    u, pos = read_unsigned_varlong(buf, pos, end)
    return (u >> 1) ^ -(u & 1), pos


# Single-byte encodings are by far the most common (lengths, counts, tags); precompute them.
_ONE_BYTE: Final = tuple(bytes((i,)) for i in range(0x80))


def write_unsigned_varint(value: int) -> bytes:
    """Mirrors ``ByteUtils.writeUnsignedVarint`` for a value in [0, 2^32)."""
    if 0 <= value < 0x80:
        return _ONE_BYTE[value]
    if not 0 <= value <= 0xFFFFFFFF:
        raise InputError(f"{value} does not fit an unsigned varint (32 bits)")
    return _leb128(value)


def write_unsigned_varlong(value: int) -> bytes:
    """Mirrors ``ByteUtils.writeUnsignedVarlong`` for a value in [0, 2^64)."""
    if not 0 <= value <= 0xFFFFFFFFFFFFFFFF:
        raise InputError(f"{value} does not fit an unsigned varlong (64 bits)")
    return _leb128(value)


def _leb128(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def write_varint(value: int) -> bytes:
    """Mirrors ``ByteUtils.writeVarint``: zigzag then LEB128, for an int32."""
    if not -(1 << 31) <= value < 1 << 31:
        raise InputError(f"{value} does not fit a varint (int32)")
    return write_unsigned_varint(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def write_varlong(value: int) -> bytes:
    """Mirrors ``ByteUtils.writeVarlong``: zigzag then LEB128, for an int64."""
    if not -(1 << 63) <= value < 1 << 63:
        raise InputError(f"{value} does not fit a varlong (int64)")
    return _leb128(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


# ------------------------------------------------------------------------------------------------------------
# Per-(class, version) codecs

# A reader decodes one value at ``pos`` without reading at or past ``end``: (buf, pos, end) -> (value, next
# pos).
_Reader = Callable[[Buffer, int, int], tuple[Any, int]]
# A decode step fills ``out`` (the constructor's keyword arguments) and returns the next position.
_DecodeStep = Callable[[Buffer, int, int, dict[str, Any]], int]
# An encoder turns one field value into bytes; an encode step appends a message's field(s) to ``out``.
_Encoder = Callable[[Any], bytes]
_EncodeStep = Callable[[Any, list[bytes]], None]

_FIXED_FORMATS: Final = {
    "int8": "b", "int16": "h", "int32": "i", "int64": "q", "uint16": "H", "uint32": "I", "bool": "?",
    "float64": "d", "uuid": "qq",
}


@dataclass(frozen=True, slots=True)
class _Codec:
    """Everything needed to read or write one message class at one version, computed once."""

    cls: type[Message]
    version: int
    decode_steps: tuple[_DecodeStep, ...]
    tagged_readers: dict[int, tuple[str, _Reader]]
    encode_steps: tuple[_EncodeStep, ...]
    #: (tag, attribute, default, encoder) in ascending tag order: Kafka writes tagged fields sorted by tag.
    tagged_writers: tuple[tuple[int, str, Any, _Encoder], ...]
    #: Fields that do not exist at this version: writing a non-default value there is an error.
    absent: tuple[tuple[str, Any], ...]
    #: kwargs every decoded instance starts from (``version`` for metadata records).
    base_kwargs: dict[str, Any]
    #: The shared instance for a body that is only ``00`` (no untagged fields, no tagged fields set).
    empty_instance: Message | None


_CODECS: dict[tuple[type[Message], int], _Codec] = {}


def _codec(cls: type[Message], version: int) -> _Codec:
    codec = _CODECS.get((cls, version))
    if codec is None:
        codec = _build_codec(cls, version)
        _CODECS[(cls, version)] = codec
    return codec


def _build_codec(cls: type[Message], version: int) -> _Codec:
    specs = fields_of(cls)
    present = [s for s in specs if s.present_in(version)]
    untagged = [s for s in present if s.tag is None]
    tagged = sorted((s for s in present if s.tag is not None), key=lambda s: s.tag or 0)
    tags = [s.tag for s in tagged]
    if len(set(tags)) != len(tags):  # pragma: no cover - a schema declaration error
        raise AssertionError(f"{cls.__name__} v{version} declares a tag twice: {tags}")

    decode_steps: list[_DecodeStep] = []
    encode_steps: list[_EncodeStep] = []
    run: list[FieldSpec] = []

    def flush_run() -> None:
        if run:
            decode_steps.append(_fixed_decode_step(tuple(run)))
            encode_steps.append(_fixed_encode_step(tuple(run)))
            run.clear()

    for spec in untagged:
        if spec.type in _FIXED_FORMATS:
            run.append(spec)
            continue
        flush_run()
        decode_steps.append(_var_decode_step(spec.name, _reader(spec, version)))
        encode_steps.append(_var_encode_step(spec.name, _encoder(spec, version)))
    flush_run()

    base_kwargs: dict[str, Any] = {"version": version} if issubclass(cls, MetadataRecord) else {}
    empty_instance = cls(**base_kwargs) if not untagged else None
    return _Codec(
        cls=cls,
        version=version,
        decode_steps=tuple(decode_steps),
        tagged_readers={s.tag: (s.name, _reader(s, version)) for s in tagged if s.tag is not None},
        encode_steps=tuple(encode_steps),
        tagged_writers=tuple((s.tag, s.name, s.default, _encoder(s, version)) for s in tagged
                             if s.tag is not None),
        absent=tuple((s.name, s.default) for s in specs if not s.present_in(version)),
        base_kwargs=base_kwargs,
        empty_instance=empty_instance,
    )


# --- decoding -----------------------------------------------------------------------------------------------


def _short(what: str, pos: int, need: int, end: int) -> DecodeError:
    return DecodeError(f"{what} needs {need} byte(s) but only {max(end - pos, 0)} remain", position=pos)


def _fixed_decode_step(run: tuple[FieldSpec, ...]) -> _DecodeStep:
    """One ``struct.unpack_from`` for a run of consecutive fixed-width fields (ints, bools, uuids)."""
    st = struct.Struct(">" + "".join(_FIXED_FORMATS[s.type] for s in run))
    size = st.size
    names = tuple(s.name for s in run)
    label = ", ".join(s.json_name for s in run)
    unpack_from = st.unpack_from
    if not any(s.type == "uuid" for s in run):

        def step(buf: Buffer, pos: int, end: int, out: dict[str, Any]) -> int:
            if pos + size > end:
                raise _short(label, pos, size, end)
            out.update(zip(names, unpack_from(buf, pos), strict=True))
            return pos + size

        return step

    is_uuid = tuple(s.type == "uuid" for s in run)

    def uuid_step(buf: Buffer, pos: int, end: int, out: dict[str, Any]) -> int:
        if pos + size > end:
            raise _short(label, pos, size, end)
        values = unpack_from(buf, pos)
        i = 0
        for name, u in zip(names, is_uuid, strict=True):
            if u:
                out[name] = Uuid(values[i], values[i + 1])
                i += 2
            else:
                out[name] = values[i]
                i += 1
        return pos + size

    return uuid_step


def _var_decode_step(name: str, reader: _Reader) -> _DecodeStep:
    def step(buf: Buffer, pos: int, end: int, out: dict[str, Any]) -> int:
        out[name], pos = reader(buf, pos, end)
        return pos

    return step


def _reader(spec: FieldSpec, version: int) -> _Reader:
    """The reader of one field's value (its plain encoding, as inside a tagged field too)."""
    nullable = spec.nullable_in(version)
    label = spec.json_name
    if spec.is_array:
        return _array_reader(spec, spec.element_type, nullable, version, label)
    if spec.type in _FIXED_FORMATS:
        return _fixed_reader(spec.type, label)
    if spec.type == "string":
        return _string_reader(nullable, label)
    if spec.type == "bytes":
        return _bytes_reader(nullable, label)
    if spec.type == "struct":
        assert spec.struct is not None, label
        return _struct_reader(spec.struct, version, nullable, label)
    raise AssertionError(f"unknown Kafka type {spec.type} for {label}")  # pragma: no cover


def _fixed_reader(type_name: str, label: str) -> _Reader:
    st = struct.Struct(">" + _FIXED_FORMATS[type_name])
    size = st.size
    unpack_from = st.unpack_from
    if type_name == "uuid":

        def read_uuid(buf: Buffer, pos: int, end: int) -> tuple[Any, int]:
            if pos + 16 > end:
                raise _short(label, pos, 16, end)
            msb, lsb = unpack_from(buf, pos)
            return Uuid(msb, lsb), pos + 16

        return read_uuid

    def read(buf: Buffer, pos: int, end: int) -> tuple[Any, int]:
        if pos + size > end:
            raise _short(label, pos, size, end)
        return unpack_from(buf, pos)[0], pos + size

    return read


def _null(label: str, pos: int) -> DecodeError:
    return DecodeError(f"non-nullable field {label} was serialized as null", position=pos)


def _string_reader(nullable: bool, label: str) -> _Reader:
    def read(buf: Buffer, pos: int, end: int) -> tuple[Any, int]:
        start = pos
        if pos < end and buf[pos] < 0x80:
            n = buf[pos] - 1
            pos += 1
        else:
            u, pos = read_unsigned_varint(buf, pos, end)
            n = u - 1
        if n < 0:
            if not nullable:
                raise _null(label, start)
            return None, pos
        if n > MAX_STRING_LENGTH:
            raise DecodeError(f"string field {label} had invalid length {n}", position=start)
        if pos + n > end:
            raise _short(f"string field {label}", pos, n, end)
        try:
            return str(buf[pos:pos + n], "utf-8"), pos + n
        except UnicodeDecodeError as e:
            raise DecodeError(f"string field {label} is not valid UTF-8: {e.reason}", position=pos) from e

    return read


def _bytes_reader(nullable: bool, label: str) -> _Reader:
    def read(buf: Buffer, pos: int, end: int) -> tuple[Any, int]:
        start = pos
        u, pos = read_unsigned_varint(buf, pos, end)
        n = u - 1
        if n < 0:
            if not nullable:
                raise _null(label, start)
            return None, pos
        if pos + n > end:
            raise _short(f"bytes field {label}", pos, n, end)
        return bytes(buf[pos:pos + n]), pos + n

    return read


def _array_reader(spec: FieldSpec, element: str, nullable: bool, version: int, label: str) -> _Reader:
    if element in _FIXED_FORMATS:
        code = _FIXED_FORMATS[element]
        width = struct.calcsize(">" + code)
        is_uuid = element == "uuid"
        element_reader: _Reader | None = None
    else:
        width = 1  # every compact string/bytes/struct takes at least one byte
        is_uuid = False
        code = ""
        if element == "string":
            element_reader = _string_reader(False, f"{label}[]")
        elif element == "bytes":
            element_reader = _bytes_reader(False, f"{label}[]")
        elif element == "struct":
            assert spec.struct is not None, label
            element_reader = _struct_reader(spec.struct, version, False, f"{label}[]")
        else:  # pragma: no cover - a schema declaration error
            raise AssertionError(f"unknown Kafka element type {element} for {label}")

    def read(buf: Buffer, pos: int, end: int) -> tuple[Any, int]:
        start = pos
        if pos < end and buf[pos] < 0x80:
            n = buf[pos] - 1
            pos += 1
        else:
            u, pos = read_unsigned_varint(buf, pos, end)
            n = u - 1
        if n < 0:
            if not nullable:
                raise _null(label, start)
            return None, pos
        # Check the count against the bytes left *before* allocating anything (Kafka: "Tried to read N
        # elements, but only M bytes remain"), so a hostile length cannot make us build a huge tuple.
        if n * width > end - pos:
            raise DecodeError(f"Tried to read {n} elements of {label}, but only {end - pos} bytes remain",
                              position=start)
        if n == 0:
            return (), pos
        if element_reader is None:
            if is_uuid:
                halves = struct.unpack_from(f">{2 * n}q", buf, pos)
                return tuple(Uuid(halves[i], halves[i + 1]) for i in range(0, 2 * n, 2)), pos + n * width
            return struct.unpack_from(f">{n}{code}", buf, pos), pos + n * width
        items = []
        for _ in range(n):
            item, pos = element_reader(buf, pos, end)
            items.append(item)
        return tuple(items), pos

    return read


def _struct_reader(cls: type[Message], version: int, nullable: bool, label: str) -> _Reader:
    codec_box: list[_Codec] = []  # resolved lazily: a struct may be declared after the message using it

    def read(buf: Buffer, pos: int, end: int) -> tuple[Any, int]:
        if nullable:
            # A nullable struct carries an int8 presence marker: -1 null, 1 present.
            if pos >= end:
                raise _short(label, pos, 1, end)
            marker = buf[pos]
            pos += 1
            if marker >= 0x80:
                return None, pos
        if not codec_box:
            codec_box.append(_codec(cls, version))
        return _decode_body(codec_box[0], buf, pos, end)

    return read


def _decode_body(codec: _Codec, buf: Buffer, pos: int, end: int) -> tuple[Any, int]:
    """Decode a message or struct at ``pos``: its untagged fields, then its tagged-fields section."""
    if codec.empty_instance is not None and pos < end and buf[pos] == 0:
        return codec.empty_instance, pos + 1
    out = dict(codec.base_kwargs)
    for step in codec.decode_steps:
        pos = step(buf, pos, end, out)
    # Tagged-fields section: count, then (tag, size, value). Any order is accepted, unknown tags are skipped
    # (Kafka keeps them as raw "unknown tagged fields"; a newer writer may add tags we do not know).
    if pos < end and buf[pos] == 0:
        pos += 1
    else:
        count, pos = read_unsigned_varint(buf, pos, end)
        readers = codec.tagged_readers
        for _ in range(count):
            tag, pos = read_unsigned_varint(buf, pos, end)
            size, pos = read_unsigned_varint(buf, pos, end)
            if size > end - pos:
                raise DecodeError(f"tagged field {tag} claims {size} byte(s) but only {end - pos} remain",
                                  position=pos)
            field_end = pos + size
            entry = readers.get(tag)
            if entry is not None:
                name, reader = entry
                value, used_to = reader(buf, pos, field_end)
                if used_to != field_end:
                    raise DecodeError(f"tagged field {name} (tag {tag}) has size {size} but its value takes "
                                      f"{used_to - pos} byte(s)", position=pos)
                out[name] = value
            pos = field_end
    try:
        return codec.cls(**out), pos
    except InputError as e:  # e.g. a version outside VALID_VERSIONS (guarded by decode_record, kept for safety)
        raise DecodeError(str(e), position=pos) from e


def decode_message(cls: type[M], buf: Buffer, version: int, *, start: int = 0, strict: bool = True,
                   fast: bool = True) -> M:
    """Decode a message body (no frame) at ``version``; mirrors the generated ``XData.read(readable, version)``.

    With ``strict`` (the default) every byte from ``start`` must be consumed; positions in a
    :class:`DecodeError` are offsets into ``buf``. ``fast=False`` uses only the reference decoder (the generated
    fast path gives the same result; the property tests compare the two)."""
    end = len(buf)
    codec = _codec(cls, version)
    if fast and type(buf) is bytes:
        message, pos = _decode_body_fast(codec, buf, start, end)
    else:
        message, pos = _decode_body(codec, buf, start, end)
    if strict and pos != end:
        raise DecodeError(f"Found {end - pos} byte(s) of garbage after {cls.__name__} v{version}", position=pos)
    assert isinstance(message, cls)
    return message


# --- the fast path: one generated function per (class, version) ----------------------------------------------
#
# The reference decoder above walks a tuple of per-field closures and builds a kwargs dict for every message. The
# functions below are generated once per (class, version) from the same FieldSpecs, as Kafka generates its
# ``XData.read`` methods: straight-line code with single-byte varints (lengths, counts, tags < 128 — nearly all of
# them in a metadata log) read inline and the constructor called with keyword arguments. They decode only the
# common shape: anything else (a multi-byte varint, a null where the schema forbids one, a short buffer, bad UTF-8)
# makes them return None, and the caller decodes with the reference decoder, which raises its precise error. So a
# fast function either returns exactly what ``_decode_body`` returns or defers to it; the property tests in
# tests/properties/test_fast_decode_properties.py check this on every record type and version.

#: Decoded Uuids by their 16 wire bytes: a log names the same topic and directory ids over and over, so one shared
#: instance each saves the constructor and makes later comparisons identity checks. Bounded; cleared when full.
_UUIDS: dict[bytes, Uuid] = {}
_UUIDS_MAX: Final = 1 << 16
_UUID_HALVES: Final = struct.Struct(">qq")

_FastDecoder = Callable[[bytes, int, int], "tuple[Any, int] | None"]
_FAST: dict[tuple[type[Message], int], _FastDecoder] = {}


def _uuid_of(data: bytes) -> Uuid:
    """The shared :class:`Uuid` of 16 wire bytes."""
    u = _UUIDS.get(data)
    if u is None:
        u = Uuid(*_UUID_HALVES.unpack(data))
        if len(_UUIDS) >= _UUIDS_MAX:
            _UUIDS.clear()
        _UUIDS[data] = u
    return u


def _uuid_tuple(buf: bytes, pos: int, n: int) -> tuple[Uuid, ...]:
    get = _UUIDS.get
    out = []
    for p in range(pos, pos + 16 * n, 16):
        data = buf[p:p + 16]
        u = get(data)
        out.append(u if u is not None else _uuid_of(data))
    return tuple(out)


def _fast_decoder(cls: type[Message], version: int) -> _FastDecoder:
    fast = _FAST.get((cls, version))
    if fast is None:
        fast = _build_fast_decoder(cls, version)
        _FAST[(cls, version)] = fast
    return fast


class _Source:
    """The lines of one generated function, with fresh local names."""

    def __init__(self, namespace: dict[str, Any]) -> None:
        self.lines: list[str] = []
        self.namespace = namespace
        self._n = 0

    def name(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}{self._n}"

    def const(self, prefix: str, value: Any) -> str:
        """A name in the function's globals bound to ``value``."""
        name = self.name(prefix)
        self.namespace[name] = value
        return name

    def add(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)


def _emit_count(src: _Source, indent: int, var: str, end: str, nullable: bool) -> None:
    """``var`` = a compact length/count (``len + 1`` as a one-byte unsigned varint), or None when null and
    allowed. A multi-byte varint, or null where it is not allowed, defers to the reference decoder."""
    src.add(indent, f"if pos >= {end}:")
    src.add(indent + 1, "return None")
    src.add(indent, f"{var} = buf[pos] - 1")
    src.add(indent, f"if {var} >= 0x7F:")
    src.add(indent + 1, "return None")
    src.add(indent, "pos += 1")
    if not nullable:
        src.add(indent, f"if {var} < 0:")
        src.add(indent + 1, "return None")


def _emit_length(src: _Source, indent: int, var: str, target: str, end: str, nullable: bool) -> int:
    """``var`` = the compact length of an array, string or bytes (:func:`_emit_count`); when it may be null,
    ``target`` = None on null and the value's code goes in an ``else`` branch. The indent of that code."""
    _emit_count(src, indent, var, end, nullable)
    if not nullable:
        return indent
    src.add(indent, f"if {var} < 0:")
    src.add(indent + 1, f"{target} = None")
    src.add(indent, "else:")
    return indent + 1


def _emit_value(src: _Source, indent: int, target: str, spec: FieldSpec, type_name: str, is_array: bool,
                nullable: bool, version: int, end: str) -> None:
    """Code that reads one field value into ``target`` from ``pos`` (not past ``end``), advancing ``pos``."""
    if is_array:
        n = src.name("n")
        body = _emit_length(src, indent, n, target, end, nullable)
        if type_name in _FIXED_FORMATS and type_name != "uuid":
            code = _FIXED_FORMATS[type_name]
            width = struct.calcsize(">" + code)
            unpackers = src.const("arr", tuple(struct.Struct(f">{k}{code}").unpack_from for k in range(0x7F)))
            src.add(body, f"if pos + {width} * {n} > {end}:")
            src.add(body + 1, "return None")
            src.add(body, f"{target} = {unpackers}[{n}](buf, pos)")
            src.add(body, f"pos += {width} * {n}")
        elif type_name == "uuid":
            src.add(body, f"if pos + 16 * {n} > {end}:")
            src.add(body + 1, "return None")
            # Replica-length arrays (a partition's directories) are unrolled: no loop, no call on a shared id.
            for k in range(1, 5):
                ids = ", ".join(f"(get_uuid(buf[pos + {16 * i}:pos + {16 * i + 16}]) or "
                                f"uuid_of(buf[pos + {16 * i}:pos + {16 * i + 16}]))" for i in range(k))
                src.add(body, f"{'if' if k == 1 else 'elif'} {n} == {k}:")
                src.add(body + 1, f"{target} = ({ids},)")
            src.add(body, "else:")
            src.add(body + 1, f"{target} = uuid_tuple(buf, pos, {n})")
            src.add(body, f"pos += 16 * {n}")
        else:
            items = src.name("items")
            item = src.name("item")
            src.add(body, f"{items} = []")
            src.add(body, f"for _ in range({n}):")
            _emit_value(src, body + 1, item, spec, type_name, False, False, version, end)
            src.add(body + 1, f"{items}.append({item})")
            src.add(body, f"{target} = tuple({items})")
        return
    if type_name in _FIXED_FORMATS:
        if type_name == "uuid":
            src.add(indent, f"if pos + 16 > {end}:")
            src.add(indent + 1, "return None")
            src.add(indent, f"{target} = get_uuid(buf[pos:pos + 16]) or uuid_of(buf[pos:pos + 16])")
            src.add(indent, "pos += 16")
            return
        st = struct.Struct(">" + _FIXED_FORMATS[type_name])
        unpack = src.const("fixed", st.unpack_from)
        src.add(indent, f"if pos + {st.size} > {end}:")
        src.add(indent + 1, "return None")
        src.add(indent, f"{target}, = {unpack}(buf, pos)")
        src.add(indent, f"pos += {st.size}")
        return
    if type_name in ("string", "bytes"):
        n = src.name("n")
        body = _emit_length(src, indent, n, target, end, nullable)
        src.add(body, f"if pos + {n} > {end}:")
        src.add(body + 1, "return None")
        # A bad UTF-8 sequence raises here; the generated function's caller catches it and defers.
        make = 'str' if type_name == "string" else "bytes"
        encoding = ', "utf-8"' if type_name == "string" else ""
        src.add(body, f"{target} = {make}(buf[pos:pos + {n}]{encoding})")
        src.add(body, f"pos += {n}")
        return
    if type_name == "struct":
        assert spec.struct is not None, spec.json_name
        inner = src.const("struct", _LazyFast(spec.struct, version))
        body = indent
        if nullable:
            src.add(indent, f"if pos >= {end}:")
            src.add(indent + 1, "return None")
            src.add(indent, "pos += 1")
            src.add(indent, "if buf[pos - 1] >= 0x80:")
            src.add(indent + 1, f"{target} = None")
            src.add(indent, "else:")
            body = indent + 1
        got = src.name("got")
        src.add(body, f"{got} = {inner}(buf, pos, {end})")
        src.add(body, f"if {got} is None:")
        src.add(body + 1, "return None")
        src.add(body, f"{target}, pos = {got}")
        return
    raise AssertionError(f"unknown Kafka type {type_name} for {spec.json_name}")  # pragma: no cover


class _LazyFast:
    """The fast decoder of a nested struct, resolved at first use (a struct may be declared after its user)."""

    __slots__ = ("cls", "fast", "version")

    def __init__(self, cls: type[Message], version: int) -> None:
        self.cls, self.version = cls, version
        self.fast: _FastDecoder | None = None

    def __call__(self, buf: bytes, pos: int, end: int) -> tuple[Any, int] | None:
        if self.fast is None:
            self.fast = _fast_decoder(self.cls, self.version)
        return self.fast(buf, pos, end)


def _build_fast_decoder(cls: type[Message], version: int) -> _FastDecoder:
    codec = _codec(cls, version)
    specs = fields_of(cls)
    present = [s for s in specs if s.present_in(version)]
    untagged = [s for s in present if s.tag is None]
    tagged = sorted((s for s in present if s.tag is not None), key=lambda s: s.tag or 0)
    namespace: dict[str, Any] = {"uuid_of": _uuid_of, "get_uuid": _UUIDS.get, "uuid_tuple": _uuid_tuple, "cls": cls,
                                 "new": object.__new__,
                                 "empty": codec.empty_instance}
    src = _Source(namespace)
    src.add(0, "def fast(buf, pos, end):")
    if codec.empty_instance is not None:
        src.add(1, "if pos < end and buf[pos] == 0:")
        src.add(2, "return empty, pos + 1")
    locals_: dict[str, str] = {}
    i = 0
    while i < len(untagged):
        spec = untagged[i]
        if spec.type in _FIXED_FORMATS and spec.type != "uuid":
            # A run of fixed-width non-uuid fields: one unpack.
            run = []
            while i < len(untagged) and untagged[i].type in _FIXED_FORMATS and untagged[i].type != "uuid":
                run.append(untagged[i])
                i += 1
            st = struct.Struct(">" + "".join(_FIXED_FORMATS[s.type] for s in run))
            unpack = src.const("run", st.unpack_from)
            names = [src.name("f") for _ in run]
            for s, n in zip(run, names, strict=True):
                locals_[s.name] = n
            src.add(1, f"if pos + {st.size} > end:")
            src.add(2, "return None")
            src.add(1, f"{', '.join(names)}, = {unpack}(buf, pos)")
            src.add(1, f"pos += {st.size}")
            continue
        target = src.name("f")
        locals_[spec.name] = target
        _emit_value(src, 1, target, spec, spec.element_type if spec.is_array else spec.type, spec.is_array,
                    spec.nullable_in(version), version, "end")
        i += 1
    # Tagged-fields section: count, then (tag, size, value); unknown tags are skipped, a repeated tag wins last,
    # exactly as in _decode_body.
    for spec in tagged:
        target = src.name("t")
        locals_[spec.name] = target
        src.add(1, f"{target} = {src.const('default', spec.default)}")
    src.add(1, "if pos >= end:")
    src.add(2, "return None")
    src.add(1, "count = buf[pos]")
    src.add(1, "pos += 1")
    src.add(1, "if count:")
    src.add(2, "if count >= 0x80:")
    src.add(3, "return None")
    src.add(2, "for _ in range(count):")
    src.add(3, "if pos + 2 > end:")
    src.add(4, "return None")
    src.add(3, "tag = buf[pos]")
    src.add(3, "size = buf[pos + 1]")
    src.add(3, "if tag >= 0x80 or size >= 0x80:")
    src.add(4, "return None")
    src.add(3, "pos += 2")
    src.add(3, "field_end = pos + size")
    src.add(3, "if field_end > end:")
    src.add(4, "return None")
    for k, spec in enumerate(tagged):
        src.add(3, f"{'if' if k == 0 else 'elif'} tag == {spec.tag}:")
        _emit_value(src, 4, locals_[spec.name], spec, spec.element_type if spec.is_array else spec.type,
                    spec.is_array, spec.nullable_in(version), version, "field_end")
        src.add(4, "if pos != field_end:")
        src.add(5, "return None")
    src.add(3, "pos = field_end")
    values = {s.name: locals_[s.name] for s in present}
    for name, value in codec.base_kwargs.items():
        values[name] = src.const("base", value)
    _emit_construct(src, cls, values)
    code = "\n".join(src.lines)
    exec(compile(code, f"<fast decoder of {cls.__name__} v{version}>", "exec"), namespace)
    generated: _FastDecoder = namespace["fast"]
    return generated


def _emit_construct(src: _Source, cls: type[Message], values: dict[str, str]) -> None:
    """Code that returns ``(instance, pos)``, the instance holding ``values`` (field → local name) and every other
    field's default.

    A message is a frozen slots dataclass whose ``__init__`` only stores its keyword arguments (that call is most of
    the cost of decoding a small record), so the generated code allocates an instance of the class's writable twin,
    stores each slot by a plain store and turns it into a ``cls`` (:func:`jbod_model.slots.writable_twin`; through
    each slot's descriptor for a class without a twin) — the same object ``cls(**kwargs)`` builds. The one
    ``__post_init__`` messages have (``VersionedMessage``: the version is valid) is decided here, once, on the value
    the instance will hold: an invalid one makes the function always defer to the reference decoder, which raises.
    A class that does anything else on construction is built by calling it."""
    twin = writable_twin(cls)
    slots: list[tuple[str, str]] = []
    for f in dataclasses.fields(cls):
        descriptor: Any = getattr(cls, f.name, None)
        if type(descriptor).__name__ != "member_descriptor" or (f.name not in values and f.default is MISSING):
            slots = []
            break
        value = values.get(f.name) or src.const("default", f.default)
        slots.append((f.name if twin is not None else src.const("set", descriptor.__set__), value))
    post_init = getattr(cls, "__post_init__", None)
    if post_init is VersionedMessage.__post_init__:
        version = values.get("version")
        lo, hi = cls.VALID_VERSIONS
        fixed: Any = src.namespace[version] if version is not None else next(
            f.default for f in dataclasses.fields(cls) if f.name == "version")
        if not isinstance(fixed, int) or not lo <= fixed <= hi:
            src.add(1, "return None")
            return
    elif post_init is not None:
        slots = []
    if not slots:
        src.add(1, f"return cls({', '.join(f'{k}={v}' for k, v in values.items())}), pos")
        return
    if twin is None:
        src.add(1, "instance = new(cls)")
        for setter, value in slots:
            src.add(1, f"{setter}(instance, {value})")
    else:
        # Plain stores into the class's writable twin, which then becomes a ``cls`` (jbod_model.slots).
        src.add(1, f"instance = new({src.const('twin', twin)})")
        for name, value in slots:
            src.add(1, f"instance.{name} = {value}")
        src.add(1, "instance.__class__ = cls")
    src.add(1, "return instance, pos")


def _decode_body_fast(codec: _Codec, buf: bytes, pos: int, end: int) -> tuple[Any, int]:
    """``_decode_body`` through the generated decoder, deferring to the reference one for anything unusual."""
    if type(buf) is not bytes:  # the generated code keys shared Uuids by slices of ``buf``: bytes only
        return _decode_body(codec, buf, pos, end)
    try:
        got = _fast_decoder(codec.cls, codec.version)(buf, pos, end)
    except (UnicodeDecodeError, InputError):
        got = None
    if got is None:
        return _decode_body(codec, buf, pos, end)
    return got


# --- encoding -----------------------------------------------------------------------------------------------


def _fixed_encode_step(run: tuple[FieldSpec, ...]) -> _EncodeStep:
    st = struct.Struct(">" + "".join(_FIXED_FORMATS[s.type] for s in run))
    pack = st.pack
    names = tuple(s.name for s in run)
    if not any(s.type == "uuid" for s in run):

        def step(msg: Any, out: list[bytes]) -> None:
            out.append(pack(*[getattr(msg, n) for n in names]))

        return step

    is_uuid = tuple(s.type == "uuid" for s in run)

    def uuid_step(msg: Any, out: list[bytes]) -> None:
        values: list[Any] = []
        for name, u in zip(names, is_uuid, strict=True):
            v = getattr(msg, name)
            if u:
                values.append(v.msb)
                values.append(v.lsb)
            else:
                values.append(v)
        out.append(pack(*values))

    return uuid_step


def _var_encode_step(name: str, encoder: _Encoder) -> _EncodeStep:
    def step(msg: Any, out: list[bytes]) -> None:
        out.append(encoder(getattr(msg, name)))

    return step


def _encoder(spec: FieldSpec, version: int) -> _Encoder:
    nullable = spec.nullable_in(version)
    label = spec.json_name
    if spec.is_array:
        return _array_encoder(spec, spec.element_type, nullable, version, label)
    return _scalar_encoder(spec, spec.type, nullable, version, label)


def _not_nullable(label: str) -> InputError:
    return InputError(f"{label} is not nullable, but it is None")


def _scalar_encoder(spec: FieldSpec, type_name: str, nullable: bool, version: int, label: str) -> _Encoder:
    if type_name in _FIXED_FORMATS:
        pack = struct.Struct(">" + _FIXED_FORMATS[type_name]).pack
        if type_name == "uuid":
            return lambda v: pack(v.msb, v.lsb)
        return pack
    if type_name == "string":

        def encode_string(v: Any) -> bytes:
            if v is None:
                if not nullable:
                    raise _not_nullable(label)
                return b"\x00"
            data: bytes = v.encode("utf-8")
            if len(data) > MAX_STRING_LENGTH:
                raise InputError(f"'{label}' field is too long to be serialized ({len(data)} bytes)")
            return write_unsigned_varint(len(data) + 1) + data

        return encode_string
    if type_name == "bytes":

        def encode_bytes(v: Any) -> bytes:
            if v is None:
                if not nullable:
                    raise _not_nullable(label)
                return b"\x00"
            return write_unsigned_varint(len(v) + 1) + bytes(v)

        return encode_bytes
    if type_name == "struct":
        cls = spec.struct
        assert cls is not None, label

        def encode_struct(v: Any) -> bytes:
            if v is None:
                if not nullable:
                    raise _not_nullable(label)
                return b"\xff"
            body = _encode_body(_codec(cls, version), v)
            return b"\x01" + body if nullable else body

        return encode_struct
    raise AssertionError(f"unknown Kafka type {type_name} for {label}")  # pragma: no cover


def _array_encoder(spec: FieldSpec, element: str, nullable: bool, version: int, label: str) -> _Encoder:
    if element in _FIXED_FORMATS:
        code = _FIXED_FORMATS[element]

        def encode_fixed(v: Any) -> bytes:
            if v is None:
                if not nullable:
                    raise _not_nullable(label)
                return b"\x00"
            n = len(v)
            if element == "uuid":
                flat = [half for u in v for half in (u.msb, u.lsb)]
                return write_unsigned_varint(n + 1) + struct.pack(f">{2 * n}q", *flat)
            return write_unsigned_varint(n + 1) + struct.pack(f">{n}{code}", *v)

        return encode_fixed
    element_encoder = _scalar_encoder(spec, element, False, version, f"{label}[]")

    def encode_items(v: Any) -> bytes:
        if v is None:
            if not nullable:
                raise _not_nullable(label)
            return b"\x00"
        return write_unsigned_varint(len(v) + 1) + b"".join(element_encoder(item) for item in v)

    return encode_items


def _encode_body(codec: _Codec, msg: Any) -> bytes:
    for name, default in codec.absent:
        if getattr(msg, name) != default:
            raise InputError(f"Attempted to write a non-default {name} at version {codec.version} of "
                             f"{codec.cls.__name__}")
    out: list[bytes] = []
    for step in codec.encode_steps:
        step(msg, out)
    tagged: list[bytes] = []
    for tag, name, default, encoder in codec.tagged_writers:
        value = getattr(msg, name)
        if value != default:
            data = encoder(value)
            tagged.append(write_unsigned_varint(tag))
            tagged.append(write_unsigned_varint(len(data)))
            tagged.append(data)
    out.append(write_unsigned_varint(len(tagged) // 3))
    out.extend(tagged)
    return b"".join(out)


def encode_message(msg: Message, version: int) -> bytes:
    """Encode a message body (no frame) at ``version``, mirroring the generated ``XData.write(Writable, cache,
    version)``: untagged fields in declaration order, then tagged fields whose value differs from the default,
    in ascending tag order. Raises :class:`InputError` for a value that does not fit its field."""
    lo, hi = type(msg).VALID_VERSIONS
    if not lo <= version <= hi:
        raise InputError(f"{type(msg).__name__} has versions {lo}-{hi}, not {version}")
    try:
        return _encode_body(_codec(type(msg), version), msg)
    except InputError:
        raise
    except (struct.error, TypeError, AttributeError, ValueError, OverflowError) as e:
        validate_message(msg, version)  # names the offending field when it can
        raise InputError(f"cannot encode {type(msg).__name__} v{version}: {e}") from e


# ------------------------------------------------------------------------------------------------------------
# The frame (MetadataRecordSerde)

_WARNED: set[tuple[int, int]] = set()
# Decoded records of tiny values, by value bytes. NoOpRecord (``01 14 00 00``) alone is >95 % of a real log;
# the cache is a pure function of the bytes (records are frozen), bounded and simply cleared when full.
_SMALL_VALUE_MAX: Final = 24
_SMALL_CACHE_MAX: Final = 4096
_SMALL_CACHE: dict[bytes, Record] = {}
#: The fast decoder of each typed record by ``apiKey << 7 | version`` (both one-byte varints), filled as records of
#: each type are first met.
_FAST_FRAMES: dict[int, _FastDecoder] = {}


def frame_header(api_key: int, version: int) -> bytes:
    """The frame prefix ``frameVersion(1) apiKey version`` (``AbstractApiMessageSerde.write``)."""
    return b"\x01" + write_unsigned_varint(api_key) + write_unsigned_varint(version)


def encode_record(record: Record) -> bytes:
    """A framed metadata record value, as ``MetadataRecordSerde.write`` produces. An :class:`OpaqueRecord`
    read from bytes is written back verbatim (its payload is the body after the frame)."""
    if isinstance(record, OpaqueRecord):
        if record.payload is None:
            raise InputError(f"{record.type_name} v{record.version} has no binary payload (it was read from JSON) "
                             "and no schema here, so it cannot be encoded")
        return frame_header(record.api_key, record.version) + record.payload
    return frame_header(record.API_KEY, record.version) + encode_message(record, record.version)


def decode_record(value: Buffer, *, use_cache: bool = True, fast: bool = True) -> Record:
    """Decode a framed metadata record value (``MetadataRecordSerde.read``).

    Frame version other than 1 → :class:`DecodeError` (0 was the KRaft preview in 2.8). An api key with no
    schema here, or a typed record at a version above its ``VALID_VERSIONS``, becomes an :class:`OpaqueRecord`
    with the body as payload (plus an :class:`UnknownRecordWarning`, once per type and version) — never
    dropped. Bytes left after a typed body → :class:`DecodeError`. Positions in errors are offsets into
    ``value``. ``use_cache=False`` bypasses the memo of tiny values (for measurements); ``fast=False`` decodes
    with the reference decoder only (the generated fast path gives the same record; the property tests compare
    the two)."""
    if not isinstance(value, bytes):
        value = bytes(value)
    if use_cache:
        cached = _SMALL_CACHE.get(value)
        if cached is not None:
            return cached
    end = len(value)
    if fast and end >= 3 and value[0] == DEFAULT_FRAME_VERSION and value[1] < 0x80 and value[2] < 0x80:
        # The frame of nearly every record: three one-byte varints, a typed record at a version we know.
        decoder = _FAST_FRAMES.get((value[1] << 7) | value[2])
        if decoder is not None:
            try:
                got = decoder(value, 3, end)
            except (UnicodeDecodeError, InputError):
                got = None
            if got is not None and got[1] == end:
                record: Record = got[0]
                if use_cache and end <= _SMALL_VALUE_MAX:
                    if len(_SMALL_CACHE) >= _SMALL_CACHE_MAX:
                        _SMALL_CACHE.clear()
                    _SMALL_CACHE[value] = record
                return record
    if end == 0:
        raise DecodeError("empty metadata record value", position=0)
    frame_version, pos = read_unsigned_varint(value, 0, end)
    if frame_version != DEFAULT_FRAME_VERSION:
        if frame_version == 0:
            raise DecodeError("Could not deserialize metadata record: frame version 0 was only used by the KRaft "
                              "preview in Kafka 2.8 and is not supported", position=0)
        raise DecodeError(f"Could not deserialize metadata record: unknown frame version {frame_version}",
                          position=0)
    api_key, pos = read_unsigned_varint(value, pos, end)
    if api_key > MAX_VERSION:
        raise DecodeError(f"metadata record apiKey {api_key} is larger than {MAX_VERSION}", position=1)
    version_pos = pos
    version, pos = read_unsigned_varint(value, pos, end)
    if version > MAX_VERSION:
        raise DecodeError(f"metadata record version {version} is larger than {MAX_VERSION}", position=version_pos)
    cls = TYPED_RECORDS.get(api_key)
    if cls is None or not cls.VALID_VERSIONS[0] <= version <= cls.VALID_VERSIONS[1]:
        record = _opaque(api_key, version, value[pos:], cls is None)
    else:
        codec = _codec(cls, version)
        if fast:
            if api_key < 0x80 and version < 0x80:
                _FAST_FRAMES.setdefault((api_key << 7) | version, _fast_decoder(cls, version))
            body, pos = _decode_body_fast(codec, value, pos, end)
        else:
            body, pos = _decode_body(codec, value, pos, end)
        if pos != end:
            raise DecodeError(f"Found {end - pos} byte(s) of garbage after {cls.TYPE_NAME} v{version}",
                              position=pos)
        record = body
    if use_cache and end <= _SMALL_VALUE_MAX:
        if len(_SMALL_CACHE) >= _SMALL_CACHE_MAX:
            _SMALL_CACHE.clear()
        _SMALL_CACHE[value] = record
    return record


def decode_records(values: Sequence[Buffer]) -> list[Record]:
    """``[decode_record(v) for v in values]`` in one loop: what the log readers call once per record batch.

    The common case of :func:`decode_record` — a memoised tiny value, or the three one-byte frame varints of a type
    and version whose generated decoder is known and decodes the whole value — is inlined here, so a batch of
    thousands of PartitionChangeRecords costs no Python call per record beyond its generated decoder. Every other
    value goes through :func:`decode_record` itself, so the records, warnings and errors are exactly its own (an
    error is raised as it raises it; the caller adds which record it was)."""
    out: list[Record] = []
    append = out.append
    small, small_max, frames = _SMALL_CACHE, _SMALL_VALUE_MAX, _FAST_FRAMES
    for value in values:
        if type(value) is bytes:
            end = len(value)
            if end <= small_max:
                cached = small.get(value)
                if cached is not None:
                    append(cached)
                    continue
            if end >= 3 and value[0] == DEFAULT_FRAME_VERSION and value[1] < 0x80 and value[2] < 0x80:
                decoder = frames.get((value[1] << 7) | value[2])
                if decoder is not None:
                    try:
                        got = decoder(value, 3, end)
                    except (UnicodeDecodeError, InputError):
                        got = None
                    if got is not None and got[1] == end:
                        if end <= small_max:
                            if len(small) >= _SMALL_CACHE_MAX:
                                small.clear()
                            small[value] = got[0]
                        append(got[0])
                        continue
        append(decode_record(value))
    return out


def _opaque(api_key: int, version: int, payload: bytes, unknown_type: bool) -> OpaqueRecord:
    name = type_name_of(api_key)
    if (api_key, version) not in _WARNED:
        _WARNED.add((api_key, version))
        why = "has no schema in this model" if unknown_type else "is newer than the versions this model knows"
        warnings.warn(f"metadata record {name} (apiKey {api_key}) v{version} {why}; kept opaque",
                      UnknownRecordWarning, stacklevel=3)
    return OpaqueRecord(api_key=api_key, version=version, type_name=name, payload=payload)


def record_type_key(record: Record) -> tuple[int, int]:
    """``(apiKey, version)`` of any record, typed or opaque."""
    if isinstance(record, OpaqueRecord):
        return record.api_key, record.version
    return record.API_KEY, record.version

