"""Data quality of the Delta tables: great-expectations suites for the KIP-858 invariants (``jbod check``).

The invariants are operators-and-peers.md §4 (I1–I25). Their names, severities, rationales and sources come from
:mod:`jbod_model.invariants` (``INVARIANTS``, ``EXTERNAL_INVARIANTS``) — one source of truth — and every per-row rule
is one of that module's predicates, applied to a table row turned back into a model object. What this module adds is
the table side: which rows a rule looks at, table-level rules (uniqueness across rows, intervals over history,
thresholds) and the great-expectations plumbing.

How a check runs, per cluster:

1. :class:`TableSet` reads the cluster's tables through their Delta logs (deltalake; never the parquet files).
2. *Frame builders* turn them into flat DataFrames, one row per thing an expectation looks at (a partition, a
   replica, a broker's directory, a history version, a record, a pending placement …): key columns (always an
   ``offset`` — where to look in the log), and one boolean column per per-row rule, computed with the model's
   predicate (null = not applicable), or a number for threshold rules (an age in offsets or ms).
3. Each :class:`Check` is one great-expectations expectation on one frame column — ``ExpectColumnValuesToBeInSet
   [True]`` for a predicate, ``ExpectColumnValuesToBeUnique`` for "a directory belongs to one broker",
   ``ExpectColumnValuesToBeBetween(max)`` for "pending for at most N offsets", ``ExpectColumnValuesToNotBeInSet`` on
   the rows the model's step checks or the replay reported. Its ``meta`` names the expectation, the invariant, the
   severity (``error``/``warning``), the rationale and the source; GX's own ``severity`` is set to match
   (``critical``/``warning``).
4. Checks are grouped into suites — ``structural``, ``semantic``, ``history``, ``log``, ``external``
   (:data:`pipelines.config.profiles.SUITE_NAMES`) — and run as one GX suite per (suite, frame), on pandas or on Spark
   DataFrames (``engine``). Results become :class:`CheckResult` rows (with a sample of the offending rows and their
   offsets), are appended to the ``dq_results`` Delta table and rendered as GX data docs.

Suites (docs/data-quality.md lists every expectation):

* ``structural`` — per-row rules on the current ``partitions`` and ``brokers`` (I1, I2, I4, I5), directory ids unique
  across brokers (I6), per-record rules on the bronze ``records`` (I3, I9), and the breaches replay refuses outright
  (a ``replay_faults`` row: I1, I6, I7, or another fault);
* ``semantic`` — the replica view and the offline intervals as Kafka computes them (I13), leaders (I14), ISR (I15),
  reassignment fields (I18);
* ``history`` — a directory owned by one broker at any offset (I6, ``broker_history``), registration changes only
  shrink (I8), carried-over registrations and pending placements resolve within a threshold (I9 warning, I12), a
  replica's directory was registered by its broker at some earlier offset (I21);
* ``log`` — the bronze records replayed through :class:`jbod_model.invariants.InvariantTracker`'s step checks, for the
  invariants that need a whole record batch (I10, I11, I16, I17, I19); I20 is skipped (it needs the snapshot files);
* ``external`` — I22 and I24 from a meta.properties inventory (``--dirs``) or broker configs (``--broker-config``);
  skipped, with the reason, without them; I23 (needs DescribeLogDirs) and I25 (needs cordon data, Kafka ≥ 4.3) are
  always skipped for now.

The §4.1 look-alikes are not expectations: a replica whose directory is missing from its broker's online list is
offline (I13), not corrupt — I21 asks only that the broker registered it at some time; UNASSIGNED on a multi-directory
broker is pending (I12 warns only past a threshold); the last ISR member on an offline directory is legal; an empty
LogDirs list is "no change" (change records) or "all online" (pre-3.7-IV2 registrations).
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import time
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, write_deltalake

from jbod_model import invariants as inv
from jbod_model.directory_id import DirectoryState, is_reserved
from jbod_model.errors import InputError, JbodError, ReplayFault
from jbod_model.image import BrokerRegistration, ClusterImage, PartitionRegistration
from jbod_model.meta_properties import inventory, load_properties
from jbod_model.metadata_version import FEATURE_NAME, UNSET, MetadataVersion
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import (
    BrokerRegistrationChangeRecord,
    FeatureLevelRecord,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
)
from jbod_model.replay import replay_entries
from jbod_model.replicas import OfflineReason, ReplicaState
from jbod_model.storage.files import METADATA_PARTITION_DIR
from jbod_model.uuid import Uuid
from pipelines.config.profiles import SUITE_NAMES, QualitySettings
from pipelines.lakehouse.tables import TIME, clusters, read_table, record_from_row

#: The results table (appended once per run, one row per expectation and cluster; docs/data-quality.md).
RESULTS_TABLE = "dq_results"
#: Under the tables directory: the GX project (``gx/``) and the data docs site (``data_docs/``).
DQ_DIR = "_dq"
DOCS_SITE = "kraft_jbod"
ENGINES = ("pandas", "spark")

RESULTS_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("run_time", TIME), ("cluster_id", pa.string()), ("suite", pa.string()),
    ("expectation", pa.string()), ("invariant", pa.string()), ("severity", pa.string()), ("status", pa.string()),
    ("success", pa.bool_()), ("element_count", pa.int64()), ("unexpected_count", pa.int64()),
    ("sample", pa.string()), ("note", pa.string()), ("engine", pa.string())])

_PLACEHOLDER_STATES = frozenset({DirectoryState.UNASSIGNED.value, DirectoryState.MIGRATING.value})
_DIRECTORY_RECORDS = (RegisterBrokerRecord.TYPE_NAME, BrokerRegistrationChangeRecord.TYPE_NAME,
                      PartitionRecord.TYPE_NAME, PartitionChangeRecord.TYPE_NAME)
#: Step-scope invariants only a whole record batch can decide; the log suite runs the model's step checks for these.
LOG_INVARIANTS = ("I10", "I11", "I16", "I17", "I19")


# ---------------------------------------------------------------------------------------------------------------
# The expectations


@dataclass(frozen=True, slots=True)
class Check:
    """One expectation: a rule on one column of one frame, in one suite, for one invariant (or part of it).

    ``rule``: ``true`` (every non-null value is True: a predicate held), ``unique`` (no value twice), ``at_most``
    (no value above the ``threshold`` setting of :class:`~pipelines.config.profiles.QualitySettings`), ``not_in``
    (no value equal to ``value``: a row the model or the replay reported)."""

    name: str
    suite: str
    frame: str
    column: str
    rule: str
    invariant: str | None
    summary: str
    value: str | None = None
    threshold: str | None = None
    #: Overrides the invariant's own severity (I9's carried-over registration is a warning).
    severity: str | None = None

    @property
    def definition(self) -> inv.Invariant | None:
        return None if self.invariant is None else inv.invariant(self.invariant)

    @property
    def severity_name(self) -> str:
        if self.severity is not None:
            return self.severity
        definition = self.definition
        return "error" if definition is None else definition.severity.value.lower()

    @property
    def rationale(self) -> str:
        definition = self.definition
        if definition is None:
            return ("The job stopped replaying this cluster at a record it cannot apply: nothing after it is in "
                    "the tables, so no other expectation covers it.")
        return definition.rationale

    def meta(self, settings: QualitySettings) -> dict[str, Any]:
        definition = self.definition
        out: dict[str, Any] = {"expectation": self.name, "suite": self.suite, "invariant": self.invariant,
                               "severity": self.severity_name, "rationale": self.rationale, "checks": self.summary,
                               "title": None if definition is None else definition.title,
                               "source": None if definition is None else definition.source}
        if self.threshold is not None:
            out["threshold"] = {self.threshold: getattr(settings, self.threshold)}
        return out


@dataclass(frozen=True, slots=True)
class Skip:
    """An invariant a suite cannot check (yet), with the reason, reported as a ``skipped`` result."""

    name: str
    suite: str
    invariant: str
    reason: str


def column_of(name: str) -> str:
    """The frame column a predicate expectation reads: its name, readable in the data docs (no dots: Spark)."""
    return name.replace(".", "_")


def _true(name: str, suite: str, frame: str, invariant: str, summary: str) -> Check:
    return Check(name, suite, frame, column_of(name), "true", invariant, summary)


def _not_in(name: str, suite: str, frame: str, column: str, value: str, invariant: str | None,
            summary: str) -> Check:
    return Check(name, suite, frame, column, "not_in", invariant, summary, value=value)


def _at_most(name: str, suite: str, frame: str, column: str, threshold: str, invariant: str, summary: str,
             severity: str | None = None) -> Check:
    return Check(name, suite, frame, column, "at_most", invariant, summary, threshold=threshold, severity=severity)


#: Every expectation, by suite. docs/data-quality.md is this list in prose.
CHECKS: tuple[Check, ...] = (
    # -- structural: per-row rules on the current tables, per-record rules on bronze, what replay refused
    _true("I1.directories_match_replicas", "structural", "partitions", "I1",
          "partitions: one directory per replica (directories_length_ok)"),
    _not_in("I1.replay_refused", "structural", "replay_faults", "fault_class", "I1", "I1",
            "replay_faults: no record refused for a Directories/Replicas length mismatch"),
    _true("I2.replicas_unique", "structural", "partitions", "I2",
          "partitions: no broker twice in replicas (partition_replicas_unique)"),
    _true("I2.isr_within_replicas", "structural", "partitions", "I2",
          "partitions: ISR is a duplicate-free subset of replicas (partition_isr_subset_of_replicas)"),
    _true("I3.no_directory_state_below_3_7_iv2", "structural", "records", "I3",
          "records: below 3.7-IV2 no LogDirs and partition records v0 (record_free_of_directory_state)"),
    _true("I4.partition_placeholders_defined", "structural", "partitions", "I4",
          "partitions: reserved ids are MIGRATING/UNASSIGNED/LOST only (partition_placeholders_ok)"),
    _true("I4.broker_directories_unreserved", "structural", "brokers", "I4",
          "brokers: no reserved id among log_dirs (broker_directories_unreserved)"),
    _true("I5.broker_directories_unique", "structural", "brokers", "I5",
          "brokers: no directory twice in one registration (broker_directories_unique)"),
    Check("I6.directory_owned_by_one_broker", "structural", "broker_directories", "directory", "unique", "I6",
          "brokers: a directory id appears in one broker's log_dirs only"),
    _not_in("I6.replay_refused", "structural", "replay_faults", "fault_class", "I6", "I6",
            "replay_faults: no registration refused for a directory already assigned to another broker"),
    _not_in("I7.replay_refused", "structural", "replay_faults", "fault_class", "I7", "I7",
            "replay_faults: no broker record refused for an unknown broker or a wrong epoch"),
    _true("I9.registration_lists_directories", "structural", "records", "I9",
          "records: a RegisterBrokerRecord at ≥ 3.7-IV2 lists LogDirs (registration_has_directories)"),
    _not_in("replay.no_other_fault", "structural", "replay_faults", "fault_class", "other", None,
            "replay_faults: the replay did not stop at any other record"),
    # -- semantic: the materialized state
    _true("I13.replica_view_matches", "semantic", "replicas", "I13",
          "replica_assignments: one row per replica, consistent with Kafka's offline rule "
          "(replica_state_consistent)"),
    _true("I13.offline_intervals_match", "semantic", "offline_intervals", "I13",
          "offline_replicas: the open intervals are exactly the offline replicas, same directory and reason"),
    _true("I14.leader_acceptable", "semantic", "partitions", "I14",
          "partitions: the leader is in the ISR, registered, unfenced, on an online directory "
          "(partition_leader_ok)"),
    _true("I15.isr_not_empty", "semantic", "partitions", "I15",
          "partitions: ISR non-empty unless ELR is possible (partition_isr_nonempty_ok)"),
    _true("I18.reassignment_consistent", "semantic", "partitions", "I18",
          "partitions: adding/removing are disjoint subsets of replicas (partition_reassignment_ok)"),
    # -- history: rules over the history tables
    _true("I6.directory_owned_once_over_time", "history", "broker_directory_history", "I6",
          "broker_history: no two brokers list one directory in overlapping intervals"),
    _true("I8.change_only_shrinks_directories", "history", "registration_changes", "I8",
          "records + broker_history: a non-empty BrokerRegistrationChangeRecord.LogDirs is a subset of the "
          "broker's directories just before (registration_change_shrinks_directories)"),
    _at_most("I9.carried_over_registration_offsets", "history", "carried_over", "age_offsets",
             "pending_placement_max_offsets", "I9",
             "brokers: a registration without directories at ≥ 3.7-IV2 is re-sent within N offsets",
             severity="warning"),
    _at_most("I9.carried_over_registration_ms", "history", "carried_over", "age_ms", "pending_placement_max_ms",
             "I9", "brokers: a registration without directories at ≥ 3.7-IV2 is re-sent within N ms",
             severity="warning"),
    _at_most("I12.pending_placement_offsets", "history", "pending_placements", "age_offsets",
             "pending_placement_max_offsets", "I12",
             "replica_assignments: UNASSIGNED/MIGRATING on an unfenced broker resolves within N offsets"),
    _at_most("I12.pending_placement_ms", "history", "pending_placements", "age_ms", "pending_placement_max_ms",
             "I12", "replica_assignments: UNASSIGNED/MIGRATING on an unfenced broker resolves within N ms"),
    _true("I21.directory_registered_by_broker", "history", "replica_directory_history", "I21",
          "replica_assignment_history + broker_history: a directory set for a replica was registered by its "
          "broker at that offset or earlier (replica_directory_registered)"),
    # -- log: the model's step checks over the bronze records
    _not_in("I10.replica_changes_carry_directories", "log", "log_violations", "invariant", "I10", "I10",
            "records: at ≥ 3.7-IV2 partition creations and replica-set changes carry Directories"),
    _not_in("I11.single_directory_broker_placement", "log", "log_violations", "invariant", "I11", "I11",
            "records: a new replica on a single-directory broker goes to that directory"),
    _not_in("I16.directory_failure_handled_in_batch", "log", "log_violations", "invariant", "I16", "I16",
            "records: a directory going offline demotes its replicas in the same batch"),
    _not_in("I17.offline_assignment_demotes", "log", "log_violations", "invariant", "I17", "I17",
            "records: an assignment into an offline directory demotes the replica in the same batch"),
    _not_in("I19.epochs_move_in_fixed_steps", "log", "log_violations", "invariant", "I19", "I19",
            "records: partition and leader epochs step by one; a new incarnation has a higher broker epoch"),
    # -- external: disks and configs
    _true("I22.jbod_needs_3_7_iv2", "external", "configured_dirs", "I22",
          "inventory/config: a broker with several data dirs runs at metadata.version ≥ 3.7-IV2 (jbod_supported)"),
    _true("I24.disk_directory_ids_unreserved", "external", "disk_inventory", "I24",
          "meta.properties: directory.id is not reserved (disk_directory_id_ok)"),
    Check("I24.disk_directory_ids_unique", "external", "disk_inventory", "directory_id", "unique", "I24",
          "meta.properties: a directory.id appears on one disk only"),
    _true("I24.online_directories_on_disk", "external", "registered_on_disk", "I24",
          "brokers + meta.properties: every online directory of an inventoried broker is one of its disks "
          "(online_directory_on_disk)"),
)

#: Invariants no suite can check yet, and why.
SKIPS: tuple[Skip, ...] = (
    Skip("I20.snapshot_equals_replay", "log", "I20",
         "the tables hold one replay; comparing a snapshot with the replay up to it needs the snapshot files "
         "(tests/conformance checks the real samples)"),
    Skip("I23.placement_matches_disks", "external", "I23",
         "needs DescribeLogDirs output (where each replica's log actually is); jbod check has no such input yet"),
    Skip("I25.cordoned_directories_get_no_replicas", "external", "I25",
         "no cordon data: cordoned directories (KIP-1066, Kafka ≥ 4.3) are not in the tables yet"),
)


def checks_for(suites: Sequence[str]) -> list[Check]:
    """The expectations of the named suites, in :data:`CHECKS` order."""
    unknown = [s for s in suites if s not in SUITE_NAMES]
    if unknown:
        raise InputError(f"unknown suite(s) {', '.join(unknown)} (suites: {', '.join(SUITE_NAMES)})")
    return [c for c in CHECKS if c.suite in suites]


# ---------------------------------------------------------------------------------------------------------------
# Inputs: the tables, and what comes from outside the log


@dataclass(frozen=True, slots=True)
class ExternalInputs:
    """What I22/I24 need besides the tables: meta.properties files or folders (``--dirs``) and broker configs
    (``server.properties``, ``--broker-config``)."""

    dirs: tuple[Path, ...] = ()
    broker_configs: tuple[Path, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.dirs and not self.broker_configs


class TableSet:
    """One cluster's tables as pandas DataFrames, read lazily (once) through their Delta logs — or given directly,
    for tests that inject violations (:meth:`with_tables`)."""

    def __init__(self, cluster_id: str, tables_dir: str | Path | None = None,
                 frames: Mapping[str, pd.DataFrame] | None = None) -> None:
        self.cluster_id = cluster_id
        self.tables_dir = None if tables_dir is None else Path(tables_dir)
        self._frames: dict[str, pd.DataFrame] = dict(frames or {})

    def table(self, name: str) -> pd.DataFrame:
        """The cluster's rows of ``name``. Read lazily, ``records`` leaves out its NoOpRecords (> 95 % of a real log;
        no rule reads them — only :meth:`clock` needs them, and reads its own columns); :meth:`load_all` keeps
        them."""
        if name not in self._frames:
            if self.tables_dir is None:
                raise InputError(f"table {name} was not given")
            filters: list[tuple[str, str, Any]] = [("cluster_id", "=", self.cluster_id)]
            if name == "records":
                filters.append(("type", "<>", "NO_OP_RECORD"))
            self._frames[name] = _read_delta(self.tables_dir / name, filters).to_pandas()
        return self._frames[name]

    def clock(self) -> tuple[int, int | None]:
        """The cluster's "now": the last offset that took effect, and its append time in ms (None without times).
        The I9/I12 thresholds are measured against it, as the model's tracker measures them."""
        if "records" in self._frames or self.tables_dir is None:
            recs = self._frames.get("records", pd.DataFrame(columns=["offset", "applied_offset", "timestamp"]))
        else:
            recs = _read_delta(self.tables_dir / "records", [("cluster_id", "=", self.cluster_id)],
                               columns=["offset", "applied_offset", "timestamp"]).to_pandas()
        applied = recs[recs["applied_offset"].notna()]
        if applied.empty:
            return -1, None
        ms = _ms(applied["timestamp"]).dropna()
        return int(applied["offset"].max()), (int(ms.max()) if not ms.empty else None)

    def with_tables(self, **tables: pd.DataFrame) -> TableSet:
        """A copy with some tables replaced (every other table read as before)."""
        return TableSet(self.cluster_id, self.tables_dir, {**self._frames, **tables})

    def load_all(self, names: Sequence[str]) -> TableSet:
        """Read ``names`` now, ``records`` whole (NoOps too, so the clock stays the log's after edits): for tests
        that edit tables before checking them."""
        for name in names:
            if name == "records" and self.tables_dir is not None and name not in self._frames:
                self._frames[name] = _read_delta(self.tables_dir / name,
                                                 [("cluster_id", "=", self.cluster_id)]).to_pandas()
            self.table(name)
        return self


def _read_delta(path: Path, filters: list[tuple[str, str, Any]], columns: list[str] | None = None) -> pa.Table:
    """Live rows of a Delta table, through its log (delta-rs' SQL engine), with the table's own Arrow types
    (``pipelines.lakehouse.tables.read_table``: plain strings, which pandas and pyarrow's kernels take)."""
    where = " AND ".join(f'"{col}" {op} {_sql_literal(value)}' for col, op, value in filters)
    return read_table(path.parent, path.name, where or None, columns)


def _sql_literal(value: Any) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return str(int(value))


# ---------------------------------------------------------------------------------------------------------------
# Small conversions


def _micros(series: pd.Series) -> pd.Series:
    """Timestamps as integer microseconds since the epoch (nullable)."""
    if series.empty:
        return pd.Series([], dtype="Int64", index=series.index)
    stamps = pd.to_datetime(series, utc=True)
    return ((stamps - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(microseconds=1)).astype("Int64")


def _ms(series: pd.Series) -> pd.Series:
    """Table times (µs timestamps: ``records.timestamp``, the history and current tables' times) in ms."""
    return _micros(series) // 1000


class _Uuids:
    """Directory ids parsed once (a cluster has few distinct directories and millions of replica rows)."""

    def __init__(self) -> None:
        self._cache: dict[str, Uuid | None] = {}

    def get(self, text: Any) -> Uuid | None:
        if text is None or (isinstance(text, float) and math.isnan(text)):
            return None
        key = str(text)
        if key not in self._cache:
            try:
                self._cache[key] = Uuid.from_string(key)
            except (JbodError, ValueError):
                self._cache[key] = None
        return self._cache[key]


def _ints(values: Any) -> tuple[int, ...]:
    if values is None or (isinstance(values, float) and math.isnan(values)):
        return ()
    return tuple(int(v) for v in values)


def _texts(values: Any) -> list[str]:
    if values is None or (isinstance(values, float) and math.isnan(values)):
        return []
    return [str(v) for v in values]


def _opt_int(value: Any) -> int | None:
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    return int(value)


def _frame(rows: list[dict[str, Any]], columns: Mapping[str, str], checks: Sequence[str] = ()) -> pd.DataFrame:
    """A frame with fixed nullable dtypes (``Int64``, ``boolean``, ``string``, ``object``): an empty frame still has
    typed columns, and nulls stay nulls on the way to Spark. ``checks`` names the predicate expectations whose
    boolean columns (:func:`column_of`) the rows carry."""
    columns = {**columns, **{column_of(name): "boolean" for name in checks}}
    data = {name: pd.Series([r.get(name) for r in rows], dtype=dtype) for name, dtype in columns.items()}
    frame = pd.DataFrame(data)
    frame.insert(0, "row", pd.Series(range(len(frame)), dtype="Int64"))
    return frame


@dataclass(slots=True)
class Frame:
    """What one GX batch validates: ``data`` (flat, typed columns), the ``keys`` that identify an offending row in
    a sample (``row`` and ``offset`` first), and ``context`` columns only the sample shows (lists …). ``skip`` is
    a reason the frame could not be built: its expectations are reported skipped."""

    name: str
    data: pd.DataFrame
    keys: tuple[str, ...]
    context: tuple[str, ...] = ()
    skip: str | None = None
    #: What the frame covered when its rows alone do not say (the log suite's rows are only violations).
    note: str | None = None

    def gx_data(self) -> pd.DataFrame:
        return self.data[[c for c in self.data.columns if c not in self.context]]


# ---------------------------------------------------------------------------------------------------------------
# The model, rebuilt from the current tables


@dataclass(slots=True)
class _Model:
    """Model objects for the current tables: brokers, partitions and the metadata.version, plus the clock."""

    mv: MetadataVersion
    cluster: ClusterImage
    #: (topic id text, partition id) → registration; None when its arrays cannot form one (I1 or bad ids).
    partitions: dict[tuple[str, int], PartitionRegistration | None]
    uuids: _Uuids
    now_offset: int
    now_ms: int | None


def _broker_registration(row: Any, uuids: _Uuids) -> BrokerRegistration:
    dirs = [uuids.get(d) for d in _texts(row.log_dirs)]
    return BrokerRegistration(id=int(row.broker_id), epoch=int(row.broker_epoch),
                              incarnation_id=uuids.get(row.incarnation_id) or Uuid(0, 0), fenced=bool(row.fenced),
                              in_controlled_shutdown=bool(row.in_controlled_shutdown),
                              is_migrating_zk_broker=bool(row.is_migrating_zk_broker),
                              directories=tuple(d for d in dirs if d is not None))


def _partition_registration(row: Any, uuids: _Uuids, directories: bool) -> PartitionRegistration:
    """The registration of a ``partitions`` row; with ``directories`` False its directories are left empty (the
    constructor refuses a mismatched array; I1 reports those rows)."""
    dirs = tuple(uuids.get(d) for d in _texts(row.directories)) if directories else ()
    return PartitionRegistration(
        replicas=_ints(row.replicas), directories=tuple(d for d in dirs if d is not None), isr=_ints(row.isr),
        removing_replicas=_ints(row.removing_replicas), adding_replicas=_ints(row.adding_replicas),
        elr=_ints(row.eligible_leader_replicas), last_known_elr=_ints(row.last_known_elr), leader=int(row.leader),
        leader_recovery_state=int(row.leader_recovery_state), leader_epoch=int(row.leader_epoch),
        partition_epoch=int(row.partition_epoch))


def _current_mv(features: pd.DataFrame) -> MetadataVersion:
    rows = features[features["name"] == FEATURE_NAME]
    return UNSET if rows.empty else MetadataVersion(int(rows["level"].iloc[0]))


def _model(tables: TableSet) -> _Model:
    uuids = _Uuids()
    brokers = {int(r.broker_id): _broker_registration(r, uuids) for r in tables.table("brokers").itertuples()}
    partitions: dict[tuple[str, int], PartitionRegistration | None] = {}
    for r in tables.table("partitions").itertuples():
        texts = _texts(r.directories)
        usable = (inv.directories_length_ok(_ints(r.replicas), texts)
                  and all(uuids.get(d) is not None for d in texts))
        partitions[(str(r.topic_id), int(r.partition_id))] = (_partition_registration(r, uuids, True) if usable
                                                              else None)
    now_offset, now_ms = tables.clock()
    return _Model(mv=_current_mv(tables.table("features")), cluster=ClusterImage(brokers=brokers),
                  partitions=partitions, uuids=uuids, now_offset=now_offset, now_ms=now_ms)


# ---------------------------------------------------------------------------------------------------------------
# Frame builders: one per frame name


@dataclass(slots=True)
class _Build:
    """What frame builders share for one cluster: the tables, the settings, the external inputs, and the model
    objects (built once, on first use)."""

    tables: TableSet
    settings: QualitySettings
    inputs: ExternalInputs
    _model: _Model | None = None
    _decoded: dict[tuple[int, int | None], Record] = field(default_factory=dict)

    @property
    def model(self) -> _Model:
        if self._model is None:
            self._model = _model(self.tables)
        return self._model

    def record(self, row: Any) -> Record | None:
        """A bronze row as a typed record (None if it does not decode — the job wrote it, so it always should)."""
        # A snapshot's records all carry the snapshot's offset: its index tells them apart.
        key = (int(row.offset), _opt_int(getattr(row, "snapshot_index", None)))
        if key not in self._decoded:
            try:
                self._decoded[key] = record_from_row(row.type, int(row.version), row.data,
                                                     getattr(row, "payload", None))
            except (JbodError, ValueError, TypeError):
                return None
        return self._decoded[key]


def _f_partitions(b: _Build) -> Frame:
    model = b.model
    # A partition row's offset is when *it* last changed; a leader can become unacceptable later, when its broker
    # changes (fenced, a disk gone): the sample also shows since when the leader's registration is as it is.
    broker_since = {int(r.broker_id): _opt_int(r.since_offset) for r in b.tables.table("brokers").itertuples()}
    rows = []
    for r in b.tables.table("partitions").itertuples():
        key = (str(r.topic_id), int(r.partition_id))
        part = model.partitions.get(key)
        replicas, texts = _ints(r.replicas), _texts(r.directories)
        # Predicates that ignore directories still apply to a row whose directory array is broken.
        bare = part if part is not None else _partition_registration(r, model.uuids, False)
        dirs = [model.uuids.get(d) for d in texts]
        i4 = (inv.partition_placeholders_ok(part) if part is not None
              else all(d is not None and inv.directory_placeholder_ok(d) for d in dirs))
        rows.append({"topic_id": key[0], "topic_name": r.topic_name, "partition_id": key[1],
                     "offset": r.since_offset,
                     "I1_directories_match_replicas": inv.directories_length_ok(replicas, texts),
                     "I2_replicas_unique": inv.partition_replicas_unique(bare),
                     "I2_isr_within_replicas": inv.partition_isr_subset_of_replicas(bare),
                     "I4_partition_placeholders_defined": i4,
                     "I14_leader_acceptable": inv.partition_leader_ok(model.cluster, bare),
                     "I15_isr_not_empty": inv.partition_isr_nonempty_ok(bare, model.mv),
                     "I18_reassignment_consistent": inv.partition_reassignment_ok(bare),
                     "replicas": list(replicas), "isr": list(_ints(r.isr)), "leader": int(r.leader),
                     "leader_broker_since_offset": broker_since.get(int(r.leader)), "directories": texts})
    cols = {"topic_id": "string", "topic_name": "string", "partition_id": "Int64", "offset": "Int64",
            "replicas": "object", "isr": "object", "leader": "Int64", "leader_broker_since_offset": "Int64",
            "directories": "object"}
    checks = ("I1.directories_match_replicas", "I2.replicas_unique", "I2.isr_within_replicas",
              "I4.partition_placeholders_defined", "I14.leader_acceptable", "I15.isr_not_empty",
              "I18.reassignment_consistent")
    return Frame("partitions", _frame(rows, cols, checks), ("row", "offset", "topic_name", "topic_id", "partition_id"),
                 ("replicas", "isr", "leader", "leader_broker_since_offset", "directories"))


def _f_brokers(b: _Build) -> Frame:
    rows = []
    for r in b.tables.table("brokers").itertuples():
        texts = _texts(r.log_dirs)
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
    return Frame("brokers", _frame(rows, cols, checks), ("row", "offset", "broker_id"), ("log_dirs", "fenced"))


def _f_broker_directories(b: _Build) -> Frame:
    # One row per (broker, directory): a directory listed twice by one broker is I5's business, not I6's.
    seen: set[tuple[int, str]] = set()
    rows = []
    for r in b.tables.table("brokers").itertuples():
        for d in _texts(r.log_dirs):
            if (int(r.broker_id), d) not in seen:
                seen.add((int(r.broker_id), d))
                rows.append({"broker_id": int(r.broker_id), "directory": d, "offset": r.since_offset})
    cols = {"broker_id": "Int64", "directory": "string", "offset": "Int64"}
    return Frame("broker_directories", _frame(rows, cols), ("row", "offset", "broker_id"))


def _f_replay_faults(b: _Build) -> Frame:
    rows = [{"offset": r.offset, "source": r.source, "error": r.error, "message": r.message,
             "fault_class": inv.fault_invariant(str(r.message)) or "other"}
            for r in b.tables.table("replay_faults").itertuples()]
    cols = {"offset": "Int64", "source": "string", "error": "string", "message": "string", "fault_class": "string"}
    return Frame("replay_faults", _frame(rows, cols), ("row", "offset", "error"), ("source", "message"))


def _mv_timeline(b: _Build) -> tuple[list[int], list[int]]:
    """Where the metadata.version changed: (offsets, levels), ascending. From the committed FeatureLevelRecords at
    their own offsets (the model's batch walk sees a version change at the record, even inside a transaction), and
    from a snapshot the replay started with (at its offset)."""
    recs = b.tables.table("records")
    recs = recs[(recs["type"] == FeatureLevelRecord.TYPE_NAME) & recs["applied_offset"].notna()]
    points: list[tuple[int, int]] = []
    for r in recs.sort_values("offset").itertuples():
        rec = b.record(r)
        if isinstance(rec, FeatureLevelRecord) and rec.name == FEATURE_NAME:
            points.append((int(r.offset), rec.feature_level))
    return [p[0] for p in points], [p[1] for p in points]


def _mv_before(offsets: list[int], levels: list[int], offset: int) -> MetadataVersion:
    """The metadata.version just before ``offset`` (UNSET before any FeatureLevelRecord: unknown, don't guess)."""
    import bisect  # noqa: PLC0415 - stdlib, used by this helper only

    i = bisect.bisect_left(offsets, offset)
    return UNSET if i == 0 else MetadataVersion(levels[i - 1])


def _f_records(b: _Build) -> Frame:
    recs = b.tables.table("records")
    # Records the replay applied, outside snapshots: a snapshot's records are the image, not what a controller
    # wrote (the state-level suites check the image).
    recs = recs[recs["type"].isin(_DIRECTORY_RECORDS) & recs["applied_offset"].notna()
                & (recs["origin"] != "snapshot")]
    offsets, levels = _mv_timeline(b)
    rows = []
    for r in recs.sort_values("offset").itertuples():
        rec = b.record(r)
        if rec is None:
            continue
        mv = _mv_before(offsets, levels, int(r.offset))
        rows.append({"offset": r.offset, "type": r.type, "version": r.version, "metadata_version": str(mv),
                     "I3_no_directory_state_below_3_7_iv2": inv.record_free_of_directory_state(rec, mv),
                     "I9_registration_lists_directories": (inv.registration_has_directories(rec, mv)
                                                           if isinstance(rec, RegisterBrokerRecord) else None),
                     "data": r.data})
    cols = {"offset": "Int64", "type": "string", "version": "Int64", "metadata_version": "string", "data": "string"}
    checks = ("I3.no_directory_state_below_3_7_iv2", "I9.registration_lists_directories")
    return Frame("records", _frame(rows, cols, checks), ("row", "offset", "type", "version", "metadata_version"),
                 ("data",))


def _f_replicas(b: _Build) -> Frame:
    model = b.model
    expected: dict[tuple[str, int, int], tuple[str, int | None]] = {}
    for r in b.tables.table("partitions").itertuples():
        part = model.partitions.get((str(r.topic_id), int(r.partition_id)))
        if part is None:
            continue  # I1 (or an unparseable id) makes the view undefined for this partition
        for broker, directory in zip(part.replicas, part.directories, strict=True):
            expected[(str(r.topic_id), int(r.partition_id), broker)] = (str(directory), _opt_int(r.since_offset))
    broken = {k for k, p in model.partitions.items() if p is None}
    view = column_of("I13.replica_view_matches")
    rows = []
    seen: set[tuple[str, int, int]] = set()
    for r in b.tables.table("replica_assignments").itertuples():
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
    return Frame("replicas", _frame(rows, cols, ["I13.replica_view_matches"]),
                 ("row", "offset", "topic_name", "topic_id", "partition_id", "broker_id"),
                 ("directory", "directory_state", "offline", "offline_reason", "why"))


def _replica_consistent(model: _Model, part: PartitionRegistration, key: tuple[str, int, int],
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


def _f_offline_intervals(b: _Build) -> Frame:
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
                     "offset": _opt_int(offset), column_of("I13.offline_intervals_match"): ok, "why": why})
    cols = {"topic_id": "string", "partition_id": "Int64", "broker_id": "Int64", "offset": "Int64", "why": "string"}
    return Frame("offline_intervals", _frame(rows, cols, ["I13.offline_intervals_match"]),
                 ("row", "offset", "topic_id", "partition_id", "broker_id"), ("why",))


def _exploded_broker_history(b: _Build) -> pd.DataFrame:
    """``broker_history`` with one row per (version, directory)."""
    hist = b.tables.table("broker_history")
    rows = [{"broker_id": int(r.broker_id), "directory": d, "valid_from_offset": int(r.valid_from_offset),
             "valid_to_offset": _opt_int(r.valid_to_offset)}
            for r in hist.itertuples() for d in _texts(r.log_dirs)]
    return pd.DataFrame(rows, columns=["broker_id", "directory", "valid_from_offset", "valid_to_offset"])


def _f_broker_directory_history(b: _Build) -> Frame:
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
    return Frame("broker_directory_history", _frame(rows, cols), ("row", "offset", "broker_id", "directory"),
                 ("valid_to_offset", "why"))


def _version_at(history: pd.DataFrame, offset: int) -> Any | None:
    """The history version (of one key) valid just before the step that applied at ``offset``."""
    to = history["valid_to_offset"]
    hit = history[(history["valid_from_offset"] < offset) & (to.isna() | (to >= offset))]
    return None if hit.empty else next(hit.sort_values("valid_from_offset").tail(1).itertuples())


def _f_registration_changes(b: _Build) -> Frame:
    recs = b.tables.table("records")
    recs = recs[(recs["type"] == BrokerRegistrationChangeRecord.TYPE_NAME) & recs["applied_offset"].notna()
                & (recs["origin"] != "snapshot")]
    hist = b.tables.table("broker_history")
    by_broker = {int(k): g for k, g in hist.groupby("broker_id")} if not hist.empty else {}
    shrinks = column_of("I8.change_only_shrinks_directories")
    rows = []
    for r in recs.sort_values("offset").itertuples():
        rec = b.record(r)
        if not isinstance(rec, BrokerRegistrationChangeRecord) or not rec.log_dirs:
            continue  # an empty LogDirs means "no change" (§4.1): nothing to compare
        prev = _version_at(by_broker.get(rec.broker_id, pd.DataFrame(columns=hist.columns)), int(r.applied_offset))
        current = None if prev is None else [d for d in (b.model.uuids.get(t) for t in _texts(prev.log_dirs)) if d]
        rows.append({"offset": r.offset, "broker_id": rec.broker_id,
                     shrinks: (None if current is None
                               else inv.registration_change_shrinks_directories(rec, current)),
                     "log_dirs": [str(d) for d in rec.log_dirs],
                     "directories_before": None if prev is None else _texts(prev.log_dirs)})
    cols = {"offset": "Int64", "broker_id": "Int64", "log_dirs": "object", "directories_before": "object"}
    return Frame("registration_changes", _frame(rows, cols, ["I8.change_only_shrinks_directories"]),
                 ("row", "offset", "broker_id"), ("log_dirs", "directories_before"))


def _run_starts(history: pd.DataFrame, keys: list[str], flag: pd.Series) -> dict[tuple[Any, ...], tuple[int, Any]]:
    """For every key whose *current* version (``valid_to_offset`` null) has ``flag``: where the unbroken run of
    flagged, back-to-back versions ending there began — (valid_from_offset, valid_from_time). A gap between
    versions (the key was deleted, then came back) breaks a run."""
    if history.empty:
        return {}
    h = history.assign(_flag=flag.fillna(False).astype(bool).to_numpy()).sort_values([*keys, "valid_from_offset"])
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


def _gate_since(b: _Build) -> tuple[int, Any] | None:
    """Since when the metadata.version has been ≥ 3.7-IV2 without interruption (None when it is not now)."""
    hist = b.tables.table("feature_history")
    hist = hist[hist["name"] == FEATURE_NAME]
    gate = hist["level"].map(lambda level: MetadataVersion(int(level)).is_directory_assignment_supported())
    starts = _run_starts(hist, ["name"], gate)
    return starts.get((FEATURE_NAME,))


def _age(model: _Model, since: Sequence[tuple[int, Any] | None]) -> tuple[int, int, int | None]:
    """(since offset, age in offsets, age in ms) for a clock that started at the latest of ``since``."""
    known = [s for s in since if s is not None]
    offset = max(s[0] for s in known)
    times = [s[1] for s in known if s[1] is not None and not pd.isna(s[1])]
    since_ms = int(_ms(pd.Series(times)).max()) if times else None
    age_ms = None if since_ms is None or model.now_ms is None else model.now_ms - since_ms
    return offset, model.now_offset - offset, age_ms


def _f_carried_over(b: _Build) -> Frame:
    model = b.model
    rows = []
    gate = _gate_since(b)
    carried = [reg for reg in model.cluster.brokers.values() if inv.registration_carried_over(reg, model.mv)]
    if carried and gate is not None:
        hist = b.tables.table("broker_history")
        empty = hist["log_dirs"].map(lambda dirs: len(_texts(dirs)) == 0)
        starts = _run_starts(hist, ["broker_id"], empty)
        for reg in carried:
            since, age, age_ms = _age(model, [gate, starts.get((reg.id,))])
            rows.append({"broker_id": reg.id, "offset": since, "age_offsets": age, "age_ms": age_ms,
                         "fenced": reg.fenced})
    cols = {"broker_id": "Int64", "offset": "Int64", "age_offsets": "Int64", "age_ms": "Int64", "fenced": "boolean"}
    return Frame("carried_over", _frame(rows, cols), ("row", "offset", "broker_id"), ("fenced",))


def _f_pending_placements(b: _Build) -> Frame:
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
        hist = b.tables.table("replica_assignment_history")
        wanted = {(str(r.topic_id), int(r.partition_id), int(r.broker_id)) for r in pending}
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
    cols = {"topic_id": "string", "topic_name": "string", "partition_id": "Int64", "broker_id": "Int64",
            "directory": "string", "offset": "Int64", "age_offsets": "Int64", "age_ms": "Int64"}
    return Frame("pending_placements", _frame(rows, cols),
                 ("row", "offset", "topic_name", "topic_id", "partition_id", "broker_id"), ("directory",))


def _snapshot_offsets(b: _Build) -> set[int]:
    recs = b.tables.table("records")
    return {int(o) for o in recs.loc[recs["origin"] == "snapshot", "offset"].unique()}


def _f_replica_directory_history(b: _Build) -> Frame:
    uuids = b.model.uuids
    hist = b.tables.table("replica_assignment_history")
    key = ["topic_id", "partition_id", "broker_id"]
    hist = hist.sort_values([*key, "valid_from_offset"])
    group = hist.groupby(key, sort=False)
    prev_dir = group["directory"].shift()
    prev_to = group["valid_to_offset"].shift()
    # The versions that *set* a directory: a key's first version, or one whose directory differs from (or does
    # not directly follow) the previous one. A snapshot's versions are not placements (as for the model).
    set_here = prev_dir.isna() | (prev_dir != hist["directory"]) | (prev_to != hist["valid_from_offset"])
    snapshots = _snapshot_offsets(b)
    placed = hist[set_here & ~hist["valid_from_offset"].isin(snapshots)]
    ex = _exploded_broker_history(b)
    first = ex.groupby(["broker_id", "directory"])["valid_from_offset"].min()
    registered: dict[int, list[tuple[int, str]]] = {}
    owners: dict[str, set[int]] = {}
    for (owner, text), offset in first.items():
        registered.setdefault(int(owner), []).append((int(offset), str(text)))
        owners.setdefault(str(text), set()).add(int(owner))
    rows = []
    for r in placed.itertuples():
        d = uuids.get(r.directory)
        if d is None or is_reserved(d):
            continue  # placeholders (and unreadable ids, which I13's view check reports)
        broker, at = int(r.broker_id), int(r.valid_from_offset)
        ever = {uuids.get(t) for off, t in registered.get(broker, ()) if off <= at}
        ok = inv.replica_directory_registered(d, {x for x in ever if x is not None})
        others = sorted(owners.get(str(r.directory), set()) - {broker})
        why = None if ok else (f"only broker(s) {others} registered it" if others else "no broker registered it")
        rows.append({"topic_id": r.topic_id, "topic_name": r.topic_name, "partition_id": r.partition_id,
                     "broker_id": broker, "directory": r.directory, "offset": at,
                     column_of("I21.directory_registered_by_broker"): ok, "why": why})
    cols = {"topic_id": "string", "topic_name": "string", "partition_id": "Int64", "broker_id": "Int64",
            "directory": "string", "offset": "Int64", "I21_directory_registered_by_broker": "boolean", "why": "string"}
    return Frame("replica_directory_history", _frame(rows, cols),
                 ("row", "offset", "topic_name", "topic_id", "partition_id", "broker_id", "directory"), ("why",))


def _f_log_violations(b: _Build) -> Frame:
    """The bronze records through the model's step checks (``InvariantTracker``), batch by batch. A snapshot in the
    records — the one the stream started from, or one it re-bootstrapped from after Kafka deleted segments it had
    not read (``log_gaps``) — restarts the checks from the snapshot's image, as the job's replay restarted there."""
    # Stable, with the snapshot's order: a snapshot's records share one offset, and replaying them out of order
    # (a PartitionRecord before its TopicRecord) is a fault.
    recs = b.tables.table("records").sort_values(["offset", "snapshot_index"], kind="stable")
    # NoOps only fill batches of their own: no step check reads them.
    recs = recs[recs["type"] != "NO_OP_RECORD"]
    # Step checks only: the history (I12, I21, I9's warning) is the history suite's, from the history tables.
    options: dict[str, Any] = {"image_checks": False, "history_checks": False}
    tracker = inv.InvariantTracker(**options)
    wanted = set(LOG_INVARIANTS)
    found: list[inv.Violation] = []
    note: str | None = None
    checked = batches = snapshots = 0
    started_from_snapshot = False
    ms = _ms(recs["timestamp"]) if not recs.empty else pd.Series([], dtype="Int64")

    def group_key(item: tuple[Any, Any]) -> tuple[str, int]:
        # A snapshot's records are one group; a record without a batch base offset (JSONL) is a batch of its own.
        r = item[0]
        if r.origin == "snapshot":
            return "snapshot", int(r.offset)
        base = _opt_int(r.batch_base_offset)
        return "log", int(r.offset) if base is None else base

    try:
        for (kind, _), group in itertools.groupby(zip(recs.itertuples(), ms, strict=True), key=group_key):
            entries = [LogEntry(offset=int(r.offset), record=rec, batch_base_offset=_opt_int(r.batch_base_offset),
                                leader_epoch=_opt_int(r.leader_epoch), timestamp=_opt_int(stamp), source=r.source)
                       for r, stamp in group if (rec := b.record(r)) is not None]
            if kind == "snapshot":
                tracker = inv.InvariantTracker(replay_entries(entries), **options)
                started_from_snapshot = started_from_snapshot or (snapshots == 0 and batches == 0)
                snapshots += 1
            elif entries:
                found += tracker.feed_batch(entries)
                batches += 1
                checked += len(entries)
    except ReplayFault as fault:
        # The job applied these records, so the model should too; if not, every result says where the check stopped.
        note = f"; the step checks stopped there: {fault}"
    rows = [{"invariant": v.invariant, "offset": v.offset, "topic_id": None if v.topic_id is None else str(v.topic_id),
             "partition_id": v.partition_id, "broker_id": v.broker_id,
             "directory": None if v.directory is None else str(v.directory), "message": v.message}
            for v in found if v.invariant in wanted]
    cols = {"invariant": "string", "offset": "Int64", "topic_id": "string", "partition_id": "Int64",
            "broker_id": "Int64", "directory": "string", "message": "string"}
    return Frame("log_violations", _frame(rows, cols),
                 ("row", "offset", "topic_id", "partition_id", "broker_id", "directory"), ("message",),
                 note=f"{checked} records in {batches} batches re-checked by jbod_model's step checks"
                      + (" (from the snapshot the replay started with)" if started_from_snapshot else "")
                      + (f" (restarted at {restarts} re-bootstrap snapshot(s))"
                         if (restarts := snapshots - started_from_snapshot) else "")
                      + (note or ""))


# -- external inputs


def _is_metadata_only(path: Path) -> bool:
    """A log dir holding ``__cluster_metadata-0`` and no partition directory is the separate ``metadata.log.dir``,
    not a data dir (I22 counts data dirs; KRaft does not register the metadata dir unless it is also a log dir)."""
    if not (path / METADATA_PARTITION_DIR).is_dir():
        return False
    return not any(p.is_dir() and p.name != METADATA_PARTITION_DIR for p in path.iterdir())


def _inventory_rows(b: _Build) -> tuple[list[dict[str, Any]], str | None]:
    """The inventory's rows for this cluster: those whose cluster.id is the cluster's; when none is (tables keyed by
    another name), all of them — which is right when one cluster's disks were given."""
    inv_ = inventory(b.inputs.dirs)
    rows = [{"node_id": r.node_id, "path": r.path, "directory_id": None if r.directory_id is None
             else str(r.directory_id), "parsed": r.directory_id, "cluster": r.cluster_id} for r in inv_.rows]
    mine = [r for r in rows if r["cluster"] == b.tables.cluster_id]
    if mine:
        return mine, None
    if not rows:
        return [], f"no meta.properties found under {', '.join(str(d) for d in b.inputs.dirs)}"
    return rows, None


def _f_disk_inventory(b: _Build) -> Frame:
    cols = {"node_id": "Int64", "path": "string", "directory_id": "string",
            column_of("I24.disk_directory_ids_unreserved"): "boolean"}
    if not b.inputs.dirs:
        return Frame("disk_inventory", _frame([], cols), ("row", "node_id", "path"),
                     skip="needs a meta.properties inventory (--dirs)")
    rows, problem = _inventory_rows(b)
    out = [{**r, column_of("I24.disk_directory_ids_unreserved"): (None if r["parsed"] is None
                                                                   else inv.disk_directory_id_ok(r["parsed"]))}
           for r in rows]
    return Frame("disk_inventory", _frame(out, cols), ("row", "node_id", "path"), skip=problem)


def _f_registered_on_disk(b: _Build) -> Frame:
    cols = {"broker_id": "Int64", "directory": "string", "offset": "Int64",
            column_of("I24.online_directories_on_disk"): "boolean", "disks": "object"}
    if not b.inputs.dirs:
        return Frame("registered_on_disk", _frame([], cols), ("row", "offset", "broker_id"),
                     skip="needs a meta.properties inventory (--dirs)")
    rows, problem = _inventory_rows(b)
    disks: dict[int, set[Uuid]] = {}
    for r in rows:
        if r["node_id"] is not None and r["parsed"] is not None:
            disks.setdefault(int(r["node_id"]), set()).add(r["parsed"])
    out = []
    for reg in b.model.cluster.brokers.values():
        if reg.id not in disks:
            continue  # a broker whose disks were not given: nothing to compare
        since = b.tables.table("brokers").set_index("broker_id")["since_offset"].get(reg.id)
        for d in reg.directories:
            out.append({"broker_id": reg.id, "directory": str(d), "offset": _opt_int(since),
                        "I24_online_directories_on_disk": inv.online_directory_on_disk(d, disks[reg.id]),
                        "disks": sorted(str(x) for x in disks[reg.id])})
    return Frame("registered_on_disk", _frame(out, cols), ("row", "offset", "broker_id", "directory"), ("disks",),
                 skip=problem)


def _config_dir_counts(paths: Sequence[Path]) -> list[dict[str, Any]]:
    """Per broker config (``server.properties``): the node id and the number of configured data dirs."""
    out = []
    for path in paths:
        try:
            props = load_properties(path.read_text(encoding="latin-1"))
        except OSError as e:
            raise InputError(f"cannot read broker config {path}: {e.strerror or e}") from None
        node = props.get("node.id") or props.get("broker.id")
        roles = props.get("process.roles", "broker")
        if "broker" not in roles:
            continue  # a controller-only node has no data dirs
        dirs = props.get("log.dirs") or props.get("log.dir") or "/tmp/kraft-combined-logs"
        count = len([d for d in dirs.split(",") if d.strip()])
        out.append({"node_id": int(node) if node and node.strip().lstrip("-").isdigit() else None,
                    "source": str(path), "data_dirs": count})
    return out


def _f_configured_dirs(b: _Build) -> Frame:
    cols = {"node_id": "Int64", "source": "string", "data_dirs": "Int64", "metadata_version": "string",
            "I22_jbod_needs_3_7_iv2": "boolean"}
    if b.inputs.empty:
        return Frame("configured_dirs", _frame([], cols), ("row", "node_id", "source"),
                     skip="needs a meta.properties inventory (--dirs) or broker configs (--broker-config)")
    counts = _config_dir_counts(b.inputs.broker_configs)
    if b.inputs.dirs:
        rows, _problem = _inventory_rows(b)
        per_node: dict[int | None, int] = {}
        for r in rows:
            if not _is_metadata_only(Path(r["path"])):
                per_node[r["node_id"]] = per_node.get(r["node_id"], 0) + 1
        counts += [{"node_id": n, "source": "meta.properties inventory", "data_dirs": c} for n, c in per_node.items()]
    mv = b.model.mv
    out = [{**c, "metadata_version": str(mv),
            column_of("I22.jbod_needs_3_7_iv2"): inv.jbod_supported(int(c["data_dirs"]), mv)} for c in counts]
    return Frame("configured_dirs", _frame(out, cols), ("row", "node_id", "source", "metadata_version"))


FrameBuilder = Callable[[_Build], Frame]

FRAMES: Mapping[str, FrameBuilder] = {
    "partitions": _f_partitions,
    "brokers": _f_brokers,
    "broker_directories": _f_broker_directories,
    "replay_faults": _f_replay_faults,
    "records": _f_records,
    "replicas": _f_replicas,
    "offline_intervals": _f_offline_intervals,
    "broker_directory_history": _f_broker_directory_history,
    "registration_changes": _f_registration_changes,
    "carried_over": _f_carried_over,
    "pending_placements": _f_pending_placements,
    "replica_directory_history": _f_replica_directory_history,
    "log_violations": _f_log_violations,
    "disk_inventory": _f_disk_inventory,
    "registered_on_disk": _f_registered_on_disk,
    "configured_dirs": _f_configured_dirs,
}


def build_frames(tables: TableSet, checks: Sequence[Check], settings: QualitySettings | None = None,
                 inputs: ExternalInputs = ExternalInputs()) -> dict[str, Frame]:
    """The frames ``checks`` validate, built once each."""
    build = _Build(tables, settings or QualitySettings(), inputs)
    return {name: FRAMES[name](build) for name in dict.fromkeys(c.frame for c in checks)}


# ---------------------------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True, slots=True)
class CheckResult:
    """One expectation on one cluster: ``status`` is ``passed``, ``failed``, ``skipped`` (with the reason in
    ``note``) or ``error`` (GX raised; the message in ``note``). ``sample`` holds up to ``sample_rows`` offending
    rows, each with its ``offset``."""

    cluster_id: str
    suite: str
    expectation: str
    invariant: str | None
    severity: str
    status: str
    success: bool | None
    element_count: int | None = None
    unexpected_count: int | None = None
    sample: tuple[dict[str, Any], ...] = ()
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"clusterId": self.cluster_id, "suite": self.suite, "expectation": self.expectation,
                "invariant": self.invariant, "severity": self.severity, "status": self.status,
                "success": self.success, "elementCount": self.element_count,
                "unexpectedCount": self.unexpected_count, "sample": list(self.sample), "note": self.note}


_FAIL_LEVELS: Mapping[str, frozenset[str]] = {"error": frozenset({"error"}),
                                              "warning": frozenset({"error", "warning"}), "never": frozenset()}


@dataclass(slots=True)
class QualityRun:
    """A ``jbod check`` run: every result of every cluster, where the data docs and results went."""

    run_id: str
    run_time: datetime
    tables_dir: str | None
    engine: str
    suites: tuple[str, ...]
    results: list[CheckResult] = field(default_factory=list)
    data_docs: Path | None = None
    results_table: Path | None = None
    seconds: float = 0.0

    def failing(self, fail_on: str = "error") -> list[CheckResult]:
        """Results that fail the run under ``fail_on`` (``error``, ``warning`` or ``never``); an expectation GX
        could not evaluate counts as failed."""
        levels = _FAIL_LEVELS[fail_on]
        return [r for r in self.results if r.status in ("failed", "error") and r.severity in levels]

    def exit_code(self, fail_on: str = "error") -> int:
        """1 when a result fails the run under ``fail_on``, else 0."""
        return 1 if self.failing(fail_on) else 0

    def failed_expectations(self, cluster_id: str | None = None) -> set[str]:
        """Names of the failed (or erroring) expectations, of one cluster or all."""
        return {r.expectation for r in self.results if r.status in ("failed", "error")
                and (cluster_id is None or r.cluster_id == cluster_id)}

    def to_json(self, fail_on: str = "error") -> dict[str, Any]:
        return {"runId": self.run_id, "runTime": self.run_time.isoformat(), "tables": self.tables_dir,
                "engine": self.engine, "suites": list(self.suites), "failOn": fail_on,
                "exitCode": self.exit_code(fail_on), "seconds": round(self.seconds, 3),
                "dataDocs": None if self.data_docs is None else str(self.data_docs),
                "resultsTable": None if self.results_table is None else str(self.results_table),
                "counts": {s: sum(1 for r in self.results if r.status == s)
                           for s in ("passed", "failed", "skipped", "error")},
                "results": [r.to_json() for r in self.results]}


def _jsonable(value: Any) -> Any:
    if value is None or value is pd.NA:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "item") and not isinstance(value, (list, tuple, dict, str)):
        try:
            return value.item()
        except (ValueError, AttributeError):
            pass
    if isinstance(value, (list, tuple)) or hasattr(value, "tolist"):
        return [_jsonable(v) for v in (value.tolist() if hasattr(value, "tolist") else value)]
    if isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def write_results(tables_dir: str | Path, run: QualityRun) -> Path:
    """Append a run's results to the ``dq_results`` Delta table (created on first use), one commit per run, with
    the run id in the commit's metadata — the writer conventions of :mod:`pipelines.lakehouse.tables`."""
    path = Path(tables_dir) / RESULTS_TABLE
    DeltaTable.create(str(path), schema=RESULTS_SCHEMA, mode="ignore")
    run_time = int(run.run_time.timestamp() * 1_000_000)
    columns: dict[str, list[Any]] = {f.name: [] for f in RESULTS_SCHEMA}
    for r in run.results:
        for name, value in (("run_id", run.run_id), ("run_time", run_time), ("cluster_id", r.cluster_id),
                            ("suite", r.suite), ("expectation", r.expectation), ("invariant", r.invariant),
                            ("severity", r.severity), ("status", r.status), ("success", r.success),
                            ("element_count", r.element_count), ("unexpected_count", r.unexpected_count),
                            ("sample", json.dumps([_jsonable(s) for s in r.sample], sort_keys=True)),
                            ("note", r.note), ("engine", run.engine)):
            columns[name].append(value)
    arrays = {f.name: (pa.array(columns[f.name], pa.int64()).cast(TIME) if f.type == TIME
                       else pa.array(columns[f.name], f.type)) for f in RESULTS_SCHEMA}
    write_deltalake(str(path), pa.table(arrays, schema=RESULTS_SCHEMA), mode="append",
                    commit_properties=CommitProperties(custom_metadata={"kraft_jbod.dq_run_id": run.run_id}))
    return path


def read_results(tables_dir: str | Path, run_id: str | None = None) -> pd.DataFrame:
    """The ``dq_results`` rows (of one run, or all), through the Delta log."""
    filters = [] if run_id is None else [("run_id", "=", run_id)]
    return _read_delta(Path(tables_dir) / RESULTS_TABLE, filters).to_pandas()


# ---------------------------------------------------------------------------------------------------------------
# great-expectations


@contextmanager
def _quiet() -> Iterator[None]:
    """GX logs and warns freely (and draws tqdm bars unless told not to, see ``_context``): keep the CLI clean."""
    logger = logging.getLogger("great_expectations")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


_SEVERITY_TO_GX = {"error": "critical", "warning": "warning"}


class GxRunner:
    """Validates frames with great-expectations, offline: a file context under ``<tables>/_dq/gx`` (suites,
    validation definitions and results kept across runs, so the data docs show history) or, with
    ``project_dir=None``, an ephemeral one (tests). The data docs site goes to ``docs_dir``.

    great-expectations is imported here, on first use (the import takes seconds; no other command pays it)."""

    def __init__(self, engine: str = "pandas", project_dir: Path | None = None, docs_dir: Path | None = None,
                 spark: Any = None) -> None:
        if engine not in ENGINES:
            raise InputError(f"--engine must be one of {', '.join(ENGINES)}, not {engine!r}")
        with _quiet():
            import great_expectations as gx  # noqa: PLC0415 - slow import, only for checks
            import great_expectations.expectations as gxe  # noqa: PLC0415
            from great_expectations.core.run_identifier import RunIdentifier  # noqa: PLC0415
            from great_expectations.data_context.types.base import ProgressBarsConfig  # noqa: PLC0415

            self._gx, self._gxe, self._run_identifier = gx, gxe, RunIdentifier
            ctx: Any
            if project_dir is None:
                ctx = gx.get_context(mode="ephemeral")
            else:
                project_dir.mkdir(parents=True, exist_ok=True)
                ctx = gx.get_context(mode="file", project_root_dir=str(project_dir))
            ctx.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
            ctx.variables.analytics_enabled = False
            if project_dir is not None:
                ctx.variables.save()
            self.docs_dir = docs_dir
            if docs_dir is not None:
                sites = ctx.list_data_docs_sites()
                if "local_site" in sites:
                    ctx.delete_data_docs_site("local_site")
                site: Any = {"class_name": "SiteBuilder", "show_how_to_buttons": False,
                        "store_backend": {"class_name": "TupleFilesystemStoreBackend",
                                          "base_directory": str(docs_dir)},
                        "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"}}
                if DOCS_SITE in sites:
                    ctx.update_data_docs_site(DOCS_SITE, site)
                else:
                    ctx.add_data_docs_site(DOCS_SITE, site)
            self._ctx = ctx
            self.engine = engine
            self._spark = spark
            self._source: Any
            if engine == "spark":
                self._source = ctx.data_sources.add_or_update_spark("kraft_jbod_spark")
            else:
                self._source = ctx.data_sources.add_or_update_pandas("kraft_jbod_pandas")
            self._batches: dict[str, Any] = {}

    def _batch_definition(self, frame: str) -> Any:
        if frame not in self._batches:
            asset = self._source.add_dataframe_asset(frame)
            self._batches[frame] = asset.add_batch_definition_whole_dataframe("whole")
        return self._batches[frame]

    def _expectation(self, check: Check, settings: QualitySettings) -> Any:
        gxe = self._gxe
        kw: dict[str, Any] = {"column": check.column, "meta": check.meta(settings),
                              "description": f"{check.name} ({check.severity_name}): {check.summary}",
                              "severity": _SEVERITY_TO_GX[check.severity_name],
                              "notes": f"**{check.name}** — {check.summary}. {check.rationale}"
                                       + ("" if check.definition is None else f" Source: {check.definition.source}.")}
        if check.rule == "true":
            return gxe.ExpectColumnValuesToBeInSet(value_set=[True], **kw)
        if check.rule == "unique":
            return gxe.ExpectColumnValuesToBeUnique(**kw)
        if check.rule == "not_in":
            return gxe.ExpectColumnValuesToNotBeInSet(value_set=[check.value], **kw)
        if check.rule == "at_most":
            assert check.threshold is not None
            return gxe.ExpectColumnValuesToBeBetween(max_value=getattr(settings, check.threshold), **kw)
        raise ValueError(f"unknown rule {check.rule!r}")

    def _dataframe(self, frame: Frame) -> Any:
        data = frame.gx_data()
        if self.engine == "pandas":
            return data
        # Through Arrow: nullable pandas columns arrive as Spark nulls (a float NaN would not be null there).
        return self._spark.createDataFrame(pa.Table.from_pandas(data, preserve_index=False))

    def validate(self, suite: str, frame: Frame, checks: Sequence[Check], settings: QualitySettings,
                 run_name: str, run_time: datetime) -> list[tuple[Check, Any]]:
        """Run one GX suite (``<suite>.<frame>``) on one frame; return each check with its GX result."""
        gx = self._gx
        with _quiet():
            gx_suite = gx.ExpectationSuite(
                name=f"{suite}.{frame.name}",
                expectations=[self._expectation(c, settings) for c in checks],
                meta={"suite": suite, "frame": frame.name, "notes": "kraft-jbod data quality (docs/data-quality.md)"})
            gx_suite = self._ctx.suites.add_or_update(gx_suite)
            definition = self._ctx.validation_definitions.add_or_update(
                gx.ValidationDefinition(name=f"{suite}.{frame.name}", data=self._batch_definition(frame.name),
                                        suite=gx_suite))
            result = definition.run(
                batch_parameters={"dataframe": self._dataframe(frame)},
                result_format={"result_format": "SUMMARY", "partial_unexpected_count": settings.sample_rows,
                               "unexpected_index_column_names": list(frame.keys)},
                run_id=self._run_identifier(run_name=run_name, run_time=run_time))
        by_name = {(r.expectation_config.meta or {}).get("expectation") if r.expectation_config else None: r
                   for r in result.results}
        return [(c, by_name.get(c.name)) for c in checks]

    def build_docs(self) -> Path | None:
        """Build the data docs site; its ``index.html`` (None without a docs dir)."""
        if self.docs_dir is None:
            return None
        with _quiet():
            self._ctx.build_data_docs(site_names=[DOCS_SITE])
        return self.docs_dir / "index.html"


def _sample(frame: Frame, gx_result: Any, limit: int) -> tuple[dict[str, Any], ...]:
    """The offending rows GX reported (their key columns), completed with the frame's context columns."""
    listed = (gx_result.result or {}).get("partial_unexpected_index_list") or []
    data = frame.data
    out = []
    for item in listed[:limit]:
        row = {k: _jsonable(v) for k, v in item.items()}
        index = row.get("row")
        if index is not None and 0 <= int(index) < len(data):
            for col in frame.context:
                row[col] = _jsonable(data.iloc[int(index)][col])
        out.append(row)
    return tuple(out)


def _to_result(cluster_id: str, check: Check, frame: Frame, gx_result: Any, limit: int) -> CheckResult:
    base = CheckResult(cluster_id=cluster_id, suite=check.suite, expectation=check.name, invariant=check.invariant,
                       severity=check.severity_name, status="error", success=False)
    if gx_result is None:
        return replace(base, note="great-expectations returned no result for this expectation")
    info = gx_result.exception_info or {}
    if info.get("raised_exception"):
        return replace(base, note=str(info.get("exception_message")))
    stats = gx_result.result or {}
    unexpected = stats.get("unexpected_count")
    return replace(base, status="passed" if gx_result.success else "failed", success=bool(gx_result.success),
                   note=frame.note, element_count=_opt_int(stats.get("element_count")),
                   unexpected_count=_opt_int(unexpected) if unexpected is not None else 0,
                   sample=() if gx_result.success else _sample(frame, gx_result, limit))


# ---------------------------------------------------------------------------------------------------------------
# Running checks


def _run_name(run_id: str, cluster_id: str) -> str:
    """GX's name for one cluster's validations in a run (its file store refuses path separators in keys)."""
    safe = cluster_id.replace("/", "_").replace("\\", "_")
    return f"{safe}@{run_id}"


def check_cluster(tables: TableSet, runner: GxRunner, *, suites: Sequence[str] = SUITE_NAMES,
                  settings: QualitySettings | None = None, inputs: ExternalInputs = ExternalInputs(),
                  run_name: str | None = None, run_time: datetime | None = None) -> list[CheckResult]:
    """Every expectation of ``suites`` on one cluster's tables, in :data:`CHECKS` order, then the skips."""
    settings = settings or QualitySettings()
    checks = checks_for(suites)
    run_time = run_time or datetime.now(UTC)
    run_name = run_name or _run_name(uuid.uuid4().hex, tables.cluster_id)
    frames = build_frames(tables, checks, settings, inputs)
    results: dict[str, CheckResult] = {}
    groups: dict[tuple[str, str], list[Check]] = {}
    for c in checks:
        groups.setdefault((c.suite, c.frame), []).append(c)
    for (suite, frame_name), group in groups.items():
        frame = frames[frame_name]
        if frame.skip is not None:
            for c in group:
                results[c.name] = CheckResult(tables.cluster_id, c.suite, c.name, c.invariant, c.severity_name,
                                              "skipped", None, note=frame.skip)
            continue
        for c, gx_result in runner.validate(suite, frame, group, settings, run_name, run_time):
            results[c.name] = _to_result(tables.cluster_id, c, frame, gx_result, settings.sample_rows)
    out = [results[c.name] for c in checks]
    for s in SKIPS:
        if s.suite in suites:
            definition = inv.invariant(s.invariant)
            out.append(CheckResult(tables.cluster_id, s.suite, s.name, s.invariant,
                                   definition.severity.value.lower(), "skipped", None, note=s.reason))
    return out


def run_checks(tables_dir: str | Path, *, cluster: str | None = None, suites: Sequence[str] | None = None,
               settings: QualitySettings | None = None, engine: str = "pandas",
               inputs: ExternalInputs = ExternalInputs(), spark: Any = None, write: bool = True,
               docs: bool = True) -> QualityRun:
    """Check one cluster (or every cluster) of the tables under ``tables_dir``: run the suites (default: the
    settings' ``suites``), append the results to ``dq_results`` (``write``) and build the data docs under
    ``<tables>/_dq/data_docs`` (``docs``). ``spark`` is the session for ``engine="spark"`` (the caller owns it)."""
    started = time.monotonic()
    settings = settings or QualitySettings()
    root = Path(tables_dir)
    chosen = tuple(suites) if suites else tuple(settings.suites)
    checks_for(chosen)  # unknown suite names fail before anything is read
    if engine not in ENGINES:
        raise InputError(f"--engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    if engine == "spark" and spark is None:
        raise InputError("the spark engine needs a Spark session")
    known = clusters(root)
    if cluster is not None and cluster not in known:
        raise InputError(f"cluster {cluster!r} is not in {root} (clusters: {', '.join(known) or 'none'})")
    targets = [cluster] if cluster is not None else known
    run = QualityRun(run_id=uuid.uuid4().hex, run_time=datetime.now(UTC).replace(microsecond=0),
                     tables_dir=str(root), engine=engine, suites=chosen)
    dq = root / DQ_DIR
    runner = GxRunner(engine, project_dir=dq if docs else None, docs_dir=dq / "data_docs" if docs else None,
                      spark=spark)
    for cid in targets:
        run.results += check_cluster(TableSet(cid, root), runner, suites=chosen, settings=settings, inputs=inputs,
                                     run_name=_run_name(run.run_id, cid), run_time=run.run_time)
    if docs:
        run.data_docs = runner.build_docs()
    if write:
        run.results_table = write_results(root, run)
    run.seconds = time.monotonic() - started
    return run
