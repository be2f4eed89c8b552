"""Maintenance between runs of the job keeps exactly-once: compaction, a forced vacuum and a log clean-up down to
the checkpoint leave every table's rows, the as-of images and the app transactions as they were, and the next run
over the grown log writes nothing twice — its tables equal one uninterrupted run's."""

from __future__ import annotations

from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession
from spark_support import assert_tables_match_model, snapshot_tables, step_offsets
from typer.testing import CliRunner

from jbod_model.simulator.churn import ChurnSpec, churn_log
from jbod_model.simulator.output import append_to_segment, write_metadata_dir
from jbod_model.storage.files import METADATA_PARTITION_DIR, segment_file_name
from pipelines.cli import app
from pipelines.lakehouse.maintenance import discover_tables
from pipelines.lakehouse.tables import as_of_image, table_schemas
from pipelines.streaming.job import query_id, run_job

runner = CliRunner(env={"COLUMNS": "200"})


@pytest.mark.slow
def test_maintenance_between_runs_keeps_the_tables_exactly_once(spark: SparkSession, tmp_path: Path) -> None:
    entries = churn_log(ChurnSpec(seed=5, operations=40))
    half = len(entries) // 2
    while entries[half].batch_base_offset == entries[half - 1].batch_base_offset:
        half += 1  # cut between record batches, as a segment grows
    node = tmp_path / "in" / "node-1"
    write_metadata_dir(node, entries[:half], cluster_id="kept")
    tables, checkpoint = tmp_path / "tables", tmp_path / "checkpoint"
    run_job([tmp_path / "in"], tables, checkpoint, spark=spark, max_entries_per_batch=15)

    offsets = step_offsets(entries[:half], limit=8)
    images = {n: as_of_image(tables, "kept", n) for n in [None, *offsets]}
    rows = snapshot_tables(tables)
    app_id = f"kraft-jbod:{query_id(checkpoint)}"
    marks = {name: DeltaTable(tables / name).transaction_version(app_id) for name in table_schemas()}
    assert max(v for v in marks.values() if v is not None) >= 2  # several micro-batches committed
    files_before = {p.name: len(DeltaTable(p).file_uris()) for p in discover_tables(tables)}
    for path in discover_tables(tables):
        # Expire the log at once, so the clean-up really drops commits and the checkpoint alone must carry the
        # app transactions.
        DeltaTable(path).alter.set_table_properties({"delta.logRetentionDuration": "interval 0 seconds"})

    result = runner.invoke(app, ["maintain", "--tables", str(tables), "--vacuum-retention-hours", "0", "--force",
                                 "--json"])
    assert result.exit_code == 0, result.output
    assert "records" in result.stdout and "partition_history" in result.stdout
    files_after = {p.name: len(DeltaTable(p).file_uris()) for p in discover_tables(tables)}
    assert sum(files_after.values()) < sum(files_before.values())
    assert all(files_after[t] <= max(1, files_before[t]) for t in files_before)
    assert not (tables / "partition_history" / "_delta_log" / "00000000000000000001.json").exists()

    assert snapshot_tables(tables) == rows
    assert {n: as_of_image(tables, "kept", n) for n in images} == images
    assert {name: DeltaTable(tables / name).transaction_version(app_id) for name in table_schemas()} == marks

    # Nothing new: the restarted query finds its batches done.
    assert sum(b.rows for b in run_job([tmp_path / "in"], tables, checkpoint, spark=spark).batches) == 0
    segment = node / METADATA_PARTITION_DIR / segment_file_name(0)
    append_to_segment(segment, entries[half:])
    run_job([tmp_path / "in"], tables, checkpoint, spark=spark, max_entries_per_batch=15)

    once = tmp_path / "tables-once"
    run_job([tmp_path / "in"], once, tmp_path / "checkpoint-once", spark=spark)
    assert snapshot_tables(tables) == snapshot_tables(once)
    assert_tables_match_model(tables, [node], "kept", step_offsets(entries, limit=10))
