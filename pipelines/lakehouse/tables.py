"""The Delta tables of the Spark job: their contract (docs/tables.md), how a micro-batch's rows become idempotent
writes, and the readers — the latest state, and the state as of any offset (:func:`as_of_image`).

Tables (snake_case; every one has ``cluster_id``):

* ``records`` — bronze: every record replayed (read, or written by the reference controller), with its provenance
  and the offset at which it took effect (``applied_offset``; null for records an AbortTransactionRecord discarded).
* current tables — ``features``, ``brokers``, ``topics``, ``partitions``, ``replica_assignments``: one row per live
  key, with ``since_offset``/``since_time`` (when the row got its current value);
* history tables — ``feature_history``, ``broker_history``, ``topic_history``, ``partition_history``,
  ``replica_assignment_history``: every version of every key, ``valid_from_offset`` inclusive to
  ``valid_to_offset`` exclusive (null while current), with the times of those offsets;
* ``offline_replicas`` — intervals during which a replica was offline for one reason in one directory
  (``start_offset`` inclusive, ``end_offset`` exclusive, null while it lasts);
* ``controller_responses`` — one row per controller request of a request stream; ``replay_faults`` — the entry a
  cluster's replay stopped at, if any;
* ``dir_inventory`` — the log directories' ``meta.properties`` (directory id ↔ node and path), loaded by
  ``jbod dirs --tables`` / ``jbod run --dirs`` (:func:`load_dir_inventory`), not by the replay.

Writes are exactly-once per micro-batch: every commit carries a Delta app transaction ``(app id, batch id)`` and a
table whose transaction version already covers the batch is skipped, so a batch re-run after a crash writes
nothing twice. Every table is append-only, so that a batch costs its own rows, not the table's (a MERGE rewrites
every file holding a row it changes, and a batch's keys fall in all of them): a current table gets the batch's
last row of each key it changed, a history table the batch's versions, and a key's removal is a :data:`REMOVED`
row. Readers resolve the stored rows (:func:`resolved_sql`: the latest row of a key, a version's end from the key's
next row) and ``jbod maintain`` folds them into that form (:func:`fold_versions`). Readers go through the Delta log
(delta-rs), never
``spark.read.parquet`` on a table folder (it would see removed files), and hand out the tables' own Arrow types
(:func:`plain_types`: delta-rs' SQL engine scans strings as ``string_view``, which pyarrow's compute kernels and
joins do not take).

Besides the state as of an offset, the readers give the log itself (:func:`log_entries`: the ``records`` rows as
``LogEntry`` values from the latest snapshot at or before an offset, which ``jbod report --tables`` replays), the
model's image without a replay (:func:`metadata_image`, which ``jbod whatif --tables`` asks its question of) and the
directory paths (:func:`directory_paths`, :func:`replica_assignments_with_paths`,
:func:`replicas_per_directory`).
"""

from __future__ import annotations

import ctypes
import itertools
import json
import os
import tempfile
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Final, Protocol

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable, QueryBuilder, Transaction, write_deltalake
from deltalake import Field as DeltaField
from deltalake.schema import PrimitiveType

from jbod_model.errors import InputError
from jbod_model.image import (
    EMPTY_IMAGE,
    BrokerRegistration,
    ClusterImage,
    FeaturesImage,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
    TopicsImage,
)
from jbod_model.meta_properties import DirInventory, DirInventoryRow
from jbod_model.metadata_version import FEATURE_NAME, MetadataVersion
from jbod_model.records.entry import LogEntry
from jbod_model.records.json_codec import PIECE_ROWS, Slices, record_from_json, typed_record_reader
from jbod_model.records.metadata import BrokerEndpoint, Record
from jbod_model.replay import CONFIGURATION_RECORDS, configurations_of
from jbod_model.report import DirectoryPaths
from jbod_model.slots import gc_paused
from jbod_model.sources import snapshot_image
from jbod_model.uuid import Uuid
from pipelines.lakehouse.jsontext import text_slices

TIME = pa.timestamp("us", tz="UTC")
INTS = pa.list_(pa.int32())
STRINGS = pa.list_(pa.string())


@dataclass(frozen=True, slots=True)
class Entity:
    """A keyed view of the image whose changes are events: a current table and a history table."""

    name: str
    key: tuple[tuple[str, pa.DataType], ...]
    value: tuple[tuple[str, pa.DataType], ...]
    current: str | None
    history: str
    #: The history table's interval columns: ``valid_from``/``valid_to`` or ``start``/``end``.
    interval: tuple[str, str] = ("valid_from", "valid_to")

    @property
    def key_names(self) -> tuple[str, ...]:
        return ("cluster_id", *(k for k, _ in self.key))

    def current_schema(self) -> pa.Schema:
        return pa.schema([("cluster_id", pa.string()), *self.key, *self.value, ("since_offset", pa.int64()),
                          ("since_time", TIME)])

    def history_schema(self) -> pa.Schema:
        lo, hi = self.interval
        return pa.schema([("cluster_id", pa.string()), *self.key, *self.value, (f"{lo}_offset", pa.int64()),
                          (f"{lo}_time", TIME), (f"{hi}_offset", pa.int64()), (f"{hi}_time", TIME)])

    def tables(self) -> dict[str, pa.Schema]:
        """The entity's tables and the columns their readers give (the contract, docs/tables.md)."""
        out = {self.history: self.history_schema()}
        if self.current is not None:
            out[self.current] = self.current_schema()
        return out


#: The column only the stored form of a current or history table has: the row says the key was removed at its offset
#: (``since_offset``, ``valid_from_offset``/``start_offset``). Readers resolve it away (docs/tables.md "Writes").
REMOVED = "removed"


def stored(schema: pa.Schema) -> pa.Schema:
    """A current or history table's schema as stored: its readers' columns plus :data:`REMOVED`."""
    return schema.append(pa.field(REMOVED, pa.bool_()))


_REPLICA_KEY = (("topic_id", pa.string()), ("partition_id", pa.int32()), ("broker_id", pa.int32()))

ENTITIES: Mapping[str, Entity] = {e.name: e for e in (
    Entity("feature", (("name", pa.string()),), (("level", pa.int32()),), "features", "feature_history"),
    Entity("broker", (("broker_id", pa.int32()),),
           (("broker_epoch", pa.int64()), ("incarnation_id", pa.string()), ("fenced", pa.bool_()),
            ("in_controlled_shutdown", pa.bool_()), ("is_migrating_zk_broker", pa.bool_()), ("rack", pa.string()),
            ("log_dirs", STRINGS), ("listeners", pa.string())), "brokers", "broker_history"),
    Entity("topic", (("topic_id", pa.string()),), (("topic_name", pa.string()),), "topics", "topic_history"),
    Entity("partition", (("topic_id", pa.string()), ("partition_id", pa.int32())),
           (("topic_name", pa.string()), ("replicas", INTS), ("isr", INTS), ("leader", pa.int32()),
            ("leader_epoch", pa.int32()), ("partition_epoch", pa.int32()), ("leader_recovery_state", pa.int32()),
            ("directories", STRINGS), ("adding_replicas", INTS), ("removing_replicas", INTS),
            ("eligible_leader_replicas", INTS), ("last_known_elr", INTS)), "partitions", "partition_history"),
    Entity("replica", _REPLICA_KEY,
           (("topic_name", pa.string()), ("directory", pa.string()), ("directory_state", pa.string()),
            ("offline", pa.bool_()), ("offline_reason", pa.string())),
           "replica_assignments", "replica_assignment_history"),
    Entity("offline", _REPLICA_KEY,
           (("topic_name", pa.string()), ("directory", pa.string()), ("directory_state", pa.string()),
            ("reason", pa.string())), None, "offline_replicas", ("start", "end")),
)}

APPEND_TABLES: Mapping[str, pa.Schema] = {
    "records": pa.schema([
        ("cluster_id", pa.string()), ("offset", pa.int64()), ("batch_base_offset", pa.int64()),
        ("leader_epoch", pa.int32()), ("timestamp", TIME), ("type", pa.string()), ("version", pa.int32()),
        ("data", pa.string()), ("payload", pa.string()), ("source", pa.string()), ("origin", pa.string()),
        ("snapshot_index", pa.int64()), ("applied_offset", pa.int64())]),
    "controller_responses": pa.schema([
        ("cluster_id", pa.string()), ("request_seq", pa.int64()), ("request_offset", pa.int64()),
        ("type", pa.string()), ("version", pa.int32()), ("broker_id", pa.int32()), ("error_code", pa.int32()),
        ("error_message", pa.string()), ("response", pa.string()), ("records_written", pa.int32()),
        ("first_record_offset", pa.int64()), ("last_record_offset", pa.int64()),
        ("partition_errors", pa.list_(pa.struct([("topic", pa.string()), ("partition_id", pa.int32()),
                                                 ("error_code", pa.int32())])))]),
    "replay_faults": pa.schema([
        ("cluster_id", pa.string()), ("seq", pa.int64()), ("offset", pa.int64()), ("source", pa.string()),
        ("error", pa.string()), ("message", pa.string())]),
    # Offsets Kafka deleted before the job read them, and the snapshot re-bootstrapped from (docs/tables.md).
    "log_gaps": pa.schema([
        ("cluster_id", pa.string()), ("first_missing_offset", pa.int64()), ("last_missing_offset", pa.int64()),
        ("snapshot_end_offset", pa.int64()), ("snapshot_source", pa.string()), ("snapshot_time", TIME),
        ("changed_rows", pa.int32()), ("dropped_records", pa.int32()), ("message", pa.string())]),
}


#: The directory inventory: written by :func:`load_dir_inventory`, never by a micro-batch.
DIR_INVENTORY = "dir_inventory"
DIR_INVENTORY_SCHEMA = pa.schema([
    ("cluster_id", pa.string()), ("node_id", pa.int32()), ("path", pa.string()), ("directory_id", pa.string()),
    ("version", pa.int32()), ("read_from", pa.string()),
    ("findings", pa.list_(pa.struct([("severity", pa.string()), ("message", pa.string())]))),
    ("loaded_at", TIME), ("retired_at", TIME)])


#: Current and history tables by name: (their entity, True for a current table).
VERSIONED: Mapping[str, tuple[Entity, bool]] = {
    name: (e, name == e.current) for e in ENTITIES.values() for name in e.tables()}


def table_schemas() -> dict[str, pa.Schema]:
    """Every table's schema as its readers give it (the contract), by name."""
    out = dict(APPEND_TABLES)
    for e in ENTITIES.values():
        out.update(e.tables())
    out[DIR_INVENTORY] = DIR_INVENTORY_SCHEMA
    return out


def stored_schemas() -> dict[str, pa.Schema]:
    """Every table's schema as the writer creates it: current and history tables have :data:`REMOVED` too."""
    return {name: stored(schema) if name in VERSIONED else schema for name, schema in table_schemas().items()}


# ---------------------------------------------------------------------------------------------------------------
# From a micro-batch's rows to table writes


#: The operator's row of a keyed entity's change event, after the entity's key: ``o`` the offset it took effect at,
#: ``t`` its batch's time (ms); then the new value's columns (null when removed) and :data:`REMOVED`.
EVENT_OFFSET, EVENT_TIME = "o", "t"


def operator_schema(table: str) -> pa.Schema:
    """The typed columns of one output table's rows as the operator emits them (besides ``cluster_id``, ``ord`` and
    ``at``): an append-only table's own columns with times as ms, or an entity's change event — its key,
    :data:`EVENT_OFFSET`, :data:`EVENT_TIME`, its value's columns, :data:`REMOVED`. Typed columns, not JSON text: the
    operator and the driver turn no value into text and back (docs/state-design.md "Typed output")."""
    found = _OPERATOR_SCHEMAS.get(table)
    if found is None:
        raise InputError(f"unknown output table {table!r}")
    return found


def _as_ms(schema: pa.Schema) -> pa.Schema:
    return pa.schema([pa.field(f.name, pa.int64()) if f.type == TIME else f for f in schema])


_OPERATOR_SCHEMAS: Mapping[str, pa.Schema] = {
    **{name: _as_ms(schema.remove(schema.get_field_index("cluster_id"))) for name, schema in APPEND_TABLES.items()},
    **{name: pa.schema([*e.key, (EVENT_OFFSET, pa.int64()), (EVENT_TIME, pa.int64()), *e.value, (REMOVED, pa.bool_())])
       for name, e in ENTITIES.items()},
}

#: The columns every output table's rows carry besides :func:`operator_schema`'s, as the sink receives them.
BATCH_COLUMNS = (("cluster_id", pa.string()), ("ord", pa.int64()))


def event_row(entity: str, key: Sequence[Any], offset: int, time_ms: int | None,
              value: Mapping[str, Any] | None) -> dict[str, Any]:
    """A change event of a keyed entity as one row for :func:`batch_tables` (key in key order, the value's columns
    by name, None: removed)."""
    names = [name for name, _ in ENTITIES[entity].key]
    if len(names) != len(key):
        raise ValueError(f"a {entity} key has {len(names)} parts, not {len(key)}: {list(key)}")
    return {"table": entity, **dict(zip(names, key, strict=True)), EVENT_OFFSET: offset, EVENT_TIME: time_ms,
            **(value or {}), REMOVED: value is None}


def batch_tables(rows: Iterable[Mapping[str, Any]]) -> dict[str, pa.Table]:
    """Rows given one by one (``cluster_id``, ``ord``, ``table`` and the table's :func:`operator_schema` columns;
    a missing column is null) as the typed tables :func:`plan_batch` takes: tests and benchmarks write batches by
    hand this way."""
    by_table: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        by_table.setdefault(str(row["table"]), []).append(row)
    out = {}
    for name, listed in by_table.items():
        schema = pa.schema([*BATCH_COLUMNS, *operator_schema(name)])
        out[name] = pa.table({f.name: pa.array([r.get(f.name) for r in listed], f.type) for f in schema},
                             schema=schema)
    return out


@dataclass(slots=True)
class BatchWrites:
    """What one micro-batch writes: rows to append, table by table, in the tables' stored schemas. Every table is
    append-only (docs/tables.md "Writes"): current and history tables get the batch's new versions, never an update
    of an older row."""

    appends: dict[str, pa.Table] = field(default_factory=dict)

    def tables(self) -> list[str]:
        return sorted(self.appends)

    def rows(self, table: str) -> list[dict[str, Any]]:
        """One table's rows as Python values (tests, small batches)."""
        found = self.appends.get(table)
        return [] if found is None else found.to_pylist()


def _times(column: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """The operator's times (ms, the record batch's append time) as the tables' timestamps (µs, UTC)."""
    return pc.multiply(column.cast(pa.int64()), 1000).cast(TIME)


def _append_rows(name: str, part: pa.Table) -> pa.Table:
    schema = APPEND_TABLES[name]
    return pa.table({f.name: _times(part.column(f.name)) if f.type == TIME else part.column(f.name).cast(f.type)
                     for f in schema}, schema=schema)


def _entity_rows(entity: Entity, part: pa.Table) -> dict[str, pa.Table]:
    keys = {name: part.column(name) for name in entity.key_names}
    values = {name: part.column(name) for name, _ in entity.value}
    removed = part.column(REMOVED)
    since, at = part.column(EVENT_OFFSET), _times(part.column(EVENT_TIME))
    lo, hi = entity.interval
    open_ended = {f"{hi}_offset": pa.nulls(part.num_rows, pa.int64()), f"{hi}_time": pa.nulls(part.num_rows, TIME)}
    history = pa.table({**keys, **values, f"{lo}_offset": since, f"{lo}_time": at, **open_ended, REMOVED: removed},
                       schema=stored(entity.history_schema()))
    out = {entity.history: history}
    if entity.current is not None:
        # The key's last event of the batch: its greatest ``ord``. The row's position rides in the low bits of the
        # aggregated value, so one group-by finds each key's last row and the rows are never sorted.
        last = pa.table({**keys, "_last": _ord_and_row(part)}).group_by(
            list(entity.key_names), use_threads=False).aggregate([("_last", "max")]).column("_last_max")
        # The current rows in the batch's own order, as the history's are: the operator's groups — a cluster's
        # bucket each — one after the other. Ordered by ``ord`` (unique within a cluster only), a batch of many
        # clusters interleaved them row by row, so that no page of a file could be skipped for one cluster: a fleet
        # cluster's read of its latest partitions decoded every cluster's pages (docs/performance.md, "The terminal
        # report cut like the page; where a fleet cluster's reads go").
        current = pa.table({**keys, **values, "since_offset": since, "since_time": at, REMOVED: removed},
                           schema=stored(entity.current_schema()))
        out[entity.current] = current.take(pc.bit_wise_and(last, _ROW_MASK).sort())
    return out


#: :func:`_ord_and_row`: a row's position in its batch's table takes the low 31 bits, its ``ord`` the bits above.
_ROW_BITS = 31
_ROW_MASK = (1 << _ROW_BITS) - 1


def _ord_and_row(part: pa.Table) -> pa.Array:
    """Each row's ``ord`` and position as one int64 (``ord << 31 | position``): ordered as the ``ord`` values, which
    are unique within a cluster. A micro-batch's ``ord`` values are below its rows × buckets (a bucket's count of
    rows restarts every batch), so both fit for any batch a driver can hold; a larger one is refused."""
    n = part.num_rows
    ords = part.column("ord").to_numpy()
    if n > _ROW_MASK or (n and int(ords.max()) >= 1 << (63 - _ROW_BITS)):
        raise InputError(f"a micro-batch of {n} rows (greatest ord {int(ords.max())}) is too large to plan: lower "
                         "max_entries_per_batch")
    return pa.array((ords << _ROW_BITS) | np.arange(n, dtype=np.int64))


def plan_batch(batch: Mapping[str, pa.Table]) -> BatchWrites:
    """Turn the operator's rows of a micro-batch (table → its rows: ``cluster_id``, ``ord`` and the table's
    :func:`operator_schema` columns) into table writes, columnar. Events of one key are applied in ``ord`` order.
    History: each version is a row whose end (``valid_to``/``end``) is left null — the key's next row, in this batch
    or a later one, ends it (readers derive the end, ``jbod maintain`` stores it); a removal is a :data:`REMOVED` row
    at its offset. Current table: the key's last event, a :data:`REMOVED` row when that is a removal; the row it
    supersedes stays until ``jbod maintain`` drops it (readers take the latest).

    No end is stored here, even one the batch knows: so the rows of a key whose end is null are always its latest
    ones, which is what lets readers resolve only those (:func:`resolved_sql`)."""
    out = BatchWrites()
    for name in sorted(batch):
        # The rows are not sorted: a key's rows are its bucket's, in the order they were made, and each key's last
        # event is found by its ``ord`` (_entity_rows). Sorting a batch by ``ord`` moved every row of every table
        # once more on the driver (4 s of the 200 k benchmark log's 13 s there).
        part = batch[name]
        if part.num_rows == 0:
            continue
        if name in APPEND_TABLES:
            out.appends[name] = _append_rows(name, part)
            continue
        entity = ENTITIES.get(name)
        if entity is None:
            raise InputError(f"unknown output table {name!r}")
        out.appends.update(_entity_rows(entity, part))
    return out


def _arrow(rows: Sequence[Mapping[str, Any]], schema: pa.Schema, extra: Sequence[tuple[str, pa.DataType]] = (),
           ) -> pa.Table:
    full = pa.schema([*schema, *(pa.field(n, t) for n, t in extra)])
    columns = {f.name: [r.get(f.name) for r in rows] for f in full}
    for f in full:
        if f.type == TIME:
            columns[f.name] = pa.array(columns[f.name], pa.int64()).cast(TIME)
    return pa.table({name: pa.array(values, full.field(name).type) if not isinstance(values, pa.Array) else values
                     for name, values in columns.items()}, schema=full)


# ---------------------------------------------------------------------------------------------------------------
# Writers


class TableWriter(Protocol):
    """Writes a micro-batch's rows exactly once (see the module docstring)."""

    def ensure_tables(self) -> None: ...

    def write_batch(self, batch_id: int, batch: Mapping[str, pa.Table]) -> dict[str, int]:
        """Write one micro-batch (the operator's rows by table, as :func:`plan_batch` takes them); return the rows
        written per table (0 for a table skipped as already done)."""


def _quote(name: str) -> str:
    return f'"{name}"'


class DeltaRsWriter:
    """The embedded writer: delta-rs from the driver (``foreachBatch``), no JVM jars."""

    def __init__(self, tables_dir: str | Path, app_id: str) -> None:
        self.root = Path(tables_dir)
        self.app_id = app_id
        self._tables: dict[str, DeltaTable] = {}

    def path(self, table: str) -> Path:
        return self.root / table

    def ensure_tables(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        for name, schema in stored_schemas().items():
            table = DeltaTable.create(self.path(name), schema=schema, mode="ignore")
            if name in VERSIONED:
                migrate_layout(table)
            self._tables[name] = table

    def _table(self, name: str) -> DeltaTable:
        table = self._tables.get(name)
        if table is None:
            table = DeltaTable(self.path(name))
            self._tables[name] = table
        else:
            table.update_incremental()
        return table

    def _done(self, table: DeltaTable, batch_id: int) -> bool:
        version = table.transaction_version(self.app_id)
        return version is not None and version >= batch_id

    def _commit(self, batch_id: int) -> CommitProperties:
        return CommitProperties(app_transactions=[Transaction(self.app_id, batch_id)])

    def write_batch(self, batch_id: int, batch: Mapping[str, pa.Table]) -> dict[str, int]:
        plan = plan_batch(batch)
        return {name: self._append(name, plan.appends[name], batch_id)
                for name in plan.tables()}

    def _append(self, name: str, rows: pa.Table, batch_id: int) -> int:
        """Append one table's rows of the batch in one commit carrying the batch's app transaction; 0 when that
        transaction is already there (the batch is re-run after a crash). An append reads no data file, so it costs
        the batch's rows whatever the table holds (benchmarks/merge_benchmark.py)."""
        table = self._table(name)
        if self._done(table, batch_id):
            return 0
        write_deltalake(table, rows, mode="append", commit_properties=self._commit(batch_id))
        return int(rows.num_rows)


class DeltaSparkWriter:
    """The cluster writer: the same tables through delta-spark (needs the Delta jars on the session's classpath;
    not exercised by this repository's tests, which have no Maven access). Every table is appended to, as by
    :class:`DeltaRsWriter`, with Delta's ``txnAppId``/``txnVersion`` writer options for idempotence."""

    def __init__(self, spark: Any, tables_dir: str | Path, app_id: str) -> None:
        self.spark = spark
        self.root = str(tables_dir).rstrip("/")
        self.app_id = app_id

    def ensure_tables(self) -> None:
        for name, schema in stored_schemas().items():
            spark_schema = self.spark.createDataFrame(pa.table({f.name: pa.array([], f.type) for f in schema}))
            path = f"{self.root}/{name}"
            spark_schema.write.format("delta").mode("ignore").save(path)
            if name in VERSIONED and REMOVED not in self.spark.read.format("delta").load(path).columns:
                # The MERGE layout's rows are final: adding the column migrates them (see migrate_layout).
                self.spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS ({REMOVED} BOOLEAN)")

    def write_batch(self, batch_id: int, batch: Mapping[str, pa.Table]) -> dict[str, int]:
        plan = plan_batch(batch)
        written: dict[str, int] = {}
        for name in plan.tables():
            df = self.spark.createDataFrame(plan.appends[name])
            (df.write.format("delta").mode("append").option("txnAppId", self.app_id)
             .option("txnVersion", batch_id).save(f"{self.root}/{name}"))
            written[name] = plan.appends[name].num_rows
        return written


def migrate_layout(table: DeltaTable) -> bool:
    """Bring a current or history table written before writes were append-only (every row final: one per key, each
    version closed) to the append-only layout: add the :data:`REMOVED` column, null — read as false — in every old
    row, which is what those rows mean in the new layout. Return whether it was needed."""
    if REMOVED in table.schema().to_arrow().names:
        return False
    table.alter.add_columns(DeltaField(REMOVED, PrimitiveType("boolean"), nullable=True))
    return True


#: A fold MERGEs the rows it changes into the table when they are at most this share of its stored rows, and rewrites
#: the table otherwise (:func:`fold_versions`). Measured: the 200 k benchmark tables folded after a +2.7 % run, every
#: table MERGEd 8.7 s, rewritten 17.5 s; the 2 M tables' replica history with 2 % of its keys changed since its
#: fold, MERGEd 18.2 s and 0.6 GB; its first fold (72 % of its rows changed), MERGEd 53-87 s and 6.7-10 GB,
#: rewritten 48 s and 1.5 GB (docs/performance.md, "The first fold at 2 M partitions").
FOLD_MERGE_SHARE: Final = 0.1


def fold_versions(table: DeltaTable, name: str, *, dry_run: bool = False) -> int:
    """Fold a current or history table's appended rows into their final form (``jbod maintain``): drop the current
    rows later ones superseded and the :data:`REMOVED` rows, store the end of every version a later row ended.
    Readers give the same rows before and after (:func:`resolved_sql`); after it they read one row per live key and
    a filter on ``valid_to_offset IS NULL`` finds the open versions alone. Return the rows changed or dropped (with
    ``dry_run``, the rows it would). A table of the old layout is migrated (:func:`migrate_layout`; nothing to
    fold).

    One commit, carrying the new fold marks (:data:`FOLD_APP`), folds the rows of the version read — each cluster's
    up to its greatest start then. A batch appended meanwhile has greater offsets (a cluster's offsets only grow), so
    it stays as appended, above its cluster's mark (folded by the next run), and readers' answers are the same either
    way. After a fold, the rows to change are found among the keys with a row appended since (:func:`_fold_changes`)
    and, when they are few (:data:`FOLD_MERGE_SHARE`), MERGEd into the table; a table never folded, or one with many
    changes, is rewritten resolved, a range of keys at a time (:func:`_folded_rows`). Either costs the table, not a
    batch: it runs beside the stream, not in it."""
    entity, current = VERSIONED[name]
    if REMOVED not in table.schema().to_arrow().names:
        # The old layout's rows are final already; only the column is missing.
        if not dry_run:
            migrate_layout(table)
        return 0
    table.update_incremental()
    start = "since_offset" if current else f"{entity.interval[0]}_offset"
    # The table's own columns, whatever they are: a fold keeps every column it read.
    schema = pa.schema([pa.field(f.name, _plain(f.type), f.nullable) for f in pa.schema(table.schema().to_arrow())])
    marks = fold_marks(table)
    # Every row of the version read is folded once this commits: each cluster up to its greatest start.
    reached = {str(r["cluster_id"]): int(r["m"]) for r in pa.table(_engine().register("stored", table).execute(
        f"SELECT cluster_id, MAX({start}) AS m FROM stored GROUP BY cluster_id")).to_pylist() if r["m"] is not None}
    commit = CommitProperties(app_transactions=[Transaction(FOLD_APP + c, m) for c, m in sorted(reached.items())
                                                if marks.get(c) != m])
    if dry_run or marks:
        # Without marks (the first fold) every row is looked at, by the rewrite itself.
        changes = _fold_changes(table, entity, current, marks)
        if dry_run:
            return int(changes.num_rows)
        if changes.num_rows == 0:
            if commit.app_transactions:  # nothing to fold, but the marks move: an empty commit carries them
                write_deltalake(table, schema.empty_table(), mode="append", commit_properties=commit)
            return 0
        if changes.num_rows <= FOLD_MERGE_SHARE * table.count():
            _merge_changes(table, entity, current, changes, commit)
            return int(changes.num_rows)
    if not reached:
        return 0
    counted: list[int] = []
    replaced = " OR ".join(f"(cluster_id = {_lit(c)} AND {start} <= {m})" for c, m in sorted(reached.items()))
    # The resolved ranges go to local Parquet files first, then stream into the commit: delta-rs cannot run a query
    # (the next range's read) from within a write's stream, and holding every range would hold the table.
    with tempfile.TemporaryDirectory(prefix="kraft-jbod-fold-") as spill:
        files: list[Path] = []
        for piece in _folded_rows(table, entity, current, counted):
            files.append(Path(spill) / f"{len(files)}.parquet")
            pq.write_table(piece.select(schema.names).cast(schema), files[-1])
            del piece
        rows = pa.RecordBatchReader.from_batches(schema, (
            batch for file in files for batch in pq.ParquetFile(file).iter_batches()))
        write_deltalake(table, rows, mode="overwrite", predicate=replaced, commit_properties=commit)
    return sum(counted)


def _merge_changes(table: DeltaTable, entity: Entity, current: bool, changes: pa.Table,
                   commit: CommitProperties) -> None:
    """MERGE a fold's ``changes`` (:func:`_fold_changes`) into ``table``: delete the current rows named, or end the
    history's open rows named (delete the :data:`REMOVED` ones), matched on key and start."""
    lo, hi = entity.interval
    start = "since_offset" if current else f"{lo}_offset"
    on = f"{_same_key(entity, 't', 's')} AND t.{start} = s.{start}"
    merge = table.merge(changes, on if current else f"{on} AND t.{hi}_offset IS NULL", source_alias="s",
                        target_alias="t", streamed_exec=False, commit_properties=commit)
    if current:
        merge = merge.when_matched_delete()
    else:
        merge = (merge.when_matched_delete(predicate=f"s.{REMOVED} IS TRUE")
                 .when_matched_update({f"{hi}_offset": "s._next_offset", f"{hi}_time": "s._next_time"}))
    merge.execute()


def _fold_changes(table: DeltaTable, entity: Entity, current: bool, marks: Mapping[str, int]) -> pa.Table:
    """The stored rows a fold changes or drops, by key and start: the current rows to drop (a later row superseded
    them, or a :data:`REMOVED` row); the history's open rows a later row ends, with that row's start as
    ``_next_offset``/``_next_time``, and its :data:`REMOVED` rows. With ``marks``, only the rows of the keys with a
    row appended since the last fold are read (:func:`_changed_keys`, :func:`_latest_rows`' keys) — the only keys a
    fold can change; without, every row. A range of keys at a time (:func:`_fold_ranges`); only the key, start, end
    and :data:`REMOVED` columns are read."""
    names = list(entity.key_names)
    if current:
        columns = [*names, "since_offset", REMOVED]
        keys = f"{_latest_rows(entity, 'stored', marks)}" if marks else None
    else:
        lo, hi = entity.interval
        columns = [*names, f"{lo}_offset", f"{lo}_time", f"{hi}_offset", REMOVED]
        keys = _changed_keys(entity, "stored", marks) if marks else None
    select = ", ".join(f"s.{_quote(c)}" for c in columns)
    # The few changed keys first: DataFusion builds its hash table on the join's left side.
    rows = "stored s" if keys is None else f"{keys} g JOIN stored s ON {_same_key(entity, 'g', 's')}"
    pieces = [_piece_changes(entity, current, _run(table, "stored",
                                                   f"SELECT {select} FROM {rows} WHERE TRUE{among('s.')}"))
              for among in _fold_ranges(table, entity)]
    return pieces[0] if len(pieces) == 1 else pa.concat_tables(pieces)


def _piece_changes(entity: Entity, current: bool, read: pa.Table) -> pa.Table:
    """:func:`_fold_changes` of stored rows holding every row of each of their keys."""
    names = list(entity.key_names)
    if current:
        dropped = np.ones(read.num_rows, dtype=bool)
        dropped[_latest_live(read, names).to_numpy()] = False
        return read.select([*names, "since_offset"]).filter(pa.array(dropped))
    lo = entity.interval[0]
    start, start_time = f"{lo}_offset", f"{lo}_time"
    out = pa.schema([*(read.schema.field(c) for c in [*names, start, REMOVED]), pa.field("_next_offset", pa.int64()),
                     read.schema.field(start_time).with_name("_next_time")])
    if read.num_rows == 0:
        return out.empty_table()
    rows, breaks = _key_breaks(read, names, start)
    following = {"_next_offset": _following(rows.column(start), breaks),
                 "_next_time": _following(rows.column(start_time), breaks)}
    changed = _changed_by_fold(rows, following["_next_offset"], entity)
    return pa.table({f.name: (following[f.name] if f.name in following else rows.column(f.name)).filter(changed)
                     for f in out}, schema=out)


def _latest_live(read: pa.Table, names: Sequence[str]) -> pa.Array:
    """The positions in a current table's stored rows (every row of each of their keys) of the rows a fold keeps:
    each key's row with the greatest ``since_offset``, unless it is a :data:`REMOVED` row; in key order."""
    if read.num_rows == 0:
        return pa.array([], pa.int64())
    last = _last_rows(read, names, "since_offset")
    return last.filter(pc.invert(pc.fill_null(read.column(REMOVED).take(last), False)))


def _changed_by_fold(rows: pa.Table, following: pa.Array, entity: Entity) -> pa.Array | pa.ChunkedArray:
    """Which of a history's stored rows, sorted by key then start (``following``: each one's next row's start
    within its key, :func:`_following`), a fold changes: the :data:`REMOVED` rows (dropped) and the open rows a later
    row ends."""
    end = f"{entity.interval[1]}_offset"
    return pc.or_(pc.fill_null(rows.column(REMOVED), False),
                  pc.and_(pc.is_null(rows.column(end)), pc.is_valid(following)))


def _fold_ranges(table: DeltaTable, entity: Entity) -> list[Callable[[str], str]]:
    """SQL conditions (``" AND …"`` on a table alias with its dot, or nothing) cutting a fold's read of a large
    table into ranges of its first key column after the cluster (:func:`_key_ranges`: every row of a key in one
    range). After a fold too: the keys changed since are usually few, but a table left unfolded for weeks may have
    most of its keys changed, and their rows are read to be counted."""
    return _key_ranges(table, entity.key_names[1], "TRUE")


def _folded_rows(table: DeltaTable, entity: Entity, current: bool, counted: list[int]) -> Iterator[pa.Table]:
    """Every stored row of ``table`` resolved (:func:`_resolve_piece`), a range of keys at a time
    (:func:`_fold_ranges`), every stored column; each range's count of rows folded appended to ``counted``. Reading
    the table a range at a time holds a range's rows, not the table's: DataFusion's ``LEAD`` window over the 21 M
    open rows of the 2 M-partition cluster's replica history took 600 s and 9.9 GB, and a MERGE of the ends it found
    38-62 s and 5-7 GB more (docs/performance.md, "The first fold at 2 M partitions")."""
    for among in _fold_ranges(table, entity):
        read = _run(table, "stored", f"SELECT * FROM stored s WHERE TRUE{among('s.')}")
        if read.num_rows == 0:
            continue
        rows, folded = _resolve_piece(entity, current, read)
        del read
        counted.append(folded)
        yield rows
        del rows  # not held while the next range is read


def _resolve_piece(entity: Entity, current: bool, read: pa.Table) -> tuple[pa.Table, int]:
    """Stored rows of a current or history table (every row of each key they hold, any clusters; at least the key,
    the start and :data:`REMOVED` columns, and for a history table its end) as :func:`resolved_sql` resolves them,
    with :data:`REMOVED` null — and how many stored rows that changed or dropped.

    Current table: each key's row with the greatest ``since_offset``, unless it is a :data:`REMOVED` row; every
    other row is dropped. History table: sorted by key, then start, each open row's end the start of its key's next
    row (:func:`_derived_ends`); the :data:`REMOVED` rows dropped. Counted: the rows dropped, and the open rows given
    an end."""
    names = list(entity.key_names)
    if read.num_rows == 0:
        return read, 0
    if current:
        kept = _latest_live(read, names)
        rows = read.take(kept)
        return rows.set_column(rows.schema.get_field_index(REMOVED), REMOVED,
                               pa.nulls(rows.num_rows, pa.bool_())), read.num_rows - len(kept)
    lo = f"{entity.interval[0]}_offset"
    rows, breaks = _key_breaks(read, names, lo)
    folded = pc.sum(_changed_by_fold(rows, _following(rows.column(lo), breaks), entity)).as_py() or 0
    derived = _derived_ends(rows, breaks, entity)
    live = pc.invert(pc.fill_null(rows.column(REMOVED), False))
    derived = derived.set_column(derived.schema.get_field_index(REMOVED), REMOVED, pa.nulls(rows.num_rows, pa.bool_()))
    return derived.filter(live), int(folded)


def _derived_ends(rows: pa.Table, breaks: pa.Array | pa.ChunkedArray, entity: Entity) -> pa.Table:
    """History rows sorted by key, then start (``breaks``: :func:`_key_order`'s), with each open row's end (offset,
    and time where ``rows`` has the end's time) the start of its key's next stored row — a later change, or a
    :data:`REMOVED` row —; a stored end stays as stored."""
    lo, hi = (f"{c}_offset" for c in entity.interval)
    lo_time, hi_time = (f"{c}_time" for c in entity.interval)
    stored_open = pc.is_null(rows.column(hi))
    out = rows.set_column(rows.schema.get_field_index(hi), hi,
                          pc.coalesce(rows.column(hi), _following(rows.column(lo), breaks)))
    if hi_time in rows.schema.names:
        out = out.set_column(out.schema.get_field_index(hi_time), hi_time,
                             pc.if_else(stored_open, _following(rows.column(lo_time), breaks), rows.column(hi_time)))
    return out


def _following(values: pa.Array | pa.ChunkedArray, breaks: pa.Array | pa.ChunkedArray) -> pa.Array:
    """For rows sorted by key, each row's next row's value of ``values`` within its key, null for a key's last row
    (``breaks``: :func:`_key_order`'s, whether the next row has another key)."""
    nothing = pa.scalar(None, values.type)
    return pa.concat_arrays([*_chunks(pc.if_else(breaks, nothing, values.slice(1))), pa.array([None], values.type)])


def _chunks(values: pa.Array | pa.ChunkedArray) -> list[pa.Array]:
    """The arrays of a column, whichever of the two Arrow hands out (``pa.chunked_array`` given a chunked array
    iterates it value by value: 7 s for 15 M offsets)."""
    return values.chunks if isinstance(values, pa.ChunkedArray) else [values]


# ---------------------------------------------------------------------------------------------------------------
# Readers


def _plain(t: pa.DataType) -> pa.DataType:
    if pa.types.is_string_view(t) or pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_binary_view(t) or pa.types.is_large_binary(t):
        return pa.binary()
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t) or pa.types.is_large_list_view(t):
        return pa.list_(_plain(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _plain(f.type), f.nullable) for f in t])
    return t


def plain_types(table: pa.Table) -> pa.Table:
    """``table`` with the tables' own Arrow types: delta-rs' SQL engine (DataFusion) scans every string column as
    ``string_view`` whatever the files hold, and pyarrow has no compute kernel comparing ``string_view`` with a
    plain string (``pc.equal``, ``Table.filter``, ``is_in``), cannot join or sort on it, and cannot concatenate it
    with a table of the declared schema — so every reader here casts back to ``string`` (lists and structs of it
    too)."""
    schema = pa.schema([pa.field(f.name, _plain(f.type), f.nullable) for f in table.schema])
    return table if schema == table.schema else table.cast(schema)


#: DataFusion's settings for every query here. Join reordering off: each join here is written with its small side
#: (the keys asked for, the newest start of each key) on the left, the side DataFusion builds its hash table of. With
#: reordering on, a filter on the right side (``cluster_id = …``) made the planner guess that side smaller and build
#: on it: every stored row with every column read — 4.2 GB for the 2 M partitions' latest registrations, 0.7 GB
#: the way it is written (docs/performance.md, "The tables' reads a batch at a time").
#: Bloom filters not looked for: no writer of these tables writes them (delta-rs' nor the job's Delta writes), yet
#: DataFusion searches each file for them and evaluates the predicate against what it finds — 63 of a fleet cluster's
#: 143 ms for its leaderless stretches' records, a predicate of a few hundred offset ranges (docs/performance.md,
#: "A fleet cluster's queries").
_ENGINE_SETTINGS: Final = {"datafusion.optimizer.join_reordering": "false",
                           "datafusion.execution.parquet.bloom_filter_on_read": "false"}

#: How many partitions DataFusion plans each scan of this process in (:func:`scan_partitions`); None: its own
#: default, one per core.
_scan_partitions: int | None = None


def set_scan_partitions(partitions: int | None) -> None:
    """Plan each query of this process in ``partitions`` partitions (None: one per core, DataFusion's default).

    One, for a process that runs beside others of the same command, one per core — a fleet report's workers, the
    check's two processes: each keeps its core busy by itself, so a scan spread over every core only adds the
    threads' hand-offs and the partitions' merges to the machine's CPU (a fleet cluster's queries 1.09 → 1.00 s of
    CPU; docs/performance.md, "Scans of a process that shares the cores"). A process alone on the machine keeps the
    default: its scans are the one thing then using the second core."""
    global _scan_partitions  # noqa: PLW0603 - a setting of the process, as DataFusion's own would be
    if partitions is not None and partitions < 1:
        raise ValueError(f"a scan is planned in at least one partition, not {partitions}")
    _scan_partitions = partitions


@contextmanager
def scan_partitions(partitions: int | None) -> Iterator[None]:
    """:func:`set_scan_partitions` while the block runs, the setting before it restored after."""
    before = _scan_partitions
    set_scan_partitions(partitions)
    try:
        yield
    finally:
        set_scan_partitions(before)


def engine_settings() -> dict[str, str]:
    """The settings each query's DataFusion session gets: :data:`_ENGINE_SETTINGS`, and the process's
    :func:`scan_partitions`."""
    if _scan_partitions is None:
        return dict(_ENGINE_SETTINGS)
    return {**_ENGINE_SETTINGS, "datafusion.execution.target_partitions": str(_scan_partitions)}


def _engine() -> QueryBuilder:
    """A DataFusion session (delta-rs' :class:`~deltalake.QueryBuilder`) with :func:`engine_settings`."""
    return QueryBuilder(engine_settings())


def _run(table: DeltaTable, name: str, sql: str, encoded: Collection[str] = (), *, views: bool = False) -> pa.Table:
    """``sql`` over ``table`` registered as ``name``, its result with :func:`plain_types`, cast a batch at a time as
    DataFusion streams it: cast whole, the ``string_view`` result and its copy were both held — the 2 M partitions'
    latest registrations peaked at 4.4 GB for a 0.3 GB answer (docs/performance.md, "The tables' reads a batch at a
    time"). The text columns ``encoded`` come dictionary-encoded, each batch as it arrives, one dictionary over the
    batches: a history naming a few thousand topics and disks in 21 M versions never holds their texts. ``views``:
    the batches as DataFusion streams them, not cast (:func:`query`)."""
    reader = pa.RecordBatchReader.from_stream(_engine().register(name, table).execute(sql))
    if views:
        return pa.Table.from_batches(list(reader), reader.schema)
    schema = pa.schema([pa.field(f.name, pa.dictionary(pa.int32(), pa.string()) if f.name in encoded
                                 else _plain(f.type), f.nullable) for f in reader.schema])
    same = schema == reader.schema
    read = pa.Table.from_batches([b if same else _owned(b, schema) for b in reader], schema)
    return read.unify_dictionaries() if encoded else read


def _owned(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` (from DataFusion) cast to ``schema``, every buffer a copy in Arrow's own memory. A batch imported
    from DataFusion is released whole, and only once the last of its columns is: a column the cast leaves as it is
    (the integers), or a list whose offsets the cast reuses, kept every buffer of the batch alive — the string views
    the cast had copied included: 2 GB beside the 1.65 GB of the 2 M partitions' versions (docs/performance.md,
    "The report's memory"). A column ``schema`` gives a dictionary type is cast to its text, then encoded."""
    return pa.RecordBatch.from_arrays(
        [pc.dictionary_encode(column.cast(field.type.value_type)) if pa.types.is_dictionary(field.type)
         else pa.concat_arrays([column.cast(field.type)]) for column, field in zip(batch.columns, schema, strict=True)],
        schema=schema)


def release_memory() -> None:
    """Hand the memory a large read or frame freed back to the system. Arrow's allocator (mimalloc) keeps what a
    read's intermediate tables freed (the scan, the sort's copy, the filter's) for reuse: at 200 k partitions
    300-550 MB of resident memory after each of the report's history tables, which then stayed beside its tracker
    and image. The C heap (numpy's arrays, Python's larger objects) is trimmed too where the C library can (glibc's
    ``malloc_trim``): with the report's partition versions freed, glibc kept about 100 MB of them at 200 k
    partitions, resident through the image's read; the check's first process stayed at 3.7 GB between its 2 M
    frames holding none of them."""
    pa.default_memory_pool().release_unused()
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


def _malloc_trim() -> Any:
    """glibc's ``malloc_trim``, None where the C library has none (macOS, musl)."""
    try:
        return ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):
        return None


_MALLOC_TRIM = _malloc_trim()


#: The tables this process reads at one version (:func:`one_version`, :func:`hold_versions`), by absolute path: each
#: one's Delta log as the first read opened it. None: every read opens its table afresh, at its latest version.
_held: dict[str, DeltaTable] | None = None


@contextmanager
def one_version() -> Iterator[None]:
    """Every read inside the block sees each table at one version: the one the block's first read of it opened.

    A command's reads then answer from one version of each table, whatever a job appends meanwhile, and each
    table's Delta log is read once: a report's two dozen queries opened the ``records`` table twelve times, 13–17 ms
    each on the tables of a fleet as ``jbod run`` wrote them (more the more commits since the last checkpoint).
    Inside an outer block (or after :func:`hold_versions`), the outer one's versions."""
    global _held  # noqa: PLW0603 - the process's reads, as scan_partitions' setting
    if _held is not None:
        yield
        return
    _held = {}
    try:
        yield
    finally:
        _held = None


def hold_versions() -> None:
    """:func:`one_version` for every later read of this process, for a process that reads one set of tables and
    ends: a fleet report's worker, whose clusters' reports then share each table's log, read once, and see the
    tables at the same versions."""
    global _held  # noqa: PLW0603 - the process's reads, as scan_partitions' setting
    if _held is None:
        _held = {}


def _delta(tables_dir: str | Path, table: str) -> DeltaTable:
    path = Path(tables_dir) / table
    held, key = _held, os.path.abspath(path)
    if held is not None and key in held:
        return held[key]
    if not DeltaTable.is_deltatable(str(path)):
        raise InputError(f"{path} is not a Delta table (run `jbod run` first, or check --tables)")
    opened = DeltaTable(str(path))
    if held is not None:
        held[key] = opened
    return opened


def _forget(path: Path) -> None:
    """A table this process has just written: its next read opens its new version, held versions or not."""
    if _held is not None:
        _held.pop(os.path.abspath(path), None)


def _same_key(entity: Entity, left: str, right: str) -> str:
    return " AND ".join(f"{left}.{_quote(k)} = {right}.{_quote(k)}" for k in entity.key_names)


#: The app id prefix of a fold's marks: ``(FOLD_APP + cluster id, offset)`` in a fold's commit says every row of the
#: cluster up to that offset was folded (:func:`fold_versions`). App transactions are table state, read in O(1).
FOLD_APP = "kraft-jbod:folded:"


def fold_marks(table: DeltaTable) -> dict[str, int]:
    """The offset up to which each cluster's rows of a current or history table were folded (clusters never folded
    are absent)."""
    found = pa.table(_engine().register("stored", table).execute("SELECT DISTINCT cluster_id FROM stored"))
    marks = {str(c): table.transaction_version(FOLD_APP + str(c)) for c in found.column("cluster_id").to_pylist()}
    return {c: m for c, m in marks.items() if m is not None}


def _unfolded(start: str, marks: Mapping[str, int] | None) -> str | None:
    """SQL: the row was appended after its cluster's last fold; None without marks (every row may be)."""
    if not marks:
        return None
    cases = " ".join(f"WHEN {_lit(c)} THEN {int(m)}" for c, m in sorted(marks.items()))
    return f"{start} > CASE cluster_id {cases} ELSE -1 END"


def _changed_keys(entity: Entity, source: str, marks: Mapping[str, int] | None) -> str:
    """The history's keys whose end may need deriving: with fold marks, the keys with an open row appended since
    the fold (a key has one open row after a fold); else the keys with more than one open row."""
    keys = ", ".join(_quote(k) for k in entity.key_names)
    lo, hi = entity.interval
    unfolded = _unfolded(f"{lo}_offset", marks)
    # ``_changed``: a column that is not a join key, to test after an outer join — DataFusion (delta-rs 1.6) carries
    # a filter "key IS NULL" on the outer side over to the other side through the join's equality (no rows at all).
    if unfolded is None:
        return (f"(SELECT {keys}, TRUE AS _changed FROM {source} WHERE {hi}_offset IS NULL GROUP BY {keys} "
                "HAVING COUNT(*) > 1)")
    return f"(SELECT DISTINCT {keys}, TRUE AS _changed FROM {source} WHERE {hi}_offset IS NULL AND {unfolded})"


def _open_rows(entity: Entity, source: str, marks: Mapping[str, int] | None, *, changed: bool) -> str:
    """The stored history rows whose end is null (the latest rows of their key, :func:`plan_batch`), each with the
    start of the key's next one (``_next_offset``, ``_next_time``); ``changed``: only the keys
    :func:`_changed_keys` gives — the only ones whose ends need deriving."""
    lo, hi = entity.interval
    keys = ", ".join(f"s.{_quote(k)}" for k in entity.key_names)
    window = f"OVER (PARTITION BY {keys} ORDER BY s.{lo}_offset)"
    rows = f"{source} s"
    if changed:
        # The few changed keys first: DataFusion builds its hash table on the join's left side.
        rows = f"{_changed_keys(entity, source, marks)} g JOIN {source} s ON {_same_key(entity, 'g', 's')}"
    return (f"SELECT s.*, LEAD(s.{lo}_offset) {window} AS _next_offset, LEAD(s.{lo}_time) {window} AS _next_time "
            f"FROM {rows} WHERE s.{hi}_offset IS NULL")


def _latest_rows(entity: Entity, source: str, marks: Mapping[str, int] | None) -> str:
    """The current table's keys that may have superseded rows, with the ``since_offset`` of their latest row: with
    fold marks, the keys with a row appended since the fold; else the keys with more than one row."""
    keys = ", ".join(_quote(k) for k in entity.key_names)
    unfolded = _unfolded("since_offset", marks)
    if unfolded is None:
        return f"(SELECT {keys}, MAX(since_offset) AS _latest FROM {source} GROUP BY {keys} HAVING COUNT(*) > 1)"
    return f"(SELECT {keys}, MAX(since_offset) AS _latest FROM {source} WHERE {unfolded} GROUP BY {keys})"


def resolved_sql(table: str, source: str = "stored", marks: Mapping[str, int] | None = None) -> str:
    """A SQL query giving a current or history table's rows as its readers see them (docs/tables.md), from its
    stored rows registered as ``source``. The writer only appends (:func:`plan_batch`), so the stored table may hold
    more than that until ``jbod maintain`` folds it (:func:`fold_versions`):

    * current table: a key's rows superseded by one with a later ``since_offset`` — the latest is the key's row,
      none when it is a :data:`REMOVED` row;
    * history table: versions whose end (``valid_to``/``end``) is null though a later row of the key exists — the
      end is that row's start (Kafka's next change of the key); :data:`REMOVED` rows only end the version before
      them and are not versions themselves.

    Only the keys changed since the last fold need resolving, so the query joins the table with those keys instead
    of sorting it whole by key. ``marks`` (:func:`fold_marks`) say which rows were folded, so that finding those
    keys reads the rows appended since; without them it is a hash aggregate over every (open) row."""
    entity, current = VERSIONED[table]
    schema = entity.current_schema() if current else entity.history_schema()
    columns = ", ".join(f"s.{_quote(f.name)}" for f in schema)
    if current:
        # The few keys to resolve on the left: DataFusion builds its hash table on the join's left side.
        return (f"SELECT {columns} FROM {_latest_rows(entity, source, marks)} g RIGHT JOIN {source} s ON "
                f"{_same_key(entity, 'g', 's')} WHERE (g._latest IS NULL OR s.since_offset = g._latest) AND "
                f"s.{REMOVED} IS NOT TRUE")
    hi = entity.interval[1]
    ends = {f"{hi}_offset": "s._next_offset", f"{hi}_time": "s._next_time"}
    derived = ", ".join(f"{ends[f.name]} AS {_quote(f.name)}" if f.name in ends else f"s.{_quote(f.name)}"
                        for f in schema)
    # Closed versions as stored; open ones of unchanged keys as stored (end null); the changed keys' open rows with
    # the ends derived. The changed keys are on the joins' left, where DataFusion builds its hash table.
    return (f"SELECT {columns} FROM {source} s WHERE s.{hi}_offset IS NOT NULL AND s.{REMOVED} IS NOT TRUE "
            f"UNION ALL SELECT {columns} FROM {_changed_keys(entity, source, marks)} g RIGHT JOIN {source} s ON "
            f"{_same_key(entity, 'g', 's')} WHERE s.{hi}_offset IS NULL AND g._changed IS NULL AND "
            f"s.{REMOVED} IS NOT TRUE "
            f"UNION ALL SELECT {derived} FROM ({_open_rows(entity, source, marks, changed=True)}) s "
            f"WHERE s.{REMOVED} IS NOT TRUE")


def _stored(tables_dir: str | Path, table: str) -> DeltaTable:
    """A table's Delta log; for a current or history table, one in the append-only layout (else a clear error)."""
    delta = _delta(tables_dir, table)
    if table in VERSIONED and REMOVED not in delta.schema().to_arrow().names:
        raise InputError(f"{Path(tables_dir) / table} was written by an older kraft-jbod (MERGE writes, no "
                         f"{REMOVED!r} column): run `jbod maintain --tables {tables_dir}` (or the next `jbod run`) "
                         "to migrate it — its rows stay as they are")
    return delta


def query(tables_dir: str | Path, table: str, sql: str, *, views: bool = False) -> pa.Table:
    """Run ``sql`` on one table registered as ``t`` (through its Delta log), with plain Arrow types. A current or
    history table is ``t`` as its readers see it (:func:`resolved_sql`), whatever ``jbod maintain`` has folded.

    ``views``: its texts as DataFusion reads them (``string_view``, see :func:`plain_types`), for a caller that makes
    them Python objects at once (``to_pandas``) and lets the result go: the cast is a copy of every text for nothing
    there — a third of the CPU of reading the 200 k cluster's records with their JSON."""
    delta = _stored(tables_dir, table)
    if table not in VERSIONED:
        return _run(delta, "t", sql, views=views)
    view = resolved_sql(table, marks=fold_marks(delta))
    return _run(delta, "stored", f"WITH t AS ({view}) {sql}", views=views)


def read_table(tables_dir: str | Path, table: str, where: str | None = None,
               columns: Sequence[str] | None = None) -> pa.Table:
    """A table's live rows, read through its Delta log (``where``: a SQL condition on its columns; ``columns``:
    the columns to read, default all), with the table's own Arrow types (:func:`plain_types`)."""
    select = "*" if columns is None else ", ".join(_quote(c) for c in columns)
    return query(tables_dir, table, f"SELECT {select} FROM t{'' if where is None else ' WHERE ' + where}")


def _time_literal(micros: int) -> str:
    """A SQL literal of the tables' time type (µs, UTC) for delta-rs predicates and MERGE updates."""
    return f"arrow_cast({int(micros)}, 'Timestamp(Microsecond, Some(\"UTC\"))')"


def _lit(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def clusters(tables_dir: str | Path) -> list[str]:
    """The cluster ids the tables hold."""
    out = query(tables_dir, "records", "SELECT DISTINCT cluster_id FROM t ORDER BY cluster_id")
    return [str(c) for c in out.column("cluster_id").to_pylist()]


def resolve_cluster(tables_dir: str | Path, cluster: str | None) -> str:
    """``cluster`` checked against the tables, or the only cluster they hold when None. A named cluster is looked for,
    not listed with every other: a fleet's cluster report asks this of several readers, and listing the clusters of
    50 in shared files was a scan of every record's cluster id each time (0.7 s of a 20 k cluster's 6.7 s)."""
    if cluster is not None and query(tables_dir, "records", f"SELECT cluster_id FROM t WHERE cluster_id = "
                                                           f"{_lit(cluster)} LIMIT 1").num_rows:
        return cluster
    known = clusters(tables_dir)
    if not known:
        raise InputError(f"{tables_dir} holds no cluster yet: its records table is empty (run `jbod run` first, "
                         "or check --tables)")
    if cluster is not None:
        if cluster not in known:
            raise InputError(f"cluster {cluster!r} is not in {tables_dir} (clusters: {', '.join(known)})")
        return cluster
    if len(known) != 1:
        raise InputError(f"{tables_dir} holds {len(known)} clusters ({', '.join(known)}): name one with --cluster")
    return known[0]


def _live_rows(entity: Entity, cluster: str, as_of_offset: int | None) -> tuple[str, str]:
    """The table holding the ``entity``'s live rows of ``cluster`` as of ``as_of_offset`` (None: the latest), and the
    SQL condition that selects them (of its resolved rows, :func:`query`)."""
    where = f"cluster_id = {_lit(cluster)}"
    if as_of_offset is None and entity.current is not None:
        return entity.current, where
    lo, hi = entity.interval
    if as_of_offset is None:
        where += f" AND {hi}_offset IS NULL"
    else:
        n = int(as_of_offset)
        where += f" AND {lo}_offset <= {n} AND ({hi}_offset IS NULL OR {hi}_offset > {n})"
    return entity.history, where


def _last_rows(rows: pa.Table, keys: Sequence[str], start: str) -> pa.Array:
    """The positions in ``rows`` of each key's row with the greatest ``start``, ordered by key (:func:`_key_order`:
    the sorted rows whose key differs from the next row's, and the last). Vectorised (pyarrow, numpy), where the SQL
    of :func:`resolved_sql` needs a window or a join over every stored row; positions, so that the caller takes the
    rows it keeps once."""
    if rows.num_rows == 0:
        return pa.array([], pa.int64())
    order, breaks = _key_order(rows, keys, start)
    return order.filter(pa.concat_arrays([*_chunks(breaks), pa.array([True])]))


def _key_breaks(rows: pa.Table, keys: Sequence[str], start: str) -> tuple[pa.Table, pa.Array | pa.ChunkedArray]:
    """``rows`` (not empty) sorted by ``keys`` then ``start``, and for each row but the last whether the next row
    has another key (:func:`_key_order`)."""
    order, breaks = _key_order(rows, keys, start)
    return rows.take(order), breaks


def _key_order(rows: pa.Table, keys: Sequence[str], start: str) -> tuple[pa.Array, pa.Array | pa.ChunkedArray]:
    """The order that sorts ``rows`` (not empty) by ``keys`` then ``start``, and for each row of it but the last
    whether the next row has another key: one sort, and a shifted compare of the packed key (of each key column's
    ranks where the keys do not pack)."""
    n = rows.num_rows
    # A text key (a topic id) is sorted by its rank among its distinct values, the same order: comparing strings row
    # against row dominated the sort of millions of replica versions naming a few hundred topics.
    ranked = {k: _rank(rows.column(k)) for k in keys}
    packed_order = _packed_order(ranked, rows.column(start))
    if packed_order is not None:
        order, packed = packed_order
        # The packed key is one-to-one with the keys (each column offset and scaled by the spans after it): the
        # key changes where it does — no compare of millions of topic ids, nor a take of the key columns.
        return order, pa.array(packed[1:] != packed[:-1])
    table = pa.table({**ranked, start: rows.column(start)})
    order = pc.sort_indices(table, sort_keys=[*((k, "ascending") for k in keys), (start, "ascending")])
    # A rank is one-to-one with its text, so the ranks change where the keys do.
    ordered = table.select(list(ranked)).take(order)
    breaks: pa.Array | pa.ChunkedArray | None = None
    for key in ranked:
        column = ordered.column(key)
        differs = pc.not_equal(column.slice(0, n - 1), column.slice(1))
        breaks = differs if breaks is None else pc.or_(breaks, differs)
    assert breaks is not None
    return order, breaks


def key_packing(columns: Sequence[Sequence[Any]]) -> tuple[list[int], list[int], int] | None:
    """How :func:`pack_keys` packs rows keyed by integer ``columns`` (each key column given as the int64 numpy arrays
    of every table whose rows are packed alike): each column's least value and span, and the product of the spans —
    None where that does not fit 62 bits."""
    lows, spans, width = [], [], 1
    for pieces in columns:
        present = [values for values in pieces if len(values)]
        low, high = ((min(int(v.min()) for v in present), max(int(v.max()) for v in present)) if present
                     else (0, 0))
        lows.append(low)
        spans.append(high - low + 1)
        width *= spans[-1]
        if width >= 1 << 62:
            return None
    return lows, spans, width


def pack_keys(parts: Sequence[Any], lows: Sequence[int], spans: Sequence[int]) -> Any:
    """Rows keyed by the int64 numpy arrays ``parts`` (one per key column) as one int64 each: each column less its
    least value, times the spans of those after it (:func:`key_packing`), so that two rows packed alike have one key
    exactly when they have one packed value, and the packed values sort as the keys do. Done in place, in the one
    array made for it (Horner's rule over the columns; :func:`_packed_order` says why)."""
    packed = np.subtract(parts[0], lows[0])
    for values, low, span in zip(parts[1:], lows[1:], spans[1:], strict=True):
        packed *= span
        packed += values
        packed -= low
    return packed


def _packed_order(keys: Mapping[str, pa.Array | pa.ChunkedArray], start: pa.Array | pa.ChunkedArray,
                  ) -> tuple[pa.Array, Any] | None:
    """The order that sorts rows by ``keys`` (integer columns: ranks or ids) then ``start``, stably, from the keys
    packed into one 64-bit integer (each column offset by its least value, times the span of those after it) and one
    stable numpy sort of the key with the start packed in below it — two, start then key, where the start does not
    fit: Arrow's sort over several columns compares row by row and took seconds for the millions of replica versions
    at 200 k partitions; with it, the packed keys in that order (a numpy array). None where a key or start holds a
    null or the keys' spans do not fit 63 bits (the caller sorts with Arrow).

    The packing is done in place, in one array (Horner's rule over the columns): numpy gets an array of the rows'
    size as pages mapped for it and unmapped when it is freed, and on this project's 2-core box writing 120 MB of
    new pages took 0.2-0.6 s where rewriting them took 0.02 s — the arithmetic made nine such arrays for the 15 M
    offline intervals of the 2 M-partition cluster (docs/performance.md, "Notebook 01 at 2 M partitions; the key
    sort in place")."""
    columns = [*keys.values(), start]
    if any(c.null_count for c in columns) or not all(pa.types.is_integer(c.type) for c in columns):
        return None

    def values_of(column: pa.Array | pa.ChunkedArray) -> Any:
        """The column as int64 numpy values (Arrow's buffer where the type is int64 already: read-only)."""
        cast = pc.cast(column, pa.int64())
        return (cast.combine_chunks() if isinstance(cast, pa.ChunkedArray) else cast).to_numpy()

    def bounds(values: Any) -> tuple[int, int]:
        return (int(values.min()), int(values.max())) if len(values) else (0, 0)

    parts = [values_of(c) for c in keys.values()]
    starts = values_of(start)
    if not parts:
        return pa.array(np.argsort(starts, kind="stable")), np.zeros(len(starts), dtype=np.int64)
    packing = key_packing([[values] for values in parts])
    if packing is None:
        return None
    lows, spans, width = packing
    packed = pack_keys(parts, lows, spans)
    low, high = bounds(starts)
    span = high - low + 1
    if width * span < 1 << 62:
        # The start packed in too: one stable sort of the key and start instead of two (ties, rows of one key and
        # start, keep their order either way); the key is that integer divided by the start's span.
        packed *= span
        packed += starts
        packed -= low
        order = np.argsort(packed, kind="stable")
        ordered = packed[order]
        del packed
        ordered //= span
        return pa.array(order), ordered
    by_start = np.argsort(starts, kind="stable")
    order = by_start[np.argsort(packed[by_start], kind="stable")]
    return pa.array(order), packed[order]


def _rank(column: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """A text column as each value's rank among its distinct values (ascending, as Arrow sorts text: bytewise; a
    null stays null), any other column as it is: sorting by the ranks orders the rows as sorting by the text does,
    and a stable sort leaves ties in the same order."""
    if pa.types.is_dictionary(column.type):
        # Ranked by its dictionary (one for every chunk: :func:`_run`'s), never decoded. Rows are only sorted when
        # there are some (:func:`_key_order`), so there is a first chunk.
        chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
        rank = pc.rank(chunks[0].dictionary, sort_keys="ascending", tiebreaker="first")
        return pa.chunked_array([rank.take(c.indices) for c in chunks], rank.type)
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        return column
    encoded = pc.dictionary_encode(column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column)
    # The dictionary's values are distinct: their ranks are 1..d in the sorted order.
    rank = pc.rank(encoded.dictionary, sort_keys="ascending", tiebreaker="first")
    return rank.take(encoded.indices)


def entity_state(tables_dir: str | Path, entity: Entity, cluster: str, as_of_offset: int | None,
                 columns: Sequence[str]) -> pa.Table:
    """The ``entity``'s live keys of ``cluster`` as of ``as_of_offset`` (None: the latest), with their key columns
    and ``columns`` of its value, ordered by key — the same rows :func:`resolved_sql`'s view gives (the current
    table, or the history's versions valid then), read from the stored rows directly, whatever ``jbod maintain``
    has folded.

    The rule: a key's version as of N is its stored row with the greatest start at or before N (a later start is a
    later change of the key; the history table's rows or, for the latest state, the current table's), unless that
    row is a :data:`REMOVED` row or a folded version whose stored end is at or before N (the fold dropped the
    removal row and stored the end it made). Only the rows of the cluster that start by N and only the columns
    asked for are read (predicates pushed down to the Delta scan).

    Each key's greatest start is found first over the key and start columns alone, and only the rows that have it
    are read whole (a semi join the scan streams through): a table that holds every version of millions of keys is
    never held whole. At 2 M partitions that read took 13.0 s and 5.5 GB whole, 1.9 s and 1.2 GB this way
    (docs/performance.md, "The latest row of each key without holding every row")."""
    names = [k for k, _ in entity.key]
    lo, hi = entity.interval
    latest = as_of_offset is None and entity.current is not None
    table, start = (entity.current, "since_offset") if latest else (entity.history, f"{lo}_offset")
    assert table is not None
    end = None if latest else f"{hi}_offset"
    stored = _stored(tables_dir, table)

    def where(row: str) -> str:
        """The stored rows of the cluster that start by ``as_of_offset`` (``row``: the table's alias, with its dot)."""
        bound = "" if as_of_offset is None else f" AND {row}{_quote(start)} <= {int(as_of_offset)}"
        return f"{row}cluster_id = {_lit(cluster)}{bound}"

    # Once each: a caller may ask for the start or end columns among the value's.
    wanted = list(dict.fromkeys([*names, *columns, start, REMOVED, *([end] if end else [])]))
    keys = ", ".join(_quote(k) for k in names)
    shown = [*names, *(c for c in columns if c not in names)]

    # As of an offset, a version a fold closed (its end stored) is the key's version then exactly when it started
    # by N and ends after N: no other row of the key need be looked at. A key's closed rows precede its open ones
    # (the tables' contract, docs/tables.md), so the newest start is looked for among the open rows alone — in a
    # table `jbod maintain` keeps folded, the few since the last fold and each key's current version, where it read
    # every version of every key (the 2 M replica history: 21 M rows).
    closed = f"{_quote(end)} > {int(as_of_offset)}" if end is not None and as_of_offset is not None else None

    def only_open(row: str) -> str:
        return f" AND {row}{_quote(end)} IS NULL" if closed and end else ""

    def piece(among: Callable[[str], str]) -> pa.Table:
        """The live keys whose first key column ``among`` selects (a SQL condition on the alias it is given)."""
        newest = (f"SELECT {keys}, max({_quote(start)}) AS newest_start FROM stored "
                  f"WHERE {where('')}{only_open('')}{among('')} GROUP BY {keys}")
        on = " AND ".join([*(f"s.{_quote(k)} = n.{_quote(k)}" for k in names), f"s.{_quote(start)} = n.newest_start"])
        selected = ", ".join("s." + _quote(c) for c in wanted)
        # The newest starts on the left: DataFusion builds its hash table of the join's left side and streams the
        # right one through it (the other way round it held every stored row, 4.4 GB at 2 M partitions).
        sql = (f"SELECT {selected} FROM ({newest}) n JOIN stored s ON {on} "
               f"WHERE {where('s.')}{only_open('s.')}{among('s.')}")
        if closed:
            sql += f" UNION ALL SELECT {selected} FROM stored s WHERE {where('s.')} AND s.{closed}{among('s.')}"
        read = _run(stored, "stored", sql)
        live = pc.invert(pc.fill_null(read.column(REMOVED), False))
        if end is not None:
            open_then = pc.is_null(read.column(end))
            if as_of_offset is not None:
                open_then = pc.or_kleene(open_then, pc.greater(read.column(end), int(as_of_offset)))
            live = pc.and_(live, open_then)
        # A key has one row now — its newest open one, or the closed one valid then — so this keeps it (two rows of
        # a key never share a start: each is the key's change at that offset). One take of the live ones, in key
        # order, with only the columns asked for: sorting the whole read, then filtering it, made two more copies.
        last = _last_rows(read, names, start)
        return read.select(shown).take(last.filter(live.take(last)))

    # A large table a range of its first key column at a time (topic ids, in the order the rows come out in), so
    # that DataFusion's aggregate and join hold a piece of the keys, not all of them.
    parts = [piece(among) for among in _key_ranges(stored, names[0], where(""))]
    return parts[0] if len(parts) == 1 else pa.concat_tables(parts)


#: A current or history table of more stored rows than this (every cluster's) is read :func:`_key_ranges` at a time:
#: DataFusion's aggregate and join over the 14 M stored replica rows of a 2 M-partition cluster held ≈ 1.8 GB at once
#: for a 0.5 GB answer (docs/performance.md, "The tables' reads a batch at a time").
PIECE_STORED_ROWS = 2_000_000


def _key_ranges(stored: DeltaTable, key: str, where: str) -> list[Callable[[str], str]]:
    """Conditions (on a table alias with its dot, e.g. ``"s."``) that cut the stored rows ``where`` selects into
    consecutive ranges of the text column ``key``, about :data:`PIECE_STORED_ROWS` of those rows each, in Arrow's
    (bytewise) order of ``key`` — the order :func:`_last_rows` puts its first key in, so the pieces' rows
    concatenated are in key order too. One range (no condition) for a smaller table, or a key that is
    not text, or a cluster whose own rows are few: a fleet's table holds every cluster's rows, and cutting one small
    cluster's read into ranges read the whole table once a range."""
    # The files' row counts from the Delta log (``count``: the writers store them).
    rows = stored.count()
    whole: list[Callable[[str], str]] = [lambda row: ""]
    if rows <= PIECE_STORED_ROWS or _plain(pa.schema(stored.schema().to_arrow()).field(key).type) != pa.string():
        return whole
    counted = _run(stored, "stored", f"SELECT {_quote(key)} AS v, COUNT(*) AS n FROM stored WHERE {where} "
                                     f"GROUP BY {_quote(key)}")
    rows = int(pc.sum(counted.column("n")).as_py() or 0)
    if rows <= PIECE_STORED_ROWS:
        return whole
    values = counted.column("v")
    values = values.take(pc.sort_indices(values)).drop_null().to_pylist()
    count = min(len(values), -(-rows // PIECE_STORED_ROWS))
    if count <= 1:
        return whole
    cuts = [values[i * len(values) // count] for i in range(1, count)]
    bounds: list[str | None] = [None, *cuts, None]
    column = _quote(key)

    def between(low: str | None, high: str | None) -> Callable[[str], str]:
        return lambda row: ("" if low is None else f" AND {row}{column} >= {_lit(low)}") + (
            "" if high is None else f" AND {row}{column} < {_lit(high)}")
    return [between(low, high) for low, high in itertools.pairwise(bounds)]


def entity_versions(tables_dir: str | Path, entity: Entity, cluster: str, as_of_offset: int | None,
                    columns: Sequence[str], where: str | None = None, *, keys_where: str | None = None,
                    with_keys: bool = True) -> pa.Table:
    """The ``entity``'s history versions of ``cluster`` that start by ``as_of_offset`` (None: all), with their key
    columns, ``columns`` and ``start``/``end`` (the interval's offsets; ``end`` null while current, and an end after
    ``as_of_offset`` is kept as stored) — the versions :func:`resolved_sql`'s view gives, read from the stored rows
    directly (:func:`entity_version_rows`), ordered by key, then start. Only the columns asked for are read.

    ``where`` and ``keys_where``: as :func:`entity_version_rows` takes them. ``with_keys=False`` leaves the key
    columns out of the result (they are still read: the versions are ordered by them): the offline intervals' spans
    are 12 M rows at 2 M partitions, and a topic id per row is most of their bytes."""
    read, rows, start, end = entity_version_rows(tables_dir, entity, cluster, as_of_offset, columns, where,
                                                 keys_where=keys_where)
    names = [k for k, _ in entity.key]
    shown = list(dict.fromkeys([*(names if with_keys else ()), *columns]))
    # Only the versions' rows are taken, once: the removed rows are dropped from the order, not from a sorted copy.
    return pa.table({**{c: read.column(c).take(rows) for c in shown}, "start": start, "end": end})


def entity_version_rows(tables_dir: str | Path, entity: Entity, cluster: str, as_of_offset: int | None,
                        columns: Sequence[str], where: str | None = None, *, keys_where: str | None = None,
                        ) -> tuple[pa.Table, pa.Array, pa.Array | pa.ChunkedArray, pa.Array | pa.ChunkedArray]:
    """The ``entity``'s stored history rows of ``cluster`` that start by ``as_of_offset`` (None: all) as read, in no
    order — the key columns, ``columns``, the interval's offsets and :data:`REMOVED` —, and which of them are its
    versions: their row numbers, ordered by key, then start, and each one's start and end (null while current; an
    end after ``as_of_offset`` kept as stored). A version is a stored row that is no :data:`REMOVED` row; its end
    is the row's own, else the start of the key's next stored row (a later change, or the removal). These are the
    versions :func:`resolved_sql`'s view gives, without its window functions. For a caller that gathers its columns
    itself (:func:`entity_versions` takes them; the report's partitions gather their lists of integers with numpy,
    where Arrow's take of millions of lists of ids cost seconds at 200 k partitions).

    ``where``: a further SQL condition on the stored rows — one that keeps every row of a key it keeps any of, or
    the ends would be lost. ``keys_where``: only the keys that have a row matching this condition (by then), with
    all their rows — found first with the condition pushed down, then joined: a few placeholder placements among
    millions of replica versions cost their own rows, not a sort of the table."""
    names = [k for k, _ in entity.key]
    lo, hi = (f"{c}_offset" for c in entity.interval)
    condition = f"cluster_id = {_lit(cluster)}"
    if as_of_offset is not None:
        condition += f" AND {lo} <= {int(as_of_offset)}"
    wanted = [*names, *(c for c in columns if c not in names), lo, hi, REMOVED]
    sql = (f"SELECT {', '.join('s.' + _quote(c) for c in wanted)} FROM stored s WHERE "
           f"{condition.replace('cluster_id', 's.cluster_id').replace(lo, 's.' + lo)}"
           f"{'' if where is None else f' AND ({where})'}")
    if keys_where is not None:
        keys = ", ".join(_quote(k) for k in names)
        sql = (f"SELECT {', '.join('s.' + _quote(c) for c in wanted)} FROM "
               f"(SELECT DISTINCT {keys} FROM stored WHERE {condition} AND ({keys_where})) k JOIN stored s ON "
               + " AND ".join(f"k.{_quote(n)} = s.{_quote(n)}" for n in names)
               + f" WHERE {condition.replace('cluster_id', 's.cluster_id').replace(lo, 's.' + lo)}"
               + ("" if where is None else f" AND ({where})"))
    read = _run(_stored(tables_dir, entity.history), "stored", sql)
    if read.num_rows == 0:
        return read, pa.array([], pa.int64()), read.column(lo), read.column(hi)
    order, breaks = _key_order(read, names, lo)
    bounds = read.select([lo, hi, REMOVED]).take(order)
    end = pc.coalesce(bounds.column(hi), _following(bounds.column(lo), breaks))
    live = pc.invert(pc.fill_null(bounds.column(REMOVED), False)).combine_chunks()
    return read, order.filter(live), bounds.column(lo).filter(live), end.filter(live)


def version_spans(tables_dir: str | Path, entity: Entity, cluster: str, as_of_offset: int | None,
                  ) -> tuple[pa.Array | pa.ChunkedArray, pa.Array | pa.ChunkedArray]:
    """The starts and the ends (null while current; an end after ``as_of_offset`` kept as stored) of the
    ``entity``'s versions of ``cluster`` that start by ``as_of_offset`` (None: all), in no order — the versions
    :func:`entity_versions` gives, for a caller that counts them (the offline curve, the report's offline series).

    Only the open rows are sorted by key. A stored end is final (only ``jbod maintain`` stores one, and never on a
    :data:`REMOVED` row), and a key's rows with one precede its open rows (the writer stores no end; a fold ends
    every open row but the key's last): so a closed version is read as its two offsets, and an open row's end is the
    start of its key's next open row. After a fold, most versions are closed: the 2 M-partition cluster's 15 M
    offline intervals were read with their keys and sorted, where now only the few open ones are
    (docs/performance.md, "The first fold at 2 M partitions")."""
    names = [k for k, _ in entity.key]
    lo, hi = (f"{c}_offset" for c in entity.interval)
    condition = f"cluster_id = {_lit(cluster)}" + ("" if as_of_offset is None else f" AND {lo} <= {int(as_of_offset)}")
    stored = _stored(tables_dir, entity.history)
    closed = _run(stored, "stored", f"SELECT {lo}, {hi} FROM stored WHERE {condition} AND {hi} IS NOT NULL AND "
                                    f"{REMOVED} IS NOT TRUE")
    rows = _run(stored, "stored", f"SELECT {', '.join(_quote(c) for c in [*names, lo, REMOVED])} FROM stored "
                                  f"WHERE {condition} AND {hi} IS NULL")
    if rows.num_rows == 0:
        return closed.column(lo), closed.column(hi)
    order, breaks = _key_order(rows, names, lo)
    starts = rows.column(lo).take(order)
    live = pc.invert(pc.fill_null(rows.column(REMOVED).take(order), False))
    ends = _following(starts, breaks).filter(live)
    del rows, order, breaks
    return (pa.chunked_array([*closed.column(lo).chunks, *_chunks(starts.filter(live))], pa.int64()),
            pa.chunked_array([*closed.column(hi).chunks, *_chunks(ends)], pa.int64()))


def history_table(tables_dir: str | Path, table: str, cluster: str, columns: Sequence[str] | None = None,
                  where: str | None = None, encoded: Collection[str] = ()) -> pa.Table:
    """A history table's rows of ``cluster``, every column (or ``columns``; the key and the interval's offsets come
    too), of the keys ``where`` (a SQL condition on key columns, pushed down to the scan) selects — the rows
    :func:`resolved_sql`'s view gives (read through :func:`query`), derived from the stored rows without the
    view's window functions: sorted by key and start (:func:`_key_breaks`), an open row's end (offset and time) is
    the start of its key's next stored row (a later change, or a :data:`REMOVED` row, which is no version itself);
    a stored end stays as stored. The view's LEAD over every open row of the changed keys took 14 s for the 2.5 M
    replica versions at 200 k partitions. Ordered by key, then start (the view's order is the engine's). The text
    columns ``encoded`` come dictionary-encoded (:func:`_run`)."""
    entity, current = VERSIONED[table]
    if current:
        raise InputError(f"{table} is a current table, not a history table")
    every = entity.history_schema()
    names = [k for k, _ in entity.key]
    lo, hi = (f"{c}_offset" for c in entity.interval)
    lo_time, hi_time = (f"{c}_time" for c in entity.interval)
    picked = every.names if columns is None else [c for c in every.names if c in {*names, lo, hi, *columns}]
    schema = pa.schema([every.field(c) for c in picked])
    wanted = [*schema.names, *([lo_time] if hi_time in schema.names and lo_time not in schema.names else []), REMOVED]
    condition = f"cluster_id = {_lit(cluster)}" + ("" if where is None else f" AND ({where})")
    read = _run(_stored(tables_dir, table), "stored", f"SELECT {', '.join(_quote(c) for c in wanted)} FROM stored "
                                                     f"WHERE {condition}", encoded)
    if read.num_rows == 0:
        return read.select(schema.names)
    types = read.select(schema.names).schema
    rows, breaks = _key_breaks(read, names, lo)
    del read  # sorted into rows: not held beside them and the filtered copy (21 M versions at 2 M partitions)

    live = pc.invert(pc.fill_null(rows.column(REMOVED), False))
    return _derived_ends(rows, breaks, entity).select(schema.names).filter(live).cast(types)


def last_offset(tables_dir: str | Path, cluster: str, as_of_offset: int | None = None) -> int:
    """The image's provenance: the last offset that took effect (at or before ``as_of_offset``), -1 if none."""
    where = f"cluster_id = {_lit(cluster)} AND applied_offset IS NOT NULL"
    if as_of_offset is not None:
        where += f" AND applied_offset <= {int(as_of_offset)}"
    value = query(tables_dir, "records", f'SELECT MAX("offset") AS m FROM t WHERE {where}').column("m")[0].as_py()
    return -1 if value is None else int(value)


def offset_at_time(tables_dir: str | Path, cluster: str, when: datetime) -> int:
    """The last offset that took effect at or before ``when`` (by its record batch's append time, as Kafka stamps
    it): "the state at 03:00" is the state as of that offset. An InputError when no timed record is that old —
    records read from JSONL or a snapshot carry no time."""
    micros = int(when.timestamp() * 1_000_000)
    where = (f"cluster_id = {_lit(cluster)} AND applied_offset IS NOT NULL AND \"timestamp\" IS NOT NULL "
             f"AND \"timestamp\" <= {_time_literal(micros)}")
    row = query(tables_dir, "records", f'SELECT MAX("offset") AS m, MIN("timestamp") AS first FROM t WHERE {where}')
    value = row.column("m")[0].as_py()
    if value is None:
        first = query(tables_dir, "records", f"SELECT MIN(\"timestamp\") AS first FROM t WHERE cluster_id = "
                                             f"{_lit(cluster)} AND \"timestamp\" IS NOT NULL").column("first")[0]
        since = "its records carry no time" if first.as_py() is None else f"its first timed record is {first}"
        raise InputError(f"cluster {cluster} has no record at or before {when.isoformat()} ({since})")
    return int(value)


#: The image JSON's lists read from the tables (docs/image-json.md): the document's key → the entity, its value
#: columns, and the JSON names of its key columns then of those columns.
_IMAGE_LISTS: Final = {
    "brokers": ("broker", ("broker_epoch", "incarnation_id", "fenced", "in_controlled_shutdown", "log_dirs"),
                ("brokerId", "brokerEpoch", "incarnationId", "fenced", "inControlledShutdown", "logDirs")),
    "topics": ("topic", ("topic_name",), ("topicId", "name")),
    "partitions": ("partition", ("replicas", "isr", "leader", "leader_epoch", "partition_epoch", "directories",
                                 "adding_replicas", "removing_replicas", "eligible_leader_replicas", "last_known_elr"),
                   ("topicId", "partitionId", "replicas", "isr", "leader", "leaderEpoch", "partitionEpoch",
                    "directories", "addingReplicas", "removingReplicas", "eligibleLeaderReplicas", "lastKnownElr")),
    "replicas": ("replica", ("directory", "directory_state", "offline", "offline_reason"),
                 ("topicId", "partitionId", "brokerId", "directory", "directoryState", "offline", "offlineReason")),
}


def _objects_of(names: Sequence[str]) -> Callable[[list[list[Any]]], list[dict[str, Any]]]:
    """``objects(columns)`` → one dict per row, ``names`` its keys in order: compiled for the names, as a dict
    display per row, which builds a row twice as fast as ``dict(zip(names, row))`` (8 M rows at 2 M partitions)."""
    values = [f"v{i}" for i in range(len(names))]
    items = ", ".join(f"{json.dumps(n)}: {v}" for n, v in zip(names, values, strict=True))
    source = f"def objects(columns):\n    return [{{{items}}} for {', '.join(values)}, in zip(*columns, strict=True)]"
    namespace: dict[str, Any] = {}
    exec(compile(source, f"<rows as objects of {', '.join(names)}>", "exec"), namespace)
    objects: Callable[[list[list[Any]]], list[dict[str, Any]]] = namespace["objects"]
    return objects


def as_of_image(tables_dir: str | Path, cluster: str | None = None, as_of_offset: int | None = None,
                ) -> dict[str, Any]:
    """The image JSON (docs/image-json.md) of ``cluster`` as of ``as_of_offset`` (every record with offset ≤ N
    replayed; None = the latest state), read from the tables: equal to ``image_to_json`` of the model's replay of
    the same records. :func:`as_of_image_sliced`'s document with each list whole."""
    cid = resolve_cluster(tables_dir, cluster)
    with gc_paused():
        return {key: [row for part in value.slices for row in part] if isinstance(value, Slices) else value
                for key, value in as_of_image_sliced(tables_dir, cid, as_of_offset).items()}


def as_of_image_sliced(tables_dir: str | Path, cluster: str, as_of_offset: int | None, *,
                       rows: int = PIECE_ROWS, text: bool = False) -> dict[str, Any]:
    """:func:`as_of_image`'s document with its lists as :class:`~jbod_model.records.json_codec.Slices` of ``rows``
    rows, each made from the tables' columns as it is written (``jbod image --tables --json``, through
    ``dumps_pieces``): at 2 M partitions the whole document was 8 M dicts. Every table is read before this
    returns, so a bad table fails before any output; only the rows' Python objects wait. Every list comes out of
    :func:`entity_state` in the contract's order (by key: topic id text, partition, broker), so its rows are
    zipped from columns, never sorted or turned into dicts one by one first; each slice is made with the cyclic
    collector paused, as ``image_to_json`` is (millions of acyclic dicts and lists).

    ``text``: the slices are the rows' JSON text, made by Arrow's kernels (:func:`~pipelines.lakehouse.jsontext.
    text_slices`, ``rows`` ignored), where a slice's values allow it — for a writer, never for a reader of the
    rows (:func:`as_of_image`)."""
    read = {key: entity_state(tables_dir, ENTITIES[entity], cluster, as_of_offset, columns)
            for key, (entity, columns, _) in _IMAGE_LISTS.items()}
    levels = entity_state(tables_dir, ENTITIES["feature"], cluster, as_of_offset, ("level",))
    level = int(dict(zip(*(levels.column(c).to_pylist() for c in levels.column_names), strict=True))
                .get(FEATURE_NAME, 0))

    def sliced(table: pa.Table, names: Sequence[str]) -> Slices:
        objects = _objects_of(names)

        def made(part: pa.Table) -> list[dict[str, Any]]:
            with gc_paused():
                return objects([c.to_pylist() for c in part.columns])
        if text:
            return Slices(text_slices(table, names, made))
        return Slices(made(table.slice(lo, rows)) for lo in range(0, table.num_rows, rows))

    return {"featureLevel": level, "metadataVersion": MetadataVersion(level).name,
            "lastOffset": last_offset(tables_dir, cluster, as_of_offset),
            **{key: sliced(read[key], names) for key, (_, _, names) in _IMAGE_LISTS.items()}}


def metadata_image(tables_dir: str | Path, cluster: str | None = None, as_of_offset: int | None = None, *,
                   on_directories: Collection[Uuid] | None = None) -> MetadataImage:
    """The model's image of ``cluster`` as of ``as_of_offset`` (None: the latest) built from the tables, not by
    replaying the log: features, brokers, topics and partitions from their tables (:func:`entity_state`), the
    configurations from the only records that change them (:func:`jbod_model.replay.configurations_of`, a few
    hundred rows of ``records``). Equal to the replay's image (``same_state``) but for the brokers' supported
    feature ranges, which no table holds and no controller decision on directories reads — what ``jbod whatif
    --tables`` asks its question of.

    ``on_directories``: only the partitions with a replica in one of these directories, as
    :func:`jbod_model.whatif.affected_image` keeps them — chosen over the partitions' columns before any becomes
    a Python object: a 2 M-partition image was 2 M registrations, about 1.5 GB, for a what-if that reads the
    tens of thousands on one disk."""
    cid = resolve_cluster(tables_dir, cluster)
    with gc_paused():
        return _metadata_image(tables_dir, cid, as_of_offset, None if on_directories is None else
                               sorted({str(d) for d in on_directories}))


def online_directories(tables_dir: str | Path, cluster: str | None = None, as_of_offset: int | None = None,
                       ) -> frozenset[Uuid]:
    """Every directory the cluster's registered brokers list as online (as of ``as_of_offset``): the brokers'
    table alone."""
    rows = entity_state(tables_dir, ENTITIES["broker"], resolve_cluster(tables_dir, cluster), as_of_offset,
                        ("log_dirs",))
    return frozenset(Uuid.from_string(d) for dirs in rows.column("log_dirs").to_pylist() for d in dirs or ())


def _metadata_image(tables_dir: str | Path, cid: str, as_of_offset: int | None,
                    on_directories: Sequence[str] | None = None) -> MetadataImage:
    def read(name: str, *columns: str) -> tuple[pa.Table, list[str]]:
        entity = ENTITIES[name]
        rows = entity_state(tables_dir, entity, cid, as_of_offset, columns)
        if name == "partition" and on_directories is not None:
            dirs = rows.column("directories").combine_chunks()
            hit = pc.is_in(pc.list_flatten(dirs), pa.array(on_directories, pa.string()))
            rows = rows.take(pc.unique(pc.filter(pc.list_parent_indices(dirs), hit)))
        return rows, [*(k for k, _ in entity.key), *columns]

    def state(name: str, *columns: str) -> list[list[Any]]:
        rows, names = read(name, *columns)
        return [rows.column(c).to_pylist() for c in names]

    uuids: dict[str, Uuid] = {}

    def uuid(text: str) -> Uuid:
        # A cluster has few directories and topics, each named by hundreds of thousands of rows: parse each once.
        found = uuids.get(text)
        if found is None:
            found = uuids[text] = Uuid.from_string(text)
        return found

    levels = dict(zip(*state("feature", "level"), strict=True))
    brokers = {b: BrokerRegistration(
        id=b, epoch=epoch, incarnation_id=uuid(inc), listeners=_listeners(listeners), rack=rack, fenced=fenced,
        in_controlled_shutdown=shutdown, is_migrating_zk_broker=zk, directories=tuple(uuid(d) for d in dirs))
        for b, epoch, inc, fenced, shutdown, zk, rack, dirs, listeners in zip(*state(
            "broker", "broker_epoch", "incarnation_id", "fenced", "in_controlled_shutdown", "is_migrating_zk_broker",
            "rack", "log_dirs", "listeners"), strict=True)}
    parts: dict[str, dict[int, PartitionRegistration]] = {}
    partitions, names = read("partition", "replicas", "isr", "leader", "leader_recovery_state", "leader_epoch",
                             "partition_epoch", "directories", "adding_replicas", "removing_replicas",
                             "eligible_leader_replicas", "last_known_elr")
    # Each distinct directory parsed once, then every replica's looked up by map, in C: a Python call per replica
    # was a fifth of the image's time at 200 k partitions.
    directory = {d: uuid(d) for d in pc.unique(pc.list_flatten(partitions.column("directories"))).to_pylist()
                 }.__getitem__
    # The rows made Python values a slice at a time: the 2 M partitions' columns as lists at once were about 1 GB
    # beside the registrations made from them, the report's peak (docs/performance.md).
    for lo in range(0, partitions.num_rows, _IMAGE_SLICE_ROWS):
        piece = partitions.slice(lo, _IMAGE_SLICE_ROWS)
        for t, p, replicas, isr, leader, lrs, le, pe, dirs, adding, removing, elr, lk in zip(
                *(piece.column(c).to_pylist() for c in names), strict=True):
            # Positionally, without the keyword __init__ (checked as it checks): 200 k of them at 200 k partitions.
            parts.setdefault(t, {})[p] = PartitionRegistration.from_fields(
                tuple(replicas), tuple(map(directory, dirs)), tuple(isr), tuple(removing), tuple(adding),
                tuple(elr), tuple(lk), leader, lrs, le, pe)
    del partitions
    topics = {uuid(t): TopicImage(name=name, id=uuid(t), partitions=parts.get(t, {}))
              for t, name in zip(*state("topic", "topic_name"), strict=True)}
    base, entries = log_entries(tables_dir, cid, as_of_offset, types=[t.TYPE_NAME for t in CONFIGURATION_RECORDS])
    configs = configurations_of(entries, base if base is not None else EMPTY_IMAGE)
    return MetadataImage(features=FeaturesImage(levels), cluster=ClusterImage(brokers),
                         topics=TopicsImage(topics, {t.name: i for i, t in topics.items()}), configs=configs,
                         last_offset=last_offset(tables_dir, cid, as_of_offset))


#: How many partition rows :func:`metadata_image` makes Python values of at a time.
_IMAGE_SLICE_ROWS: Final = 65_536


def _listeners(text: str | None) -> tuple[BrokerEndpoint, ...]:
    """A ``brokers.listeners`` value (JSON text, as the job writes a registration's endpoints) as the model's."""
    return tuple(BrokerEndpoint(name=e["name"], host=e["host"], port=e["port"],
                                security_protocol=e["securityProtocol"]) for e in json.loads(text or "[]"))


def offline_intervals(tables_dir: str | Path, cluster: str | None = None) -> list[dict[str, Any]]:
    """Every offline interval of a cluster (or of all clusters), ordered by start offset."""
    where = None if cluster is None else f"cluster_id = {_lit(cluster)}"
    rows = read_table(tables_dir, "offline_replicas", where).to_pylist()
    return sorted(rows, key=lambda r: (r["cluster_id"], r["start_offset"], r["topic_id"], r["partition_id"],
                                       r["broker_id"]))


# ---------------------------------------------------------------------------------------------------------------
# The log itself: the records table as LogEntry values


def record_from_row(type_name: str, version: int, data: str | None, payload: str | None = None) -> Record:
    """A ``records`` row's record: the inverse of how the job writes one (``record_to_json``, its ``data`` object
    as JSON text, the base64 body of a record whose schema the model does not know in ``payload``)."""
    try:
        # orjson: 1.2–1.5 s less than json's for the 1.09 M records of a 200 k cluster (jbod check decodes them all).
        body = None if data is None else orjson.loads(data)
    except ValueError as e:
        raise InputError(f"a {type_name} v{version} row of the records table has undecodable data: {e}") from None
    # Straight to the type's generated reader where it has one, as the operator reads its input rows; anything it
    # does not read (None) goes the whole way, which says what is wrong.
    reader = typed_record_reader(type_name, int(version)) if payload is None else None
    if reader is not None and (record := reader(body)) is not None:
        return record
    obj: dict[str, Any] = {"type": type_name, "version": int(version), "data": body}
    if payload is not None:
        obj["payload"] = payload
    return record_from_json(obj, where="records table")


_LOG_COLUMNS = ("offset", "batch_base_offset", "leader_epoch", "timestamp", "type", "version", "data", "payload",
                "source")


def _entries(tables_dir: str | Path, where: str, order: str) -> Iterator[LogEntry]:
    """The records matching ``where`` as LogEntry values, streamed batch by batch (a real log has millions of
    NoOpRecords) in ``order``. Times go back to the model's ms."""
    columns = ", ".join(_quote(c) for c in _LOG_COLUMNS)
    reader = _engine().register("t", _delta(tables_dir, "records")).execute(
        f"SELECT {columns} FROM t WHERE {where} ORDER BY {order}")
    for raw in reader:
        batch = pa.record_batch(raw)
        stamps = batch.column("timestamp").cast(pa.int64()).to_pylist()
        values = {name: batch.column(name).cast(_plain(batch.schema.field(name).type)).to_pylist()
                  for name in _LOG_COLUMNS if name != "timestamp"}
        for i, stamp in enumerate(stamps):
            yield LogEntry(offset=values["offset"][i],
                           record=record_from_row(values["type"][i], values["version"][i], values["data"][i],
                                                  values["payload"][i]),
                           batch_base_offset=values["batch_base_offset"][i], leader_epoch=values["leader_epoch"][i],
                           timestamp=None if stamp is None else stamp // 1000, source=values["source"][i])


def log_entries(tables_dir: str | Path, cluster: str | None = None, as_of_offset: int | None = None,
                types: Iterable[str] | None = None) -> tuple[MetadataImage | None, Iterator[LogEntry]]:
    """The cluster's metadata log as the job replayed it, up to offset ``as_of_offset`` inclusive (None: all):
    the image of the latest snapshot at or before it (None when the log was read from its start), and the records
    after that in offset order — the input's and those the reference controller wrote. Replaying them from the
    image gives the state as of the offset (:func:`as_of_image`), and the same history a replay of the input with
    ``--until-offset N+1`` gives.

    Records that an AbortTransactionRecord discarded (``applied_offset`` null) are given too, in their place:
    replay discards them at the abort exactly as it does when reading the input, and leaving them out would leave
    the AbortTransactionRecord without its BeginTransactionRecord. Records of a transaction still open at the
    offset (its end is later) come without their end, so a replay leaves them pending, as Kafka does.

    ``types``: only the records of these types (``TYPE_NAME``), the snapshot's and the log's (pushed down to the
    scan), e.g. those of :data:`jbod_model.replay.CONFIGURATION_RECORDS` — which holds the transaction markers, so
    that a replay still discards an aborted record."""
    cid = resolve_cluster(tables_dir, cluster)
    snapshot, after = _log_after_snapshot(tables_dir, cid, as_of_offset)
    where = f"cluster_id = {_lit(cid)}"
    if types is not None:
        where += f" AND type IN ({', '.join(sorted(_lit(t) for t in types))})"
    if snapshot is None:
        return None, _entries(tables_dir, f"{where} AND {after}", '"offset"')
    # A snapshot's rows all carry the offset it stands for; its index keeps them in the file's order.
    image = snapshot_image(_entries(tables_dir, f"{where} AND origin = 'snapshot' AND \"offset\" = {int(snapshot)}",
                                    "snapshot_index"), int(snapshot))
    return image, _entries(tables_dir, f"{where} AND {after}", '"offset"')


def _log_after_snapshot(tables_dir: str | Path, cluster: str, as_of_offset: int | None) -> tuple[int | None, str]:
    """The offset of the latest snapshot of ``cluster`` at or before ``as_of_offset`` (None: the log is read from
    its start) and the SQL condition selecting the log's records after it up to the offset (:func:`log_entries`)."""
    bound = "" if as_of_offset is None else f' AND "offset" <= {int(as_of_offset)}'
    found = query(tables_dir, "records", f"SELECT MAX(\"offset\") AS s FROM t WHERE cluster_id = {_lit(cluster)} "
                                         f"AND origin = 'snapshot'{bound}").column("s")
    snapshot = found[0].as_py()
    if snapshot is None:
        if as_of_offset is not None:
            _check_not_before_start(tables_dir, cluster, int(as_of_offset))
        return None, f"origin <> 'snapshot'{bound}"
    return int(snapshot), f'origin <> \'snapshot\' AND "offset" > {int(snapshot)}{bound}'


def log_positions(tables_dir: str | Path, cluster: str, as_of_offset: int | None = None) -> tuple[int | None, pa.Table]:
    """What batching needs of the records :func:`log_entries` gives (no ``data`` read or decoded): the snapshot's
    offset (None: none) and the records after it as ``offset``, ``batch_base_offset``, ``timestamp`` (ms), ``type``
    and ``applied_offset``, in offset order."""
    snapshot, after = _log_after_snapshot(tables_dir, cluster, as_of_offset)
    rows = query(tables_dir, "records", 'SELECT "offset", batch_base_offset, timestamp, type, applied_offset FROM t '
                                        f'WHERE cluster_id = {_lit(cluster)} AND {after} ORDER BY "offset"')
    stamps = pc.divide(rows.column("timestamp").cast(pa.int64()), 1000)
    return snapshot, rows.set_column(rows.schema.get_field_index("timestamp"), "timestamp", stamps)


def _check_not_before_start(tables_dir: str | Path, cluster: str, as_of_offset: int) -> None:
    """Refuse an offset before a log that starts at a snapshot (Kafka had deleted the older records when the job
    first read it): nothing says what the state was then, and an empty image would say something wrong."""
    first = query(tables_dir, "records",
                  "SELECT MIN(CASE WHEN origin = 'snapshot' THEN \"offset\" END) AS snap, "
                  "MIN(CASE WHEN origin <> 'snapshot' THEN \"offset\" END) AS log "
                  f"FROM t WHERE cluster_id = {_lit(cluster)}").to_pylist()[0]
    if first["snap"] is not None and (first["log"] is None or first["log"] > first["snap"]):
        raise InputError(f"the tables hold cluster {cluster} from the snapshot at offset {first['snap']} on (the "
                         f"log before it was deleted when the job read it): no state as of offset {as_of_offset}")


def replay_faults(tables_dir: str | Path, cluster: str) -> list[dict[str, Any]]:
    """Where the cluster's replay stopped (``replay_faults``), if it did: the tables end before that entry."""
    return list(read_table(tables_dir, "replay_faults", f"cluster_id = {_lit(cluster)}").to_pylist())


# ---------------------------------------------------------------------------------------------------------------
# The directory inventory: directory id <-> node and path


def _finding_rows(inv: DirInventory, row: DirInventoryRow) -> list[dict[str, str]]:
    return [{"severity": str(f.severity), "message": f.message}
            for f in inv.findings.get(row.node_id, ()) if f.path == row.path]


def load_dir_inventory(tables_dir: str | Path, inv: DirInventory, *, cluster_id: str | None = None,
                       loaded_at_ms: int | None = None) -> dict[str, int]:
    """Load an inventory (``jbod_model.meta_properties.inventory``) into ``dir_inventory``; return the rows loaded
    per cluster. A row's cluster is its ``meta.properties`` cluster.id, else ``cluster_id`` (v0 files may have
    none).

    The inventory is the current state of the clusters and nodes it covers, in one commit (a MERGE keyed on node,
    path and directory id): a node's disks are read together, so a directory missing from a new inventory of its
    node — a replaced disk's old id, a disk taken out — is *retired* (``retired_at`` set), not deleted: the
    metadata's history still names it (the replicas that were offline on it), and reports of that time keep
    naming it by path. A retired directory seen again is current again. The other nodes' rows stay as they are;
    loading the same inventory twice leaves the same rows (only ``loaded_at`` moves)."""
    by_cluster: dict[str, list[dict[str, Any]]] = {}
    now_us = (int(time.time() * 1000) if loaded_at_ms is None else loaded_at_ms) * 1000
    for row in inv.rows:
        cid = row.cluster_id or cluster_id
        if cid is None:
            raise InputError(f"{row.read_from or row.path}: its meta.properties has no cluster.id (a version 0 "
                             "file): give the cluster with --cluster-id")
        by_cluster.setdefault(cid, []).append({
            "cluster_id": cid, "node_id": row.node_id, "path": row.path,
            "directory_id": None if row.directory_id is None else str(row.directory_id), "version": row.version,
            "read_from": row.read_from, "findings": _finding_rows(inv, row), "loaded_at": now_us})
    if not by_cluster:
        return {}
    root = Path(tables_dir)
    root.mkdir(parents=True, exist_ok=True)
    table = DeltaTable.create(root / DIR_INVENTORY, schema=DIR_INVENTORY_SCHEMA, mode="ignore")
    source = _arrow([r for rows in by_cluster.values() for r in rows], DIR_INVENTORY_SCHEMA)
    scope = " OR ".join(f"(t.cluster_id = {_lit(cid)} AND ({_nodes_are({r['node_id'] for r in rows})}))"
                        for cid, rows in sorted(by_cluster.items()))
    # node_id is null for a v0 file without broker.id, directory_id before Kafka generated one: IS NOT DISTINCT FROM
    # keys such rows too. Parenthesised: delta-rs' predicate parser reads "x IS NOT DISTINCT FROM y AND z" as
    # "x IS NOT DISTINCT FROM (y AND z)".
    (table.merge(source, "t.cluster_id = s.cluster_id AND t.path = s.path AND "
                         "(t.node_id IS NOT DISTINCT FROM s.node_id) AND "
                         "(t.directory_id IS NOT DISTINCT FROM s.directory_id)", source_alias="s", target_alias="t")
     .when_matched_update_all()
     .when_not_matched_insert_all()
     .when_not_matched_by_source_update({"retired_at": _time_literal(now_us)},
                                        predicate=f"({scope}) AND t.retired_at IS NULL")
     .execute())
    _forget(root / DIR_INVENTORY)
    return {cid: len(rows) for cid, rows in sorted(by_cluster.items())}


def _nodes_are(nodes: set[int | None]) -> str:
    return " OR ".join("t.node_id IS NULL" if n is None else f"t.node_id = {int(n)}"
                       for n in sorted(nodes, key=lambda n: (n is None, n or 0)))


def dir_inventory_rows(tables_dir: str | Path, cluster: str, *, retired: bool = False,
                       ) -> list[DirInventoryRow] | None:
    """The cluster's current ``dir_inventory`` rows (``retired``: the retired ones instead) as the model's inventory
    rows, by node, path and id; None when no inventory was loaded (the table does not exist yet: it is created by
    ``jbod run`` or by the first load)."""
    if not DeltaTable.is_deltatable(str(Path(tables_dir) / DIR_INVENTORY)):
        return None
    state = "IS NOT NULL" if retired else "IS NULL"
    rows = sorted(read_table(tables_dir, DIR_INVENTORY, f"cluster_id = {_lit(cluster)} AND retired_at {state}")
                  .to_pylist(), key=lambda r: (r["node_id"] is None, r["node_id"] or 0, r["path"],
                                               r["directory_id"] or ""))
    return [DirInventoryRow(node_id=r["node_id"], path=r["path"],
                            directory_id=None if r["directory_id"] is None else Uuid.from_string(r["directory_id"]),
                            cluster_id=r["cluster_id"], version=r["version"], read_from=r["read_from"])
            for r in rows]


def directory_paths(tables_dir: str | Path, cluster: str) -> DirectoryPaths | None:
    """Directory id → (node, path) from ``dir_inventory`` for ``cluster``, as every report names disks (``broker 3
    /mnt/d2 (P2aL9r4s…)``); None when no inventory of the cluster was loaded."""
    rows = dir_inventory_rows(tables_dir, cluster)
    if not rows:
        return None
    # Retired directories keep their last path (a failed disk's replicas name its old id); a current one wins.
    retired = DirectoryPaths.from_inventory(dir_inventory_rows(tables_dir, cluster, retired=True) or ())
    return retired.overlay(DirectoryPaths.from_inventory(rows))


def replica_assignments_with_paths(tables_dir: str | Path, cluster: str | None = None,
                                   as_of_offset: int | None = None, limit: int | None = None) -> pa.Table:
    """``replica_assignments`` (or, as of an offset, the versions of ``replica_assignment_history`` valid then)
    joined with ``dir_inventory``: two more columns, ``path`` and ``node_id``, from the ``meta.properties`` holding
    the replica's directory id — null when the inventory does not know it (no inventory loaded, a disk not
    collected, or a placeholder: UNASSIGNED, MIGRATING, LOST). The inventory is the latest loaded: it has no
    history. An id found on two disks is joined to the first by (node, path), as reports do
    (:class:`~jbod_model.report.DirectoryPaths`). ``limit``: at most that many rows, the first the engine gives (a
    look at them without reading millions; :func:`replicas_per_directory` counts them)."""
    cid = resolve_cluster(tables_dir, cluster)
    table, where = _live_rows(ENTITIES["replica"], cid, as_of_offset)
    rows = query(tables_dir, table, f"SELECT * FROM t WHERE {where}{'' if limit is None else f' LIMIT {int(limit)}'}")
    return _with_paths(tables_dir, cid, rows)


def replicas_per_directory(tables_dir: str | Path, cluster: str | None = None,
                           as_of_offset: int | None = None) -> pa.Table:
    """How many replicas each broker's directory holds, and how many of them are offline, as of ``as_of_offset``
    (None: the latest): the rows :func:`replica_assignments_with_paths` gives, counted by the engine instead of read
    (six million of them at 2 M partitions, for a few hundred counts), with the same ``path`` and ``node_id``.
    Columns ``broker_id``, ``directory``, ``replicas``, ``offline``, ``path``, ``node_id``; ordered by broker, then
    directory (null, a replica placed before 3.7-IV2, last)."""
    cid = resolve_cluster(tables_dir, cluster)
    table, where = _live_rows(ENTITIES["replica"], cid, as_of_offset)
    counts = query(tables_dir, table, "SELECT broker_id, directory, COUNT(*) AS replicas, "
                                      "SUM(CASE WHEN offline THEN 1 ELSE 0 END) AS offline "
                                      f"FROM t WHERE {where} GROUP BY broker_id, directory "
                                      "ORDER BY broker_id, directory NULLS LAST")
    return _with_paths(tables_dir, cid, counts.cast(pa.schema([("broker_id", pa.int32()), ("directory", pa.string()),
                                                               ("replicas", pa.int64()), ("offline", pa.int64())])))


def _with_paths(tables_dir: str | Path, cluster: str, replicas: pa.Table) -> pa.Table:
    """``replicas`` (a ``directory`` column of replica rows) with ``path`` and ``node_id`` from ``dir_inventory`` (see
    :func:`replica_assignments_with_paths`)."""
    paths = directory_paths(tables_dir, cluster) or DirectoryPaths()
    encoded = pc.dictionary_encode(replicas.column("directory")).combine_chunks()
    locations = [None if text is None else paths.get(Uuid.from_string(text))
                 for text in encoded.dictionary.to_pylist()]
    path_of = pa.array([None if loc is None else loc.path for loc in locations], pa.string())
    node_of = pa.array([None if loc is None else loc.node_id for loc in locations], pa.int32())
    return (replicas.append_column(pa.field("path", pa.string()), pc.take(path_of, encoded.indices))
            .append_column(pa.field("node_id", pa.int32()), pc.take(node_of, encoded.indices)))
