"""Kafka message schemas as data: one :class:`FieldSpec` per field, attached to frozen dataclasses.

Kafka generates its message classes from JSON specs (``metadata/src/main/resources/common/metadata/*.json``,
``clients/src/main/resources/common/message/*.json``). Here each message is a frozen dataclass whose fields carry
the spec in their metadata (``kfield``): the Kafka type, the versions in which the field exists, its tag if it is a
tagged field, its nullable versions and its default. The JSON codec (``json_codec``) and the binary codec
(``binary``) walk these specs, so the schema is written down exactly once.

Types are Kafka's spec type names: ``int8 int16 int32 int64 uint16 uint32 bool float64 string bytes uuid``,
arrays ``[]T`` of those, and ``[]struct`` / ``struct`` with ``FieldSpec.struct`` naming the element dataclass.
"""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from jbod_model.errors import InputError
from jbod_model.uuid import Uuid

MAX_VERSION = 0x7FFF

SCALAR_TYPES = frozenset(
    {"int8", "int16", "int32", "int64", "uint16", "uint32", "bool", "float64", "string", "bytes", "uuid"}
)
INT_RANGES: dict[str, tuple[int, int]] = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
    "uint16": (0, (1 << 16) - 1),
    "uint32": (0, (1 << 32) - 1),
}


def _parse_versions(spec: str) -> tuple[int, int]:
    """Kafka's version-range syntax: ``"0+"``, ``"1+"``, ``"0-2"``, ``"3"``."""
    if spec.endswith("+"):
        return int(spec[:-1]), MAX_VERSION
    if "-" in spec:
        lo, hi = spec.split("-")
        return int(lo), int(hi)
    return int(spec), int(spec)


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """One field of a Kafka message spec.

    ``default`` is the Python value of the spec default (``()`` for an empty array, ``None`` for ``"null"``); a
    tagged field is written (in binary and in JSON) only when its value differs from it.
    """

    json_name: str
    type: str
    min_version: int = 0
    max_version: int = MAX_VERSION
    tag: int | None = None
    nullable_min: int | None = None
    default: Any = None
    struct: builtins.type[Message] | None = None
    aliases: tuple[str, ...] = ()
    name: str = ""  # the Python attribute name, filled in by fields_of()

    def present_in(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def nullable_in(self, version: int) -> bool:
        return self.nullable_min is not None and version >= self.nullable_min

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        return self.type[2:]


def kfield(json_name: str, type: str, *, versions: str = "0+", tag: int | None = None,
           nullable: str | None = None, default: Any = None, struct: type[Message] | None = None,
           aliases: tuple[str, ...] = ()) -> Any:
    """Declare a dataclass field mirroring one Kafka spec field (see module docstring)."""
    lo, hi = _parse_versions(versions)
    nullable_min = _parse_versions(nullable)[0] if nullable is not None else None
    spec = FieldSpec(json_name=json_name, type=type, min_version=lo, max_version=hi, tag=tag,
                     nullable_min=nullable_min, default=default, struct=struct, aliases=aliases)
    return dataclasses.field(default=default, metadata={"kafka": spec})


def default_value(spec: FieldSpec) -> Any:
    return spec.default


_FIELD_CACHE: dict[type, tuple[FieldSpec, ...]] = {}


def fields_of(cls: type[Message]) -> tuple[FieldSpec, ...]:
    """The specs of a message class in declaration order (= binary order of untagged fields = JSON order)."""
    cached = _FIELD_CACHE.get(cls)
    if cached is None:
        specs = []
        for f in dataclasses.fields(cls):
            spec = f.metadata.get("kafka")
            if spec is not None:
                specs.append(dataclasses.replace(spec, name=f.name))
        cached = tuple(specs)
        _FIELD_CACHE[cls] = cached
    return cached


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """Base of every schema-described message (metadata records, control records, requests, responses and their
    nested structs). Subclasses are frozen dataclasses whose fields are declared with :func:`kfield`."""

    #: Versions this message type has (``validVersions``).
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, 0)

    def iter_fields(self) -> Iterator[tuple[FieldSpec, Any]]:
        for spec in fields_of(type(self)):
            yield spec, getattr(self, spec.name)


@dataclass(frozen=True, slots=True, kw_only=True)
class VersionedMessage(Message):
    """A top-level message that carries its schema version: a metadata record, or an RPC request or response.
    Its ``TYPE_NAME`` is the name Kafka prints (``PARTITION_RECORD``) or ours for RPCs (``<API>_REQUEST``)."""

    API_KEY: ClassVar[int] = -1
    TYPE_NAME: ClassVar[str] = ""

    version: int = dataclasses.field(default=0)

    def __post_init__(self) -> None:
        lo, hi = self.VALID_VERSIONS
        if not lo <= self.version <= hi:
            raise InputError(f"{self.TYPE_NAME} has versions {lo}-{hi}, not {self.version}")


def check_value(spec: FieldSpec, value: Any, version: int, where: str) -> None:
    """Validate one field value against its spec at ``version``; raise InputError naming the field."""
    label = f"{where}.{spec.json_name}"
    if value is None:
        nullable_kind = spec.type in ("string", "bytes", "struct") or spec.is_array
        if nullable_kind and (spec.nullable_in(version) or not spec.present_in(version) or spec.default is None):
            return
        raise InputError(f"{label} is not nullable in version {version}")
    if spec.is_array:
        if not isinstance(value, tuple):
            raise InputError(f"{label} must be a tuple, got {type(value).__name__}")
        for i, item in enumerate(value):
            _check_scalar(spec.element_type, spec, item, version, f"{label}[{i}]")
    else:
        _check_scalar(spec.type, spec, value, version, label)


def _check_scalar(type_name: str, spec: FieldSpec, value: Any, version: int, label: str) -> None:
    if type_name in INT_RANGES:
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputError(f"{label} must be an integer, got {value!r}")
        lo, hi = INT_RANGES[type_name]
        if not lo <= value <= hi:
            raise InputError(f"{label}={value} is out of range for {type_name}")
    elif type_name == "bool":
        if not isinstance(value, bool):
            raise InputError(f"{label} must be a boolean, got {value!r}")
    elif type_name == "string":
        if not isinstance(value, str):
            raise InputError(f"{label} must be a string, got {value!r}")
    elif type_name == "bytes":
        if not isinstance(value, bytes):
            raise InputError(f"{label} must be bytes, got {type(value).__name__}")
    elif type_name == "uuid":
        if not isinstance(value, Uuid):
            raise InputError(f"{label} must be a Uuid, got {value!r}")
    elif type_name == "float64":
        if not isinstance(value, float):
            raise InputError(f"{label} must be a float, got {value!r}")
    elif type_name == "struct":
        if spec.struct is None or not isinstance(value, spec.struct):
            raise InputError(f"{label} must be a {spec.struct.__name__ if spec.struct else 'struct'}")
        validate_message(value, version)
    else:  # pragma: no cover - a schema declaration error
        raise AssertionError(f"unknown Kafka type {type_name} in {label}")


def validate_message(message: Message, version: int) -> None:
    """Check every field of ``message`` at ``version``: types, ranges, nullability, and that fields which do not
    exist at that version still hold their defaults (so a v0 PartitionRecord cannot silently carry directories)."""
    where = type(message).__name__
    for spec, value in message.iter_fields():
        if not spec.present_in(version):
            if value != spec.default:
                raise InputError(f"{where}.{spec.json_name} does not exist in version {version} "
                                 f"(it exists in {spec.min_version}+) but holds {value!r}")
            continue
        check_value(spec, value, version, where)
