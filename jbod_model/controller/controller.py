"""The reference controller: handle a request, write its records at the next offsets, replay them.

Mirrors the role of ``org.apache.kafka.controller.QuorumController`` for the modelled RPCs: a write operation
proposes records from the current state (``generateRecordsAndResult``), the records are appended at the next
log offsets and replayed immediately (the active controller replays its own writes), and controller-only soft
state is updated around that replay exactly where Kafka updates it. Committed records read from a log are fed
through :meth:`ReferenceController.replay`, which keeps both the image and the controller state current.

State, and where it lives (see also ``jbod_model.controller.context``):

* the **image** (``MetadataImage``) — everything records say; changed only by replay (``jbod_model.replay``);
* the **controller state** (``ControllerState``) — not in the image and never written to the log: the offset
  of each broker's latest RegisterBrokerRecord (``registerBrokerRecordOffsets``, used for unfencing and
  ``isCaughtUp``) and the heartbeat manager's per-broker soft state (session fenced or not, last reported
  metadata offset, controlled-shutdown offset);
* the **configuration** (``ControllerConfig``) — cluster id, unclean-election and min-ISR defaults, default
  partition count and replication factor, ELR switch, kraft.version;
* the **next write offset** — one past the last offset seen (replayed or written).

No clock is modelled: heartbeat sessions never time out by themselves;
:meth:`ReferenceController.fence_stale_broker` plays the role of ``maybeFenceOneStaleBroker`` when a test or
stream wants a session expiry.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

from jbod_model.controller.context import (
    BrokerHeartbeatState,
    ControllerConfig,
    ControllerContext,
    ControllerState,
    TopicIdFactory,
    deterministic_topic_id,
)
from jbod_model.controller.handlers import handle_request
from jbod_model.controller.messages import ApiRequest, ApiResponse
from jbod_model.controller.replication_control import handle_broker_fenced
from jbod_model.controller.result import ApiError, ControllerResult, HeartbeatTouch
from jbod_model.errors import InputError, JbodError
from jbod_model.image import EMPTY_IMAGE, MetadataImage
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import (
    AbortTransactionRecord,
    BrokerRegistrationChangeRecord,
    FenceBrokerRecord,
    Record,
    RegisterBrokerRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)
from jbod_model.replay import Replayer

#: ``LogEntry.source`` of the records the controller writes itself.
CONTROLLER_SOURCE = "reference-controller"

#: The records whose replay changes the controller state as well as the image (``_replay_state``).
_STATE_RECORDS = (RegisterBrokerRecord, UnregisterBrokerRecord, BrokerRegistrationChangeRecord, FenceBrokerRecord,
                  UnfenceBrokerRecord)


@dataclass(frozen=True, slots=True)
class HandledRequest:
    """The outcome of :meth:`ReferenceController.handle_request`: the request, the records written (with their
    offsets), the response, and the top-level error Kafka would have raised (code and message), if any."""

    request: ApiRequest
    entries: tuple[LogEntry, ...]
    response: ApiResponse
    error: ApiError | None = None


class ReferenceController:
    """A single active KRaft controller over an in-memory log (see the module docstring)."""

    __slots__ = ("_config", "_next_offset", "_pending", "_replayer", "_state", "_topic_id_factory")

    def __init__(self, image: MetadataImage = EMPTY_IMAGE, config: ControllerConfig | None = None, *,
                 next_offset: int | None = None, topic_id_factory: TopicIdFactory = deterministic_topic_id,
                 state: ControllerState | None = None) -> None:
        """Start from ``image`` (empty by default). As after a snapshot load in Kafka, every broker already in
        the image is taken to have registered at the image's offset, and gets a heartbeat session with its
        fencing state (``ClusterControlManager.activate``) — unless ``state`` gives the controller-only state
        saved by an earlier controller over the same log (a streaming job resuming from its state store)."""
        self._replayer = Replayer(image)
        self._config = config if config is not None else ControllerConfig()
        self._topic_id_factory = topic_id_factory
        self._next_offset = image.last_offset + 1 if next_offset is None else next_offset
        offsets = dict.fromkeys(image.cluster.brokers, image.last_offset)
        heartbeats = {b: BrokerHeartbeatState(fenced=reg.fenced) for b, reg in image.cluster.brokers.items()}
        self._state = state if state is not None else ControllerState(
            register_broker_record_offsets=MappingProxyType(offsets), heartbeats=MappingProxyType(heartbeats))
        self._pending: list[LogEntry] = []

    # -- views -----------------------------------------------------------------------------------------------

    @property
    def image(self) -> MetadataImage:
        """The image after every committed record (an open metadata transaction is not visible yet)."""
        return self._replayer.image

    @property
    def state(self) -> ControllerState:
        return self._state

    @property
    def config(self) -> ControllerConfig:
        return self._config

    @property
    def next_offset(self) -> int:
        """The offset the next written record gets (``offsetControl.nextWriteOffset``)."""
        return self._next_offset

    def context(self) -> ControllerContext:
        """A frozen snapshot of everything a handler may read."""
        return ControllerContext(image=self.image, state=self._state, config=self._config,
                                 next_write_offset=self._next_offset, topic_id_factory=self._topic_id_factory)

    # -- requests --------------------------------------------------------------------------------------------

    def handle(self, request: ApiRequest, source: str | None = None) -> tuple[list[LogEntry], ApiResponse]:
        """Handle one request: propose (pure handler), write the records at the next offsets, replay them.
        Returns the written entries and the response."""
        handled = self.handle_request(request, source)
        return list(handled.entries), handled.response

    def handle_request(self, request: ApiRequest, source: str | None = None) -> HandledRequest:
        """As :meth:`handle`, with the top-level error (code and message) kept."""
        result = handle_request(self.context(), request)
        entries = self._write(result, source)
        return HandledRequest(request=request, entries=entries, response=result.response, error=result.error)

    def fence_stale_broker(self, broker_id: int, source: str | None = None) -> list[LogEntry]:
        """Expire one broker's session as ``maybeFenceOneStaleBroker`` does (records from
        ``handleBrokerFenced``, then ``heartbeatManager.fence``). The session must be live (unfenced)."""
        hb = self._state.heartbeats.get(broker_id)
        if hb is None or hb.fenced:
            raise InputError(f"Broker {broker_id} has no live heartbeat session to expire")
        records = tuple(handle_broker_fenced(self.context(), broker_id))
        # heartbeatManager.fence runs while the records are generated, before they are replayed.
        self._set_heartbeat(broker_id, BrokerHeartbeatState(fenced=True, metadata_offset=hb.metadata_offset))
        return list(self._write(ControllerResult(records=records, response=None), source))

    def _write(self, result: ControllerResult[object], source: str | None) -> tuple[LogEntry, ...]:
        first = self._next_offset
        entries = tuple(LogEntry(offset=first + i, record=record, batch_base_offset=first,
                                 source=source or CONTROLLER_SOURCE)
                        for i, record in enumerate(result.records))
        if result.touch is not None:
            # BrokerHeartbeatManager.touch runs while the records are generated, before they are replayed.
            self._touch(result.touch)
        for entry in entries:
            self.replay(entry)
        if result.touch is not None and result.touch.in_controlled_shutdown:
            # processBatchEndOffset: the offset of the last record written, or the last write offset if none.
            self._maybe_update_controlled_shutdown_offset(result.touch.broker_id, self._next_offset - 1)
        return entries

    # -- replay ----------------------------------------------------------------------------------------------

    def replay(self, entry: LogEntry) -> None:
        """Replay one committed record into the image and the controller state (``QuorumController.replay``).
        Records inside a metadata transaction take effect at its EndTransactionRecord."""
        self._replayer.replay(entry)
        if entry.offset >= self._next_offset:
            self._next_offset = entry.offset + 1
        record = entry.record
        if isinstance(record, AbortTransactionRecord):
            self._pending.clear()
            return
        # Only broker records touch the controller state (see _replay_state), so only they wait for the end of a
        # transaction; the partition and NoOp records that make up almost all of a log pass straight through.
        if isinstance(record, _STATE_RECORDS):
            self._pending.append(entry)
        if not self._pending or self._replayer.in_transaction:
            return
        pending, self._pending = self._pending, []
        for e in pending:
            self._replay_state(e)

    def _replay_state(self, entry: LogEntry) -> None:
        """The controller-state side of ``QuorumController.replay``. Only broker records touch it; the image is
        never materialised here: a registration change reads the broker from the pending delta."""
        record = entry.record
        if isinstance(record, RegisterBrokerRecord):
            # ClusterControlManager.replay(RegisterBrokerRecord, offset): remember the offset; a fresh
            # session.
            offsets = dict(self._state.register_broker_record_offsets)
            offsets[record.broker_id] = entry.offset
            self._state = ControllerState(register_broker_record_offsets=MappingProxyType(offsets),
                                          heartbeats=self._state.heartbeats)
            self._set_heartbeat(record.broker_id, BrokerHeartbeatState(fenced=record.fenced))
        elif isinstance(record, UnregisterBrokerRecord):
            offsets = dict(self._state.register_broker_record_offsets)
            offsets.pop(record.broker_id, None)
            heartbeats = dict(self._state.heartbeats)
            heartbeats.pop(record.broker_id, None)
            self._state = ControllerState(register_broker_record_offsets=MappingProxyType(offsets),
                                          heartbeats=MappingProxyType(heartbeats))
        elif isinstance(record, (BrokerRegistrationChangeRecord, FenceBrokerRecord, UnfenceBrokerRecord)):
            broker_id = record.id if isinstance(record, (FenceBrokerRecord, UnfenceBrokerRecord)) else \
                record.broker_id
            reg = self._replayer.broker(broker_id)
            if reg is not None:
                self._register_heartbeat(broker_id, reg.fenced)

    # -- heartbeat-manager soft state ------------------------------------------------------------------------

    def _set_heartbeat(self, broker_id: int, state: BrokerHeartbeatState) -> None:
        heartbeats = dict(self._state.heartbeats)
        heartbeats[broker_id] = state
        self._state = ControllerState(register_broker_record_offsets=self._state.register_broker_record_offsets,
                                      heartbeats=MappingProxyType(heartbeats))

    def _register_heartbeat(self, broker_id: int, fenced: bool) -> None:
        """``BrokerHeartbeatManager.register`` as called on replay of a registration change: the reported
        metadata offset survives only when the session's fencing state flips (Kafka's own rule)."""
        hb = self._state.heartbeats.get(broker_id)
        if hb is None:
            self._set_heartbeat(broker_id, BrokerHeartbeatState(fenced=fenced))
            return
        offset = hb.metadata_offset if hb.fenced != fenced else -1
        self._set_heartbeat(broker_id, hb.touched(fenced, offset))

    def _touch(self, touch: HeartbeatTouch) -> None:
        hb = self._state.heartbeats.get(touch.broker_id)
        if hb is None:
            raise JbodError(f"Broker {touch.broker_id} is not registered with the heartbeat manager.")
        self._set_heartbeat(touch.broker_id, hb.touched(touch.fenced, touch.metadata_offset))

    def _maybe_update_controlled_shutdown_offset(self, broker_id: int, offset: int) -> None:
        hb = self._state.heartbeats.get(broker_id)
        if hb is None or hb.fenced:
            raise JbodError("Fenced brokers cannot enter controlled shutdown.")
        if hb.controlled_shutdown_offset < 0:
            self._set_heartbeat(broker_id, BrokerHeartbeatState(fenced=False, metadata_offset=hb.metadata_offset,
                                                                controlled_shutdown_offset=offset))


def write_records(controller: ReferenceController, records: list[Record],
                  source: str | None = None) -> list[LogEntry]:
    """Append committed records at the controller's next offsets and replay them (a test and bootstrap helper:
    e.g. the bootstrap FeatureLevelRecord, or an UpdateFeatures outcome the controller does not model)."""
    entries = [LogEntry(offset=controller.next_offset + i, record=r, source=source) for i, r in enumerate(records)]
    for entry in entries:
        controller.replay(entry)
    return entries
