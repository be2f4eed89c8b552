"""The metadata image: brokers with their online log directories, topics, partitions with positional directories,
finalized features and configs. Immutable; changed only by replay (``jbod_model.replay``).

Mirrors ``org.apache.kafka.image.MetadataImage`` and its parts (``ClusterImage``, ``TopicsImage``,
``FeaturesImage``, ``ConfigurationsImage``) with ``BrokerRegistration`` and ``PartitionRegistration`` from
``org.apache.kafka.metadata``. Mappings inside an image are never mutated after construction; a new image shares
every unchanged sub-mapping with its predecessor (``MetadataDelta.apply``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Final, TypeVar

from jbod_model.directory_id import MIGRATING, is_online, migrating_array
from jbod_model.errors import InputError, ReplayFault
from jbod_model.metadata_version import FEATURE_NAME, UNSET, MetadataVersion
from jbod_model.records.metadata import (
    NO_LEADER,
    NO_LEADER_CHANGE,
    BrokerEndpoint,
    BrokerFeature,
    ConfigRecord,
    FeatureLevelRecord,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
    TopicRecord,
)
from jbod_model.slots import slot_constructor
from jbod_model.uuid import Uuid

LossHandler = Callable[[str], None]
_K = TypeVar("_K")
_V = TypeVar("_V")


def raise_on_loss(what: str) -> None:
    """Default loss handler of :meth:`MetadataImage.to_records`: writing at an older metadata.version would drop
    state (Kafka's ``ImageWriterOptions`` loss handler)."""
    raise InputError(f"Metadata has been lost because the following could not be represented in "
                     f"metadata.version {what}")


class ConfigResourceType(IntEnum):
    """``ConfigResource.Type`` wire values used by ConfigRecord."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """A registered broker. Mirrors ``org.apache.kafka.metadata.BrokerRegistration``.

    ``directories`` are the broker's *online* log directories, kept sorted by Kafka's signed Uuid order (the
    constructor of the Java class sorts them); an empty tuple means the registration predates directory
    assignment (metadata.version < 3.7-IV2) and every directory counts as online (R2.1, KAFKA-16162).
    """

    id: int
    epoch: int
    incarnation_id: Uuid
    listeners: tuple[BrokerEndpoint, ...] = ()
    supported_features: tuple[BrokerFeature, ...] = ()
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False
    is_migrating_zk_broker: bool = False
    directories: tuple[Uuid, ...] = ()

    def __post_init__(self) -> None:
        if list(self.directories) != sorted(self.directories):
            object.__setattr__(self, "directories", tuple(sorted(self.directories)))

    @classmethod
    def from_record(cls, record: RegisterBrokerRecord) -> BrokerRegistration:
        """Mirrors ``BrokerRegistration.fromRecord`` (R4.1): LogDirs only exist from RegisterBrokerRecord v3."""
        return cls(id=record.broker_id, epoch=record.broker_epoch, incarnation_id=record.incarnation_id,
                   listeners=record.end_points, supported_features=record.features, rack=record.rack,
                   fenced=record.fenced, in_controlled_shutdown=record.in_controlled_shutdown,
                   is_migrating_zk_broker=record.is_migrating_zk_broker,
                   directories=tuple(sorted(record.log_dirs)))

    def has_online_dir(self, directory: Uuid) -> bool:
        """Mirrors ``BrokerRegistration.hasOnlineDir`` (R2.2)."""
        return is_online(directory, self.directories)

    def to_record(self, mv: MetadataVersion, loss: LossHandler = raise_on_loss) -> RegisterBrokerRecord:
        """Mirrors ``BrokerRegistration.toRecord`` (R4.5): LogDirs are written only at MV ≥ 3.7-IV2."""
        version = mv.register_broker_record_version()
        if self.directories and not mv.is_directory_assignment_supported():
            loss(f"{mv}: the online log directories of one or more brokers")
        return RegisterBrokerRecord(
            version=version, broker_id=self.id,
            is_migrating_zk_broker=self.is_migrating_zk_broker if version >= 2 else False,
            incarnation_id=self.incarnation_id, broker_epoch=self.epoch, end_points=self.listeners,
            features=self.supported_features, rack=self.rack, fenced=self.fenced,
            in_controlled_shutdown=self.in_controlled_shutdown if version >= 1 else False,
            log_dirs=self.directories if version >= 3 else ())


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    """A partition's replica set and leadership. Mirrors ``org.apache.kafka.metadata.PartitionRegistration``.

    ``directories[i]`` is the log directory of ``replicas[i]`` (positional, R1). ``elr`` and ``last_known_elr``
    are KIP-966's EligibleLeaderReplicas and LastKnownElr (empty when unused).
    """

    replicas: tuple[int, ...]
    directories: tuple[Uuid, ...]
    isr: tuple[int, ...]
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()
    leader: int = NO_LEADER
    leader_recovery_state: int = 0
    leader_epoch: int = 0
    partition_epoch: int = 0

    def __post_init__(self) -> None:
        # R1.2: the private constructor rejects a non-empty directory array of the wrong length.
        if self.directories and len(self.directories) != len(self.replicas):
            raise ReplayFault(f"The lengths for replicas ({len(self.replicas)}) and directories "
                              f"({len(self.directories)}) do not match.", record=self)

    @classmethod
    def from_fields(cls, replicas: tuple[int, ...], directories: tuple[Uuid, ...], isr: tuple[int, ...],
                    removing_replicas: tuple[int, ...], adding_replicas: tuple[int, ...], elr: tuple[int, ...],
                    last_known_elr: tuple[int, ...], leader: int, leader_recovery_state: int, leader_epoch: int,
                    partition_epoch: int) -> PartitionRegistration:
        """The registration of every field in declaration order, checked as the constructor checks, without its
        keyword ``__init__`` (``jbod_model.slots``): a keyed store reads registrations back by the thousand."""
        if directories and len(directories) != len(replicas):
            # The constructor's own check, and its fault.
            return cls(replicas, directories, isr, removing_replicas, adding_replicas, elr, last_known_elr, leader,
                       leader_recovery_state, leader_epoch, partition_epoch)
        return _new_partition(replicas, directories, isr, removing_replicas, adding_replicas, elr, last_known_elr,
                              leader, leader_recovery_state, leader_epoch, partition_epoch)

    @classmethod
    def from_record(cls, record: PartitionRecord) -> PartitionRegistration:
        """Mirrors ``PartitionRegistration(PartitionRecord)`` (R1.3): a record without directories, with an empty
        list, or with only MIGRATING entries yields all-MIGRATING (``defaultToMigrating``)."""
        dirs = record.directories
        if dirs and len(dirs) != len(record.replicas):
            raise ReplayFault("InvalidReplicaDirectoriesException: the lengths for replicas and directories do "
                              "not match", record=record)
        # The directories now have the replicas' length (checked above, or defaulted), which is all __post_init__
        # checks: build without it (one of these per PartitionRecord).
        return _new_partition(record.replicas, _default_to_migrating(dirs, len(record.replicas)), record.isr,
                              record.removing_replicas, record.adding_replicas, record.eligible_leader_replicas or (),
                              record.last_known_elr or (), record.leader, record.leader_recovery_state,
                              record.leader_epoch, record.partition_epoch)

    def merge(self, record: PartitionChangeRecord) -> PartitionRegistration:
        """Mirrors ``PartitionRegistration.merge`` as of 3.7.1+ (KAFKA-16583, R1.4).

        A change without Directories keeps the old array (resized only when it is all-MIGRATING); an explicit
        empty list resets the partition to all-MIGRATING; a leader change bumps the leader epoch even when the
        leader is the same broker; every change bumps the partition epoch.
        """
        new_replicas = record.replicas if record.replicas is not None else self.replicas
        if record.directories is not None:
            if (record.replicas is not None and record.directories
                    and len(record.directories) != len(record.replicas)):
                raise ReplayFault("InvalidReplicaDirectoriesException: the lengths for replicas and directories "
                                  "do not match", record=record)
            candidate = record.directories
        else:
            candidate = self.directories
        new_dirs = _default_to_migrating(candidate, len(new_replicas))
        if len(new_dirs) != len(new_replicas):
            raise ReplayFault(f"The lengths for replicas ({len(new_replicas)}) and directories ({len(new_dirs)}) "
                              "do not match: a replica change without directories on a partition whose "
                              "directories are known", record=record)
        if record.leader == NO_LEADER_CHANGE:
            leader, leader_epoch = self.leader, self.leader_epoch
        else:
            leader, leader_epoch = record.leader, self.leader_epoch + 1
        # The lengths were checked above (all that __post_init__ checks): build without it, once per change record.
        return _new_partition(
            new_replicas,
            new_dirs,
            record.isr if record.isr is not None else self.isr,
            record.removing_replicas if record.removing_replicas is not None else self.removing_replicas,
            record.adding_replicas if record.adding_replicas is not None else self.adding_replicas,
            record.eligible_leader_replicas if record.eligible_leader_replicas is not None else self.elr,
            record.last_known_elr if record.last_known_elr is not None else self.last_known_elr,
            leader,
            record.leader_recovery_state if record.leader_recovery_state != -1 else self.leader_recovery_state,
            leader_epoch,
            self.partition_epoch + 1,
        )

    def directory(self, broker_id: int) -> Uuid:
        """Mirrors ``PartitionRegistration.directory`` (R1.5): the directory of a replica; error if not a replica."""
        try:
            return self.directories[self.replicas.index(broker_id)]
        except ValueError:
            raise InputError(f"Replica {broker_id} is not a replica of this partition: {self.replicas}") from None

    def has_leader(self) -> bool:
        return self.leader != NO_LEADER

    def is_reassigning(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    def has_same_assignment(self, other: PartitionRegistration) -> bool:
        """Mirrors ``hasSameAssignment`` (R1.7): replicas, directories, adding and removing."""
        return (self.replicas == other.replicas and self.directories == other.directories
                and self.adding_replicas == other.adding_replicas
                and self.removing_replicas == other.removing_replicas)

    def to_record(self, topic_id: Uuid, partition_id: int, mv: MetadataVersion,
                  loss: LossHandler = raise_on_loss) -> PartitionRecord:
        """Mirrors ``PartitionRegistration.toRecord`` (R1.6): Directories only at MV ≥ 3.7-IV2 (else loss unless
        all MIGRATING); ELR fields only when supported and non-empty."""
        version = mv.partition_record_version()
        if version == 0 and any(d != MIGRATING for d in self.directories):
            loss(f"{mv}: the directory assignment state of one or more replicas")
        if version < 2 and (self.elr or self.last_known_elr):
            loss(f"{mv}: the eligible leader replicas of one or more partitions")
        return PartitionRecord(
            version=version, partition_id=partition_id, topic_id=topic_id, replicas=self.replicas,
            isr=self.isr, removing_replicas=self.removing_replicas, adding_replicas=self.adding_replicas,
            leader=self.leader, leader_recovery_state=self.leader_recovery_state, leader_epoch=self.leader_epoch,
            partition_epoch=self.partition_epoch, directories=self.directories if version >= 1 else (),
            eligible_leader_replicas=self.elr if version >= 2 and self.elr else None,
            last_known_elr=self.last_known_elr if version >= 2 and self.last_known_elr else None)


#: PartitionRegistration from its fields in declaration order, without __post_init__ (see jbod_model.slots).
_new_partition: Final = slot_constructor(PartitionRegistration)


def _default_to_migrating(dirs: tuple[Uuid, ...], replica_count: int) -> tuple[Uuid, ...]:
    """``PartitionRegistration.defaultToMigrating`` (R1.3/R1.4 step 3)."""
    if not dirs:
        return migrating_array(replica_count)
    first = dirs[0]
    # Almost every array holds real directory ids: the first one settles it. MIGRATING is Uuid(0, 0): comparing the
    # halves is ``first != MIGRATING`` without a call of the dataclass's Python-level __eq__ (once per change record).
    if first.msb or first.lsb:
        return dirs
    if all(d == MIGRATING for d in dirs):
        return migrating_array(replica_count)
    return dirs


@dataclass(frozen=True, slots=True, eq=False)
class TopicImage:
    """Mirrors ``org.apache.kafka.image.TopicImage``. ``partitions`` is a dict or, once replay has changed the topic, a
    persistent map (``MetadataDelta.apply``); two topic images are equal when their partitions are, whichever kind
    holds them. Their order is no part of the image (a dict's is its insertions', a persistent map's its hashes'):
    both are deterministic, and the image's JSON sorts them (``jbod_model.image_json``)."""

    name: str
    id: Uuid
    partitions: Mapping[int, PartitionRegistration] = field(default_factory=dict)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TopicImage):
            return NotImplemented
        return self.name == other.name and self.id == other.id and _same_mapping(self.partitions, other.partitions)

    __hash__ = None  # type: ignore[assignment]  # as the dataclass's own eq would leave it: partitions are unhashable


def _same_mapping(a: Mapping[_K, _V], b: Mapping[_K, _V]) -> bool:
    """Mapping equality across kinds: a dict never equals a persistent map of the same items under ``==``."""
    if a is b:
        return True
    if type(a) is type(b):
        return a == b
    if len(a) != len(b):
        return False
    missing = object()
    return all(b.get(k, missing) == v for k, v in a.items())


@dataclass(frozen=True, slots=True)
class TopicsImage:
    """Mirrors ``TopicsImage``: topics by id, plus the name index."""

    by_id: Mapping[Uuid, TopicImage] = field(default_factory=dict)
    by_name: Mapping[str, Uuid] = field(default_factory=dict)

    def get_partition(self, topic_id: Uuid, partition_id: int) -> PartitionRegistration | None:
        topic = self.by_id.get(topic_id)
        return None if topic is None else topic.partitions.get(partition_id)

    def partitions(self) -> Iterator[tuple[TopicImage, int, PartitionRegistration]]:
        """Every partition with its topic, in no particular order."""
        for topic in self.by_id.values():
            for pid, part in topic.partitions.items():
                yield topic, pid, part


@dataclass(frozen=True, slots=True)
class ClusterImage:
    """Mirrors ``ClusterImage`` (brokers only: controllers hold no replicas)."""

    brokers: Mapping[int, BrokerRegistration] = field(default_factory=dict)

    def has_online_dir(self, broker_id: int, directory: Uuid) -> bool:
        """Mirrors ``ClusterControlManager.hasOnlineDir`` (R2.3): false for an unregistered broker."""
        reg = self.brokers.get(broker_id)
        return reg is not None and reg.has_online_dir(directory)

    def directory_owner(self, directory: Uuid) -> int | None:
        """The broker whose registration lists ``directory`` (``directoryToBroker``), if any."""
        for reg in self.brokers.values():
            if directory in reg.directories:
                return reg.id
        return None


@dataclass(frozen=True, slots=True)
class FeaturesImage:
    """Mirrors ``FeaturesImage``: finalized feature levels (metadata.version among them)."""

    levels: Mapping[str, int] = field(default_factory=dict)

    @property
    def metadata_version(self) -> MetadataVersion:
        level = self.levels.get(FEATURE_NAME)
        # Read on every controller decision: share one value per level instead of building one each time.
        return UNSET if level is None else MetadataVersion.of(level)


@dataclass(frozen=True, slots=True)
class ConfigurationsImage:
    """Mirrors ``ConfigurationsImage``: resource (type, name) → config key → value."""

    resources: Mapping[tuple[int, str], Mapping[str, str]] = field(default_factory=dict)

    def topic_config(self, topic_name: str, key: str) -> str | None:
        return self.resources.get((ConfigResourceType.TOPIC, topic_name), {}).get(key)


@dataclass(frozen=True, slots=True)
class MetadataImage:
    """The whole image. ``last_offset`` is the offset of the last record replayed into it (-1 when none), like
    Kafka's ``MetadataProvenance``; it is provenance, not state, and image equality ignores it via
    :meth:`same_state`."""

    features: FeaturesImage = field(default_factory=FeaturesImage)
    cluster: ClusterImage = field(default_factory=ClusterImage)
    topics: TopicsImage = field(default_factory=TopicsImage)
    configs: ConfigurationsImage = field(default_factory=ConfigurationsImage)
    last_offset: int = -1

    @property
    def metadata_version(self) -> MetadataVersion:
        return self.features.metadata_version

    def same_state(self, other: MetadataImage) -> bool:
        """Equality of everything but provenance."""
        return (self.features == other.features and self.cluster == other.cluster
                and self.topics == other.topics and self.configs == other.configs)

    def to_records(self, mv: MetadataVersion | None = None, loss: LossHandler = raise_on_loss) -> list[Record]:
        """The records that rebuild this image from empty, as a snapshot holds them (``MetadataImage.write``):
        features (metadata.version first), brokers, then each topic followed by its partitions, then configs."""
        mv = mv or self.metadata_version
        out: list[Record] = []
        levels = self.features.levels
        for name in sorted(levels, key=lambda n: (n != FEATURE_NAME, n)):
            out.append(FeatureLevelRecord(name=name, feature_level=levels[name]))
        for broker_id in sorted(self.cluster.brokers):
            out.append(self.cluster.brokers[broker_id].to_record(mv, loss))
        for topic in sorted(self.topics.by_id.values(), key=lambda t: t.name):
            out.append(TopicRecord(name=topic.name, topic_id=topic.id))
            for pid in sorted(topic.partitions):
                out.append(topic.partitions[pid].to_record(topic.id, pid, mv, loss))
        for (rtype, rname) in sorted(self.configs.resources):
            for key, value in sorted(self.configs.resources[(rtype, rname)].items()):
                out.append(ConfigRecord(resource_type=rtype, resource_name=rname, name=key, value=value))
        return out


EMPTY_IMAGE: Final = MetadataImage()
