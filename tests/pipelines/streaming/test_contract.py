"""The contract of the Spark job: its tables equal the pure model's image and replica view — at the end and as of
any offset — whatever the micro-batch size (1 entry, a few, everything), for every kind of input: generated metadata
log dirs (segments rolled mid-stream), canonical JSONL records, kafka-dump-log text, request streams through the
reference controller, and the real Kafka samples (several clusters in one job, keyed by their meta.properties).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from spark_support import assert_tables_match_model, model_log, step_offsets

from jbod_model.image_json import image_to_json
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import NoOpRecord, PartitionChangeRecord
from jbod_model.replay import Replayer, replay_entries
from jbod_model.simulator.churn import ChurnSpec, churn_log
from jbod_model.simulator.output import write_jsonl_file, write_metadata_dir
from jbod_model.storage.dump_format import dump_file
from jbod_model.uuid import Uuid
from pipelines.lakehouse.tables import as_of_image, clusters, offline_intervals, read_table
from pipelines.streaming.job import run_job
from pipelines.streaming.source import discover

REPO_ROOT = Path(__file__).resolve().parents[3]
SAMPLES = REPO_ROOT.parent / "shared" / "kraft-metadata-samples"
DEMO = REPO_ROOT / "pipelines" / "examples" / "demo-disk-failure.jsonl"

#: A 31-entry cluster: two brokers with two disks each, topics, ISR changes, a transaction written as two batches,
#: a disk failure, fencing, a topic deletion and re-creation.
SMALL = ChurnSpec(brokers=2, dirs_per_broker=2, topics=2, partitions_per_topic=2, replication_factor=2,
                      operations=14, noop_share=0.1, seed=116)
#: 128 entries on three brokers, NoOps included.
MEDIUM = ChurnSpec(seed=1, operations=60)


def _run(spark: SparkSession, inputs: list[Path], tmp: Path, size: int | None, **kw: object) -> Path:
    tables = tmp / f"tables-{size}"
    summary = run_job(inputs, tables, spark=spark, max_entries_per_batch=size, **kw)  # type: ignore[arg-type]
    if size is not None:
        assert len([b for b in summary.batches if b.rows]) >= 2, "the cap must split the stream"
    return tables


@pytest.mark.parametrize(("size", "bulk_read_rows"), [(None, None), (25, None), (25, 1)])
def test_generated_metadata_dir(spark: SparkSession, tmp_path: Path, size: int | None,
                                bulk_read_rows: int | None) -> None:
    """``bulk_read_rows=1``: every batch reads its state whole (Spark's ``MapState.iterator``), as big ones do."""
    entries = churn_log(MEDIUM)
    root = write_metadata_dir(tmp_path / "in" / "node-1", entries, cluster_id="medium", records_per_segment=50)
    # Each micro-batch's range read by three tasks at once (pipelines.streaming.source.split_range).
    tables = _run(spark, [root], tmp_path, size, splits=3, min_split_entries=5, bulk_read_rows=bulk_read_rows)
    assert clusters(tables) == ["medium"]
    assert_tables_match_model(tables, [root], "medium", step_offsets(entries, limit=25))
    # Bronze holds every record once, with its provenance.
    records = read_table(tables, "records").to_pylist()
    assert sorted(r["offset"] for r in records) == [e.offset for e in entries]
    assert all(r["source"].endswith(".log") and r["origin"] == "log" for r in records)


@pytest.mark.slow
def test_one_entry_per_micro_batch(spark: SparkSession, tmp_path: Path) -> None:
    entries = churn_log(SMALL)
    root = write_metadata_dir(tmp_path / "in" / "node-1", entries, cluster_id="small", records_per_segment=10)
    tables = _run(spark, [root], tmp_path, 1)
    assert_tables_match_model(tables, [root], "small", step_offsets(entries))


def test_jsonl_records_and_dump_text(spark: SparkSession, tmp_path: Path) -> None:
    """Two clusters in one job: one as canonical JSONL, one as kafka-dump-log text of its segment."""
    small = churn_log(SMALL)
    jsonl = write_jsonl_file(tmp_path / "in" / "jsonl-cluster.jsonl", small)
    medium = churn_log(MEDIUM)
    node = write_metadata_dir(tmp_path / "seg", medium, cluster_id="x")
    segment = next((node / "__cluster_metadata-0").glob("*.log"))
    dump = tmp_path / "in" / "dump-cluster.txt"
    dump.write_text("\n".join(dump_file(segment)) + "\n", encoding="utf-8")
    tables = _run(spark, [tmp_path / "in"], tmp_path, 20)
    assert clusters(tables) == ["dump-cluster", "jsonl-cluster"]
    assert_tables_match_model(tables, [jsonl], "jsonl-cluster", step_offsets(small, limit=12))
    assert_tables_match_model(tables, [dump], "dump-cluster", step_offsets(medium, limit=12))


@pytest.mark.parametrize("size", [None, 2])
def test_request_stream_through_the_reference_controller(spark: SparkSession, tmp_path: Path,
                                                         size: int | None) -> None:
    """The bundled demo: broker registrations, topics, heartbeats and a disk failure, run by the controller."""
    tables = _run(spark, [DEMO], tmp_path, size)
    _, log = model_log([DEMO])
    assert_tables_match_model(tables, [DEMO], "demo-disk-failure", step_offsets(log))
    responses = read_table(tables, "controller_responses").to_pylist()
    assert len(responses) == sum(1 for line in DEMO.read_text().splitlines() if "_REQUEST" in line)
    written = sorted(r["offset"] for r in read_table(tables, "records").to_pylist() if r["origin"] == "controller")
    assert written == [e.offset for e in log if e.source == "reference-controller"]
    intervals = offline_intervals(tables, "demo-disk-failure")
    assert intervals and {i["reason"] for i in intervals} >= {"DIRECTORY_OFFLINE"}


@pytest.fixture(scope="module")
def samples() -> Path:
    if not SAMPLES.is_dir():
        pytest.skip(f"real Kafka samples not found at {SAMPLES} (expected ../shared beside the repo)")
    return SAMPLES


@pytest.mark.samples
def test_real_samples_all_clusters_in_one_job(spark: SparkSession, tmp_path: Path, samples: Path) -> None:
    tables = _run(spark, [samples], tmp_path, None)
    logs = [c for c in discover([samples]) if c.kind == "log"]
    assert set(clusters(tables)) == {c.cluster_id for c in logs}  # the dump excerpts hold no metadata record
    for ci in logs:
        _, log = model_log(list(ci.paths))
        assert_tables_match_model(tables, list(ci.paths), ci.cluster_id, step_offsets(log, limit=8))


@pytest.mark.samples
@pytest.mark.slow
def test_real_sample_in_capped_micro_batches(spark: SparkSession, tmp_path: Path, samples: Path) -> None:
    """Kafka 4.2's log (51,244 records, ELR, a transaction, topic deletions) in five micro-batches."""
    node = samples / "indus-local-test-rig-kafka4.2" / "kafka-data"
    tables = _run(spark, [node], tmp_path, 11_000)
    _, log = model_log([node])
    assert_tables_match_model(tables, [node], None, step_offsets([e for e in log if e.offset < 200]) +
                              step_offsets(log, limit=10))


def test_a_truncated_log_starts_from_its_snapshot(spark: SparkSession, tmp_path: Path) -> None:
    """Kafka deleted the segments a snapshot covers: the stream starts with the snapshot's records (one step at the
    offset the snapshot stands for), then the log after it."""
    entries = churn_log(MEDIUM)
    probe = write_metadata_dir(tmp_path / "probe", entries, cluster_id="x", records_per_segment=40)
    cut = sorted(int(s.stem) for s in (probe / "__cluster_metadata-0").glob("*.log"))[1]
    node = write_metadata_dir(tmp_path / "in" / "node-1", entries, cluster_id="truncated", records_per_segment=40,
                              snapshot_at=cut)
    for segment in (node / "__cluster_metadata-0").glob("*.log"):
        if int(segment.stem) < cut:
            segment.unlink()
    tables = _run(spark, [node], tmp_path, 25)
    offsets = [o for o in step_offsets(entries, limit=20) if o >= cut - 1]
    assert_tables_match_model(tables, [node], "truncated", offsets)
    snapshot_rows = [r for r in read_table(tables, "records").to_pylist() if r["origin"] == "snapshot"]
    assert snapshot_rows and {r["offset"] for r in snapshot_rows} == {cut - 1}


def test_a_replay_fault_halts_only_its_cluster(spark: SparkSession, tmp_path: Path) -> None:
    """A record the model refuses stops its cluster at the entry before it, names it in replay_faults, and leaves
    the other clusters of the job alone."""
    good = churn_log(SMALL)
    bad = list(churn_log(MEDIUM))
    replayer = Replayer()
    fault_at = None
    for e in bad:
        replayer.replay(e)
        if e.offset > 50 and isinstance(e.record, NoOpRecord) and not replayer.in_transaction:
            fault_at = e.offset
            break
    assert fault_at is not None
    bad[fault_at] = LogEntry(offset=fault_at, record=PartitionChangeRecord(topic_id=Uuid(1, 1), partition_id=0,
                                                                           leader=1),
                             batch_base_offset=fault_at, leader_epoch=1, timestamp=bad[fault_at].timestamp)
    write_metadata_dir(tmp_path / "in" / "good", good, cluster_id="good")
    write_metadata_dir(tmp_path / "in" / "bad", bad, cluster_id="bad")
    tables = _run(spark, [tmp_path / "in"], tmp_path, 25)
    faults = read_table(tables, "replay_faults").to_pylist()
    assert [(f["cluster_id"], f["offset"], f["error"]) for f in faults] == [("bad", fault_at, "ReplayFault")]
    assert "Can't find topic" in faults[0]["message"]
    assert_tables_match_model(tables, [tmp_path / "in" / "good"], "good", [])
    assert as_of_image(tables, "bad") == image_to_json(replay_entries(bad[:fault_at]))
