"""Kafka's 128-bit ``Uuid``: two signed 64-bit halves, printed as 22 characters of unpadded base64url.

Mirrors ``org.apache.kafka.common.Uuid`` (clients). Ordering is Kafka's ``compareTo``: the most significant half as
a *signed* long, then the least significant half as a signed long — so ids whose first character is in ``g..z``,
``0..9``, ``-`` or ``_`` (top bit set) sort before ids starting ``A..f``. Brokers' online-directory lists are kept in
this order, and the image reproduces it.
"""

from __future__ import annotations

import base64
import binascii
import secrets
import struct
from typing import NamedTuple

from jbod_model.errors import InputError

_MASK64 = (1 << 64) - 1


def _signed64(value: int) -> int:
    value &= _MASK64
    return value - (1 << 64) if value >= 1 << 63 else value


class _Halves(NamedTuple):
    msb: int
    lsb: int


class Uuid(_Halves):
    """A Kafka Uuid held as ``(msb, lsb)``, both signed 64-bit integers as in Java (Kafka's
    ``getMostSignificantBits`` and ``getLeastSignificantBits``).

    A tuple of its two halves: ids are the keys of nearly every map of a replay (topics, partitions as (topic id,
    partition id), directories), and a tuple's hash and equality run in C — a class of its own paid a Python call
    for every hash, 35 M of them in the Spark operator over the 200 k-partition benchmark log (docs/performance.md,
    "Uuid as a tuple"). Equal ids hash alike and compare equal by value, with the hash of ``(msb, lsb)`` as before;
    tuple order is Kafka's ``compareTo`` (the signed halves in turn). Being a tuple, an id equals the plain tuple of
    its halves; nothing in the model mixes the two. The halves are named tuple fields: reading one costs what
    reading a slot did."""

    __slots__ = ()

    def __new__(cls, msb: int, lsb: int) -> Uuid:
        if not (-(1 << 63) <= msb < 1 << 63 and -(1 << 63) <= lsb < 1 << 63):
            raise InputError(f"Uuid halves must be signed 64-bit integers, got ({msb}, {lsb})")
        return tuple.__new__(cls, (msb, lsb))

    def __reduce__(self) -> tuple[type[Uuid], tuple[int, int]]:
        return Uuid, (self[0], self[1])

    @classmethod
    def from_bytes(cls, data: bytes) -> Uuid:
        """The Uuid of 16 big-endian bytes (msb first), as on the wire."""
        if len(data) != 16:
            raise InputError(f"A Uuid is 16 bytes, got {len(data)}")
        return cls(int.from_bytes(data[:8], "big", signed=True), int.from_bytes(data[8:], "big", signed=True))

    @classmethod
    def from_int(cls, value: int) -> Uuid:
        """The Uuid whose 128-bit unsigned value is ``value`` (msb in the high bits)."""
        return cls(_signed64(value >> 64), _signed64(value))

    @classmethod
    def from_string(cls, text: str) -> Uuid:
        """Mirrors ``Uuid.fromString``: at most 24 characters, base64url with optional padding, exactly 16 bytes."""
        if not isinstance(text, str):
            raise InputError(f"A Uuid string must be a str, got {type(text).__name__}")
        # The twin of __str__'s cache: stored images and rows name the same directories and topics over and over.
        found = _PARSED.get(text)
        if found is not None:
            return found
        if len(text) > 24:
            raise InputError(f"Input string with prefix `{text[:24]}` is too long to be decoded as a base64 UUID")
        # Java's URL-safe decoder rejects '+' and '/' and any other character outside the alphabet.
        stripped = text.rstrip("=")
        if any(c not in _B64URL for c in stripped) or len(text) - len(stripped) > 2:
            raise InputError(f"Input string `{text}` is not a valid base64url string")
        try:
            data = base64.urlsafe_b64decode(stripped + "=" * (-len(stripped) % 4))
        except (binascii.Error, ValueError) as e:
            raise InputError(f"Input string `{text}` is not a valid base64url string: {e}") from e
        if len(data) != 16:
            raise InputError(f"Input string `{text}` decoded as {len(data)} bytes, which is not equal to the "
                             "expected 16 bytes of a base64-encoded UUID")
        parsed = cls.from_bytes(data)
        if len(_PARSED) >= _TEXT_MAX:
            _PARSED.clear()
        _PARSED[text] = parsed
        return parsed

    @classmethod
    def random(cls) -> Uuid:
        """Mirrors ``Uuid.randomUuid``: a random v4 id, re-drawn while it is ZERO/ONE or prints with a leading '-'."""
        while True:
            raw = bytearray(secrets.token_bytes(16))
            raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
            raw[8] = (raw[8] & 0x3F) | 0x80  # IETF variant
            u = cls.from_bytes(bytes(raw))
            if u not in (ZERO_UUID, ONE_UUID) and not str(u).startswith("-"):
                return u

    def to_bytes(self) -> bytes:
        """16 big-endian bytes, msb first (the wire form)."""
        return _HALVES.pack(*self)

    def __str__(self) -> str:
        # An image names the same few thousand ids (topics, directories) millions of times, and formatting one
        # costs microseconds: remember the text of recent ids (bounded; simply cleared when full).
        text = _TEXT.get(self)
        if text is None:
            text = base64.urlsafe_b64encode(_HALVES.pack(*self))[:22].decode("ascii")
            if len(_TEXT) >= _TEXT_MAX:
                _TEXT.clear()
            _TEXT[self] = text
        return text

    def __repr__(self) -> str:
        return f"Uuid({self})"


_HALVES = struct.Struct(">qq")
#: The text of ids printed recently (see ``Uuid.__str__``); a pure function of the id, so sharing it is safe.
_TEXT: dict[Uuid, str] = {}
_TEXT_MAX = 1 << 16
#: The ids of texts parsed recently (see ``Uuid.from_string``; only valid texts, whose id is a pure function of them).
_PARSED: dict[str, Uuid] = {}

_B64URL = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")

ZERO_UUID = Uuid(0, 0)
ONE_UUID = Uuid(0, 1)
#: The topic id of ``__cluster_metadata`` (``Uuid.METADATA_TOPIC_ID``), the same value as ``ONE_UUID``.
METADATA_TOPIC_ID = ONE_UUID
