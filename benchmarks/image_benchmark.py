"""What the model's image built from the tables costs (``pipelines.lakehouse.tables.metadata_image``: the image
``jbod report --tables`` and ``jbod whatif --tables`` read), its time and its memory (issue #14 item 1: ≤ 2 GiB at
2 M partitions), in one process::

    python benchmarks/image_benchmark.py TABLES [--cluster C] [--as-of-offset N] [--digest]

Prints JSON: the seconds and CPU seconds it took, the process's resident set before, after and at its highest while
the image was built (``VmRSS`` sampled every 10 ms: ``ru_maxrss`` would count the imports' and the reads' own
peaks before it), the partitions it holds, and with ``--digest`` the SHA-1 of the image's JSON with sorted keys, to
tell two checkouts' images apart. Compare two checkouts by running this file with ``PYTHONPATH=<checkout>``. Not
part of the test suite.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import threading
import time
from pathlib import Path

from phases import rss_mb  # beside this script (run as a script, like every benchmark)

from jbod_model.image_json import image_to_json
from pipelines.lakehouse.tables import metadata_image, resolve_cluster


class _Sampler(threading.Thread):
    """The highest resident set seen while it runs."""

    def __init__(self, every: float = 0.01) -> None:
        super().__init__(daemon=True)
        self.every, self.highest, self.done = every, rss_mb(), threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.every):
            self.highest = max(self.highest, rss_mb())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tables", type=Path)
    parser.add_argument("--cluster")
    parser.add_argument("--as-of-offset", type=int)
    parser.add_argument("--digest", action="store_true", help="the SHA-1 of the image's JSON (sorted keys)")
    args = parser.parse_args()
    cluster = resolve_cluster(args.tables, args.cluster)
    before = rss_mb()
    sampler = _Sampler()
    sampler.start()
    wall, cpu = time.perf_counter(), time.process_time()
    image = metadata_image(args.tables, cluster, args.as_of_offset)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    sampler.done.set()
    sampler.join()
    out = {"cluster": cluster, "as_of_offset": args.as_of_offset, "seconds": round(wall, 2),
           "cpu_seconds": round(cpu, 2), "rss_before_mb": round(before), "rss_after_mb": round(rss_mb()),
           "peak_rss_mb": round(max(sampler.highest, rss_mb())),
           "partitions": sum(len(t.partitions) for t in image.topics.by_id.values())}
    if args.digest:
        out["sha1"] = hashlib.sha1(json.dumps(image_to_json(image), sort_keys=True).encode()).hexdigest()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
