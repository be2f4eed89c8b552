"""Open whatever an operator has — a node's metadata log dir (or several nodes' copies), a segment, a snapshot,
``kafka-dump-log`` text or canonical JSONL — as one stream of entries on top of a base image.

This is the single place that decides which reader a path needs; the CLI, the Spark source and the tests call it.
A snapshot is replayed into the *base image* (its records carry offsets local to the file, so they cannot join the
log's offset space), and the image's provenance is rebased to the snapshot's last contained offset; the log
records after it follow as entries.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from jbod_model.dumplog import DumpLogReader, ErrorPolicy
from jbod_model.errors import InputError
from jbod_model.gaps import GapConsequences
from jbod_model.image import EMPTY_IMAGE, MetadataImage
from jbod_model.records.entry import LogEntry
from jbod_model.replay import replay_entries
from jbod_model.storage.files import FileKind, parse_snapshot_name
from jbod_model.storage.log_reader import ReadPolicy, ReadReport
from jbod_model.storage.metadata_dir import MetadataLog, read_snapshot_entries, record_file
from jbod_model.stream import StreamEntry, read_jsonl

_SNIFF_BYTES = 4096


class InputKind(Enum):
    """What a path holds."""

    METADATA_DIR = "metadata-dir"
    SEGMENT = "segment"
    SNAPSHOT = "snapshot"
    BOOTSTRAP = "bootstrap"
    JSONL = "jsonl"
    DUMP_TEXT = "dump-text"


def detect_kind(path: str | Path) -> InputKind:
    """Decide by name when Kafka named the file (its names are exact), else by content: a file that starts with a
    sound record batch is a segment or snapshot (:func:`~jbod_model.storage.metadata_dir.record_file`), a text
    file is canonical JSONL or dump-log output."""
    p = Path(path)
    if p.is_dir():
        return InputKind.METADATA_DIR
    if not p.is_file():
        raise InputError(f"{p}: no such file or directory")
    rf = record_file(p)
    if rf is not None:
        return _RECORD_FILE_KINDS[rf.kind]
    with p.open("rb") as f:
        head = f.read(_SNIFF_BYTES)
    if b"\x00" in head:
        raise InputError(f"{p}: a binary file that is neither a metadata segment nor a snapshot (it does not start "
                         "with a valid record batch: magic 2, a length that fits the file, a matching CRC)")
    text = head.decode("utf-8", errors="replace").lstrip()
    if text.startswith("{"):
        return InputKind.JSONL
    if "baseOffset:" in text or "| offset:" in text or "Dumping " in text or " payload: " in text:
        return InputKind.DUMP_TEXT
    raise InputError(f"{p}: neither canonical JSONL (one JSON object per line) nor kafka-dump-log output")


_RECORD_FILE_KINDS = {FileKind.SEGMENT: InputKind.SEGMENT, FileKind.SNAPSHOT: InputKind.SNAPSHOT,
                      FileKind.BOOTSTRAP: InputKind.BOOTSTRAP}


@dataclass
class LoadedInput:
    """A base image and the entries to run on top of it, with what the readers had to skip."""

    base_image: MetadataImage
    entries: Iterable[StreamEntry]
    kinds: tuple[InputKind, ...]
    report: ReadReport = field(default_factory=ReadReport)
    dump_readers: list[DumpLogReader] = field(default_factory=list)
    #: Records left out of the replay as consequences of what was skipped (replay inside :meth:`replaying`).
    consequences: GapConsequences = field(init=False)
    #: :meth:`latest_gap`'s answer and the counts it was made for: it is asked once a batch (and once a record
    #: inside a metadata transaction), and a dump text's problems are a walk of all its items.
    _latest: tuple[tuple[int, int, int], str | None] = field(init=False, default=((0, 0, 0), None), repr=False)
    _dump_problems: dict[int, list[str]] = field(init=False, default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.consequences = GapConsequences(self.latest_gap)

    def _ranges(self) -> list[str]:
        out = [str(s) for s in self.report.skipped] + [str(m) for m in self.report.missing]
        for i, reader in enumerate(self.dump_readers):
            if i not in self._dump_problems:
                # A dump text is parsed whole (DumpLogReader._parse), so its problems are known once and for all.
                self._dump_problems[i] = [str(p) for p in reader.report().problems]
            out += self._dump_problems[i]
        return out

    def latest_gap(self) -> str | None:
        """The ranges skipped so far, in words (None: nothing yet) — what a fault while replaying the entries read
        so far may be a consequence of."""
        counts = (len(self.report.skipped), len(self.report.missing), len(self.dump_readers))
        if counts != self._latest[0]:
            ranges = self._ranges()
            earlier = f" (or one of the {len(ranges) - 1} skipped before it)" if len(ranges) > 1 else ""
            self._latest = counts, f"the skipped range ({ranges[-1]}){earlier}" if ranges else None
        return self._latest[1]

    def replaying(self) -> AbstractContextManager[GapConsequences]:
        """Replay the entries inside this block: a record that faults after a skipped range is left out and kept
        in :attr:`consequences` (:mod:`jbod_model.gaps`) instead of stopping the replay. Under policy ``fail``
        nothing is skipped, so every fault still stops it."""
        return self.consequences.active()

    def skipped(self) -> list[str]:
        """What the readers skipped under policy ``skip``, one line each (the summary, then every range, line and
        dump-text problem, then every record left out as a consequence), for the commands to print: read the
        entries first."""
        out = [] if self.report.clean else [self.report.summary()]
        return out + self._ranges() + [str(c) for c in self.consequences.consequences]


def _until(entries: Iterable[StreamEntry], until_offset: int | None) -> Iterator[StreamEntry]:
    """Records with offset < N (Kafka's snapshot end-offset convention); the stream stops at the first record at
    or past N, so requests after that point are not run either."""
    for entry in entries:
        if until_offset is not None and isinstance(entry, LogEntry) and entry.offset >= until_offset:
            return
        yield entry


def snapshot_image(entries: Iterable[LogEntry], last_offset: int) -> MetadataImage:
    """The image a snapshot stands for: its records replayed from empty, with the provenance of the log it replaces
    — ``last_offset``, the snapshot's end offset - 1 (-1 for bootstrap.checkpoint: "before offset 0"). The records'
    own offsets are local to the file and mean nothing in the log's offset space."""
    return dataclasses.replace(replay_entries(entries), last_offset=last_offset)


def _snapshot_image(path: Path, policy: ReadPolicy, report: ReadReport) -> MetadataImage:
    """A snapshot's image; one whose name does not carry its end offset (bootstrap.checkpoint, or a snapshot
    copied under another name) stands for the state before offset 0."""
    sid = parse_snapshot_name(path.name)
    return snapshot_image(read_snapshot_entries(path, policy=policy, report=report),
                          sid.end_offset - 1 if sid is not None else -1)



def open_inputs(paths: Sequence[str | Path], *, policy: ReadPolicy = "fail", until_offset: int | None = None,
                from_snapshot: bool = True) -> LoadedInput:
    """Open one input, or several of the same kind: metadata dirs are copies of one cluster's log (merged and
    deduplicated by offset); segments are read in base-offset order; JSONL and dump texts are concatenated in
    the order given."""
    if not paths:
        raise InputError("no input given")
    kinds = tuple(detect_kind(p) for p in paths)
    if len(set(kinds)) != 1:
        raise InputError(f"inputs of different kinds cannot be combined: {', '.join(k.value for k in kinds)}")
    kind = kinds[0]
    report = ReadReport()
    loaded = LoadedInput(base_image=EMPTY_IMAGE, entries=(), kinds=kinds, report=report)
    if kind is InputKind.METADATA_DIR:
        stream = MetadataLog.open(list(paths)).read(from_snapshot=from_snapshot, until_offset=until_offset,
                                                    policy=policy, report=report)
        if stream.snapshot is not None:
            loaded.base_image = _snapshot_image(stream.snapshot.path, policy, report)
        loaded.entries = stream.log_entries()
    elif kind in (InputKind.SNAPSHOT, InputKind.BOOTSTRAP):
        if len(paths) != 1:
            raise InputError("give one snapshot at a time (a snapshot is a complete image)")
        loaded.base_image = _snapshot_image(Path(paths[0]), policy, report)
        if until_offset is not None and loaded.base_image.last_offset >= until_offset:
            raise InputError(f"the snapshot already holds offsets up to {loaded.base_image.last_offset}, past "
                             f"--as-of-offset {until_offset - 1}")
    elif kind is InputKind.SEGMENT:
        # Read as a log of these segments (MetadataLog): in offset order, and checked as a log is — offsets that
        # go back (a corrupt baseOffset, outside the CRC) or leave a hole are bad input, not a replay fault.
        log = MetadataLog.open(list(paths))
        first = min(s.base_offset for c in log.copies for s in c.segments)
        loaded.entries = (e for e in log.log_entries(start_offset=first, until_offset=until_offset, policy=policy,
                                                     report=report) if isinstance(e, LogEntry))
    elif kind is InputKind.JSONL:
        loaded.entries = _until(_read_jsonl_files(paths, policy, report), until_offset)
    else:
        readers = [DumpLogReader.from_path(p, policy=ErrorPolicy.FAIL if policy == "fail" else ErrorPolicy.SKIP)
                   for p in paths]
        loaded.dump_readers.extend(readers)
        loaded.entries = _until((e for r in readers for e in r.entries()), until_offset)
    return loaded


def _read_jsonl_files(paths: Sequence[str | Path], policy: ReadPolicy, report: ReadReport) -> Iterator[StreamEntry]:
    for p in paths:
        report.files += 1
        with Path(p).open("rb") as f:  # bytes: a line that is not UTF-8 is one bad line, not a crash
            yield from read_jsonl(f, source=str(p), policy=policy, report=report)
