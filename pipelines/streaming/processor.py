"""The stateful operator: each cluster's entries, in offset order, through ``jbod_model``; out come table rows.

A short adapter (decode rows → ``jbod_model`` → encode rows), run by ``transformWithStateInPandas`` with one grouping
key per cluster id and replay bucket (the processor class and its state's declarations:
:mod:`pipelines.streaming.stateful`). The cluster's image lives in keyed state (docs/state-design.md):

================  =========================================  ================================================
state variable    key → value                                why
================  =========================================  ================================================
``meta``          (value) last offset, open transaction,     one small row per cluster
                  controller state, halt reason
``features``      name → level                               a handful; read whole
``brokers``       broker id → registration                   scanned only for directory ownership
``topics``        topic id → name, partition-id ranges       a topic's partition list without a scan
``topic_names``   name → topic id                            name uniqueness checks
``partitions``    (topic id, partition id) → registration    the bulk: read and written key by key
``broker_parts``  (broker id, bucket) → partition keys by    which replicas a fenced broker or failed disk hits,
                  directory                                  and in which directory
``configs``       (resource type, name) → key/values         dropped with their topic; the controller reads them
================  =========================================  ================================================

:class:`StateStore` reads these one key at a time (cached for the batch) as a
:class:`jbod_model.changes.ImageReader`, :class:`jbod_model.changes.IncrementalReplayer` replays the batch on lazy
views of them, and only the keys its steps changed are written back. Every rule is the model's: this module only
moves values between Spark state, ``jbod_model`` objects and output rows.

Output rows are typed, table by table (``pipelines.lakehouse.tables.operator_schema``): either a row of an
append-only table (``records``, ``controller_responses``, ``replay_faults``, ``log_gaps``) or a change event of a
keyed entity (its key, ``o`` offset, ``t`` ms, the new value's columns, ``removed``) that
:mod:`pipelines.lakehouse.tables` turns into current and history rows. A task writes them as files, one per table
(:func:`pipelines.lakehouse.staging.write_part`), and returns only their names (:data:`OUTPUT_SCHEMA`).
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeAlias, cast

import numpy as np
import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.streaming.stateful_processor import MapState, ValueState

from jbod_model.buckets import cluster_halt, owned_routed_step, past_halt, writes_routed_bronze_row
from jbod_model.changes import (
    ImageWrites,
    IncrementalReplayer,
    PartitionKey,
    ReplicaChange,
    ReplicaGroup,
    Step,
    StoredTopic,
    response_partition_errors,
    resume_controller,
)
from jbod_model.controller.controller import CONTROLLER_SOURCE, ReferenceController
from jbod_model.errors import InputError, JbodError, ReplayFault
from jbod_model.gaps import Consequence, GapConsequences
from jbod_model.image import BrokerRegistration, PartitionRegistration
from jbod_model.records.entry import LogEntry
from jbod_model.records.json_codec import dumps_without_floats as dumps
from jbod_model.records.json_codec import record_to_json
from jbod_model.records.metadata import PartitionChangeRecord
from jbod_model.replicas import ReplicaState
from jbod_model.slots import gc_paused
from jbod_model.stream import RequestEntry
from jbod_model.uuid import Uuid
from pipelines.lakehouse.staging import Part, owned, write_part
from pipelines.lakehouse.tables import ENTITIES, operator_schema
from pipelines.streaming.codec import (
    DATA,
    GAP_FROM,
    GAP_LAST,
    INPUT,
    KIND,
    MESSAGE,
    OFFSET,
    PACKED_FIELDS,
    PAYLOAD,
    SEQ,
    SNAPSHOT_END,
    SNAPSHOT_INDEX,
    SOURCE,
    TYPE,
    VERSION,
    PartitionChunk,
    broker_from_text,
    broker_to_text,
    controller_state_from_text,
    controller_state_to_text,
    entries_from_text,
    entries_to_text,
    packed_row,
    packed_state,
    row_to_entry,
    state_text,
    unpack_rows,
)

#: The operator's output schema: one row per file a bucket's batch wrote — the bucket's rows of one table (see
#: :class:`RowSink`) as typed Arrow columns (:func:`pipelines.lakehouse.staging.write_part`), and how many. The rows
#: themselves never pass through Spark (pipelines.lakehouse.staging, "Output files").
OUTPUT_SCHEMA = "cluster_id string, bucket int, table string, file string, rows long"


@functools.cache
def _sink_schema(table: str) -> pa.Schema:
    return pa.schema([("ord", pa.int64()), ("at", pa.int64()), *operator_schema(table)])


@functools.cache
def _sink_row_type(table: str) -> pa.StructType:
    """A sink row of ``table`` (a tuple, by position) as one struct value."""
    return pa.struct(list(_sink_schema(table)))


#: Buckets per broker of the broker → partitions index: listing a broker is this many state reads (each a round trip
#: to the JVM), adding a partition to it rewrites one of them. 64 made the index reads a tenth of the operator's time
#: on the 20 k cluster (every batch fences or restarts most brokers); with 8, a 200 k batch still rewrote 70 % of the
#: index's values, one call each (layout 7: 2; docs/state-design.md, "eleventh round"). Fixed in the checkpoint:
#: changing it needs a new one.
BROKER_INDEX_BUCKETS = 2


#: Chunks of a cluster bucket's ``partitions`` state: a state value holds every partition of one chunk, so a batch
#: makes one read and at most one write per chunk it touches instead of one per partition (each call is a round trip
#: to the JVM, ≈ 85 µs). A chunk keeps each partition's text apart (``codec.PartitionChunk``, state layouts 5 and 8): a
#: batch parses only the partitions the model asks for and serializes only those it changed. A batch of a few
#: thousand rows touches every chunk, whatever their number, so fewer chunks are fewer writes of the same bytes
#: (layout 7: 64, was 256); a batch of one record rewrites a 64th of its bucket's partitions. Fixed in the checkpoint:
#: changing it needs a new one.
PARTITION_CHUNKS = 64


#: A bucket's micro-batch of at least this many input rows reads each state variable it asks about whole, in one
#: streamed call (``MapState.iterator``: the JVM sends up to 10,000 pairs a round trip), instead of one call per key.
#: Such a batch touches every partition chunk (2,000 rows over 64 chunks, ≈ 31 a chunk) and asks for most topics and
#: brokers, and every call is a round trip, costlier the busier the cores are: with layout 7 the 200 k benchmark's
#: calls fell from 37,600 to 6,100, the job 8 % faster at ``local[1]``, within noise at ``local[2]`` on a quiet box
#: (docs/state-design.md, "eleventh round"). Smaller batches — an incremental run's last one, a streaming job's
#: trickle — read only the keys they ask for.
BULK_READ_ROWS = 2_000

#: Of the brokers a bulk-reading batch lists the partitions of (``partitions_on_broker``), the share after which the
#: rest of the brokers' index is read whole: a batch that fences or restarts many brokers lists most of them (the
#: whole index then costs what their keys would, in one call); one that fences a few would read far more than it
#: needs at millions of partitions.
BULK_INDEX_SHARE = 0.25


#: State variables read whole at their first use in every batch, bulk or not: a cluster has at most a few thousand
#: brokers, and a broker's registration reads every other one (a directory belongs to one broker, R4.1) — one
#: streamed call instead of one round trip per broker, for each bucket of each cluster in each batch. A fleet's
#: micro-batch gives each cluster a small share of its entries (``source.share_budget``), below
#: :data:`BULK_READ_ROWS` a bucket: 50 clusters of 20 k partitions spent 16 % of the operator's time there.
READ_WHOLE = frozenset({"brokers"})


def _bucket(key_text: str) -> int:
    return zlib.crc32(key_text.encode()) % BROKER_INDEX_BUCKETS


def _chunk(key_text: str) -> int:
    # Adler-32, not the CRC-32 of the replay buckets and index buckets: a chunk must not be correlated with the
    # bucket that holds it, or a bucket would use only some of its chunks.
    return zlib.adler32(key_text.encode()) % PARTITION_CHUNKS


def _key_text(key: PartitionKey) -> str:
    return f"{key[0]}:{key[1]}"




class StateStore:
    """A :class:`jbod_model.changes.ImageReader` over one cluster's state variables, with the batch's writes.

    With ``bulk``, each state variable is read whole at its first use (see :data:`BULK_READ_ROWS`); the brokers'
    index is read whole once the batch has listed :data:`BULK_INDEX_SHARE` of the brokers. Either way, a value is
    read at most once per batch: the model reads the image as stored before the batch, and :meth:`write` (its end)
    starts from the values read."""

    def __init__(self, handles: Mapping[str, MapState], meta: tuple[Any, ...] | None, *, bulk: bool = False) -> None:
        self._h = handles
        self._last_offset = -1 if meta is None or meta[0] is None else int(meta[0])
        self._bulk = bulk
        self._features: dict[str, int] | None = None
        # Chunks of the partitions state read so far (each partition still text: parsed when the model asks for it,
        # which it does once per batch), and which of them are stored.
        self._chunks: dict[int, PartitionChunk] = {}
        self._stored_chunks: set[int] = set()
        # Topic and directory ids parsed so far: a broker's index lists thousands of partitions of a few hundred
        # topics in a handful of directories.
        self._ids: dict[str, Uuid] = {}
        # State variables read whole (bulk): name → key → value; the partition chunks read whole go to _chunks.
        self._whole: dict[str, dict[tuple[Any, ...], tuple[Any, ...]]] = {}
        self._all_chunks_read = False
        # The brokers' index values read so far ((broker, index bucket) → text or None), and the brokers listed.
        self._index: dict[tuple[int, int], str | None] = {}
        self._listed: set[int] = set()

    def _all(self, name: str) -> dict[tuple[Any, ...], tuple[Any, ...]]:
        """Every key and value of the state variable ``name``, read in one streamed call at its first use."""
        found = self._whole.get(name)
        if found is None:
            found = self._whole[name] = {tuple(k): tuple(v) for k, v in self._h[name].iterator()}
        return found

    def _get(self, name: str, key: tuple[Any, ...]) -> tuple[Any, ...] | None:
        if self._bulk or name in READ_WHOLE:
            return self._all(name).get(key)
        value = self._h[name].getValue(key)
        return None if value is None else tuple(value)

    def _keys(self, name: str) -> Iterable[tuple[Any, ...]]:
        return self._all(name).keys() if self._bulk or name in READ_WHOLE else self._h[name].keys()

    def _id(self, text: str) -> Uuid:
        found = self._ids.get(text)
        if found is None:
            found = self._ids[text] = Uuid.from_string(text)
        return found

    def _key_from_text(self, text: str) -> PartitionKey:
        topic, _, pid = text.rpartition(":")
        return self._id(topic), int(pid)

    def _partition_chunk(self, chunk: int) -> PartitionChunk:
        found = self._chunks.get(chunk)
        if found is not None:
            return found
        if self._bulk:
            if not self._all_chunks_read:
                self._all_chunks_read = True
                for key, stored in self._h["partitions"].iterator():
                    self._chunks[int(key[0])] = PartitionChunk.from_text(state_text(stored[0]), self._id)
                    self._stored_chunks.add(int(key[0]))
            found = self._chunks.get(chunk)
            if found is None:
                found = self._chunks[chunk] = PartitionChunk([], {})
            return found
        value = self._h["partitions"].getValue((chunk,))
        found = self._chunks[chunk] = (PartitionChunk([], {}) if value is None
                                       else PartitionChunk.from_text(state_text(value[0]), self._id))
        if value is not None:
            self._stored_chunks.add(chunk)
        return found

    def _index_value(self, broker_id: int, bucket: int) -> str | None:
        """One value of the brokers' index (the text of a ``broker_parts`` key), read at most once per batch."""
        key = (broker_id, bucket)
        if key not in self._index:
            whole = self._whole.get("broker_parts")
            value = whole.get(key) if whole is not None else self._h["broker_parts"].getValue(key)
            self._index[key] = None if value is None else state_text(value[0])
        return self._index[key]

    def last_offset(self) -> int:
        return self._last_offset

    def feature_levels(self) -> Mapping[str, int]:
        if self._features is None:
            self._features = {k[0]: int(v[0]) for k, v in self._h["features"].iterator()}
        return self._features

    def broker(self, broker_id: int) -> BrokerRegistration | None:
        value = self._get("brokers", (broker_id,))
        return None if value is None else broker_from_text(value[0])

    def broker_ids(self) -> Iterable[int]:
        return [int(k[0]) for k in self._keys("brokers")]

    def topic(self, topic_id: Uuid) -> StoredTopic | None:
        value = self._get("topics", (str(topic_id),))
        if value is None:
            return None
        # A bucket holds a hashed share of a topic's partitions: its ids are many short ranges (≈ 190 for 1,000
        # partitions over 4 buckets), read by every batch that touches the topic; tuple(map(...)) builds them in C.
        return StoredTopic(value[0], tuple(map(tuple, orjson.loads(value[1]))))

    def topic_name(self, topic_id: Uuid) -> str | None:
        value = self._get("topics", (str(topic_id),))
        return None if value is None else str(value[0])

    def topic_ids(self) -> Iterable[Uuid]:
        return [Uuid.from_string(k[0]) for k in self._keys("topics")]

    def topic_id_by_name(self, name: str) -> Uuid | None:
        value = self._get("topic_names", (name,))
        return None if value is None else Uuid.from_string(value[0])

    def partition(self, topic_id: Uuid, partition_id: int) -> PartitionRegistration | None:
        key = _key_text((topic_id, partition_id))
        return self._partition_chunk(_chunk(key)).get(key)

    def partitions_on_broker(self, broker_id: int) -> Mapping[PartitionKey, Uuid]:
        self._listed.add(broker_id)
        if (self._bulk and "broker_parts" not in self._whole
                and len(self._listed) >= BULK_INDEX_SHARE * len(self._all("brokers"))):
            self._all("broker_parts")
        out: dict[PartitionKey, Uuid] = {}
        for bucket in range(BROKER_INDEX_BUCKETS):
            value = self._index_value(broker_id, bucket)
            if value is not None:
                for directory, keys in orjson.loads(value).items():
                    out.update(dict.fromkeys(map(self._key_from_text, keys), self._id(directory)))
        return out

    def config(self, resource: tuple[int, str]) -> Mapping[str, str] | None:
        value = self._get("configs", (int(resource[0]), str(resource[1])))
        return None if value is None else dict(orjson.loads(value[0]))

    def config_resources(self) -> Iterable[tuple[int, str]]:
        return [(int(k[0]), str(k[1])) for k in self._keys("configs")]

    def write(self, w: ImageWrites) -> None:
        """Store a batch's writes: only the keys that changed."""
        h = self._h
        self._last_offset = w.last_offset
        self._put("features", {(k,): None if v is None else (v,) for k, v in w.features.items()})
        self._put("brokers", {(k,): None if v is None else (broker_to_text(v),) for k, v in w.brokers.items()})
        self._put("topics", {(str(k),): None if v is None else (v.name, dumps([list(r) for r in v.partition_ids]))
                             for k, v in w.topics.items()})
        self._put("topic_names", {(k,): None if v is None else (str(v),) for k, v in w.topic_names.items()})
        by_chunk: dict[int, dict[str, PartitionRegistration | None]] = {}
        for key, part in w.partitions.items():
            text = _key_text(key)
            by_chunk.setdefault(_chunk(text), {})[text] = part
        for chunk, chunk_changes in by_chunk.items():
            values = self._partition_chunk(chunk)
            # The partitions the batch left alone are written back as the text they were read as.
            for text, part in chunk_changes.items():
                values.put(text, part)
            if values.texts:
                h["partitions"].updateValue((chunk,), (packed_state(values.to_text()),))
                self._stored_chunks.add(chunk)
            elif chunk in self._stored_chunks:
                h["partitions"].removeKey((chunk,))
                self._stored_chunks.discard(chunk)
        # int(): the model keys topic configs by ConfigResourceType (an IntEnum), which the state store cannot hold.
        self._put("configs", {(int(k[0]), str(k[1])): None if v is None else (dumps(dict(v)),)
                              for k, v in w.configs.items()})
        for broker_id, changes in w.broker_partitions.items():
            by_bucket: dict[int, dict[str, str | None]] = {}
            for key, directory in changes.items():
                text = _key_text(key)
                by_bucket.setdefault(_bucket(text), {})[text] = None if directory is None else str(directory)
            for bucket, bucket_changes in by_bucket.items():
                current = self._index_value(broker_id, bucket)
                placed = {} if current is None else _placements_from_text(current)
                for text, place in bucket_changes.items():
                    if place is None:
                        placed.pop(text, None)
                    else:
                        placed[text] = place
                stored = _placements_to_text(placed) if placed else None
                if stored is not None:
                    h["broker_parts"].updateValue((broker_id, bucket), (packed_state(stored),))
                elif current is not None:
                    h["broker_parts"].removeKey((broker_id, bucket))
                self._index[(broker_id, bucket)] = stored

    def _put(self, name: str, values: Mapping[tuple[Any, ...], tuple[Any, ...] | None]) -> None:
        """Store ``values`` in the state variable ``name`` (None: remove the key), and in its copy if read whole."""
        state, whole = self._h[name], self._whole.get(name)
        for key, value in values.items():
            if value is None:
                if whole is None:
                    if state.containsKey(key):
                        state.removeKey(key)
                elif whole.pop(key, None) is not None:
                    state.removeKey(key)
            else:
                state.updateValue(key, value)
                if whole is not None:
                    whole[key] = value


def _placements_from_text(text: str) -> dict[str, str]:
    """A ``broker_parts`` value (a JSON object: directory id → the partition keys' texts in it) as key text →
    directory text."""
    return {key: directory for directory, keys in orjson.loads(text).items() for key in keys}


def _placements_to_text(placed: Mapping[str, str]) -> str:
    """:func:`_placements_from_text`'s inverse, keys and directories sorted (the same index, the same text)."""
    by_directory: dict[str, list[str]] = {}
    for key in sorted(placed):
        by_directory.setdefault(placed[key], []).append(key)
    return dumps(dict(sorted(by_directory.items())))


# ---------------------------------------------------------------------------------------------------------------
# Encoding steps as rows


def _broker_value(reg: BrokerRegistration) -> tuple[Any, ...]:
    return (reg.epoch, str(reg.incarnation_id), reg.fenced, reg.in_controlled_shutdown, reg.is_migrating_zk_broker,
            reg.rack, [str(d) for d in reg.directories],
            dumps([{"name": e.name, "host": e.host, "port": e.port, "securityProtocol": e.security_protocol}
                   for e in reg.listeners]))


def _replica_value(name: str, r: ReplicaState) -> tuple[Any, ...]:
    return (name, str(r.directory), r.directory_state.value, r.offline,
            r.offline_reason.value if r.offline_reason else None)


def _offline_value(name: str, r: ReplicaState | None) -> tuple[Any, ...] | None:
    if r is None or not r.offline:
        return None
    return name, str(r.directory), r.directory_state.value, r.offline_reason.value if r.offline_reason else None


def _offline_key(r: ReplicaState | None) -> tuple[Any, ...] | None:
    """What of a replica its ``offline_replicas`` row holds besides the topic's name (the same before and after a
    change): two states with equal keys have equal rows."""
    if r is None or not r.offline:
        return None
    return r.directory, r.directory_state, r.offline_reason


#: Each entity's value columns, all null: its row of a removal.
_REMOVED_VALUES: Mapping[str, tuple[None, ...]] = {name: (None,) * len(e.value) for name, e in ENTITIES.items()}


#: A cluster bucket's input rows of one micro-batch: packed (``codec.unpack_rows``, a worker's), or by column name
#: (a pandas frame or dicts).
InputBatch: TypeAlias = pd.DataFrame | Sequence[Sequence[Any]] | Sequence[Mapping[str, Any]] | None


class _ReplicaGroups:
    """The rows of a sink's replica groups (``Step.replica_groups``), kept as columns until they become the
    ``replica`` and ``offline`` tables' record batches (:meth:`batches`).

    A fenced or unfenced broker's group holds each of its replicas in a bucket: ≈ 4.4 M rows over the 200 k log, of
    1,051 groups in one bucket (median 416 replicas). All but a row's key, its topic's name and its ``ord`` are the
    group's, so a group adds one value per such column (and its size), its keys and names as lists; each column is
    then made once for all groups — a value repeated by ``take``, ``ord`` by numpy — rather than from a Python value
    per row and column (≈ 40 ns each), or as arrays per group (≈ 20 pyarrow calls a group)."""

    __slots__ = ("broker_ids", "directories", "firsts", "names", "offsets", "partition_ids", "reasons", "sizes",
                 "states", "timestamps", "topics")

    def __init__(self) -> None:
        # Per group: its size, the sink's row count before it, and its repeated values.
        self.sizes: list[int] = []
        self.firsts: list[int] = []
        self.offsets: list[int] = []
        self.timestamps: list[int | None] = []
        self.broker_ids: list[int] = []
        self.directories: list[str] = []
        self.states: list[str] = []
        #: The new offline reason's value; None: the group came back online.
        self.reasons: list[str | None] = []
        # Per row: the replica's key and its topic's name.
        self.topics: list[str] = []
        self.partition_ids: list[int] = []
        self.names: list[str | None] = []

    def add(self, step: Step, g: ReplicaGroup, first: int, topic_texts: dict[Uuid, str]) -> None:
        """Keep ``g``'s rows; ``first``: the sink's row count before them (its replica rows' ``ord`` follow from it),
        ``topic_texts``: the sink's topic id texts (filled in as needed)."""
        self.sizes.append(len(g.partitions))
        self.firsts.append(first)
        self.offsets.append(step.offset)
        self.timestamps.append(step.timestamp)
        self.broker_ids.append(g.broker_id)
        self.directories.append(str(g.directory))
        self.states.append(g.directory_state.value)
        self.reasons.append(None if g.new_reason is None else g.new_reason.value)
        topics, partition_ids = self.topics, self.partition_ids
        for topic_id, partition_id in g.partitions:
            text = topic_texts.get(topic_id)
            if text is None:
                text = topic_texts[topic_id] = str(topic_id)
            topics.append(text)
            partition_ids.append(partition_id)
        self.names.extend(g.topic_names)

    def batches(self, buckets: int, bucket: int) -> dict[str, pa.RecordBatch]:
        """The ``replica`` and ``offline`` rows as record batches of their sink schemas (none without a group).

        A group of ``n`` replicas whose first row is the sink's row ``first`` has replica rows at ``first``,
        ``first + 2``, … and offline rows right after each (``RowSink.add``'s ``ord``: row × buckets + bucket)."""
        if not self.sizes:
            return {}
        sizes = np.array(self.sizes, dtype=np.int64)
        group = np.repeat(np.arange(len(sizes)), sizes)
        # A row's place in its group: its index less its group's first index.
        within = np.arange(len(group)) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        replica_ord = (np.repeat(np.array(self.firsts, dtype=np.int64), sizes) + 2 * within) * buckets + bucket
        take = pa.array(group)

        def repeated(values: list[Any], kind: pa.DataType) -> pa.Array:
            return pa.array(values, kind).take(take)

        at = repeated(self.offsets, pa.int64())  # the step's offset: each row's ``at`` and ``o``
        head = [at, pa.array(self.topics, pa.string()), pa.array(self.partition_ids, pa.int32()),
                repeated(self.broker_ids, pa.int32()), at, repeated(self.timestamps, pa.int64())]
        names = pa.array(self.names, pa.string())
        directory, state = repeated(self.directories, pa.string()), repeated(self.states, pa.string())
        # Back online (no new reason): the offline interval's removal row, its values null.
        reason, removed = repeated(self.reasons, pa.string()), repeated([r is None for r in self.reasons], pa.bool_())
        online = pc.invert(removed)
        gone = pa.nulls(len(group), pa.string())
        replica = [pa.array(replica_ord), *head, names, directory, state, online, reason,
                   pa.repeat(pa.scalar(False), len(group))]
        offline = [pa.array(replica_ord + buckets), *head, pc.if_else(online, names, gone),
                   pc.if_else(online, directory, gone), pc.if_else(online, state, gone), reason, removed]
        return {"replica": pa.RecordBatch.from_arrays(replica, schema=_sink_schema("replica")),
                "offline": pa.RecordBatch.from_arrays(offline, schema=_sink_schema("offline"))}


class RowSink:
    """Collects one cluster bucket's output rows in order, table by table, as typed values in each table's
    :func:`pipelines.lakehouse.tables.operator_schema` order, each with its ``ord`` and the offset of the step it
    belongs to (``at``; None for a controller response).

    ``ord`` is unique across a cluster's buckets (``index × buckets + bucket``) and increases within a bucket, where
    every key's events are (a key belongs to one bucket)."""

    def __init__(self, cluster_id: str, origin: str, bucket: int = 0, buckets: int = 1,
                 snapshot_index: Mapping[int, int] | None = None) -> None:
        self.cluster_id = cluster_id
        self.origin = origin
        self.bucket = bucket
        self.buckets = buckets
        #: Snapshot record offset (local to the file) → its index among the snapshot's records.
        self.snapshot_index = snapshot_index or {}
        #: Table → its rows: ``(ord, at, *values)``.
        self.rows: dict[str, list[tuple[Any, ...]]] = {}
        #: The replica groups' rows (:meth:`_replica_group`), made into columns by :meth:`tables`.
        self._groups = _ReplicaGroups()
        #: Rows added so far, over every table: the next row's index (its ``ord`` is derived from it).
        self.count = 0
        #: The batch's input records by offset: their packed rows (``codec.unpack_rows``) as the source wrote them.
        self._inputs: dict[int, Sequence[Any]] = {}
        #: Topic ids' texts: a group lists thousands of partitions of a few hundred topics.
        self._topic_texts: dict[Uuid, str] = {}
        #: A registration's directories → their texts, one list shared by its rows (read only): most changes of a
        #: partition (a leader, an ISR) keep its directories, and three ids' texts cost more than the lookup.
        self._directory_texts: dict[tuple[Uuid, ...], list[str]] = {}

    def remember(self, row: Sequence[Any]) -> None:
        """Keep an input row's record text (a packed row, ``codec.unpack_rows``) for its bronze row: the source wrote
        it with the same codec (``json_codec.record_to_json``) the bronze row would use, so the record need not be
        encoded again."""
        offset = row[OFFSET]
        if offset is not None:
            self._inputs[offset] = row  # the row itself, not a copy of its fields: record() takes it out once used

    def add(self, table: str, values: tuple[Any, ...], at: int | None = None) -> None:
        self._table(table).append((self.count * self.buckets + self.bucket, at, *values))
        self.count += 1

    def tables(self) -> dict[str, pa.Table]:
        """The rows as typed tables: ``ord``, ``at`` and the table's :func:`operator_schema` columns. No value
        becomes text: the rows (tuples) become one struct array in one call, which pyarrow converts in C — taking
        them apart into columns first (an ``itemgetter`` pass per column) cost ≈ 1.4× as much at 200 k partitions
        (docs/state-design.md, "fifteenth round") —, and the replica groups' rows become columns once for all the
        groups (:class:`_ReplicaGroups`). The rows' order is not the tables' (the driver sorts a batch by ``ord``,
        pipelines.lakehouse.tables.plan_batch)."""
        out = {}
        grouped = self._groups.batches(self.buckets, self.bucket)
        for name in {**self.rows, **grouped}:
            batches = []
            rows = self.rows.get(name)
            if rows:
                batches.append(pa.RecordBatch.from_struct_array(pa.array(rows, _sink_row_type(name))))
            if name in grouped:
                batches.append(grouped[name])
            if batches:
                out[name] = pa.Table.from_batches(batches, schema=_sink_schema(name))
        return out

    def event(self, entity: str, key: tuple[Any, ...], step: Step, value: tuple[Any, ...] | None) -> None:
        if value is None:
            self.add(entity, (*key, step.offset, step.timestamp, *_REMOVED_VALUES[entity], True), step.offset)
        else:
            self.add(entity, (*key, step.offset, step.timestamp, *value, False), step.offset)

    def record(self, entry: LogEntry, applied: int | None, at: int, snapshot_index: int | None = None,
               offset: int | None = None) -> None:
        origin = "controller" if entry.source == CONTROLLER_SOURCE else \
            "snapshot" if snapshot_index is not None else self.origin
        # Taken out: a record has one bronze row, and its input row is then free to go.
        known = self._inputs.pop(entry.offset, None) if origin == self.origin else None
        if known is not None and known[SOURCE] == entry.source:
            type_name, version, data, payload = known[TYPE], known[VERSION], known[DATA], known[PAYLOAD]
        else:
            obj = record_to_json(entry.record)
            type_name, version, payload = obj["type"], obj["version"], obj.get("payload")
            data = None if obj.get("data") is None else dumps(obj["data"])
        self._record_row(entry, at, entry.offset if offset is None else offset, type_name, version, data, payload,
                         origin, snapshot_index, applied)

    def _record_row(self, entry: LogEntry, at: int, offset: int, type_name: str, version: int, data: str | None,
                    payload: str | None, origin: str, snapshot_index: int | None, applied: int | None) -> None:
        # What add() appends, built as one tuple: a bronze row for every record of the log.
        self._table("records").append((
            self.count * self.buckets + self.bucket, at, offset, entry.batch_base_offset, entry.leader_epoch,
            entry.timestamp, type_name, version, data, payload, entry.source, origin, snapshot_index, applied))
        self.count += 1

    def partition_change(self, row: Sequence[Any], entry: LogEntry, topic_name: str,
                         registration: PartitionRegistration) -> None:
        """The rows of the step ``IncrementalReplayer.replay`` gives for ``entry``, a change that moves no replica,
        replayed without that step by ``IncrementalReplayer.replay_partition_change`` (which gave ``topic_name`` and
        the ``registration`` after it): as :meth:`step` writes such a step, its bronze row — from its input row
        ``row``, as :meth:`remember` and :meth:`record` take it — then its partition row (a partition record is its
        bucket's own, so :func:`owned_routed_step` keeps both)."""
        offset = entry.offset
        self._record_row(entry, offset, offset, row[TYPE], row[VERSION], row[DATA], row[PAYLOAD], self.origin, None,
                         offset)
        record = cast("PartitionChangeRecord", entry.record)
        self._partition_row(offset, entry.timestamp, record.topic_id, record.partition_id, topic_name, registration)

    def step(self, step: Step) -> None:
        """Bronze rows for the step's records, then one event per changed key: of the rows this bucket owns
        (``jbod_model.buckets.owned_routed_step``: the source routes each bucket its entries, and the bucket's state
        holds its partitions alone)."""
        step = owned_routed_step(step, self.bucket, self.buckets)
        for i, entry in enumerate(step.entries):
            if step.snapshot:
                self.record(entry, step.offset, step.offset, snapshot_index=self.snapshot_index.get(entry.offset, i),
                            offset=step.offset)
            else:
                self.record(entry, step.offset, step.offset)
        for entry in step.aborted:
            self.record(entry, None, step.offset)
        for f in step.features:
            self.event("feature", (f.key,), step, None if f.new is None else (f.new,))
        for b in step.brokers:
            self.event("broker", (b.key,), step, None if b.new is None else _broker_value(b.new))
        for t in step.topics:
            self.event("topic", (str(t.key),), step, None if t.new is None else (t.new,))
        if step.partitions:
            self._partitions(step)
        for r in step.replicas:
            self._replica(step, r)
        for g in step.replica_groups:
            self._replica_group(step, g)

    def noop(self, row: Sequence[Any], entry: LogEntry) -> None:
        """The rows of the step ``IncrementalReplayer.replay`` gives for ``entry``, a NoOpRecord replayed without that
        step by ``IncrementalReplayer.replay_noop``: its bronze row, from its input row ``row``, in the bucket that
        writes it (:func:`writes_routed_bronze_row`, what :meth:`step`'s :func:`owned_routed_step` keeps)."""
        if writes_routed_bronze_row(entry.record, self.bucket, self.buckets):
            offset = entry.offset
            self._record_row(entry, offset, offset, row[TYPE], row[VERSION], row[DATA], row[PAYLOAD], self.origin,
                             None, offset)

    def _partitions(self, step: Step) -> None:
        """The step's ``partition`` events: what :meth:`event` adds, each row built as one tuple (≈ one row per
        record of a log: a PartitionChangeRecord changes one partition), the topic ids' texts kept."""
        for change in step.partitions:
            if change.new is None:
                self.event("partition", (str(change.topic_id), change.partition_id), step, None)
            else:
                self._partition_row(step.offset, step.timestamp, change.topic_id, change.partition_id,
                                    change.topic_name, change.new)

    def _partition_row(self, offset: int, timestamp: int | None, topic_id: Uuid, partition_id: int, topic_name: str,
                       p: PartitionRegistration) -> None:
        """The ``partition`` event of a registration changed at ``offset``: what :meth:`event` adds, built as one
        tuple, the topic ids' texts and the directories' texts kept."""
        topic = self._topic_texts.get(topic_id)
        if topic is None:
            topic = self._topic_texts[topic_id] = str(topic_id)
        directories = self._directory_texts.get(p.directories)
        if directories is None:
            directories = self._directory_texts[p.directories] = [str(d) for d in p.directories]
        # The sink's partition row (_sink_schema): ord, at, the key, o, t, the registration's columns, removed.
        self._table("partition").append((
            self.count * self.buckets + self.bucket, offset, topic, partition_id, offset, timestamp, topic_name,
            p.replicas, p.isr, p.leader, p.leader_epoch, p.partition_epoch, p.leader_recovery_state, directories,
            p.adding_replicas, p.removing_replicas, p.elr, p.last_known_elr, False))
        self.count += 1

    def _replica(self, step: Step, r: ReplicaChange) -> None:
        topic_id, partition_id, broker_id = r.key
        key = (str(topic_id), partition_id, broker_id)
        self.event("replica", key, step, None if r.new is None else _replica_value(r.topic_name, r.new))
        if _offline_key(r.old) != _offline_key(r.new):
            self.event("offline", key, step, _offline_value(r.topic_name, r.new))

    def _replica_group(self, step: Step, g: ReplicaGroup) -> None:
        """The rows of :meth:`_replica` for each replica of ``g`` (a replica row, then its ``offline`` row: their
        ``ord`` values are those), kept by :class:`_ReplicaGroups` until :meth:`tables`. Every replica of a group
        changes its offline reason, so each has an ``offline`` row."""
        n = len(g.partitions)
        if n:
            self._groups.add(step, g, self.count, self._topic_texts)
            self.count += 2 * n

    def _table(self, table: str) -> list[tuple[Any, ...]]:
        found = self.rows.get(table)
        if found is None:
            found = self.rows[table] = []
        return found

    def response(self, seq: int, entry: RequestEntry, handled: Any) -> None:
        response = handled.response.to_json()
        error = handled.error
        data = entry.request.to_json()
        written = handled.entries
        self.add("controller_responses", (
            seq, entry.offset, entry.request.TYPE_NAME, entry.request.version,
            data.get("brokerId") if isinstance(data.get("brokerId"), int) else None,
            int(error.error) if error is not None else int(response.get("errorCode", 0) or 0),
            error.message if error is not None else response.get("errorMessage"),
            dumps(response), len(written), written[0].offset if written else None,
            written[-1].offset if written else None,
            [{"topic": t, "partition_id": p, "error_code": c} for t, p, c in response_partition_errors(response)]),
            entry.offset)

    def gap(self, step: Step, gap_from: int, snapshot_end: int) -> None:
        """A ``log_gaps`` row: the offsets the stream never read because Kafka deleted them first, and the snapshot
        whose load (``step``) stood in for them. Each bucket counts the rows it owns; :func:`settle_batch` sums a
        cluster's partial rows into one."""
        step = owned_routed_step(step, self.bucket, self.buckets)
        source = step.entries[0].source if step.entries else None
        changed = (len(step.features) + len(step.brokers) + len(step.topics) + len(step.partitions)
                   + len(step.replicas) + sum(len(g.partitions) for g in step.replica_groups))
        self.add("log_gaps", (gap_from, snapshot_end - 1, snapshot_end, source, step.timestamp, changed,
                              len(step.aborted), _rebootstrap_message(gap_from, snapshot_end, changed)), step.offset)

    def skipped(self, row: Sequence[Any]) -> None:
        """A ``log_gaps`` row for a source ``gap`` row (packed): offsets the source could not read and skipped
        (policy ``skip``). No snapshot stood in for them and nothing changed at them: replay goes on after the gap."""
        gap_from = row[GAP_FROM]
        self.add("log_gaps", (gap_from, row[GAP_LAST], None, None, None, 0, 0, row[MESSAGE]), gap_from)

    def consequence(self, consequence: Consequence) -> None:
        """A ``log_gaps`` row for a record left out under policy ``skip`` because it could not replay after a
        skipped range (:mod:`jbod_model.gaps`): its offset was read but never replayed."""
        self.add("log_gaps", (consequence.offset, consequence.offset, None, None, None, 0, 1, str(consequence)),
                 consequence.offset)

    def fault(self, fault: JbodError, seq: int | None, offset: int | None, source: str | None) -> None:
        self.add("replay_faults", (seq, offset, source, type(fault).__name__, str(fault)),
                 offset if offset is not None else seq)


def _rebootstrap_message(gap_from: int, snapshot_end: int, changed: int) -> str:
    return (f"offsets {gap_from}..{snapshot_end - 1} were deleted from the log before the job read them; "
            f"re-bootstrapped from the snapshot ending at offset {snapshot_end} ({changed} rows changed)")


# ---------------------------------------------------------------------------------------------------------------
# The processor


def write_output(sink: RowSink, directory: str) -> pd.DataFrame | None:
    """Write a bucket's output rows under ``directory``, a file per table (``ord``, ``at`` and the table's typed
    columns), and return the :data:`OUTPUT_SCHEMA` rows naming them (None for a batch without output)."""
    written = [(name, write_part(directory, name, table), table.num_rows) for name, table in sink.tables().items()]
    if not written:
        return None
    return pd.DataFrame({"cluster_id": [sink.cluster_id] * len(written), "bucket": [sink.bucket] * len(written),
                         "table": [name for name, _, _ in written], "file": [file for _, file, _ in written],
                         "rows": [rows for _, _, rows in written]})


def output_parts(output: pa.Table) -> list[Part]:
    """The files a micro-batch's tasks wrote (their :data:`OUTPUT_SCHEMA` rows, as the driver collects them), by
    cluster, bucket and table: the rows of a batch in an order that does not depend on the tasks' order."""
    parts = [Part(str(c), int(b), str(t), str(f), int(n)) for c, b, t, f, n in zip(
        *(output.column(name).to_pylist() for name in ("cluster_id", "bucket", "table", "file", "rows")),
        strict=True)]
    return sorted(parts, key=lambda p: (p.cluster_id, p.bucket, p.table))


def batch_rows(batch: Mapping[str, pa.Table]) -> int:
    return sum(t.num_rows for t in batch.values())


def replay_batch(cluster_id: str, batch: pd.DataFrame | None, meta_state: ValueState,
                 maps: Mapping[str, MapState], gap_state: ValueState | None = None) -> dict[str, pa.Table]:
    """Replay one cluster's rows of one micro-batch in one bucket; store the changed keys; return the output
    rows by table, as :func:`sink_output` gives them (see :func:`replay_bucket`)."""
    return sink_output(replay_bucket(cluster_id, batch, meta_state, maps, gap_state=gap_state))


def sink_output(sink: RowSink) -> dict[str, pa.Table]:
    """A sink's rows by table as the driver reads them from the operator's files
    (:func:`pipelines.lakehouse.staging.read_parts`): ``cluster_id``, ``bucket``, ``ord``, ``at`` and the table's
    typed columns."""
    return {name: owned(table, sink.cluster_id, sink.bucket) for name, table in sink.tables().items()}


# The collector paused for a bucket's batch (as a decorator: for each call). A batch allocates millions of objects
# that live until its end — input rows, entries, the sink's rows, the state's chunks — and full passes kept walking
# all of them, 14–23 % of the operator's CPU at 200 k partitions (docs/state-design.md, "ninth round"). Almost none is
# in a reference cycle (measured: none left after a batch), so reference counting frees them; a cycle waits for the
# collector's next pass after the batch, whose size is bounded (``max_entries_per_batch``).
@gc_paused()
def replay_bucket(cluster_id: str, batch: InputBatch, meta_state: ValueState,
                  maps: Mapping[str, MapState],
                  bucket: int = 0, buckets: int = 1, gap_state: ValueState | None = None, *,
                  bulk_read_rows: int | None = None) -> RowSink:
    """Replay one cluster bucket's rows of one micro-batch; store the changed keys; return its output. A record
    that cannot replay after a range the source skipped (a ``gap`` row, policy ``skip``, sent to every bucket;
    ``gap_state`` keeps the last one across micro-batches) is left out and written to ``log_gaps`` as its
    consequence, as the CLI's replay does (:mod:`jbod_model.gaps`). A batch of at least ``bulk_read_rows`` rows
    (default :data:`BULK_READ_ROWS`) reads the state whole (:class:`StateStore`)."""
    meta = meta_state.get() if meta_state.exists() else None
    _last_offset, pending_text, controller_text, halted, origin, stored_buckets = (
        meta if meta is not None else (None, None, None, None, None, None))
    if stored_buckets is not None and int(stored_buckets) != buckets:
        raise InputError(f"cluster {cluster_id}: its state was written with {stored_buckets} replay buckets, this "
                         f"run has {buckets}: a partition's bucket would change; replay into new tables from a new "
                         "checkpoint, or run with the bucket count of the checkpoint")
    records = _packed_rows(batch)
    origin = origin or (records[0][INPUT] if records else "log")
    snapshot_index = {r[OFFSET]: r[SNAPSHOT_INDEX] for r in records
                      if r[KIND] == "snapshot" and r[SNAPSHOT_INDEX] is not None}
    # A JSONL input runs in bucket 0 alone (the reference controller reads the whole image): it owns every row.
    sink = RowSink(cluster_id, origin, bucket, 1 if origin == "jsonl" else buckets, snapshot_index)
    if halted is not None or not records:
        return sink
    store = StateStore(maps, meta,
                       bulk=len(records) >= (BULK_READ_ROWS if bulk_read_rows is None else bulk_read_rows))
    pending = entries_from_text(pending_text) if pending_text else ()
    replayer = IncrementalReplayer(store, pending, group_replicas=True)
    controller: ReferenceController | None = None
    use_controller = origin == "jsonl"
    if use_controller:
        state, next_offset = (controller_state_from_text(controller_text) if controller_text
                              else (None, store.last_offset() + 1))
        # The controller reads the image as stored before this batch (its own replay keeps it current); views of
        # a replayer that replays nothing stay fixed while ``replayer`` writes the batch's changes.
        controller = resume_controller(IncrementalReplayer(store).image, state=state, next_offset=next_offset,
                                       pending=pending)
    snapshot: list[LogEntry] = []
    snapshot_end: int | None = None
    gap_from: int | None = None

    def load_snapshot() -> None:
        # The model loads it over whatever the image holds (MetadataDelta.finishSnapshot semantics): the step's
        # changes close what the snapshot no longer has. A re-bootstrap also says which offsets were never read.
        assert snapshot_end is not None
        step = replayer.load_snapshot(snapshot, snapshot_end)
        sink.step(step)
        if gap_from is not None:
            sink.gap(step, gap_from, snapshot_end)

    row: Sequence[Any] = _NO_ROW
    stored_gap = gap_state.get() if gap_state is not None and gap_state.exists() else None
    last_gap: str | None = None if stored_gap is None else stored_gap[0]
    consequences = GapConsequences(lambda: None if last_gap is None else f"the skipped range ({last_gap})")
    activation = consequences.activate()
    try:
        for row in records:
            kind = row[KIND]
            if kind == "gap":
                if snapshot:
                    load_snapshot()
                    snapshot = []
                if bucket == 0:
                    sink.skipped(row)  # every bucket learns of the gap; bucket 0 writes its row
                last_gap = str(row[MESSAGE])
                interrupted = replayer.interrupt_transaction()
                if interrupted is not None:
                    sink.step(interrupted)
                continue
            if kind == "snapshot":
                snapshot.append(_log_entry(row, cluster_id))
                snapshot_end = int(row[SNAPSHOT_END])
                gap_from = row[GAP_FROM]
                continue
            if snapshot:
                load_snapshot()
                snapshot = []
            entry = row_to_entry(row, cluster_id)
            if kind == "record":
                if controller is None and type(entry) is LogEntry:
                    # Most of a log: a leader or ISR change, whose step would be one partition row. Replayed and
                    # written without building the step (IncrementalReplayer.replay_partition_change).
                    changed = replayer.replay_partition_change(entry)
                    if changed is not None:
                        sink.partition_change(row, entry, *changed)
                        continue
                    # A NoOp, most of a quiet cluster's log: its step would be its bronze row alone.
                    if replayer.replay_noop(entry):
                        sink.noop(row, entry)
                        continue
                sink.remember(row)
            if isinstance(entry, RequestEntry):
                if controller is None:
                    raise InputError(f"a controller request in a {origin} input: requests only come in JSONL")
                handled = controller.handle_request(entry.request, source=entry.source)
                sink.response(row[SEQ], entry, handled)
                for written in handled.entries:
                    step = replayer.replay(written)
                    if step is not None:
                        sink.step(step)
                continue
            if controller is not None:
                controller.replay(entry)
            step = replayer.replay(entry)
            if step is not None:
                sink.step(step)
        if snapshot:
            load_snapshot()
    except (ReplayFault, InputError) as fault:
        # Quarantine the cluster at the faulting entry: what was replayed before it is kept and stored, nothing
        # after it is replayed (the pure model stops there too), and the fault is a row of replay_faults. With
        # several buckets the other buckets went on: settle_batch stops their output at the fault's offset.
        offset = fault.offset if isinstance(fault, ReplayFault) and fault.offset is not None else \
            row[OFFSET]
        sink.fault(fault, row[SEQ], offset, row[SOURCE])
        halted = str(fault)
    finally:
        consequences.deactivate(activation)
    for consequence in consequences.consequences:
        sink.consequence(consequence)
    if gap_state is not None and last_gap is not None:
        gap_state.update((last_gap,))
    store.write(replayer.writes())
    pending_out = replayer.pending_transaction()
    controller_out = None if controller is None else controller_state_to_text(controller.state,
                                                                               controller.next_offset)
    meta_state.update((replayer.last_offset, entries_to_text(pending_out) if pending_out else None, controller_out,
                       halted, origin, buckets))
    return sink


@gc_paused()  # the whole worker's batch: see replay_bucket
def replay_packets(cluster_id: str, packets: list[tuple[int, bytes]], meta_state: ValueState,
                   maps: Mapping[str, MapState], bucket: int, buckets: int, gap_state: ValueState | None = None, *,
                   directory: str, bulk_read_rows: int | None = None) -> pd.DataFrame | None:
    """What a Python worker does for one cluster bucket's micro-batch: the source's packets (``(seq, packet)``, in
    any order) unpacked, replayed (:func:`replay_bucket`), and the output rows written under ``directory``; returns
    the :func:`write_output` rows naming the files (None for a batch without output).

    The cyclic collector stays paused until the batch's input rows and the sink's rows are gone: re-enabled with
    them alive, its first pass walked every one of them (≈ 7 % of the operator's CPU at 200 k, docs/state-design.md
    "thirteenth round")."""
    packets.sort(key=lambda packet: packet[0])
    records = [row for _seq, packet in packets for row in unpack_rows(packet)]
    sink = replay_bucket(cluster_id, records, meta_state, maps, bucket, buckets, gap_state,
                         bulk_read_rows=bulk_read_rows)
    del records
    out = write_output(sink, directory)
    del sink
    return out


def settle_batch(batch: Mapping[str, pa.Table], halted: dict[str, int]) -> dict[str, pa.Table]:
    """One micro-batch's output rows of every bucket (table → rows, as
    :func:`pipelines.lakehouse.staging.read_parts` gives them), as the cluster's: what the job writes.

    * A replay fault halts the whole cluster at its offset (the rule: ``jbod_model.buckets.cluster_halt`` and
      ``past_halt``): one fault row is kept, and every row of a step at or after it is dropped. ``halted``
      (cluster → fault offset, from earlier batches' faults; updated here) keeps it stopped in later batches.
    * The ``log_gaps`` row of a re-bootstrap is counted per bucket: the partial rows are summed into one; the row
      of a record left out after a skipped range, reported by every bucket that replays the record, is kept once.

    A batch without a fault or a ``log_gaps`` row, of clusters none of which is halted — nearly every batch — passes
    unchanged; only those two small tables' rows become Python values, the others are filtered as columns. With one
    bucket nothing changes."""
    faults = batch.get("replay_faults")
    gaps = batch.get("log_gaps")
    special = (faults is not None and faults.num_rows > 0) or (gaps is not None and gaps.num_rows > 0)
    if not special and not (halted and any(_has_cluster(t, halted) for t in batch.values())):
        return dict(batch)
    out = {}
    if faults is not None:
        # First: this batch's faults may halt a cluster, which filters every other table's rows.
        out["replay_faults"] = faults.take(_kept_faults(faults.to_pylist(), halted))
    for name, table in batch.items():
        if name == "replay_faults":
            continue
        kept = _before_halt(table, halted)
        out[name] = _merged_gaps(kept) if name == "log_gaps" else kept
    return out


def _has_cluster(table: pa.Table, clusters: Mapping[str, int]) -> bool:
    return bool(pc.any(pc.is_in(table.column("cluster_id"), pa.array(list(clusters), pa.string()))).as_py())


def _kept_faults(faults: list[dict[str, Any]], halted: dict[str, int]) -> list[int]:
    """Which of a batch's ``replay_faults`` rows are their cluster's (at most one each); ``halted`` learns where
    each cluster now stops."""
    by_cluster: dict[str, list[int]] = {}
    for i, row in enumerate(faults):
        if row["at"] is not None:
            by_cluster.setdefault(row["cluster_id"], []).append(i)
    kept = []
    for cluster_id, found in by_cluster.items():
        stop, first = cluster_halt(halted.get(cluster_id), [(int(faults[i]["at"]), int(faults[i]["bucket"]))
                                                            for i in found])
        assert stop is not None
        halted[cluster_id] = stop
        if first is not None:
            kept.append(found[first])
    return sorted(kept)


def _before_halt(table: pa.Table, halted: Mapping[str, int]) -> pa.Table:
    """The rows :func:`jbod_model.buckets.past_halt` keeps. Only a batch holding a halted cluster's rows gets here
    (rare: after a replay fault), so the rule is asked row by row rather than copied as column arithmetic."""
    if not halted or table.num_rows == 0 or not _has_cluster(table, halted):
        return table
    stops = [halted.get(c) for c in table.column("cluster_id").to_pylist()]
    keep = [not past_halt(at, stop) for at, stop in zip(table.column("at").to_pylist(), stops, strict=True)]
    return table.filter(pa.array(keep, pa.bool_()))


def _merged_gaps(table: pa.Table) -> pa.Table:
    """``log_gaps`` rows as the cluster's: a re-bootstrap's partial rows (one per bucket) summed into one, the row
    of a record left out after a skipped range kept once."""
    if table.num_rows < 2:
        return table
    out: list[dict[str, Any]] = []
    merged: dict[tuple[str, int], dict[str, Any]] = {}
    left_out: set[tuple[Any, ...]] = set()
    fields = [name for name in table.column_names if name not in ("bucket", "ord", "at")]
    for row in table.to_pylist():
        if row["snapshot_end_offset"] is not None:
            key = (row["cluster_id"], int(row["first_missing_offset"]))
            first = merged.get(key)
            if first is None:
                merged[key] = row
                out.append(row)
                continue
            first["changed_rows"] += row["changed_rows"]
            first["dropped_records"] += row["dropped_records"]
            first["snapshot_source"] = first["snapshot_source"] or row["snapshot_source"]
            first["message"] = _rebootstrap_message(first["first_missing_offset"], first["snapshot_end_offset"],
                                                    first["changed_rows"])
            continue
        same = tuple(row[name] for name in fields)
        if same in left_out:
            continue
        left_out.add(same)
        out.append(row)
    return pa.Table.from_pylist(out, schema=table.schema)


#: The row a fault names before the batch's first row is read.
_NO_ROW: Sequence[Any] = (None,) * len(PACKED_FIELDS)


def _packed_rows(batch: InputBatch) -> list[Sequence[Any]]:
    """A batch's input rows as packed rows (``codec.unpack_rows``): as they are, or from rows by column name (a
    pandas frame, dicts: the tests' way in)."""
    if batch is None:
        return []
    if isinstance(batch, pd.DataFrame):
        columns = [str(c) for c in batch.columns]
        # ``batch.to_dict("records")`` without boxing value by value.
        return [packed_row(dict(zip(columns, values, strict=True)))
                for values in zip(*(batch[c].tolist() for c in columns), strict=True)]
    rows = batch if isinstance(batch, list) else list(batch)
    if rows and isinstance(rows[0], Mapping):
        return [packed_row(cast("Mapping[str, Any]", r)) for r in rows]
    return cast("list[Sequence[Any]]", rows)


def _log_entry(row: Sequence[Any], cluster_id: str) -> LogEntry:
    entry = row_to_entry(row, cluster_id)
    if not isinstance(entry, LogEntry):
        raise InputError("a snapshot row holds a request")
    return entry
