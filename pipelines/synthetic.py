"""Deterministic synthetic KRaft metadata logs for the contract tests and the benchmark.

:func:`generate` writes what a KRaft controller would write for a JBOD cluster over time — metadata.version 3.9-IV0,
brokers registering with several log directories and unfencing, topics whose replicas are placed on directories,
ISR and leader changes, directory failures (the partitions' leaders move away, then the broker reports its remaining
online directories), fencing and unfencing, reassignments to another directory, topic deletions, configs, metadata
transactions and the NoOpRecords that make up most of a real log — as a list of :class:`LogEntry` with offsets and
append timestamps. Every record replays without a fault (the generator tracks the state it has written). Only
``jbod_model`` records are used; :func:`write_metadata_dir` and :func:`write_jsonl_file` put a stream on disk the
way Kafka (or the canonical JSONL) holds it.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from jbod_model.directory_id import is_reserved
from jbod_model.image import MetadataImage
from jbod_model.meta_properties import MetaProperties, MetaPropertiesVersion, to_text
from jbod_model.metadata_version import FEATURE_NAME
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import (
    NO_LEADER,
    NO_LEADER_CHANGE,
    BeginTransactionRecord,
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    EndTransactionRecord,
    FeatureLevelRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from jbod_model.replay import replay_entries
from jbod_model.storage.files import METADATA_PARTITION_DIR, SnapshotId, segment_file_name
from jbod_model.storage.log_writer import SegmentWriter, encode_batch, snapshot_path, write_snapshot
from jbod_model.stream import write_jsonl
from jbod_model.uuid import Uuid

_TOPIC_CONFIG = 2


@dataclass
class _Partition:
    replicas: list[int]
    dirs: list[Uuid]
    isr: list[int]
    leader: int


@dataclass
class _State:
    epochs: dict[int, int] = field(default_factory=dict)
    online: dict[int, list[Uuid]] = field(default_factory=dict)
    fenced: dict[int, bool] = field(default_factory=dict)
    topics: dict[Uuid, str] = field(default_factory=dict)
    partitions: dict[tuple[Uuid, int], _Partition] = field(default_factory=dict)
    #: The partition keys in creation order (random picks must not depend on hash order).
    keys: list[tuple[Uuid, int]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class SyntheticSpec:
    """The shape of a generated cluster."""

    brokers: int = 3
    dirs_per_broker: int = 2
    topics: int = 4
    partitions_per_topic: int = 3
    replication_factor: int = 2
    #: Operations after the cluster is built (each writes one or a few records).
    operations: int = 40
    #: The share of NoOpRecords among operations (real logs are > 95 % NoOps).
    noop_share: float = 0.3
    seed: int = 7
    start_time_ms: int = 1_700_000_000_000


def _uuid(rng: random.Random) -> Uuid:
    while True:
        candidate = Uuid(rng.getrandbits(64) - (1 << 63), rng.getrandbits(64) - (1 << 63))
        if not is_reserved(candidate) and not str(candidate).startswith("-"):
            return candidate


class _Writer:
    def __init__(self, spec: SyntheticSpec) -> None:
        self.spec = spec
        self.rng = random.Random(spec.seed)
        self.state = _State()
        self.entries: list[LogEntry] = []
        self.time = spec.start_time_ms

    def emit(self, records: Sequence[Record]) -> None:
        """One controller write: the records land in one batch with one append time."""
        self.time += self.rng.randint(1, 500)
        base = len(self.entries)
        for i, record in enumerate(records):
            self.entries.append(LogEntry(offset=base + i, record=record, batch_base_offset=base, leader_epoch=1,
                                         timestamp=self.time))

    # -- operations ------------------------------------------------------------------------------------------

    def register(self, broker_id: int) -> None:
        epoch = len(self.entries) + 100
        dirs = sorted(_uuid(self.rng) for _ in range(self.spec.dirs_per_broker))
        self.state.epochs[broker_id] = epoch
        self.state.online[broker_id] = dirs
        self.state.fenced[broker_id] = True
        endpoint = BrokerEndpoint(name="PLAINTEXT", host=f"broker-{broker_id}", port=9092, security_protocol=0)
        self.emit([RegisterBrokerRecord(version=3, broker_id=broker_id, broker_epoch=epoch,
                                        incarnation_id=_uuid(self.rng), end_points=(endpoint,), fenced=True,
                                        rack=f"rack-{broker_id % 3}", log_dirs=tuple(dirs))])

    def change_registration(self, broker_id: int, *, fenced: int = 0, dirs: tuple[Uuid, ...] = ()) -> None:
        self.emit([BrokerRegistrationChangeRecord(version=2, broker_id=broker_id,
                                                  broker_epoch=self.state.epochs[broker_id], fenced=fenced,
                                                  log_dirs=dirs)])

    def unfence(self, broker_id: int) -> None:
        self.state.fenced[broker_id] = False
        self.change_registration(broker_id, fenced=-1)

    def create_topic(self, index: int) -> None:
        spec, rng = self.spec, self.rng
        topic_id = _uuid(rng)
        name = f"topic-{index}"
        self.state.topics[topic_id] = name
        live = sorted(self.state.epochs)
        records: list[Record] = [TopicRecord(name=name, topic_id=topic_id)]
        for pid in range(spec.partitions_per_topic):
            replicas = rng.sample(live, min(spec.replication_factor, len(live)))
            dirs = [rng.choice(self.state.online[b]) for b in replicas]
            p = _Partition(replicas, dirs, list(replicas), replicas[0])
            self.state.partitions[(topic_id, pid)] = p
            self.state.keys.append((topic_id, pid))
            records.append(PartitionRecord(version=1, partition_id=pid, topic_id=topic_id, replicas=tuple(replicas),
                                           isr=tuple(replicas), leader=replicas[0], leader_epoch=0,
                                           partition_epoch=0, directories=tuple(dirs)))
        # Kafka writes a topic and its partitions atomically; large topics span several batches.
        for chunk_start in range(0, len(records), 500):
            self.emit(records[chunk_start:chunk_start + 500])

    def _change(self, key: tuple[Uuid, int], **fields: object) -> PartitionChangeRecord:
        return PartitionChangeRecord(version=1, topic_id=key[0], partition_id=key[1], **fields)  # type: ignore[arg-type]

    def isr_change(self) -> None:
        if not self.state.keys:
            return
        key = self.rng.choice(self.state.keys)
        p = self.state.partitions[key]
        shrink = len(p.isr) > 1 and self.rng.random() < 0.5
        if shrink:
            p.isr = [b for b in p.isr if b != p.isr[-1]] if p.isr[-1] != p.leader else p.isr[:-1]
            if p.leader not in p.isr:
                p.leader = p.isr[0]
        else:
            p.isr = list(p.replicas)
        self.emit([self._change(key, isr=tuple(p.isr), leader=p.leader)])

    def fail_directory(self) -> None:
        candidates = [b for b, dirs in self.state.online.items() if len(dirs) > 1]
        if not candidates:
            return
        broker = self.rng.choice(sorted(candidates))
        failed = self.rng.choice(self.state.online[broker])
        records: list[Record] = []
        for key in self.state.keys:
            p = self.state.partitions[key]
            if broker in p.replicas and p.dirs[p.replicas.index(broker)] == failed and broker in p.isr:
                p.isr = [b for b in p.isr if b != broker]
                new_leader = p.isr[0] if p.isr else NO_LEADER
                fields: dict[str, object] = {"isr": tuple(p.isr)}
                if new_leader != p.leader:
                    fields["leader"] = new_leader
                    p.leader = new_leader
                records.append(self._change(key, **fields))
        self.state.online[broker] = [d for d in self.state.online[broker] if d != failed]
        records.append(BrokerRegistrationChangeRecord(version=2, broker_id=broker,
                                                      broker_epoch=self.state.epochs[broker],
                                                      log_dirs=tuple(self.state.online[broker])))
        self.emit(records)

    def fence_or_unfence(self) -> None:
        broker = self.rng.choice(sorted(self.state.epochs))
        if self.state.fenced[broker]:
            self.unfence(broker)
        else:
            self.state.fenced[broker] = True
            self.change_registration(broker, fenced=1)

    def reassign_directory(self) -> None:
        if not self.state.keys:
            return
        key = self.rng.choice(self.state.keys)
        p = self.state.partitions[key]
        if not any(len(self.state.online[b]) > 1 for b in p.replicas):
            return
        i = next(i for i, b in enumerate(p.replicas) if len(self.state.online[b]) > 1)
        others = [d for d in self.state.online[p.replicas[i]] if d != p.dirs[i]]
        p.dirs[i] = self.rng.choice(others)
        self.emit([self._change(key, directories=tuple(p.dirs), leader=NO_LEADER_CHANGE)])

    def delete_topic(self) -> None:
        if len(self.state.topics) <= 1:
            return
        topic_id = self.rng.choice(sorted(self.state.topics, key=str))
        name = self.state.topics.pop(topic_id)
        for key in [k for k in self.state.keys if k[0] == topic_id]:
            del self.state.partitions[key]
        self.state.keys = [k for k in self.state.keys if k[0] != topic_id]
        self.emit([ConfigRecord(resource_type=_TOPIC_CONFIG, resource_name=name, name="retention.ms",
                                value="1000")])
        self.emit([RemoveTopicRecord(topic_id=topic_id)])

    def transaction(self) -> None:
        if not self.state.keys:
            return
        keys = self.state.keys[:3]
        records: list[Record] = [BeginTransactionRecord(name="synthetic")]
        for key in keys:
            p = self.state.partitions[key]
            records.append(self._change(key, isr=tuple(p.isr), leader=p.leader))
        records.append(EndTransactionRecord())
        # Kafka may split a transaction over several batches: write it as two.
        half = len(records) // 2
        self.emit(records[:half])
        self.emit(records[half:])


def generate(spec: SyntheticSpec = SyntheticSpec()) -> list[LogEntry]:
    """The entries of one generated cluster (see the module docstring)."""
    w = _Writer(spec)
    w.emit([FeatureLevelRecord(name=FEATURE_NAME, feature_level=21)])
    for b in range(1, spec.brokers + 1):
        w.register(b)
    for b in range(1, spec.brokers + 1):
        w.unfence(b)
    for t in range(spec.topics):
        w.create_topic(t)
    ops = [w.isr_change] * 6 + [w.fence_or_unfence] * 2 + [w.reassign_directory] * 2 + [w.fail_directory,
                                                                                        w.delete_topic, w.transaction]
    topic_index = spec.topics
    for _ in range(spec.operations):
        if w.rng.random() < spec.noop_share:
            w.emit([NoOpRecord()])
            continue
        op = w.rng.choice(ops)
        if op == w.delete_topic:
            w.delete_topic()
            w.create_topic(topic_index)
            topic_index += 1
        else:
            op()
    return w.entries


def final_image(entries: Sequence[LogEntry]) -> MetadataImage:
    return replay_entries(entries)


def write_metadata_dir(root: str | Path, entries: Sequence[LogEntry], *, cluster_id: str,
                       records_per_segment: int | None = None, node_id: int = 1,
                       snapshot_at: int | None = None) -> Path:
    """Write ``entries`` as a node's metadata log dir under ``root``: ``meta.properties`` and
    ``__cluster_metadata-0`` with segments (one batch per original batch, rolled every ``records_per_segment``
    records) and, with ``snapshot_at``, a snapshot of the image after offsets ``< snapshot_at``."""
    root = Path(root)
    part = root / METADATA_PARTITION_DIR
    part.mkdir(parents=True, exist_ok=True)
    meta = MetaProperties(version=MetaPropertiesVersion.V1, cluster_id=cluster_id, node_id=node_id)
    (root / "meta.properties").write_text(to_text(meta), encoding="utf-8")
    batches: list[list[LogEntry]] = []
    for e in entries:
        if batches and batches[-1][0].batch_base_offset == e.batch_base_offset:
            batches[-1].append(e)
        else:
            batches.append([e])
    segment: SegmentWriter | None = None
    in_segment = 0
    for batch in batches:
        if segment is None or (records_per_segment is not None and in_segment >= records_per_segment):
            if segment is not None:
                segment.close()
            segment = SegmentWriter(part / segment_file_name(batch[0].offset))
            in_segment = 0
        segment.append_batch(batch, leader_epoch=batch[0].leader_epoch, timestamp=batch[0].timestamp)
        in_segment += len(batch)
    if segment is not None:
        segment.close()
    if snapshot_at is not None:
        image = replay_entries([e for e in entries if e.offset < snapshot_at])
        last = max((e.timestamp or 0) for e in entries if e.offset < snapshot_at)
        write_snapshot(snapshot_path(part, SnapshotId(snapshot_at, 1)), image.to_records(), epoch=1,
                       last_contained_log_timestamp=last, timestamp=last)
    return root


def append_to_segment(segment: str | Path, entries: Sequence[LogEntry]) -> None:
    """Append entries (one batch per original batch) to an existing segment, as a live log grows."""
    with open(segment, "ab") as f:
        batch: list[LogEntry] = []
        for e in entries:
            if batch and batch[0].batch_base_offset != e.batch_base_offset:
                f.write(encode_batch(batch, leader_epoch=batch[0].leader_epoch, timestamp=batch[0].timestamp))
                batch = []
            batch.append(e)
        if batch:
            f.write(encode_batch(batch, leader_epoch=batch[0].leader_epoch, timestamp=batch[0].timestamp))


def write_jsonl_file(path: str | Path, entries: Sequence[LogEntry]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        write_jsonl(entries, f)
    return path
