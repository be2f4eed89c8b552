"""The named invariants I1–I21 (operators-and-peers.md §4): for each, a state or batch that breaks it — and only
it, among the checks that could see it — and a §4.1 look-alike that must not fire."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

import pytest

from jbod_model.directory_id import LOST, MIGRATING, UNASSIGNED, DirectoryState
from jbod_model.errors import ReplayFault
from jbod_model.image import (
    BrokerRegistration,
    ClusterImage,
    FeaturesImage,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
    TopicsImage,
)
from jbod_model.invariants import (
    INVARIANTS,
    InvariantTracker,
    Kind,
    Scope,
    Severity,
    Violation,
    check_image,
    check_replica_view,
    check_step,
    directory_placeholder_ok,
    partition_directories_length_ok,
    partition_isr_subset_of_replicas,
    partition_leader_ok,
    partition_reassignment_ok,
    partition_record_directories_length_ok,
    record_free_of_directory_state,
    registration_change_shrinks_directories,
    replica_demoted,
    replica_is_offline,
    snapshot_differences,
)
from jbod_model.metadata_version import FEATURE_NAME, MetadataVersion
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import (
    NO_LEADER,
    AbortTransactionRecord,
    BeginTransactionRecord,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    EndTransactionRecord,
    FeatureLevelRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
    TopicRecord,
    UnregisterBrokerRecord,
)
from jbod_model.replay import replay_entries, replay_records
from jbod_model.replicas import replica_view
from jbod_model.uuid import Uuid

T1 = Uuid.from_string("TESTTOPIC1AAAAAAAAAAAA")
D1 = Uuid.from_string("TESTBROKER00001DIRAAAA")
D1B = Uuid.from_string("TESTBROKER00001DIRBAAA")
D2 = Uuid.from_string("TESTBROKER00002DIRAAAA")
D2B = Uuid.from_string("TESTBROKER00002DIRBAAA")
D3 = Uuid.from_string("TESTBROKER00003DIRAAAA")
STRANGER = Uuid.from_string("NEVERREGISTEREDAAAAAAA")


# -------------------------------------------------------------------------------------------------------------
# Builders: images straight from parts (states replay would never build) and from records


def broker(broker_id: int, *dirs: Uuid, fenced: bool = False, shutdown: bool = False) -> BrokerRegistration:
    return BrokerRegistration(id=broker_id, epoch=broker_id + 100, incarnation_id=Uuid(7, broker_id),
                              fenced=fenced, in_controlled_shutdown=shutdown, directories=dirs)


def partition(replicas: Sequence[int], dirs: Sequence[Uuid], *, isr: Sequence[int] | None = None,
              leader: int | None = None, **kw: object) -> PartitionRegistration:
    isr_t = tuple(replicas) if isr is None else tuple(isr)
    return PartitionRegistration(replicas=tuple(replicas), directories=tuple(dirs), isr=isr_t,
                                 leader=(isr_t[0] if isr_t else NO_LEADER) if leader is None else leader,
                                 **kw)  # type: ignore[arg-type]


def image(*brokers: BrokerRegistration, parts: Iterable[PartitionRegistration] = (), level: int = 21,
          last_offset: int = 10) -> MetadataImage:
    partitions = dict(enumerate(parts))
    topics = TopicsImage(by_id={T1: TopicImage(name="foo", id=T1, partitions=partitions)} if partitions else {},
                         by_name={"foo": T1} if partitions else {})
    return MetadataImage(features=FeaturesImage({FEATURE_NAME: level}),
                         cluster=ClusterImage({b.id: b for b in brokers}), topics=topics, last_offset=last_offset)


def entries(*records: Record, first: int = 100) -> list[LogEntry]:
    return [LogEntry(offset=first + i, record=r, batch_base_offset=first) for i, r in enumerate(records)]


def fl(level: int) -> FeatureLevelRecord:
    return FeatureLevelRecord(name=FEATURE_NAME, feature_level=level)


def rbr(broker_id: int, *dirs: Uuid, version: int = 3, fenced: bool = False, epoch: int | None = None,
        incarnation: Uuid | None = None) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(version=version, broker_id=broker_id, broker_epoch=epoch or broker_id + 100,
                                incarnation_id=incarnation or Uuid(7, broker_id), fenced=fenced,
                                log_dirs=dirs if version >= 3 else ())


def brcr(broker_id: int, *dirs: Uuid, fenced: int = 0, epoch: int | None = None) -> BrokerRegistrationChangeRecord:
    return BrokerRegistrationChangeRecord(version=2 if dirs else 0, broker_id=broker_id,
                                          broker_epoch=epoch or broker_id + 100, fenced=fenced, log_dirs=dirs)


def pcr(pid: int = 0, **fields: object) -> PartitionChangeRecord:
    return PartitionChangeRecord(version=1, topic_id=T1, partition_id=pid, **fields)  # type: ignore[arg-type]


def prec(replicas: Sequence[int], dirs: Sequence[Uuid], *, version: int = 1, pid: int = 0,
         partition_epoch: int = 0, isr: Sequence[int] | None = None) -> PartitionRecord:
    isr_t = tuple(replicas) if isr is None else tuple(isr)
    return PartitionRecord(version=version, topic_id=T1, partition_id=pid, replicas=tuple(replicas), isr=isr_t,
                           leader=isr_t[0] if isr_t else NO_LEADER, leader_epoch=partition_epoch,
                           partition_epoch=partition_epoch, directories=tuple(dirs) if version >= 1 else ())


def fired_image(img: MetadataImage) -> set[str]:
    return {v.invariant for v in check_image(img)}


def step(before: MetadataImage, *records: Record, after: MetadataImage | None = None) -> list[Violation]:
    """Step violations of one batch; ``after`` defaults to replaying it (pass ``before`` for a refused batch)."""
    batch = entries(*records)
    return check_step(before, batch, replay_entries(batch, before) if after is None else after)


def fired_all(before: MetadataImage, *records: Record) -> set[str]:
    """Every step and image invariant that fires for a batch that replays."""
    batch = entries(*records)
    after = replay_entries(batch, before)
    return {v.invariant for v in check_step(before, batch, after) + check_image(after)}


def base(level: int = 21) -> MetadataImage:
    """Brokers 1–3 with one directory each (broker 1 also D1B), unfenced; topic foo, partition 0 on [1, 2, 3]."""
    return replay_records([fl(level), rbr(1, D1, D1B), rbr(2, D2), rbr(3, D3), brcr(1, fenced=-1),
                           brcr(2, fenced=-1), brcr(3, fenced=-1), TopicRecord(name="foo", topic_id=T1),
                           prec([1, 2, 3], [D1, D2, D3])])


# -------------------------------------------------------------------------------------------------------------
# The registry


class TestRegistry:
    def test_i1_to_i21_by_name(self) -> None:
        assert list(INVARIANTS) == [f"I{n}" for n in range(1, 22)]
        for name, inv in INVARIANTS.items():
            assert inv.name == name
            assert inv.title and inv.source
            assert inv.rationale and "\n" not in inv.rationale
            assert isinstance(inv.severity, Severity) and isinstance(inv.kind, Kind)

    def test_scopes_and_checks(self) -> None:
        for inv in INVARIANTS.values():
            if inv.scope == Scope.IMAGE:
                assert inv.image_check is not None
            if inv.scope == Scope.RECORD:
                assert inv.step_check is not None
            if inv.scope == Scope.HISTORY:
                assert inv.image_check is None and inv.step_check is None
        assert {n for n, i in INVARIANTS.items() if i.scope == "history"} == {"I12", "I20", "I21"}
        assert {n for n, i in INVARIANTS.items() if i.severity == Severity.WARNING} == {"I11", "I12"}

    def test_frozen(self) -> None:
        with pytest.raises(AttributeError):
            INVARIANTS["I1"].severity = Severity.WARNING  # type: ignore[misc]
        with pytest.raises(TypeError):
            INVARIANTS["I99"] = INVARIANTS["I1"]  # type: ignore[index]

    def test_a_clean_replayed_image_has_no_violations(self) -> None:
        assert check_image(base()) == []


# -------------------------------------------------------------------------------------------------------------
# Structural invariants


class TestI1DirectoriesMatchReplicas:
    def test_image_partition_with_too_few_directories(self) -> None:
        img = image(broker(1, D1), broker(2, D2), parts=[partition([1, 2], [])])
        (v,) = check_image(img)
        assert (v.invariant, v.topic_id, v.partition_id, v.offset) == ("I1", T1, 0, 10)
        assert not partition_directories_length_ok(img.topics.by_id[T1].partitions[0])

    def test_partition_record_with_a_short_array(self) -> None:
        record = prec([1, 2], [D1])
        vs = step(base(), record, after=base())  # replay refuses it; the check still explains it
        assert {v.invariant for v in vs} == {"I1"}
        assert vs[0].offset == 100

    def test_change_record_with_a_long_array(self) -> None:
        vs = step(base(), pcr(directories=(D1, D2, D3, D1B)), after=base())
        assert {v.invariant for v in vs} == {"I1"}

    def test_look_alikes(self) -> None:
        assert partition_record_directories_length_ok(prec([1, 2], [], version=0))  # v0 has no field
        assert fired_all(base(), pcr(isr=(1, 2))) == set()  # null Directories = unchanged


class TestI2ReplicasAndIsr:
    def test_duplicate_replica(self) -> None:
        img = image(broker(1, D1), parts=[partition([1, 1], [D1, D1], isr=[1])])
        assert fired_image(img) == {"I2"}

    def test_isr_outside_replicas(self) -> None:
        img = image(broker(1, D1), broker(2, D2), broker(3, D3), parts=[partition([1, 2], [D1, D2], isr=[1, 3])])
        assert fired_image(img) == {"I2"}

    def test_look_alike_isr_in_another_order(self) -> None:
        p = partition([1, 2, 3], [D1, D2, D3], isr=[3, 1], leader=1)
        assert partition_isr_subset_of_replicas(p)
        assert fired_image(image(broker(1, D1), broker(2, D2), broker(3, D3), parts=[p])) == set()


class TestI3NoDirectoryStateBelowTheGate:
    def old(self) -> MetadataImage:
        return replay_records([fl(11), rbr(1, version=2), rbr(2, version=2), brcr(1, fenced=-1),
                               TopicRecord(name="foo", topic_id=T1), prec([1], [], version=0)])

    def test_registration_with_directories_at_3_5(self) -> None:
        assert fired_all(self.old(), rbr(3, D3)) == {"I3"}

    def test_partition_record_v1_at_3_5(self) -> None:
        assert fired_all(self.old(), prec([1, 2], [MIGRATING, MIGRATING], pid=1)) == {"I3"}

    def test_downgrade_that_keeps_directories(self) -> None:
        vs = step(base(17), fl(16))
        assert {v.invariant for v in vs} == {"I3"}

    def test_look_alikes(self) -> None:
        # BrokerRegistrationChangeRecord versions do not follow the metadata.version: v2 without LogDirs is fine.
        fence_v2 = BrokerRegistrationChangeRecord(version=2, broker_id=2, broker_epoch=102, fenced=-1)
        assert fired_all(self.old(), fence_v2) == set()
        # Unknown metadata.version (no FeatureLevelRecord seen): nothing to gate on.
        assert record_free_of_directory_state(prec([1], [D1]), MetadataVersion(0))
        # Upgrading to 3.7-IV2 is not a downgrade.
        assert fired_all(self.old(), fl(17)) == set()


class TestI4Placeholders:
    def test_reserved_id_in_directories(self) -> None:
        odd = Uuid(0, 5)
        img = image(broker(1, D1), broker(2, D2), parts=[partition([1, 2], [D1, odd], isr=[1])])
        assert fired_image(img) == {"I4"}
        assert not directory_placeholder_ok(odd)

    def test_reserved_id_in_a_registration(self) -> None:
        img = image(broker(1, D1, Uuid(0, 0)))
        (v,) = check_image(img)
        assert (v.invariant, v.broker_id, v.directory) == ("I4", 1, MIGRATING)

    def test_look_alike_the_three_placeholders(self) -> None:
        img = image(broker(1, D1), broker(2, D2), broker(3, D3),
                    parts=[partition([1, 2, 3], [MIGRATING, UNASSIGNED, LOST], isr=[1, 2])])
        assert fired_image(img) == set()


class TestI5DuplicateDirectory:
    def test_duplicate(self) -> None:
        assert fired_image(image(broker(1, D1, D1))) == {"I5"}

    def test_look_alike_two_directories(self) -> None:
        assert fired_image(image(broker(1, D1, D1B))) == set()


class TestI6OneOwner:
    def test_shared_directory(self) -> None:
        (v,) = check_image(image(broker(1, D1), broker(2, D1)))
        assert (v.invariant, v.directory) == ("I6", D1)

    def test_look_alike_re_registration_with_own_directories(self) -> None:
        assert fired_all(base(), brcr(3, fenced=1), rbr(3, D3, fenced=True, epoch=300,
                                                        incarnation=Uuid(8, 3))) == set()


class TestI7BrokerEpochs:
    def test_change_record_with_another_epoch(self) -> None:
        vs = step(base(), brcr(1, fenced=1, epoch=5), after=base())
        assert [(v.invariant, v.broker_id, v.offset) for v in vs] == [("I7", 1, 100)]

    def test_unregister_of_unknown_broker(self) -> None:
        vs = step(base(), UnregisterBrokerRecord(broker_id=9, broker_epoch=109), after=base())
        assert {v.invariant for v in vs} == {"I7"}

    def test_look_alike_new_epoch_registered_earlier_in_the_batch(self) -> None:
        assert fired_all(base(), brcr(3, fenced=1), rbr(3, D3, fenced=True, epoch=400, incarnation=Uuid(8, 3)),
                         brcr(3, fenced=-1, epoch=400)) == set()


class TestI8OnlyShrinks:
    def test_change_record_adding_a_directory(self) -> None:
        vs = step(base(), brcr(2, D2, D2B))
        assert [(v.invariant, v.directory) for v in vs] == [("I8", D2B)]

    def test_look_alikes(self) -> None:
        assert fired_all(base(), brcr(3, fenced=1)) == set()  # empty LogDirs: no change, not "all offline"
        assert fired_all(base(), brcr(1, D1, D1B)) == set()  # same list
        assert registration_change_shrinks_directories(brcr(1, D1), [D1, D1B])


class TestI9RegistrationsListDirectories:
    def test_new_registration_without_directories(self) -> None:
        vs = step(base(), rbr(4))
        assert [(v.invariant, v.severity) for v in vs] == [("I9", Severity.ERROR)]

    def test_look_alike_carried_over_registration(self) -> None:
        upgraded = replay_records([fl(17)], replay_records([fl(11), rbr(1, version=2)]))
        assert upgraded.cluster.brokers[1].directories == ()
        assert check_image(upgraded) == []
        assert step(upgraded, NoOpRecord()) == []
        assert fired_all(replay_records([fl(11)]), rbr(2, version=2)) == set()  # below the gate

    def test_carried_over_registration_warns_after_the_threshold(self) -> None:
        upgraded = replay_records([fl(11), rbr(1, version=2), fl(17)])
        tracker = InvariantTracker(upgraded, max_pending_offsets=5)
        vs = [v for i in range(10) for v in tracker.feed_batch(entries(NoOpRecord(), first=10 + i))]
        assert [(v.invariant, v.severity, v.broker_id) for v in vs] == [("I9", Severity.WARNING, 1)]

    def test_re_registration_before_the_threshold_clears_it(self) -> None:
        upgraded = replay_records([fl(11), rbr(1, version=2), fl(17)])
        tracker = InvariantTracker(upgraded, max_pending_offsets=5)
        assert tracker.feed_batch(entries(rbr(1, D1), first=11)) == []
        assert [v for i in range(10) for v in tracker.feed_batch(entries(NoOpRecord(), first=12 + i))] == []


class TestI10ReplicaChangesCarryDirectories:
    def test_partition_record_v0_at_3_7_iv2(self) -> None:
        assert fired_all(base(), prec([1], [], version=0, pid=1)) == {"I10"}

    def test_reorder_without_directories_misplaces_them(self) -> None:
        img = replay_records([pcr(isr=(1,))], base())
        # Positional arrays: swapping replicas 2 and 3 without Directories gives 2 the directory of 3.
        assert fired_all(img, pcr(replicas=(1, 3, 2))) == {"I10"}

    def test_new_replica_on_a_broker_with_a_directory_needs_directories(self) -> None:
        # After the upgrade broker 3 re-registered with D3, so defaultDir(3) = D3: the controller writes it.
        old = replay_records([fl(11), rbr(1, version=2), rbr(2, version=2), rbr(3, version=2), brcr(1, fenced=-1),
                              TopicRecord(name="foo", topic_id=T1), prec([1, 2], [], version=0), fl(17), rbr(3, D3)])
        vs = step(old, pcr(replicas=(1, 3), isr=(1,)))
        # The consequence shows too: the new replica is left MIGRATING on a single-directory broker (I11).
        assert [(v.invariant, v.severity) for v in vs] == [("I10", Severity.ERROR), ("I11", Severity.WARNING)]
        assert str(D3) in vs[0].message

    def test_look_alikes(self) -> None:
        # R8.6: an all-MIGRATING partition stays so when the new replica's defaultDir is MIGRATING too.
        old = replay_records([fl(11), rbr(1, version=2), rbr(2, version=2), rbr(3, version=2), brcr(1, fenced=-1),
                              TopicRecord(name="foo", topic_id=T1), prec([1, 2], [], version=0), fl(17)])
        assert fired_all(old, pcr(replicas=(1, 3), isr=(1,))) == set()
        # ZK migration writes PartitionRecord v0 inside its "Bulk Migration" transaction.
        assert fired_all(base(), BeginTransactionRecord(name="Bulk Migration"), prec([1], [], version=0, pid=1),
                         EndTransactionRecord()) == set()
        assert fired_all(base(), pcr(isr=(1, 2))) == set()


class TestI11SingleDirectoryBrokers:
    def test_new_replica_unassigned_on_a_single_directory_broker(self) -> None:
        vs = step(base(), prec([2, 3], [UNASSIGNED, D3], pid=1))
        assert [(v.invariant, v.severity, v.broker_id) for v in vs] == [("I11", Severity.WARNING, 2)]

    def test_reassignment_adding_unassigned_on_a_single_directory_broker(self) -> None:
        img = replay_records([rbr(4, Uuid(11, 4))], base())
        vs = step(img, pcr(replicas=(1, 2, 3, 4), directories=(D1, D2, D3, UNASSIGNED), adding_replicas=(4,)))
        assert {v.invariant for v in vs} == {"I11"}

    def test_look_alikes(self) -> None:
        assert step(base(), prec([1], [UNASSIGNED], pid=1)) == []  # broker 1 has two directories
        # A snapshot's partition that changed since creation (epoch > 0) says nothing about placement.
        assert step(base(), prec([2], [UNASSIGNED], pid=1, partition_epoch=3)) == []


class TestI12PlaceholdersResolve:
    def test_pending_placement_warns_once(self) -> None:
        tracker = InvariantTracker(base(), max_pending_offsets=5)
        assert tracker.feed_batch(entries(prec([1], [UNASSIGNED], pid=1), first=20)) == []
        (pending,) = tracker.pending_placements()
        assert (pending.broker_id, pending.directory, pending.since_offset) == (1, UNASSIGNED, 20)
        vs = [v for i in range(10) for v in tracker.feed_batch(entries(NoOpRecord(), first=21 + i))]
        assert [(v.invariant, v.severity, v.broker_id, v.partition_id) for v in vs] == [
            ("I12", Severity.WARNING, 1, 1)]

    def test_time_threshold(self) -> None:
        tracker = InvariantTracker(base(), max_pending_offsets=None, max_pending_ms=1000)
        tracker.feed_batch([LogEntry(offset=20, record=prec([1], [UNASSIGNED], pid=1), timestamp=5_000)])
        assert tracker.feed_batch([LogEntry(offset=21, record=NoOpRecord(), timestamp=5_900)]) == []
        vs = tracker.feed_batch([LogEntry(offset=22, record=NoOpRecord(), timestamp=6_500)])
        assert [v.invariant for v in vs] == ["I12"]

    def test_look_alikes(self) -> None:
        # Resolved in time by AssignReplicasToDirs.
        tracker = InvariantTracker(base(), max_pending_offsets=5)
        tracker.feed_batch(entries(prec([1], [UNASSIGNED], pid=1), first=20))
        tracker.feed_batch(entries(pcr(pid=1, directories=(D1B,)), first=21))
        assert tracker.pending_placements() == []
        # On a fenced broker nothing can resolve it: not pending.
        fenced = replay_records([brcr(2, fenced=1)], base())
        tracker = InvariantTracker(fenced, max_pending_offsets=5)
        tracker.feed_batch(entries(prec([2], [UNASSIGNED], pid=1, isr=[]), first=20))
        assert tracker.pending_placements() == []
        # Below 3.7-IV2 MIGRATING is the only state there is.
        old = replay_records([fl(11), rbr(1, version=2), brcr(1, fenced=-1), TopicRecord(name="foo", topic_id=T1),
                              prec([1], [], version=0)])
        assert InvariantTracker(old, max_pending_offsets=0).pending_placements() == []


# -------------------------------------------------------------------------------------------------------------
# Semantic invariants


class TestI13ReplicaView:
    def test_wrong_offline_flag(self) -> None:
        img = base()
        rows = list(replica_view(img))
        rows[0] = replace(rows[0], offline=True, offline_reason=None)
        (v,) = check_replica_view(img, rows)
        assert (v.invariant, v.broker_id) == ("I13", rows[0].broker_id)

    def test_duplicate_row(self) -> None:
        img = base()
        rows = list(replica_view(img))
        (v,) = check_replica_view(img, [*rows, rows[1]])
        assert v.invariant == "I13" and "twice" in v.message

    def test_missing_and_extra_rows(self) -> None:
        img = base()
        rows = list(replica_view(img))
        extra = replace(rows[0], partition_id=5)
        vs = check_replica_view(img, [*rows[1:], extra])
        assert {v.invariant for v in vs} == {"I13"} and len(vs) == 2

    def test_look_alike_assigned_directory_gone_after_a_disk_failure(self) -> None:
        # §4.1: an assigned directory missing from the broker's list IS an offline replica, not corruption.
        img = replay_records([pcr(isr=(2, 3), leader=2), brcr(1, D1B)], base())
        (row,) = [r for r in replica_view(img) if r.broker_id == 1]
        assert row.offline and replica_is_offline(img.cluster, 1, D1)
        assert check_image(img) == []
        assert check_replica_view(img, replica_view(img)) == []

    def test_definition(self) -> None:
        cluster = ClusterImage({1: broker(1, D1), 2: broker(2), 3: broker(3, D3, fenced=True)})
        assert not replica_is_offline(cluster, 1, UNASSIGNED)
        assert not replica_is_offline(cluster, 1, MIGRATING)
        assert replica_is_offline(cluster, 1, LOST)
        assert replica_is_offline(cluster, 1, Uuid(0, 9))
        assert not replica_is_offline(cluster, 2, D2)  # empty list: everything online (KAFKA-16162)
        assert replica_is_offline(cluster, 3, D3)
        assert replica_is_offline(cluster, 4, UNASSIGNED)
        assert DirectoryState.of(Uuid(0, 9)) == DirectoryState.RESERVED


class TestI14Leader:
    def test_fenced_leader(self) -> None:
        img = image(broker(1, D1, fenced=True), broker(2, D2), parts=[partition([1, 2], [D1, D2])])
        (v,) = check_image(img)
        assert (v.invariant, v.broker_id) == ("I14", 1)
        assert "fenced" in v.message

    def test_leader_on_an_offline_directory(self) -> None:
        img = image(broker(1, D1B), broker(2, D2), parts=[partition([1, 2], [D1, D2])])
        assert fired_image(img) == {"I14"}

    def test_leader_outside_the_isr(self) -> None:
        img = image(broker(1, D1), broker(2, D2), parts=[partition([1, 2], [D1, D2], isr=[2], leader=1)])
        assert fired_image(img) == {"I14"}

    def test_look_alikes(self) -> None:
        img = image(broker(1, D1, shutdown=True), broker(2), broker(3, D3),
                    parts=[partition([1, 2], [D1, D2]),  # controlled shutdown may still lead
                           partition([2, 1], [D2, D1]),  # empty list: every directory online
                           partition([3, 1], [MIGRATING, D1])])  # MIGRATING is online
        assert fired_image(img) == set()
        assert all(partition_leader_ok(img.cluster, p) for p in img.topics.by_id[T1].partitions.values())


class TestI15IsrNonEmpty:
    def test_empty_isr_without_elr(self) -> None:
        img = image(broker(1, D1), parts=[partition([1], [D1], isr=[], leader=NO_LEADER)])
        assert fired_image(img) == {"I15"}

    def test_look_alikes(self) -> None:
        # §4.1: the last ISR member on an offline directory stays, leaderless.
        img = image(broker(1, D1B), parts=[partition([1], [D1], isr=[1], leader=NO_LEADER)])
        assert fired_image(img) == set()
        # With ELR possible (4.0-IV0) the ISR may be empty.
        elr = image(broker(1, D1), parts=[partition([1], [D1], isr=[], leader=NO_LEADER)], level=22)
        assert fired_image(elr) == set()


class TestI16DirectoryFailureHandledInItsBatch:
    def test_broker_left_leading(self) -> None:
        vs = step(base(), brcr(1, D1B))
        assert [(v.invariant, v.broker_id, v.directory, v.offset) for v in vs] == [("I16", 1, D1, 100)]

    def test_only_i16_fires_when_the_leader_moved_but_the_isr_kept_the_broker(self) -> None:
        img = replay_records([pcr(leader=2)], base())
        assert fired_all(img, brcr(1, D1B)) == {"I16"}

    def test_look_alikes(self) -> None:
        # handleDirectoriesOffline: ISR shrink then the change record — nothing to report.
        assert fired_all(base(), pcr(isr=(2, 3), leader=2), brcr(1, D1B)) == set()
        # §4.1: the last ISR member stays in the ISR, leader -1.
        alone = replay_records([prec([1], [D1], pid=1)], base())
        assert fired_all(alone, pcr(isr=(2, 3), leader=2), pcr(pid=1, leader=NO_LEADER), brcr(1, D1B)) == set()
        # R5.5: every directory reported offline gives an empty LogDirs, which replays as "no change".
        assert fired_all(base(), pcr(isr=(2, 3), leader=2), brcr(1)) == set()

    def test_a_tracker_follows_replicas_moved_between_directories_by_directories_alone(self) -> None:
        # The tracker's index of (broker, directory) -> partitions must follow a batch that only moves a replica to
        # another directory (AssignReplicasToDirs: a change with Directories and nothing else: no creation,
        # reassignment or removal in it), and pass over a batch of leader and ISR changes.
        dx = Uuid(99, 1)
        img = replay_records([fl(21), rbr(1, D1, D1B, dx), rbr(2, D2), rbr(3, D3), brcr(1, fenced=-1),
                              brcr(2, fenced=-1), brcr(3, fenced=-1), TopicRecord(name="foo", topic_id=T1),
                              prec([1, 2, 3], [D1, D2, D3])])
        tracker = InvariantTracker(img, image_checks=False, history_checks=False, step_names=["I16"])
        assert tracker.feed_batch(entries(brcr(1, D1, D1B), first=100)) == []  # builds the index: dx held nothing
        assert tracker.feed_batch(entries(pcr(directories=(D1B, D2, D3)), first=101)) == []
        assert tracker.feed_batch(entries(pcr(isr=(1, 2, 3)), first=102)) == []
        vs = tracker.feed_batch(entries(brcr(1, D1), first=103))
        assert [(v.invariant, v.broker_id, v.directory, v.offset) for v in vs] == [("I16", 1, D1B, 103)]


class TestI17AssignmentIntoAnOfflineDirectory:
    def failed(self) -> MetadataImage:
        """Broker 1 lost D1B (it hosted nothing); partition 0 keeps broker 1 in its ISR on D1."""
        return replay_records([brcr(1, D1)], base())

    def test_assignment_without_demotion(self) -> None:
        vs = step(self.failed(), pcr(directories=(D1B, D2, D3)))
        assert [(v.invariant, v.broker_id, v.directory) for v in vs] == [("I17", 1, D1B)]
        assert fired_all(self.failed(), pcr(directories=(D1B, D2, D3))) == {"I17", "I14"}  # broker 1 leads

    def test_follower_assignment_without_demotion(self) -> None:
        img = replay_records([pcr(leader=2)], self.failed())
        assert fired_all(img, pcr(directories=(D1B, D2, D3))) == {"I17"}

    def test_look_alikes(self) -> None:
        # handleAssignReplicasToDirs: the directory record, then the leader/ISR record of the offline set.
        assert fired_all(self.failed(), pcr(directories=(D1B, D2, D3)), pcr(isr=(2, 3), leader=2)) == set()
        assert fired_all(self.failed(), pcr(directories=(D1, D2, D3))) == set()
        # A broker whose list is empty (pre-3.7-IV2 registration) has every directory online.
        old = replay_records([fl(11), rbr(1, version=2), brcr(1, fenced=-1), TopicRecord(name="foo", topic_id=T1),
                              prec([1], [], version=0), fl(17)])
        assert fired_all(old, pcr(directories=(D1,))) == set()


class TestI18Reassignment:
    def test_adding_outside_replicas(self) -> None:
        img = image(broker(1, D1), broker(2, D2), parts=[partition([1, 2], [D1, D2], adding_replicas=(3,))])
        assert fired_image(img) == {"I18"}

    def test_adding_and_removing_overlap(self) -> None:
        p = partition([1, 2], [D1, D2], adding_replicas=(2,), removing_replicas=(2,))
        assert not partition_reassignment_ok(p)

    def test_look_alike_reassignment_in_flight(self) -> None:
        img = image(broker(1, D1), broker(2, D2), broker(3, D3),
                    parts=[partition([3, 1, 2], [D3, D1, D2], isr=[1, 2], leader=1, adding_replicas=(3,),
                                     removing_replicas=(2,))])
        assert fired_image(img) == set()


class TestI19Epochs:
    def test_partition_epoch_skipping_a_step(self) -> None:
        before = base()
        batch = entries(pcr(isr=(1, 2)))
        after = replay_entries(batch, before)
        part = after.topics.by_id[T1].partitions[0]
        bad = replace(after, topics=TopicsImage(by_id={T1: TopicImage(name="foo", id=T1, partitions={
            0: replace(part, partition_epoch=part.partition_epoch + 1)})}, by_name={"foo": T1}))
        vs = check_step(before, batch, bad)
        assert [(v.invariant, v.partition_id) for v in vs] == [("I19", 0)]

    @pytest.mark.parametrize("field", ["partition_epoch", "leader_epoch"])
    def test_a_replay_skipping_an_epoch_is_found_by_the_tracker_that_replayed_it(
            self, monkeypatch: pytest.MonkeyPatch, field: str) -> None:
        # The tracker checks a batch against its own replay (the trace): I19 there guards the replay's merge. A
        # merge that moves an epoch by two on a leader change must still be reported, batch of leader moves or not.
        merge = PartitionRegistration.merge

        def skipping(part: PartitionRegistration, record: PartitionChangeRecord) -> PartitionRegistration:
            new = merge(part, record)
            return replace(new, **{field: getattr(new, field) + 1}) if record.leader == 2 else new

        monkeypatch.setattr(PartitionRegistration, "merge", skipping)
        tracker = InvariantTracker(base(), image_checks=False, history_checks=False, step_names=["I19"])
        assert tracker.feed_batch(entries(pcr(isr=(1, 2, 3)), pcr(leader=1))) == []
        vs = tracker.feed_batch(entries(pcr(isr=(1, 2)), pcr(leader=2), pcr(isr=(2, 3)), first=200))
        assert [(v.invariant, v.partition_id, v.offset) for v in vs] == [("I19", 0, 202)]

    def test_new_incarnation_with_a_lower_epoch(self) -> None:
        vs = step(base(), brcr(1, fenced=1), rbr(1, D1, fenced=True, epoch=50, incarnation=Uuid(8, 1)))
        assert [(v.invariant, v.broker_id) for v in vs] == [("I19", 1)]

    def test_look_alikes(self) -> None:
        assert fired_all(base(), pcr(leader=1)) == set()  # same leader: leader epoch +1 (KAFKA-15021)
        # A same-incarnation re-registration keeps its epoch (3.9, KAFKA-16952)...
        assert fired_all(base(), rbr(2, D2)) == set()
        # ...and 3.7.1/3.8 gave it a new, higher one (KAFKA-16757): not an error either.
        assert fired_all(base(), rbr(2, D2, epoch=500)) == set()


class TestI20SnapshotAgreesWithReplay:
    def test_difference_in_directories(self) -> None:
        replayed = base()
        part = replayed.topics.by_id[T1].partitions[0]
        snapshot = replace(replayed, topics=TopicsImage(by_id={T1: TopicImage(name="foo", id=T1, partitions={
            0: replace(part, directories=(D1B, D2, D3))})}, by_name={"foo": T1}))
        (v,) = snapshot_differences(snapshot, replayed)
        assert (v.invariant, v.partition_id) == ("I20", 0)
        assert "directories" in v.message

    def test_broker_and_feature_differences(self) -> None:
        replayed = base()
        snapshot = replay_records([brcr(1, D1), fl(22)], replayed)
        assert {(v.invariant, v.broker_id) for v in snapshot_differences(snapshot, replayed)} == {
            ("I20", 1), ("I20", None)}

    def test_topic_partition_and_config_differences(self) -> None:
        replayed = base()
        snapshot = replay_records([prec([2], [D2], pid=1), TopicRecord(name="bar", topic_id=D3),
                                   ConfigRecord(resource_type=2, resource_name="foo", name="x", value="1")], replayed)
        found = {(v.topic_id, v.partition_id) for v in snapshot_differences(snapshot, replayed)}
        assert found == {(T1, 1), (D3, None), (None, None)}
        assert {v.invariant for v in snapshot_differences(replayed, snapshot)} == {"I20"}

    def test_look_alike_provenance_only(self) -> None:
        tracker = InvariantTracker(base())
        assert tracker.check_snapshot(replace(base(), last_offset=12345)) == []


class TestI21DirectoryRegisteredByItsBroker:
    def test_directory_of_another_broker(self) -> None:
        tracker = InvariantTracker()
        vs = tracker.feed_batch(entries(fl(21), rbr(1, D1, D1B), rbr(2, D2),
                                        TopicRecord(name="foo", topic_id=T1), prec([1, 2], [D2, D2], isr=[2])))
        assert [(v.invariant, v.broker_id, v.directory) for v in vs] == [("I21", 1, D2)]
        assert "only broker(s) [2]" in vs[0].message

    def test_never_registered_directory(self) -> None:
        img = replay_records([pcr(leader=2, isr=(2, 3))], base())
        tracker = InvariantTracker(img)
        vs = tracker.feed_batch(entries(pcr(directories=(STRANGER, D2, D3))))
        assert [(v.invariant, v.directory) for v in vs] == [("I21", STRANGER)]
        assert "no broker ever registered it" in vs[0].message

    def test_look_alikes(self) -> None:
        tracker = InvariantTracker()
        assert tracker.feed_batch(entries(fl(21), rbr(1, D1, D1B), rbr(2, D2), brcr(1, fenced=-1),
                                          brcr(2, fenced=-1), TopicRecord(name="foo", topic_id=T1),
                                          prec([1, 2], [UNASSIGNED, D2]))) == []
        # Assigned to D1B, then D1B fails: the replica is offline, and the directory was broker 1's once.
        assert tracker.feed_batch(entries(pcr(directories=(D1B, D2)), first=200)) == []
        assert tracker.feed_batch(entries(pcr(isr=(2,), leader=2), brcr(1, D1), first=300)) == []
        assert D1B in tracker.directories_ever_registered(1)
        # Assignments back and forth into the offline (but once registered) directory of a demoted replica.
        vs = tracker.feed_batch(entries(pcr(directories=(D1, D2)), pcr(directories=(D1B, D2)), first=400))
        assert vs == []


# -------------------------------------------------------------------------------------------------------------
# The tracker's plumbing


class TestTracker:
    def test_feed_groups_entries_by_batch(self) -> None:
        tracker = InvariantTracker(base())
        records: list[Record] = [pcr(isr=(2, 3), leader=2), brcr(1, D1B)]
        batch = [LogEntry(offset=50 + i, record=r, batch_base_offset=50) for i, r in enumerate(records)]
        assert tracker.feed(batch[0]) == []
        assert tracker.feed(batch[1]) == []  # same batch: nothing checked yet, and I16 is satisfied
        assert tracker.feed(LogEntry(offset=52, record=NoOpRecord(), batch_base_offset=52)) == []
        assert tracker.image.cluster.brokers[1].directories == (D1B,)
        assert tracker.end_batch() == []
        assert tracker.image.last_offset == 52

    def test_split_batch_shows_the_i16_breach(self) -> None:
        tracker = InvariantTracker(base())
        assert tracker.feed_batch(entries(brcr(1, D1B))) != []

    def test_transactions_span_batches_and_aborts_vanish(self) -> None:
        tracker = InvariantTracker(base())
        assert tracker.feed_batch(entries(BeginTransactionRecord(), prec([2], [UNASSIGNED], pid=1), first=30)) == []
        assert 1 not in tracker.image.topics.by_id[T1].partitions  # still pending
        vs = tracker.feed_batch(entries(EndTransactionRecord(), first=32))
        assert [v.invariant for v in vs] == ["I11"]  # checked when committed
        assert 1 in tracker.image.topics.by_id[T1].partitions
        tracker.feed_batch(entries(BeginTransactionRecord(), prec([2], [UNASSIGNED], pid=2), first=40))
        assert tracker.feed_batch(entries(AbortTransactionRecord(), first=42)) == []
        assert 2 not in tracker.image.topics.by_id[T1].partitions

    def test_transaction_errors_are_faults(self) -> None:
        tracker = InvariantTracker(base())
        with pytest.raises(ReplayFault, match="offset 81"):
            tracker.feed_batch(entries(BeginTransactionRecord(), BeginTransactionRecord(), first=80))
        with pytest.raises(ReplayFault, match="offset 90"):
            InvariantTracker(base()).feed_batch(entries(EndTransactionRecord(), first=90))

    def test_replay_fault_is_raised_not_reported(self) -> None:
        tracker = InvariantTracker(base())
        bad = brcr(1, fenced=1, epoch=5)
        with pytest.raises(ReplayFault) as info:
            tracker.feed_batch(entries(bad, first=70))
        assert info.value.offset == 70
        assert "offset 70" in str(info.value) and repr(bad) in str(info.value)
        assert tracker.image.same_state(base())

    def test_image_checks_run_on_touched_partitions(self) -> None:
        tracker = InvariantTracker(base())
        vs = tracker.feed_batch(entries(pcr(isr=())))
        assert {v.invariant for v in vs} == {"I15", "I14"}  # leader 1 left outside an empty ISR

    def test_replica_demoted(self) -> None:
        assert replica_demoted(partition([1, 2], [D1, D2], isr=[2], leader=2), 1)
        assert replica_demoted(partition([1], [D1], isr=[1], leader=NO_LEADER), 1)
        assert not replica_demoted(partition([1, 2], [D1, D2], isr=[1, 2], leader=2), 1)
        assert not replica_demoted(partition([1], [D1], isr=[1], leader=1), 1)

    def test_step_names_run_only_the_named_step_checks(self) -> None:
        # One batch that breaks I8 (a change adds a directory) and I9 (a registration without LogDirs at 3.9).
        batch = entries(brcr(2, D2, D2B), rbr(4), first=60)
        everything = InvariantTracker(base(), image_checks=False, history_checks=False).feed_batch(batch)
        assert {v.invariant for v in everything} == {"I8", "I9"}
        only = InvariantTracker(base(), image_checks=False, history_checks=False, step_names=("I8",))
        assert only.feed_batch(batch) == [v for v in everything if v.invariant == "I8"]
        with pytest.raises(KeyError):
            InvariantTracker(base(), step_names=("I99",))
