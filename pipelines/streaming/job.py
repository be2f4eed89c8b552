"""The main job: KRaft metadata files → structured-streaming stateful replay → Delta tables (``jbod run``).

:func:`run_job` wires the pieces: the ``kraft_metadata`` source (:mod:`pipelines.streaming.source`), the per-cluster
stateful replay (:mod:`pipelines.streaming.processor`), and an exactly-once ``foreachBatch`` sink
(:mod:`pipelines.lakehouse.tables`). By default it runs like ``Trigger.AvailableNow`` — everything available now, then
stop — for scheduled jobs; ``follow`` keeps the query running and picks up new files and grown segments. The checkpoint
holds the source offsets and the state store, so a later run (or a restart after a crash) continues exactly where the
last committed batch ended.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from py4j.protocol import Py4JError, Py4JJavaError
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession

from jbod_model.buckets import check_buckets
from jbod_model.errors import DecodeError, InputError, JbodError
from jbod_model.metadata_version import FEATURE_NAME, MetadataVersion
from jbod_model.records.metadata import NO_LEADER
from jbod_model.storage.log_reader import ReadPolicy
from pipelines.config.profiles import JobConfig, Trigger
from pipelines.lakehouse.staging import PARTS_DIR, STAGED_DIR, WriteBehind, flush_staged, read_parts, remove_parts
from pipelines.lakehouse.tables import (
    ENTITIES,
    DeltaRsWriter,
    DeltaSparkWriter,
    TableWriter,
    clusters,
    entity_state,
    last_offset,
    read_table,
)
from pipelines.streaming.processor import OUTPUT_SCHEMA, batch_rows, output_parts, settle_batch
from pipelines.streaming.session import DRIVER_LOG, Background, replay_checkpoint, spark_session, warm_workers
from pipelines.streaming.source import (
    SOURCE_NAME,
    available_offsets,
    caught_up,
    register,
    source_options,
    without_metadata,
)
from pipelines.streaming.stateful import ClusterReplayProcessor

#: Entries per micro-batch when not given, all clusters together (the source shares them out): bounds the memory of
#: a batch on a long log or a large fleet. Every batch pays a fixed price — planning, a task per state partition,
#: the state store's commit, a Delta commit per table — and rereads and rewrites each bucket's whole partitions
#: state, which grows with the cluster, so larger batches cost less per entry. 500 k against 250 k, `jbod run` over
#: the 2 M benchmark log: 346.1 → 302.0 s wall, the JVM's CPU 92.5 → 49.5 s, peak 3,647 → 3,885 MiB; over the 200 k
#: log 32.1 / 32.9 → 30.7 / 30.5 s, 2.4 → 2.9 GiB (docs/state-design.md, "twentieth round").
DEFAULT_MAX_ENTRIES_PER_BATCH = 500_000

#: Replay buckets per cluster when not given (``jbod_model.buckets``): a cluster's keys spread over the state
#: partitions, so one cluster uses every core of a small machine. Fixed into the checkpoint.
DEFAULT_BUCKETS = 4

#: The state layout a checkpoint of this job holds, written beside it (``kraft-jbod-state.json``): a checkpoint
#: of another layout — an older job, another bucket count — is refused before Spark reads its state. Layout 3: a
#: bucket's grouping key is chosen for its state partition (``pipelines.streaming.placement``), and the file
#: records the partition count the keys were chosen for. Layout 4: the broker → partitions index has 8 buckets
#: per broker, not 64 (``pipelines.streaming.processor.BROKER_INDEX_BUCKETS``). Layout 5: a partitions chunk keeps
#: each partition's text apart, as lines, not one JSON object.
#: Layout 6: the broker → partitions index keeps each replica's directory (the keys grouped by directory), so a
#: broker's registration change reaches its replicas without reading their partitions. Layout 7: 64 partition
#: chunks per bucket, not 256, and 2 index buckets per broker, not 8 — a batch writes a quarter as many values.
#: Layout 8: a partitions chunk names its partitions' directories by their index in a table of its own
#: (``pipelines.streaming.codec.PartitionChunk``), not by their ids' text. Layout 9: the partitions chunks and the
#: broker index are stored compressed, as binary (``pipelines.streaming.codec.packed_state``), not as strings.
STATE_LAYOUT_VERSION = 9
STATE_LAYOUT_FILE = "kraft-jbod-state.json"

@dataclass
class BatchStats:
    """One micro-batch as the sink saw it."""

    batch_id: int
    rows: int
    written: dict[str, int]
    seconds: float
    #: Of ``seconds``, the part spent computing the batch (source, stateful replay) before the table writes.
    compute_seconds: float = 0.0


@dataclass
class ClusterSummary:
    """Where one cluster stands after the run: from the tables, not from the job's memory."""

    cluster_id: str
    last_offset: int
    metadata_version: str
    brokers: int
    topics: int
    partitions: int
    replicas: int
    #: broker id → directory → number of offline replicas (directory is the recorded one, e.g. a failed disk).
    offline_by_broker_dir: dict[int, dict[str, int]]
    offline_reasons: dict[str, int]
    #: ``(topic name, partition id)`` of partitions without a leader.
    leaderless: list[tuple[str, int]]
    faults: list[str]
    #: ``log_gaps`` messages: offsets Kafka deleted before the job read them (it re-bootstrapped from a snapshot), and
    #: offsets skipped as unreadable (policy ``skip``).
    gaps: list[str] = field(default_factory=list)


@dataclass
class RunSummary:
    """What :func:`run_job` returns."""

    tables_dir: str
    checkpoint_dir: str
    batches: list[BatchStats] = field(default_factory=list)
    clusters: list[ClusterSummary] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def rows(self) -> int:
        return sum(b.rows for b in self.batches)

    def to_json(self) -> dict[str, Any]:
        return {"tables": self.tables_dir, "checkpoint": self.checkpoint_dir, "batches": len(self.batches),
                "rows": self.rows, "seconds": round(self.seconds, 3),
                "clusters": [{"clusterId": c.cluster_id, "lastOffset": c.last_offset,
                              "metadataVersion": c.metadata_version, "brokers": c.brokers, "topics": c.topics,
                              "partitions": c.partitions, "replicas": c.replicas,
                              "offlineByBrokerAndDirectory": {str(b): d for b, d in c.offline_by_broker_dir.items()},
                              "offlineReasons": c.offline_reasons,
                              "leaderlessPartitions": [{"topic": t, "partition": p} for t, p in c.leaderless],
                              "faults": c.faults, "gaps": c.gaps}
                             for c in self.clusters]}


def query_id(checkpoint_dir: Path) -> str:
    """The streaming query's id, kept in the checkpoint: the same across restarts, so it keys the Delta app
    transactions that make every micro-batch's writes idempotent."""
    meta = checkpoint_dir / "metadata"
    try:
        return str(json.loads(meta.read_text().splitlines()[0])["id"])
    except (OSError, ValueError, KeyError, IndexError) as e:
        raise JbodError(f"cannot read the streaming query id from {meta}: {e}") from e


def check_state_layout(checkpoint_dir: Path, buckets: int) -> None:
    """Refuse a checkpoint whose state another layout wrote (docs/state-design.md, "Changing the layout"); record
    the layout of a new one."""
    layout = {"version": STATE_LAYOUT_VERSION, "buckets": buckets}
    marker = checkpoint_dir / STATE_LAYOUT_FILE
    if marker.exists():
        try:
            found = json.loads(marker.read_text(encoding="utf-8"))
        except ValueError as e:
            raise JbodError(f"{marker} is not JSON: {e}") from e
        if found.get("version") != STATE_LAYOUT_VERSION:
            raise JbodError(f"the checkpoint {checkpoint_dir} holds state layout {found.get('version')}, this job "
                            f"writes layout {STATE_LAYOUT_VERSION}: replay into new tables from a new checkpoint")
        if found.get("buckets") != buckets:
            raise JbodError(f"the checkpoint {checkpoint_dir} was written with {found.get('buckets')} replay "
                            f"buckets per cluster, this run asks for {buckets}: a partition's bucket is fixed into "
                            f"the state; run with --buckets {found.get('buckets')}, or replay into new tables from a "
                            "new checkpoint")
        return
    if (checkpoint_dir / "offsets").is_dir() and any((checkpoint_dir / "offsets").iterdir()):
        raise JbodError(f"the checkpoint {checkpoint_dir} was written by an older kraft-jbod (state layout 1: one "
                        f"key per cluster); this job keys its state by cluster and replay bucket (layout "
                        f"{STATE_LAYOUT_VERSION}): replay into new tables from a new checkpoint")
    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps(layout), encoding="utf-8")


def state_key_partitions(checkpoint_dir: Path, session: SparkSession) -> int:
    """The state partitions the buckets' grouping keys are chosen for (``pipelines.streaming.placement``): the
    checkpoint's, recorded in its layout file by its first run from the session's ``spark.sql.shuffle.partitions``
    (which Spark too fixes into the checkpoint), so a bucket keeps its key across runs."""
    marker = checkpoint_dir / STATE_LAYOUT_FILE
    layout = json.loads(marker.read_text(encoding="utf-8"))
    if "partitions" not in layout:
        layout["partitions"] = int(session.conf.get("spark.sql.shuffle.partitions") or "200")
        marker.write_text(json.dumps(layout), encoding="utf-8")
    return int(layout["partitions"])


def halted_clusters(tables_dir: Path) -> dict[str, int]:
    """Cluster → the offset its first replay fault halted it at, from the ``replay_faults`` table."""
    if not (tables_dir / "replay_faults").exists():
        return {}
    out: dict[str, int] = {}
    for row in read_table(tables_dir, "replay_faults").to_pylist():
        at = row["offset"] if row["offset"] is not None else row["seq"]
        if at is not None:
            out[row["cluster_id"]] = min(int(at), out.get(row["cluster_id"], int(at)))
    return out


class _Sink:
    """The ``foreachBatch`` function: collect the batch once (it runs the stateful operator, whose tasks write the
    rows as files and return their names), read the files, settle the buckets' rows into the clusters'
    (``pipelines.streaming.processor.settle_batch``), and hand them to the write-behind
    (``pipelines.lakehouse.staging``): the batch is staged in the checkpoint and written while Spark computes the
    next one. :meth:`drain` waits for the last write."""

    def __init__(self, make_writer: Any, checkpoint_dir: Path,
                 on_batch: Callable[[BatchStats], None] | None = None,
                 halted: Callable[[], dict[str, int]] | None = None) -> None:
        self._make_writer = make_writer
        self._checkpoint_dir = checkpoint_dir
        self._behind: WriteBehind | None = None
        self._on_batch = on_batch
        self._load_halted = halted
        self._halted: dict[str, int] = {}
        self._computed: dict[int, tuple[int, float]] = {}
        self.stats: list[BatchStats] = []

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        if self._behind is None:
            writer = self._make_writer(f"kraft-jbod:{query_id(self._checkpoint_dir)}")
            writer.ensure_tables()
            self._behind = WriteBehind(writer, self._checkpoint_dir / STAGED_DIR, self._written)
            self._halted = self._load_halted() if self._load_halted is not None else {}
        parts = output_parts(df.toArrow())
        read = read_parts(parts)
        batch = settle_batch(read, self._halted)
        rows = batch_rows(batch)
        self._computed[batch_id] = (rows, time.monotonic() - started)
        if rows:
            # Settled as they were (nearly every batch): the operator's files are the batch, moved into its staging.
            as_read = batch.keys() == read.keys() and all(batch[name] is read[name] for name in read)
            self._behind.submit(batch_id, batch, parts if as_read else None)
        else:
            self._behind.drain()  # the batches' stats in order
            remove_parts(self._checkpoint_dir / STAGED_DIR, batch_id)
            self._written(batch_id, {}, 0.0)

    def _written(self, batch_id: int, written: dict[str, int], write_seconds: float) -> None:
        rows, compute = self._computed.pop(batch_id)
        self.stats.append(BatchStats(batch_id, rows, written, compute + write_seconds, compute))
        if self._on_batch is not None:
            self._on_batch(self.stats[-1])

    def drain(self) -> None:
        """Wait until every batch is in the tables (raise a failed write's error)."""
        if self._behind is not None:
            self._behind.drain()

    def close(self) -> None:
        """Once the query has stopped: wait for the write in flight and remove the operator's files of batches never
        staged (a stopped query's; Spark runs those batches again)."""
        if self._behind is not None:
            self._behind.close()
        remove_parts(self._checkpoint_dir / STAGED_DIR)


def run_job(inputs: Sequence[str | Path], tables_dir: str | Path, checkpoint_dir: str | Path | None = None, *,
            spark: SparkSession | None = None, master: str = "local[2]", conf: Mapping[str, str] | None = None,
            cluster_id: str | None = None, cluster_ids: Mapping[str, str] | None = None,
            max_entries_per_batch: int | None = None, delta_writer: str = "deltalake",
            writer_factory: Callable[[str], TableWriter] | None = None, follow: bool = False,
            follow_interval: str = "5 seconds", timeout_seconds: int | None = None,
            stop_when: Callable[[], bool] | None = None,
            policy: ReadPolicy = "fail", on_batch: Callable[[BatchStats], None] | None = None,
            on_session: Callable[[], None] | None = None, buckets: int | None = None,
            splits: int | None = None, min_split_entries: int | None = None,
            bulk_read_rows: int | None = None) -> RunSummary:
    """Replay ``inputs`` (metadata log dirs, JSONL, dump text; several clusters at once) into Delta tables under
    ``tables_dir``; the checkpoint defaults to ``<tables_dir>/_checkpoints/replay``.

    Without ``follow`` the job processes what is available when it starts and stops (``AvailableNow``), in
    micro-batches of at most ``max_entries_per_batch`` entries, all clusters together (default
    :data:`DEFAULT_MAX_ENTRIES_PER_BATCH`); with nothing past the checkpoint
    (:func:`pipelines.streaming.source.caught_up`) it runs nothing on Spark and starts no session. With ``follow``
    it keeps running, polling every ``follow_interval``, until ``timeout_seconds`` or until ``stop_when()`` returns
    true (polled every second; None: until interrupted).
    ``writer_factory`` (app id → writer) replaces the Delta writer, e.g. to inject a failure in a test.
    ``on_batch`` is called after each micro-batch is written (progress for a long replay), ``on_session`` once the
    Spark session is up (its start takes seconds: a progress display says what it waits for). ``buckets``: replay
    buckets per cluster (default :data:`DEFAULT_BUCKETS`; fixed into the checkpoint). ``splits``: tasks that read
    one cluster's range of a micro-batch (default: the session's default parallelism, its cores;
    ``pipelines.streaming.source.split_range``), of at least ``min_split_entries`` offsets each. A bucket's batch of
    at least ``bulk_read_rows`` rows reads its state whole (default
    :data:`pipelines.streaming.processor.BULK_READ_ROWS`).
    """
    if not inputs:
        raise InputError("no input given")
    if not follow:
        # A path holding no metadata would otherwise make a run that succeeds with nothing in it (a mistyped
        # folder, or a broker's data dir instead of its metadata dir); a followed folder may fill up later.
        empty = without_metadata(inputs, cluster_id=cluster_id, cluster_ids=cluster_ids)
        if empty:
            raise InputError(f"no KRaft metadata under {', '.join(empty)}: give a metadata log dir (the one holding "
                             "__cluster_metadata-0, or a folder of them), canonical JSONL or kafka-dump-log text "
                             "(--follow waits for files to appear)")
    tables = Path(tables_dir).resolve()
    checkpoint = Path(checkpoint_dir).resolve() if checkpoint_dir is not None else tables / "_checkpoints" / "replay"
    bucket_count = check_buckets(buckets if buckets is not None else DEFAULT_BUCKETS)
    check_state_layout(checkpoint, bucket_count)
    if writer_factory is None and delta_writer not in ("deltalake", "delta-spark"):
        raise InputError(f"unknown delta writer {delta_writer!r} (deltalake or delta-spark)")
    if not follow and delta_writer == "deltalake" and caught_up(inputs, checkpoint, cluster_id=cluster_id,
                                                                cluster_ids=cluster_ids, policy=policy):
        # Nothing past the checkpoint (a scheduled run over a quiet cluster): Spark would start, plan no batch and
        # stop, seconds for nothing. What a stopped run staged is still written, and the summary read.
        started = time.monotonic()
        _ready_tables(writer_factory or (lambda app_id: DeltaRsWriter(tables, app_id)), checkpoint)
        return _summarized(RunSummary(str(tables), str(checkpoint), seconds=time.monotonic() - started))
    own_session = spark is None
    jvm_log = checkpoint.parent / DRIVER_LOG
    log_start = jvm_log.stat().st_size if jvm_log.exists() else 0  # the log is appended to, run after run
    session = spark or spark_session(master, conf, jvm_log=jvm_log)
    # The Python workers started on the other core while the stream is planned (its first tasks would start them).
    warm_workers(session)
    if on_session is not None:
        on_session()
    driver_memory = session.sparkContext.getConf().get("spark.driver.memory", "1g")  # asked while the JVM is up
    register(session)
    if writer_factory is not None:
        make_writer = writer_factory
    elif delta_writer == "deltalake":
        def make_writer(app_id: str) -> TableWriter:
            return DeltaRsWriter(tables, app_id)
    else:
        def make_writer(app_id: str) -> TableWriter:
            return DeltaSparkWriter(session, tables, app_id)
    _ready_tables(make_writer, checkpoint)
    sink = _Sink(make_writer, checkpoint, on_batch, halted=lambda: halted_clusters(tables))
    cap = max_entries_per_batch if max_entries_per_batch is not None else DEFAULT_MAX_ENTRIES_PER_BATCH
    options = source_options(inputs, cluster_id=cluster_id, cluster_ids=dict(cluster_ids or {}),
                             max_entries_per_batch=cap, policy=policy, checkpoint=checkpoint,
                             buckets=bucket_count, key_partitions=state_key_partitions(checkpoint, session),
                             splits=splits if splits is not None else session.sparkContext.defaultParallelism,
                             min_split_entries=min_split_entries)
    if not follow:
        # AvailableNow: what is there now, in micro-batches of at most ``cap`` entries. Spark's own
        # AvailableNow would read one batch only from a Python source (no admission control), so the source is told
        # where to stop and the query runs until it has nothing more.
        options["endOffsets"] = json.dumps(available_offsets(options))
    started = time.monotonic()
    stream = session.readStream.format(SOURCE_NAME).options(**options).load()
    replayed = stream.groupBy("cluster_id", "bucket").transformWithStateInPandas(
        statefulProcessor=ClusterReplayProcessor(bucket_count, str(checkpoint / STAGED_DIR / PARTS_DIR),
                                                 bulk_read_rows),
        outputStructType=OUTPUT_SCHEMA,
        outputMode="Append", timeMode="None")
    writer = replayed.writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint))
    stopping: Background | None = None
    with _quiet_when_jvm_ends(session) if own_session else nullcontext():
        try:
            if follow:
                query = writer.trigger(processingTime=follow_interval).start()
                deadline = None if timeout_seconds is None else time.monotonic() + timeout_seconds
                while not query.awaitTermination(1):
                    if (stop_when is not None and stop_when()) or (deadline is not None
                                                                   and time.monotonic() > deadline):
                        break
                query.stop()
            else:
                query = writer.trigger(processingTime="0 seconds").start()
                query.processAllAvailable()
                query.stop()
            if query.exception() is not None:
                raise job_failure(str(query.exception()), _see(jvm_log, own_session))
            if own_session:
                # Nothing after the query needs Spark: the session stops (about a second of the JVM's) while the
                # last micro-batch's writes drain and the summary is read from the tables.
                stopping = Background(session.stop, "kraft-jbod-session-stop")
            sink.drain()
        except StreamingQueryException as e:
            raise job_failure(str(e), _see(jvm_log, own_session)) from e
        except Exception as e:
            # py4j's error, or the socket's, when the JVM is gone: whatever it is, the JVM's end is the cause to name.
            code = _jvm_ended_by(session, e)
            if code is None:
                raise
            log = _log_since(jvm_log, log_start) if own_session else ""
            raise jvm_stopped(code, log, driver_memory, cap, _see(jvm_log, own_session)) from e
        finally:
            sink.close()
            if stopping is None and own_session and _jvm_exit_code(session) is None:
                session.stop()
            elif stopping is not None and sys.exc_info()[1] is not None:
                stopping.join()  # the job's error is the one raised
    summary = _summarized(RunSummary(str(tables), str(checkpoint), sink.stats, seconds=time.monotonic() - started))
    if stopping is not None:
        stopping.join()
        if stopping.error is not None:
            raise stopping.error
    return summary


def _ready_tables(make_writer: Callable[[str], TableWriter], checkpoint: Path) -> None:
    """The tables exist from the start, so a run with nothing to do (or a reader right after) finds them; what a
    stopped run staged but may not have written (pipelines.lakehouse.staging) is written, before anything reads the
    tables (the halted clusters) or Spark runs the next batch."""
    make_writer("kraft-jbod:setup").ensure_tables()
    if (checkpoint / "metadata").exists():
        flush_staged(checkpoint / STAGED_DIR, make_writer(f"kraft-jbod:{query_id(checkpoint)}"))


def _summarized(summary: RunSummary) -> RunSummary:
    """``summary`` with where each cluster of its tables stands (:func:`summarize_cluster`)."""
    tables = Path(summary.tables_dir)
    if (tables / "records").exists():
        summary.clusters = [summarize_cluster(tables, c) for c in clusters(tables)]
    return summary


#: A model error raised inside the source or the operator reaches the driver as text in Spark's error: its last line
#: names the class and the message.
_MODEL_ERROR = re.compile(r"jbod_model\.errors\.(DecodeError|InputError): (.+)")


def job_failure(text: str, see: str) -> JbodError:
    """The error a failed query becomes: a bad input (undecodable bytes, a malformed file) read in the source is
    raised as the model error it was — its message names the file and offset, and the CLI gives it its own exit
    code — rather than as the Spark error wrapping it, whose Python and JVM stack traces bury that message."""
    found = _MODEL_ERROR.findall(text)
    if found:
        kind, message = found[-1]
        return (DecodeError if kind == "DecodeError" else InputError)(message.strip() + see)
    return JbodError(f"the Spark job failed: {text}{see}")


#: What HotSpot prints when :data:`pipelines.streaming.session.EXIT_ON_OOM` stops it.
_OOM = re.compile(r"Terminating due to java\.lang\.OutOfMemoryError: ([^\n]*)")


def jvm_stopped(exit_code: int, log: str, driver_memory: str, max_entries_per_batch: int, see: str) -> JbodError:
    """The error a run becomes when the driver's JVM stops under it (``exit_code``; ``log``: what it wrote during the
    run). Nothing is lost: what the job wrote stays, and the next run resumes from the checkpoint. Out of memory
    (``pipelines.streaming.session.EXIT_ON_OOM``), the way out is named: with a local master the driver's JVM is the
    executor too (a micro-batch's input rows, the shuffle, the state store's reads and writes pass through its
    heap; until the seventeenth round its whole output did), and the micro-batch that was running is run again as it
    was planned (its offsets are in the checkpoint) — so a larger heap; a smaller cap only shapes the micro-batches
    planned after it."""
    resume = "What the job wrote stays; the next run resumes from its checkpoint."
    found = _OOM.findall(log)
    if found:
        return JbodError(
            f"Spark's driver JVM ran out of memory ({found[-1].strip() or 'OutOfMemoryError'}; spark.driver.memory "
            f"{driver_memory}) running a micro-batch, and stopped. {resume} That micro-batch runs again "
            "as it was planned: give the next run a larger spark.driver.memory (the profile's spark.conf); a "
            f"smaller --max-entries-per-batch (this run's: {max_entries_per_batch}) keeps the micro-batches after it "
            f"smaller.{see}")
    return JbodError(f"Spark's driver JVM stopped (exit code {exit_code}) during the run. {resume}{see}")


#: How long a lost connection to the driver's JVM waits for it to exit before the error is raised as it came.
JVM_EXIT_WAIT = 10.0


def _jvm_exit_code(session: SparkSession, wait: float = 0.0) -> int | None:
    """The exit code of the driver's JVM if this process started it and it has stopped (within ``wait`` seconds),
    else None."""
    proc = getattr(session.sparkContext._gateway, "proc", None)
    if proc is None:
        return None
    try:
        code: int | None = proc.wait(timeout=wait) if wait > 0 else proc.poll()
    except subprocess.TimeoutExpired:
        return None
    return code


def _jvm_unanswered(error: BaseException) -> bool:
    """Whether ``error`` (or one it came from) is the JVM not answering: the connection lost, or py4j's error for a
    call that got no answer. A Java exception (``Py4JJavaError``) is an answer: the JVM is up."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, (ConnectionError, EOFError)) or (
                isinstance(seen, Py4JError) and not isinstance(seen, Py4JJavaError)):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _jvm_ended_by(session: SparkSession, error: BaseException) -> int | None:
    """The driver JVM's exit code if ``error`` came from its end (None: the JVM is up, or not this process's). The
    JVM's sockets close a moment before it has exited: an error of the JVM not answering waits for it."""
    return _jvm_exit_code(session, wait=JVM_EXIT_WAIT if _jvm_unanswered(error) else 0.0)


@contextmanager
def _quiet_when_jvm_ends(session: SparkSession) -> Iterator[None]:
    """Keep pyspark's and py4j's threads from printing their tracebacks when the driver's JVM stops under the job:
    the job raises one error naming the cause (:func:`jvm_stopped`), and a Python stack of a socket closing says
    nothing to an operator. Only what those threads report once the JVM has exited is dropped; with the JVM gone,
    the quiet stays (the process has no Spark left to report on)."""
    def jvm_ended(error: BaseException | None) -> bool:
        return error is not None and _jvm_ended_by(session, error) is not None

    class Quiet(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            return not (record.exc_info and "py4j" in record.pathname and jvm_ended(record.exc_info[1]))

    quiet = Quiet()
    loggers = [logging.getLogger(name) for name in ("", "py4j", "py4j.clientserver", "py4j.java_gateway")]
    for logger in loggers:
        logger.addFilter(quiet)
    server = getattr(session.sparkContext, "_accumulatorServer", None)
    handle_error = getattr(server, "handle_error", None)
    if server is not None and handle_error is not None:
        server.handle_error = lambda *args: None if jvm_ended(sys.exc_info()[1]) else handle_error(*args)
    try:
        yield
    finally:
        # After the JVM's end its threads may still be reporting it, after the job has raised: they stay quiet.
        if _jvm_exit_code(session) is None:
            for logger in loggers:
                logger.removeFilter(quiet)
            if server is not None and handle_error is not None:
                del server.handle_error


def _log_since(log: Path, start: int) -> str:
    try:
        with log.open("rb") as f:
            f.seek(start)
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _see(jvm_log: Path, own_session: bool) -> str:
    return f" (Spark's own log: {jvm_log})" if own_session and jvm_log.exists() else ""


def summarize_cluster(tables_dir: str | Path, cluster_id: str) -> ClusterSummary:
    """The cluster's latest state, from the tables: what :func:`~pipelines.lakehouse.tables.as_of_image` holds,
    read as the few columns the summary shows — counts, the offline replicas and the leaderless partitions, both
    in the image's key order. The image itself (every partition's arrays as JSON dicts) took 8 s of the 200 k
    cluster's run, after the last micro-batch, on the driver alone.

    The offline replicas are the open offline intervals (``offline_replicas``: a replica offline now has one, with
    its directory and reason), and the replicas are counted from the partitions' replica lists: resolving every
    replica's latest row (``replica_assignments``, 6 M keys at 2 M partitions) held 3.8 GB on the driver at the run's
    end, for the 1.5 M offline ones (docs/state-design.md, "eighteenth round")."""

    def state(name: str, *columns: str) -> pa.Table:
        return entity_state(tables_dir, ENTITIES[name], cluster_id, None, columns)

    levels = state("feature", "level")
    level = dict(zip(levels.column("name").to_pylist(), levels.column("level").to_pylist(), strict=True))
    topics = state("topic", "topic_name")
    names = dict(zip(topics.column("topic_id").to_pylist(), topics.column("topic_name").to_pylist(), strict=True))
    down = state("offline", "directory", "reason")
    offline: dict[int, dict[str, int]] = {}
    reasons: dict[str, int] = {}
    for broker_id, directory, reason in zip(*(down.column(c).to_pylist() for c in ("broker_id", "directory", "reason")),
                                            strict=True):
        per_dir = offline.setdefault(broker_id, {})
        per_dir[directory] = per_dir.get(directory, 0) + 1
        reasons[reason] = reasons.get(reason, 0) + 1
    partitions = state("partition", "leader", "replicas")
    # A replica is a (partition, broker) pair: a broker listed twice in a partition's replicas is one replica, as
    # in the replica view.
    lists = partitions.column("replicas").combine_chunks()
    replica_count = pa.table({"p": pc.list_parent_indices(lists), "b": pc.list_flatten(lists)}).group_by(
        ["p", "b"], use_threads=False).aggregate([]).num_rows
    no_leader = partitions.filter(pc.equal(partitions.column("leader"), NO_LEADER))
    leaderless = [(names.get(t, t), p) for t, p in zip(no_leader.column("topic_id").to_pylist(),
                                                        no_leader.column("partition_id").to_pylist(), strict=True)]
    quoted = cluster_id.replace("'", "''")
    faults = [str(r["message"]) for r in read_table(tables_dir, "replay_faults",
                                                     f"cluster_id = '{quoted}'").to_pylist()]
    gap_rows = read_table(tables_dir, "log_gaps", f"cluster_id = '{quoted}'").to_pylist()
    # A skipped JSONL line has no offset: it sorts after the ranges of offsets.
    gaps = [str(r["message"]) for r in sorted(gap_rows, key=lambda r: (r["first_missing_offset"] is None,
                                                                       r["first_missing_offset"] or 0))]
    return ClusterSummary(cluster_id=cluster_id, last_offset=last_offset(tables_dir, cluster_id),
                          metadata_version=MetadataVersion(int(level.get(FEATURE_NAME, 0))).name,
                          brokers=state("broker").num_rows, topics=topics.num_rows, partitions=partitions.num_rows,
                          replicas=replica_count, offline_by_broker_dir=offline, offline_reasons=reasons,
                          leaderless=leaderless, faults=faults, gaps=gaps)


def run_with_config(inputs: Sequence[str | Path], config: JobConfig, *, follow: bool | None = None,
                    timeout_seconds: int | None = None,
                    on_batch: Callable[[BatchStats], None] | None = None,
                    on_session: Callable[[], None] | None = None) -> RunSummary:
    """:func:`run_job` with a resolved configuration (``pipelines.config.profiles``: CLI > environment > profile)."""
    keep_following = config.trigger is Trigger.CONTINUOUS if follow is None else follow
    return run_job(inputs, config.tables, replay_checkpoint(config), master=config.spark.master,
                   conf=config.spark.conf, cluster_id=config.cluster_id,
                   max_entries_per_batch=config.max_entries_per_batch, delta_writer=config.delta_writer.value,
                   follow=keep_following, timeout_seconds=timeout_seconds, policy=config.read_policy,
                   on_batch=on_batch, on_session=on_session, buckets=config.buckets)


@contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send this process's stdout (file descriptor 1) to stderr while the block runs, so a command's own output on
    stdout stays machine-readable whatever Spark prints. Processes started inside the block keep the redirection."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
