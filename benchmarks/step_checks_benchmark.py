"""What ``jbod check``'s log suite costs past its reads: a metadata log's batches through
:class:`jbod_model.invariants.InvariantTracker` as the suite runs it (the step checks of I10, I11, I16, I17 and I19
alone, no image or history checks, the collector paused), and the part of it that is ``MetadataDelta.apply`` — the
image each batch makes, which the checks compare with the one before (issue #14 item 2).

The log is a cached benchmark cluster's (``benchmarks/clusters.py``), decoded once, NoOpRecords left out as the suite
leaves them out, grouped by record batch; then each round feeds every batch to a fresh tracker, timed in CPU seconds
(on a shared box the steadier measure). Compare two checkouts by running this file with ``PYTHONPATH=<checkout>``,
alternating::

    python benchmarks/step_checks_benchmark.py [--partitions 200011] [--rounds 3] [--json]

Not part of the test suite.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from typing import Any

from clusters import benchmark_cluster  # beside this script (run as a script, like every benchmark)

from jbod_model import invariants, replay
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import NoOpRecord
from jbod_model.slots import gc_paused
from jbod_model.sources import open_inputs
from pipelines.quality.suites.log import LOG_INVARIANTS  # what the log suite runs, not a copy that could drift


def _batches(partitions: int) -> list[list[LogEntry]]:
    loaded = open_inputs([benchmark_cluster(partitions).node_dir], from_snapshot=False)
    with gc_paused():
        entries = [e for e in loaded.entries if isinstance(e, LogEntry) and not isinstance(e.record, NoOpRecord)]
        return [list(group) for _, group in itertools.groupby(entries, key=lambda e: e.batch_base_offset)]


def _round(batches: list[list[LogEntry]]) -> tuple[float, float, int]:
    """One pass: the tracker's CPU seconds, apply's share of them, and the violations found."""
    applying = [0.0]
    apply = replay.MetadataDelta.apply

    def timed(delta: replay.MetadataDelta) -> Any:
        started = time.process_time()
        try:
            return apply(delta)
        finally:
            applying[0] += time.process_time() - started

    replay.MetadataDelta.apply = timed  # type: ignore[method-assign]
    try:
        tracker = invariants.InvariantTracker(image_checks=False, history_checks=False, step_names=LOG_INVARIANTS)
        found = 0
        with gc_paused():
            started = time.process_time()
            for batch in batches:
                found += len(tracker.feed_batch(batch))
            seconds = time.process_time() - started
            del tracker  # the last image goes inside the pause, as it would in the suite
    finally:
        replay.MetadataDelta.apply = apply  # type: ignore[method-assign]
    return seconds, applying[0], found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=200_011)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    batches = _batches(args.partitions)
    rounds = [_round(batches) for _ in range(args.rounds)]
    result = {"partitions": args.partitions, "batches": len(batches), "records": sum(map(len, batches)),
              "violations": rounds[0][2],
              "tracker_cpu_seconds": [round(r[0], 2) for r in rounds],
              "apply_cpu_seconds": [round(r[1], 2) for r in rounds],
              "tracker_median": round(statistics.median(r[0] for r in rounds), 2)}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
