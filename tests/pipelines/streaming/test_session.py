"""The job's Spark session (``pipelines.streaming.session.spark_session``): what the JVMs it starts inherit."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from unittest.mock import patch

from pyspark.sql import SparkSession

import pipelines.streaming.job
import pipelines.streaming.source
from jbod_model.errors import InputError
from jbod_model.simulator.churn import ChurnSpec, churn_log
from jbod_model.simulator.output import write_metadata_dir
from pipelines.config.profiles import JobConfig
from pipelines.streaming import session
from pipelines.streaming.job import run_job
from pipelines.streaming.session import MALLOC_ARENAS, WARM_UP_GROUP, warm_workers


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


def test_a_sessions_python_workers_are_started_once_by_a_job_of_a_task_per_core(spark: SparkSession) -> None:
    """``warm_workers`` runs one job in its group, one task per core, which succeeds: the daemon and a worker per
    core are up when a stream's first tasks come. A second call (every ``run_job`` makes one) starts nothing: the
    session's workers are started already — by the call here, or by a run of an earlier test."""
    started = warm_workers(spark)
    if started is not None:
        started.join()
        assert started.error is None
    assert warm_workers(spark) is None
    tracker = spark.sparkContext.statusTracker()
    # An earlier test's run may have ended before its warm-up did (a bad input refused at once): wait for it.
    deadline = time.monotonic() + 120
    while True:
        jobs = tracker.getJobIdsForGroup(WARM_UP_GROUP)
        job = tracker.getJobInfo(jobs[0]) if len(jobs) == 1 else None
        if (job is not None and job.status != "RUNNING") or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert len(jobs) == 1
    assert job is not None and job.status == "SUCCEEDED"
    stages = [tracker.getStageInfo(s) for s in job.stageIds]
    assert [(s.numTasks, s.numCompletedTasks) for s in stages if s is not None] == \
        [(spark.sparkContext.defaultParallelism, spark.sparkContext.defaultParallelism)]


def test_a_run_starts_the_workers_of_the_session_it_runs_on(spark: SparkSession, tmp_path: Path) -> None:
    """``run_job`` asks for its session's workers (``warm_workers``: once a session, so every run may ask)."""
    asked: list[SparkSession] = []
    write_metadata_dir(tmp_path / "in" / "node-1", churn_log(ChurnSpec(seed=5, operations=5)), cluster_id="one")
    with patch.object(pipelines.streaming.job, "warm_workers", side_effect=asked.append):
        run_job([tmp_path / "in"], tmp_path / "tables", tmp_path / "checkpoint", spark=spark)
    assert asked == [spark]


# A fresh interpreter: this one's JVM runs already, and it has the job's modules loaded.
_EARLY_SCRIPT = """
import os, sys, time
from pathlib import Path

if sys.argv[2] == "job-loaded":
    import pipelines.streaming.job  # noqa: F401
from pipelines.streaming.session import spark_session, start_jvm

def javas():
    # This process's descendants running java (spark-submit's launcher, then the driver's JVM).
    parents = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        parents[int(proc.name)] = (int(stat.rpartition(")")[2].split()[1]), name)
    out = set()
    for pid, (parent, name) in parents.items():
        seen, up = set(), parent
        while up not in (0, os.getpid()) and up in parents and up not in seen:
            seen.add(up)
            up = parents[up][0]
        if up == os.getpid() and name == "java":
            out.add(pid)
    return out

log = Path(sys.argv[1])
# The operator's own class-data option: no archive is mapped or dumped, whatever the cache holds (one that would be
# dumped keeps the JVM from starting early: the last test).
conf = {"spark.driver.memory": "1g", "spark.driver.extraJavaOptions": "-Xshare:auto"}
if sys.argv[2] == "no-session":
    conf.pop("spark.driver.extraJavaOptions")
start_jvm("local[1]", conf, jvm_log=log)
deadline = time.monotonic() + 30
while not javas() and time.monotonic() < deadline and sys.argv[2] == "session":
    time.sleep(0.1)
time.sleep(1.0)
early = javas()
print("early:", bool(early))
if sys.argv[2] == "no-session":
    sys.exit(0)
asked = float(Path("/proc/uptime").read_text().split()[0])  # seconds since boot, as /proc's start times count
spark = spark_session("local[1]", conf, jvm_log=log)
pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
# When the session's JVM process started (spark-submit's script, which execs it), against when the session was asked
# for: the launcher may still have been the java seen above.
ticks = int((Path("/proc") / str(pid) / "stat").read_text().rpartition(")")[2].split()[19])
started = ticks / os.sysconf("SC_CLK_TCK")
print("started before the session:", started < asked, spark.conf.get("spark.driver.memory"))
spark.stop()
"""


def _early(tmp_path: Path, mode: str, **env: str) -> tuple[list[str], str]:
    done = subprocess.run([sys.executable, "-c", _EARLY_SCRIPT, str(tmp_path / "driver.log"), mode],
                          capture_output=True, text=True, timeout=300, check=False, env={**os.environ, **env})
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines(), done.stderr


def test_a_jvm_started_early_is_the_session_s_and_writes_to_its_log(tmp_path: Path) -> None:
    """``start_jvm`` launches the driver's JVM on a thread of its own before any session is asked for (``jbod run``
    imports the job meanwhile); the session made next with the same arguments uses that JVM, with its settings,
    and the JVM's output goes to the job's log, not to the terminal."""
    lines, stderr = _early(tmp_path, "session")
    assert lines == ["early: True", "started before the session: True 1g"]
    assert "log4j" in (tmp_path / "driver.log").read_text()
    assert "log4j" not in stderr


def test_no_jvm_starts_early_where_nothing_would_overlap_it(tmp_path: Path) -> None:
    """With the job's modules already loaded (a test, a second run in one process) there is no import to overlap:
    the session starts its JVM itself, as before."""
    lines, _ = _early(tmp_path, "job-loaded")
    assert lines == ["early: False", "started before the session: False 1g"]


def test_no_jvm_starts_early_that_would_dump_a_class_data_archive(tmp_path: Path) -> None:
    """A JVM that dumps the class-data archive at its exit is not started early: if the run's input turns out bad,
    it would end before its session, and its archive would hold the few classes it had loaded. The file reserved
    for the dump is given back."""
    cache = tmp_path / "cache"
    lines, _ = _early(tmp_path, "no-session", KRAFT_JBOD_CACHE_DIR=str(cache))
    assert lines == ["early: False"]
    assert not list((cache / "jvm").glob("*.partial"))


def test_a_run_starts_its_jvm_early_only_when_it_will_run_spark(tmp_path: Path) -> None:
    """``start_jvm_for``: a first run (no checkpoint folder yet) whose inputs hold no metadata is refused before
    Spark — it starts no JVM and creates nothing —, and so does a later run whose inputs hold nothing past the
    checkpoint (it runs no Spark), or whose inputs that check cannot read (the job says what is wrong). The JVM's log
    goes into the checkpoint folder."""
    config = JobConfig(tables=tmp_path / "t")
    inputs = [tmp_path / "in"]
    with patch.object(session, "start_jvm") as start:
        session.start_jvm_for(config, inputs)
        assert not start.called and not (tmp_path / "t").exists()
        with patch.object(pipelines.streaming.source, "without_metadata", return_value=[]):
            session.start_jvm_for(config, inputs)
        assert start.call_count == 1
        (tmp_path / "t" / "_checkpoints").mkdir(parents=True)
        with patch.object(pipelines.streaming.source, "caught_up", return_value=True):
            session.start_jvm_for(config, inputs)
        with patch.object(pipelines.streaming.source, "caught_up", side_effect=InputError("unreadable")):
            session.start_jvm_for(config, inputs)
        assert start.call_count == 1
        with patch.object(pipelines.streaming.source, "caught_up", return_value=False) as check:
            session.start_jvm_for(config, inputs)
    check.assert_called_once_with(inputs, (tmp_path / "t" / "_checkpoints" / "replay").resolve(), cluster_id=None,
                                  policy="fail")
    assert start.call_count == 2
    start.assert_called_with(config.spark.master, config.spark.conf,
                             jvm_log=(tmp_path / "t" / "_checkpoints").resolve() / session.DRIVER_LOG)
