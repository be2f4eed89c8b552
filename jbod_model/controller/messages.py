"""Controller RPC requests and responses, mirroring ``clients/src/main/resources/common/message/*.json``
(3.9).

Each message is a frozen dataclass whose fields carry their Kafka spec through :func:`kfield` (JSON name = the
spec name with its first letter lowercased, type, versions, tag, nullability, default), so
``json_codec.message_from_json`` / ``message_to_json`` read and print them exactly as Kafka's generated
``*JsonConverter`` classes do. Every request and response also carries the API ``version`` it is expressed in
(default: the latest the 3.9 branch knows), which is not part of the JSON ``data`` object.

Only the controller-facing APIs the reference controller handles are described. A request is named in streams
by ``"<API>_REQUEST"`` (e.g. ``ASSIGN_REPLICAS_TO_DIRS_REQUEST``) and its response by ``"<API>_RESPONSE"``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, ClassVar, TypeVar

from jbod_model.errors import InputError
from jbod_model.records.json_codec import message_from_json, message_to_json
from jbod_model.records.metadata import BrokerEndpoint, BrokerFeature
from jbod_model.records.schema import Message, VersionedMessage, kfield
from jbod_model.uuid import ZERO_UUID, Uuid


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiMessage(VersionedMessage):
    """A request or response of one RPC at one version (``ApiMessage`` + the header's api version); ``API_KEY`` is
    the RPC's (``ApiKeys``), ``TYPE_NAME`` ``"<API>_REQUEST"`` / ``"<API>_RESPONSE"``."""

    def to_json(self) -> dict[str, Any]:
        """The ``data`` object at this message's version (error codes as plain integers)."""
        plain: dict[str, Any] = _plain(message_to_json(self, self.version))
        return plain


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiResponse(ApiMessage):
    """A controller response."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiRequest(ApiMessage):
    """A controller request. ``RESPONSE_TYPE`` names the response class."""

    RESPONSE_TYPE: ClassVar[type[ApiResponse]] = ApiResponse


def _plain(value: Any) -> Any:
    """JSON values with enum members (``Errors`` codes) replaced by their wire integers."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, IntEnum):
        return int(value)
    return value


# ------------------------------------------------------------------------------------------------------------
# BrokerRegistration (apiKey 62)


#: ``BrokerRegistrationRequest.Listeners[]`` / ``.Features[]``: the same fields as RegisterBrokerRecord's EndPoints and
#: Features, so the record's types serve the request too and registration copies them as they are.
BrokerRegistrationListener = BrokerEndpoint
BrokerRegistrationFeature = BrokerFeature


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerRegistrationResponse(ApiResponse):
    """BrokerRegistrationResponse v0–4."""

    API_KEY: ClassVar[int] = 62
    TYPE_NAME: ClassVar[str] = "BROKER_REGISTRATION_RESPONSE"
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, 4)

    version: int = 4
    throttle_time_ms: int = kfield("throttleTimeMs", "int32", default=0)
    error_code: int = kfield("errorCode", "int16", default=0)
    broker_epoch: int = kfield("brokerEpoch", "int64", default=-1)


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerRegistrationRequest(ApiRequest):
    """BrokerRegistrationRequest v0–4. LogDirs (v2+, KIP-858) are the broker's *online* directories;
    PreviousBrokerEpoch is v3+ (KAFKA-15922 swapped the two). v4 only changes how brokers send features whose
    MinSupportedVersion is 0 (they are omitted before v4)."""

    API_KEY: ClassVar[int] = 62
    TYPE_NAME: ClassVar[str] = "BROKER_REGISTRATION_REQUEST"
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, 4)
    RESPONSE_TYPE: ClassVar[type[ApiResponse]] = BrokerRegistrationResponse

    version: int = 4
    broker_id: int = kfield("brokerId", "int32", default=0)
    cluster_id: str = kfield("clusterId", "string", default="")
    incarnation_id: Uuid = kfield("incarnationId", "uuid", default=ZERO_UUID)
    listeners: tuple[BrokerRegistrationListener, ...] = kfield("listeners", "[]struct", default=(),
                                                               struct=BrokerRegistrationListener)
    features: tuple[BrokerRegistrationFeature, ...] = kfield("features", "[]struct", default=(),
                                                             struct=BrokerRegistrationFeature)
    rack: str | None = kfield("rack", "string", nullable="0+", default=None)
    is_migrating_zk_broker: bool = kfield("isMigratingZkBroker", "bool", versions="1+", default=False)
    log_dirs: tuple[Uuid, ...] = kfield("logDirs", "[]uuid", versions="2+", default=())
    previous_broker_epoch: int = kfield("previousBrokerEpoch", "int64", versions="3+", default=-1)


# ------------------------------------------------------------------------------------------------------------
# BrokerHeartbeat (apiKey 63)


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerHeartbeatResponse(ApiResponse):
    """BrokerHeartbeatResponse v0–1 (no directory fields)."""

    API_KEY: ClassVar[int] = 63
    TYPE_NAME: ClassVar[str] = "BROKER_HEARTBEAT_RESPONSE"
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, 1)

    version: int = 1
    throttle_time_ms: int = kfield("throttleTimeMs", "int32", default=0)
    error_code: int = kfield("errorCode", "int16", default=0)
    is_caught_up: bool = kfield("isCaughtUp", "bool", default=False)
    is_fenced: bool = kfield("isFenced", "bool", default=True)
    should_shut_down: bool = kfield("shouldShutDown", "bool", default=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerHeartbeatRequest(ApiRequest):
    """BrokerHeartbeatRequest v0–1. OfflineLogDirs (v1+, tag 0): the *cumulative* set of directories that
    failed since the broker started (MINOR #14770)."""

    API_KEY: ClassVar[int] = 63
    TYPE_NAME: ClassVar[str] = "BROKER_HEARTBEAT_REQUEST"
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, 1)
    RESPONSE_TYPE: ClassVar[type[ApiResponse]] = BrokerHeartbeatResponse

    version: int = 1
    broker_id: int = kfield("brokerId", "int32", default=0)
    broker_epoch: int = kfield("brokerEpoch", "int64", default=-1)
    current_metadata_offset: int = kfield("currentMetadataOffset", "int64", default=0)
    want_fence: bool = kfield("wantFence", "bool", default=False)
    want_shut_down: bool = kfield("wantShutDown", "bool", default=False)
    offline_log_dirs: tuple[Uuid, ...] = kfield("offlineLogDirs", "[]uuid", versions="1+", tag=0, default=())


# ------------------------------------------------------------------------------------------------------------
# AssignReplicasToDirs (apiKey 73)


@dataclass(frozen=True, slots=True, kw_only=True)
class AssignReplicasToDirsPartition(Message):
    """``AssignReplicasToDirsRequest.Directories[].Topics[].Partitions[]``."""

    partition_index: int = kfield("partitionIndex", "int32", default=0)


@dataclass(frozen=True, slots=True, kw_only=True)
class AssignReplicasToDirsTopic(Message):
    """``AssignReplicasToDirsRequest.Directories[].Topics[]``."""

    topic_id: Uuid = kfield("topicId", "uuid", default=ZERO_UUID)
    partitions: tuple[AssignReplicasToDirsPartition, ...] = kfield("partitions", "[]struct", default=(),
                                                                   struct=AssignReplicasToDirsPartition)


@dataclass(frozen=True, slots=True, kw_only=True)
class AssignReplicasToDirsDirectory(Message):
    """``AssignReplicasToDirsRequest.Directories[]``."""

    id: Uuid = kfield("id", "uuid", default=ZERO_UUID)
    topics: tuple[AssignReplicasToDirsTopic, ...] = kfield("topics", "[]struct", default=(),
                                                           struct=AssignReplicasToDirsTopic)


@dataclass(frozen=True, slots=True, kw_only=True)
class AssignReplicasToDirsPartitionResult(Message):
    """``AssignReplicasToDirsResponse.Directories[].Topics[].Partitions[]``."""

    partition_index: int = kfield("partitionIndex", "int32", default=0)
    error_code: int = kfield("errorCode", "int16", default=0)


@dataclass(frozen=True, slots=True, kw_only=True)
class AssignReplicasToDirsTopicResult(Message):
    """``AssignReplicasToDirsResponse.Directories[].Topics[]``."""

    topic_id: Uuid = kfield("topicId", "uuid", default=ZERO_UUID)
    partitions: tuple[AssignReplicasToDirsPartitionResult, ...] = kfield(
        "partitions", "[]struct", default=(), struct=AssignReplicasToDirsPartitionResult)


@dataclass(frozen=True, slots=True, kw_only=True)
class AssignReplicasToDirsDirectoryResult(Message):
    """``AssignReplicasToDirsResponse.Directories[]``."""

    id: Uuid = kfield("id", "uuid", default=ZERO_UUID)
    topics: tuple[AssignReplicasToDirsTopicResult, ...] = kfield("topics", "[]struct", default=(),
                                                                 struct=AssignReplicasToDirsTopicResult)


@dataclass(frozen=True, slots=True, kw_only=True)
class AssignReplicasToDirsResponse(ApiResponse):
    """AssignReplicasToDirsResponse v0. A request-level failure carries only the top-level ErrorCode."""

    API_KEY: ClassVar[int] = 73
    TYPE_NAME: ClassVar[str] = "ASSIGN_REPLICAS_TO_DIRS_RESPONSE"

    throttle_time_ms: int = kfield("throttleTimeMs", "int32", default=0)
    error_code: int = kfield("errorCode", "int16", default=0)
    directories: tuple[AssignReplicasToDirsDirectoryResult, ...] = kfield(
        "directories", "[]struct", default=(), struct=AssignReplicasToDirsDirectoryResult)


@dataclass(frozen=True, slots=True, kw_only=True)
class AssignReplicasToDirsRequest(ApiRequest):
    """AssignReplicasToDirsRequest v0 (KIP-858): the broker reports the directory of some of its replicas."""

    API_KEY: ClassVar[int] = 73
    TYPE_NAME: ClassVar[str] = "ASSIGN_REPLICAS_TO_DIRS_REQUEST"
    RESPONSE_TYPE: ClassVar[type[ApiResponse]] = AssignReplicasToDirsResponse

    broker_id: int = kfield("brokerId", "int32", default=0)
    broker_epoch: int = kfield("brokerEpoch", "int64", default=-1)
    directories: tuple[AssignReplicasToDirsDirectory, ...] = kfield("directories", "[]struct", default=(),
                                                                    struct=AssignReplicasToDirsDirectory)


# ------------------------------------------------------------------------------------------------------------
# CreateTopics (apiKey 19)


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatableReplicaAssignment(Message):
    """``CreateTopicsRequest.Topics[].Assignments[]``."""

    partition_index: int = kfield("partitionIndex", "int32", default=0)
    broker_ids: tuple[int, ...] = kfield("brokerIds", "[]int32", default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatableTopicConfig(Message):
    """``CreateTopicsRequest.Topics[].Configs[]``."""

    name: str = kfield("name", "string", default="")
    value: str | None = kfield("value", "string", nullable="0+", default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatableTopic(Message):
    """``CreateTopicsRequest.Topics[]``."""

    name: str = kfield("name", "string", default="")
    num_partitions: int = kfield("numPartitions", "int32", default=-1)
    replication_factor: int = kfield("replicationFactor", "int16", default=-1)
    assignments: tuple[CreatableReplicaAssignment, ...] = kfield("assignments", "[]struct", default=(),
                                                                 struct=CreatableReplicaAssignment)
    configs: tuple[CreatableTopicConfig, ...] = kfield("configs", "[]struct", default=(),
                                                       struct=CreatableTopicConfig)


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatableTopicConfigs(Message):
    """``CreateTopicsResponse.Topics[].Configs[]`` (v5+)."""

    name: str = kfield("name", "string", versions="5+", default="")
    value: str | None = kfield("value", "string", versions="5+", nullable="5+", default=None)
    read_only: bool = kfield("readOnly", "bool", versions="5+", default=False)
    config_source: int = kfield("configSource", "int8", versions="5+", default=-1)
    is_sensitive: bool = kfield("isSensitive", "bool", versions="5+", default=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatableTopicResult(Message):
    """``CreateTopicsResponse.Topics[]``."""

    name: str = kfield("name", "string", default="")
    topic_id: Uuid = kfield("topicId", "uuid", versions="7+", default=ZERO_UUID)
    error_code: int = kfield("errorCode", "int16", default=0)
    error_message: str | None = kfield("errorMessage", "string", versions="1+", nullable="0+", default=None)
    topic_config_error_code: int = kfield("topicConfigErrorCode", "int16", versions="5+", tag=0, default=0)
    num_partitions: int = kfield("numPartitions", "int32", versions="5+", default=-1)
    replication_factor: int = kfield("replicationFactor", "int16", versions="5+", default=-1)
    configs: tuple[CreatableTopicConfigs, ...] | None = kfield("configs", "[]struct", versions="5+",
                                                               nullable="5+", default=(),
                                                               struct=CreatableTopicConfigs)


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateTopicsResponse(ApiResponse):
    """CreateTopicsResponse v0–7."""

    API_KEY: ClassVar[int] = 19
    TYPE_NAME: ClassVar[str] = "CREATE_TOPICS_RESPONSE"
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, 7)

    version: int = 7
    throttle_time_ms: int = kfield("throttleTimeMs", "int32", versions="2+", default=0)
    topics: tuple[CreatableTopicResult, ...] = kfield("topics", "[]struct", default=(),
                                                      struct=CreatableTopicResult)


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateTopicsRequest(ApiRequest):
    """CreateTopicsRequest v0–7."""

    API_KEY: ClassVar[int] = 19
    TYPE_NAME: ClassVar[str] = "CREATE_TOPICS_REQUEST"
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, 7)
    RESPONSE_TYPE: ClassVar[type[ApiResponse]] = CreateTopicsResponse

    version: int = 7
    topics: tuple[CreatableTopic, ...] = kfield("topics", "[]struct", default=(), struct=CreatableTopic)
    timeout_ms: int = kfield("timeoutMs", "int32", default=60000)
    validate_only: bool = kfield("validateOnly", "bool", versions="1+", default=False)


# ------------------------------------------------------------------------------------------------------------
# CreatePartitions (apiKey 37)


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatePartitionsAssignment(Message):
    """``CreatePartitionsRequest.Topics[].Assignments[]``."""

    broker_ids: tuple[int, ...] = kfield("brokerIds", "[]int32", default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatePartitionsTopic(Message):
    """``CreatePartitionsRequest.Topics[]``. ``assignments`` null = automatic placement."""

    name: str = kfield("name", "string", default="")
    count: int = kfield("count", "int32", default=0)
    assignments: tuple[CreatePartitionsAssignment, ...] | None = kfield(
        "assignments", "[]struct", nullable="0+", default=None, struct=CreatePartitionsAssignment)


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatePartitionsTopicResult(Message):
    """``CreatePartitionsResponse.Results[]``."""

    name: str = kfield("name", "string", default="")
    error_code: int = kfield("errorCode", "int16", default=0)
    error_message: str | None = kfield("errorMessage", "string", nullable="0+", default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatePartitionsResponse(ApiResponse):
    """CreatePartitionsResponse v0–3."""

    API_KEY: ClassVar[int] = 37
    TYPE_NAME: ClassVar[str] = "CREATE_PARTITIONS_RESPONSE"
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, 3)

    version: int = 3
    throttle_time_ms: int = kfield("throttleTimeMs", "int32", default=0)
    results: tuple[CreatePartitionsTopicResult, ...] = kfield("results", "[]struct", default=(),
                                                              struct=CreatePartitionsTopicResult)


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatePartitionsRequest(ApiRequest):
    """CreatePartitionsRequest v0–3."""

    API_KEY: ClassVar[int] = 37
    TYPE_NAME: ClassVar[str] = "CREATE_PARTITIONS_REQUEST"
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, 3)
    RESPONSE_TYPE: ClassVar[type[ApiResponse]] = CreatePartitionsResponse

    version: int = 3
    topics: tuple[CreatePartitionsTopic, ...] = kfield("topics", "[]struct", default=(),
                                                       struct=CreatePartitionsTopic)
    timeout_ms: int = kfield("timeoutMs", "int32", default=0)
    validate_only: bool = kfield("validateOnly", "bool", default=False)


# ------------------------------------------------------------------------------------------------------------
# AlterPartitionReassignments (apiKey 45)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReassignablePartition(Message):
    """``AlterPartitionReassignmentsRequest.Topics[].Partitions[]``; ``replicas`` null cancels."""

    partition_index: int = kfield("partitionIndex", "int32", default=0)
    replicas: tuple[int, ...] | None = kfield("replicas", "[]int32", nullable="0+", default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReassignableTopic(Message):
    """``AlterPartitionReassignmentsRequest.Topics[]``."""

    name: str = kfield("name", "string", default="")
    partitions: tuple[ReassignablePartition, ...] = kfield("partitions", "[]struct", default=(),
                                                           struct=ReassignablePartition)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReassignablePartitionResponse(Message):
    """``AlterPartitionReassignmentsResponse.Responses[].Partitions[]``."""

    partition_index: int = kfield("partitionIndex", "int32", default=0)
    error_code: int = kfield("errorCode", "int16", default=0)
    error_message: str | None = kfield("errorMessage", "string", nullable="0+", default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReassignableTopicResponse(Message):
    """``AlterPartitionReassignmentsResponse.Responses[]``."""

    name: str = kfield("name", "string", default="")
    partitions: tuple[ReassignablePartitionResponse, ...] = kfield("partitions", "[]struct", default=(),
                                                                   struct=ReassignablePartitionResponse)


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterPartitionReassignmentsResponse(ApiResponse):
    """AlterPartitionReassignmentsResponse v0."""

    API_KEY: ClassVar[int] = 45
    TYPE_NAME: ClassVar[str] = "ALTER_PARTITION_REASSIGNMENTS_RESPONSE"

    throttle_time_ms: int = kfield("throttleTimeMs", "int32", default=0)
    error_code: int = kfield("errorCode", "int16", default=0)
    error_message: str | None = kfield("errorMessage", "string", nullable="0+", default=None)
    responses: tuple[ReassignableTopicResponse, ...] = kfield("responses", "[]struct", default=(),
                                                              struct=ReassignableTopicResponse)


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterPartitionReassignmentsRequest(ApiRequest):
    """AlterPartitionReassignmentsRequest v0."""

    API_KEY: ClassVar[int] = 45
    TYPE_NAME: ClassVar[str] = "ALTER_PARTITION_REASSIGNMENTS_REQUEST"
    RESPONSE_TYPE: ClassVar[type[ApiResponse]] = AlterPartitionReassignmentsResponse

    timeout_ms: int = kfield("timeoutMs", "int32", default=60000)
    topics: tuple[ReassignableTopic, ...] = kfield("topics", "[]struct", default=(), struct=ReassignableTopic)


# ------------------------------------------------------------------------------------------------------------
# AlterPartition (apiKey 56)


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterPartitionBrokerState(Message):
    """``AlterPartitionRequest.Topics[].Partitions[].NewIsrWithEpochs[]`` (v3+)."""

    broker_id: int = kfield("brokerId", "int32", versions="3+", default=0)
    broker_epoch: int = kfield("brokerEpoch", "int64", versions="3+", default=-1)


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterPartitionPartitionData(Message):
    """``AlterPartitionRequest.Topics[].Partitions[]``: NewIsr up to v2, NewIsrWithEpochs from v3."""

    partition_index: int = kfield("partitionIndex", "int32", default=0)
    leader_epoch: int = kfield("leaderEpoch", "int32", default=0)
    new_isr: tuple[int, ...] = kfield("newIsr", "[]int32", versions="0-2", default=())
    new_isr_with_epochs: tuple[AlterPartitionBrokerState, ...] = kfield(
        "newIsrWithEpochs", "[]struct", versions="3+", default=(), struct=AlterPartitionBrokerState)
    leader_recovery_state: int = kfield("leaderRecoveryState", "int8", versions="1+", default=0)
    partition_epoch: int = kfield("partitionEpoch", "int32", default=0)


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterPartitionTopicData(Message):
    """``AlterPartitionRequest.Topics[]``: TopicName up to v1, TopicId from v2."""

    topic_name: str = kfield("topicName", "string", versions="0-1", default="")
    topic_id: Uuid = kfield("topicId", "uuid", versions="2+", default=ZERO_UUID)
    partitions: tuple[AlterPartitionPartitionData, ...] = kfield("partitions", "[]struct", default=(),
                                                                 struct=AlterPartitionPartitionData)


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterPartitionPartitionResult(Message):
    """``AlterPartitionResponse.Topics[].Partitions[]``."""

    partition_index: int = kfield("partitionIndex", "int32", default=0)
    error_code: int = kfield("errorCode", "int16", default=0)
    leader_id: int = kfield("leaderId", "int32", default=0)
    leader_epoch: int = kfield("leaderEpoch", "int32", default=0)
    isr: tuple[int, ...] = kfield("isr", "[]int32", default=())
    leader_recovery_state: int = kfield("leaderRecoveryState", "int8", versions="1+", default=0)
    partition_epoch: int = kfield("partitionEpoch", "int32", default=0)


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterPartitionTopicResult(Message):
    """``AlterPartitionResponse.Topics[]``."""

    topic_name: str = kfield("topicName", "string", versions="0-1", default="")
    topic_id: Uuid = kfield("topicId", "uuid", versions="2+", default=ZERO_UUID)
    partitions: tuple[AlterPartitionPartitionResult, ...] = kfield("partitions", "[]struct", default=(),
                                                                   struct=AlterPartitionPartitionResult)


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterPartitionResponse(ApiResponse):
    """AlterPartitionResponse v0–3."""

    API_KEY: ClassVar[int] = 56
    TYPE_NAME: ClassVar[str] = "ALTER_PARTITION_RESPONSE"
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, 3)

    version: int = 3
    throttle_time_ms: int = kfield("throttleTimeMs", "int32", default=0)
    error_code: int = kfield("errorCode", "int16", default=0)
    topics: tuple[AlterPartitionTopicResult, ...] = kfield("topics", "[]struct", default=(),
                                                           struct=AlterPartitionTopicResult)


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterPartitionRequest(ApiRequest):
    """AlterPartitionRequest v0–3: the partition leader asks to change the ISR (v2+ name topics by id, v3+
    send each ISR member's broker epoch)."""

    API_KEY: ClassVar[int] = 56
    TYPE_NAME: ClassVar[str] = "ALTER_PARTITION_REQUEST"
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, 3)
    RESPONSE_TYPE: ClassVar[type[ApiResponse]] = AlterPartitionResponse

    version: int = 3
    broker_id: int = kfield("brokerId", "int32", default=0)
    broker_epoch: int = kfield("brokerEpoch", "int64", default=-1)
    topics: tuple[AlterPartitionTopicData, ...] = kfield("topics", "[]struct", default=(),
                                                         struct=AlterPartitionTopicData)


# ------------------------------------------------------------------------------------------------------------
# UnregisterBroker (apiKey 64)


@dataclass(frozen=True, slots=True, kw_only=True)
class UnregisterBrokerResponse(ApiResponse):
    """UnregisterBrokerResponse v0."""

    API_KEY: ClassVar[int] = 64
    TYPE_NAME: ClassVar[str] = "UNREGISTER_BROKER_RESPONSE"

    throttle_time_ms: int = kfield("throttleTimeMs", "int32", default=0)
    error_code: int = kfield("errorCode", "int16", default=0)
    error_message: str | None = kfield("errorMessage", "string", nullable="0+", default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class UnregisterBrokerRequest(ApiRequest):
    """UnregisterBrokerRequest v0."""

    API_KEY: ClassVar[int] = 64
    TYPE_NAME: ClassVar[str] = "UNREGISTER_BROKER_REQUEST"
    RESPONSE_TYPE: ClassVar[type[ApiResponse]] = UnregisterBrokerResponse

    broker_id: int = kfield("brokerId", "int32", default=0)


# ------------------------------------------------------------------------------------------------------------
# Registry

#: Every request type the reference controller handles, by ``"<API>_REQUEST"`` name.
REQUEST_TYPES: Mapping[str, type[ApiRequest]] = {
    cls.TYPE_NAME: cls
    for cls in (
        BrokerRegistrationRequest, BrokerHeartbeatRequest, AssignReplicasToDirsRequest, CreateTopicsRequest,
        CreatePartitionsRequest, AlterPartitionReassignmentsRequest, AlterPartitionRequest,
        UnregisterBrokerRequest,
    )
}
#: The matching responses, by ``"<API>_RESPONSE"`` name.
RESPONSE_TYPES: Mapping[str, type[ApiResponse]] = {
    cls.RESPONSE_TYPE.TYPE_NAME: cls.RESPONSE_TYPE for cls in REQUEST_TYPES.values()
}

AM = TypeVar("AM", bound=ApiMessage)


def api_message_from_json(cls: type[AM], data: Any, version: int | None = None, where: str = "") -> AM:
    """Build a request or response from its ``data`` object at ``version`` (default: the class's latest)."""
    lo, hi = cls.VALID_VERSIONS
    v = hi if version is None else version
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise InputError(f"{where or cls.TYPE_NAME}: version must be an integer {lo}..{hi}, got {version!r}")
    message = message_from_json(cls, data, v, where or f"{cls.TYPE_NAME} v{v}")
    return dataclasses.replace(message, version=v)


def request_from_json(type_name: str, data: Any, version: int | None = None, where: str = "") -> ApiRequest:
    """Build a request from its type name (``"<API>_REQUEST"``), ``data`` object and optional version."""
    cls = REQUEST_TYPES.get(type_name)
    if cls is None:
        raise InputError(f"{where or 'request'}: unknown request type {type_name!r}")
    return api_message_from_json(cls, data, version, where)


def api_message_to_json(message: ApiMessage) -> dict[str, Any]:
    """``{"type", "version", "data"}`` — the stream form of a request or response."""
    return {"type": message.TYPE_NAME, "version": message.version, "data": message.to_json()}
