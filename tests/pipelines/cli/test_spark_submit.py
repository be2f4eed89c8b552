"""The job under pyspark's real ``bin/spark-submit``: the entry script shipped in the package runs ``jbod`` commands,
the session is the one spark-submit configured (its ``--master`` and ``--conf`` win over the profile's ``spark.*``),
and the tables equal the model's replay. Each test starts its own driver (a JVM per spark-submit).

spark-submit merges the Python driver's stderr into its own stdout (PythonRunner), so messages are looked for in
both, and a ``--json`` result is the last line of stdout."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest
from spark_support import assert_tables_match_model, model_log, step_offsets
from typer.testing import CliRunner

from pipelines.cli import app
from pipelines.cli.run import DEMO_INPUT
from pipelines.cli.spark_submit import SUBMIT_SCRIPT
from pipelines.lakehouse.tables import clusters

SPARK_SUBMIT = Path(pyspark.__file__).resolve().parent / "bin" / "spark-submit"


def _submit(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    # No PYTHONPATH and a working directory outside the repository: the entry script finds the package itself.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JBOD_", "PYSPARK_", "PYTHONPATH"))}
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False, cwd=cwd, env=env)


def _shuffle_partitions(checkpoint: Path) -> str:
    """The shuffle partitions Spark recorded in the first micro-batch's offset log (fixed there for good)."""
    lines = (checkpoint / "offsets" / "0").read_text().splitlines()
    return str(json.loads(lines[1])["conf"]["spark.sql.shuffle.partitions"])


def _assert_demo_tables(tables: Path) -> None:
    _, log = model_log([DEMO_INPUT])
    [cluster] = clusters(tables)
    assert_tables_match_model(tables, [DEMO_INPUT], cluster, step_offsets(log, limit=12))


@pytest.mark.slow
def test_run_under_spark_submit_uses_its_session(tmp_path: Path) -> None:
    tables = tmp_path / "tables"
    done = _submit([str(SPARK_SUBMIT), "--master", "local[1]", "--conf", "spark.sql.shuffle.partitions=3",
                    "--conf", f"spark.pyspark.python={sys.executable}", str(SUBMIT_SCRIPT),
                    "run", "--input", str(DEMO_INPUT), "--tables", str(tables), "--json"], tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    # The local profile says local[2] and 2 shuffle partitions: spark-submit's settings won.
    assert "launched by spark-submit: its master (local[1])" in done.stdout + done.stderr
    assert _shuffle_partitions(tables / "_checkpoints" / "replay") == "3"
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    [cluster] = summary["clusters"]
    assert cluster["offlineReasons"] == {"DIRECTORY_OFFLINE": 3}
    _assert_demo_tables(tables)


@pytest.mark.slow
def test_the_printed_spark_submit_line_runs_a_job_of_the_jobs_file(tmp_path: Path) -> None:
    tables = tmp_path / "tables"
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(f"version: 1\njobs:\n  ingest: {{command: run, args: [--tables, '{tables}'], profile: local}}\n")
    printed = CliRunner().invoke(app, ["jobs", "spark-submit", "ingest", "--file", str(jobs)])
    assert printed.exit_code == 0, printed.output
    argv = shlex.split(printed.stdout)
    assert argv[argv.index("--master") + 1] == "local[2]"  # the profile's master …
    argv[0] = str(SPARK_SUBMIT)
    script = argv.index(str(SUBMIT_SCRIPT))
    argv[script:script] = ["--master", "local[1]"]  # … which an operator overrides on the spark-submit line
    done = _submit(argv, tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    output = done.stdout + done.stderr
    assert "job ingest: jbod run --tables" in output
    assert "launched by spark-submit: its master (local[1])" in output
    # Spark's start-up INFO lines (about forty with its default log4j2 profile) stay out of the job's output.
    assert " INFO " not in output and "Using Spark's default log4j profile" not in output, output[:4000]
    _assert_demo_tables(tables)
