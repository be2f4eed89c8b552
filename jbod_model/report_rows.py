"""Parts of a report's history (:class:`~jbod_model.report.ReportHistory`) from plain rows of the Spark job's tables
instead of a replay of the log: pure functions over values, no table reader here (``pipelines.report.load`` reads
the rows and hands them in).

A replay observes the log batch by batch (:class:`~jbod_model.report.BatchFeed`) and dates what it sees by the
batch: a clock started "at" a batch carries that batch's last committed offset and time. The tables hold the state
as intervals of offsets instead (``valid_from_offset`` inclusive, ``valid_to_offset`` exclusive). So the functions
here take both: where the batches ended (:func:`batch_ends`, from the ``records`` table's offset, batch and type
columns — no record is decoded) and the intervals, and look at the state only where a replay would have: at the
end of each batch.

:func:`pending_since` gives since when each pending placement has been pending (I12's clocks, what
:meth:`~jbod_model.invariants.InvariantTracker.pending_placements` says after the same batches), from
``replica_assignment_history``, ``broker_history`` and ``feature_history``. A hypothesis property
(``tests/pipelines/report/test_report_rows.py``) proves both equal to the replay's on the tables the job's own
operator writes.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from jbod_model.errors import InputError
from jbod_model.invariants import PLACEHOLDERS
from jbod_model.metadata_version import MetadataVersion
from jbod_model.records.metadata import (
    AbortTransactionRecord,
    BeginTransactionRecord,
    EndTransactionRecord,
    NoOpRecord,
)
from jbod_model.report import LogPosition, PartitionKey, ReplicaKey, SeriesPoint, add_series_point
from jbod_model.uuid import Uuid

_BEGIN, _END, _ABORT = (BeginTransactionRecord.TYPE_NAME, EndTransactionRecord.TYPE_NAME,
                        AbortTransactionRecord.TYPE_NAME)
_MARKERS = frozenset((_BEGIN, _END, _ABORT))
_NO_OP = NoOpRecord.TYPE_NAME


@dataclass(frozen=True, slots=True)
class PlacementVersion:
    """One ``replica_assignment_history`` version: the replica's directory from ``start`` (inclusive) to ``end``
    (exclusive; None while current)."""

    topic_id: Uuid
    partition_id: int
    broker_id: int
    directory: Uuid
    start: int
    end: int | None


@dataclass(frozen=True, slots=True)
class BrokerVersion:
    """One ``broker_history`` version: the broker registered, fenced or not, from ``start`` to ``end``."""

    broker_id: int
    fenced: bool
    start: int
    end: int | None


@dataclass(frozen=True, slots=True)
class LevelVersion:
    """One ``feature_history`` version of ``metadata.version``: its feature level from ``start`` to ``end``."""

    level: int
    start: int
    end: int | None


@dataclass(frozen=True, slots=True)
class ObservedBatch:
    """A batch as a :class:`~jbod_model.report.BatchFeed` observes it: the offset of its last committed record, and
    the first and the last non-null batch time among its committed records, in the order they become visible
    (:class:`~jbod_model.report.IncidentTracker` dates with the first,
    :class:`~jbod_model.invariants.InvariantTracker` with the last)."""

    end: int
    first_ts: int | None
    last_ts: int | None


def observed_batches(offsets: Sequence[int], bases: Sequence[int | None], stamps: Sequence[int | None],
                     types: Sequence[str], applied: Sequence[int | None] | None = None, *,
                     changes_only: bool = False) -> list[ObservedBatch]:
    """The batches a :class:`~jbod_model.report.BatchFeed` observes, in log order, from the ``records`` table's
    columns (the records' offsets, batch base offsets, batch times in ms, ``TYPE_NAME``s; offset order). Batches
    are grouped as ``BatchFeed.feed`` groups them (by batch base offset; a row without one is a batch of its own)
    and committed as ``BatchFeed`` commits them through ``TransactionBuffer.settle_all`` (a transaction's records
    at its EndTransactionRecord, ahead of it; an aborted one's never — only the AbortTransactionRecord itself); a
    batch that commits nothing is not observed. The rows hold no fault a replay would raise on (the job stopped
    before those, ``replay_faults``).
    ``applied`` (the ``applied_offset`` column; None: not known) leaves out the rows that never took effect: under
    policy ``skip`` a transaction a skipped range interrupted (``TransactionBuffer.interrupt``), its Begin included,
    is such rows, and the records after the range are the feed's outside any transaction — as are an aborted
    transaction's, whose Abort then commits alone, as it does anyway.

    ``changes_only`` leaves out the *idle* batches — those that commit NoOpRecords alone — where a report's history
    cannot differ from a replay that observes them: replaying a NoOp changes no state, so every count, incident,
    clock and follow-up a tracker keeps reads at an idle batch's end what it read at the batch before, and whatever
    a tracker dates "at the first batch end where …" is dated by a batch with a record that made it so. Three idle
    batches still count and are kept: the first (a tracker starting from the empty image adds its series' first
    point there, whatever the counts), the last (the history's ``until``) and the last with a time (its time is the
    history's latest one when no batch after it has a time). A controller writes a NoOp batch every half second
    or so (``metadata.max.idle.interval.ms``): most batches of a long log are idle, and a report walks its batches
    several times over.

    One pass keeping, per batch, only its last committed offset and two times (a log has millions of rows)."""
    out: list[ObservedBatch] = []
    # The buffered batch: its base, whether it committed anything, its last committed offset, first and last time.
    base: int | None = None
    started = committed = False
    last_offset = 0
    first_ts: int | None = None
    last_ts: int | None = None
    # An open transaction: whether it is, and the first and last non-null time among its records.
    in_txn = False
    txn_first: int | None = None
    txn_last: int | None = None
    # The buffered batch committed a record other than a NoOp; under changes_only, the idle batches held back since
    # the last kept batch (the latest) and since the last kept batch with a time (the latest with one).
    busy = not changes_only
    idle_last: tuple[int, int | None, int | None] | None = None
    idle_timed: tuple[int, int | None, int | None] | None = None
    rows: Iterable[tuple[int, int | None, int | None, str]] = zip(offsets, bases, stamps, types, strict=True)
    if applied is not None:
        rows = (row for row, at in zip(rows, applied, strict=True) if at is not None)
    for offset, row_base, ts, kind in rows:
        if started and (row_base is None or base is None or row_base != base):
            if committed:
                if busy or not out:
                    out.append(ObservedBatch(last_offset, first_ts, last_ts))
                    idle_last = None
                    if first_ts is not None:
                        idle_timed = None
                else:
                    idle_last = (last_offset, first_ts, last_ts)
                    if first_ts is not None:
                        idle_timed = idle_last
            committed, first_ts, last_ts = False, None, None
            busy = not changes_only
        base, started = row_base, True
        if not in_txn and kind != _BEGIN:
            # A record outside a transaction (an End or Abort outside one is a replay fault the job stops before).
            committed, last_offset = True, offset
            if kind != _NO_OP:
                busy = True
            if ts is not None:
                last_ts = ts
                if first_ts is None:
                    first_ts = ts
        elif kind == _BEGIN:
            in_txn, txn_first, txn_last = True, ts, ts
        elif kind in (_END, _ABORT):
            if kind == _END:
                # The transaction's records become the batch's, ahead of the End.
                if first_ts is None:
                    first_ts = txn_first
                if txn_last is not None:
                    last_ts = txn_last
            committed, last_offset, in_txn, busy = True, offset, False, True
            if ts is not None:
                last_ts = ts
                if first_ts is None:
                    first_ts = ts
        elif ts is not None:
            txn_last = ts
            if txn_first is None:
                txn_first = ts
    if committed:
        # The last batch is kept, idle or not.
        out.append(ObservedBatch(last_offset, first_ts, last_ts))
        if first_ts is not None:
            idle_timed = None
    elif idle_last is not None:
        out.append(ObservedBatch(*idle_last))
    if idle_timed is not None and idle_timed[0] < out[-1].end:
        # No kept batch after it has a time: it goes among those after it, in offset order.
        bisect.insort(out, ObservedBatch(*idle_timed), key=lambda b: b.end)
    return out


def batch_ends(offsets: Sequence[int], bases: Sequence[int | None], stamps: Sequence[int | None],
               types: Sequence[str]) -> list[LogPosition]:
    """Where each batch a :class:`~jbod_model.report.BatchFeed` observes ends (:func:`observed_batches`): the offset
    of its last committed record and the last batch time among its committed records (what
    :class:`~jbod_model.invariants.InvariantTracker` dates a clock with)."""
    return [LogPosition(b.end, b.last_ts) for b in observed_batches(offsets, bases, stamps, types)]


def _intersect(left: Sequence[tuple[int, float]], right: Sequence[tuple[int, float]]) -> list[tuple[int, float]]:
    """The intersection of two sorted lists of disjoint half-open intervals."""
    out: list[tuple[int, float]] = []
    i = j = 0
    while i < len(left) and j < len(right):
        lo, hi = max(left[i][0], right[j][0]), min(left[i][1], right[j][1])
        if lo < hi:
            out.append((lo, hi))
        if left[i][1] < right[j][1]:
            i += 1
        else:
            j += 1
    return out


def _span(start: int, end: int | None) -> tuple[int, float]:
    return (start, float("inf") if end is None else end)


def pending_since(base: LogPosition | None, ends: Sequence[LogPosition], placements: Iterable[PlacementVersion],
                  brokers: Iterable[BrokerVersion], levels: Iterable[LevelVersion],
                  ) -> dict[ReplicaKey, LogPosition]:
    """Since when each placement pending after the last of ``ends`` has been pending — equal to
    ``InvariantTracker.pending_placements()`` after a replay that starts from the image at ``base`` (a snapshot's
    position; None: the empty image at the log's start) and observes the batches ending at ``ends``.

    :func:`~jbod_model.invariants.replica_pending_placement` as intervals: a placeholder directory
    (``replica_assignment_history``), on a registered, unfenced broker (``broker_history``), at metadata.version
    ≥ 3.7-IV2 (``feature_history``; outside every version the level is unset, which supports nothing) — three
    unions of intervals, intersected. The replay looks at the state only at the end of a batch, so its clock runs
    from the first batch end of the last stretch in which the placement was pending at every batch end: a lapse
    that starts and ends inside one batch (a replica moved off its placeholder and back in one transaction) is not
    seen, nor anything before ``base``, where the tracker starts every clock it finds pending, with no time.
    ``placements`` may hold every version or only those with a placeholder directory (the others never make a
    placement pending); versions that start after the last end do not count.
    """
    points = ([] if base is None else [LogPosition(max(base.offset, 0), None)]) + list(ends)
    if not points:
        return {}
    offsets = [p.offset for p in points]
    up: dict[int, list[tuple[int, float]]] = {}
    for b in sorted(brokers, key=lambda v: (v.broker_id, v.start)):
        if not b.fenced:
            up.setdefault(b.broker_id, []).append(_span(b.start, b.end))
    supported = [_span(v.start, v.end) for v in sorted(levels, key=lambda v: v.start)
                 if MetadataVersion.of(v.level).is_directory_assignment_supported()]
    spans: dict[ReplicaKey, list[tuple[int, float]]] = {}
    for p in sorted(placements, key=lambda v: v.start):
        if p.directory in PLACEHOLDERS:
            spans.setdefault((p.topic_id, p.partition_id, p.broker_id), []).append(_span(p.start, p.end))
    out: dict[ReplicaKey, LogPosition] = {}
    for key, placeholder in spans.items():
        first = _first_seen(_merged(_intersect(_intersect(placeholder, up.get(key[2], [])), supported)), offsets)
        if first is not None:
            out[key] = points[first]
    return dict(sorted(out.items(), key=lambda kv: (str(kv[0][0]), kv[0][1], kv[0][2])))


def _first_seen(runs: Sequence[tuple[int, float]], offsets: Sequence[int]) -> int | None:
    """Where a replay that looks at the state only at ``offsets`` (sorted; the last is now) saw a condition that
    holds over ``runs`` (sorted, disjoint, touching ones merged) start to hold without a break up to now: the index
    of that offset, or None when the condition does not hold now. A lapse that no offset fell into was never seen."""
    now = offsets[-1]
    # The run holding the last offset (versions may start after it: the tables go on).
    k = bisect.bisect_right(runs, now, key=lambda run: run[0]) - 1
    if k < 0 or now >= runs[k][1]:
        return None
    while k > 0 and _no_point_in(offsets, int(runs[k - 1][1]), runs[k][0]):
        k -= 1
    return bisect.bisect_left(offsets, runs[k][0])


@dataclass(frozen=True, slots=True)
class LeaderlessVersion:
    """One ``partition_history`` version in which the partition has no leader (leader -1), from ``start`` to ``end``
    (None while current)."""

    topic_id: Uuid
    partition_id: int
    start: int
    end: int | None


@dataclass(frozen=True, slots=True)
class PartitionTouch:
    """A committed PartitionRecord or PartitionChangeRecord (a ``records`` row): its partition, its own offset, and
    the offset at which it took effect (``applied_offset``: its own, or its transaction's EndTransactionRecord)."""

    topic_id: Uuid
    partition_id: int
    offset: int
    applied: int


def leaderless_batches(base: LogPosition | None, ends: Sequence[int], versions: Iterable[LeaderlessVersion],
                       ) -> dict[PartitionKey, int | None]:
    """Each partition without a leader after the last of ``ends`` (the observed batches' end offsets), and the batch
    since which a replay from the image at ``base`` (None: empty) has seen it so at every batch end: the index into
    ``ends``, or None when it was already leaderless in the base image. ``versions``: the leaderless versions
    (others, or versions starting after the last end, do not count)."""
    offsets = ([] if base is None else [max(base.offset, 0)]) + list(ends)
    if not offsets:
        return {}
    spans: dict[PartitionKey, list[tuple[int, float]]] = {}
    for v in sorted(versions, key=lambda v: v.start):
        spans.setdefault((v.topic_id, v.partition_id), []).append(_span(v.start, v.end))
    shift = 0 if base is None else 1
    out: dict[PartitionKey, int | None] = {}
    for key, runs in spans.items():
        first = _first_seen(_merged(runs), offsets)
        if first is not None:
            out[key] = None if first < shift else first - shift
    return out


def leaderless_since(base: LogPosition | None, batches: Sequence[ObservedBatch],
                     starts: Mapping[PartitionKey, int | None], touches: Iterable[PartitionTouch],
                     ) -> dict[PartitionKey, LogPosition]:
    """Since when each partition without a leader after the last of ``batches`` has been so — equal to
    ``IncidentTracker.leaderless_since()`` after a replay that starts from the image at ``base`` (a snapshot's
    position; None: empty) and observes ``batches``.

    The tracker looks at a partition at the end of each batch that touched it and keeps the date of the first
    batch end it found it leaderless at, until one finds a leader: ``starts``, what :func:`leaderless_batches`
    gives for the same ``base`` and batches (from the ``partition_history`` versions with leader -1). It dates it
    with the offset of the batch's last committed record on that partition — which a version's start is not: a
    transaction's change takes effect at its end, and a record that changes nothing makes no version — and the
    batch's first time. So the offset comes from ``touches``, which must hold every committed partition record of
    the batches that start a run (more do no harm); already leaderless at ``base``, it is the base's offset without
    a time."""
    ends = [b.end for b in batches]
    # The last committed record on each partition in each batch (a record belongs to the batch its effect is in).
    last: dict[tuple[PartitionKey, int], int] = {}
    for t in touches:
        i = bisect.bisect_left(ends, t.applied)
        pk = (t.topic_id, t.partition_id)
        if i < len(ends) and starts.get(pk, -1) == i:
            last[(pk, i)] = max(t.offset, last.get((pk, i), t.offset))
    out: dict[PartitionKey, LogPosition] = {}
    for pk, k in starts.items():
        if k is None:
            assert base is not None
            out[pk] = LogPosition(base.offset)
            continue
        offset = last.get((pk, k))
        if offset is None:
            raise InputError(f"the records table holds no PartitionRecord or PartitionChangeRecord of {pk[0]}-{pk[1]} "
                             f"in the batch ending at offset {ends[k]}, where partition_history has it lose its leader")
        out[pk] = LogPosition(offset, batches[k].first_ts)
    return out


def _merged(spans: Sequence[tuple[int, float]]) -> list[tuple[int, float]]:
    """Sorted disjoint intervals with touching ones joined (a new version that keeps the placement pending)."""
    out: list[tuple[int, float]] = []
    for lo, hi in spans:
        if out and out[-1][1] >= lo:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def _no_point_in(offsets: Sequence[int], lo: int, hi: int) -> bool:
    """No observed position in [lo, hi)."""
    i = bisect.bisect_left(offsets, lo)
    return i == len(offsets) or offsets[i] >= hi


def counts_at(points: Sequence[int], starts: Sequence[int], ends: Sequence[int]) -> list[int]:
    """How many intervals hold each of ``points`` (sorted offsets): the intervals given by their ``starts``
    (inclusive) and by the ``ends`` (exclusive) of those that ended, both **ascending** — one bisect of each per
    point. The caller sorts: millions of intervals at 200 k partitions, which the tables' reader sorts as columns
    and hands over compactly (a sorted Python list of them would cost some 40 bytes an interval)."""
    return [bisect.bisect_right(starts, p) - bisect.bisect_right(ends, p) for p in points]


def offline_series(seed: SeriesPoint | None, batches: Sequence[ObservedBatch], offline: Sequence[int],
                   leaderless: Sequence[int], failed: Sequence[int], max_points: int = 10_000,
                   ) -> tuple[SeriesPoint, ...]:
    """``IncidentTracker.offline_series()`` after a replay that starts from an image whose point is ``seed`` (what
    the tracker adds for a snapshot's image; None: the empty image, which adds none) and observes ``batches``,
    after each of which ``offline``, ``leaderless`` and ``failed`` give the
    counts (the offline replicas and leaderless partitions are the image's, :func:`counts_at` of the
    ``offline_replicas`` intervals and the leader -1 versions; the failed directories, the open directory-failure
    incidents, :meth:`~jbod_model.report.SparseIncidentTracker.run`'s). A point per batch whose counts changed,
    dated by the batch's end and first time, thinned as the tracker thins it."""
    series = [] if seed is None else [seed]
    for batch, o, ldr, f in zip(batches, offline, leaderless, failed, strict=True):
        # add_series_point keeps no point whose counts are the last point's: such a batch is passed over before its
        # point is made — most batches of a long log (each NoOpRecord's batch among them: a fleet's 20 k-partition
        # cluster observes some 140 k batches, a few thousand change a count).
        if series and (o, ldr, f) == (series[-1].offline_replicas, series[-1].leaderless_partitions,
                                       series[-1].failed_directories):
            continue
        series = add_series_point(series, SeriesPoint(LogPosition(batch.end, batch.first_ts), o, ldr, f), max_points)
    return tuple(series)
