"""``pipelines.synthetic``: the generated logs are what Kafka's controller would write.

Every invariant of ``jbod_model.invariants`` holds on them (I1–I21 through :class:`InvariantTracker`, warnings
included: Kafka's controller upholds all of them except in the three situations of docs/simulator.md's known issues,
which the generator never creates); fencing a broker moves its leaderships and ISR memberships away in the same batch,
before the record that fences it (``ReplicationControlManager.handleBrokerFenced``); and generation is deterministic,
a longer run extending a shorter one.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jbod_model.invariants import InvariantTracker, Violation, replica_demoted
from jbod_model.records.entry import LogEntry, group_batches
from jbod_model.records.metadata import (
    NO_LEADER_CHANGE,
    BrokerRegistrationChangeRecord,
    BrokerRegistrationFencingChange,
    PartitionChangeRecord,
)
from jbod_model.replay import Replayer, replay_entries
from pipelines.synthetic import SyntheticSpec, generate

FENCE, UNFENCE = BrokerRegistrationFencingChange.FENCE, BrokerRegistrationFencingChange.UNFENCE

SPECS = {
    "default": SyntheticSpec(),
    "quality tests' cluster": SyntheticSpec(brokers=3, dirs_per_broker=2, topics=3, partitions_per_topic=2,
                                            replication_factor=2, operations=40, noop_share=0.2, seed=11),
    "busy, fencing often": SyntheticSpec(brokers=5, dirs_per_broker=3, topics=6, partitions_per_topic=8,
                                         replication_factor=3, operations=600, noop_share=0.1, fence_share=0.3,
                                         seed=3),
    "one directory per broker": SyntheticSpec(brokers=4, dirs_per_broker=1, replication_factor=3, operations=200,
                                              seed=5),
    "one broker": SyntheticSpec(brokers=1, dirs_per_broker=3, replication_factor=1, operations=200,
                                fence_share=0.2, seed=9),
    "larger cluster, default fencing": SyntheticSpec(brokers=12, dirs_per_broker=3, topics=20,
                                                     partitions_per_topic=10, replication_factor=3, operations=2000,
                                                     noop_share=0.5, seed=2024),
}


def violations(entries: list[LogEntry]) -> list[Violation]:
    tracker = InvariantTracker()
    found = [v for batch in group_batches(entries) for v in tracker.feed_batch(batch)]
    assert tracker.image.same_state(replay_entries(entries))
    return found


@pytest.mark.parametrize("name", list(SPECS))
def test_the_log_upholds_every_invariant(name: str) -> None:
    entries = generate(SPECS[name])
    assert [v.message for v in violations(entries)] == []


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), brokers=st.integers(1, 5), dirs=st.integers(1, 3), rf=st.integers(1, 3),
       fence_share=st.sampled_from([None, 0.0, 0.2, 0.6]))
def test_generated_logs_uphold_every_invariant(seed: int, brokers: int, dirs: int, rf: int,
                                               fence_share: float | None) -> None:
    spec = SyntheticSpec(brokers=brokers, dirs_per_broker=dirs, replication_factor=rf, topics=3,
                         partitions_per_topic=3, operations=120, noop_share=0.1, fence_share=fence_share, seed=seed)
    assert [v.message for v in violations(generate(spec))] == []


def test_fencing_moves_leadership_and_isr_away_first() -> None:
    """``handleBrokerFenced``: in the batch that fences a broker, PartitionChangeRecords come first and leave it
    neither leader nor in an ISR — except as the last ISR member of a leaderless partition (no ELR)."""
    entries = generate(SPECS["busy, fencing often"])
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
    entries = generate(SPECS["busy, fencing often"])
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
    entries = generate(spec)
    assert generate(spec) == entries
    longer = generate(replace(spec, operations=spec.operations + 50))
    assert longer[:len(entries)] == entries and len(longer) > len(entries)
    assert [e.offset for e in longer] == list(range(len(longer)))
