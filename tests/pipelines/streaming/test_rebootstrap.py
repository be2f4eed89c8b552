"""Re-bootstrap: the job was stopped longer than Kafka's metadata retention — Kafka wrote a newer snapshot and deleted
the segments the job had not read — so on restart it loads that snapshot over its state (as a Kafka follower that
fell behind the log's start does) and goes on from the snapshot's end. The tables then hold a fresh replay of the
snapshot plus the tail, the keys the snapshot lacks are closed at its offset, and ``log_gaps`` names the offsets
never read."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from spark_support import assert_same_image, assert_tables_match_model, step_offsets

from jbod_model.image_json import image_to_json
from jbod_model.records.entry import LogEntry
from jbod_model.replay import Replayer, replay_entries
from jbod_model.replicas import replica_view
from jbod_model.simulator.churn import ChurnSpec, churn_log
from jbod_model.simulator.output import write_metadata_dir
from jbod_model.storage.files import METADATA_PARTITION_DIR
from pipelines.lakehouse.tables import as_of_image, offline_intervals, read_table
from pipelines.quality import run_checks
from pipelines.streaming.job import run_job

PER_SEGMENT = 20


def _offline(entries: list[LogEntry]) -> dict[tuple[str, int, int], tuple[object, ...]]:
    """The offline replicas after ``entries``, with what an offline interval is kept for (directory, state, why)."""
    return {(str(r.topic_id), r.partition_id, r.broker_id): (r.directory, r.directory_state, r.offline_reason)
            for r in replica_view(replay_entries(entries)) if r.offline}


def _ended(before: dict[Any, Any], after: dict[Any, Any]) -> set[Any]:
    """The offline intervals that end between two states: back online, gone, or offline otherwise."""
    return {k for k, v in before.items() if after.get(k) != v}


def _scenario() -> tuple[list[LogEntry], int, int]:
    """A generated log and two segment bases ``first_end < snapshot_at``: the first run reads up to ``first_end``;
    between them topics are deleted and offline replicas come back (so the re-bootstrap has something to close),
    no metadata transaction is open at ``snapshot_at`` (Kafka snapshots committed state), and a tail follows."""
    for seed in (3, 1, 5, 7, 11):
        entries = churn_log(ChurnSpec(seed=seed, operations=80))
        with tempfile.TemporaryDirectory() as probe:
            part = write_metadata_dir(probe, entries, cluster_id="p", records_per_segment=PER_SEGMENT) \
                / METADATA_PARTITION_DIR
            bases = sorted(int(p.stem) for p in part.glob("*.log"))
        replayer, committed = Replayer(), set()
        for e in entries:
            replayer.replay(e)
            if not replayer.in_transaction:
                committed.add(e.offset + 1)
        for first_end in bases[1:]:
            for snapshot_at in (b for b in bases if first_end < b < len(entries) - 5 and b in committed):
                before, after = replay_entries(entries[:first_end]), replay_entries(entries[:snapshot_at])
                if (set(before.topics.by_id) - set(after.topics.by_id)
                        and _ended(_offline(entries[:first_end]), _offline(entries[:snapshot_at]))):
                    return entries, first_end, snapshot_at
    raise AssertionError("no generated log deletes a topic and ends an offline interval between two segments")


def test_a_job_stopped_past_retention_re_bootstraps_from_the_snapshot(spark: SparkSession, tmp_path: Path) -> None:
    entries, first_end, snap = _scenario()
    node = tmp_path / "in" / "node-1"
    tables, checkpoint = tmp_path / "tables", tmp_path / "checkpoint"
    write_metadata_dir(node, entries[:first_end], cluster_id="gap", records_per_segment=PER_SEGMENT)
    part = node / METADATA_PARTITION_DIR
    run_job([tmp_path / "in"], tables, checkpoint, spark=spark)
    before = replay_entries(entries[:first_end])

    # The cluster goes on while the job is stopped; Kafka writes a snapshot and its retention deletes the segments
    # before it (rewriting the whole dir gives the same first segments: same entries, same rolling).
    write_metadata_dir(node, entries, cluster_id="gap", records_per_segment=PER_SEGMENT, snapshot_at=snap)
    for segment in part.glob("*.log"):
        if int(segment.stem) < snap:
            segment.unlink()
    assert min(int(p.stem) for p in part.glob("*.log")) == snap
    snapshot = replay_entries(entries[:snap])
    removed_topics = {str(t) for t in set(before.topics.by_id) - set(snapshot.topics.by_id)}
    offline_ended = _ended(_offline(entries[:first_end]), _offline(entries[:snap]))

    summary = run_job([tmp_path / "in"], tables, checkpoint, spark=spark, max_entries_per_batch=20)
    # The run's summary tells the operator (jbod run prints these as "log gap: …").
    [cluster] = summary.clusters
    assert len(cluster.gaps) == 1 and str(first_end) in cluster.gaps[0]

    # From the snapshot on, the tables are a fresh replay of the snapshot plus the tail (the model reads the
    # latest snapshot and the log after it) …
    tail = [e for e in entries if e.offset >= snap]
    assert_tables_match_model(tables, [node], "gap", [snap - 1, *step_offsets(tail, limit=10)])
    # … and before the gap they still hold what the first run replayed.
    for n in (first_end // 3, first_end - 1):
        assert_same_image(as_of_image(tables, "gap", n), image_to_json(replay_entries(entries[: n + 1])),
                          f"as of offset {n}")

    [gap] = read_table(tables, "log_gaps").to_pylist()
    assert (gap["cluster_id"], gap["first_missing_offset"], gap["last_missing_offset"],
            gap["snapshot_end_offset"]) == ("gap", first_end, snap - 1, snap)
    assert gap["snapshot_source"].endswith(".checkpoint") and gap["changed_rows"] > 0
    # What the snapshot no longer holds is closed at the re-bootstrap offset: deleted topics, ended offline
    # intervals.
    topics = read_table(tables, "topic_history").to_pylist()
    assert {r["topic_id"] for r in topics if r["valid_to_offset"] == snap - 1} >= removed_topics
    assert all(r["valid_to_offset"] == snap - 1 for r in topics if r["topic_id"] in removed_topics)
    ended = {(r["topic_id"], r["partition_id"], r["broker_id"]) for r in offline_intervals(tables, "gap")
             if r["end_offset"] == snap - 1}
    assert ended == offline_ended
    records = read_table(tables, "records").to_pylist()
    assert not [r for r in records if first_end <= r["offset"] < snap - 1]  # never read
    assert {r["origin"] for r in records if r["offset"] == snap - 1} == {"snapshot"}

    # Nothing new: nothing written twice.
    summary = run_job([tmp_path / "in"], tables, checkpoint, spark=spark)
    assert sum(b.rows for b in summary.batches) == 0
    # The data-quality step checks restart at the re-bootstrap snapshot instead of stopping at the gap.
    run = run_checks(tables, cluster="gap", suites=("log",), docs=False)
    logged = [r for r in run.results if r.suite == "log"]
    assert logged and all(r.status in ("passed", "skipped") for r in logged), [(r.expectation, r.note) for r in logged]
    notes = {r.note for r in logged if r.status == "passed"}
    assert any("restarted at 1 re-bootstrap snapshot(s)" in (n or "") for n in notes), notes
    assert not any("stopped there" in (n or "") for n in notes), notes
