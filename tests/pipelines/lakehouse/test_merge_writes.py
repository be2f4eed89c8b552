"""DeltaRsWriter's MERGEs against a plain fold of the same change events: random events over a few keys, split into
micro-batches and written (one batch re-run, as after a crash), leave exactly the current rows and history versions
the fold gives — whatever execution options the MERGEs use (pipelines/lakehouse/tables.py)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from pipelines.lakehouse.tables import ENTITIES, DeltaRsWriter, read_table

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


@pytest.mark.parametrize("seed", range(4))
def test_merges_leave_the_rows_a_fold_of_the_events_gives(tmp_path: Path, seed: int) -> None:
    events = _events(seed, 60)
    writer = DeltaRsWriter(tmp_path, "app")
    writer.ensure_tables()
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(events)), 5))
    batches = [events[a:b] for a, b in zip([0, *cuts], [*cuts, len(events)], strict=True)]
    for batch_id, batch in enumerate(batches):
        rows = [{"cluster_id": "c", "ord": i, "table": ENTITY.name,
                 "payload": json.dumps({"k": list(k), "o": o, "t": o, "v": v})} for i, (k, o, v) in enumerate(batch)]
        writer.write_batch(batch_id, rows)
        if batch_id == 2:
            # A batch re-run after a crash is skipped table by table: nothing is closed or inserted twice.
            assert writer.write_batch(batch_id, rows)[ENTITY.history] == 0
    want_current, want_history = _fold(events)
    current = read_table(tmp_path, "replica_assignments").to_pylist()
    history = read_table(tmp_path, "replica_assignment_history").to_pylist()
    assert {(r["topic_id"], r["partition_id"], r["broker_id"], r["directory"], r["offline"], r["since_offset"])
            for r in current} == want_current
    assert len(history) == len(want_history)
    assert {(r["topic_id"], r["partition_id"], r["broker_id"], r["directory"], r["offline"], r["valid_from_offset"],
             r["valid_to_offset"]) for r in history} == want_history
