"""The table side without Spark: codecs round-trip the model's values, and a micro-batch's change events become
the right current rows and history versions."""

from __future__ import annotations

from datetime import UTC, datetime
from unittest import mock

import orjson
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jbod_model.errors import InputError
from jbod_model.image import PartitionRegistration
from jbod_model.records.json_codec import dumps_without_floats
from jbod_model.replay import replay_records
from jbod_model.simulator.churn import ChurnSpec, churn_log
from jbod_model.uuid import Uuid
from pipelines.lakehouse import tables as tables_module
from pipelines.lakehouse.tables import VERSIONED, batch_tables, event_row, plan_batch, stored_schemas, table_schemas
from pipelines.streaming import codec
from pipelines.streaming.codec import PartitionChunk, broker_from_text, broker_to_text, packed_state, state_text


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_registrations_round_trip_through_their_state_form(seed: int) -> None:
    image = replay_records([e.record for e in churn_log(ChurnSpec(seed=seed, operations=30))])
    for reg in image.cluster.brokers.values():
        assert broker_from_text(broker_to_text(reg)) == reg
    chunk = PartitionChunk([], {})
    parts = {f"{topic.id}:{pid}": part for topic, pid, part in image.topics.partitions()}
    for key, part in parts.items():
        chunk.put(key, part)
        assert chunk.get(key) == part
    back = PartitionChunk.from_text(chunk.to_text())
    assert {key: back.get(key) for key in parts} == parts and back.texts == chunk.texts


_JSON = st.recursive(st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
                     max_leaves=12)
_PARTITION_KEYS = st.builds(lambda topic, pid: f"{topic}:{pid}", st.uuids(), st.integers(0, 2**31 - 1))
_DIRECTORIES = st.lists(st.builds(Uuid, st.integers(-(2**63), 2**63 - 1), st.integers(-(2**63), 2**63 - 1)),
                        max_size=5)


@given(st.text())
def test_a_large_state_value_round_trips_compressed(text: str) -> None:
    """State layout 9 keeps the partitions chunks and the broker index compressed, as binary: any text back as it
    was, and a repetitive one (as a chunk is: topic ids, replica lists) in fewer bytes."""
    packed = packed_state(text)
    assert isinstance(packed, bytes) and state_text(packed) == text
    chunk_like = "\n".join(f"AAAAAAAAAAAAAAAAAAAAAg:{i}\n[[1,2,3],[0,1,2],[1,2,3],[],[],[],[],1,0,5,{i}]"
                           for i in range(500))
    assert len(packed_state(chunk_like)) * 2 < len(chunk_like.encode())


def test_a_state_value_too_short_to_be_packed_is_refused() -> None:
    with pytest.raises(InputError, match="not written by packed_state"):
        state_text(b"ab")


@settings(max_examples=200, deadline=None)
@given(values=st.dictionaries(_PARTITION_KEYS, _JSON, max_size=20), directories=_DIRECTORIES)
def test_a_partitions_chunk_keeps_any_json_values_by_key(values: dict[str, object],
                                                          directories: list[Uuid]) -> None:
    # Any JSON (strings with line breaks, separators and control characters included) as the store writes it.
    texts = {key: dumps_without_floats(value) for key, value in values.items()}
    text = PartitionChunk(list(directories), dict(texts)).to_text()
    back = PartitionChunk.from_text(text)
    assert back.texts == texts and list(back.texts) == list(texts)
    assert {key: orjson.loads(value) for key, value in back.texts.items()} == values
    assert PartitionChunk.from_text(back.to_text()).to_text() == text
    if texts:
        # A chunk cut short by a line is refused, not read as other keys and values.
        with pytest.raises(InputError):
            PartitionChunk.from_text(text.rpartition("\n")[0])


@settings(max_examples=30, deadline=None)
@given(seeds=st.lists(st.integers(0, 10_000), min_size=1, max_size=4), table_max=st.sampled_from([0, 3, 1024]),
       removed=st.integers(0, 3))
def test_a_partitions_chunk_holds_registrations_by_key_across_rewrites(seeds: list[int], table_max: int,
                                                                        removed: int) -> None:
    # A chunk read back and rewritten batch after batch, as the state store does: each "batch" changes the
    # registrations of another churned cluster's partitions (new directories grow the table), removes some keys and
    # leaves the others as the text they were read as. Whatever the table's bound (0: rebuilt at every write; 3:
    # now and then), every key reads back as last written.
    expected: dict[str, PartitionRegistration] = {}
    text = ""
    with mock.patch.object(codec, "CHUNK_DIRECTORY_TABLE_MAX", table_max):
        for seed in seeds:
            chunk = PartitionChunk.from_text(text)
            image = replay_records([e.record for e in churn_log(ChurnSpec(seed=seed, operations=30))])
            for index, (topic, pid, part) in enumerate(image.topics.partitions()):
                key = f"{topic.name}:{pid}"  # the churn's topic names repeat across seeds: keys are rewritten
                if removed and index % (removed + 1) == 0:
                    chunk.put(key, None)
                    expected.pop(key, None)
                else:
                    chunk.put(key, part)
                    expected[key] = part
            text = chunk.to_text()
            back = PartitionChunk.from_text(text)
            assert set(back.texts) == set(expected)
            assert {key: back.get(key) for key in expected} == expected
            if table_max == 0:
                used = {d for part in expected.values() for d in part.directories}
                assert len(text.partition("\n")[0].split(",")) == len(used) or not used


def _event(ord_: int, entity: str, key: list[object], offset: int,
           value: dict[str, object] | None) -> dict[str, object]:
    return {"cluster_id": "c", "ord": ord_, **event_row(entity, key, offset, 1000 + offset, value)}


def test_events_of_a_key_become_versions_and_one_current_row() -> None:
    t, u = ["T"], ["U"]
    # Out of order as the buckets hand them over (T's last event, ord 2, before its removal, ord 1): the current row
    # is the key's greatest ``ord``, whatever the rows' order; the history rows are written in the order given.
    rows = [_event(3, "topic", u, 7, {"topic_name": "u"}), _event(0, "topic", t, 5, {"topic_name": "a"}),
            _event(2, "topic", t, 12, {"topic_name": "a"}), _event(1, "topic", t, 9, None)]
    plan = plan_batch(batch_tables(rows))
    history = plan.rows("topic_history")
    # Appended only, no end stored: the key's next row ends a version (readers derive it, jbod maintain stores it).
    assert [(r["topic_id"], r["removed"], r["valid_from_offset"], r["valid_to_offset"]) for r in history] == [
        ("U", False, 7, None), ("T", False, 5, None), ("T", False, 12, None), ("T", True, 9, None)]
    current = {r["topic_id"]: r for r in plan.rows("topics")}
    assert current["T"]["since_offset"] == 12 and not current["T"]["removed"]
    assert current["T"]["since_time"] == datetime(1970, 1, 1, 0, 0, 1, 12_000, tzinfo=UTC)  # 1,012 ms


def test_a_batch_of_several_clusters_is_applied_cluster_by_cluster_in_ord_order() -> None:
    # ``ord`` orders a cluster's rows: the same ords in two clusters must not make one cluster's row the other's last.
    rows = [{**_event(o, "topic", ["T"], offset, {"topic_name": name}), "cluster_id": cid}
            for cid, o, offset, name in [("d", 1, 20, "d1"), ("c", 1, 11, "c1"), ("d", 0, 10, "d0"),
                                         ("c", 0, 5, "c0"), ("c", 2, 30, "c2")]]
    plan = plan_batch(batch_tables(rows))
    assert sorted((r["cluster_id"], r["valid_from_offset"], r["topic_name"]) for r in plan.rows("topic_history")) == [
        ("c", 5, "c0"), ("c", 11, "c1"), ("c", 30, "c2"), ("d", 10, "d0"), ("d", 20, "d1")]
    assert {r["cluster_id"]: r["topic_name"] for r in plan.rows("topics")} == {"c": "c2", "d": "d1"}


def test_a_batch_of_several_clusters_writes_each_clusters_current_rows_together() -> None:
    # The operator hands a batch over group by group (a cluster's bucket each), each group's ``ord`` from 0: the
    # current rows keep that order, as the history's do, so a reader of one cluster skips the others' pages. Ordered
    # by ``ord`` they came c, d, c, d, … — every page of a fleet's file held every cluster.
    groups = {"c": ["A", "B", "C", "D"], "d": ["E", "F", "G", "H"]}
    rows = [{**_event(o, "topic", [t], 10 + o, {"topic_name": t.lower()}), "cluster_id": cid}
            for cid, topics in groups.items() for o, t in enumerate(topics)]
    plan = plan_batch(batch_tables(rows))
    order = [(r["cluster_id"], r["topic_id"]) for r in plan.rows("topics")]
    assert order == [(cid, t) for cid, topics in groups.items() for t in topics]
    assert order == [(r["cluster_id"], r["topic_id"]) for r in plan.rows("topic_history")]


def test_a_batch_too_large_for_the_packed_ord_is_refused() -> None:
    rows = [_event(1 << 32, "topic", ["T"], 5, {"topic_name": "a"})]
    with pytest.raises(InputError, match="too large to plan"):
        plan_batch(batch_tables(rows))


def test_a_deleted_key_leaves_a_removed_row_that_ends_its_version() -> None:
    plan = plan_batch(batch_tables([_event(0, "broker", [1], 3, None)]))
    assert plan.rows("brokers")[0]["removed"]
    assert [(r["removed"], r["valid_from_offset"]) for r in plan.rows("broker_history")] == [(True, 3)]


def test_every_stored_table_is_its_readers_columns_and_removed() -> None:
    readers, on_disk = table_schemas(), stored_schemas()
    assert readers.keys() == on_disk.keys()
    for name, schema in readers.items():
        extra = on_disk[name].names[len(schema.names):]
        assert on_disk[name].names[:len(schema.names)] == schema.names
        assert extra == (["removed"] if name in VERSIONED else []), name


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
    plan = plan_batch(batch_tables([{"cluster_id": "c", "ord": i, "table": "records", **r}
                                    for i, r in enumerate([row, no_time])]))
    stamps = plan.appends["records"].column("timestamp")
    assert stamps.type == pa.timestamp("us", tz="UTC")
    assert stamps.cast(pa.int64()).to_pylist() == [1_700_000_000_123_000, None]


def test_a_cast_read_batch_shares_no_buffer_with_the_batch_read() -> None:
    """A batch DataFusion hands over is freed only when the last of its columns is: the readers' cast keeps none of
    its buffers — neither a column the cast leaves as it is nor a list's offsets the cast reuses — or the whole batch,
    the string views already copied included, stays alive beside the answer (2 GB at 2 M partitions)."""
    read = pa.record_batch({
        "topic_id": pa.array(["a", "b", None], pa.string_view()),
        "partition_id": pa.array([0, 1, 2], pa.int32()),
        "directories": pa.array([["x"], [], ["y", "z"]], pa.list_(pa.string_view())),
        "replicas": pa.array([[1], [], [2, 3]], pa.list_(pa.int32()))})
    schema = pa.schema([pa.field(f.name, tables_module._plain(f.type), f.nullable) for f in read.schema])
    owned = tables_module._owned(read, schema)

    def addresses(array: pa.Array) -> set[int]:
        found = {b.address for b in array.buffers() if b is not None and b.size}
        return found | (addresses(array.values) if isinstance(array, pa.ListArray) else set())

    assert owned.schema == schema and owned.to_pylist() == read.to_pylist()
    assert not set.union(*map(addresses, owned.columns)) & set.union(*map(addresses, read.columns))
