"""``jbod image --tables``: the image read from the Delta tables is the model's image, at the end and as of an
offset (the tables are written once by the job; the CLI only reads them through the Delta log)."""

from __future__ import annotations

import json
from pathlib import Path

from pyspark.sql import SparkSession
from typer.testing import CliRunner

from jbod_model.image_json import image_to_json
from jbod_model.records.entry import LogEntry
from jbod_model.replay import replay_entries
from jbod_model.simulator.churn import ChurnSpec, churn_log
from jbod_model.simulator.output import write_metadata_dir
from pipelines.cli import app
from pipelines.cli.shared import EXIT_INPUT
from pipelines.streaming.job import run_job

runner = CliRunner(env={"COLUMNS": "200"})


def test_image_from_tables_equals_the_model(spark: SparkSession, tmp_path: Path) -> None:
    entries: list[LogEntry] = churn_log(ChurnSpec(seed=3, operations=30))
    root = write_metadata_dir(tmp_path / "in" / "node-1", entries, cluster_id="c1")
    tables = tmp_path / "tables"
    run_job([root], tables, spark=spark, max_entries_per_batch=10)

    latest = runner.invoke(app, ["image", "--tables", str(tables), "--json"])
    assert latest.exit_code == 0, latest.output
    assert json.loads(latest.stdout) == image_to_json(replay_entries(entries))

    middle = entries[len(entries) // 2].offset
    as_of = runner.invoke(app, ["image", "--tables", str(tables), "--cluster", "c1", "--as-of-offset", str(middle),
                                "--json"])
    assert json.loads(as_of.stdout) == image_to_json(replay_entries(e for e in entries if e.offset <= middle))

    replayed = runner.invoke(app, ["image", str(root), "--full-log", "--as-of-offset", str(middle), "--json"])
    assert json.loads(replayed.stdout) == json.loads(as_of.stdout)

    terminal = runner.invoke(app, ["image", "--tables", str(tables)])
    assert terminal.exit_code == 0 and "Brokers" in terminal.stdout
    # The tables' tables as text (their lists read a slice at a time) are the replay's, as of an offset too.
    assert terminal.stdout == runner.invoke(app, ["image", str(root), "--full-log"]).stdout
    assert runner.invoke(app, ["image", "--tables", str(tables), "--as-of-offset", str(middle)]).stdout == (
        runner.invoke(app, ["image", str(root), "--full-log", "--as-of-offset", str(middle)]).stdout)

    both = runner.invoke(app, ["image", str(root), "--tables", str(tables)])
    assert both.exit_code == EXIT_INPUT and "not both" in both.stderr
