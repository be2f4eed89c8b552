"""How long ``jbod check`` takes on a large cluster: tables of 200k–2M replica rows, every suite.

The tables are written directly in the job's Delta contract (``pipelines.lakehouse.tables`` schemas, delta-rs), from a
generated metadata log that a JBOD controller could have written, so every rule has real rows to look at and the
clean cluster passes:

* ``B`` brokers with ``D`` disks each register, then unfence (metadata.version 3.9-IV0);
* topics of ``P`` partitions with replication factor 3 are created with UNASSIGNED directories (one record batch per
  topic), then every replica is assigned a disk (AssignReplicasToDirs; batches of 1000 records);
* broker 1's first disk fails: one batch demotes broker 1 in every partition it had there, then its registration
  change drops the disk — its replicas stay offline in ``offline_replicas``.

So the current tables hold ``3·N`` replica rows, ``replica_assignment_history`` about twice that, ``records`` about
``2·N`` records (N = partitions). Generation is not timed; reading, frame building, great-expectations validation,
the ``dq_results`` write and the data docs are, separately, per suite and frame.

    python benchmarks/check_benchmark.py --replicas 200000 600000 2000000 [--engine spark] [--out DIR]

Not part of the test suite (it takes minutes at 2M replicas).
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from deltalake import write_deltalake

from jbod_model.directory_id import UNASSIGNED
from jbod_model.uuid import Uuid
from pipelines.config.profiles import SUITE_NAMES, QualitySettings
from pipelines.lakehouse.tables import stored_schemas
from pipelines.quality import FRAMES, ExternalInputs, GxRunner, TableSet, checks_for, run_checks
from pipelines.quality.frames import Build

CLUSTER = "bench"
START_MS = 1_700_000_000_000
RF = 3
LEVEL = 21  # 3.9-IV0


def _uuid(i: int, salt: int) -> str:
    """A deterministic, non-reserved directory/topic id."""
    return str(Uuid(0x1000 + salt, 0x100000 + i))


class Log:
    """Collects bronze rows; offsets are consecutive, one millisecond apart."""

    def __init__(self) -> None:
        self.cols: dict[str, list[Any]] = {k: [] for k in ("offset", "batch_base_offset", "type", "version", "data")}

    @property
    def next(self) -> int:
        return len(self.cols["offset"])

    def add(self, base: int, type_: str, version: int, data: dict[str, Any]) -> int:
        offset = self.next
        for key, value in (("offset", offset), ("batch_base_offset", base), ("type", type_), ("version", version),
                           ("data", json.dumps(data, separators=(",", ":")))):
            self.cols[key].append(value)
        return offset


def _write(root: Path, name: str, columns: dict[str, Any]) -> None:
    schema = stored_schemas()[name]
    n = len(next(iter(columns.values())))
    arrays = []
    for field in schema:
        if field.name == "cluster_id":
            arrays.append(pa.array([CLUSTER] * n, pa.string()))
        elif field.name in columns:
            value = columns[field.name]
            if pa.types.is_timestamp(field.type):
                arrays.append(pa.array(value, pa.int64()).cast(field.type))
            else:
                arrays.append(pa.array(value, field.type))
        else:
            arrays.append(pa.nulls(n, field.type))
    write_deltalake(str(root / name), pa.Table.from_arrays(arrays, schema=schema), mode="overwrite")


def _us(offsets: Any) -> Any:
    """Offsets → the µs timestamps of history/current tables (1 ms per offset); None stays None."""
    return [None if o is None else (START_MS + int(o)) * 1000 for o in offsets]


def generate(root: Path, replicas: int, brokers: int = 30, dirs: int = 4, partitions_per_topic: int = 100) -> dict[
        str, int]:
    """Write the tables of one clean cluster with about ``replicas`` replica rows under ``root``."""
    n_parts = max(1, replicas // RF)
    n_topics = max(1, -(-n_parts // partitions_per_topic))
    n_parts = n_topics * partitions_per_topic
    log = Log()
    disk = [[_uuid(b * dirs + d, 1) for d in range(dirs)] for b in range(brokers + 1)]  # disk[b][d], b from 1
    failed_dir = disk[1][0]
    log.add(0, "FEATURE_LEVEL_RECORD", 0, {"name": "metadata.version", "featureLevel": LEVEL})
    reg_at: dict[int, int] = {}
    for b in range(1, brokers + 1):
        o = log.next
        reg_at[b] = log.add(o, "REGISTER_BROKER_RECORD", 3, {
            "brokerId": b, "isMigratingZkBroker": False, "incarnationId": _uuid(b, 2), "brokerEpoch": o,
            "endPoints": [{"name": "PLAINTEXT", "host": f"b{b}", "port": 9092, "securityProtocol": 0}],
            "features": [], "rack": None, "fenced": True, "inControlledShutdown": False, "logDirs": disk[b]})
    unfence_at: dict[int, int] = {}
    for b in range(1, brokers + 1):
        o = log.next
        unfence_at[b] = log.add(o, "BROKER_REGISTRATION_CHANGE_RECORD", 0,
                                {"brokerId": b, "brokerEpoch": reg_at[b], "fenced": -1})
    # Placement: partition p on brokers (p, p+1, p+2) mod B (1-based), disk (p + position) mod D.
    p_idx = np.arange(n_parts)
    first = p_idx % brokers
    reps = np.stack([(first + k) % brokers + 1 for k in range(RF)], axis=1)
    dir_idx = np.stack([(p_idx + k) % dirs for k in range(RF)], axis=1)
    topic_ids = [_uuid(t, 3) for t in range(n_topics)]
    created = np.zeros(n_parts, dtype=np.int64)
    unassigned = str(UNASSIGNED)
    for t in range(n_topics):
        base = log.add(log.next, "TOPIC_RECORD", 0, {"name": f"topic-{t}", "topicId": topic_ids[t]})
        for pid in range(partitions_per_topic):
            p = t * partitions_per_topic + pid
            r = [int(x) for x in reps[p]]
            created[p] = log.add(base, "PARTITION_RECORD", 1, {
                "partitionId": pid, "topicId": topic_ids[t], "replicas": r, "isr": r, "removingReplicas": [],
                "addingReplicas": [], "leader": r[0], "leaderEpoch": 0, "partitionEpoch": 0,
                "directories": [unassigned] * RF})
    assigned = np.zeros(n_parts, dtype=np.int64)
    directories = [[disk[int(reps[p, k])][int(dir_idx[p, k])] for k in range(RF)] for p in range(n_parts)]
    base = log.next
    for p in range(n_parts):
        if (log.next - base) >= 1000:
            base = log.next
        assigned[p] = log.add(base, "PARTITION_CHANGE_RECORD", 1, {
            "partitionId": p % partitions_per_topic, "topicId": topic_ids[p // partitions_per_topic],
            "directories": directories[p]})
    # Broker 1's first disk fails: demote broker 1 where it had a replica there, then drop the disk.
    hit = [p for p in range(n_parts) if failed_dir in directories[p]]
    base = log.next
    isr = [list(map(int, reps[p])) for p in range(n_parts)]
    leader = [int(reps[p, 0]) for p in range(n_parts)]
    leader_epoch = [0] * n_parts
    partition_epoch = [1] * n_parts  # the assignment bumped it
    changed_at = [int(assigned[p]) for p in range(n_parts)]
    for p in hit:
        isr[p] = [b for b in isr[p] if b != 1]
        data: dict[str, Any] = {"partitionId": p % partitions_per_topic,
                                "topicId": topic_ids[p // partitions_per_topic], "isr": isr[p]}
        if leader[p] == 1:
            leader[p] = isr[p][0]
            data["leader"] = leader[p]
            leader_epoch[p] += 1
        partition_epoch[p] += 1
        changed_at[p] = log.add(base, "PARTITION_CHANGE_RECORD", 1, data)
    fail_at = log.add(base, "BROKER_REGISTRATION_CHANGE_RECORD", 2,
                      {"brokerId": 1, "brokerEpoch": reg_at[1], "logDirs": disk[1][1:]})
    n_records = log.next

    offs = log.cols["offset"]
    _write(root, "records", {**log.cols, "leader_epoch": [1] * n_records,
                             "timestamp": _us(offs),  # µs, as the writer should store it
                             "source": ["bench"] * n_records, "origin": ["log"] * n_records,
                             "applied_offset": offs})
    _write(root, "features", {"name": ["metadata.version"], "level": [LEVEL], "since_offset": [0],
                              "since_time": _us([0])})
    _write(root, "feature_history", {"name": ["metadata.version"], "level": [LEVEL], "valid_from_offset": [0],
                                     "valid_from_time": _us([0]), "valid_to_offset": [None],
                                     "valid_to_time": [None]})
    b_ids = list(range(1, brokers + 1))
    cur_dirs = [disk[b][1:] if b == 1 else disk[b] for b in b_ids]
    broker_common = {"broker_epoch": [reg_at[b] for b in b_ids], "incarnation_id": [_uuid(b, 2) for b in b_ids],
                     "in_controlled_shutdown": [False] * brokers, "is_migrating_zk_broker": [False] * brokers,
                     "listeners": ["[]"] * brokers}
    since = [fail_at if b == 1 else unfence_at[b] for b in b_ids]
    _write(root, "brokers", {"broker_id": b_ids, **broker_common, "fenced": [False] * brokers,
                             "log_dirs": cur_dirs, "since_offset": since, "since_time": _us(since)})
    hist: dict[str, list[Any]] = {k: [] for k in ("broker_id", "broker_epoch", "incarnation_id", "fenced",
                                                  "log_dirs", "valid_from_offset", "valid_to_offset")}
    for b in b_ids:
        versions: list[tuple[bool, list[str], int, int | None]] = [(True, disk[b], reg_at[b], unfence_at[b])]
        versions += ([(False, disk[b], unfence_at[b], fail_at), (False, disk[b][1:], fail_at, None)] if b == 1
                     else [(False, disk[b], unfence_at[b], None)])
        for fenced, dirs_, lo, hi in versions:
            for key, value in (("broker_id", b), ("broker_epoch", reg_at[b]), ("incarnation_id", _uuid(b, 2)),
                               ("fenced", fenced), ("log_dirs", dirs_), ("valid_from_offset", lo),
                               ("valid_to_offset", hi)):
                hist[key].append(value)
    _write(root, "broker_history", {**hist, "valid_from_time": _us(hist["valid_from_offset"]),
                                    "valid_to_time": _us(hist["valid_to_offset"])})
    t_names = [f"topic-{t}" for t in range(n_topics)]
    topic_at = [int(created[t * partitions_per_topic]) - 1 for t in range(n_topics)]
    _write(root, "topics", {"topic_id": topic_ids, "topic_name": t_names, "since_offset": topic_at,
                            "since_time": _us(topic_at)})
    _write(root, "topic_history", {"topic_id": topic_ids, "topic_name": t_names, "valid_from_offset": topic_at,
                                   "valid_from_time": _us(topic_at), "valid_to_offset": [None] * n_topics,
                                   "valid_to_time": [None] * n_topics})
    p_topic = [topic_ids[p // partitions_per_topic] for p in range(n_parts)]
    p_name = [t_names[p // partitions_per_topic] for p in range(n_parts)]
    p_id = [p % partitions_per_topic for p in range(n_parts)]
    empty: list[list[int]] = [[] for _ in range(n_parts)]
    partition_cols = {"topic_id": p_topic, "partition_id": p_id, "topic_name": p_name,
                      "replicas": [list(map(int, r)) for r in reps], "isr": isr, "leader": leader,
                      "leader_epoch": leader_epoch, "partition_epoch": partition_epoch,
                      "leader_recovery_state": [0] * n_parts, "directories": directories, "adding_replicas": empty,
                      "removing_replicas": empty, "eligible_leader_replicas": empty, "last_known_elr": empty}
    _write(root, "partitions", {**partition_cols, "since_offset": changed_at, "since_time": _us(changed_at)})
    _write(root, "partition_history", {**partition_cols, "valid_from_offset": changed_at,
                                       "valid_from_time": _us(changed_at), "valid_to_offset": [None] * n_parts,
                                       "valid_to_time": [None] * n_parts})
    # Replicas: current rows, history (UNASSIGNED → assigned [→ offline]) and the open offline intervals.
    replica_cols = ("topic_id", "partition_id", "broker_id", "topic_name", "directory", "directory_state", "offline",
                    "offline_reason")
    rk: dict[str, list[Any]] = {k: [] for k in (*replica_cols, "since_offset")}
    hk: dict[str, list[Any]] = {k: [] for k in (*replica_cols, "valid_from_offset", "valid_to_offset")}
    ok: dict[str, list[Any]] = {k: [] for k in ("topic_id", "partition_id", "broker_id", "topic_name", "directory",
                                                "directory_state", "reason", "start_offset")}

    def version(p: int, b: int, d: str, state: str, off: bool, lo: int, hi: int | None) -> None:
        values: tuple[tuple[str, Any], ...] = (
            ("topic_id", p_topic[p]), ("partition_id", p_id[p]), ("broker_id", b), ("topic_name", p_name[p]),
            ("directory", d), ("directory_state", state), ("offline", off),
            ("offline_reason", "DIRECTORY_OFFLINE" if off else None), ("valid_from_offset", lo),
            ("valid_to_offset", hi))
        for key, value in values:
            hk[key].append(value)

    for p in range(n_parts):
        for k in range(RF):
            b, d = int(reps[p, k]), directories[p][k]
            offline = d == failed_dir
            for key, value in (("topic_id", p_topic[p]), ("partition_id", p_id[p]), ("broker_id", b),
                               ("topic_name", p_name[p]), ("directory", d), ("directory_state", "ASSIGNED"),
                               ("offline", offline), ("offline_reason", "DIRECTORY_OFFLINE" if offline else None),
                               ("since_offset", fail_at if offline else int(assigned[p]))):
                rk[key].append(value)
            version(p, b, unassigned, "UNASSIGNED", False, int(created[p]), int(assigned[p]))
            version(p, b, d, "ASSIGNED", False, int(assigned[p]), fail_at if offline else None)
            if offline:
                version(p, b, d, "ASSIGNED", True, fail_at, None)
                for key, value in (("topic_id", p_topic[p]), ("partition_id", p_id[p]), ("broker_id", b),
                                   ("topic_name", p_name[p]), ("directory", d), ("directory_state", "ASSIGNED"),
                                   ("reason", "DIRECTORY_OFFLINE"), ("start_offset", fail_at)):
                    ok[key].append(value)
    _write(root, "replica_assignments", {**rk, "since_time": _us(rk["since_offset"])})
    _write(root, "replica_assignment_history", {**hk, "valid_from_time": _us(hk["valid_from_offset"]),
                                                "valid_to_time": _us(hk["valid_to_offset"])})
    n_off = len(ok["start_offset"])
    _write(root, "offline_replicas", {**ok, "start_time": _us(ok["start_offset"]), "end_offset": [None] * n_off,
                                      "end_time": [None] * n_off})
    _write(root, "replay_faults", {"seq": [], "offset": [], "source": [], "error": [], "message": []})
    _write(root, "controller_responses", {"request_seq": []})
    return {"brokers": brokers, "partitions": n_parts, "replicas": n_parts * RF,
            "replica_versions": len(hk["valid_from_offset"]), "records": n_records, "offline_replicas": n_off}


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(root: Path, engine: str, spark: Any) -> dict[str, Any]:
    """Time one full check, phase by phase; then ``run_checks`` end to end (results table and data docs)."""
    settings = QualitySettings()
    out: dict[str, Any] = {"engine": engine}
    t0 = time.monotonic()
    runner = GxRunner(engine, spark=spark)
    out["gx_setup_s"] = round(time.monotonic() - t0, 2)
    tables = TableSet(CLUSTER, root)
    t0 = time.monotonic()
    for name in ("features", "feature_history", "brokers", "broker_history", "partitions", "replica_assignments",
                 "replica_assignment_history", "offline_replicas", "records", "replay_faults"):
        tables.table(name)
    out["read_s"] = round(time.monotonic() - t0, 2)
    # The phases of check_cluster, timed one by one (frame builders are private: this file is their benchmark).
    build = Build(tables, settings, ExternalInputs())
    frames: dict[str, Any] = {}
    frame_s: dict[str, float] = {}
    checks = checks_for(SUITE_NAMES)
    for name in dict.fromkeys(c.frame for c in checks):
        t0 = time.monotonic()
        frames[name] = FRAMES[name](build)
        frame_s[name] = round(time.monotonic() - t0, 2)
    out["frames_s"] = frame_s
    out["frame_rows"] = {k: len(v.data) for k, v in frames.items()}
    gx_s: dict[str, float] = {}
    failed: list[str] = []
    groups: dict[tuple[str, str], list[Any]] = {}
    for c in checks:
        groups.setdefault((c.suite, c.frame), []).append(c)
    for (suite, frame_name), group in groups.items():
        frame = frames[frame_name]
        if frame.skip is not None:
            continue
        t0 = time.monotonic()
        for c, r in runner.validate(suite, frame, group, settings, "bench", datetime.now(UTC)):
            if r is None or not r.success:
                failed.append(c.name)
        gx_s[f"{suite}.{frame_name}"] = round(time.monotonic() - t0, 2)
    out["gx_validate_s"] = gx_s
    out["failed"] = failed
    out["phases_total_s"] = round(out["read_s"] + sum(frame_s.values()) + sum(gx_s.values()), 2)
    t0 = time.monotonic()
    run = run_checks(root, settings=settings, engine=engine, spark=spark)
    out["run_checks_end_to_end_s"] = round(time.monotonic() - t0, 2)
    out["run_checks_failed"] = sorted(run.failed_expectations())
    out["peak_rss_mb"] = round(_rss_mb())
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, nargs="+", default=[200_000, 600_000, 2_000_000])
    parser.add_argument("--engine", choices=["pandas", "spark"], default="pandas")
    parser.add_argument("--out", type=Path, default=None, help="where the generated tables go (default: a temp dir)")
    args = parser.parse_args(argv)
    spark = None
    if args.engine == "spark":
        from pipelines.streaming.session import spark_session  # noqa: PLC0415 - Spark only for this engine

        spark = spark_session("local[2]")
    base = args.out or Path(tempfile.mkdtemp(prefix="check-bench-"))
    try:
        for n in args.replicas:
            root = base / f"r{n}"
            shutil.rmtree(root, ignore_errors=True)
            t0 = time.monotonic()
            sizes = generate(root, n)
            gen_s = round(time.monotonic() - t0, 1)
            result = {"sizes": sizes, "generate_s": gen_s, **measure(root, args.engine, spark)}
            print(json.dumps(result), flush=True)
    finally:
        if args.out is None:
            shutil.rmtree(base, ignore_errors=True)
        if spark is not None:
            spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
