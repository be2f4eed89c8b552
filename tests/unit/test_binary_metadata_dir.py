"""Metadata log directories: file names, snapshot + log streams, ``until_offset``, and merging nodes'
copies."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

import pytest

from jbod_model.errors import DecodeError, InputError
from jbod_model.records.control import ControlEntry, LeaderChangeMessage, Voter
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import FeatureLevelRecord, NoOpRecord, Record, TopicRecord
from jbod_model.storage.files import (
    FileKind,
    SnapshotId,
    file_kind,
    parse_segment_name,
    parse_snapshot_name,
    segment_file_name,
    snapshot_file_name,
)
from jbod_model.storage.log_reader import MissingOffsets, ReadReport
from jbod_model.storage.log_writer import (
    encode_batch_bytes,
    encode_data_batch,
    snapshot_path,
    write_segment,
    write_snapshot,
)
from jbod_model.storage.metadata_dir import (
    MetadataLog,
    MetadataLogDir,
    read_metadata_log,
    read_snapshot_entries,
)
from jbod_model.uuid import Uuid

REPO_ROOT = Path(__file__).resolve().parents[2]
SAMPLES = REPO_ROOT / ".." / "shared" / "kraft-metadata-samples"
TS = 1_700_000_000_000
PARTITION_DIR = "__cluster_metadata-0"


# --- file names ---------------------------------------------------------------------------------------------


def test_file_names() -> None:
    assert segment_file_name(5151) == "00000000000000005151.log"
    assert snapshot_file_name(46533, 4) == "00000000000000046533-0000000004.checkpoint"
    assert parse_segment_name("00000000000000005151.log") == 5151
    assert parse_snapshot_name("00000000000000046533-0000000004.checkpoint") == SnapshotId(46533, 4)
    assert SnapshotId(46533, 4).last_contained_offset == 46532
    for other in ("00000000000000046533-0000000004.checkpoint.part", "00000000000000046533-0000000004"
                  ".checkpoint.deleted", "00000000000000005151.index", "00000000000000005151.timeindex",
                  "00000000000000005151.snapshot", "5151.log", "leader-epoch-checkpoint", "quorum-state"):
        assert parse_segment_name(other) is None and parse_snapshot_name(other) is None
        assert file_kind(other) is FileKind.OTHER
    assert file_kind("bootstrap.checkpoint") is FileKind.BOOTSTRAP
    assert file_kind("/x/00000000000000000000.log") is FileKind.SEGMENT
    assert file_kind("00000000000000000007-0000000001.checkpoint") is FileKind.SNAPSHOT
    with pytest.raises(InputError):
        snapshot_file_name(-1, 0)
    with pytest.raises(InputError):
        segment_file_name(10**20)


# --- generated clusters -------------------------------------------------------------------------------------


def cluster_entries(n: int, epoch_change_at: int = 40) -> list[LogEntry | ControlEntry]:
    """A log of ``n`` records: leader changes at 0 and ``epoch_change_at``, topics every 7th offset, NoOps."""
    out: list[LogEntry | ControlEntry] = []
    for offset in range(n):
        epoch = 1 if offset < epoch_change_at else 2
        if offset in (0, epoch_change_at):
            out.append(ControlEntry(offset, LeaderChangeMessage(leader_id=epoch, voters=(Voter(voter_id=1),)),
                                    leader_epoch=epoch, timestamp=TS + offset))
            continue
        record: Record = (FeatureLevelRecord(name="metadata.version", feature_level=20) if offset == 1
                          else TopicRecord(name=f"t{offset}", topic_id=Uuid(1, offset)) if offset % 7 == 0
                          else NoOpRecord())
        out.append(LogEntry(offset, record, leader_epoch=epoch, timestamp=TS + offset))
    return out


def write_node(root: Path, entries: Sequence[LogEntry | ControlEntry], *, segment_starts: Sequence[int] = (0,),
               snapshots: Sequence[int] = (), noise: bool = True) -> Path:
    """A node's metadata log dir: segments starting at ``segment_starts`` (one batch per entry), snapshots of
    the image at each end offset, a bootstrap checkpoint, and the files a reader must ignore."""
    part = root / PARTITION_DIR
    part.mkdir(parents=True)
    bounds = [*segment_starts, entries[-1].offset + 1]
    for start, end in itertools.pairwise(bounds):
        write_segment(part / segment_file_name(start), [[e] for e in entries if start <= e.offset < end])
    for end_offset in snapshots:
        data = [e.record for e in entries if isinstance(e, LogEntry) and e.offset < end_offset
                and not isinstance(e.record, NoOpRecord)]
        write_snapshot(snapshot_path(part, SnapshotId(end_offset, 1)), data, epoch=1,
                       last_contained_log_timestamp=TS + end_offset - 1, timestamp=TS + end_offset)
    write_snapshot(root / "bootstrap.checkpoint", [FeatureLevelRecord(name="metadata.version", feature_level=20)],
                   epoch=0, last_contained_log_timestamp=0, timestamp=TS)
    if noise:
        for name in ("00000000000000000000.index", "00000000000000000000.timeindex",
                     "00000000000000000000.snapshot", "00000000000000000099-0000000001.checkpoint.part",
                     "00000000000000000098-0000000001.checkpoint.deleted", "quorum-state",
                     "leader-epoch-checkpoint", "partition.metadata"):
            (part / name).write_bytes(b"not a metadata log\n")
        (part / "subdir.log").mkdir()
    return root


def data_offsets(entries: Sequence[LogEntry | ControlEntry], lo: int = 0, hi: int | None = None) -> list[int]:
    return [e.offset for e in entries if isinstance(e, LogEntry) and e.offset >= lo and (hi is None or e.offset < hi)]


def test_open_lists_segments_and_snapshots(tmp_path: Path) -> None:
    root = write_node(tmp_path / "node1", cluster_entries(100), segment_starts=(0, 30, 70), snapshots=(50, 20))
    node = MetadataLogDir.open(root)
    assert node.partition_dir == root / PARTITION_DIR
    assert [s.base_offset for s in node.segments] == [0, 30, 70]
    assert [s.snapshot_id for s in node.snapshots] == [SnapshotId(20, 1), SnapshotId(50, 1)]
    assert node.bootstrap == root / "bootstrap.checkpoint"
    assert MetadataLogDir.open(root / PARTITION_DIR) == node  # the partition dir itself works too
    latest = node.latest_snapshot()
    assert latest is not None and latest.end_offset == 50
    snap20 = node.latest_snapshot(until_offset=49)
    assert snap20 is not None and snap20.end_offset == 20
    assert node.latest_snapshot(until_offset=19) is None


def test_open_rejects_what_is_not_a_log_dir(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a directory"):
        MetadataLogDir.open(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="neither"):
        MetadataLogDir.open(tmp_path / "empty")
    with pytest.raises(InputError):
        MetadataLog.open([])


def test_full_log_across_segments(tmp_path: Path) -> None:
    entries = cluster_entries(100)
    root = write_node(tmp_path / "n", entries, segment_starts=(0, 30, 70), snapshots=(50,))
    stream = read_metadata_log(root, from_snapshot=False)
    assert stream.snapshot is None and stream.snapshot_end_offset == 0
    got = list(stream)
    assert [e.offset for e in got] == data_offsets(entries)
    assert got[0].record == FeatureLevelRecord(name="metadata.version", feature_level=20)
    assert got[6].offset == 7 and got[6].record == TopicRecord(name="t7", topic_id=Uuid(1, 7))
    assert {e.source for e in got} == {str(root / PARTITION_DIR / segment_file_name(s)) for s in (0, 30, 70)}
    assert list(stream) == got  # a stream can be iterated again


def test_snapshot_then_log(tmp_path: Path) -> None:
    entries = cluster_entries(100)
    root = write_node(tmp_path / "n", entries, segment_starts=(0, 30, 70), snapshots=(20, 50))
    stream = MetadataLog.open(root).read()
    assert stream.snapshot is not None and stream.snapshot_end_offset == 50
    snap = list(stream.snapshot_entries())
    assert [e.record for e in snap] == [e.record for e in entries if isinstance(e, LogEntry) and e.offset < 50
                                        and not isinstance(e.record, NoOpRecord)]
    assert snap[0].offset == 1 and snap[0].source == str(stream.snapshot.path)  # local offsets
    assert [e.offset for e in stream.log_entries()] == data_offsets(entries, 50)
    assert list(stream) == snap + list(stream.log_entries())


def test_until_offset_is_exclusive_and_selects_the_snapshot(tmp_path: Path) -> None:
    entries = cluster_entries(100)
    root = write_node(tmp_path / "n", entries, segment_starts=(0, 30, 70), snapshots=(20, 50))
    log = MetadataLog.open(root)
    stream = log.read(until_offset=49)
    assert stream.snapshot is not None and stream.snapshot.end_offset == 20
    assert [e.offset for e in stream.log_entries()] == data_offsets(entries, 20, 49)
    assert [e.offset for e in log.read(until_offset=50).log_entries()] == []
    assert [e.offset for e in log.read(until_offset=10).log_entries()] == data_offsets(entries, 0, 10)
    assert [e.offset for e in log.read(from_snapshot=False, until_offset=71)] == data_offsets(entries, 0, 71)


def test_control_records_on_request(tmp_path: Path) -> None:
    entries = cluster_entries(60)
    root = write_node(tmp_path / "n", entries)
    got = list(MetadataLog.open(root).log_entries(start_offset=35, include_control=True))
    assert [e.offset for e in got] == list(range(35, 60))
    assert isinstance(got[5], ControlEntry) and got[5].offset == 40


def test_truncated_log_start_is_reported(tmp_path: Path) -> None:
    entries = cluster_entries(60)[30:]
    root = write_node(tmp_path / "n", entries, segment_starts=(30,))
    with pytest.raises(DecodeError, match=r"offsets 0\.\.29 are missing.*snapshot"):
        list(read_metadata_log(root, from_snapshot=False))
    report = ReadReport()
    assert [e.offset for e in read_metadata_log(root, from_snapshot=False, policy="skip", report=report)] == (
        data_offsets(entries))
    assert report.missing == [MissingOffsets(0, 30, "the log's start was truncated (read from a snapshot instead)")]
    assert not report.skipped and not report.clean and "30 offset(s) missing" in report.summary()


def test_a_hole_no_copy_fills(tmp_path: Path) -> None:
    entries = cluster_entries(50)
    root = write_node(tmp_path / "n", [e for e in entries if not 20 <= e.offset < 25], segment_starts=(0, 25),
                      noise=False)
    with pytest.raises(DecodeError, match=r"offsets 20\.\.24 are missing from the log: no copy holds them"):
        list(read_metadata_log(root, from_snapshot=False))


# --- several copies -----------------------------------------------------------------------------------------


def test_copies_are_merged_and_deduplicated(tmp_path: Path) -> None:
    entries = cluster_entries(120)
    a = write_node(tmp_path / "a", entries[:80], segment_starts=(0, 40))
    b = write_node(tmp_path / "b", entries[20:], segment_starts=(20, 90), snapshots=(60,))
    log = MetadataLog.open([a, b])
    assert [e.offset for e in log.read(from_snapshot=False)] == data_offsets(entries)
    stream = log.read()
    assert stream.snapshot is not None and stream.snapshot.path.parent.parent == b
    assert [e.offset for e in stream.log_entries()] == data_offsets(entries, 60)
    # Offsets both copies hold are taken from the first copy given.
    sources = {e.offset: e.source for e in log.read(from_snapshot=False)}
    assert sources[30] is not None and sources[30].startswith(str(a))
    assert sources[100] is not None and sources[100].startswith(str(b))


def test_a_corrupt_batch_in_one_copy_is_filled_from_another(tmp_path: Path) -> None:
    entries = cluster_entries(50)
    a = write_node(tmp_path / "a", entries, noise=False)
    b = write_node(tmp_path / "b", entries, noise=False)
    segment = a / PARTITION_DIR / segment_file_name(0)
    data = bytearray(segment.read_bytes())
    data[-30] ^= 0xFF  # inside the last batch but one or so: a CRC failure in copy a only
    segment.write_bytes(bytes(data))
    with pytest.raises(DecodeError, match="corrupt"):
        list(read_metadata_log([a, b], from_snapshot=False))
    report = ReadReport()
    got = [e.offset for e in read_metadata_log([a, b], from_snapshot=False, policy="skip", report=report)]
    assert got == data_offsets(entries)
    assert len(report.skipped) == 1 and report.skipped[0].source == str(segment)


def test_copies_that_disagree_are_a_fault(tmp_path: Path) -> None:
    entries = cluster_entries(50)
    a = write_node(tmp_path / "a", entries, noise=False)
    forked = [LogEntry(e.offset, TopicRecord(name="forked", topic_id=Uuid(9, 9)), leader_epoch=e.leader_epoch,
                       timestamp=e.timestamp) if e.offset == 33 else e for e in entries]
    b = write_node(tmp_path / "b", forked, noise=False)
    with pytest.raises(DecodeError, match="copies disagree at offset 33") as info:
        list(read_metadata_log([a, b], from_snapshot=False))
    assert str(a) in str(info.value) and str(b) in str(info.value)


def test_identical_bytes_in_different_epochs_are_a_fault(tmp_path: Path) -> None:
    # NoOps are byte-identical, so only the batch's leader epoch tells diverged logs apart.
    entries = cluster_entries(50)
    a = write_node(tmp_path / "a", entries, noise=False)
    other = [LogEntry(e.offset, e.record, leader_epoch=7, timestamp=e.timestamp) if e.offset == 44 else e
             for e in entries]
    b = write_node(tmp_path / "b", other, noise=False)
    with pytest.raises(DecodeError, match=r"offset 44.*epoch 2.*epoch 7"):
        list(read_metadata_log([a, b], from_snapshot=False))


def test_overlapping_segments_in_one_copy(tmp_path: Path) -> None:
    entries = cluster_entries(30)
    root = write_node(tmp_path / "n", entries, segment_starts=(0, 20), noise=False)
    # A segment named 25 whose batch is at offset 5: it overlaps what segments 0 and 20 already hold.
    extra = root / PARTITION_DIR / segment_file_name(25)
    extra.write_bytes(encode_data_batch([NoOpRecord()], base_offset=5, leader_epoch=1, timestamp=TS))
    with pytest.raises(DecodeError, match="overlaps"):
        list(read_metadata_log(root, from_snapshot=False))


# --- snapshot layout ----------------------------------------------------------------------------------------


def test_snapshot_without_footer_or_header(tmp_path: Path) -> None:
    good = write_snapshot(tmp_path / "00000000000000000005-0000000001.checkpoint",
                          [TopicRecord(name="t", topic_id=Uuid(1, 1))], epoch=1, last_contained_log_timestamp=0,
                          timestamp=TS)
    data = good.read_bytes()
    header_len = 12 + int.from_bytes(data[8:12], "big")
    no_header = tmp_path / "no-header.checkpoint"
    no_header.write_bytes(data[header_len:])
    with pytest.raises(DecodeError, match="SNAPSHOT_HEADER"):
        list(read_snapshot_entries(no_header))
    no_footer = tmp_path / "no-footer.checkpoint"
    starts, pos = [], 0
    while pos < len(data):  # walk the batches to find where the footer batch starts
        starts.append(pos)
        pos += 12 + int.from_bytes(data[pos + 8:pos + 12], "big")
    cut = data[:starts[-1]]
    assert len(data) - len(cut) == 61 + 14  # header overhead + one 14-byte SNAPSHOT_FOOTER record
    no_footer.write_bytes(cut)
    with pytest.raises(DecodeError, match="SNAPSHOT_FOOTER") as info:
        list(read_snapshot_entries(no_footer))
    assert info.value.position == len(cut)
    report = ReadReport()
    assert len(list(read_snapshot_entries(no_footer, policy="skip", report=report))) == 1
    assert "incomplete" in report.skipped[0].reason


# --- real samples -------------------------------------------------------------------------------------------


@pytest.mark.samples
def test_greenlemont_three_copies() -> None:
    base = SAMPLES / "greenlemont-3node-kafka3.5" / "data"
    if not base.is_dir():
        pytest.skip(f"real Kafka samples not found at {SAMPLES}")
    log = MetadataLog.open([base / "kafka1", base / "kafka2", base / "kafka3"])
    stream = log.read()
    assert stream.snapshot is not None and stream.snapshot.snapshot_id == SnapshotId(28870, 189)
    assert stream.snapshot.path.parent.parent.name == "kafka3"
    report = ReadReport()
    entries = list(log.read(from_snapshot=False, report=report))
    # Every data record of kafka1's log (RECORD_COUNTS.txt): the snapshot-only copies add nothing before
    # 28870.
    assert len(entries) == 80 + 31 + 3 + 1 + 26698 + 3664 + 55 + 1 + 39 + 6 + 1
    assert [e.offset for e in entries] == sorted({e.offset for e in entries})
    assert report.clean


def test_log_starting_after_the_snapshot_end(tmp_path: Path) -> None:
    entries = cluster_entries(60)
    root = write_node(tmp_path / "n", entries[45:], segment_starts=(45,), snapshots=(), noise=False)
    write_snapshot(snapshot_path(root / PARTITION_DIR, SnapshotId(40, 1)), [NoOpRecord()], epoch=1,
                   last_contained_log_timestamp=0, timestamp=TS)
    with pytest.raises(DecodeError, match="log starts at offset 45, after the snapshot's end offset 40"):
        list(read_metadata_log(root))


def test_a_start_offset_inside_a_batch_reads_from_it(tmp_path: Path) -> None:
    """A reader resuming mid-batch (a streaming source whose micro-batch ended inside a batch) gets the rest of the
    batch: the batch begins before the start offset, which is no overlap."""
    part = tmp_path / "n" / PARTITION_DIR
    part.mkdir(parents=True)
    records = [LogEntry(i, NoOpRecord(), leader_epoch=1, timestamp=TS) for i in range(6)]
    write_segment(part / segment_file_name(0), [records[:2], records[2:5], records[5:]])
    log = MetadataLog.open(tmp_path / "n")
    assert [e.offset for e in log.log_entries(start_offset=3, until_offset=6)] == [3, 4, 5]
    assert [e.offset for e in log.log_entries(start_offset=4, until_offset=5)] == [4]


def test_batches_before_the_start_offset_are_not_decoded(tmp_path: Path) -> None:
    """A reader that starts inside a segment decodes only what it asked for: a batch wholly before ``start_offset``
    is framed and CRC-checked but its records are not decoded — a record there that cannot be decoded goes unseen,
    as it would in an earlier segment, which is not read at all. Read from its offset, it is a fault."""
    good = [encode_data_batch([NoOpRecord()], base_offset=o, leader_epoch=1, timestamp=TS) for o in (0, 2, 3)]
    # Offset 1: a record of an unknown frame version, in a batch whose CRC is right.
    bad = encode_batch_bytes([(None, b"\x7f\x00\x00")], base_offset=1, leader_epoch=1, timestamp=TS)
    part = tmp_path / "n" / PARTITION_DIR
    part.mkdir(parents=True)
    (part / segment_file_name(0)).write_bytes(good[0] + bad + good[1] + good[2])
    log = MetadataLog.open(tmp_path / "n")
    for include_control in (False, True):  # the single-copy path and the merge path
        report = ReadReport()
        got = list(log.log_entries(start_offset=2, policy="fail", report=report, include_control=include_control))
        assert [e.offset for e in got] == [2, 3] and report.records == 2
        with pytest.raises(DecodeError):
            list(log.log_entries(start_offset=1, policy="fail", include_control=include_control))
