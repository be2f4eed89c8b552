"""Kafka protocol error codes used on the directory paths. Mirrors ``org.apache.kafka.common.protocol.Errors``."""

from __future__ import annotations

from enum import IntEnum


class Errors(IntEnum):
    """Wire values of the error codes the reference controller returns (semantics §1.4)."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    UNKNOWN_TOPIC_OR_PARTITION = 3
    NOT_LEADER_OR_FOLLOWER = 6
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    FENCED_LEADER_EPOCH = 74
    STALE_BROKER_EPOCH = 77
    NO_REASSIGNMENT_IN_PROGRESS = 85
    INVALID_UPDATE_VERSION = 95
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_CLUSTER_ID = 104
    NEW_LEADER_ELECTED = 108
    INELIGIBLE_REPLICA = 107
    INVALID_REGISTRATION = 119
    INVALID_TOPIC_EXCEPTION = 17
    OPERATION_NOT_ATTEMPTED = 55

    @property
    def default_message(self) -> str | None:
        """Kafka's default description of the error (``Errors.message()``), used where Kafka builds an
        ``ApiError(error)`` without a message of its own."""
        return _DEFAULT_MESSAGES.get(self)

    @classmethod
    def from_code(cls, code: int) -> Errors | None:
        """The enum member for a wire code, or None for a code this model does not name."""
        try:
            return cls(code)
        except ValueError:
            return None


#: ``Errors.message()`` texts (3.9) for the codes whose default text reaches a response (add as needed).
_DEFAULT_MESSAGES: dict[Errors, str] = {
    Errors.NO_REASSIGNMENT_IN_PROGRESS: "No partition reassignment is in progress.",
}
