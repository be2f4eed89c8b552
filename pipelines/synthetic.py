"""Deterministic synthetic KRaft metadata logs for the contract tests and the benchmark.

:func:`generate` writes a KRaft metadata log of a JBOD cluster over time — metadata.version 3.9-IV0, brokers
registering with several log directories and unfencing, topics whose replicas are placed on directories, ISR changes,
directory failures, fencing and unfencing, moves of replicas to another directory, topic deletions, configs, metadata
transactions and the NoOpRecords that make up most of a real log — as a list of :class:`LogEntry` with offsets and
append timestamps. Every record replays without a fault, and the log upholds every invariant of
``jbod_model.invariants`` that Kafka's controller upholds.

Whatever Kafka's controller decides is decided by the reference controller (``jbod_model.controller``), which the
generator drives as brokers would and whose records it writes as they come:

* unfencing — a broker's heartbeat once it caught up (``processBrokerHeartbeat`` → ``handleBrokerUnfenced``: the
  BrokerRegistrationChangeRecord, then leaderless partitions may elect it);
* fencing — the broker's session expires (``maybeFenceOneStaleBroker`` → ``handleBrokerFenced``): in the same batch
  and *before* the BrokerRegistrationChangeRecord that fences it, PartitionChangeRecords move its leaderships away
  and take it out of every ISR (the last ISR member stays, leaderless);
* a directory failure — the broker's heartbeat reports it offline (``handleDirectoriesOffline``: leadership and ISR
  moves of the partitions in it, then the change record listing the remaining online directories);
* ISR changes — a leader's AlterPartition (shrink by a follower, or expand back to the followers that can fetch);
* moves to another directory — the broker's AssignReplicasToDirs.

The generator writes itself only what the reference controller does not model or what a broker chooses: broker
registrations, topic creation, topic deletion (RemoveTopicRecord), configs, transactions and NoOpRecords. A topic is
created as a manual assignment (``kafka-topics --replica-assignment``): replicas drawn at random with an active
leader first, ISR = the active replicas (``createTopic``). One simplification: each replica is placed directly in a
random online directory of its broker, as if its AssignReplicasToDirs were folded into the creation (Kafka writes
UNASSIGNED for a multi-directory broker, then a PartitionChangeRecord once the broker reports the directory).

Only ``jbod_model`` records are used; :func:`write_metadata_dir` and :func:`write_jsonl_file` put a stream on disk the
way Kafka (or the canonical JSONL) holds it.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from jbod_model.controller import ControllerContext, ReferenceController, handle_request
from jbod_model.controller.messages import (
    AlterPartitionBrokerState,
    AlterPartitionPartitionData,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionTopicData,
    ApiRequest,
    AssignReplicasToDirsDirectory,
    AssignReplicasToDirsPartition,
    AssignReplicasToDirsRequest,
    AssignReplicasToDirsResponse,
    AssignReplicasToDirsTopic,
    BrokerHeartbeatRequest,
)
from jbod_model.directory_id import is_reserved
from jbod_model.image import MetadataImage
from jbod_model.meta_properties import MetaProperties, MetaPropertiesVersion, to_text
from jbod_model.metadata_version import FEATURE_NAME
from jbod_model.records.entry import LogEntry, group_batches
from jbod_model.records.metadata import (
    NO_LEADER,
    BeginTransactionRecord,
    BrokerEndpoint,
    ConfigRecord,
    EndTransactionRecord,
    FeatureLevelRecord,
    NoOpRecord,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from jbod_model.replay import replay_entries
from jbod_model.storage.files import METADATA_PARTITION_DIR, SnapshotId, segment_file_name
from jbod_model.storage.log_reader import iter_batches
from jbod_model.storage.log_writer import SegmentWriter, encode_batch, snapshot_path, write_snapshot
from jbod_model.stream import write_jsonl
from jbod_model.uuid import Uuid

_TOPIC_CONFIG = 2
#: The leader epoch of every batch (one controller leader for the whole log).
_LEADER_EPOCH = 1


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
    #: The share of the other operations that fence a broker (its session expires) or, when one is fenced, unfence it
    #: again (its heartbeat). Fencing writes a PartitionChangeRecord per partition whose ISR the broker is in, so
    #: None (the default) scales it to the cluster: 2/13 on small clusters, less as brokers host more partitions,
    #: about one fencing record per operation on average whatever the size.
    fence_share: float | None = None
    seed: int = 7
    start_time_ms: int = 1_700_000_000_000


def _uuid(rng: random.Random) -> Uuid:
    while True:
        candidate = Uuid(rng.getrandbits(64) - (1 << 63), rng.getrandbits(64) - (1 << 63))
        if not is_reserved(candidate) and not str(candidate).startswith("-"):
            return candidate


def _partition_errors(response: object) -> list[int]:
    """The non-zero per-partition error codes of an AlterPartition or AssignReplicasToDirs response."""
    if isinstance(response, AlterPartitionResponse):
        return [p.error_code for t in response.topics for p in t.partitions if p.error_code]
    if isinstance(response, AssignReplicasToDirsResponse):
        return [p.error_code for d in response.directories for t in d.topics for p in t.partitions if p.error_code]
    return []


class _Writer:
    """Writes the log through a :class:`ReferenceController`, which holds the state written so far (image and
    heartbeat sessions): the generator's own records are replayed into it, the controller's are written by it."""

    def __init__(self, spec: SyntheticSpec) -> None:
        self.spec = spec
        self.rng = random.Random(spec.seed)
        self.controller = ReferenceController()
        self.entries: list[LogEntry] = []
        self.time = spec.start_time_ms
        #: The live partitions in creation order (random picks must not depend on hash order); a topic's partitions
        #: are contiguous, ``topic_order`` says where: every topic has ``partitions_per_topic`` of them.
        self.keys: list[tuple[Uuid, int]] = []
        self.topic_order: list[Uuid] = []
        #: The directories each broker registered with (it never re-registers here).
        self.registered_dirs: dict[int, tuple[Uuid, ...]] = {}

    @property
    def image(self) -> MetadataImage:
        return self.controller.image

    def emit(self, records: Sequence[Record]) -> None:
        """One write of the generator's own records: they land in one batch with one append time."""
        self.time += self.rng.randint(1, 500)
        base = len(self.entries)
        for i, record in enumerate(records):
            entry = LogEntry(offset=base + i, record=record, batch_base_offset=base, leader_epoch=_LEADER_EPOCH,
                             timestamp=self.time)
            self.controller.replay(entry)
            self.entries.append(entry)

    def commit(self, written: Sequence[LogEntry]) -> None:
        """One write of the reference controller (already at the next offsets, one batch, replayed by it): stamped
        with the batch's append time and leader epoch."""
        if not written:
            return
        assert written[0].offset == len(self.entries), "the controller writes at the log's next offset"
        self.time += self.rng.randint(1, 500)
        self.entries.extend(replace(e, leader_epoch=_LEADER_EPOCH, timestamp=self.time, source=None)
                            for e in written)

    def request(self, request: ApiRequest) -> None:
        """A broker's request to the controller; its records (if any) are one write. The generator only sends
        requests the controller accepts: a refusal (top level or per partition) is a bug here."""
        handled = self.controller.handle_request(request)
        assert handled.error is None and not _partition_errors(handled.response), \
            f"{type(request).__name__} refused: {handled.response}"
        self.commit(handled.entries)

    def heartbeat(self, broker_id: int, offline_dirs: tuple[Uuid, ...] = ()) -> None:
        """A heartbeat from a broker that has caught up with the log (so a fenced one is unfenced)."""
        reg = self.image.cluster.brokers[broker_id]
        self.request(BrokerHeartbeatRequest(broker_id=broker_id, broker_epoch=reg.epoch,
                                            current_metadata_offset=self.controller.next_offset - 1,
                                            offline_log_dirs=offline_dirs))

    def alter_isr(self, ctx: ControllerContext, key: tuple[Uuid, int], *,
                  shrink: bool) -> AlterPartitionRequest | None:
        """The leader's AlterPartition: drop a random follower from the ISR, or add back every follower that can
        fetch (active, its replica's directory online). None when the partition has no leader or nothing to
        change."""
        part = ctx.image.topics.get_partition(*key)
        if part is None or part.leader == NO_LEADER:
            return None
        if shrink:
            followers = [b for b in part.isr if b != part.leader]
            if not followers:
                return None
            dropped = self.rng.choice(followers)
            isr = [b for b in part.isr if b != dropped]
        else:
            isr = [b for b in part.replicas
                   if b in part.isr or (ctx.is_active(b) and ctx.has_online_dir(b, part.directory(b)))]
            if len(isr) == len(part.isr):
                return None
        brokers = ctx.image.cluster.brokers
        data = AlterPartitionPartitionData(
            partition_index=key[1], leader_epoch=part.leader_epoch, partition_epoch=part.partition_epoch,
            leader_recovery_state=part.leader_recovery_state,
            new_isr_with_epochs=tuple(AlterPartitionBrokerState(broker_id=b, broker_epoch=brokers[b].epoch)
                                      for b in isr))
        return AlterPartitionRequest(broker_id=part.leader, broker_epoch=brokers[part.leader].epoch,
                                     topics=(AlterPartitionTopicData(topic_id=key[0], partitions=(data,)),))

    # -- operations ------------------------------------------------------------------------------------------

    def register(self, broker_id: int) -> None:
        epoch = len(self.entries) + 100
        dirs = tuple(sorted(_uuid(self.rng) for _ in range(self.spec.dirs_per_broker)))
        self.registered_dirs[broker_id] = dirs
        endpoint = BrokerEndpoint(name="PLAINTEXT", host=f"broker-{broker_id}", port=9092, security_protocol=0)
        self.emit([RegisterBrokerRecord(version=3, broker_id=broker_id, broker_epoch=epoch,
                                        incarnation_id=_uuid(self.rng), end_points=(endpoint,), fenced=True,
                                        rack=f"rack-{broker_id % 3}", log_dirs=dirs)])

    def unfence(self, broker_id: int) -> None:
        self.heartbeat(broker_id)

    def create_topic(self, index: int) -> None:
        spec, rng = self.spec, self.rng
        ctx = self.controller.context()
        brokers = sorted(ctx.image.cluster.brokers)
        active = [b for b in brokers if ctx.is_active(b)]
        if not active:
            return  # every broker fenced: Kafka refuses the creation (INVALID_REPLICA_ASSIGNMENT)
        topic_id = _uuid(rng)
        name = f"topic-{index}"
        self.topic_order.append(topic_id)
        records: list[Record] = [TopicRecord(name=name, topic_id=topic_id)]
        for pid in range(spec.partitions_per_topic):
            leader = rng.choice(active)
            others = [b for b in brokers if b != leader]
            replicas = [leader, *rng.sample(others, min(spec.replication_factor, len(brokers)) - 1)]
            isr = [b for b in replicas if ctx.is_active(b)]
            dirs = [rng.choice(ctx.image.cluster.brokers[b].directories) for b in replicas]
            self.keys.append((topic_id, pid))
            records.append(PartitionRecord(version=1, partition_id=pid, topic_id=topic_id, replicas=tuple(replicas),
                                           isr=tuple(isr), leader=leader, leader_epoch=0, partition_epoch=0,
                                           directories=tuple(dirs)))
        # Kafka writes a topic and its partitions atomically; large topics span several batches.
        for chunk_start in range(0, len(records), 500):
            self.emit(records[chunk_start:chunk_start + 500])

    def isr_change(self) -> None:
        if not self.keys:
            return
        key = self.rng.choice(self.keys)
        request = self.alter_isr(self.controller.context(), key, shrink=self.rng.random() < 0.5)
        if request is not None:
            self.request(request)

    def fail_directory(self) -> None:
        # A running broker reports it; one with a single directory left would halt instead.
        brokers = self.image.cluster.brokers
        candidates = [b for b, reg in brokers.items() if not reg.fenced and len(reg.directories) > 1]
        if not candidates:
            return
        broker = self.rng.choice(sorted(candidates))
        failed = self.rng.choice(brokers[broker].directories)
        # OfflineLogDirs is cumulative since the broker started: every directory it registered and lost.
        online = brokers[broker].directories
        self.heartbeat(broker, tuple(d for d in self.registered_dirs[broker] if d not in online or d == failed))

    def fence_or_unfence(self) -> None:
        """A broker bounces: while one is fenced it comes back (its heartbeat unfences it), else a random broker's
        session expires. So at most one broker is fenced at a time, as in a rolling restart."""
        brokers = self.image.cluster.brokers
        fenced = sorted(b for b, reg in brokers.items() if reg.fenced)
        if fenced:
            self.unfence(fenced[0])
        else:
            self.commit(self.controller.fence_stale_broker(self.rng.choice(sorted(brokers))))

    def reassign_directory(self) -> None:
        if not self.keys:
            return
        key = self.rng.choice(self.keys)
        part = self.image.topics.get_partition(*key)
        assert part is not None
        brokers = self.image.cluster.brokers
        # An intra-broker move (AlterReplicaLogDirs) of a healthy replica, reported by the running broker once the
        # copy caught up. A replica on a failed directory has nothing to copy from.
        movers = [b for b in part.replicas if not brokers[b].fenced and len(brokers[b].directories) > 1
                  and brokers[b].has_online_dir(part.directory(b))]
        if not movers:
            return
        broker = movers[0]
        target = self.rng.choice([d for d in brokers[broker].directories if d != part.directory(broker)])
        topic = AssignReplicasToDirsTopic(topic_id=key[0],
                                          partitions=(AssignReplicasToDirsPartition(partition_index=key[1]),))
        self.request(AssignReplicasToDirsRequest(broker_id=broker, broker_epoch=brokers[broker].epoch,
                                                 directories=(AssignReplicasToDirsDirectory(id=target,
                                                                                            topics=(topic,)),)))

    def delete_topic(self) -> None:
        if len(self.topic_order) <= 1:
            return
        position = self.rng.randrange(len(self.topic_order))
        topic_id = self.topic_order.pop(position)
        name = self.image.topics.by_id[topic_id].name
        # By position (a topic's partitions are contiguous): comparing Uuids over every partition of a large cluster
        # would dominate the generator's time.
        n = self.spec.partitions_per_topic
        del self.keys[position * n:(position + 1) * n]
        self.emit([ConfigRecord(resource_type=_TOPIC_CONFIG, resource_name=name, name="retention.ms",
                                value="1000")])
        self.emit([RemoveTopicRecord(topic_id=topic_id)])

    def transaction(self) -> None:
        """ISR changes of the first partitions in one metadata transaction (each computed from the state before
        it: they touch different partitions), with a config change so it is never empty."""
        if not self.keys:
            return
        ctx = self.controller.context()
        records: list[Record] = [BeginTransactionRecord(name="synthetic")]
        for key in self.keys[:3]:
            request = self.alter_isr(ctx, key, shrink=False)
            if request is None:
                request = self.alter_isr(ctx, key, shrink=True)
            if request is not None:
                result = handle_request(ctx, request)
                assert result.error is None and not _partition_errors(result.response), \
                    f"AlterPartition refused: {result.response}"
                records.extend(result.records)
        name = ctx.image.topics.by_id[self.keys[0][0]].name
        records.append(ConfigRecord(resource_type=_TOPIC_CONFIG, resource_name=name, name="segment.ms",
                                    value=str(self.rng.randint(1, 10**6))))
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
    ops = [w.isr_change] * 6 + [w.reassign_directory] * 2 + [w.fail_directory, w.delete_topic, w.transaction]
    fence_share = spec.fence_share
    if fence_share is None:
        # A fence writes about RF·P/B records (every partition whose ISR the broker is in), half the bounces fence.
        partitions = max(1, spec.topics * spec.partitions_per_topic * spec.replication_factor)
        fence_share = min(2 / 13, 2 * spec.brokers / partitions)
    topic_index = spec.topics
    for _ in range(spec.operations):
        if w.rng.random() < spec.noop_share:
            w.emit([NoOpRecord()])
            continue
        op = w.fence_or_unfence if w.rng.random() < fence_share else w.rng.choice(ops)
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
    segment: SegmentWriter | None = None
    in_segment = 0
    for batch in group_batches(entries):
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
        for batch in group_batches(entries):
            f.write(encode_batch(batch, leader_epoch=batch[0].leader_epoch, timestamp=batch[0].timestamp))


def corrupt_batch(root: str | Path, offset: int) -> tuple[Path, int, int]:
    """Flip one byte inside the records of the batch holding ``offset`` in the metadata log dir ``root``, so that its
    CRC-32C fails while its framing stays sound (a disk or copy error). Returns the segment and the batch's first and
    last offsets."""
    for segment in sorted((Path(root) / METADATA_PARTITION_DIR).glob("*.log")):
        for batch in iter_batches(segment):
            h = batch.header
            if h.base_offset <= offset <= h.last_offset:
                data = bytearray(segment.read_bytes())
                data[h.position + h.size - 1] ^= 0xFF  # the last byte of the batch: inside its last record
                segment.write_bytes(bytes(data))
                return segment, h.base_offset, h.last_offset
    raise ValueError(f"no batch holds offset {offset} under {root}")


def write_jsonl_file(path: str | Path, entries: Sequence[LogEntry]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        write_jsonl(entries, f)
    return path
