"""Speed of the reference model's hot path — decode, replay, image output — and of ``jbod image --full-log --json``
end to end, against the DuckDB baseline on the same records, in one run (issue #12; numbers in docs/performance.md).

Input: a node's metadata log dir and the canonical JSONL of the same records (what ``jbod simulate`` writes, e.g.
``jbod simulate --brokers 60 --dirs 6 --partitions 200000 --failures 20 --out DIR`` gives ``DIR/metadata`` and
``DIR/records.jsonl``). Stages, each timed alone:

* **decode**: every record of the log read and decoded (``open_inputs(..., from_snapshot=False)``), records/s, with
  the cyclic collector paused as the stream runner has it;
* **replay**: the decoded entries through the stream runner and reference controller, as ``jbod image`` runs them;
* **output**: ``image_json_text_of`` (what ``jbod image --json`` prints), and the reference ``image_to_json`` with
  its serialisation beside it (the two texts checked equal);
* **end to end**: ``python -m pipelines.cli image DIR --full-log --json`` as a subprocess: wall time and peak RSS;
* **DuckDB**: ``duckdb_baseline.py RECORDS.jsonl`` as a subprocess (wall time, peak RSS), and the ratio.

The end-to-end image is checked against DuckDB's (partitions and offline replicas) before any ratio is printed.
The machine may be shared: the subprocess pair runs ``--repeat`` times, alternating, and medians are reported.

    python benchmarks/model_benchmark.py DIR/metadata DIR/records.jsonl [--repeat 3] [--duckdb PATH] [--json OUT]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from clusters import DUCKDB_BASELINE, run_measured  # beside this script (run as a script, like every benchmark)

from jbod_model.controller.context import ControllerConfig
from jbod_model.controller.controller import ReferenceController
from jbod_model.image_json import image_json_text, image_json_text_of, image_to_json
from jbod_model.slots import gc_paused
from jbod_model.sources import open_inputs
from jbod_model.stream import StreamEntry, StreamRunner


def _run(cmd: list[str], stdout_path: Path) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds and peak RSS (bytes) of one subprocess (:func:`clusters.run_measured`), its stdout
    to ``stdout_path``; a failure stops the benchmark with the command's stderr."""
    stderr_path = stdout_path.with_suffix(".stderr")
    with stdout_path.open("wb") as out, stderr_path.open("wb") as err:
        run = run_measured(cmd, out, err)
    if run.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{stderr_path.read_text()}")
    return run.seconds, run.cpu_seconds, run.rss_bytes


def stage_times(node_dir: Path) -> dict[str, float]:
    """Decode, replay and output, each alone, in this process: wall and CPU seconds of each. On a shared machine the
    CPU seconds are the steadier measure (a single-threaded stage's wall time includes waiting for a core)."""
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    loaded = open_inputs([node_dir], from_snapshot=False)
    # With the collector paused, as the stream runner reads (gc_paused_iteration) when ``jbod image`` runs: with it
    # on, collecting 1.2 M entries into a list is mostly the collector walking them again and again.
    with gc_paused():
        entries: list[StreamEntry] = list(loaded.entries)
    decode, decode_cpu = time.perf_counter() - wall, time.process_time() - cpu
    runner = StreamRunner(ReferenceController(loaded.base_image, ControllerConfig()))
    wall, cpu = time.perf_counter(), time.process_time()
    for _event in runner.run(entries):
        pass
    image = runner.image
    replay, replay_cpu = time.perf_counter() - wall, time.process_time() - cpu
    del entries
    wall, cpu = time.perf_counter(), time.process_time()
    text = image_json_text_of(image)
    output, output_cpu = time.perf_counter() - wall, time.process_time() - cpu
    wall, cpu = time.perf_counter(), time.process_time()
    reference = image_json_text(image_to_json(image))
    output_ref, output_ref_cpu = time.perf_counter() - wall, time.process_time() - cpu
    if reference != text:
        raise SystemExit("image_json_text_of and image_json_text(image_to_json(...)) differ")
    partitions = sum(len(t.partitions) for t in image.topics.by_id.values())
    return {"records": float(loaded.report.records), "decode_s": decode, "decode_cpu_s": decode_cpu,
            "replay_s": replay, "replay_cpu_s": replay_cpu, "output_s": output, "output_cpu_s": output_cpu,
            "output_reference_s": output_ref, "output_reference_cpu_s": output_ref_cpu,
            "partitions": float(partitions), "json_bytes": float(len(text))}


def _same_image(ours: dict[str, Any], duck: dict[str, Any]) -> list[str]:
    """Differences between our image JSON and DuckDB's (the fields both derive)."""
    problems = []
    mine = {(p["topicId"], p["partitionId"]): (p["replicas"], p["isr"], p["leader"], p["leaderEpoch"],
                                               p["partitionEpoch"], p["directories"]) for p in ours["partitions"]}
    theirs = {(p["topicId"], p["partition"]): (p["replicas"], p["isr"], p["leader"], p["leaderEpoch"],
                                               p["partitionEpoch"], p["directories"]) for p in duck["partitions"]}
    if mine != theirs:
        differ = [k for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k)]
        problems.append(f"{len(differ)} partition(s) differ, e.g. {sorted(differ)[:3]}")
    mine_off = {(r["topicId"], r["partitionId"], r["brokerId"], r["directory"]) for r in ours["replicas"]
                if r["offline"]}
    theirs_off = {(r["topicId"], r["partition"], r["broker"], r["directory"]) for r in duck["offlineReplicas"]}
    if mine_off != theirs_off:
        problems.append(f"offline replicas differ: {len(mine_off - theirs_off)} only ours, "
                        f"{len(theirs_off - mine_off)} only DuckDB's")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("node_dir", type=Path, help="a node's metadata log dir (holding __cluster_metadata-0)")
    ap.add_argument("records", type=Path, help="the canonical JSONL of the same records (for DuckDB)")
    ap.add_argument("--repeat", type=int, default=1, help="end-to-end/DuckDB pairs to run (medians reported)")
    ap.add_argument("--duckdb", type=Path, default=DUCKDB_BASELINE, help="duckdb_baseline.py")
    ap.add_argument("--skip-stages", action="store_true", help="only the end-to-end and DuckDB runs")
    ap.add_argument("--json", type=Path, help="also write the numbers here")
    args = ap.parse_args(argv)

    results: dict[str, Any] = {"node_dir": str(args.node_dir), "records_jsonl": str(args.records)}
    if not args.skip_stages:
        stages = stage_times(args.node_dir)
        n = stages["records"]
        results.update(stages)
        print(f"records {int(n):,}, partitions {int(stages['partitions']):,}")
        for stage in ("decode", "replay"):
            w, c = stages[f"{stage}_s"], stages[f"{stage}_cpu_s"]
            print(f"{stage:6}  {w:7.2f} s wall {n / w:10,.0f} records/s   {c:7.2f} s CPU {n / c:10,.0f} records/s")
        print(f"output  {stages['output_s']:7.2f} s wall                       {stages['output_cpu_s']:7.2f} s CPU "
              f"({int(stages['json_bytes']):,} bytes of image JSON)")
        print(f"  (reference image_to_json + orjson: {stages['output_reference_s']:.2f} s wall, "
              f"{stages['output_reference_cpu_s']:.2f} s CPU)")

    e2e: list[tuple[float, float, int]] = []
    duck: list[tuple[float, float, int]] = []
    with tempfile.TemporaryDirectory(prefix="model-bench-") as tmp:
        ours_out, duck_out = Path(tmp) / "image.json", Path(tmp) / "duck.json"
        env_python = sys.executable
        for _ in range(args.repeat):
            e2e.append(_run([env_python, "-m", "pipelines.cli", "image", str(args.node_dir), "--full-log",
                             "--json"], ours_out))
            duck.append(_run([env_python, str(args.duckdb), str(args.records), "--out", str(duck_out)],
                             Path(tmp) / "duck.log"))
        problems = _same_image(json.loads(ours_out.read_bytes()), json.loads(duck_out.read_bytes()))
    if problems:
        print("the images differ, timings are not comparable: " + "; ".join(problems))
        return 1
    e2e_s, duck_s = statistics.median(r[0] for r in e2e), statistics.median(r[0] for r in duck)
    e2e_cpu, duck_cpu = statistics.median(r[1] for r in e2e), statistics.median(r[1] for r in duck)
    e2e_rss, duck_rss = max(r[2] for r in e2e), max(r[2] for r in duck)
    results.update({"e2e_s": e2e_s, "e2e_cpu_s": e2e_cpu, "e2e_runs_s": [r[0] for r in e2e], "e2e_peak_rss": e2e_rss,
                    "duckdb_s": duck_s, "duckdb_cpu_s": duck_cpu, "duckdb_runs_s": [r[0] for r in duck],
                    "duckdb_peak_rss": duck_rss, "ratio_to_duckdb": e2e_s / duck_s})
    records = results.get("records")
    rate = f" {records / e2e_s:10,.0f} records/s" if records else ""
    print(f"jbod image --full-log --json  {e2e_s:7.2f} s wall{rate}  {e2e_cpu:7.2f} s CPU  "
          f"peak RSS {e2e_rss / 2**20:,.0f} MiB (median of {len(e2e)})")
    print(f"DuckDB baseline               {duck_s:7.2f} s wall  {duck_cpu:7.2f} s CPU (all threads)  "
          f"peak RSS {duck_rss / 2**20:,.0f} MiB")
    print(f"ratio to DuckDB               {e2e_s / duck_s:7.2f}x wall  (images agree)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
