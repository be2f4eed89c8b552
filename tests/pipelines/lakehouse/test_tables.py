"""The table side without Spark: codecs round-trip the model's values, and a micro-batch's change events become
the right current rows and history versions."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from jbod_model.replay import replay_records
from jbod_model.simulator.churn import ChurnSpec, churn_log
from pipelines.lakehouse.tables import plan_batch, table_schemas
from pipelines.streaming.codec import broker_from_text, broker_to_text, partition_from_text, partition_to_text


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_registrations_round_trip_through_their_state_form(seed: int) -> None:
    image = replay_records([e.record for e in churn_log(ChurnSpec(seed=seed, operations=30))])
    for reg in image.cluster.brokers.values():
        assert broker_from_text(broker_to_text(reg)) == reg
    for _topic, _pid, part in image.topics.partitions():
        assert partition_from_text(partition_to_text(part)) == part


def _event(ord_: int, entity: str, key: list[object], offset: int,
           value: dict[str, object] | None) -> dict[str, object]:
    return {"cluster_id": "c", "ord": ord_, "table": entity,
            "payload": json.dumps({"k": key, "o": offset, "t": 1000 + offset, "v": value})}


def test_events_of_a_key_become_versions_and_one_current_row() -> None:
    rows = [_event(0, "topic", ["T"], 5, {"topic_name": "a"}), _event(1, "topic", ["T"], 9, None),
            _event(2, "topic", ["T"], 12, {"topic_name": "a"}), _event(3, "topic", ["U"], 7, {"topic_name": "u"})]
    plan = plan_batch(rows)
    history = plan.versions["topic_history"]
    assert [(r["topic_id"], r["_close"], r["valid_from_offset"], r["valid_to_offset"]) for r in history] == [
        ("T", True, None, 5), ("T", False, 5, 9), ("T", False, 12, None), ("U", True, None, 7), ("U", False, 7, None)]
    current = {r["topic_id"]: r for r in plan.upserts["topics"]}
    assert current["T"]["since_offset"] == 12 and not current["T"]["_deleted"]
    assert current["T"]["since_time"] == 1012 * 1000  # microseconds


def test_a_deleted_key_leaves_no_current_row_and_closes_its_version() -> None:
    plan = plan_batch([_event(0, "broker", [1], 3, None)])
    assert plan.upserts["brokers"][0]["_deleted"]
    assert [r["_close"] for r in plan.versions["broker_history"]] == [True]


def test_every_table_has_a_cluster_id_and_snake_case_columns() -> None:
    for name, schema in table_schemas().items():
        assert name == name.lower() and schema.names[0] == "cluster_id"
        assert all(n == n.lower() and " " not in n for n in schema.names)


def test_record_times_are_written_in_microseconds() -> None:
    # The operator hands out the batch append time in ms; the column is a µs timestamp (docs/tables.md).
    row = {"offset": 7, "batch_base_offset": 7, "leader_epoch": 1, "timestamp": 1_700_000_000_123,
           "type": "NO_OP_RECORD", "version": 0, "data": "{}", "payload": None, "source": "s", "origin": "log",
           "snapshot_index": None, "applied_offset": 7}
    no_time = {**row, "offset": 8, "timestamp": None}
    plan = plan_batch([{"cluster_id": "c", "ord": i, "table": "records", "payload": json.dumps(r)}
                       for i, r in enumerate([row, no_time])])
    assert [r["timestamp"] for r in plan.appends["records"]] == [1_700_000_000_123_000, None]
