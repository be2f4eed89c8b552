"""The ``semantic`` suite: the replica view and the offline intervals as Kafka computes them (I13), and on the
``partitions`` frame (built by the structural suite) leaders (I14), ISR (I15) and reassignment fields (I18)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

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
    make_columns_frame,
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
    table = b.tables.table("replica_assignments")
    key = ["topic_id", "partition_id", "broker_id"]
    # Built a column at a time, the table's own columns as they are (a dict per row held 6 M of them at 2 M
    # partitions). Rows after a replica's first are flagged, whatever else is wrong with them.
    again = table.duplicated(key, keep="first").to_numpy(dtype=bool) if not table.empty else []
    ok: list[bool | None] = []
    why: list[str | None] = []
    o: bool | None
    w: str | None
    for r, second in zip(table_rows(table, *key, "directory", "directory_state", "offline", "offline_reason"), again,
                         strict=True):
        pk = (str(r.topic_id), int(r.partition_id))
        part = model.partitions.get(pk)
        if part is None and pk in model.partitions:
            o, w = None, "the partition's directories are broken (I1)"
        elif second:
            o, w = False, "a second row for this replica"
        elif part is None or int(r.broker_id) not in part.replicas:
            o, w = False, "not a replica of any partition"
        else:
            o, w = _replica_consistent(model, part, (*pk, int(r.broker_id)), r)
        ok.append(o)
        why.append(w)
    missing = _missing_replicas(b, table[key])
    gone = len(missing["topic_id"])
    names = ("topic_id", "topic_name", "partition_id", "broker_id", "since_offset", "directory", "directory_state",
             "offline", "offline_reason")
    # A missing replica's row has its key, directory and offset; its other columns are null.
    columns = {("offset" if n == "since_offset" else n): [*table[n].to_numpy(dtype=object),
                                                          *missing.get(n, [None] * gone)]
               for n in names}
    view = column_of("I13.replica_view_matches")
    columns |= {view: [*ok, *[False] * gone], "why": [*why, *["missing from replica_assignments"] * gone]}
    cols = {"topic_id": "string", "topic_name": "string", "partition_id": "Int64", "broker_id": "Int64",
            "offset": "Int64", "directory": "string", "directory_state": "string", "offline": "boolean",
            "offline_reason": "string", "why": "string"}
    return Frame("replicas", make_columns_frame(columns, cols, ["I13.replica_view_matches"]),
                 ("row", "offset", "topic_name", "topic_id", "partition_id", "broker_id"),
                 ("directory", "directory_state", "offline", "offline_reason", "why"))


def _missing_replicas(b: Build, present: pd.DataFrame) -> dict[str, list[Any]]:
    """The replicas of the current partitions (those whose registration the model could form) that have no
    ``replica_assignments`` row: key, the partition's directory for it and the partition row's offset, in the
    partitions table's order (a partition listed twice: its first place, its last values)."""
    rows: dict[str, list[Any]] = {"topic_id": [], "partition_id": [], "broker_id": [], "directory": [],
                                  "since_offset": []}
    for r in table_rows(b.tables.table("partitions"), "topic_id", "partition_id", "since_offset"):
        part = b.model.partitions.get((str(r.topic_id), int(r.partition_id)))
        if part is None:
            continue  # I1 (or an unparseable id) makes the view undefined for this partition
        for broker, directory in zip(part.replicas, part.directories, strict=True):
            for name, value in zip(rows, (str(r.topic_id), int(r.partition_id), broker, str(directory),
                                          optional_int(r.since_offset)), strict=True):
                rows[name].append(value)
    key = ["topic_id", "partition_id", "broker_id"]
    types = {"topic_id": object, "partition_id": "int64", "broker_id": "int64"}
    expected = pd.DataFrame(rows).astype(types)
    if expected.duplicated(key).any():
        last = expected.drop_duplicates(key, keep="last").set_index(key)
        expected = expected.loc[~expected.duplicated(key), key].join(last, on=key)
    have = present.astype(types).drop_duplicates()
    found = expected.merge(have, on=key, how="left", indicator=True)
    gone = found[found["_merge"] == "left_only"]
    return {name: gone[name].tolist() for name in rows}


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
    intervals = b.tables.history("offline_replicas", ["directory", "reason"])
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
