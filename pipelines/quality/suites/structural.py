"""The ``structural`` suite: per-row rules on the current ``partitions`` and ``brokers`` (I1, I2, I4, I5), directory
ids unique across brokers (I6), per-record rules on the bronze ``records`` (I3, I9), and the breaches replay
refuses outright (a ``replay_faults`` row: I1, I6, I7, or another fault). Its ``partitions`` frame also carries the
``semantic`` suite's per-partition columns."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from jbod_model import invariants as inv
from jbod_model.metadata_version import FEATURE_NAME, UNSET, MetadataVersion
from jbod_model.records.metadata import (
    BrokerRegistrationChangeRecord,
    FeatureLevelRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
)
from pipelines.quality.expectations import Check, Skip, column_of, expect_not_in, expect_true
from pipelines.quality.frames import (
    MODEL_TABLES,
    PARTITION_ROWS,
    RECORD_COLUMNS,
    Build,
    Frame,
    FrameBuilder,
    as_texts,
    make_columns_frame,
    make_frame,
    optional_int,
    table_rows,
)

CHECKS: tuple[Check, ...] = (
    expect_true("I1.directories_match_replicas", "structural", "partitions", "I1",
                "partitions: one directory per replica (directories_length_ok)"),
    expect_not_in("I1.replay_refused", "structural", "replay_faults", "fault_class", "I1", "I1",
                  "replay_faults: no record refused for a Directories/Replicas length mismatch"),
    expect_true("I2.replicas_unique", "structural", "partitions", "I2",
                "partitions: no broker twice in replicas (partition_replicas_unique)"),
    expect_true("I2.isr_within_replicas", "structural", "partitions", "I2",
                "partitions: ISR is a duplicate-free subset of replicas (partition_isr_subset_of_replicas)"),
    expect_true("I3.no_directory_state_below_3_7_iv2", "structural", "records", "I3",
                "records: below 3.7-IV2 no LogDirs and partition records v0 (record_free_of_directory_state)"),
    expect_true("I4.partition_placeholders_defined", "structural", "partitions", "I4",
                "partitions: reserved ids are MIGRATING/UNASSIGNED/LOST only (partition_placeholders_ok)"),
    expect_true("I4.broker_directories_unreserved", "structural", "brokers", "I4",
                "brokers: no reserved id among log_dirs (broker_directories_unreserved)"),
    expect_true("I5.broker_directories_unique", "structural", "brokers", "I5",
                "brokers: no directory twice in one registration (broker_directories_unique)"),
    Check("I6.directory_owned_by_one_broker", "structural", "broker_directories", "directory", "unique", "I6",
          "brokers: a directory id appears in one broker's log_dirs only"),
    expect_not_in("I6.replay_refused", "structural", "replay_faults", "fault_class", "I6", "I6",
                  "replay_faults: no registration refused for a directory already assigned to another broker"),
    expect_not_in("I7.replay_refused", "structural", "replay_faults", "fault_class", "I7", "I7",
                  "replay_faults: no broker record refused for an unknown broker or a wrong epoch"),
    expect_true("I9.registration_lists_directories", "structural", "records", "I9",
                "records: a RegisterBrokerRecord at ≥ 3.7-IV2 lists LogDirs (registration_has_directories)"),
    expect_not_in("replay.no_other_fault", "structural", "replay_faults", "fault_class", "other", None,
                  "replay_faults: the replay did not stop at any other record"),
)

SKIPS: tuple[Skip, ...] = ()

_DIRECTORY_RECORDS = (RegisterBrokerRecord.TYPE_NAME, BrokerRegistrationChangeRecord.TYPE_NAME,
                      PartitionRecord.TYPE_NAME, PartitionChangeRecord.TYPE_NAME)


def _f_partitions(b: Build) -> Frame:
    model = b.model
    # A partition row's offset is when *it* last changed; a leader can become unacceptable later, when its broker
    # changes (fenced, a disk gone): the sample also shows since when the leader's registration is as it is.
    broker_since = {int(r.broker_id): optional_int(r.since_offset) for r in b.tables.table("brokers").itertuples()}
    table = b.partition_table
    rows, registrations = b.partition_rows, b.partitions
    get = model.uuids.get
    # Built a column at a time (a dict per row held 2 M of them at 2 M partitions), from the table's columns as
    # Python values (converted once, with the registrations).
    columns: dict[str, list[Any]] = {name: [] for name in (*_PARTITION_CHECKS.values(), "replicas", "isr", "leader",
                                                           "leader_broker_since_offset", "directories")}
    put = [columns[name].append for name in columns]
    # I4 holds for a partition unless one of its directories is refused: decided once per distinct directory (a few
    # hundred disks and placeholders in 600 k places at 200 k partitions), by the model's rule.
    distinct = {d for part in registrations.values() if part is not None for d in part.directories}
    refused = {d for d in distinct if not inv.directory_placeholder_ok(d)}
    for i, (topic, partition, replicas, texts, isr, leader) in enumerate(zip(
            rows.topic_ids, rows.partition_ids, rows.replicas, rows.directories, rows.isr, rows.leader, strict=True)):
        part = registrations.get((topic, partition))
        # Predicates that ignore directories still apply to a row whose directory array is broken.
        bare = part if part is not None else rows.registration(i, ())
        i4 = ((not refused or refused.isdisjoint(part.directories)) if part is not None
              else all(d is not None and inv.directory_placeholder_ok(d) for d in map(get, texts)))
        for add, value in zip(put, (inv.directories_length_ok(replicas, texts), inv.partition_replicas_unique(bare),
                                    inv.partition_isr_subset_of_replicas(bare), i4,
                                    inv.partition_leader_ok(model.cluster, bare),
                                    inv.partition_isr_nonempty_ok(bare, model.mv), inv.partition_reassignment_ok(bare),
                                    list(replicas), list(isr), leader, broker_since.get(leader), texts),
                              strict=True):
            add(value)
    columns |= {"topic_id": rows.topic_ids, "offset": table["since_offset"].to_numpy(dtype=object),
                **{name: table[name].to_numpy(dtype=object) for name in ("topic_name", "partition_id")}}
    cols = {"topic_id": "string", "topic_name": "string", "partition_id": "Int64", "offset": "Int64",
            "replicas": "object", "isr": "object", "leader": "Int64", "leader_broker_since_offset": "Int64",
            "directories": "object"}
    return Frame("partitions", make_columns_frame(columns, cols, tuple(_PARTITION_CHECKS)),
                 ("row", "offset", "topic_name", "topic_id", "partition_id"),
                 ("replicas", "isr", "leader", "leader_broker_since_offset", "directories"))


#: The partitions frame's expectations and their columns, in the order the frame computes them.
_PARTITION_CHECKS = {name: column_of(name) for name in (
    "I1.directories_match_replicas", "I2.replicas_unique", "I2.isr_within_replicas",
    "I4.partition_placeholders_defined", "I14.leader_acceptable", "I15.isr_not_empty",
    "I18.reassignment_consistent")}


def _f_brokers(b: Build) -> Frame:
    rows = []
    for r in b.tables.table("brokers").itertuples():
        texts = as_texts(r.log_dirs)
        parsed = [b.model.uuids.get(d) for d in texts]
        reg = b.model.cluster.brokers[int(r.broker_id)]
        # The registration keeps only parseable ids: an unparseable one is not a valid directory id at all.
        i4 = all(d is not None for d in parsed) and inv.broker_directories_unreserved(reg)
        rows.append({"broker_id": int(r.broker_id), "offset": r.since_offset,
                     "I4_broker_directories_unreserved": i4,
                     "I5_broker_directories_unique": inv.broker_directories_unique(reg), "log_dirs": texts,
                     "fenced": bool(r.fenced)})
    cols = {"broker_id": "Int64", "offset": "Int64", "log_dirs": "object", "fenced": "boolean"}
    checks = ("I4.broker_directories_unreserved", "I5.broker_directories_unique")
    return Frame("brokers", make_frame(rows, cols, checks), ("row", "offset", "broker_id"), ("log_dirs", "fenced"))


def _f_broker_directories(b: Build) -> Frame:
    # One row per (broker, directory): a directory listed twice by one broker is I5's business, not I6's.
    seen: set[tuple[int, str]] = set()
    rows = []
    for r in b.tables.table("brokers").itertuples():
        for d in as_texts(r.log_dirs):
            if (int(r.broker_id), d) not in seen:
                seen.add((int(r.broker_id), d))
                rows.append({"broker_id": int(r.broker_id), "directory": d, "offset": r.since_offset})
    cols = {"broker_id": "Int64", "directory": "string", "offset": "Int64"}
    return Frame("broker_directories", make_frame(rows, cols), ("row", "offset", "broker_id"))


def _f_replay_faults(b: Build) -> Frame:
    rows = [{"offset": r.offset, "source": r.source, "error": r.error, "message": r.message,
             "fault_class": inv.fault_invariant(str(r.message)) or "other"}
            for r in b.tables.table("replay_faults").itertuples()]
    cols = {"offset": "Int64", "source": "string", "error": "string", "message": "string", "fault_class": "string"}
    return Frame("replay_faults", make_frame(rows, cols), ("row", "offset", "error"), ("source", "message"))


def _mv_timeline(b: Build) -> tuple[list[int], list[int]]:
    """Where the metadata.version changed: (offsets, levels), ascending. From the committed FeatureLevelRecords at
    their own offsets (the model's batch walk sees a version change at the record, even inside a transaction), and
    from a snapshot the replay started with (at its offset)."""
    points: list[tuple[int, int]] = []
    for recs in b.tables.records(RECORD_COLUMNS, types=[FeatureLevelRecord.TYPE_NAME], applied=True):
        for r in table_rows(recs, *RECORD_COLUMNS):
            rec = b.record(r)
            if isinstance(rec, FeatureLevelRecord) and rec.name == FEATURE_NAME:
                points.append((int(r.offset), rec.feature_level))
    return [p[0] for p in points], [p[1] for p in points]


def _f_records(b: Build) -> Frame:
    # The metadata.version before each record: index 0 is UNSET (before any FeatureLevelRecord: unknown, don't
    # guess), i the i-th level.
    changed_at, levels = _mv_timeline(b)
    versions = [UNSET, *map(MetadataVersion, levels)]
    allowed_at = np.array([inv.directory_state_allowed(mv) for mv in versions], dtype=bool)
    texts_at = np.array([str(mv) for mv in versions], dtype=object)
    changes = np.asarray(changed_at, dtype=np.int64)
    parts: dict[str, list[Any]] = {name: [] for name in _RECORD_FRAME}
    # Records the replay applied, outside snapshots: a snapshot's records are the image, not what a controller
    # wrote (the state-level suites check the image). A range of offsets at a time, each column kept as it is built:
    # no dict per row and no record's JSON but those the checks read (11 M records at 2 M partitions).
    for recs in b.tables.records(RECORD_COLUMNS, types=_DIRECTORY_RECORDS, snapshots=False, applied=True):
        at = np.searchsorted(changes, recs["offset"].to_numpy(dtype=np.int64), "left")
        # Where I3 holds for any record and I9 does not apply, the record is not read: at ≥ 3.7-IV2 that is every
        # PartitionChangeRecord, most of a large cluster's log (decoding them was half of this frame's cost). Only
        # a failing row's JSON is ever shown (a sample), and only a read record can fail.
        read = (recs["type"] == RegisterBrokerRecord.TYPE_NAME).to_numpy(dtype=bool) | ~allowed_at[at]
        # Arrays, not lists: a list of a million values became an object array value by value.
        free = np.ones(len(recs), dtype=bool)
        listed = np.full(len(recs), None, dtype=object)
        data = np.full(len(recs), None, dtype=object)
        kept = np.ones(len(recs), dtype=bool)
        for i, r in zip(np.flatnonzero(read).tolist(), table_rows(recs[read], *RECORD_COLUMNS), strict=True):
            rec = b.record(r)
            if rec is None:
                kept[i] = False
                continue
            mv = versions[at[i]]
            free[i], data[i] = inv.record_free_of_directory_state(rec, mv), r.data
            listed[i] = inv.registration_has_directories(rec, mv) if isinstance(rec, RegisterBrokerRecord) else None
        # The numbers as int64 where the table's column holds no null (always): a column of Python ints cost pandas
        # a check of each value (1.09 M records at 200 k partitions).
        columns: dict[str, Any] = {name: recs[name].to_numpy(dtype=np.int64 if _no_null_ints(recs[name]) else object)
                                   for name in ("offset", "version")}
        columns |= {"type": recs["type"].to_numpy(dtype=object), "metadata_version": texts_at[at], "data": data,
                    _I3: free, _I9: listed}
        for name, values in columns.items():
            parts[name].append(values[kept])
    frame = make_columns_frame({name: np.concatenate(values) if values else [] for name, values in parts.items()},
                               _RECORD_FRAME_TYPES, (_I3_CHECK, _I9_CHECK))
    return Frame("records", frame, ("row", "offset", "type", "version", "metadata_version"), ("data",))


def _no_null_ints(column: pd.Series) -> bool:
    return pd.api.types.is_integer_dtype(column.dtype) and not column.hasnans


_I3_CHECK, _I9_CHECK = "I3.no_directory_state_below_3_7_iv2", "I9.registration_lists_directories"
_I3, _I9 = column_of(_I3_CHECK), column_of(_I9_CHECK)
_RECORD_FRAME_TYPES = {"offset": "Int64", "type": "string", "version": "Int64", "metadata_version": "string",
                       "data": "string"}
_RECORD_FRAME = (*_RECORD_FRAME_TYPES, _I3, _I9)


#: The frames this suite builds, by name.
FRAMES: Mapping[str, FrameBuilder] = {
    "partitions": _f_partitions,
    "brokers": _f_brokers,
    "broker_directories": _f_broker_directories,
    "replay_faults": _f_replay_faults,
    "records": _f_records,
}
#: The tables each frame reads through ``Build`` (``partitions``: the table and ``Build.partitions``;
#: ``PARTITION_ROWS``: ``Build.partition_rows``).
READS: Mapping[str, frozenset[str]] = {
    "partitions": MODEL_TABLES | {"partitions", "brokers", PARTITION_ROWS},
    "brokers": MODEL_TABLES | {"brokers"},
    "broker_directories": frozenset({"brokers"}),
    "replay_faults": frozenset({"replay_faults"}),
    "records": frozenset(),
}
