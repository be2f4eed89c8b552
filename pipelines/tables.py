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
  cluster's replay stopped at, if any.

Writes are exactly-once per micro-batch: every commit carries a Delta app transaction ``(app id, batch id)`` and a
table whose transaction version already covers the batch is skipped, so a batch re-run after a crash rewrites
nothing twice. Current tables are MERGEd on their keys; history tables are MERGEd too, closing the open version of a
key and inserting the new ones in one commit. Readers go through the Delta log (delta-rs), never
``spark.read.parquet`` on a table folder (it would see removed files).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, QueryBuilder, Transaction, write_deltalake

from jbod_model.errors import InputError
from jbod_model.metadata_version import FEATURE_NAME, MetadataVersion

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
}


def table_schemas() -> dict[str, pa.Schema]:
    """Every table's schema, by name."""
    out = dict(APPEND_TABLES)
    for e in ENTITIES.values():
        if e.current is not None:
            out[e.current] = e.current_schema()
        out[e.history] = e.history_schema()
    return out


def _time(ms: int | None) -> int | None:
    return None if ms is None else ms * 1000


# ---------------------------------------------------------------------------------------------------------------
# From a micro-batch's rows to table writes


@dataclass(slots=True)
class BatchWrites:
    """What one micro-batch writes, table by table: rows to append, and MERGE sources."""

    appends: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: Current tables: one row per key (the key's last event), with ``_deleted``.
    upserts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: History tables: ``_close`` rows end the open version of a key; the others are versions to insert.
    versions: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def tables(self) -> list[str]:
        return sorted({*self.appends, *self.upserts, *self.versions})


def plan_batch(rows: Iterable[Mapping[str, Any]]) -> BatchWrites:
    """Turn the operator's rows (``cluster_id, ord, table, payload``) into table writes. Events of one key are
    applied in order: the first closes the version left open by an earlier batch, each following one closes its
    predecessor within the batch, the last one is the open version (and the current row)."""
    out = BatchWrites()
    events: dict[str, dict[tuple[Any, ...], list[dict[str, Any]]]] = {}
    for row in sorted(rows, key=lambda r: (r["cluster_id"], r["ord"])):
        payload = json.loads(row["payload"])
        table = row["table"]
        if table in APPEND_TABLES:
            out.appends.setdefault(table, []).append({"cluster_id": row["cluster_id"], **payload})
            continue
        entity = ENTITIES.get(table)
        if entity is None:
            raise InputError(f"unknown output table {table!r}")
        key = (row["cluster_id"], *payload["k"])
        events.setdefault(table, {}).setdefault(key, []).append(payload)
    for name, by_key in events.items():
        entity = ENTITIES[name]
        lo, hi = entity.interval
        value_names = [v for v, _ in entity.value]
        history = out.versions.setdefault(entity.history, [])
        for key, evs in by_key.items():
            keys = dict(zip(entity.key_names, key, strict=True))
            first = evs[0]
            history.append({**keys, **dict.fromkeys(value_names), f"{lo}_offset": None, f"{lo}_time": None,
                            f"{hi}_offset": first["o"], f"{hi}_time": _time(first["t"]), "_close": True})
            for i, ev in enumerate(evs):
                if ev["v"] is None:
                    continue
                nxt = evs[i + 1] if i + 1 < len(evs) else None
                history.append({**keys, **ev["v"], f"{lo}_offset": ev["o"], f"{lo}_time": _time(ev["t"]),
                                f"{hi}_offset": None if nxt is None else nxt["o"],
                                f"{hi}_time": None if nxt is None else _time(nxt["t"]), "_close": False})
            if entity.current is not None:
                last = evs[-1]
                value = last["v"] or dict.fromkeys(value_names)
                out.upserts.setdefault(entity.current, []).append(
                    {**keys, **value, "since_offset": last["o"], "since_time": _time(last["t"]),
                     "_deleted": last["v"] is None})
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

    def write_batch(self, batch_id: int, rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
        """Write one micro-batch; return the rows written per table (0 for a table skipped as already done)."""


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
        for name, schema in table_schemas().items():
            self._tables[name] = DeltaTable.create(self.path(name), schema=schema, mode="ignore")

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

    def write_batch(self, batch_id: int, rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
        plan = plan_batch(rows)
        schemas = table_schemas()
        written: dict[str, int] = {}
        for name, append_rows in plan.appends.items():
            table = self._table(name)
            if self._done(table, batch_id):
                written[name] = 0
                continue
            write_deltalake(table, _arrow(append_rows, schemas[name]), mode="append",
                            commit_properties=self._commit(batch_id))
            written[name] = len(append_rows)
        for entity in ENTITIES.values():
            if entity.current is not None and entity.current in plan.upserts:
                written[entity.current] = self._merge_current(entity, plan.upserts[entity.current], batch_id)
            if entity.history in plan.versions:
                written[entity.history] = self._merge_history(entity, plan.versions[entity.history], batch_id)
        return written

    def _merge_current(self, entity: Entity, rows: list[dict[str, Any]], batch_id: int) -> int:
        assert entity.current is not None
        table = self._table(entity.current)
        if self._done(table, batch_id):
            return 0
        schema = entity.current_schema()
        source = _arrow(rows, schema, [("_deleted", pa.bool_())])
        on = " AND ".join(f"t.{_quote(k)} = s.{_quote(k)}" for k in entity.key_names)
        columns = {_quote(f.name): f"s.{_quote(f.name)}" for f in schema}
        (table.merge(source, on, source_alias="s", target_alias="t", commit_properties=self._commit(batch_id))
         .when_matched_delete(predicate="s._deleted")
         .when_matched_update(columns, predicate="NOT s._deleted")
         .when_not_matched_insert(columns, predicate="NOT s._deleted")
         .execute())
        return len(rows)

    def _merge_history(self, entity: Entity, rows: list[dict[str, Any]], batch_id: int) -> int:
        table = self._table(entity.history)
        if self._done(table, batch_id):
            return 0
        hi = entity.interval[1]
        schema = entity.history_schema()
        source = _arrow(rows, schema, [("_close", pa.bool_())])
        on = " AND ".join([*(f"t.{_quote(k)} = s.{_quote(k)}" for k in entity.key_names),
                           f"t.{hi}_offset IS NULL", "s._close"])
        (table.merge(source, on, source_alias="s", target_alias="t", commit_properties=self._commit(batch_id))
         .when_matched_update({f"{hi}_offset": f"s.{hi}_offset", f"{hi}_time": f"s.{hi}_time"})
         .when_not_matched_insert({_quote(f.name): f"s.{_quote(f.name)}" for f in schema}, predicate="NOT s._close")
         .execute())
        return sum(1 for r in rows if not r["_close"])


class DeltaSparkWriter:
    """The cluster writer: the same tables through delta-spark (needs the Delta jars on the session's classpath;
    not exercised by this repository's tests, which have no Maven access). Idempotence uses Delta's
    ``txnAppId``/``txnVersion`` writer options for appends and the same MERGE statements otherwise."""

    def __init__(self, spark: Any, tables_dir: str | Path, app_id: str) -> None:
        self.spark = spark
        self.root = str(tables_dir).rstrip("/")
        self.app_id = app_id

    def ensure_tables(self) -> None:
        for name, schema in table_schemas().items():
            spark_schema = self.spark.createDataFrame(pa.table({f.name: pa.array([], f.type) for f in schema}))
            spark_schema.write.format("delta").mode("ignore").save(f"{self.root}/{name}")

    def write_batch(self, batch_id: int, rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
        # delta-spark exists only on clusters that have the Delta jars; it is not a dependency of this package.
        from delta.tables import DeltaTable as SparkDeltaTable  # type: ignore[import-not-found]  # noqa: PLC0415

        plan = plan_batch(rows)
        schemas = table_schemas()
        written: dict[str, int] = {}
        for name, append_rows in plan.appends.items():
            df = self.spark.createDataFrame(_arrow(append_rows, schemas[name]))
            (df.write.format("delta").mode("append").option("txnAppId", self.app_id)
             .option("txnVersion", batch_id).save(f"{self.root}/{name}"))
            written[name] = len(append_rows)
        for entity in ENTITIES.values():
            for table, source_rows, schema, flag in (
                    (entity.current, plan.upserts.get(entity.current or ""), entity.current_schema(), "_deleted"),
                    (entity.history, plan.versions.get(entity.history), entity.history_schema(), "_close")):
                if table is None or not source_rows:
                    continue
                self.spark.conf.set("spark.databricks.delta.write.txnAppId", self.app_id)
                self.spark.conf.set("spark.databricks.delta.write.txnVersion", str(batch_id))
                source = self.spark.createDataFrame(_arrow(source_rows, schema, [(flag, pa.bool_())]))
                target = SparkDeltaTable.forPath(self.spark, f"{self.root}/{table}")
                on = " AND ".join(f"t.`{k}` = s.`{k}`" for k in entity.key_names)
                columns = {f"`{f.name}`": f"s.`{f.name}`" for f in schema}
                merge = target.alias("t").merge(source.alias("s"), on if flag == "_deleted" else
                                                f"{on} AND t.{entity.interval[1]}_offset IS NULL AND s._close")
                if flag == "_deleted":
                    merge = (merge.whenMatchedDelete("s._deleted").whenMatchedUpdate("NOT s._deleted", columns)
                             .whenNotMatchedInsert("NOT s._deleted", columns))
                else:
                    hi = entity.interval[1]
                    merge = (merge.whenMatchedUpdate(set={f"{hi}_offset": f"s.{hi}_offset",
                                                          f"{hi}_time": f"s.{hi}_time"})
                             .whenNotMatchedInsert("NOT s._close", columns))
                merge.execute()
                written[table] = len(source_rows)
        self.spark.conf.unset("spark.databricks.delta.write.txnAppId")
        self.spark.conf.unset("spark.databricks.delta.write.txnVersion")
        return written


# ---------------------------------------------------------------------------------------------------------------
# Readers


def read_table(tables_dir: str | Path, table: str, where: str | None = None) -> pa.Table:
    """A table's live rows, read through its Delta log (``where``: a SQL condition on its columns)."""
    path = Path(tables_dir) / table
    if not DeltaTable.is_deltatable(str(path)):
        raise InputError(f"{path} is not a Delta table (run `jbod run` first, or check --tables)")
    sql = f"SELECT * FROM t{'' if where is None else ' WHERE ' + where}"
    return pa.table(QueryBuilder().register("t", DeltaTable(str(path))).execute(sql))


def _lit(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def clusters(tables_dir: str | Path) -> list[str]:
    """The cluster ids the tables hold."""
    path = Path(tables_dir) / "records"
    if not DeltaTable.is_deltatable(str(path)):
        raise InputError(f"{path} is not a Delta table (run `jbod run` first, or check --tables)")
    out = pa.table(QueryBuilder().register("t", DeltaTable(str(path)))
                   .execute("SELECT DISTINCT cluster_id FROM t ORDER BY cluster_id"))
    return [str(c) for c in out.column("cluster_id").to_pylist()]


def resolve_cluster(tables_dir: str | Path, cluster: str | None) -> str:
    known = clusters(tables_dir)
    if cluster is not None:
        if cluster not in known:
            raise InputError(f"cluster {cluster!r} is not in {tables_dir} (clusters: {', '.join(known) or 'none'})")
        return cluster
    if len(known) != 1:
        raise InputError(f"{tables_dir} holds {len(known)} clusters ({', '.join(known) or 'none'}): "
                         "name one with --cluster")
    return known[0]


def _rows(tables_dir: str | Path, entity: Entity, cluster: str, as_of_offset: int | None) -> list[dict[str, Any]]:
    where = f"cluster_id = {_lit(cluster)}"
    if as_of_offset is None and entity.current is not None:
        return list(read_table(tables_dir, entity.current, where).to_pylist())
    lo, hi = entity.interval
    if as_of_offset is None:
        where += f" AND {hi}_offset IS NULL"
    else:
        n = int(as_of_offset)
        where += f" AND {lo}_offset <= {n} AND ({hi}_offset IS NULL OR {hi}_offset > {n})"
    return list(read_table(tables_dir, entity.history, where).to_pylist())


def last_offset(tables_dir: str | Path, cluster: str, as_of_offset: int | None = None) -> int:
    """The image's provenance: the last offset that took effect (at or before ``as_of_offset``), -1 if none."""
    where = f"cluster_id = {_lit(cluster)} AND applied_offset IS NOT NULL"
    if as_of_offset is not None:
        where += f" AND applied_offset <= {int(as_of_offset)}"
    path = Path(tables_dir) / "records"
    if not DeltaTable.is_deltatable(str(path)):
        raise InputError(f"{path} is not a Delta table (run `jbod run` first, or check --tables)")
    out = pa.table(QueryBuilder().register("t", DeltaTable(str(path)))
                   .execute(f'SELECT MAX("offset") AS m FROM t WHERE {where}'))
    value = out.column("m")[0].as_py()
    return -1 if value is None else int(value)


def as_of_image(tables_dir: str | Path, cluster: str | None = None, as_of_offset: int | None = None,
                ) -> dict[str, Any]:
    """The image JSON (docs/image-json.md) of ``cluster`` as of ``as_of_offset`` (every record with offset ≤ N
    replayed; None = the latest state), read from the tables: equal to ``image_to_json`` of the model's replay of
    the same records."""
    cid = resolve_cluster(tables_dir, cluster)
    features = {r["name"]: r["level"] for r in _rows(tables_dir, ENTITIES["feature"], cid, as_of_offset)}
    level = int(features.get(FEATURE_NAME, 0))
    brokers = sorted(({"brokerId": r["broker_id"], "brokerEpoch": r["broker_epoch"],
                       "incarnationId": r["incarnation_id"], "fenced": r["fenced"],
                       "inControlledShutdown": r["in_controlled_shutdown"], "logDirs": list(r["log_dirs"])}
                      for r in _rows(tables_dir, ENTITIES["broker"], cid, as_of_offset)),
                     key=lambda b: b["brokerId"])
    topics = sorted(({"topicId": r["topic_id"], "name": r["topic_name"]}
                     for r in _rows(tables_dir, ENTITIES["topic"], cid, as_of_offset)), key=lambda t: t["topicId"])
    partitions = sorted(
        ({"topicId": r["topic_id"], "partitionId": r["partition_id"], "replicas": list(r["replicas"]),
          "isr": list(r["isr"]), "leader": r["leader"], "leaderEpoch": r["leader_epoch"],
          "partitionEpoch": r["partition_epoch"], "directories": list(r["directories"]),
          "addingReplicas": list(r["adding_replicas"]), "removingReplicas": list(r["removing_replicas"]),
          "eligibleLeaderReplicas": list(r["eligible_leader_replicas"]), "lastKnownElr": list(r["last_known_elr"])}
         for r in _rows(tables_dir, ENTITIES["partition"], cid, as_of_offset)),
        key=lambda p: (p["topicId"], p["partitionId"]))
    replicas = sorted(
        ({"topicId": r["topic_id"], "partitionId": r["partition_id"], "brokerId": r["broker_id"],
          "directory": r["directory"], "directoryState": r["directory_state"], "offline": r["offline"],
          "offlineReason": r["offline_reason"]}
         for r in _rows(tables_dir, ENTITIES["replica"], cid, as_of_offset)),
        key=lambda r: (r["topicId"], r["partitionId"], r["brokerId"]))
    return {"featureLevel": level, "metadataVersion": MetadataVersion(level).name,
            "lastOffset": last_offset(tables_dir, cid, as_of_offset), "brokers": brokers, "topics": topics,
            "partitions": partitions, "replicas": replicas}


def offline_intervals(tables_dir: str | Path, cluster: str | None = None) -> list[dict[str, Any]]:
    """Every offline interval of a cluster (or of all clusters), ordered by start offset."""
    where = None if cluster is None else f"cluster_id = {_lit(cluster)}"
    rows = read_table(tables_dir, "offline_replicas", where).to_pylist()
    return sorted(rows, key=lambda r: (r["cluster_id"], r["start_offset"], r["topic_id"], r["partition_id"],
                                       r["broker_id"]))
