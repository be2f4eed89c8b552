"""R8 (PartitionChangeBuilder directory semantics), R9 (elections and ISR rules), R2.4 (LeaderAcceptor): the port
of PartitionChangeBuilder checked on its own, as Kafka's PartitionChangeBuilderTest does, plus properties."""

from __future__ import annotations

import pytest
from controller_support import MV_3_5, MV_3_6, MV_3_7_IV1, MV_3_7_IV2, MV_3_9, MV_4_0
from hypothesis import given, settings
from hypothesis import strategies as st

from jbod_model.controller.partition_change import (
    Election,
    LeaderAcceptor,
    PartitionChangeBuilder,
    PartitionReassignmentReplicas,
    PartitionReassignmentRevert,
    change_record_is_no_op,
)
from jbod_model.directory_id import LOST, MIGRATING, UNASSIGNED
from jbod_model.image import BrokerRegistration, ClusterImage, PartitionRegistration
from jbod_model.metadata_version import MetadataVersion
from jbod_model.records.metadata import NO_LEADER_CHANGE, PartitionChangeRecord
from jbod_model.uuid import Uuid

TOPIC = Uuid.from_string("FbrrdcfiR-KC2CPSTHaJrg")
D1, D2, D3, D4 = (Uuid.from_string(f"TESTBROKER0000{i}DIRAAAA") for i in (1, 2, 3, 4))
DX = Uuid.from_string("TESTBROKER00001DIRXAAA")


class FixedDefaultDir:
    """A DefaultDirProvider that answers UNASSIGNED for everyone (a multi-dir cluster)."""

    def default_dir(self, broker_id: int) -> Uuid:
        return UNASSIGNED


def partition(replicas: tuple[int, ...] = (1, 2, 3), isr: tuple[int, ...] | None = None, leader: int = 1,
              directories: tuple[Uuid, ...] | None = None, **kwargs: object) -> PartitionRegistration:
    return PartitionRegistration(replicas=replicas, isr=replicas if isr is None else isr, leader=leader,
                                 directories=directories if directories is not None else (D1, D2, D3)[:len(replicas)],
                                 leader_epoch=5, partition_epoch=7, **kwargs)


def builder(part: PartitionRegistration, mv: int = MV_3_9, acceptable: set[int] | None = None
            ) -> PartitionChangeBuilder:
    ok = {1, 2, 3, 4} if acceptable is None else acceptable
    return PartitionChangeBuilder(part, TOPIC, 0, lambda b: b in ok, MetadataVersion(mv), 1) \
        .set_default_dir_provider(FixedDefaultDir())


# -- R8 ----------------------------------------------------------------------------------------------------------


def test_r8_2_directories_are_emitted_only_when_they_change() -> None:
    part = partition()
    assert builder(part).set_directory(2, D2).build() is None
    record = builder(part).set_directory(2, DX).build()
    assert record == PartitionChangeRecord(version=1, topic_id=TOPIC, partition_id=0, directories=(D1, DX, D3))


def test_r8_2_no_directories_below_3_7_iv2() -> None:
    for mv in (MV_3_6, MV_3_7_IV1):
        assert builder(partition(directories=(MIGRATING,) * 3), mv).set_directory(2, DX).build() is None


def test_r8_3_an_unset_default_dir_provider_fails_even_when_every_replica_has_a_directory() -> None:
    b = PartitionChangeBuilder(partition(), TOPIC, 0, lambda _: True, MetadataVersion(MV_3_9), 1)
    with pytest.raises(AssertionError, match="DefaultDirProvider is not set"):
        b.set_directory(1, DX).build()
    # Below 3.7-IV2 directories are never computed, so the provider is never asked.
    assert PartitionChangeBuilder(partition(), TOPIC, 0, lambda _: True, MetadataVersion(MV_3_6), 1) \
        .set_target_isr([1, 2]).build() is not None


def test_r8_4_reordering_replicas_permutes_directories_and_new_replicas_get_the_default() -> None:
    record = builder(partition()).set_target_replicas([3, 1, 2]).build()
    assert record is not None and record.replicas == (3, 1, 2) and record.directories == (D3, D1, D2)
    record = builder(partition()).set_target_replicas([1, 4]).set_target_isr([1]).build()
    assert record is not None and record.directories == (D1, UNASSIGNED)
    assert record.leader == 1  # R9.4: dropping replicas bumps the leader epoch by "re-electing" the leader


def test_r8_5_a_directories_only_record_is_a_change_and_bumps_only_the_partition_epoch() -> None:
    part = partition()
    record = builder(part).set_directory(1, DX).build()
    assert record is not None and not change_record_is_no_op(record)
    merged = part.merge(record)
    assert (merged.leader_epoch, merged.partition_epoch) == (part.leader_epoch, part.partition_epoch + 1)
    assert change_record_is_no_op(PartitionChangeRecord(topic_id=TOPIC, partition_id=0))
    assert not change_record_is_no_op(PartitionChangeRecord(topic_id=TOPIC, partition_id=0, directories=()))


def test_r8_6_all_migrating_partitions_stay_migrating_through_changes() -> None:
    part = partition(directories=(MIGRATING,) * 3)
    record = builder(part).set_target_isr([1, 2]).build()
    assert record is not None and record.directories is None and record.isr == (1, 2)
    record = builder(part).set_target_replicas([2, 1, 3]).build()
    assert record is not None and record.directories is None  # a permutation of MIGRATING is the same list


def test_r8_record_version_follows_metadata_version() -> None:
    for mv, version in ((MV_3_6, 0), (MV_3_7_IV2, 1), (MV_4_0, 2)):
        record = builder(partition(), mv).set_target_isr([1, 2]).build()
        assert record is not None and record.version == version


# -- R9 / R2.4 ---------------------------------------------------------------------------------------------------


def test_r9_2_the_current_leader_is_kept_while_acceptable() -> None:
    record = builder(partition(leader=2)).set_target_isr([1, 2]).build()
    assert record is not None and record.leader == NO_LEADER_CHANGE and record.isr == (1, 2)


def test_r9_2_new_leader_is_the_first_acceptable_isr_member_in_replica_order() -> None:
    record = builder(partition(replicas=(1, 2, 3), isr=(3, 2, 1)), acceptable={2, 3}).set_target_isr([3, 2]).build()
    assert record is not None and record.leader == 2 and record.isr == (3, 2)


def test_r9_2_unclean_election_forces_isr_and_recovering() -> None:
    part = partition(isr=(1,), leader=1)
    record = builder(part, acceptable={3}).set_election(Election.UNCLEAN).set_target_isr([]).build()
    assert record is not None
    assert (record.leader, record.isr, record.leader_recovery_state) == (3, (3,), 1)
    # ONLINE: nobody eligible → no leader, and the ISR keeps its last member (R9.3).
    record = builder(part, acceptable={3}).set_target_isr([]).build()
    assert record is not None and record.leader == -1 and record.isr is None


def test_r9_2_preferred_election() -> None:
    record = builder(partition(leader=2)).set_election(Election.PREFERRED).build()
    assert record is not None and record.leader == 1
    assert builder(partition(leader=2), acceptable={2, 3}).set_election(Election.PREFERRED).build() is None


def test_r9_3_isr_never_becomes_empty_without_elr() -> None:
    part = partition(isr=(1,))
    record = builder(part, acceptable=set()).set_target_isr([]).build()
    assert record is not None and record.isr is None and record.leader == -1


def test_r9_4_leader_epoch_bump_on_isr_shrink_only_before_3_6() -> None:
    record = builder(partition(), MV_3_6).set_target_isr([1, 2]).build()
    assert record is not None and record.leader == NO_LEADER_CHANGE
    record = builder(partition(), MV_3_5).set_target_isr([1, 2]).build()
    assert record is not None and record.leader == 1  # KAFKA-15021: ISR shrink bumped the leader epoch
    record = builder(partition(), MV_3_5).set_target_isr([1, 2, 3]).build()
    assert record is None


def test_r2_4_leader_acceptor_requires_the_replica_directory_to_be_online() -> None:
    cluster = ClusterImage({
        1: BrokerRegistration(id=1, epoch=1, incarnation_id=Uuid(1, 1), fenced=False, directories=(D1,)),
        2: BrokerRegistration(id=2, epoch=2, incarnation_id=Uuid(1, 2), fenced=False, directories=(D2,)),
        3: BrokerRegistration(id=3, epoch=3, incarnation_id=Uuid(1, 3), fenced=False, directories=()),
        4: BrokerRegistration(id=4, epoch=4, incarnation_id=Uuid(1, 4), fenced=True, directories=(D4,)),
    })
    part = PartitionRegistration(replicas=(1, 2, 3, 4), directories=(DX, D2, DX, D4), isr=(1, 2, 3, 4), leader=1)
    acceptor = LeaderAcceptor(cluster, part)
    # 1: DX is not online; 2: online; 3: registration without dirs → everything online; 4: fenced.
    assert [acceptor(b) for b in (1, 2, 3, 4)] == [False, True, True, False]
    lost = PartitionRegistration(replicas=(2,), directories=(LOST,), isr=(2,), leader=2)
    assert not LeaderAcceptor(cluster, lost)(2)
    unassigned = PartitionRegistration(replicas=(1,), directories=(UNASSIGNED,), isr=(1,), leader=1)
    assert LeaderAcceptor(cluster, unassigned)(1)


# -- Reassignment helpers ----------------------------------------------------------------------------------------


def test_r11_1_reassignment_replicas_target_then_removing() -> None:
    r = PartitionReassignmentReplicas.of_target([1, 2, 3], [4, 3, 5])
    assert (r.replicas, r.removing, r.adding) == ((4, 3, 5, 1, 2), (1, 2), (4, 5))
    assert r.maybe_complete_reassignment([1, 2, 3]) is None
    done = r.maybe_complete_reassignment([3, 4, 5, 1])
    assert done is not None and (done.replicas, done.isr) == ((4, 3, 5), (3, 4, 5))


def test_r11_3_revert_keeps_current_order_and_marks_unclean() -> None:
    part = partition(replicas=(4, 3, 1, 2), isr=(3, 1), directories=(D4, D3, D1, D2), adding_replicas=(4,),
                     removing_replicas=(1, 2))
    revert = PartitionReassignmentRevert.of(part)
    assert (revert.replicas, revert.isr, revert.unclean) == ((3, 1, 2), (3, 1), False)
    only_adding_in_isr = partition(replicas=(4, 1), isr=(4,), directories=(D4, D1), adding_replicas=(4,),
                                   removing_replicas=(1,))
    revert = PartitionReassignmentRevert.of(only_adding_in_isr)
    assert (revert.replicas, revert.isr, revert.unclean) == ((1,), (1,), True)


# -- Properties --------------------------------------------------------------------------------------------------

DIRS = st.sampled_from([D1, D2, D3, D4, DX, MIGRATING, UNASSIGNED, LOST])


@st.composite
def partitions(draw: st.DrawFn) -> PartitionRegistration:
    replicas = tuple(draw(st.permutations([1, 2, 3, 4]))[:draw(st.integers(1, 4))])
    isr = tuple(r for r in replicas if draw(st.booleans())) or replicas[:1]
    directories = tuple(draw(DIRS) for _ in replicas)
    leader = draw(st.sampled_from([*isr, -1]))
    return PartitionRegistration(replicas=replicas, directories=directories, isr=isr, leader=leader,
                                 leader_epoch=3, partition_epoch=4)


@settings(max_examples=300, deadline=None)
@given(part=partitions(), data=st.data())
def test_property_build_then_merge_is_consistent(part: PartitionRegistration, data: st.DataObject) -> None:
    mv = data.draw(st.sampled_from([MV_3_6, MV_3_7_IV2, MV_3_9]))
    acceptable = set(data.draw(st.lists(st.integers(1, 4))))
    overrides = data.draw(st.dictionaries(st.sampled_from(part.replicas), DIRS))
    target_isr = [r for r in part.isr if data.draw(st.booleans())]
    election = data.draw(st.sampled_from([Election.ONLINE, Election.UNCLEAN]))

    def make(base: PartitionRegistration) -> PartitionChangeBuilder:
        b = builder(base, mv, acceptable).set_election(election).set_target_isr(target_isr)
        for broker, directory in overrides.items():
            b.set_directory(broker, directory)
        return b

    record = make(part).build()
    if record is None:
        return
    merged = part.merge(record)
    assert len(merged.directories) == len(merged.replicas)
    assert merged.isr  # never empty without ELR (R9.3)
    if MetadataVersion(mv).is_directory_assignment_supported():
        targets = [overrides.get(r, part.directory(r)) for r in part.replicas]
        # R1.4: an all-MIGRATING list stays all-MIGRATING; otherwise every override lands positionally.
        for broker, directory in overrides.items():
            assert merged.directory(broker) == (MIGRATING if set(targets) == {MIGRATING} else directory)
    else:
        assert record.directories is None
    if record.leader not in (NO_LEADER_CHANGE, part.leader):
        # A newly elected leader is in the new ISR (an unclean election makes it the whole ISR). Java keeps an
        # unclean "winner" that equals the current leader without touching the ISR, so only new leaders count.
        assert merged.leader == -1 or merged.leader in merged.isr
    assert merged.partition_epoch == part.partition_epoch + 1
