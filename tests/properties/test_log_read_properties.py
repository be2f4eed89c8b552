"""The log reader's fast paths equal the reference ones.

* ``MetadataLog.log_entries`` of one copy (a whole batch at a time), with or without control records, gives what
  the record-by-record merge ``MetadataLog.merged_entries`` gives: the same entries in the same order, the same fault
  after the same entries, the same report — on logs with gaps, overlapping and repeated batches, offsetDeltas that do
  not count 0, 1, 2, …, control batches, corrupt batches, start and until offsets anywhere, under both policies.
* ``decode_records`` of a batch's values equals ``decode_record`` of each: records, warnings aside, and the error of
  the first value that fails.
"""

from __future__ import annotations

import struct
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from record_strategies import RECORD_VERSIONS, message_strategy

from jbod_model.errors import DecodeError
from jbod_model.records.binary import UnknownRecordWarning, decode_record, decode_records, encode_record
from jbod_model.records.control import ControlEntry, LeaderChangeMessage, Voter, encode_control_record
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import NoOpRecord, PartitionChangeRecord, TopicRecord
from jbod_model.storage.files import segment_file_name
from jbod_model.storage.log_reader import ReadPolicy, ReadReport
from jbod_model.storage.log_writer import encode_record_entry
from jbod_model.storage.metadata_dir import MetadataLog
from jbod_model.uuid import Uuid

_RECORDS = st.sampled_from([NoOpRecord(), TopicRecord(name="t", topic_id=Uuid(1, 2)),
                            PartitionChangeRecord(partition_id=3, topic_id=Uuid(1, 2), isr=(1, 2)),
                            PartitionChangeRecord(partition_id=4, topic_id=Uuid(1, 2), leader=2)])
_CONTROL = LeaderChangeMessage(leader_id=1, voters=(Voter(voter_id=1),))


def _batch(base: int, deltas: list[int], values: list[tuple[bytes | None, bytes]], *, epoch: int,
           control: bool) -> bytes:
    """A v2 batch with the given offsetDeltas (the writers only write counting ones)."""
    body = b"".join(encode_record_entry(d, key, value) for d, (key, value) in zip(deltas, values, strict=True))
    after_crc = struct.pack(">hiqqqhii", 0x20 if control else 0, max(deltas, default=0), 1000 + base, 1000 + base,
                            -1, -1, -1, len(deltas))
    crc = crc32c.crc32c(body, crc32c.crc32c(after_crc))
    return struct.pack(">qiib", base, 49 + len(body), epoch, 2) + struct.pack(">I", crc) + after_crc + body


@st.composite
def _logs(draw: st.DrawFn) -> tuple[list[list[bytes]], int, int | None]:
    """Segments of batches (bytes) and a start and until offset: batches mostly continue the log, sometimes leave
    a hole, go back, repeat a delta, are control batches or have a flipped byte."""
    segments: list[list[bytes]] = [[]]
    offset = 0
    for _ in range(draw(st.integers(1, 12))):
        n = draw(st.integers(1, 4))
        kind = draw(st.sampled_from(["next"] * 6 + ["hole", "back", "deltas", "control", "corrupt", "split"]))
        base = offset + (draw(st.integers(1, 3)) if kind == "hole" else 0)
        if kind == "back":
            base = max(0, offset - draw(st.integers(1, 3)))
        deltas = list(range(n))
        if kind == "deltas":
            deltas = sorted(draw(st.lists(st.integers(0, n + 1), min_size=n, max_size=n)))
        if kind == "control":
            values = [encode_control_record(_CONTROL)] * n
        else:
            values = [(None, encode_record(draw(_RECORDS))) for _ in range(n)]
        batch = _batch(base, deltas, values, epoch=draw(st.integers(0, 1)), control=kind == "control")
        if kind == "corrupt":
            at = draw(st.integers(21, len(batch) - 1))
            batch = batch[:at] + bytes([batch[at] ^ 0x40]) + batch[at + 1:]
        if kind == "split" and segments[-1]:
            segments.append([])
        segments[-1].append(batch)
        offset = max(offset, base + max(deltas) + 1)
    start = draw(st.integers(0, offset + 1))
    until = draw(st.none() | st.integers(start, offset + 2))
    return segments, start, until


def _write(root: Path, segments: list[list[bytes]]) -> MetadataLog:
    part = root / "__cluster_metadata-0"
    part.mkdir(parents=True)
    for segment in segments:
        base = struct.unpack_from(">q", segment[0])[0]
        path = part / segment_file_name(base)
        path.write_bytes(path.read_bytes() + b"".join(segment) if path.exists() else b"".join(segment))
    return MetadataLog.open(root)


def _outcome(entries: Iterator[Any]) -> tuple[list[LogEntry | ControlEntry], str | None]:
    got: list[LogEntry | ControlEntry] = []
    try:
        for entry in entries:
            got.append(entry)
    except DecodeError as e:
        return got, str(e)
    return got, None


def _report(report: ReadReport) -> tuple[Any, ...]:
    return (report.skipped, report.missing, report.files, report.batches, report.records, report.control_records,
            report.bytes_read)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(log=_logs(), policy=st.sampled_from(["fail", "skip"]), include_control=st.booleans())
def test_single_copy_batches_equal_the_record_by_record_merge(
        tmp_path_factory: Any, log: tuple[list[list[bytes]], int, int | None], policy: ReadPolicy,
        include_control: bool) -> None:
    segments, start, until = log
    metadata_log = _write(tmp_path_factory.mktemp("log"), segments)
    fast_report, reference_report = ReadReport(), ReadReport()
    fast = _outcome(metadata_log.log_entries(start_offset=start, until_offset=until, policy=policy,
                                             report=fast_report, include_control=include_control))
    reference = _outcome(metadata_log.merged_entries(start, until, policy, reference_report, include_control))
    assert fast == reference
    assert _report(fast_report) == _report(reference_report)


def _decoded(values: list[bytes], one_by_one: bool) -> tuple[Any, ...]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnknownRecordWarning)
        try:
            return "records", [decode_record(v) for v in values] if one_by_one else decode_records(values)
        except DecodeError as e:
            return "error", e.reason, e.position


_VALUES = st.sampled_from(RECORD_VERSIONS).flatmap(lambda cv: message_strategy(*cv)).map(encode_record)


@settings(max_examples=200, deadline=None)
@given(values=st.lists(_VALUES | st.binary(max_size=30) | _VALUES.map(lambda v: v[:-1]), max_size=6))
def test_decode_records_equals_decode_record_of_each(values: list[bytes]) -> None:
    assert _decoded(values, one_by_one=False) == _decoded(values, one_by_one=True)
