"""CPU of the Spark job's stateful operator, without Spark: what one core spends per record inside the operator.

The job's time is mostly its Python workers running ``pipelines.streaming.processor.replay_packets``
(docs/state-design.md "Where the time goes"). This benchmark runs exactly that function — input packets made by the
source's own ``entry_to_row``/``fan_out``/``pack_rows``, split over the replay buckets, cut into the job's
micro-batches; each unpacked, replayed and its output made into typed tables and written as Arrow IPC files (a
temporary folder) — over in-memory
stand-ins of Spark's state (``tests/support``'s ``FakeMapState``, which also counts the state calls, each a round
trip to the JVM in Spark), and prints its CPU seconds beside the pure model's replay of the same records and beside
the model's part of the operator run alone (``model_cpu_seconds``: each bucket's entries replayed by
``IncrementalReplayer`` over an in-memory ``DictImageStore`` in the same batches, each step through
``owned_routed_step`` — what the operator asks of ``jbod_model``, without the state store's reads and the sink's
rows; with the collector paused, as the operator runs, since session 44: before, the collector's passes were 15–30 %
of it), the operator's CPU per NoOp (``noop_us_per_record``: the log's NoOps alone), and apart, the CPU of the
output's way to the table writes (``output_arrow_cpu_seconds``: the frame naming the files to Arrow, pyspark's part
in the worker; ``driver_plan_cpu_seconds``: the driver's ``read_parts``,
``settle_batch`` and ``plan_batch``, no Delta write). Before the thirteenth round ``cpu_seconds`` left the output
packets out (they were ``output_packets_cpu_seconds``); until the seventeenth the output was Arrow IPC packets
returned through Spark instead of files::

    python benchmarks/operator_benchmark.py [--partitions 20011] [--buckets 4] [--batch 100000] [--profile N]
                                            [--sink-tables] [--leave-out {changes,noops}] [--first N]
                                            [--operator-only]

on a cached benchmark cluster (``benchmarks/clusters.py``). ``--profile N`` adds cProfile's top N functions by own
time. On a box whose CPU time moves by a tenth run to run (session 55's), the instructions two checkouts execute do
not move, though they do not decide alone (session 55's change ran 3–4 % fewer and was slower in time at 200 k):
``PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=/dev/null "$(python -c 'import sys;
print(sys.executable)')" benchmarks/operator_benchmark.py --partitions 20011 --operator-only`` with each checkout on
``PYTHONPATH`` (the "I refs" line; minutes under valgrind; the interpreter itself, since valgrind on pyenv's
``python`` shim counts the shell script): the rest of the command (the records read and packed) is the same on both
sides unless the change touches the codec, so the difference is the operator's. What Spark adds around it (Arrow in
and out of the worker, the state store's socket, shuffle, the JVM) is measured by ``spark_benchmark.py``. Not part
of the test suite.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import dataclasses
import itertools
import json
import os
import pstats
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
from clusters import benchmark_cluster  # beside this script (run as a script, like every benchmark)

from jbod_model.buckets import owned_routed_step, split_entries
from jbod_model.changes import DictImageStore, IncrementalReplayer, moves_no_replica
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import NoOpRecord, PartitionChangeRecord, PartitionRecord
from jbod_model.replay import Replayer
from jbod_model.slots import gc_paused
from jbod_model.stream import entry_from_json
from pipelines.lakehouse.staging import read_parts
from pipelines.lakehouse.tables import plan_batch
from pipelines.streaming.codec import entry_to_row, fan_out, pack_rows, unpack_rows
from pipelines.streaming.processor import batch_rows, output_parts, replay_bucket, replay_packets, settle_batch
from pipelines.streaming.stateful import MAP_STATES

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
# The tests' stand-ins of Spark's state.
from test_quality_support import FakeMapState, FakeValueState


def operator_cpu(inputs: dict[int, list[bytes]], buckets: int) -> dict[str, Any]:
    """Run every bucket's batches through the operator on fresh state, as a worker does (``replay_packets``: the
    packet unpacked, replayed, the output's typed tables written as files): its CPU seconds, rows out, state calls;
    and apart, the CPU of the output's way to the tables' writes: the frame naming the files to Arrow (pyspark's
    part in the worker) and the driver's side (``read_parts``, ``settle_batch``, ``plan_batch``; no Delta write)."""
    out_rows = 0
    calls: collections.Counter[str] = collections.Counter()
    replay = packets = driver = 0.0
    with tempfile.TemporaryDirectory(prefix="operator-benchmark-") as directory:
        for bucket, batches in inputs.items():
            maps = {name: FakeMapState() for name in MAP_STATES}
            meta = FakeValueState()
            for packet in batches:
                start = time.process_time()
                frame = replay_packets("bench", [(0, packet)], meta, maps, bucket, buckets,  # type: ignore[arg-type]
                                       directory=directory)
                replay += time.process_time() - start
                start = time.process_time()
                out = None if frame is None else pa.Table.from_pandas(frame, preserve_index=False)
                packets += time.process_time() - start
                start = time.process_time()
                if out is not None:
                    parts = output_parts(out)
                    rows = read_parts(parts)
                    out_rows += batch_rows(rows)
                    plan_batch(settle_batch(rows, {}))
                    for part in parts:
                        os.remove(part.file)
                driver += time.process_time() - start
            calls.update({name: m.calls for name, m in maps.items()})
    return {"cpu_seconds": round(replay, 2), "output_arrow_cpu_seconds": round(packets, 2),
            "driver_plan_cpu_seconds": round(driver, 2), "rows_out": out_rows, "state_calls": calls.total(),
            "state_calls_by_variable": dict(calls.most_common())}


def noop_cpu(entries: list[LogEntry], buckets: int) -> dict[str, Any]:
    """The operator's CPU per NoOpRecord (most of a quiet cluster's log, where a controller writes one every idle
    half second): the log's NoOps alone as one packet of the bucket the source routes the first of them to (a NoOp
    goes to its offset's bucket, ``jbod_model.buckets.entry_owner``; any bucket replays one alike), replayed on fresh
    state as a worker does (``replay_packets``), the best of three."""
    noops = [e for e in entries if type(e.record) is NoOpRecord]
    rows = [row for seq, e in enumerate(noops) for row in fan_out(entry_to_row("bench", "record", seq, e,
                                                                                buckets=buckets), buckets)]
    if not rows:
        return {"noop_us_per_record": None}
    bucket = rows[0].bucket
    packet = pack_rows(rows)
    best = float("inf")
    with tempfile.TemporaryDirectory(prefix="operator-benchmark-") as directory:
        for _ in range(3):
            maps = {name: FakeMapState() for name in MAP_STATES}
            start = time.process_time()
            replay_packets("bench", [(0, packet)], FakeValueState(), maps, bucket, buckets,  # type: ignore[arg-type]
                           directory=directory)
            best = min(best, time.process_time() - start)
    return {"noop_us_per_record": round(best / len(rows) * 1e6, 2)}


def sink_tables_cpu(inputs: dict[int, list[bytes]], buckets: int) -> dict[str, Any]:
    """The CPU of the output's typed tables alone (``RowSink.tables``, part of ``cpu_seconds``), and the rows of each
    table: every bucket batch replayed as the operator does (``replay_bucket``), then its sink's rows made into
    tables with the clock running."""
    seconds = 0.0
    rows: collections.Counter[str] = collections.Counter()
    for bucket, batches in inputs.items():
        maps = {name: FakeMapState() for name in MAP_STATES}
        meta = FakeValueState()
        for packet in batches:
            sink = replay_bucket("bench", unpack_rows(packet), meta, maps, bucket, buckets)  # type: ignore[arg-type]
            start = time.process_time()
            tables = sink.tables()
            seconds += time.process_time() - start
            rows.update({name: t.num_rows for name, t in tables.items()})
    return {"sink_tables_cpu_seconds": round(seconds, 2), "rows_by_table": dict(rows.most_common())}


def model_cpu(entries: list[LogEntry], buckets: int, batch: int) -> dict[str, Any]:
    """The model's part of the operator alone (see the module docstring): its CPU seconds and the steps it made."""
    # Batches cut as the operator's are (the next ``batch`` entries of the log), split before the clock starts.
    parts = [split_entries(entries[lo:lo + batch], buckets) for lo in range(0, len(entries), batch)]
    steps = 0
    start = time.process_time()
    # With the collector paused, as the operator runs its buckets (``replay_bucket``): with it on, a tenth of this
    # part's CPU was the collector's passes over the store, which the operator never pays.
    with gc_paused():
        for bucket in range(buckets):
            store = DictImageStore()
            pending: tuple[LogEntry, ...] = ()
            for split in parts:
                replayer = IncrementalReplayer(store, pending, group_replicas=True)
                for entry in split[bucket]:
                    step = replayer.replay(entry)
                    if step is not None:
                        owned_routed_step(step, bucket, buckets)
                        steps += 1
                store.apply(replayer.writes())
                pending = replayer.pending_transaction()
    return {"model_cpu_seconds": round(time.process_time() - start, 2), "model_steps": steps}


#: The records ``--leave-out`` can leave out of the log, by name.
_LEAVE_OUT: dict[str, Callable[[Any], bool]] = {
    "changes": moves_no_replica,
    "noops": lambda record: type(record) is NoOpRecord,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=20_011)
    parser.add_argument("--buckets", type=int, default=4)
    parser.add_argument("--batch", type=int, default=250_000, help="entries per micro-batch (the job's cap)")
    parser.add_argument("--profile", type=int, default=0, metavar="N")
    parser.add_argument("--sink-tables", action="store_true",
                        help="also time the output's typed tables alone (RowSink.tables), table by table's rows")
    parser.add_argument("--partition-record-version", type=int, choices=(0, 1, 2),
                        help="replay the PartitionRecords and PartitionChangeRecords at this version (2: as Kafka "
                             "writes them once ELR is supported, from 4.0; default: as the simulator wrote them)")
    parser.add_argument("--first", type=int, default=None, metavar="N",
                        help="only the log's first N records (the 200 k log's first 202,600 are nearly all "
                             "PartitionRecords)")
    parser.add_argument("--operator-only", action="store_true",
                        help="time the operator alone (no pure replay, model part or NoOps): for instruction counts "
                             "under valgrind's callgrind, which a busy or shared box cannot spoil")
    parser.add_argument("--leave-out", choices=sorted(_LEAVE_OUT),
                        help="replay the log without its leader and ISR changes (PartitionChangeRecords that move no "
                             "replica) or without its NoOps: what those records cost the operator is the difference")
    args = parser.parse_args()
    if args.first is not None and args.first < 1:
        parser.error("--first: at least one record")
    cluster = benchmark_cluster(args.partitions)
    with (cluster.root / "records.jsonl").open("rb") as lines:
        entries = [entry_from_json(orjson.loads(line), "records.jsonl", "records.jsonl")
                   for line in itertools.islice(lines, args.first)]
    if args.leave_out is not None:
        entries = [e for e in entries if not _LEAVE_OUT[args.leave_out](e.record)]
    if args.partition_record_version is not None:
        entries = [dataclasses.replace(e, record=dataclasses.replace(e.record, version=args.partition_record_version))
                   if isinstance(e.record, PartitionRecord | PartitionChangeRecord) else e for e in entries]
    pure = None
    if not args.operator_only:
        start = time.process_time()
        replayer = Replayer()
        for entry in entries:
            replayer.replay(entry)
        pure = time.process_time() - start
    by_bucket: dict[int, list[Any]] = collections.defaultdict(list)
    rows = 0
    # seq counts the cluster's entries, as the source's does: a batch is the next --batch entries of the log.
    for seq, entry in enumerate(entries):
        for row in fan_out(entry_to_row("bench", "record", seq, entry, buckets=args.buckets), args.buckets):
            by_bucket[row.bucket].append((seq // args.batch, row))
            rows += 1
    # A bucket's batch as the operator receives it: packed by the source (one packet stands for the batch's).
    packets = {bucket: [pack_rows([r for b, r in found if b == batch]) for batch in sorted({b for b, _ in found})]
               for bucket, found in sorted(by_bucket.items())}
    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
    result = operator_cpu(packets, args.buckets)
    if args.profile:
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(args.profile)
    if not args.operator_only:
        result |= model_cpu(entries, args.buckets, args.batch)
        result |= noop_cpu(entries, args.buckets)
    if args.sink_tables:
        result |= sink_tables_cpu(packets, args.buckets)
    result |= {"cluster": cluster.shape.key, "partition_record_version": args.partition_record_version,
               "left_out": args.leave_out, "records": len(entries), "rows_in": rows, "buckets": args.buckets,
               "batch": args.batch, "operator_us_per_record": round(result["cpu_seconds"] / len(entries) * 1e6, 1)}
    if pure is not None:
        result |= {"pure_replay_cpu_seconds": round(pure, 2),
                   "operator_over_pure_replay": round(result["cpu_seconds"] / pure, 1),
                   "model_share_of_operator": round(result["model_cpu_seconds"] / result["cpu_seconds"], 2)}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
