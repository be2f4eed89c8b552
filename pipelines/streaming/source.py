"""The streaming source: KRaft metadata arriving as files, read as a Spark stream whose offsets are the metadata
log's own offsets, one input partition per cluster so each cluster's order is kept.

What it reads (``paths``: files or directories, searched recursively):

* a node's metadata log dir (the directory holding ``__cluster_metadata-0``, or that directory itself) — several
  nodes' copies of one cluster's log are merged by offset (``jbod_model.storage.MetadataLog``). The active segment
  may grow and new segments may appear: :func:`jbod_model.storage.tail.scan_tail` finds the end of the complete
  batches, incrementally. The stream starts at offset 0 when the log still holds it, else at the earliest snapshot
  the log continues from (its records come first, as ``kind = "snapshot"`` rows);
* canonical JSONL (``jbod_model.stream``: records and ``<API>_REQUEST`` entries), read line by line as it grows;
* ``kafka-dump-log`` text (``jbod_model.dumplog``), by record offset.

Each cluster is keyed by its cluster id: the ``cluster.id`` of the ``meta.properties`` beside the metadata log, else
the ``clusterIds`` option (a JSON object path → id), else the ``clusterId`` option, else the file's stem (or the log
dir's name). Offsets are JSON per cluster — ``{"next": N, "snap": E}`` for logs and dump text (N = the next log
offset to read, -1 before the first batch; E = the end offset of the last snapshot the stream loaded — the one it
started from or one it re-bootstrapped from, -1 for none), ``{"file": i, "pos": byte, "seq": n}`` for JSONL — so a
restart resumes exactly, and a re-read of a grown segment reads offsets ``[start, end)`` only: no record is ever
emitted twice.

Options: ``paths`` (JSON list), ``clusterId``, ``clusterIds``, ``maxEntriesPerBatch`` (per micro-batch, shared among
the clusters with something to read: :func:`share_budget`; Spark's Python sources have no admission control, so the
reader caps ``latestOffset`` itself — also used by the contract tests to vary micro-batch sizes), ``policy``
(``fail``/``skip`` undecodable batches; ``skip`` emits one ``kind = "gap"`` row per skipped range),
``checkpointLocation`` (the query's checkpoint: Spark asks a restarted reader for its latest offset before saying
where the stream stands, so the reader reads the start from the checkpoint's offset log to apply the cap),
``endOffsets`` (JSON offsets the stream stops at: ``AvailableNow`` for a source without admission control),
``buckets`` (replay buckets per cluster, ``jbod_model.buckets``: a row's ``bucket`` says which bucket replays it; a
record every bucket replays goes to each).

The stream's rows are packets: consecutive input rows of one cluster bucket
(:class:`~pipelines.streaming.codec.InputRow`, ``pipelines.streaming.codec.pack_rows``), keyed by the bucket's
grouping key. With a checkpoint (every streaming query has one) a task writes each bucket's packet to a file under
the checkpoint's ``staged/parts/<batch id>`` (up to :data:`FILE_ROWS` rows a file) and the stream's row names the
file (``file``): the rows never pass through the JVM, its shuffle and Arrow conversions — the operator reads the
file (docs/state-design.md, "eighteenth round"). Without one, the packet is the row's ``rows``, at most
:data:`PACKET_ROWS` rows each.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_type_hints

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, StructField, StructType

from jbod_model.buckets import check_buckets
from jbod_model.dumplog import DumpLogReader, ErrorPolicy
from jbod_model.errors import DecodeError, InputError
from jbod_model.meta_properties import META_PROPERTIES_NAME, MetaPropertiesError
from jbod_model.meta_properties import read_file as read_meta_properties
from jbod_model.records.entry import LogEntry
from jbod_model.slots import gc_paused_iteration
from jbod_model.sources import InputKind, detect_kind
from jbod_model.storage.files import METADATA_PARTITION_DIR
from jbod_model.storage.log_reader import ReadPolicy, ReadReport
from jbod_model.storage.metadata_dir import MetadataLog, MetadataLogDir, read_snapshot_entries
from jbod_model.storage.tail import TailScan, scan_tail
from jbod_model.stream import read_jsonl
from pipelines.lakehouse.staging import PARTS_DIR, STAGED_DIR, part_path
from pipelines.streaming.batchfiles import task_folder
from pipelines.streaming.codec import InputRow, entry_to_row, pack_rows, row_buckets
from pipelines.streaming.placement import bucket_keys

SOURCE_NAME = "kraft_metadata"

Position = dict[str, int]
Offsets = dict[str, Position]


# ---------------------------------------------------------------------------------------------------------------
# Discovery


@dataclass(frozen=True, slots=True)
class ClusterInput:
    """One cluster's input: a metadata log (``paths`` = its nodes' copies), JSONL files or dump texts."""

    cluster_id: str
    kind: str  # "log" | "jsonl" | "dump"
    paths: tuple[str, ...]


def _cluster_id_of_log(root: Path, default: str | None) -> str:
    meta = root / META_PROPERTIES_NAME
    if meta.is_file():
        try:
            props = read_meta_properties(meta)
        except (OSError, MetaPropertiesError):
            props = None
        if props is not None and props.cluster_id:
            return props.cluster_id
    return default or root.name


def discover(paths: Sequence[str | Path], *, cluster_id: str | None = None,
             cluster_ids: dict[str, str] | None = None) -> list[ClusterInput]:
    """Find every cluster input under ``paths`` (see the module docstring), sorted by cluster id."""
    explicit = {str(Path(p).resolve()): c for p, c in (cluster_ids or {}).items()}
    logs: dict[str, list[str]] = {}
    texts: dict[tuple[str, str], list[str]] = {}

    def named(path: Path, fallback: str) -> str:
        return explicit.get(str(path.resolve())) or cluster_id or fallback

    def visit(path: Path, depth: int) -> None:
        if path.is_dir():
            if path.name == METADATA_PARTITION_DIR:
                root = path.parent
            elif (path / METADATA_PARTITION_DIR).is_dir():
                root = path
            else:
                if depth > 6:
                    return
                for child in sorted(path.iterdir()):
                    if child.is_dir() or child.suffix in (".jsonl", ".txt", ".dump"):
                        visit(child, depth + 1)
                return
            cid = explicit.get(str(root.resolve())) or _cluster_id_of_log(root, cluster_id)
            logs.setdefault(cid, []).append(str(root))
            return
        try:
            kind = detect_kind(path)
        except InputError:
            if depth == 0:
                raise
            return  # a notes file beside the inputs: only a file named explicitly must be an input
        if kind is InputKind.JSONL:
            texts.setdefault((named(path, path.stem), "jsonl"), []).append(str(path))
        elif kind is InputKind.DUMP_TEXT:
            texts.setdefault((named(path, path.stem), "dump"), []).append(str(path))
        elif depth == 0:
            # A segment or snapshot named on its own is a log of that one file (MetadataLogDir.of_file); several
            # of one cluster merge by offset like nodes' copies. Its cluster is the node's, when it sits in one.
            in_node = path.parent.name == METADATA_PARTITION_DIR
            cid = explicit.get(str(path.resolve())) or (
                _cluster_id_of_log(path.parent.parent, cluster_id) if in_node else cluster_id or path.stem)
            logs.setdefault(cid, []).append(str(path))

    for p in paths:
        path = Path(p)
        if not path.exists():
            raise InputError(f"{path}: no such file or directory")
        visit(path, 0)
    out = [ClusterInput(cid, "log", tuple(sorted(set(ps)))) for cid, ps in logs.items()]
    for (cid, kind), ps in texts.items():
        if cid in logs or any(c.cluster_id == cid for c in out):
            raise InputError(f"cluster {cid!r} has inputs of different kinds; give each cluster one kind of input")
        out.append(ClusterInput(cid, kind, tuple(sorted(ps))))
    return sorted(out, key=lambda c: c.cluster_id)


# ---------------------------------------------------------------------------------------------------------------
# Offsets: where each cluster's stream is


def initial_position(ci: ClusterInput) -> Position:
    if ci.kind == "jsonl":
        return {"file": 0, "pos": 0, "seq": 0}
    return {"next": -1, "snap": -1}


class TailCache:
    """The last :func:`scan_tail` result per segment, so polling a growing log re-reads only what was appended."""

    def __init__(self) -> None:
        self._scans: dict[str, TailScan] = {}

    def log_end(self, copies: Sequence[MetadataLogDir]) -> int | None:
        """One past the last offset of the complete batches of the longest copy (None: no segment yet)."""
        ends = []
        for copy in copies:
            if not copy.segments:
                continue
            last = copy.segments[-1]
            key = str(last.path)
            scan = scan_tail(last.path, self._scans.get(key))
            self._scans[key] = scan
            ends.append(scan.next_offset if scan.next_offset is not None else last.base_offset)
        return max(ends) if ends else None


@dataclass(frozen=True, slots=True)
class _LogSpan:
    """What a log cluster's next micro-batch could read: from ``begin`` (``snap``: the snapshot it starts from, -1
    for none) to ``available``; offsets from ``begin`` to ``log_start`` are gone (Kafka deleted them)."""

    begin: int
    snap: int
    available: int
    log_start: int | None

    def capped(self, cap: int | None) -> Position:
        target = self.available if cap is None else min(self.available, self.begin + cap)
        if self.log_start is not None and self.begin < self.log_start <= self.available:
            # Offsets Kafka deleted that no snapshot covers hold no entry to cap: one range takes them whole, so the
            # reader reports the run once (a range that starts inside a deleted run cannot tell it was reported).
            target = max(target, self.log_start)
        return {"next": target, "snap": self.snap}


def _log_span(ci: ClusterInput, current: Position, tails: TailCache) -> _LogSpan | None:
    """Where a log cluster stands (None: nothing written yet)."""
    copies = [MetadataLogDir.open(p) for p in ci.paths]
    end = tails.log_end(copies)
    if current["next"] >= 0:
        begin, snap = current["next"], current["snap"]
        covering = _covering_snapshot(copies, begin, end)
        if covering is not None:
            # Kafka deleted offsets the stream had yet to read (the job was stopped longer than
            # metadata.max.retention.ms): re-bootstrap from the snapshot the log continues from, as a follower that
            # fell behind the log's start does. The range's end names the snapshot; its rows come first.
            begin = snap = covering
    elif any(c.segments and c.segments[0].base_offset == 0 for c in copies):
        begin, snap = 0, -1
    else:
        # The log was truncated (or the dir holds only snapshots): start from a snapshot the log continues from —
        # the earliest such, to keep the most history.
        log_start = min((c.segments[0].base_offset for c in copies if c.segments), default=None)
        snapshots = sorted({s.end_offset for c in copies for s in c.snapshots})
        usable = [e for e in snapshots if log_start is None or log_start <= e <= (end if end is not None else e)]
        if not usable:
            if not snapshots and log_start is None:
                return None
            raise InputError(f"cluster {ci.cluster_id}: the log starts at offset {log_start} and no snapshot "
                             f"covers the offsets before it ({', '.join(map(str, snapshots)) or 'no snapshot'})")
        snap = usable[0] if log_start is not None else usable[-1]
        begin = snap
    return _LogSpan(begin, snap, max(begin, end if end is not None else begin), _log_start(copies))


def _log_start(copies: Sequence[MetadataLogDir]) -> int | None:
    """The first offset the merged copies still hold (None: no segment)."""
    return min((c.segments[0].base_offset for c in copies if c.segments), default=None)


def _covering_snapshot(copies: Sequence[MetadataLogDir], next_offset: int, log_end: int | None) -> int | None:
    """When the log starts after ``next_offset`` (its older segments were deleted), the end offset of the earliest
    snapshot the log continues from — the smallest gap — or None (no gap, or no snapshot covers it)."""
    log_start = _log_start(copies)
    if log_start is None or log_end is None or next_offset >= log_start:
        return None
    ends = sorted({s.end_offset for c in copies for s in c.snapshots if log_start <= s.end_offset <= log_end})
    return ends[0] if ends else None


def _complete_lines(data: bytes, is_last_file: bool) -> list[tuple[int, bytes]]:
    """``(end position, line)`` of each complete line: terminated by a newline, or the unterminated tail of a file
    that is complete (not the last file) or whose tail already parses as JSON (a file without a final newline)."""
    out = []
    pos = 0
    while pos < len(data):
        nl = data.find(b"\n", pos)
        if nl < 0:
            tail = data[pos:]
            if not is_last_file or _parses(tail):
                out.append((len(data), tail))
            break
        out.append((nl + 1, data[pos:nl]))
        pos = nl + 1
    return out


def _parses(text: bytes) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _jsonl_lines(path: str, start: int, is_last_file: bool, stop: int | None = None) -> Iterator[tuple[int, bytes]]:
    """``(absolute end position, line)`` of the complete lines of ``path`` from byte ``start`` (up to ``stop``)."""
    data = Path(path).read_bytes()
    if stop is not None:
        data = data[:stop]
    for rel_end, line in _complete_lines(data[start:], is_last_file or stop is not None):
        yield start + rel_end, line


def _latest_jsonl(ci: ClusterInput, current: Position, cap: int | None) -> Position:
    file_index, pos, seq = current["file"], current["pos"], current["seq"]
    taken = 0
    while file_index < len(ci.paths):
        is_last = file_index == len(ci.paths) - 1
        for end, line in _jsonl_lines(ci.paths[file_index], pos, is_last):
            if line.strip():
                if cap is not None and taken >= cap:
                    return {"file": file_index, "pos": pos, "seq": seq}
                taken += 1
                seq += 1
            pos = end
        if is_last:
            break
        file_index, pos = file_index + 1, 0
    return {"file": file_index, "pos": pos, "seq": seq}


class DumpCache:
    """Parsed dump texts by (path, size, mtime): a dump is parsed once, however often the source polls."""

    def __init__(self) -> None:
        self._parsed: dict[str, tuple[tuple[int, int], list[LogEntry]]] = {}

    def entries(self, path: str, policy: ReadPolicy) -> list[LogEntry]:
        st = Path(path).stat()
        stamp = (st.st_size, st.st_mtime_ns)
        cached = self._parsed.get(path)
        if cached is None or cached[0] != stamp:
            reader = DumpLogReader.from_path(path, policy=ErrorPolicy.FAIL if policy == "fail" else ErrorPolicy.SKIP)
            cached = (stamp, list(reader.entries()))
            self._parsed[path] = cached
        return cached[1]

    def cluster_entries(self, ci: ClusterInput, policy: ReadPolicy) -> list[LogEntry]:
        """A cluster's dump entries in order; offsets must be known and increasing (they are the source
        offsets)."""
        out = [e for p in ci.paths for e in self.entries(p, policy)]
        last = -1
        for e in out:
            if e.offset <= last:
                raise InputError(f"cluster {ci.cluster_id}: dump text offsets must increase (offset {e.offset} after "
                                 f"{last} in {e.source}); a dump printed with --skip-record-metadata and no batch "
                                 "lines has no offsets")
            last = e.offset
        return out


def _latest_dump(ci: ClusterInput, current: Position, cap: int | None, dumps: DumpCache,
                 policy: ReadPolicy) -> Position:
    entries = [e for e in dumps.cluster_entries(ci, policy) if e.offset >= current["next"]]
    if not entries:
        return dict(current)
    if cap is not None and len(entries) > cap:
        return {"next": entries[cap].offset, "snap": -1}
    return {"next": entries[-1].offset + 1, "snap": -1}


# ---------------------------------------------------------------------------------------------------------------
# Reading a range


def read_range(ci: ClusterInput, start: Position, end: Position, policy: ReadPolicy = "fail",
               dumps: DumpCache | None = None, *, final: bool = False, buckets: int = 1) -> Iterator[InputRow]:
    """The rows of ``ci`` between two positions (``start`` exclusive of what it already covers), each routed to
    the replay bucket(s) of the cluster that replay it (``InputRow.bucket``; :func:`pipelines.streaming.codec.fan_out`).

    ``final``: the range ends where a bounded run (``endOffsets``, ``jbod run`` without ``--follow``) stops. A
    followed stream waits for a torn tail — a batch or line still being written — to complete; a run that stops
    does not, so what it leaves unread there is bad input as every other command reads it: the reader's
    :class:`DecodeError` under ``fail``, a ``gap`` row naming the file and byte under ``skip``."""
    if ci.kind == "log":
        yield from _read_log(ci, start, end, policy, final, buckets)
    elif ci.kind == "jsonl":
        yield from _read_jsonl(ci, start, end, policy, final)
    else:
        cache = dumps or DumpCache()
        for e in cache.cluster_entries(ci, policy):
            if max(start["next"], 0) <= e.offset < end["next"]:
                yield entry_to_row(ci.cluster_id, "record", e.offset, e, input_kind="dump", buckets=buckets)


def _read_log(ci: ClusterInput, start: Position, end: Position, policy: ReadPolicy,
              final: bool = False, buckets: int = 1) -> Iterator[InputRow]:
    log = MetadataLog.open(list(ci.paths))
    first = start["next"]
    from_snapshot = False
    if end["snap"] >= 0 and end["snap"] != start["snap"]:
        # A range whose end names another snapshot than its start begins with that snapshot: the stream's start
        # (``first`` is -1), or a re-bootstrap after the log was truncated past ``first`` (see _log_span).
        snapshot = next((s for s in log.snapshots if s.end_offset == end["snap"]), None)
        if snapshot is None:
            raise InputError(f"cluster {ci.cluster_id}: snapshot ending at offset {end['snap']} is gone; the stream "
                             "cannot be replayed again from this point")
        records = list(read_snapshot_entries(snapshot.path, policy=policy))
        base = snapshot.end_offset - len(records)
        gap_from = first if first >= 0 else None
        for i, snap_entry in enumerate(records):
            yield entry_to_row(ci.cluster_id, "snapshot", base + i, snap_entry, snapshot_end=snapshot.end_offset,
                               gap_from=gap_from, buckets=buckets, snapshot_index=i)
        first = snapshot.end_offset
        from_snapshot = True
    first = max(first, 0)
    if first >= end["next"]:
        return
    # "skip" while reading: the active segment may end in a batch still being written, beyond ``end``; the offsets
    # asked for are checked below instead, under the caller's policy. The read goes on to the first offset at or
    # past ``end``: a run of unreadable offsets that ``end`` cuts is reported whole, here, up to where it ends.
    report = ReadReport()
    expected = first
    after: int | None = None
    for entry in log.log_entries(start_offset=first, policy="skip", report=report, include_control=True):
        if entry.offset >= end["next"]:
            after = entry.offset
            break
        if entry.offset != expected:
            yield from _unread(ci, log, report, expected, entry.offset, policy, at_range_start=(
                expected == first and not from_snapshot))
        expected = entry.offset + 1
        if isinstance(entry, LogEntry):
            yield entry_to_row(ci.cluster_id, "record", entry.offset, entry, buckets=buckets)
    if expected < end["next"]:
        yield from _unread(ci, log, report, expected, after if after is not None else end["next"], policy,
                           at_range_start=expected == first and not from_snapshot)
    if final and after is None:
        yield from _torn_tails(ci, log, report, end["next"], policy)


def _torn_tails(ci: ClusterInput, log: MetadataLog, report: ReadReport, next_offset: int,
                policy: ReadPolicy) -> Iterator[InputRow]:
    """The bytes after the last complete batch of a copy's last segment, which a bounded run leaves unread: the
    reader's own error under ``fail`` (the message ``jbod report`` prints), one ``gap`` row each under ``skip``."""
    last_segments = {str(c.segments[-1].path) for c in log.copies if c.segments}
    for region in report.skipped:
        if (region.source not in last_segments or (region.base_offset is not None and region.base_offset < next_offset)
                or region.position + region.length != Path(region.source).stat().st_size):
            continue
        if policy == "fail":
            raise DecodeError(region.reason, source=region.source, position=region.position)
        yield InputRow(ci.cluster_id, "gap", next_offset, next_offset, None, None, None, GAP_ROW_TYPE, 0, None, None,
                       region.source, gap_from=next_offset,
                       message=f"{region}: left unread at the end of the run (policy skip; without --follow a batch "
                               f"still being written is not waited for): offsets from {next_offset} on were not read")


def _unread(ci: ClusterInput, log: MetadataLog, report: ReadReport, first: int, until: int, policy: ReadPolicy, *,
            at_range_start: bool) -> Iterator[InputRow]:
    """Offsets ``first .. until - 1`` could not be read: a :class:`DecodeError` naming them and the file under
    policy ``fail``; under ``skip`` one ``gap`` row, unless an earlier range already reported the run."""
    log_start = _log_start(log.copies)
    deleted = log_start is not None and first < log_start
    if policy == "fail" and deleted:
        snapshots = sorted({s.end_offset for s in log.snapshots})
        assert log_start is not None
        raise DecodeError(f"cluster {ci.cluster_id}: offsets {first}..{min(until, log_start) - 1} were deleted from "
                          f"{', '.join(ci.paths)} before the stream read them (the log now starts at offset "
                          f"{log_start}: the job was stopped longer than metadata.max.retention.ms), and no "
                          "snapshot the log continues from covers them (snapshot end offsets: "
                          f"{', '.join(map(str, snapshots)) or 'none'}); replay into new tables from a fresh "
                          "checkpoint, or run with policy 'skip'")
    where = _where(log, report, first, until)
    if policy == "fail":
        raise DecodeError(f"cluster {ci.cluster_id}: offsets {first}..{until - 1} cannot be read from {where} "
                          "(corrupt, or the log was truncated under the stream); run with policy 'skip' to skip "
                          "them and keep every other record")
    if at_range_start and _continues_a_run(log, first, log_start):
        return  # the range before this one ended inside the run and reported it up to its end
    why = (f"were deleted from the log before the job read them and no snapshot covers them (the log now starts at "
           f"offset {log_start})" if deleted else f"could not be read (corrupt or deleted) from {where}")
    message = (f"offsets {first}..{until - 1} {why} and were skipped (policy skip): the replayed state after them "
               "may differ from Kafka's")
    files = _files(log, report, first, until)
    yield InputRow(ci.cluster_id, "gap", first, first, None, None, None, GAP_ROW_TYPE, 0, None, None,
                   ", ".join(files) or None, gap_from=first, gap_last=until - 1, message=message)


#: The ``type`` of a ``gap`` row (the column is not nullable; a gap holds no record).
GAP_ROW_TYPE = "LOG_GAP"


def _continues_a_run(log: MetadataLog, first: int, log_start: int | None) -> bool:
    """Whether offset ``first - 1`` is unreadable too, so the run at ``first`` began in (and was reported by) the
    range before. Deleted offsets say nothing: the planner gives a deleted run one range of its own, and offsets
    deleted after an earlier range read them leave a run that starts here."""
    if log_start is None or first - 1 < log_start:
        return False
    entries = log.log_entries(start_offset=first - 1, until_offset=first, policy="skip", include_control=True)
    return next(iter(entries), None) is None


def _files(log: MetadataLog, report: ReadReport, first: int, until: int) -> list[str]:
    """The files that held offsets ``first .. until - 1``: the skipped batches' files, else the segments that
    cover ``first`` (none when they were deleted)."""
    files = sorted({s.source for s in report.skipped if s.base_offset is not None and first <= s.base_offset < until})
    if files:
        return files
    out = []
    for copy in log.copies:
        covering = [seg for seg in copy.segments if seg.base_offset <= first]
        if covering:
            out.append(str(covering[-1].path))
    return sorted(set(out))


def _where(log: MetadataLog, report: ReadReport, first: int, until: int) -> str:
    """The files (and why, where the reader said) for a message."""
    reasons = [f"{s.source} at byte {s.position}: {s.reason}" for s in report.skipped
               if s.base_offset is not None and first <= s.base_offset < until]
    if reasons:
        return "; ".join(reasons)
    return ", ".join(_files(log, report, first, until)) or ", ".join(str(c.partition_dir) for c in log.copies)


def _read_jsonl(ci: ClusterInput, start: Position, end: Position, policy: ReadPolicy,
                final: bool = False) -> Iterator[InputRow]:
    """The entries of the JSONL lines in the range, parsed as every command parses them
    (:func:`jbod_model.stream.read_jsonl`): a bad line raises its :class:`DecodeError` under ``fail``, and is one
    ``gap`` row under ``skip`` (it takes the line's ``seq``; a line that does not parse has no offset)."""
    seq = start["seq"]
    for file_index in range(start["file"], min(end["file"], len(ci.paths) - 1) + 1):
        path = ci.paths[file_index]
        begin = start["pos"] if file_index == start["file"] else 0
        stop = end["pos"] if file_index == end["file"] else None
        is_last = file_index == len(ci.paths) - 1
        data = Path(path).read_bytes()
        line_number = data[:begin].count(b"\n")
        line_start = begin
        for line_end, line in _jsonl_lines(path, begin, is_last, stop):
            line_number += 1
            report = ReadReport()
            entries = list(read_jsonl([line], path, policy=policy, report=report, first_line=line_number,
                                      first_position=line_start))
            line_start = line_end
            if report.skipped:
                [skipped] = report.skipped
                yield InputRow(ci.cluster_id, "gap", seq, None, None, None, None, GAP_ROW_TYPE, 0, None, None, path,
                               input="jsonl", message=f"{skipped} (policy skip): the replayed state after it may "
                                                      "differ from Kafka's")
                seq += 1
            for entry in entries:
                yield entry_to_row(ci.cluster_id, "request" if not isinstance(entry, LogEntry) else "record", seq,
                                   entry, input_kind="jsonl")
                seq += 1
        tail = data[stop:] if final and is_last and stop is not None else b""
        if tail.strip() and b"\n" not in tail:
            # An unterminated last line that does not parse (a followed stream waits for its end): read it as
            # every command reads it, so it fails or is skipped with their message.
            assert stop is not None
            yield from _read_jsonl_tail(ci, path, data, stop, seq, policy)


def _read_jsonl_tail(ci: ClusterInput, path: str, data: bytes, stop: int, seq: int,
                     policy: ReadPolicy) -> Iterator[InputRow]:
    report = ReadReport()
    line_number = data[:stop].count(b"\n") + 1
    # A tail that parses now was completed since the run began: the next run reads it.
    for _entry in read_jsonl([data[stop:]], path, policy=policy, report=report, first_line=line_number,
                             first_position=stop):
        return
    for skipped in report.skipped:
        yield InputRow(ci.cluster_id, "gap", seq, None, None, None, None, GAP_ROW_TYPE, 0, None, None, path,
                       input="jsonl", message=f"{skipped}: left unread at the end of the run (policy skip; without "
                                              "--follow a line still being written is not waited for)")


# ---------------------------------------------------------------------------------------------------------------
# The Spark data source


def row_schema() -> StructType:
    """An input row's columns as a Spark schema, derived from :class:`~pipelines.streaming.codec.InputRow` (never
    written by hand)."""
    types = {"str": StringType(), "int": LongType()}
    hints = get_type_hints(InputRow)
    fields = []
    for f in dataclasses.fields(InputRow):
        hint = str(hints[f.name]).replace("typing.", "")
        base = "str" if "str" in hint else "int"
        spark_type = IntegerType() if f.name in ("version", "leader_epoch") else types[base]
        fields.append(StructField(f.name, spark_type, nullable="None" in hint))
    return StructType(fields)


def input_schema() -> StructType:
    """The stream's Spark schema: packets (``pipelines.streaming.codec.pack_rows``) of consecutive input rows of one
    cluster bucket — ``cluster_id``, ``bucket`` (the bucket's grouping key, ``pipelines.streaming.placement``),
    ``seq`` (the first row's), and either the packet (``rows``) or the file holding it (``file``)."""
    fields = {f.name: f for f in row_schema().fields}
    return StructType([fields["cluster_id"], fields["bucket"], fields["seq"],
                       StructField("rows", BinaryType(), nullable=True),
                       StructField("file", StringType(), nullable=True)])


def source_options(paths: Sequence[str | Path], *, cluster_id: str | None = None,
                   cluster_ids: dict[str, str] | None = None, max_entries_per_batch: int | None = None,
                   policy: ReadPolicy = "fail", checkpoint: str | Path | None = None,
                   buckets: int = 1, key_partitions: int | None = None, splits: int = 1,
                   min_split_entries: int | None = None) -> dict[str, str]:
    """The options of ``spark.readStream.format("kraft_metadata")`` for these inputs. ``key_partitions``: the state
    partitions the operator's groups are placed on (``pipelines.streaming.placement``); None: buckets keyed by their
    number. ``splits``: tasks that read one cluster's range of a micro-batch, at most (:func:`split_range`)."""
    opts = {"paths": json.dumps([str(Path(p).resolve()) for p in paths]), "policy": policy,
            "buckets": str(check_buckets(buckets)), "splits": str(splits)}
    if min_split_entries is not None:
        opts["minSplitEntries"] = str(min_split_entries)
    if key_partitions is not None:
        opts["keyPartitions"] = str(key_partitions)
    if checkpoint is not None:
        opts["checkpointLocation"] = str(checkpoint)
    if cluster_id is not None:
        opts["clusterId"] = cluster_id
    if cluster_ids:
        opts["clusterIds"] = json.dumps(cluster_ids)
    if max_entries_per_batch is not None:
        opts["maxEntriesPerBatch"] = str(max_entries_per_batch)
    return opts


def available_offsets(options: Mapping[str, str]) -> Offsets:
    """Where every cluster's input ends right now (from the checkpoint's position, uncapped): the ``endOffsets``
    of a run that processes what is available and stops."""
    config = SourceConfig.from_options(options)
    return SourcePlanner(dataclasses.replace(config, max_entries=None, end=None)).latest()


def without_metadata(paths: Sequence[str | Path], *, cluster_id: str | None = None,
                     cluster_ids: Mapping[str, str] | None = None) -> list[str]:
    """The paths that hold no KRaft metadata :func:`discover` can read: a mistyped folder, a broker's data dir instead
    of its metadata dir."""
    named = dict(cluster_ids or {})
    return [str(p) for p in paths if not discover([p], cluster_id=cluster_id, cluster_ids=named)]


def caught_up(paths: Sequence[str | Path], checkpoint: str | Path, *, cluster_id: str | None = None,
              cluster_ids: Mapping[str, str] | None = None, policy: ReadPolicy = "fail") -> bool:
    """Whether a run of these inputs on this checkpoint has nothing to replay: the checkpoint's last micro-batch is
    committed and ends where every input ends right now (:func:`available_offsets`). Spark would start, find no new
    offsets and stop without a batch — a scheduled run over a quiet cluster, every time — so such a run needs no
    Spark. A new cluster among the inputs, a grown log or one truncated past the checkpoint (a re-bootstrap from a
    snapshot), or a batch planned but never committed (Spark runs it again) all say no."""
    done = checkpointed_offsets(str(checkpoint))
    if done is None:
        return False
    planned = [int(p.name) for p in (Path(checkpoint) / "offsets").iterdir() if p.name.isdigit()]
    if not (Path(checkpoint) / "commits" / str(max(planned))).is_file():
        return False
    options = source_options(paths, cluster_id=cluster_id, cluster_ids=dict(cluster_ids or {}), policy=policy,
                             checkpoint=checkpoint)
    return available_offsets(options) == done


#: The fewest offsets a piece of a split range holds (:func:`split_range`): below that a task costs more than it saves.
DEFAULT_MIN_SPLIT_ENTRIES = 20_000


@dataclass(frozen=True, slots=True)
class SourceConfig:
    """The parsed options."""

    paths: tuple[str, ...]
    cluster_id: str | None
    cluster_ids: dict[str, str]
    max_entries: int | None
    policy: ReadPolicy
    #: The query's checkpoint: where a restarted reader finds the offset the next micro-batch starts at.
    checkpoint: str | None = None
    #: Offsets the stream never reads past (``Trigger.AvailableNow`` semantics: what was there when the run began).
    end: Offsets | None = None
    #: Replay buckets per cluster (``jbod_model.buckets``): each row goes to the bucket(s) that replay it.
    buckets: int = 1
    #: The state partitions a bucket's grouping key is chosen for (``pipelines.streaming.placement``); None: a
    #: bucket's key is its number.
    key_partitions: int | None = None
    #: Tasks a cluster's range of a micro-batch is read by, at most (:func:`split_range`).
    splits: int = 1
    min_split_entries: int = DEFAULT_MIN_SPLIT_ENTRIES

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> SourceConfig:
        # Spark hands data source options over with lower-cased keys (they are case-insensitive).
        opts = {k.lower(): v for k, v in options.items()}
        if "paths" not in opts:
            raise InputError(f"the {SOURCE_NAME} source needs the 'paths' option (a JSON list)")
        paths = json.loads(opts["paths"])
        cap = opts.get("maxentriesperbatch")
        policy = opts.get("policy", "fail")
        if policy not in ("fail", "skip"):
            raise InputError(f"policy must be 'fail' or 'skip', not {policy!r}")
        max_entries = int(cap) if cap else None
        if max_entries is not None and max_entries < 1:
            raise InputError("maxEntriesPerBatch must be at least 1")
        end = json.loads(opts["endoffsets"]) if opts.get("endoffsets") else None
        buckets = check_buckets(int(opts.get("buckets", "1")))
        key_partitions = int(opts["keypartitions"]) if opts.get("keypartitions") else None
        if key_partitions is not None and key_partitions < 1:
            raise InputError("keyPartitions must be at least 1")
        splits = int(opts.get("splits", "1"))
        min_split = int(opts.get("minsplitentries", str(DEFAULT_MIN_SPLIT_ENTRIES)))
        if splits < 1 or min_split < 1:
            raise InputError("splits and minSplitEntries must be at least 1")
        return cls(tuple(paths), opts.get("clusterid"), json.loads(opts.get("clusterids", "{}")),
                   max_entries, "fail" if policy == "fail" else "skip", opts.get("checkpointlocation"), end,
                   buckets, key_partitions, splits, min_split)

    def discover(self) -> list[ClusterInput]:
        return discover(self.paths, cluster_id=self.cluster_id, cluster_ids=self.cluster_ids)

    def reaches_end(self, cluster_id: str, position: Position) -> bool:
        """Whether a range ending at ``position`` ends where a bounded run stops (``endOffsets``)."""
        if self.end is None or cluster_id not in self.end:
            return False
        stop = self.end[cluster_id]
        key = ("file", "pos") if "file" in stop else ("next",)
        return tuple(position[k] for k in key) >= tuple(stop[k] for k in key)


#: The least a cluster reads in a micro-batch it is part of (or the cap, if smaller): every cluster of a batch costs
#: the operator a fixed price per replay bucket (its state read, its rows framed), and a bucket's slice below the
#: operator's bulk reads (``processor.BULK_READ_ROWS``) pays a state call per key. 50 clusters sharing 250 k entries
#: as 5 k each made a fleet's first run ≈ 1.5× slower per record than one cluster's; with this floor a batch holds
#: at most 10 clusters' backlogs, and the others wait for the next.
MIN_SHARE = 25_000


def share_budget(pending: Mapping[str, int | None], budget: int, floor: int = MIN_SHARE) -> dict[str, int]:
    """A micro-batch's cap shared among the clusters with something to read: ``pending`` says how many entries each
    has to read (None: not known without reading them, JSONL and dump text). A cluster whose backlog is unknown
    takes an equal share of the cap (at least one entry) in every batch: it cannot be told apart from one with
    nothing left, so holding it back could hold it back for good. The others share what is left by water-filling,
    smallest backlog first: each takes all it has, or an equal share of what is left but at least ``floor`` (or what
    is left, if less); once the cap is spent they wait for a later batch. So the batch stays within the cap (give or
    take one entry per cluster when the cap is smaller than the clusters), a small backlog is never held back by a
    large one, the first in line always moves on, and one cluster gets the whole cap."""
    unknown = sorted(cid for cid, has in pending.items() if has is None)
    out = dict.fromkeys(unknown, max(1, budget // max(1, len(pending))))
    # At least one entry for the known backlogs too, so that a cap smaller than the clusters cannot stall them behind
    # unknown backlogs that may have nothing left.
    left, sharing = max(1, budget - sum(out.values())), len(pending) - len(unknown)
    least = min(left, floor)
    for cid in sorted((c for c in pending if c not in out), key=lambda c: (pending[c], c)):
        share = min(left, max(least, left // sharing))
        out[cid] = min(pending[cid] or 0, share)
        left, sharing = left - out[cid], sharing - 1
    return out


class SourcePlanner:
    """The driver side of the stream reader, free of Spark: offsets and partitions (tested without a session)."""

    def __init__(self, config: SourceConfig) -> None:
        self.config = config
        self._tails = TailCache()
        self._dumps = DumpCache()
        # The end of the last range planned or committed, per cluster: the start of the next micro-batch.
        self._last: Offsets | None = None

    def initial(self) -> Offsets:
        offsets = {ci.cluster_id: initial_position(ci) for ci in self.config.discover()}
        self._last = offsets if self._last is None else self._last
        return offsets

    def latest(self) -> Offsets:
        clusters = self.config.discover()
        if self._last is None:
            # Spark asks for the latest offset before telling the reader where the stream stands: a fresh query
            # starts at the initial offsets, a restarted one where its checkpoint's offset log ends.
            self._last = checkpointed_offsets(self.config.checkpoint) or {}
        last, end = self._last, self.config.end
        # Where each cluster stands, then its share of the micro-batch's cap, then where its range ends.
        standing: dict[str, tuple[Position, _LogSpan | None]] = {}
        for ci in clusters:
            current = last.get(ci.cluster_id, initial_position(ci))
            if end is None or ci.cluster_id in end:
                standing[ci.cluster_id] = (current, _log_span(ci, current, self._tails) if ci.kind == "log" else None)
        caps = self._shares(clusters, standing)
        out = {}
        for ci in clusters:
            if ci.cluster_id not in standing:
                if ci.cluster_id in last:
                    out[ci.cluster_id] = last[ci.cluster_id]
                continue  # a cluster that appeared after the run began: the next run reads it
            current, span = standing[ci.cluster_id]
            cap = caps.get(ci.cluster_id)
            if cap == 0:
                out[ci.cluster_id] = current  # the batch's cap is spent: it reads in a later one
                continue
            if ci.kind == "log":
                position = dict(current) if span is None else span.capped(cap)
            elif ci.kind == "jsonl":
                position = _latest_jsonl(ci, current, cap)
            else:
                position = _latest_dump(ci, current, cap, self._dumps, self.config.policy)
            if end is not None:
                position = _earlier(position, end[ci.cluster_id], current)
            out[ci.cluster_id] = position
        return out

    def _shares(self, clusters: Sequence[ClusterInput],
                standing: Mapping[str, tuple[Position, _LogSpan | None]]) -> dict[str, int]:
        """Each cluster's share of ``max_entries``: 0 for one that waits for a later batch, none for one with
        nothing to read (or without a cap). What a log cluster has to read is known from its offsets (up to where a
        bounded run stops); a JSONL or dump text cluster's only by reading it."""
        cap = self.config.max_entries
        if cap is None:
            return {}
        pending: dict[str, int | None] = {}
        for ci in clusters:
            if ci.cluster_id not in standing:
                continue
            span = standing[ci.cluster_id][1]
            if ci.kind != "log":
                pending[ci.cluster_id] = None
            elif span is None:
                pending[ci.cluster_id] = 0
            else:
                stop = span.available
                if self.config.end is not None:
                    stop = min(stop, self.config.end[ci.cluster_id]["next"])
                pending[ci.cluster_id] = max(0, stop - span.begin)
        return share_budget({cid: has for cid, has in pending.items() if has != 0}, cap)

    def seen(self, end: Offsets) -> None:
        """Spark planned or committed up to ``end``: the next micro-batch starts there."""
        last = dict(self._last or {})
        for cid, pos in end.items():
            last[cid] = _later(last.get(cid), pos)
        self._last = last

    def plan(self, start: Offsets, end: Offsets) -> list[tuple[ClusterInput, Position, Position]]:
        self.seen(end)
        clusters = {ci.cluster_id: ci for ci in self.config.discover()}
        out = []
        for cid, pos in sorted(end.items()):
            ci = clusters.get(cid)
            if ci is None:
                raise InputError(f"cluster {cid} was in the stream but its input is gone")
            begin = start.get(cid, initial_position(ci))
            if begin != pos:
                out.append((ci, begin, pos))
        return out


def checkpointed_offsets(checkpoint: str | None) -> Offsets | None:
    """The source offsets of the last micro-batch planned in a query's checkpoint (its offset log), if any."""
    if checkpoint is None:
        return None
    log = Path(checkpoint) / "offsets"
    if not log.is_dir():
        return None
    batches = sorted((int(p.name) for p in log.iterdir() if p.name.isdigit()), reverse=True)
    for batch in batches:
        lines = (log / str(batch)).read_text(encoding="utf-8").splitlines()
        # Spark's offset log: "v1", the batch metadata, then one line per source ("-" when it has none).
        if len(lines) >= 3 and lines[2] not in ("", "-"):
            offsets = json.loads(lines[2])
            return {str(k): dict(v) for k, v in offsets.items()}
    return None


def _earlier(a: Position, limit: Position, current: Position) -> Position:
    """``a``, or ``limit`` if that comes first (never behind ``current``)."""
    key = ("file", "pos") if "file" in a else ("next",)
    if tuple(limit[k] for k in key) < tuple(a[k] for k in key):
        return _later(current, limit)
    return a


def _later(a: Position | None, b: Position) -> Position:
    if a is None:
        return b
    key = ("file", "pos") if "file" in b else ("next",)
    return b if tuple(b[k] for k in key) >= tuple(a[k] for k in key) else a


#: Input rows per packet (``pipelines.streaming.codec.pack_rows``) handed through Spark: large enough that Spark's cost
#: per row vanishes, small enough that a micro-batch's packets of one bucket still stream through the operator's
#: Arrow batches.
PACKET_ROWS = 4096
#: Input rows per packet written to a file: a task holds a bucket's rows until its file is written.
FILE_ROWS = 65_536


def split_range(ci: ClusterInput, start: Position, end: Position, parts: int,
                min_entries: int = DEFAULT_MIN_SPLIT_ENTRIES) -> list[tuple[Position, Position]]:
    """A cluster's range of one micro-batch as up to ``parts`` consecutive ranges of at least ``min_entries``
    offsets, read by as many tasks at once: the decode of one cluster's log spread over the cores (issue #13).

    The pieces' rows together are the whole range's: each piece is read as a micro-batch's range is (the reader
    reads past a piece's end to report a run of unreadable offsets whole, and the next piece, starting inside it,
    stays silent), the snapshot a range starts from stays with the first piece, a bounded run's torn tail with the
    last, and no cut falls before the log's start (a deleted run is one range's, see :meth:`_LogSpan.capped`). Rows
    carry their offsets as ``seq``, so the operator orders them whoever read them. Only metadata logs are split:
    a JSONL stream's positions are byte offsets and its controller replays in one bucket."""
    if ci.kind != "log" or parts < 2 or end["next"] <= max(start["next"], 0):
        return [(start, end)]
    first = max(start["next"], 0)
    if end["snap"] >= 0 and end["snap"] != start["snap"]:
        first = max(first, end["snap"])
    log_start = _log_start([MetadataLogDir.open(p) for p in ci.paths])
    if log_start is not None:
        first = max(first, log_start)
    count = min(parts, (end["next"] - first) // max(1, min_entries))
    if count < 2:
        return [(start, end)]
    cuts = [{"next": first + (end["next"] - first) * i // count, "snap": end["snap"]} for i in range(1, count)]
    return list(zip([start, *cuts], [*cuts, end], strict=True))


class _Partition(InputPartition):
    """One cluster's range of one micro-batch."""

    def __init__(self, ci: ClusterInput, start: Position, end: Position, policy: ReadPolicy,
                 final: bool = False, buckets: int = 1, key_partitions: int | None = None,
                 parts_root: str | None = None) -> None:
        super().__init__((ci.cluster_id, start, end))
        self.ci, self.start, self.end, self.policy, self.final = ci, start, end, policy, final
        self.buckets = buckets
        #: Where the task writes its packets (the checkpoint's ``staged/parts``); None: they go through Spark.
        self.parts_root = parts_root
        #: Each bucket's grouping key (``pipelines.streaming.placement``).
        self.keys = tuple(range(buckets)) if key_partitions is None else \
            bucket_keys(ci.cluster_id, buckets, key_partitions)


class _StreamReader(DataSourceStreamReader):
    """Spark's side of :class:`SourcePlanner`; ``read`` runs on executors, one partition per cluster."""

    def __init__(self, config: SourceConfig) -> None:
        self.planner = SourcePlanner(config)

    def initialOffset(self) -> dict[str, Any]:
        return self.planner.initial()

    def latestOffset(self) -> dict[str, Any]:
        return self.planner.latest()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        config = self.planner.config
        out: list[InputPartition] = []
        for ci, s, e in self.planner.plan(start, end):
            pieces = split_range(ci, s, e, config.splits, config.min_split_entries)
            final = config.reaches_end(ci.cluster_id, e)
            parts_root = None if config.checkpoint is None else str(Path(config.checkpoint) / STAGED_DIR / PARTS_DIR)
            out += [_Partition(ci, ps, pe, config.policy, final and pe is e, config.buckets, config.key_partitions,
                               parts_root) for ps, pe in pieces]
        return out

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        assert isinstance(partition, _Partition)
        return _read(partition)

    def commit(self, end: dict[str, Any]) -> None:
        self.planner.seen(end)


def range_packets(ci: ClusterInput, start: Position, end: Position, policy: ReadPolicy = "fail", *,
                  final: bool = False, buckets: int = 1, key_partitions: int | None = None,
                  parts_root: str | None = None) -> Iterator[tuple[Any, ...]]:
    """The rows a reading task gives Spark for one cluster's range (its packets, each bucket's written under
    ``parts_root`` when given), exactly as the job's source makes them: what ``benchmarks/source_benchmark.py``
    times without Spark."""
    return _read(_Partition(ci, start, end, policy, final, buckets, key_partitions, parts_root))


def _read(partition: _Partition) -> Iterator[tuple[Any, ...]]:
    # Each packet made with the cyclic collector paused (the rows are acyclic; reference counting frees them): the
    # decoder's window and the pending rows kept surviving young collections into full ones, which walked every
    # object of the worker — a quarter of a 300 k-record task's CPU (docs/state-design.md, "sixteenth round").
    # pyspark's code between two packets runs with the collector as it was.
    return gc_paused_iteration(_packets(partition))


def _packets(partition: _Partition) -> Iterator[tuple[Any, ...]]:
    cluster_id, keys = partition.ci.cluster_id, partition.keys
    folder = None if partition.parts_root is None else task_folder(partition.parts_root)
    limit = PACKET_ROWS if folder is None else FILE_ROWS

    def packet(bucket: int, rows: list[InputRow]) -> tuple[Any, ...]:
        data = pack_rows(rows)
        if folder is None:
            return cluster_id, keys[bucket], rows[0].seq, data, None
        path = part_path(folder, f"input-{bucket}.rows")
        with open(path, "wb") as out:
            out.write(data)
        return cluster_id, keys[bucket], rows[0].seq, None, path

    # Each bucket's rows, in order, until a packet is full: a packet holds consecutive rows of one bucket.
    pending: list[list[InputRow]] = [[] for _ in keys]
    for row in read_range(partition.ci, partition.start, partition.end, partition.policy,
                          final=partition.final, buckets=partition.buckets):
        for bucket in row_buckets(row, partition.buckets):
            rows = pending[bucket]
            rows.append(row)
            if len(rows) >= limit:
                yield packet(bucket, rows)
                pending[bucket] = []
    for bucket, rows in enumerate(pending):
        if rows:
            yield packet(bucket, rows)


class KraftMetadataSource(DataSource):
    """``spark.readStream.format("kraft_metadata")`` (see the module docstring)."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        return input_schema()

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return _StreamReader(SourceConfig.from_options(dict(self.options)))


def register(spark: Any) -> None:
    """Register the ``kraft_metadata`` data source with a session."""
    spark.dataSource.register(KraftMetadataSource)
