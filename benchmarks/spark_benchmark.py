"""End-to-end benchmark of the Spark job against DuckDB and the pure model.

Generates a large JBOD cluster log (``jbod_model.simulator.churn``: brokers with several disks, topics, ISR churn,
disk failures, fencing, reassignments, deletions, transactions and mostly NoOps), writes it as a node's metadata log
dir and as canonical JSONL, then measures, in one run on the same machine:

1. DuckDB SQL over the JSONL records (``../shared/bench/duckdb_baseline.py``, final image only; its image is checked
   against the model's): the speed anchor every other time is a ratio to;
2. the pure model: read the log and replay it (``jbod_model``, one process, no Spark);
3. the Spark job (``pipelines.streaming.job.run_job``, deltalake tables) from an empty checkpoint for each ``--runs``
   MASTER:BUCKETS (e.g. ``local[1]:4,local[2]:4``: does one cluster use both cores?; ``standalone[2]:4``: on a
   standalone cluster of two one-core workers), session start apart, with its peak memory and the state store's
   bytes (written, read through iterators, copied into the checkpoint: Spark's own per-batch RocksDB metrics);
4. an incremental run after appending 1 % more records to the log (the last run's checkpoint): what a scheduled job
   pays per run once the cluster is loaded;
5. with ``--follow`` (on a cached cluster): the same records through a job that keeps running (``jbod run
   --follow``), from their bytes in the segment to their micro-batch written — what a following job pays per
   increment, its query's start paid once.

Usage: ``python benchmarks/spark_benchmark.py [--topics N] [--partitions-per-topic N] [--operations N] [--runs …]
[--out DIR] [--json]``, or on a cached benchmark cluster (``benchmarks/clusters.py``: the 200 k-partition log the
model's and the tables' benchmarks read too): ``python benchmarks/spark_benchmark.py --partitions 200011 [--runs …]``.
There the log's last segment is held back for the incremental run (its share of the records is printed), and the
final snapshot is left out so that every run reads the log from its start.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar

from merge_benchmark import build, measure  # beside this script (run as a script, like every benchmark)
from pyspark.sql.streaming import StreamingQueryListener

from jbod_model.image_json import image_to_json
from jbod_model.replay import Replayer
from jbod_model.simulator.churn import ChurnSpec, churn_log
from jbod_model.simulator.output import append_to_segment, write_jsonl_file, write_metadata_dir
from jbod_model.sources import open_inputs
from jbod_model.storage import iter_batches
from jbod_model.storage.files import METADATA_PARTITION_DIR, segment_file_name
from pipelines.lakehouse.tables import as_of_image, last_offset, resolve_cluster
from pipelines.streaming.job import RunSummary, run_job
from pipelines.streaming.session import spark_session

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
from standalone_support import standalone_cluster  # the tests' standalone cluster launcher

#: The DuckDB speed anchor (``../shared/bench`` beside the repository's checkout).
DUCKDB_BASELINE = Path(__file__).resolve().parents[2] / "shared" / "bench" / "duckdb_baseline.py"


def _pure_replay(node: Path) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    loaded = open_inputs([node], from_snapshot=False)
    replayer = Replayer(loaded.base_image)
    for entry in loaded.entries:
        replayer.replay(entry)  # type: ignore[arg-type]
    image = replayer.image
    return time.perf_counter() - started, image_to_json(image)


def _duckdb(records: Path, out: Path) -> tuple[float, dict[str, Any]]:
    """The speed anchor: ``../shared/bench/duckdb_baseline.py`` over the same records (final image only)."""
    started = time.perf_counter()
    subprocess.run([sys.executable, str(DUCKDB_BASELINE), str(records), "--out", str(out)], check=True,
                   capture_output=True, text=True)
    return time.perf_counter() - started, json.loads(out.read_text())


def _check_duckdb(duck: dict[str, Any], image: dict[str, Any]) -> None:
    """The baseline derives the same final image as ours (partitions and offline replicas), or its time means
    nothing."""
    ours = {(p["topicId"], p["partitionId"]): (p["replicas"], p["isr"], p["leader"]) for p in image["partitions"]}
    theirs = {(p["topicId"], p["partition"]): (p["replicas"], p["isr"], p["leader"]) for p in duck["partitions"]}
    assert ours == theirs, "DuckDB's partitions differ from the model's"
    offline = {(r["topicId"], r["partitionId"], r["brokerId"]) for r in image["replicas"] if r["offline"]}
    assert offline == {(r["topicId"], r["partition"], r["broker"]) for r in duck["offlineReplicas"]}, \
        "DuckDB's offline replicas differ from the model's"


@contextlib.contextmanager
def _master_url(work: Path, master: str) -> Iterator[str]:
    """The Spark master a run names: as is, or for ``standalone[N]`` a standalone cluster of N one-core workers on
    loopback started for the run (``tests/support/standalone_support.py``; its start is not counted)."""
    workers = re.fullmatch(r"standalone\[(\d+)\]", master)
    if workers is None:
        yield master
        return
    with standalone_cluster(work / "spark-logs", workers=int(workers.group(1)), memory="2g") as url:
        yield url


class _StateBytes(StreamingQueryListener):
    """What the state store moved over a run, from Spark's own per-batch metrics (the RocksDB provider's counters
    in each progress event's ``stateOperators``): bytes written, read through iterators (the operator's whole-state
    reads) and copied into the checkpoint. Progress events reach the listener asynchronously: the last batch's may
    come after the run returns, so the sums can miss it."""

    _COUNTERS: ClassVar[Mapping[str, str]] = MappingProxyType({
        "state_mb_written": "rocksdbTotalBytesWritten",
        "state_mb_read_by_iterators": "rocksdbTotalBytesReadThroughIterator",
        "state_mb_copied_to_checkpoint": "rocksdbBytesCopied"})

    def __init__(self) -> None:
        self.totals = dict.fromkeys(self._COUNTERS, 0)

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        for operator in event.progress.stateOperators:
            for total, counter in self._COUNTERS.items():
                self.totals[total] += int(operator.customMetrics.get(counter, 0))

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass

    def megabytes(self) -> dict[str, float]:
        return {name: round(value / 1e6, 1) for name, value in self.totals.items()}


class _TreeMemory:
    """The peak memory of this process and every process under it — the job's driver (this benchmark's process),
    its JVM and the Python workers the JVM starts — sampled every ``interval`` seconds while in the ``with``.

    Each process counts its proportional set size (``Pss`` in ``/proc/PID/smaps_rollup``): the Python workers are
    forked from one daemon and share its pages copy-on-write, which a sum of RSS would count once per worker. A
    ``standalone[N]`` run counts its master, workers and their executors too: this process starts them."""

    def __init__(self, interval: float = 0.5) -> None:
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        #: At the start: mostly this process, with what the benchmark kept before the run (e.g. memory the pure
        #: model's replays freed but the allocator holds).
        self.start_mib = self._now()
        self.peak_mib = self.start_mib

    def __enter__(self) -> _TreeMemory:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @staticmethod
    def _now() -> float:
        return sum(_pss_kib(pid) for pid in _tree(os.getpid())) / 1024

    def _sample(self) -> None:
        while True:
            self.peak_mib = max(self.peak_mib, self._now())
            if self._stop.wait(self._interval):
                return


def _tree(root: int) -> list[int]:
    """``root`` and its descendants, from ``/proc``'s parent ids."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue  # gone since listed
            children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


def _pss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            return next((int(line.split()[1]) for line in rollup if line.startswith("Pss:")), 0)
    except OSError:
        return 0  # gone since listed


def _digest(image: dict[str, Any]) -> str:
    """An image JSON as one string: the runs are compared with the model by it. The benchmark's process is the
    job's driver: the model's and DuckDB's image dicts (millions of objects) are not kept through the runs, which
    ``jbod run``'s driver would never hold."""
    return hashlib.sha256(json.dumps(image, sort_keys=True).encode()).hexdigest()


def _spark_run(work: Path, master: str, buckets: int, digest: str) -> dict[str, float]:
    """One full ``run_job`` from an empty checkpoint in a fresh session; the tables checked against the model."""
    with _master_url(work, master) as url:
        return _timed_run(work, master, url, buckets, digest)


def _timed_run(work: Path, name: str, master: str, buckets: int, digest: str) -> dict[str, float]:
    tables = _tables_dir(work, name, buckets)
    shutil.rmtree(tables, ignore_errors=True)
    started = time.perf_counter()
    spark = spark_session(master)
    session = time.perf_counter() - started
    state = _StateBytes()
    spark.streams.addListener(state)
    try:
        with _TreeMemory() as memory:
            run = run_job([work / "in"], tables, tables / "_checkpoint", spark=spark, buckets=buckets)
        assert _digest(as_of_image(tables)) == digest, f"{name}, {buckets} buckets: tables differ from the model"
    finally:
        spark.stop()
    return {"session_seconds": round(session, 2), "job_seconds": round(run.seconds, 2), "batches": len(run.batches),
            "peak_memory_mib": round(memory.peak_mib), "memory_at_start_mib": round(memory.start_mib),
            "compute_seconds": round(sum(b.compute_seconds for b in run.batches), 2),
            "write_seconds": round(sum(b.seconds - b.compute_seconds for b in run.batches), 2),
            **state.megabytes()}


def _spark_runs(work: Path, runs: str, duck_seconds: float, digest: str,
                ) -> tuple[dict[str, dict[str, float]], tuple[str, int]]:
    out: dict[str, dict[str, float]] = {}
    last: tuple[str, int] | None = None
    for item in runs.split(","):
        master, _, buckets = item.rpartition(":")
        out[item] = _spark_run(work, master, int(buckets), digest)
        out[item]["over_duckdb"] = round(out[item]["job_seconds"] / duck_seconds, 1)
        last = (master, int(buckets))
    assert last is not None
    return out, last


def _incremental_run(work: Path, node: Path, master: str, buckets: int) -> RunSummary:
    """The last full run's checkpoint continued over the records added since, in a fresh session; its tables
    checked against the model's replay of the whole log."""
    tables = _tables_dir(work, master, buckets)
    with _master_url(work, master) as url:
        spark = spark_session(url)
        try:
            second = run_job([work / "in"], tables, tables / "_checkpoint", spark=spark, buckets=buckets)
        finally:
            spark.stop()
    _, pure_after = _pure_replay(node)
    assert as_of_image(tables) == pure_after, "the incremental run differs from the pure model"
    return second


def _followed_increment(work: Path, held: Path, segment: Path, master: str, buckets: int, records: int,
                        whole: tuple[str, int]) -> dict[str, float]:
    """Issue #13 item 4 for a job that keeps running (``jbod run --follow``): a copy of the last full run's tables
    and checkpoint continued by a following query (polling every second), while the held-back segment appears in
    two pieces — the first warms the running job up (its first micro-batch pays the query's start: Spark's planning
    processes, the workers' daemon), the second, the segment's last batches holding about 1 % of ``records``, is
    timed from the moment its bytes are in the file to the moment the job has written them (its batch written,
    the tables' last offset at the log's end). The tables are then checked against the model's whole-log image
    (``whole``: its digest and last offset).
    Leaves ``segment`` whole, as the scheduled incremental run reads it."""
    tables = work / "tables-followed"
    shutil.rmtree(tables, ignore_errors=True)
    shutil.copytree(_tables_dir(work, master, buckets), tables)
    headers = [b.header for b in iter_batches(held)]
    cut, timed = len(headers), 0
    while cut > 1 and timed < records // 100:
        cut -= 1
        timed += headers[cut].last_offset - headers[cut].base_offset + 1
    data = held.read_bytes()
    split = headers[cut].position
    digest, end = whole
    staged = segment.with_suffix(".part")
    staged.write_bytes(data[:split])
    staged.rename(segment)  # the warm-up piece appears whole, as a new segment
    written: list[float] = []
    spent: list[float] = []  # each batch's own seconds (BatchStats: compute and writes), the poll's wait apart
    arrived = threading.Condition()
    stop = threading.Event()
    failed: list[BaseException] = []

    def on_batch(stats: Any) -> None:
        with arrived:
            written.append(time.perf_counter())
            spent.append(stats.seconds)
            arrived.notify_all()

    def until(count: int) -> None:
        with arrived:
            if not arrived.wait_for(lambda: len(written) >= count or bool(failed), timeout=900):
                raise TimeoutError("the following job wrote no batch in 900 s")
        if failed:
            raise failed[0]

    with _master_url(work, master) as url:
        spark = spark_session(url)

        def job() -> None:
            try:
                run_job([work / "in"], tables, tables / "_checkpoint", spark=spark, buckets=buckets, follow=True,
                        follow_interval="1 second", on_batch=on_batch, stop_when=stop.is_set)
            except BaseException as e:  # handed to the waiting thread
                failed.append(e)
                with arrived:
                    arrived.notify_all()

        thread = threading.Thread(target=job, name="followed-job")
        thread.start()
        try:
            until(1)  # the warm-up piece: one micro-batch (it appeared whole, and is far under the batch cap)
            cluster = resolve_cluster(tables, None)
            time.sleep(3)  # idle polls: the job is waiting for more
            seen = len(written)
            with open(segment, "ab") as f:
                f.write(data[split:])
            appended = time.perf_counter()
            batches = 0
            while last_offset(tables, cluster, None) < end:
                until(seen + batches + 1)
                batches += 1
            done = written[-1]
        finally:
            stop.set()
            thread.join()
            spark.stop()
    assert _digest(as_of_image(tables)) == digest, "the followed job's tables differ from the model"
    shutil.rmtree(tables, ignore_errors=True)
    return {"followed_records": timed, "followed_batches": batches, "followed_seconds": round(done - appended, 2),
            "followed_batch_seconds": round(sum(spent[seen:]), 2)}


def _tables_dir(work: Path, master: str, buckets: int) -> Path:
    return work / f"tables-{master.replace('[', '').replace(']', '')}-b{buckets}"


def _on_cached_cluster(args: argparse.Namespace) -> int:
    """The benchmark on a cached benchmark cluster (see the module docstring)."""
    from clusters import benchmark_cluster  # noqa: PLC0415 - beside this script; run as a script

    cluster = benchmark_cluster(args.partitions, metadata_version=args.metadata_version)
    work = args.out or Path(tempfile.mkdtemp(prefix="kraft-jbod-bench-"))
    shutil.rmtree(work / "in", ignore_errors=True)
    for old in work.glob("tables-*"):
        shutil.rmtree(old, ignore_errors=True)
    node = work / "in" / "node-1"
    part_dir = node / METADATA_PARTITION_DIR
    part_dir.mkdir(parents=True)
    source = cluster.node_dir / METADATA_PARTITION_DIR
    for f in source.iterdir():
        if f.suffix == ".log":
            os.link(f, part_dir / f.name)
        elif f.suffix != ".checkpoint":  # every run reads the log from its start
            shutil.copy2(f, part_dir / f.name)
    for meta in cluster.node_dir.glob("meta.properties"):
        shutil.copy2(meta, node / meta.name)
    segments = sorted(part_dir.glob("*.log"))
    held = work / "held-back.log"
    held.unlink(missing_ok=True)
    segments[-1].rename(held)

    # DuckDB reads every record of the log; the runs are timed on the log without its last segment and the
    # incremental run adds it: the anchor's share is scaled to the records the full runs read.
    total_records = int(cluster.summary["records"])
    duck_seconds, duck_image = _duckdb(cluster.records_jsonl, work / "duckdb-image.json")
    pure_all_seconds, pure_all = _pure_replay(cluster.node_dir)
    _check_duckdb(duck_image, pure_all)
    partitions, replicas = len(pure_all["partitions"]), len(pure_all["replicas"])
    whole = (_digest(pure_all), int(pure_all["lastOffset"]))
    del duck_image, pure_all
    pure_seconds, pure_image = _pure_replay(node)
    first_records = pure_image["lastOffset"] + 1
    digest = _digest(pure_image)
    del pure_image
    duck_share = duck_seconds * first_records / total_records
    runs, (master, buckets) = _spark_runs(work, args.runs, duck_share, digest)

    full = runs[f"{master}:{buckets}"]["job_seconds"]
    followed: dict[str, float] = {}
    if args.follow:
        followed = _followed_increment(work, held, segments[-1], master, buckets, first_records, whole)
        followed["followed_over_full"] = round(followed["followed_seconds"] / full, 3)
        held.unlink()
    else:
        held.rename(segments[-1])
    second = _incremental_run(work, node, master, buckets)
    results: dict[str, Any] = {
        "cluster": cluster.shape.key, "records": total_records, "partitions": partitions, "replicas": replicas,
        "duckdb_seconds_all_records": round(duck_seconds, 2),
        "pure_model_seconds_all_records": round(pure_all_seconds, 2),
        "pure_over_duckdb": round(pure_all_seconds / duck_seconds, 2),
        "full_run_records": first_records, "duckdb_seconds_scaled_to_full_run": round(duck_share, 2),
        "pure_model_seconds_full_run": round(pure_seconds, 2),
        "spark_runs": runs,
        "incremental_records": total_records - first_records,
        "incremental_share": round((total_records - first_records) / first_records, 3),
        "incremental_seconds": round(second.seconds, 2),
        "incremental_over_full": round(second.seconds / full, 3),
        **followed,
        "work_dir": str(work),
    }
    if args.write_cost:
        results["batch_write_seconds"] = _write_cost(args.write_cost)
    _print(results, as_json=args.json)
    return 0


def _write_cost(sizes: list[int], keys: int = 100) -> dict[str, float]:
    """Issue #13 goal 3 in the same run: the seconds of one micro-batch's Delta writes touching ``keys`` replica
    keys, with the replica tables holding each of ``sizes`` rows (``merge_benchmark.py``'s tables and batch, as
    written, median of three)."""
    out = {}
    for n in sizes:
        rng = random.Random(n)
        root = Path(tempfile.mkdtemp(prefix="kraft-jbod-write-cost-"))
        try:
            table_keys = build(root, n, 60_000, 50, rng)
            out[f"{n}_rows"] = measure(root, table_keys, keys, rng, first_batch=0)["seconds"]
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return out


def _print(results: dict[str, Any], *, as_json: bool) -> None:
    """Print the results, with how much faster the last Spark run was than the first (e.g. local[2] over local[1])."""
    runs = results["spark_runs"]
    keys = list(runs)
    if len(keys) >= 2:
        results["speedup_last_over_first"] = round(runs[keys[0]]["job_seconds"] / runs[keys[-1]]["job_seconds"], 2)
    if as_json:
        print(json.dumps(results))
        return
    for key, value in results.items():
        print(f"{key:34} {value}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--brokers", type=int, default=24)
    parser.add_argument("--dirs-per-broker", type=int, default=3)
    parser.add_argument("--topics", type=int, default=200)
    parser.add_argument("--partitions-per-topic", type=int, default=25)
    parser.add_argument("--operations", type=int, default=60_000)
    parser.add_argument("--noop-share", type=float, default=0.7)
    parser.add_argument("--runs", default="local[1]:1,local[1]:4,local[2]:4",
                        help="Spark runs as MASTER:BUCKETS, comma-separated (each from an empty checkpoint); the "
                             "incremental run follows the last. MASTER standalone[N]: a standalone cluster of N "
                             "one-core workers on loopback, started for the run.")
    parser.add_argument("--out", type=Path, default=None, help="Work directory (default: a temporary one).")
    parser.add_argument("--json", action="store_true", help="Print the results as JSON only.")
    parser.add_argument("--partitions", type=int, default=None,
                        help="Read the cached benchmark cluster of this many partitions (benchmarks/clusters.py, "
                             "e.g. 200011) instead of generating a log from the options above.")
    parser.add_argument("--metadata-version", default=None,
                        help="with --partitions: the benchmark cluster's log at this level (default 3.9-IV0; "
                             "4.0-IV0: version-2 partition records, as Kafka 4.x writes them)")
    parser.add_argument("--follow", action="store_true",
                        help="With --partitions: also time the held-back segment's last 1 %% of records through a "
                             "job that keeps running (jbod run --follow), from their bytes in the file to their "
                             "batch written.")
    parser.add_argument("--write-cost", type=int, nargs="*", default=None, metavar="ROWS",
                        help="Also time one micro-batch's Delta writes touching 100 keys with the replica tables "
                             "holding each of these row counts (default with the flag alone: 100000 6000000).")
    args = parser.parse_args(argv)
    if args.write_cost == []:
        args.write_cost = [100_000, 6_000_000]
    if args.follow and args.partitions is None:
        parser.error("--follow needs --partitions (a cached cluster's held-back segment)")
    if args.partitions is not None:
        return _on_cached_cluster(args)

    spec = ChurnSpec(brokers=args.brokers, dirs_per_broker=args.dirs_per_broker, topics=args.topics,
                         partitions_per_topic=args.partitions_per_topic, replication_factor=3,
                         operations=args.operations, noop_share=args.noop_share, seed=2024)
    work = args.out or Path(tempfile.mkdtemp(prefix="kraft-jbod-bench-"))
    shutil.rmtree(work / "in", ignore_errors=True)
    for old in work.glob("tables-*"):
        shutil.rmtree(old, ignore_errors=True)

    started = time.perf_counter()
    base = churn_log(spec)
    # The generator is deterministic: more operations extend the same log, so the extra 1 % continues it.
    extended = churn_log(replace(spec, operations=int(spec.operations * 1.01) + 1))
    assert [e.offset for e in extended[: len(base)]] == [e.offset for e in base]
    extra = list(extended[len(base):])
    while extra and extra[0].batch_base_offset is not None and extra[0].batch_base_offset < len(base):
        extra.pop(0)  # never split a batch across the two runs' files
    node = write_metadata_dir(work / "in" / "node-1", base, cluster_id="bench", records_per_segment=50_000)
    records = write_jsonl_file(work / "records.jsonl", base)
    generated = time.perf_counter() - started

    duck_seconds, duck_image = _duckdb(records, work / "duckdb-image.json")
    pure_seconds, pure_image = _pure_replay(node)
    _check_duckdb(duck_image, pure_image)
    counts = {name: len(pure_image[name]) for name in ("brokers", "partitions", "replicas")}
    digest = _digest(pure_image)
    del duck_image, pure_image

    runs, last = _spark_runs(work, args.runs, duck_seconds, digest)

    segments = sorted((node / METADATA_PARTITION_DIR).glob("*.log"))
    new_segment = node / METADATA_PARTITION_DIR / segment_file_name(extra[0].offset) if extra else segments[-1]
    new_segment.touch()
    append_to_segment(new_segment, extra)
    master, buckets = last
    second = _incremental_run(work, node, master, buckets)
    full = runs[f"{master}:{buckets}"]["job_seconds"]

    results: dict[str, Any] = {
        "entries": len(base),
        **counts,
        "generate_seconds": round(generated, 2),
        "duckdb_seconds": round(duck_seconds, 2),
        "pure_model_seconds": round(pure_seconds, 2),
        "pure_over_duckdb": round(pure_seconds / duck_seconds, 1),
        "spark_runs": runs,
        "incremental_entries": len(extra),
        "incremental_seconds": round(second.seconds, 2),
        "incremental_over_full": round(second.seconds / full, 3),
        "work_dir": str(work),
    }
    if args.write_cost:
        results["batch_write_seconds"] = _write_cost(args.write_cost)
    _print(results, as_json=args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
