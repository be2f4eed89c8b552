"""``jbod run``: a thin caller of the Spark job — arguments resolved through the profile, the job called once, the
summary printed. The Spark boundary is patched here; tests/pipelines/streaming runs the job itself."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pytest
from typer.testing import CliRunner

import pipelines.streaming.job
from pipelines.cli import app
from pipelines.cli.run import DEMO_CLUSTER_ID, DEMO_INPUT, DEMO_LOG_DIRS
from pipelines.config.profiles import JobConfig
from pipelines.lakehouse.tables import directory_paths
from pipelines.streaming.job import ClusterSummary, RunSummary

runner = CliRunner(env={"COLUMNS": "200"})


def _summary(tables: Path, cluster_id: str = "demo") -> RunSummary:
    cluster = ClusterSummary(cluster_id=cluster_id, last_offset=32, metadata_version="3.9-IV0", brokers=3, topics=2,
                             partitions=5, replicas=15, offline_by_broker_dir={2: {"Y8UXxSTrSB2pCc9s439Vkw": 3}},
                             offline_reasons={"DIRECTORY_OFFLINE": 3}, leaderless=[("orders", 1)], faults=[])
    return RunSummary(str(tables), str(tables / "_checkpoints" / "replay"), clusters=[cluster])


def test_no_arguments_replays_the_bundled_demo_into_the_profile_tables(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the default tables are ./lakehouse: the demo's disks are loaded there
    calls: list[dict[str, Any]] = []

    def fake(inputs: list[Path], config: JobConfig, **kw: Any) -> RunSummary:
        assert callable(kw.pop("on_batch")) and callable(kw.pop("on_session"))
        calls.append({"inputs": inputs, "tables": config.tables, "master": config.spark.master,
                      "cluster_id": config.cluster_id, **kw})
        return _summary(config.tables, DEMO_CLUSTER_ID)

    with patch.object(pipelines.streaming.job, "run_with_config", fake):
        result = runner.invoke(app, ["run"])
    assert result.exit_code == 0, result.output
    # The demo is named by the cluster id its disks' meta.properties carry, so the two join.
    assert calls == [{"inputs": [DEMO_INPUT], "tables": Path("lakehouse"), "master": "local[2]",
                      "cluster_id": DEMO_CLUSTER_ID, "follow": None}]
    assert "broker 2 /mnt/d1 (Y8UXxSTr…)" in result.output and "orders-1" in result.output
    assert f"Loaded 6 directories of cluster {DEMO_CLUSTER_ID}" in result.output
    assert "lakehouse" in result.output
    paths = directory_paths(tmp_path / "lakehouse", DEMO_CLUSTER_ID)
    assert paths is not None and sorted({loc.path for loc in paths.locations.values()}) == ["/mnt/d1", "/mnt/d2"]


def test_dirs_are_read_before_the_run_and_loaded_after_it(tmp_path: Path) -> None:
    runs: list[Path] = []

    def fake(inputs: list[Path], config: JobConfig, **kw: Any) -> RunSummary:
        runs.append(config.tables)
        return _summary(config.tables)

    with patch.object(pipelines.streaming.job, "run_with_config", fake):
        missing = runner.invoke(app, ["run", "--input", str(tmp_path), "--tables", str(tmp_path / "t"), "--dirs",
                                      str(tmp_path / "nothing"), "--as-root"])
    assert missing.exit_code == 2 and "no meta.properties found" in missing.stderr and runs == []
    with patch.object(pipelines.streaming.job, "run_with_config", fake):
        # Without --as-root the disks are recorded by the paths read; the summary's cluster has no inventory.
        result = runner.invoke(app, ["run", "--input", str(tmp_path), "--tables", str(tmp_path / "t"), "--dirs",
                                     str(DEMO_LOG_DIRS)])
    assert result.exit_code == 0, result.output
    assert "Y8UXxSTrSB2pCc9s439Vkw" in result.stdout and "/mnt/d1 (" not in result.stdout
    paths = directory_paths(tmp_path / "t", DEMO_CLUSTER_ID)
    assert paths is not None and all(str(DEMO_LOG_DIRS) in loc.path for loc in paths.locations.values())


def test_options_reach_the_job_and_json_is_machine_readable(tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    def fake(inputs: list[Path], config: JobConfig, **kw: Any) -> RunSummary:
        seen.update(inputs=inputs, config=config, **kw)
        return _summary(config.tables)

    with patch.object(pipelines.streaming.job, "run_with_config", fake):
        result = runner.invoke(app, ["run", "--input", str(tmp_path), "--tables", str(tmp_path / "t"), "--follow",
                                     "--max-entries-per-batch", "5", "--cluster-id", "c1", "--json"])
    assert result.exit_code == 0, result.output
    assert seen["inputs"] == [tmp_path] and seen["follow"] is True
    assert seen["config"].tables == tmp_path / "t" and seen["config"].max_entries_per_batch == 5
    assert seen["config"].cluster_id == "c1"
    doc = json.loads(result.output)
    assert doc["clusters"][0]["offlineByBrokerAndDirectory"] == {"2": {"Y8UXxSTrSB2pCc9s439Vkw": 3}}


def test_an_input_without_metadata_is_an_error_not_an_empty_run(tmp_path: Path) -> None:
    """A mistyped folder, or a broker's data dir holding only meta.properties, must not give a green run with
    nothing in it; the check comes before any Spark session is started."""
    empty = tmp_path / "broker-1-data"
    empty.mkdir()
    (empty / "meta.properties").write_text("version=1\nnode.id=1\ncluster.id=abc\n")
    with patch.object(pipelines.streaming.job, "spark_session", side_effect=AssertionError("Spark must not start")):
        result = runner.invoke(app, ["run", "--input", str(empty), "--tables", str(tmp_path / "t")])
    assert result.exit_code == 2, result.output
    assert "no KRaft metadata under" in result.stderr and str(empty) in result.stderr
    assert not (tmp_path / "t" / "records").exists(), "no table is created"


def test_each_micro_batch_is_reported_on_stderr_as_it_is_written(tmp_path: Path) -> None:
    """A long replay is not silent: the job's batch callback reaches stderr (one line per batch when stderr is not
    a terminal, as in a scheduled job's log), and stdout keeps only the summary."""

    def fake(inputs: list[Path], config: JobConfig, **kw: Any) -> RunSummary:
        for batch_id, rows in enumerate((40, 2)):
            kw["on_batch"](pipelines.streaming.job.BatchStats(batch_id, rows, {}, seconds=1.5, compute_seconds=1.0))
        return _summary(config.tables)

    with patch.object(pipelines.streaming.job, "run_with_config", fake):
        result = runner.invoke(app, ["run", "--input", str(DEMO_INPUT), "--tables", str(tmp_path / "t"), "--json"])
    assert result.exit_code == 0, result.output
    assert "micro-batch 0: 40 rows in 1.5 s (replay 1.0 s, Delta writes 0.5 s); 1 batches, 40 rows so far" in (
        result.stderr)
    assert "2 batches, 42 rows so far" in result.stderr
    assert json.loads(result.stdout)["tables"] == str(tmp_path / "t")


def test_policy_reaches_the_job_over_the_environment_and_the_profile(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """``--policy`` beats ``JBOD_READ_POLICY``, which beats the profile's ``read_policy`` (fail); a gap the job
    recorded is printed as a "log gap" line."""
    seen: list[str] = []

    def fake(inputs: list[Path], config: JobConfig, **kw: Any) -> RunSummary:
        seen.append(config.read_policy)
        summary = _summary(config.tables)
        summary.clusters[0].gaps = ["offsets 20..23 could not be read (corrupt or deleted) from /x.log and were "
                                    "skipped"]
        return summary

    args = ["run", "--input", str(tmp_path), "--tables", str(tmp_path / "t")]
    with patch.object(pipelines.streaming.job, "run_with_config", fake):
        default = runner.invoke(app, args)
        skip = runner.invoke(app, [*args, "--policy", "skip"])
        monkeypatch.setenv("JBOD_READ_POLICY", "skip")
        from_env = runner.invoke(app, args)
        cli_wins = runner.invoke(app, [*args, "--policy", "fail"])
        bad = runner.invoke(app, [*args, "--policy", "ignore"])
    assert [r.exit_code for r in (default, skip, from_env, cli_wins)] == [0, 0, 0, 0], skip.output
    assert seen == ["fail", "skip", "skip", "fail"]
    assert "log gap: offsets 20..23 could not be read" in skip.stdout
    assert bad.exit_code == 2 and "'ignore' is not one of 'fail', 'skip'" in bad.stderr  # click's choice check


def test_run_with_config_hands_the_policy_to_the_job(tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    def fake_run_job(inputs: list[Path], tables: Path, checkpoint: Path, **kw: Any) -> RunSummary:
        seen.update(kw)
        return _summary(tables)

    config = JobConfig(tables=tmp_path / "t", read_policy="skip")
    with patch.object(pipelines.streaming.job, "run_job", fake_run_job):
        pipelines.streaming.job.run_with_config([tmp_path], config)
    assert seen["policy"] == "skip"


SPINNER_SCRIPT = """
import os, sys, time
from pipelines.cli.shared import batch_progress
with batch_progress() as progress:
    # fd 2 pointed at a file for a while, as a redirect of this process's descriptors would.
    saved = os.dup(2)
    log = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
    os.dup2(log, 2)
    time.sleep(1.6)
    os.dup2(saved, 2)
    progress.session_started()
    time.sleep(0.5)
"""


def test_the_spinner_says_starting_spark_and_keeps_time_while_the_jvm_log_takes_stderr(tmp_path: Path) -> None:
    """On a terminal (a pseudo-terminal from util-linux ``script``), the live line says "starting Spark" and its
    clock runs while file descriptor 2 is pointed at the JVM's log, then says what it waits for; nothing of it is
    drawn into the log."""
    script = shutil.which("script")
    if script is None:
        pytest.skip("needs util-linux `script` for a pseudo-terminal")
    code, log = tmp_path / "spin.py", tmp_path / "spark-driver.log"
    code.write_text(SPINNER_SCRIPT)
    done = subprocess.run([script, "-qec", shlex.join([sys.executable, str(code), str(log)]), "/dev/null"],
                          capture_output=True, text=True, timeout=60, check=True)
    shown = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", done.stdout)
    # The second passed while fd 2 was the log's: the terminal saw it (the description changes right after).
    assert re.search(r"starting Spark +0:00:01", shown), shown
    assert "replaying on Spark: waiting for the first micro-batch" in shown
    assert "starting Spark" not in log.read_text()
