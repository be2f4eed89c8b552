"""Records that cannot replay because of a range skipped under policy ``skip`` (issue #15, item 12).

Under ``--policy skip`` a reader leaves out what it cannot decode and every good record is still read. A skipped
range may have held what a later record needs — the TopicRecord a PartitionChangeRecord refers to, the broker
registration a fencing change names — and then that later record faults on replay (Kafka's
``ReplicationControlManager.replay``/``ClusterControlManager.replay`` would refuse it too: the log it sees is not
the log Kafka wrote). Such a fault is a *consequence* of the gap, not a new fault: the replay records it with the
gap it follows, marks the entities the record touches as unknown (their state after the gap is not known), leaves
the record out and goes on with everything else.

A fault with no skipped range before it is still a fault (exit 4, replay stops): nothing was left out that could
explain it. Under policy ``fail`` nothing is ever skipped, so nothing is ever a consequence.

Mechanism: a :class:`GapConsequences` is made active for a block of replay with :meth:`GapConsequences.active`.
Every replay path funnels each record through :meth:`jbod_model.replay.MetadataDelta.replay`, which asks the active
one (:func:`absorb`) before raising; so the controller's replayer, the report's trackers and the Spark operator's
incremental replayer all leave out the same records. A record validates before it changes anything, so the state
after a left-out record is exactly the state before it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import Any

from jbod_model.errors import ReplayFault
from jbod_model.records.entry import LogEntry
from jbod_model.uuid import Uuid


@dataclass(frozen=True, slots=True, order=True)
class UnknownEntity:
    """A partition, topic or broker whose state is unknown after a gap: a record about it could not be replayed.
    ``kind`` is ``partition`` (``topic_id`` and ``partition_id``), ``topic`` or ``broker`` (``broker_id``)."""

    kind: str
    topic_id: str | None = None
    partition_id: int | None = None
    broker_id: int | None = None

    def to_json(self) -> dict[str, Any]:
        """``{"kind", "topicId"?, "partitionId"?, "brokerId"?}``: the keys that identify the entity."""
        keys = {"kind": self.kind, "topicId": self.topic_id, "partitionId": self.partition_id,
                "brokerId": self.broker_id}
        return {k: v for k, v in keys.items() if v is not None}

    def __str__(self) -> str:
        if self.kind == "partition":
            return f"partition {self.topic_id}:{self.partition_id}"
        if self.kind == "topic":
            return f"topic {self.topic_id}"
        return f"broker {self.broker_id}"


def touched_entities(record: object) -> tuple[UnknownEntity, ...]:
    """The partition, topic or broker a metadata record is about (by its Kafka field names: ``topicId`` with
    ``partitionId``, ``topicId``, ``brokerId`` — ``id`` for the legacy Fence/UnfenceBrokerRecord)."""
    topic = getattr(record, "topic_id", None)
    if isinstance(topic, Uuid):
        partition = getattr(record, "partition_id", None)
        if isinstance(partition, int):
            return (UnknownEntity("partition", str(topic), partition),)
        return (UnknownEntity("topic", str(topic)),)
    broker = getattr(record, "broker_id", None)
    if broker is None and type(record).__name__ in ("FenceBrokerRecord", "UnfenceBrokerRecord"):
        broker = getattr(record, "id", None)
    if isinstance(broker, int):
        return (UnknownEntity("broker", broker_id=broker),)
    return ()


@dataclass(frozen=True, slots=True)
class Consequence:
    """A record left out of the replay because it faulted after a skipped range."""

    offset: int | None
    record_type: str
    reason: str
    #: The skipped range(s) before it, in words (the last one read, and how many there were).
    gap: str
    entities: tuple[UnknownEntity, ...]

    def to_json(self) -> dict[str, Any]:
        return {"offset": self.offset, "type": self.record_type, "reason": self.reason, "gap": self.gap,
                "unknown": [e.to_json() for e in self.entities]}

    def __str__(self) -> str:
        about = ", ".join(str(e) for e in self.entities) or "no single entity"
        return (f"offset {self.offset} ({self.record_type}) was not replayed: {self.reason} — a consequence of "
                f"{self.gap}; unknown after it: {about}")


_ACTIVE: ContextVar[GapConsequences | None] = ContextVar("jbod_gap_consequences", default=None)


class GapConsequences:
    """Collects the consequences of skipped ranges during one replay. ``latest_gap`` says which ranges were skipped
    before the record being replayed (None: none yet, so a fault is a fault)."""

    def __init__(self, latest_gap: Callable[[], str | None]) -> None:
        self._latest_gap = latest_gap
        # By (offset, record type): several replayers (controller, trackers) replay the same record.
        self._found: dict[tuple[int | None, str], Consequence] = {}

    @property
    def consequences(self) -> list[Consequence]:
        return sorted(self._found.values(), key=lambda c: (c.offset is None, c.offset or 0, c.record_type))

    @property
    def unknown(self) -> list[UnknownEntity]:
        """Every entity marked unknown, once, in a stable order."""
        return sorted({e for c in self._found.values() for e in c.entities})

    def absorb(self, fault: ReplayFault, dropped: Sequence[LogEntry] = ()) -> bool:
        """Record ``fault`` as a consequence when a range was skipped before it; False leaves it a fault.
        ``dropped``: entries left out with it (a metadata transaction whose end was lost), whose entities become
        unknown too."""
        gap = self._latest_gap()
        if gap is None:
            return False
        record_type = str(getattr(fault.record, "TYPE_NAME", type(fault.record).__name__))
        key = (fault.offset, record_type)
        if key not in self._found:
            entities = tuple(dict.fromkeys([*touched_entities(fault.record),
                                            *(t for e in dropped for t in touched_entities(e.record))]))
            self._found[key] = Consequence(fault.offset, record_type, fault.reason, gap, entities)
        return True

    @contextmanager
    def active(self) -> Iterator[GapConsequences]:
        """Make this the collector the replay asks while the block runs (a generator consumed inside it too)."""
        token = self.activate()
        try:
            yield self
        finally:
            self.deactivate(token)

    def activate(self) -> Token[GapConsequences | None]:
        """:meth:`active` for a caller that cannot wrap its replay in a ``with`` block; pair with
        :meth:`deactivate` in a ``finally``."""
        return _ACTIVE.set(self)

    @staticmethod
    def deactivate(token: Token[GapConsequences | None]) -> None:
        _ACTIVE.reset(token)


def current_gap() -> str | None:
    """The latest skipped range the active :class:`GapConsequences` knows of, in words (None: none is active, or
    nothing was skipped yet). A metadata transaction open while it changes may have lost its end in the new range
    (:meth:`jbod_model.replay.TransactionBuffer.interrupt`)."""
    active = _ACTIVE.get()
    return None if active is None else active._latest_gap()


def absorb(fault: ReplayFault, dropped: Sequence[LogEntry] = ()) -> bool:
    """Whether the active :class:`GapConsequences` takes ``fault`` as a consequence of a skipped range (the
    replay then leaves the record out and goes on); False when none is active or nothing was skipped."""
    active = _ACTIVE.get()
    return active is not None and active.absorb(fault, dropped)


def with_consequences(doc: dict[str, Any], gaps: GapConsequences) -> dict[str, Any]:
    """A JSON document (the image, docs/image-json.md, or the report, docs/report-json.md) with ``unknown`` (the
    entities marked unknown) and ``gapConsequences`` (the records left out) added when a replay under policy
    ``skip`` left any record out; unchanged otherwise."""
    fields = consequence_fields(gaps)
    return {**doc, **fields} if fields else doc


def consequence_fields(gaps: GapConsequences) -> dict[str, Any]:
    """The keys :func:`with_consequences` adds to a document: ``unknown`` and ``gapConsequences`` when a replay
    under policy ``skip`` left any record out, none otherwise."""
    found = gaps.consequences
    if not found:
        return {}
    return {"unknown": [e.to_json() for e in gaps.unknown], "gapConsequences": [c.to_json() for c in found]}
