"""The replica view: for every (topic, partition, broker) its directory, the directory's state and whether the
replica is offline, and why.

Mirrors ``KRaftMetadataCache.getOfflineReplicas`` / ``isReplicaOffline`` (R2.6): a replica is offline when its broker
is not registered, is fenced, or does not have the replica's directory online (``BrokerRegistration.hasOnlineDir``).
Kafka also counts a broker lacking the requested listener as offline; the metadata log names no listener for a
request, so that case does not exist here (docs/divergences.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum

from jbod_model.directory_id import LOST, DirectoryState
from jbod_model.image import BrokerRegistration, ClusterImage, MetadataImage, PartitionRegistration
from jbod_model.uuid import Uuid


class OfflineReason(Enum):
    """Why a replica is offline, in the order Kafka's metadata cache checks (first match wins)."""

    BROKER_UNREGISTERED = "BROKER_UNREGISTERED"
    BROKER_FENCED = "BROKER_FENCED"
    #: The recorded directory is ``DirectoryId.LOST``: offline in an unidentifiable directory.
    DIRECTORY_LOST = "DIRECTORY_LOST"
    #: The recorded directory is not among the broker's online directories (the disk failed or is gone).
    DIRECTORY_OFFLINE = "DIRECTORY_OFFLINE"


@dataclass(frozen=True, slots=True)
class ReplicaState:
    """One replica of one partition on one broker."""

    topic_id: Uuid
    partition_id: int
    broker_id: int
    directory: Uuid
    directory_state: DirectoryState
    offline: bool
    offline_reason: OfflineReason | None


def offline_reason(cluster: ClusterImage, broker_id: int, directory: Uuid) -> OfflineReason | None:
    """Why the replica on ``broker_id`` recorded in ``directory`` is offline, or None when it is online."""
    return registration_offline_reason(cluster.brokers.get(broker_id), directory)


def registration_offline_reason(reg: BrokerRegistration | None, directory: Uuid) -> OfflineReason | None:
    """:func:`offline_reason` from the broker's registration alone (None: not registered): a replica's state reads
    nothing else of the image but its own directory."""
    if reg is None:
        return OfflineReason.BROKER_UNREGISTERED
    if reg.fenced:
        return OfflineReason.BROKER_FENCED
    if directory == LOST:
        return OfflineReason.DIRECTORY_LOST
    if not reg.has_online_dir(directory):
        return OfflineReason.DIRECTORY_OFFLINE
    return None


def partition_replicas(cluster: ClusterImage, topic_id: Uuid, partition_id: int,
                       partition: PartitionRegistration) -> Iterator[ReplicaState]:
    """The replica states of one partition, in replica order."""
    return registration_replicas(cluster.brokers.get, topic_id, partition_id, partition)


def registration_replicas(registration: Callable[[int], BrokerRegistration | None], topic_id: Uuid,
                          partition_id: int, partition: PartitionRegistration) -> Iterator[ReplicaState]:
    """:func:`partition_replicas` with the brokers' registrations looked up by ``registration`` (None: not
    registered) instead of a :class:`ClusterImage`."""
    for broker_id, directory in zip(partition.replicas, partition.directories, strict=True):
        reason = registration_offline_reason(registration(broker_id), directory)
        yield ReplicaState(topic_id=topic_id, partition_id=partition_id, broker_id=broker_id, directory=directory,
                           directory_state=DirectoryState.of(directory), offline=reason is not None,
                           offline_reason=reason)


def replica_view(image: MetadataImage) -> Iterator[ReplicaState]:
    """Every replica of every partition of ``image`` (unordered; callers sort)."""
    for topic, partition_id, partition in image.topics.partitions():
        yield from partition_replicas(image.cluster, topic.id, partition_id, partition)


def offline_replicas(image: MetadataImage) -> list[ReplicaState]:
    """The offline replicas, sorted by topic id string, partition, broker."""
    return sorted((r for r in replica_view(image) if r.offline),
                  key=lambda r: (str(r.topic_id), r.partition_id, r.broker_id))
