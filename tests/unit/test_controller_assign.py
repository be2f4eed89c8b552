"""R6 (AssignReplicasToDirs), the §4 KIP differences it shows (unknown dir accepted and treated offline) and quirk
§6.6: ReplicationControlManager.handleAssignReplicasToDirs as shipped in 3.9."""

from __future__ import annotations

from controller_support import (
    MV_3_6,
    MV_3_7_IV1,
    MV_3_7_IV2,
    MV_3_9,
    MV_4_0,
    Cluster,
    dir_id,
    pcr,
    pcrs,
    records_of,
    sort_pcrs,
)

from jbod_model.controller import ControllerConfig
from jbod_model.controller.messages import (
    AssignReplicasToDirsDirectory,
    AssignReplicasToDirsPartition,
    AssignReplicasToDirsRequest,
    AssignReplicasToDirsTopic,
)
from jbod_model.directory_id import LOST, MIGRATING, UNASSIGNED
from jbod_model.errors_codes import Errors
from jbod_model.records.metadata import PartitionChangeRecord, PartitionRecord, TopicRecord
from jbod_model.replicas import OfflineReason, offline_replicas
from jbod_model.uuid import Uuid

# The ids of Kafka's testHandleAssignReplicasToDirs.
DIR1B1 = Uuid.from_string("hO2YI5bgRUmByNPHiHxjNQ")
DIR2B1 = Uuid.from_string("R3Gb1HLoTzuKMgAkH5Vtpw")
DIR1B2 = Uuid.from_string("TBGa8UayQi6KguqF5nC0sw")
OFFLINE_DIR = Uuid.from_string("zvAf9BKZRyyrEWz4FX2nLA")
UNKNOWN_TOPIC = Uuid.from_string("nLU9hKNXSZuMe5PO2A4dVQ")


def kafka_layout() -> tuple[Cluster, Uuid, Uuid, Uuid]:
    c = Cluster.at(MV_3_9)
    c.register_with_dirs({1: [DIR1B1, DIR2B1], 2: [DIR1B2]})
    c.unfence(1, 2)
    a = c.create_topic("a", [[1, 2], [1, 2], [1, 2]])
    b = c.create_topic("b", [[1, 2], [1, 2]])
    t_c = c.create_topic("c", [[2]])
    return c, a, b, t_c


def test_r6_kafka_test_handle_assign_replicas_to_dirs() -> None:
    """Kafka's ReplicationControlManagerTest.testHandleAssignReplicasToDirs, with its exact expectations."""
    c, a, b, t_c = kafka_layout()
    request = c.assign_request(1, [((a, 0), DIR1B1), ((a, 1), DIR2B1), ((a, 2), OFFLINE_DIR), ((b, 0), DIR1B1),
                                   ((b, 1), LOST), ((UNKNOWN_TOPIC, 1), DIR2B1), ((a, 137), DIR1B1),
                                   ((t_c, 0), DIR1B1)])
    result = c.propose(request)
    codes = {(d.id, t.topic_id, p.partition_index): p.error_code
             for d in result.response.directories for t in d.topics for p in t.partitions}
    assert codes == {
        (DIR1B1, a, 0): Errors.NONE, (DIR2B1, a, 1): Errors.NONE, (OFFLINE_DIR, a, 2): Errors.NONE,
        (DIR1B1, b, 0): Errors.NONE, (LOST, b, 1): Errors.NONE, (DIR2B1, UNKNOWN_TOPIC, 1): Errors.UNKNOWN_TOPIC_ID,
        (DIR1B1, a, 137): Errors.UNKNOWN_TOPIC_OR_PARTITION, (DIR1B1, t_c, 0): Errors.NOT_LEADER_OR_FOLLOWER,
    }
    assert sort_pcrs(pcrs(records_of(result))) == sort_pcrs([
        pcr(a, 0, directories=(DIR1B1, DIR1B2)),
        pcr(a, 1, directories=(DIR2B1, DIR1B2)),
        pcr(a, 2, directories=(OFFLINE_DIR, DIR1B2)),
        pcr(b, 0, directories=(DIR1B1, DIR1B2)),
        pcr(b, 1, directories=(LOST, DIR1B2)),
        # a-2 (unknown/offline dir) and b-1 (LOST) also lose broker 1 as leader and ISR member.
        pcr(a, 2, isr=(2,), leader=2),
        pcr(b, 1, isr=(2,), leader=2),
    ])
    c.controller.handle(request)
    led_by_1 = {(t, p) for t in (a, b) for p in range(3) if (part := c.image.topics.get_partition(t, p))
                and part.leader == 1}
    assert led_by_1 == {(a, 0), (a, 1), (b, 0)}
    assert c.partition(t_c, 0).leader == 2


def test_r6_1_unsupported_version_below_3_7_iv2() -> None:
    for mv in (MV_3_6, MV_3_7_IV1):
        c = Cluster.at(mv)
        c.register(1, [dir_id(1)])
        result = c.propose(c.assign_request(1, {(Uuid.from_string("nLU9hKNXSZuMe5PO2A4dVQ"), 0): dir_id(1)}))
        assert records_of(result) == []
        assert result.response.to_json() == {"throttleTimeMs": 0, "errorCode": 35, "directories": []}
        assert result.error is not None and result.error.message == "Directory assignment is not supported yet."


def test_r6_1_unknown_broker_or_wrong_epoch_is_stale_broker_epoch_without_directories() -> None:
    c, a, _, _ = kafka_layout()
    for broker, epoch in ((9, 1), (1, c.epoch(1) + 5)):
        request = AssignReplicasToDirsRequest(broker_id=broker, broker_epoch=epoch, directories=(
            AssignReplicasToDirsDirectory(id=DIR1B1, topics=(AssignReplicasToDirsTopic(
                topic_id=a, partitions=(AssignReplicasToDirsPartition(partition_index=0),)),)),))
        result = c.propose(request)
        assert records_of(result) == []
        assert result.response.to_json() == {"throttleTimeMs": 0, "errorCode": 77, "directories": []}


def test_r6_3_unknown_topic_id_applies_to_every_partition_of_the_entry() -> None:
    c, _, _, _ = kafka_layout()
    request = AssignReplicasToDirsRequest(broker_id=1, broker_epoch=c.epoch(1), directories=(
        AssignReplicasToDirsDirectory(id=DIR1B1, topics=(AssignReplicasToDirsTopic(
            topic_id=UNKNOWN_TOPIC, partitions=tuple(AssignReplicasToDirsPartition(partition_index=i)
                                                     for i in (0, 1, 7))),)),))
    result = c.propose(request)
    assert records_of(result) == []
    (directory,) = result.response.directories
    assert [p.error_code for p in directory.topics[0].partitions] == [Errors.UNKNOWN_TOPIC_ID] * 3
    assert result.response.error_code == Errors.NONE


def test_r6_4_unknown_partition_gets_unknown_topic_or_partition() -> None:
    c, a, _, _ = kafka_layout()
    result = c.propose(c.assign_request(1, {(a, 3): DIR1B1}))
    assert records_of(result) == []
    assert result.response.directories[0].topics[0].partitions[0].error_code == 3


def test_r6_4_broker_not_a_replica_gets_not_leader_or_follower() -> None:
    c, _, _, t_c = kafka_layout()
    result = c.propose(c.assign_request(1, {(t_c, 0): DIR1B1}))
    assert records_of(result) == []
    assert result.response.directories[0].topics[0].partitions[0].error_code == 6


def test_r6_4_online_assignment_writes_only_directories_and_bumps_only_the_partition_epoch() -> None:
    c, a, _, _ = kafka_layout()
    before = c.partition(a, 0)
    assert before.directories == (UNASSIGNED, DIR1B2)  # broker 1 has two dirs, broker 2 one (R7.1)
    entries, _ = c.assign(1, {(a, 0): DIR2B1})
    assert records_of(entries) == [pcr(a, 0, directories=(DIR2B1, DIR1B2))]
    after = c.partition(a, 0)
    assert after.directories == (DIR2B1, DIR1B2)
    assert (after.leader, after.isr, after.leader_epoch) == (before.leader, before.isr, before.leader_epoch)
    assert after.partition_epoch == before.partition_epoch + 1


def test_r6_4_same_directory_again_writes_nothing_but_answers_none() -> None:
    c, a, _, _ = kafka_layout()
    c.assign(1, {(a, 0): DIR2B1})
    entries, response = c.assign(1, {(a, 0): DIR2B1})
    assert entries == []
    assert response.directories[0].topics[0].partitions[0].error_code == Errors.NONE


def test_r6_2_unknown_directory_is_accepted_and_treated_as_offline() -> None:
    """§4.4: the KIP says an unregistered directory fails the call; Kafka persists it and treats it offline."""
    c, a, _, _ = kafka_layout()
    entries, response = c.assign(1, {(a, 1): OFFLINE_DIR})
    assert response.directories[0].topics[0].partitions[0].error_code == Errors.NONE
    assert records_of(entries) == [pcr(a, 1, directories=(OFFLINE_DIR, DIR1B2)), pcr(a, 1, isr=(2,), leader=2)]
    assert c.partition(a, 1).directory(1) == OFFLINE_DIR
    offline = {(r.topic_id, r.partition_id, r.broker_id): r.offline_reason for r in offline_replicas(c.image)}
    assert offline == {(a, 1, 1): OfflineReason.DIRECTORY_OFFLINE}


def test_r6_2_another_brokers_directory_counts_as_offline() -> None:
    c, a, _, _ = kafka_layout()
    entries, _ = c.assign(1, {(a, 0): DIR1B2})  # broker 2's directory, reported by broker 1
    assert records_of(entries)[1:] == [pcr(a, 0, isr=(2,), leader=2)]


def test_r6_2_lost_is_offline_and_unassigned_or_migrating_are_online() -> None:
    c, a, b, _ = kafka_layout()
    entries, _ = c.assign(1, {(a, 0): LOST})
    assert records_of(entries) == [pcr(a, 0, directories=(LOST, DIR1B2)), pcr(a, 0, isr=(2,), leader=2)]
    assert {r.offline_reason for r in offline_replicas(c.image)} == {OfflineReason.DIRECTORY_LOST}
    entries, _ = c.assign(1, {(b, 0): MIGRATING})
    assert records_of(entries) == [pcr(b, 0, directories=(MIGRATING, DIR1B2))]
    entries, _ = c.assign(1, {(b, 0): UNASSIGNED})
    assert records_of(entries) == [pcr(b, 0, directories=(UNASSIGNED, DIR1B2))]
    assert c.partition(b, 0).leader == 1


def test_r6_2_a_registration_without_directories_has_every_directory_online() -> None:
    """KAFKA-16162: a broker registered before 3.7-IV2 (no LogDirs) has every directory online."""
    c = Cluster.at(MV_3_6)
    c.register(1, [dir_id(1)])
    c.register(2, [dir_id(2)])
    c.unfence(1, 2)
    t = c.create_topic("t", [[1, 2]])
    c.set_mv(MV_3_7_IV2)
    entries, _ = c.assign(1, {(t, 0): OFFLINE_DIR})
    assert records_of(entries) == [pcr(t, 0, directories=(OFFLINE_DIR, MIGRATING))]
    assert c.partition(t, 0).leader == 1


def test_r6_5_directory_records_in_request_order_then_leader_isr_records_sorted() -> None:
    c, a, b, _ = kafka_layout()
    request = c.assign_request(1, [((b, 1), OFFLINE_DIR), ((a, 2), LOST), ((a, 0), DIR1B1), ((b, 0), OFFLINE_DIR)])
    records = records_of(c.propose(request))
    assert [(r.topic_id, r.partition_id, r.directories is not None) for r in pcrs(records)] == [
        (b, 1, True), (a, 2, True), (a, 0, True), (b, 0, True),
        *sorted([(a, 2, False), (b, 0, False), (b, 1, False)], key=lambda x: f"{x[0]}-{x[1]}"),
    ]
    # The leader/ISR records are built from the pre-request state: no Directories field.
    assert all(r.directories is None for r in pcrs(records)[4:])


def test_r6_6_response_echoes_every_entry_in_request_order_and_is_not_atomic() -> None:
    c, a, b, t_c = kafka_layout()
    request = AssignReplicasToDirsRequest(broker_id=1, broker_epoch=c.epoch(1), directories=(
        AssignReplicasToDirsDirectory(id=DIR2B1, topics=(
            AssignReplicasToDirsTopic(topic_id=b, partitions=(AssignReplicasToDirsPartition(partition_index=1),
                                                              AssignReplicasToDirsPartition(partition_index=9))),
            AssignReplicasToDirsTopic(topic_id=t_c, partitions=(AssignReplicasToDirsPartition(partition_index=0),)),
        )),
        AssignReplicasToDirsDirectory(id=DIR1B1, topics=(
            AssignReplicasToDirsTopic(topic_id=a, partitions=(AssignReplicasToDirsPartition(partition_index=0),)),
        )),
    ))
    result = c.propose(request)
    assert not result.atomic
    assert result.response.to_json() == {
        "throttleTimeMs": 0, "errorCode": 0, "directories": [
            {"id": str(DIR2B1), "topics": [
                {"topicId": str(b), "partitions": [{"partitionIndex": 1, "errorCode": 0},
                                                   {"partitionIndex": 9, "errorCode": 3}]},
                {"topicId": str(t_c), "partitions": [{"partitionIndex": 0, "errorCode": 6}]}]},
            {"id": str(DIR1B1), "topics": [
                {"topicId": str(a), "partitions": [{"partitionIndex": 0, "errorCode": 0}]}]},
        ]}


def test_r6_7_duplicate_entries_each_produce_a_record_and_the_last_one_wins() -> None:
    c, a, _, _ = kafka_layout()
    request = c.assign_request(1, [((a, 1), DIR1B1), ((a, 1), DIR2B1)])
    entries, _ = c.controller.handle(request)
    assert records_of(entries) == [pcr(a, 1, directories=(DIR1B1, DIR1B2)), pcr(a, 1, directories=(DIR2B1, DIR1B2))]
    assert c.partition(a, 1).directory(1) == DIR2B1


def test_r6_defaultdir_single_dir_broker_needs_no_assignment() -> None:
    """§4.9: a single-dir broker's new replicas are placed in its dir at creation, so its assignment is a no-op."""
    c, a, _, _ = kafka_layout()
    assert c.partition(a, 0).directory(2) == DIR1B2
    entries, response = c.assign(2, {(a, 0): DIR1B2})
    assert entries == [] and response.directories[0].topics[0].partitions[0].error_code == 0


def test_quirk_6_6_assignment_clears_a_non_empty_elr() -> None:
    c = Cluster.at(MV_4_0, config=ControllerConfig(eligible_leader_replicas_enabled=True))
    c.register_with_dirs({1: [DIR1B1, DIR2B1], 2: [DIR1B2], 3: [dir_id(3)]})
    c.unfence(1, 2, 3)
    topic = Uuid.from_string("ELRTOPICAAAAAAAAAAAAAA")
    c.commit([TopicRecord(name="elr", topic_id=topic),
              PartitionRecord(version=2, topic_id=topic, partition_id=0, replicas=(1, 2, 3), isr=(1, 2),
                              leader=1, leader_epoch=0, partition_epoch=0,
                              directories=(UNASSIGNED, DIR1B2, dir_id(3)), eligible_leader_replicas=(3,),
                              last_known_elr=(3,))])
    entries, _ = c.assign(1, {(topic, 0): DIR2B1})
    (record,) = records_of(entries)
    assert isinstance(record, PartitionChangeRecord) and record.version == 2
    assert record.directories == (DIR2B1, DIR1B2, dir_id(3))
    assert record.eligible_leader_replicas == ()  # cleared: the builder was not told ELR is enabled
    assert record.last_known_elr is None  # untouched
    part = c.partition(topic, 0)
    assert part.elr == () and part.last_known_elr == (3,)


def test_r6_4_a_leaderless_partition_also_gets_a_leader_in_its_directory_record() -> None:
    c, _, _, _ = kafka_layout()
    topic = Uuid.from_string("LEADERLESSTOPICAAAAAAA")
    c.commit([TopicRecord(name="l", topic_id=topic),
              PartitionRecord(version=1, topic_id=topic, partition_id=0, replicas=(1, 2), isr=(1, 2), leader=-1,
                              leader_epoch=3, partition_epoch=3, directories=(UNASSIGNED, DIR1B2))])
    entries, _ = c.assign(1, {(topic, 0): DIR1B1})
    # The default ONLINE election runs in every build(): broker 1 is an acceptable ISR member.
    assert records_of(entries) == [pcr(topic, 0, leader=1, directories=(DIR1B1, DIR1B2))]
    assert c.partition(topic, 0).leader_epoch == 4
