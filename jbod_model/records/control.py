"""Raft control records: the records of a control batch (batch attribute bit 5).

Mirrors ``clients/.../record/ControlRecordType.java``, ``ControlRecordUtils.java`` and the message specs
``LeaderChangeMessage``, ``SnapshotHeaderRecord``, ``SnapshotFooterRecord``, ``KRaftVersionRecord`` and
``VotersRecord`` (``clients/src/main/resources/common/message/``). A control record has a 4-byte key (int16
key version, int16 type) and a value that is the message body at version 0 with **no** frame: Kafka writes
them with ``MessageUtil.toByteBuffer(message, ControlRecordUtils.CURRENT_VERSION = 0)``.

Control types this model does not type (ABORT/COMMIT transaction markers, which KRaft never writes, and any
type newer than the model) are kept as :class:`OpaqueControlRecord`, so nothing read is dropped.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import ClassVar

from jbod_model.errors import DecodeError, InputError
from jbod_model.records.binary import decode_message, encode_message
from jbod_model.records.schema import Message, kfield
from jbod_model.uuid import ZERO_UUID, Uuid

#: ``ControlRecordType.CURRENT_CONTROL_RECORD_KEY_VERSION`` and ``ControlRecordUtils`` message version.
CONTROL_KEY_VERSION = 0
CONTROL_VALUE_VERSION = 0

_KEY = struct.Struct(">hh")


class ControlRecordType(IntEnum):
    """``ControlRecordType``: the int16 ``type`` in a control record key."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6

    @classmethod
    def from_value(cls, value: int) -> ControlRecordType | None:
        """The type of a wire value, or ``None`` for one Kafka calls ``UNKNOWN`` (mirrors
        ``ControlRecordType.fromTypeId``)."""
        try:
            return cls(value)
        except ValueError:
            return None


def control_type_name(control_type: int) -> str:
    """``LEADER_CHANGE`` etc.; ``UNKNOWN`` for a type Kafka does not know (dump-log prints ``UNKNOWN(n)``)."""
    known = ControlRecordType.from_value(control_type)
    return known.name if known is not None else "UNKNOWN"


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlMessage(Message):
    """Base of the typed control messages. ``version`` is the message's own ``Version`` data field (always 0
    as written by Kafka), not a schema version."""

    CONTROL_TYPE: ClassVar[ControlRecordType]
    #: What ``kafka-dump-log`` prints before the JSON of this message (``SnapshotHeader {json}``).
    DUMP_LABEL: ClassVar[str] = ""


# ------------------------------------------------------------------------------------------------------------
# LEADER_CHANGE (2)


@dataclass(frozen=True, slots=True, kw_only=True)
class Voter(Message):
    """``LeaderChangeMessage.Voter``. (Version 1 adds VoterDirectoryId, but ControlRecordUtils writes version
    0 only, so it is not modelled.)"""

    voter_id: int = kfield("voterId", "int32", default=0)


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderChangeMessage(ControlMessage):
    """LeaderChangeMessage v0: written in a control batch at the start of every leader epoch."""

    CONTROL_TYPE: ClassVar[ControlRecordType] = ControlRecordType.LEADER_CHANGE
    DUMP_LABEL: ClassVar[str] = "LeaderChange"

    version: int = kfield("version", "int16", default=0)
    leader_id: int = kfield("leaderId", "int32", default=0)
    voters: tuple[Voter, ...] = kfield("voters", "[]struct", default=(), struct=Voter)
    granting_voters: tuple[Voter, ...] = kfield("grantingVoters", "[]struct", default=(), struct=Voter)


# ------------------------------------------------------------------------------------------------------------
# SNAPSHOT_HEADER (3) / SNAPSHOT_FOOTER (4)


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotHeaderRecord(ControlMessage):
    """SnapshotHeaderRecord v0: the first record of every snapshot (``RecordsSnapshotWriter``)."""

    CONTROL_TYPE: ClassVar[ControlRecordType] = ControlRecordType.SNAPSHOT_HEADER
    DUMP_LABEL: ClassVar[str] = "SnapshotHeader"

    version: int = kfield("version", "int16", default=0)
    last_contained_log_timestamp: int = kfield("lastContainedLogTimestamp", "int64", default=0)


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotFooterRecord(ControlMessage):
    """SnapshotFooterRecord v0: the last record of every snapshot."""

    CONTROL_TYPE: ClassVar[ControlRecordType] = ControlRecordType.SNAPSHOT_FOOTER
    DUMP_LABEL: ClassVar[str] = "SnapshotFooter"

    version: int = kfield("version", "int16", default=0)


# ------------------------------------------------------------------------------------------------------------
# KRAFT_VERSION (5) / KRAFT_VOTERS (6): KIP-853 dynamic quorums (written with kraft.version >= 1)


@dataclass(frozen=True, slots=True, kw_only=True)
class KRaftVersionRecord(ControlMessage):
    """KRaftVersionRecord v0."""

    CONTROL_TYPE: ClassVar[ControlRecordType] = ControlRecordType.KRAFT_VERSION
    DUMP_LABEL: ClassVar[str] = "KRaftVersion"

    version: int = kfield("version", "int16", default=0)
    kraft_version: int = kfield("kRaftVersion", "int16", default=0)


@dataclass(frozen=True, slots=True, kw_only=True)
class VoterEndpoint(Message):
    """``VotersRecord.Voter.Endpoints[]``."""

    name: str = kfield("name", "string", default="")
    host: str = kfield("host", "string", default="")
    port: int = kfield("port", "uint16", default=0)


@dataclass(frozen=True, slots=True, kw_only=True)
class KRaftVersionFeature(Message):
    """``VotersRecord.Voter.KRaftVersionFeature``: the kraft.version range a voter supports."""

    min_supported_version: int = kfield("minSupportedVersion", "int16", default=0)
    max_supported_version: int = kfield("maxSupportedVersion", "int16", default=0)


@dataclass(frozen=True, slots=True, kw_only=True)
class VotersRecordVoter(Message):
    """``VotersRecord.Voters[]``."""

    voter_id: int = kfield("voterId", "int32", default=0)
    voter_directory_id: Uuid = kfield("voterDirectoryId", "uuid", default=ZERO_UUID)
    endpoints: tuple[VoterEndpoint, ...] = kfield("endpoints", "[]struct", default=(), struct=VoterEndpoint)
    kraft_version_feature: KRaftVersionFeature = kfield("kRaftVersionFeature", "struct",
                                                        default=KRaftVersionFeature(), struct=KRaftVersionFeature)


@dataclass(frozen=True, slots=True, kw_only=True)
class VotersRecord(ControlMessage):
    """VotersRecord v0: the voter set (KIP-853)."""

    CONTROL_TYPE: ClassVar[ControlRecordType] = ControlRecordType.KRAFT_VOTERS
    DUMP_LABEL: ClassVar[str] = "KRaftVoters"

    version: int = kfield("version", "int16", default=0)
    voters: tuple[VotersRecordVoter, ...] = kfield("voters", "[]struct", default=(), struct=VotersRecordVoter)


# ------------------------------------------------------------------------------------------------------------
# Opaque control records


@dataclass(frozen=True, slots=True)
class OpaqueControlRecord:
    """A control record this model does not type: ABORT/COMMIT (``EndTxnMarker``, never written by KRaft), a
    type newer than the model, or a key version above 0. ``key`` and ``payload`` are the record's raw key and
    value."""

    control_type: int
    key: bytes
    payload: bytes

    @property
    def key_version(self) -> int:
        return int(_KEY.unpack_from(self.key)[0])


#: The typed control message classes, by control type.
TYPED_CONTROL_RECORDS: dict[ControlRecordType, type[ControlMessage]] = {
    cls.CONTROL_TYPE: cls
    for cls in (LeaderChangeMessage, SnapshotHeaderRecord, SnapshotFooterRecord, KRaftVersionRecord, VotersRecord)
}

#: Any control record the model can carry.
ControlRecord = (
    LeaderChangeMessage | SnapshotHeaderRecord | SnapshotFooterRecord | KRaftVersionRecord | VotersRecord
    | OpaqueControlRecord
)


def control_type_of(record: ControlRecord) -> int:
    """The wire control type of a control record."""
    if isinstance(record, OpaqueControlRecord):
        return record.control_type
    return int(record.CONTROL_TYPE)


@dataclass(frozen=True, slots=True)
class ControlEntry:
    """A control record at its place in a log: the counterpart of :class:`~jbod_model.records.entry.LogEntry`
    for control batches (same provenance fields)."""

    offset: int
    record: ControlRecord
    batch_base_offset: int | None = None
    leader_epoch: int | None = None
    timestamp: int | None = None
    source: str | None = None

    @property
    def control_type(self) -> int:
        return control_type_of(self.record)


# ------------------------------------------------------------------------------------------------------------
# Codec (ControlRecordType.parse / ControlRecordUtils)


def encode_control_key(control_type: int) -> bytes:
    """The 4-byte key of a control record (``ControlRecordType.recordKey``): key version 0, then the type."""
    if not -(1 << 15) <= control_type < 1 << 15:
        raise InputError(f"control type {control_type} does not fit an int16")
    return _KEY.pack(CONTROL_KEY_VERSION, control_type)


def encode_control_record(record: ControlRecord) -> tuple[bytes, bytes]:
    """``(key, value)`` of a control record as ``MemoryRecordsBuilder.appendControlRecord`` writes them."""
    if isinstance(record, OpaqueControlRecord):
        return record.key, record.payload
    return encode_control_key(record.CONTROL_TYPE), encode_message(record, CONTROL_VALUE_VERSION)


def decode_control_record(key: bytes | None, value: bytes | None) -> ControlRecord:
    """Decode one control record from its key and value (``ControlRecordType.parse`` +
    ``ControlRecordUtils.deserialize*``). Positions in a :class:`DecodeError` are offsets into the value."""
    if key is None or len(key) < 4:
        raise DecodeError(f"Invalid control record key: it must have at least 4 bytes, but found "
                          f"{0 if key is None else len(key)}")
    key_version, control_type = _KEY.unpack_from(key)
    if key_version < 0:
        raise DecodeError(f"Invalid version found for control record: {key_version}. May indicate data "
                          "corruption")
    if value is None:
        raise DecodeError(f"control record {control_type_name(control_type)}({control_type}) has a null value")
    known = ControlRecordType.from_value(control_type)
    cls = TYPED_CONTROL_RECORDS.get(known) if known is not None else None
    # A key longer than 4 bytes or a key version above 0 is a format we have never seen written; keep it raw
    # rather than guess how a newer Kafka laid it out.
    if cls is None or key_version != CONTROL_KEY_VERSION or len(key) != 4:
        return OpaqueControlRecord(control_type=control_type, key=bytes(key), payload=bytes(value))
    message = decode_message(cls, value, CONTROL_VALUE_VERSION)
    assert isinstance(message, (LeaderChangeMessage, SnapshotHeaderRecord, SnapshotFooterRecord,
                                KRaftVersionRecord, VotersRecord))
    return message
