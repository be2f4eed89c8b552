"""KRaft metadata files on disk: record-batch v2 reading and writing, file names, metadata log directories.

* :mod:`~jbod_model.storage.log_reader` — segments/snapshots → batches and entries (``FileRecords``,
  ``DefaultRecordBatch``, ``RecordsIterator``), with a fail/skip policy and a :class:`ReadReport`;
* :mod:`~jbod_model.storage.log_writer` — entries → byte-identical KRaft batches, segments and snapshots
  (``BatchBuilder``, ``RecordsSnapshotWriter``);
* :mod:`~jbod_model.storage.files` — file names (``Snapshots``, segment names);
* :mod:`~jbod_model.storage.metadata_dir` — one node's log dir or several nodes' copies → the entry stream
  "latest snapshot + log after it" or "full log", up to an offset.
"""

from __future__ import annotations

from jbod_model.storage.files import (
    BOOTSTRAP_FILE_NAME,
    METADATA_PARTITION_DIR,
    FileKind,
    SnapshotId,
    file_kind,
    parse_segment_name,
    parse_snapshot_name,
    segment_file_name,
    snapshot_file_name,
)
from jbod_model.storage.log_reader import (
    CompressionType,
    LogBatch,
    MissingOffsets,
    ReadPolicy,
    ReadReport,
    RecordBatch,
    SkippedRegion,
    TimestampType,
    iter_batches,
    iter_decoded,
    read_entries,
    read_log_entries,
)
from jbod_model.storage.log_writer import (
    SegmentWriter,
    SnapshotWriter,
    encode_batch,
    encode_control_batch,
    encode_data_batch,
    encode_leader_change_batch,
    snapshot_path,
    write_segment,
    write_segment_entries,
    write_snapshot,
)
from jbod_model.storage.metadata_dir import (
    MetadataLog,
    MetadataLogDir,
    MetadataStream,
    SegmentFile,
    SnapshotFile,
    read_metadata_log,
    read_snapshot_entries,
    read_snapshot_header,
)

__all__ = [
    "BOOTSTRAP_FILE_NAME",
    "METADATA_PARTITION_DIR",
    "CompressionType",
    "FileKind",
    "LogBatch",
    "MetadataLog",
    "MetadataLogDir",
    "MetadataStream",
    "MissingOffsets",
    "ReadPolicy",
    "ReadReport",
    "RecordBatch",
    "SegmentFile",
    "SegmentWriter",
    "SkippedRegion",
    "SnapshotFile",
    "SnapshotId",
    "SnapshotWriter",
    "TimestampType",
    "encode_batch",
    "encode_control_batch",
    "encode_data_batch",
    "encode_leader_change_batch",
    "file_kind",
    "iter_batches",
    "iter_decoded",
    "parse_segment_name",
    "parse_snapshot_name",
    "read_entries",
    "read_log_entries",
    "read_metadata_log",
    "read_snapshot_entries",
    "read_snapshot_header",
    "segment_file_name",
    "snapshot_file_name",
    "snapshot_path",
    "write_segment",
    "write_segment_entries",
    "write_snapshot",
]
