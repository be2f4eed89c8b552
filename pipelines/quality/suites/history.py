"""The ``history`` suite: a directory owned by one broker at any offset (I6, ``broker_history``), registration
changes only shrink (I8), carried-over registrations and pending placements resolve within a threshold (I9 warning,
I12), a replica's directory was registered by its broker at some earlier offset (I21)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from jbod_model import invariants as inv
from jbod_model.directory_id import DirectoryState, is_reserved
from jbod_model.metadata_version import FEATURE_NAME, MetadataVersion
from jbod_model.records.metadata import (
    BrokerRegistrationChangeRecord,
)
from jbod_model.uuid import Uuid
from pipelines.quality.expectations import Check, Skip, column_of, expect_at_most, expect_true
from pipelines.quality.frames import (
    MODEL_TABLES,
    RECORD_COLUMNS,
    Build,
    Frame,
    FrameBuilder,
    Model,
    as_texts,
    distinct_rows,
    make_columns_frame,
    make_frame,
    optional_int,
    same_key_as_previous,
    sorted_by,
    table_rows,
)
from pipelines.quality.inputs import to_ms

CHECKS: tuple[Check, ...] = (
    expect_true("I6.directory_owned_once_over_time", "history", "broker_directory_history", "I6",
                "broker_history: no two brokers list one directory in overlapping intervals"),
    expect_true("I8.change_only_shrinks_directories", "history", "registration_changes", "I8",
                "records + broker_history: a non-empty BrokerRegistrationChangeRecord.LogDirs is a subset of the "
                "broker's directories just before (registration_change_shrinks_directories)"),
    expect_at_most("I9.carried_over_registration_offsets", "history", "carried_over", "age_offsets",
                   "pending_placement_max_offsets", "I9",
                   "brokers: a registration without directories at ≥ 3.7-IV2 is re-sent within N offsets",
                   severity="warning"),
    expect_at_most("I9.carried_over_registration_ms", "history", "carried_over", "age_ms", "pending_placement_max_ms",
                   "I9", "brokers: a registration without directories at ≥ 3.7-IV2 is re-sent within N ms",
                   severity="warning"),
    expect_at_most("I12.pending_placement_offsets", "history", "pending_placements", "age_offsets",
                   "pending_placement_max_offsets", "I12",
                   "replica_assignments: UNASSIGNED/MIGRATING on an unfenced broker resolves within N offsets"),
    expect_at_most("I12.pending_placement_ms", "history", "pending_placements", "age_ms", "pending_placement_max_ms",
                   "I12", "replica_assignments: UNASSIGNED/MIGRATING on an unfenced broker resolves within N ms"),
    expect_true("I21.directory_registered_by_broker", "history", "replica_directory_history", "I21",
                "replica_assignment_history + broker_history: a directory set for a replica was registered by its "
                "broker at that offset or earlier (replica_directory_registered)"),
)

SKIPS: tuple[Skip, ...] = ()

_PLACEHOLDER_STATES = frozenset({DirectoryState.UNASSIGNED.value, DirectoryState.MIGRATING.value})


def _exploded_broker_history(b: Build) -> pd.DataFrame:
    """``broker_history`` with one row per (version, directory)."""
    hist = b.tables.table("broker_history")
    rows = [{"broker_id": int(r.broker_id), "directory": d, "valid_from_offset": int(r.valid_from_offset),
             "valid_to_offset": optional_int(r.valid_to_offset)}
            for r in hist.itertuples() for d in as_texts(r.log_dirs)]
    return pd.DataFrame(rows, columns=["broker_id", "directory", "valid_from_offset", "valid_to_offset"])


def _f_broker_directory_history(b: Build) -> Frame:
    ex = _exploded_broker_history(b)
    ex = ex.drop_duplicates(["broker_id", "directory", "valid_from_offset"])
    owners = ex.groupby("directory")["broker_id"].nunique()
    shared = set(owners[owners > 1].index)
    clash: dict[int, str] = {}
    if shared:
        sub = ex[ex["directory"].isin(shared)].reset_index()
        pairs = sub.merge(sub, on="directory", suffixes=("", "_o"))
        pairs = pairs[pairs["broker_id"] != pairs["broker_id_o"]]
        inf = float("inf")
        to = pairs["valid_to_offset"].astype("float").fillna(inf)
        to_o = pairs["valid_to_offset_o"].astype("float").fillna(inf)
        # [from, to) intervals: two brokers hold the directory at once when the intervals overlap.
        overlap = pairs[(pairs["valid_from_offset"] < to_o) & (pairs["valid_from_offset_o"] < to)]
        for r in overlap.itertuples():
            clash[int(r.index)] = f"also broker {r.broker_id_o} from offset {r.valid_from_offset_o}"
    exclusive = column_of("I6.directory_owned_once_over_time")
    rows = [{"broker_id": r.broker_id, "directory": r.directory, "offset": r.valid_from_offset,
             "valid_to_offset": r.valid_to_offset, exclusive: i not in clash, "why": clash.get(i)}
            for i, r in enumerate(ex.itertuples())]
    cols = {"broker_id": "Int64", "directory": "string", "offset": "Int64", "valid_to_offset": "Int64",
            "I6_directory_owned_once_over_time": "boolean", "why": "string"}
    return Frame("broker_directory_history", make_frame(rows, cols), ("row", "offset", "broker_id", "directory"),
                 ("valid_to_offset", "why"))


def _version_at(history: pd.DataFrame, offset: int) -> Any | None:
    """The history version (of one key) valid just before the step that applied at ``offset``."""
    to = history["valid_to_offset"]
    hit = history[(history["valid_from_offset"] < offset) & (to.isna() | (to >= offset))]
    return None if hit.empty else next(hit.sort_values("valid_from_offset").tail(1).itertuples())


def _f_registration_changes(b: Build) -> Frame:
    recs = pd.concat(list(b.tables.records([*RECORD_COLUMNS, "applied_offset"], snapshots=False, applied=True,
                                           types=[BrokerRegistrationChangeRecord.TYPE_NAME])))
    hist = b.tables.table("broker_history")
    by_broker = {int(k): g for k, g in hist.groupby("broker_id")} if not hist.empty else {}
    shrinks = column_of("I8.change_only_shrinks_directories")
    rows = []
    for r in table_rows(recs.sort_values("offset"), *RECORD_COLUMNS, "applied_offset"):
        rec = b.record(r)
        if not isinstance(rec, BrokerRegistrationChangeRecord) or not rec.log_dirs:
            continue  # an empty LogDirs means "no change" (§4.1): nothing to compare
        prev = _version_at(by_broker.get(rec.broker_id, pd.DataFrame(columns=hist.columns)), int(r.applied_offset))
        current = None if prev is None else [d for d in (b.model.uuids.get(t) for t in as_texts(prev.log_dirs)) if d]
        rows.append({"offset": r.offset, "broker_id": rec.broker_id,
                     shrinks: (None if current is None
                               else inv.registration_change_shrinks_directories(rec, current)),
                     "log_dirs": [str(d) for d in rec.log_dirs],
                     "directories_before": None if prev is None else as_texts(prev.log_dirs)})
    cols = {"offset": "Int64", "broker_id": "Int64", "log_dirs": "object", "directories_before": "object"}
    return Frame("registration_changes", make_frame(rows, cols, ["I8.change_only_shrinks_directories"]),
                 ("row", "offset", "broker_id"), ("log_dirs", "directories_before"))


def _run_starts(history: pd.DataFrame, keys: list[str], flag: pd.Series) -> dict[tuple[Any, ...], tuple[int, Any]]:
    """For every key whose *current* version (``valid_to_offset`` null) has ``flag``: where the unbroken run of
    flagged, back-to-back versions ending there began — (valid_from_offset, valid_from_time). A gap between
    versions (the key was deleted, then came back) breaks a run."""
    if history.empty:
        return {}
    h = sorted_by(history.assign(_flag=flag.fillna(False).astype(bool).to_numpy()), [*keys, "valid_from_offset"])
    group = h.groupby(keys, sort=False)
    prev_flag = group["_flag"].shift()
    prev_to = group["valid_to_offset"].shift()
    new_run = (h["_flag"] != prev_flag) | prev_flag.isna() | (prev_to != h["valid_from_offset"])
    h = h.assign(_run=new_run.astype(int).groupby([h[k] for k in keys]).cumsum())
    last = group.tail(1)
    last = last[last["_flag"] & last["valid_to_offset"].isna()]
    out: dict[tuple[Any, ...], tuple[int, Any]] = {}
    if last.empty:
        return out
    runs = h.merge(last.assign(_last=h.loc[last.index, "_run"])[[*keys, "_last"]], on=keys)
    runs = runs[runs["_run"] == runs["_last"]]
    for k, g in runs.groupby(keys, sort=False):
        first = g.sort_values("valid_from_offset").iloc[0]
        out[k if isinstance(k, tuple) else (k,)] = (int(first["valid_from_offset"]), first["valid_from_time"])
    return out


def _gate_since(b: Build) -> tuple[int, Any] | None:
    """Since when the metadata.version has been ≥ 3.7-IV2 without interruption (None when it is not now)."""
    hist = b.tables.table("feature_history")
    hist = hist[hist["name"] == FEATURE_NAME]
    gate = hist["level"].map(lambda level: MetadataVersion(int(level)).is_directory_assignment_supported())
    starts = _run_starts(hist, ["name"], gate)
    return starts.get((FEATURE_NAME,))


def _age(model: Model, since: Sequence[tuple[int, Any] | None]) -> tuple[int, int, int | None]:
    """(since offset, age in offsets, age in ms) for a clock that started at the latest of ``since``."""
    known = [s for s in since if s is not None]
    offset = max(s[0] for s in known)
    times = [s[1] for s in known if s[1] is not None and not pd.isna(s[1])]
    since_ms = int(to_ms(pd.Series(times)).max()) if times else None
    age_ms = None if since_ms is None or model.now_ms is None else model.now_ms - since_ms
    return offset, model.now_offset - offset, age_ms


def _f_carried_over(b: Build) -> Frame:
    model = b.model
    rows = []
    gate = _gate_since(b)
    carried = [reg for reg in model.cluster.brokers.values() if inv.registration_carried_over(reg, model.mv)]
    if carried and gate is not None:
        hist = b.tables.table("broker_history")
        empty = hist["log_dirs"].map(lambda dirs: len(as_texts(dirs)) == 0)
        starts = _run_starts(hist, ["broker_id"], empty)
        for reg in carried:
            since, age, age_ms = _age(model, [gate, starts.get((reg.id,))])
            rows.append({"broker_id": reg.id, "offset": since, "age_offsets": age, "age_ms": age_ms,
                         "fenced": reg.fenced})
    cols = {"broker_id": "Int64", "offset": "Int64", "age_offsets": "Int64", "age_ms": "Int64", "fenced": "boolean"}
    return Frame("carried_over", make_frame(rows, cols), ("row", "offset", "broker_id"), ("fenced",))


def _f_pending_placements(b: Build) -> Frame:
    model = b.model
    rows = []
    gate = _gate_since(b)
    current = b.tables.table("replica_assignments")
    candidates = current[current["directory_state"].isin(_PLACEHOLDER_STATES)]
    pending = [r for r in candidates.itertuples()
               if (d := model.uuids.get(r.directory)) is not None
               and inv.replica_pending_placement(model.cluster.brokers.get(int(r.broker_id)), d, model.mv)]
    if pending and gate is not None:
        key = ["topic_id", "partition_id", "broker_id"]
        wanted = {(str(r.topic_id), int(r.partition_id), int(r.broker_id)) for r in pending}
        # The pending replicas' topics first (pushed down to the read), then their keys among what is left.
        hist = b.tables.history("replica_assignment_history", ["directory_state", "valid_from_time"],
                                topics={k[0] for k in wanted})
        hist = hist[[k in wanted for k in zip(hist["topic_id"].astype(str), hist["partition_id"].astype(int),
                                               hist["broker_id"].astype(int), strict=True)]]
        placeholder = _run_starts(hist, key, hist["directory_state"].isin(_PLACEHOLDER_STATES))
        brokers = b.tables.table("broker_history")
        unfenced = _run_starts(brokers, ["broker_id"], ~brokers["fenced"].fillna(True).astype(bool))
        for r in pending:
            k = (str(r.topic_id), int(r.partition_id), int(r.broker_id))
            # The clock runs while all three hold (the model's tracker restarts it when one stops): the directory
            # is a placeholder, the broker is registered and unfenced, the metadata.version is ≥ 3.7-IV2.
            since, age, age_ms = _age(model, [gate, placeholder.get(k), unfenced.get((k[2],))])
            rows.append({"topic_id": k[0], "topic_name": r.topic_name, "partition_id": k[1], "broker_id": k[2],
                         "directory": r.directory, "offset": since, "age_offsets": age, "age_ms": age_ms})
    # By key: the current table's rows come back from Delta in no fixed order, and a failure's sample is the first
    # failing rows, which must not change from one run over the same tables to the next.
    rows.sort(key=lambda r: (r["topic_id"], r["partition_id"], r["broker_id"]))
    cols = {"topic_id": "string", "topic_name": "string", "partition_id": "Int64", "broker_id": "Int64",
            "directory": "string", "offset": "Int64", "age_offsets": "Int64", "age_ms": "Int64"}
    return Frame("pending_placements", make_frame(rows, cols),
                 ("row", "offset", "topic_name", "topic_id", "partition_id", "broker_id"), ("directory",))


def _snapshot_offsets(b: Build) -> set[int]:
    return {int(o) for recs in b.tables.records(["offset"], snapshots=True) for o in recs["offset"].unique()}


def _f_replica_directory_history(b: Build) -> Frame:
    uuids = b.model.uuids
    # Its strings as categories: at 2 M partitions the history holds 21 M versions, few distinct topics and disks.
    hist = b.tables.history("replica_assignment_history", ["topic_name", "directory"],
                            categories=("topic_id", "topic_name", "directory"))
    key = ["topic_id", "partition_id", "broker_id"]
    hist = sorted_by(hist, [*key, "valid_from_offset"])
    # The versions that *set* a directory: a key's first version, or one whose directory differs from (or does
    # not directly follow) the previous one. A snapshot's versions are not placements (as for the model). In key
    # order a key's previous version is the row before: compared as arrays, where pandas' shift within groups of the
    # 691 k versions at 200 k partitions cost 0.3 s to find them.
    codes = hist["directory"].cat.codes.to_numpy()
    ends = hist["valid_to_offset"].to_numpy(dtype=np.float64, na_value=np.nan)
    starts = hist["valid_from_offset"].to_numpy(dtype=np.float64, na_value=np.nan)
    set_here = np.ones(len(hist), dtype=bool)
    set_here[1:] = ~(same_key_as_previous(hist, key) & (codes[:-1] == codes[1:]) & (codes[:-1] != -1)
                     & (ends[:-1] == starts[1:]))
    snapshots = _snapshot_offsets(b)
    placed = hist[set_here & ~hist["valid_from_offset"].isin(snapshots)]
    ex = _exploded_broker_history(b)
    first = ex.groupby(["broker_id", "directory"])["valid_from_offset"].min()
    registered: dict[int, list[tuple[int, str]]] = {}
    owners: dict[str, set[int]] = {}
    for (owner, text), offset in first.items():
        registered.setdefault(int(owner), []).append((int(offset), str(text)))
        owners.setdefault(str(text), set()).add(int(owner))
    for listed in registered.values():
        listed.sort()
    firsts = {owner: np.array([offset for offset, _ in listed], dtype=np.int64)
              for owner, listed in registered.items()}
    # Placeholders (and unreadable ids, which I13's view check reports) are not judged: dropped by category.
    category = placed["directory"].cat
    judged = np.array([(d := uuids.get(t)) is not None and not is_reserved(d) for t in category.categories] + [False])
    placed = placed[judged[category.codes.to_numpy()]]  # a null's code is -1: the last entry
    brokers = placed["broker_id"].to_numpy(dtype=np.int64)
    offsets = placed["valid_from_offset"].to_numpy(dtype=np.int64)
    directories = placed["directory"].cat.codes.to_numpy(dtype=np.int64)
    # What a broker had registered by a placement's offset is one of few sets (one per directory it ever listed):
    # each placement's is named by how many of its broker's first listings are at or before it (one search per
    # broker), each set built once, not for each of a large cluster's millions of placements.
    upto = np.zeros(len(placed), dtype=np.int64)
    for broker in np.unique(brokers).tolist():
        rows = np.flatnonzero(brokers == broker)
        upto[rows] = np.searchsorted(firsts.get(broker, np.empty(0, np.int64)), offsets[rows], side="right")
    # The verdict and its reason depend on (broker, directory, that count) alone: decided once per distinct triple
    # (millions of placements at 2 M partitions, a few thousand triples), by the model's rule.
    which, distinct = distinct_rows([brokers, directories, upto])
    prefixes: dict[tuple[int, int], frozenset[Uuid]] = {}
    verdicts: list[bool] = []
    reasons: list[str | None] = []
    texts = category.categories
    for broker_cell, code, count_cell in distinct:
        broker, count, text = int(broker_cell), int(count_cell), str(texts[code])
        d = uuids.get(text)
        assert d is not None  # judged above
        ever = prefixes.get((broker, count))
        if ever is None:
            ever = prefixes[(broker, count)] = frozenset(
                x for _, t in registered.get(broker, [])[:count] if (x := uuids.get(t)) is not None)
        ok = inv.replica_directory_registered(d, ever)
        verdicts.append(ok)
        others = sorted(owners.get(text, set()) - {broker})
        reasons.append(None if ok else f"only broker(s) {others} registered it" if others
                       else "no broker registered it")
    columns = {"topic_id": placed["topic_id"].to_numpy(), "topic_name": placed["topic_name"].to_numpy(),
               "partition_id": placed["partition_id"].to_numpy(dtype=np.int64), "broker_id": brokers,
               "directory": placed["directory"].to_numpy(), "offset": offsets,
               column_of("I21.directory_registered_by_broker"): np.array(verdicts, dtype=bool)[which],
               "why": np.array(reasons, dtype=object)[which]}
    cols = {"topic_id": "string", "topic_name": "string", "partition_id": "Int64", "broker_id": "Int64",
            "directory": "string", "offset": "Int64", "I21_directory_registered_by_broker": "boolean", "why": "string"}
    return Frame("replica_directory_history", make_columns_frame(columns, cols),
                 ("row", "offset", "topic_name", "topic_id", "partition_id", "broker_id", "directory"), ("why",))


#: The frames this suite builds, by name.
FRAMES: Mapping[str, FrameBuilder] = {
    "broker_directory_history": _f_broker_directory_history,
    "registration_changes": _f_registration_changes,
    "carried_over": _f_carried_over,
    "pending_placements": _f_pending_placements,
    "replica_directory_history": _f_replica_directory_history,
}
#: The tables each frame reads through ``Build``.
READS: Mapping[str, frozenset[str]] = {
    "broker_directory_history": frozenset({"broker_history"}),
    "registration_changes": MODEL_TABLES | {"broker_history"},
    "carried_over": MODEL_TABLES | {"feature_history", "broker_history"},
    "pending_placements": MODEL_TABLES | {"feature_history", "replica_assignments", "broker_history"},
    "replica_directory_history": MODEL_TABLES | {"broker_history"},
}
