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
from typing import Final

from jbod_model.directory_id import LOST, DirectoryState
from jbod_model.image import BrokerRegistration, ClusterImage, MetadataImage, PartitionRegistration
from jbod_model.slots import slot_constructor
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
    # Module constants, not OfflineReason.X: reading an enum member through its class costs more than the test.
    if reg is None:
        return _UNREGISTERED
    if reg.fenced:
        return _FENCED
    if directory.lsb == LOST.lsb and directory.msb == LOST.msb:  # == LOST, on the halves (one compare, mostly)
        return _DIR_LOST
    if not reg.has_online_dir(directory):
        return _DIR_OFFLINE
    return None


_UNREGISTERED: Final = OfflineReason.BROKER_UNREGISTERED
_FENCED: Final = OfflineReason.BROKER_FENCED
_DIR_LOST: Final = OfflineReason.DIRECTORY_LOST
_DIR_OFFLINE: Final = OfflineReason.DIRECTORY_OFFLINE
#: ``new_replica_state(topic_id, partition_id, broker_id, directory, directory_state, offline, offline_reason)``:
#: a :class:`ReplicaState` without its keyword ``__init__`` (no checks to skip: it has no ``__post_init__``). The
#: replica view builds one per replica whose state it compares — thousands for one fenced broker.
new_replica_state: Final = slot_constructor(ReplicaState)


def registration_replica(reg: BrokerRegistration | None, topic_id: Uuid, partition_id: int, broker_id: int,
                         directory: Uuid) -> ReplicaState:
    """The state of the replica of partition ``partition_id`` of ``topic_id`` on ``broker_id``, recorded in
    ``directory``, when the broker's registration is ``reg`` (None: not registered)."""
    reason = registration_offline_reason(reg, directory)
    return new_replica_state(topic_id, partition_id, broker_id, directory, DirectoryState.of(directory),
                             reason is not None, reason)


def partition_replicas(cluster: ClusterImage, topic_id: Uuid, partition_id: int,
                       partition: PartitionRegistration) -> Iterator[ReplicaState]:
    """The replica states of one partition, in replica order."""
    return registration_replicas(cluster.brokers.get, topic_id, partition_id, partition)


def registration_replicas(registration: Callable[[int], BrokerRegistration | None], topic_id: Uuid,
                          partition_id: int, partition: PartitionRegistration) -> Iterator[ReplicaState]:
    """:func:`partition_replicas` with the brokers' registrations looked up by ``registration`` (None: not
    registered) instead of a :class:`ClusterImage`."""
    for broker_id, directory in zip(partition.replicas, partition.directories, strict=True):
        yield registration_replica(registration(broker_id), topic_id, partition_id, broker_id, directory)


def replica_view(image: MetadataImage) -> Iterator[ReplicaState]:
    """Every replica of every partition of ``image`` (unordered; callers sort)."""
    for topic, partition_id, partition in image.topics.partitions():
        yield from partition_replicas(image.cluster, topic.id, partition_id, partition)


def offline_replicas(image: MetadataImage) -> list[ReplicaState]:
    """The offline replicas, sorted by topic id string, partition, broker."""
    return sorted((r for r in replica_view(image) if r.offline),
                  key=lambda r: (str(r.topic_id), r.partition_id, r.broker_id))
