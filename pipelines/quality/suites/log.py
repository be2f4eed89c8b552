"""The ``log`` suite: the bronze records replayed through :class:`jbod_model.invariants.InvariantTracker`'s step
checks, for the invariants that need a whole record batch (I10, I11, I16, I17, I19); I20 is skipped (it needs the
snapshot files)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from typing import Any

from jbod_model import invariants as inv
from jbod_model.errors import ReplayFault
from jbod_model.records.entry import new_log_entry
from jbod_model.replay import replay_entries
from pipelines.quality.expectations import Check, Skip, expect_not_in
from pipelines.quality.frames import (
    Build,
    Frame,
    FrameBuilder,
    column_ints,
    column_values,
    make_frame,
)
from pipelines.quality.inputs import to_ms

CHECKS: tuple[Check, ...] = (
    expect_not_in("I10.replica_changes_carry_directories", "log", "log_violations", "invariant", "I10", "I10",
                  "records: at ≥ 3.7-IV2 partition creations and replica-set changes carry Directories"),
    expect_not_in("I11.single_directory_broker_placement", "log", "log_violations", "invariant", "I11", "I11",
                  "records: a new replica on a single-directory broker goes to that directory"),
    expect_not_in("I16.directory_failure_handled_in_batch", "log", "log_violations", "invariant", "I16", "I16",
                  "records: a directory going offline demotes its replicas in the same batch"),
    expect_not_in("I17.offline_assignment_demotes", "log", "log_violations", "invariant", "I17", "I17",
                  "records: an assignment into an offline directory demotes the replica in the same batch"),
    expect_not_in("I19.epochs_move_in_fixed_steps", "log", "log_violations", "invariant", "I19", "I19",
                  "records: partition and leader epochs step by one; a new incarnation has a higher broker epoch"),
)

SKIPS: tuple[Skip, ...] = (
    Skip("I20.snapshot_equals_replay", "log", "I20",
         "the tables hold one replay; comparing a snapshot with the replay up to it needs the snapshot files, "
         "which the tables do not keep"),
)

#: Step-scope invariants only a whole record batch can decide; the log suite runs the model's step checks for these.
LOG_INVARIANTS = ("I10", "I11", "I16", "I17", "I19")


def _f_log_violations(b: Build) -> Frame:
    """The bronze records through the model's step checks (``InvariantTracker``), batch by batch. A snapshot in the
    records — the one the stream started from, or one it re-bootstrapped from after Kafka deleted segments it had
    not read (``log_gaps``) — restarts the checks from the snapshot's image, as the job's replay restarted there."""
    # Step checks only: the history (I12, I21, I9's warning) is the history suite's, from the history tables; and
    # only this suite's (the other step checks' invariants are the structural suite's, per row of the tables).
    options: dict[str, Any] = {"image_checks": False, "history_checks": False, "step_names": LOG_INVARIANTS}
    tracker = inv.InvariantTracker(**options)
    wanted = set(LOG_INVARIANTS)
    found: list[inv.Violation] = []
    note: str | None = None
    checked = batches = snapshots = 0
    started_from_snapshot = False

    def group_key(row: _LogRow) -> tuple[str, int]:
        # A snapshot's records are one group; a record without a batch base offset (JSONL) is a batch of its own.
        origin, offset, base = row[:3]
        if origin == "snapshot":
            return "snapshot", offset
        return "log", offset if base is None else base

    decode = b.decode
    try:
        for (kind, _), group in itertools.groupby(_log_rows(b), key=group_key):
            # Positionally (LogEntry's fields in order): a million entries at 200 k partitions.
            entries = [new_log_entry(offset, rec, base, epoch, stamp, source)
                       for _, offset, base, epoch, stamp, source, type_name, version, data, payload in group
                       if (rec := decode(type_name, version, data, payload)) is not None]
            if kind == "snapshot":
                tracker = inv.InvariantTracker(replay_entries(entries), **options)
                started_from_snapshot = started_from_snapshot or (snapshots == 0 and batches == 0)
                snapshots += 1
            elif entries:
                found += tracker.feed_batch(entries)
                batches += 1
                checked += len(entries)
    except ReplayFault as fault:
        # The job applied these records, so the model should too; if not, every result says where the check stopped.
        note = f"; the step checks stopped there: {fault}"
    rows = [{"invariant": v.invariant, "offset": v.offset, "topic_id": None if v.topic_id is None else str(v.topic_id),
             "partition_id": v.partition_id, "broker_id": v.broker_id,
             "directory": None if v.directory is None else str(v.directory), "message": v.message}
            for v in found if v.invariant in wanted]
    cols = {"invariant": "string", "offset": "Int64", "topic_id": "string", "partition_id": "Int64",
            "broker_id": "Int64", "directory": "string", "message": "string"}
    return Frame("log_violations", make_frame(rows, cols),
                 ("row", "offset", "topic_id", "partition_id", "broker_id", "directory"), ("message",),
                 note=f"{checked} records in {batches} batches re-checked by jbod_model's step checks"
                      + (" (from the snapshot the replay started with)" if started_from_snapshot else "")
                      + (f" (restarted at {restarts} re-bootstrap snapshot(s))"
                         if (restarts := snapshots - started_from_snapshot) else "")
                      + (note or ""))


#: What the log suite reads of a ``records`` row: origin, offset, batch base offset, leader epoch, time in ms, source,
#: type, version, data, payload.
_LogRow = tuple[str, int, int | None, int | None, int | None, str | None, str, int, str | None, str | None]


def _log_rows(b: Build) -> Iterator[_LogRow]:
    """The records the step checks read, in offset order — with the snapshot's order: a snapshot's records share one
    offset, and replaying them out of order (a PartitionRecord before its TopicRecord) is a fault. Read a range of
    offsets at a time (:meth:`TableSet.records`), never the log whole, and a column at a time into plain values (a
    pandas row tuple per record, its fields looked up by name, cost ≈ 2 s of the 200 k log's)."""
    # NoOps only fill batches of their own: no step check reads them, and TableSet.records leaves them out.
    for recs in b.tables.records(["origin", "offset", "batch_base_offset", "leader_epoch", "timestamp", "source",
                                  "type", "version", "data", "payload"]):
        if not recs.empty:
            yield from zip(column_values(recs["origin"]), column_ints(recs["offset"]),
                           column_ints(recs["batch_base_offset"]), column_ints(recs["leader_epoch"]),
                           column_ints(to_ms(recs["timestamp"])), column_values(recs["source"]),
                           column_values(recs["type"]), column_ints(recs["version"]), column_values(recs["data"]),
                           column_values(recs["payload"]), strict=True)


#: The frames this suite builds, by name.
FRAMES: Mapping[str, FrameBuilder] = {
    "log_violations": _f_log_violations,
}
#: The tables each frame reads through ``Build``.
READS: Mapping[str, frozenset[str]] = {"log_violations": frozenset()}
