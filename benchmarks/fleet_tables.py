"""A fleet's tables for the fleet benchmarks (issue #14 item 3): N clusters in one set of Delta tables, as one
``jbod run`` over N metadata logs writes them. Built once and cached beside the benchmark clusters.

Each cluster is the cached benchmark cluster of ``--partitions`` partitions (``benchmarks/clusters.py``) under a
cluster id of its own: its log's segments linked (not copied) under ``in/cNN/metadata`` with a ``meta.properties``
naming the id, as an operator's copies of many clusters' logs would sit. Every cluster's report is then the one
cluster's report, which makes the fleet's answers easy to check against a single cluster's::

    python benchmarks/fleet_tables.py [--partitions 20011] [--clusters 50] [--cache-dir DIR] [--rebuild] [--json]

prints where the tables are (``tables/``), the cluster ids and what the build took; then, e.g.::

    python benchmarks/tables_benchmark.py ~/.cache/kraft-jbod/clusters/fleet-50x<shape>/tables --only fleet

The build is a real ``jbod run`` (``local[2]`` here: ≈ 9.5 min and 2.5 GB, most of it the checkpoint, for 50 × 20 k).
Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from clusters import METADATA_DIR, benchmark_cluster, cached_build, default_cache_dir, peak_child_rss_mb

from jbod_model.meta_properties import META_PROPERTIES_NAME
from jbod_model.storage.files import METADATA_PARTITION_DIR
from jbod_model.uuid import Uuid


def cluster_ids(count: int) -> list[str]:
    """The fleet's cluster ids: fixed, so that a rebuilt fleet names its clusters as before."""
    return [str(Uuid.from_int((0x5EED << 100) + i * 7919 + 1)) for i in range(count)]


def link_inputs(source: Path, out: Path, ids: list[str]) -> list[Path]:
    """One metadata log dir per cluster id under ``out``: ``source``'s segments hard-linked (a snapshot left out: the
    job reads each log from its start, as for one cluster) and a ``meta.properties`` naming the id."""
    dirs = []
    for i, cid in enumerate(ids):
        node = out / f"c{i:02d}" / METADATA_DIR
        partition = node / METADATA_PARTITION_DIR
        partition.mkdir(parents=True)
        for segment in sorted((source / METADATA_PARTITION_DIR).glob("*.log")):
            os.link(segment, partition / segment.name)
        (node / META_PROPERTIES_NAME).write_text(f"version=1\ncluster.id={cid}\nnode.id=1\n", encoding="utf-8")
        dirs.append(node)
    return dirs


def fleet_tables(partitions: int = 20_011, count: int = 50, cache_dir: Path | None = None, *,
                 rebuild: bool = False) -> dict[str, Any]:
    """The fleet's tables (see the module docstring): from the cache when built before, else built now."""
    cluster = benchmark_cluster(partitions, cache_dir)
    root = (cache_dir if cache_dir is not None else default_cache_dir()) / f"fleet-{count}x{cluster.shape.key}"

    def build(out: Path) -> dict[str, Any]:
        ids = cluster_ids(count)
        link_inputs(cluster.node_dir, out / "in", ids)
        command = [sys.executable, "-m", "pipelines.cli", "run", "--input", str(out / "in"), "--tables",
                   str(out / "tables")]
        started = time.perf_counter()
        done = subprocess.run(command, check=False, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"jbod run failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
        return {"clusters": ids, "partitionsEach": partitions, "recordsEach": cluster.summary["records"],
                "runSeconds": round(time.perf_counter() - started, 1), "runPeakRssMB": round(peak_child_rss_mb()),
                "command": " ".join(["jbod", *command[3:]])}

    return {**cached_build(root, "fleet.json", build, rebuild=rebuild), "tables": str(root / "tables")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=20_011, help="each cluster's (a benchmark cluster's shape)")
    ap.add_argument("--clusters", type=int, default=50)
    ap.add_argument("--cache-dir", type=Path)
    ap.add_argument("--rebuild", action="store_true", help="build again even when cached")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    fleet = fleet_tables(args.partitions, args.clusters, args.cache_dir, rebuild=args.rebuild)
    if args.json:
        print(json.dumps(fleet, indent=2))
    else:
        print(f"{len(fleet['clusters'])} clusters of {fleet['partitionsEach']} partitions: {fleet['tables']} "
              f"(jbod run took {fleet['runSeconds']} s, peak RSS {fleet['runPeakRssMB']} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
