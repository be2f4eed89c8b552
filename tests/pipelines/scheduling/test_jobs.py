"""jobs.yaml: validation with clear errors, dependency order, running through the CLI, crontab export."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from jbod_model.errors import InputError
from pipelines.cli import app
from pipelines.cli.shared import EXIT_INPUT
from pipelines.scheduling.jobs import JOBS_FILE, JobsFile, expand_args, load_jobs, run_order, variables
from pipelines.streaming.session import EXIT_ON_OOM, JIT_OPTIONS

runner = CliRunner(env={"COLUMNS": "200"})
REPO = Path(__file__).resolve().parents[3]
DEMO = REPO / "pipelines" / "examples" / "demo-disk-failure.jsonl"


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
    assert cron[1].startswith("*/15 * * * * cd ") and "/__main__.py jobs run replay --file" in cron[1]
    assert shlex.split(cron[1])[8].startswith("/")  # the interpreter, by absolute path
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


# --- environment variables in arguments ----------------------------------------------------------------------

VARS = f"""
version: 1
jobs:
  replay:
    command: image
    args: ["${{DEMO_DIR:-{DEMO.parent}}}/demo-disk-failure.jsonl", "--json"]
  needs-home:
    command: image
    args: ["${{JOBS_TEST_HOME}}/demo-disk-failure.jsonl"]
  priced:
    command: image
    args: ["--policy", "$${{not a variable}}"]
  later:
    command: image
    args: ["{DEMO}"]
    depends_on: [needs-home]
"""


def test_variables_expand_at_run_time(tmp_path: Path) -> None:
    spec = load_jobs(jobs_file(tmp_path, VARS))
    assert expand_args(spec, "replay", env={}) == [f"{DEMO}", "--json"]
    assert expand_args(spec, "replay", env={"DEMO_DIR": "/d"}) == ["/d/demo-disk-failure.jsonl", "--json"]
    assert expand_args(spec, "replay", env={"DEMO_DIR": ""}) == [f"{DEMO}", "--json"]  # empty takes the default
    assert expand_args(spec, "needs-home", env={"JOBS_TEST_HOME": "/h"}) == ["/h/demo-disk-failure.jsonl"]
    assert expand_args(spec, "priced", env={}) == ["--policy", "${not a variable}"]
    with pytest.raises(InputError, match=r"job 'needs-home', argument 1 .*JOBS_TEST_HOME is not set and "
                                         r"\$\{JOBS_TEST_HOME\} has no default"):
        expand_args(spec, "needs-home", env={})
    assert variables(spec) == {"DEMO_DIR": str(DEMO.parent), "JOBS_TEST_HOME": None}
    mixed = JobsFile.model_validate({"jobs": {"a": {"command": "image", "args": ["${X:-d}", "${Y}"]},
                                              "b": {"command": "image", "args": ["${X}", "${Y:-e}", "${Z:-f}"]}}})
    assert variables(mixed) == {"X": None, "Y": None, "Z": "f"}  # required as soon as one job has no default


def test_a_job_runs_with_the_environment_of_the_moment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = jobs_file(tmp_path, VARS)
    monkeypatch.delenv("JOBS_TEST_HOME", raising=False)
    missing = runner.invoke(app, ["jobs", "run", "later", "--file", str(path)])
    # The chain stops before its first step: the variable of the first step is missing.
    assert missing.exit_code == EXIT_INPUT and "JOBS_TEST_HOME is not set" in missing.stderr
    assert "job needs-home" not in missing.stderr
    monkeypatch.setenv("JOBS_TEST_HOME", str(DEMO.parent))
    ran = runner.invoke(app, ["jobs", "run", "later", "--file", str(path)])
    assert ran.exit_code == 0, ran.output
    assert f"jbod image {DEMO}" in ran.stderr  # the expanded command line is what ran


@pytest.mark.parametrize(("arg", "message"), [
    ("$HOME/x", "braces are required"),
    ("${HOME", "malformed variable"),
    ("${1X}", "malformed variable"),
    ("${X:default}", "malformed variable"),
])
def test_malformed_variables_fail_validation(tmp_path: Path, arg: str, message: str) -> None:
    path = jobs_file(tmp_path, f"version: 1\njobs:\n  a: {{command: image, args: ['{arg}']}}\n")
    result = runner.invoke(app, ["jobs", "validate", "--file", str(path)])
    assert result.exit_code == EXIT_INPUT and "jobs.a.args" in result.stderr and message in result.stderr


def test_crontab_lists_the_variables_and_can_carry_their_values(tmp_path: Path) -> None:
    path = jobs_file(tmp_path, VARS.replace("    command: image\n    args: [\"${JOBS",
                                            "    command: image\n    schedule: '0 3 * * *'\n    args: [\"${JOBS"))
    plain = runner.invoke(app, ["jobs", "crontab", "--file", str(path)]).stdout.splitlines()
    assert "# ${JOBS_TEST_HOME}: must be set (no default)" in plain
    assert any(line.startswith("0 3 * * * cd ") and "jobs run needs-home" in line for line in plain)
    carried = CliRunner(env={"COLUMNS": "200", "JOBS_TEST_HOME": "/srv/jbod"}).invoke(
        app, ["jobs", "crontab", "--file", str(path), "--with-env"]).stdout.splitlines()
    assert "JOBS_TEST_HOME=/srv/jbod" in carried
    assert carried.index("JOBS_TEST_HOME=/srv/jbod") < next(i for i, x in enumerate(carried) if "needs-home" in x)


def test_crontab_lines_run_under_crons_environment(tmp_path: Path) -> None:
    """cron runs a line with ``sh -c``, PATH=/usr/bin:/bin and only the crontab's NAME=value lines set: the line
    must not rely on a ``jbod`` on this shell's PATH (``sh: 1: jbod: not found``, exit 127)."""
    path = jobs_file(tmp_path, """
version: 1
jobs:
  replay:
    command: image
    args: ["${JOBS_TEST_DEMO}", "--json"]
    schedule: "*/15 * * * *"
""")
    lines = CliRunner(env={"COLUMNS": "200", "JOBS_TEST_DEMO": str(DEMO)}).invoke(
        app, ["jobs", "crontab", "--file", str(path), "--workdir", str(tmp_path), "--with-env"]).stdout.splitlines()
    cron_env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "SHELL": "/bin/sh"}
    cron_env.update(line.split("=", 1) for line in lines if re.match(r"^[A-Z_]+=", line))
    [job_line] = [line for line in lines if line.startswith("*/15 ")]
    command = job_line.split(" ", 5)[5]
    done = subprocess.run(["/bin/sh", "-c", command], env=cron_env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, (command, done.stderr)
    assert '"featureLevel":21' in done.stdout


def test_serve_says_when_a_jobs_input_does_not_exist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``JBOD_HOME=/var/lib/kraft-jbod jbod jobs serve`` on a machine without that folder stops at once, naming
    the job and the path, instead of waiting for the first schedule to fail."""
    monkeypatch.setenv("JBOD_HOME", str(tmp_path / "nowhere"))
    result = runner.invoke(app, ["jobs", "serve", "--file", str(JOBS_FILE), "--log-dir", str(tmp_path / "logs"),
                                 "--once"])
    assert result.exit_code == EXIT_INPUT, result.output
    assert "job 'ingest'" in result.stderr and str(tmp_path / "nowhere" / "metadata") in result.stderr
    assert "does not exist" in result.stderr


# --- the shipped jobs file -----------------------------------------------------------------------------------


def test_the_shipped_file_declares_the_operator_jobs() -> None:
    spec = load_jobs(JOBS_FILE)
    assert {"ingest", "inventory", "quality", "report", "maintain"} <= set(spec.jobs)
    for name in ("quality", "inventory", "maintain"):
        assert run_order(spec, name) == ["ingest", name]
        assert spec.jobs[name].schedule is not None
    # The report names disks by path: the inventory is loaded before it.
    assert run_order(spec, "report") == ["ingest", "inventory", "report"]
    assert spec.jobs["inventory"].command == "dirs" and "--tables" in spec.jobs["inventory"].args
    assert spec.jobs["ingest"].command == "run" and spec.jobs["maintain"].command == "maintain"
    assert expand_args(spec, "ingest", env={"JBOD_HOME": "/srv/j"}) == [
        "--input", "/srv/j/metadata", "--tables", "/srv/j/lakehouse"]
    assert expand_args(spec, "ingest", env={})[1] == "/var/lib/kraft-jbod/metadata"


def test_the_demo_jobs_run_from_a_fresh_clone_without_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in [v for v in os.environ if v.startswith("JBOD_")]:
        monkeypatch.delenv(var)
    monkeypatch.chdir(REPO)
    result = runner.invoke(app, ["jobs", "run", "disk-risk"])
    assert result.exit_code == 0, result.output
    assert result.stderr.index("job demo-image") < result.stderr.index("job disk-risk")
    assert "loses its leader" in result.stdout or "losesLeader" in result.stdout


def test_spark_submit_prints_a_command_line_for_the_jobs_profile(tmp_path: Path) -> None:
    path = jobs_file(tmp_path, f"""
version: 1
jobs:
  ingest: {{command: run, args: ["--input", "{DEMO}"], profile: standalone}}
""")
    result = runner.invoke(app, ["jobs", "spark-submit", "ingest", "--file", str(path)])
    assert result.exit_code == 0, result.output
    argv = shlex.split(result.stdout)
    assert argv[0].endswith("spark-submit")
    assert argv[argv.index("--master") + 1] == "spark://127.0.0.1:7077"
    assert argv[argv.index("--driver-memory") + 1] == "3g"
    # The driver logs warnings and errors only: the file is the package's, read by the JVM as it starts.
    java = argv[argv.index("--driver-java-options") + 1].split()
    # The driver's JVM stops on running out of memory rather than living on without a thread the job waits on.
    assert java[1:] == [JIT_OPTIONS, EXIT_ON_OOM]
    log4j = Path(java[0].removeprefix("-Dlog4j2.configurationFile="))
    assert log4j == REPO / "pipelines" / "cli" / "log4j2.properties" and "rootLogger.level = warn" in log4j.read_text()
    script = Path(argv[argv.index("--file") - 4])
    assert script == REPO / "pipelines" / "cli" / "__main__.py" and script.is_file()
    assert argv[-5:] == ["jobs", "run", "ingest", "--file", str(path.resolve())]
    unknown = runner.invoke(app, ["jobs", "spark-submit", "nope", "--file", str(path)])
    assert unknown.exit_code == EXIT_INPUT and "Unknown job" in unknown.stderr
