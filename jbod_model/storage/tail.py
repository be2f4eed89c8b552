"""The end of the complete batches of a segment that may still be growing.

A streaming reader of a live metadata log must not read past what the writer has finished: the active segment ends
with a batch being appended, and a batch's bytes may appear before all of them are written. :func:`scan_tail` walks
batch frames from a known position (so a reader that polls re-reads only what was appended since) and stops before
the first batch that is not complete and intact — too short for its header, shorter than its ``batchLength`` says,
of another magic, or failing its CRC-32C. What it stops at is not an error here: the next poll may find it complete;
a reader that later reads the offsets it reported decodes and checks them fully
(:mod:`jbod_model.storage.log_reader`). One exception: a batch whose length fits but whose CRC fails, directly followed
by a complete, intact batch, is passed over — a writer appends in order, so a good batch after it means it is damaged,
not being written, and stopping there would hold every later record back for good (the reader then fails on it or
skips it, per its policy).

Mirrors the role of ``LogSegment.recover``/``FileRecords`` scanning in Kafka, read-only.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Final

import crc32c

from jbod_model.storage.log_reader import LOG_OVERHEAD, MAGIC_V2, RECORD_BATCH_OVERHEAD

# baseOffset(8) batchLength(4) partitionLeaderEpoch(4) magic(1) crc(4) attributes(2) lastOffsetDelta(4)
_PREFIX: Final = struct.Struct(">qiibIhi")


@dataclass(frozen=True, slots=True)
class TailScan:
    """Where the complete batches of a file end: ``position`` (bytes) and ``next_offset`` (one past the last
    offset of the last complete batch; None when the file holds no complete batch from the start position)."""

    position: int
    next_offset: int | None


def scan_tail(path: str | Path, start: TailScan | None = None, *, max_batch_bytes: int = 64 * 1024 * 1024,
              ) -> TailScan:
    """Scan ``path`` from ``start`` (a previous scan's result, or the beginning) to the end of its complete,
    intact batches. A file shorter than ``start.position`` (replaced or truncated) is scanned from the beginning."""
    position = 0 if start is None else start.position
    next_offset = None if start is None else start.next_offset
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < position:
            position, next_offset = 0, None
        f.seek(position)
        while size - position >= LOG_OVERHEAD:
            head = f.read(_PREFIX.size)
            if len(head) < _PREFIX.size:
                break
            base, length, _epoch, magic, crc, _attributes, last_delta = _PREFIX.unpack(head)
            total = LOG_OVERHEAD + length
            if total < RECORD_BATCH_OVERHEAD or total > max_batch_bytes or total > size - position \
                    or magic != MAGIC_V2:
                break
            rest = f.read(total - _PREFIX.size)
            if len(rest) != total - _PREFIX.size:
                break
            # The CRC covers everything from the attributes (byte 21) to the end of the batch.
            if crc32c.crc32c(head[21:] + rest) != crc:
                after = _intact_batch_at(f, position + total, size, max_batch_bytes)
                if after is None:
                    break
                # Damaged, not in flight: the batch after it is complete, so the scan goes on from there.
                f.seek(position + total)
                position += total
                continue
            position += total
            next_offset = base + last_delta + 1
    return TailScan(position, next_offset)


def _intact_batch_at(f: BinaryIO, position: int, size: int, max_batch_bytes: int) -> int | None:
    """The length of the complete batch with a matching CRC-32C that starts at ``position``, or None."""
    if size - position < LOG_OVERHEAD:
        return None
    f.seek(position)
    head = f.read(_PREFIX.size)
    if len(head) < _PREFIX.size:
        return None
    _base, length, _epoch, magic, crc, _attributes, _last_delta = _PREFIX.unpack(head)
    total = LOG_OVERHEAD + length
    if total < RECORD_BATCH_OVERHEAD or total > max_batch_bytes or total > size - position or magic != MAGIC_V2:
        return None
    rest = f.read(total - _PREFIX.size)
    if len(rest) != total - _PREFIX.size or crc32c.crc32c(head[21:] + rest) != crc:
        return None
    return int(total)
