"""KRaft metadata records, every version, mirroring ``metadata/src/main/resources/common/metadata/*.json``.

Each record is a frozen dataclass; field names are Kafka's in snake_case and each field's :func:`kfield` carries the
spec (JSON name, type, versions, tag, nullability, default). Null and sentinel semantics are Kafka's: on a
PartitionChangeRecord ``None`` means "unchanged" and ``leader == NO_LEADER_CHANGE (-2)`` means "leader unchanged".

Record types this model does not interpret are still decoded when their schema is known (ConfigRecord,
ProducerIdsRecord, …) and otherwise carried as :class:`OpaqueRecord`, so nothing read is ever dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any, ClassVar

from jbod_model.records.schema import Message, VersionedMessage, kfield
from jbod_model.uuid import ZERO_UUID, Uuid

NO_LEADER = -1
NO_LEADER_CHANGE = -2


class LeaderRecoveryState(IntEnum):
    """``LeaderRecoveryState`` wire values; -1 on a PartitionChangeRecord means "no change"."""

    NO_CHANGE = -1
    RECOVERED = 0
    RECOVERING = 1


class BrokerRegistrationFencingChange(IntEnum):
    """``BrokerRegistrationChangeRecord.Fenced`` values (``BrokerRegistrationFencingChange``)."""

    UNFENCE = -1
    NONE = 0
    FENCE = 1


class BrokerRegistrationInControlledShutdownChange(IntEnum):
    """``BrokerRegistrationChangeRecord.InControlledShutdown`` values."""

    NONE = 0
    IN_CONTROLLED_SHUTDOWN = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataRecord(VersionedMessage):
    """A metadata record: a message with an api key (the record type) and a version."""


# ---------------------------------------------------------------------------------------------------------------
# Nested structs


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerEndpoint(Message):
    """``RegisterBrokerRecord.EndPoints[]``."""

    name: str = kfield("name", "string", default="")
    host: str = kfield("host", "string", default="")
    port: int = kfield("port", "uint16", default=0)
    security_protocol: int = kfield("securityProtocol", "int16", default=0)


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerFeature(Message):
    """``RegisterBrokerRecord.Features[]``."""

    name: str = kfield("name", "string", default="")
    min_supported_version: int = kfield("minSupportedVersion", "int16", default=0)
    max_supported_version: int = kfield("maxSupportedVersion", "int16", default=0)


# ---------------------------------------------------------------------------------------------------------------
# Cluster records


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterBrokerRecord(MetadataRecord):
    """RegisterBrokerRecord (apiKey 0), versions 0–3. v1 adds InControlledShutdown, v2 IsMigratingZkBroker,
    v3 LogDirs (tag 0): the broker's *online* log directories (KIP-858)."""

    API_KEY: ClassVar[int] = 0
    TYPE_NAME: ClassVar[str] = "REGISTER_BROKER_RECORD"
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, 3)

    version: int = 3
    broker_id: int = kfield("brokerId", "int32", default=0)
    is_migrating_zk_broker: bool = kfield("isMigratingZkBroker", "bool", versions="2+", default=False)
    incarnation_id: Uuid = kfield("incarnationId", "uuid", default=ZERO_UUID)
    broker_epoch: int = kfield("brokerEpoch", "int64", default=0)
    end_points: tuple[BrokerEndpoint, ...] = kfield("endPoints", "[]struct", default=(), struct=BrokerEndpoint)
    features: tuple[BrokerFeature, ...] = kfield("features", "[]struct", default=(), struct=BrokerFeature)
    rack: str | None = kfield("rack", "string", nullable="0+", default=None)
    fenced: bool = kfield("fenced", "bool", default=True)
    in_controlled_shutdown: bool = kfield("inControlledShutdown", "bool", versions="1+", default=False)
    log_dirs: tuple[Uuid, ...] = kfield("logDirs", "[]uuid", versions="3+", tag=0, default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class UnregisterBrokerRecord(MetadataRecord):
    """UnregisterBrokerRecord (apiKey 1), version 0."""

    API_KEY: ClassVar[int] = 1
    TYPE_NAME: ClassVar[str] = "UNREGISTER_BROKER_RECORD"

    broker_id: int = kfield("brokerId", "int32", default=0)
    broker_epoch: int = kfield("brokerEpoch", "int64", default=0)


@dataclass(frozen=True, slots=True, kw_only=True)
class FenceBrokerRecord(MetadataRecord):
    """FenceBrokerRecord (apiKey 7), version 0 — legacy; newer controllers write BrokerRegistrationChangeRecord."""

    API_KEY: ClassVar[int] = 7
    TYPE_NAME: ClassVar[str] = "FENCE_BROKER_RECORD"

    id: int = kfield("id", "int32", default=0)
    epoch: int = kfield("epoch", "int64", default=0)


@dataclass(frozen=True, slots=True, kw_only=True)
class UnfenceBrokerRecord(MetadataRecord):
    """UnfenceBrokerRecord (apiKey 8), version 0 — legacy, as FenceBrokerRecord."""

    API_KEY: ClassVar[int] = 8
    TYPE_NAME: ClassVar[str] = "UNFENCE_BROKER_RECORD"

    id: int = kfield("id", "int32", default=0)
    epoch: int = kfield("epoch", "int64", default=0)


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerRegistrationChangeRecord(MetadataRecord):
    """BrokerRegistrationChangeRecord (apiKey 17), versions 0–2. Fenced: -1 unfence, 0 no change, 1 fence.
    LogDirs (v2+, tag 2): the broker's new *online* directories; an empty list means "no change" (R4.4)."""

    API_KEY: ClassVar[int] = 17
    TYPE_NAME: ClassVar[str] = "BROKER_REGISTRATION_CHANGE_RECORD"
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, 2)

    version: int = 2
    broker_id: int = kfield("brokerId", "int32", default=0)
    broker_epoch: int = kfield("brokerEpoch", "int64", default=0)
    fenced: int = kfield("fenced", "int8", tag=0, default=0)
    in_controlled_shutdown: int = kfield("inControlledShutdown", "int8", versions="1+", tag=1, default=0)
    log_dirs: tuple[Uuid, ...] = kfield("logDirs", "[]uuid", versions="2+", tag=2, default=())


#: ``RegisterControllerRecord.EndPoints[]`` and ``.Features[]`` have the same fields as the broker's structs; one
#: Python type each serves every schema that shares the shape (Kafka generates a class per schema).
ControllerEndpoint = BrokerEndpoint
ControllerFeature = BrokerFeature


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterControllerRecord(MetadataRecord):
    """RegisterControllerRecord (apiKey 27), version 0. Carried for completeness; controllers hold no replicas."""

    API_KEY: ClassVar[int] = 27
    TYPE_NAME: ClassVar[str] = "REGISTER_CONTROLLER_RECORD"

    controller_id: int = kfield("controllerId", "int32", default=0)
    incarnation_id: Uuid = kfield("incarnationId", "uuid", default=ZERO_UUID)
    zk_migration_ready: bool = kfield("zkMigrationReady", "bool", default=False)
    end_points: tuple[ControllerEndpoint, ...] = kfield("endPoints", "[]struct", default=(),
                                                        struct=ControllerEndpoint)
    features: tuple[ControllerFeature, ...] = kfield("features", "[]struct", default=(), struct=ControllerFeature)


# ---------------------------------------------------------------------------------------------------------------
# Topic records


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicRecord(MetadataRecord):
    """TopicRecord (apiKey 2), version 0."""

    API_KEY: ClassVar[int] = 2
    TYPE_NAME: ClassVar[str] = "TOPIC_RECORD"

    name: str = kfield("name", "string", default="")
    topic_id: Uuid = kfield("topicId", "uuid", default=ZERO_UUID)


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionRecord(MetadataRecord):
    """PartitionRecord (apiKey 3), versions 0–2. v1 adds Directories (a plain, non-tagged field: one directory per
    replica, in replica order — KIP-858); v2 adds EligibleLeaderReplicas and LastKnownElr (tags 1, 2; KIP-966)."""

    API_KEY: ClassVar[int] = 3
    TYPE_NAME: ClassVar[str] = "PARTITION_RECORD"
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, 2)

    version: int = 2
    partition_id: int = kfield("partitionId", "int32", default=-1)
    topic_id: Uuid = kfield("topicId", "uuid", default=ZERO_UUID)
    replicas: tuple[int, ...] = kfield("replicas", "[]int32", default=())
    isr: tuple[int, ...] = kfield("isr", "[]int32", default=())
    removing_replicas: tuple[int, ...] = kfield("removingReplicas", "[]int32", default=())
    adding_replicas: tuple[int, ...] = kfield("addingReplicas", "[]int32", default=())
    leader: int = kfield("leader", "int32", default=-1)
    leader_recovery_state: int = kfield("leaderRecoveryState", "int8", tag=0, default=0)
    leader_epoch: int = kfield("leaderEpoch", "int32", default=-1)
    partition_epoch: int = kfield("partitionEpoch", "int32", default=-1)
    directories: tuple[Uuid, ...] = kfield("directories", "[]uuid", versions="1+", default=())
    eligible_leader_replicas: tuple[int, ...] | None = kfield("eligibleLeaderReplicas", "[]int32", versions="2+",
                                                              tag=1, nullable="2+", default=None)
    last_known_elr: tuple[int, ...] | None = kfield("lastKnownElr", "[]int32", versions="2+", tag=2,
                                                    nullable="2+", default=None, aliases=("lastKnownELR",))


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionChangeRecord(MetadataRecord):
    """PartitionChangeRecord (apiKey 5), versions 0–2. Every field after TopicId is tagged; its default means "no
    change". v1 adds Directories (tag 8; null = unchanged, [] = reset to MIGRATING), v2 the ELR fields (tags 6, 7).
    Note the declaration (JSON) order puts Directories before the ELR fields although its tag is higher."""

    API_KEY: ClassVar[int] = 5
    TYPE_NAME: ClassVar[str] = "PARTITION_CHANGE_RECORD"
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, 2)

    version: int = 2
    partition_id: int = kfield("partitionId", "int32", default=-1)
    topic_id: Uuid = kfield("topicId", "uuid", default=ZERO_UUID)
    isr: tuple[int, ...] | None = kfield("isr", "[]int32", tag=0, nullable="0+", default=None)
    leader: int = kfield("leader", "int32", tag=1, default=NO_LEADER_CHANGE)
    replicas: tuple[int, ...] | None = kfield("replicas", "[]int32", tag=2, nullable="0+", default=None)
    removing_replicas: tuple[int, ...] | None = kfield("removingReplicas", "[]int32", tag=3, nullable="0+",
                                                       default=None)
    adding_replicas: tuple[int, ...] | None = kfield("addingReplicas", "[]int32", tag=4, nullable="0+",
                                                     default=None)
    leader_recovery_state: int = kfield("leaderRecoveryState", "int8", tag=5, default=-1)
    directories: tuple[Uuid, ...] | None = kfield("directories", "[]uuid", versions="1+", tag=8, nullable="1+",
                                                  default=None)
    eligible_leader_replicas: tuple[int, ...] | None = kfield("eligibleLeaderReplicas", "[]int32", versions="2+",
                                                              tag=6, nullable="2+", default=None)
    last_known_elr: tuple[int, ...] | None = kfield("lastKnownElr", "[]int32", versions="2+", tag=7,
                                                    nullable="2+", default=None, aliases=("lastKnownELR",))


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveTopicRecord(MetadataRecord):
    """RemoveTopicRecord (apiKey 9), version 0."""

    API_KEY: ClassVar[int] = 9
    TYPE_NAME: ClassVar[str] = "REMOVE_TOPIC_RECORD"

    topic_id: Uuid = kfield("topicId", "uuid", default=ZERO_UUID)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigRecord(MetadataRecord):
    """ConfigRecord (apiKey 4), version 0. ResourceType 2 = TOPIC, 4 = BROKER; a null value deletes the key."""

    API_KEY: ClassVar[int] = 4
    TYPE_NAME: ClassVar[str] = "CONFIG_RECORD"

    resource_type: int = kfield("resourceType", "int8", default=0)
    resource_name: str = kfield("resourceName", "string", default="")
    name: str = kfield("name", "string", default="")
    value: str | None = kfield("value", "string", nullable="0+", default=None)


# ---------------------------------------------------------------------------------------------------------------
# Features and housekeeping


@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureLevelRecord(MetadataRecord):
    """FeatureLevelRecord (apiKey 12), version 0. ``metadata.version`` is the one this model gates on."""

    API_KEY: ClassVar[int] = 12
    TYPE_NAME: ClassVar[str] = "FEATURE_LEVEL_RECORD"

    name: str = kfield("name", "string", default="")
    feature_level: int = kfield("featureLevel", "int16", default=0)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerIdsRecord(MetadataRecord):
    """ProducerIdsRecord (apiKey 15), version 0."""

    API_KEY: ClassVar[int] = 15
    TYPE_NAME: ClassVar[str] = "PRODUCER_IDS_RECORD"

    broker_id: int = kfield("brokerId", "int32", default=0)
    broker_epoch: int = kfield("brokerEpoch", "int64", default=-1)
    next_producer_id: int = kfield("nextProducerId", "int64", default=0)


@dataclass(frozen=True, slots=True, kw_only=True)
class NoOpRecord(MetadataRecord):
    """NoOpRecord (apiKey 20), version 0: written every metadata.max.idle.interval.ms; >95 % of real logs."""

    API_KEY: ClassVar[int] = 20
    TYPE_NAME: ClassVar[str] = "NO_OP_RECORD"


@dataclass(frozen=True, slots=True, kw_only=True)
class ZkMigrationStateRecord(MetadataRecord):
    """ZkMigrationStateRecord (apiKey 21), version 0: 0 None, 1 Migration, 2 PreMigration, 3 PostMigration."""

    API_KEY: ClassVar[int] = 21
    TYPE_NAME: ClassVar[str] = "ZK_MIGRATION_STATE_RECORD"

    zk_migration_state: int = kfield("zkMigrationState", "int8", default=0)


@dataclass(frozen=True, slots=True, kw_only=True)
class BeginTransactionRecord(MetadataRecord):
    """BeginTransactionRecord (apiKey 23), version 0: starts an atomic group of records (e.g. bootstrap)."""

    API_KEY: ClassVar[int] = 23
    TYPE_NAME: ClassVar[str] = "BEGIN_TRANSACTION_RECORD"

    name: str | None = kfield("name", "string", tag=0, nullable="0+", default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class EndTransactionRecord(MetadataRecord):
    """EndTransactionRecord (apiKey 24), version 0."""

    API_KEY: ClassVar[int] = 24
    TYPE_NAME: ClassVar[str] = "END_TRANSACTION_RECORD"


@dataclass(frozen=True, slots=True, kw_only=True)
class AbortTransactionRecord(MetadataRecord):
    """AbortTransactionRecord (apiKey 25), version 0."""

    API_KEY: ClassVar[int] = 25
    TYPE_NAME: ClassVar[str] = "ABORT_TRANSACTION_RECORD"

    reason: str | None = kfield("reason", "string", tag=0, nullable="0+", default=None)


# ---------------------------------------------------------------------------------------------------------------
# Record types kept opaque


@dataclass(frozen=True, slots=True)
class OpaqueRecord:
    """A record whose schema this model does not type (ACLs, quotas, SCRAM, delegation tokens, types newer than
    the model, or a known type at a newer version). Nothing is dropped: a record read from bytes keeps its body
    (``payload``, the bytes after the frame); one read from JSON keeps its ``data`` object verbatim."""

    api_key: int
    version: int
    type_name: str
    data: Any = None
    payload: bytes | None = None


#: Every metadata record type with a typed schema here, by api key.
TYPED_RECORDS: dict[int, type[MetadataRecord]] = {
    cls.API_KEY: cls
    for cls in (
        RegisterBrokerRecord, UnregisterBrokerRecord, TopicRecord, PartitionRecord, ConfigRecord,
        PartitionChangeRecord, FenceBrokerRecord, UnfenceBrokerRecord, RemoveTopicRecord, FeatureLevelRecord,
        ProducerIdsRecord, BrokerRegistrationChangeRecord, NoOpRecord, ZkMigrationStateRecord,
        BeginTransactionRecord, EndTransactionRecord, AbortTransactionRecord, RegisterControllerRecord,
    )
}

#: Names of every metadata record type Kafka has shipped (``MetadataRecordType``), typed or not.
RECORD_TYPE_NAMES: dict[int, str] = {
    **{k: c.TYPE_NAME for k, c in TYPED_RECORDS.items()},
    6: "ACCESS_CONTROL_RECORD",
    10: "DELEGATION_TOKEN_RECORD",
    11: "USER_SCRAM_CREDENTIAL_RECORD",
    14: "CLIENT_QUOTA_RECORD",
    18: "ACCESS_CONTROL_ENTRY_RECORD",
    19: "REMOVE_ACCESS_CONTROL_ENTRY_RECORD",
    22: "REMOVE_USER_SCRAM_CREDENTIAL_RECORD",
    26: "REMOVE_DELEGATION_TOKEN_RECORD",
    28: "CLEAR_ELR_RECORD",
}
RECORD_API_KEYS: dict[str, int] = {name: key for key, name in RECORD_TYPE_NAMES.items()}


def type_name_of(api_key: int) -> str:
    """The ``MetadataRecordType`` name of an api key; ``UNKNOWN_<k>`` for one this model has never heard of."""
    return RECORD_TYPE_NAMES.get(api_key, f"UNKNOWN_{api_key}")


#: Any record the model can carry.
Record = (
    RegisterBrokerRecord | UnregisterBrokerRecord | TopicRecord | PartitionRecord | ConfigRecord
    | PartitionChangeRecord | FenceBrokerRecord | UnfenceBrokerRecord | RemoveTopicRecord | FeatureLevelRecord
    | ProducerIdsRecord | BrokerRegistrationChangeRecord | NoOpRecord | ZkMigrationStateRecord
    | BeginTransactionRecord | EndTransactionRecord | AbortTransactionRecord | RegisterControllerRecord
    | OpaqueRecord
)
