"""The stream runner: committed records and controller requests, in order, through one reference controller.

An input stream is an ordered sequence of entries, each either a committed metadata record (a
:class:`~jbod_model.records.entry.LogEntry`, replayed as read) or a request to the controller (a
:class:`RequestEntry`, handled by :class:`~jbod_model.controller.controller.ReferenceController`, whose records are
written at the next offsets and replayed). For every request the runner yields a :class:`RequestEvent` with the
response and the records written; records produce no event. The result is deterministic for a given input.

The canonical text form is JSON Lines, one object per line::

    {"offset": 0, "type": "FEATURE_LEVEL_RECORD", "version": 0, "data": {"name": "metadata.version", ...}}
    {"type": "BROKER_REGISTRATION_REQUEST", "version": 4, "data": {"brokerId": 1, ...}}

``type`` is a metadata record type name (``data`` as ``kafka-dump-log`` prints it; ``offset`` and ``version``
required; optional ``timestamp``, ``leaderEpoch``, ``batchBaseOffset``) or ``"<API>_REQUEST"`` (``offset`` optional
and informational, ``version`` optional = the latest). Blank lines are skipped; a bad line is a
:class:`~jbod_model.errors.DecodeError` naming its file and line number (skipped and reported under policy
``skip``). :func:`entry_to_json` / :func:`write_jsonl` write the same form.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from jbod_model.controller.context import ControllerConfig
from jbod_model.controller.controller import ReferenceController
from jbod_model.controller.messages import (
    REQUEST_TYPES,
    ApiRequest,
    ApiResponse,
    api_message_to_json,
    request_from_json,
)
from jbod_model.controller.result import ApiError
from jbod_model.errors import DecodeError, InputError
from jbod_model.image import MetadataImage
from jbod_model.records.entry import LogEntry
from jbod_model.records.json_codec import dumps, record_from_json, record_to_json
from jbod_model.slots import gc_paused_iteration
from jbod_model.storage.log_reader import ReadPolicy, ReadReport, SkippedRegion


@dataclass(frozen=True, slots=True)
class RequestEntry:
    """A request to the controller at its place in an input stream. ``offset`` is the request's position in the
    input, if it has one (it is echoed in the event; the records it causes get the controller's next offsets)."""

    offset: int | None
    request: ApiRequest
    source: str | None = None


StreamEntry = LogEntry | RequestEntry


@dataclass(frozen=True, slots=True)
class RequestEvent:
    """What handling one request produced."""

    offset: int | None
    request: ApiRequest
    response: ApiResponse
    entries: tuple[LogEntry, ...]
    #: The top-level error Kafka would raise as an exception (code + message), when there is one.
    error: ApiError | None = None

    @property
    def type(self) -> str:
        return self.request.TYPE_NAME

    def to_json(self) -> dict[str, Any]:
        """``{"offset", "type", "response", "records": [{"offset", "type", "version", "data"}]}``, plus
        ``"errorMessage"`` when the request failed at the top level with a message (Kafka's exception text, which
        not every response schema can carry)."""
        out: dict[str, Any] = {
            "offset": self.offset,
            "type": self.type,
            "response": self.response.to_json(),
            "records": [{"offset": e.offset, **record_to_json(e.record)} for e in self.entries],
        }
        if self.error is not None and self.error.message is not None:
            out["errorMessage"] = self.error.message
        return out


class StreamRunner:
    """Runs entries through one :class:`ReferenceController`; ``image`` is the state after the last entry."""

    __slots__ = ("_controller",)

    def __init__(self, controller: ReferenceController | None = None, *,
                 config: ControllerConfig | None = None) -> None:
        if controller is not None and config is not None:
            raise InputError("Pass either a controller or a config, not both")
        self._controller = controller if controller is not None else ReferenceController(config=config)

    @property
    def controller(self) -> ReferenceController:
        return self._controller

    @property
    def image(self) -> MetadataImage:
        return self._controller.image

    def run(self, entries: Iterable[StreamEntry]) -> Iterator[RequestEvent]:
        """Process entries in order; yield one event per request. A committed record's offset must be at or past
        the controller's next offset (records the controller wrote already occupy the earlier ones).

        Reading and replaying run with the cyclic collector paused (:func:`jbod_model.slots.gc_paused_iteration`: a
        large log allocates millions of small acyclic objects next to a growing image); the caller's code between
        events runs with the collector as the caller had it."""
        yield from gc_paused_iteration(self._run(entries))

    def _run(self, entries: Iterable[StreamEntry]) -> Iterator[RequestEvent]:
        for entry in entries:
            if isinstance(entry, RequestEntry):
                handled = self._controller.handle_request(entry.request, source=entry.source)
                yield RequestEvent(offset=entry.offset, request=entry.request, response=handled.response,
                                   entries=handled.entries, error=handled.error)
            else:
                if entry.offset < self._controller.next_offset:
                    where = f" ({entry.source})" if entry.source else ""
                    raise InputError(f"Record at offset {entry.offset}{where} is behind the log: the next offset is "
                                     f"{self._controller.next_offset}")
                self._controller.replay(entry)


def run_stream(entries: Iterable[StreamEntry], config: ControllerConfig | None = None
               ) -> tuple[list[RequestEvent], MetadataImage]:
    """Run a whole stream from an empty image; return every event and the final image."""
    runner = StreamRunner(config=config)
    events = list(runner.run(entries))
    return events, runner.image


# ---------------------------------------------------------------------------------------------------------------
# JSON Lines


def _optional_int(obj: Mapping[str, Any], key: str, label: str) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{label}: '{key}' must be an integer, got {value!r}")
    return value


def entry_from_json(obj: Any, where: str = "", source: str | None = None) -> StreamEntry:
    """One stream entry from its JSON object (see the module docstring)."""
    label = where or "entry"
    if not isinstance(obj, Mapping):
        raise InputError(f"{label}: expected a JSON object, got {type(obj).__name__}")
    type_name = obj.get("type")
    if not isinstance(type_name, str):
        raise InputError(f"{label}: 'type' must be a string, got {type_name!r}")
    offset = _optional_int(obj, "offset", label)
    if type_name in REQUEST_TYPES:
        version = obj.get("version")
        if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
            raise InputError(f"{label}: 'version' must be an integer, got {version!r}")
        request = request_from_json(type_name, obj.get("data"), version, f"{label} {type_name}")
        return RequestEntry(offset=offset, request=request, source=source)
    if type_name.endswith("_REQUEST"):
        raise InputError(f"{label}: unknown request type {type_name!r}; known: {', '.join(sorted(REQUEST_TYPES))}")
    if offset is None:
        raise InputError(f"{label}: a record needs an integer 'offset'")
    if offset < 0:
        raise InputError(f"{label}: 'offset' must not be negative, got {offset}")
    record = record_from_json(obj, label)
    return LogEntry(offset=offset, record=record, batch_base_offset=_optional_int(obj, "batchBaseOffset", label),
                    leader_epoch=_optional_int(obj, "leaderEpoch", label),
                    timestamp=_optional_int(obj, "timestamp", label), source=source)


def parse_jsonl_line(line: str | bytes, line_number: int, source: str | None = None) -> StreamEntry | None:
    """Parse one line (1-based ``line_number`` for messages); None for a blank line. A line that is not UTF-8,
    not JSON or not an entry is undecodable text: a :class:`~jbod_model.errors.DecodeError` naming the file and
    line, with the same message whichever command reads it."""
    if isinstance(line, bytes):
        try:
            line = line.decode("utf-8")
        except UnicodeDecodeError as e:
            raise DecodeError(f"not UTF-8 text: {e.reason} at column {e.start + 1}", source=source,
                              line=line_number) from None
    if not line.strip():
        return None
    where = f"{source}:{line_number}" if source else f"line {line_number}"
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise DecodeError(f"not valid JSON: {e.msg} (column {e.colno})", source=source, line=line_number) from None
    try:
        return entry_from_json(obj, where, source)
    except InputError as e:
        # The schema errors name the entry by ``where`` (and the field under it); the error names file and line.
        message = str(e)
        reason = message[len(where):].lstrip(":. ") if message.startswith(where) else message
        raise DecodeError(reason, source=source, line=line_number) from e


def read_jsonl(lines: Iterable[str | bytes], source: str | None = None, *, policy: ReadPolicy = "fail",
               report: ReadReport | None = None, first_line: int = 1, first_position: int = 0
               ) -> Iterator[StreamEntry]:
    """Parse JSON Lines lazily; blank lines are skipped. Under ``policy="skip"`` an undecodable line is left out
    and recorded in ``report`` (file, byte position, line and reason), and every other line is read. A caller
    that starts inside a file says which line and byte ``lines`` start at."""
    rep = report if report is not None else ReadReport()
    position = first_position
    for number, line in enumerate(lines, start=first_line):
        size = len(line) if isinstance(line, bytes) else len(line.encode("utf-8"))
        try:
            entry = parse_jsonl_line(line, number, source)
        except DecodeError as e:
            if policy == "fail":
                raise
            # The line's own bytes, without its newline: what a reader that splits lines itself reports too.
            length = size - 1 if line[-1:] in ("\n", b"\n") else size
            rep.skipped.append(SkippedRegion(source or "", position, length, e.reason, line=number))
            entry = None
        position += size
        if entry is not None:
            yield entry


def load_jsonl(path: str | Path) -> list[StreamEntry]:
    """Every entry of a JSON Lines file (its name is the entries' ``source``)."""
    path = Path(path)
    with path.open(encoding="utf-8") as f:
        return list(read_jsonl(f, source=path.name))


def entry_to_json(entry: StreamEntry) -> dict[str, Any]:
    """The JSON object of one entry (inverse of :func:`entry_from_json`)."""
    if isinstance(entry, RequestEntry):
        out: dict[str, Any] = {}
        if entry.offset is not None:
            out["offset"] = entry.offset
        out.update(api_message_to_json(entry.request))
        return out
    out = {"offset": entry.offset, **record_to_json(entry.record)}
    if entry.timestamp is not None:
        out["timestamp"] = entry.timestamp
    if entry.leader_epoch is not None:
        out["leaderEpoch"] = entry.leader_epoch
    if entry.batch_base_offset is not None:
        out["batchBaseOffset"] = entry.batch_base_offset
    return out


def entry_to_line(entry: StreamEntry) -> str:
    """One JSON Lines line (no trailing newline)."""
    return dumps(entry_to_json(entry))


def write_jsonl(entries: Iterable[StreamEntry], out: TextIO) -> int:
    """Write entries as JSON Lines; return how many were written."""
    n = 0
    for entry in entries:
        out.write(entry_to_line(entry))
        out.write("\n")
        n += 1
    return n
