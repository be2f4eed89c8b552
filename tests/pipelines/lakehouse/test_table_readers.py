"""The readers of pipelines.lakehouse.tables without Spark (tables written by the job's operator and Delta writer, as
in the data-quality tests): plain Arrow types, the log as LogEntry values from the records table (times, aborted
transactions, snapshots, offsets before the start), the cluster checks, and the dir_inventory table (loading,
replacing a node's disks, the join with replica_assignments)."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable
from hypothesis import given
from hypothesis import strategies as st
from test_quality_support import DEMO, SYNTHETIC, write_lakehouse
from typer.testing import CliRunner

from jbod_model.errors import InputError
from jbod_model.image import ClusterImage, MetadataImage
from jbod_model.image_json import image_to_json
from jbod_model.meta_properties import MetaProperties, MetaPropertiesVersion, inventory, to_text
from jbod_model.records.entry import LogEntry
from jbod_model.records.json_codec import dumps_pieces, dumps_without_floats
from jbod_model.records.metadata import (
    AbortTransactionRecord,
    BeginTransactionRecord,
    ConfigRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from jbod_model.replay import replay_entries
from jbod_model.report import DirLocation, build_report
from jbod_model.simulator.churn import churn_log
from jbod_model.stream import load_jsonl
from jbod_model.uuid import Uuid
from jbod_model.whatif import affected_image
from pipelines.cli import app
from pipelines.config.profiles import MaintenanceSettings
from pipelines.lakehouse import tables as lakehouse_tables
from pipelines.lakehouse.maintenance import maintain
from pipelines.lakehouse.tables import (
    DIR_INVENTORY,
    ENTITIES,
    VERSIONED,
    DeltaRsWriter,
    as_of_image,
    as_of_image_sliced,
    dir_inventory_rows,
    directory_paths,
    entity_versions,
    history_table,
    load_dir_inventory,
    log_entries,
    metadata_image,
    read_table,
    replica_assignments_with_paths,
    replicas_per_directory,
    resolve_cluster,
    table_schemas,
)
from pipelines.report import fleet
from pipelines.report.load import load_from_records
from pipelines.report.render import report_to_json

CLUSTER = "JbodDemoCluster0000001"
DEMO_DIRS = Path(__file__).resolve().parents[3] / "pipelines" / "examples" / "demo-log-dirs"


def _log_with_an_aborted_transaction() -> list[LogEntry]:
    """The synthetic log (a committed transaction among its records, batch times) and then a transaction that
    creates a topic and is aborted, each record a batch of its own."""
    log = [e for e in churn_log(SYNTHETIC) if isinstance(e, LogEntry)]
    last = log[-1]
    records = [BeginTransactionRecord(name="t"), TopicRecord(name="never", topic_id=Uuid(7, 7)),
               AbortTransactionRecord(reason="test")]
    return [*log, *(LogEntry(offset=last.offset + i, record=r, batch_base_offset=last.offset + i, leader_epoch=1,
                             timestamp=(last.timestamp or 0) + 1000 * i) for i, r in enumerate(records, start=1))]


def test_readers_hand_out_the_tables_own_types(tmp_path: Path) -> None:
    write_lakehouse(tmp_path, "c", load_jsonl(DEMO), input_kind="jsonl")
    for name in ("records", "partitions", "replica_assignment_history"):
        got = read_table(tmp_path, name)
        assert [f.type for f in got.schema] == [f.type for f in table_schemas()[name]], name
    records = read_table(tmp_path, "records")
    # delta-rs scans strings as string_view: pyarrow has no kernel comparing it with a plain string, nor joins on it.
    assert records.filter(pc.field("type") == "PARTITION_RECORD").num_rows == 5
    partitions = read_table(tmp_path, "partitions", columns=["topic_id", "partition_id"])
    assert partitions.join(pa.table({"topic_id": partitions.column("topic_id").unique()}), "topic_id").num_rows == 5
    directories = read_table(tmp_path, "partitions").column("directories").combine_chunks().flatten()
    assert pc.sum(pc.equal(directories, "Y8UXxSTrSB2pCc9s439Vkw")).as_py() == 3


def test_the_log_read_back_is_the_log_written(tmp_path: Path) -> None:
    log = _log_with_an_aborted_transaction()
    assert any(e.timestamp for e in log)
    write_lakehouse(tmp_path, "c", log, batch_size=17)
    base, entries = log_entries(tmp_path, "c")
    # Every record in offset order, with its batch, epoch and time (ms) — the aborted ones too, in their place.
    assert base is None and list(entries) == log
    from_tables = load_from_records(log_entries(tmp_path, "c")[1])
    replayed = load_from_records(log)
    assert (report_to_json(build_report(from_tables.image, history=from_tables.history))
            == report_to_json(build_report(replayed.image, history=replayed.history)))
    assert image_to_json(from_tables.image) == as_of_image(tmp_path, "c")


def test_as_of_an_offset_inside_a_transaction_leaves_it_pending(tmp_path: Path) -> None:
    log = _log_with_an_aborted_transaction()
    write_lakehouse(tmp_path, "c", log)
    begin = next(e.offset for e in log if isinstance(e.record, BeginTransactionRecord) and e.offset > log[-4].offset)
    for n in (begin, begin + 1, begin + 2, log[0].offset + 20):
        _base, entries = log_entries(tmp_path, "c", n)
        got = list(entries)
        assert got == [e for e in log if e.offset <= n]
        image = replay_entries(got)
        assert image_to_json(image) == image_to_json(replay_entries(e for e in log if e.offset <= n))
        assert image_to_json(image) == as_of_image(tmp_path, "c", n)
    assert "never" not in {t.name for t in replay_entries(log_entries(tmp_path, "c")[1]).topics.by_id.values()}


def test_appended_rows_read_as_the_model_before_and_after_maintain_folds_them(tmp_path: Path) -> None:
    # Small batches: many keys change across batches, so the stored tables hold superseded rows, open-ended
    # versions a later row ends, and removal rows until `jbod maintain` folds them (docs/tables.md "Writes").
    log = [e for e in churn_log(dataclasses.replace(SYNTHETIC, operations=60)) if isinstance(e, LogEntry)]
    write_lakehouse(tmp_path, "c", log, batch_size=5)
    every = sorted({e.offset for e in log})
    offsets = sorted({*every[::4], every[-1]})
    want = {n: image_to_json(replay_entries(e for e in log if e.offset <= n)) for n in offsets}
    names = sorted(VERSIONED)
    before = {name: sorted(map(repr, read_table(tmp_path, name).to_pylist())) for name in names}
    for n in offsets:
        assert as_of_image(tmp_path, "c", n) == want[n], n
    run = maintain(tmp_path, MaintenanceSettings(), only=names)
    assert run.ok and sum(t.rows_folded for t in run.tables) > 0
    assert {name: sorted(map(repr, read_table(tmp_path, name).to_pylist())) for name in names} == before
    for n in offsets:
        assert as_of_image(tmp_path, "c", n) == want[n], n
    assert sum(t.rows_folded for t in maintain(tmp_path, MaintenanceSettings(), only=names).tables) == 0


def test_the_image_written_a_slice_at_a_time_is_the_images_text(tmp_path: Path) -> None:
    # `jbod image --tables --json`: the rows made from the columns a few at a time, with two clusters' rows in the
    # tables, before and after `jbod maintain` folds them.
    log = [e for e in churn_log(dataclasses.replace(SYNTHETIC, operations=40)) if isinstance(e, LogEntry)]
    write_lakehouse(tmp_path, "c", log, batch_size=6)
    write_lakehouse(tmp_path, "d", log[: len(log) // 2], batch_size=9)
    every = sorted({e.offset for e in log})

    def check() -> None:
        for n in (None, every[len(every) // 3], every[-1]):
            want = dumps_without_floats(image_to_json(replay_entries(e for e in log if n is None or e.offset <= n)))
            assert dumps_without_floats(as_of_image(tmp_path, "c", n)) == want, n
            for rows in (1, 5, 10_000):
                assert "".join(dumps_pieces(as_of_image_sliced(tmp_path, "c", n, rows=rows))) == want, (n, rows)
            # What `jbod image --tables --json` writes: the rows' text made by Arrow's kernels.
            assert "".join(dumps_pieces(as_of_image_sliced(tmp_path, "c", n, text=True))) == want, n

    check()
    assert maintain(tmp_path, MaintenanceSettings(), only=sorted(VERSIONED)).ok
    check()


def test_history_tables_read_without_the_view_give_its_rows(tmp_path: Path) -> None:
    # Small batches: open versions a later row ends (offset and time), removal rows (topic deletions), then folded.
    log = [dataclasses.replace(e, timestamp=1_700_000_000_000 + 10 * e.offset)
           for e in churn_log(dataclasses.replace(SYNTHETIC, operations=80)) if isinstance(e, LogEntry)]
    assert any(isinstance(e.record, RemoveTopicRecord) for e in log)
    write_lakehouse(tmp_path, "c", log, batch_size=7)
    histories = sorted(name for name, (_, current) in VERSIONED.items() if not current)

    def same() -> None:
        for name in histories:
            got, view = history_table(tmp_path, name, "c"), read_table(tmp_path, name, "cluster_id = 'c'")
            assert got.schema == view.schema, name
            assert sorted(map(repr, got.to_pylist())) == sorted(map(repr, view.to_pylist())), name
            # A few columns (an interval's end time derived without its start time asked for), one topic's keys.
            entity = VERSIONED[name][0]
            end_time = f"{entity.interval[1]}_time"
            keys = [k for k, _ in entity.key]
            if "topic_id" not in keys:
                continue
            topic = view.column("topic_id")[0].as_py()
            some = history_table(tmp_path, name, "c", [end_time], f"topic_id = '{topic}'")
            wanted = [c for c in view.column_names if c in {*keys, *(f"{c}_offset" for c in entity.interval),
                                                              end_time}]
            assert some.column_names == wanted, name
            expected = view.filter(pc.equal(view.column("topic_id"), topic)).select(wanted)
            assert sorted(map(repr, some.to_pylist())) == sorted(map(repr, expected.to_pylist())), name

    same()
    derived = [r for r in history_table(tmp_path, "replica_assignment_history", "c").to_pylist()
               if r["valid_to_offset"] is not None]
    assert derived and all(r["valid_to_time"] is not None for r in derived)
    assert maintain(tmp_path, MaintenanceSettings(), only=histories).ok
    same()
    with pytest.raises(InputError, match="not a history table"):
        history_table(tmp_path, "partitions", "c")


def _without_supported_features(image: MetadataImage) -> MetadataImage:
    """The replay's image less what no table holds (the brokers' supported feature ranges)."""
    return dataclasses.replace(image, cluster=ClusterImage({
        b: dataclasses.replace(r, supported_features=()) for b, r in image.cluster.brokers.items()}))


@pytest.mark.parametrize("slice_rows", [None, 3])
def test_the_model_image_from_the_tables_is_the_replays(tmp_path: Path, slice_rows: int | None,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # Configs, topic deletions and transactions in the log; small batches leave superseded and removal rows.
    if slice_rows is not None:  # the partitions made Python values a few rows at a time, across many slices
        monkeypatch.setattr(lakehouse_tables, "_IMAGE_SLICE_ROWS", slice_rows)
    spec = dataclasses.replace(SYNTHETIC, operations=80)
    log = [e for e in churn_log(spec) if isinstance(e, LogEntry)]
    assert {type(e.record) for e in log} >= {ConfigRecord, RemoveTopicRecord, BeginTransactionRecord}
    write_lakehouse(tmp_path, "c", log, batch_size=7)
    every = sorted({e.offset for e in log})
    offsets = [*every[::5], every[-1]]

    def check() -> None:
        for n in [None, *offsets]:
            got = metadata_image(tmp_path, "c", n)
            want = replay_entries(e for e in log if n is None or e.offset <= n)
            assert got.same_state(_without_supported_features(want)), n
            assert got.last_offset == want.last_offset, n
            # What `jbod whatif --tables` reads: only the partitions on the disks it fails.
            online = sorted({d for b in want.cluster.brokers.values() for d in b.directories})
            for dirs in (online[:1], online[1::3]):
                part = metadata_image(tmp_path, "c", n, on_directories=dirs)
                assert part.same_state(_without_supported_features(affected_image(want, dirs))), (n, dirs)

    check()
    assert maintain(tmp_path, MaintenanceSettings(), only=sorted(VERSIONED)).ok
    check()

    # A log that starts at a snapshot: its topics and configs are the base of the configurations.
    end = log[len(log) // 2].offset
    before, after = [e for e in log if e.offset < end], [e for e in log if e.offset >= end]
    write_lakehouse(tmp_path / "s", "s", after, snapshot=(replay_entries(before).to_records(), end))
    for n in (end - 1, end + 3, every[-1]):
        want = replay_entries([e for e in log if e.offset <= n])
        assert metadata_image(tmp_path / "s", "s", n).same_state(_without_supported_features(want)), n


def test_a_log_starting_at_a_snapshot_is_read_from_it(tmp_path: Path) -> None:
    log = [e for e in churn_log(SYNTHETIC) if isinstance(e, LogEntry)]
    end = log[len(log) // 2].offset
    before, after = [e for e in log if e.offset < end], [e for e in log if e.offset >= end]
    write_lakehouse(tmp_path, "s", after, snapshot=(replay_entries(before).to_records(), end))
    base, entries = log_entries(tmp_path, "s")
    assert base is not None and base.last_offset == end - 1 and base.same_state(replay_entries(before))
    assert list(entries) == after
    base, entries = log_entries(tmp_path, "s", end - 1)
    assert base is not None and list(entries) == []
    with pytest.raises(InputError, match=f"from the snapshot at offset {end - 1}"):
        log_entries(tmp_path, "s", end - 2)


def test_clusters_are_checked(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="is not a Delta table"):
        resolve_cluster(tmp_path, None)
    DeltaRsWriter(tmp_path, "test").ensure_tables()
    with pytest.raises(InputError, match="holds no cluster yet"):
        resolve_cluster(tmp_path, "c")
    write_lakehouse(tmp_path, "a", load_jsonl(DEMO), input_kind="jsonl")
    write_lakehouse(tmp_path, "b", load_jsonl(DEMO), input_kind="jsonl")
    with pytest.raises(InputError, match=r"cluster 'z' is not in .* \(clusters: a, b\)"):
        resolve_cluster(tmp_path, "z")
    with pytest.raises(InputError, match="holds 2 clusters"):
        log_entries(tmp_path)
    assert resolve_cluster(tmp_path, "b") == "b"


def _disk(root: Path, rel: str, meta: MetaProperties) -> None:
    (root / rel).mkdir(parents=True)
    (root / rel / "meta.properties").write_text(to_text(meta))


def _inventory_rows(tables: Path) -> list[tuple[object, ...]]:
    rows = read_table(tables, DIR_INVENTORY).to_pylist()
    return sorted((r["cluster_id"], r["node_id"] if r["node_id"] is not None else -1, r["path"], r["directory_id"],
                   r["read_from"], tuple((f["severity"], f["message"][:20]) for f in r["findings"])) for r in rows)


def test_loading_an_inventory_replaces_the_nodes_it_covers(tmp_path: Path) -> None:
    tables, disks = tmp_path / "tables", tmp_path / "disks"
    a, b, c, d = (Uuid(1, n) for n in range(1, 5))
    v1 = MetaPropertiesVersion.V1
    _disk(disks / "b1", "mnt/d1", MetaProperties(v1, cluster_id="c1", node_id=1, directory_id=a))
    _disk(disks / "b2", "mnt/d1", MetaProperties(v1, cluster_id="c1", node_id=2, directory_id=b))
    _disk(disks / "b2", "mnt/d2", MetaProperties(v1, cluster_id="c1", node_id=2))  # no directory.id yet
    _disk(disks / "other", "mnt/d1", MetaProperties(v1, cluster_id="c2", node_id=1, directory_id=d))
    load_dir_inventory(tables, inventory([disks / "other"], as_root=True))
    first = inventory([disks / "b1", disks / "b2"], as_root=True)
    assert load_dir_inventory(tables, first, loaded_at_ms=1000) == {"c1": 3}
    rows = _inventory_rows(tables)
    assert [(r[0], r[1], r[2]) for r in rows] == [("c1", 1, "/mnt/d1"), ("c1", 2, "/mnt/d1"), ("c1", 2, "/mnt/d2"),
                                                  ("c2", 1, "/mnt/d1")]
    assert rows[2][5] == (("warning", "No directory.id in /"),) and rows[2][4] == str(disks / "b2" / "mnt" / "d2")

    # The same inventory again: the same rows (one more commit; only loaded_at moves).
    version = DeltaTable(str(tables / DIR_INVENTORY)).version()
    load_dir_inventory(tables, first, loaded_at_ms=2000)
    assert _inventory_rows(tables) == rows and DeltaTable(str(tables / DIR_INVENTORY)).version() == version + 1
    assert {r["loaded_at"].timestamp() for r in read_table(tables, DIR_INVENTORY, "cluster_id = 'c1'").to_pylist()} \
        == {2.0}

    # Broker 2 again, its d1 replaced by a new disk and d2 gone: node 1 and the other cluster stay as they were.
    (disks / "b2" / "mnt" / "d1" / "meta.properties").write_text(
        to_text(MetaProperties(v1, cluster_id="c1", node_id=2, directory_id=c)))
    (disks / "b2" / "mnt" / "d2" / "meta.properties").unlink()
    (disks / "b2" / "mnt" / "d2").rmdir()
    load_dir_inventory(tables, inventory([disks / "b2"], as_root=True), loaded_at_ms=3000)
    current = read_table(tables, DIR_INVENTORY, "retired_at IS NULL").to_pylist()
    assert sorted((r["cluster_id"], r["node_id"], r["path"], r["directory_id"]) for r in current) == [
        ("c1", 1, "/mnt/d1", str(a)), ("c1", 2, "/mnt/d1", str(c)), ("c2", 1, "/mnt/d1", str(d))]
    # The replaced disk's old id and the removed disk are retired, not forgotten: the metadata's history still
    # names the old id (the replicas that went offline on it), so it keeps its path.
    retired = read_table(tables, DIR_INVENTORY, "retired_at IS NOT NULL").to_pylist()
    assert sorted((r["node_id"], r["path"], r["directory_id"], r["retired_at"].timestamp()) for r in retired) == [
        (2, "/mnt/d1", str(b), 3.0), (2, "/mnt/d2", None, 3.0)]
    paths = directory_paths(tables, "c1")
    assert paths is not None
    assert (paths.get(c), paths.get(b)) == (DirLocation(2, "/mnt/d1"), DirLocation(2, "/mnt/d1"))
    assert [(r.node_id, r.path) for r in dir_inventory_rows(tables, "c1") or []] == [(1, "/mnt/d1"), (2, "/mnt/d1")]
    # Loading it again retires nothing more and keeps the retirement time; the old disk coming back is current.
    load_dir_inventory(tables, inventory([disks / "b2"], as_root=True), loaded_at_ms=4000)
    assert {r["retired_at"].timestamp() for r in read_table(tables, DIR_INVENTORY, "retired_at IS NOT NULL")
            .to_pylist()} == {3.0}
    (disks / "b2" / "mnt" / "d1" / "meta.properties").write_text(
        to_text(MetaProperties(v1, cluster_id="c1", node_id=2, directory_id=b)))
    load_dir_inventory(tables, inventory([disks / "b2"], as_root=True), loaded_at_ms=5000)
    back = read_table(tables, DIR_INVENTORY, f"directory_id = '{b}'").to_pylist()
    assert [r["retired_at"] for r in back] == [None]
    assert directory_paths(tables, "c3") is None and directory_paths(tmp_path / "none", "c1") is None


def test_version_0_files_need_a_cluster_and_may_lack_a_node(tmp_path: Path) -> None:
    tables, disks = tmp_path / "tables", tmp_path / "disks"
    _disk(disks, "old", MetaProperties(MetaPropertiesVersion.V0, directory_id=Uuid(2, 2)))
    inv = inventory([disks])
    with pytest.raises(InputError, match=r"no cluster\.id .* --cluster-id"):
        load_dir_inventory(tables, inv)
    assert load_dir_inventory(tables, inv, cluster_id="legacy") == {"legacy": 1}
    load_dir_inventory(tables, inv, cluster_id="legacy")  # the null node id keys the row too: no duplicate
    rows = read_table(tables, DIR_INVENTORY).to_pylist()
    assert [(r["cluster_id"], r["node_id"], r["path"]) for r in rows] == [("legacy", None, str(disks / "old"))]


def test_replica_assignments_joined_with_the_inventory(tmp_path: Path) -> None:
    write_lakehouse(tmp_path, CLUSTER, load_jsonl(DEMO), input_kind="jsonl")
    # Brokers 1 and 2 only: broker 3's replicas have no path.
    load_dir_inventory(tmp_path, inventory([DEMO_DIRS / "broker-1", DEMO_DIRS / "broker-2"], as_root=True))
    rows = replica_assignments_with_paths(tmp_path).to_pylist()
    assert len(rows) == 15
    assert {(r["broker_id"], r["node_id"], r["path"]) for r in rows} == {
        (1, 1, "/mnt/d1"), (1, 1, "/mnt/d2"), (2, 2, "/mnt/d1"), (2, 2, "/mnt/d2"), (3, None, None)}
    assert {r["path"] for r in rows if r["offline"]} == {"/mnt/d1"}
    as_of = replica_assignments_with_paths(tmp_path, CLUSTER, as_of_offset=20).to_pylist()
    assert {r["valid_from_offset"] <= 20 for r in as_of} == {True}
    placed = {(r["topic_id"], r["partition_id"], r["broker_id"]): r["path"] for r in as_of}
    assert any(p is None for p in placed.values()) and any(p is not None for p in placed.values())


def _per_directory(rows: pa.Table) -> list[tuple[object, ...]]:
    """Replica rows counted per broker and directory, in Python: what ``replicas_per_directory`` must give."""
    counts: dict[tuple[object, ...], list[int]] = {}
    for r in rows.to_pylist():
        count = counts.setdefault((r["broker_id"], r["directory"], r["path"], r["node_id"]), [0, 0])
        count[0] += 1
        count[1] += int(r["offline"])
    return sorted(((b, d, n, off, p, node) for (b, d, p, node), (n, off) in counts.items()), key=repr)


@pytest.mark.parametrize("folded", [False, True])
@pytest.mark.parametrize("log", ["demo", "churn"])
def test_replicas_per_directory_are_the_replica_rows_counted(tmp_path: Path, log: str, folded: bool) -> None:
    """The engine's counts per broker and disk (notebook 01 plots them instead of reading millions of replicas) are
    the replica rows' own, now and as of any offset, before and after ``jbod maintain`` folds the stored rows; a
    limited read gives that many of the rows."""
    if log == "demo":  # its disks are in the inventory: paths, and offline replicas at the end
        cluster, entries = CLUSTER, load_jsonl(DEMO)
        write_lakehouse(tmp_path, cluster, entries, input_kind="jsonl")
    else:  # many directories and offsets, replicas offline on the way
        cluster, entries = "c", [e for e in churn_log(SYNTHETIC) if isinstance(e, LogEntry)]
        write_lakehouse(tmp_path, cluster, entries)
    load_dir_inventory(tmp_path, inventory([DEMO_DIRS / "broker-1", DEMO_DIRS / "broker-2"], as_root=True),
                       cluster_id=cluster)
    if folded:
        assert maintain(tmp_path, MaintenanceSettings(), only=sorted(VERSIONED)).ok
    last = max(e.offset for e in entries if e.offset is not None)
    seen: list[tuple[object, ...]] = []
    for offset in [None, *range(0, last + 1, max(1, last // 9))]:
        counted = replicas_per_directory(tmp_path, cluster, offset)
        got = sorted(zip(*(counted.column(c).to_pylist()
                           for c in ("broker_id", "directory", "replicas", "offline", "path", "node_id")),
                         strict=True), key=repr)
        assert got == _per_directory(replica_assignments_with_paths(tmp_path, cluster, offset)), offset
        keys = list(zip(counted.column("broker_id").to_pylist(), counted.column("directory").to_pylist(), strict=True))
        assert keys == sorted(keys, key=lambda k: (k[0], k[1] is None, k[1] or "")), "by broker, then directory"
        seen += got
    assert any(offline for _, _, _, offline, _, _ in seen), "some replicas offline on the way"
    assert log == "churn" or any(path for _, _, _, _, path, _ in seen), "the demo's disks have paths"
    every = replica_assignments_with_paths(tmp_path, cluster)
    some = replica_assignments_with_paths(tmp_path, cluster, limit=5)
    assert some.schema == every.schema and some.num_rows == 5
    assert all(r in every.to_pylist() for r in some.to_pylist())


def test_times_survive_the_round_trip_to_microseconds(tmp_path: Path) -> None:
    log = [dataclasses.replace(e, timestamp=1_700_000_000_000 + 7 * e.offset)
           for e in churn_log(SYNTHETIC) if isinstance(e, LogEntry)]
    write_lakehouse(tmp_path, "c", log)
    stamps = read_table(tmp_path, "records", columns=["offset", "timestamp"]).to_pylist()
    assert {r["timestamp"].timestamp() for r in stamps if r["offset"] == 0} == {1_700_000_000.0}
    assert [e.timestamp for e in log_entries(tmp_path, "c")[1]] == [e.timestamp for e in log]


def test_history_versions_come_ordered_by_key_then_start(tmp_path: Path) -> None:
    """The readers that index versions by key (``pipelines.report.load.TablePartitions``) rely on this order: the
    text key (a topic id) as text sorts, then the numbers, then the start."""
    log = [e for e in churn_log(dataclasses.replace(SYNTHETIC, operations=80)) if isinstance(e, LogEntry)]
    write_lakehouse(tmp_path, "c", log, batch_size=7)
    for name in ("partition", "replica"):
        rows = entity_versions(tmp_path, ENTITIES[name], "c", None, [])
        keys = [*(k for k, _ in ENTITIES[name].key), "start"]
        got = list(zip(*(rows.column(k).to_pylist() for k in keys), strict=True))
        # Written in the log's order, not sorted: several topics, created in another order than their ids sort.
        topics = [t for t, *_ in got]
        assert got == sorted(got) and len(set(topics)) > 2, name
        firsts = {r.topic_id: e.offset for e in reversed(log) if isinstance(r := e.record, TopicRecord)}
        assert sorted(firsts, key=str) != sorted(firsts, key=firsts.__getitem__), name


def test_a_large_table_is_read_a_range_of_topics_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Above PIECE_STORED_ROWS stored rows the keys' newest rows are read a range of topic ids at a time: the
    same image, latest and as of any offset, as one read of the whole table."""
    from pipelines.lakehouse import tables

    log = [e for e in churn_log(dataclasses.replace(SYNTHETIC, operations=80)) if isinstance(e, LogEntry)]
    write_lakehouse(tmp_path, "c", log, batch_size=7)
    every = sorted({e.offset for e in log})
    offsets = [None, *every[::9], every[-1]]
    whole = {n: as_of_image(tmp_path, "c", n) for n in offsets}
    pieces: list[int] = []
    ranges = tables._key_ranges

    def counted(*args: object) -> list[object]:
        found = ranges(*args)  # type: ignore[arg-type]
        pieces.append(len(found))
        return found  # type: ignore[return-value]

    monkeypatch.setattr(tables, "PIECE_STORED_ROWS", 3)
    monkeypatch.setattr(tables, "_key_ranges", counted)
    for n in offsets:
        assert as_of_image(tmp_path, "c", n) == whole[n], n
    assert max(pieces) >= 3  # the partitions and replicas came a topic range at a time


def test_a_small_cluster_of_a_large_fleet_table_is_read_in_one_piece(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The ranges count the cluster's own stored rows, not the table's: a fleet's table holds every cluster's, and a
    small cluster's read cut into ranges read the whole table once a range. A large cluster beside it is still cut;
    both images are the whole reads'."""
    from pipelines.lakehouse import tables

    log = [e for e in churn_log(dataclasses.replace(SYNTHETIC, operations=80)) if isinstance(e, LogEntry)]
    write_lakehouse(tmp_path, "big", log, batch_size=7)
    write_lakehouse(tmp_path, "small", load_jsonl(DEMO), input_kind="jsonl")
    whole = {c: as_of_image(tmp_path, c) for c in ("big", "small")}
    stored = DeltaTable(str(tmp_path / "partitions"))
    own = {c: pa.table(tables._engine().register("t", stored).execute(
        f"SELECT COUNT(*) AS n FROM t WHERE cluster_id = '{c}'")).column("n")[0].as_py() for c in ("big", "small")}
    assert 0 < own["small"] < own["big"]
    monkeypatch.setattr(tables, "PIECE_STORED_ROWS", own["small"])
    assert len(tables._key_ranges(stored, "topic_id", "cluster_id = 'small'")) == 1
    assert len(tables._key_ranges(stored, "topic_id", "cluster_id = 'big'")) > 1
    assert {c: as_of_image(tmp_path, c) for c in ("big", "small")} == whole


def test_a_named_cluster_is_looked_for_not_listed_with_every_other(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A fleet's cluster report resolves its cluster in several readers: listing every cluster of shared files each
    time read every record's cluster id. A named cluster that is there is found alone; one that is not is still
    refused with the list."""
    from pipelines.lakehouse import tables

    write_lakehouse(tmp_path, "a", load_jsonl(DEMO), input_kind="jsonl")
    write_lakehouse(tmp_path, "b", load_jsonl(DEMO), input_kind="jsonl")
    listed: list[str] = []
    every = tables.clusters

    def listing(tables_dir: Path) -> list[str]:
        listed.append(str(tables_dir))
        return every(tables_dir)

    monkeypatch.setattr(tables, "clusters", listing)
    assert resolve_cluster(tmp_path, "b") == "b"
    assert as_of_image(tmp_path, "a") == as_of_image(tmp_path, "b")
    assert listed == []
    with pytest.raises(InputError, match=r"cluster 'z' is not in .* \(clusters: a, b\)"):
        resolve_cluster(tmp_path, "z")
    assert listed == [str(tmp_path)]


def test_a_process_sharing_the_cores_plans_each_scan_in_one_partition(tmp_path: Path) -> None:
    """``scan_partitions(1)`` (a fleet's worker, the check's two processes) reaches DataFusion's plan: an aggregate
    runs in one partition, where two partitions spread the scan's batches and hash the groups between them; the
    answers are the same, the process's setting is back after the block, and a scan is never planned in no
    partition."""
    log = [e for e in churn_log(dataclasses.replace(SYNTHETIC, operations=40)) if isinstance(e, LogEntry)]
    write_lakehouse(tmp_path, "c", log, batch_size=7)
    stored = DeltaTable(str(tmp_path / "records"))

    def plan() -> str:
        explained = pa.table(lakehouse_tables._engine().register("t", stored).execute(
            "EXPLAIN SELECT type, COUNT(*) AS n FROM t WHERE cluster_id = 'c' GROUP BY type"))
        return "\n".join(explained.column("plan").to_pylist())

    whole = as_of_image(tmp_path, "c")
    with lakehouse_tables.scan_partitions(2):
        assert "RepartitionExec: partitioning=Hash([type@0], 2)" in plan()
        with lakehouse_tables.scan_partitions(1):
            assert lakehouse_tables.engine_settings()["datafusion.execution.target_partitions"] == "1"
            assert "RepartitionExec" not in plan()
            assert "AggregateExec: mode=Single" in plan()
            assert as_of_image(tmp_path, "c") == whole
        assert "RepartitionExec: partitioning=Hash([type@0], 2)" in plan()
    assert lakehouse_tables.engine_settings() == dict(lakehouse_tables._ENGINE_SETTINGS)
    with pytest.raises(ValueError, match="at least one partition"):
        lakehouse_tables.set_scan_partitions(0)


def _counting_opens(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The table folders the readers open from now on, one entry per Delta log read (``DeltaTable(path)``)."""
    opened: list[str] = []

    class Counting(DeltaTable):
        def __init__(self, table_uri: str, *args: object, **kwargs: object) -> None:
            opened.append(Path(table_uri).name)
            super().__init__(table_uri, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(lakehouse_tables, "DeltaTable", Counting)
    return opened


def test_reads_in_a_one_version_block_see_each_table_as_the_block_first_opened_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside ``one_version()`` each table's Delta log is read once, and every read answers from that version:
    cluster b, appended by another writer during the block, is not there until the block ends."""
    log = [e for e in churn_log(dataclasses.replace(SYNTHETIC, operations=30)) if isinstance(e, LogEntry)]
    write_lakehouse(tmp_path, "a", log, batch_size=11)
    opened = _counting_opens(monkeypatch)
    with lakehouse_tables.one_version():
        assert lakehouse_tables.clusters(tmp_path) == ["a"]
        image = as_of_image(tmp_path, "a")
        assert opened.count("records") == 1 and len(opened) == len(set(opened)), opened
        write_lakehouse(tmp_path, "b", log)  # another writer (its own opens are not the readers')
        written = len(opened)
        with lakehouse_tables.one_version():  # a nested block reads the outer block's versions
            assert lakehouse_tables.clusters(tmp_path) == ["a"]
        assert as_of_image(tmp_path, "a") == image
        assert len(opened) == written, opened[written:]
    assert lakehouse_tables.clusters(tmp_path) == ["a", "b"]
    assert opened[written:] == ["records"]


def test_a_table_written_in_a_one_version_block_is_read_at_its_new_version(tmp_path: Path) -> None:
    """A write through this module's writers (a ``dir_inventory`` load) is read back inside the block that held
    the table's earlier version."""
    tables, disks = tmp_path / "tables", tmp_path / "disks"
    v1 = MetaPropertiesVersion.V1
    _disk(disks / "b1", "mnt/d1", MetaProperties(v1, cluster_id="c1", node_id=1, directory_id=Uuid(1, 1)))
    load_dir_inventory(tables, inventory([disks / "b1"], as_root=True))
    with lakehouse_tables.one_version():
        assert [r.path for r in dir_inventory_rows(tables, "c1") or []] == ["/mnt/d1"]
        _disk(disks / "b1", "mnt/d2", MetaProperties(v1, cluster_id="c1", node_id=1, directory_id=Uuid(1, 2)))
        load_dir_inventory(tables, inventory([disks / "b1"], as_root=True))
        assert [r.path for r in dir_inventory_rows(tables, "c1") or []] == ["/mnt/d1", "/mnt/d2"]


@pytest.mark.parametrize("command", ["report", "image", "whatif"])
def test_the_commands_over_the_tables_read_each_table_at_one_version(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str) -> None:
    """``jbod report|image|whatif --tables``: their queries (the report's two dozen, twelve of them on ``records``)
    open each table's Delta log once, and the answer is the one each read opening its table gives."""
    log = [e for e in churn_log(dataclasses.replace(SYNTHETIC, operations=30)) if isinstance(e, LogEntry)]
    write_lakehouse(tmp_path, "a", log, batch_size=11)
    args = [command, "--tables", str(tmp_path), "--json"]
    if command == "whatif":
        args += ["--fail-dir", str(read_table(tmp_path, "brokers").column("log_dirs").combine_chunks().flatten()[0])]
    runner = CliRunner()
    with monkeypatch.context() as every_read_opens:
        every_read_opens.setattr(lakehouse_tables, "one_version", contextlib.nullcontext)
        each_read = runner.invoke(app, args)
    opened = _counting_opens(monkeypatch)
    once = runner.invoke(app, args)
    assert once.exit_code == 0 and json.loads(once.stdout) == json.loads(each_read.stdout), once.output
    assert opened.count("records") == 1 and len(opened) == len(set(opened)), opened


def test_a_fleet_worker_opens_each_table_once_for_all_its_clusters(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A fleet report's worker (``_start_worker``) holds the versions its first reads open: its second cluster's
    report reads no Delta log again, and each report is the cluster's own."""
    log = [e for e in churn_log(dataclasses.replace(SYNTHETIC, operations=30)) if isinstance(e, LogEntry)]
    write_lakehouse(tmp_path, "a", log, batch_size=11)
    write_lakehouse(tmp_path, "b", log[:len(log) // 2], batch_size=11)
    job = fleet.FleetJob(tmp_path, None, None, None, "json", tmp_path)
    alone = [json.loads(fleet.report_cluster(job, c, i).kept.read_text()) for i, c in enumerate("ab")]  # type: ignore[union-attr]
    monkeypatch.setattr(lakehouse_tables, "_held", None)  # the worker's settings end with the test
    monkeypatch.setattr(lakehouse_tables, "_scan_partitions", None)
    opened = _counting_opens(monkeypatch)
    fleet._start_worker()
    first = fleet.report_cluster(job, "a", 2)
    after_first = len(opened)
    second = fleet.report_cluster(job, "b", 3)
    assert len(opened) == after_first and opened.count("records") == 1, opened
    assert [json.loads(o.kept.read_text()) for o in (first, second)] == alone  # type: ignore[union-attr]
    monkeypatch.setattr(lakehouse_tables, "_held", None)
    del opened[:]
    with fleet.fleet_report(tmp_path, ["a", "b"], as_of=None, explicit=None, html=None, keep="json", jobs=1) as one:
        kept = {o.cluster: json.loads(o.kept.read_text()) for o in one.reported}  # type: ignore[union-attr]
    assert [kept["a"], kept["b"]] == alone
    assert opened.count("records") == 1, opened  # the fleet in this process: one version for both clusters


_KEYS = st.lists(st.tuples(st.integers(0, 5), st.integers(-3, 3)), min_size=1, max_size=40)


@given(rows=_KEYS, starts=st.data(), wide=st.booleans())
def test_the_packed_sort_is_the_stable_sort_by_key_then_start(rows: list[tuple[int, int]], starts: st.DataObject,
                                                              wide: bool) -> None:
    """``_packed_order`` against Python's stable sort: the order of the rows by key, then start, and in that order a
    packed key that changes exactly where the key does — with the start packed in, and with a start too wide for it
    (the two-sort way)."""
    from pipelines.lakehouse import tables

    bound = (1 << 61) if wide else 50
    start = starts.draw(st.lists(st.integers(-bound, bound), min_size=len(rows), max_size=len(rows)))
    keys = {"a": pa.array([a for a, _ in rows], pa.int32()), "b": pa.array([b for _, b in rows], pa.int64())}
    result = tables._packed_order(keys, pa.array(start, pa.int64()))
    assert result is not None
    order, packed = result
    expected = sorted(range(len(rows)), key=lambda i: (rows[i], start[i]))
    assert order.to_pylist() == expected
    ordered_keys = [rows[i] for i in expected]
    assert [bool(x) for x in packed[1:] != packed[:-1]] == [p != q for p, q in itertools.pairwise(ordered_keys)]


def test_keys_that_do_not_pack_are_sorted_by_arrow_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the keys cannot be packed into one integer (a null, spans past 63 bits) the readers sort with Arrow:
    the same images and history rows as the packed sort's."""
    from pipelines.lakehouse import tables

    log = [e for e in churn_log(dataclasses.replace(SYNTHETIC, operations=60)) if isinstance(e, LogEntry)]
    write_lakehouse(tmp_path, "c", log, batch_size=7)
    every = sorted({e.offset for e in log})
    offsets = [None, *every[::11], every[-1]]

    def read() -> tuple[object, ...]:
        return (*(as_of_image(tmp_path, "c", n) for n in offsets),
                *(history_table(tmp_path, t, "c").to_pylist() for t in ("partition_history",
                                                                        "replica_assignment_history")))

    packed = read()
    monkeypatch.setattr(tables, "_packed_order", lambda keys, start: None)
    assert read() == packed


@pytest.mark.parametrize("packed", [True, False])
def test_history_texts_read_encoded_are_the_same_rows_in_the_same_order(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, packed: bool) -> None:
    """A history's text columns read dictionary-encoded batch by batch (``encoded``; what ``jbod check`` reads the
    21 M replica versions of a 2 M-partition cluster with) are the plain read's rows, in its order — topics sorted by
    their text, not by when a batch first met them — with the packed sort and with Arrow's."""
    from pipelines.lakehouse import tables

    log = [e for e in churn_log(dataclasses.replace(SYNTHETIC, operations=80)) if isinstance(e, LogEntry)]
    write_lakehouse(tmp_path, "c", log, batch_size=7)
    if not packed:
        monkeypatch.setattr(tables, "_packed_order", lambda keys, start: None)
    batches: list[int] = []
    owned = tables._owned

    def counted(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
        batches.append(batch.num_rows)
        return owned(batch, schema)
    monkeypatch.setattr(tables, "_owned", counted)
    for name, texts in (("replica_assignment_history", ("topic_id", "topic_name", "directory")),
                        ("partition_history", ("topic_id", "topic_name")),
                        ("offline_replicas", ("topic_id", "directory"))):
        plain = history_table(tmp_path, name, "c")
        batches.clear()
        encoded = history_table(tmp_path, name, "c", encoded=texts)
        assert all(pa.types.is_dictionary(encoded.schema.field(t).type) for t in texts), name
        assert len(batches) > 1, "several batches, each encoded as it came, one dictionary over them"
        decoded = pa.table({c: encoded.column(c).cast(plain.schema.field(c).type) for c in plain.column_names})
        assert decoded.to_pylist() == plain.to_pylist(), name
        assert len(set(plain.column("topic_id").to_pylist())) > 2
