"""``jbod check`` on tables the Spark job wrote: deliberately bad metadata logs (binary segments written by
``jbod_model.storage.log_writer``) fail exactly their expectation with the right exit code; the bundled demo, every
simulator scenario and the real Kafka samples pass — or fail exactly what the scenario is known to break (the
simulator's ``expected_invariants``, the model's own verdict); the Spark engine agrees with pandas.

Two job runs: one for the bad logs, the demo and the 24 scenarios (each its own cluster), one for the samples."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from cli_support import command_app
from pyspark.sql import SparkSession
from test_quality_support import (
    BAD_LOG_VERDICTS,
    DEMO,
    DEMO_CLUSTER,
    STUCK_MAX_OFFSETS,
    bad_logs,
)
from typer.testing import CliRunner

from jbod_model.simulator.output import write_metadata_dir, write_result
from jbod_model.simulator.scenarios import SCENARIOS
from pipelines.cli.check import register
from pipelines.config.profiles import QualitySettings
from pipelines.lakehouse.tables import read_table
from pipelines.quality import ExternalInputs, GxRunner, TableSet, check_cluster, run_checks
from pipelines.streaming.job import run_job

REPO_ROOT = Path(__file__).resolve().parents[3]
SAMPLES = REPO_ROOT.parent / "shared" / "kraft-metadata-samples"
cli = CliRunner(env={"COLUMNS": "200"})


def make_app() -> typer.Typer:
    return command_app(register)


@pytest.fixture(scope="module")
def lakehouse(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One job over: each bad log as a node's metadata dir (cluster id from its meta.properties), the demo stream,
    and every simulator scenario's metadata log (cluster id = the scenario's name)."""
    root = tmp_path_factory.mktemp("check-job")
    inputs: list[Path] = []
    for cluster, log in bad_logs().items():
        inputs.append(write_metadata_dir(root / "logs" / cluster, log, cluster_id=cluster, records_per_segment=10))
    cluster_ids: dict[str, str] = {}
    disks: dict[str, tuple[Path, ...]] = {}
    for name, scenario in SCENARIOS.items():
        out = write_result(scenario.run(0), root / "scenarios" / name)
        cluster_ids[str(out.metadata_dir)] = name
        disks[name] = tuple(sorted((root / "scenarios" / name).glob("broker-*")))
        inputs.append(out.metadata_dir)
    tables = root / "lakehouse"
    summary = run_job([*inputs, DEMO], tables, spark=spark, cluster_ids=cluster_ids)
    faults = {c.cluster_id: c.faults for c in summary.clusters if c.faults}
    assert set(faults) == {"directory-of-two-brokers"}, faults
    profile = root / "dq.yaml"
    profile.write_text(f"quality:\n  pending_placement_max_offsets: {STUCK_MAX_OFFSETS}\n"
                       "  pending_placement_max_ms: 3600000\n", encoding="utf-8")
    return {"tables": tables, "profile": profile, "disks": disks}


def check(*args: str) -> Any:
    return cli.invoke(make_app(), ["check", *args])


@pytest.mark.parametrize("cluster", list(BAD_LOG_VERDICTS))
def test_a_bad_metadata_log_fails_its_expectation(lakehouse: dict[str, Any], cluster: str) -> None:
    expected, code = BAD_LOG_VERDICTS[cluster]
    result = check("--tables", str(lakehouse["tables"]), "--cluster", cluster, "--conf", str(lakehouse["profile"]),
                   "--json", "--no-docs")
    assert result.exit_code == code, result.output
    doc = json.loads(result.stdout)
    assert {r["expectation"] for r in doc["results"] if r["status"] == "failed"} == expected


def test_the_refused_registration_is_a_replay_fault(lakehouse: dict[str, Any]) -> None:
    """Replay refuses a directory registered to two brokers (as Kafka's replay does): the job quarantines the
    cluster at that record, and the check reports it as I6 with the record's offset."""
    faults = read_table(lakehouse["tables"], "replay_faults", "cluster_id = 'directory-of-two-brokers'").to_pylist()
    assert [f["offset"] for f in faults] == [33] and "already assigned to broker 1" in faults[0]["message"]


def test_the_demo_passes_and_builds_the_data_docs(lakehouse: dict[str, Any]) -> None:
    result = check("--tables", str(lakehouse["tables"]), "--cluster", DEMO_CLUSTER)
    assert result.exit_code == 0, result.output
    assert (lakehouse["tables"] / "_dq" / "data_docs" / "index.html").is_file()


def test_every_scenario_fails_exactly_what_it_is_known_to_break(lakehouse: dict[str, Any]) -> None:
    """The simulator's scenarios, with their disks' meta.properties (--dirs): clean ones pass; the ones that
    script a controller bug fail exactly the invariants the model finds (``expected_invariants``); and JBOD on a
    metadata.version below 3.7-IV2 — invisible to the log alone — fails I22."""
    runner = GxRunner()
    verdicts = {}
    for name, scenario in SCENARIOS.items():
        tables = TableSet(name, lakehouse["tables"])
        results = check_cluster(tables, runner, inputs=ExternalInputs(dirs=lakehouse["disks"][name]))
        verdicts[name] = {r.invariant for r in results if r.status in ("failed", "error")}
        expected = set(scenario.expected_invariants) | ({"I22"} if name == "jbod-on-old-mv-disk-failure" else set())
        assert verdicts[name] == expected, name
    assert verdicts["unfenced-onto-failed-dir"] == {"I14", "I16"}
    assert verdicts["fast-restart-with-new-disk"] == {"I21"}


def test_the_spark_engine_agrees_with_pandas(spark: SparkSession, lakehouse: dict[str, Any]) -> None:
    args = {"cluster": "leader-on-offline-dir", "suites": ["semantic", "log"], "write": False, "docs": False}
    on_pandas = run_checks(lakehouse["tables"], **args)  # type: ignore[arg-type]
    on_spark = run_checks(lakehouse["tables"], engine="spark", spark=spark, **args)  # type: ignore[arg-type]

    def summary(run: Any) -> list[tuple[Any, ...]]:
        return [(r.expectation, r.status, r.element_count, r.unexpected_count) for r in run.results]

    assert summary(on_spark) == summary(on_pandas)
    assert on_spark.failed_expectations() == {"I14.leader_acceptable", "I16.directory_failure_handled_in_batch"}
    # The CLI reuses the running session (and leaves it running).
    result = check("--tables", str(lakehouse["tables"]), "--cluster", "stuck-unassigned", "--engine", "spark",
                   "--suite", "history", "--conf", str(lakehouse["profile"]), "--no-docs", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["engine"] == "spark"
    assert spark.range(1).count() == 1


@pytest.mark.samples
def test_the_real_samples_pass(spark: SparkSession, tmp_path: Path) -> None:
    if not SAMPLES.is_dir():
        pytest.skip(f"real Kafka samples not found at {SAMPLES} (expected ../shared beside the repo)")
    tables = tmp_path / "samples"
    run_job([SAMPLES], tables, spark=spark)
    run = run_checks(tables, settings=QualitySettings(), docs=False)
    assert len({r.cluster_id for r in run.results}) == 3
    assert run.failed_expectations() == set()
    assert run.exit_code("warning") == 0
    # Kafka 3.5 (ZK migration, MIGRATING everywhere, registrations without LogDirs) is no false alarm either.
    looked = {(r.cluster_id, r.expectation): r.element_count for r in run.results}
    assert looked[("EpwKlK0lR6qKZW0cGwZz8w", "I13.replica_view_matches")] == 155
