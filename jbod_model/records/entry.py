"""A record at its place in a metadata log: the unit every reader yields and replay consumes."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Final, TypeVar

from jbod_model.records.metadata import Record
from jbod_model.slots import slot_constructor


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One metadata record with its provenance.

    ``offset`` is the record's log offset (for a snapshot, the offset *local* to the snapshot file unless the
    reader rebased it); ``batch_base_offset``, ``leader_epoch`` (the batch's partitionLeaderEpoch) and
    ``timestamp`` (ms, the batch's append time) come from the record batch; ``source`` names the file (or
    stream) it was read from, so a replay fault can say where the bad record is.
    """

    offset: int
    record: Record
    batch_base_offset: int | None = None
    leader_epoch: int | None = None
    timestamp: int | None = None
    source: str | None = None


#: ``LogEntry(offset, record, batch_base_offset, leader_epoch, timestamp, source)`` for the log readers, which
#: build one per record: the same object without the keyword ``__init__`` (LogEntry has no ``__post_init__``).
new_log_entry: Final = slot_constructor(LogEntry)

E = TypeVar("E", bound=LogEntry)


def group_batches(entries: Iterable[E]) -> Iterator[list[E]]:
    """The record batches of a log, in order: runs of consecutive entries sharing a ``batch_base_offset`` (a batch
    is what Kafka appends, and replays, atomically). An entry without one — JSONL that does not say — is a batch of
    its own. Streams: one batch in memory at a time."""
    batch: list[E] = []
    for entry in entries:
        if batch and (entry.batch_base_offset is None or entry.batch_base_offset != batch[0].batch_base_offset):
            yield batch
            batch = []
        batch.append(entry)
    if batch:
        yield batch
