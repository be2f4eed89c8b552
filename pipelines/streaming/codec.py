"""Compact, lossless forms of the model's values: text for the Spark job's state store, pickled rows for its input
packets (:func:`pack_rows`).

Only encoding lives here: every value is built and read back through ``jbod_model`` (records through
``json_codec``, stream entries through ``jbod_model.stream``), so a state value always decodes into exactly the
object the model produced. Broker registrations travel as their RegisterBrokerRecord at the newest metadata.version
the model writes (nothing is lost at that version); partition registrations, the hot path of a large cluster, as a
positional JSON array, many of them in one chunk of lines (:class:`PartitionChunk`).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import pickle
import struct
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import orjson
import pyarrow as pa

from jbod_model.buckets import entry_owner, is_shared
from jbod_model.controller.context import BrokerHeartbeatState, ControllerState
from jbod_model.errors import InputError
from jbod_model.image import BrokerRegistration, PartitionRegistration
from jbod_model.metadata_version import IBP_4_0_IV0, MetadataVersion
from jbod_model.records.entry import LogEntry, new_log_entry
from jbod_model.records.json_codec import dumps_without_floats as dumps
from jbod_model.records.json_codec import record_from_json, record_to_json, typed_record_reader
from jbod_model.records.metadata import RegisterBrokerRecord
from jbod_model.slots import slot_constructor, slot_values
from jbod_model.stream import RequestEntry, StreamEntry, entry_from_json, entry_to_json
from jbod_model.uuid import Uuid

# RegisterBrokerRecord v3 carries every field of a registration (LogDirs since 3.7-IV2).
_CODEC_MV = MetadataVersion(IBP_4_0_IV0)


#: The codec of the large state values (:func:`packed_state`): Zstandard, from pyarrow.
_STATE_CODEC = "zstd"
_STATE_SIZE = struct.Struct("<I")


def packed_state(text: str) -> bytes:
    """A large state value's text as the state store keeps it (state layout 9): its UTF-8 bytes compressed with
    Zstandard, after their length. A partitions chunk or a broker's index is hundreds of kB of JSON-like text, read
    and rewritten whole by every batch that touches it; as a string it crossed the state store's socket and the
    JVM's conversions (UTF-8 checks, pickling) at its full size — the state server's connection thread was the
    JVM's largest after the seventeenth round. Compressed, a third of the bytes go through the socket, the JVM and
    RocksDB (docs/state-design.md, "nineteenth round")."""
    raw = text.encode()
    compressed: bytes = pa.compress(raw, codec=_STATE_CODEC, asbytes=True)
    return _STATE_SIZE.pack(len(raw)) + compressed


def state_text(packed: bytes) -> str:
    """:func:`packed_state`'s inverse."""
    if len(packed) < _STATE_SIZE.size:
        raise InputError("a stored state value is shorter than its length: not written by packed_state")
    (size,) = _STATE_SIZE.unpack_from(packed)
    raw = pa.decompress(memoryview(packed)[_STATE_SIZE.size:], decompressed_size=size, codec=_STATE_CODEC,
                        asbytes=True)
    return bytes(raw).decode()


def broker_to_text(reg: BrokerRegistration) -> str:
    return dumps(record_to_json(reg.to_record(_CODEC_MV)))


def broker_from_text(text: str) -> BrokerRegistration:
    record = record_from_json(orjson.loads(text), "stored broker")
    if not isinstance(record, RegisterBrokerRecord):
        raise InputError(f"stored broker is a {type(record).__name__}")
    return BrokerRegistration.from_record(record)


#: A chunk's directory table is rebuilt from the ids its partitions use once it holds more than this many: a table
#: only grows while the chunk is rewritten (see :class:`PartitionChunk`), and directories are replaced over a
#: cluster's life. A cluster has a few hundred directories; at 1,024 ids (≈ 24 KB) a table is still a fraction of
#: a chunk of a large cluster.
CHUNK_DIRECTORY_TABLE_MAX = 1024


def _partition_text(p: PartitionRegistration, directory_index: Callable[[Uuid], int]) -> str:
    """A partition registration as a positional JSON array, its directories as indices into its chunk's table."""
    # The registration's tuples as they are: both JSON writers write a tuple as the list it holds.
    return dumps([p.replicas, [directory_index(d) for d in p.directories], p.isr, p.removing_replicas,
                  p.adding_replicas, p.elr, p.last_known_elr, p.leader, p.leader_recovery_state, p.leader_epoch,
                  p.partition_epoch])


def _partition_of_text(text: str, directories: Sequence[Uuid]) -> PartitionRegistration:
    (replicas, dirs, isr, removing, adding, elr, last_known_elr, leader, lrs, leader_epoch,
     partition_epoch) = orjson.loads(text)
    try:
        directory_ids = tuple([directories[i] for i in dirs])
    except IndexError:
        raise InputError(f"a stored partition names directory {max(dirs)} of a chunk's {len(directories)}: not "
                         "written by PartitionChunk") from None
    return PartitionRegistration.from_fields(tuple(replicas), directory_ids, tuple(isr), tuple(removing),
                                             tuple(adding), tuple(elr), tuple(last_known_elr), leader, lrs,
                                             leader_epoch, partition_epoch)


class PartitionChunk:
    """One chunk of a replay bucket's partitions as the state store keeps it (state layout 8).

    Its text (:meth:`to_text`) is lines: first the chunk's directory table (the directory ids its partitions name,
    comma-separated: a ``Uuid``'s text holds no comma), then each partition's key (``topicId:partitionId``) and its
    registration as a positional JSON array (compact JSON, whose strings escape every control character: neither
    holds a line break) in turn. A registration names its directories by their index in the table: 22 characters
    of id text, three times a partition, were two thirds of a stored partition's bytes (docs/state-design.md,
    "twelfth round"). One ``str.split`` cuts a chunk apart; a partition's JSON is parsed only when it is asked for
    and written only when it changed — the others are written back as the text they were read as, which the table
    keeps valid because it only grows, until it passes :data:`CHUNK_DIRECTORY_TABLE_MAX` ids and is rebuilt."""

    __slots__ = ("_directories", "_directory_texts", "_index", "texts")

    def __init__(self, directories: list[Uuid], texts: dict[str, str],
                 directory_texts: list[str] | None = None) -> None:
        self._directories = directories
        # The table's text as read (written back as it was, not formatted again), extended as the table grows.
        self._directory_texts = [str(d) for d in directories] if directory_texts is None else directory_texts
        self._index: dict[Uuid, int] | None = None
        #: Key text → the partition's JSON text, as stored.
        self.texts = texts

    @classmethod
    def from_text(cls, text: str, directory_of: Callable[[str], Uuid] = Uuid.from_string) -> PartitionChunk:
        """The chunk :meth:`to_text` wrote; ``directory_of`` parses a directory id (a store shares one per id)."""
        lines = text.split("\n")
        if len(lines) % 2 == 0:
            raise InputError("a stored chunk has a key without a value: not written by PartitionChunk")
        directory_texts = lines[0].split(",") if lines[0] else []
        entries = iter(lines)
        next(entries)
        # The same iterator twice: key, value, key, value...
        return cls([directory_of(d) for d in directory_texts], dict(zip(entries, entries, strict=True)),
                   directory_texts)

    def to_text(self) -> str:
        if len(self._directories) > CHUNK_DIRECTORY_TABLE_MAX:
            self._rebuild_table()
        return "\n".join(itertools.chain((",".join(self._directory_texts),),
                                         itertools.chain.from_iterable(self.texts.items())))

    def get(self, key: str) -> PartitionRegistration | None:
        text = self.texts.get(key)
        return None if text is None else _partition_of_text(text, self._directories)

    def put(self, key: str, partition: PartitionRegistration | None) -> None:
        """Store a partition's registration (None: remove it)."""
        if partition is None:
            self.texts.pop(key, None)
        else:
            self.texts[key] = _partition_text(partition, self._directory_index)

    def _directory_index(self, directory: Uuid) -> int:
        index = self._index
        if index is None:
            index = self._index = {d: i for i, d in enumerate(self._directories)}
        found = index.get(directory)
        if found is None:
            found = index[directory] = len(self._directories)
            self._directories.append(directory)
            self._directory_texts.append(str(directory))
        return found

    def _rebuild_table(self) -> None:
        parts = {key: _partition_of_text(text, self._directories) for key, text in self.texts.items()}
        self._directories, self._directory_texts, self._index = [], [], None
        for key, partition in parts.items():
            self.put(key, partition)


def entries_to_text(entries: Sequence[LogEntry]) -> str:
    """Log entries (e.g. an open metadata transaction) with their provenance."""
    return dumps([{**entry_to_json(e), "source": e.source} for e in entries])


def entries_from_text(text: str) -> tuple[LogEntry, ...]:
    out = []
    for obj in orjson.loads(text):
        entry = entry_from_json(obj, "stored entry", obj.get("source"))
        if not isinstance(entry, LogEntry):
            raise InputError("stored transaction holds a request")
        out.append(entry)
    return tuple(out)


def controller_state_to_text(state: ControllerState, next_offset: int) -> str:
    return dumps({"next": next_offset,
                  "reg": {str(b): o for b, o in state.register_broker_record_offsets.items()},
                  "hb": {str(b): [h.fenced, h.metadata_offset, h.controlled_shutdown_offset]
                         for b, h in state.heartbeats.items()}})


def controller_state_from_text(text: str) -> tuple[ControllerState, int]:
    obj = orjson.loads(text)
    offsets = {int(b): int(o) for b, o in obj["reg"].items()}
    heartbeats = {int(b): BrokerHeartbeatState(fenced=bool(h[0]), metadata_offset=int(h[1]),
                                                controlled_shutdown_offset=int(h[2])) for b, h in obj["hb"].items()}
    return (ControllerState(register_broker_record_offsets=MappingProxyType(offsets),
                            heartbeats=MappingProxyType(heartbeats)), int(obj["next"]))


# ---------------------------------------------------------------------------------------------------------------
# Input rows


@dataclass(frozen=True, slots=True)
class InputRow:
    """One entry of a cluster's input stream as the source emits it (the columns of ``source.INPUT_SCHEMA``).

    ``kind`` is ``record`` (a committed metadata record), ``snapshot`` (a record of the snapshot the stream starts
    or re-bootstraps from; ``offset`` local to the snapshot file, ``snapshot_end`` its end offset), ``request`` (a
    controller request of a canonical JSONL stream) or ``gap`` (offsets ``gap_from .. gap_last`` of the log could not
    be read and were skipped under policy ``skip``; ``source`` the file(s) that held them, ``message`` why; no
    record). ``seq`` orders a cluster's rows; ``timestamp`` is in ms.
    """

    cluster_id: str
    kind: str
    seq: int
    offset: int | None
    batch_base_offset: int | None
    leader_epoch: int | None
    timestamp: int | None
    type: str
    version: int
    data: str | None
    payload: str | None
    source: str | None
    snapshot_end: int | None = None
    #: The kind of input the cluster is read from: ``log`` (metadata log dir), ``jsonl`` or ``dump``.
    input: str = "log"
    #: On the rows of a snapshot the stream re-bootstraps from (the log was truncated past the stream's position):
    #: the first offset the stream never read. The offsets ``gap_from .. snapshot_end - 1`` are known only through
    #: the snapshot. None otherwise (the snapshot a stream starts from is no gap).
    gap_from: int | None = None
    #: On a ``gap`` row: the last offset that could not be read (``gap_from`` is the first).
    gap_last: int | None = None
    #: On a ``gap`` row: what was skipped and why, for the ``log_gaps`` table.
    message: str | None = None
    #: The replay bucket of the cluster the row goes to (``jbod_model.buckets``): the partition's bucket for a
    #: partition record, its offset's for a NoOp (``entry_owner``), 0 for a gap or any row of a JSONL input (request
    #: streams run in one bucket), and :data:`ALL_BUCKETS` for a record every bucket replays, until the source fans
    #: it out to each bucket.
    bucket: int = 0
    #: On a snapshot row: its index among the snapshot's records (its bronze row's ``snapshot_index``; a bucket
    #: sees only some of them).
    snapshot_index: int | None = None


#: ``InputRow.bucket`` of a record every bucket replays, before the source fans it out.
ALL_BUCKETS = -1

_new_input_row = slot_constructor(InputRow)


def entry_to_row(cluster_id: str, kind: str, seq: int, entry: StreamEntry, *, snapshot_end: int | None = None,
                 input_kind: str = "log", gap_from: int | None = None, buckets: int = 1,
                 snapshot_index: int | None = None) -> InputRow:
    """The input row of a stream entry; ``buckets``: the cluster's replay buckets (``jbod_model.buckets``)."""
    if isinstance(entry, RequestEntry):
        obj = entry_to_json(entry)
        data = obj.get("data")
        return InputRow(cluster_id, kind, seq, entry.offset, None, None, None, str(obj["type"]),
                        int(obj.get("version", 0)), None if data is None else dumps(data), None, entry.source,
                        None, input_kind)
    # The record's JSON alone: the entry's other fields are columns of their own.
    obj = record_to_json(entry.record)
    data = obj.get("data")
    payload = obj.get("payload")
    if input_kind == "jsonl" or buckets == 1:
        bucket = 0
    elif is_shared(entry.record):
        bucket = ALL_BUCKETS
    else:
        bucket = entry_owner(entry, buckets)
    # Every field positionally, without the keyword __init__: the source builds one row per record it reads.
    return _new_input_row(cluster_id, kind, seq, entry.offset, entry.batch_base_offset, entry.leader_epoch,
                          entry.timestamp, str(obj["type"]), int(obj["version"]),
                          None if data is None else dumps(data), payload, entry.source, snapshot_end, input_kind,
                          gap_from, None, None, bucket, snapshot_index)


def row_buckets(row: InputRow, buckets: int) -> Sequence[int]:
    """The buckets that replay the row: its own, or every bucket for :data:`ALL_BUCKETS` and for a ``gap`` row
    (every bucket must know of the last skipped range: a record that cannot replay after it is its consequence,
    ``jbod_model.gaps``; bucket 0 writes the gap's row)."""
    if row.bucket != ALL_BUCKETS and row.kind != "gap":
        return (row.bucket,)
    return range(buckets)


def fan_out(row: InputRow, buckets: int) -> Iterator[InputRow]:
    """The row as each bucket that replays it receives it (:func:`row_buckets`)."""
    for bucket in row_buckets(row, buckets):
        yield row if bucket == row.bucket else dataclasses.replace(row, bucket=bucket)


# ---------------------------------------------------------------------------------------------------------------
# Packets: many input rows of one bucket in one Spark row


#: The fields of an input row that a packet holds per row; ``cluster_id`` and ``bucket`` are the packet's own.
PACKED_FIELDS = tuple(f.name for f in dataclasses.fields(InputRow) if f.name not in ("cluster_id", "bucket"))
_packed_values = slot_values(InputRow, PACKED_FIELDS)


def pack_rows(rows: Iterable[InputRow]) -> bytes:
    """Consecutive input rows of one cluster bucket as one packet: a pickled list of positional rows (tuples).

    Every row that crosses into Spark costs the JVM and pyspark a conversion in and out of Arrow, a shuffle write
    and read and a sort; a packet of thousands of rows pays that once (docs/state-design.md, "Packets"). Pickle, as
    pyspark's own workers exchange Python values: a packet is written and read by the same job's Python, in the same
    micro-batch (a restarted batch writes its packets again), and each row holds its record's JSON text, which a JSON
    packet escaped character by character: the 200 k log's packets are read in 0.38 s of CPU against orjson's 0.99 s,
    and are 186 MB against 433 (docs/state-design.md, "Packets pickled")."""
    # Protocol 5 named, not the interpreter's highest: the form docs/state-design.md measured, whatever Python runs.
    return pickle.dumps([_packed_values(r) for r in rows], protocol=5)


#: Where each field is in a packed row (:func:`unpack_rows`).
_POSITION = {name: i for i, name in enumerate(PACKED_FIELDS)}
KIND, SEQ, OFFSET, TYPE, VERSION, DATA, PAYLOAD, SOURCE = (
    _POSITION[name] for name in ("kind", "seq", "offset", "type", "version", "data", "payload", "source"))
SNAPSHOT_END, INPUT, GAP_FROM, GAP_LAST, MESSAGE, SNAPSHOT_INDEX = (
    _POSITION[name] for name in ("snapshot_end", "input", "gap_from", "gap_last", "message", "snapshot_index"))
#: Fields that hold a number: a row by column name from pandas has them as floats (NaN for null).
_INT_FIELDS = frozenset(f.name for f in dataclasses.fields(InputRow) if f.type in ("int", "int | None"))


def unpack_rows(packet: bytes) -> list[tuple[Any, ...]]:
    """The rows of a packet (:func:`pack_rows`) as the operator reads them: each a tuple of its
    :data:`PACKED_FIELDS` values, read by position (:data:`KIND`, :data:`OFFSET`, ...): a dict per row was ≈ 8 % of
    the operator's CPU at 200 k partitions (docs/state-design.md, "thirteenth round"). The packet is the job's own
    (a file under its checkpoint or a row of its own stream), never input from outside."""
    rows: list[tuple[Any, ...]] = pickle.loads(packet)
    return rows


def packed_row(row: Mapping[str, Any]) -> tuple[Any, ...]:
    """A row by column name (an :class:`InputRow`'s fields, a pandas row) as :func:`unpack_rows` gives it; a number
    that pandas handed over as a float is an int again, NaN None."""
    return tuple(_int(row.get(name)) if name in _INT_FIELDS else row.get(name) for name in PACKED_FIELDS)


def row_to_entry(row: Sequence[Any], cluster_id: str = "") -> StreamEntry:
    """The stream entry of an input row (a packed row, :func:`unpack_rows`); ``cluster_id`` names it in errors.

    The fields from ``offset`` to ``source`` are the entry's own and are read in one slice, in the order of
    :class:`InputRow` (offset, batch base offset, leader epoch, timestamp, type, version, data, payload, source)."""
    offset, batch_base_offset, leader_epoch, timestamp, type_name, version, data, payload, source = \
        row[OFFSET:SOURCE + 1]
    if (type(offset) is int and offset >= 0 and type(type_name) is str and type(version) is int and data is not None
            and payload is None and not type_name.endswith("_REQUEST")):
        # A record row as the source packs it (every record but an opaque one): read by its type's generated
        # reader, the record record_from_json would give. Anything else, or what that reader refuses, goes the
        # general way below, which also says what is wrong.
        reader = typed_record_reader(type_name, version)
        record = None if reader is None else reader(orjson.loads(data))
        if record is not None:
            return new_log_entry(offset, record, batch_base_offset, leader_epoch, timestamp, source)
    where = f"{cluster_id} seq {row[SEQ]}"
    obj: dict[str, Any] = {"type": type_name, "version": version,
                           "data": None if data is None else orjson.loads(data)}
    if payload is not None:
        obj["payload"] = payload
    if offset is not None and offset >= 0 and isinstance(type_name, str) and not type_name.endswith("_REQUEST"):
        # A record row, as the source writes it (every row is one entry_to_row made): the entry entry_from_json
        # would build, without checking again what the source's reader checked.
        return new_log_entry(offset, record_from_json(obj, where), batch_base_offset, leader_epoch, timestamp, source)
    for key, value in (("offset", offset), ("timestamp", timestamp), ("leaderEpoch", leader_epoch),
                       ("batchBaseOffset", batch_base_offset)):
        if value is not None:
            obj[key] = value
    return entry_from_json(obj, where, source)


def _int(value: Any) -> int | None:
    # pandas hands nullable integer columns over as floats (NaN for null).
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return int(value)
