"""One root error type, two regimes under it (style: Kafka's ApiException vs "BUG:" IllegalStateException).

* :class:`RequestRejected` — an *expected* refusal of a controller request. Kafka carries these as error codes in
  the response; the reference controller does the same and only raises them internally between a validation step
  and the handler that turns them into a response.
* :class:`ReplayFault` — the metadata log cannot be applied: the input is corrupt or the model has a bug. It names
  where the record came from (file, offset) and the record itself.
* :class:`DecodeError` — bytes or text that cannot be decoded into records (file and byte offset or line).
* :class:`InputError` — a caller asked for something malformed (bad JSON line, unknown request type, bad UUID).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jbod_model.errors_codes import Errors


class JbodError(Exception):
    """Root of every error raised by kraft-jbod."""


class InputError(JbodError, ValueError):
    """Malformed input given by a caller: a bad UUID string, JSON that does not fit a schema, an unknown type."""


class RequestRejected(JbodError):
    """A controller request refused with a Kafka error code (an expected outcome, never a fault)."""

    def __init__(self, error: Errors, message: str | None = None) -> None:
        self.error = error
        self.message = message
        super().__init__(f"{error.name}: {message}" if message else error.name)


class ReplayFault(JbodError):
    """A record cannot be replayed onto the image: corrupt input or a bug. Mirrors Kafka's replay exceptions
    (``IllegalStateException``/``RuntimeException`` thrown from ``*ControlManager.replay`` and image deltas)."""

    def __init__(self, reason: str, *, record: object = None, offset: int | None = None,
                 source: str | None = None) -> None:
        self.reason = reason
        self.record = record
        self.offset = offset
        self.source = source
        where = []
        if source is not None:
            where.append(f"file {source}")
        if offset is not None:
            where.append(f"offset {offset}")
        at = f" at {', '.join(where)}" if where else ""
        super().__init__(f"Unable to replay {record!r}{at}: {reason}")

    def located(self, *, offset: int | None, source: str | None = None) -> ReplayFault:
        """The same fault, with the position filled in by a caller that knows it."""
        return ReplayFault(self.reason, record=self.record,
                           offset=self.offset if offset is None else offset,
                           source=self.source if source is None else source)


class DecodeError(JbodError):
    """Bytes or text that cannot be decoded (corrupt batch, CRC mismatch, bad frame, garbage line)."""

    def __init__(self, reason: str, *, source: str | None = None, position: int | None = None,
                 line: int | None = None) -> None:
        self.reason = reason
        self.source = source
        self.position = position
        self.line = line
        where = []
        if source is not None:
            where.append(source)
        if position is not None:
            where.append(f"byte {position}")
        if line is not None:
            where.append(f"line {line}")
        super().__init__(f"{': '.join([', '.join(where), reason]) if where else reason}")
