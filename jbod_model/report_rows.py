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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from jbod_model.invariants import PLACEHOLDERS
from jbod_model.metadata_version import MetadataVersion
from jbod_model.records.metadata import AbortTransactionRecord, BeginTransactionRecord, EndTransactionRecord
from jbod_model.report import LogPosition, ReplicaKey
from jbod_model.uuid import Uuid

_BEGIN, _END, _ABORT = (BeginTransactionRecord.TYPE_NAME, EndTransactionRecord.TYPE_NAME,
                        AbortTransactionRecord.TYPE_NAME)
_MARKERS = frozenset((_BEGIN, _END, _ABORT))


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


def batch_ends(offsets: Sequence[int], bases: Sequence[int | None], stamps: Sequence[int | None],
               types: Sequence[str]) -> list[LogPosition]:
    """Where each batch a :class:`~jbod_model.report.BatchFeed` observes ends, in log order, from the ``records``
    table's columns (the records' offsets, batch base offsets, batch times in ms, ``TYPE_NAME``s; offset order): the
    offset of the batch's last committed record and the last batch time among its committed records (what
    :class:`~jbod_model.invariants.InvariantTracker` dates a clock with). Batches are grouped as ``BatchFeed.feed``
    groups them (by batch base offset; a row without one is a batch of its own) and committed as
    ``BatchFeed._commit`` commits them (a transaction's records at its EndTransactionRecord, an aborted one's never
    — only the AbortTransactionRecord itself); a batch that commits nothing is not observed. The rows hold no fault
    a replay would raise on (the job stopped before those, ``replay_faults``).

    One pass keeping, per batch, only the last committed offset and time (a log has millions of rows)."""
    out: list[LogPosition] = []
    # The buffered batch: its base, whether it committed anything, its last committed offset and non-null time.
    base: int | None = None
    started = committed = False
    last_offset, last_ts = 0, None
    # An open transaction: whether it is, and the last non-null time among its records.
    in_txn = False
    txn_ts: int | None = None
    for offset, row_base, ts, kind in zip(offsets, bases, stamps, types, strict=True):
        if started and (row_base is None or base is None or row_base != base):
            if committed:
                out.append(LogPosition(last_offset, last_ts))
            committed, last_ts = False, None
        base, started = row_base, True
        if kind not in _MARKERS and not in_txn:
            committed, last_offset = True, offset
            if ts is not None:
                last_ts = ts
        elif kind == _BEGIN:
            in_txn, txn_ts = True, ts
        elif not in_txn:
            # An End or Abort outside a transaction: a replay raises on it, and the job stops before it.
            committed, last_offset = True, offset
            if ts is not None:
                last_ts = ts
        elif kind in (_END, _ABORT):
            if kind == _END and txn_ts is not None:
                last_ts = txn_ts  # the transaction's records become the batch's, before the End
            committed, last_offset, in_txn = True, offset, False
            if ts is not None:
                last_ts = ts
        elif ts is not None:
            txn_ts = ts
    if committed:
        out.append(LogPosition(last_offset, last_ts))
    return out


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
    now = points[-1].offset
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
        runs = _merged(_intersect(_intersect(placeholder, up.get(key[2], [])), supported))
        # The run holding the last batch end (versions may start after it: the tables go on).
        k = bisect.bisect_right(runs, now, key=lambda run: run[0]) - 1
        if k < 0 or now >= runs[k][1]:
            continue  # not pending after the last batch
        # Walk back over lapses no batch end fell into: the replay never saw those.
        while k > 0 and _no_point_in(offsets, int(runs[k - 1][1]), runs[k][0]):
            k -= 1
        out[key] = points[bisect.bisect_left(offsets, runs[k][0])]
    return dict(sorted(out.items(), key=lambda kv: (str(kv[0][0]), kv[0][1], kv[0][2])))


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
