"""``jbod run``: a thin caller of the Spark job — arguments resolved through the profile, the job called once, the
summary printed. The Spark boundary is patched here; tests/spark runs the job itself."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from unittest.mock import patch

from typer.testing import CliRunner

import pipelines.job
from pipelines.cli import app
from pipelines.config import JobConfig
from pipelines.job import DEMO_INPUT, ClusterSummary, RunSummary

runner = CliRunner(env={"COLUMNS": "200"})


def _summary(tables: Path) -> RunSummary:
    cluster = ClusterSummary(cluster_id="demo", last_offset=32, metadata_version="3.9-IV0", brokers=3, topics=2,
                             partitions=5, replicas=15, offline_by_broker_dir={2: {"Y8UXxSTrSB2pCc9s439Vkw": 3}},
                             offline_reasons={"DIRECTORY_OFFLINE": 3}, leaderless=[("orders", 1)], faults=[])
    return RunSummary(str(tables), str(tables / "_checkpoints" / "replay"), clusters=[cluster])


def test_no_arguments_replays_the_bundled_demo_into_the_profile_tables(tmp_path: Path) -> None:
    calls: list[dict[str, Any]] = []

    def fake(inputs: list[Path], config: JobConfig, **kw: Any) -> RunSummary:
        calls.append({"inputs": inputs, "tables": config.tables, "master": config.spark.master, **kw})
        return _summary(config.tables)

    with patch.object(pipelines.job, "run_with_config", fake):
        result = runner.invoke(app, ["run"])
    assert result.exit_code == 0, result.output
    assert calls == [{"inputs": [DEMO_INPUT], "tables": Path("lakehouse"), "master": "local[2]", "follow": None}]
    assert "Y8UXxSTrSB2pCc9s439Vkw" in result.output and "orders-1" in result.output
    assert "lakehouse" in result.output


def test_options_reach_the_job_and_json_is_machine_readable(tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    def fake(inputs: list[Path], config: JobConfig, **kw: Any) -> RunSummary:
        seen.update(inputs=inputs, config=config, **kw)
        return _summary(config.tables)

    with patch.object(pipelines.job, "run_with_config", fake):
        result = runner.invoke(app, ["run", "--input", str(tmp_path), "--tables", str(tmp_path / "t"), "--follow",
                                     "--max-entries-per-batch", "5", "--cluster-id", "c1", "--json"])
    assert result.exit_code == 0, result.output
    assert seen["inputs"] == [tmp_path] and seen["follow"] is True
    assert seen["config"].tables == tmp_path / "t" and seen["config"].max_entries_per_batch == 5
    assert seen["config"].cluster_id == "c1"
    doc = json.loads(result.output)
    assert doc["clusters"][0]["offlineByBrokerAndDirectory"] == {"2": {"Y8UXxSTrSB2pCc9s439Vkw": 3}}
