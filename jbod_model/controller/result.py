"""What a controller handler returns: proposed records, the response, and the controller-only soft-state
effects.

Mirrors ``org.apache.kafka.controller.ControllerResult`` (records + response + ``isAtomic``) and
``org.apache.kafka.common.requests.ApiError``. A handler never changes anything; the records it proposes
change the image only when :class:`~jbod_model.controller.controller.ReferenceController` replays them, and
the soft-state effect (the heartbeat manager's view of one broker) is applied by the controller around that
replay exactly where ``QuorumController`` applies it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from jbod_model.errors import RequestRejected
from jbod_model.errors_codes import Errors
from jbod_model.records.metadata import Record

R_co = TypeVar("R_co", covariant=True)


@dataclass(frozen=True, slots=True)
class ApiError:
    """An error code with an optional message. Mirrors ``ApiError`` (``ApiError.NONE`` = no error)."""

    error: Errors
    message: str | None = None

    @property
    def is_failure(self) -> bool:
        return self.error is not Errors.NONE

    @classmethod
    def from_rejection(cls, rejection: RequestRejected) -> ApiError:
        """``ApiError.fromThrowable``: the exception's code and message (no message for unknown server
        errors)."""
        if rejection.error is Errors.UNKNOWN_SERVER_ERROR:
            return cls(Errors.UNKNOWN_SERVER_ERROR, None)
        return cls(rejection.error, rejection.message)


NONE_ERROR = ApiError(Errors.NONE)


@dataclass(frozen=True, slots=True)
class HeartbeatTouch:
    """The heartbeat manager update a broker heartbeat makes (``BrokerHeartbeatManager.touch``) and, when the
    broker entered or stays in controlled shutdown, the request to record the batch end offset as its
    controlled shutdown offset (``maybeUpdateControlledShutdownOffset`` from ``processBatchEndOffset``)."""

    broker_id: int
    fenced: bool
    metadata_offset: int
    in_controlled_shutdown: bool


@dataclass(frozen=True, slots=True)
class ControllerResult(Generic[R_co]):
    """Records proposed by one handler call and the response to send. Mirrors ``ControllerResult``.

    ``atomic`` mirrors ``ControllerResult.atomicOf``: the records must land in one batch. ``error`` is the
    top-level failure Kafka would raise as an exception (its message does not always fit in the response
    schema, e.g. BrokerRegistrationResponse has no message field); ``touch`` is the heartbeat soft-state
    update.
    """

    records: tuple[Record, ...]
    response: R_co
    atomic: bool = False
    error: ApiError | None = None
    touch: HeartbeatTouch | None = None
