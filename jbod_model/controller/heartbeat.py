"""Broker heartbeats: the fence/unfence/controlled-shutdown state machine and offline log directories.

Mirrors ``BrokerHeartbeatManager.calculateNextBrokerState`` (R10), ``ReplicationControlManager.
processBrokerHeartbeat`` and ``QuorumController.processBrokerHeartbeat`` (R5). Pure: the records, the response
and the heartbeat-manager update (:class:`HeartbeatTouch`) are returned; the controller applies them.

Both record groups of one heartbeat — (a) the state-machine records and (b) the offline-directory records —
are computed from the state *before* the heartbeat (quirk §6.4), so one partition can receive two PCRs.
Directory failures never fence a broker (R5.7, R10.2).
"""

from __future__ import annotations

from enum import Enum

from jbod_model.controller.context import BrokerHeartbeatState, ControllerContext
from jbod_model.controller.messages import BrokerHeartbeatRequest, BrokerHeartbeatResponse
from jbod_model.controller.replication_control import (
    handle_broker_fenced,
    handle_broker_in_controlled_shutdown,
    handle_broker_unfenced,
    handle_directories_offline,
)
from jbod_model.controller.result import ApiError, ControllerResult, HeartbeatTouch
from jbod_model.errors import JbodError, RequestRejected
from jbod_model.errors_codes import Errors
from jbod_model.records.metadata import Record

#: ``Long.MAX_VALUE``: the lowest active offset when no broker is active.
_LONG_MAX = (1 << 63) - 1


class BrokerControlState(Enum):
    """``BrokerControlState``."""

    FENCED = "FENCED"
    UNFENCED = "UNFENCED"
    CONTROLLED_SHUTDOWN = "CONTROLLED_SHUTDOWN"
    SHUTDOWN_NOW = "SHUTDOWN_NOW"

    @property
    def fenced(self) -> bool:
        return self in (BrokerControlState.FENCED, BrokerControlState.SHUTDOWN_NOW)

    @property
    def should_shut_down(self) -> bool:
        return self is BrokerControlState.SHUTDOWN_NOW

    @property
    def in_controlled_shutdown(self) -> bool:
        return self is BrokerControlState.CONTROLLED_SHUTDOWN


def current_broker_state(hb: BrokerHeartbeatState) -> BrokerControlState:
    """``BrokerHeartbeatManager.currentBrokerState``."""
    if hb.shutting_down:
        return BrokerControlState.CONTROLLED_SHUTDOWN
    if hb.fenced:
        return BrokerControlState.FENCED
    return BrokerControlState.UNFENCED


def lowest_active_offset(ctx: ControllerContext) -> int:
    """``BrokerHeartbeatManager.lowestActiveOffset``: the lowest metadata offset among unfenced brokers that
    are not shutting down (``Long.MAX_VALUE`` when there is none)."""
    offsets = [hb.metadata_offset for hb in ctx.state.heartbeats.values() if not hb.fenced and not hb.shutting_down]
    return min(offsets, default=_LONG_MAX)


def calculate_next_broker_state(ctx: ControllerContext, broker_id: int, request: BrokerHeartbeatRequest,
                                register_broker_record_offset: int
                                ) -> tuple[BrokerControlState, BrokerControlState]:
    """Mirrors ``BrokerHeartbeatManager.calculateNextBrokerState`` (R10.1): (current, next)."""
    hb = ctx.state.heartbeats.get(broker_id)
    if hb is None:
        raise JbodError(f"Broker {broker_id} is not registered with the heartbeat manager.")
    current = current_broker_state(hb)
    if current is BrokerControlState.FENCED:
        if request.want_shut_down:
            return current, BrokerControlState.SHUTDOWN_NOW
        if not request.want_fence and request.current_metadata_offset >= register_broker_record_offset:
            # Caught up with its own registration record: no directory condition (R10.2).
            return current, BrokerControlState.UNFENCED
        return current, BrokerControlState.FENCED
    if current is BrokerControlState.UNFENCED:
        if request.want_fence:
            return current, (BrokerControlState.SHUTDOWN_NOW if request.want_shut_down
                             else BrokerControlState.FENCED)
        if request.want_shut_down:
            return current, (BrokerControlState.CONTROLLED_SHUTDOWN if ctx.has_leaderships(broker_id)
                             else BrokerControlState.SHUTDOWN_NOW)
        return current, BrokerControlState.UNFENCED
    if current is BrokerControlState.CONTROLLED_SHUTDOWN:
        if ctx.has_leaderships(broker_id):
            return current, BrokerControlState.CONTROLLED_SHUTDOWN
        if hb.controlled_shutdown_offset <= lowest_active_offset(ctx):
            return current, BrokerControlState.SHUTDOWN_NOW
        return current, BrokerControlState.CONTROLLED_SHUTDOWN
    return current, BrokerControlState.SHUTDOWN_NOW


def process_broker_heartbeat(ctx: ControllerContext, request: BrokerHeartbeatRequest
                             ) -> ControllerResult[BrokerHeartbeatResponse]:
    """Mirrors ``QuorumController.processBrokerHeartbeat`` +
    ``ReplicationControlManager.processBrokerHeartbeat``.

    STALE_BROKER_EPOCH before any registration or on epoch mismatch (R5.1). Then (a) the state-machine records
    — fence (leadership/ISR moved away, BRCR fence), unfence (BRCR, then leaderless partitions may elect the
    broker where its directory is online), controlled shutdown (BRCR, leadership/ISR moved away) — and (b) at
    MV ≥ 3.7-IV2 ``handleDirectoriesOffline`` for ``OfflineLogDirs``. ``isCaughtUp`` = reported offset ≥ the
    offset of the broker's RegisterBrokerRecord (R5.8). Not atomic.
    """
    version = request.version
    broker_id = request.broker_id
    try:
        register_offset = ctx.state.register_broker_record_offsets.get(broker_id)
        if register_offset is None:
            raise RequestRejected(Errors.STALE_BROKER_EPOCH,
                                  f"Receive a heartbeat from broker {broker_id} before registration")
        ctx.check_broker_epoch(broker_id, request.broker_epoch)
    except RequestRejected as rejected:
        return ControllerResult(records=(), response=BrokerHeartbeatResponse(version=version,
                                                                             error_code=rejected.error),
                                error=ApiError.from_rejection(rejected))
    current, nxt = calculate_next_broker_state(ctx, broker_id, request, register_offset)
    records: list[Record] = []
    if current is not nxt:
        if nxt in (BrokerControlState.FENCED, BrokerControlState.SHUTDOWN_NOW):
            records.extend(handle_broker_fenced(ctx, broker_id))
        elif nxt is BrokerControlState.UNFENCED:
            records.extend(handle_broker_unfenced(ctx, broker_id, request.broker_epoch))
        elif nxt is BrokerControlState.CONTROLLED_SHUTDOWN:
            records.extend(handle_broker_in_controlled_shutdown(ctx, broker_id, request.broker_epoch))
    if ctx.metadata_version.is_directory_assignment_supported():
        # Computed from the same pre-heartbeat state as the records above (quirk §6.4).
        records.extend(handle_directories_offline(ctx, broker_id, request.broker_epoch, request.offline_log_dirs))
    touch = HeartbeatTouch(broker_id=broker_id, fenced=nxt.fenced, metadata_offset=request.current_metadata_offset,
                           in_controlled_shutdown=nxt.in_controlled_shutdown)
    response = BrokerHeartbeatResponse(version=version, error_code=Errors.NONE,
                                       is_caught_up=request.current_metadata_offset >= register_offset,
                                       is_fenced=nxt.fenced, should_shut_down=nxt.should_shut_down)
    return ControllerResult(records=tuple(records), response=response, touch=touch)
