"""The job's Spark session (``pipelines.streaming.job.spark_session``): what the JVMs it starts inherit."""

from __future__ import annotations

import os
from pathlib import Path

from pyspark.sql import SparkSession

from jbod_model.simulator.churn import ChurnSpec, churn_log
from jbod_model.simulator.output import write_metadata_dir
from pipelines.streaming.job import MALLOC_ARENAS, run_job


def test_the_jvm_and_its_python_workers_start_with_few_malloc_arenas(spark: SparkSession) -> None:
    """The driver's JVM and the Python workers it starts run with ``MALLOC_ARENA_MAX`` set (an operator's own value
    kept, else :data:`MALLOC_ARENAS`), and executors started by a cluster manager get it through
    ``spark.executorEnv``: glibc's per-thread arenas kept gigabytes of the JVM resident at 2 M partitions."""
    expected = os.environ.get("MALLOC_ARENA_MAX")
    assert expected is not None
    assert spark.sparkContext._jvm.java.lang.System.getenv("MALLOC_ARENA_MAX") == expected  # type: ignore[union-attr]
    seen = spark.sparkContext.parallelize([0], 1).map(lambda _: os.environ.get("MALLOC_ARENA_MAX")).collect()
    assert seen == [expected]
    assert spark.conf.get("spark.executorEnv.MALLOC_ARENA_MAX") == MALLOC_ARENAS


def test_no_python_worker_daemon_of_the_job_runs_with_simplified_tracebacks(spark: SparkSession,
                                                                            tmp_path: Path) -> None:
    """Spark keeps one Python worker daemon per set of environment variables its runners pass: with simplified
    tracebacks on, the data source's reader passes ``SPARK_SIMPLIFIED_TRACEBACK`` and transformWithStateInPandas
    does not, and a second daemon started (importing the job's modules again) inside the first batch's operator
    stage. The job turns them off, so after a run no daemon the session's JVM started carries the variable. Its
    errors are read from the exception's last line, which a full traceback keeps (test_job_errors.py)."""
    assert spark.conf.get("spark.sql.execution.pyspark.udf.simplifiedTraceback.enabled") == "false"
    write_metadata_dir(tmp_path / "in" / "node-1", churn_log(ChurnSpec(seed=4, operations=20)), cluster_id="one")
    run_job([tmp_path / "in"], tmp_path / "tables", tmp_path / "checkpoint", spark=spark)
    jvm = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()  # type: ignore[union-attr]
    daemons = []
    for proc in Path("/proc").iterdir():
        try:
            parent = int((proc / "stat").read_text().rpartition(")")[2].split()[1])
            command = (proc / "cmdline").read_bytes()
            environment = (proc / "environ").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
        if parent == jvm and b"pipelines.streaming.daemon" in command:
            daemons.append([v for v in environment if v.startswith(b"SPARK_SIMPLIFIED_TRACEBACK=")])
    assert daemons, "the run started no worker daemon of the job's"
    assert daemons == [[]] * len(daemons)
