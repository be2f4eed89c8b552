"""Print binary metadata files the way ``kafka-dump-log.sh --cluster-metadata-decoder`` does (the Scala tool of
Kafka 3.x–4.0, ``kafka.tools.DumpLogSegments``), so ``jbod inspect`` output can be diffed against Kafka's and read
back by :mod:`jbod_model.dumplog`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from jbod_model.records.control import ControlMessage, ControlRecordType, control_type_name
from jbod_model.records.json_codec import dumps, message_to_json, record_to_json
from jbod_model.storage.files import FileKind
from jbod_model.storage.log_reader import LogBatch, ReadPolicy, ReadReport, RecordBatch, iter_batches
from jbod_model.storage.metadata_dir import record_file

# Control records the Scala tool prints as JSON (``SnapshotHeader {…}``); the others print only their type.
_JSON_CONTROL = {ControlRecordType.SNAPSHOT_HEADER, ControlRecordType.SNAPSHOT_FOOTER,
                 ControlRecordType.KRAFT_VERSION, ControlRecordType.KRAFT_VOTERS}


def file_header_lines(path: str | Path) -> list[str]:
    """``Dumping <path>`` and the line that says what kind of file it is."""
    lines = [f"Dumping {path}"]
    rf = record_file(path)
    if rf is None:
        return lines
    if rf.kind is FileKind.SEGMENT:
        lines.append(f"Log starting offset: {rf.base_offset}")
    elif rf.kind is FileKind.SNAPSHOT:
        sid = rf.snapshot_id
        assert sid is not None
        lines.append(f"Snapshot end offset: {sid.end_offset}, epoch: {sid.epoch}")
    elif rf.kind is FileKind.BOOTSTRAP:
        lines.append("KRaft bootstrap snapshot")
    return lines


def batch_line(h: RecordBatch) -> str:
    """The batch line (``DumpLogSegments.dumpLog`` for a v2 batch)."""
    return (f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
            f"baseSequence: {h.base_sequence} lastSequence: {h.last_sequence} producerId: {h.producer_id} "
            f"producerEpoch: {h.producer_epoch} partitionLeaderEpoch: {h.partition_leader_epoch} "
            f"isTransactional: {str(h.is_transactional).lower()} isControl: {str(h.is_control).lower()} "
            f"deleteHorizonMs: OptionalLong.empty position: {h.position} "
            f"{h.timestamp_type.display_name}: {h.max_timestamp} size: {h.size} magic: {h.magic} "
            f"compresscodec: {h.compression_name} crc: {h.crc} isvalid: {str(h.crc_valid).lower()}")


def batch_lines(batch: LogBatch) -> Iterator[str]:
    """The batch line, then one ``| offset: …`` line per record."""
    h = batch.header
    yield batch_line(h)
    ts_name = h.timestamp_type.display_name
    sequence = -1 if h.base_sequence == -1 else None
    for i, value in enumerate(batch.values):
        offset = h.base_offset + i  # KRaft writes dense offset deltas 0..n-1
        seq = sequence if sequence is not None else h.base_sequence + i
        prefix = f"| offset: {offset} {ts_name}: {h.base_timestamp} "  # KRaft: timestampDelta is always 0
        if h.is_control:
            control = batch.controls[i]
            ctype = control.control_type
            known = ControlRecordType.from_value(ctype)
            if known in _JSON_CONTROL and isinstance(control.record, ControlMessage):
                suffix = f"{control.record.DUMP_LABEL} {dumps(message_to_json(control.record, 0))}"
            else:
                suffix = f"controlType: {control_type_name(ctype)}({ctype})"
            yield f"{prefix}keySize: 4 valueSize: {len(value)} sequence: {seq} headerKeys: [] {suffix}"
        else:
            payload = dumps(record_to_json(batch.entries[i].record))
            yield f"{prefix}keySize: -1 valueSize: {len(value)} sequence: {seq} headerKeys: [] payload: {payload}"


def dump_file(path: str | Path, *, policy: ReadPolicy = "fail", report: ReadReport | None = None) -> Iterator[str]:
    """Every line dump-log prints for one segment, snapshot or bootstrap file (batches with a bad CRC are shown
    with ``isvalid: false``, as Kafka shows them; a torn tail ends with ``Found N invalid bytes …``)."""
    rep = report if report is not None else ReadReport()
    yield from file_header_lines(path)
    for batch in iter_batches(path, policy=policy, report=rep, verify_crc=False):
        yield from batch_lines(batch)
    for skipped in rep.skipped:
        # The reader words a torn tail as Kafka does ("Found N invalid bytes at the end of <file>: why").
        if skipped.source == str(path) and skipped.reason.startswith("Found "):
            yield skipped.reason.split(":", 1)[0]
