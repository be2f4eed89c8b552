"""``jbod check`` (pipelines.cli.check) on a fresh typer app: the demo lakehouse passes (exit 0) with the results
table and the data docs; corrupted metadata logs, replayed by the job's operator into Delta tables, fail the right
expectation with the right exit code; ``--fail-on``, ``--suite``, ``--json``; bad input exits 2. The tables here
are written without Spark (the job's operator over in-memory state, its Delta writer);
tests/pipelines/quality/test_check.py runs the same logs through the Spark job."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import typer
from cli_support import command_app
from test_quality_support import (
    BAD_LOG_VERDICTS,
    DEMO_CLUSTER,
    STUCK_MAX_OFFSETS,
    bad_logs,
    demo_lakehouse,
    write_lakehouse,
)
from typer.testing import CliRunner

from pipelines.cli.check import register
from pipelines.cli.shared import EXIT_INPUT
from pipelines.quality import (
    CHECKS,
    SKIPS,
    CheckResult,
    QualityRun,
    StoredRun,
    latest_run,
    read_results,
    write_results,
)

runner = CliRunner(env={"COLUMNS": "200"})


def make_app() -> typer.Typer:
    return command_app(register)


def check(*args: str) -> Any:
    return runner.invoke(make_app(), ["check", *args])


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_lakehouse(tmp_path_factory.mktemp("cli-demo") / "lakehouse")


@pytest.fixture(scope="module")
def corrupted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One lakehouse holding each bad log as its own cluster."""
    root = tmp_path_factory.mktemp("cli-bad") / "lakehouse"
    for cluster, log in bad_logs().items():
        write_lakehouse(root, cluster, log)
    return root


@pytest.fixture(scope="module")
def profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A profile with a small placement threshold (the stuck placement waits STUCK_MAX_OFFSETS + 3 offsets)."""
    path = tmp_path_factory.mktemp("conf") / "dq.yaml"
    path.write_text(f"quality:\n  pending_placement_max_offsets: {STUCK_MAX_OFFSETS}\n"
                    "  pending_placement_max_ms: 3600000\n", encoding="utf-8")
    return path


def failed(result: Any) -> set[str]:
    doc = json.loads(result.stdout)
    return {r["expectation"] for r in doc["results"] if r["status"] in ("failed", "error")}


def test_the_demo_passes_with_results_table_and_data_docs(demo: Path) -> None:
    result = check("--tables", str(demo))
    assert result.exit_code == 0, result.output
    assert "0 failed" in result.output and "OK at fail_on=error" in result.output
    docs = demo / "_dq" / "data_docs" / "index.html"
    assert f"Data docs: {docs}" in result.output and docs.is_file()
    assert "I25.cordoned_directories_get_no_replicas" in result.output and "no cordon data" in result.output
    rows = read_results(demo)
    assert len(rows) == len(CHECKS) + len(SKIPS)
    assert set(rows["cluster_id"]) == {DEMO_CLUSTER} and rows["run_id"].nunique() == 1
    assert set(rows["status"]) == {"passed", "skipped"}
    assert rows.loc[rows["expectation"] == "I14.leader_acceptable", "element_count"].item() == 5
    assert latest_run(demo) == latest_run(demo, DEMO_CLUSTER) == StoredRun(rows["run_id"][0], rows["run_time"][0])
    assert latest_run(demo, "another-cluster") is None
    # A second run appends: the table is a history of checks, and the newest run is the second.
    first = latest_run(demo)
    assert check("--tables", str(demo), "--no-docs").exit_code == 0
    rows = read_results(demo)
    assert rows["run_id"].nunique() == 2
    newest = latest_run(demo)
    assert newest is not None and first is not None and newest.run_id != first.run_id
    assert newest.run_time == rows["run_time"].max() and newest.run_time >= first.run_time


def test_tables_without_results_hold_no_stored_run(tmp_path: Path) -> None:
    assert latest_run(tmp_path) is None


def test_the_newest_of_two_runs_in_one_second_is_the_later_commit(tmp_path: Path) -> None:
    """``run_time`` has whole seconds: of two runs stored within one, the one appended last is the newest (the
    later one has the larger id here, so picking the smallest id would fail)."""
    at = datetime(2026, 11, 25, 10, 0, 0, tzinfo=UTC)
    result = CheckResult("c1", "structural", "I2.replicas_unique", "I2", "error", "passed", True)
    for run_id in ("0000", "ffff"):
        write_results(tmp_path, QualityRun(run_id=run_id, run_time=at, tables_dir=str(tmp_path), engine="pandas",
                                           suites=("structural",), results=[result]))
    assert latest_run(tmp_path) == latest_run(tmp_path, "c1") == StoredRun("ffff", at)
    assert latest_run(tmp_path, "c2") is None


@pytest.mark.parametrize("cluster", list(BAD_LOG_VERDICTS))
def test_a_corrupted_log_fails_its_expectation(corrupted: Path, profile: Path, cluster: str) -> None:
    expected, code = BAD_LOG_VERDICTS[cluster]
    result = check("--tables", str(corrupted), "--cluster", cluster, "--conf", str(profile), "--json", "--no-docs")
    assert result.exit_code == code, result.output
    assert failed(result) == expected
    doc = json.loads(result.stdout)
    assert doc["exitCode"] == code and doc["failOn"] == "error"
    for r in doc["results"]:
        if r["expectation"] in expected:
            assert r["sample"] and r["sample"][0]["offset"] is not None


def test_the_failing_row_is_named_in_the_summary(corrupted: Path, profile: Path) -> None:
    result = check("--tables", str(corrupted), "--cluster", "leader-on-offline-dir", "--conf", str(profile),
                   "--no-docs")
    assert result.exit_code == 1
    assert "FAIL" in result.output and "I14.leader_acceptable" in result.output
    # payments-1: broker 2 still leads it from the failed disk.
    assert "topic_name=payments" in result.output and "partition_id=1" in result.output


def test_a_replay_fault_is_reported_with_its_offset(corrupted: Path, profile: Path) -> None:
    result = check("--tables", str(corrupted), "--cluster", "directory-of-two-brokers", "--json", "--no-docs",
                   "--conf", str(profile))
    doc = json.loads(result.stdout)
    r = next(r for r in doc["results"] if r["expectation"] == "I6.replay_refused")
    assert r["sample"][0]["offset"] == 33 and "already assigned to broker 1" in r["sample"][0]["message"]


def test_fail_on_decides_the_exit_code(corrupted: Path, profile: Path) -> None:
    stuck = ["--tables", str(corrupted), "--cluster", "stuck-unassigned", "--conf", str(profile), "--no-docs"]
    assert check(*stuck).exit_code == 0  # a warning
    assert check(*stuck, "--fail-on", "warning").exit_code == 1
    leader = ["--tables", str(corrupted), "--cluster", "leader-on-offline-dir", "--conf", str(profile), "--no-docs"]
    assert check(*leader, "--fail-on", "never").exit_code == 0


def test_all_clusters_by_default_and_suites_by_name(corrupted: Path, profile: Path) -> None:
    result = check("--tables", str(corrupted), "--conf", str(profile), "--json", "--no-docs", "--suite", "semantic")
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert {r["clusterId"] for r in doc["results"]} == set(BAD_LOG_VERDICTS)
    assert {r["suite"] for r in doc["results"]} == {"semantic"} and doc["suites"] == ["semantic"]
    assert {(r["clusterId"], r["expectation"]) for r in doc["results"] if r["status"] == "failed"} == {
        ("leader-on-offline-dir", "I14.leader_acceptable")}


def test_bad_input_exits_2(demo: Path, tmp_path: Path) -> None:
    assert check("--tables", str(tmp_path / "nothing")).exit_code == EXIT_INPUT
    result = check("--tables", str(demo), "--cluster", "nope", "--no-docs")
    assert result.exit_code == EXIT_INPUT and "not in" in result.output
    result = check("--tables", str(demo), "--suite", "everything", "--no-docs")
    assert result.exit_code == EXIT_INPUT and "quality.suites" in result.output
    result = check("--tables", str(demo), "--engine", "dask", "--no-docs")
    assert result.exit_code == EXIT_INPUT and "quality.engine" in result.output


def test_the_inventory_that_run_loaded_is_read_without_dirs(tmp_path: Path) -> None:
    """``jbod run`` loads the demo's disks into dir_inventory; ``jbod check --tables`` then checks I22/I24 against
    them instead of skipping with "needs --dirs" (issue #15 item 9)."""
    from jbod_model.meta_properties import inventory
    from jbod_model.stream import load_jsonl
    from pipelines.cli.run import DEMO_CLUSTER_ID, DEMO_INPUT, DEMO_LOG_DIRS
    from pipelines.lakehouse.tables import load_dir_inventory

    # Keyed as `jbod run` keys the demo: by the cluster.id its disks' meta.properties carry.
    tables = write_lakehouse(tmp_path / "lakehouse", DEMO_CLUSTER_ID, load_jsonl(DEMO_INPUT), input_kind="jsonl")
    before = json.loads(check("--tables", str(tables), "--suite", "external", "--json", "--no-docs").stdout)
    assert {r["status"] for r in before["results"] if r["invariant"] in ("I22", "I24")} == {"skipped"}
    load_dir_inventory(tables, inventory(sorted(p for p in DEMO_LOG_DIRS.iterdir() if p.is_dir()), as_root=True))
    result = check("--tables", str(tables), "--suite", "external", "--json", "--no-docs")
    assert result.exit_code == 0, result.output
    statuses = {r["expectation"]: r["status"] for r in json.loads(result.stdout)["results"]}
    assert statuses["I24.online_directories_on_disk"] == "passed"
    assert statuses["I24.disk_directory_ids_unique"] == "passed"
    assert statuses["I22.jbod_needs_3_7_iv2"] == "passed"
