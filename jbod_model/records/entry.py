"""A record at its place in a metadata log: the unit every reader yields and replay consumes."""

from __future__ import annotations

from dataclasses import dataclass

from jbod_model.records.metadata import Record


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
