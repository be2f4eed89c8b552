"""Broker registration: the port of ``ClusterControlManager.registerBroker`` (3.9) and its helpers.

Mirrors ``org.apache.kafka.controller.ClusterControlManager`` (``registerBroker``,
``processRegistrationFeature``; ``checkBrokerEpoch`` is :meth:`ControllerContext.check_broker_epoch`) with
``QuorumController.registerBroker`` passing the next write offset as the new broker epoch. Pure: returns a
:class:`ControllerResult`; the RegisterBrokerRecord changes the image on replay.

ZooKeeper migration is not modelled: the controller behaves as one with ``zookeeper.metadata.migration.enable``
off, so a migrating ZK broker is refused (BROKER_ID_NOT_REGISTERED) and the controller is never in pre-migration
mode.
"""

from __future__ import annotations

from jbod_model.controller.context import ControllerContext
from jbod_model.controller.messages import (
    BrokerRegistrationFeature,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
)
from jbod_model.controller.replication_control import handle_broker_unclean_shutdown
from jbod_model.controller.result import ApiError, ControllerResult
from jbod_model.directory_id import is_reserved
from jbod_model.errors import RequestRejected
from jbod_model.errors_codes import Errors
from jbod_model.metadata_version import FEATURE_NAME
from jbod_model.records.metadata import (
    BrokerFeature,
    Record,
    RegisterBrokerRecord,
)

#: ``MetadataVersion.MINIMUM_KRAFT_VERSION`` (3.0-IV1): what a broker that sends no metadata.version range
#: supports.
MINIMUM_KRAFT_VERSION_LEVEL = 1
KRAFT_VERSION_FEATURE = "kraft.version"


def has_valid_session(ctx: ControllerContext, broker_id: int) -> bool:
    """``BrokerHeartbeatManager.hasValidSession`` without a clock: the broker's session exists and is
    unfenced."""
    hb = ctx.state.heartbeats.get(broker_id)
    return hb is not None and not hb.fenced


def finalized_features(ctx: ControllerContext) -> dict[str, int]:
    """What ``QuorumController.registerBroker`` passes as finalized features: the image's finalized levels
    (metadata.version included) plus the raft layer's kraft.version."""
    levels = dict(ctx.image.features.levels)
    levels[KRAFT_VERSION_FEATURE] = ctx.config.kraft_version
    return levels


def _process_registration_feature(broker_id: int, finalized: dict[str, int],
                                  feature: BrokerRegistrationFeature) -> BrokerFeature:
    """Mirrors ``processRegistrationFeature``: the finalized level must be in the broker's supported range."""
    default = 1 if feature.name == FEATURE_NAME else 0  # metadata.version's "unset" level is 1, not 0
    level = finalized.get(feature.name, default)
    if not feature.min_supported_version <= level <= feature.max_supported_version:
        raise RequestRejected(
            Errors.UNSUPPORTED_VERSION,
            f"Unable to register because the broker does not support finalized version {level} of "
            f"{feature.name}. The broker wants a version between {feature.min_supported_version} and "
            f"{feature.max_supported_version}, inclusive.")
    return feature


def register_broker(ctx: ControllerContext, request: BrokerRegistrationRequest
                    ) -> ControllerResult[BrokerRegistrationResponse]:
    """Mirrors ``ClusterControlManager.registerBroker`` (3.9, R3) with ``newBrokerEpoch = nextWriteOffset``.

    Validation order: cluster id → live session with another incarnation → ZK-migration checks → (MV ≥
    3.7-IV2) directories: non-empty, no reserved id, no duplicate, none owned by another broker → features. A
    new incarnation gets ``BrokerEpoch`` = the offset its RegisterBrokerRecord will be written at and is
    fenced; the same incarnation *amends* the registration, keeping epoch, fencing and controlled-shutdown
    state (KAFKA-16757, KAFKA-16952). LogDirs are persisted only at MV ≥ 3.7-IV2 (R3.1); registration never
    moves partitions (R3.3).
    """
    try:
        records = _register_broker(ctx, request)
    except RequestRejected as rejected:
        return ControllerResult(records=(), response=BrokerRegistrationResponse(
            version=request.version, error_code=rejected.error), error=ApiError.from_rejection(rejected))
    rbr = records[-1]
    assert isinstance(rbr, RegisterBrokerRecord)
    return ControllerResult(records=records, atomic=True, response=BrokerRegistrationResponse(
        version=request.version, error_code=Errors.NONE, broker_epoch=rbr.broker_epoch))


def _register_broker(ctx: ControllerContext, request: BrokerRegistrationRequest) -> tuple[Record, ...]:
    mv = ctx.metadata_version
    cluster_id = ctx.config.cluster_id
    if cluster_id is not None and cluster_id != request.cluster_id:
        raise RequestRejected(Errors.INCONSISTENT_CLUSTER_ID,
                              f"Expected cluster ID {cluster_id}, but got cluster ID {request.cluster_id}")
    broker_id = request.broker_id
    existing = ctx.registration(broker_id)
    prev_incarnation = existing.incarnation_id if existing is not None else None
    if (existing is not None and has_valid_session(ctx, broker_id)
            and request.incarnation_id != prev_incarnation):
        raise RequestRejected(Errors.DUPLICATE_BROKER_REGISTRATION, "Another broker is registered with that "
                                                                    "broker id.")
    if request.is_migrating_zk_broker:
        # ZK migration is out of scope: the reference controller never runs with zookeeper.metadata.migration.
        raise RequestRejected(Errors.BROKER_ID_NOT_REGISTERED,
                              "Controller does not support registering ZK brokers.")
    if mv.is_directory_assignment_supported():
        dirs = request.log_dirs
        if not dirs:
            raise RequestRejected(Errors.INVALID_REGISTRATION, "No directories specified in request")
        if any(is_reserved(d) for d in dirs):
            raise RequestRejected(Errors.INVALID_REGISTRATION, "Reserved directory ID in request")
        if len(set(dirs)) != len(dirs):
            raise RequestRejected(Errors.INVALID_REGISTRATION, "Duplicate directory ID in request")
        for directory in dirs:
            owner = ctx.directory_owner(directory)
            if owner is not None and owner != broker_id:
                raise RequestRejected(Errors.INVALID_REGISTRATION,
                                      f"Broker {owner} is already registered with directory {directory}")

    finalized = finalized_features(ctx)
    unverified = dict(finalized)
    features: list[BrokerFeature] = []
    for feature in request.features:
        features.append(_process_registration_feature(broker_id, finalized, feature))
        unverified.pop(feature.name, None)
    if not any(f.name == FEATURE_NAME for f in request.features):
        # A broker that sends no metadata.version range is assumed to support only the first KRaft version.
        features.append(_process_registration_feature(broker_id, finalized, BrokerRegistrationFeature(
            name=FEATURE_NAME, min_supported_version=MINIMUM_KRAFT_VERSION_LEVEL,
            max_supported_version=MINIMUM_KRAFT_VERSION_LEVEL)))
        unverified.pop(FEATURE_NAME, None)
    for name in sorted(unverified):
        # Every finalized controller feature the broker did not mention must be at level 0.
        if unverified[name] != 0:
            _process_registration_feature(broker_id, finalized, BrokerRegistrationFeature(
                name=name, min_supported_version=0, max_supported_version=0))

    version = mv.register_broker_record_version()
    end_points = request.listeners
    records: list[Record] = []
    if request.incarnation_id != prev_incarnation:
        # A new incarnation: first the unclean-shutdown cleanup, then a fenced registration whose epoch is the
        # batch's first offset (QuorumController passes nextWriteOffset; with no cleanup records that is the
        # RegisterBrokerRecord's own offset).
        records.extend(handle_broker_unclean_shutdown(ctx, broker_id))
        epoch, fenced, in_controlled_shutdown = ctx.next_write_offset, True, False
    else:
        assert existing is not None
        # KAFKA-16952: re-registering the same incarnation (e.g. to add LogDirs after an MV upgrade) keeps the
        # epoch, the fencing and the controlled-shutdown state.
        epoch, fenced, in_controlled_shutdown = existing.epoch, existing.fenced, existing.in_controlled_shutdown
    records.append(RegisterBrokerRecord(
        version=version, broker_id=broker_id, is_migrating_zk_broker=False,
        incarnation_id=request.incarnation_id, broker_epoch=epoch, end_points=end_points,
        features=tuple(features), rack=request.rack, fenced=fenced,
        in_controlled_shutdown=in_controlled_shutdown if version >= 1 else False,
        log_dirs=request.log_dirs if mv.is_directory_assignment_supported() else ()))
    return tuple(records)
