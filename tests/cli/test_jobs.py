"""jobs.yaml: validation with clear errors, dependency order, running through the CLI, crontab export."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from jbod_model.errors import InputError
from pipelines.cli import EXIT_INPUT, app
from pipelines.jobs import JOBS_FILE, load_jobs, run_order

runner = CliRunner(env={"COLUMNS": "200"})
DEMO = Path(__file__).resolve().parents[2] / "pipelines" / "examples" / "demo-disk-failure.jsonl"


def jobs_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "jobs.yaml"
    path.write_text(body)
    return path


CHAIN = f"""
version: 1
default_profile: local
jobs:
  replay:
    description: the demo image
    command: image
    args: ["{DEMO}", "--json"]
    schedule: "*/15 * * * *"
  risk:
    description: what if broker 2's last disk failed
    command: whatif
    args: ["{DEMO}", "--fail-dir", "JbzRyYgxSHyV9F8hM29Rbg", "--json"]
    schedule: "0 * * * *"
    depends_on: [replay]
  adhoc:
    command: dirs
    args: ["{DEMO.parent}"]
"""


def test_the_repositorys_jobs_file_is_valid() -> None:
    result = runner.invoke(app, ["jobs", "validate", "--file", str(JOBS_FILE)])
    assert result.exit_code == 0, result.output


def test_run_executes_dependencies_first(tmp_path: Path) -> None:
    path = jobs_file(tmp_path, CHAIN)
    result = runner.invoke(app, ["jobs", "run", "risk", "--file", str(path)])
    assert result.exit_code == 0, result.output
    assert result.stderr.index("job replay") < result.stderr.index("job risk")
    assert '"featureLevel":21' in result.stdout and '"losesLeader":true' in result.stdout
    assert run_order(load_jobs(path), "risk") == ["replay", "risk"]


def test_list_and_crontab(tmp_path: Path) -> None:
    path = jobs_file(tmp_path, CHAIN)
    listed = runner.invoke(app, ["jobs", "list", "--file", str(path)])
    assert listed.exit_code == 0 and "whatif" in listed.stdout and "*/15 * * * *" in listed.stdout
    cron = runner.invoke(app, ["jobs", "crontab", "--file", str(path), "--workdir", str(tmp_path),
                               "--log-dir", "/var/log/jbod"]).stdout.splitlines()
    assert cron[0].startswith("#") and len(cron) == 3  # 'adhoc' has no schedule
    assert cron[1].startswith("*/15 * * * * cd ") and "jbod jobs run replay --file" in cron[1]
    assert cron[1].endswith(">> /var/log/jbod/replay.log 2>&1")


@pytest.mark.parametrize(("body", "message"), [
    ("version: 1\njobs:\n  a: {command: nosuch}\n", "unknown command 'nosuch'"),
    ("version: 1\njobs:\n  a: {command: image, schedule: 'every day'}\n", "not a valid cron"),
    ("version: 1\njobs:\n  a: {command: image, depends_on: [b]}\n", "unknown job 'b'"),
    ("version: 1\njobs:\n  a: {command: image, depends_on: [b]}\n  b: {command: image, depends_on: [a]}\n",
     "cycle: a -> b -> a"),
    ("version: 1\njobs:\n  a: {command: image, profile: prod}\n", "profile 'prod'"),
    ("version: 1\njobs:\n  a: {command: image, retries: 3}\n", "retries"),
    ("version: 2\njobs: {}\n", "version"),
])
def test_invalid_jobs_files_are_explained(tmp_path: Path, body: str, message: str) -> None:
    path = jobs_file(tmp_path, body)
    result = runner.invoke(app, ["jobs", "validate", "--file", str(path)])
    assert result.exit_code == EXIT_INPUT and message in result.stderr


def test_a_failing_step_stops_the_chain(tmp_path: Path) -> None:
    path = jobs_file(tmp_path, f"""
version: 1
jobs:
  broken: {{command: image, args: ["{tmp_path / 'missing.jsonl'}"]}}
  after: {{command: image, args: ["{DEMO}"], depends_on: [broken]}}
""")
    result = runner.invoke(app, ["jobs", "run", "after", "--file", str(path)])
    assert result.exit_code != 0 and "job after" not in result.stderr


def test_unknown_job_name() -> None:
    with pytest.raises(InputError, match="Unknown job"):
        run_order(load_jobs(JOBS_FILE), "no-such-job")
