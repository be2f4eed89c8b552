"""Exactly once across restarts: a job stopped mid-stream — between runs while the log grows, or killed in the middle
of writing a micro-batch's tables — and restarted from its checkpoint leaves tables identical to one uninterrupted
run over the whole log. A run whose driver JVM dies says so in one error, and the next run resumes."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession
from spark_support import assert_tables_match_model, snapshot_tables, step_offsets

import pipelines.streaming.job
from jbod_model.errors import JbodError
from jbod_model.records.entry import group_batches
from jbod_model.simulator.churn import ChurnSpec, churn_log
from jbod_model.simulator.output import append_to_segment, write_metadata_dir
from jbod_model.storage.files import METADATA_PARTITION_DIR, segment_file_name
from pipelines.lakehouse.tables import DeltaRsWriter, TableWriter
from pipelines.streaming.job import run_job
from pipelines.streaming.source import caught_up

SPEC = ChurnSpec(seed=3, operations=50)


def test_restart_while_the_log_grows(spark: SparkSession, tmp_path: Path) -> None:
    entries = churn_log(SPEC)
    batches = list(group_batches(entries))
    first, second, third = batches[: len(batches) // 3], batches[len(batches) // 3: 2 * len(batches) // 3], \
        batches[2 * len(batches) // 3:]
    node = tmp_path / "in" / "node-1"
    write_metadata_dir(node, [e for b in first for e in b], cluster_id="grow")
    segment = node / METADATA_PARTITION_DIR / segment_file_name(0)
    tables, checkpoint = tmp_path / "tables", tmp_path / "checkpoint"

    # Run 1 sees the first third. (A half-written batch at the end is no longer passed over silently by a run
    # without --follow: it is the reader's torn-tail error, or a log_gaps row under --policy skip — see
    # test_bad_input_job.py; with --follow the job waits for the write to finish.)
    run_job([tmp_path / "in"], tables, checkpoint, spark=spark, max_entries_per_batch=20)
    # Run 2: the active segment grew, then a new segment was rolled.
    append_to_segment(segment, [e for b in second for e in b])
    write_segment_at = node / METADATA_PARTITION_DIR / segment_file_name(third[0][0].offset)
    write_segment_at.write_bytes(b"")
    append_to_segment(write_segment_at, [e for b in third for e in b])
    run_job([tmp_path / "in"], tables, checkpoint, spark=spark, max_entries_per_batch=20)
    # Run 3: nothing new — nothing written twice.
    summary = run_job([tmp_path / "in"], tables, checkpoint, spark=spark)
    assert sum(b.rows for b in summary.batches) == 0

    uninterrupted = tmp_path / "tables-once"
    run_job([tmp_path / "in"], uninterrupted, tmp_path / "checkpoint-once", spark=spark)
    assert snapshot_tables(tables) == snapshot_tables(uninterrupted)
    assert_tables_match_model(tables, [node], "grow", step_offsets(entries, limit=15))


class _CrashingWriter:
    """A Delta writer that dies after writing ``after`` tables of micro-batch ``batch`` — once."""

    crashed = False

    def __init__(self, inner: DeltaRsWriter, batch: int, after: int) -> None:
        self.inner, self.batch, self.after = inner, batch, after

    def ensure_tables(self) -> None:
        self.inner.ensure_tables()

    def write_batch(self, batch_id: int, rows: Mapping[str, pa.Table]) -> dict[str, int]:
        if batch_id != self.batch or _CrashingWriter.crashed:
            return self.inner.write_batch(batch_id, rows)
        # Write a few tables for real, then die as if the driver was killed mid-batch.
        plan_tables: list[str] = []
        original = self.inner._append

        def counting_append(name: str, table: Any, bid: int) -> int:
            plan_tables.append(name)
            if len(plan_tables) > self.after:
                _CrashingWriter.crashed = True
                raise RuntimeError("killed mid-batch")
            return original(name, table, bid)

        self.inner._append = counting_append  # type: ignore[method-assign]
        try:
            return self.inner.write_batch(batch_id, rows)
        finally:
            self.inner._append = original  # type: ignore[method-assign]


def test_a_crash_in_the_middle_of_a_batch_writes_nothing_twice(spark: SparkSession, tmp_path: Path) -> None:
    entries = churn_log(SPEC)
    node = write_metadata_dir(tmp_path / "in" / "node-1", entries, cluster_id="crash", records_per_segment=40)
    tables, checkpoint = tmp_path / "tables", tmp_path / "checkpoint"

    def crashing(app_id: str) -> TableWriter:
        return _CrashingWriter(DeltaRsWriter(tables, app_id), batch=2, after=2)

    _CrashingWriter.crashed = False
    with pytest.raises(JbodError, match="killed mid-batch"):
        run_job([tmp_path / "in"], tables, checkpoint, spark=spark, max_entries_per_batch=20,
                writer_factory=crashing)
    assert _CrashingWriter.crashed
    # The write ran behind the stream (pipelines.lakehouse.staging): Spark committed batch 2 before its write
    # failed, so the staged copy is all there is of it; the next run writes it first.
    assert (checkpoint / "commits" / "2").exists()
    assert (checkpoint / "staged" / "2").is_dir()
    run_job([tmp_path / "in"], tables, checkpoint, spark=spark, max_entries_per_batch=20)
    assert not any((checkpoint / "staged").iterdir())

    uninterrupted = tmp_path / "tables-once"
    run_job([tmp_path / "in"], uninterrupted, tmp_path / "checkpoint-once", spark=spark)
    assert snapshot_tables(tables) == snapshot_tables(uninterrupted)
    assert_tables_match_model(tables, [node], "crash", step_offsets(entries, limit=15))


#: A run whose driver JVM is killed once micro-batch 1 is in the tables (the write-behind reports it), in a process
#: of its own: the JVM is that process's.
_KILLED_JVM_RUN = """
import os, signal, sys
from pyspark import SparkContext
from jbod_model.errors import JbodError
from pipelines.streaming.job import run_job

def kill_the_jvm(stats):
    if stats.batch_id == 1:
        os.kill(SparkContext._gateway.proc.pid, signal.SIGKILL)

try:
    run_job([sys.argv[1]], sys.argv[2], sys.argv[3], max_entries_per_batch=20, on_batch=kill_the_jvm)
except JbodError as e:
    print(f"jbod error: {e}")
    sys.exit(2)
print("the run finished")
"""


def test_a_driver_jvm_that_dies_is_one_error_and_the_next_run_resumes(spark: SparkSession, tmp_path: Path) -> None:
    """The driver's JVM stopping under the job (killed here; out of memory it is told to stop, not hang) ends the
    run with one error naming it — no Python stack of the sockets it left — and the next run resumes from the
    checkpoint to the tables of one uninterrupted run."""
    entries = churn_log(SPEC)
    node = write_metadata_dir(tmp_path / "in" / "node-1", entries, cluster_id="jvm", records_per_segment=40)
    tables, checkpoint = tmp_path / "tables", tmp_path / "checkpoint"
    killed = subprocess.run([sys.executable, "-c", _KILLED_JVM_RUN, str(tmp_path / "in"), str(tables),
                             str(checkpoint)], capture_output=True, text=True, timeout=600, check=False)
    assert killed.returncode == 2, killed.stdout + killed.stderr
    assert killed.stdout.strip() == (
        "jbod error: Spark's driver JVM stopped (exit code -9) during the run. What the job wrote stays; the next "
        f"run resumes from its checkpoint. (Spark's own log: {checkpoint.parent / 'spark-driver.log'})")
    assert "Traceback" not in killed.stderr, killed.stderr

    run_job([tmp_path / "in"], tables, checkpoint, spark=spark, max_entries_per_batch=20)
    uninterrupted = tmp_path / "tables-once"
    run_job([tmp_path / "in"], uninterrupted, tmp_path / "checkpoint-once", spark=spark)
    assert snapshot_tables(tables) == snapshot_tables(uninterrupted)
    assert_tables_match_model(tables, [node], "jvm", step_offsets(entries, limit=15))


def test_a_run_with_nothing_new_runs_nothing_on_spark(spark: SparkSession, tmp_path: Path) -> None:
    """A scheduled run over a quiet cluster: the checkpoint's last micro-batch is committed and ends where the log
    ends, so the run plans nothing on Spark (Spark would find no new offsets and stop) and says where the cluster
    stands, as the run before it did. A micro-batch planned but never committed, a new cluster among the inputs or a
    grown log each make it run Spark again."""
    batches = list(group_batches(churn_log(SPEC)))
    node = tmp_path / "in" / "node-1"
    write_metadata_dir(node, [e for b in batches[: len(batches) // 2] for e in b], cluster_id="quiet")
    tables, checkpoint = tmp_path / "tables", tmp_path / "checkpoint"
    first = run_job([tmp_path / "in"], tables, checkpoint, spark=spark)
    assert first.batches and caught_up([tmp_path / "in"], checkpoint)
    with patch.object(pipelines.streaming.job, "register", side_effect=AssertionError("Spark must not run")):
        quiet = run_job([tmp_path / "in"], tables, checkpoint, spark=spark)
    assert quiet.batches == [] and quiet.clusters == first.clusters

    last = max((checkpoint / "commits").iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1)
    kept = last.read_bytes()
    last.unlink()
    assert not caught_up([tmp_path / "in"], checkpoint), "a batch planned but not committed runs again"
    last.write_bytes(kept)
    other = tmp_path / "in" / "node-2"
    write_metadata_dir(other, [e for b in batches[:2] for e in b], cluster_id="other")
    assert not caught_up([tmp_path / "in"], checkpoint), "a new cluster is read"
    shutil.rmtree(other)
    assert caught_up([tmp_path / "in"], checkpoint)

    segment = node / METADATA_PARTITION_DIR / segment_file_name(0)
    append_to_segment(segment, [e for b in batches[len(batches) // 2:] for e in b])
    assert not caught_up([tmp_path / "in"], checkpoint)
    grown = run_job([tmp_path / "in"], tables, checkpoint, spark=spark)
    assert grown.batches
    assert_tables_match_model(tables, [node], "quiet", step_offsets(churn_log(SPEC), limit=10))
