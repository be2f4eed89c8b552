"""Names of the files in a KRaft metadata log directory.

Mirrors ``raft/.../snapshot/Snapshots.java`` (snapshot names), ``storage/.../log/LogFileUtils`` (segment
names: the 20-digit zero-padded base offset) and ``KafkaRaftServer``/``BootstrapDirectory``
(``bootstrap.checkpoint``). Only ``.log`` segments, ``.checkpoint`` snapshots and ``bootstrap.checkpoint``
hold records; everything else in the directory (``.index``, ``.timeindex``, producer-state ``.snapshot``,
``.checkpoint.part`` temporaries, ``.checkpoint.deleted`` tombstones, ``quorum-state``,
``leader-epoch-checkpoint``) is ignored by the readers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Final

from jbod_model.errors import InputError

#: ``Log.LogFileSuffix`` and ``Snapshots.SUFFIX``.
SEGMENT_SUFFIX: Final = ".log"
SNAPSHOT_SUFFIX: Final = ".checkpoint"
#: ``BootstrapDirectory.BINARY_BOOTSTRAP_FILENAME``, in the root of the metadata log dir.
BOOTSTRAP_FILE_NAME: Final = "bootstrap.checkpoint"
#: The metadata partition's directory (``__cluster_metadata`` topic, partition 0).
METADATA_PARTITION_DIR: Final = "__cluster_metadata-0"

_OFFSET_DIGITS: Final = 20
_EPOCH_DIGITS: Final = 10
_SEGMENT_RE: Final = re.compile(r"^(\d{20})\.log$")
_SNAPSHOT_RE: Final = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")


class FileKind(Enum):
    """What a file in a metadata log directory holds."""

    SEGMENT = "segment"
    SNAPSHOT = "snapshot"
    BOOTSTRAP = "bootstrap"
    OTHER = "other"


@dataclass(frozen=True, slots=True, order=True)
class SnapshotId:
    """``OffsetAndEpoch`` of a snapshot: ``end_offset`` is exclusive (the snapshot holds the state after
    applying every log offset ``< end_offset``) and ``epoch`` is the leader epoch of the last contained
    record."""

    end_offset: int
    epoch: int

    @property
    def last_contained_offset(self) -> int:
        return self.end_offset - 1


def segment_file_name(base_offset: int) -> str:
    """``00000000000000005151.log`` (``LogFileUtils.logFile``)."""
    if not 0 <= base_offset < 10**_OFFSET_DIGITS:
        raise InputError(f"segment base offset {base_offset} does not fit 20 digits")
    return f"{base_offset:0{_OFFSET_DIGITS}d}{SEGMENT_SUFFIX}"


def snapshot_file_name(end_offset: int, epoch: int) -> str:
    """``<endOffset 20 digits>-<epoch 10 digits>.checkpoint`` (``Snapshots.filenameFromSnapshotId``)."""
    if not 0 <= end_offset < 10**_OFFSET_DIGITS or not 0 <= epoch < 10**_EPOCH_DIGITS:
        raise InputError(f"snapshot id ({end_offset}, {epoch}) does not fit the 20-/10-digit file name")
    return f"{end_offset:0{_OFFSET_DIGITS}d}-{epoch:0{_EPOCH_DIGITS}d}{SNAPSHOT_SUFFIX}"


def parse_segment_name(name: str) -> int | None:
    """The base offset of a segment file name, or ``None`` when ``name`` is not a ``.log`` segment."""
    m = _SEGMENT_RE.match(name)
    return int(m.group(1)) if m else None


def parse_snapshot_name(name: str) -> SnapshotId | None:
    """The id of a snapshot file name, or ``None`` (mirrors ``Snapshots.parse``, which also returns empty for
    ``.checkpoint.part`` and ``.checkpoint.deleted``)."""
    m = _SNAPSHOT_RE.match(name)
    return SnapshotId(int(m.group(1)), int(m.group(2))) if m else None


def file_kind(path: str | Path) -> FileKind:
    """Classify a file by its name alone."""
    name = Path(path).name
    if name == BOOTSTRAP_FILE_NAME:
        return FileKind.BOOTSTRAP
    if parse_segment_name(name) is not None:
        return FileKind.SEGMENT
    if parse_snapshot_name(name) is not None:
        return FileKind.SNAPSHOT
    return FileKind.OTHER
