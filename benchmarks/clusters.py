"""The benchmark clusters: generated once with ``jbod simulate``, cached, and reused by every benchmark.

Every speed benchmark of the project (the model's decode/replay/image path, the Spark job, the table queries) and
the DuckDB speed anchor (``../shared/bench/duckdb_baseline.py``) must read *the same* log, so this module builds it
once per shape and hands out its paths::

    from benchmarks.clusters import benchmark_cluster
    cluster = benchmark_cluster(200_011)        # built on first use (minutes), then reused from the cache
    cluster.node_dir                            # metadata log dir: __cluster_metadata-0/*.log (+ final snapshot)
    cluster.records_jsonl                       # canonical JSONL: metadata records only, offset order
    cluster.summary                             # what jbod simulate reported (records by type, bytes, segments …)

or from a shell (``--check-duckdb`` also runs the DuckDB baseline on the records and checks its image equals ours)::

    python benchmarks/clusters.py --partitions 200011 [--cache-dir DIR] [--check-duckdb] [--json]

Shapes (:data:`SHAPES`): 60 brokers × 6 disks, RF 3, 200,011 partitions in 201 topics, then the churn workload
(``jbod simulate --workload churn``, ``jbod_model.simulator.churn``): ISR changes, disk failures, LOST assignments,
reassignments, moves between disks, fencing and restarts, rare topic deletions, configs, metadata transactions and
the NoOps that make up most of a real log — about 1.16 M records (~820 k PartitionChangeRecords, ~134 k NoOps) in
~12 segments rolled at 8 MiB. The 2,000,000-partition shape is the same cluster ten times larger (~11.4 M records).

The cache: ``$KRAFT_JBOD_CLUSTER_CACHE`` or ``~/.cache/kraft-jbod/clusters``, one directory per shape named by its
key (the key changes whenever the shape or the generator's output changes, so an old build is never reused by
mistake). A build writes into a temporary sibling and is renamed into place once complete; a lock file serialises
concurrent builders (several benchmarks may ask at once), and a finished build is marked by ``cluster.json``.
Nothing here is committed: it is generated data.
"""

from __future__ import annotations

import argparse
import dataclasses
import fcntl
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from jbod_model.metadata_version import LATEST_PRODUCTION
from jbod_model.records.entry import LogEntry
from jbod_model.replay import Replayer
from jbod_model.replicas import offline_replicas
from jbod_model.sources import open_inputs

#: Bump when the generator's output for a shape changes (so cached builds are rebuilt, never mixed).
GENERATOR_VERSION = 2
#: The metadata log dir inside a ``jbod simulate`` output (``OutputWriter``).
METADATA_DIR = "metadata"
#: Where ../shared/bench lives relative to this worktree (the DuckDB speed anchor).
DUCKDB_BASELINE = Path(__file__).resolve().parents[2] / "shared" / "bench" / "duckdb_baseline.py"
#: GNU time: prints a command's own peak RSS (``%M``, KiB).
GNU_TIME = "/usr/bin/time"


@dataclass(frozen=True, slots=True)
class ChildRun:
    """One command run to completion: wall seconds, CPU seconds (user + system, all its threads), its own peak
    RSS and its exit code."""

    seconds: float
    cpu_seconds: float
    rss_bytes: int
    returncode: int


def run_measured(argv: list[str], stdout: IO[bytes], stderr: IO[bytes]) -> ChildRun:
    """Run ``argv`` under GNU ``time``, its output to ``stdout`` and ``stderr``. The peak RSS is ``time``'s ``%M``
    of the command itself, not ``wait4``'s ``ru_maxrss``: Linux starts a forked child's peak from its parent's own
    (kept across ``exec``), and a benchmark that holds an image of the cluster read every command as large as it.
    The CPU is ``wait4``'s: ``time`` waited for the command, so its own rusage includes the command's."""
    with tempfile.NamedTemporaryFile(suffix=".rss") as rss:
        start = time.perf_counter()
        proc = subprocess.Popen([GNU_TIME, "-f", "%M", "-o", rss.name, *argv], stdout=stdout, stderr=stderr)
        _pid, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # waited for here, not by Popen
        # On failure ``time`` writes "Command exited with non-zero status N" first: the peak is the last word.
        words = Path(rss.name).read_text().split()
    return ChildRun(seconds, usage.ru_utime + usage.ru_stime, int(words[-1]) * 1024 if words else 0,
                    proc.returncode)


@dataclass(frozen=True, slots=True)
class ClusterShape:
    """One benchmark cluster: its size and the ``jbod simulate`` options that generate it."""

    partitions: int
    brokers: int = 60
    dirs: int = 6
    replication_factor: int = 3
    topics: int = 0
    #: Churn operations; all but about 1,550 are NoOps (the others write ~530 PartitionChangeRecords each on average
    #: at 200k partitions: a fencing or a disk failure touches thousands of partitions).
    operations: int = 136_000
    noop_share: float = 0.9886
    restart_weight: float = 0.5
    reassign_weight: float = 1.0
    #: Topic deletions rare: each re-creation writes a PartitionRecord per partition.
    delete_weight: float = 0.02
    segment_bytes: int = 8 * 1024 * 1024
    seed: int = 2024
    #: The metadata.version the log starts at (``jbod simulate --metadata-version``): from 4.0 its partition records
    #: are version 2, as a Kafka 4.x cluster's.
    metadata_version: str = LATEST_PRODUCTION.name

    @property
    def key(self) -> str:
        # The default level keeps the key the caches were built under.
        level = "" if self.metadata_version == LATEST_PRODUCTION.name else f"-mv{self.metadata_version}"
        return (f"p{self.partitions}-b{self.brokers}x{self.dirs}-rf{self.replication_factor}-o{self.operations}"
                f"-s{self.seed}{level}-g{GENERATOR_VERSION}")

    def simulate_args(self, out: Path) -> list[str]:
        """The ``jbod simulate`` command line that writes this cluster to ``out``."""
        return ["simulate", "--brokers", str(self.brokers), "--dirs", str(self.dirs),
                "--partitions", str(self.partitions), "--topics", str(self.topics),
                "--rf", str(self.replication_factor), "--workload", "churn", "--operations", str(self.operations),
                "--noop-share", str(self.noop_share), "--restart-weight", str(self.restart_weight),
                "--reassign-weight", str(self.reassign_weight), "--delete-weight", str(self.delete_weight),
                "--seed", str(self.seed), "--segment-bytes", str(self.segment_bytes),
                "--metadata-version", self.metadata_version, "--out", str(out), "--json"]


#: The shapes the benchmarks use, by partition count.
SHAPES: dict[int, ClusterShape] = {
    200_011: ClusterShape(partitions=200_011, topics=201),
    # Ten times the NoOps; the other operations touch ten times the partitions each.
    2_000_000: ClusterShape(partitions=2_000_000, topics=2000, operations=1_360_000, noop_share=0.99886),
}


@dataclass(frozen=True, slots=True)
class BenchmarkCluster:
    """A built benchmark cluster: the ``jbod simulate`` output under ``root``."""

    shape: ClusterShape
    root: Path
    #: What the build measured and ``jbod simulate --json`` reported (see :func:`build`).
    summary: dict[str, Any]

    @property
    def node_dir(self) -> Path:
        """The node's metadata log dir (holds ``__cluster_metadata-0``): what ``jbod image`` / ``jbod run`` read."""
        return self.root / METADATA_DIR

    @property
    def records_jsonl(self) -> Path:
        """The canonical JSONL of the log (metadata records only, offset order): DuckDB's input."""
        return self.root / "records.jsonl"

    @property
    def segments(self) -> list[Path]:
        return sorted((self.node_dir / "__cluster_metadata-0").glob("*.log"))


def default_cache_dir() -> Path:
    env = os.environ.get("KRAFT_JBOD_CLUSTER_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "kraft-jbod" / "clusters"


def shape_for(partitions: int) -> ClusterShape:
    """The registered shape of that size, else the 200k shape's proportions at that size (for quick trials)."""
    shape = SHAPES.get(partitions)
    if shape is not None:
        return shape
    return ClusterShape(partitions=partitions, topics=max(1, partitions // 1000))


@contextmanager
def locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def peak_child_rss_mb() -> float:
    # ru_maxrss of the waited-for children: the jbod simulate process (Linux reports KiB).
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def build(shape: ClusterShape, out: Path) -> dict[str, Any]:
    """Run ``jbod simulate`` for ``shape`` into ``out`` (a fresh directory); return its report plus the wall time and
    the peak RSS of the generating process."""
    command = [sys.executable, "-m", "pipelines.cli", *shape.simulate_args(out)]
    started = time.perf_counter()
    done = subprocess.run(command, check=False, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"jbod simulate failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}")
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    sim_summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    return {
        "shape": shape.key, "command": " ".join(["jbod", *shape.simulate_args(Path("OUT"))]),
        "wallSeconds": round(seconds, 1), "peakRssMB": round(peak_child_rss_mb()),
        "records": report["records"], "recordsByType": sim_summary["records"], "batches": report["batches"],
        "lastOffset": report["lastOffset"], "logBytes": report["logBytes"], "segments": len(report["segments"]),
        "recordsJsonlBytes": (out / "records.jsonl").stat().st_size, "partitions": sim_summary["partitions"],
        "topics": sim_summary["topics"], "brokers": sim_summary["brokers"],
    }


def benchmark_cluster(partitions: int = 200_011, cache_dir: str | Path | None = None, *,
                      rebuild: bool = False, metadata_version: str | None = None) -> BenchmarkCluster:
    """The benchmark cluster of ``partitions`` partitions (see the module docstring): from the cache when built
    before, else generated now (minutes for 200k partitions: see docs/simulator.md) and cached. With
    ``metadata_version``, the same cluster's log at that level (4.0-IV0: a Kafka 4.x cluster's record versions)."""
    shape = shape_for(partitions)
    if metadata_version is not None:
        shape = dataclasses.replace(shape, metadata_version=metadata_version)
    root = (Path(cache_dir) if cache_dir is not None else default_cache_dir()) / shape.key
    summary = cached_build(root, "cluster.json", lambda out: build(shape, out), rebuild=rebuild)
    return BenchmarkCluster(shape=shape, root=root, summary=summary)


def cached_build(root: Path, marker: str, build_into: Callable[[Path], dict[str, Any]], *,
                 rebuild: bool = False) -> dict[str, Any]:
    """The summary ``build_into`` returned for what it built under ``root`` (kept in ``root/marker``): from the
    cache when built before, else built now into a folder beside ``root`` and renamed into place once complete, so
    that a build cut short is never taken for a cached one. One build at a time per ``root`` (a lock file)."""
    with locked(root.parent / f"{root.name}.lock"):
        if rebuild and root.exists():
            shutil.rmtree(root)
        if not (root / marker).is_file():
            building = root.parent / f"{root.name}.building"
            shutil.rmtree(building, ignore_errors=True)
            summary = build_into(building)
            (building / marker).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
            shutil.rmtree(root, ignore_errors=True)
            building.rename(root)
    found: dict[str, Any] = json.loads((root / marker).read_text(encoding="utf-8"))
    return found


# -- the DuckDB speed anchor, checked against our image ---------------------------------------------------------------

#: Our offline reasons (``jbod_model.replicas.OfflineReason``) by DuckDB's names.
_DUCKDB_REASONS = {"broker-absent": "BROKER_UNREGISTERED", "broker-fenced": "BROKER_FENCED",
                   "dir-lost": "DIRECTORY_LOST", "dir-offline": "DIRECTORY_OFFLINE"}


def model_image_view(node_dir: Path) -> dict[str, Any]:
    """Our image of the node's whole log (no snapshot), reduced to what DuckDB derives: brokers, partitions and
    offline replicas, keyed the same way as :func:`duckdb_image_view`."""
    loaded = open_inputs([node_dir], from_snapshot=False)
    replayer = Replayer(loaded.base_image)
    for entry in loaded.entries:
        assert isinstance(entry, LogEntry)
        replayer.replay(entry)
    image = replayer.image
    brokers = {b.id: {"epoch": b.epoch, "fenced": b.fenced, "inControlledShutdown": b.in_controlled_shutdown,
                      "logDirs": sorted(str(d) for d in b.directories)} for b in image.cluster.brokers.values()}
    partitions = {f"{topic.id}:{pid}": {"replicas": list(p.replicas), "isr": list(p.isr), "leader": p.leader,
                                        "leaderEpoch": p.leader_epoch, "partitionEpoch": p.partition_epoch,
                                        "directories": [str(d) for d in p.directories],
                                        "removingReplicas": list(p.removing_replicas),
                                        "addingReplicas": list(p.adding_replicas)}
                  for topic, pid, p in image.topics.partitions()}
    offline = sorted((str(r.topic_id), r.partition_id, r.broker_id, str(r.directory),
                      r.offline_reason.value if r.offline_reason is not None else "")
                     for r in offline_replicas(image))
    return {"brokers": brokers, "partitions": partitions, "offlineReplicas": offline}


def duckdb_image_view(image_json: Path) -> dict[str, Any]:
    """DuckDB's IMAGE.json reduced like :func:`model_image_view`."""
    doc = json.loads(image_json.read_text(encoding="utf-8"))
    brokers = {b["id"]: {"epoch": b["epoch"], "fenced": bool(b["fenced"]),
                         "inControlledShutdown": bool(b["inControlledShutdown"]), "logDirs": sorted(b["logDirs"])}
               for b in doc["brokers"]}
    partitions = {f"{p['topicId']}:{p['partition']}": {
        "replicas": p["replicas"], "isr": p["isr"], "leader": p["leader"], "leaderEpoch": p["leaderEpoch"],
        "partitionEpoch": p["partitionEpoch"], "directories": p["directories"],
        "removingReplicas": p["removingReplicas"] or [], "addingReplicas": p["addingReplicas"] or []}
        for p in doc["partitions"]}
    offline = sorted((o["topicId"], o["partition"], o["broker"], o["directory"], _DUCKDB_REASONS[o["reason"]])
                     for o in doc["offlineReplicas"])
    return {"brokers": brokers, "partitions": partitions, "offlineReplicas": offline}


def compare_views(ours: dict[str, Any], theirs: dict[str, Any], *, limit: int = 5) -> list[str]:
    """The differences between two image views (empty when equal), at most ``limit`` examples per part."""
    diffs: list[str] = []
    for part in ("brokers", "partitions"):
        a, b = ours[part], theirs[part]
        if a.keys() != b.keys():
            diffs.append(f"{part}: only ours {sorted(a.keys() - b.keys())[:limit]}, only DuckDB's "
                         f"{sorted(b.keys() - a.keys())[:limit]}")
        differing = [k for k in a.keys() & b.keys() if a[k] != b[k]]
        diffs.extend(f"{part} {k}: ours {a[k]} DuckDB {b[k]}" for k in sorted(differing)[:limit])
        if len(differing) > limit:
            diffs.append(f"{part}: {len(differing) - limit} more differ")
    a_off, b_off = set(map(tuple, ours["offlineReplicas"])), set(map(tuple, theirs["offlineReplicas"]))
    if a_off != b_off:
        diffs.append(f"offlineReplicas: {len(a_off)} ours vs {len(b_off)} DuckDB; only ours "
                     f"{sorted(a_off - b_off)[:limit]}, only DuckDB's {sorted(b_off - a_off)[:limit]}")
    return diffs


def check_duckdb(cluster: BenchmarkCluster, work: Path | None = None) -> dict[str, Any]:
    """Run the DuckDB baseline on the cluster's records.jsonl and check its image equals ours (brokers, partitions,
    offline replicas). Returns DuckDB's wall time, its own timing line, our replay time and the differences (an
    empty list: DuckDB's time can be trusted)."""
    work = work or cluster.root
    out = work / "duckdb-image.json"
    started = time.perf_counter()
    done = subprocess.run([sys.executable, str(DUCKDB_BASELINE), str(cluster.records_jsonl), "--out", str(out)],
                          check=True, capture_output=True, text=True)
    duckdb_seconds = time.perf_counter() - started
    started = time.perf_counter()
    ours = model_image_view(cluster.node_dir)
    model_seconds = time.perf_counter() - started
    theirs = duckdb_image_view(out)
    diffs = compare_views(ours, theirs)
    out.unlink()
    return {"duckdbSeconds": round(duckdb_seconds, 2), "duckdbReport": done.stdout.strip(),
            "modelReplaySeconds": round(model_seconds, 2), "brokers": len(ours["brokers"]),
            "partitions": len(ours["partitions"]), "offlineReplicas": len(ours["offlineReplicas"]),
            "equal": not diffs, "differences": diffs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=200_011)
    parser.add_argument("--cache-dir", type=Path, default=None)
    parser.add_argument("--rebuild", action="store_true", help="Regenerate even when cached.")
    parser.add_argument("--metadata-version", default=None,
                        help="The level the log starts at (default 3.9-IV0; 4.0-IV0: version-2 partition records, "
                             "as Kafka 4.x writes them).")
    parser.add_argument("--check-duckdb", action="store_true",
                        help="Run the DuckDB baseline on records.jsonl and check its image equals ours.")
    parser.add_argument("--json", action="store_true", help="Print JSON only.")
    args = parser.parse_args(argv)
    cluster = benchmark_cluster(args.partitions, args.cache_dir, rebuild=args.rebuild,
                                metadata_version=args.metadata_version)
    doc: dict[str, Any] = {"root": str(cluster.root), "nodeDir": str(cluster.node_dir),
                           "recordsJsonl": str(cluster.records_jsonl), "build": cluster.summary}
    if args.check_duckdb:
        doc["duckdb"] = check_duckdb(cluster)
    print(json.dumps(doc, indent=None if args.json else 2))
    return 0 if not args.check_duckdb or doc["duckdb"]["equal"] else 1


if __name__ == "__main__":
    sys.exit(main())
