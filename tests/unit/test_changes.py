"""Incremental replay over a keyed store (``jbod_model.changes``): the row changes of each step, rule by rule, and
the reads a batch makes (a batch must read the keys it touches, not the cluster)."""

from __future__ import annotations

import pytest
from test_image_replay import D1, D1B, D2, D3, T1, T2, cluster, epoch_of, fl, part, pcr, rbr, topic

from jbod_model.changes import DictImageStore, IncrementalReplayer, RangeSet, Step, replay_incrementally
from jbod_model.directory_id import LOST
from jbod_model.errors import InputError, ReplayFault
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import (
    AbortTransactionRecord,
    BeginTransactionRecord,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    EndTransactionRecord,
    NoOpRecord,
    Record,
    RemoveTopicRecord,
    UnregisterBrokerRecord,
)
from jbod_model.replay import Replayer, replay_entries
from jbod_model.replicas import OfflineReason
from jbod_model.uuid import Uuid


def entries(records: list[Record], first: int = 0) -> list[LogEntry]:
    return [LogEntry(offset=first + i, record=r, timestamp=1000 + first + i) for i, r in enumerate(records)]


def run(store: DictImageStore, records: list[Record], first: int = 0) -> list[Step]:
    steps, pending = replay_incrementally(store, entries(records, first))
    assert pending == ()
    return steps


def loaded(*extra: Record) -> tuple[DictImageStore, int]:
    """A store holding brokers 1-3 (D1, D1B on broker 1), topic foo with partitions 0 (on 1,2 in D1,D2) and 1 (on
    2,3), topic bar with partition 0 on 3."""
    records = [fl(), rbr(1, D1, D1B), rbr(2, D2), rbr(3, D3), topic(),
               part([1, 2], [D1, D2]), part([2, 3], [D2, D3], pid=1),
               topic("bar", T2), part([3], [D3], tid=T2), *extra]
    store = DictImageStore()
    run(store, records)
    store.reads.clear()
    return store, len(records)


class TestRangeSet:
    def test_contiguous_ids_are_one_range(self) -> None:
        s = RangeSet.of([2, 0, 1, 5, 4])
        assert s.ranges() == ((0, 3), (4, 6))
        s.add(3)
        assert s.ranges() == ((0, 6),)
        assert list(s) == [0, 1, 2, 3, 4, 5] and len(s) == 6 and 3 in s and 6 not in s

    def test_ranges_round_trip_and_merge(self) -> None:
        s = RangeSet([(0, 3), (10, 12), (2, 5)])
        assert s.ranges() == ((0, 5), (10, 12))
        assert RangeSet(s.ranges()) == s

    def test_negative_ids_are_refused(self) -> None:
        with pytest.raises(InputError):
            RangeSet.of([-1])


class TestRowChanges:
    def test_a_new_partition_creates_its_replica_rows(self) -> None:
        store, n = loaded()
        [step] = run(store, [part([1, 3], [D1B, D3], pid=2)], n)
        assert [(p.partition_id, p.old, p.topic_name) for p in step.partitions] == [(2, None, "foo")]
        assert [(r.key[2], r.old, r.new.directory if r.new else None) for r in step.replicas] == \
            [(1, None, D1B), (3, None, D3)]
        assert store.topics[T1].partition_ids == ((0, 3),)

    def test_a_leader_change_changes_the_partition_but_no_replica_row(self) -> None:
        store, n = loaded()
        [step] = run(store, [pcr(leader=2)], n)
        assert len(step.partitions) == 1 and step.replicas == ()

    def test_a_failed_directory_takes_exactly_its_replicas_offline(self) -> None:
        store, n = loaded(part([1, 3], [D1B, D3], pid=2))
        [step] = run(store, [BrokerRegistrationChangeRecord(version=2, broker_id=1, broker_epoch=epoch_of(1),
                                                            log_dirs=(D1B,))], n + 1)
        assert [c.key for c in step.brokers] == [1]
        assert step.partitions == ()
        [change] = step.replicas
        assert change.key == (T1, 0, 1)
        assert change.old is not None and not change.old.offline
        assert change.new is not None and change.new.offline_reason is OfflineReason.DIRECTORY_OFFLINE
        assert change.topic_name == "foo"

    def test_a_fence_takes_every_replica_of_the_broker_offline(self) -> None:
        store, n = loaded()
        [step] = run(store, [BrokerRegistrationChangeRecord(version=0, broker_id=2, broker_epoch=epoch_of(2),
                                                            fenced=1)], n)
        assert sorted(r.key for r in step.replicas) == [(T1, 0, 2), (T1, 1, 2)]
        assert {r.new.offline_reason for r in step.replicas if r.new} == {OfflineReason.BROKER_FENCED}

    def test_a_controlled_shutdown_flag_alone_reads_no_partition(self) -> None:
        store, n = loaded()
        [step] = run(store, [BrokerRegistrationChangeRecord(version=1, broker_id=2, broker_epoch=epoch_of(2),
                                                            in_controlled_shutdown=1)], n)
        assert [c.key for c in step.brokers] == [2] and step.replicas == ()
        assert store.reads.get("partition", 0) == 0 and store.reads.get("broker_partitions", 0) == 0

    def test_unregistering_a_broker_marks_its_replicas_unregistered(self) -> None:
        store, n = loaded()
        [step] = run(store, [UnregisterBrokerRecord(broker_id=3, broker_epoch=epoch_of(3))], n)
        assert step.brokers[0].new is None
        assert sorted(r.key for r in step.replicas) == [(T1, 1, 3), (T2, 0, 3)]
        assert {r.new.offline_reason for r in step.replicas if r.new} == {OfflineReason.BROKER_UNREGISTERED}

    def test_deleting_a_topic_removes_its_partitions_replicas_index_and_name(self) -> None:
        store, n = loaded()
        [step] = run(store, [RemoveTopicRecord(topic_id=T1)], n)
        assert [(c.key, c.old, c.new) for c in step.topics] == [(T1, "foo", None)]
        assert sorted(p.partition_id for p in step.partitions if p.new is None) == [0, 1]
        assert len(step.replicas) == 4 and all(r.new is None for r in step.replicas)
        assert T1 not in store.topics and "foo" not in store.topic_names
        assert all(k[0] != T1 for keys in store.broker_partitions.values() for k in keys)

    def test_a_reassignment_moves_the_index(self) -> None:
        store, n = loaded()
        [step] = run(store, [pcr(pid=1, replicas=(3, 1), isr=(3, 1), leader=3, directories=(D3, LOST))], n)
        assert sorted(r.key[2] for r in step.replicas) == [1, 2]  # broker 3 keeps its replica in D3
        moved = {r.key[2]: r for r in step.replicas}
        assert moved[2].new is None and moved[1].old is None
        assert moved[1].new is not None and moved[1].new.offline_reason is OfflineReason.DIRECTORY_LOST
        assert (T1, 1) in store.broker_partitions[1] and (T1, 1) not in store.broker_partitions[2]
        assert store.broker_partitions[1][(T1, 1)] == LOST and store.broker_partitions[3][(T1, 1)] == D3

    def test_a_replica_moved_to_another_directory_is_reached_there_from_the_index_alone(self) -> None:
        store, n = loaded()
        # Broker 1's replica of foo-0 moves from D1 to D1B (an AssignReplicasToDirs, as the controller writes it).
        [move] = run(store, [pcr(pid=0, directories=(D1B, D2))], n)
        assert [(r.key, r.old.directory if r.old else None, r.new.directory if r.new else None)
                for r in move.replicas] == [((T1, 0, 1), D1, D1B)]
        assert store.broker_partitions[1] == {(T1, 0): D1B} and store.broker_partitions[2][(T1, 0)] == D2
        store.reads.clear()
        # D1B fails (broker 1 re-registers with D1 alone): the replica in D1B goes offline, read from the index.
        [failure] = run(store, [BrokerRegistrationChangeRecord(version=2, broker_id=1, broker_epoch=epoch_of(1),
                                                               log_dirs=(D1,))], n + 1)
        assert [(r.key, r.new.offline_reason if r.new else None) for r in failure.replicas] == \
            [((T1, 0, 1), OfflineReason.DIRECTORY_OFFLINE)]
        assert store.reads.get("partition", 0) == 0 and store.reads.get("broker_partitions", 0) == 1

    def test_a_config_is_stored_and_dropped_with_its_topic(self) -> None:
        store, n = loaded()
        [step] = run(store, [ConfigRecord(resource_type=2, resource_name="foo", name="min.insync.replicas",
                                          value="2")], n)
        assert step.is_empty() and store.configs[(2, "foo")] == {"min.insync.replicas": "2"}
        run(store, [RemoveTopicRecord(topic_id=T1)], n + 1)
        assert (2, "foo") not in store.configs

    def test_a_noop_is_an_empty_step_that_moves_the_offset(self) -> None:
        store, n = loaded()
        [step] = run(store, [NoOpRecord()], n)
        assert step.is_empty() and step.offset == n and step.timestamp == 1000 + n
        assert store.last_offset() == n


class TestReads:
    def test_a_partition_change_reads_one_partition_and_no_topic_list(self) -> None:
        store, n = loaded()
        run(store, [pcr(pid=1, isr=(2,), leader=2)], n)
        assert store.reads.get("partition") == 1
        assert store.reads.get("topic_scan", 0) == 0 and store.reads.get("broker_partitions", 0) == 0

    def test_a_leader_or_isr_change_reads_no_broker(self) -> None:
        # The single-record fast path: the replica states cannot change when the replicas and directories stay.
        store, n = loaded()
        [step] = run(store, [pcr(pid=1, isr=(2,), leader=2)], n)
        assert len(step.partitions) == 1 and step.replicas == ()
        assert store.reads.get("broker", 0) == 0


class TestPartitionChangeAlone:
    """``IncrementalReplayer.replay_partition_change``: a change that moves no replica, replayed without its step."""

    def test_a_leader_and_isr_change_gives_the_registration_replay_gives_and_writes_it(self) -> None:
        store, n = loaded()
        [entry] = entries([pcr(pid=1, isr=(2,), leader=2)], n)
        replayer = IncrementalReplayer(store)
        taken = replayer.replay_partition_change(entry)
        [step] = run(loaded()[0], [entry.record], n)
        assert taken == ("foo", step.partitions[0].new)
        assert taken[1].leader == 2 and taken[1].isr == (2,) and taken[1].leader_epoch == 1
        assert replayer.writes().partitions == {(T1, 1): taken[1]} and replayer.last_offset == n
        # The next change on the partition starts from this one (the batch's pending write), not from the store.
        second = replayer.replay_partition_change(entries([pcr(pid=1, isr=(2, 3))], n + 1)[0])
        assert second is not None and second[1].isr == (2, 3) and second[1].partition_epoch == 2
        assert second[1].leader_epoch == 1

    @pytest.mark.parametrize("record", [
        pcr(replicas=(1, 3), directories=(D1, D3)),   # a reassignment moves replicas
        pcr(directories=(D1B, D2)),                    # a move between disks
        pcr(adding_replicas=(3,)),
        pcr(removing_replicas=(2,)),
        pcr(pid=7, isr=(1,)),                          # an unknown partition: replay() says what is wrong
        pcr(tid=Uuid(5, 5), isr=(1,)),                 # an unknown topic
        part([1, 2], [D1, D2], pid=5),                 # not a change
    ])
    def test_anything_else_is_left_to_replay_and_nothing_is_written(self, record: Record) -> None:
        store, n = loaded()
        replayer = IncrementalReplayer(store)
        [entry] = entries([record], n)
        assert replayer.replay_partition_change(entry) is None
        assert replayer.writes().partitions == {} and replayer.last_offset == n - 1

    def test_a_change_inside_a_metadata_transaction_is_left_to_replay(self) -> None:
        store, n = loaded()
        replayer = IncrementalReplayer(store)
        begin, change = entries([BeginTransactionRecord(name="t"), pcr(isr=(1,))], n)
        assert replayer.replay(begin) is None
        assert replayer.replay_partition_change(change) is None
        assert replayer.writes().partitions == {}


class TestNoOpAlone:
    """``IncrementalReplayer.replay_noop``: a NoOpRecord replayed without its step."""

    def test_a_noop_moves_the_log_offset_and_writes_nothing_else(self) -> None:
        store, n = loaded()
        replayer = IncrementalReplayer(store)
        [entry] = entries([NoOpRecord()], n)
        assert replayer.replay_noop(entry)
        assert replayer.last_offset == n and replayer.writes().partitions == {} and replayer.writes().brokers == {}

    def test_a_noop_inside_a_metadata_transaction_or_another_record_is_left_to_replay(self) -> None:
        store, n = loaded()
        replayer = IncrementalReplayer(store)
        change, begin, noop = entries([pcr(isr=(1,)), BeginTransactionRecord(name="t"), NoOpRecord()], n)
        assert not replayer.replay_noop(change)
        assert replayer.replay(begin) is None
        assert not replayer.replay_noop(noop)
        assert replayer.last_offset == n - 1


class TestTransactions:
    def test_a_transaction_is_one_step_at_its_end_even_across_batches(self) -> None:
        store, n = loaded()
        first = entries([BeginTransactionRecord(name="t"), pcr(leader=2)], n)
        steps, pending = replay_incrementally(store, first)
        assert steps == [] and [e.offset for e in pending] == [n, n + 1]
        assert store.last_offset() == n - 1  # nothing visible yet
        steps, pending = replay_incrementally(store, entries([pcr(pid=1, leader=3), EndTransactionRecord()], n + 2),
                                              pending)
        [step] = steps
        assert pending == () and step.offset == n + 3 and len(step.entries) == 4 and len(step.partitions) == 2

    def test_an_abort_discards_the_pending_records(self) -> None:
        store, n = loaded()
        records = [BeginTransactionRecord(name="t"), RemoveTopicRecord(topic_id=T1), AbortTransactionRecord()]
        [step] = run(store, records, n)
        assert step.is_empty() and step.offset == n + 2 and [e.offset for e in step.aborted] == [n, n + 1]
        assert T1 in store.topics

    def test_faults_match_the_replayer(self) -> None:
        store, n = loaded()
        with pytest.raises(ReplayFault, match="END_TRANSACTION_RECORD without a BeginTransactionRecord") as info:
            run(store, [EndTransactionRecord()], n)
        assert info.value.offset == n
        with pytest.raises(ReplayFault, match="Unable to find partition") as info:
            run(store, [pcr(pid=9, leader=1)], n)
        assert info.value.offset == n


class TestSnapshot:
    def test_a_snapshot_loads_as_one_step_at_its_end_offset(self) -> None:
        records = cluster(part([1, 2, 3], [D1, D2, D3]))
        store = DictImageStore()
        replayer = IncrementalReplayer(store)
        step = replayer.load_snapshot(entries(records), end_offset=500)
        store.apply(replayer.writes())
        assert step.offset == 499 and step.snapshot and len(step.replicas) == 3
        assert store.image().same_state(replay_entries(entries(records)))
        assert store.last_offset() == 499

    def test_a_snapshot_older_than_the_image_is_refused(self) -> None:
        store, n = loaded()
        with pytest.raises(InputError, match="older than the image"):
            IncrementalReplayer(store).load_snapshot(entries(cluster()), end_offset=n - 1)
        with pytest.raises(InputError, match="older than the image"):
            Replayer(replay_entries(entries(cluster(), 10))).load_snapshot(entries(cluster()), end_offset=5)


T3 = Uuid.from_string("TESTTOPIC3AAAAAAAAAAAA")
#: A snapshot of the cluster of ``loaded()`` later on: broker 1 lost D1B, broker 3 is gone, foo lost partition 1, bar
#: was deleted and a new "bar" created, a config key went and another came.
SNAPSHOT = (fl(), rbr(1, D1), rbr(2, D2), topic(), part([1, 2], [D1, D2]), topic("bar", T3),
            part([1], [D1], tid=T3), ConfigRecord(resource_type=2, resource_name="foo", name="b", value="2"))


class TestSnapshotOverAnImage:
    """``MetadataLoader`` loading a newer snapshot into a non-empty image (``MetadataDelta.finishSnapshot``): a
    stream that fell behind the log's start re-bootstraps from the snapshot."""

    def loaded(self) -> tuple[DictImageStore, int]:
        return loaded(ConfigRecord(resource_type=2, resource_name="foo", name="a", value="1"))

    def test_the_image_becomes_the_snapshots_and_the_step_is_the_difference(self) -> None:
        store, n = self.loaded()
        before = store.image()
        replayer = IncrementalReplayer(store)
        step = replayer.load_snapshot(entries(list(SNAPSHOT)), end_offset=n + 50)
        store.apply(replayer.writes())
        fresh = replay_entries(entries(list(SNAPSHOT)))
        assert store.image().same_state(fresh) and store.last_offset() == n + 49
        assert step.offset == n + 49 and step.snapshot and step.aborted == ()
        assert [(b.key, b.old is not None, b.new is not None) for b in step.brokers] == [(1, True, True),
                                                                                          (3, True, False)]
        assert step.brokers[0].new is not None and step.brokers[0].new.directories == (D1,)
        assert {(t.key, t.old, t.new) for t in step.topics} == {(T2, "bar", None), (T3, None, "bar")}
        # foo-0 is the same in both: no row. foo-1 and bar (T2) went, the new bar came.
        assert {(p.topic_id, p.partition_id, p.old is None, p.new is None) for p in step.partitions} == \
            {(T1, 1, False, True), (T2, 0, False, True), (T3, 0, True, False)}
        assert {(r.key, r.new is None) for r in step.replicas} == \
            {((T1, 1, 2), True), ((T1, 1, 3), True), ((T2, 0, 3), True), ((T3, 0, 1), False)}
        assert store.broker_partitions == {1: {(T1, 0): D1, (T3, 0): D1}, 2: {(T1, 0): D2}}
        # The plain replay agrees, from the same old image.
        replayer_image = Replayer(before)
        replayer_image.load_snapshot(entries(list(SNAPSHOT)), end_offset=n + 50)
        assert replayer_image.image.same_state(fresh) and replayer_image.image.last_offset == n + 49

    def test_records_the_old_image_would_refuse_are_checked_against_the_snapshot_only(self) -> None:
        """The snapshot re-creates topic id T2 under another name and gives D3 (broker 3's) to broker 2: replayed
        onto the old image those records are faults; a snapshot replaces the image whole."""
        store, n = self.loaded()
        snapshot = [fl(), rbr(2, D2, D3), topic("renamed", T2), part([2], [D3], tid=T2), topic("foo", T3)]
        with pytest.raises(ReplayFault):
            replay_entries(entries(snapshot), store.image())
        replayer = IncrementalReplayer(store)
        step = replayer.load_snapshot(entries(snapshot), end_offset=n + 1)
        store.apply(replayer.writes())
        assert store.image().same_state(replay_entries(entries(snapshot)))
        assert {(t.key, t.old, t.new) for t in step.topics} == {(T1, "foo", None), (T2, "bar", "renamed"),
                                                                (T3, None, "foo")}
        assert store.topic_names == {"renamed": T2, "foo": T3}

    def test_an_open_transaction_is_dropped(self) -> None:
        store, n = self.loaded()
        pending = entries([BeginTransactionRecord(name="t"), RemoveTopicRecord(topic_id=T1)], n)
        replayer = IncrementalReplayer(store, pending)
        step = replayer.load_snapshot(entries(list(SNAPSHOT)), end_offset=n + 50)
        assert step.aborted == tuple(pending) and replayer.pending_transaction() == ()
        plain = Replayer(store.image())
        for e in pending:
            plain.replay(e)
        assert plain.load_snapshot(entries(list(SNAPSHOT)), end_offset=n + 50) == tuple(pending)
        assert not plain.in_transaction and plain.image.same_state(replay_entries(entries(list(SNAPSHOT))))
        # Records after the snapshot replay on its state.
        assert replayer.replay(entries([RemoveTopicRecord(topic_id=T3)], n + 50)[0]) is not None
