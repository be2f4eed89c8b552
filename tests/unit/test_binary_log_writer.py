"""Writing batches, segments and snapshots the way KRaft does, down to the byte.

The byte-identity tests rewrite real Kafka files from ``../shared/kraft-metadata-samples`` (read in place,
never copied into the repository) and compare sha256; they skip when the samples are absent.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence
from pathlib import Path

import crc32c
import pytest

from jbod_model.errors import InputError
from jbod_model.records.control import (
    ControlEntry,
    KRaftVersionRecord,
    LeaderChangeMessage,
    SnapshotFooterRecord,
    SnapshotHeaderRecord,
    Voter,
)
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import FeatureLevelRecord, NoOpRecord, TopicRecord
from jbod_model.storage.files import SnapshotId
from jbod_model.storage.log_reader import iter_batches, read_entries, read_log_entries
from jbod_model.storage.log_writer import (
    SegmentWriter,
    SnapshotWriter,
    encode_batch,
    encode_data_batch,
    encode_leader_change_batch,
    group_into_batches,
    snapshot_path,
    write_segment,
    write_segment_entries,
    write_snapshot,
)
from jbod_model.storage.metadata_dir import read_snapshot_entries, read_snapshot_header
from jbod_model.uuid import Uuid

REPO_ROOT = Path(__file__).resolve().parents[2]
SAMPLES = REPO_ROOT / ".." / "shared" / "kraft-metadata-samples"
OTUS_LOG = SAMPLES / "otus-kafka-kafka3.8/data/__cluster_metadata-0/00000000000000000000.log"
INDUS_DIR = SAMPLES / "indus-local-test-rig-kafka4.2/kafka-data/__cluster_metadata-0"
INDUS_LOG = INDUS_DIR / "00000000000000000000.log"
INDUS_SNAPSHOT = INDUS_DIR / "00000000000000046533-0000000004.checkpoint"
GREEN_SNAPSHOT = (SAMPLES / "greenlemont-3node-kafka3.5/data/kafka1/__cluster_metadata-0"
                  / "00000000000000028869-0000000189.checkpoint")

TS = 1_700_000_000_000


def sample(path: Path) -> Path:
    if not path.is_file():
        pytest.skip(f"real Kafka sample {path.name} not found under {SAMPLES} (expected ../shared beside the repo)")
    return path


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- header conventions -------------------------------------------------------------------------------------


def test_data_batch_header_follows_kraft_conventions() -> None:
    batch = encode_data_batch([NoOpRecord(), NoOpRecord()], base_offset=7, leader_epoch=4, timestamp=TS)
    (base, length, epoch, magic, crc, attributes, last_delta, base_ts, max_ts, pid, pepoch, bseq,
     count) = struct.unpack_from(">qiibIhiqqqhii", batch)
    assert (base, length, epoch, magic, attributes, last_delta, count) == (7, len(batch) - 12, 4, 2, 0, 1, 2)
    assert base_ts == max_ts == TS and (pid, pepoch, bseq) == (-1, -1, -1)
    assert crc == crc32c.crc32c(batch[21:])
    # Each NoOp record: length 10, attributes 0, timestampDelta 0, offsetDelta i, null key, value 01 14 00 00,
    # no headers.
    assert batch[61:].hex() == "1400000001080114000000" + "1400000201080114000000"


def test_control_batch_attributes() -> None:
    batch = encode_leader_change_batch(base_offset=0, leader_epoch=1, timestamp=TS, leader_id=1, voters=[1])
    assert struct.unpack_from(">h", batch, 21)[0] == 0x20


def test_leader_change_batch_equals_the_real_one() -> None:
    real = sample(OTUS_LOG).read_bytes()[:91]  # formats doc §1.4 worked example
    assert encode_leader_change_batch(base_offset=0, leader_epoch=1, timestamp=1738908227548, leader_id=1,
                                      voters=[1]) == real


def test_encode_batch_checks_its_entries() -> None:
    with pytest.raises(InputError, match="at least one"):
        encode_batch([])
    with pytest.raises(InputError, match="consecutive"):
        encode_batch([LogEntry(0, NoOpRecord()), LogEntry(2, NoOpRecord())])
    with pytest.raises(InputError, match="mix"):
        encode_batch([LogEntry(0, NoOpRecord()), ControlEntry(1, SnapshotFooterRecord())])
    with pytest.raises(InputError, match="out of range"):
        encode_data_batch([NoOpRecord()], base_offset=0, leader_epoch=2**31, timestamp=0)


def test_encode_batch_takes_epoch_and_timestamp_from_the_first_entry() -> None:
    entries = [LogEntry(5, NoOpRecord(), leader_epoch=9, timestamp=TS), LogEntry(6, NoOpRecord())]
    assert encode_batch(entries) == encode_data_batch([NoOpRecord()] * 2, base_offset=5, leader_epoch=9,
                                                      timestamp=TS)


# --- segments -----------------------------------------------------------------------------------------------


def test_segment_round_trip_and_grouping(tmp_path: Path) -> None:
    entries: list[LogEntry | ControlEntry] = [
        ControlEntry(0, LeaderChangeMessage(leader_id=1, voters=(Voter(voter_id=1),)), leader_epoch=1, timestamp=TS)]
    entries += [LogEntry(i, NoOpRecord(), leader_epoch=1, timestamp=TS + i // 3) for i in range(1, 10)]
    path = write_segment_entries(tmp_path / "00000000000000000000.log", entries, max_records_per_batch=2)
    batches = list(iter_batches(path))
    # Control alone; then data cut at 2 records or when the timestamp changes.
    assert [(b.header.base_offset, b.header.records_count) for b in batches] == [
        (0, 1), (1, 2), (3, 2), (5, 1), (6, 2), (8, 1), (9, 1)]
    read = list(read_entries(path))
    assert [(e.offset, e.record, e.leader_epoch, e.timestamp) for e in read] == [
        (e.offset, e.record, e.leader_epoch, e.timestamp) for e in entries]
    assert not list(tmp_path.glob("*.part"))


def test_group_into_batches_rejects_zero() -> None:
    with pytest.raises(InputError):
        list(group_into_batches([], max_records_per_batch=0))


def test_segment_writer_is_atomic(tmp_path: Path) -> None:
    target = tmp_path / "00000000000000000000.log"
    with pytest.raises(InputError, match="contiguous"), SegmentWriter(target) as writer:
        writer.append_batch([LogEntry(0, NoOpRecord())])
        writer.append_batch([LogEntry(5, NoOpRecord())])
    assert list(tmp_path.iterdir()) == []


def test_segment_writer_appends_raw_batches(tmp_path: Path) -> None:
    with SegmentWriter(tmp_path / "x.log") as writer:
        writer.append_raw(encode_leader_change_batch(base_offset=0, leader_epoch=1, timestamp=TS, leader_id=1,
                                                     voters=[1]), next_offset=1)
        writer.append_batch([LogEntry(1, NoOpRecord(), leader_epoch=1, timestamp=TS)])
    assert [e.offset for e in read_entries(writer.path)] == [0, 1]


def _rewrite(path: Path, out: Path) -> Path:
    groups: list[Sequence[LogEntry | ControlEntry]] = [b.controls or b.entries for b in iter_batches(path)]
    return write_segment(out, groups)


@pytest.mark.samples
@pytest.mark.parametrize("path", [OTUS_LOG, INDUS_LOG], ids=["otus-3.8", "indus-4.2"])
def test_rewriting_a_real_segment_is_byte_identical(tmp_path: Path, path: Path) -> None:
    original = sample(path)
    assert sha(_rewrite(original, tmp_path / original.name)) == sha(original)


# --- snapshots ----------------------------------------------------------------------------------------------


@pytest.mark.samples
@pytest.mark.parametrize("path", [INDUS_SNAPSHOT, GREEN_SNAPSHOT], ids=["indus-4.2", "greenlemont-3.5"])
def test_snapshot_writer_reproduces_a_real_snapshot(tmp_path: Path, path: Path) -> None:
    original = sample(path)
    batches = list(iter_batches(original))
    header = batches[0].controls[0].record
    assert isinstance(header, SnapshotHeaderRecord)
    writer = SnapshotWriter(tmp_path / original.name, epoch=batches[0].header.partition_leader_epoch,
                            last_contained_log_timestamp=header.last_contained_log_timestamp,
                            timestamp=batches[0].header.base_timestamp)
    for batch in batches[1:-1]:
        writer.append([e.record for e in batch.entries], timestamp=batch.header.base_timestamp)
    written = writer.freeze(timestamp=batches[-1].header.base_timestamp)
    assert sha(written) == sha(original)


def test_write_snapshot_layout(tmp_path: Path) -> None:
    records = [FeatureLevelRecord(name="metadata.version", feature_level=20),
               *(TopicRecord(name=f"t{i}", topic_id=Uuid(1, i)) for i in range(5))]
    path = write_snapshot(snapshot_path(tmp_path, SnapshotId(120, 3)), records, epoch=3,
                          last_contained_log_timestamp=TS - 1, timestamp=TS, max_records_per_batch=4)
    assert path.name == "00000000000000000120-0000000003.checkpoint"
    batches = list(iter_batches(path))
    assert [(b.header.base_offset, b.header.records_count, b.is_control) for b in batches] == [
        (0, 1, True), (1, 4, False), (5, 2, False), (7, 1, True)]
    assert all(b.header.partition_leader_epoch == 3 for b in batches)
    assert isinstance(batches[-1].controls[0].record, SnapshotFooterRecord)
    assert read_snapshot_header(path) == SnapshotHeaderRecord(last_contained_log_timestamp=TS - 1)
    assert [e.record for e in read_snapshot_entries(path)] == records
    assert [e.offset for e in read_log_entries(path)] == list(range(1, 7))


def test_write_snapshot_splits_by_bytes(tmp_path: Path) -> None:
    records = [TopicRecord(name="x" * 100, topic_id=Uuid(1, i)) for i in range(10)]
    path = write_snapshot(tmp_path / "s.checkpoint", records, epoch=0, last_contained_log_timestamp=0,
                          timestamp=TS, max_batch_bytes=400)
    counts = [b.header.records_count for b in iter_batches(path) if not b.is_control]
    assert sum(counts) == 10 and max(counts) <= 3 and len(counts) > 1


def test_snapshot_header_extra_records(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000-0000000000.checkpoint"
    with SnapshotWriter(path, epoch=0, last_contained_log_timestamp=0, timestamp=TS,
                        header_extra=[KRaftVersionRecord(kraft_version=1)]) as writer:
        assert writer.next_offset == 2
        writer.append([FeatureLevelRecord(name="metadata.version", feature_level=21)])
    assert [(e.offset, type(e.record).__name__) for e in read_entries(path)] == [
        (0, "SnapshotHeaderRecord"), (1, "KRaftVersionRecord"), (2, "FeatureLevelRecord"),
        (3, "SnapshotFooterRecord")]


def test_snapshot_writer_aborts_cleanly(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000010-0000000001.checkpoint"
    with pytest.raises(RuntimeError), SnapshotWriter(path, epoch=1, last_contained_log_timestamp=0, timestamp=TS):
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []
    writer = SnapshotWriter(path, epoch=1, last_contained_log_timestamp=0, timestamp=TS)
    writer.freeze()
    with pytest.raises(InputError, match="frozen"):
        writer.freeze()
