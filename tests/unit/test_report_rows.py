"""``jbod_model.report_rows.pending_since`` on hand-made intervals: the cases a replay's batch-end view decides
(the property in tests/properties/test_report_rows_properties.py checks it against the replay on generated logs)."""

from __future__ import annotations

from jbod_model.directory_id import UNASSIGNED
from jbod_model.metadata_version import IBP_3_7_IV2
from jbod_model.report import LogPosition
from jbod_model.report_rows import BrokerVersion, LevelVersion, PlacementVersion, pending_since
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
