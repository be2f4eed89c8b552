"""Read record-batch v2 files: ``.log`` segments, ``.checkpoint`` snapshots and ``bootstrap.checkpoint``.

Mirrors, on the read side:

* ``FileLogInputStream`` / ``FileRecords.batches`` — walk a file batch by batch: 12 bytes give baseOffset and
  batchLength, a batch shorter than ``RECORD_BATCH_OVERHEAD`` is corrupt, one running past the end of the file
  is a torn tail (``kafka-dump-log`` prints "Found N invalid bytes at the end of <file>");
* ``DefaultRecordBatch`` — the 61-byte header, its attributes and ``ensureValid()`` (magic 2, CRC-32C over
  ``[21, 12 + batchLength)``);
* ``DefaultRecord`` + ``RecordsIterator.readRecord`` (raft) — the records inside a batch, with KRaft's
  stricter rules: timestampDelta must be 0, a data record has a null key and a framed metadata value, a
  control record a 4-byte key, and no headers.

Files are streamed through a bounded window (``chunk_size`` bytes, or one batch if larger), so memory does not
grow with the file; no length read from the file is trusted before it is checked against the bytes that remain
and ``max_batch_bytes``. Under ``policy="fail"`` the first bad byte raises :class:`DecodeError` (file and byte
position); under ``policy="skip"`` the bad batch or region is skipped, every good record is still returned,
and what was skipped is recorded in a :class:`ReadReport`.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import IntEnum
from itertools import repeat
from pathlib import Path
from typing import BinaryIO, Final, Literal

import crc32c

from jbod_model.errors import DecodeError
from jbod_model.records.binary import decode_record, decode_records, read_varint, read_varlong
from jbod_model.records.control import ControlEntry, ControlRecord, decode_control_record
from jbod_model.records.entry import LogEntry, new_log_entry
from jbod_model.records.metadata import Record

#: What to do with bytes that cannot be decoded: raise, or skip them and record it in a :class:`ReadReport`.
ReadPolicy = Literal["fail", "skip"]

#: ``DefaultRecordBatch.RECORD_BATCH_OVERHEAD`` and ``Records.LOG_OVERHEAD`` (baseOffset + batchLength).
RECORD_BATCH_OVERHEAD: Final = 61
LOG_OVERHEAD: Final = 12
MAGIC_V2: Final = 2
#: ``KafkaRaftClient.MAX_BATCH_SIZE_BYTES`` is 8 MiB; we accept up to 8× that before calling a length hostile.
DEFAULT_MAX_BATCH_BYTES: Final = 64 * 1024 * 1024
DEFAULT_CHUNK_SIZE: Final = 4 * 1024 * 1024

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta, baseTimestamp,
# maxTimestamp, producerId, producerEpoch, baseSequence, recordsCount
_HEADER: Final = struct.Struct(">qiibIhiqqqhii")
_BATCH_LENGTH: Final = struct.Struct(">i")
_COMPRESSION_MASK: Final = 0x07
_TIMESTAMP_TYPE_MASK: Final = 0x08
_TRANSACTIONAL_MASK: Final = 0x10
_CONTROL_MASK: Final = 0x20
_DELETE_HORIZON_MASK: Final = 0x40

# Records sections this small are memoised by their bytes: a NoOp batch's section (``14 00 00 00 01 08 01 14
# 00 00 00``) repeats for >95 % of a real log, and decoding is a pure function of those bytes.
_SECTION_CACHE_MAX_BYTES: Final = 64
_SECTION_CACHE_MAX_ENTRIES: Final = 4096
#: A data batch's records as parallel tuples: offsetDeltas, decoded records, value bytes.
_DataColumns = tuple[tuple[int, ...], tuple[Record, ...], tuple[bytes, ...]]
_SECTION_CACHE: dict[bytes, _DataColumns] = {}


class CompressionType(IntEnum):
    """``CompressionType`` ids (attributes bits 0–2). KRaft always writes NONE."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def from_value(cls, value: int) -> CompressionType | None:
        try:
            return cls(value)
        except ValueError:
            return None


class TimestampType(IntEnum):
    """``TimestampType`` (attributes bit 3)."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1

    @property
    def display_name(self) -> str:
        """``CreateTime`` / ``LogAppendTime`` as dump-log prints them."""
        return "CreateTime" if self is TimestampType.CREATE_TIME else "LogAppendTime"


@dataclass(frozen=True, slots=True)
class RecordBatch:
    """The header of one v2 record batch (``DefaultRecordBatch``), where it sits in its file, and whether its
    CRC-32C checks out."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int
    position: int
    crc_valid: bool

    @property
    def size(self) -> int:
        """Bytes of the whole batch (``sizeInBytes`` = 12 + batchLength)."""
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def compression(self) -> int:
        """The codec id; compare with :class:`CompressionType` (an unknown id is kept as the raw int)."""
        return self.attributes & _COMPRESSION_MASK

    @property
    def compression_name(self) -> str:
        """``none``/``gzip``/… as dump-log's ``compresscodec`` prints it."""
        known = CompressionType.from_value(self.compression)
        return known.name.lower() if known is not None else f"unknown({self.compression})"

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType.LOG_APPEND_TIME if self.attributes & _TIMESTAMP_TYPE_MASK else TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_MASK)

    @property
    def has_delete_horizon_ms(self) -> bool:
        return bool(self.attributes & _DELETE_HORIZON_MASK)

    @property
    def last_sequence(self) -> int:
        """``DefaultRecordBatch.lastSequence``: -1 when there is no base sequence (always, in KRaft)."""
        if self.base_sequence == -1:
            return -1
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


@dataclass(frozen=True, slots=True)
class LogBatch:
    """One batch with its decoded records. A data batch fills ``entries``, a control batch ``controls``;
    ``values`` holds each record's raw value bytes in order (for byte-level checks and dump sizes)."""

    header: RecordBatch
    source: str
    entries: tuple[LogEntry, ...] = ()
    controls: tuple[ControlEntry, ...] = ()
    values: tuple[bytes, ...] = ()

    @property
    def is_control(self) -> bool:
        return self.header.is_control


@dataclass(frozen=True, slots=True)
class SkippedRegion:
    """Bytes a reader skipped under ``policy="skip"``: ``length`` bytes of ``source`` from ``position``."""

    source: str
    position: int
    length: int
    reason: str
    #: The baseOffset of the skipped batch when its header could be read and trusted.
    base_offset: int | None = None
    #: The line (1-based) of a skipped line of text (canonical JSONL).
    line: int | None = None

    def __str__(self) -> str:
        at = f"line {self.line} (byte {self.position})" if self.line is not None else f"byte {self.position}"
        return f"{self.source}: skipped {self.length} byte(s) at {at}: {self.reason}"


@dataclass(frozen=True, slots=True)
class MissingOffsets:
    """Log offsets ``[start, end)`` that no file (or copy) provided, found by a reader that checks contiguity."""

    start: int
    end: int
    reason: str

    def __str__(self) -> str:
        return f"offsets {self.start}..{self.end - 1} missing: {self.reason}"


@dataclass(slots=True)
class ReadReport:
    """What the readers read and what they skipped. Deliberately mutable: it is filled while entries stream
    out, so a caller passes one in and inspects it once iteration is done."""

    skipped: list[SkippedRegion] = field(default_factory=list)
    missing: list[MissingOffsets] = field(default_factory=list)
    files: int = 0
    batches: int = 0
    records: int = 0
    control_records: int = 0
    bytes_read: int = 0

    @property
    def clean(self) -> bool:
        """True when nothing was skipped and no offset was missing."""
        return not self.skipped and not self.missing

    @property
    def skipped_bytes(self) -> int:
        return sum(s.length for s in self.skipped)

    def summary(self) -> str:
        text = (f"{self.files} file(s), {self.batches} batch(es), {self.records} record(s), "
                f"{self.control_records} control record(s)")
        if self.skipped:
            text += f"; skipped {len(self.skipped)} region(s), {self.skipped_bytes} byte(s)"
        if self.missing:
            text += f"; {sum(m.end - m.start for m in self.missing)} offset(s) missing"
        return text


# ------------------------------------------------------------------------------------------------------------
# File walking (FileLogInputStream)


@dataclass(slots=True)
class _Window:
    """A bounded, re-positionable view of a file: ``buf`` holds the bytes from file position ``start``."""

    file: BinaryIO
    size: int
    chunk: int
    buf: bytes = b""
    start: int = 0

    def ensure(self, pos: int, n: int) -> None:
        """Make ``buf`` cover ``[pos, pos + n)``; the caller has checked that the file holds those bytes."""
        rel = pos - self.start
        if rel >= 0 and rel + n <= len(self.buf):
            return
        self.file.seek(pos)
        self.buf = self.file.read(max(n, self.chunk))
        self.start = pos
        if len(self.buf) < n:
            raise DecodeError(f"the file shrank while being read: expected {n} byte(s)", source=self.file.name,
                              position=pos)


class _Problem(Exception):
    """A batch-level fault inside the walker, before the policy decides what to do about it."""

    def __init__(self, reason: str, *, trusted_end: int | None = None, base_offset: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.trusted_end = trusted_end
        self.base_offset = base_offset


_RawBatch = tuple[tuple[int, ...], int, bool, bytes, int, int]


def _walk(path: Path, source: str, policy: ReadPolicy, report: ReadReport, *, verify_crc: bool,
          max_batch_bytes: int, chunk_size: int) -> Iterator[_RawBatch]:
    """Yield ``(header, file position, crc ok, buf, start, end)`` for every batch whose framing is sound:
    ``buf[start:end]`` is the whole batch. Faults are raised or skipped (with resync) per ``policy``.

    This loop runs once per batch of multi-million-batch logs, so the window's buffer is held in locals and
    the file is touched only when the buffer runs out."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        report.files += 1
        win = _Window(f, size, chunk_size)
        buf, start_of_buf = win.buf, win.start
        view = memoryview(buf)
        unpack_header = _HEADER.unpack_from
        unpack_length = _BATCH_LENGTH.unpack_from
        crc32 = crc32c.crc32c
        pos = batches = bytes_read = 0
        try:
            while pos < size:
                rel = pos - start_of_buf
                try:
                    remaining = size - pos
                    if rel < 0 or rel + LOG_OVERHEAD > len(buf):
                        if remaining < LOG_OVERHEAD:
                            raise _Problem(f"Found {remaining} invalid bytes at the end of {path.name}: too few "
                                           "for a batch header (torn tail)")
                        win.ensure(pos, LOG_OVERHEAD)
                        buf, start_of_buf = win.buf, win.start
                        view = memoryview(buf)
                        rel = pos - start_of_buf
                    batch_length = unpack_length(buf, rel + 8)[0]
                    total = LOG_OVERHEAD + batch_length
                    if total < RECORD_BATCH_OVERHEAD:
                        raise _Problem(f"Record batch size {total} is smaller than the minimum allowed overhead "
                                       f"{RECORD_BATCH_OVERHEAD} (batchLength {batch_length})")
                    if total > remaining:
                        raise _Problem(f"Found {remaining} invalid bytes at the end of {path.name}: the batch "
                                       f"claims {total} bytes (torn tail)")
                    if total > max_batch_bytes:
                        raise _Problem(f"batch claims {total} bytes, more than the {max_batch_bytes}-byte limit "
                                       "(a corrupt length)")
                    if rel + total > len(buf):
                        win.ensure(pos, total)
                        buf, start_of_buf = win.buf, win.start
                        view = memoryview(buf)
                        rel = pos - start_of_buf
                    header = unpack_header(buf, rel)
                    if header[3] != MAGIC_V2:
                        raise _Problem(f"unsupported record batch magic {header[3]} (KRaft writes only magic 2)")
                    computed = crc32(view[rel + 21:rel + total])
                    crc_ok = computed == header[4]
                    if not crc_ok and verify_crc:
                        raise _Problem(f"Record batch is corrupt (stored crc = {header[4]}, computed crc = "
                                       f"{computed})", trusted_end=pos + total, base_offset=header[0])
                except _Problem as problem:
                    if policy == "fail":
                        raise DecodeError(problem.reason, source=source, position=pos) from None
                    nxt = _next_sync(win, pos, problem.trusted_end, max_batch_bytes)
                    report.skipped.append(SkippedRegion(source, pos, (size if nxt is None else nxt) - pos,
                                                        problem.reason, problem.base_offset))
                    if nxt is None:
                        break
                    buf, start_of_buf = win.buf, win.start
                    view = memoryview(buf)
                    pos = nxt
                    continue
                batches += 1
                bytes_read += total
                yield header, pos, crc_ok, buf, rel, rel + total
                pos += total
        finally:
            report.batches += batches
            report.bytes_read += bytes_read


def _plausible_batch_at(win: _Window, pos: int, max_batch_bytes: int) -> bool:
    """Whether a CRC-valid v2 batch starts at ``pos`` (used to resynchronise after corrupt bytes)."""
    if win.size - pos < RECORD_BATCH_OVERHEAD:
        return False
    win.ensure(pos, RECORD_BATCH_OVERHEAD)
    rel = pos - win.start
    header = _HEADER.unpack_from(win.buf, rel)
    total = LOG_OVERHEAD + header[1]
    # Cheap structural checks first, so garbage that happens to contain 0x02 is rejected without a CRC pass.
    if (header[3] != MAGIC_V2 or total < RECORD_BATCH_OVERHEAD or total > win.size - pos
            or total > max_batch_bytes or not 0 <= header[5] < 0x80 or header[12] < 0 or header[6] < -1):
        return False
    win.ensure(pos, total)
    rel = pos - win.start
    return bool(crc32c.crc32c(memoryview(win.buf)[rel + 21:rel + total]) == header[4])


def _next_sync(win: _Window, bad: int, trusted_end: int | None, max_batch_bytes: int) -> int | None:
    """Where reading resumes after a fault at ``bad``: the end of the bad batch if a good batch (or the end of
    the file) follows it, else the first later position where a CRC-valid batch starts; ``None`` if there is
    none."""
    if trusted_end is not None and (trusted_end == win.size
                                    or _plausible_batch_at(win, trusted_end, max_batch_bytes)):
        return trusted_end
    pos = bad + 1
    while pos + RECORD_BATCH_OVERHEAD <= win.size:
        # Jump from one candidate magic byte (0x02 at +16) to the next instead of testing every position.
        win.ensure(pos, min(win.chunk, win.size - pos))
        rel = pos - win.start
        hit = win.buf.find(b"\x02", rel + 16)
        if hit < 0:
            pos = win.start + len(win.buf) - 16
            continue
        candidate = win.start + hit - 16
        if _plausible_batch_at(win, candidate, max_batch_bytes):
            return candidate
        pos = candidate + 1
    return None


# ------------------------------------------------------------------------------------------------------------
# Records inside a batch (DefaultRecord / RecordsIterator.readRecord)


def _records_region(header: tuple[int, ...], buf: bytes, start: int, end: int,
                    max_batch_bytes: int) -> tuple[bytes, int, int]:
    """The bytes holding the batch's records: in place, or decompressed for a (gzip) compressed batch."""
    codec = header[5] & _COMPRESSION_MASK
    if codec == CompressionType.NONE:
        return buf, start + RECORD_BATCH_OVERHEAD, end
    if codec != CompressionType.GZIP:
        known = CompressionType.from_value(codec)
        name = known.name.lower() if known is not None else f"unknown codec id {codec}"
        raise DecodeError(f"compressed batch ({name}) is not supported: KRaft never compresses metadata batches "
                          "and only gzip can be decompressed with the standard library", position=start)
    d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)  # gzip container, as Kafka's GZIPOutputStream writes
    try:
        data = d.decompress(buf[start + RECORD_BATCH_OVERHEAD:end], max_batch_bytes)
    except zlib.error as e:
        raise DecodeError(f"gzip batch does not decompress: {e}", position=start) from e
    if d.unconsumed_tail:
        raise DecodeError(f"gzip batch decompresses to more than {max_batch_bytes} bytes", position=start)
    return data, 0, len(data)


_Parsed = tuple[list[int], list[bytes | None], list[bytes], list[int]]


def _parse_records(buf: bytes, pos: int, end: int, count: int, is_control: bool) -> _Parsed:
    """The records' offsetDeltas, keys, values and value positions, as four parallel lists (what the batch
    loops consume whole); positions in errors index ``buf``."""
    if count < 0:
        raise DecodeError(f"negative record count {count}", position=pos)
    if count > end - pos:  # every record takes at least one byte; refuse before looping on a hostile count
        raise DecodeError(f"batch declares {count} records in only {end - pos} bytes", position=pos)
    deltas: list[int] = []
    keys: list[bytes | None] = []
    values: list[bytes] = []
    positions: list[int] = []
    for i in range(count):
        start = pos
        if pos >= end:
            raise DecodeError(f"batch declares {count} records but its data ends after {i}", position=pos)
        # Every varint of a record is inlined for its one- and two-byte forms (zigzag values up to ±8191), which
        # cover lengths, offset deltas and sizes of metadata records; longer ones take read_varint.
        b = buf[pos]
        if b < 0x80:
            length = (b >> 1) ^ -(b & 1)
            pos += 1
        elif pos + 1 < end and buf[pos + 1] < 0x80:
            u = (b & 0x7F) | (buf[pos + 1] << 7)
            length = (u >> 1) ^ -(u & 1)
            pos += 2
        else:
            length, pos = read_varint(buf, pos, end)
        if length <= 0 or length > end - pos:
            raise DecodeError(f"Invalid record size {length}: {end - pos} byte(s) remain in the batch",
                              position=start)
        rec_end = pos + length
        pos += 1  # attributes (int8): unused by DefaultRecord
        if pos < rec_end and buf[pos] == 0:
            pos += 1
        else:
            ts_delta, pos = read_varlong(buf, pos, rec_end)
            # RecordsIterator.readRecord: KRaft records carry the batch timestamp, so any delta is corruption.
            raise DecodeError(f"Got timestamp delta of {ts_delta}, but this is invalid because it is not 0 as "
                              "expected", position=start)
        if pos < rec_end and buf[pos] < 0x80:
            b = buf[pos]
            offset_delta = (b >> 1) ^ -(b & 1)
            pos += 1
        elif pos + 1 < rec_end and buf[pos + 1] < 0x80:
            u = (buf[pos] & 0x7F) | (buf[pos + 1] << 7)
            offset_delta = (u >> 1) ^ -(u & 1)
            pos += 2
        else:
            offset_delta, pos = read_varint(buf, pos, rec_end)
        if pos < rec_end and buf[pos] == 1:  # -1: a null key, as every metadata record has
            key_length = -1
            pos += 1
        else:
            key_length, pos = read_varint(buf, pos, rec_end)
        key: bytes | None
        if key_length < 0:
            key = None
        elif key_length > rec_end - pos:
            raise DecodeError(f"key size {key_length} exceeds the record", position=start)
        else:
            key = buf[pos:pos + key_length]
            pos += key_length
        if is_control:
            if key is None:
                raise DecodeError("control record has a null key", position=start)
        elif key is not None:
            raise DecodeError(f"Got key size of {key_length}, but this is invalid because it is not -1 as "
                              "expected", position=start)
        if pos < rec_end and buf[pos] < 0x80:
            b = buf[pos]
            value_length = (b >> 1) ^ -(b & 1)
            pos += 1
        elif pos + 1 < rec_end and buf[pos + 1] < 0x80:
            u = (buf[pos] & 0x7F) | (buf[pos + 1] << 7)
            value_length = (u >> 1) ^ -(u & 1)
            pos += 2
        else:
            value_length, pos = read_varint(buf, pos, rec_end)
        if value_length <= 0:
            raise DecodeError(f"record has a {'null' if value_length < 0 else 'empty'} value; metadata and "
                              "control records always have one", position=start)
        if value_length > rec_end - pos:
            raise DecodeError(f"value size {value_length} exceeds the record", position=start)
        value_pos = pos
        value = buf[pos:pos + value_length]
        pos += value_length
        if pos < rec_end and buf[pos] == 0:
            headers = 0
            pos += 1
        else:
            headers, pos = read_varint(buf, pos, rec_end)
        if headers != 0:
            raise DecodeError(f"Got numHeaders of {headers}, but this is invalid because it is not 0 as expected",
                              position=start)
        if pos != rec_end:
            raise DecodeError(f"record has {rec_end - pos} byte(s) after its headers", position=start)
        deltas.append(offset_delta)
        keys.append(key)
        values.append(value)
        positions.append(value_pos)
    if pos != end:
        raise DecodeError(f"Incorrect declared batch size: {end - pos} byte(s) remain after {count} records",
                          position=pos)
    return deltas, keys, values, positions


def _decode_data(header: tuple[int, ...], buf: bytes, start: int, end: int, max_batch_bytes: int) -> _DataColumns:
    """The offsetDeltas, records and values of a data batch; error positions index ``buf``."""
    compressed = bool(header[5] & _COMPRESSION_MASK)
    if compressed:
        region, pos, rend = _records_region(header, buf, start, end, max_batch_bytes)
    else:
        region, pos, rend = buf, start + RECORD_BATCH_OVERHEAD, end
    small = not compressed and rend - pos <= _SECTION_CACHE_MAX_BYTES
    if small:
        section = buf[pos:rend]
        cached = _SECTION_CACHE.get(section)
        if cached is not None and len(cached[0]) == header[12]:
            return cached
    try:
        deltas, _keys, values, positions = _parse_records(region, pos, rend, header[12], False)
        try:
            records = decode_records(values)
        except DecodeError:
            # Decoding is a pure function of the bytes: decode again one by one to say which record is bad.
            records = []
            for offset_delta, value, value_pos in zip(deltas, values, positions, strict=True):
                try:
                    records.append(decode_record(value))
                except DecodeError as e:
                    raise DecodeError(f"metadata record at offset {header[0] + offset_delta}: {e.reason}",
                                      position=value_pos + (e.position or 0)) from e
            raise  # pragma: no cover - the loop above raised the same error
    except DecodeError as e:
        if compressed:  # positions inside decompressed bytes mean nothing in the file: point at the batch
            raise DecodeError(f"{e.reason} (at byte {e.position} of the decompressed records)",
                              position=start) from e
        raise
    result = (tuple(deltas), tuple(records), tuple(values))
    if small:
        if len(_SECTION_CACHE) >= _SECTION_CACHE_MAX_ENTRIES:
            _SECTION_CACHE.clear()
        _SECTION_CACHE[section] = result
    return result


def _decode_control(header: tuple[int, ...], buf: bytes, start: int, end: int,
                    max_batch_bytes: int) -> list[tuple[int, ControlRecord, bytes]]:
    region, pos, rend = _records_region(header, buf, start, end, max_batch_bytes)
    try:
        out: list[tuple[int, ControlRecord, bytes]] = []
        for offset_delta, key, value, value_pos in zip(*_parse_records(region, pos, rend, header[12], True),
                                                       strict=True):
            try:
                out.append((offset_delta, decode_control_record(key, value), value))
            except DecodeError as e:
                raise DecodeError(f"control record at offset {header[0] + offset_delta}: {e.reason}",
                                  position=value_pos + (e.position or 0)) from e
    except DecodeError as e:
        if region is not buf:
            raise DecodeError(f"{e.reason} (at byte {e.position} of the decompressed records)",
                              position=start) from e
        raise
    return out


def _skip_or_raise(e: DecodeError, source: str, fpos: int, start: int, end: int, base_offset: int,
                   policy: ReadPolicy, report: ReadReport) -> None:
    """A record-level fault in a batch whose framing and CRC are sound: raise it with the file name and
    absolute position, or skip exactly that batch. A batch is skipped whole because KRaft appends and applies
    a batch atomically; half a batch is a state the cluster never was in."""
    position = None if e.position is None else e.position - start + fpos
    if policy == "fail":
        raise DecodeError(e.reason, source=source, position=position) from e
    report.skipped.append(SkippedRegion(source, fpos, end - start, e.reason, base_offset))


# ------------------------------------------------------------------------------------------------------------
# Public API


_DataItems = tuple[tuple[int, Record, bytes], ...]
_ControlItems = tuple[tuple[int, ControlRecord, bytes], ...]
#: One decoded batch: (header fields, file position, crc ok, data items, control items), where each item is
#: ``(offsetDelta, record, value bytes)`` and one of the two item tuples is empty.
DecodedBatch = tuple[tuple[int, ...], int, bool, _DataItems, _ControlItems]


def record_batch_of(header: tuple[int, ...], position: int, crc_valid: bool) -> RecordBatch:
    """A :class:`RecordBatch` from the header tuple of :func:`iter_decoded`."""
    (base_offset, batch_length, partition_leader_epoch, magic, crc, attributes, last_offset_delta, base_timestamp,
     max_timestamp, producer_id, producer_epoch, base_sequence, records_count) = header
    return RecordBatch(base_offset, batch_length, partition_leader_epoch, magic, crc, attributes, last_offset_delta,
                       base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence, records_count,
                       position, crc_valid)


def iter_decoded(path: str | Path, *, policy: ReadPolicy = "fail", report: ReadReport | None = None,
                 verify_crc: bool = True, max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
                 chunk_size: int = DEFAULT_CHUNK_SIZE, skip_before: int = 0) -> Iterator[DecodedBatch]:
    """The low-level form of :func:`iter_batches` for callers that build their own objects: header fields as a
    tuple (``RecordBatch`` field order, without position/crc_valid), and ``(offsetDelta, record, value)`` per
    record. Faults are handled per ``policy`` exactly as in :func:`iter_batches`.

    ``skip_before``: a batch whose last offset (``baseOffset + lastOffsetDelta``) is below it is framed and
    CRC-checked like every other but not decoded nor yielded — a reader that starts inside a segment pays for
    the records it asked for, not for the segment's. Its records are not counted in the report."""
    source = str(path)
    rep = report if report is not None else ReadReport()
    for header, fpos, crc_ok, buf, start, end in _walk(Path(path), source, policy, rep, verify_crc=verify_crc,
                                                       max_batch_bytes=max_batch_bytes, chunk_size=chunk_size):
        if header[0] + header[6] < skip_before:
            continue
        data: _DataItems = ()
        controls: _ControlItems = ()
        try:
            if header[5] & _CONTROL_MASK:
                controls = tuple(_decode_control(header, buf, start, end, max_batch_bytes))
                rep.control_records += len(controls)
            else:
                data = tuple(zip(*_decode_data(header, buf, start, end, max_batch_bytes), strict=True))
                rep.records += len(data)
        except DecodeError as e:
            _skip_or_raise(e, source, fpos, start, end, header[0], policy, rep)
            continue
        yield header, fpos, crc_ok, data, controls


def iter_batches(path: str | Path, *, policy: ReadPolicy = "fail", report: ReadReport | None = None,
                 verify_crc: bool = True, max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
                 chunk_size: int = DEFAULT_CHUNK_SIZE) -> Iterator[LogBatch]:
    """Every batch of a segment or snapshot file with its decoded records (``FileRecords.batches`` +
    ``RecordsIterator``), in file order.

    With ``verify_crc=False`` a batch whose CRC does not match is still yielded (``header.crc_valid`` is
    False), as ``kafka-dump-log`` prints it with ``isvalid: false``; its records are decoded if they can
    be."""
    source = str(path)
    for header, fpos, crc_ok, data, controls in iter_decoded(
            path, policy=policy, report=report, verify_crc=verify_crc, max_batch_bytes=max_batch_bytes,
            chunk_size=chunk_size):
        batch = record_batch_of(header, fpos, crc_ok)
        base, epoch, ts = header[0], header[2], header[7]
        if controls:
            yield LogBatch(batch, source,
                           controls=tuple(ControlEntry(base + od, rec, base, epoch, ts, source)
                                          for od, rec, _v in controls),
                           values=tuple(v for _od, _rec, v in controls))
        else:
            yield LogBatch(batch, source,
                           entries=tuple(LogEntry(base + od, rec, base, epoch, ts, source) for od, rec, _v in data),
                           values=tuple(v for _od, _rec, v in data))


def read_log_entries(path: str | Path, *, policy: ReadPolicy = "fail", report: ReadReport | None = None,
                     max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
                     chunk_size: int = DEFAULT_CHUNK_SIZE) -> Iterator[LogEntry]:
    """The metadata records of one file, in offset order, as :class:`LogEntry` (``source`` = the path string).
    Control batches are checked and counted but not yielded (see :func:`read_entries`). This is the fast path
    replay uses: no :class:`RecordBatch` objects."""
    for _header, _fpos, entries, _controls, _values, _counting in iter_entry_batches(
            path, policy=policy, report=report, max_batch_bytes=max_batch_bytes, chunk_size=chunk_size):
        yield from entries


def _counting(deltas: tuple[int, ...]) -> bool:
    """Whether a batch's offsetDeltas are 0, 1, 2, … — as every batch Kafka writes has them."""
    n = len(deltas)
    return not n or (deltas[-1] == n - 1 and deltas == tuple(range(n)))


def _entries_of(header: tuple[int, ...], deltas: tuple[int, ...], records: tuple[Record, ...],
                source: str) -> tuple[list[LogEntry], bool]:
    """The :class:`LogEntry` of each record of a data batch, built in one ``map`` (no Python loop per record), and
    whether the batch's offsetDeltas count 0, 1, 2, …. A batch of one record (a NoOp's, most batches of a log)
    is built directly."""
    base, n = header[0], len(deltas)
    if n == 1:
        delta = deltas[0]
        return [new_log_entry(base + delta, records[0], base, header[2], header[7], source)], delta == 0
    counting = _counting(deltas)
    offsets: Iterable[int] = range(base, base + n) if counting else [base + od for od in deltas]
    return list(map(new_log_entry, offsets, records, repeat(base, n), repeat(header[2], n), repeat(header[7], n),
                    repeat(source, n))), counting


#: One batch of a file as entries: (header fields, file position, data entries, control entries, value bytes,
#: whether its offsetDeltas count 0, 1, 2, …). One of the two entry lists is empty.
EntryBatch = tuple[tuple[int, ...], int, list[LogEntry], list[ControlEntry], tuple[bytes, ...], bool]


def iter_entry_batches(path: str | Path, *, policy: ReadPolicy = "fail", report: ReadReport | None = None,
                       max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
                       chunk_size: int = DEFAULT_CHUNK_SIZE, skip_before: int = 0) -> Iterator[EntryBatch]:
    """Every batch of a file with its records already made :class:`LogEntry` / :class:`ControlEntry` (``source`` =
    the path string): what :func:`iter_decoded` gives, one step further, for the log reader's single-copy path,
    which hands whole batches on. Faults and ``skip_before`` are handled exactly as in :func:`iter_decoded`."""
    source = str(path)
    rep = report if report is not None else ReadReport()
    for header, fpos, _crc_ok, buf, start, end in _walk(Path(path), source, policy, rep, verify_crc=True,
                                                        max_batch_bytes=max_batch_bytes, chunk_size=chunk_size):
        if header[0] + header[6] < skip_before:
            continue
        try:
            if header[5] & _CONTROL_MASK:
                controls = _decode_control(header, buf, start, end, max_batch_bytes)
                rep.control_records += len(controls)
                base, epoch, ts = header[0], header[2], header[7]
                yield (header, fpos, [], [ControlEntry(base + od, rec, base, epoch, ts, source)
                                          for od, rec, _v in controls],
                       tuple(v for _od, _rec, v in controls), _counting(tuple(od for od, _r, _v in controls)))
                continue
            deltas, records, values = _decode_data(header, buf, start, end, max_batch_bytes)
        except DecodeError as e:
            _skip_or_raise(e, source, fpos, start, end, header[0], policy, rep)
            continue
        rep.records += len(deltas)
        entries, counting = _entries_of(header, deltas, records, source)
        yield header, fpos, entries, [], values, counting


def read_entries(path: str | Path, *, policy: ReadPolicy = "fail", report: ReadReport | None = None,
                 max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES) -> Iterator[LogEntry | ControlEntry]:
    """Every record of one file, data and control, in offset order."""
    for batch in iter_batches(path, policy=policy, report=report, max_batch_bytes=max_batch_bytes):
        if batch.controls:
            yield from batch.controls
        else:
            yield from batch.entries


def read_batch_bytes(path: str | Path, batch: RecordBatch) -> bytes:
    """The raw bytes of one batch of a file (for byte-level comparison and dumps)."""
    with open(path, "rb") as f:
        f.seek(batch.position)
        data = f.read(batch.size)
    if len(data) != batch.size:
        raise DecodeError(f"expected {batch.size} bytes", source=str(path), position=batch.position)
    return data

