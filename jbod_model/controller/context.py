"""What a handler may look at: the image plus the controller-only state, frozen, in one
:class:`ControllerContext`.

Kafka's controller keeps some state that never reaches the metadata image. The reference controller keeps the
same and documents which is which:

*Image* (``MetadataImage``, changed only by replay): features and metadata.version, broker registrations
(epoch, incarnation, fenced, controlled shutdown, online directories), topics and partitions (replicas,
directories, ISR, ELR, leader, epochs), configs.

*Controller state* (:class:`ControllerState`, derived from replayed records and from handled requests, never
written to the log):

- ``register_broker_record_offsets`` — the log offset of each broker's latest RegisterBrokerRecord
  (``ClusterControlManager.registerBrokerRecordOffsets``); a heartbeat unfences a broker only once it reports
  a metadata offset at or past it (R10.1), and a heartbeat before any registration is STALE_BROKER_EPOCH
  (R5.1).
- ``heartbeats`` — ``BrokerHeartbeatManager``'s soft state per broker: whether the session is fenced, the last
  metadata offset reported, and the controlled-shutdown offset.

*Controller configuration* (:class:`ControllerConfig`): the cluster id registrations must carry (None = accept
any), the static defaults of ``unclean.leader.election.enable``, ``min.insync.replicas``, ``num.partitions``,
``default.replication.factor``, whether ELR is enabled (``eligible.leader.replicas.enable``), the
kraft.version.

Lookups that Kafka keeps as controller indexes (``BrokersToIsrs``, ``BrokersToElrs``,
``directoriesToPartitions``) are derived from the image here, and iterated in the deterministic order of
semantics §7.4 (the string ``"<topicIdBase64>-<partitionId>"``) where Java iterates hash sets.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import NamedTuple

from jbod_model.directory_id import MIGRATING, UNASSIGNED, is_reserved
from jbod_model.errors import RequestRejected
from jbod_model.errors_codes import Errors
from jbod_model.image import (
    BrokerRegistration,
    ConfigResourceType,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
)
from jbod_model.metadata_version import MetadataVersion
from jbod_model.records.metadata import NO_LEADER
from jbod_model.uuid import ONE_UUID, ZERO_UUID, Uuid

UNCLEAN_LEADER_ELECTION_ENABLE_CONFIG = "unclean.leader.election.enable"
MIN_IN_SYNC_REPLICAS_CONFIG = "min.insync.replicas"
#: ``ConfigResource`` name of the cluster-wide dynamic broker defaults.
CLUSTER_DEFAULT_RESOURCE = (ConfigResourceType.BROKER, "")


class TopicIdPartition(NamedTuple):
    """``org.apache.kafka.server.common.TopicIdPartition``."""

    topic_id: Uuid
    partition_id: int

    @property
    def sort_key(self) -> str:
        """The string Kafka's tests sort partition changes by (semantics §7.4)."""
        return f"{self.topic_id}-{self.partition_id}"


def sorted_partitions(partitions: Iterable[TopicIdPartition]) -> list[TopicIdPartition]:
    """Deterministic stand-in for Java's hash-set iteration order (§7.4): by :attr:`TopicIdPartition.sort_key`."""
    # The same string as sort_key, with each topic id formatted once: a fencing or a disk failure in a large
    # cluster sorts tens of thousands of partitions of a few hundred topics.
    names: dict[Uuid, str] = {}

    def key(tp: TopicIdPartition) -> str:
        name = names.get(tp.topic_id)
        if name is None:
            name = names[tp.topic_id] = f"{tp.topic_id}-"
        return name + str(tp.partition_id)

    return sorted(partitions, key=key)


def deterministic_topic_id(name: str, offset: int) -> Uuid:
    """The topic id the reference controller gives a new topic: a version-4 Uuid derived from the topic name
    and the offset its TopicRecord is written at, re-drawn (re-hashed) while it is ZERO, ONE or prints with a
    leading '-', the same constraints as ``Uuid.randomUuid``. Kafka draws a random id; a reference model must
    be reproducible (docs/divergences.md)."""
    counter = 0
    while True:
        digest = bytearray(hashlib.sha256(f"kraft-jbod-topic:{name}:{offset}:{counter}".encode()).digest()[:16])
        digest[6] = (digest[6] & 0x0F) | 0x40  # version 4
        digest[8] = (digest[8] & 0x3F) | 0x80  # IETF variant
        candidate = Uuid.from_bytes(bytes(digest))
        if candidate not in (ZERO_UUID, ONE_UUID) and not str(candidate).startswith("-"):
            return candidate
        counter += 1


TopicIdFactory = Callable[[str, int], Uuid]


@dataclass(frozen=True, slots=True)
class BrokerHeartbeatState:
    """One broker in ``BrokerHeartbeatManager`` (soft state). ``fenced`` is the manager's view (a broker is
    "unfenced" there while it is in the unfenced list); ``metadata_offset`` the last offset it reported (-1
    after a registration); ``controlled_shutdown_offset`` ≥ 0 while it is shutting down. Session timeouts are
    not modelled (no clock): an unfenced session is always valid."""

    fenced: bool = True
    metadata_offset: int = -1
    controlled_shutdown_offset: int = -1

    @property
    def shutting_down(self) -> bool:
        return self.controlled_shutdown_offset >= 0

    def touched(self, fenced: bool, metadata_offset: int) -> BrokerHeartbeatState:
        """``BrokerHeartbeatManager.touch``: a fenced broker leaves controlled shutdown."""
        return BrokerHeartbeatState(fenced=fenced, metadata_offset=metadata_offset,
                                    controlled_shutdown_offset=-1 if fenced else self.controlled_shutdown_offset)


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    """Static controller configuration (``KafkaConfig`` values the controller reads)."""

    #: The cluster id registrations must match (``INCONSISTENT_CLUSTER_ID``); None accepts any.
    cluster_id: str | None = None
    #: Static ``unclean.leader.election.enable`` (Kafka's default: false).
    unclean_leader_election_enable: bool = False
    #: Static ``min.insync.replicas`` (default 1); only used for ELR.
    min_insync_replicas: int = 1
    #: ``num.partitions`` for CreateTopics with numPartitions = -1.
    default_num_partitions: int = 1
    #: ``default.replication.factor`` for CreateTopics with replicationFactor = -1.
    default_replication_factor: int = 1
    #: ``eligible.leader.replicas.enable`` (3.9 default: false); ELR also needs metadata.version ≥ 4.0-IV0.
    eligible_leader_replicas_enabled: bool = False
    #: The finalized ``kraft.version`` the controller adds to the features a broker must support.
    kraft_version: int = 0


@dataclass(frozen=True, slots=True)
class ControllerState:
    """Controller-only state (see the module docstring). Frozen: the controller replaces it, never edits
    it."""

    register_broker_record_offsets: Mapping[int, int] = field(default_factory=lambda: MappingProxyType({}))
    heartbeats: Mapping[int, BrokerHeartbeatState] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True, slots=True)
class UsableBroker:
    """``org.apache.kafka.metadata.placement.UsableBroker``."""

    id: int
    rack: str | None
    fenced: bool


@dataclass(frozen=True)
class ControllerContext:
    """Everything a handler reads: the image, the controller state, the configuration and the offset the next
    record will be written at (``offsetControl.nextWriteOffset()``). Derived indexes are computed once per
    context.
    """

    image: MetadataImage
    state: ControllerState = field(default_factory=ControllerState)
    config: ControllerConfig = field(default_factory=ControllerConfig)
    next_write_offset: int = 0
    topic_id_factory: TopicIdFactory = deterministic_topic_id

    # -- features --------------------------------------------------------------------------------------------

    @property
    def metadata_version(self) -> MetadataVersion:
        return self.image.metadata_version

    def is_elr_enabled(self) -> bool:
        """``ReplicationControlManager.isElrEnabled``: configured on and supported by metadata.version."""
        return self.config.eligible_leader_replicas_enabled and self.metadata_version.is_elr_supported()

    # -- cluster ---------------------------------------------------------------------------------------------

    def registration(self, broker_id: int) -> BrokerRegistration | None:
        return self.image.cluster.brokers.get(broker_id)

    def check_broker_epoch(self, broker_id: int, broker_epoch: int) -> None:
        """Mirrors ``ClusterControlManager.checkBrokerEpoch``: an unknown broker or another epoch is
        STALE_BROKER_EPOCH (raised as :class:`RequestRejected`)."""
        reg = self.registration(broker_id)
        if reg is None:
            raise RequestRejected(Errors.STALE_BROKER_EPOCH, f"No broker registration found for broker id {broker_id}")
        if reg.epoch != broker_epoch:
            raise RequestRejected(Errors.STALE_BROKER_EPOCH,
                                  f"Expected broker epoch {reg.epoch}, but got broker epoch {broker_epoch}")

    def is_active(self, broker_id: int) -> bool:
        """``ClusterControlManager.isActive``: registered, unfenced and not in controlled shutdown."""
        reg = self.registration(broker_id)
        return reg is not None and not reg.fenced and not reg.in_controlled_shutdown

    def in_controlled_shutdown(self, broker_id: int) -> bool:
        reg = self.registration(broker_id)
        return reg is not None and reg.in_controlled_shutdown

    def has_online_dir(self, broker_id: int, directory: Uuid) -> bool:
        """``ClusterControlManager.hasOnlineDir`` (R2.3)."""
        return self.image.cluster.has_online_dir(broker_id, directory)

    def default_dir(self, broker_id: int) -> Uuid:
        """``KRaftClusterDescriber.defaultDir`` → ``ClusterControlManager.defaultDir`` (R7.1)."""
        if not self.metadata_version.is_directory_assignment_supported():
            return MIGRATING
        reg = self.registration(broker_id)
        if reg is None:
            # Kafka returns UNASSIGNED rather than throwing so the caller's own error (e.g. an unknown broker
            # in a manual assignment) reaches the client.
            return UNASSIGNED
        if not reg.directories:
            return MIGRATING
        if len(reg.directories) == 1:
            return reg.directories[0]
        return UNASSIGNED

    def directory_owner(self, directory: Uuid) -> int | None:
        """``ClusterControlManager.directoryToBroker``."""
        return self._directory_to_broker.get(directory)

    @cached_property
    def _directory_to_broker(self) -> Mapping[Uuid, int]:
        return {d: reg.id for reg in self.image.cluster.brokers.values() for d in reg.directories}

    def usable_brokers(self) -> list[UsableBroker]:
        """``BrokerHeartbeatManager.usableBrokers``: every broker with a heartbeat session that is not
        shutting down, with its fencing state, ascending by id (Java's HashMap order for small integer
        ids)."""
        out = []
        for broker_id in sorted(self.state.heartbeats):
            hb = self.state.heartbeats[broker_id]
            if hb.shutting_down:
                continue
            reg = self.registration(broker_id)
            out.append(UsableBroker(id=broker_id, rack=reg.rack if reg is not None else None, fenced=hb.fenced))
        return out

    # -- topics ----------------------------------------------------------------------------------------------

    def topic(self, topic_id: Uuid) -> TopicImage | None:
        return self.image.topics.by_id.get(topic_id)

    def topic_by_name(self, name: str) -> TopicImage | None:
        topic_id = self.image.topics.by_name.get(name)
        return None if topic_id is None else self.image.topics.by_id.get(topic_id)

    def partition(self, tp: TopicIdPartition) -> PartitionRegistration | None:
        return self.image.topics.get_partition(tp.topic_id, tp.partition_id)

    def _all_partitions(self) -> Iterator[tuple[TopicIdPartition, PartitionRegistration]]:
        for topic in self.image.topics.by_id.values():
            for pid, part in topic.partitions.items():
                yield TopicIdPartition(topic.id, pid), part

    def partitions_with_broker_in_isr(self, broker_id: int) -> list[TopicIdPartition]:
        """``BrokersToIsrs.partitionsWithBrokerInIsr``, sorted (§7.4)."""
        # Filtered before a key is built: most partitions of a large cluster do not match.
        return sorted_partitions([TopicIdPartition(topic.id, pid) for topic in self.image.topics.by_id.values()
                                  for pid, p in topic.partitions.items() if broker_id in p.isr])

    def partitions_with_broker_in_elr(self, broker_id: int) -> list[TopicIdPartition]:
        """``BrokersToElrs.partitionsWithBrokerInElr``, sorted (§7.4)."""
        return sorted_partitions([tp for tp, p in self._all_partitions() if broker_id in p.elr])

    def partitions_with_no_leader(self) -> list[TopicIdPartition]:
        """``BrokersToIsrs.partitionsWithNoLeader``, sorted (§7.4)."""
        return sorted_partitions([tp for tp, p in self._all_partitions() if p.leader == NO_LEADER])

    def has_leaderships(self, broker_id: int) -> bool:
        """``BrokersToIsrs.hasLeaderships``: the broker leads a partition it is in the ISR of."""
        return any(p.leader == broker_id and broker_id in p.isr for _, p in self._all_partitions())

    def partitions_in_directory(self, directory: Uuid) -> list[TopicIdPartition]:
        """``directoriesToPartitions.get(dir)``, sorted (§7.4). Reserved ids are never indexed."""
        if is_reserved(directory):
            return []
        found = self._partitions_by_directory.get(directory)
        if found is None:
            # One directory at a time: a heartbeat reports one or two, and indexing every directory of a large
            # cluster (sorting all its replicas) would cost far more than the scan.
            found = self._partitions_by_directory[directory] = tuple(sorted_partitions(
                [TopicIdPartition(topic.id, pid) for topic in self.image.topics.by_id.values()
                 for pid, part in topic.partitions.items() if directory in part.directories]))
        return list(found)

    @cached_property
    def _partitions_by_directory(self) -> dict[Uuid, tuple[TopicIdPartition, ...]]:
        return {}

    # -- configs ---------------------------------------------------------------------------------------------

    def topic_config(self, topic_name: str, key: str) -> str | None:
        """``ConfigurationControlManager.getTopicConfig``: the topic's dynamic config, else the cluster-wide
        dynamic broker default (static config is the caller's fallback). Per-node dynamic overrides of the
        active controller are not modelled."""
        resources = self.image.configs.resources
        value = resources.get((ConfigResourceType.TOPIC, topic_name), {}).get(key)
        if value is None:
            value = resources.get(CLUSTER_DEFAULT_RESOURCE, {}).get(key)
        return value

    def unclean_leader_election_enabled_for_topic(self, topic_name: str) -> bool:
        """``ConfigurationControlManager.uncleanLeaderElectionEnabledForTopic`` (Java
        ``Boolean.parseBoolean``)."""
        value = self.topic_config(topic_name, UNCLEAN_LEADER_ELECTION_ENABLE_CONFIG)
        if value is None:
            return self.config.unclean_leader_election_enable
        return value.lower() == "true"

    def topic_effective_min_isr(self, topic_name: str) -> int:
        """``ReplicationControlManager.getTopicEffectiveMinIsr``: min(min.insync.replicas, replication
        factor)."""
        value = self.topic_config(topic_name, MIN_IN_SYNC_REPLICAS_CONFIG)
        try:
            min_isr = int(value) if value is not None else self.config.min_insync_replicas
        except ValueError:
            min_isr = self.config.min_insync_replicas
        topic = self.topic_by_name(topic_name)
        if topic is None or 0 not in topic.partitions:
            return min_isr
        return min(min_isr, len(topic.partitions[0].replicas))
