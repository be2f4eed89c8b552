"""R3 (broker registration), R4 via replay, and the R12 gates on registration: ClusterControlManager.registerBroker
as shipped in 3.9, checked on the records it proposes and on the image after replay."""

from __future__ import annotations

import pytest
from controller_support import (
    CLUSTER_ID,
    MV_3_6,
    MV_3_7_IV1,
    MV_3_7_IV2,
    MV_3_9,
    Cluster,
    dir_id,
    incarnation,
    records_of,
)

from jbod_model.controller import ControllerConfig
from jbod_model.controller.messages import BrokerRegistrationFeature, CreatableTopic, CreateTopicsRequest
from jbod_model.directory_id import LOST, MIGRATING, UNASSIGNED
from jbod_model.errors_codes import Errors
from jbod_model.records.metadata import PartitionChangeRecord, RegisterBrokerRecord
from jbod_model.replicas import OfflineReason, offline_replicas
from jbod_model.uuid import Uuid


def test_r3_2_new_incarnation_gets_the_next_write_offset_as_epoch_and_is_fenced() -> None:
    c = Cluster.at(MV_3_9)
    next_offset = c.controller.next_offset
    result = c.propose(c.registration_request(1, [dir_id(1)]))
    (rbr,) = records_of(result)
    assert isinstance(rbr, RegisterBrokerRecord)
    assert rbr.broker_epoch == next_offset
    assert rbr.fenced is True and rbr.in_controlled_shutdown is False
    assert result.response.broker_epoch == next_offset
    assert result.atomic

    entries, response = c.controller.handle(c.registration_request(1, [dir_id(1)]))
    assert entries[0].offset == next_offset == response.broker_epoch
    reg = c.image.cluster.brokers[1]
    assert (reg.epoch, reg.fenced, reg.incarnation_id) == (next_offset, True, incarnation(1))
    assert c.controller.state.register_broker_record_offsets[1] == next_offset


def test_r3_1_log_dirs_persisted_as_sent_and_sorted_in_the_image() -> None:
    c = Cluster.at(MV_3_7_IV2)
    # "3MWI…"-like ids (top bit set) sort before "A…" ids in Kafka's signed order (semantics §1.1).
    high, low = Uuid.from_string("3MWIbwKkQ8u9aIhQwmb_fA"), dir_id(1)
    result = c.propose(c.registration_request(1, [low, high]))
    (rbr,) = records_of(result)
    assert isinstance(rbr, RegisterBrokerRecord)
    assert rbr.version == 3 and rbr.log_dirs == (low, high)
    c.register(1, [low, high])
    assert c.image.cluster.brokers[1].directories == (high, low)


def test_r3_1_record_version_follows_metadata_version() -> None:
    for mv, version in ((MV_3_6, 2), (MV_3_7_IV1, 2), (MV_3_7_IV2, 3), (MV_3_9, 3)):
        c = Cluster.at(mv)
        (rbr,) = records_of(c.propose(c.registration_request(1, [dir_id(1)])))
        assert isinstance(rbr, RegisterBrokerRecord)
        assert rbr.version == version


def test_r3_2_inconsistent_cluster_id() -> None:
    c = Cluster.at(MV_3_9)
    result = c.propose(c.registration_request(1, [dir_id(1)], cluster_id="other"))
    assert records_of(result) == []
    assert result.response.error_code == Errors.INCONSISTENT_CLUSTER_ID
    assert result.response.broker_epoch == -1
    assert result.error is not None
    assert result.error.message == f"Expected cluster ID {CLUSTER_ID}, but got cluster ID other"


def test_r3_2_any_cluster_id_is_accepted_when_none_is_configured() -> None:
    c = Cluster.at(MV_3_9, config=ControllerConfig(cluster_id=None))
    assert c.register(1, [dir_id(1)], cluster_id="whatever").error_code == Errors.NONE


def test_r3_3_live_session_with_another_incarnation_is_duplicate_broker_registration() -> None:
    c = Cluster.at(MV_3_9)
    c.register_with_dirs({1: [dir_id(1)]})
    c.unfence(1)
    result = c.propose(c.registration_request(1, [dir_id(1)], generation=2))
    assert result.response.error_code == Errors.DUPLICATE_BROKER_REGISTRATION
    assert result.error is not None and result.error.message == "Another broker is registered with that broker id."
    assert records_of(result) == []


def test_r3_3_fenced_broker_may_register_a_new_incarnation_with_a_new_epoch() -> None:
    c = Cluster.at(MV_3_9)
    c.register_with_dirs({1: [dir_id(1)]})
    old_epoch = c.epoch(1)
    c.unfence(1)
    c.heartbeat(1, want_fence=True)
    assert c.image.cluster.brokers[1].fenced
    offset = c.controller.next_offset
    response = c.register(1, [dir_id(1)], generation=2)
    assert response.error_code == Errors.NONE and response.broker_epoch == offset != old_epoch
    assert c.image.cluster.brokers[1].incarnation_id == incarnation(1, 2)


@pytest.mark.parametrize(("dirs", "message"), [
    ([], "No directories specified in request"),
    ([MIGRATING], "Reserved directory ID in request"),
    ([dir_id(1), UNASSIGNED], "Reserved directory ID in request"),
    ([LOST], "Reserved directory ID in request"),
    ([Uuid(0, 99)], "Reserved directory ID in request"),
    ([Uuid(0, -5)], "Reserved directory ID in request"),  # signed compare: negative lsb is reserved too
    ([dir_id(1), dir_id(1)], "Duplicate directory ID in request"),
])
def test_r3_5_invalid_registration_messages(dirs: list[Uuid], message: str) -> None:
    c = Cluster.at(MV_3_7_IV2)
    result = c.propose(c.registration_request(1, dirs))
    assert result.response.error_code == Errors.INVALID_REGISTRATION
    assert result.error is not None and result.error.message == message
    assert records_of(result) == []


def test_r3_5_directory_of_another_broker_is_refused_but_own_directory_is_fine() -> None:
    c = Cluster.at(MV_3_9)
    c.register_with_dirs({1: [dir_id(1, "A"), dir_id(1, "B")]})
    result = c.propose(c.registration_request(2, [dir_id(2), dir_id(1, "B")]))
    assert result.response.error_code == Errors.INVALID_REGISTRATION
    assert result.error is not None
    assert result.error.message == f"Broker 1 is already registered with directory {dir_id(1, 'B')}"
    # The same broker re-using its own directories (here: a new incarnation while fenced) is fine.
    assert c.register(1, [dir_id(1, "B")], generation=2).error_code == Errors.NONE


def test_r3_5_validation_order_cluster_id_then_session_then_directories_then_features() -> None:
    c = Cluster.at(MV_3_9)
    c.register_with_dirs({1: [dir_id(1)]})
    c.unfence(1)
    # Cluster id beats everything.
    bad = c.registration_request(1, [], generation=2, cluster_id="other", max_mv=1)
    assert c.propose(bad).response.error_code == Errors.INCONSISTENT_CLUSTER_ID
    # Then the live session.
    bad = c.registration_request(1, [], generation=2, max_mv=1)
    assert c.propose(bad).response.error_code == Errors.DUPLICATE_BROKER_REGISTRATION
    # Then directories (reserved before duplicate), then features.
    bad = c.registration_request(2, [LOST, LOST], max_mv=1)
    result = c.propose(bad)
    assert result.error is not None and result.error.message == "Reserved directory ID in request"
    bad = c.registration_request(2, [dir_id(2)], max_mv=1)
    assert c.propose(bad).response.error_code == Errors.UNSUPPORTED_VERSION


def test_r3_6_feature_range_must_contain_the_finalized_level() -> None:
    c = Cluster.at(MV_3_9)
    result = c.propose(c.registration_request(1, [dir_id(1)], max_mv=20))
    assert result.response.error_code == Errors.UNSUPPORTED_VERSION
    assert result.error is not None
    assert result.error.message == ("Unable to register because the broker does not support finalized version 21 "
                                    "of metadata.version. The broker wants a version between 1 and 20, inclusive.")


def test_r3_6_a_broker_without_a_metadata_version_range_supports_only_the_first_kraft_version() -> None:
    c = Cluster.at(MV_3_9)
    request = c.registration_request(1, [dir_id(1)])
    request = type(request)(broker_id=1, cluster_id=CLUSTER_ID, incarnation_id=incarnation(1),
                            log_dirs=(dir_id(1),),
                            features=(BrokerRegistrationFeature(name="group.version", min_supported_version=0,
                                                                max_supported_version=1),))
    assert c.propose(request).response.error_code == Errors.UNSUPPORTED_VERSION


def test_r3_2_same_incarnation_amends_keeping_epoch_fencing_and_controlled_shutdown() -> None:
    """KAFKA-16757 / KAFKA-16952 (3.9): re-registering the same incarnation keeps the epoch and the state."""
    c = Cluster.at(MV_3_9)
    c.register_with_dirs({1: [dir_id(1, "A"), dir_id(1, "B")], 2: [dir_id(2)]})
    c.unfence(1, 2)
    topic = c.create_topic("t", [[1, 2]])
    c.heartbeat(1, want_shut_down=True)  # leads t-0 → controlled shutdown
    reg = c.image.cluster.brokers[1]
    assert not reg.fenced and reg.in_controlled_shutdown
    result = c.propose(c.registration_request(1, [dir_id(1, "A")]))
    (rbr,) = records_of(result)
    assert isinstance(rbr, RegisterBrokerRecord)
    assert (rbr.broker_epoch, rbr.fenced, rbr.in_controlled_shutdown) == (reg.epoch, False, True)
    c.register(1, [dir_id(1, "A")])
    after = c.image.cluster.brokers[1]
    assert (after.epoch, after.fenced, after.in_controlled_shutdown) == (reg.epoch, False, True)
    assert after.directories == (dir_id(1, "A"),)
    assert c.partition(topic, 0).leader == 2


def test_r3_3_registration_never_moves_partitions_dropped_dirs_just_go_offline() -> None:
    c = Cluster.at(MV_3_9)
    c.register_with_dirs({1: [dir_id(1, "A"), dir_id(1, "B")], 2: [dir_id(2)]})
    c.unfence(1, 2)
    topic = c.create_topic("t", [[1, 2]])
    c.assign(1, {(topic, 0): dir_id(1, "B")})
    before = c.partition(topic, 0)
    entries, response = c.controller.handle(c.registration_request(1, [dir_id(1, "A")]))
    assert response.error_code == Errors.NONE
    assert not [e for e in entries if isinstance(e.record, PartitionChangeRecord)]
    assert c.partition(topic, 0) == before  # still leader, still in ISR: nothing moved
    (offline,) = offline_replicas(c.image)
    assert (offline.broker_id, offline.directory, offline.offline_reason) == (
        1, dir_id(1, "B"), OfflineReason.DIRECTORY_OFFLINE)


def test_r3_4_error_response_has_no_epoch() -> None:
    c = Cluster.at(MV_3_9)
    response = c.register(1, [], )
    assert response.error_code == Errors.INVALID_REGISTRATION and response.broker_epoch == -1


def test_r12_below_3_7_iv2_directories_are_neither_validated_nor_persisted() -> None:
    c = Cluster.at(MV_3_6)
    for dirs in ([], [LOST, LOST], [dir_id(1)]):
        result = c.propose(c.registration_request(1, dirs))
        (rbr,) = records_of(result)
        assert isinstance(rbr, RegisterBrokerRecord)
        assert rbr.version == 2 and rbr.log_dirs == ()
    c.register(1, [dir_id(1)])
    assert c.image.cluster.brokers[1].directories == ()


def test_r12_3_7_iv1_is_still_without_directories() -> None:
    c = Cluster.at(MV_3_7_IV1)
    (rbr,) = records_of(c.propose(c.registration_request(1, [])))
    assert isinstance(rbr, RegisterBrokerRecord) and rbr.log_dirs == ()


def test_r12_upgrade_from_3_6_to_3_7_iv2_with_re_registration() -> None:
    """Registrations from 3.6 have no directories (all online, defaultDir MIGRATING); after the upgrade the
    broker re-registers its incarnation with its directories (BrokerRegistrationTracker), keeping its epoch and
    fencing; MIGRATING partitions stay MIGRATING until the broker assigns them (R8.6, R13)."""
    c = Cluster.at(MV_3_6)
    c.register(1, [dir_id(1, "A"), dir_id(1, "B")])
    c.register(2, [dir_id(2)])
    c.unfence(1, 2)
    entries, _ = c.controller.handle(CreateTopicsRequest(topics=(CreatableTopic(
        name="old", num_partitions=2, replication_factor=2),)))
    partition_records = [e.record for e in entries if e.record.TYPE_NAME == "PARTITION_RECORD"]
    assert {r.version for r in partition_records} == {0}
    topic = c.image.topics.by_name["old"]
    assert c.partition(topic, 0).directories == (MIGRATING, MIGRATING)

    c.set_mv(MV_3_7_IV2)
    epoch1, epoch2 = c.epoch(1), c.epoch(2)
    # Until re-registration the empty directory list means "everything online" (KAFKA-16162).
    assert offline_replicas(c.image) == []
    assert c.controller.context().default_dir(1) == MIGRATING

    for broker, dirs in ((1, [dir_id(1, "A"), dir_id(1, "B")]), (2, [dir_id(2)])):
        result = c.propose(c.registration_request(broker, dirs))
        (rbr,) = records_of(result)
        assert isinstance(rbr, RegisterBrokerRecord)
        assert rbr.version == 3 and rbr.log_dirs == tuple(dirs) and rbr.fenced is False
        c.register(broker, dirs)
    assert (c.epoch(1), c.epoch(2)) == (epoch1, epoch2)
    assert not c.image.cluster.brokers[1].fenced and not c.image.cluster.brokers[2].fenced
    assert c.partition(topic, 0).directories == (MIGRATING, MIGRATING)  # R8.6
    assert offline_replicas(c.image) == []
    assert c.controller.context().default_dir(2) == dir_id(2)

    # The brokers now report where their replicas really are.
    entries, response = c.assign(1, {(topic, 0): dir_id(1, "B")})
    assert response.error_code == 0
    (record,) = records_of(entries)
    assert isinstance(record, PartitionChangeRecord)
    part = c.partition(topic, 0)
    assert record.directories == tuple(dir_id(1, "B") if r == 1 else MIGRATING for r in part.replicas)
    assert part.directory(1) == dir_id(1, "B")
