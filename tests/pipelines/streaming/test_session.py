"""The job's Spark session (``pipelines.streaming.job.spark_session``): what the JVMs it starts inherit."""

from __future__ import annotations

import os

from pyspark.sql import SparkSession

from pipelines.streaming.job import MALLOC_ARENAS


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


def test_the_source_and_the_operator_share_one_python_worker_daemon(spark: SparkSession) -> None:
    """Spark keeps one Python worker daemon per set of environment variables its runners pass: the data source's
    reader passes ``SPARK_SIMPLIFIED_TRACEBACK`` when simplified tracebacks are on, transformWithStateInPandas does
    not, and a second daemon then started (importing the job's modules again) inside the first batch's operator
    stage. The job turns them off; its errors are read from the exception's last line, which a full traceback keeps
    (test_job_errors.py)."""
    assert spark.conf.get("spark.sql.execution.pyspark.udf.simplifiedTraceback.enabled") == "false"
