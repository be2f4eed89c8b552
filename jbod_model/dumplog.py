"""Reader of ``kafka-dump-log.sh --cluster-metadata-decoder`` text output (formats reference §4.1).

Mirrors the printing side of Kafka's ``DumpLogSegments``: the Scala ``kafka.tools.DumpLogSegments`` (3.0–4.0)
and the Java port ``org.apache.kafka.tools.DumpLogSegments`` (4.1+). It turns the text back into
:class:`~jbod_model.records.entry.LogEntry` objects (metadata records, in order) and typed events for
everything else (file headers, batch headers, control records, torn tails, skipped records).

**Layouts.** Both tools print the same file, batch and record lines. They differ in two places:

* LEADER_CHANGE control records: the Scala tool and the first Java port print
  ``controlType: LEADER_CHANGE(2)`` with no content; since KAFKA-19069 (apache/kafka#19729) the Java tool
  prints ``LeaderChange: {json}``.
* ``--skip-record-metadata``: the Scala tool prints `` payload: {…}`` (leading space, no ``|``); the Java tool
  prints ``| payload: {…}``. Both print an empty line for each control record and keep the batch lines.

:attr:`DumpLogReport.layout` says which layout the text showed (``UNKNOWN`` when nothing tells them apart).

**Offsets under ``--skip-record-metadata``** (a design choice). Record lines then carry no offset. Kafka still
prints the batch line before the records, so a record's offset is the batch's ``baseOffset`` plus its position
in the batch, which is exact for KRaft (metadata batches are never compacted, so offsets inside a batch have
no gaps). When no batch line precedes the record (an excerpt of payload lines only), the offset is unknowable:
the entry gets ``offset = UNKNOWN_OFFSET`` (-1, Kafka's own "no offset" value) and
``batch_base_offset = None``, and :attr:`DumpLogReport.unknown_offsets` counts them. The timestamp falls back
to the batch's max timestamp (KRaft appends every record of a batch with the same time) or ``None``.

**Wrapped lines.** Text copied from PR descriptions or mail is often hard-wrapped. A line that does not start
with a known prefix is joined, with a single space, to the previous line while that line is still incomplete:
its JSON does not parse yet (an unclosed string, object or array), or a batch or record line lacks its last
field. Blank lines, known prefixes and the end of input close a pending line. Any other line (prose, markdown,
shell prompts) is ignored.

**Errors.** A payload that is not valid JSON after joining, JSON that does not fit the record schema, and a
batch or record line that cannot be parsed raise :class:`~jbod_model.errors.DecodeError` under
:attr:`ErrorPolicy.FAIL`; under :attr:`ErrorPolicy.SKIP` they become :class:`DumpProblem` events (line,
reason) and every good record is kept. Kafka's own ``payload: Error at <offset>, skipping. <message>`` and
``Found N invalid bytes at the end of <file>`` are reported under both policies, never raised: the dump
already says what was lost.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import Enum, StrEnum
from pathlib import Path
from typing import Any, Final, TypeAlias, cast

from jbod_model.errors import DecodeError, InputError
from jbod_model.records.control import (
    CONTROL_VALUE_VERSION,
    TYPED_CONTROL_RECORDS,
    ControlEntry,
    ControlMessage,
    ControlRecord,
    ControlRecordType,
)
from jbod_model.records.entry import LogEntry
from jbod_model.records.json_codec import dumps, message_from_json, record_from_json, record_to_json
from jbod_model.records.metadata import Record

#: The offset of a record whose offset the dump does not show (``--skip-record-metadata``, no batch line).
UNKNOWN_OFFSET: Final = -1

#: ``TimestampType.toString`` values; a batch or record line names its type in front of the timestamp.
TIMESTAMP_TYPES: Final = ("CreateTime", "LogAppendTime", "NoTimestampType")


class ErrorPolicy(StrEnum):
    """What to do with a line that is part of the format but cannot be decoded."""

    #: Raise :class:`~jbod_model.errors.DecodeError` naming the text file and line.
    FAIL = "fail"
    #: Drop the record, report it as a :class:`DumpProblem`, keep going.
    SKIP = "skip"


class DumpLayout(StrEnum):
    """Which ``DumpLogSegments`` printed the text (see the module docstring)."""

    SCALA = "scala"
    JAVA = "java"
    #: Both layouts appear (dumps from two Kafka versions pasted together).
    MIXED = "mixed"
    #: Nothing in the text tells the layouts apart (no LEADER_CHANGE, no ``--skip-record-metadata`` lines).
    UNKNOWN = "unknown"


class ProblemKind(StrEnum):
    """Why a line of the dump did not become a record or an event."""

    #: Kafka printed ``payload: Error at <offset>, skipping. <message>``: it could not decode the record.
    KAFKA_DECODE_ERROR = "kafka_decode_error"
    #: The payload (or control-record JSON) is not valid or truncated JSON, even after joining wrapped lines.
    INVALID_JSON = "invalid_json"
    #: Valid JSON that does not fit the metadata record schema (unknown type, missing field, wrong type).
    SCHEMA_MISMATCH = "schema_mismatch"
    #: A batch line that starts like one but cannot be parsed (the following records lose their batch).
    MALFORMED_BATCH_LINE = "malformed_batch_line"
    #: A record line that starts like one but cannot be parsed.
    MALFORMED_RECORD_LINE = "malformed_record_line"
    #: A data record line without ``payload:`` (a dump made without ``--cluster-metadata-decoder``).
    MISSING_PAYLOAD = "missing_payload"
    #: A data batch announced ``count`` records but the dump shows another number (a truncated excerpt).
    RECORD_COUNT_MISMATCH = "record_count_mismatch"


#: Problems that lose or corrupt a record: fatal under :attr:`ErrorPolicy.FAIL`. The others are reported only.
FATAL_PROBLEMS: Final = frozenset({
    ProblemKind.INVALID_JSON, ProblemKind.SCHEMA_MISMATCH, ProblemKind.MALFORMED_BATCH_LINE,
    ProblemKind.MALFORMED_RECORD_LINE, ProblemKind.MISSING_PAYLOAD,
})
#: Problems where a record the dump printed is missing from the entries.
_DROPPED_RECORD: Final = frozenset({
    ProblemKind.KAFKA_DECODE_ERROR, ProblemKind.INVALID_JSON, ProblemKind.SCHEMA_MISMATCH,
    ProblemKind.MALFORMED_RECORD_LINE, ProblemKind.MISSING_PAYLOAD,
})


# ------------------------------------------------------------------------------------------------------------
# Events


@dataclass(frozen=True, slots=True)
class FileStarted:
    """``Dumping <path>``: the tool starts a file (``--files`` takes a comma-separated list)."""

    line: int
    path: str


@dataclass(frozen=True, slots=True)
class LogStartOffset:
    """``Log starting offset: N``: the file is a log segment whose name is its base offset."""

    line: int
    file: str | None
    offset: int


@dataclass(frozen=True, slots=True)
class SnapshotStarted:
    """``Snapshot end offset: o, epoch: e``: the file is the snapshot ``<o>-<e>.checkpoint`` (offsets inside
    it are local to the snapshot and start at 0)."""

    line: int
    file: str | None
    end_offset: int
    epoch: int


@dataclass(frozen=True, slots=True)
class BootstrapSnapshotStarted:
    """``KRaft bootstrap snapshot``: the file is ``bootstrap.checkpoint``."""

    line: int
    file: str | None


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """A batch line (``DumpLogSegments.printBatchLevel``). Only ``baseOffset``, ``isControl``,
    ``partitionLeaderEpoch`` and the timestamp are required; the rest is ``None`` when the line lacks it."""

    line: int
    file: str | None
    base_offset: int
    is_control: bool
    partition_leader_epoch: int
    timestamp_type: str
    max_timestamp: int
    last_offset: int | None = None
    count: int | None = None
    is_transactional: bool | None = None
    position: int | None = None
    size: int | None = None
    crc: int | None = None
    is_valid: bool | None = None
    compression: str | None = None


@dataclass(frozen=True, slots=True)
class ControlRecordEvent:
    """A control record line: not a metadata record, so it is an event, never a :class:`LogEntry`.

    ``control_type`` is ``None`` for a type Kafka printed as ``UNKNOWN(n)``; ``type_id`` is the wire value.
    ``data`` is the JSON the tool printed (``SnapshotHeader {…}``, ``KRaftVoters {…}``, Java's
    ``LeaderChange: {…}``) and ``message`` the same content as a typed control message; for an ABORT/COMMIT
    marker ``data`` is ``{"coordinatorEpoch": n}``. Both are ``None`` when the tool printed only
    ``controlType: NAME(id)`` (LEADER_CHANGE in the Scala layout, or a type it did not know).
    """

    line: int
    file: str | None
    offset: int
    timestamp: int | None
    control_type: ControlRecordType | None
    type_id: int
    data: dict[str, Any] | None
    batch_base_offset: int | None
    leader_epoch: int | None
    message: ControlMessage | None = None

    def to_entry(self) -> ControlEntry | None:
        """The record as the binary reader yields it (:class:`ControlEntry`), when the dump printed its
        content; ``None`` otherwise."""
        if self.message is None:
            return None
        # TYPED_CONTROL_RECORDS holds exactly the typed members of the ControlRecord union.
        return ControlEntry(offset=self.offset, record=cast(ControlRecord, self.message),
                            batch_base_offset=self.batch_base_offset, leader_epoch=self.leader_epoch,
                            timestamp=self.timestamp, source=self.file)


@dataclass(frozen=True, slots=True)
class TrailingBytes:
    """``Found N invalid bytes at the end of <file>``: a torn tail after the last whole batch. Never fatal
    (Kafka truncates such a tail on recovery)."""

    line: int
    file_name: str
    count: int


@dataclass(frozen=True, slots=True)
class DumpProblem:
    """A line that did not become a record or event; ``text`` is the (joined) line, cut to 200 characters."""

    line: int
    kind: ProblemKind
    reason: str
    offset: int | None = None
    file: str | None = None
    text: str = ""


DumpEvent: TypeAlias = (
    FileStarted | LogStartOffset | SnapshotStarted | BootstrapSnapshotStarted | BatchHeader
    | ControlRecordEvent | TrailingBytes | DumpProblem
)
DumpItem: TypeAlias = LogEntry | DumpEvent


@dataclass(frozen=True, slots=True)
class DumpLogReport:
    """What a dump held besides its records: layout, counts, problems and torn tails."""

    source: str | None
    layout: DumpLayout
    files: tuple[str, ...]
    entries: int
    batches: int
    control_records: int
    unknown_offsets: int
    ignored_lines: int
    problems: tuple[DumpProblem, ...]
    trailing_bytes: tuple[TrailingBytes, ...]

    @property
    def skipped(self) -> tuple[DumpProblem, ...]:
        """Printed records missing from :meth:`DumpLogReader.entries` (dropped by Kafka or by this reader)."""
        return tuple(p for p in self.problems if p.kind in _DROPPED_RECORD)

    @property
    def clean(self) -> bool:
        """True when every printed record was read and no file had a torn tail."""
        return not self.problems and not self.trailing_bytes


# ------------------------------------------------------------------------------------------------------------
# Line grammar

_DUMPING = re.compile(r"Dumping (?P<path>\S(?:.*\S)?\.(?:log|checkpoint|index|timeindex|snapshot|txnindex))")
#: A long path makes hard-wrapping leave "Dumping" alone on its line, the path on the next.
_DUMPING_WORD = "Dumping"
_LOG_START = re.compile(r"Log starting offset: (?P<offset>-?\d+)")
_SNAPSHOT = re.compile(r"Snapshot end offset: (?P<offset>-?\d+), epoch: (?P<epoch>-?\d+)")
_BOOTSTRAP = "KRaft bootstrap snapshot"
_TRAILING = re.compile(r"Found (?P<count>\d+) invalid bytes at the end of (?P<file>\S(?:.*\S)?)")
_BATCH_START = re.compile(r"baseOffset: -?\d")
_BATCH_END = re.compile(r"\bisvalid: (?:true|false)$")
_FIELD = re.compile(r"(\w+): (\S+)")
_RECORD_START = "| offset: "
_JAVA_SKIP_START = "| payload: "
_SCALA_SKIP_START = "payload: "
_RECORD_HEAD = re.compile(
    r"\| offset: (?P<offset>-?\d+) (?P<ts_type>CreateTime|LogAppendTime|NoTimestampType): (?P<ts>-?\d+)"
    r" keySize: -?\d+ valueSize: -?\d+"
    r"(?: sequence: -?\d+ headerKeys: \[[^\]]*\])?"
    r"(?: isValid: \S+ crc: \S+)?"
)
_CONTROL_TYPE = re.compile(r"controlType: (?P<name>\w+)\((?P<id>-?\d+)\)")
_END_TXN = re.compile(r"endTxnMarker: (?P<name>ABORT|COMMIT) coordinatorEpoch: (?P<epoch>-?\d+)")
_KAFKA_ERROR = re.compile(r"Error at (?P<offset>-?\d+), skipping\.(?: (?P<message>.*))?", re.DOTALL)
#: Control-record labels printed in front of their JSON (``DumpLogSegments.printControlRecord``).
_CONTROL_LABELS: Final = (
    ("LeaderChange: ", ControlRecordType.LEADER_CHANGE),
    ("SnapshotHeader ", ControlRecordType.SNAPSHOT_HEADER),
    ("SnapshotFooter ", ControlRecordType.SNAPSHOT_FOOTER),
    ("KRaftVersion ", ControlRecordType.KRAFT_VERSION),
    ("KRaftVoters ", ControlRecordType.KRAFT_VOTERS),
)


class _Kind(Enum):
    DUMPING = "dumping"
    LOG_START = "log_start"
    SNAPSHOT = "snapshot"
    BOOTSTRAP = "bootstrap"
    TRAILING = "trailing"
    BATCH = "batch"
    RECORD = "record"
    JAVA_SKIP = "java_skip"
    SCALA_SKIP = "scala_skip"


def _classify(text: str) -> _Kind | None:
    """The kind of line ``text`` (already stripped) starts, or None for a line outside the format."""
    if text.startswith(_RECORD_START):
        return _Kind.RECORD
    if text.startswith(_JAVA_SKIP_START):
        return _Kind.JAVA_SKIP
    if text.startswith(_SCALA_SKIP_START):
        return _Kind.SCALA_SKIP
    if _BATCH_START.match(text):
        return _Kind.BATCH
    if _DUMPING.fullmatch(text) or text == _DUMPING_WORD:
        return _Kind.DUMPING
    if _LOG_START.fullmatch(text):
        return _Kind.LOG_START
    if _SNAPSHOT.fullmatch(text):
        return _Kind.SNAPSHOT
    if text == _BOOTSTRAP:
        return _Kind.BOOTSTRAP
    if _TRAILING.fullmatch(text):
        return _Kind.TRAILING
    return None


class _Status(Enum):
    COMPLETE = "complete"
    NEEDS_MORE = "needs_more"
    BROKEN = "broken"


def _reject_constant(name: str) -> Any:
    # Jackson never prints NaN/Infinity; Python's json would accept them.
    raise ValueError(f"invalid JSON literal {name}")


#: One decoder, built once: json.loads with keyword arguments builds a new decoder on every call.
_JSON: Final = json.JSONDecoder(parse_constant=_reject_constant)
_INT: Final = re.compile(r"-?\d+")


def _parse_json(text: str) -> tuple[_Status, Any, str]:
    """``(status, value, error)`` for JSON text that may still be missing its wrapped tail.

    NEEDS_MORE means the text is a proper prefix of some JSON value (an unclosed string, object or array):
    only then is joining the next line worth trying. BROKEN means no continuation can repair it.
    """
    try:
        return _Status.COMPLETE, _JSON.decode(text), ""
    except ValueError as e:
        error = str(e)
    stack: list[str] = []
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]" and (not stack or stack.pop() != ch):
            return _Status.BROKEN, None, error
    if (in_string or stack) and text.lstrip()[:1] in ("{", "["):
        return _Status.NEEDS_MORE, None, error
    return _Status.BROKEN, None, error


def _int(fields: dict[str, str], key: str) -> int | None:
    value = fields.get(key)
    if value is None or not _INT.fullmatch(value):
        return None
    return int(value)


def _bool(fields: dict[str, str], key: str) -> bool | None:
    value = fields.get(key)
    return {"true": True, "false": False}.get(value) if value is not None else None


def _cut(text: str) -> str:
    return text if len(text) <= 200 else text[:197] + "..."


# ------------------------------------------------------------------------------------------------------------
# Parser


@dataclass(slots=True)
class _Pending:
    """A logical line being assembled from one or more physical lines."""

    kind: _Kind
    line: int
    text: str
    lines: int = 1


class _DumpParser:
    """The state machine behind :func:`iter_dump_log` and :class:`DumpLogReader` (one pass, line by line)."""

    def __init__(self, source: str | None, policy: ErrorPolicy) -> None:
        self.source = source
        self.policy = policy
        self.file: str | None = None
        self.files: list[str] = []
        self.batch: BatchHeader | None = None
        self.seen_in_batch = 0
        self.pending: _Pending | None = None
        self.saw_scala = False
        self.saw_java = False
        self.ignored_lines = 0
        self.unknown_offsets = 0
        self._json_memo: tuple[str, tuple[_Status, Any, str]] | None = None

    @property
    def layout(self) -> DumpLayout:
        if self.saw_scala and self.saw_java:
            return DumpLayout.MIXED
        if self.saw_scala:
            return DumpLayout.SCALA
        if self.saw_java:
            return DumpLayout.JAVA
        return DumpLayout.UNKNOWN

    # -- driving ---------------------------------------------------------------------------------------------

    def feed(self, lineno: int, raw: str) -> list[DumpItem]:
        """Items completed by physical line ``lineno``."""
        text = raw.strip()
        out: list[DumpItem] = []
        kind = _classify(text) if text else None
        if self.pending is not None:
            if not text:
                out += self._finish(self.pending, forced=True)
                self.pending = None
                return out
            if kind is None or self._continues(self.pending, kind):
                self.pending.text = f"{self.pending.text} {text}"
                self.pending.lines += 1
                out += self._try_finish()
                return out
            out += self._finish(self.pending, forced=True)
            self.pending = None
        if kind is None:
            if text:
                self.ignored_lines += 1
            return out
        self.pending = _Pending(kind, lineno, text)
        out += self._try_finish()
        return out

    def close(self) -> list[DumpItem]:
        """Items completed by the end of input."""
        out: list[DumpItem] = []
        if self.pending is not None:
            out += self._finish(self.pending, forced=True)
            self.pending = None
        out += self._end_batch()
        return out

    @staticmethod
    def _continues(pending: _Pending, kind: _Kind) -> bool:
        # A record line wrapped just before its payload leaves "payload: {…}" at the start of the next line,
        # which looks like the Scala --skip-record-metadata variant; a metadata record line cannot lack its
        # payload or control suffix, so the fragment belongs to it.
        return pending.kind is _Kind.RECORD and kind is _Kind.SCALA_SKIP

    def _try_finish(self) -> list[DumpItem]:
        assert self.pending is not None
        if self._status(self.pending) is _Status.NEEDS_MORE:
            return []
        pending, self.pending = self.pending, None
        return self._finish(pending, forced=False)

    # -- completeness ----------------------------------------------------------------------------------------

    def _status(self, p: _Pending) -> _Status:
        if p.kind is _Kind.BATCH:
            return _Status.COMPLETE if _BATCH_END.search(p.text) else _Status.NEEDS_MORE
        if p.kind is _Kind.RECORD:
            head = _RECORD_HEAD.match(p.text)
            if head is None:
                return _Status.NEEDS_MORE
            return self._suffix_status(p.text[head.end():].lstrip())
        if p.kind in (_Kind.JAVA_SKIP, _Kind.SCALA_SKIP):
            prefix = _JAVA_SKIP_START if p.kind is _Kind.JAVA_SKIP else _SCALA_SKIP_START
            return self._payload_status(p.text[len(prefix):])
        if p.kind is _Kind.DUMPING and not _DUMPING.fullmatch(p.text):
            return _Status.NEEDS_MORE if p.text == _DUMPING_WORD else _Status.BROKEN
        return _Status.COMPLETE

    def _suffix_status(self, rest: str) -> _Status:
        if rest.startswith("payload: "):
            return self._payload_status(rest[len("payload: "):])
        for label, _ in _CONTROL_LABELS:
            if rest.startswith(label):
                return self._json(rest[len(label):], keep=True)[0]
        if _CONTROL_TYPE.fullmatch(rest) or _END_TXN.fullmatch(rest):
            return _Status.COMPLETE
        # Empty, or the tail of the record metadata (sequence, headerKeys) wrapped onto the next line.
        return _Status.NEEDS_MORE

    def _payload_status(self, payload: str) -> _Status:
        if _KAFKA_ERROR.match(payload):
            return _Status.COMPLETE
        return self._json(payload, keep=True)[0]

    def _json(self, text: str, *, keep: bool = False) -> tuple[_Status, Any, str]:
        """:func:`_parse_json`, run once per complete line: the completeness check keeps its result for the
        emitting step, which takes it (so no two events ever share one parsed object)."""
        memo, self._json_memo = self._json_memo, None
        result = memo[1] if memo is not None and memo[0] == text else _parse_json(text)
        if keep:
            self._json_memo = (text, result)
        return result

    # -- emitting --------------------------------------------------------------------------------------------

    def _problem(self, p: _Pending, kind: ProblemKind, reason: str, offset: int | None = None) -> DumpProblem:
        if self.policy is ErrorPolicy.FAIL and kind in FATAL_PROBLEMS:
            raise DecodeError(reason, source=self.source, line=p.line)
        return DumpProblem(line=p.line, kind=kind, reason=reason, offset=offset, file=self.file,
                           text=_cut(p.text))

    def _finish(self, p: _Pending, *, forced: bool) -> list[DumpItem]:
        match p.kind:
            case _Kind.DUMPING:
                m = _DUMPING.fullmatch(p.text)
                if m is None:  # "Dumping" followed by prose, not by a path
                    self.ignored_lines += p.lines
                    return []
                out = self._end_batch()
                self.file = m["path"]
                self.files.append(self.file)
                return [*out, FileStarted(line=p.line, path=self.file)]
            case _Kind.LOG_START:
                m = _LOG_START.fullmatch(p.text)
                assert m is not None
                start = LogStartOffset(line=p.line, file=self.file, offset=int(m["offset"]))
                return [*self._end_batch(), start]
            case _Kind.SNAPSHOT:
                m = _SNAPSHOT.fullmatch(p.text)
                assert m is not None
                snapshot = SnapshotStarted(line=p.line, file=self.file, end_offset=int(m["offset"]),
                                           epoch=int(m["epoch"]))
                return [*self._end_batch(), snapshot]
            case _Kind.BOOTSTRAP:
                return [*self._end_batch(), BootstrapSnapshotStarted(line=p.line, file=self.file)]
            case _Kind.TRAILING:
                m = _TRAILING.fullmatch(p.text)
                assert m is not None
                tail = TrailingBytes(line=p.line, file_name=m["file"], count=int(m["count"]))
                return [*self._end_batch(), tail]
            case _Kind.BATCH:
                return self._finish_batch(p)
            case _Kind.RECORD:
                return self._finish_record(p)
            case _Kind.JAVA_SKIP | _Kind.SCALA_SKIP:
                return self._finish_skip_payload(p)

    def _end_batch(self) -> list[DumpItem]:
        """Close the current batch, checking that a data batch showed as many records as it announced."""
        batch, seen = self.batch, self.seen_in_batch
        self.batch, self.seen_in_batch = None, 0
        # Control batches are left out: with --skip-record-metadata their records print as empty lines.
        if batch is None or batch.is_control or batch.count is None or batch.count == seen:
            return []
        reason = (f"batch at baseOffset {batch.base_offset} announces {batch.count} records but the dump "
                  f"shows {seen} (truncated excerpt?)")
        return [DumpProblem(line=batch.line, kind=ProblemKind.RECORD_COUNT_MISMATCH, reason=reason,
                            offset=batch.base_offset, file=batch.file)]

    def _finish_batch(self, p: _Pending) -> list[DumpItem]:
        out = self._end_batch()
        fields = dict(_FIELD.findall(p.text))
        base = _int(fields, "baseOffset")
        epoch = _int(fields, "partitionLeaderEpoch")
        is_control = _bool(fields, "isControl")
        ts_type = next((t for t in TIMESTAMP_TYPES if t in fields), None)
        max_ts = _int(fields, ts_type) if ts_type is not None else None
        if base is None or epoch is None or is_control is None or ts_type is None or max_ts is None:
            missing = [name for name, value in (("baseOffset", base), ("partitionLeaderEpoch", epoch),
                                                 ("isControl", is_control), ("CreateTime", max_ts))
                       if value is None]
            out.append(self._problem(p, ProblemKind.MALFORMED_BATCH_LINE,
                                     f"batch line without a readable {', '.join(missing)}"))
            return out
        self.batch = BatchHeader(
            line=p.line, file=self.file, base_offset=base, is_control=is_control,
            partition_leader_epoch=epoch, timestamp_type=ts_type, max_timestamp=max_ts,
            last_offset=_int(fields, "lastOffset"),
            count=_int(fields, "count"), is_transactional=_bool(fields, "isTransactional"),
            position=_int(fields, "position"), size=_int(fields, "size"), crc=_int(fields, "crc"),
            is_valid=_bool(fields, "isvalid"), compression=fields.get("compresscodec"),
        )
        out.append(self.batch)
        return out

    def _batch_of(self, offset: int) -> BatchHeader | None:
        """The current batch if ``offset`` lies in it (an excerpt may lack the batch line of a record)."""
        b = self.batch
        if b is None or offset < b.base_offset or (b.last_offset is not None and offset > b.last_offset):
            return None
        return b

    def _finish_record(self, p: _Pending) -> list[DumpItem]:
        head = _RECORD_HEAD.match(p.text)
        if head is None:
            return [self._problem(p, ProblemKind.MALFORMED_RECORD_LINE,
                                  "record line without a readable offset, timestamp, keySize or valueSize")]
        self.seen_in_batch += 1
        offset = int(head["offset"])
        timestamp = None if head["ts_type"] == "NoTimestampType" else int(head["ts"])
        rest = p.text[head.end():].lstrip()
        if rest.startswith("payload: "):
            return self._emit_payload(p, rest[len("payload: "):], offset, timestamp, self._batch_of(offset))
        for label, control_type in _CONTROL_LABELS:
            if rest.startswith(label):
                if control_type is ControlRecordType.LEADER_CHANGE:
                    self.saw_java = True
                what = f"{label.strip(' :')} JSON at offset {offset}"
                status, value, error = self._json(rest[len(label):])
                if status is not _Status.COMPLETE or not isinstance(value, dict):
                    why = error if status is not _Status.COMPLETE else "expected a JSON object"
                    return [self._problem(p, ProblemKind.INVALID_JSON, f"{what} is not valid: {why}", offset)]
                try:
                    # Kafka writes control records at ControlRecordUtils' version 0, and prints them at it.
                    message = message_from_json(TYPED_CONTROL_RECORDS[control_type], value,
                                                CONTROL_VALUE_VERSION, what)
                except InputError as e:
                    reason = f"{what} does not fit its schema: {e}"
                    return [self._problem(p, ProblemKind.SCHEMA_MISMATCH, reason, offset)]
                return [self._control(p, offset, timestamp, control_type, type_id=int(control_type),
                                      data=value, message=message)]
        if m := _CONTROL_TYPE.fullmatch(rest):
            type_id = int(m["id"])
            if type_id == ControlRecordType.LEADER_CHANGE:
                self.saw_scala = True
            known = ControlRecordType.from_value(type_id)
            return [self._control(p, offset, timestamp, known, type_id=type_id, data=None)]
        if m := _END_TXN.fullmatch(rest):
            control_type = ControlRecordType[m["name"]]
            return [self._control(p, offset, timestamp, control_type, type_id=int(control_type),
                                  data={"coordinatorEpoch": int(m["epoch"])})]
        # Only a forced flush gets here: an unfinished suffix keeps the line pending until then.
        if not rest:
            return [self._problem(p, ProblemKind.MISSING_PAYLOAD,
                                  f"record line at offset {offset} has no payload (was the dump made with "
                                  "--cluster-metadata-decoder?)", offset)]
        return [self._problem(p, ProblemKind.MALFORMED_RECORD_LINE,
                              f"record line at offset {offset} ends in neither a payload nor a control "
                              "record",
                              offset)]

    def _control(self, p: _Pending, offset: int, timestamp: int | None,
                 control_type: ControlRecordType | None, *, type_id: int, data: dict[str, Any] | None,
                 message: ControlMessage | None = None) -> ControlRecordEvent:
        batch = self._batch_of(offset)
        return ControlRecordEvent(
            line=p.line, file=self.file, offset=offset, timestamp=timestamp, control_type=control_type,
            type_id=type_id, data=data, batch_base_offset=batch.base_offset if batch else None,
            leader_epoch=batch.partition_leader_epoch if batch else None, message=message,
        )

    def _finish_skip_payload(self, p: _Pending) -> list[DumpItem]:
        if p.kind is _Kind.JAVA_SKIP:
            self.saw_java = True
            payload = p.text[len(_JAVA_SKIP_START):]
        else:
            self.saw_scala = True
            payload = p.text[len(_SCALA_SKIP_START):]
        b = self.batch
        index = self.seen_in_batch
        self.seen_in_batch += 1
        if b is not None and (b.last_offset is None or b.base_offset + index <= b.last_offset):
            offset, batch = b.base_offset + index, b
        else:
            offset, batch = UNKNOWN_OFFSET, None
        timestamp = batch.max_timestamp if batch and batch.timestamp_type != "NoTimestampType" else None
        return self._emit_payload(p, payload, offset, timestamp, batch)

    def _emit_payload(self, p: _Pending, payload: str, offset: int, timestamp: int | None,
                      batch: BatchHeader | None) -> list[DumpItem]:
        known = offset if offset != UNKNOWN_OFFSET else None
        if m := _KAFKA_ERROR.match(payload):
            message = (m["message"] or "").strip()
            return [DumpProblem(line=p.line, kind=ProblemKind.KAFKA_DECODE_ERROR,
                                reason=f"Kafka could not decode the record at offset {m['offset']}: "
                                       f"{message}",
                                offset=int(m["offset"]), file=self.file, text=_cut(p.text))]
        status, value, error = self._json(payload)
        where = f"offset {offset}" if known is not None else "unknown offset"
        if status is not _Status.COMPLETE:
            why = "truncated" if status is _Status.NEEDS_MORE else error
            return [self._problem(p, ProblemKind.INVALID_JSON, f"payload at {where} is not valid JSON: {why}",
                                  known)]
        if not isinstance(value, dict):
            return [self._problem(p, ProblemKind.SCHEMA_MISMATCH,
                                  f"payload at {where} is {type(value).__name__}, not a JSON object", known)]
        try:
            record = record_from_json(value, where=f"payload at {where}")
        except InputError as e:
            return [self._problem(p, ProblemKind.SCHEMA_MISMATCH, str(e), known)]
        if offset == UNKNOWN_OFFSET:
            self.unknown_offsets += 1
        return [LogEntry(
            offset=offset, record=record, batch_base_offset=batch.base_offset if batch else None,
            leader_epoch=batch.partition_leader_epoch if batch else None, timestamp=timestamp,
            source=self.file if self.file is not None else self.source,
        )]


# ------------------------------------------------------------------------------------------------------------
# Public API


def _split_lines(text: str) -> list[str]:
    # Not str.splitlines: it also splits on U+2028, \x1c and friends, which Jackson leaves raw inside strings.
    return re.split(r"\r\n|\r|\n", text)


def iter_dump_log(lines: Iterable[str], *, source: str | None = None,
                  policy: ErrorPolicy | str = ErrorPolicy.FAIL) -> Iterator[DumpItem]:
    """Stream the records and events of ``DumpLogSegments`` output, in order, without keeping them.

    ``lines`` may be an open text file; ``source`` names it in errors. Raises :class:`DecodeError` under
    :attr:`ErrorPolicy.FAIL` when a line cannot be decoded (see the module docstring).
    """
    parser = _DumpParser(source, ErrorPolicy(policy))
    for lineno, raw in enumerate(lines, start=1):
        yield from parser.feed(lineno, raw)
    yield from parser.close()


class DumpLogReader:
    """Reads one ``kafka-dump-log.sh --cluster-metadata-decoder`` text (any number of ``Dumping`` sections).

    The text is parsed once, on first use; :meth:`entries` gives the metadata records as :class:`LogEntry`,
    :meth:`events` everything else, :meth:`items` both in order and :meth:`report` the summary. Under
    :attr:`ErrorPolicy.FAIL` the first use raises :class:`DecodeError` if a line cannot be decoded.
    """

    def __init__(self, lines: Iterable[str], *, source: str | None = None,
                 policy: ErrorPolicy | str = ErrorPolicy.FAIL) -> None:
        # A str is an Iterable[str] of characters; take it as the dump text rather than fail line by line.
        self._lines = _split_lines(lines) if isinstance(lines, str) else lines
        self.source = source
        self.policy = ErrorPolicy(policy)
        self._items: tuple[DumpItem, ...] | None = None
        self._parser: _DumpParser | None = None

    @classmethod
    def from_text(cls, text: str, *, source: str | None = None,
                  policy: ErrorPolicy | str = ErrorPolicy.FAIL) -> DumpLogReader:
        """A reader of dump text held in memory."""
        return cls(_split_lines(text), source=source, policy=policy)

    @classmethod
    def from_path(cls, path: str | os.PathLike[str], *,
                  policy: ErrorPolicy | str = ErrorPolicy.FAIL) -> DumpLogReader:
        """A reader of a saved dump file; errors name the file as given."""
        # errors="replace": stray bytes in surrounding prose must not stop the reader; a payload hit by them
        # then fails JSON or schema checks and is handled by the policy.
        text = Path(path).read_text(encoding="utf-8", errors="replace")
        return cls(_split_lines(text), source=os.fspath(path), policy=policy)

    def _parse(self) -> tuple[tuple[DumpItem, ...], _DumpParser]:
        if self._items is None or self._parser is None:
            parser = _DumpParser(self.source, self.policy)
            items: list[DumpItem] = []
            for lineno, raw in enumerate(self._lines, start=1):
                items += parser.feed(lineno, raw)
            items += parser.close()
            self._items, self._parser = tuple(items), parser
        return self._items, self._parser

    def items(self) -> Iterator[DumpItem]:
        """Records and events interleaved, in the order the dump printed them."""
        return iter(self._parse()[0])

    def entries(self) -> Iterator[LogEntry]:
        """The metadata records, in order."""
        return (i for i in self._parse()[0] if isinstance(i, LogEntry))

    def events(self) -> Iterator[DumpEvent]:
        """Everything that is not a metadata record: file and batch headers, control records, problems."""
        return (i for i in self._parse()[0] if not isinstance(i, LogEntry))

    def control_records(self) -> Iterator[ControlRecordEvent]:
        """The control records: LEADER_CHANGE, SNAPSHOT_HEADER/FOOTER, KRAFT_VERSION/VOTERS, txn markers."""
        return (i for i in self._parse()[0] if isinstance(i, ControlRecordEvent))

    def report(self) -> DumpLogReport:
        """Layout, counts, problems and torn tails of the whole text."""
        items, parser = self._parse()
        return DumpLogReport(
            source=self.source,
            layout=parser.layout,
            files=tuple(parser.files),
            entries=sum(isinstance(i, LogEntry) for i in items),
            batches=sum(isinstance(i, BatchHeader) for i in items),
            control_records=sum(isinstance(i, ControlRecordEvent) for i in items),
            unknown_offsets=parser.unknown_offsets,
            ignored_lines=parser.ignored_lines,
            problems=tuple(i for i in items if isinstance(i, DumpProblem)),
            trailing_bytes=tuple(i for i in items if isinstance(i, TrailingBytes)),
        )


def payload_json(record: Record) -> str:
    """A record's ``payload:`` text exactly as ``DumpLogSegments`` prints it.

    ``ClusterMetadataLogMessageParser`` builds ``{"type":…,"version":…,"data":{…}}`` and prints it compact,
    keys in Kafka's order. The inspect command reuses this to print records the way operators know them.
    """
    return dumps(record_to_json(record))
