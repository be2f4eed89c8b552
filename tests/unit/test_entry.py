"""``group_batches``: the record batches of a log, as Kafka appends and replays them."""

from __future__ import annotations

from jbod_model.records.entry import LogEntry, group_batches
from jbod_model.records.metadata import NoOpRecord


def _e(offset: int, base: int | None) -> LogEntry:
    return LogEntry(offset=offset, record=NoOpRecord(), batch_base_offset=base)


def test_consecutive_entries_of_one_base_offset_are_one_batch() -> None:
    entries = [_e(0, 0), _e(1, 0), _e(2, 2), _e(3, 3), _e(4, 3), _e(5, 3)]
    assert [[e.offset for e in b] for b in group_batches(entries)] == [[0, 1], [2], [3, 4, 5]]


def test_an_entry_without_a_base_offset_is_a_batch_of_its_own() -> None:
    entries = [_e(0, None), _e(1, None), _e(2, 2), _e(3, None)]
    assert [[e.offset for e in b] for b in group_batches(entries)] == [[0], [1], [2], [3]]


def test_nothing_in_nothing_out_and_it_streams() -> None:
    assert list(group_batches([])) == []
    batches = group_batches(iter([_e(0, 0), _e(1, 1)]))
    assert [e.offset for e in next(batches)] == [0]
