"""One entry point for every modelled RPC: ``handle_request(ctx, request) -> ControllerResult``.

Mirrors the dispatch in ``ControllerApis`` / ``QuorumController`` for the APIs the reference controller
models. Pure: the context is only read.
"""

from __future__ import annotations

from typing import assert_never

from jbod_model.controller.cluster_control import register_broker
from jbod_model.controller.context import ControllerContext
from jbod_model.controller.heartbeat import process_broker_heartbeat
from jbod_model.controller.messages import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionRequest,
    ApiRequest,
    ApiResponse,
    AssignReplicasToDirsRequest,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    UnregisterBrokerRequest,
)
from jbod_model.controller.replication_control import (
    alter_partition,
    alter_partition_reassignments,
    assign_replicas_to_dirs,
    create_partitions,
    create_topics,
    unregister_broker,
)
from jbod_model.controller.result import ControllerResult
from jbod_model.errors import InputError

HandledRequest = (
    BrokerRegistrationRequest | BrokerHeartbeatRequest | AssignReplicasToDirsRequest | CreateTopicsRequest
    | CreatePartitionsRequest | AlterPartitionReassignmentsRequest | AlterPartitionRequest | UnregisterBrokerRequest
)


def handle_request(ctx: ControllerContext, request: ApiRequest) -> ControllerResult[ApiResponse]:
    """Propose the records for one request and its response. Never mutates ``ctx`` (or its image)."""
    if not isinstance(request, HandledRequest):
        raise InputError(f"The reference controller does not handle {type(request).__name__}")
    result: ControllerResult[ApiResponse]
    match request:
        case BrokerRegistrationRequest():
            result = register_broker(ctx, request)
        case BrokerHeartbeatRequest():
            result = process_broker_heartbeat(ctx, request)
        case AssignReplicasToDirsRequest():
            result = assign_replicas_to_dirs(ctx, request)
        case CreateTopicsRequest():
            result = create_topics(ctx, request)
        case CreatePartitionsRequest():
            result = create_partitions(ctx, request)
        case AlterPartitionReassignmentsRequest():
            result = alter_partition_reassignments(ctx, request)
        case AlterPartitionRequest():
            result = alter_partition(ctx, request)
        case UnregisterBrokerRequest():
            result = unregister_broker(ctx, request)
        case _:
            assert_never(request)
    return result

