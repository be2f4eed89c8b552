"""Record-batch v2 reading: header fields, records, streaming, and every kind of bad input under both
policies.

Fixtures are generated in ``tmp_path`` with our own writer (and, for malformed batches, a tiny independent
header packer below), never committed binaries.
"""

from __future__ import annotations

import gzip
import os
import struct
from pathlib import Path

import crc32c
import pytest

from jbod_model.errors import DecodeError
from jbod_model.records.binary import encode_record, write_varint
from jbod_model.records.control import LeaderChangeMessage, Voter
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import NoOpRecord, PartitionRecord, TopicRecord
from jbod_model.storage.log_reader import (
    CompressionType,
    ReadReport,
    TimestampType,
    iter_batches,
    read_entries,
    read_log_entries,
)
from jbod_model.storage.log_writer import (
    encode_data_batch,
    encode_leader_change_batch,
    encode_record_entry,
)
from jbod_model.uuid import Uuid

TS = 1_700_000_000_000
TOPIC = Uuid(0x1234, 0x5678)


def noop_batch(offset: int, epoch: int = 3) -> bytes:
    return encode_data_batch([NoOpRecord()], base_offset=offset, leader_epoch=epoch, timestamp=TS + offset)


def raw_batch(base_offset: int, records: bytes, count: int, *, attributes: int = 0, epoch: int = 3,
              magic: int = 2, batch_length: int | None = None) -> bytes:
    """A batch packed independently of the writer, with a correct CRC over whatever ``records`` holds."""
    after_crc = struct.pack(">hiqqqhii", attributes, max(count - 1, 0), TS, TS, -1, -1, -1, count) + records
    length = 49 + len(records) if batch_length is None else batch_length
    return struct.pack(">qiibI", base_offset, length, epoch, magic, crc32c.crc32c(after_crc)) + after_crc


def write(tmp_path: Path, *parts: bytes, name: str = "00000000000000000000.log") -> Path:
    path = tmp_path / name
    path.write_bytes(b"".join(parts))
    return path


def offsets(path: Path, **kwargs: object) -> list[int]:
    return [e.offset for e in read_log_entries(path, **kwargs)]  # type: ignore[arg-type]


def positions(*parts: bytes) -> list[int]:
    out, pos = [], 0
    for part in parts:
        out.append(pos)
        pos += len(part)
    return out


# --- good files ---------------------------------------------------------------------------------------------


def test_header_fields_and_entries(tmp_path: Path) -> None:
    leader = encode_leader_change_batch(base_offset=0, leader_epoch=3, timestamp=TS, leader_id=1, voters=[1, 2, 3],
                                        granting_voters=[1, 2])
    records = [TopicRecord(name="t", topic_id=TOPIC),
               PartitionRecord(version=1, partition_id=0, topic_id=TOPIC, replicas=(1,), isr=(1,), leader=1,
                               leader_epoch=0, partition_epoch=0, directories=(Uuid(7, 8),))]
    data = encode_data_batch(records, base_offset=1, leader_epoch=3, timestamp=TS + 5)
    path = write(tmp_path, leader, data)

    batches = list(iter_batches(path))
    assert [b.is_control for b in batches] == [True, False]
    control, second = batches[0].header, batches[1].header
    assert (control.base_offset, control.size, control.position, control.magic, control.attributes) == (
        0, len(leader), 0, 2, 0x20)
    assert control.crc_valid and control.is_control and not control.is_transactional
    assert control.compression == CompressionType.NONE and control.compression_name == "none"
    assert control.timestamp_type is TimestampType.CREATE_TIME and not control.has_delete_horizon_ms
    assert (control.producer_id, control.producer_epoch, control.base_sequence, control.last_sequence) == (
        -1, -1, -1, -1)
    assert batches[0].controls[0].record == LeaderChangeMessage(
        leader_id=1, voters=(Voter(voter_id=1), Voter(voter_id=2), Voter(voter_id=3)),
        granting_voters=(Voter(voter_id=1), Voter(voter_id=2)))
    assert (second.base_offset, second.last_offset, second.next_offset, second.records_count) == (1, 2, 3, 2)
    assert (second.position, second.partition_leader_epoch, second.base_timestamp, second.max_timestamp) == (
        len(leader), 3, TS + 5, TS + 5)
    assert batches[1].values == tuple(encode_record(r) for r in records)

    entries = list(read_log_entries(path))
    assert entries == [LogEntry(offset=1 + i, record=r, batch_base_offset=1, leader_epoch=3, timestamp=TS + 5,
                                source=str(path)) for i, r in enumerate(records)]
    assert [type(e).__name__ for e in read_entries(path)] == ["ControlEntry", "LogEntry", "LogEntry"]


def test_empty_file_has_no_entries(tmp_path: Path) -> None:
    report = ReadReport()
    assert list(read_log_entries(write(tmp_path), report=report)) == []
    assert report.clean and report.files == 1


def test_streaming_across_chunk_boundaries(tmp_path: Path) -> None:
    big = encode_data_batch([TopicRecord(name="x" * 200, topic_id=TOPIC)] * 20, base_offset=50, leader_epoch=3,
                            timestamp=TS)
    path = write(tmp_path, *(noop_batch(i) for i in range(50)), big, noop_batch(70))
    expected = list(read_log_entries(path))
    assert [e.offset for e in expected] == [*range(50), *range(50, 70), 70]
    # A 100-byte window: batches straddle chunks, and one batch is larger than a chunk.
    assert list(read_log_entries(path, chunk_size=100)) == expected
    assert [b.header.base_offset for b in iter_batches(path, chunk_size=64)] == [*range(50), 50, 70]


def test_report_counts(tmp_path: Path) -> None:
    leader = encode_leader_change_batch(base_offset=0, leader_epoch=3, timestamp=TS, leader_id=1, voters=[1])
    path = write(tmp_path, leader, noop_batch(1), noop_batch(2))
    report = ReadReport()
    assert offsets(path, report=report) == [1, 2]
    assert (report.batches, report.records, report.control_records, report.bytes_read) == (
        3, 2, 1, path.stat().st_size)
    assert "3 batch(es)" in report.summary()


def test_gzip_batch_is_decompressed(tmp_path: Path) -> None:
    section = b"".join(encode_record_entry(i, None, encode_record(NoOpRecord())) for i in range(3))
    compressed = raw_batch(10, gzip.compress(section), 3, attributes=CompressionType.GZIP)
    path = write(tmp_path, noop_batch(9), compressed, noop_batch(13))
    assert offsets(path) == [9, 10, 11, 12, 13]
    assert [b.header.compression_name for b in iter_batches(path)] == ["none", "gzip", "none"]


# --- bad input: fail raises DecodeError naming file and byte position; skip keeps every good record ---------


def check_fail(path: Path, position: int, match: str) -> DecodeError:
    with pytest.raises(DecodeError, match=match) as info:
        list(read_log_entries(path))
    err = info.value
    assert err.source == str(path) and err.position == position
    assert str(path) in str(err) and f"byte {position}" in str(err)
    return err


def check_skip(path: Path, expected_offsets: list[int], *regions: tuple[int, int]) -> ReadReport:
    report = ReadReport()
    assert offsets(path, policy="skip", report=report) == expected_offsets
    assert [(s.position, s.length) for s in report.skipped] == list(regions)
    assert all(s.source == str(path) for s in report.skipped)
    return report


def test_torn_tail(tmp_path: Path) -> None:
    good = [noop_batch(0), noop_batch(1)]
    torn = noop_batch(2)[:40]
    path = write(tmp_path, *good, torn)
    at = positions(*good, torn)[2]
    check_fail(path, at, "Found 40 invalid bytes at the end of 00000000000000000000.log")
    check_skip(path, [0, 1], (at, 40))


def test_tail_shorter_than_a_length_field(tmp_path: Path) -> None:
    path = write(tmp_path, noop_batch(0), b"\x00" * 5)
    check_fail(path, len(noop_batch(0)), "Found 5 invalid bytes")
    check_skip(path, [0], (len(noop_batch(0)), 5))


def test_crc_mismatch(tmp_path: Path) -> None:
    parts = [noop_batch(0), bytearray(noop_batch(1)), noop_batch(2)]
    parts[1][-3] ^= 0xFF  # flip a byte inside the record value
    path = write(tmp_path, *map(bytes, parts))
    at = positions(*parts)[1]
    check_fail(path, at, "corrupt")
    report = check_skip(path, [0, 2], (at, len(parts[1])))
    assert report.skipped[0].base_offset == 1 and "crc" in report.skipped[0].reason


def test_crc_mismatch_can_be_inspected_without_verification(tmp_path: Path) -> None:
    bad = bytearray(noop_batch(1))
    bad[30] ^= 0x01  # inside baseTimestamp: covered by the CRC, but the records still decode
    path = write(tmp_path, noop_batch(0), bytes(bad))
    assert [b.header.crc_valid for b in iter_batches(path, verify_crc=False)] == [True, False]


def test_wrong_magic(tmp_path: Path) -> None:
    parts = [noop_batch(0), bytearray(noop_batch(1)), noop_batch(2)]
    parts[1][16] = 1
    path = write(tmp_path, *map(bytes, parts))
    at = positions(*parts)[1]
    check_fail(path, at, "magic 1")
    check_skip(path, [0, 2], (at, len(parts[1])))


@pytest.mark.parametrize("length", [0x7FFFFFFF, 10, -5], ids=["gigabytes", "below-overhead", "negative"])
def test_hostile_batch_length_resyncs(tmp_path: Path, length: int) -> None:
    parts = [noop_batch(0), bytearray(noop_batch(1)), noop_batch(2), noop_batch(3)]
    parts[1][8:12] = struct.pack(">i", length)
    path = write(tmp_path, *map(bytes, parts))
    at = positions(*parts)[1]
    check_fail(path, at, "invalid bytes|smaller than the minimum")
    check_skip(path, [0, 2, 3], (at, len(parts[1])))


def test_length_over_the_limit_in_a_large_file(tmp_path: Path) -> None:
    # A length within the file size but above max_batch_bytes is refused before anything is read or allocated.
    parts = [noop_batch(0), raw_batch(1, b"\x00" * 5000, 0)]
    path = write(tmp_path, *parts)
    with pytest.raises(DecodeError, match="limit") as info:
        list(read_log_entries(path, max_batch_bytes=1024))
    assert info.value.position == len(parts[0])


def test_hostile_varint_in_a_record(tmp_path: Path) -> None:
    bad = raw_batch(1, b"\xff\xff\xff\xff\xff\xff\x01" + b"\x00" * 10, 1)
    parts = [noop_batch(0), bad, noop_batch(2)]
    path = write(tmp_path, *parts)
    at = positions(*parts)[1]
    check_fail(path, at + 61, "too long")
    check_skip(path, [0, 2], (at, len(bad)))


@pytest.mark.parametrize(("records", "count", "match", "offset_in_batch"), [
    (write_varint(2**30) + b"\x00" * 8, 1, "Invalid record size", 61),
    (b"\x00" * 8, 2**31 - 1, "declares 2147483647 records", 61),
    (encode_record_entry(0, None, encode_record(NoOpRecord())) + b"\x00\x00", 1, "Incorrect declared batch size",
     72),
    (encode_record_entry(0, None, encode_record(NoOpRecord())), 2, "ends after 1", 72),
    (encode_record_entry(0, b"key!", encode_record(NoOpRecord())), 1, "key size of 4", 61),
    (b"\x14\x00\x02\x00\x01\x08\x01\x14\x00\x00\x00", 1, "timestamp delta of 1", 61),
    (b"\x14\x00\x00\x00\x01\x08\x01\x14\x00\x00\x02", 1, "numHeaders of 1", 61),
    (b"\x0c\x00\x00\x00\x01\x01\x00", 1, "null value", 61),
], ids=["record-length", "record-count", "trailing-bytes", "missing-record", "data-key", "timestamp-delta",
        "headers", "null-value"])
def test_bad_records_inside_a_valid_batch(tmp_path: Path, records: bytes, count: int, match: str,
                                          offset_in_batch: int) -> None:
    bad = raw_batch(1, records, count)
    parts = [noop_batch(0), bad, noop_batch(5)]
    path = write(tmp_path, *parts)
    at = positions(*parts)[1]
    check_fail(path, at + offset_in_batch, match)
    check_skip(path, [0, 5], (at, len(bad)))


def test_bad_metadata_value_points_inside_the_value(tmp_path: Path) -> None:
    value = b"\x00\x14\x00\x00"  # frame version 0
    bad = raw_batch(1, encode_record_entry(0, None, value), 1)
    path = write(tmp_path, noop_batch(0), bad)
    # length, attributes, timestampDelta, offsetDelta, key length, value length: 6 bytes before the value.
    err = check_fail(path, len(noop_batch(0)) + 61 + 6, "frame version 0")
    assert "offset 1" in err.reason


def test_control_record_with_null_key(tmp_path: Path) -> None:
    bad = raw_batch(1, encode_record_entry(0, None, b"\x00\x00"), 1, attributes=0x20)
    path = write(tmp_path, noop_batch(0), bad, noop_batch(2))
    check_fail(path, len(noop_batch(0)) + 61, "null key")
    check_skip(path, [0, 2], (len(noop_batch(0)), len(bad)))


@pytest.mark.parametrize(("codec", "name"), [(2, "snappy"), (3, "lz4"), (4, "zstd"), (7, "unknown codec id 7")])
def test_unsupported_compression_names_the_codec(tmp_path: Path, codec: int, name: str) -> None:
    bad = raw_batch(1, b"\x00" * 12, 1, attributes=codec)
    path = write(tmp_path, noop_batch(0), bad, noop_batch(2))
    check_fail(path, len(noop_batch(0)), f"compressed batch \\({name}\\)")
    check_skip(path, [0, 2], (len(noop_batch(0)), len(bad)))


def test_corrupt_gzip(tmp_path: Path) -> None:
    path = write(tmp_path, raw_batch(0, b"not gzip at all", 1, attributes=1))
    check_fail(path, 0, "gzip")


def test_garbage_file(tmp_path: Path) -> None:
    blob = os.urandom(4096)
    path = write(tmp_path, blob)
    with pytest.raises(DecodeError) as info:
        list(read_log_entries(path))
    assert info.value.source == str(path) and info.value.position == 0
    report = ReadReport()
    assert list(read_log_entries(path, policy="skip", report=report)) == []
    assert report.skipped[0].position == 0 and report.skipped_bytes == 4096


def test_text_file_is_not_a_metadata_log(tmp_path: Path) -> None:
    path = write(tmp_path, b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n" * 3, name="partition.metadata")
    with pytest.raises(DecodeError, match=r"partition\.metadata.*byte 0"):
        list(read_log_entries(path))


def test_garbage_between_good_batches_is_skipped_by_resync(tmp_path: Path) -> None:
    junk = b"\x02" * 30 + os.urandom(200) + b"\x02\x02"
    parts = [noop_batch(0), noop_batch(1), junk, noop_batch(2)]
    path = write(tmp_path, *parts)
    at = positions(*parts)[2]
    check_skip(path, [0, 1, 2], (at, len(junk)))


def test_several_faults_in_one_file(tmp_path: Path) -> None:
    crc_bad = bytearray(noop_batch(1))
    crc_bad[-1] ^= 0x10
    parts = [noop_batch(0), bytes(crc_bad), noop_batch(2), raw_batch(3, b"\x00", 1, magic=0), noop_batch(4),
             noop_batch(5)[:20]]
    path = write(tmp_path, *parts)
    pos = positions(*parts)
    report = check_skip(path, [0, 2, 4], (pos[1], len(parts[1])), (pos[3], len(parts[3])), (pos[5], 20))
    assert "3 region(s)" in report.summary()
