"""The stateful operator without Spark: ``replay_batch`` over in-memory stand-ins of Spark's MapState/ValueState,
batch after batch, leaves the model's image in state and emits rows whose current-table fold is the model's view.
Also checks that the operator's per-batch state traffic does not grow with the cluster."""

from __future__ import annotations

import collections
import dataclasses
import gc
import weakref
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest
from test_quality_support import FakeMapState, FakeValueState, write_lakehouse

from jbod_model.changes import DictImageStore, replay_incrementally
from jbod_model.errors import JbodError
from jbod_model.image_json import image_to_json
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import BeginTransactionRecord, NoOpRecord, PartitionChangeRecord
from jbod_model.replay import Replayer, replay_entries
from jbod_model.replicas import replica_view
from jbod_model.simulator.churn import ChurnSpec, churn_log
from jbod_model.slots import gc_paused
from jbod_model.uuid import Uuid
from pipelines.lakehouse.staging import read_parts
from pipelines.lakehouse.tables import ENTITIES, as_of_image, batch_tables, plan_batch
from pipelines.streaming import processor
from pipelines.streaming.codec import (
    PACKED_FIELDS,
    InputRow,
    entry_to_row,
    fan_out,
    pack_rows,
    packed_row,
    unpack_rows,
)
from pipelines.streaming.job import check_state_layout, summarize_cluster
from pipelines.streaming.processor import replay_batch, replay_bucket, settle_batch, sink_output
from pipelines.streaming.stateful import MAP_STATES, ClusterReplayProcessor

CURRENT_TABLES = {e.current for e in ENTITIES.values()}


def _frame(entries: list[Any], input_kind: str = "log") -> pd.DataFrame:
    return pd.DataFrame([dataclasses.asdict(entry_to_row("c", "record", e.offset, e, input_kind=input_kind))
                         for e in entries])


def _replica_key(payload: dict[str, Any]) -> tuple[str, int, int]:
    return payload["topic_id"], payload["partition_id"], payload["broker_id"]


def _rows(batch: dict[str, pa.Table], *tables: str) -> list[tuple[str, dict[str, Any]]]:
    """A batch's rows of ``tables`` as (table, row) in ``ord`` order."""
    found = [(name, row) for name in tables if name in batch for row in batch[name].to_pylist()]
    return sorted(found, key=lambda r: r[1]["ord"])


def _fold(current: dict[str, dict[tuple[Any, ...], dict[str, Any]]], batch: dict[str, pa.Table]) -> None:
    plan = plan_batch(batch)
    for table in plan.tables():
        if table not in CURRENT_TABLES:
            continue
        target = current.setdefault(table, {})
        for row in plan.rows(table):
            key = tuple(v for k, v in row.items() if k in ("topic_id", "partition_id", "broker_id", "name"))
            if row["removed"]:
                target.pop(key, None)
            else:
                target[key] = row


@pytest.fixture(params=["by key", "whole"])
def state_reads(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The operator's state read key by key (the default for small batches, as these tests' are) or, for every
    batch, each state variable whole and the brokers' index whole at the first broker listed."""
    if request.param == "whole":
        monkeypatch.setattr(processor, "BULK_READ_ROWS", 1)
        monkeypatch.setattr(processor, "BULK_INDEX_SHARE", 0.0)
    return str(request.param)


@pytest.mark.parametrize("size", [1, 5, 1000])
@pytest.mark.usefixtures("state_reads")
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


@pytest.mark.parametrize("index_share", [0.0, 0.5, 2.0])
def test_a_state_read_whole_answers_as_read_key_by_key(monkeypatch: pytest.MonkeyPatch, index_share: float) -> None:
    """Every ``ImageReader`` question, on the state a churn log left (deletions, moves, configs), asked in an order
    that lists brokers before and after the index is read whole: the same answers, in far fewer calls."""
    monkeypatch.setattr(processor, "BULK_INDEX_SHARE", index_share)
    entries = churn_log(ChurnSpec(seed=7, brokers=4, dirs_per_broker=2, topics=5, partitions_per_topic=6,
                                  replication_factor=3, operations=300, noop_share=0.1))
    maps = {name: FakeMapState() for name in MAP_STATES}
    meta = FakeValueState()
    for i in range(0, len(entries), 50):
        replay_batch("c", _frame(entries[i:i + 50]), meta, maps)  # type: ignore[arg-type]
    model = DictImageStore()
    replay_incrementally(model, entries)

    def answers(store: Any) -> list[Any]:
        out: list[Any] = [sorted(store.broker_ids()), dict(store.feature_levels())]
        for broker_id in [*sorted(store.broker_ids()), 99]:
            out += [store.broker(broker_id), sorted(store.partitions_on_broker(broker_id).items())]
        for topic_id in sorted(store.topic_ids(), key=str):
            topic = store.topic(topic_id)
            assert topic is not None
            out += [topic, store.topic_name(topic_id), store.topic_id_by_name(topic.name)]
            out += [store.partition(topic_id, p) for p in range(8)]
        out += [store.topic_id_by_name("gone"), store.topic_name(Uuid(1, 2)), sorted(store.config_resources())]
        out += [None if store.config(r) is None else dict(store.config(r)) for r in sorted(store.config_resources())]
        return out

    for m in maps.values():
        m.calls = 0
    by_key = answers(processor.StateStore(maps, meta.get()))  # type: ignore[arg-type]
    key_calls = sum(m.calls for m in maps.values())
    for m in maps.values():
        m.calls = 0
    whole = answers(processor.StateStore(maps, meta.get(), bulk=True))  # type: ignore[arg-type]
    assert whole == by_key == answers(model)
    assert maps["partitions"].calls == 1 and maps["topics"].calls == 1 and maps["brokers"].calls == 1
    # The index whole at the first broker listed; after the first of four, its index buckets read one by one; never
    # (four brokers and one unknown, each index bucket once).
    per_broker = processor.BROKER_INDEX_BUCKETS
    assert maps["broker_parts"].calls == {0.0: 1, 0.5: per_broker + 1, 2.0: 5 * per_broker}[index_share]
    assert sum(m.calls for m in maps.values()) < key_calls


def test_a_batch_writes_what_it_read_whole_back_into_its_copy() -> None:
    """After a batch's writes the store still answers as the state does (its copies read whole are kept current)."""
    entries = churn_log(ChurnSpec(seed=9, brokers=3, dirs_per_broker=2, topics=3, partitions_per_topic=4,
                                  replication_factor=2, operations=120, noop_share=0.1))
    maps = {name: FakeMapState() for name in MAP_STATES}
    meta = FakeValueState()
    half = len(entries) // 2
    replay_batch("c", _frame(entries[:half]), meta, maps)  # type: ignore[arg-type]
    store = processor.StateStore(maps, meta.get(), bulk=True)  # type: ignore[arg-type]
    replayer = processor.IncrementalReplayer(store)
    for entry in entries[half:]:
        replayer.replay(entry)
    store.write(replayer.writes())
    fresh = processor.StateStore(maps, None)  # type: ignore[arg-type]
    for broker_id in sorted(fresh.broker_ids()):
        assert store.broker(broker_id) == fresh.broker(broker_id)
        assert store.partitions_on_broker(broker_id) == fresh.partitions_on_broker(broker_id)
    assert sorted(store.topic_ids(), key=str) == sorted(fresh.topic_ids(), key=str)
    for topic_id in fresh.topic_ids():
        topic = fresh.topic(topic_id)
        assert topic is not None and store.topic(topic_id) == topic
        assert store.topic_name(topic_id) == topic.name
        assert store.topic_id_by_name(topic.name) == topic_id
        assert [store.partition(topic_id, p) for p in range(4)] == [fresh.partition(topic_id, p) for p in range(4)]


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

    payloads = _rows(rows, "log_gaps", "records", "topic", "offline")
    [gap] = [p for table, p in payloads if table == "log_gaps"]
    assert (gap["first_missing_offset"], gap["last_missing_offset"], gap["snapshot_end_offset"]) == \
        (cut + 2, snap_end - 1, snap_end)
    assert gap["dropped_records"] == 2 and gap["changed_rows"] > 0
    dropped = [p for table, p in payloads if table == "records" and p["applied_offset"] is None]
    assert [p["offset"] for p in dropped] == [cut, cut + 1]
    # The topics deleted in the gap close at the snapshot's offset (the tail may delete others later) …
    closed = {p["topic_id"] for table, p in payloads if table == "topic" and p["removed"] and p["o"] == snap_end - 1}
    assert closed == {str(t) for t in set(before.topics.by_id) - set(snapshot_image.topics.by_id)}
    # … and so do the offline intervals that ended in it (back online, gone, or offline otherwise).
    old, new = _offline(before), _offline(snapshot_image)
    ended = {_replica_key(p) for table, p in payloads if table == "offline" and p["o"] == snap_end - 1
             and _replica_key(p) in old}
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
    [logged] = [{k: v for k, v in p.items() if k not in ("cluster_id", "bucket", "ord", "at")}
                for _, p in _rows(out, "log_gaps")]
    assert logged == {"first_missing_offset": first, "last_missing_offset": last, "snapshot_end_offset": None,
                      "snapshot_source": None, "snapshot_time": None, "changed_rows": 0, "dropped_records": 0,
                      "message": f"offsets {first}..{last} could not be read"}
    recorded = [p["offset"] for _, p in _rows(out, "records")]
    assert recorded == [e.offset for e in kept]
    want = image_to_json(replay_entries(kept))
    assert sorted(current["brokers"]) == sorted((b["brokerId"],) for b in want["brokers"])
    assert sorted(k[0] for k in current["topics"]) == sorted(t["topicId"] for t in want["topics"])
    assert meta.value is not None and meta.value[0] == kept[-1].offset


@pytest.mark.parametrize("buckets", [2, 3])
@pytest.mark.usefixtures("state_reads")
def test_a_cluster_split_over_buckets_writes_what_one_bucket_writes(buckets: int) -> None:
    """The source's routing (``entry_to_row`` + ``fan_out``), one operator state per bucket, and the sink's
    ``settle_batch``: batch after batch, the rows fold into the same current tables as with one bucket."""
    entries = churn_log(ChurnSpec(seed=116, brokers=3, dirs_per_broker=2, topics=3, partitions_per_topic=4,
                                  replication_factor=2, operations=40, noop_share=0.1))
    single: dict[str, dict[tuple[Any, ...], dict[str, Any]]] = {}
    split: dict[str, dict[tuple[Any, ...], dict[str, Any]]] = {}
    one = ({name: FakeMapState() for name in MAP_STATES}, FakeValueState())
    states = [({name: FakeMapState() for name in MAP_STATES}, FakeValueState()) for _ in range(buckets)]
    halted: dict[str, int] = {}
    for i in range(0, len(entries), 7):
        _fold(single, replay_batch("c", _frame(entries[i:i + 7]), one[1], one[0]))  # type: ignore[arg-type]
        rows = [r for e in entries[i:i + 7]
                for r in fan_out(entry_to_row("c", "record", e.offset, e, buckets=buckets), buckets)]
        parts: dict[str, list[pa.Table]] = {}
        for bucket, (maps, meta) in enumerate(states):
            mine = [dataclasses.asdict(r) for r in rows if r.bucket == bucket]
            sink = replay_bucket("c", pd.DataFrame(mine) if mine else None, meta, maps,  # type: ignore[arg-type]
                                 bucket, buckets)
            for name, table in sink_output(sink).items():
                parts.setdefault(name, []).append(table)
        _fold(split, settle_batch({name: pa.concat_tables(found) for name, found in parts.items()}, halted))
    assert split == single
    assert sorted(split) == sorted(single) and split["replica_assignments"]


@pytest.mark.parametrize("buckets", [1, 3])
def test_the_records_replayed_without_their_steps_write_the_rows_their_steps_write(
        buckets: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """``replay_bucket`` hands a change that moves no replica to ``IncrementalReplayer.replay_partition_change`` and
    a NoOp to ``IncrementalReplayer.replay_noop``, and writes their rows itself (``RowSink.partition_change``,
    ``RowSink.noop``). Batch after batch, in every bucket, that writes exactly the rows — every table, column and
    ``ord`` — of the same batches with every record replayed as a step."""
    entries = churn_log(ChurnSpec(seed=7, brokers=3, dirs_per_broker=2, topics=3, partitions_per_topic=4,
                                  replication_factor=2, operations=60, noop_share=0.15))
    taken: collections.Counter[str] = collections.Counter()
    change_alone = processor.IncrementalReplayer.replay_partition_change
    noop_alone = processor.IncrementalReplayer.replay_noop

    def counted_change(self: Any, entry: LogEntry) -> Any:
        found = change_alone(self, entry)
        taken["change"] += found is not None
        return found

    def counted_noop(self: Any, entry: LogEntry) -> bool:
        found = noop_alone(self, entry)
        taken["noop"] += found
        return found

    def outputs(alone: bool) -> list[dict[str, list[dict[str, Any]]]]:
        monkeypatch.setattr(processor.IncrementalReplayer, "replay_partition_change",
                            counted_change if alone else lambda self, entry: None)
        monkeypatch.setattr(processor.IncrementalReplayer, "replay_noop",
                            counted_noop if alone else lambda self, entry: False)
        states = [({name: FakeMapState() for name in MAP_STATES}, FakeValueState()) for _ in range(buckets)]
        out = []
        for i in range(0, len(entries), 9):
            rows = [r for e in entries[i:i + 9]
                    for r in fan_out(entry_to_row("c", "record", e.offset, e, buckets=buckets), buckets)]
            for bucket, (maps, meta) in enumerate(states):
                mine = [packed_row(dataclasses.asdict(r)) for r in rows if r.bucket == bucket]
                sink = replay_bucket("c", mine, meta, maps, bucket, buckets)  # type: ignore[arg-type]
                out.append({name: table.to_pylist() for name, table in sorted(sink_output(sink).items())})
        return out

    assert outputs(alone=True) == outputs(alone=False)
    # Most leader and ISR changes and NoOps went the short way (not those inside a metadata transaction).
    changes = sum(isinstance(e.record, PartitionChangeRecord) and e.record.replicas is None
                  and e.record.directories is None for e in entries)
    noops = sum(isinstance(e.record, NoOpRecord) for e in entries)
    assert changes > 20 and taken["change"] >= 0.7 * changes, (taken, changes)
    assert noops > 10 and taken["noop"] >= 0.7 * noops, (taken, noops)


def _batch(*rows: dict[str, Any]) -> dict[str, pa.Table]:
    """A batch of the buckets' rows as the sink gets them: ``bucket`` and ``at`` beside each table's columns."""
    tables = batch_tables(rows)
    for name, table in tables.items():
        mine = [r for r in rows if r["table"] == name]
        tables[name] = table.append_column("bucket", pa.array([r["bucket"] for r in mine], pa.int32())).append_column(
            "at", pa.array([r["at"] for r in mine], pa.int64()))
    return tables


def _row(table: str, bucket: int, at: int | None, fields: dict[str, Any], ord_: int = 0) -> dict[str, Any]:
    return {"cluster_id": "c", "ord": ord_, "table": table, "bucket": bucket, "at": at, **fields}


def _settled(batch: dict[str, pa.Table]) -> list[tuple[str, Any]]:
    return [(name, row["at"]) for name in sorted(batch) for row in batch[name].to_pylist()]


def test_a_fault_in_one_bucket_halts_the_cluster_at_its_offset() -> None:
    fault = {"seq": 10, "offset": 10, "source": None, "error": "ReplayFault", "message": "m"}
    rows = [_row("partition", 0, 5, {"o": 5}, 0), _row("partition", 0, 12, {"o": 12}, 4),
            _row("replay_faults", 1, 10, fault, 1), _row("replay_faults", 0, 11, {**fault, "offset": 11}, 8),
            _row("partition", 1, 9, {"o": 9}, 5)]
    halted: dict[str, int] = {}
    kept = settle_batch(_batch(*rows), halted)
    assert _settled(kept) == [("partition", 5), ("partition", 9), ("replay_faults", 10)]
    assert kept["replay_faults"].column("offset").to_pylist() == [10]
    assert halted == {"c": 10}
    # Later batches: the buckets that did not fault go on replaying; none of it is the cluster's.
    assert _settled(settle_batch(_batch(_row("partition", 0, 20, {"o": 20})), halted)) == []
    # A controller response (no step) is kept.
    assert _settled(settle_batch(_batch(_row("controller_responses", 0, None, {"request_seq": 1})), halted)) == \
        [("controller_responses", None)]


def test_partial_rebootstrap_gap_rows_are_summed() -> None:
    def gap(changed: int, dropped: int, source: str | None) -> dict[str, Any]:
        return {"first_missing_offset": 3, "last_missing_offset": 9, "snapshot_end_offset": 10,
                "snapshot_source": source, "snapshot_time": None, "changed_rows": changed,
                "dropped_records": dropped, "message": "partial"}

    kept = settle_batch(_batch(_row("log_gaps", 0, 9, gap(4, 1, "snap")), _row("log_gaps", 1, 9, gap(6, 2, None))),
                        {})
    [merged] = kept["log_gaps"].to_pylist()
    assert (merged["changed_rows"], merged["dropped_records"], merged["snapshot_source"]) == (10, 3, "snap")
    assert "(10 rows changed)" in merged["message"]
    left_out = {**gap(0, 1, None), "first_missing_offset": 12, "last_missing_offset": 12, "snapshot_end_offset": None}
    assert settle_batch(_batch(*(_row("log_gaps", b, 12, left_out, b) for b in range(3))), {})["log_gaps"].num_rows == 1


def test_a_checkpoint_of_another_layout_is_refused(tmp_path: Path) -> None:
    check_state_layout(tmp_path / "cp", 4)
    check_state_layout(tmp_path / "cp", 4)
    with pytest.raises(JbodError, match="written with 4 replay buckets"):
        check_state_layout(tmp_path / "cp", 2)
    old = tmp_path / "old"
    (old / "offsets").mkdir(parents=True)
    (old / "offsets" / "0").write_text("v1\n{}\n{}\n")
    with pytest.raises(JbodError, match="older kraft-jbod"):
        check_state_layout(old, 4)
    layout2 = tmp_path / "layout2"
    layout2.mkdir()
    (layout2 / "kraft-jbod-state.json").write_text('{"version": 2, "buckets": 4}')
    with pytest.raises(JbodError, match="holds state layout 2"):
        check_state_layout(layout2, 4)
    # Layout 4 stored a partitions chunk as one JSON object; this job reads lines (codec.PartitionChunk).
    layout4 = tmp_path / "layout4"
    layout4.mkdir()
    (layout4 / "kraft-jbod-state.json").write_text('{"version": 4, "buckets": 4, "partitions": 2}')
    with pytest.raises(JbodError, match="holds state layout 4, this job writes layout 9"):
        check_state_layout(layout4, 4)
    # Layout 5's broker index held the partition keys alone; this job reads them grouped by directory.
    layout5 = tmp_path / "layout5"
    layout5.mkdir()
    (layout5 / "kraft-jbod-state.json").write_text('{"version": 5, "buckets": 4, "partitions": 2}')
    with pytest.raises(JbodError, match="holds state layout 5, this job writes layout 9"):
        check_state_layout(layout5, 4)
    # Layout 6 kept 256 partition chunks and 8 index buckets per broker; a key would be looked for in another one.
    layout6 = tmp_path / "layout6"
    layout6.mkdir()
    (layout6 / "kraft-jbod-state.json").write_text('{"version": 6, "buckets": 4, "partitions": 2}')
    with pytest.raises(JbodError, match="holds state layout 6, this job writes layout 9"):
        check_state_layout(layout6, 4)
    # Layout 7 named a partition's directories by their ids' text; this job reads indices into a chunk's table.
    layout7 = tmp_path / "layout7"
    layout7.mkdir()
    (layout7 / "kraft-jbod-state.json").write_text('{"version": 7, "buckets": 4, "partitions": 2}')
    with pytest.raises(JbodError, match="holds state layout 7, this job writes layout 9"):
        check_state_layout(layout7, 4)
    # Layout 8 stored the chunks and the broker index as strings; this job reads them compressed, as binary.
    layout8 = tmp_path / "layout8"
    layout8.mkdir()
    (layout8 / "kraft-jbod-state.json").write_text('{"version": 8, "buckets": 4, "partitions": 2}')
    with pytest.raises(JbodError, match="holds state layout 8, this job writes layout 9"):
        check_state_layout(layout8, 4)


class _FakeHandle:
    """What ``ClusterReplayProcessor.init`` asks of Spark's StatefulProcessorHandle, in memory."""

    def getValueState(self, name: str, schema: str) -> FakeValueState:
        return FakeValueState()

    def getMapState(self, name: str, key: str, value: str) -> FakeMapState:
        return FakeMapState()


def test_packets_in_and_files_out_carry_exactly_the_rows(tmp_path: Path) -> None:
    """The source's packets (``pack_rows``, inline or in files) into the processor, its output files (a file per
    table, named by the rows it returns) read by the driver (``read_parts``): the same rows, in the same order, as
    the operator over plain rows — packets cut anywhere."""
    entries = churn_log(ChurnSpec(seed=5, brokers=3, dirs_per_broker=2, topics=2, partitions_per_topic=3,
                                  replication_factor=2, operations=30, noop_share=0.2))
    rows = [entry_to_row("c", "record", e.offset, e) for e in entries]
    assert all(r.__class__ is InputRow for r in rows)
    unpacked = unpack_rows(pack_rows(rows))
    assert unpacked == [packed_row(dataclasses.asdict(r)) for r in rows]
    assert [dict(zip(PACKED_FIELDS, u, strict=True)) for u in unpacked] == \
        [{k: v for k, v in dataclasses.asdict(r).items() if k not in ("bucket", "cluster_id")} for r in rows]
    expected = replay_batch("c", _frame(entries), FakeValueState(), {n: FakeMapState() for n in MAP_STATES})

    proc = ClusterReplayProcessor(1, str(tmp_path / "parts"))
    proc.init(_FakeHandle())  # type: ignore[arg-type]
    # Packets inline, or in the files a source's task wrote them to (every other one here).
    packets = []
    for n, i in enumerate(range(0, len(rows), 5)):
        data, file = pack_rows(rows[i:i + 5]), None
        if n % 2:
            file = str(tmp_path / f"input-{n}.rows")
            Path(file).write_bytes(data)
            data = None
        packets.append(pd.DataFrame({"seq": [rows[i].seq], "rows": [data], "file": [file]}))
    out = list(proc.handleInputRows(("c", 0), iter(packets[::-1]), None))  # type: ignore[arg-type]
    assert len(out) == 1
    parts = processor.output_parts(pa.Table.from_pandas(out[0], schema=_OUTPUT, preserve_index=False))
    assert sorted(p.table for p in parts) == sorted(expected)
    assert {p.table: p.rows for p in parts} == {name: t.num_rows for name, t in expected.items()}
    # Outside a streaming batch (no batch id) the files go to a folder of their own.
    assert {Path(p.file).parent for p in parts} == {tmp_path / "parts" / "unbatched"}
    flat = read_parts(parts)
    assert sorted(flat) == sorted(expected)
    for name, table in expected.items():
        assert flat[name].equals(table), name


def test_a_batch_without_output_writes_no_file(tmp_path: Path) -> None:
    sink = processor.RowSink("c", "log")
    assert processor.write_output(sink, str(tmp_path / "none")) is None
    assert not (tmp_path / "none").exists()


def test_a_workers_batch_makes_its_output_with_the_collector_still_paused(monkeypatch: pytest.MonkeyPatch,
                                                                          tmp_path: Path) -> None:
    """``replay_packets`` (a worker's whole batch) keeps the cyclic GC paused while it unpacks the packets and writes
    the output files too, and turns it back on only once the sink's rows are gone: a pass with them alive walked
    every row (the collector's first pass after a batch)."""
    entries = churn_log(ChurnSpec(seed=5, operations=10))[:30]
    rows = [entry_to_row("c", "record", e.offset, e) for e in entries]
    seen: list[tuple[str, bool]] = []
    sinks: list[weakref.ref[processor.RowSink]] = []
    real_unpack, real_output = processor.unpack_rows, processor.write_output

    def unpack(packet: bytes) -> list[list[object]]:
        seen.append(("unpack", gc.isenabled()))
        return real_unpack(packet)

    def output(sink: processor.RowSink, directory: str) -> pd.DataFrame | None:
        seen.append(("output", gc.isenabled()))
        sinks.append(weakref.ref(sink))
        return real_output(sink, directory)

    monkeypatch.setattr(processor, "unpack_rows", unpack)
    monkeypatch.setattr(processor, "write_output", output)
    assert gc.isenabled()
    frame = processor.replay_packets("c", [(10, pack_rows(rows[10:])), (0, pack_rows(rows[:10]))], FakeValueState(),
                                     {n: FakeMapState() for n in MAP_STATES}, 0, 1,  # type: ignore[arg-type]
                                     directory=str(tmp_path))
    assert gc.isenabled()
    assert seen == [("unpack", False), ("unpack", False), ("output", False)]
    assert sinks[0]() is None
    assert frame is not None and set(frame["table"]) >= {"records", "partition"}
    expected = replay_batch("c", _frame(entries), FakeValueState(), {n: FakeMapState() for n in MAP_STATES})
    flat = read_parts(processor.output_parts(pa.Table.from_pandas(frame, schema=_OUTPUT, preserve_index=False)))
    assert sorted(flat) == sorted(expected)
    for name, table in expected.items():
        assert flat[name].equals(table), name


#: The operator's output rows (``processor.OUTPUT_SCHEMA``) as the driver collects them.
_OUTPUT = pa.schema([("cluster_id", pa.string()), ("bucket", pa.int32()), ("table", pa.string()),
                     ("file", pa.string()), ("rows", pa.int64())])


def test_a_grouped_step_gives_the_rows_of_its_replica_changes() -> None:
    """The sink writes a broker change's replica groups (``ReplicaGroup``, the operator's replayer groups them) as
    the rows of the same changes one by one: the same rows, and the same ``ord`` values among them."""
    entries = churn_log(ChurnSpec(seed=7, brokers=3, dirs_per_broker=2, topics=3, partitions_per_topic=5,
                                  replication_factor=2, operations=60, noop_share=0.1))
    grouped, _ = replay_incrementally(DictImageStore(), entries, group_replicas=True)
    compared = 0
    for step in grouped:
        if not step.replica_groups:
            continue
        compared += 1
        flat = dataclasses.replace(step, replicas=tuple(step.replica_changes()), replica_groups=())
        rows = []
        for each in (step, flat):
            sink = processor.RowSink("c", "log")
            sink.step(each)
            rows.append({name: sorted(table.to_pylist(), key=lambda r: r["ord"])
                         for name, table in sink.tables().items()})
        by_key = [{name: sorted(found, key=lambda r: (r["topic_id"], r["partition_id"], r["broker_id"]))
                   if name in ("replica", "offline") else found for name, found in r.items()} for r in rows]
        for name in by_key[1]:
            assert sorted(r["ord"] for r in rows[0][name]) == sorted(r["ord"] for r in rows[1][name])
            assert [{**r, "ord": None} for r in by_key[0][name]] == [{**r, "ord": None} for r in by_key[1][name]]
        assert sorted(by_key[0]) == sorted(by_key[1])
    assert compared > 0


@pytest.mark.parametrize(("seed", "weights"), [(3, {}), (8, {}), (21, {}),
                                               (5, {"delete_weight": 3.0, "restart_weight": 2.0}),
                                               (13, {"reassign_weight": 3.0, "restart_weight": 1.0})])
def test_the_run_summary_reads_what_the_image_from_the_tables_holds(tmp_path: Path, seed: int,
                                                                     weights: dict[str, float]) -> None:
    """``summarize_cluster`` reads only the columns it shows; it says what the image JSON of the same tables
    (``as_of_image``, which it used to build whole) says: counts, offline replicas by broker and disk and by reason
    (in the image's order; read from the open offline intervals, so topics deleted, brokers restarted and replicas
    moved while offline are in the cases), leaderless partitions by name."""
    entries = churn_log(ChurnSpec(seed=seed, brokers=4, operations=150, noop_share=0.1, **weights))
    tables = write_lakehouse(tmp_path / "t", "c", entries, batch_size=40)
    image = as_of_image(tables, "c")
    names = {t["topicId"]: t["name"] for t in image["topics"]}
    offline: dict[int, dict[str, int]] = {}
    reasons: dict[str, int] = {}
    for r in image["replicas"]:
        if r["offline"]:
            per_dir = offline.setdefault(r["brokerId"], {})
            per_dir[r["directory"]] = per_dir.get(r["directory"], 0) + 1
            reasons[r["offlineReason"]] = reasons.get(r["offlineReason"], 0) + 1
    summary = summarize_cluster(tables, "c")
    assert (summary.last_offset, summary.metadata_version, summary.brokers, summary.topics, summary.partitions,
            summary.replicas) == (image["lastOffset"], image["metadataVersion"], len(image["brokers"]),
                                  len(image["topics"]), len(image["partitions"]), len(image["replicas"]))
    assert list(summary.offline_by_broker_dir.items()) == list(offline.items())
    assert list(summary.offline_reasons.items()) == list(reasons.items())
    assert summary.leaderless == [(names.get(p["topicId"], p["topicId"]), p["partitionId"])
                                  for p in image["partitions"] if p["leader"] == -1]
    assert summary.partitions > 0 and summary.replicas > 0



def test_a_bucket_replays_with_the_cyclic_collector_paused_and_restores_it_even_on_error() -> None:
    """``replay_bucket`` runs without the cyclic GC (its passes grew with the batch's live objects) and leaves it as
    it found it: on after a batch and after a failing call, off if the caller had turned it off."""
    seen: list[bool] = []

    class Watching(FakeValueState):
        def exists(self) -> bool:
            seen.append(gc.isenabled())
            return super().exists()

    entries = churn_log(ChurnSpec(seed=5, operations=10))[:30]
    assert gc.isenabled()
    replay_bucket("c", _frame(entries), Watching(), {n: FakeMapState() for n in MAP_STATES})  # type: ignore[arg-type]
    assert seen and not any(seen)
    assert gc.isenabled()

    @gc_paused()
    def failing() -> None:
        seen.append(gc.isenabled())
        raise RuntimeError("a replay fault")

    with pytest.raises(RuntimeError):
        failing()
    assert seen[-1] is False and gc.isenabled()
    gc.disable()
    try:
        replay_bucket("c", _frame(entries), Watching(), {n: FakeMapState() for n in MAP_STATES})  # type: ignore[arg-type]
        assert not gc.isenabled()
    finally:
        gc.enable()
