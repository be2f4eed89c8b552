"""R5 (heartbeats and offline directories), R10 (fence / unfence / controlled shutdown), R9.5/R9.6 and quirks
§6.3/§6.4: ReplicationControlManager.processBrokerHeartbeat + handleDirectoriesOffline as shipped in 3.9."""

from __future__ import annotations

from controller_support import (
    CLUSTER_ID,
    MV_3_6,
    MV_3_9,
    MV_4_0,
    Cluster,
    brcrs,
    dir_id,
    pcr,
    pcrs,
    records_of,
    sort_pcrs,
)

from jbod_model.controller import ControllerConfig
from jbod_model.errors_codes import Errors
from jbod_model.records.metadata import (
    BrokerRegistrationChangeRecord,
    BrokerRegistrationFencingChange,
    PartitionChangeRecord,
)
from jbod_model.replicas import OfflineReason, offline_replicas
from jbod_model.uuid import Uuid

B1A, B1B, B2A, B2B, B3A = dir_id(1, "A"), dir_id(1, "B"), dir_id(2, "A"), dir_id(2, "B"), dir_id(3, "A")


def two_dir_cluster() -> tuple[Cluster, Uuid, Uuid]:
    """Kafka's testHandleDirectoriesOffline layout: brokers 1 and 2 with two dirs each, topics a and b with two
    partitions on [1, 2], partition 0 of each in dir A and partition 1 in dir B."""
    c = Cluster.at(MV_3_9)
    c.register_with_dirs({1: [B1A, B1B], 2: [B2A, B2B]})
    c.unfence(1, 2)
    a = c.create_topic("a", [[1, 2], [1, 2]])
    b = c.create_topic("b", [[1, 2], [1, 2]])
    c.assign(1, {(a, 0): B1A, (a, 1): B1B, (b, 0): B1A, (b, 1): B1B})
    c.assign(2, {(a, 0): B2A, (a, 1): B2B, (b, 0): B2A, (b, 1): B2B})
    return c, a, b


# -- R5.1 --------------------------------------------------------------------------------------------------------


def test_r5_1_heartbeat_before_registration_is_stale_broker_epoch() -> None:
    c = Cluster.at(MV_3_9)
    c.register_with_dirs({1: [B1A]})
    request = c.heartbeat_request(1)
    request = type(request)(broker_id=7, broker_epoch=1, current_metadata_offset=10)
    result = c.propose(request)
    assert result.response.error_code == Errors.STALE_BROKER_EPOCH
    assert result.error is not None and result.error.message == "Receive a heartbeat from broker 7 before registration"
    assert records_of(result) == []
    assert result.response.to_json() == {"throttleTimeMs": 0, "errorCode": 77, "isCaughtUp": False,
                                         "isFenced": True, "shouldShutDown": False}


def test_r5_1_wrong_epoch_is_stale_broker_epoch() -> None:
    c = Cluster.at(MV_3_9)
    c.register_with_dirs({1: [B1A]})
    result = c.propose(c.heartbeat_request(1, epoch=c.epoch(1) + 1))
    assert result.response.error_code == Errors.STALE_BROKER_EPOCH
    assert result.error is not None
    assert result.error.message == f"Expected broker epoch {c.epoch(1)}, but got broker epoch {c.epoch(1) + 1}"


# -- R10 ---------------------------------------------------------------------------------------------------------


def test_r10_1_unfence_once_caught_up_with_the_registration_record() -> None:
    c = Cluster.at(MV_3_9)
    c.register_with_dirs({1: [B1A]})
    rbr_offset = c.controller.state.register_broker_record_offsets[1]
    entries, response = c.heartbeat(1, offset=rbr_offset - 1)
    assert entries == [] and response.is_fenced and not response.is_caught_up
    entries, response = c.heartbeat(1, offset=rbr_offset)
    assert not response.is_fenced and response.is_caught_up and not response.should_shut_down
    assert records_of(entries) == [BrokerRegistrationChangeRecord(
        version=0, broker_id=1, broker_epoch=c.epoch(1), fenced=BrokerRegistrationFencingChange.UNFENCE)]
    assert not c.image.cluster.brokers[1].fenced


def test_r10_1_want_fence_keeps_a_fenced_broker_fenced() -> None:
    c = Cluster.at(MV_3_9)
    c.register_with_dirs({1: [B1A]})
    entries, response = c.heartbeat(1, want_fence=True)
    assert entries == [] and response.is_fenced and response.is_caught_up


def test_r10_1_fenced_broker_wanting_shutdown_shuts_down_now() -> None:
    c = Cluster.at(MV_3_9)
    c.register_with_dirs({1: [B1A]})
    entries, response = c.heartbeat(1, want_shut_down=True)
    assert response.is_fenced and response.should_shut_down
    # FENCED → SHUTDOWN_NOW is a state change, so handleBrokerFenced runs: a (no-op) fencing BRCR is written.
    assert records_of(entries) == [BrokerRegistrationChangeRecord(
        version=0, broker_id=1, broker_epoch=c.epoch(1), fenced=BrokerRegistrationFencingChange.FENCE)]
    assert c.image.cluster.brokers[1].fenced


def test_r10_1_unfenced_broker_wanting_fence_is_fenced_and_loses_leadership() -> None:
    c = Cluster.at(MV_3_9)
    c.register_with_dirs({1: [B1A], 2: [B2A]})
    c.unfence(1, 2)
    t = c.create_topic("t", [[1, 2], [2, 1]])
    entries, response = c.heartbeat(1, want_fence=True)
    assert response.is_fenced and not response.should_shut_down
    records = records_of(entries)
    assert sort_pcrs(pcrs(records)) == sort_pcrs([
        pcr(t, 0, isr=(2,), leader=2),
        pcr(t, 1, isr=(2,)),
    ])
    assert isinstance(records[-1], BrokerRegistrationChangeRecord)
    assert records[-1].fenced == BrokerRegistrationFencingChange.FENCE and records[-1].version == 0
    assert c.image.cluster.brokers[1].fenced
    assert c.partition(t, 0).leader == 2


def test_r10_1_controlled_shutdown_moves_leadership_then_shuts_down() -> None:
    c = Cluster.at(MV_3_9)
    c.register_with_dirs({1: [B1A], 2: [B2A]})
    c.unfence(1, 2)
    t = c.create_topic("t", [[1, 2]])
    entries, response = c.heartbeat(1, want_shut_down=True)
    assert not response.is_fenced and not response.should_shut_down
    records = records_of(entries)
    assert isinstance(records[0], BrokerRegistrationChangeRecord) and records[0].version == 1
    assert records[0].in_controlled_shutdown == 1
    assert pcrs(records) == [pcr(t, 0, isr=(2,), leader=2)]
    assert c.image.cluster.brokers[1].in_controlled_shutdown
    hb = c.controller.state.heartbeats[1]
    assert hb.controlled_shutdown_offset == entries[-1].offset
    # Broker 2 must catch up past the shutdown offset before broker 1 may go (lowest active offset).
    c.heartbeat(2, offset=entries[-1].offset - 1)
    entries, response = c.heartbeat(1, want_shut_down=True)
    assert not response.should_shut_down and entries == []
    c.heartbeat(2)
    entries, response = c.heartbeat(1, want_shut_down=True)
    assert response.should_shut_down and response.is_fenced
    assert [type(r).__name__ for r in records_of(entries)] == ["BrokerRegistrationChangeRecord"]
    assert c.image.cluster.brokers[1].fenced


def test_r10_1_unfenced_broker_without_leadership_shuts_down_at_once() -> None:
    c = Cluster.at(MV_3_9)
    c.register_with_dirs({1: [B1A], 2: [B2A]})
    c.unfence(1, 2)
    t = c.create_topic("t", [[2, 1]])
    entries, response = c.heartbeat(1, want_shut_down=True)
    assert response.should_shut_down and response.is_fenced
    assert pcrs(records_of(entries)) == [pcr(t, 0, isr=(2,))]
    assert c.image.cluster.brokers[1].fenced


def test_r10_2_unfencing_does_not_wait_for_directory_assignments() -> None:
    """KIP text: brokers stay fenced until every replica's directory is known. Kafka: no such condition (§4.7)."""
    c = Cluster.at(MV_3_9)
    c.register_with_dirs({1: [B1A, B1B], 2: [B2A]})
    c.unfence(1, 2)
    t = c.create_topic("t", [[1, 2]])
    assert c.partition(t, 0).directory(1) != B1A  # UNASSIGNED: not reported yet
    c.heartbeat(1, want_fence=True)
    _, response = c.heartbeat(1)
    assert not response.is_fenced


# -- R5.2 – R5.8 -------------------------------------------------------------------------------------------------


def test_r5_3_offline_directory_moves_leadership_and_isr_then_one_brcr_v2() -> None:
    """Mirrors Kafka's testHandleDirectoriesOffline, through a heartbeat."""
    c, a, b = two_dir_cluster()
    result = c.propose(c.heartbeat_request(1, offline=[B1A, B2A]))  # B2A is not broker 1's: ignored
    records = records_of(result)
    assert sort_pcrs(pcrs(records)) == sort_pcrs([pcr(a, 0, leader=2, isr=(2,)), pcr(b, 0, leader=2, isr=(2,))])
    assert brcrs(records) == [BrokerRegistrationChangeRecord(version=2, broker_id=1, broker_epoch=c.epoch(1),
                                                             log_dirs=(B1B,))]
    assert isinstance(records[-1], BrokerRegistrationChangeRecord)  # R5.2: the BRCR comes last
    assert len(records) == 3
    c.controller.handle(c.heartbeat_request(1, offline=[B1A, B2A]))
    assert c.image.cluster.brokers[1].directories == (B1B,)
    assert {(r.topic_id, r.partition_id, r.broker_id) for r in offline_replicas(c.image)} == {(a, 0, 1), (b, 0, 1)}
    assert c.partition(a, 1).leader == 1 and c.partition(a, 1).isr == (1, 2)  # dir B untouched


def test_r5_3_pcrs_are_grouped_by_directory_in_sorted_order() -> None:
    c, a, b = two_dir_cluster()
    records = records_of(c.propose(c.heartbeat_request(1, offline=[B1B, B1A])))
    # Directories are visited in the registration's (sorted) order; within one, partitions by "<id>-<p>".
    first, second = sorted([B1A, B1B])
    by_dir = {B1A: [(a, 0), (b, 0)], B1B: [(a, 1), (b, 1)]}
    expected = [tp for d in (first, second) for tp in sorted(by_dir[d], key=lambda tp: f"{tp[0]}-{tp[1]}")]
    assert [(r.topic_id, r.partition_id) for r in pcrs(records)] == expected


def test_r5_3_unknown_foreign_and_reserved_ids_are_ignored() -> None:
    c, _, _ = two_dir_cluster()
    for offline in ([B2A], [Uuid.from_string("zvAf9BKZRyyrEWz4FX2nLA")], [Uuid(0, 2), Uuid(0, 0)]):
        assert records_of(c.propose(c.heartbeat_request(1, offline=offline))) == []


def test_r5_4_cumulative_reports_are_idempotent() -> None:
    c, a, _ = two_dir_cluster()
    first, _ = c.heartbeat(1, offline=[B1A])
    assert records_of(first)
    again, response = c.heartbeat(1, offline=[B1A])
    assert again == [] and not response.is_fenced
    # A further failure is reported cumulatively: only the new directory produces records.
    more, _ = c.heartbeat(1, offline=[B1A, B1B])
    assert brcrs(records_of(more))[0].log_dirs == ()  # nothing left online: see R5.5
    assert {(r.topic_id, r.partition_id) for r in pcrs(records_of(more))} == {(a, 1), (c.image.topics.by_name["b"], 1)}


def test_r5_5_quirk_6_3_all_dirs_offline_writes_an_empty_list_that_means_no_change() -> None:
    c, a, _ = two_dir_cluster()
    entries, _ = c.heartbeat(1, offline=[B1A, B1B])
    (brcr,) = brcrs(records_of(entries))
    assert brcr.log_dirs == ()
    # Replay: an empty LogDirs is "no change", so the registration keeps both directories...
    assert c.image.cluster.brokers[1].directories == tuple(sorted([B1A, B1B]))
    # ...and the next (cumulative) heartbeat generates the BRCR again (the PCRs are no-ops by now).
    again, _ = c.heartbeat(1, offline=[B1A, B1B])
    assert brcrs(records_of(again)) == [brcr]
    assert c.partition(a, 0).leader == 2 and c.partition(a, 1).leader == 2


def test_r5_6_r5_7_directory_failure_never_fences_the_broker() -> None:
    """§4.7: no fencing for directory failures."""
    c, _, _ = two_dir_cluster()
    entries, response = c.heartbeat(1, offline=[B1A])
    assert not response.is_fenced and not response.should_shut_down
    assert not any(r.fenced for r in brcrs(records_of(entries)))
    assert not c.image.cluster.brokers[1].fenced


def test_r5_7_offline_directories_are_processed_for_a_fenced_broker_too() -> None:
    c, _, _ = two_dir_cluster()
    c.heartbeat(1, want_fence=True)
    entries, response = c.heartbeat(1, want_fence=True, offline=[B1A])
    assert response.is_fenced
    assert brcrs(records_of(entries)) == [BrokerRegistrationChangeRecord(version=2, broker_id=1,
                                                                         broker_epoch=c.epoch(1), log_dirs=(B1B,))]


def test_r5_8_is_caught_up_compares_with_the_registration_offset() -> None:
    c = Cluster.at(MV_3_9)
    c.register_with_dirs({1: [B1A]})
    offset = c.controller.state.register_broker_record_offsets[1]
    assert not c.heartbeat(1, offset=offset - 1, want_fence=True)[1].is_caught_up
    assert c.heartbeat(1, offset=offset, want_fence=True)[1].is_caught_up


def test_r9_5_other_brokers_partitions_are_untouched() -> None:
    c, a, b = two_dir_cluster()
    entries, _ = c.heartbeat(2, offline=[B2A])
    for record in pcrs(records_of(entries)):
        assert record.isr is not None and 2 not in record.isr
    # Broker 1 keeps leading everything it led; broker 2 left the ISR of the dir-A partitions only.
    assert [c.partition(t, p).leader for t in (a, b) for p in (0, 1)] == [1, 1, 1, 1]
    assert c.partition(a, 0).isr == (1,) and c.partition(a, 1).isr == (1, 2)


def test_r9_6_unfencing_does_not_elect_a_replica_whose_directory_is_offline() -> None:
    c = Cluster.at(MV_3_9)
    c.register_with_dirs({1: [B1A], 2: [B2A, B2B]})
    c.unfence(1, 2)
    t = c.create_topic("t", [[2], [2]])
    c.assign(2, {(t, 0): B2A, (t, 1): B2B})
    c.heartbeat(2, want_fence=True)
    assert c.partition(t, 0).leader == -1 and c.partition(t, 1).leader == -1
    c.heartbeat(2, want_fence=True, offline=[B2A])
    entries, response = c.heartbeat(2, offline=[B2A])
    assert not response.is_fenced
    # Only t-1 (dir B, online) gets its leader back.
    assert pcrs(records_of(entries)) == [pcr(t, 1, leader=2)]
    assert c.partition(t, 0).leader == -1 and c.partition(t, 1).leader == 2


def test_r12_offline_dirs_are_ignored_below_3_7_iv2() -> None:
    c = Cluster.at(MV_3_6)
    c.register(1, [B1A])
    c.register(2, [B2A])
    c.unfence(1, 2)
    c.create_topic("t", [[1, 2]])
    entries, _ = c.heartbeat(1, offline=[B1A])
    assert entries == []


def test_quirk_6_4_fencing_and_offline_dirs_in_one_heartbeat_both_use_the_pre_heartbeat_state() -> None:
    c, a, b = two_dir_cluster()
    before = c.partition(a, 0)
    entries, response = c.heartbeat(1, want_fence=True, offline=[B1A])
    assert response.is_fenced
    records = records_of(entries)
    fence_part, dir_part = records[:records.index(brcrs(records)[0]) + 1], records[len(records) - 3:]
    # (a) handleBrokerFenced: every ISR partition, then the fence BRCR; (b) the dir-A partitions again, then
    # the LogDirs BRCR — each PCR of (b) repeats one of (a) because both see the pre-heartbeat state.
    assert sort_pcrs(pcrs(fence_part)) == sort_pcrs([pcr(t, p, leader=2, isr=(2,)) for t in (a, b) for p in (0, 1)])
    assert sort_pcrs(pcrs(dir_part)) == sort_pcrs([pcr(a, 0, leader=2, isr=(2,)), pcr(b, 0, leader=2, isr=(2,))])
    assert [r.fenced for r in brcrs(records)] == [BrokerRegistrationFencingChange.FENCE, 0]
    after = c.partition(a, 0)
    # Double leader epoch bump: Leader=2 is set twice (R1.4 step 5).
    assert after.leader == 2 and after.leader_epoch == before.leader_epoch + 2
    assert after.partition_epoch == before.partition_epoch + 2
    assert c.partition(a, 1).leader_epoch == before.leader_epoch + 1


def test_r5_2_controlled_shutdown_and_offline_dirs_records_order() -> None:
    c, _, _ = two_dir_cluster()
    entries, _ = c.heartbeat(1, want_shut_down=True, offline=[B1B])
    records = records_of(entries)
    kinds = [type(r).__name__ for r in records]
    # (a) BRCR controlled shutdown, 4 PCRs; (b) 2 PCRs for dir B, BRCR LogDirs.
    assert kinds == ["BrokerRegistrationChangeRecord", *["PartitionChangeRecord"] * 6, "BrokerRegistrationChangeRecord"]
    assert isinstance(records[0], BrokerRegistrationChangeRecord) and records[0].in_controlled_shutdown == 1
    assert isinstance(records[-1], BrokerRegistrationChangeRecord) and records[-1].log_dirs == (B1A,)
    assert all(isinstance(r, PartitionChangeRecord) and r.directories is None for r in records[1:-1])
    assert {r.broker_id for r in offline_replicas(c.image)} == {1}
    assert {r.offline_reason for r in offline_replicas(c.image)} == {OfflineReason.DIRECTORY_OFFLINE}


def test_r9_5_with_elr_a_replica_removed_for_a_dir_failure_enters_the_elr_but_cannot_lead() -> None:
    c = Cluster.at(MV_4_0, config=ControllerConfig(cluster_id=CLUSTER_ID, eligible_leader_replicas_enabled=True))
    c.register_with_dirs({1: [B1A], 2: [B2A, B2B]})
    c.unfence(1, 2)
    t = c.create_topic("t", [[1, 2]], configs={"min.insync.replicas": "2"})
    c.assign(2, {(t, 0): B2A})
    entries, _ = c.heartbeat(2, offline=[B2A])
    assert pcrs(records_of(entries)) == [pcr(t, 0, version=2, isr=(1,), eligible_leader_replicas=(2,))]
    # Broker 1 goes away: the ISR may now be empty (ELR mode), but broker 2 cannot lead from its offline dir.
    entries, _ = c.heartbeat(1, want_fence=True)
    assert pcrs(records_of(entries)) == [pcr(t, 0, version=2, isr=(), leader=-1, eligible_leader_replicas=(1, 2),
                                             last_known_elr=(1,))]
    part = c.partition(t, 0)
    assert (part.leader, part.isr, part.elr, part.last_known_elr) == (-1, (), (1, 2), (1,))
    # When broker 1 is back it is elected from the ELR and becomes the whole ISR.
    entries, _ = c.heartbeat(1)
    assert c.partition(t, 0).leader == 1 and c.partition(t, 0).isr == (1,)
