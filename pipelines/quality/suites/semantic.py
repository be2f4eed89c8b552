"""The ``semantic`` suite: the replica view and the offline intervals as Kafka computes them (I13), and on the
``partitions`` frame (built by the structural suite) leaders (I14), ISR (I15) and reassignment fields (I18)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from jbod_model import invariants as inv
from jbod_model.directory_id import DirectoryState
from jbod_model.errors import JbodError
from jbod_model.image import PartitionRegistration
from jbod_model.replicas import OfflineReason
from jbod_model.uuid import Uuid
from pipelines.lakehouse.tables import key_packing, pack_keys
from pipelines.quality.expectations import Check, Skip, column_of, expect_true
from pipelines.quality.frames import (
    MODEL_TABLES,
    Build,
    Frame,
    FrameBuilder,
    Model,
    make_columns_frame,
    optional_int,
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
    # The rows' keys as integers, a topic id as its index among the distinct ids (each parsed once): a second row
    # for a replica is a repeated packed key (pandas' duplicated over the three columns took 1.5 s of the 6 M rows
    # at 2 M partitions, against 0.8 s), and the replicas missing from them are looked up by the same keys.
    which, ids = pd.factorize(table["topic_id"].astype(object))
    rows_key = _int_keys(table, which)
    again = _repeated(table, key, rows_key).tolist() if not table.empty else []
    ok: list[bool | None] = []
    why: list[str | None] = []
    o: bool | None
    w: str | None
    partitions = b.partitions
    # What a row says of its own directory is decided once per distinct (broker, directory, state, offline,
    # reason): 6 M rows at 2 M partitions name a few thousand (I13's rule split where its partition enters,
    # ``replica_flags_consistent``). Each row then reads its partition alone.
    flags: dict[tuple[Any, ...], _Flags] = {}
    for topic, partition, broker_cell, directory, state, offline, reason, second in zip(
            *(_cells(table, c) for c in (*key, "directory", "directory_state", "offline", "offline_reason")), again,
            strict=True):
        pk = (topic if type(topic) is str else str(topic), partition if type(partition) is int else int(partition))
        broker = broker_cell if type(broker_cell) is int else int(broker_cell)
        part = partitions.get(pk)
        if part is None and pk in partitions:
            o, w = None, "the partition's directories are broken (I1)"
        elif second:
            o, w = False, "a second row for this replica"
        elif part is None or broker not in part.replicas:
            o, w = False, "not a replica of any partition"
        else:
            flag_key = (broker, directory, state, offline, reason)
            found = flags.get(flag_key)
            if found is None:
                found = flags[flag_key] = _replica_flags(model, broker, directory, state, offline, reason)
            if model.uuids.get(pk[0]) is None:  # a topic id that is no id
                o, w = False, "unreadable directory, state or reason"
            elif found.unreadable is not None:
                o, w = False, found.unreadable
            elif found.consistent and inv.replica_directory(part, broker) == found.directory:
                o, w = True, None
            else:
                o, w = False, found.otherwise
        ok.append(o)
        why.append(w)
    del flags
    missing = _missing_replicas(b, which, ids, rows_key)
    gone = len(missing["topic_id"])
    names = ("topic_id", "topic_name", "partition_id", "broker_id", "since_offset", "directory", "directory_state",
             "offline", "offline_reason")
    # A missing replica's row has its key, directory and offset; its other columns are null. Without one (a
    # consistent table) each column is the table's own array: as Python values, the 6 M replicas' columns at 2 M
    # partitions were gigabytes of ints and lists made only to be converted back.
    def with_missing(name: str) -> Any:
        if not gone:
            return table[name].to_numpy()
        return [*table[name].to_numpy(dtype=object), *missing.get(name, [None] * gone)]

    columns = {("offset" if n == "since_offset" else n): with_missing(n) for n in names}
    view = column_of("I13.replica_view_matches")
    columns |= {view: [*ok, *[False] * gone], "why": [*why, *["missing from replica_assignments"] * gone]}
    cols = {"topic_id": "string", "topic_name": "string", "partition_id": "Int64", "broker_id": "Int64",
            "offset": "Int64", "directory": "string", "directory_state": "string", "offline": "boolean",
            "offline_reason": "string", "why": "string"}
    return Frame("replicas", make_columns_frame(columns, cols, ["I13.replica_view_matches"]),
                 ("row", "offset", "topic_name", "topic_id", "partition_id", "broker_id"),
                 ("directory", "directory_state", "offline", "offline_reason", "why"))


def _cells(frame: pd.DataFrame, column: str) -> list[Any]:
    """A column's cells as Python values, as ``itertuples`` gives them (NumPy makes the ints and bools in C)."""
    return frame[column].to_numpy().tolist()  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class _Flags:
    """What a replica-view row's (broker, directory, state, offline, reason) decide without its partition:
    ``unreadable`` (why the row cannot be read, or None), whether they are consistent
    (``replica_flags_consistent``), the directory they name and the reason given when the row is not consistent."""

    unreadable: str | None
    consistent: bool
    directory: Uuid | None
    otherwise: str | None


def _replica_flags(model: Model, broker: int, directory_text: Any, state_text: Any, offline: Any,
                   reason_text: Any) -> _Flags:
    directory = model.uuids.get(directory_text)
    try:
        state = DirectoryState(state_text)
        reason = None if reason_text is None else OfflineReason(reason_text)
        flag = bool(offline)
    except (JbodError, ValueError):
        return _Flags("unreadable directory, state or reason", False, None, None)
    if directory is None:
        return _Flags("unreadable directory", False, None, None)
    consistent = inv.replica_flags_consistent(model.cluster, broker, directory, state, flag, reason is not None)
    expected = inv.replica_is_offline(model.cluster, broker, directory)
    return _Flags(None, consistent, directory, f"Kafka's rule says offline={expected}")


def _int_keys(table: pd.DataFrame, which: Any) -> list[Any]:
    """The ``replica_assignments`` rows' keys as int64 columns: ``which``, each row's topic id as a code, then the
    partition and the broker (a null among those is refused here, as the rows' checks would refuse it)."""
    return [np.asarray(which, dtype=np.int64),
            *(table[c].astype("int64").to_numpy() for c in ("partition_id", "broker_id"))]


def _repeated(table: pd.DataFrame, key: list[str], keys: list[Any]) -> Any:
    """Whether each row repeats the key of a row before it, from the packed ``keys`` where they pack."""
    packing = key_packing([[k] for k in keys])
    if packing is None:
        return table.duplicated(key, keep="first").to_numpy(dtype=bool)
    lows, spans, _ = packing
    return pd.Series(pack_keys(keys, lows, spans), copy=False).duplicated(keep="first").to_numpy()


def _missing_replicas(b: Build, which: Any, ids: Any, rows_key: list[Any]) -> dict[str, list[Any]]:
    """The replicas of the current partitions (those whose registration the model could form) that have no
    ``replica_assignments`` row (``which``, ``ids``: the rows' topic ids factorized; ``rows_key``: their keys,
    :func:`_int_keys`): key, the partition's directory for it and the partition row's offset, in the partitions
    table's order (a partition listed twice: its first place, its last values)."""
    registrations = b.partitions
    table = b.partition_table
    parts: list[PartitionRegistration] = []
    topics: list[str] = []
    partition_ids: list[int] = []
    offsets: list[int | None] = []
    # Keys matched as integers (a topic id as its index among the partitions' topics): millions of replicas at 2 M
    # partitions, where a join on the ids' text cost seconds.
    codes: dict[str, int] = {}
    topic_codes: list[int] = []
    for topic, partition, since in zip(*(_cells(table, c) for c in ("topic_id", "partition_id", "since_offset")),
                                       strict=True):
        pk = (topic if type(topic) is str else str(topic), partition if type(partition) is int else int(partition))
        part = registrations.get(pk)
        if part is None:
            continue  # I1 (or an unparseable id) makes the view undefined for this partition
        parts.append(part)
        topics.append(pk[0])
        topic_codes.append(codes.setdefault(pk[0], len(codes)))
        partition_ids.append(pk[1])
        offsets.append(since if type(since) is int else optional_int(since))
    # The replicas as arrays, each with its place among them all ("at"): only a missing one's directory and offset
    # are made Python values, from its partition's row (600 k directories listed at 200 k partitions, where none or
    # a few are missing).
    counts = np.fromiter((len(part.replicas) for part in parts), np.int64, len(parts))
    row_of = np.repeat(np.arange(len(parts)), counts)
    wanted = [np.asarray(topic_codes, dtype=np.int64)[row_of], np.asarray(partition_ids, dtype=np.int64)[row_of],
              np.fromiter(itertools.chain.from_iterable(part.replicas for part in parts), np.int64, len(row_of))]
    # The rows' topics as the partitions' codes, looked up once per distinct id (-1: a topic no partition has, or
    # none), not once per row through Series.map (6 M rows at 2 M partitions).
    topic_of = np.array([*(codes.get(t, -1) for t in ids), -1], dtype=np.int64)  # a null's -1 takes the last
    have = [topic_of[which], *rows_key[1:]]
    at, broker = _absent(wanted, have)
    rows = row_of[at].tolist()
    places = (at - (np.cumsum(counts) - counts)[row_of[at]]).tolist()
    return {"topic_id": [topics[r] for r in rows], "partition_id": [partition_ids[r] for r in rows],
            "broker_id": broker.tolist(),
            "directory": [str(parts[r].directories[i]) for r, i in zip(rows, places, strict=True)],
            "since_offset": [offsets[r] for r in rows]}


def _absent(wanted: list[Any], have: list[Any]) -> tuple[Any, Any]:
    """The keys of ``wanted`` (int64 key columns, in order) that no row of ``have`` (the same columns) has: where
    each one's last row is in ``wanted`` and its last column, in the order of each one's first row (a key listed
    twice: its first place, its last position)."""
    packing = key_packing([[w, h] for w, h in zip(wanted, have, strict=True)])
    if packing is None:
        key = [f"k{i}" for i in range(len(wanted))]
        expected = pd.DataFrame({**dict(zip(key, wanted, strict=True)), "at": np.arange(len(wanted[0]))})
        if expected.duplicated(key).any():
            last = expected.drop_duplicates(key, keep="last").set_index(key)
            expected = expected.loc[~expected.duplicated(key), key].join(last, on=key)
        found = expected.merge(pd.DataFrame(dict(zip(key, have, strict=True))).drop_duplicates(), on=key,
                               how="left", indicator=True)
        gone = found[found["_merge"] == "left_only"]
        return gone["at"].to_numpy(dtype=np.int64), gone[key[-1]].to_numpy(dtype=np.int64)
    # Each key packed as one integer, and every test of it a hash lookup (pandas' duplicated and isin): at 2 M
    # partitions a merge of the 6 M keys copied both sides (1.6 GB at its peak), numpy's isin sorted both arrays
    # together (8 s), and pandas' duplicated over three columns and drop_duplicates cost 1–2 s each.
    lows, spans, _ = packing
    packed = pd.Series(pack_keys(wanted, lows, spans), copy=False)
    at = np.arange(len(packed), dtype=np.int64)
    repeated = packed.duplicated(keep="first").to_numpy()
    if repeated.any():
        last = ~packed.duplicated(keep="last").to_numpy()
        at = pd.Series(at[last], index=packed.to_numpy()[last]).reindex(packed.to_numpy()[~repeated]).to_numpy()
        packed = packed[~repeated]
    at = at[~packed.isin(pack_keys(have, lows, spans)).to_numpy()]
    return at, wanted[-1][at]


def _f_offline_intervals(b: Build) -> Frame:
    key = ["topic_id", "partition_id", "broker_id"]
    intervals = b.tables.history("offline_replicas", ["directory", "reason"],
                                 categories=("topic_id", "directory", "reason"))
    open_ = intervals[intervals["end_offset"].isna()]
    replicas = b.tables.table("replica_assignments")
    offline = replicas[replicas["offline"].fillna(False).astype(bool)]
    dup = open_.duplicated(key, keep=False)
    merged = open_.assign(dup=dup).merge(offline[[*key, "directory", "offline_reason", "since_offset"]], on=key,
                                         how="outer", suffixes=("", "_replica"), indicator="side")
    # Decided a column at a time, not row by row (the frame 0.99 → 0.71 s for the 133 k open intervals at 200 k
    # partitions): each row's first applicable reason, in this order.
    side = merged["side"].to_numpy(dtype=object)
    online, unopened = side == "left_only", side == "right_only"
    paired = ~(online | unopened)
    twice = paired & merged["dup"].eq(True).to_numpy(dtype=bool)
    directory, held_in = merged["directory"].to_numpy(dtype=object), merged["directory_replica"].to_numpy(dtype=object)
    reason, held_for = merged["reason"].to_numpy(dtype=object), merged["offline_reason"].to_numpy(dtype=object)
    # Object arrays compare value by value with Python's ``!=``, as two cells would.
    differ = paired & ~twice & ((directory != held_in) | (reason != held_for))
    why = np.full(len(merged), None, dtype=object)
    why[online] = "open interval, but the replica is online (or gone)"
    why[unopened] = "offline replica without an open interval"
    why[twice] = "two open intervals for one replica"
    for i in np.flatnonzero(differ).tolist():
        why[i] = f"interval {directory[i]}/{reason[i]} vs replica {held_in[i]}/{held_for[i]}"
    offsets = np.where(unopened, merged["since_offset"].to_numpy(dtype=object),
                       merged["start_offset"].to_numpy(dtype=object))
    columns = {"topic_id": merged["topic_id"].to_numpy(dtype=object), "partition_id": merged["partition_id"].to_numpy(),
               "broker_id": merged["broker_id"].to_numpy(), "offset": [optional_int(o) for o in offsets.tolist()],
               column_of("I13.offline_intervals_match"): (~(online | unopened | twice | differ)).tolist(), "why": why}
    cols = {"topic_id": "string", "partition_id": "Int64", "broker_id": "Int64", "offset": "Int64", "why": "string"}
    return Frame("offline_intervals", make_columns_frame(columns, cols, ["I13.offline_intervals_match"]),
                 ("row", "offset", "topic_id", "partition_id", "broker_id"), ("why",))


#: The frames this suite builds, by name.
FRAMES: Mapping[str, FrameBuilder] = {
    "replicas": _f_replicas,
    "offline_intervals": _f_offline_intervals,
}
#: The tables each frame reads through ``Build`` (``partitions``: the table and ``Build.partitions``).
READS: Mapping[str, frozenset[str]] = {
    "replicas": MODEL_TABLES | {"replica_assignments", "partitions"},
    "offline_intervals": frozenset({"replica_assignments"}),
}
