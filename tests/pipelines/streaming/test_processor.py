"""The stateful operator without Spark: ``replay_batch`` over in-memory stand-ins of Spark's MapState/ValueState,
batch after batch, leaves the model's image in state and emits rows whose current-table fold is the model's view.
Also checks that the operator's per-batch state traffic does not grow with the cluster."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pandas as pd
import pytest
from test_quality_support import FakeMapState, FakeValueState

from jbod_model.image_json import image_to_json
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import BeginTransactionRecord, NoOpRecord, PartitionChangeRecord
from jbod_model.replay import Replayer, replay_entries
from jbod_model.replicas import replica_view
from jbod_model.simulator.churn import ChurnSpec, churn_log
from pipelines.lakehouse.tables import ENTITIES, plan_batch
from pipelines.streaming.codec import InputRow, entry_to_row
from pipelines.streaming.processor import MAP_STATES, replay_batch

CURRENT_TABLES = {e.current for e in ENTITIES.values()}


def _frame(entries: list[Any], input_kind: str = "log") -> pd.DataFrame:
    return pd.DataFrame([dataclasses.asdict(entry_to_row("c", "record", e.offset, e, input_kind=input_kind))
                         for e in entries])


def _fold(current: dict[str, dict[tuple[Any, ...], dict[str, Any]]], rows: list[tuple[str, int, str, str]]) -> None:
    plan = plan_batch([{"cluster_id": c, "ord": o, "table": t, "payload": p} for c, o, t, p in rows])
    for table, appended in plan.appends.items():
        if table not in CURRENT_TABLES:
            continue
        target = current.setdefault(table, {})
        for row in appended:
            key = tuple(v for k, v in row.items() if k in ("topic_id", "partition_id", "broker_id", "name"))
            if row["removed"]:
                target.pop(key, None)
            else:
                target[key] = row


@pytest.mark.parametrize("size", [1, 5, 1000])
def test_batches_through_the_operator_give_the_model(size: int) -> None:
    entries = churn_log(ChurnSpec(seed=116, brokers=2, dirs_per_broker=2, topics=2, partitions_per_topic=2,
                                     replication_factor=2, operations=14, noop_share=0.1))
    maps = {name: FakeMapState() for name in MAP_STATES}
    meta = FakeValueState()
    current: dict[str, dict[tuple[Any, ...], dict[str, Any]]] = {}
    for i in range(0, len(entries), size):
        _fold(current, replay_batch("c", _frame(entries[i:i + size]), meta, maps))  # type: ignore[arg-type]
    want = image_to_json(replay_entries(entries))
    replicas = sorted(({"topicId": r["topic_id"], "partitionId": r["partition_id"], "brokerId": r["broker_id"],
                        "directory": r["directory"], "directoryState": r["directory_state"], "offline": r["offline"],
                        "offlineReason": r["offline_reason"]} for r in current["replica_assignments"].values()),
                      key=lambda r: (r["topicId"], r["partitionId"], r["brokerId"]))
    assert replicas == want["replicas"]
    assert sorted(current["brokers"]) == sorted((b["brokerId"],) for b in want["brokers"])
    assert meta.value is not None and meta.value[0] == entries[-1].offset


def test_state_traffic_of_one_record_does_not_grow_with_the_cluster() -> None:
    def traffic(topics: int) -> int:
        entries = churn_log(ChurnSpec(seed=3, topics=topics, partitions_per_topic=20, operations=0))
        maps = {name: FakeMapState() for name in MAP_STATES}
        meta = FakeValueState()
        replay_batch("c", _frame(entries), meta, maps)  # type: ignore[arg-type]
        for m in maps.values():
            m.calls = 0
        # One ISR change on one partition.
        some = next(e.record for e in entries if type(e.record).__name__ == "PartitionRecord")
        change = LogEntry(offset=len(entries), record=PartitionChangeRecord(
            topic_id=some.topic_id, partition_id=some.partition_id, isr=some.replicas[:1], leader=some.replicas[0]),
            batch_base_offset=len(entries))
        replay_batch("c", _frame([change]), meta, maps)  # type: ignore[arg-type]
        return sum(m.calls for m in maps.values())

    assert traffic(2) == traffic(50) <= 12


def _offline(image: Any) -> dict[tuple[str, int, int], tuple[Any, ...]]:
    return {(str(r.topic_id), r.partition_id, r.broker_id): (str(r.directory), r.directory_state, r.offline_reason)
            for r in replica_view(image) if r.offline}


def test_a_re_bootstrap_replaces_the_state_with_the_snapshot_and_reports_the_gap() -> None:
    """The log was truncated past the stream, which stood inside a metadata transaction: the source sends the
    covering snapshot with ``gap_from``; the operator loads it over the stored image, closes what the snapshot lacks
    at its offset, drops the open transaction, and writes a ``log_gaps`` row."""
    entries = churn_log(ChurnSpec(seed=10, operations=80))
    replayer = Replayer()
    committed = []
    for e in entries:
        replayer.replay(e)
        if not replayer.in_transaction:
            committed.append(e.offset + 1)
    # The first run ends at ``cut`` with a transaction begun at ``cut`` and still open (its end is in the gap); the
    # snapshot stands for a later committed offset at which topics were deleted and offline replicas came back.
    choices = [(cut, end) for cut in committed[len(committed) // 4:] for end in committed
               if cut + 2 < end < len(entries) - 3]
    cut, snap_end = next(
        (c, e) for c, e in choices
        if set(replay_entries(entries[:c]).topics.by_id) - set(replay_entries(entries[:e]).topics.by_id)
        and _offline(replay_entries(entries[:c])).items() - _offline(replay_entries(entries[:e])).items())
    open_txn = [LogEntry(offset=cut, record=BeginTransactionRecord(name="t"), batch_base_offset=cut),
                LogEntry(offset=cut + 1, record=NoOpRecord(), batch_base_offset=cut)]
    before, snapshot_image = replay_entries(entries[:cut]), replay_entries(entries[:snap_end])

    maps = {name: FakeMapState() for name in MAP_STATES}
    meta = FakeValueState()
    current: dict[str, dict[tuple[Any, ...], dict[str, Any]]] = {}
    _fold(current, replay_batch("c", _frame([*entries[:cut], *open_txn]), meta, maps))  # type: ignore[arg-type]
    assert meta.value is not None and meta.value[1] is not None  # the transaction is open
    records = snapshot_image.to_records()
    snapshot_rows = [dataclasses.asdict(entry_to_row("c", "snapshot", snap_end - len(records) + i,
                                                     LogEntry(offset=i, record=r), snapshot_end=snap_end,
                                                     gap_from=cut + 2)) for i, r in enumerate(records)]
    batch = pd.concat([pd.DataFrame(snapshot_rows), _frame(entries[snap_end:])], ignore_index=True)
    rows = replay_batch("c", batch, meta, maps)  # type: ignore[arg-type]
    _fold(current, rows)

    payloads = [(table, json.loads(p)) for _, _, table, p in rows]
    [gap] = [p for table, p in payloads if table == "log_gaps"]
    assert (gap["first_missing_offset"], gap["last_missing_offset"], gap["snapshot_end_offset"]) == \
        (cut + 2, snap_end - 1, snap_end)
    assert gap["dropped_records"] == 2 and gap["changed_rows"] > 0
    dropped = [p for table, p in payloads if table == "records" and p["applied_offset"] is None]
    assert [p["offset"] for p in dropped] == [cut, cut + 1]
    # The topics deleted in the gap close at the snapshot's offset (the tail may delete others later) …
    closed = {p["k"][0] for table, p in payloads if table == "topic" and p["v"] is None and p["o"] == snap_end - 1}
    assert closed == {str(t) for t in set(before.topics.by_id) - set(snapshot_image.topics.by_id)}
    # … and so do the offline intervals that ended in it (back online, gone, or offline otherwise).
    old, new = _offline(before), _offline(snapshot_image)
    ended = {tuple(p["k"]) for table, p in payloads if table == "offline" and p["o"] == snap_end - 1
             and tuple(p["k"]) in old}
    assert ended == {k for k, v in old.items() if new.get(k) != v}
    want = image_to_json(replay_entries(entries))
    assert sorted((t[0], r["topic_name"]) for t, r in current["topics"].items()) == \
        sorted((t["topicId"], t["name"]) for t in want["topics"])
    replicas = sorted(({"topicId": r["topic_id"], "partitionId": r["partition_id"], "brokerId": r["broker_id"],
                        "directory": r["directory"], "directoryState": r["directory_state"], "offline": r["offline"],
                        "offlineReason": r["offline_reason"]} for r in current["replica_assignments"].values()),
                      key=lambda r: (r["topicId"], r["partitionId"], r["brokerId"]))
    assert replicas == want["replicas"]
    assert meta.value[0] == entries[-1].offset and meta.value[1] is None


def test_a_gap_row_of_the_source_is_a_log_gaps_row_and_replay_goes_on_after_it() -> None:
    """Offsets the source skipped (policy ``skip``, a corrupt batch) come as a ``gap`` row: the operator writes it to
    ``log_gaps`` as it came — the range, no snapshot, the message — and replays the records after it onto the state
    before it, as the model does when its reader skips the batch."""
    entries = churn_log(ChurnSpec(seed=7, operations=30))
    first, last = 20, 23
    kept = [e for e in entries if not first <= e.offset <= last]
    gap = InputRow("c", "gap", first, first, None, None, None, "LOG_GAP", 0, None, None, "/x/00000000000000000000.log",
                   gap_from=first, gap_last=last, message=f"offsets {first}..{last} could not be read")
    rows = [dataclasses.asdict(entry_to_row("c", "record", e.offset, e)) for e in kept]
    at = next(i for i, r in enumerate(rows) if r["offset"] > last)
    batch = pd.DataFrame([*rows[:at], dataclasses.asdict(gap), *rows[at:]])
    maps = {name: FakeMapState() for name in MAP_STATES}
    meta = FakeValueState()
    current: dict[str, dict[tuple[Any, ...], dict[str, Any]]] = {}
    out = replay_batch("c", batch, meta, maps)  # type: ignore[arg-type]
    _fold(current, out)
    [logged] = [json.loads(p) for _, _, table, p in out if table == "log_gaps"]
    assert logged == {"first_missing_offset": first, "last_missing_offset": last, "snapshot_end_offset": None,
                      "snapshot_source": None, "snapshot_time": None, "changed_rows": 0, "dropped_records": 0,
                      "message": f"offsets {first}..{last} could not be read"}
    recorded = [json.loads(p)["offset"] for _, _, table, p in out if table == "records"]
    assert recorded == [e.offset for e in kept]
    want = image_to_json(replay_entries(kept))
    assert sorted(current["brokers"]) == sorted((b["brokerId"],) for b in want["brokers"])
    assert sorted(k[0] for k in current["topics"]) == sorted(t["topicId"] for t in want["topics"])
    assert meta.value is not None and meta.value[0] == kept[-1].offset
