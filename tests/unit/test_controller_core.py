"""The propose-then-replay contract (handlers never mutate), the controller-side state kept next to the image,
and the request/response schemas (JSON names, versions, registry)."""

from __future__ import annotations

import copy

import pytest
from controller_support import MV_3_9, Cluster, dir_id, incarnation

from jbod_model.controller import ControllerConfig, ReferenceController, handle_request, write_records
from jbod_model.controller.messages import (
    REQUEST_TYPES,
    RESPONSE_TYPES,
    AlterPartitionRequest,
    ApiRequest,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    CreatableTopic,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
    CreateTopicsRequest,
    UnregisterBrokerRequest,
    api_message_from_json,
    request_from_json,
)
from jbod_model.errors import InputError
from jbod_model.records.entry import LogEntry
from jbod_model.records.json_codec import message_to_json
from jbod_model.records.metadata import (
    BeginTransactionRecord,
    EndTransactionRecord,
    FeatureLevelRecord,
    RegisterBrokerRecord,
)
from jbod_model.replay import replay_records
from jbod_model.uuid import Uuid


def busy_cluster() -> tuple[Cluster, Uuid]:
    c = Cluster.at(MV_3_9)
    c.register_with_dirs({1: [dir_id(1, "A"), dir_id(1, "B")], 2: [dir_id(2)], 3: [dir_id(3)]})
    c.unfence(1, 2, 3)
    t = c.create_topic("t", [[1, 2], [2, 3], [3, 1]])
    c.assign(1, {(t, 0): dir_id(1, "A"), (t, 2): dir_id(1, "B")})
    c.reassign("t", 1, [2, 1])
    return c, t


def every_kind_of_request(c: Cluster, t: Uuid) -> list[ApiRequest]:
    return [
        c.registration_request(4, [dir_id(4)]),
        c.registration_request(1, [dir_id(1, "A")]),
        c.heartbeat_request(1, offline=[dir_id(1, "A")]),
        c.heartbeat_request(2, want_fence=True, offline=[dir_id(2)]),
        c.heartbeat_request(3, want_shut_down=True),
        c.assign_request(1, {(t, 0): dir_id(1, "B"), (t, 2): Uuid.from_string("zvAf9BKZRyyrEWz4FX2nLA")}),
        CreateTopicsRequest(topics=(CreatableTopic(name="n", num_partitions=3, replication_factor=2),)),
        CreatePartitionsRequest(topics=(CreatePartitionsTopic(name="t", count=5),)),
        c.alter_partition_request(1, t, 0, [1]),
        c.alter_partition_request(1, t, 1, [1, 2, 3]),
        UnregisterBrokerRequest(broker_id=2),
    ]


def test_handlers_never_mutate_the_image_or_the_controller_state() -> None:
    c, t = busy_cluster()
    for request in every_kind_of_request(c, t):
        ctx = c.controller.context()
        image_before, state_before = ctx.image, ctx.state
        snapshot = copy.deepcopy(ctx.image)
        state_snapshot = (dict(ctx.state.register_broker_record_offsets), dict(ctx.state.heartbeats))
        handle_request(ctx, request)
        handle_request(ctx, request)  # twice: the second call must see exactly the same input
        assert ctx.image is image_before and ctx.state is state_before
        assert ctx.image == snapshot
        assert (dict(ctx.state.register_broker_record_offsets), dict(ctx.state.heartbeats)) == state_snapshot
        assert c.controller.image is image_before  # nothing was written either


def test_handlers_are_deterministic() -> None:
    c, t = busy_cluster()
    ctx = c.controller.context()
    for request in every_kind_of_request(c, t):
        assert handle_request(ctx, request) == handle_request(ctx, request)


def test_images_are_frozen() -> None:
    c, _ = busy_cluster()
    with pytest.raises(AttributeError):
        c.image.last_offset = 7
    with pytest.raises(TypeError):
        c.controller.state.heartbeats[1] = None


def test_handle_writes_at_the_next_offsets_and_replays() -> None:
    c, _ = busy_cluster()
    start = c.controller.next_offset
    entries, _ = c.controller.handle(c.heartbeat_request(1, want_fence=True))
    assert [e.offset for e in entries] == list(range(start, start + len(entries)))
    assert {e.batch_base_offset for e in entries} == {start}
    assert c.controller.next_offset == start + len(entries)
    assert c.image.last_offset == start + len(entries) - 1
    assert c.image.cluster.brokers[1].fenced


def test_controller_state_follows_committed_records_too() -> None:
    """Registration offsets and heartbeat sessions come from replayed records, whoever wrote them."""
    ctrl = ReferenceController(config=ControllerConfig())
    write_records(ctrl, [FeatureLevelRecord(name="metadata.version", feature_level=MV_3_9)])
    ctrl.replay(LogEntry(offset=10, record=RegisterBrokerRecord(
        broker_id=1, incarnation_id=incarnation(1), broker_epoch=10, log_dirs=(dir_id(1),))))
    assert ctrl.state.register_broker_record_offsets[1] == 10
    assert ctrl.state.heartbeats[1].fenced
    assert ctrl.next_offset == 11
    _, response = ctrl.handle(BrokerHeartbeatRequest(broker_id=1, broker_epoch=10, current_metadata_offset=10))
    assert not response.is_fenced
    assert not ctrl.state.heartbeats[1].fenced


def test_a_metadata_transaction_takes_effect_at_its_end() -> None:
    ctrl = ReferenceController()
    records = [BeginTransactionRecord(name="bootstrap"), FeatureLevelRecord(name="metadata.version", feature_level=21),
               RegisterBrokerRecord(broker_id=1, incarnation_id=incarnation(1), broker_epoch=2,
                                    log_dirs=(dir_id(1),)),
               EndTransactionRecord()]
    for i, record in enumerate(records[:-1]):
        ctrl.replay(LogEntry(offset=i, record=record))
        assert 1 not in ctrl.state.register_broker_record_offsets
    ctrl.replay(LogEntry(offset=3, record=records[-1]))
    assert ctrl.state.register_broker_record_offsets[1] == 2
    assert 1 in ctrl.image.cluster.brokers


def test_a_controller_started_from_an_image_treats_brokers_as_registered_at_its_offset() -> None:
    image = replay_records([FeatureLevelRecord(name="metadata.version", feature_level=21),
                            RegisterBrokerRecord(broker_id=1, incarnation_id=incarnation(1), broker_epoch=1,
                                                 log_dirs=(dir_id(1),), fenced=False)])
    ctrl = ReferenceController(image)
    assert ctrl.next_offset == 2
    assert ctrl.state.register_broker_record_offsets == {1: 1}
    assert not ctrl.state.heartbeats[1].fenced


def test_fence_stale_broker_mirrors_maybe_fence_one_stale_broker() -> None:
    c, _ = busy_cluster()
    entries = c.controller.fence_stale_broker(3)
    assert entries and c.image.cluster.brokers[3].fenced
    assert c.controller.state.heartbeats[3].fenced
    # A fenced session no longer blocks a new incarnation (no DUPLICATE_BROKER_REGISTRATION).
    assert c.register(3, [dir_id(3)], generation=2).error_code == 0
    with pytest.raises(InputError):
        c.controller.fence_stale_broker(3)


# -- schemas -----------------------------------------------------------------------------------------------------


def test_registry_names_and_latest_versions() -> None:
    assert sorted(REQUEST_TYPES) == sorted([
        "ASSIGN_REPLICAS_TO_DIRS_REQUEST", "BROKER_REGISTRATION_REQUEST", "BROKER_HEARTBEAT_REQUEST",
        "CREATE_TOPICS_REQUEST", "CREATE_PARTITIONS_REQUEST", "ALTER_PARTITION_REASSIGNMENTS_REQUEST",
        "ALTER_PARTITION_REQUEST", "UNREGISTER_BROKER_REQUEST"])
    assert sorted(RESPONSE_TYPES) == sorted(n.replace("_REQUEST", "_RESPONSE") for n in REQUEST_TYPES)
    latest = {name: cls().version for name, cls in REQUEST_TYPES.items()}
    assert latest == {"ASSIGN_REPLICAS_TO_DIRS_REQUEST": 0, "BROKER_REGISTRATION_REQUEST": 4,
                      "BROKER_HEARTBEAT_REQUEST": 1, "CREATE_TOPICS_REQUEST": 7, "CREATE_PARTITIONS_REQUEST": 3,
                      "ALTER_PARTITION_REASSIGNMENTS_REQUEST": 0, "ALTER_PARTITION_REQUEST": 3,
                      "UNREGISTER_BROKER_REQUEST": 0}


def test_requests_round_trip_through_kafka_json() -> None:
    c, t = busy_cluster()
    for request in every_kind_of_request(c, t):
        data = message_to_json(request, request.version)
        assert request_from_json(request.TYPE_NAME, data, request.version) == request


def test_registration_json_field_names_and_version_gates() -> None:
    data = {"brokerId": 1, "clusterId": "c", "incarnationId": str(incarnation(1)), "listeners": [],
            "features": [], "rack": None, "isMigratingZkBroker": False, "logDirs": [str(dir_id(1))],
            "previousBrokerEpoch": 5}
    request = api_message_from_json(BrokerRegistrationRequest, data)
    assert request.version == 4 and request.log_dirs == (dir_id(1),) and request.previous_broker_epoch == 5
    v1 = {k: v for k, v in data.items() if k not in ("logDirs", "previousBrokerEpoch")}
    assert api_message_from_json(BrokerRegistrationRequest, v1, 1).log_dirs == ()
    with pytest.raises(InputError, match="logDirs"):
        api_message_from_json(BrokerRegistrationRequest, v1, 2)  # LogDirs is a regular field from v2
    heartbeat = api_message_from_json(BrokerHeartbeatRequest, {
        "brokerId": 1, "brokerEpoch": 2, "currentMetadataOffset": 3, "wantFence": False, "wantShutDown": False})
    assert heartbeat.offline_log_dirs == ()  # tagged: may be absent
    assert message_to_json(heartbeat, 1) == {"brokerId": 1, "brokerEpoch": 2, "currentMetadataOffset": 3,
                                             "wantFence": False, "wantShutDown": False}


def test_alter_partition_old_versions_use_names_and_plain_isr() -> None:
    data = {"brokerId": 1, "brokerEpoch": 2, "topics": [{"topicName": "t", "partitions": [
        {"partitionIndex": 0, "leaderEpoch": 1, "newIsr": [1, 2], "leaderRecoveryState": 0, "partitionEpoch": 3}]}]}
    request = api_message_from_json(AlterPartitionRequest, data, 1)
    assert request.topics[0].topic_name == "t" and request.topics[0].partitions[0].new_isr == (1, 2)
    with pytest.raises(InputError):
        api_message_from_json(AlterPartitionRequest, data, 3)
    with pytest.raises(InputError, match="version"):
        request_from_json("ALTER_PARTITION_REQUEST", data, 9)
    with pytest.raises(InputError, match="unknown request type"):
        request_from_json("FETCH_REQUEST", {}, 0)
