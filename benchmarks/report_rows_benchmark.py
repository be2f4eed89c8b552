"""How long the parts of a report's history from the tables take (issue #14, ``report --tables``), in-process, so
that interpreter start-up and rendering are not the noise. Times, in one run, each of

* ``observed_from_tables`` — the batches a replay observes, from the ``records`` table's positions (no ``data``);
* ``pending_from_tables`` — the placement clocks (I12) from ``replica_assignment_history``, ``broker_history`` and
  ``feature_history``;
* ``TablePartitions`` — the partitions' versions the sparse tracker reads, from ``partition_history``; and its
  first ``hosted_change``, which indexes every broker's replicas over time (for a broker that hosts none: the index
  alone);
* ``leaderless_from_tables`` — since when each leaderless partition has been so, from those versions
  (``TablePartitions.leaderless_now``) and the partition records of the batches that started a stretch;
* ``history_from_tables`` — everything ``jbod report --tables`` loads: the image (``metadata_image``) and the whole
  history, the parts above included, the incidents by a ``SparseIncidentTracker`` and the offline series from
  the intervals;
* ``build_report`` — the report of that image and history (the state now, the incidents' rows, the timeline);

at the latest offset and as of ``--as-of-offset N`` when given, with ``--repeat`` runs each (the median is printed).
With ``--duckdb RECORDS.jsonl`` the DuckDB whole-log image (``../shared/bench/duckdb_baseline.py``) is timed in the
same run as the anchor::

    python benchmarks/report_rows_benchmark.py TABLES [--cluster C] [--as-of-offset N] [--repeat 3]
        [--duckdb ~/.cache/kraft-jbod/clusters/<shape>/records.jsonl]

``--replay`` also replays the ``records`` table with an ``IncidentTracker`` (what ``jbod report --tables`` did before;
minutes at 200 k partitions) and checks that its incidents, offline series and ``leaderless_since`` equal the
tables' answer. Read-only.
Not part of the test suite.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TypeVar

from clusters import DUCKDB_BASELINE  # beside this script (run as a script, like every benchmark)

from jbod_model.image import EMPTY_IMAGE
from jbod_model.records.entry import LogEntry
from jbod_model.report import IncidentTracker, build_report
from pipelines.lakehouse.tables import log_entries, resolve_cluster
from pipelines.report.load import (
    TablePartitions,
    directory_paths_for,
    history_from_tables,
    leaderless_from_tables,
    observed_from_tables,
    pending_from_tables,
)

T = TypeVar("T")


def _median_seconds(repeat: int, run: Callable[[], T]) -> tuple[float, T]:
    """The median wall seconds of ``repeat`` calls (at least one) and the last call's answer."""
    secs: list[float] = []
    for _ in range(max(1, repeat)):
        start = time.perf_counter()
        out = run()
        secs.append(time.perf_counter() - start)
    return statistics.median(secs), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tables", type=Path)
    ap.add_argument("--cluster")
    ap.add_argument("--as-of-offset", type=int)
    ap.add_argument("--repeat", type=int, default=1, help="runs per part; the median is printed")
    ap.add_argument("--duckdb", type=Path, help="records.jsonl of the same cluster: time the DuckDB baseline too")
    ap.add_argument("--replay", action="store_true", help="also replay with an IncidentTracker and compare")
    args = ap.parse_args()

    cluster = resolve_cluster(args.tables, args.cluster)
    for label, n in (("latest", None), *(((f"as of {args.as_of_offset}", args.as_of_offset),)
                                         if args.as_of_offset is not None else ())):
        secs, observed = _median_seconds(args.repeat, partial(observed_from_tables, args.tables, cluster, n))
        print(f"{label:14s} observed_from_tables   {secs:7.2f} s  ({len(observed.batches)} batches)", flush=True)
        secs, pending = _median_seconds(args.repeat, partial(pending_from_tables, args.tables, cluster, observed))
        print(f"{label:14s} pending_from_tables    {secs:7.2f} s  ({len(pending)} pending placements)", flush=True)
        secs, partitions = _median_seconds(args.repeat, partial(TablePartitions, args.tables, cluster,
                                                                observed.last, observed.snapshot))
        print(f"{label:14s} TablePartitions        {secs:7.2f} s", flush=True)
        still = partitions.leaderless_now()
        secs, leaderless = _median_seconds(args.repeat,
                                           partial(leaderless_from_tables, args.tables, cluster, observed, still))
        print(f"{label:14s} leaderless_from_tables {secs:7.2f} s  ({len(leaderless)} leaderless partitions, "
              "from TablePartitions' versions)", flush=True)
        last = -1 if observed.last is None else observed.last
        start = time.perf_counter()
        partitions.hosted_change(-1, last, last, frozenset())  # no broker -1: the index alone
        print(f"{label:14s} replicas' index        {time.perf_counter() - start:7.2f} s  (the first hosted_change)",
              flush=True)
        del partitions
        secs, (image, history) = _median_seconds(args.repeat,
                                                 partial(history_from_tables, args.tables, cluster, n))
        print(f"{label:14s} history_from_tables    {secs:7.2f} s  ({len(history.incidents)} incidents, "
              f"{len(history.offline_series)} series points)", flush=True)
        paths = directory_paths_for(args.tables, cluster, None)
        secs, report = _median_seconds(args.repeat, partial(build_report, image, paths=paths, history=history))
        print(f"{label:14s} build_report           {secs:7.2f} s  ({len(report.timeline)} timeline events)",
              flush=True)
        del image, report
        if args.replay:
            start = time.perf_counter()
            base, entries = log_entries(args.tables, cluster, n)
            tracker = IncidentTracker(base if base is not None else EMPTY_IMAGE)
            tracker.feed_all(e for e in entries if isinstance(e, LogEntry))
            same = (dict(tracker.leaderless_since()) == leaderless == dict(history.leaderless_since)
                    and tracker.incidents() == history.incidents
                    and tracker.offline_series() == history.offline_series
                    and tracker.dropped_incidents == history.dropped_incidents)
            print(f"{label:14s} replay (decode + IncidentTracker) {time.perf_counter() - start:7.1f} s; "
                  f"incidents, series and leaderless_since equal: {same}", flush=True)
    if args.duckdb is not None:
        with tempfile.TemporaryDirectory() as scratch:
            start = time.perf_counter()
            subprocess.run([sys.executable, str(DUCKDB_BASELINE), str(args.duckdb), "--out",
                            str(Path(scratch) / "image.json")], check=True, stdout=subprocess.DEVNULL)
            print(f"duckdb baseline (whole log, own process) {time.perf_counter() - start:7.2f} s", flush=True)


if __name__ == "__main__":
    main()
