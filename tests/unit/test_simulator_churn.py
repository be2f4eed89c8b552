"""``jbod_model.simulator.churn``: the workload's logs are what Kafka's controller would write.

Every invariant of ``jbod_model.invariants`` holds on them (I1–I21 through :class:`InvariantTracker`, warnings
included: Kafka's controller upholds all of them except in the three situations of docs/simulator.md's known issues,
which the generator never creates); fencing a broker moves its leaderships and ISR memberships away in the same batch,
before the record that fences it (``ReplicationControlManager.handleBrokerFenced``); and generation is deterministic,
a longer run extending a shorter one.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jbod_model.directory_id import LOST
from jbod_model.invariants import InvariantTracker, Violation, replica_demoted
from jbod_model.records.entry import LogEntry, group_batches
from jbod_model.records.metadata import (
    NO_LEADER_CHANGE,
    BrokerRegistrationChangeRecord,
    BrokerRegistrationFencingChange,
    FeatureLevelRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
)
from jbod_model.replay import Replayer, replay_entries
from jbod_model.simulator.churn import ChurnSpec, churn_log
from jbod_model.stream import entry_to_line

#: Entries and digest of the "busy, fencing often" log: what pipelines/synthetic.py wrote before the workload moved
#: here and gained restarts, reassignments and weights.
EXPECTED_BUSY = (2456, "e321cad59173f588")
FENCE, UNFENCE = BrokerRegistrationFencingChange.FENCE, BrokerRegistrationFencingChange.UNFENCE

SPECS = {
    "default": ChurnSpec(),
    "quality tests' cluster": ChurnSpec(brokers=3, dirs_per_broker=2, topics=3, partitions_per_topic=2,
                                            replication_factor=2, operations=40, noop_share=0.2, seed=11),
    "busy, fencing often": ChurnSpec(brokers=5, dirs_per_broker=3, topics=6, partitions_per_topic=8,
                                         replication_factor=3, operations=600, noop_share=0.1, fence_share=0.3,
                                         seed=3),
    "one directory per broker": ChurnSpec(brokers=4, dirs_per_broker=1, replication_factor=3, operations=200,
                                              seed=5),
    "one broker": ChurnSpec(brokers=1, dirs_per_broker=3, replication_factor=1, operations=200,
                                fence_share=0.2, seed=9),
    "larger cluster, default fencing": ChurnSpec(brokers=12, dirs_per_broker=3, topics=20,
                                                     partitions_per_topic=10, replication_factor=3, operations=2000,
                                                     noop_share=0.5, seed=2024),
    "restarts, LOST and reassignments": ChurnSpec(brokers=6, dirs_per_broker=3, topics=5, partitions=53,
                                                  replication_factor=3, operations=1500, noop_share=0.1,
                                                  restart_weight=2, reassign_weight=3, seed=17),
    "the same at metadata.version 4.0": ChurnSpec(brokers=6, dirs_per_broker=3, topics=5, partitions=53,
                                                  replication_factor=3, operations=1500, noop_share=0.1,
                                                  restart_weight=2, reassign_weight=3, seed=17, metadata_version=22),
}


def violations(entries: list[LogEntry]) -> list[Violation]:
    tracker = InvariantTracker()
    found = [v for batch in group_batches(entries) for v in tracker.feed_batch(batch)]
    assert tracker.image.same_state(replay_entries(entries))
    return found


@pytest.mark.parametrize("name", list(SPECS))
def test_the_log_upholds_every_invariant(name: str) -> None:
    entries = churn_log(SPECS[name])
    assert [v.message for v in violations(entries)] == []


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), brokers=st.integers(1, 5), dirs=st.integers(1, 3), rf=st.integers(1, 3),
       fence_share=st.sampled_from([None, 0.0, 0.2, 0.6]), restarts=st.sampled_from([0, 0, 1, 3]),
       reassignments=st.sampled_from([0, 0, 1, 3]), lost_share=st.sampled_from([0.0, 0.5, 1.0]))
def test_generated_logs_uphold_every_invariant(seed: int, brokers: int, dirs: int, rf: int,
                                               fence_share: float | None, restarts: int, reassignments: int,
                                               lost_share: float) -> None:
    spec = ChurnSpec(brokers=brokers, dirs_per_broker=dirs, replication_factor=rf, topics=3,
                     partitions_per_topic=3, operations=120, noop_share=0.1, fence_share=fence_share,
                     restart_weight=restarts, reassign_weight=reassignments, lost_share=lost_share, seed=seed)
    assert [v.message for v in violations(churn_log(spec))] == []


def test_fencing_moves_leadership_and_isr_away_first() -> None:
    """``handleBrokerFenced``: in the batch that fences a broker, PartitionChangeRecords come first and leave it
    neither leader nor in an ISR — except as the last ISR member of a leaderless partition (no ELR)."""
    entries = churn_log(SPECS["busy, fencing often"])
    replayer = Replayer()  # across batches: a transaction may span two
    fences = leaders_moved = 0
    for batch in group_batches(entries):
        before = replayer.image
        image = replayer.replay_all(batch)
        fencing = [e for e in batch if isinstance(e.record, BrokerRegistrationChangeRecord)
                   and e.record.fenced == FENCE]
        if not fencing:
            continue
        fences += 1
        assert len(fencing) == 1 and fencing[0] is batch[-1], "the fencing record closes its batch"
        assert all(isinstance(e.record, PartitionChangeRecord) for e in batch[:-1])
        record = fencing[0].record
        assert isinstance(record, BrokerRegistrationChangeRecord)
        broker = record.broker_id
        assert image.cluster.brokers[broker].fenced
        for _topic, _pid, part in image.topics.partitions():
            assert replica_demoted(part, broker), part
        for e in batch[:-1]:
            assert isinstance(e.record, PartitionChangeRecord)
            old = before.topics.get_partition(e.record.topic_id, e.record.partition_id)
            leaders_moved += int(old is not None and old.leader == broker and e.record.leader != NO_LEADER_CHANGE)
    assert fences >= 5 and leaders_moved >= 5, (fences, leaders_moved)


def test_unfencing_lets_leaderless_partitions_elect() -> None:
    """``handleBrokerUnfenced``: the unfencing record first, then leaderless partitions may elect the broker."""
    entries = churn_log(SPECS["busy, fencing often"])
    kinds: Counter[str] = Counter()
    for batch in group_batches(entries):
        first = batch[0].record
        if isinstance(first, BrokerRegistrationChangeRecord) and first.fenced == UNFENCE:
            kinds["unfence"] += 1
            assert all(isinstance(e.record, PartitionChangeRecord) and e.record.leader == first.broker_id
                       for e in batch[1:])
            kinds["elections"] += len(batch) - 1
    assert kinds["unfence"] >= 5 and kinds["elections"] >= 1, kinds


def test_generation_is_deterministic_and_a_longer_run_extends_a_shorter_one() -> None:
    spec = SPECS["busy, fencing often"]
    entries = churn_log(spec)
    assert churn_log(spec) == entries
    longer = churn_log(replace(spec, operations=spec.operations + 50))
    assert longer[:len(entries)] == entries and len(longer) > len(entries)
    assert [e.offset for e in longer] == list(range(len(longer)))


def test_restarts_replace_or_remove_failed_disks_and_reassignments_complete() -> None:
    """Restarts re-register brokers (a new epoch) after disks failed: replicas on a replaced disk are re-created on
    the new one and rejoin the ISR, replicas on a removed disk become LOST (offline, out of ISR and leadership).
    Reassignments write adding/removing replicas and most complete; some are still in flight at the end."""
    entries = churn_log(SPECS["restarts, LOST and reassignments"])
    image = replay_entries(entries)
    registrations = Counter(e.record.broker_id for e in entries if isinstance(e.record, RegisterBrokerRecord))
    assert max(registrations.values()) > 1
    lost = [e for e in entries if isinstance(e.record, PartitionChangeRecord) and e.record.directories is not None
            and LOST in e.record.directories]
    assert lost
    started = [e for e in entries if isinstance(e.record, PartitionChangeRecord) and e.record.adding_replicas]
    completed = [e for e in entries if isinstance(e.record, PartitionChangeRecord)
                 and e.record.adding_replicas == () and e.record.removing_replicas == ()]
    assert len(started) >= 10 and completed
    in_flight = [p for _t, _pid, p in image.topics.partitions() if p.adding_replicas]
    assert len(in_flight) < len(started)
    for _topic, _pid, part in image.topics.partitions():
        for broker, directory in zip(part.replicas, part.directories, strict=True):
            if directory == LOST:
                assert broker != part.leader and (broker not in part.isr or len(part.isr) == 1)


def test_a_spec_without_the_new_operations_writes_the_same_log_as_before() -> None:
    """restart/reassign weights 0 and delete weight 1 draw the operations exactly as before they existed: the
    benchmarks' logs and the tests' expectations stay what they were (a pinned digest of one log)."""
    entries = churn_log(SPECS["busy, fencing often"])
    digest = hashlib.sha256("\n".join(entry_to_line(e) for e in entries).encode()).hexdigest()
    assert (len(entries), digest[:16]) == EXPECTED_BUSY


def test_at_metadata_version_4_0_the_partition_records_are_version_2_and_the_log_is_otherwise_the_same() -> None:
    """From 4.0 (ELR supported) Kafka writes PartitionRecord and PartitionChangeRecord at version 2: the workload
    and the controller it drives both do, and nothing else of the log changes (a benchmark cluster of a 4.x shape)."""
    spec = SPECS["restarts, LOST and reassignments"]
    old, new = churn_log(spec), churn_log(replace(spec, metadata_version=22))
    assert len(old) == len(new)
    partition_records = (PartitionRecord, PartitionChangeRecord)
    versions = Counter(type(e.record).__name__ for e in new
                       if isinstance(e.record, partition_records) and e.record.version == 2)
    assert versions["PartitionRecord"] > 0 and versions["PartitionChangeRecord"] > 0
    for a, b in zip(old, new, strict=True):
        if isinstance(a.record, PartitionRecord | PartitionChangeRecord):
            assert (a.record.version, b.record.version) == (1, 2)
            assert replace(b.record, version=1) == a.record
        elif isinstance(a.record, FeatureLevelRecord):
            assert (a.record.feature_level, b.record.feature_level) == (21, 22)
        else:
            assert b == a
