"""Load a KRaft metadata log directory: segments and snapshots of one node, or several nodes' copies merged.

What Kafka does at startup (``KafkaMetadataLog`` + ``MetadataLoader``): load the latest snapshot, then replay
the log from the snapshot's end offset. :meth:`MetadataLog.read` produces that entry stream, or the full log
from offset 0. ``until_offset`` is exclusive, with the snapshot end-offset convention: only records with
offset ``< N`` are read, and only snapshots with ``end_offset <= N`` are eligible — so the image after
``read(until_offset=N)`` is the state a snapshot named ``N-…`` would hold.

Several nodes' copies of one cluster's log (e.g. each controller's ``__cluster_metadata-0``) are merged by
offset. Raft guarantees that two logs holding the same offset in the same epoch hold the same record, so a
record present in several copies must be byte-identical there (same value, same kind, same leader epoch and
timestamp); anything else means the copies diverged or one is corrupt, and is a :class:`DecodeError` naming
both files. Merging also fills holes: a batch skipped as corrupt in one copy is taken from another.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import cast

from jbod_model.errors import DecodeError, InputError
from jbod_model.records.control import ControlEntry, SnapshotFooterRecord, SnapshotHeaderRecord
from jbod_model.records.entry import LogEntry, new_log_entry
from jbod_model.storage.files import (
    BOOTSTRAP_FILE_NAME,
    METADATA_PARTITION_DIR,
    FileKind,
    SnapshotId,
    file_kind,
    parse_segment_name,
    parse_snapshot_name,
)
from jbod_model.storage.log_reader import (
    DEFAULT_MAX_BATCH_BYTES,
    MissingOffsets,
    ReadPolicy,
    ReadReport,
    SkippedRegion,
    iter_decoded,
    iter_entry_batches,
)


@dataclass(frozen=True, slots=True, order=True)
class SegmentFile:
    """A ``<base offset>.log`` segment."""

    base_offset: int
    path: Path = field(compare=False)


@dataclass(frozen=True, slots=True, order=True)
class SnapshotFile:
    """A ``<end offset>-<epoch>.checkpoint`` snapshot. Offsets inside it are local (from 0)."""

    snapshot_id: SnapshotId
    path: Path = field(compare=False)

    @property
    def end_offset(self) -> int:
        return self.snapshot_id.end_offset

    @property
    def epoch(self) -> int:
        return self.snapshot_id.epoch


@dataclass(frozen=True, slots=True)
class MetadataLogDir:
    """One node's metadata log: the ``__cluster_metadata-0`` directory, its segments (by base offset) and
    snapshots (by id), and the ``bootstrap.checkpoint`` beside it when present."""

    partition_dir: Path
    segments: tuple[SegmentFile, ...]
    snapshots: tuple[SnapshotFile, ...]
    bootstrap: Path | None = None

    @classmethod
    def open(cls, path: str | Path) -> MetadataLogDir:
        """Open a metadata log dir (the directory *containing* ``__cluster_metadata-0``) or the
        ``__cluster_metadata-0`` directory itself (files that are not segments or snapshots are ignored), or a
        single segment or snapshot file (by name or by content, see :func:`record_file`) as a log of that one
        file."""
        p = Path(path)
        if p.is_file():
            return cls.of_file(p)
        if not p.is_dir():
            raise InputError(f"{p} is not a directory")
        if (p / METADATA_PARTITION_DIR).is_dir():
            partition_dir, root = p / METADATA_PARTITION_DIR, p
        else:
            partition_dir, root = p, p.parent
        segments, snapshots = [], []
        for child in partition_dir.iterdir():
            if not child.is_file():
                continue
            base = parse_segment_name(child.name)
            if base is not None:
                segments.append(SegmentFile(base, child))
                continue
            snapshot_id = parse_snapshot_name(child.name)
            if snapshot_id is not None:
                snapshots.append(SnapshotFile(snapshot_id, child))
        if not segments and not snapshots and partition_dir.name != METADATA_PARTITION_DIR:
            raise InputError(f"{p} holds neither {METADATA_PARTITION_DIR}/ nor any segment or snapshot file")
        bootstrap = root / BOOTSTRAP_FILE_NAME
        return cls(partition_dir=partition_dir, segments=tuple(sorted(segments)),
                   snapshots=tuple(sorted(snapshots)), bootstrap=bootstrap if bootstrap.is_file() else None)

    @classmethod
    def of_file(cls, path: Path) -> MetadataLogDir:
        """A log made of one segment or snapshot file."""
        rf = record_file(path)
        if rf is None:
            raise InputError(f"{path}: neither a metadata segment nor a snapshot (it does not start with a valid "
                             "record batch: magic 2, a length that fits the file, a matching CRC)")
        if rf.kind is FileKind.SEGMENT:
            return cls(partition_dir=path.parent, segments=(SegmentFile(rf.base_offset, path),), snapshots=())
        assert rf.snapshot_id is not None
        return cls(partition_dir=path.parent, segments=(), snapshots=(SnapshotFile(rf.snapshot_id, path),))

    def latest_snapshot(self, until_offset: int | None = None) -> SnapshotFile | None:
        """The snapshot with the highest id whose end offset is ``<= until_offset`` (any, when ``None``)."""
        eligible = [s for s in self.snapshots if until_offset is None or s.end_offset <= until_offset]
        return max(eligible, default=None)


@dataclass(frozen=True, slots=True)
class RecordFile:
    """A file of record batches, classified by its name when Kafka named it, else by its content.

    ``base_offset`` is a segment's first offset (``LogSegment.baseOffset``: the 20 digits of its name, else the
    first batch's baseOffset); ``snapshot_id`` is a snapshot's id from its name, or ``SnapshotId(0, 0)`` when the
    name does not carry it (its records then stand for the state "before offset 0", like ``bootstrap.checkpoint``:
    the end offset Kafka named the file with is not written inside it)."""

    kind: FileKind
    path: Path
    base_offset: int = 0
    snapshot_id: SnapshotId | None = None


def record_file(path: str | Path) -> RecordFile | None:
    """What a file of record batches is, or None when it is not one.

    The name decides when it is one of Kafka's (``<20 digits>.log``, ``<20 digits>-<10 digits>.checkpoint``,
    ``bootstrap.checkpoint``): those names are exact, and a damaged file keeps its kind so that reading it reports
    the damage. Any other file is a segment or snapshot when it *starts* with a sound v2 batch (magic 2, a length
    that fits the file, a matching CRC-32C, records that decode — ``DefaultRecordBatch.ensureValid``): a snapshot
    when that batch is a control batch at offset 0 holding a SNAPSHOT_HEADER (``RecordsSnapshotWriter`` always
    writes one first), a segment otherwise."""
    p = Path(path)
    kind = file_kind(p)
    if kind is FileKind.SEGMENT:
        base = parse_segment_name(p.name)
        assert base is not None
        return RecordFile(kind, p, base_offset=base)
    if kind is FileKind.SNAPSHOT:
        return RecordFile(kind, p, snapshot_id=parse_snapshot_name(p.name))
    if kind is FileKind.BOOTSTRAP:
        return RecordFile(kind, p, snapshot_id=SnapshotId(0, 0))
    try:
        first = next(iter_decoded(p, policy="fail"), None)
    except DecodeError:
        return None
    if first is None:
        return None
    header, _fpos, _crc, _data, controls = first
    if controls and header[0] == 0 and isinstance(controls[0][1], SnapshotHeaderRecord):
        return RecordFile(FileKind.SNAPSHOT, p, snapshot_id=SnapshotId(0, 0))
    return RecordFile(FileKind.SEGMENT, p, base_offset=header[0])


# One record of one copy, for merging: (offset, copy index, entry, value bytes).
_Item = tuple[int, int, LogEntry | ControlEntry, bytes]


@dataclass(frozen=True, slots=True)
class MetadataLog:
    """One cluster's metadata log as found in one or more nodes' copies (see the module docstring)."""

    copies: tuple[MetadataLogDir, ...]

    @classmethod
    def open(cls, paths: str | Path | Sequence[str | Path]) -> MetadataLog:
        """Open one metadata log dir, or several nodes' copies of the same cluster's log."""
        items = [paths] if isinstance(paths, (str, Path)) else list(paths)
        if not items:
            raise InputError("no metadata log directory given")
        return cls(tuple(MetadataLogDir.open(p) for p in items))

    @property
    def snapshots(self) -> tuple[SnapshotFile, ...]:
        """Every snapshot of every copy, by id (copies of the same id appear once per copy)."""
        return tuple(sorted(s for c in self.copies for s in c.snapshots))

    def latest_snapshot(self, until_offset: int | None = None) -> SnapshotFile | None:
        """The latest snapshot of any copy with ``end_offset <= until_offset``; ties go to the first copy."""
        best: SnapshotFile | None = None
        for copy in self.copies:
            candidate = copy.latest_snapshot(until_offset)
            if candidate is not None and (best is None or candidate.snapshot_id > best.snapshot_id):
                best = candidate
        return best

    def read(self, *, from_snapshot: bool = True, until_offset: int | None = None, policy: ReadPolicy = "fail",
             report: ReadReport | None = None, max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES) -> MetadataStream:
        """The entries that rebuild the metadata image: the latest eligible snapshot then the log from its end
        offset (``from_snapshot``), or the full log from offset 0 — up to ``until_offset`` (exclusive)."""
        snapshot = self.latest_snapshot(until_offset) if from_snapshot else None
        return MetadataStream(log=self, snapshot=snapshot, until_offset=until_offset, policy=policy,
                              report=report if report is not None else ReadReport(),
                              max_batch_bytes=max_batch_bytes)

    def log_entries(self, *, start_offset: int = 0, until_offset: int | None = None, policy: ReadPolicy = "fail",
                    report: ReadReport | None = None, include_control: bool = False,
                    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES) -> Iterator[LogEntry | ControlEntry]:
        """The records of the log with ``start_offset <= offset < until_offset``, merged across copies and
        checked for contiguity: a missing offset is a :class:`DecodeError` under ``policy="fail"`` and a
        :class:`MissingOffsets` in the report under ``"skip"``. Control records are yielded only with
        ``include_control`` (they are always read, to check offsets and copies). Copies that disagree raise
        :class:`DecodeError` whatever the policy: nothing tells which copy is right.

        One copy — what every replay and the Spark job's source read — takes :meth:`_single_copy_batches`: the
        same entries, checks and faults as :meth:`merged_entries`, handed on a batch at a time (one generator per
        batch instead of three per record)."""
        rep = report if report is not None else ReadReport()
        if len(self.copies) == 1:
            return chain.from_iterable(self._single_copy_batches(start_offset, until_offset, policy, rep,
                                                                 include_control, max_batch_bytes))
        return self.merged_entries(start_offset, until_offset, policy, rep, include_control, max_batch_bytes)

    def merged_entries(self, start: int, until: int | None, policy: ReadPolicy, report: ReadReport,
                       include_control: bool, max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
                       ) -> Iterator[LogEntry | ControlEntry]:
        """:meth:`log_entries` record by record: every copy's records merged by offset. The reference path: it reads
        several copies, and the one-copy path is held to it by property tests
        (``tests/properties/test_log_read_properties.py``)."""
        streams = [self._copy_items(i, start, until, policy, report, max_batch_bytes)
                   for i in range(len(self.copies))]
        merged: Iterable[_Item] = streams[0] if len(streams) == 1 else heapq.merge(*streams, key=lambda t: t[0])
        offsets = _Contiguity(start, policy, report)
        for item in merged:
            if offsets.accept(item) and (include_control or isinstance(item[2], LogEntry)):
                yield item[2]

    def _segments(self, index: int, start: int, until: int | None) -> list[SegmentFile]:
        """The segments of copy ``index`` that may hold offsets in ``[start, until)``, in base-offset order."""
        segments = self.copies[index].segments
        out = []
        for i, segment in enumerate(segments):
            if until is not None and segment.base_offset >= until:
                break
            if i + 1 < len(segments) and segments[i + 1].base_offset <= start:
                continue  # the whole segment lies before the start offset
            out.append(segment)
        return out

    def _single_copy_batches(self, start: int, until: int | None, policy: ReadPolicy, report: ReadReport,
                             include_control: bool, max_batch_bytes: int,
                             ) -> Iterator[Sequence[LogEntry | ControlEntry]]:
        """The records of a single copy, as :meth:`merged_entries` gives them, in lists: a whole batch of metadata
        records at a time when its offsets simply continue the log (deltas 0, 1, 2, … from the next expected
        offset, all inside ``[start, until)``), else record by record through the same checks as the reference
        path, each record handed on before the next is checked (so a fault comes after the same records as there);
        a control batch's records (a batch holds one kind or the other) only with ``include_control``."""
        offsets = _Contiguity(start, policy, report)
        last = -1  # the last offset read from this copy: as in _copy_items
        for segment in self._segments(0, start, until):
            source = str(segment.path)
            for header, fpos, entries, controls, values, counting in iter_entry_batches(
                    segment.path, policy=policy, report=report, max_batch_bytes=max_batch_bytes, skip_before=start):
                base, last_in_batch = header[0], header[0] + header[6]
                if last_in_batch < start:
                    continue
                if until is not None and base >= until:
                    return
                if base <= last:
                    _overlap(base, last, source, fpos, header[1], policy, report)
                    continue
                last = last_in_batch
                n = len(entries)
                if (n and counting and base == offsets.expected and base >= start
                        and (until is None or base + n <= until)):
                    offsets.took(base + n - 1, 0, entries[-1], values[-1])
                    yield entries
                    continue
                records: Sequence[LogEntry | ControlEntry] = entries or controls
                for k, entry in enumerate(records):
                    offset = entry.offset
                    if offset >= start and (until is None or offset < until) and offsets.accept(
                            (offset, 0, entry, values[k])) and (include_control or isinstance(entry, LogEntry)):
                        yield (entry,)

    def _copy_items(self, index: int, start: int, until: int | None, policy: ReadPolicy, report: ReadReport,
                    max_batch_bytes: int) -> Iterator[_Item]:
        """One copy's records in ``[start, until)``, in offset order, from its segments in base-offset
        order."""
        # The last offset read from this copy: none yet. (Not ``start - 1``: the first batch read may begin before
        # ``start`` when ``start`` falls inside a batch, and that is no overlap.)
        last = -1
        for segment in self._segments(index, start, until):
            source = str(segment.path)
            for header, fpos, _crc, data, controls in iter_decoded(segment.path, policy=policy, report=report,
                                                                   max_batch_bytes=max_batch_bytes, skip_before=start):
                base, epoch, ts = header[0], header[2], header[7]
                if base + header[6] < start:
                    continue
                if until is not None and base >= until:
                    return
                if base <= last:
                    _overlap(base, last, source, fpos, header[1], policy, report)
                    continue
                for od, rec, value in data:
                    offset = base + od
                    if offset >= start and (until is None or offset < until):
                        yield offset, index, new_log_entry(offset, rec, base, epoch, ts, source), value
                for od, crec, value in controls:
                    offset = base + od
                    if offset >= start and (until is None or offset < until):
                        yield offset, index, ControlEntry(offset, crec, base, epoch, ts, source), value
                last = base + header[6]


def _overlap(base: int, last: int, source: str, position: int, batch_length: int, policy: ReadPolicy,
             report: ReadReport) -> None:
    """A batch starting at or before the last offset already read from its copy: raised, or skipped whole."""
    err = DecodeError(f"batch at offset {base} overlaps offsets already read (up to {last}); segments must not "
                      "overlap", source=source, position=position)
    if policy == "fail":
        raise err
    report.skipped.append(SkippedRegion(source, position, batch_length + 12, err.reason, base))


class _Contiguity:
    """The offsets of the merged log checked as they come: a record at the offset just taken is another copy's
    (checked to be the same record, then dropped), a later one must be the next expected offset (a hole is a
    fault, or a :class:`MissingOffsets` under ``skip``)."""

    __slots__ = ("chosen", "expected", "policy", "report")

    def __init__(self, start: int, policy: ReadPolicy, report: ReadReport) -> None:
        self.expected = start
        self.chosen: _Item | None = None
        self.policy = policy
        self.report = report

    def accept(self, item: _Item) -> bool:
        """Whether ``item`` is taken (False: a copy of the record just taken)."""
        offset = item[0]
        chosen = self.chosen
        if chosen is not None and offset == chosen[0]:
            _check_same(chosen, item)
            return False
        if offset != self.expected:
            _gap(self.expected, offset, chosen is None, self.policy, self.report)
        self.expected = offset + 1
        self.chosen = item
        return True

    def took(self, offset: int, index: int, entry: LogEntry | ControlEntry, value: bytes) -> None:
        """Records up to ``offset`` (the next expected one, and those right after it) were taken without a check:
        the last of them is ``entry``."""
        self.expected = offset + 1
        self.chosen = (offset, index, entry, value)


def _gap(expected: int, got: int, at_start: bool, policy: ReadPolicy, report: ReadReport) -> None:
    if got < expected:  # pragma: no cover - each copy is checked to be increasing
        raise DecodeError(f"offset {got} read after offset {expected - 1}")
    if at_start and expected == 0:
        why = "the log's start was truncated (read from a snapshot instead)"
    elif at_start:
        why = f"the log starts at offset {got}, after the snapshot's end offset {expected}"
    else:
        why = "no copy holds them"
    if policy == "fail":
        raise DecodeError(f"offsets {expected}..{got - 1} are missing from the log: {why}")
    report.missing.append(MissingOffsets(expected, got, why))


def _check_same(kept: _Item, other: _Item) -> None:
    """Two copies' records at one offset must be the same record (Raft's Log Matching property)."""
    a, b = kept[2], other[2]
    if (type(a) is not type(b) or kept[3] != other[3] or a.leader_epoch != b.leader_epoch
            or a.timestamp != b.timestamp):
        raise DecodeError(f"copies disagree at offset {kept[0]}: {a.source} has "
                          f"{type(a).__name__}(epoch {a.leader_epoch}, {len(kept[3])}-byte value) but {b.source} "
                          f"has {type(b).__name__}(epoch {b.leader_epoch}, {len(other[3])}-byte value)",
                          source=b.source)


@dataclass(frozen=True, slots=True)
class MetadataStream:
    """The entries that rebuild one image: :meth:`snapshot_entries` (offsets local to the snapshot file) then
    :meth:`log_entries` (log offsets from ``snapshot_end_offset``). Iterating the stream yields both, and can
    be repeated. ``snapshot_end_offset`` lets a caller rebase snapshot provenance: the snapshot's records
    stand for the state after log offset ``snapshot_end_offset - 1``."""

    log: MetadataLog
    snapshot: SnapshotFile | None
    until_offset: int | None
    policy: ReadPolicy
    report: ReadReport = field(compare=False)
    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES

    @property
    def snapshot_end_offset(self) -> int:
        """The first log offset read after the snapshot (0 without a snapshot)."""
        return self.snapshot.end_offset if self.snapshot is not None else 0

    def snapshot_entries(self) -> Iterator[LogEntry]:
        """The snapshot's metadata records (header and footer control records are checked, not yielded)."""
        if self.snapshot is None:
            return iter(())
        return read_snapshot_entries(self.snapshot.path, policy=self.policy, report=self.report,
                                     max_batch_bytes=self.max_batch_bytes)

    def log_entries(self) -> Iterator[LogEntry]:
        """The log's metadata records from ``snapshot_end_offset`` up to ``until_offset`` (exclusive)."""
        # Without include_control the log yields LogEntry only; returned as is, without a generator per record.
        return cast(Iterator[LogEntry], self.log.log_entries(
            start_offset=self.snapshot_end_offset, until_offset=self.until_offset, policy=self.policy,
            report=self.report, max_batch_bytes=self.max_batch_bytes))

    def __iter__(self) -> Iterator[LogEntry]:
        yield from self.snapshot_entries()
        yield from self.log_entries()


def read_snapshot_entries(path: str | Path, *, policy: ReadPolicy = "fail", report: ReadReport | None = None,
                          max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES) -> Iterator[LogEntry]:
    """The metadata records of a snapshot (or ``bootstrap.checkpoint``), with offsets local to the file, after
    checking the layout ``RecordsSnapshotWriter`` guarantees: a SNAPSHOT_HEADER at offset 0 and a
    SNAPSHOT_FOOTER as the last record (a snapshot without its footer was never frozen)."""
    source = str(path)
    rep = report if report is not None else ReadReport()
    first = True
    last_was_footer = False
    end_position = 0
    for header, fpos, _crc, data, controls in iter_decoded(path, policy=policy, report=rep,
                                                           max_batch_bytes=max_batch_bytes):
        if first:
            first = False
            if not (controls and header[0] == 0 and isinstance(controls[0][1], SnapshotHeaderRecord)):
                _layout_fault(f"{Path(path).name} does not start with a SNAPSHOT_HEADER control record at offset 0",
                              source, fpos, policy, rep)
        end_position = fpos + header[1] + 12
        last_was_footer = bool(controls) and isinstance(controls[-1][1], SnapshotFooterRecord)
        base, epoch, ts = header[0], header[2], header[7]
        for od, rec, _value in data:
            yield LogEntry(base + od, rec, base, epoch, ts, source)
    if not last_was_footer:
        _layout_fault(f"{Path(path).name} does not end with a SNAPSHOT_FOOTER control record (incomplete snapshot)",
                      source, end_position, policy, rep)


def read_snapshot_header(path: str | Path) -> SnapshotHeaderRecord:
    """The SNAPSHOT_HEADER of a snapshot file (its ``lastContainedLogTimestamp``)."""
    for _header, fpos, _crc, _data, controls in iter_decoded(path):
        if controls and isinstance(controls[0][1], SnapshotHeaderRecord):
            return controls[0][1]
        raise DecodeError("the first batch does not hold a SNAPSHOT_HEADER", source=str(path), position=fpos)
    raise DecodeError("empty snapshot file", source=str(path), position=0)


def _layout_fault(reason: str, source: str, position: int, policy: ReadPolicy, report: ReadReport) -> None:
    if policy == "fail":
        raise DecodeError(reason, source=source, position=position)
    report.skipped.append(SkippedRegion(source, position, 0, reason))


def read_metadata_log(paths: str | Path | Sequence[str | Path], *, from_snapshot: bool = True,
                      until_offset: int | None = None, policy: ReadPolicy = "fail",
                      report: ReadReport | None = None) -> MetadataStream:
    """Shorthand for ``MetadataLog.open(paths).read(...)``."""
    return MetadataLog.open(paths).read(from_snapshot=from_snapshot, until_offset=until_offset, policy=policy,
                                        report=report)
