"""R7 (placement of new replicas: defaultDir, ISR, leader), R12 (record versions by metadata.version) and the
CreateTopics / CreatePartitions validation of ReplicationControlManager.createTopics / createPartitions (3.9)."""

from __future__ import annotations

import pytest
from controller_support import MV_3_6, MV_3_7_IV1, MV_3_7_IV2, MV_3_9, MV_4_0, Cluster, dir_id, records_of

from jbod_model.controller import deterministic_topic_id
from jbod_model.controller.context import UsableBroker
from jbod_model.controller.messages import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreatePartitionsAssignment,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
    CreateTopicsRequest,
)
from jbod_model.controller.placement import place_replicas
from jbod_model.directory_id import MIGRATING, UNASSIGNED
from jbod_model.errors_codes import Errors
from jbod_model.records.metadata import ConfigRecord, PartitionRecord, TopicRecord
from jbod_model.uuid import Uuid


def three_brokers(mv: int = MV_3_9) -> Cluster:
    c = Cluster.at(mv)
    c.register_with_dirs({1: [dir_id(1, "A")], 2: [dir_id(2, "A"), dir_id(2, "B")], 3: [dir_id(3, "A")]})
    c.unfence(1, 2, 3)
    return c


def create(c: Cluster, *topics: CreatableTopic, validate_only: bool = False):
    return c.propose(CreateTopicsRequest(topics=topics, validate_only=validate_only))


def manual(name: str, *assignments: list[int], **kwargs: object) -> CreatableTopic:
    return CreatableTopic(name=name, num_partitions=-1, replication_factor=-1,
                          assignments=tuple(CreatableReplicaAssignment(partition_index=i, broker_ids=tuple(a))
                                            for i, a in enumerate(assignments)), **kwargs)


def error_of(result) -> tuple[int, str | None]:
    (topic,) = result.response.topics
    return topic.error_code, topic.error_message


# -- R7.1 / R7.2 -------------------------------------------------------------------------------------------------


def test_r7_1_default_dir_single_dir_broker_gets_its_dir_two_dirs_unassigned() -> None:
    """§4.9: KIP says new replicas are UNASSIGNED; Kafka places them in a single-dir broker's only dir."""
    c = three_brokers()
    result = create(c, manual("t", [1, 2, 3]))
    topic_record, partition = records_of(result)
    assert isinstance(topic_record, TopicRecord) and isinstance(partition, PartitionRecord)
    assert partition.directories == (dir_id(1, "A"), UNASSIGNED, dir_id(3, "A"))
    assert partition.version == 1


def test_r7_1_registration_without_dirs_gives_migrating_and_unregistered_gives_unassigned() -> None:
    c = Cluster.at(MV_3_6)
    c.register(1, [dir_id(1)])
    c.set_mv(MV_3_7_IV2)
    ctx = c.controller.context()
    assert ctx.default_dir(1) == MIGRATING  # registered before 3.7-IV2: no directories
    assert ctx.default_dir(42) == UNASSIGNED  # not registered
    c.register(2, [dir_id(2)])
    c.unfence(1, 2)
    (_, partition) = records_of(create(c, manual("t", [1, 2])))
    assert isinstance(partition, PartitionRecord) and partition.directories == (MIGRATING, dir_id(2))


def test_r7_1_broker_that_lost_one_of_two_dirs_places_new_replicas_in_the_survivor() -> None:
    c = three_brokers()
    c.heartbeat(2, offline=[dir_id(2, "A")])
    assert c.controller.context().default_dir(2) == dir_id(2, "B")
    (_, partition) = records_of(create(c, manual("t", [2, 1])))
    assert isinstance(partition, PartitionRecord) and partition.directories == (dir_id(2, "B"), dir_id(1, "A"))


def test_r7_1_r12_below_3_7_iv2_everything_is_migrating_and_written_without_directories() -> None:
    for mv in (MV_3_6, MV_3_7_IV1):
        c = three_brokers(mv)
        (_, partition) = records_of(create(c, manual("t", [1, 2, 3])))
        assert isinstance(partition, PartitionRecord)
        assert partition.version == 0 and partition.directories == ()
        c.controller.handle(CreateTopicsRequest(topics=(manual("t", [1, 2, 3]),)))
        assert c.partition(c.image.topics.by_name["t"], 0).directories == (MIGRATING,) * 3


@pytest.mark.parametrize(("mv", "version"), [(MV_3_6, 0), (MV_3_7_IV2, 1), (MV_3_9, 1), (MV_4_0, 2)])
def test_r12_partition_record_version_follows_metadata_version(mv: int, version: int) -> None:
    c = three_brokers(mv)
    (_, partition) = records_of(create(c, manual("t", [1, 2, 3])))
    assert isinstance(partition, PartitionRecord) and partition.version == version


def test_r7_2_manual_assignment_gets_default_dirs_even_for_fenced_brokers() -> None:
    c = three_brokers()
    c.heartbeat(3, want_fence=True)
    (_, partition) = records_of(create(c, manual("t", [3, 1, 2])))
    assert isinstance(partition, PartitionRecord)
    assert partition.directories == (dir_id(3, "A"), dir_id(1, "A"), UNASSIGNED)
    # R7.3: ISR = active replicas, leader = first of them.
    assert partition.isr == (1, 2) and partition.leader == 1
    assert (partition.leader_epoch, partition.partition_epoch, partition.leader_recovery_state) == (0, 0, 0)


def test_r7_3_automatic_placement_isr_leader_and_epochs() -> None:
    c = three_brokers()
    entries, response = c.controller.handle(CreateTopicsRequest(topics=(CreatableTopic(
        name="auto", num_partitions=3, replication_factor=3),)))
    parts = [e.record for e in entries if isinstance(e.record, PartitionRecord)]
    assert [p.replicas for p in parts] == [(1, 2, 3), (2, 3, 1), (3, 1, 2)]  # striped, leaders spread
    assert all(p.isr == p.replicas and p.leader == p.replicas[0] for p in parts)
    (result,) = response.topics
    assert (result.error_code, result.num_partitions, result.replication_factor) == (0, 3, 3)
    assert result.topic_id == c.image.topics.by_name["auto"]


def test_r7_deterministic_topic_ids_and_placement() -> None:
    c1, c2 = three_brokers(), three_brokers()
    request = CreateTopicsRequest(topics=(CreatableTopic(name="x", num_partitions=4, replication_factor=2),))
    assert c1.controller.handle(request)[1] == c2.controller.handle(request)[1]
    topic_id = c1.image.topics.by_name["x"]
    assert topic_id == deterministic_topic_id("x", c1.image.last_offset - 4)
    assert not str(topic_id).startswith("-") and topic_id not in (Uuid(0, 0), Uuid(0, 1))


def test_placer_prefers_unfenced_leaders_and_spreads_racks() -> None:
    brokers = [UsableBroker(1, "r1", False), UsableBroker(2, "r1", False), UsableBroker(3, "r2", False),
               UsableBroker(4, "r2", True)]
    placements = place_replicas(brokers, 4, 2)
    assert all(p[0] != 4 for p in placements)  # a fenced broker never leads
    assert all(set(p) & {1, 2} and set(p) & {3, 4} for p in placements)  # one replica per rack


# -- CreateTopics errors ------------------------------------------------------------------------------------------


def test_create_topics_topic_already_exists() -> None:
    c = three_brokers()
    c.create_topic("t", [[1]])
    assert error_of(create(c, manual("t", [1]))) == (Errors.TOPIC_ALREADY_EXISTS, "Topic 't' already exists.")


@pytest.mark.parametrize(("topic", "error", "message"), [
    (CreatableTopic(name="t", num_partitions=1, replication_factor=0), Errors.INVALID_REPLICATION_FACTOR,
     "Replication factor must be larger than 0, or -1 to use the default value."),
    (CreatableTopic(name="t", num_partitions=1, replication_factor=4), Errors.INVALID_REPLICATION_FACTOR,
     "Unable to replicate the partition 4 time(s): The target replication factor of 4 cannot be reached because "
     "only 3 broker(s) are registered."),
    (CreatableTopic(name="t", num_partitions=0, replication_factor=1), Errors.INVALID_PARTITIONS,
     "Number of partitions was set to an invalid non-positive value."),
    (manual("t", [1, 1]), Errors.INVALID_REPLICA_ASSIGNMENT,
     "The manual partition assignment includes the broker 1 more than once."),
    (manual("t", [1, 9]), Errors.INVALID_REPLICA_ASSIGNMENT,
     "The manual partition assignment includes broker 9, but no such broker is registered."),
    (manual("t", [1, 2], [3]), Errors.INVALID_REPLICA_ASSIGNMENT,
     "The manual partition assignment includes a partition with 1 replica(s), but this is not consistent with "
     "previous partitions, which have 2 replica(s)."),
    (manual("t", []), Errors.INVALID_REPLICA_ASSIGNMENT,
     "The manual partition assignment includes an empty replica list."),
    (CreatableTopic(name="t", num_partitions=2, replication_factor=-1, assignments=(
        CreatableReplicaAssignment(partition_index=0, broker_ids=(1,)),)), Errors.INVALID_REQUEST,
     "A manual partition assignment was specified, but numPartitions was not set to -1."),
    (CreatableTopic(name="t", num_partitions=-1, replication_factor=-1, assignments=(
        CreatableReplicaAssignment(partition_index=1, broker_ids=(1,)),)), Errors.INVALID_REPLICA_ASSIGNMENT,
     "partitions should be a consecutive 0-based integer sequence"),
    (CreatableTopic(name="bad name"), Errors.INVALID_TOPIC_EXCEPTION,
     "Topic name is invalid: 'bad name' contains one or more characters other than ASCII alphanumerics, '.', '_' "
     "and '-'"),
    (manual("t", [1], configs=(CreatableTopicConfig(name="retention.ms", value=None),)), Errors.INVALID_CONFIG,
     "Null value not supported for topic configs: retention.ms"),
])
def test_create_topics_validation(topic: CreatableTopic, error: Errors, message: str) -> None:
    c = three_brokers()
    result = create(c, topic)
    assert error_of(result) == (error, message)
    assert records_of(result) == []


def test_create_topics_all_replicas_inactive() -> None:
    c = three_brokers()
    c.heartbeat(1, want_fence=True)
    assert error_of(create(c, manual("t", [1]))) == (
        Errors.INVALID_REPLICA_ASSIGNMENT,
        "All brokers specified in the manual partition assignment for partition 0 are fenced or in controlled "
        "shutdown.")


def test_create_topics_collision_duplicates_and_internal_topic() -> None:
    c = three_brokers()
    c.create_topic("a.b", [[1]])
    result = create(c, manual("a_b", [1]), manual("dup", [1]), manual("dup", [2]), manual("__cluster_metadata", [1]),
                    manual("ok", [2]))
    assert [(t.name, t.error_code, t.error_message) for t in result.response.topics] == [
        ("a_b", Errors.INVALID_TOPIC_EXCEPTION, "Topic 'a_b' collides with existing topic: a.b"),
        ("ok", 0, None),
        ("dup", Errors.INVALID_REQUEST, "Duplicate topic name."),
        ("__cluster_metadata", Errors.INVALID_REQUEST, "Creation of internal topic __cluster_metadata is prohibited."),
    ]
    assert [r.name for r in records_of(result) if isinstance(r, TopicRecord)] == ["ok"]


def test_create_topics_configs_go_between_topic_and_partition_records() -> None:
    c = three_brokers()
    result = create(c, manual("t", [1], [2], configs=(CreatableTopicConfig(name="retention.ms", value="1000"),
                                                      CreatableTopicConfig(name="cleanup.policy", value="compact"))))
    kinds = [type(r).__name__ for r in records_of(result)]
    assert kinds == ["TopicRecord", "ConfigRecord", "ConfigRecord", "PartitionRecord", "PartitionRecord"]
    configs = [r for r in records_of(result) if isinstance(r, ConfigRecord)]
    assert [(r.resource_type, r.resource_name, r.name, r.value) for r in configs] == [
        (2, "t", "cleanup.policy", "compact"), (2, "t", "retention.ms", "1000")]
    (topic,) = result.response.topics
    assert [(cfg.name, cfg.value, cfg.config_source) for cfg in topic.configs] == [
        ("cleanup.policy", "compact", 1), ("retention.ms", "1000", 1)]


def test_create_topics_validate_only_writes_nothing() -> None:
    c = three_brokers()
    result = create(c, manual("t", [1]), validate_only=True)
    assert records_of(result) == [] and error_of(result)[0] == Errors.NONE


def test_create_topics_response_json() -> None:
    c = three_brokers()
    result = create(c, manual("t", [1, 2]))
    (topic,) = result.response.topics
    assert result.response.to_json() == {"throttleTimeMs": 0, "topics": [{
        "name": "t", "topicId": str(topic.topic_id), "errorCode": 0, "errorMessage": None, "numPartitions": 1,
        "replicationFactor": 2, "configs": []}]}


# -- CreatePartitions --------------------------------------------------------------------------------------------


def grow(c: Cluster, name: str, count: int, assignments: list[list[int]] | None = None, **kwargs: object):
    return c.propose(CreatePartitionsRequest(topics=(CreatePartitionsTopic(
        name=name, count=count,
        assignments=None if assignments is None else tuple(CreatePartitionsAssignment(broker_ids=tuple(a))
                                                           for a in assignments)),), **kwargs))


def test_r7_2_create_partitions_manual_and_automatic_get_default_dirs() -> None:
    c = three_brokers()
    t = c.create_topic("t", [[1, 2]])
    result = grow(c, "t", 2, [[2, 3]])
    (partition,) = records_of(result)
    assert isinstance(partition, PartitionRecord)
    assert (partition.partition_id, partition.replicas, partition.directories) == (
        1, (2, 3), (UNASSIGNED, dir_id(3, "A")))
    c.commit(records_of(result))
    result = grow(c, "t", 3)
    (partition,) = records_of(result)
    assert isinstance(partition, PartitionRecord) and partition.partition_id == 2
    assert partition.directories == tuple(c.controller.context().default_dir(b) for b in partition.replicas)
    assert partition.topic_id == t


@pytest.mark.parametrize(("name", "count", "assignments", "error", "message"), [
    ("nope", 2, None, Errors.UNKNOWN_TOPIC_OR_PARTITION, None),
    ("t", 1, None, Errors.INVALID_PARTITIONS, "Topic already has 1 partition(s)."),
    ("t", 0, None, Errors.INVALID_PARTITIONS, "The topic t currently has 1 partition(s); 0 would not be an increase."),
    ("t", 3, [[1, 2]], Errors.INVALID_REPLICA_ASSIGNMENT,
     "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified."),
    ("t", 2, [[1]], Errors.INVALID_REPLICA_ASSIGNMENT,
     "The manual partition assignment includes a partition with 1 replica(s), but this is not consistent with "
     "previous partitions, which have 2 replica(s)."),
])
def test_create_partitions_validation(name: str, count: int, assignments: list[list[int]] | None, error: Errors,
                                      message: str | None) -> None:
    c = three_brokers()
    c.create_topic("t", [[1, 2]])
    result = grow(c, name, count, assignments)
    assert records_of(result) == []
    (res,) = result.response.results
    assert (res.error_code, res.error_message) == (error, message)


def test_create_partitions_validate_only_and_duplicates() -> None:
    c = three_brokers()
    c.create_topic("t", [[1, 2]])
    assert records_of(grow(c, "t", 2, validate_only=True)) == []
    result = c.propose(CreatePartitionsRequest(topics=(CreatePartitionsTopic(name="t", count=2),
                                                       CreatePartitionsTopic(name="t", count=3))))
    assert [(r.name, r.error_code, r.error_message) for r in result.response.results] == [
        ("t", Errors.INVALID_REQUEST, "Duplicate topic name.")]
    assert records_of(result) == []
