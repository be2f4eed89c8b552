"""``jbod_model.report_rows`` on hand-made intervals: the cases a replay's batch-end view decides for
``pending_since`` and ``leaderless_since``, and the batch times of ``observed_batches`` (the properties in
tests/properties/test_report_rows_properties.py check them against the replay on generated logs)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from jbod_model.directory_id import UNASSIGNED
from jbod_model.errors import InputError
from jbod_model.gaps import GapConsequences
from jbod_model.image import EMPTY_IMAGE, MetadataImage
from jbod_model.metadata_version import IBP_3_7_IV2
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import BeginTransactionRecord, NoOpRecord
from jbod_model.report import BatchFeed, LogPosition
from jbod_model.report_rows import (
    BrokerVersion,
    LeaderlessVersion,
    LevelVersion,
    ObservedBatch,
    PartitionTouch,
    PlacementVersion,
    leaderless_batches,
    leaderless_since,
    observed_batches,
    pending_since,
)
from jbod_model.uuid import Uuid

T = Uuid(1, 2)
DIR = Uuid(5, 500)
ENDS = [LogPosition(5, 5000), LogPosition(10, 10_000)]
UP = [BrokerVersion(1, False, 0, None)]
LEVEL = [LevelVersion(IBP_3_7_IV2, 0, None)]


def placed(*spans: tuple[int, int | None, Uuid]) -> list[PlacementVersion]:
    return [PlacementVersion(T, 0, 1, d, lo, hi) for lo, hi, d in spans]


def test_a_lapse_inside_one_batch_is_not_seen() -> None:
    # Assigned at 7, unassigned again at 8: both inside the batch that ends at 10, so the clock from 5 runs on.
    got = pending_since(None, ENDS, placed((2, 7, UNASSIGNED), (7, 8, DIR), (8, None, UNASSIGNED)), UP, LEVEL)
    assert got == {(T, 0, 1): LogPosition(5, 5000)}


def test_a_lapse_over_a_batch_end_restarts_the_clock() -> None:
    got = pending_since(None, ENDS, placed((2, 4, UNASSIGNED), (4, 6, DIR), (6, None, UNASSIGNED)), UP, LEVEL)
    assert got == {(T, 0, 1): LogPosition(10, 10_000)}


def test_fenced_or_below_3_7_iv2_is_not_pending() -> None:
    spans = placed((2, None, UNASSIGNED))
    assert pending_since(None, ENDS, spans, [BrokerVersion(1, True, 0, None)], LEVEL) == {}
    assert pending_since(None, ENDS, spans, UP, [LevelVersion(IBP_3_7_IV2 - 1, 0, None)]) == {}
    # Unfenced at 9: pending from the batch that ends at 10.
    fenced_then_up = [BrokerVersion(1, True, 0, 9), BrokerVersion(1, False, 9, None)]
    assert pending_since(None, ENDS, spans, fenced_then_up, LEVEL) == {(T, 0, 1): LogPosition(10, 10_000)}


def test_from_a_snapshot_the_clock_starts_at_it_without_a_time() -> None:
    got = pending_since(LogPosition(3), ENDS, placed((1, None, UNASSIGNED)), UP, LEVEL)
    assert got == {(T, 0, 1): LogPosition(3, None)}


def test_versions_after_the_last_batch_do_not_count() -> None:
    got = pending_since(None, ENDS, placed((2, 12, UNASSIGNED), (12, None, DIR)), UP, LEVEL)
    assert got == {(T, 0, 1): LogPosition(5, 5000)}
    assert pending_since(None, ENDS[:1], placed((7, None, UNASSIGNED)), UP, LEVEL) == {}


# -- leaderless_since -------------------------------------------------------------------------------------------

BATCHES = [ObservedBatch(5, 4000, 5000), ObservedBatch(10, 9000, 10_000)]


def leaderless(*spans: tuple[int, int | None]) -> list[LeaderlessVersion]:
    return [LeaderlessVersion(T, 0, lo, hi) for lo, hi in spans]


def since(base: LogPosition | None, versions: list[LeaderlessVersion],
          touches: list[PartitionTouch]) -> dict[tuple[Uuid, int], LogPosition]:
    starts = leaderless_batches(base, [b.end for b in BATCHES], versions)
    return leaderless_since(base, BATCHES, starts, touches)


def test_leaderless_is_dated_by_the_last_partition_record_of_its_batch_and_the_batch_first_time() -> None:
    # The version starts at 9 (a transaction's end), the records on the partition are at 7 and 8: the tracker
    # dates it with the last of them, and the batch's first time.
    touches = [PartitionTouch(T, 0, 7, 9), PartitionTouch(T, 0, 8, 9), PartitionTouch(T, 1, 10, 10)]
    assert since(None, leaderless((9, None)), touches) == {(T, 0): LogPosition(8, 9000)}


def test_a_leader_found_and_lost_inside_one_batch_is_not_seen() -> None:
    touches = [PartitionTouch(T, 0, 3, 3), PartitionTouch(T, 0, 8, 8)]
    assert since(None, leaderless((3, 7), (8, None)), touches) == {(T, 0): LogPosition(3, 4000)}
    # Over a batch end it is seen: the clock starts again.
    assert since(None, leaderless((3, 4), (8, None)), touches) == {(T, 0): LogPosition(8, 9000)}


def test_leaderless_at_the_snapshot_is_dated_by_it_and_a_partition_with_a_leader_now_is_not_listed() -> None:
    assert since(LogPosition(2), leaderless((1, None)), []) == {(T, 0): LogPosition(2)}
    assert since(None, leaderless((1, 6)), []) == {}
    assert leaderless_batches(None, [5, 10], leaderless((11, None))) == {}


def test_missing_partition_records_are_an_input_error() -> None:
    with pytest.raises(InputError, match="no PartitionRecord"):
        since(None, leaderless((9, None)), [])


# -- observed_batches -------------------------------------------------------------------------------------------


def test_rows_that_never_took_effect_are_left_out_as_the_feed_never_commits_them() -> None:
    """Policy ``skip``: the End of the transaction begun at 0 was in a skipped range (offset 2), so the job left the
    Begin and its record out (``applied_offset`` null) and replayed the records after the range as they came. The
    feed observes exactly those; by types alone the transaction would never end and nothing after it be observed."""
    offsets, bases, stamps = [0, 1, 3, 4], [0, 0, 3, 4], [1000, 1000, 3000, 4000]
    types = ["BEGIN_TRANSACTION_RECORD", "NO_OP_RECORD", "NO_OP_RECORD", "NO_OP_RECORD"]
    latest: list[str | None] = [None]
    feed = _Observing()
    with GapConsequences(lambda: latest[0]).active():
        for offset, base, ts, kind in zip(offsets, bases, stamps, types, strict=True):
            latest[0] = "the skipped range (offset 2)" if offset > 2 else None
            feed.feed(LogEntry(offset=offset, batch_base_offset=base, timestamp=ts, record=_RECORDS[kind]))
        feed.end_batch()
    want = [ObservedBatch(3, 3000, 3000), ObservedBatch(4, 4000, 4000)]
    assert feed.seen == want
    assert observed_batches(offsets, bases, stamps, types, [None, None, 3, 4]) == want
    assert observed_batches(offsets, bases, stamps, types) == []


_RECORDS = {"BEGIN_TRANSACTION_RECORD": BeginTransactionRecord(), "NO_OP_RECORD": NoOpRecord()}


class _Observing(BatchFeed):
    """A feed that replays nothing (the records above change no state) and keeps each observed batch."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[ObservedBatch] = []

    @property
    def image(self) -> MetadataImage:
        return EMPTY_IMAGE

    def observe_batch(self, entries: Sequence[LogEntry], image_after: MetadataImage) -> None:
        stamps = [e.timestamp for e in entries if e.timestamp is not None]
        self.seen.append(ObservedBatch(entries[-1].offset, stamps[0] if stamps else None,
                                       stamps[-1] if stamps else None))


def test_a_committed_transaction_gives_its_batch_its_first_time() -> None:
    # Batch 0: Begin (t=1000) and a record; batch 10: the End (t=2000) and a record — committed together there.
    types = ["BEGIN_TRANSACTION_RECORD", "PARTITION_RECORD", "END_TRANSACTION_RECORD", "NO_OP_RECORD"]
    got = observed_batches([0, 1, 2, 3], [0, 0, 2, 2], [1000, 1000, 2000, 2000], types)
    assert got == [ObservedBatch(3, 1000, 2000)]
