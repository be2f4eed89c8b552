"""DeltaRsWriter's appends against a plain fold of the same change events: random events over a few keys, split into
micro-batches and written (one batch re-run, as after a crash), leave exactly the current rows and history versions
the fold gives as the readers resolve them — with ``jbod maintain``'s folding (pipelines/lakehouse/tables.py
``fold_versions``) run between batches or not, and in the stored rows themselves once folded. A table of the MERGE
layout is refused by the readers with a clear message until it is migrated."""

from __future__ import annotations

import contextlib
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake import Field as DeltaField
from deltalake.exceptions import CommitFailedError
from deltalake.schema import PrimitiveType

from jbod_model.errors import InputError
from pipelines.lakehouse import tables
from pipelines.lakehouse.tables import (
    ENTITIES,
    REMOVED,
    DeltaRsWriter,
    batch_tables,
    entity_state,
    entity_versions,
    event_row,
    fold_versions,
    history_table,
    read_table,
    table_schemas,
    version_spans,
)

ENTITY = ENTITIES["replica"]
KEYS = [("T" + "abc"[t], p, b) for t in range(3) for p in range(2) for b in range(3)]


def _events(seed: int, count: int) -> list[tuple[tuple[str, int, int], int, dict[str, Any] | None]]:
    rng = random.Random(seed)
    out = []
    for offset in range(10, 10 + count):
        value = None if rng.random() < 0.2 else {
            "topic_name": "t", "directory": f"d{rng.randrange(4)}", "directory_state": "ASSIGNED",
            "offline": rng.random() < 0.3, "offline_reason": None}
        out.append((rng.choice(KEYS), offset, value))
    return out


def _fold(events: list[tuple[tuple[str, int, int], int, dict[str, Any] | None]],
          ) -> tuple[set[tuple[Any, ...]], set[tuple[Any, ...]]]:
    current: dict[tuple[str, int, int], tuple[int, dict[str, Any]]] = {}
    history: list[list[Any]] = []
    open_at: dict[tuple[str, int, int], int] = {}
    for key, offset, value in events:
        if key in open_at:
            history[open_at.pop(key)][-1] = offset
        if value is None:
            current.pop(key, None)
            continue
        current[key] = (offset, value)
        open_at[key] = len(history)
        history.append([*key, value["directory"], value["offline"], offset, None])
    return ({(*k, v["directory"], v["offline"], o) for k, (o, v) in current.items()},
            {tuple(h) for h in history})


def _rows(batch: list[tuple[tuple[str, int, int], int, dict[str, Any] | None]]) -> dict[str, pa.Table]:
    return batch_tables({"cluster_id": "c", "ord": i, **event_row(ENTITY.name, k, o, o, v)}
                        for i, (k, o, v) in enumerate(batch))


def _read(root: Path, current: str, history: str) -> tuple[set[tuple[Any, ...]], list[tuple[Any, ...]]]:
    return ({(r["topic_id"], r["partition_id"], r["broker_id"], r["directory"], r["offline"], r["since_offset"])
             for r in read_table(root, current).to_pylist()},
            sorted((r["topic_id"], r["partition_id"], r["broker_id"], r["directory"], r["offline"],
                    r["valid_from_offset"], r["valid_to_offset"]) for r in read_table(root, history).to_pylist()))


def _same_as_the_view(root: Path) -> None:
    """``history_table`` (no window functions) gives the view's rows, every column, ordered by key and start."""
    got = history_table(root, ENTITY.history, "c")
    view = read_table(root, ENTITY.history, "cluster_id = 'c'")
    assert got.schema == view.schema
    assert sorted(map(repr, got.to_pylist())) == sorted(map(repr, view.to_pylist()))
    order = [(r["topic_id"], r["partition_id"], r["broker_id"], r["valid_from_offset"]) for r in got.to_pylist()]
    assert order == sorted(order)


def _fold_tables(root: Path) -> int:
    assert ENTITY.current is not None
    return sum(fold_versions(DeltaTable(root / name), name) for name in (ENTITY.current, ENTITY.history))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("fold_after", [None, 1, 3])
def test_appends_leave_the_rows_a_fold_of_the_events_gives(tmp_path: Path, seed: int, fold_after: int | None,
                                                           ) -> None:
    events = _events(seed, 60)
    writer = DeltaRsWriter(tmp_path, "app")
    writer.ensure_tables()
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(events)), 5))
    batches = [events[a:b] for a, b in zip([0, *cuts], [*cuts, len(events)], strict=True)]
    for batch_id, batch in enumerate(batches):
        writer.write_batch(batch_id, _rows(batch))
        if batch_id == 2:
            # A batch re-run after a crash is skipped table by table: nothing is appended twice.
            assert writer.write_batch(batch_id, _rows(batch))[ENTITY.history] == 0
        if batch_id == fold_after:
            _fold_tables(tmp_path)
    want_current, want_history = _fold(events)
    assert ENTITY.current is not None
    current, history = _read(tmp_path, ENTITY.current, ENTITY.history)
    assert current == want_current
    assert len(history) == len(want_history) and set(history) == want_history
    _same_as_the_view(tmp_path)
    # Folded, the stored rows are the resolved ones: one per live key, every version but the open ones closed.
    assert _fold_tables(tmp_path) > 0
    assert _fold_tables(tmp_path) == 0
    stored = DeltaTable(tmp_path / ENTITY.current).to_pyarrow_table()
    assert stored.num_rows == len(want_current) and not any(stored.column(REMOVED).to_pylist())
    stored_history = DeltaTable(tmp_path / ENTITY.history).to_pyarrow_table()
    assert {(r["topic_id"], r["partition_id"], r["broker_id"], r["directory"], r["offline"], r["valid_from_offset"],
             r["valid_to_offset"]) for r in stored_history.to_pylist()} == want_history
    assert (current, history) == _read(tmp_path, ENTITY.current, ENTITY.history)
    _same_as_the_view(tmp_path)


def test_a_table_of_the_merge_layout_is_refused_until_migrated(tmp_path: Path) -> None:
    assert ENTITY.current is not None
    old_row = {"cluster_id": "c", "topic_id": KEYS[2][0], "partition_id": KEYS[2][1], "broker_id": KEYS[2][2],
               "topic_name": "t", "directory": "old", "directory_state": "ASSIGNED", "offline": False,
               "offline_reason": None, "since_offset": 5, "since_time": None}
    write_deltalake(tmp_path / ENTITY.current, pa.Table.from_pylist([old_row], table_schemas()[ENTITY.current]))
    with pytest.raises(InputError, match=r"older kraft-jbod .* run `jbod maintain"):
        read_table(tmp_path, ENTITY.current)
    writer = DeltaRsWriter(tmp_path, "app")
    writer.ensure_tables()  # migrates: the old rows are final, only the column is added
    assert REMOVED in DeltaTable(tmp_path / ENTITY.current).schema().to_arrow().names
    writer.write_batch(0, _rows([(KEYS[0], 10, None), (KEYS[1], 11, {
        "topic_name": "t", "directory": "d", "directory_state": "ASSIGNED", "offline": False,
        "offline_reason": None})]))
    assert sorted(r["since_offset"] for r in read_table(tmp_path, ENTITY.current).to_pylist()) == [5, 11]


@pytest.mark.parametrize("way", ["rewrite", "merge"])
def test_a_fold_racing_a_batch_loses_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, way: str) -> None:
    """The job commits its next micro-batch between a fold's read of the table and its commit — a rewrite (a first
    fold) or a MERGE of the changes since the last fold: nothing is lost, and the next fold folds the batch."""
    events = _events(7, 60)
    batches = [events[i:i + 10] for i in range(0, len(events), 10)]
    writer = DeltaRsWriter(tmp_path, "app")
    writer.ensure_tables()
    for batch_id in range(3):
        writer.write_batch(batch_id, _rows(batches[batch_id]))
        if way == "merge" and batch_id == 0:
            _fold_tables(tmp_path)  # the marks: the next fold MERGEs the changes since
    monkeypatch.setattr(tables, "FOLD_MERGE_SHARE", 1.0 if way == "merge" else 0.0)
    raced: list[str] = []

    def a_batch_first(table: DeltaTable) -> None:
        # The batch's own appends go through the patched writer too, once ``raced`` says it is on its way.
        if not raced:
            raced.append(table.table_uri)
            writer.write_batch(3, _rows(batches[3]))

    write, merge = tables.write_deltalake, DeltaTable.merge

    def write_after_a_batch(table: DeltaTable, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("mode") == "overwrite":
            a_batch_first(table)
        return write(table, *args, **kwargs)

    def merge_after_a_batch(self: DeltaTable, *args: Any, **kwargs: Any) -> Any:
        a_batch_first(self)
        return merge(self, *args, **kwargs)

    monkeypatch.setattr(tables, "write_deltalake", write_after_a_batch)
    monkeypatch.setattr(DeltaTable, "merge", merge_after_a_batch)
    # Delta's conflict check may refuse the fold: then nothing was written, and the next maintenance folds.
    with contextlib.suppress(CommitFailedError):
        _fold_tables(tmp_path)
    monkeypatch.undo()
    assert raced
    for batch_id in range(3, len(batches)):
        writer.write_batch(batch_id, _rows(batches[batch_id]))
    assert ENTITY.current is not None
    want_current, want_history = _fold(events)
    current, history = _read(tmp_path, ENTITY.current, ENTITY.history)
    assert current == want_current and set(history) == want_history and len(history) == len(want_history)
    _fold_tables(tmp_path)
    assert (current, history) == _read(tmp_path, ENTITY.current, ENTITY.history)


def _stored_rows(root: Path, name: str) -> list[dict[str, Any]]:
    return DeltaTable(root / name).to_pyarrow_table().to_pylist()


@pytest.mark.parametrize("share", [0.0, 1.0])
@pytest.mark.parametrize("seed", range(3))
def test_a_fold_a_range_of_topics_at_a_time_stores_what_readers_resolved(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch,
                                                                        seed: int, share: float) -> None:
    """Two clusters' events in one table set, folded with the stored rows read a few topic ids at a time: the stored
    rows afterwards are the rows the readers resolved before (every cluster's), none a removal row; the fold says
    how many rows it dropped or closed — as its dry run said, counted from the stored rows here — the first time
    (no fold marks: every row read) and after more batches (with marks: the changed keys only)."""
    monkeypatch.setattr(tables, "PIECE_STORED_ROWS", 4)
    # The second fold MERGEs its changes (share 1) or rewrites the table (share 0); the first always rewrites.
    monkeypatch.setattr(tables, "FOLD_MERGE_SHARE", share)
    rng = random.Random(seed)
    events = [(cluster, *event) for cluster, event in zip(
        (rng.choice("xy") for _ in range(120)), _events(seed, 120), strict=False)]
    writer = DeltaRsWriter(tmp_path, "app")
    writer.ensure_tables()
    assert ENTITY.current is not None
    names = (ENTITY.current, ENTITY.history)
    for step, part in enumerate((events[:50], events[50:80], events[80:])):
        for batch_id in range(3):
            batch = part[batch_id::3]
            writer.write_batch(step * 3 + batch_id, batch_tables(
                {"cluster_id": c, "ord": i, **event_row(ENTITY.name, k, o, o, v)}
                for i, (c, k, o, v) in enumerate(sorted(batch, key=lambda e: e[2]))))
        if step == 0:
            continue  # the first fold comes after the second part: then again, with marks, after the third
        resolved = {name: sorted(map(repr, read_table(tmp_path, name).to_pylist())) for name in names}
        before = {name: _stored_rows(tmp_path, name) for name in names}
        dry = {name: fold_versions(DeltaTable(tmp_path / name), name, dry_run=True) for name in names}
        folded = {name: fold_versions(DeltaTable(tmp_path / name), name) for name in names}
        after = {name: _stored_rows(tmp_path, name) for name in names}
        closed = {(r["cluster_id"], r["topic_id"], r["partition_id"], r["broker_id"], r["valid_from_offset"])
                  for r in before[ENTITY.history] if r["valid_to_offset"] is None} & {
            (r["cluster_id"], r["topic_id"], r["partition_id"], r["broker_id"], r["valid_from_offset"])
            for r in after[ENTITY.history] if r["valid_to_offset"] is not None}
        assert folded == dry == {ENTITY.current: len(before[ENTITY.current]) - len(after[ENTITY.current]),
                                 ENTITY.history: len(before[ENTITY.history]) - len(after[ENTITY.history])
                                 + len(closed)}
        assert all(v > 0 for v in folded.values())
        for name in names:
            assert not any(r[REMOVED] for r in after[name])
            assert sorted(repr({k: v for k, v in r.items() if k != REMOVED}) for r in after[name]) == resolved[name]
            assert sorted(map(repr, read_table(tmp_path, name).to_pylist())) == resolved[name]


def _spans(root: Path, offset: int | None) -> tuple[list[tuple[Any, Any]], list[tuple[Any, Any]]]:
    """The versions' (start, end) as ``version_spans`` counts them, and as ``entity_versions`` gives them."""
    starts, ends = version_spans(root, ENTITY, "c", offset)
    versions = entity_versions(root, ENTITY, "c", offset, [])
    return (sorted(zip(starts.to_pylist(), ends.to_pylist(), strict=True), key=repr),
            sorted(zip(versions.column("start").to_pylist(), versions.column("end").to_pylist(), strict=True),
                   key=repr))


def _state_at(events: list[tuple[tuple[str, int, int], int, dict[str, Any] | None]], offset: int | None,
              ) -> set[tuple[Any, ...]]:
    """The live keys with their directory and state after the events up to ``offset`` (None: all)."""
    state: dict[tuple[str, int, int], dict[str, Any]] = {}
    for key, at, value in events:
        if offset is None or at <= offset:
            if value is None:
                state.pop(key, None)
            else:
                state[key] = value
    return {(*k, v["directory"], v["offline"]) for k, v in state.items()}


@pytest.mark.parametrize("share", [0.0, 1.0])
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("folds", [(), (1,), (0, 2, 4)])
def test_the_versions_spans_are_the_versions_own_however_the_rows_were_folded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int, folds: tuple[int, ...], share: float) -> None:
    """``version_spans`` sorts only the open rows and reads a closed row's stored end: the same (start, end) pairs
    as ``entity_versions``, at every offset, with removals and folds at any point between batches. And
    ``entity_state``, which takes a closed row where it holds the offset and looks for the newest start among the
    open rows alone, gives the events' state at each offset, in key order."""
    monkeypatch.setattr(tables, "FOLD_MERGE_SHARE", share)  # a fold after the first: MERGE (1) or rewrite (0)
    events = _events(seed, 80)
    writer = DeltaRsWriter(tmp_path, "app")
    writer.ensure_tables()
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(events)), 6))
    for batch_id, (a, b) in enumerate(zip([0, *cuts], [*cuts, len(events)], strict=True)):
        writer.write_batch(batch_id, _rows(events[a:b]))
        if batch_id in folds:
            _fold_tables(tmp_path)
    closed = sum(r["valid_to_offset"] is not None for r in _stored_rows(tmp_path, ENTITY.history))
    assert (closed > 0) == bool(folds)
    for offset in [None, *range(5, 95, 7)]:
        got, want = _spans(tmp_path, offset)
        assert got == want, offset
        state = entity_state(tmp_path, ENTITY, "c", offset, ["directory", "offline"]).to_pylist()
        assert {tuple(r.values()) for r in state} == _state_at(events, offset), offset
        assert len(state) == len(_state_at(events, offset))
        keys = [(r["topic_id"], r["partition_id"], r["broker_id"]) for r in state]
        assert keys == sorted(keys), offset


def test_a_fold_keeps_a_column_it_does_not_know(tmp_path: Path) -> None:
    """A fold rewrites the stored rows with every column of the table, one added by a later version or by hand
    included: none is dropped, and the rows read the same."""
    writer = DeltaRsWriter(tmp_path, "app")
    writer.ensure_tables()
    events = _events(3, 40)
    writer.write_batch(0, _rows(events[:20]))
    writer.write_batch(1, _rows(events[20:]))
    table = DeltaTable(tmp_path / ENTITY.history)
    table.alter.add_columns(DeltaField("note", PrimitiveType("string"), nullable=True))
    resolved = sorted(map(repr, read_table(tmp_path, ENTITY.history).to_pylist()))
    assert fold_versions(DeltaTable(tmp_path / ENTITY.history), ENTITY.history) > 0
    after = DeltaTable(tmp_path / ENTITY.history)
    assert "note" in after.schema().to_arrow().names
    assert sorted(map(repr, read_table(tmp_path, ENTITY.history).to_pylist())) == resolved
