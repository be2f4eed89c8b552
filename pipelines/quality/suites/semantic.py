"""The ``semantic`` suite: the replica view and the offline intervals as Kafka computes them (I13), and on the
``partitions`` frame (built by the structural suite) leaders (I14), ISR (I15) and reassignment fields (I18)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jbod_model import invariants as inv
from jbod_model.directory_id import DirectoryState
from jbod_model.errors import JbodError
from jbod_model.image import PartitionRegistration
from jbod_model.replicas import OfflineReason, ReplicaState
from jbod_model.uuid import Uuid
from pipelines.quality.expectations import Check, Skip, column_of, expect_true
from pipelines.quality.frames import (
    Build,
    Frame,
    FrameBuilder,
    Model,
    make_frame,
    optional_int,
    table_rows,
)

CHECKS: tuple[Check, ...] = (
    expect_true("I13.replica_view_matches", "semantic", "replicas", "I13",
                "replica_assignments: one row per replica, consistent with Kafka's offline rule "
                "(replica_state_consistent)"),
    expect_true("I13.offline_intervals_match", "semantic", "offline_intervals", "I13",
                "offline_replicas: the open intervals are exactly the offline replicas, same directory and reason"),
    expect_true("I14.leader_acceptable", "semantic", "partitions", "I14",
                "partitions: the leader is in the ISR, registered, unfenced, on an online directory "
                "(partition_leader_ok)"),
    expect_true("I15.isr_not_empty", "semantic", "partitions", "I15",
                "partitions: ISR non-empty unless ELR is possible (partition_isr_nonempty_ok)"),
    expect_true("I18.reassignment_consistent", "semantic", "partitions", "I18",
                "partitions: adding/removing are disjoint subsets of replicas (partition_reassignment_ok)"),
)

SKIPS: tuple[Skip, ...] = ()

def _f_replicas(b: Build) -> Frame:
    model = b.model
    expected: dict[tuple[str, int, int], tuple[str, int | None]] = {}
    for r in table_rows(b.tables.table("partitions"), "topic_id", "partition_id", "since_offset"):
        part = model.partitions.get((str(r.topic_id), int(r.partition_id)))
        if part is None:
            continue  # I1 (or an unparseable id) makes the view undefined for this partition
        for broker, directory in zip(part.replicas, part.directories, strict=True):
            expected[(str(r.topic_id), int(r.partition_id), broker)] = (str(directory), optional_int(r.since_offset))
    broken = {k for k, p in model.partitions.items() if p is None}
    view = column_of("I13.replica_view_matches")
    rows = []
    seen: set[tuple[str, int, int]] = set()
    for r in table_rows(b.tables.table("replica_assignments"), "topic_id", "partition_id", "broker_id", "topic_name",
                  "since_offset", "directory", "directory_state", "offline", "offline_reason"):
        key = (str(r.topic_id), int(r.partition_id), int(r.broker_id))
        part = model.partitions.get(key[:2])
        ok: bool | None
        why: str | None
        if key[:2] in broken:
            ok, why = None, "the partition's directories are broken (I1)"
        elif key in seen:
            ok, why = False, "a second row for this replica"
        elif part is None or key not in expected:
            ok, why = False, "not a replica of any partition"
        else:
            ok, why = _replica_consistent(model, part, key, r)
        seen.add(key)
        rows.append({"topic_id": key[0], "topic_name": r.topic_name, "partition_id": key[1], "broker_id": key[2],
                     "offset": r.since_offset, "directory": r.directory, "directory_state": r.directory_state,
                     "offline": r.offline, "offline_reason": r.offline_reason, view: ok, "why": why})
    for key, (dir_text, offset) in expected.items():
        if key not in seen:
            rows.append({"topic_id": key[0], "partition_id": key[1], "broker_id": key[2], "offset": offset,
                         "directory": dir_text, view: False, "why": "missing from replica_assignments"})
    cols = {"topic_id": "string", "topic_name": "string", "partition_id": "Int64", "broker_id": "Int64",
            "offset": "Int64", "directory": "string", "directory_state": "string", "offline": "boolean",
            "offline_reason": "string", "why": "string"}
    return Frame("replicas", make_frame(rows, cols, ["I13.replica_view_matches"]),
                 ("row", "offset", "topic_name", "topic_id", "partition_id", "broker_id"),
                 ("directory", "directory_state", "offline", "offline_reason", "why"))


def _replica_consistent(model: Model, part: PartitionRegistration, key: tuple[str, int, int],
                        row: Any) -> tuple[bool, str | None]:
    directory = model.uuids.get(row.directory)
    try:
        state = ReplicaState(topic_id=Uuid.from_string(key[0]), partition_id=key[1], broker_id=key[2],
                             directory=directory if directory is not None else Uuid(0, 0),
                             directory_state=DirectoryState(row.directory_state), offline=bool(row.offline),
                             offline_reason=None if row.offline_reason is None else OfflineReason(row.offline_reason))
    except (JbodError, ValueError):
        return False, "unreadable directory, state or reason"
    if directory is None:
        return False, "unreadable directory"
    if inv.replica_state_consistent(model.cluster, part, state):
        return True, None
    expected = inv.replica_is_offline(model.cluster, key[2], directory)
    return False, f"Kafka's rule says offline={expected}"


def _f_offline_intervals(b: Build) -> Frame:
    key = ["topic_id", "partition_id", "broker_id"]
    intervals = b.tables.table("offline_replicas")
    open_ = intervals[intervals["end_offset"].isna()]
    replicas = b.tables.table("replica_assignments")
    offline = replicas[replicas["offline"].fillna(False).astype(bool)]
    dup = open_.duplicated(key, keep=False)
    merged = open_.assign(dup=dup).merge(offline[[*key, "directory", "offline_reason", "since_offset"]], on=key,
                                         how="outer", suffixes=("", "_replica"), indicator="side")
    rows = []
    for r in merged.itertuples():
        if r.side == "left_only":
            ok, why = False, "open interval, but the replica is online (or gone)"
        elif r.side == "right_only":
            ok, why = False, "offline replica without an open interval"
        elif r.dup:
            ok, why = False, "two open intervals for one replica"
        elif r.directory != r.directory_replica or r.reason != r.offline_reason:
            ok, why = False, f"interval {r.directory}/{r.reason} vs replica {r.directory_replica}/{r.offline_reason}"
        else:
            ok, why = True, None
        offset = r.start_offset if r.side != "right_only" else r.since_offset
        rows.append({"topic_id": r.topic_id, "partition_id": r.partition_id, "broker_id": r.broker_id,
                     "offset": optional_int(offset), column_of("I13.offline_intervals_match"): ok, "why": why})
    cols = {"topic_id": "string", "partition_id": "Int64", "broker_id": "Int64", "offset": "Int64", "why": "string"}
    return Frame("offline_intervals", make_frame(rows, cols, ["I13.offline_intervals_match"]),
                 ("row", "offset", "topic_id", "partition_id", "broker_id"), ("why",))


#: The frames this suite builds, by name.
FRAMES: Mapping[str, FrameBuilder] = {
    "replicas": _f_replicas,
    "offline_intervals": _f_offline_intervals,
}
