"""The reference KRaft controller for the JBOD paths (KIP-858), as Kafka 3.9 ships it: propose-then-replay.

Handlers (``handlers.handle_request`` and the per-RPC functions in ``cluster_control``, ``heartbeat`` and
``replication_control``) read a frozen :class:`ControllerContext` and return a :class:`ControllerResult`;
:class:`ReferenceController` writes the records at the next offsets and replays them.
"""

from __future__ import annotations

from jbod_model.controller.context import (
    BrokerHeartbeatState,
    ControllerConfig,
    ControllerContext,
    ControllerState,
    TopicIdPartition,
    deterministic_topic_id,
)
from jbod_model.controller.controller import HandledRequest, ReferenceController, write_records
from jbod_model.controller.handlers import handle_request
from jbod_model.controller.result import ApiError, ControllerResult, HeartbeatTouch

__all__ = [
    "ApiError",
    "BrokerHeartbeatState",
    "ControllerConfig",
    "ControllerContext",
    "ControllerResult",
    "ControllerState",
    "HandledRequest",
    "HeartbeatTouch",
    "ReferenceController",
    "TopicIdPartition",
    "deterministic_topic_id",
    "handle_request",
    "write_records",
]
