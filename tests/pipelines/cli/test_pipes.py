"""Output in pipes and logs (issue #15 item 7): when stdout is not a terminal and COLUMNS is not set, tables are not
wrapped at 80 columns (no ``DIRECTORY_OFF`` / ``LINE``, scenario names and descriptions whole, so they can be
grepped and copied), and a long list of names collapses to its count and the first few."""

from __future__ import annotations

from pathlib import Path
from unittest.mock import patch

from typer.testing import CliRunner

import pipelines.streaming.job
from jbod_model.simulator.scenarios import SCENARIOS
from pipelines.cli import app
from pipelines.report.wording import collapsed
from pipelines.streaming.job import ClusterSummary, RunSummary

#: A pipe: CliRunner's output is not a terminal; COLUMNS unset (None removes it from the environment).
piped = CliRunner(env={"COLUMNS": None})
DEMO = Path(__file__).resolve().parents[3] / "pipelines" / "examples" / "demo-disk-failure.jsonl"


def test_tables_in_a_pipe_are_not_wrapped() -> None:
    result = piped.invoke(app, ["simulate", "--list"])
    assert result.exit_code == 0, result.output
    for scenario in SCENARIOS.values():
        # Each description on the one line of its row: at 80 columns rich folds it over many.
        assert any(scenario.description in line and scenario.name in line for line in result.stdout.splitlines()), (
            scenario.name)
    report = piped.invoke(app, ["report", str(DEMO)])
    assert report.exit_code == 0 and "DIRECTORY_OFFLINE" in report.stdout


def test_a_set_columns_is_still_obeyed() -> None:
    result = CliRunner(env={"COLUMNS": "80"}).invoke(app, ["simulate", "--list"])
    assert max(len(line) for line in result.stdout.splitlines()) <= 80


def test_collapsed() -> None:
    names = [f"t-{i}" for i in range(55)]
    assert collapsed(names) == "55: " + ", ".join(names[:10]) + " and 45 more"
    assert collapsed(names[:11]) == ", ".join(names[:11])  # "and 1 more" would save nothing


def test_run_collapses_a_long_leaderless_list(tmp_path: Path) -> None:
    leaderless = [("orders", p) for p in range(55)]
    summary = RunSummary(str(tmp_path), str(tmp_path / "_checkpoints"), clusters=[ClusterSummary(
        cluster_id="c", last_offset=9, metadata_version="3.9-IV0", brokers=3, topics=1, partitions=55, replicas=165,
        offline_by_broker_dir={}, offline_reasons={}, leaderless=leaderless, faults=[])])
    with patch.object(pipelines.streaming.job, "run_with_config", lambda *a, **k: summary):
        result = piped.invoke(app, ["run", "--input", str(DEMO), "--tables", str(tmp_path)])
    assert result.exit_code == 0, result.output
    line = next(x for x in result.stdout.splitlines() if x.startswith("Leaderless partitions"))
    assert line.startswith("Leaderless partitions: 55: orders-0, orders-1,") and "and 45 more" in line
    assert "orders-54" not in line
