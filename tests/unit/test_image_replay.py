"""Replay of metadata records into the image, rule by rule (kafka-jbod-semantics.md R1, R2, R4, R13, R14).

Each test names the rule it pins down. Every ReplayFault test checks that the message names the offset and the
record, because a replay fault is reported to a person who has to find the record in a multi-gigabyte log.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from types import MappingProxyType

import pytest

from jbod_model.directory_id import LOST, MIGRATING, UNASSIGNED, DirectoryState, is_online
from jbod_model.errors import ReplayFault
from jbod_model.gaps import GapConsequences
from jbod_model.image import (
    EMPTY_IMAGE,
    BrokerRegistration,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
    TopicsImage,
)
from jbod_model.metadata_version import FEATURE_NAME
from jbod_model.records.entry import LogEntry
from jbod_model.records.json_codec import record_from_json
from jbod_model.records.metadata import (
    NO_LEADER,
    AbortTransactionRecord,
    BeginTransactionRecord,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    EndTransactionRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)
from jbod_model.replay import MetadataDelta, Replayer, TransactionBuffer, replay_records
from jbod_model.replicas import OfflineReason, offline_replicas, partition_replicas, replica_view
from jbod_model.uuid import Uuid

T1 = Uuid.from_string("TESTTOPIC1AAAAAAAAAAAA")
T2 = Uuid.from_string("TESTTOPIC2AAAAAAAAAAAA")
D1 = Uuid.from_string("TESTBROKER00001DIRAAAA")  # the Kafka test harness's dir of broker 1
D2 = Uuid.from_string("TESTBROKER00002DIRAAAA")
D3 = Uuid.from_string("TESTBROKER00003DIRAAAA")
D1B = Uuid.from_string("TESTBROKER00001DIRBAAA")
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4


def fl(level: int = 21) -> FeatureLevelRecord:
    return FeatureLevelRecord(name=FEATURE_NAME, feature_level=level)


def epoch_of(broker_id: int) -> int:
    """Kafka's test harness convention: ``defaultBrokerEpoch(id) = id + 100``."""
    return broker_id + 100


def rbr(broker_id: int, *dirs: Uuid, version: int = 3, fenced: bool = False, epoch: int | None = None,
        incarnation: Uuid | None = None) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(version=version, broker_id=broker_id, broker_epoch=epoch or epoch_of(broker_id),
                                incarnation_id=incarnation or Uuid(7, broker_id), fenced=fenced,
                                log_dirs=dirs if version >= 3 else ())


def topic(name: str = "foo", tid: Uuid = T1) -> TopicRecord:
    return TopicRecord(name=name, topic_id=tid)


def part(replicas: Sequence[int], dirs: Sequence[Uuid] = (), *, version: int = 1, tid: Uuid = T1, pid: int = 0,
         isr: Sequence[int] | None = None, leader: int | None = None) -> PartitionRecord:
    isr = tuple(replicas) if isr is None else tuple(isr)
    return PartitionRecord(version=version, topic_id=tid, partition_id=pid, replicas=tuple(replicas), isr=isr,
                           leader=isr[0] if leader is None and isr else NO_LEADER if leader is None else leader,
                           leader_epoch=0, partition_epoch=0, directories=tuple(dirs) if version >= 1 else ())


def pcr(*, tid: Uuid = T1, pid: int = 0, version: int = 1, **fields: object) -> PartitionChangeRecord:
    return PartitionChangeRecord(version=version, topic_id=tid, partition_id=pid, **fields)  # type: ignore[arg-type]


def cluster(*extra: Record, level: int = 21) -> list[Record]:
    """Brokers 1-3 (one directory each, unfenced) and topic foo."""
    return [fl(level), rbr(1, D1), rbr(2, D2), rbr(3, D3), topic(), *extra]


def the_partition(image: MetadataImage, tid: Uuid = T1, pid: int = 0) -> PartitionRegistration:
    found = image.topics.get_partition(tid, pid)
    assert found is not None
    return found


def replay_fault(records: Sequence[Record]) -> ReplayFault:
    with pytest.raises(ReplayFault) as info:
        replay_records(records)
    return info.value


def assert_names(fault: ReplayFault, offset: int, record: Record) -> None:
    """The fault says where (offset) and what (the record, by type and content)."""
    assert fault.offset == offset
    text = str(fault)
    assert f"offset {offset}" in text
    assert type(record).__name__ in text
    assert repr(record) in text


# -------------------------------------------------------------------------------------------------------------
# R1.3 PartitionRecord → PartitionRegistration


class TestPartitionRecordDirectories:
    def test_v0_record_yields_all_migrating(self) -> None:
        p = the_partition(replay_records(cluster(part([1, 2, 3], version=0), level=11)))
        assert p.directories == (MIGRATING,) * 3

    def test_empty_directories_yield_migrating(self) -> None:
        p = the_partition(replay_records(cluster(part([1, 2], []))))
        assert p.directories == (MIGRATING, MIGRATING)

    def test_all_migrating_kept_as_migrating_of_replica_length(self) -> None:
        p = the_partition(replay_records(cluster(part([3, 1, 2], [MIGRATING] * 3))))
        assert p.directories == (MIGRATING,) * 3
        assert len(p.directories) == len(p.replicas)

    def test_mixed_directories_are_kept_positionally(self) -> None:
        p = the_partition(replay_records(cluster(part([2, 1, 3], [D2, UNASSIGNED, MIGRATING]))))
        assert p.directories == (D2, UNASSIGNED, MIGRATING)
        assert p.directory(1) == UNASSIGNED
        assert p.directory(2) == D2

    def test_length_mismatch_is_a_fault_naming_offset_and_record(self) -> None:
        bad = part([1, 2, 3], [D1, D2])
        records = cluster(bad)
        assert_names(replay_fault(records), len(records) - 1, bad)

    def test_all_migrating_of_the_wrong_length_is_still_a_fault(self) -> None:
        # checkDirectories runs before defaultToMigrating: a non-empty array must match, whatever it holds.
        bad = part([1, 2, 3], [MIGRATING, MIGRATING])
        records = cluster(bad)
        assert_names(replay_fault(records), len(records) - 1, bad)

    def test_partition_of_unknown_topic_is_a_fault(self) -> None:
        bad = part([1], [D1], tid=T2)
        records = cluster(bad)
        fault = replay_fault(records)
        assert_names(fault, len(records) - 1, bad)
        assert str(T2) in str(fault)


# -------------------------------------------------------------------------------------------------------------
# R1.4 PartitionRegistration.merge (3.7.1+, KAFKA-16583)


class TestPartitionChangeMerge:
    def test_null_directories_keep_the_array(self) -> None:
        image = replay_records(cluster(part([1, 2, 3], [D1, D2, D3]), pcr(isr=(1, 2))))
        p = the_partition(image)
        assert p.directories == (D1, D2, D3)
        assert p.isr == (1, 2)

    def test_all_migrating_is_resized_on_replica_change(self) -> None:
        image = replay_records(cluster(part([1, 2], version=0), pcr(version=0, replicas=(1, 2, 3)), level=11))
        assert the_partition(image).directories == (MIGRATING,) * 3
        shrunk = replay_records([pcr(version=0, replicas=(2,), isr=(2,), leader=2)], image)
        assert the_partition(shrunk).directories == (MIGRATING,)

    def test_empty_directories_reset_to_migrating(self) -> None:
        image = replay_records(cluster(part([1, 2], [D1, D2]), pcr(directories=())))
        assert the_partition(image).directories == (MIGRATING, MIGRATING)

    def test_replica_length_change_without_directories_on_known_dirs_is_a_fault(self) -> None:
        bad = pcr(replicas=(1, 2, 3))
        records = cluster(part([1, 2], [D1, D2]), bad)
        fault = replay_fault(records)
        assert_names(fault, len(records) - 1, bad)
        assert "do not match" in str(fault)

    def test_replicas_and_directories_of_different_lengths_are_a_fault(self) -> None:
        bad = pcr(replicas=(1, 2, 3), directories=(D1, D2))
        records = cluster(part([1, 2], [D1, D2]), bad)
        assert_names(replay_fault(records), len(records) - 1, bad)

    def test_directories_alone_of_the_wrong_length_are_a_fault(self) -> None:
        bad = pcr(directories=(D1,))
        records = cluster(part([1, 2], [D1, D2]), bad)
        assert_names(replay_fault(records), len(records) - 1, bad)

    def test_replica_change_with_directories_replaces_both(self) -> None:
        image = replay_records(cluster(part([1, 2], [D1, D2]), pcr(replicas=(2, 3), directories=(D2, UNASSIGNED))))
        p = the_partition(image)
        assert (p.replicas, p.directories) == ((2, 3), (D2, UNASSIGNED))

    def test_leader_field_bumps_leader_epoch_even_for_the_same_leader(self) -> None:
        image = replay_records(cluster(part([1, 2], [D1, D2], leader=1), pcr(leader=1)))
        p = the_partition(image)
        assert (p.leader, p.leader_epoch, p.partition_epoch) == (1, 1, 1)

    def test_no_leader_is_a_leader_change(self) -> None:
        image = replay_records(cluster(part([1, 2], [D1, D2]), pcr(leader=NO_LEADER)))
        p = the_partition(image)
        assert (p.leader, p.leader_epoch) == (NO_LEADER, 1)

    def test_partition_epoch_always_bumps_leader_epoch_only_with_leader(self) -> None:
        image = replay_records(cluster(part([1, 2], [D1, D2]), pcr(isr=(1,)), pcr(directories=(D1, UNASSIGNED)),
                                       pcr(leader=2), pcr(isr=(1, 2))))
        p = the_partition(image)
        assert (p.partition_epoch, p.leader_epoch) == (4, 1)

    def test_directories_only_change_is_a_change(self) -> None:
        # R8.5: a record carrying only Directories bumps the partition epoch, not the leader epoch.
        image = replay_records(cluster(part([1, 2], [UNASSIGNED, D2]), pcr(directories=(D1, D2))))
        p = the_partition(image)
        assert (p.directories, p.partition_epoch, p.leader_epoch) == ((D1, D2), 1, 0)

    def test_change_of_unknown_partition_is_a_fault(self) -> None:
        bad = pcr(pid=7, isr=(1,))
        records = cluster(part([1], [D1]), bad)
        assert_names(replay_fault(records), len(records) - 1, bad)


# -------------------------------------------------------------------------------------------------------------
# R2.1 / R2.6 online determination and the replica view


class TestIsOnline:
    def test_placeholders(self) -> None:
        assert is_online(UNASSIGNED, [D1]) and is_online(MIGRATING, [D1])
        assert not is_online(LOST, [D1])
        assert not is_online(LOST, [])

    def test_empty_list_means_everything_online(self) -> None:
        # KAFKA-16162: registrations written before 3.7-IV2 carry no directories.
        assert is_online(D2, [])
        assert is_online(Uuid(0, 50), [])

    def test_reserved_ids_3_to_99_offline_when_the_list_is_non_empty(self) -> None:
        for lsb in (3, 42, 99):
            assert not is_online(Uuid(0, lsb), [D1])

    def test_real_ids(self) -> None:
        assert is_online(D1, [D1, D1B])
        assert not is_online(D2, [D1, D1B])


class TestReplicaView:
    def view(self, records: Sequence[Record]) -> dict[int, tuple[bool, OfflineReason | None, DirectoryState]]:
        image = replay_records(records)
        return {r.broker_id: (r.offline, r.offline_reason, r.directory_state) for r in replica_view(image)}

    def test_online_replicas(self) -> None:
        rows = self.view(cluster(part([1, 2, 3], [D1, UNASSIGNED, MIGRATING], isr=[1])))
        assert rows == {1: (False, None, DirectoryState.ASSIGNED), 2: (False, None, DirectoryState.UNASSIGNED),
                        3: (False, None, DirectoryState.MIGRATING)}

    def test_reasons(self) -> None:
        records: list[Record] = [fl(), rbr(1, D1), rbr(2, D2, fenced=True), rbr(3, D3), rbr(5, D1B), topic(),
                                 part([1, 2, 3, 4, 5], [LOST, D2, D2, UNASSIGNED, D1B], isr=[5])]
        records.append(BrokerRegistrationChangeRecord(broker_id=5, broker_epoch=epoch_of(5), log_dirs=(Uuid(9, 9),)))
        rows = self.view(records)
        assert rows[1][:2] == (True, OfflineReason.DIRECTORY_LOST)
        assert rows[2][:2] == (True, OfflineReason.BROKER_FENCED)
        assert rows[3][:2] == (True, OfflineReason.DIRECTORY_OFFLINE)  # D2 is broker 2's, not broker 3's
        assert rows[4][:2] == (True, OfflineReason.BROKER_UNREGISTERED)
        assert rows[5][:2] == (True, OfflineReason.DIRECTORY_OFFLINE)  # D1B went offline

    def test_fencing_is_checked_before_the_directory(self) -> None:
        rows = self.view([fl(), rbr(1, D1, fenced=True), topic(), part([1], [LOST], isr=[1], leader=NO_LEADER)])
        assert rows[1][:2] == (True, OfflineReason.BROKER_FENCED)

    def test_reserved_id_is_offline_on_a_broker_with_directories_and_online_without(self) -> None:
        odd = Uuid(0, 7)
        with_dirs = self.view([fl(), rbr(1, D1), topic(), part([1], [odd])])
        assert with_dirs[1] == (True, OfflineReason.DIRECTORY_OFFLINE, DirectoryState.RESERVED)
        without = self.view([fl(11), rbr(1, version=2), topic(), part([1], [odd])])
        assert without[1][:2] == (False, None)

    def test_offline_replicas_sorted(self) -> None:
        image = replay_records([fl(), rbr(1, D1), rbr(2, D2, fenced=True), topic("b", T2), topic("a", T1),
                                part([2, 1], [D2, D1], tid=T2, isr=[1]), part([2], [D2], tid=T1, isr=[2],
                                                                             leader=NO_LEADER)])
        keys = [(r.topic_id, r.partition_id, r.broker_id) for r in offline_replicas(image)]
        assert keys == sorted(keys, key=lambda k: (str(k[0]), k[1], k[2]))
        assert {k[2] for k in keys} == {2}


# -------------------------------------------------------------------------------------------------------------
# R4 broker records


def _dir(first: str) -> Uuid:
    """A directory id whose base64 string starts with ``first``."""
    return Uuid.from_string(first + "A" * 21)


class TestBrokerRecords:
    def test_directories_sorted_with_kafkas_signed_order(self) -> None:
        # The top bit of msb is set for strings starting g..z, 0..9, '-', '_': negative, so they sort first.
        a, f, g, z, three, under = _dir("A"), _dir("f"), _dir("g"), _dir("z"), _dir("3"), _dir("_")
        image = replay_records([fl(), rbr(1, f, a, three, z, under, g)])
        assert image.cluster.brokers[1].directories == (g, z, three, under, a, f)
        assert [str(d)[0] for d in image.cluster.brokers[1].directories] == ["g", "z", "3", "_", "A", "f"]

    def test_s5_3mwi_sorts_first(self) -> None:
        first, second = Uuid.from_string("3MWIFjMYTR2aUoSnSERWeg"), Uuid.from_string("AhRvJnbeS3OmAa-aq5SbQQ")
        image = replay_records([fl(), rbr(1, second, first)])
        assert image.cluster.brokers[1].directories == (first, second)

    def test_register_broker_before_v3_has_no_directories(self) -> None:
        image = replay_records([fl(11), rbr(1, version=2)])
        assert image.cluster.brokers[1].directories == ()
        # LogDirs does not exist before v3: a v2 record read from JSON ignores it.
        rec = record_from_json({"type": "REGISTER_BROKER_RECORD", "version": 2, "data": {
            "brokerId": 1, "isMigratingZkBroker": False, "incarnationId": str(Uuid(7, 1)), "brokerEpoch": 101,
            "endPoints": [], "features": [], "rack": None, "fenced": False, "inControlledShutdown": False,
            "logDirs": [str(D1)]}})
        assert isinstance(rec, RegisterBrokerRecord)
        assert replay_records([fl(11), rec]).cluster.brokers[1].directories == ()

    def test_directory_owned_by_another_broker_is_a_fault(self) -> None:
        bad = rbr(2, D1)
        records: list[Record] = [fl(), rbr(1, D1), bad]
        fault = replay_fault(records)
        assert_names(fault, 2, bad)
        assert "already assigned to broker 1" in str(fault)

    def test_re_registration_with_its_own_directories_is_fine(self) -> None:
        image = replay_records([fl(), rbr(1, D1, D1B), rbr(1, D1B, epoch=200, incarnation=Uuid(8, 1))])
        assert image.cluster.brokers[1].directories == (D1B,)
        assert image.cluster.brokers[1].epoch == 200

    def test_change_record_with_another_epoch_is_a_fault(self) -> None:
        bad = BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=epoch_of(1) + 1, fenced=1)
        fault = replay_fault([fl(), rbr(1, D1), bad])
        assert_names(fault, 2, bad)
        assert "epoch" in str(fault)

    def test_change_record_for_an_unknown_broker_is_a_fault(self) -> None:
        bad = BrokerRegistrationChangeRecord(broker_id=9, broker_epoch=109, fenced=-1)
        assert_names(replay_fault([fl(), rbr(1, D1), bad]), 2, bad)

    def test_change_record_with_empty_log_dirs_changes_nothing(self) -> None:
        image = replay_records([fl(), rbr(1, D1, D1B)])
        after = replay_records([BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=epoch_of(1))], image)
        assert after.cluster.brokers[1] == image.cluster.brokers[1]
        assert after.cluster.brokers[1].directories == tuple(sorted((D1, D1B)))

    def test_change_record_log_dirs_replace_the_list(self) -> None:
        image = replay_records([fl(), rbr(1, D1, D1B),
                                BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=epoch_of(1),
                                                               log_dirs=(D1B,))])
        assert image.cluster.brokers[1].directories == (D1B,)

    def test_change_record_log_dirs_are_sorted(self) -> None:
        g, a = _dir("g"), _dir("A")
        image = replay_records([fl(), rbr(1, a, g, D1),
                                BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=epoch_of(1), log_dirs=(a, g))])
        assert image.cluster.brokers[1].directories == (g, a)

    def test_change_record_taking_another_brokers_directory_is_a_fault(self) -> None:
        bad = BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=epoch_of(1), log_dirs=(D2,))
        assert_names(replay_fault([fl(), rbr(1, D1), rbr(2, D2), bad]), 3, bad)

    def test_fencing_values(self) -> None:
        image = replay_records([fl(), rbr(1, D1, fenced=True),
                                BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=101, fenced=-1)])
        assert not image.cluster.brokers[1].fenced
        image = replay_records([BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=101, fenced=0)], image)
        assert not image.cluster.brokers[1].fenced
        image = replay_records([BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=101, fenced=1,
                                                               in_controlled_shutdown=1)], image)
        assert image.cluster.brokers[1].fenced and image.cluster.brokers[1].in_controlled_shutdown

    def test_unknown_fencing_value_is_a_fault(self) -> None:
        bad = BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=101, fenced=5)
        fault = replay_fault([fl(), rbr(1, D1), bad])
        assert_names(fault, 2, bad)
        assert "fenced" in str(fault)

    def test_legacy_fence_and_unfence_records(self) -> None:
        image = replay_records([fl(11), rbr(1, version=2, fenced=True), UnfenceBrokerRecord(id=1, epoch=101)])
        assert not image.cluster.brokers[1].fenced
        image = replay_records([FenceBrokerRecord(id=1, epoch=101)], image)
        assert image.cluster.brokers[1].fenced

    def test_legacy_record_with_another_epoch_is_a_fault(self) -> None:
        bad = UnfenceBrokerRecord(id=1, epoch=5)
        assert_names(replay_fault([fl(11), rbr(1, version=2, fenced=True), bad]), 2, bad)

    def test_unregister_removes_the_broker_and_frees_its_directories(self) -> None:
        image = replay_records([fl(), rbr(1, D1), UnregisterBrokerRecord(broker_id=1, broker_epoch=101),
                                rbr(2, D1)])
        assert set(image.cluster.brokers) == {2}
        assert image.cluster.brokers[2].directories == (D1,)

    def test_unregister_with_another_epoch_is_a_fault(self) -> None:
        bad = UnregisterBrokerRecord(broker_id=1, broker_epoch=7)
        assert_names(replay_fault([fl(), rbr(1, D1), bad]), 2, bad)


# -------------------------------------------------------------------------------------------------------------
# R13 MIGRATING


class TestMigrating:
    def test_migrating_stays_through_isr_leader_and_replica_changes(self) -> None:
        image = replay_records([fl(11), rbr(1, version=2), rbr(2, version=2), rbr(3, version=2), topic(),
                                part([1, 2], version=0), pcr(version=0, isr=(1,)), pcr(version=0, leader=2),
                                pcr(version=0, replicas=(1, 2, 3)), fl(17), pcr(isr=(1, 2, 3))])
        p = the_partition(image)
        assert p.directories == (MIGRATING,) * 3

    def test_migrating_is_online_even_when_the_broker_lists_directories(self) -> None:
        image = replay_records([fl(11), rbr(1, version=2), topic(), part([1], version=0), fl(17), rbr(1, D1)])
        (row,) = list(replica_view(image))
        assert (row.directory, row.offline, row.directory_state) == (MIGRATING, False, DirectoryState.MIGRATING)

    def test_all_migrating_directories_in_a_change_keep_migrating_of_new_length(self) -> None:
        image = replay_records(cluster(part([1, 2], [MIGRATING] * 2),
                                       pcr(replicas=(1, 2, 3), directories=(MIGRATING,) * 3)))
        assert the_partition(image).directories == (MIGRATING,) * 3


# -------------------------------------------------------------------------------------------------------------
# R14 value equality (documented divergence from Java's reference inequality, R14.3)


class TestValueEquality:
    def test_directories_equal_in_value_are_the_same_assignment(self) -> None:
        with_dirs = the_partition(replay_records(cluster(part([1, 2], [D1, D2]), pcr(isr=(1,), directories=(D1, D2)))))
        without = the_partition(replay_records(cluster(part([1, 2], [D1, D2]), pcr(isr=(1,)))))
        # Java's localChanges would report a directory change for the first (a new array object); a value-equal
        # port cannot, and the images are equal.
        assert with_dirs == without
        assert with_dirs.has_same_assignment(without)

    def test_images_compare_by_state_not_provenance(self) -> None:
        records = cluster(part([1], [D1]))
        a = replay_records(records)
        b = replay_records([*records, NoOpRecord(), NoOpRecord()])
        assert a.same_state(b)
        assert a.last_offset != b.last_offset


# -------------------------------------------------------------------------------------------------------------
# Transactions (MetadataBatchLoader)


def _entries(records: Sequence[Record]) -> list[LogEntry]:
    return [LogEntry(offset=i, record=r) for i, r in enumerate(records)]


class TestTransactions:
    def test_begin_end_applied_together(self) -> None:
        records: list[Record] = [fl(), rbr(1, D1), BeginTransactionRecord(name="create"), topic(),
                                 part([1], [D1]), EndTransactionRecord()]
        replayer = Replayer()
        seen = []
        for entry in _entries(records):
            replayer.replay(entry)
            seen.append(T1 in replayer.image.topics.by_id)
        assert seen == [False, False, False, False, False, True]
        assert replayer.image.last_offset == 5

    def test_image_during_an_open_transaction_excludes_pending_records(self) -> None:
        replayer = Replayer()
        for entry in _entries([fl(), rbr(1, D1), BeginTransactionRecord(), topic(), part([1], [D1])]):
            replayer.replay(entry)
        assert replayer.in_transaction
        assert replayer.image.topics.by_id == {}
        assert replayer.image.last_offset == 1

    def test_abort_discards(self) -> None:
        records: list[Record] = [fl(), rbr(1, D1), BeginTransactionRecord(), topic(), part([1], [D1]),
                                 AbortTransactionRecord(reason="test"), NoOpRecord()]
        image = replay_records(records)
        assert image.topics.by_id == {}
        assert image.last_offset == 6

    def test_end_without_begin_is_a_fault(self) -> None:
        bad = EndTransactionRecord()
        assert_names(replay_fault([fl(), bad]), 1, bad)

    def test_nested_begin_is_a_fault(self) -> None:
        bad = BeginTransactionRecord(name="inner")
        assert_names(replay_fault([fl(), BeginTransactionRecord(name="outer"), bad]), 2, bad)

    def test_fault_inside_a_transaction_names_the_bad_record(self) -> None:
        bad = part([1, 2], [D1])
        records: list[Record] = [fl(), rbr(1, D1), BeginTransactionRecord(), topic(), bad, EndTransactionRecord()]
        assert_names(replay_fault(records), 4, bad)


class TestTransactionsAcrossASkippedRange:
    """Policy ``skip``: a range skipped while a transaction is open may have held its end (``TransactionBuffer.
    interrupt``). ``gaps`` stands for the reader: the latest range it skipped, as ``LoadedInput.latest_gap`` says."""

    def _replay(self, records: Sequence[Record], gap_before: dict[int, str]) -> tuple[Replayer, GapConsequences]:
        latest: list[str | None] = [None]
        gaps = GapConsequences(lambda: latest[0])
        replayer = Replayer()
        with gaps.active():
            for entry in _entries(records):
                latest[0] = gap_before.get(entry.offset, latest[0])
                replayer.replay(entry)
        return replayer, gaps

    def test_a_transaction_whose_end_was_skipped_is_left_out_and_the_records_after_it_replay(self) -> None:
        # Offsets: 0 fl, 1 rbr, 2 Begin, 3 topic, [the End at 4 lost], 4 topic T2 (after the range), 5 its partition.
        records: list[Record] = [fl(), rbr(1, D1), BeginTransactionRecord(name="t"), topic(),
                                 topic("bar", T2), part([1], [D1], tid=T2)]
        replayer, gaps = self._replay(records, {4: "the skipped range (offset 4)"})
        assert not replayer.in_transaction
        image = replayer.image
        assert set(image.topics.by_id) == {T2} and image.last_offset == 5
        [consequence] = gaps.consequences
        assert (consequence.offset, consequence.record_type) == (2, "BEGIN_TRANSACTION_RECORD")
        assert "whether it committed is unknown" in consequence.reason
        assert [str(e) for e in consequence.entities] == [f"topic {T1}"]

    def test_an_end_after_the_range_changes_nothing_and_a_range_before_the_begin_interrupts_nothing(self) -> None:
        records: list[Record] = [fl(), rbr(1, D1), BeginTransactionRecord(), topic(), EndTransactionRecord(),
                                 NoOpRecord()]
        replayer, gaps = self._replay(records, {2: "the skipped range (offset 2)"})
        assert T1 in replayer.image.topics.by_id and not gaps.consequences  # the range came before the Begin
        replayer, gaps = self._replay(records, {4: "the skipped range (offset 4)"})
        assert replayer.image.topics.by_id == {} and replayer.image.last_offset == 5
        assert [(c.offset, c.record_type) for c in gaps.consequences] == [
            (2, "BEGIN_TRANSACTION_RECORD"), (4, "END_TRANSACTION_RECORD")]

    def test_a_resumed_transaction_is_interrupted_only_by_a_range_after_it_was_stored(self) -> None:
        """A micro-batch resumes its stored open transaction: the range its collector already knows of is not a
        new one; only a range told after that interrupts it."""
        buffer = TransactionBuffer()
        begin, pending = LogEntry(offset=2, record=BeginTransactionRecord()), LogEntry(offset=3, record=topic())
        assert buffer.offer(begin) is None and buffer.offer(pending) is None  # no collector: nothing known
        buffer.resumed()
        latest: list[str | None] = ["the skipped range (offset 1)"]
        with GapConsequences(lambda: latest[0]).active():
            assert buffer.offer(LogEntry(offset=4, record=NoOpRecord())) is None and buffer.open
            latest[0] = "the skipped range (offset 5)"
            settled = buffer.offer(LogEntry(offset=6, record=NoOpRecord()))
        assert settled is not None and not buffer.open
        assert [e.offset for e in settled.apply] == [6] and [e.offset for e in settled.aborted] == [2, 3, 4]

    def test_without_a_collector_nothing_is_interrupted(self) -> None:
        records: list[Record] = [fl(), rbr(1, D1), BeginTransactionRecord(), topic(), EndTransactionRecord()]
        assert T1 in replay_records(records).topics.by_id


# -------------------------------------------------------------------------------------------------------------
# Topics, configs, features


class TestTopicsConfigsFeatures:
    def test_remove_topic_also_removes_its_configs(self) -> None:
        image = replay_records([
            *cluster(part([1], [D1])), topic("bar", T2),
            ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name="foo", name="retention.ms", value="1"),
            ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name="bar", name="retention.ms", value="2"),
            ConfigRecord(resource_type=BROKER_RESOURCE, resource_name="1", name="log.retention.ms", value="3"),
        ])
        after = replay_records([RemoveTopicRecord(topic_id=T1)], image)
        assert T1 not in after.topics.by_id and "foo" not in after.topics.by_name
        assert after.configs.topic_config("foo", "retention.ms") is None
        assert after.configs.topic_config("bar", "retention.ms") == "2"
        assert after.configs.resources[(BROKER_RESOURCE, "1")] == {"log.retention.ms": "3"}

    def test_recreated_topic_does_not_inherit_old_configs(self) -> None:
        image = replay_records([
            *cluster(), ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name="foo", name="x", value="1"),
            RemoveTopicRecord(topic_id=T1), topic("foo", T2),
        ])
        assert image.topics.by_name["foo"] == T2
        assert image.configs.topic_config("foo", "x") is None

    def test_config_value_none_deletes_the_key(self) -> None:
        image = replay_records([fl(), ConfigRecord(resource_type=BROKER_RESOURCE, resource_name="1", name="a",
                                                   value="1"),
                                ConfigRecord(resource_type=BROKER_RESOURCE, resource_name="1", name="a", value=None)])
        assert (BROKER_RESOURCE, "1") not in image.configs.resources

    def test_remove_unknown_topic_is_a_fault(self) -> None:
        bad = RemoveTopicRecord(topic_id=T2)
        assert_names(replay_fault([fl(), bad]), 1, bad)

    def test_duplicate_topic_name_is_a_fault(self) -> None:
        bad = topic("foo", T2)
        assert_names(replay_fault([fl(), topic(), bad]), 2, bad)

    def test_feature_level_zero_removes_the_feature(self) -> None:
        image = replay_records([fl(21), FeatureLevelRecord(name="kraft.version", feature_level=1)])
        assert dict(image.features.levels) == {FEATURE_NAME: 21, "kraft.version": 1}
        image = replay_records([FeatureLevelRecord(name="kraft.version", feature_level=0)], image)
        assert dict(image.features.levels) == {FEATURE_NAME: 21}
        image = replay_records([FeatureLevelRecord(name=FEATURE_NAME, feature_level=0)], image)
        assert image.metadata_version.feature_level == 0


# -------------------------------------------------------------------------------------------------------------
# Image immutability and delta bookkeeping (bugs found and fixed in MetadataDelta.apply / topic-id reuse)


class TestDeltaBookkeeping:
    def test_replay_change_is_replay_telling_the_partition_before_and_after(self) -> None:
        image = replay_records(cluster(part([1, 2], [D1, D2])))
        told, plain = MetadataDelta(image), MetadataDelta(image)
        for offset, record in enumerate((pcr(leader=2), pcr(isr=(2,)), pcr(leader=1, isr=(1, 2))), start=10):
            before = told.partition(T1, 0)
            done = told.replay_change(record, offset)
            plain.replay(record, offset)
            assert done == (before, told.partition(T1, 0)) and done[0] is before and done[1] is told.partition(T1, 0)
        assert told.apply() == plain.apply()
        # A change replay refuses is refused alike, with its offset; one a skipped range explains is left out.
        with pytest.raises(ReplayFault) as refused:
            MetadataDelta(image).replay_change(pcr(pid=5, leader=2), 20)
        assert refused.value.offset == 20
        gaps = GapConsequences(lambda: "the skipped range (offset 3)")
        with gaps.active():
            delta = MetadataDelta(image)
            assert delta.replay_change(pcr(pid=5, leader=2), 21) is None
        assert delta.apply() == replace(image, last_offset=21)

    def test_applied_image_does_not_change_when_the_delta_goes_on(self) -> None:
        delta = MetadataDelta(replay_records(cluster(part([1, 2], [D1, D2]))))
        delta.replay(pcr(leader=2), 10)
        first = delta.apply()
        delta.replay(pcr(leader=1), 11)
        second = delta.apply()
        assert (the_partition(first).leader, the_partition(first).leader_epoch) == (2, 1)
        assert (the_partition(second).leader, the_partition(second).leader_epoch) == (1, 2)

    def test_a_changed_topic_shares_its_untouched_partitions_with_the_image_before(self) -> None:
        # Kafka's TopicDelta.apply builds the new topic on a persistent map: a batch costs what it changes, not the
        # topic's size. The image before keeps every partition as it was; the one after shares the untouched ones.
        replayed = replay_records(cluster(*(part([1, 2], [D1, D2], pid=p) for p in range(40))))
        # As the tables or a snapshot give it (a plain dict), or the Spark operator's state (another mapping): the
        # first change converts it.
        for kind in (dict, MappingProxyType):
            self._shares_untouched(replace(replayed, topics=TopicsImage(
                by_id={T1: TopicImage(name="foo", id=T1, partitions=kind(dict(replayed.topics.by_id[T1].partitions)))},
                by_name={"foo": T1})))

    def _shares_untouched(self, before: MetadataImage) -> None:
        delta = MetadataDelta(before)
        delta.replay(pcr(pid=7, leader=2), 100)
        after = delta.apply()
        delta.replay(pcr(pid=8, leader=2), 101)
        later = delta.apply()
        assert all(the_partition(after, pid=pid) is the_partition(before, pid=pid) for pid in range(40) if pid != 7)
        assert the_partition(after, pid=7).leader == 2 and the_partition(before, pid=7).leader == 1
        assert the_partition(after, pid=8).leader == 1 and the_partition(later, pid=8).leader == 2
        assert the_partition(later, pid=7) is the_partition(after, pid=7)
        assert [len(i.topics.by_id[T1].partitions) for i in (before, after, later)] == [40, 40, 40]

    def test_topic_images_are_equal_by_their_partitions_whatever_mapping_holds_them(self) -> None:
        replayed = replay_records([*cluster(part([1, 2], [D1, D2])), pcr(leader=2)])
        topic_image = replayed.topics.by_id[T1]
        as_dict = TopicImage(name=topic_image.name, id=T1, partitions=dict(topic_image.partitions))
        assert type(as_dict.partitions) is not type(topic_image.partitions)  # replay left a persistent map
        assert as_dict == topic_image and topic_image == as_dict
        assert replayed == replace(replayed, topics=TopicsImage(by_id={T1: as_dict}, by_name={"foo": T1}))
        other = replay_records([*cluster(part([1, 2], [D1, D2])), pcr(leader=2), pcr(isr=(2,))])
        assert other.topics.by_id[T1] != as_dict and as_dict != other.topics.by_id[T1]
        fewer = TopicImage(name="foo", id=T1, partitions={})
        assert fewer != topic_image and topic_image != fewer
        assert TopicImage(name="bar", id=T1, partitions=dict(topic_image.partitions)) != topic_image

    def test_a_partition_is_looked_up_as_the_records_replayed_so_far_left_it(self) -> None:
        base = replay_records(cluster(part([1, 2], [D1, D2])))
        delta = MetadataDelta(base)
        assert delta.partition(T1, 0) is the_partition(base)
        delta.replay(pcr(leader=2), 10)
        assert delta.partition(T1, 0) == the_partition(base).merge(pcr(leader=2))
        assert delta.partition(T1, 1) is None
        delta.replay(RemoveTopicRecord(topic_id=T1), 11)
        assert delta.partition(T1, 0) is None
        assert the_partition(base).leader_epoch == 0  # the base image is untouched

    def test_topic_id_removed_and_recreated_in_one_delta(self) -> None:
        base = replay_records(cluster(part([1], [D1])))
        records: list[Record] = [RemoveTopicRecord(topic_id=T1), topic("bar", T1), RemoveTopicRecord(topic_id=T1),
                                 topic("baz", T1), part([2], [D2])]
        one_delta = replay_records(records, base)
        one_by_one = base
        for i, record in enumerate(records):
            one_by_one = replay_records([record], one_by_one, first_offset=i)
        assert one_delta.same_state(one_by_one)
        assert dict(one_delta.topics.by_name) == {"baz": T1}
        assert the_partition(one_delta).replicas == (2,)

    def test_base_image_is_untouched_by_replay(self) -> None:
        base = replay_records(cluster(part([1, 2], [D1, D2])))
        before = the_partition(base)
        replay_records([pcr(isr=(1,)), RemoveTopicRecord(topic_id=T1)], base)
        assert the_partition(base) is before
        assert T1 in base.topics.by_id

    def test_empty_image(self) -> None:
        assert replay_records([]).same_state(EMPTY_IMAGE)
        assert list(partition_replicas(EMPTY_IMAGE.cluster, T1, 0, PartitionRegistration(
            replicas=(), directories=(), isr=()))) == []

    def test_broker_registration_sorts_on_construction(self) -> None:
        reg = BrokerRegistration(id=1, epoch=1, incarnation_id=Uuid(1, 1), directories=(_dir("A"), _dir("g")))
        assert reg.directories == (_dir("g"), _dir("A"))


def test_a_registration_from_its_fields_is_the_constructors_and_is_checked_alike() -> None:
    d1, d2 = Uuid.random(), Uuid.random()
    fields = ((1, 2), (d1, d2), (1,), (), (2,), (), (1,), 1, 0, 5, 7)
    assert PartitionRegistration.from_fields(*fields) == PartitionRegistration(*fields)
    with pytest.raises(ReplayFault, match=r"replicas \(2\) and directories \(1\)"):
        PartitionRegistration.from_fields((1, 2), (d1,), (1,), (), (), (), (), 1, 0, 0, 0)
