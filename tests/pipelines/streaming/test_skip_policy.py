"""Bad input in the Spark job: a batch whose CRC fails in the middle of a segment. With policy ``skip`` every good
record is kept — the tables equal the model's replay of the log without that batch — and ``log_gaps`` names exactly
the batch's offsets, once (a second run writes nothing); with policy ``fail`` the job stops naming the file and the
offsets, and ``jbod run`` exits with an error."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from unittest.mock import patch

import pytest
from pyspark.sql import SparkSession
from spark_support import assert_same_image
from typer.testing import CliRunner

import pipelines.streaming.job
from jbod_model.errors import JbodError
from jbod_model.image_json import image_to_json
from jbod_model.records.entry import LogEntry
from jbod_model.replay import Replayer
from jbod_model.simulator.churn import ChurnSpec, churn_log
from jbod_model.simulator.output import corrupt_batch, write_metadata_dir
from jbod_model.sources import open_inputs
from jbod_model.storage.files import METADATA_PARTITION_DIR
from jbod_model.storage.log_reader import iter_batches
from pipelines.cli import app
from pipelines.config.profiles import JobConfig
from pipelines.lakehouse.tables import as_of_image, read_table
from pipelines.streaming.job import RunSummary, run_job


def _damaged_log(root: Path) -> tuple[Path, Path, int, int]:
    """A node's metadata dir whose second segment holds, neither first nor last, a batch of several records whose
    CRC fails: the node dir, the segment, the batch's first and last offsets."""
    node = write_metadata_dir(root / "node-1", churn_log(ChurnSpec(seed=5, operations=40)), cluster_id="bad",
                              records_per_segment=20)
    segment = sorted((node / METADATA_PARTITION_DIR).glob("*.log"))[1]
    target = next(b.header for b in list(iter_batches(segment))[1:-1] if b.header.last_offset > b.header.base_offset)
    damaged, first, last = corrupt_batch(node, target.base_offset)
    assert damaged == segment
    return node, segment, first, last


def test_policy_skip_keeps_every_good_record_and_logs_the_gap_once(spark: SparkSession, tmp_path: Path) -> None:
    node, segment, first, last = _damaged_log(tmp_path / "in")
    tables, checkpoint = tmp_path / "tables", tmp_path / "checkpoint"
    # Ranges read in pieces of 4+ offsets by three tasks: cuts fall inside and around the damaged batch.
    summary = run_job([tmp_path / "in"], tables, checkpoint, spark=spark, policy="skip", max_entries_per_batch=25,
                      splits=3, min_split_entries=4)

    # The model's reader with policy skip drops exactly that batch; the tables hold its replay of the rest.
    loaded = open_inputs([node], policy="skip")
    kept = [e for e in loaded.entries if isinstance(e, LogEntry)]
    assert not [e for e in kept if first <= e.offset <= last] and kept[-1].offset > last
    replayer = Replayer(loaded.base_image)
    for e in kept:
        replayer.replay(e)
    assert_same_image(as_of_image(tables, "bad"), image_to_json(replayer.image), "latest")
    assert sorted(r["offset"] for r in read_table(tables, "records").to_pylist()) == [e.offset for e in kept]

    [gap] = read_table(tables, "log_gaps").to_pylist()
    assert (gap["cluster_id"], gap["first_missing_offset"], gap["last_missing_offset"]) == ("bad", first, last)
    assert gap["snapshot_end_offset"] is None and gap["changed_rows"] == 0
    assert f"offsets {first}..{last} could not be read" in gap["message"] and str(segment) in gap["message"]
    # The run's summary shows it (jbod run prints it as "log gap: …").
    [cluster] = summary.clusters
    assert cluster.gaps == [gap["message"]]

    # A second run from the checkpoint has nothing new: the gap is not reported again.
    again = run_job([tmp_path / "in"], tables, checkpoint, spark=spark, policy="skip")
    assert sum(b.rows for b in again.batches) == 0
    assert len(read_table(tables, "log_gaps").to_pylist()) == 1


def test_policy_fail_stops_the_job_naming_the_file_and_the_offsets(spark: SparkSession, tmp_path: Path) -> None:
    _node, segment, first, last = _damaged_log(tmp_path / "in")
    with pytest.raises(JbodError, match=rf"offsets {first}\.\.{last} cannot be read from {segment} at byte \d+"):
        run_job([tmp_path / "in"], tmp_path / "tables", tmp_path / "checkpoint", spark=spark, policy="fail")

    def on_the_shared_session(inputs: list[Path], config: JobConfig, **kw: Any) -> RunSummary:
        # The CLI's own session would be stopped after the run; the tests share one.
        return run_job(inputs, config.tables, tmp_path / "cli-checkpoint", spark=spark, policy=config.read_policy)

    with patch.object(pipelines.streaming.job, "run_with_config", on_the_shared_session):
        result = CliRunner().invoke(app, ["run", "--input", str(tmp_path / "in"), "--tables",
                                          str(tmp_path / "cli-tables"), "--policy", "fail"])
    assert result.exit_code == 3, result.output  # undecodable input, as for the other commands
    assert f"offsets {first}..{last} cannot be read from" in " ".join(result.stderr.split())
