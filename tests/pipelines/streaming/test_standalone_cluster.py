"""The job on a real Spark cluster: a standalone master and two one-core workers started from the pyspark package on
loopback (``tests/support/standalone_support.py``), the job run against it (in its own driver process: one
SparkContext per process), tables compared with the model; one cluster's replay buckets run on both workers.
``benchmarks/spark_benchmark.py --runs standalone[2]:4`` times the job on such a cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from spark_support import assert_tables_match_model, step_offsets
from standalone_support import standalone_cluster

from jbod_model.simulator.churn import ChurnSpec, churn_log
from jbod_model.simulator.output import write_jsonl_file, write_metadata_dir


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    logs = tmp_path_factory.mktemp("spark-logs")
    with standalone_cluster(logs, workers=2) as url:
        yield url, logs


DRIVER = """
import json, sys
from pipelines.streaming.job import run_job
summary = run_job(json.loads(sys.argv[1]), sys.argv[2], master=sys.argv[3], max_entries_per_batch=int(sys.argv[4]),
                  conf={"spark.pyspark.python": sys.executable, "spark.executor.memory": "768m",
                        "spark.sql.shuffle.partitions": "2"}, buckets=4)
print(json.dumps(summary.to_json()))
"""


@pytest.mark.slow
def test_the_job_on_a_standalone_cluster(standalone: tuple[str, Path], tmp_path: Path) -> None:
    url, _logs = standalone
    log_entries = churn_log(ChurnSpec(seed=11, operations=40))
    jsonl_entries = churn_log(ChurnSpec(seed=12, operations=30, brokers=4))
    node = write_metadata_dir(tmp_path / "in" / "node-1", log_entries, cluster_id="on-cluster-log",
                              records_per_segment=30)
    jsonl = write_jsonl_file(tmp_path / "in" / "on-cluster-jsonl.jsonl", jsonl_entries)
    tables = tmp_path / "tables"
    done = subprocess.run([sys.executable, "-c", DRIVER, json.dumps([str(tmp_path / "in")]), str(tables),
                           url, "40"], capture_output=True, text=True, timeout=600, check=False,
                          env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable})
    assert done.returncode == 0, done.stderr[-4000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert {c["clusterId"] for c in summary["clusters"]} == {"on-cluster-log", "on-cluster-jsonl"}
    assert summary["batches"] >= 2
    # The JVM the job started wrote its own output (log4j, the Python workers' chatter) to a log, not to stderr.
    driver_log = (tables / "_checkpoints" / "spark-driver.log").read_text()
    assert "TransformWithStateInPandas" in driver_log and "TransformWithStateInPandas" not in done.stderr
    assert_tables_match_model(tables, [node], "on-cluster-log", step_offsets(log_entries, limit=10))
    assert_tables_match_model(tables, [jsonl], "on-cluster-jsonl", step_offsets(jsonl_entries, limit=10))
