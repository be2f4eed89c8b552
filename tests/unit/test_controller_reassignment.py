"""R11 (reassignment start, completion, cancel) and R8 directory semantics through reassignments, plus AlterPartition
(ISR changes by the leader) and UnregisterBroker: ReplicationControlManager as shipped in 3.9."""

from __future__ import annotations

from controller_support import MV_3_9, Cluster, dir_id, pcr, records_of

from jbod_model.directory_id import UNASSIGNED
from jbod_model.errors_codes import Errors
from jbod_model.records.metadata import PartitionChangeRecord, PartitionRecord, TopicRecord, UnregisterBrokerRecord
from jbod_model.uuid import Uuid

D1, D2A, D2B, D3, D4 = dir_id(1), dir_id(2, "A"), dir_id(2, "B"), dir_id(3), dir_id(4)


def cluster() -> tuple[Cluster, Uuid]:
    """Brokers 1, 3, 4 with one dir each, broker 2 with two; topic t-0 on [1, 2, 3] with broker 2 in dir B."""
    c = Cluster.at(MV_3_9)
    c.register_with_dirs({1: [D1], 2: [D2A, D2B], 3: [D3], 4: [D4]})
    c.unfence(1, 2, 3, 4)
    t = c.create_topic("t", [[1, 2, 3]])
    c.assign(2, {(t, 0): D2B})
    return c, t


def partition_error(response) -> tuple[int, str | None]:
    (topic,) = response.responses
    (part,) = topic.partitions
    return part.error_code, part.error_message


# -- R11.1 start -------------------------------------------------------------------------------------------------


def test_r11_1_start_reassignment_existing_replicas_keep_their_dirs_new_ones_get_default_dir() -> None:
    c, t = cluster()
    entries, response = c.reassign("t", 0, [4, 2])
    assert partition_error(response) == (Errors.NONE, None)
    (record,) = records_of(entries)
    assert record == pcr(t, 0, replicas=(4, 2, 1, 3), removing_replicas=(1, 3), adding_replicas=(4,),
                         directories=(D4, D2B, D1, D3))
    part = c.partition(t, 0)
    assert part.directories == (D4, D2B, D1, D3) and part.leader == 1  # leader unchanged until completion


def test_r11_1_a_new_multi_dir_replica_is_unassigned() -> None:
    c = Cluster.at(MV_3_9)
    c.register_with_dirs({1: [D1], 2: [D2A, D2B], 3: [D3]})
    c.unfence(1, 2, 3)
    t = c.create_topic("t", [[1, 3]])
    entries, _ = c.reassign("t", 0, [1, 2])
    (record,) = records_of(entries)
    assert isinstance(record, PartitionChangeRecord) and record.directories == (D1, UNASSIGNED, D3)
    assert c.partition(t, 0).adding_replicas == (2,)


def test_r11_1_reordering_only_completes_at_once_and_permutes_dirs() -> None:
    c, t = cluster()
    entries, _ = c.reassign("t", 0, [3, 2, 1])
    assert records_of(entries) == [pcr(t, 0, replicas=(3, 2, 1), directories=(D3, D2B, D1))]
    part = c.partition(t, 0)
    assert part.replicas == (3, 2, 1) and not part.is_reassigning()


def test_r11_1_shrink_covered_by_the_isr_completes_in_the_same_record() -> None:
    c, t = cluster()
    entries, _ = c.reassign("t", 0, [2, 3])
    # Replicas [2,3,1] with removing [1] completes immediately (ISR ⊇ target): one record, leader moves off 1.
    assert records_of(entries) == [pcr(t, 0, isr=(2, 3), leader=2, replicas=(2, 3), directories=(D2B, D3))]
    part = c.partition(t, 0)
    assert (part.replicas, part.directories, part.leader) == ((2, 3), (D2B, D3), 2)


# -- R11.2 completion via AlterPartition --------------------------------------------------------------------------


def test_r11_2_completion_by_alter_partition_that_moves_leadership_answers_new_leader_elected() -> None:
    c, t = cluster()
    c.reassign("t", 0, [4, 2])  # replicas [4,2,1,3], removing [1,3], adding [4]
    before = c.partition(t, 0)
    entries, response = c.alter_partition(1, t, 0, [1, 2, 3, 4])
    (record,) = records_of(entries)
    assert record == pcr(t, 0, isr=(2, 4), leader=4, replicas=(4, 2), removing_replicas=(), adding_replicas=(),
                         directories=(D4, D2B))
    (part_result,) = response.topics[0].partitions
    assert part_result.error_code == Errors.NEW_LEADER_ELECTED
    after = c.partition(t, 0)
    assert (after.replicas, after.directories, after.leader) == ((4, 2), (D4, D2B), 4)
    assert after.leader_epoch == before.leader_epoch + 1


def test_r11_2_before_v2_the_same_case_answers_fenced_leader_epoch() -> None:
    c, t = cluster()
    c.reassign("t", 0, [4, 2])
    _, response = c.alter_partition(1, t, 0, [1, 2, 3, 4], version=1, topic_name="t")
    assert response.topics[0].partitions[0].error_code == Errors.FENCED_LEADER_EPOCH


def test_r11_2_completion_that_keeps_the_leader_answers_none_with_the_new_state() -> None:
    c, t = cluster()
    c.reassign("t", 0, [1, 4])  # replicas [1,4,2,3], removing [2,3], adding [4]
    entries, response = c.alter_partition(1, t, 0, [1, 2, 3, 4])
    (record,) = records_of(entries)
    assert record == pcr(t, 0, isr=(1, 4), leader=1, replicas=(1, 4), removing_replicas=(), adding_replicas=(),
                         directories=(D1, D4))
    part = c.partition(t, 0)
    (res,) = response.topics[0].partitions
    assert (res.error_code, res.leader_id, res.isr, res.leader_epoch, res.partition_epoch) == (
        0, 1, (1, 4), part.leader_epoch, part.partition_epoch)


# -- R11.3 cancel ------------------------------------------------------------------------------------------------


def test_r11_3_cancel_reverts_in_current_order_and_directories_follow() -> None:
    c, t = cluster()
    c.reassign("t", 0, [4, 2])  # replicas [4,2,1,3]
    entries, response = c.reassign("t", 0, None)
    assert partition_error(response) == (Errors.NONE, None)
    (record,) = records_of(entries)
    # Current order minus adding: [2, 1, 3] — not the original [1, 2, 3] (R11.3).
    assert record == pcr(t, 0, leader=1, replicas=(2, 1, 3), removing_replicas=(), adding_replicas=(),
                         directories=(D2B, D1, D3))
    assert c.partition(t, 0).replicas == (2, 1, 3)


def test_r11_3_cancel_without_reassignment_is_no_reassignment_in_progress() -> None:
    c, _ = cluster()
    entries, response = c.reassign("t", 0, None)
    assert entries == []
    assert partition_error(response) == (Errors.NO_REASSIGNMENT_IN_PROGRESS,
                                         "No partition reassignment is in progress.")


def test_r11_3_unclean_revert_needs_unclean_leader_election() -> None:
    c, _ = cluster()
    u = Uuid.from_string("UNCLEANREVERTTOPICAAAA")
    # A reassignment 1 → 3 whose ISR holds only the adding replica: reverting it is an unclean election.
    c.commit([TopicRecord(name="u", topic_id=u),
              PartitionRecord(version=1, topic_id=u, partition_id=0, replicas=(3, 1), isr=(3,), leader=3,
                              adding_replicas=(3,), removing_replicas=(1,), leader_epoch=4, partition_epoch=9,
                              directories=(D3, D1))])
    entries, response = c.reassign("u", 0, None)
    assert entries == []
    assert partition_error(response) == (
        Errors.INVALID_REPLICA_ASSIGNMENT,
        "Unable to revert partition assignment for u:0 because it would require an unclean leader election.")
    c.set_topic_config("u", "unclean.leader.election.enable", "true")
    entries, response = c.reassign("u", 0, None)
    assert partition_error(response) == (Errors.NONE, None)
    assert records_of(entries) == [pcr(u, 0, isr=(1,), leader=1, replicas=(1,), removing_replicas=(),
                                       adding_replicas=(), directories=(D1,))]
    assert c.partition(u, 0).replicas == (1,)


def test_r11_4_validation_ignores_directories_and_reports_like_kafka() -> None:
    c, _ = cluster()
    assert partition_error(c.reassign("t", 0, [1, 9])[1]) == (
        Errors.INVALID_REPLICA_ASSIGNMENT,
        "The manual partition assignment includes broker 9, but no such broker is registered.")
    assert partition_error(c.reassign("t", 0, [])[1]) == (
        Errors.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list.")
    assert partition_error(c.reassign("t", 7, [1])[1]) == (
        Errors.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find partition t:7.")
    assert partition_error(c.reassign("x", 0, [1])[1]) == (
        Errors.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find a topic named x.")
    # A replica whose directory is offline is still a valid target (directories are not looked at).
    c.heartbeat(2, offline=[D2B])
    assert partition_error(c.reassign("t", 0, [2, 1, 3])[1]) == (Errors.NONE, None)


# -- AlterPartition ----------------------------------------------------------------------------------------------


def test_alter_partition_shrink_and_expand() -> None:
    c, t = cluster()
    before = c.partition(t, 0)
    entries, _ = c.alter_partition(1, t, 0, [1, 3])
    assert records_of(entries) == [pcr(t, 0, isr=(1, 3))]
    assert c.partition(t, 0).leader_epoch == before.leader_epoch  # no bump on shrink at MV ≥ 3.6 (R9.4)
    entries, _ = c.alter_partition(1, t, 0, [1, 2, 3])
    assert records_of(entries) == [pcr(t, 0, isr=(1, 2, 3))]


def test_alter_partition_errors() -> None:
    c, t = cluster()
    part = c.partition(t, 0)

    def code(**kwargs: object) -> int:
        leader = kwargs.pop("leader", 1)
        isr = kwargs.pop("isr", [1, 2])
        _, response = c.alter_partition(leader, t, 0, isr, **kwargs)
        return response.topics[0].partitions[0].error_code

    assert code(leader_epoch=part.leader_epoch - 1) == Errors.FENCED_LEADER_EPOCH
    assert code(leader_epoch=part.leader_epoch + 1) == Errors.NOT_CONTROLLER
    assert code(partition_epoch=part.partition_epoch - 1) == Errors.INVALID_UPDATE_VERSION
    assert code(leader=2) == Errors.INVALID_REQUEST  # not the leader
    assert code(isr=[1, 4]) == Errors.INVALID_REQUEST  # 4 is not a replica
    assert code(isr=[2, 3]) == Errors.INVALID_REQUEST  # must include the leader
    assert code(isr=[1, 2], isr_epochs={2: 999}) == Errors.INELIGIBLE_REPLICA
    c.heartbeat(3, want_fence=True)
    assert code(isr=[1, 3]) == Errors.INELIGIBLE_REPLICA
    assert code(isr=[1, 3], version=1, topic_name="t") == Errors.OPERATION_NOT_ATTEMPTED


def test_alter_partition_stale_epoch_and_unknown_topic() -> None:
    c, t = cluster()
    request = c.alter_partition_request(1, t, 0, [1, 2])
    stale = type(request)(broker_id=1, broker_epoch=12345, topics=request.topics)
    result = c.propose(stale)
    assert result.response.to_json() == {"throttleTimeMs": 0, "errorCode": 77, "topics": []}
    unknown = type(request)(broker_id=1, broker_epoch=c.epoch(1), topics=(
        type(request.topics[0])(topic_id=Uuid.from_string("nLU9hKNXSZuMe5PO2A4dVQ"),
                                partitions=request.topics[0].partitions),))
    result = c.propose(unknown)
    assert result.response.topics[0].partitions[0].error_code == Errors.UNKNOWN_TOPIC_ID


def test_r2_5_isr_membership_ignores_directories() -> None:
    c, t = cluster()
    c.heartbeat(2, offline=[D2B])  # broker 2 leaves the ISR of t-0
    assert 2 not in c.partition(t, 0).isr
    _, response = c.alter_partition(1, t, 0, [1, 2, 3])
    assert response.topics[0].partitions[0].error_code == Errors.NONE
    assert c.partition(t, 0).isr == (1, 2, 3)


# -- UnregisterBroker --------------------------------------------------------------------------------------------


def test_unregister_broker_moves_leadership_and_frees_its_directories() -> None:
    c, t = cluster()
    from jbod_model.controller.messages import UnregisterBrokerRequest

    epoch = c.epoch(1)
    entries, response = c.controller.handle(UnregisterBrokerRequest(broker_id=1))
    records = records_of(entries)
    assert records == [pcr(t, 0, isr=(2, 3), leader=2), UnregisterBrokerRecord(broker_id=1, broker_epoch=epoch)]
    assert response.to_json() == {"throttleTimeMs": 0, "errorCode": 0, "errorMessage": None}
    assert 1 not in c.image.cluster.brokers
    assert 1 not in c.controller.state.register_broker_record_offsets
    # Its directory may now be registered by another broker.
    assert c.register(5, [D1]).error_code == Errors.NONE


def test_unregister_unknown_broker_is_broker_id_not_registered() -> None:
    c, _ = cluster()
    from jbod_model.controller.messages import UnregisterBrokerRequest

    result = c.propose(UnregisterBrokerRequest(broker_id=9))
    assert records_of(result) == []
    assert result.response.to_json() == {"throttleTimeMs": 0, "errorCode": 102, "errorMessage": None}
