"""The job's Spark session: the settings its driver's JVM starts with, the session itself (:func:`spark_session`), that
JVM started early, while a ``jbod run`` process still imports the job (:func:`start_jvm_for`), and the session's Python
workers started while the driver plans the stream (:func:`warm_workers`).

Light on purpose: pyspark loads only inside the functions, so a command can start the JVM before it imports the job's
modules (pyspark.sql, pandas, pyarrow, deltalake, the model: about a second) and the two overlap.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pipelines.config.profiles import JobConfig
from pipelines.streaming.classdata import archive_options, cache_dir, release
from pipelines.streaming.daemon import warm_up
from pipelines.streaming.sparkhome import use_python_home

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: The driver JVM's log (its stdout and stderr, and its Python workers'), beside a job's checkpoint.
DRIVER_LOG = "spark-driver.log"

#: The JVM options of the driver and the executors: the C1 JIT alone (see :data:`DEFAULT_CONF`).
JIT_OPTIONS = "-XX:TieredStopAtLevel=1"

#: The driver's JVM stops when it runs out of memory, instead of living on without the thread that ran out: a
#: micro-batch's output is gathered on the driver, and a batch too big for its heap killed the thread that fetches
#: task results (``task-result-getter``) — the job then waited for them forever, saying nothing (200 k benchmark log,
#: ``--max-entries-per-batch 650000`` with the default 3 GB: docs/state-design.md, "A batch too big for the driver").
#: Stopped, it is a failure the job names (:func:`jvm_stopped`). An operator's own choice of what the JVM does on
#: running out of memory (:data:`OOM_OPTIONS`) is left alone.
EXIT_ON_OOM = "-XX:+ExitOnOutOfMemoryError"
OOM_OPTIONS = ("OnOutOfMemoryError", "ExitOnOutOfMemoryError", "CrashOnOutOfMemoryError")


def with_exit_on_oom(options: str) -> str:
    """The driver's JVM options with :data:`EXIT_ON_OOM` added, unless they already say what to do on running out of
    memory."""
    if any(name in options for name in OOM_OPTIONS):
        return options
    return f"{options} {EXIT_ON_OOM}".strip()

#: glibc's malloc arenas in the JVMs the job starts (the driver's, started here; executors' through
#: ``spark.executorEnv``). glibc gives each thread that allocates natively an arena of its own, up to eight per
#: core, and the JVM's threads (RocksDB's, Arrow's, the codecs') kept them all resident: at 2 M partitions the
#: driver's JVM was resident 4.4–5.5 GB with a 2–3 GB heap, 3.9 GB with 2 arenas and a 3 GB heap
#: (docs/state-design.md, "thirteenth round"). An operator's own ``MALLOC_ARENA_MAX`` wins.
MALLOC_ARENAS = "2"

#: Settings every session of the job needs, whatever the profile says: the RocksDB state store
#: (transformWithStateInPandas requires it) and a small, fixed number of state partitions.
REQUIRED_CONF: Mapping[str, str] = {
    "spark.sql.streaming.stateStore.providerClass":
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
}
DEFAULT_CONF: Mapping[str, str] = {
    "spark.sql.shuffle.partitions": "2",
    # A micro-batch's output is collected by the driver (foreachBatch → delta-rs); 1g (Spark's default) is short.
    "spark.driver.memory": "3g",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
    "spark.sql.session.timeZone": "UTC",
    # pyspark's worker daemon without a per-task re-read of the jars on the workers' path (≈ 0.8 s a task):
    # pipelines/streaming/daemon.py.
    "spark.python.daemon.module": "pipelines.streaming.daemon",
    # One worker daemon for the source's reads and the operator, not two: Spark keeps a daemon per set of
    # environment variables its runners pass, and the data source's reader passes SPARK_SIMPLIFIED_TRACEBACK where
    # transformWithStateInPandas does not — a second daemon started (and imported the job's modules) in the first
    # batch's operator stage. The job's errors are read from the exception's last line (``_MODEL_ERROR``), which the
    # full traceback keeps. Incremental run over the 200 k log: 7.4-7.5 -> 7.0 s (docs/state-design.md, "twentieth
    # round").
    "spark.sql.execution.pyspark.udf.simplifiedTraceback.enabled": "false",
    # The JVM's share of the job is light (Arrow in and out of the Python workers, the state store's socket, a few
    # packets through the shuffle), but C2, the optimizing JIT, spent half of the JVM's CPU compiling it — as much as
    # the Python workers' replay on the 20 k cluster. C1 alone halved the JVM's CPU and cut the run by a third
    # (docs/state-design.md, "Packets and the JIT").
    "spark.driver.extraJavaOptions": JIT_OPTIONS,
    "spark.executor.extraJavaOptions": JIT_OPTIONS,
    "spark.executorEnv.MALLOC_ARENA_MAX": MALLOC_ARENAS,
}


#: Settings of :data:`DEFAULT_CONF` that describe how the driver JVM was started and where it listens: under
#: spark-submit they are spark-submit's (``--driver-memory``, the host it runs on), so the job does not add them.
LAUNCH_CONF_KEYS = frozenset({"spark.driver.memory", "spark.driver.bindAddress", "spark.driver.host",
                              "spark.driver.extraJavaOptions"})


def submitted_conf() -> dict[str, str] | None:
    """The ``spark.*`` settings of the JVM that launched this Python process — spark-submit's ``--master``,
    ``--conf``, ``--driver-memory`` and spark-defaults.conf — or None when this process was not launched by one.

    The test is the one pyspark itself makes: spark-submit (and the ``pyspark`` shell) start Python with
    ``PYSPARK_GATEWAY_PORT`` set, pointing at the JVM that is already running with its SparkConf; a plain ``python``
    process starts its own JVM later and never has it. The conf is read only then, so a plain process does not start
    a JVM early (it would start without the session's launch settings, e.g. the driver memory)."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return None
    from pyspark import SparkConf, SparkContext  # noqa: PLC0415 - only when a JVM is already there

    SparkContext._ensure_initialized()  # connects to the running gateway; starts nothing
    return {str(k): str(v) for k, v in SparkConf().getAll()}


def _prepare_driver_jvm(settings: dict[str, str]) -> None:
    """Before this process starts its JVM (pyspark keeps one per process, across sessions: one already running was
    started with its options): a Spark home whose Python processes import the installed pyspark
    (``sparkhome``), the JVM's class-data archive (``classdata``), and its end on running out of memory
    (:data:`EXIT_ON_OOM`)."""
    from pyspark import SparkContext  # noqa: PLC0415 - pyspark's own state, as builder.getOrCreate reads it
    from pyspark.find_spark_home import _find_spark_home  # noqa: PLC0415

    if SparkContext._gateway is not None:
        return
    use_python_home(cache_dir())
    key = "spark.driver.extraJavaOptions"
    options = settings.get(key, "")
    jars = Path(_find_spark_home()) / "jars"  # type: ignore[no-untyped-call]
    extra = archive_options(options, jars, settings.get("spark.driver.memory", ""))
    settings[key] = with_exit_on_oom(f"{options} {extra}".strip())


def _local_environment() -> None:
    """What a JVM started by this process, and its Python workers, inherit: loopback networking, this interpreter,
    few malloc arenas. Values already set (the operator's) are kept."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # Read by glibc when the driver's JVM starts (it inherits this environment), and by its Python workers.
    os.environ.setdefault("MALLOC_ARENA_MAX", MALLOC_ARENAS)


def _launch(master: str, app_name: str, settings: Mapping[str, str], jvm_log: Path | None) -> None:
    """Start this process's driver JVM as ``SparkSession.builder.getOrCreate`` would (pyspark's ``launch_gateway``,
    the session's settings on spark-submit's command line), its stdout and stderr appended to ``jvm_log`` (None:
    this process's own). The session made next finds it running and uses it."""
    from pyspark import SparkConf, SparkContext  # noqa: PLC0415 - Spark only when a session is made
    from pyspark.java_gateway import launch_gateway  # noqa: PLC0415

    conf = SparkConf().setAll([("spark.master", master), ("spark.app.name", app_name), *settings.items(),
                               *REQUIRED_CONF.items()])
    if jvm_log is None:
        gateway = launch_gateway(conf)  # type: ignore[no-untyped-call]
    else:
        # The JVM's output — log4j, and the Python workers it starts, which print a line per stateful call — is
        # noise in an operator's terminal; failures still reach the caller as exceptions.
        jvm_log.parent.mkdir(parents=True, exist_ok=True)
        with jvm_log.open("ab") as log:
            gateway = launch_gateway(conf, popen_kwargs={"stdout": log, "stderr": log})  # type: ignore[no-untyped-call]
    SparkContext._ensure_initialized(gateway=gateway)


class Background:
    """``call()`` on a thread of its own, started now: :meth:`join` waits for it; :attr:`error` is what it raised,
    for the caller to raise when it waits (a thread's exception would otherwise only be printed)."""

    def __init__(self, call: Callable[[], object], name: str, *, daemon: bool = False) -> None:
        self.error: BaseException | None = None
        self._call = call
        self._thread = threading.Thread(target=self._run, name=name, daemon=daemon)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._call()
        except BaseException as e:
            self.error = e

    def join(self) -> None:
        self._thread.join()


class _EarlyJvm:
    """A driver JVM being started on a thread of its own (:func:`start_jvm`), for the session asked for next."""

    def __init__(self, master: str, app_name: str, asked: dict[str, str], settings: dict[str, str],
                 jvm_log: Path | None) -> None:
        self.key = (master, app_name, asked, jvm_log)
        #: The settings as the JVM starts with them (the class-data archive's options added).
        self.settings = settings
        # A daemon: a process that ends before its session (a bad input) does not wait for the launch.
        self.launch = Background(lambda: self._start(master, app_name, jvm_log), "kraft-jbod-jvm-start",
                                 daemon=True)

    def _start(self, master: str, app_name: str, jvm_log: Path | None) -> None:
        try:
            _launch(master, app_name, self.settings, jvm_log)
        except BaseException:  # raised again by the session that waits for it
            release(self.settings.get("spark.driver.extraJavaOptions", ""))
            raise


#: The JVM :func:`start_jvm` is starting, until a session takes it (at most one).
_pending: list[_EarlyJvm] = []


def start_jvm(master: str = "local[2]", conf: Mapping[str, str] | None = None, app_name: str = "kraft-jbod",
              jvm_log: Path | None = None) -> None:
    """Start the driver's JVM now, on a thread of its own, for a :func:`spark_session` asked for later in this
    process with the same arguments: its 1.4 s launch overlaps whatever the process does meanwhile — a ``jbod run``
    imports the job's modules. Nothing is started when there is nothing to overlap (the job's modules already
    loaded: a second run in one process, a test), under spark-submit (its JVM runs already), with a JVM running or
    starting, or when the JVM would dump a class-data archive at its exit: a JVM that ends before its session (the
    run's input turned out bad) would leave an archive of the few classes it loaded."""
    if "pipelines.streaming.job" in sys.modules or "PYSPARK_GATEWAY_PORT" in os.environ or _pending:
        return
    # pyspark imported here, on the caller's thread: the thread started below imports nothing while the caller
    # imports (two threads importing one package can each wait on a module the other holds).
    import pyspark.java_gateway  # noqa: PLC0415, F401 - what _launch calls
    from pyspark import SparkContext  # noqa: PLC0415

    if SparkContext._gateway is not None:
        return
    _local_environment()
    asked = {**DEFAULT_CONF, **(conf or {})}
    settings = dict(asked)
    _prepare_driver_jvm(settings)
    options = settings.get("spark.driver.extraJavaOptions", "")
    if "-XX:ArchiveClassesAtExit=" in options:
        release(options)
        return
    _pending.append(_EarlyJvm(master, app_name, asked, settings, jvm_log))


def replay_checkpoint(config: JobConfig) -> Path:
    """The checkpoint of the job's query (``pipelines.streaming.job.run_with_config``) under a configuration's
    checkpoint folder."""
    return config.checkpoint_dir / "replay"


def start_jvm_for(config: JobConfig, inputs: Sequence[Path]) -> None:
    """:func:`start_jvm` for the session :func:`pipelines.streaming.job.run_with_config` asks for, its log in the
    configuration's checkpoint folder, when the run will ask for one: a first run (no checkpoint folder yet) whose
    ``inputs`` all hold metadata — one that does not is refused before Spark, and leaves no new folder behind —, or a
    later run whose inputs hold something past its checkpoint — one with nothing new starts no Spark
    (``pipelines.streaming.source.caught_up``)."""
    from pipelines.streaming.source import caught_up, without_metadata  # noqa: PLC0415 - pyspark's data source API

    checkpoints = config.checkpoint_dir.resolve()
    try:
        if checkpoints.is_dir():
            if caught_up(inputs, replay_checkpoint(config).resolve(), cluster_id=config.cluster_id,
                         policy=config.read_policy):
                return
        elif without_metadata(inputs, cluster_id=config.cluster_id):
            return
    except Exception:  # an input this cannot read is the job's to report, in its own words
        return
    start_jvm(config.spark.master, config.spark.conf, jvm_log=checkpoints / DRIVER_LOG)


def _driver_jvm(master: str, app_name: str, asked: dict[str, str], jvm_log: Path | None) -> dict[str, str]:
    """The driver's JVM for a session of these settings: the one :func:`start_jvm` started for it (waited for), one
    already running, or one started here. The settings returned are those it was started with."""
    from pyspark import SparkContext  # noqa: PLC0415 - pyspark's own state, as builder.getOrCreate reads it

    early = _pending.pop() if _pending else None
    if early is not None:
        early.launch.join()
        if early.key == (master, app_name, asked, jvm_log):
            if early.launch.error is not None:
                raise early.launch.error
            return early.settings
    settings = dict(asked)
    if SparkContext._gateway is not None:
        return settings
    _prepare_driver_jvm(settings)
    try:
        _launch(master, app_name, settings, jvm_log)
    except BaseException:
        release(settings.get("spark.driver.extraJavaOptions", ""))
        raise
    return settings


def spark_session(master: str = "local[2]", conf: Mapping[str, str] | None = None,
                  app_name: str = "kraft-jbod", jvm_log: Path | None = None) -> SparkSession:
    """A session for the job: loopback networking, this interpreter for Python workers, the required conf; a JVM
    started here maps a class-data archive of Spark's classes and runs in a Spark home without pyspark's zip
    (:func:`_prepare_driver_jvm`). A JVM :func:`start_jvm` started for the same arguments is waited for and used.

    Under spark-submit (:func:`submitted_conf`) spark-submit's settings win: its master and app name are kept
    (``master`` is ignored), a ``spark.*`` key it set is not overridden by ``conf`` (the profile), the launch
    defaults (:data:`LAUNCH_CONF_KEYS`) and the Python interpreter are left to it, and only keys it left unset are
    taken from ``conf`` and the defaults. :data:`REQUIRED_CONF` is set either way: the job cannot run without it.

    ``jvm_log``: where a JVM started here writes its stdout and stderr — log4j, and the Python workers, which print
    a line per stateful call: noise in an operator's terminal. Failures still reach the caller as exceptions."""
    from pyspark.sql import SparkSession  # noqa: PLC0415 - Spark only when a session is made

    submitted = submitted_conf()
    if submitted is None:
        _local_environment()
        builder = SparkSession.builder.master(master).appName(app_name)
        settings = _driver_jvm(master, app_name, {**DEFAULT_CONF, **(conf or {})}, jvm_log)
    else:
        builder = SparkSession.builder
        if "spark.app.name" not in submitted:
            builder = builder.appName(app_name)
        defaults = {k: v for k, v in DEFAULT_CONF.items() if k not in LAUNCH_CONF_KEYS}
        settings = {k: v for k, v in {**defaults, **(conf or {})}.items() if k not in submitted}
    for key, value in {**settings, **REQUIRED_CONF}.items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    except BaseException:
        release(settings.get("spark.driver.extraJavaOptions", ""))
        raise
    spark.sparkContext.setLogLevel("ERROR")
    if submitted is not None:
        # Say so: an operator who set a master in the profile should see why another one is used.
        print(f"kraft-jbod: launched by spark-submit: its master ({spark.sparkContext.master}) and settings are "
              f"used; added where it set none: {', '.join(sorted(settings)) or 'nothing'}", file=sys.stderr)
    return spark


#: The job group of :func:`warm_workers`' job (the Spark UI and ``statusTracker`` list it under it).
WARM_UP_GROUP = "kraft-jbod-warm-up"
#: The Spark applications (their ids) whose workers :func:`warm_workers` has started in this process.
_warmed: set[str] = set()


def warm_workers(session: SparkSession) -> Background | None:
    """Start the session's Python worker daemon and a worker per core now, on a thread of its own, with a job of one
    trivial task per core (:func:`pipelines.streaming.daemon.warm_up`); None when this process already did for the
    session.

    A stream's first tasks otherwise start them: the daemon imports the job's modules before it forks a worker
    (``pipelines.streaming.daemon.PRELOAD``, ≈ 0.8 s of a core) — after the driver has planned the stream, which
    runs pyspark's planning processes one at a time (the data source's creation, its stream reader, the stateful
    operator's driver runner, the read's partitions: about a core for 4–5 s). Started now, the daemon and its
    workers are ready on the other core when the stream's first tasks come: Spark keeps one daemon per worker
    environment, and the data source's reads, the operator and this job share one (``DEFAULT_CONF``), whose idle
    workers the next tasks reuse. Measured on the 200 k-partition benchmark log (docs/state-design.md,
    "twenty-second round").

    Its errors are kept on the handle returned (``Background.error``), never raised: the stream's own tasks start
    the workers if this did not, and say what failed."""
    sc = session.sparkContext
    app = sc.applicationId
    if app in _warmed:
        return None
    _warmed.add(app)
    tasks = max(1, sc.defaultParallelism)

    def run() -> None:
        sc.setJobGroup(WARM_UP_GROUP, "kraft-jbod: start the Python workers", interruptOnCancel=True)
        session.range(0, tasks, 1, tasks).mapInArrow(warm_up, "id long").collect()

    return Background(run, "kraft-jbod-warm-workers", daemon=True)
