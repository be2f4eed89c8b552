"""Write record-batch v2 files exactly as KRaft does: segments, snapshots, control batches.

Mirrors ``raft/.../internals/BatchBuilder.java`` (``writeDefaultBatchHeader``, ``writeRecord``),
``MemoryRecordsBuilder.appendControlRecord`` (control batches) and ``RecordsSnapshotWriter`` (snapshot
layout). The KRaft header conventions: magic 2, attributes 0 (data) or 0x20 (control), no compression,
CreateTime, producerId, producerEpoch and baseSequence all -1, baseTimestamp == maxTimestamp == the append
time, every record's timestampDelta 0, and partitionLeaderEpoch = the leader epoch (in a snapshot: the
snapshot's epoch). Given the same records, epochs and timestamps, the bytes equal Kafka's (the tests rewrite
real files and compare sha256).

Files are written to a ``.part`` sibling and renamed into place when complete, as ``Snapshots.createTempFile``
/ ``FileRawSnapshotWriter.freeze`` do, so a reader never sees half a file under the final name.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import BinaryIO, Final

import crc32c

from jbod_model.errors import InputError
from jbod_model.records.binary import encode_record, write_varint
from jbod_model.records.control import (
    ControlEntry,
    ControlRecord,
    KRaftVersionRecord,
    LeaderChangeMessage,
    SnapshotFooterRecord,
    SnapshotHeaderRecord,
    Voter,
    VotersRecord,
    encode_control_record,
)
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import Record
from jbod_model.storage.files import SnapshotId, snapshot_file_name
from jbod_model.storage.log_reader import LOG_OVERHEAD, MAGIC_V2, RECORD_BATCH_OVERHEAD

#: ``KafkaRaftClient.MAX_BATCH_SIZE_BYTES``: the size at which KRaft's accumulator starts a new batch.
MAX_BATCH_SIZE_BYTES: Final = 8 * 1024 * 1024
NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
NO_SEQUENCE: Final = -1
CONTROL_ATTRIBUTES: Final = 0x20

# Everything after the CRC: attributes, lastOffsetDelta, baseTimestamp, maxTimestamp, producerId,
# producerEpoch, baseSequence, recordsCount (the CRC covers exactly these bytes and the records).
_AFTER_CRC: Final = struct.Struct(">hiqqqhii")
_BEFORE_CRC: Final = struct.Struct(">qiib")
_CRC: Final = struct.Struct(">I")
_NULL_KEY: Final = b"\x01"  # varint -1
_RECORD_PREFIX: Final = b"\x00\x00"  # attributes 0, timestampDelta 0


def encode_record_entry(offset_delta: int, key: bytes | None, value: bytes) -> bytes:
    """One record inside a batch (``DefaultRecord.writeTo`` as ``BatchBuilder.writeRecord`` calls it): length,
    attributes 0, timestampDelta 0, offsetDelta, key (null for metadata records), value, no headers."""
    key_part = _NULL_KEY if key is None else write_varint(len(key)) + key
    body = b"".join((_RECORD_PREFIX, write_varint(offset_delta), key_part, write_varint(len(value)), value, b"\x00"))
    return write_varint(len(body)) + body


def encode_batch_bytes(records: Sequence[tuple[bytes | None, bytes]], *, base_offset: int, leader_epoch: int,
                       timestamp: int, control: bool = False) -> bytes:
    """A whole batch from ``(key, value)`` pairs at consecutive offsets from ``base_offset``
    (``BatchBuilder.writeDefaultBatchHeader`` + the records)."""
    if not records:
        raise InputError("a record batch needs at least one record")
    body = b"".join(encode_record_entry(i, key, value) for i, (key, value) in enumerate(records))
    try:
        after_crc = _AFTER_CRC.pack(CONTROL_ATTRIBUTES if control else 0, len(records) - 1, timestamp, timestamp,
                                    NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE, len(records))
        batch_length = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(body)
        before_crc = _BEFORE_CRC.pack(base_offset, batch_length, leader_epoch, MAGIC_V2)
    except struct.error as e:
        raise InputError(f"batch header field out of range (base offset {base_offset}, epoch {leader_epoch}, "
                         f"timestamp {timestamp}): {e}") from e
    crc = crc32c.crc32c(body, crc32c.crc32c(after_crc))
    return b"".join((before_crc, _CRC.pack(crc), after_crc, body))


def encode_data_batch(records: Sequence[Record], *, base_offset: int, leader_epoch: int, timestamp: int) -> bytes:
    """A data batch of metadata records (attributes 0)."""
    return encode_batch_bytes([(None, encode_record(r)) for r in records], base_offset=base_offset,
                              leader_epoch=leader_epoch, timestamp=timestamp)


def encode_control_batch(records: Sequence[ControlRecord], *, base_offset: int, leader_epoch: int,
                         timestamp: int) -> bytes:
    """A control batch (attributes 0x20), as ``MemoryRecordsBuilder`` builds one for
    ``appendControlRecord``."""
    return encode_batch_bytes([encode_control_record(r) for r in records], base_offset=base_offset,
                              leader_epoch=leader_epoch, timestamp=timestamp, control=True)


def encode_leader_change_batch(*, base_offset: int, leader_epoch: int, timestamp: int, leader_id: int,
                               voters: Sequence[int], granting_voters: Sequence[int] | None = None) -> bytes:
    """The control batch a new leader writes first in its epoch (``KafkaRaftClient.onBecomeLeader`` →
    ``appendLeaderChangeMessage``); ``granting_voters`` defaults to ``voters``."""
    granting = voters if granting_voters is None else granting_voters
    message = LeaderChangeMessage(leader_id=leader_id, voters=tuple(Voter(voter_id=v) for v in voters),
                                  granting_voters=tuple(Voter(voter_id=v) for v in granting))
    return encode_control_batch([message], base_offset=base_offset, leader_epoch=leader_epoch, timestamp=timestamp)


def encode_batch(entries: Sequence[LogEntry | ControlEntry], *, leader_epoch: int | None = None,
                 timestamp: int | None = None) -> bytes:
    """One batch holding ``entries`` (all data or all control, consecutive offsets). The base offset is the
    first entry's offset; the epoch and timestamp default to the first entry's (then to 0)."""
    if not entries:
        raise InputError("a record batch needs at least one record")
    first = entries[0]
    base = first.offset
    for i, entry in enumerate(entries):
        if entry.offset != base + i:
            raise InputError(f"batch offsets must be consecutive: entry {i} has offset {entry.offset}, "
                             f"expected {base + i}")
    epoch = leader_epoch if leader_epoch is not None else first.leader_epoch or 0
    ts = timestamp if timestamp is not None else first.timestamp or 0
    if isinstance(first, ControlEntry):
        controls = [e.record for e in entries if isinstance(e, ControlEntry)]
        if len(controls) != len(entries):
            raise InputError("a batch cannot mix control and data records")
        return encode_control_batch(controls, base_offset=base, leader_epoch=epoch, timestamp=ts)
    data = [e.record for e in entries if isinstance(e, LogEntry)]
    if len(data) != len(entries):
        raise InputError("a batch cannot mix control and data records")
    return encode_data_batch(data, base_offset=base, leader_epoch=epoch, timestamp=ts)


def group_into_batches(entries: Iterable[LogEntry | ControlEntry], *,
                       max_records_per_batch: int) -> Iterator[list[LogEntry | ControlEntry]]:
    """Consecutive entries grouped into batches of at most ``max_records_per_batch``: a new batch starts when
    the kind (data/control), leader epoch or timestamp changes, or offsets are not consecutive."""
    if max_records_per_batch < 1:
        raise InputError("max_records_per_batch must be at least 1")
    group: list[LogEntry | ControlEntry] = []
    for entry in entries:
        if group:
            head = group[0]
            if (len(group) >= max_records_per_batch or type(entry) is not type(head)
                    or entry.leader_epoch != head.leader_epoch or entry.timestamp != head.timestamp
                    or entry.offset != group[-1].offset + 1):
                yield group
                group = []
        group.append(entry)
    if group:
        yield group


class _AtomicFile:
    """A file written under ``<name>.part`` and renamed into place on success (removed on failure)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.part = self.path.with_name(self.path.name + ".part")
        self.file: BinaryIO = open(self.part, "wb")  # noqa: SIM115 - closed in commit()/abort()
        self.size = 0

    def write(self, data: bytes) -> None:
        self.file.write(data)
        self.size += len(data)

    def commit(self) -> None:
        self.file.flush()
        os.fsync(self.file.fileno())
        self.file.close()
        os.replace(self.part, self.path)

    def abort(self) -> None:
        self.file.close()
        self.part.unlink(missing_ok=True)


class SegmentWriter:
    """Writes a ``.log`` segment batch by batch. Use as a context manager: the file appears under its final
    name only when the block exits without an exception."""

    def __init__(self, path: str | Path) -> None:
        self._out = _AtomicFile(path)
        self._next_offset: int | None = None

    @property
    def path(self) -> Path:
        return self._out.path

    def append_batch(self, entries: Sequence[LogEntry | ControlEntry], *, leader_epoch: int | None = None,
                     timestamp: int | None = None) -> None:
        """Append one batch (see :func:`encode_batch`); offsets must continue where the previous batch
        ended."""
        if self._next_offset is not None and entries and entries[0].offset != self._next_offset:
            raise InputError(f"segment offsets must be contiguous: batch starts at {entries[0].offset}, "
                             f"expected {self._next_offset}")
        self._out.write(encode_batch(entries, leader_epoch=leader_epoch, timestamp=timestamp))
        self._next_offset = entries[-1].offset + 1

    def append_raw(self, batch: bytes, *, next_offset: int | None = None) -> None:
        """Append an already encoded batch (e.g. from :func:`encode_leader_change_batch`)."""
        self._out.write(batch)
        if next_offset is not None:
            self._next_offset = next_offset

    def close(self) -> Path:
        self._out.commit()
        return self._out.path

    def __enter__(self) -> SegmentWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:
            self.close()
        else:
            self._out.abort()


def write_segment(path: str | Path, batches: Iterable[Sequence[LogEntry | ControlEntry]]) -> Path:
    """Write a segment with one batch per sequence of entries; returns the path."""
    with SegmentWriter(path) as writer:
        for batch in batches:
            writer.append_batch(batch)
    return writer.path


def write_segment_entries(path: str | Path, entries: Iterable[LogEntry | ControlEntry], *,
                          max_records_per_batch: int = 1) -> Path:
    """Write a segment from a flat stream of entries, batched by :func:`group_into_batches`."""
    with SegmentWriter(path) as writer:
        for group in group_into_batches(entries, max_records_per_batch=max_records_per_batch):
            writer.append_batch(group)
    return writer.path


class SnapshotWriter:
    """Writes a snapshot the way ``RecordsSnapshotWriter`` does: a control batch at offset 0 holding
    SNAPSHOT_HEADER (then KRAFT_VERSION / KRAFT_VOTERS when given), data batches at the following offsets
    (local to the snapshot), and a final control batch holding SNAPSHOT_FOOTER; every batch's
    partitionLeaderEpoch is the snapshot epoch. ``path`` is the final file (see :func:`snapshot_path`)."""

    def __init__(self, path: str | Path, *, epoch: int, last_contained_log_timestamp: int, timestamp: int,
                 header_extra: Sequence[KRaftVersionRecord | VotersRecord] = ()) -> None:
        self._out = _AtomicFile(path)
        self._epoch = epoch
        self._timestamp = timestamp
        header: list[ControlRecord] = [SnapshotHeaderRecord(last_contained_log_timestamp=last_contained_log_timestamp)]
        header.extend(header_extra)
        self._out.write(encode_control_batch(header, base_offset=0, leader_epoch=epoch, timestamp=timestamp))
        self._next_offset = len(header)
        self._frozen = False

    @property
    def path(self) -> Path:
        return self._out.path

    @property
    def next_offset(self) -> int:
        return self._next_offset

    def append(self, records: Sequence[Record], *, timestamp: int | None = None) -> None:
        """Append one data batch."""
        self._out.write(encode_data_batch(records, base_offset=self._next_offset, leader_epoch=self._epoch,
                                          timestamp=self._timestamp if timestamp is None else timestamp))
        self._next_offset += len(records)

    def freeze(self, *, timestamp: int | None = None) -> Path:
        """Append the footer and move the file into place (``RecordsSnapshotWriter.freeze``)."""
        if self._frozen:
            raise InputError(f"snapshot {self.path} is already frozen")
        self._out.write(encode_control_batch([SnapshotFooterRecord()], base_offset=self._next_offset,
                                             leader_epoch=self._epoch,
                                             timestamp=self._timestamp if timestamp is None else timestamp))
        self._next_offset += 1
        self._out.commit()
        self._frozen = True
        return self.path

    def abort(self) -> None:
        if not self._frozen:
            self._out.abort()

    def __enter__(self) -> SnapshotWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:
            if not self._frozen:
                self.freeze()
        else:
            self.abort()


def snapshot_path(directory: str | Path, snapshot_id: SnapshotId) -> Path:
    """``<directory>/<endOffset>-<epoch>.checkpoint``."""
    return Path(directory) / snapshot_file_name(snapshot_id.end_offset, snapshot_id.epoch)


def write_snapshot(path: str | Path, records: Iterable[Record], *, epoch: int, last_contained_log_timestamp: int,
                   timestamp: int, max_records_per_batch: int | None = None,
                   max_batch_bytes: int = MAX_BATCH_SIZE_BYTES,
                   header_extra: Sequence[KRaftVersionRecord | VotersRecord] = ()) -> Path:
    """Write a whole snapshot (or ``bootstrap.checkpoint``, epoch 0) with every batch at ``timestamp``. Data
    batches are cut at ``max_records_per_batch`` records or about ``max_batch_bytes`` bytes, like KRaft's
    ``BatchAccumulator``. Returns the path."""
    with SnapshotWriter(path, epoch=epoch, last_contained_log_timestamp=last_contained_log_timestamp,
                        timestamp=timestamp, header_extra=header_extra) as writer:
        batch: list[Record] = []
        size = RECORD_BATCH_OVERHEAD
        for record in records:
            # Approximate the record's size by its value: good enough to stay near the cap, as Kafka only
            # needs.
            record_size = len(encode_record(record)) + 8
            if batch and ((max_records_per_batch is not None and len(batch) >= max_records_per_batch)
                          or size + record_size > max_batch_bytes):
                writer.append(batch)
                batch, size = [], RECORD_BATCH_OVERHEAD
            batch.append(record)
            size += record_size
        if batch:
            writer.append(batch)
    return writer.path
