"""A report's history from the tables' rows (``jbod_model.report_rows``) equals the replay's.

``batch_ends`` against the batches a :class:`~jbod_model.report.BatchFeed` observes, on generated streams cut into
log batches at random (transactions spanning them included). ``pending_since`` end to end: the stream written as
the job writes it (its own operator, ``tests/support/test_quality_support.write_lakehouse``, in random micro-batch
sizes, sometimes from a snapshot), the report history read back by ``pipelines.report.load.load_from_tables`` (placement
clocks from the history tables) against a :class:`~jbod_model.report.ReportTracker` replaying the same records,
as of random offsets — and the whole history: the incidents of a
:class:`~jbod_model.report.SparseIncidentTracker`, the offline series from the intervals, also with the tracker's
bounds so small that closed incidents are forgotten and the series is thinned."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from test_quality_support import write_lakehouse
from test_replay_properties import SETTINGS, Stream, valid_streams

from jbod_model.image import EMPTY_IMAGE, MetadataImage
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import NoOpRecord
from jbod_model.replay import Replayer, replay_entries
from jbod_model.report import BatchFeed, LogPosition, ReportTracker
from jbod_model.report_rows import batch_ends, observed_batches
from pipelines.report.load import history_from_tables, load_from_tables

START_MS = 1_700_000_000_000


class _Positions(BatchFeed):
    """Records where each observed batch ends: its last committed offset and the last time among its committed
    entries (``InvariantTracker._history``'s ``now`` and ``now_ts``)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[LogPosition] = []
        #: Of each batch, whether it committed NoOps alone.
        self.idle: list[bool] = []
        self._image = EMPTY_IMAGE

    @property
    def image(self) -> MetadataImage:
        return self._image

    def observe_batch(self, entries: Sequence[LogEntry], image_after: MetadataImage) -> None:
        self._image = image_after
        ts = next((e.timestamp for e in reversed(entries) if e.timestamp is not None), None)
        self.seen.append(LogPosition(entries[-1].offset, ts))
        self.idle.append(all(isinstance(e.record, NoOpRecord) for e in entries))


@st.composite
def logs(draw: st.DrawFn, idle: bool = False) -> list[LogEntry]:
    """A generated stream as a log: its operations' batches merged, kept or split at random (a log batch may end
    inside a transaction), some entries without a batch (a JSONL input's records), times that may be missing.
    ``idle``: with batches of NoOps alone between operations, first and last included (a real log is mostly those),
    with or without a time; the next operation's records may join one."""
    stream: Stream = draw(valid_streams())
    out: list[LogEntry] = []
    offset = 0
    base: int | None = 0

    def noops() -> None:
        nonlocal offset, base
        base = offset
        ts = None if draw(st.booleans()) else START_MS + 1000 * offset
        for _ in range(draw(st.integers(1, 2))):
            out.append(LogEntry(offset=offset, record=NoOpRecord(), batch_base_offset=base, timestamp=ts))
            offset += 1

    for batch in stream.batches:
        if idle and draw(st.integers(0, 2)) == 0:
            noops()
        if draw(st.booleans()):
            base = offset  # a new log batch; else this operation's records join the previous one
        unbatched = draw(st.integers(0, 9)) == 0
        ts = None if draw(st.integers(0, 5)) == 0 else START_MS + 1000 * offset
        for i, record in enumerate(batch):
            if i and draw(st.integers(0, 7)) == 0:
                # A new log batch inside an operation: a transaction then spans batches, times differ within it.
                base, ts = offset, None if draw(st.booleans()) else START_MS + 1000 * offset
            out.append(LogEntry(offset=offset, record=record, batch_base_offset=None if unbatched else base,
                                timestamp=ts))
            offset += 1
    if idle and draw(st.booleans()):
        noops()
    return out


def _columns(entries: Sequence[LogEntry]) -> tuple[list[int], list[int | None], list[int | None], list[str]]:
    return ([e.offset for e in entries], [e.batch_base_offset for e in entries], [e.timestamp for e in entries],
            [e.record.TYPE_NAME for e in entries])


@SETTINGS
@given(log=logs())
def test_batch_ends_are_where_a_feed_observes_batches(log: list[LogEntry]) -> None:
    feed = _Positions()
    feed.feed_all(log)
    assert batch_ends(*_columns(log)) == feed.seen


@SETTINGS
@given(log=logs(idle=True))
def test_the_batches_a_report_observes_leave_out_the_idle_ones_it_is_not_dated_by(log: list[LogEntry]) -> None:
    """``changes_only``: every batch a feed observes but those that commit NoOps alone, except the first, the last
    and the last with a time (what a report's history is dated by)."""
    feed = _Positions()
    feed.feed_all(log)
    every = observed_batches(*_columns(log))
    assert [b.end for b in every] == [p.offset for p in feed.seen]
    timed = [i for i, b in enumerate(every) if b.first_ts is not None]
    dated = {0, len(every) - 1, *timed[-1:]}
    want = [b for i, b in enumerate(every) if not feed.idle[i] or i in dated]
    assert observed_batches(*_columns(log), changes_only=True) == want


@settings(SETTINGS, max_examples=30)  # each example writes a lakehouse (~1 s)
@given(data=st.data(), log=st.one_of(logs(), logs(idle=True)))
def test_report_history_from_the_tables_equals_the_replay(data: st.DataObject, log: list[LogEntry]) -> None:
    # Sometimes the job starts at a snapshot (the log before it deleted), taken between transactions.
    cut = data.draw(st.sampled_from([0, *_outside_transactions(log)]))
    snapshot = replay_entries(log[:cut]) if cut else None
    records = [] if snapshot is None else snapshot.to_records()
    rest = log[cut:]
    # Micro-batches of any size, the first holding the whole snapshot (the job's source reads a snapshot at once).
    size = data.draw(st.integers(max(1, len(records)), max(1, len(records) + len(rest))))
    with tempfile.TemporaryDirectory() as tmp:
        tables = Path(tmp)
        write_lakehouse(tables, "c", rest, batch_size=size, snapshot=None if snapshot is None else (records, cut))
        offsets = [e.offset for e in rest] or [cut]
        for as_of in sorted({data.draw(st.sampled_from(offsets)) for _ in range(3)} | {offsets[-1]}):
            got, _ = load_from_tables(tables, "c", as_of_offset=as_of)
            tracker = ReportTracker(snapshot if snapshot is not None else EMPTY_IMAGE)
            tracker.feed_all(e for e in rest if e.offset <= as_of)
            want = tracker.history()
            assert got.history is not None
            assert dict(got.history.pending_since) == dict(want.pending_since), as_of
            assert dict(got.history.leaderless_since) == dict(want.leaderless_since), as_of
            assert got.history == want, as_of
            # Bounded as the tracker bounds it: old closed incidents forgotten, the series thinned.
            _, bounded = history_from_tables(tables, "c", as_of, max_closed_incidents=1, max_series_points=3)
            tracker = ReportTracker(snapshot if snapshot is not None else EMPTY_IMAGE, max_closed_incidents=1,
                                    max_series_points=3)
            tracker.feed_all(e for e in rest if e.offset <= as_of)
            assert bounded == tracker.history(), as_of


def _outside_transactions(log: Sequence[LogEntry]) -> list[int]:
    """The cut points (1..len) not inside a metadata transaction, where a snapshot could stand, and after the
    first record that leaves something in the image: Kafka never writes a snapshot of an empty image (the bootstrap
    records come first, NoOps only after them), and a snapshot without records leaves no row in the tables, so
    their history could only start at the empty image (-1), not at the snapshot's offset."""
    out, depth = [], 0
    replayer = Replayer()  # the log replayed once, its image looked at after each cut point
    for i, e in enumerate(log):
        replayer.replay(e)
        name = e.record.TYPE_NAME
        depth += name == "BEGIN_TRANSACTION_RECORD"
        depth -= name in ("END_TRANSACTION_RECORD", "ABORT_TRANSACTION_RECORD")
        if depth == 0 and replayer.image.to_records():
            out.append(i + 1)
    return out
