"""What-if: the predicted effect of a disk failure must equal what the controller does when the failure is
reported for real (the demo stream's heartbeat with offlineLogDirs)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jbod_model.errors import InputError
from jbod_model.records.metadata import NO_LEADER, BrokerRegistrationChangeRecord, ConfigRecord
from jbod_model.replay import replay_entries, replay_records
from jbod_model.simulator.churn import ChurnSpec, churn_log
from jbod_model.stream import RequestEntry, StreamRunner, load_jsonl
from jbod_model.uuid import Uuid
from jbod_model.whatif import affected_image, what_if_directories_fail

DEMO = Path(__file__).resolve().parents[2] / "pipelines" / "examples" / "demo-disk-failure.jsonl"
FAILED = Uuid.from_string("Y8UXxSTrSB2pCc9s439Vkw")  # broker 2's first disk in the demo


def _split_at_failure() -> tuple[StreamRunner, list[RequestEntry]]:
    entries = load_jsonl(DEMO)
    cut = next(i for i, e in enumerate(entries)
               if isinstance(e, RequestEntry) and getattr(e.request, "offline_log_dirs", ()))
    runner = StreamRunner()
    list(runner.run(entries[:cut]))
    rest = [e for e in entries[cut:] if isinstance(e, RequestEntry)]
    return runner, rest


def test_prediction_equals_the_controllers_reaction_to_the_real_report() -> None:
    runner, rest = _split_at_failure()
    before = runner.image
    predicted = what_if_directories_fail(before, [FAILED])
    event = next(runner.run(rest[:1]))
    assert predicted.records == tuple(e.record for e in event.entries)
    assert predicted.image_after.same_state(runner.image)
    assert FAILED in before.cluster.brokers[2].directories  # the input image is untouched


def test_impacts_name_every_partition_on_the_disk() -> None:
    runner, _ = _split_at_failure()
    image = runner.image
    result = what_if_directories_fail(image, [FAILED])
    on_disk = {(t.name, pid) for t, pid, p in image.topics.partitions()
               if 2 in p.replicas and p.directory(2) == FAILED}
    assert {(i.topic_name, i.partition_id) for i in result.impacts} == on_disk == {
        ("orders", 0), ("orders", 2), ("payments", 1)}
    for impact in result.impacts:
        assert 2 not in impact.isr_after and impact.leader_after != 2
    assert {(i.topic_name, i.partition_id) for i in result.lose_leader} == {("payments", 1)}
    assert result.go_offline == ()
    assert isinstance(result.records[-1], BrokerRegistrationChangeRecord)


def test_min_isr_from_topic_config_flags_partitions_going_under() -> None:
    runner, _ = _split_at_failure()
    image = replay_records([ConfigRecord(resource_type=2, resource_name="orders", name="min.insync.replicas",
                                         value="3")], runner.image, first_offset=runner.image.last_offset + 1)
    result = what_if_directories_fail(image, [FAILED])
    assert {(i.topic_name, i.partition_id) for i in result.go_under_min_isr} == {("orders", 0), ("orders", 2)}


def test_failing_every_disk_of_every_replica_takes_a_partition_offline() -> None:
    runner, _ = _split_at_failure()
    image = runner.image
    topic = next(t for t in image.topics.by_id.values() if t.name == "payments")
    part = topic.partitions[1]
    dirs = [part.directory(b) for b in part.replicas]
    result = what_if_directories_fail(image, dirs)
    impact = [i for i in result.impacts if i.topic_name == "payments" and i.partition_id == 1]
    assert impact and all(i.leader_after == NO_LEADER for i in impact)
    assert any(i.offline_after for i in result.go_offline)


def test_unknown_directory_is_an_input_error() -> None:
    runner, _ = _split_at_failure()
    with pytest.raises(InputError, match="not an online directory"):
        what_if_directories_fail(runner.image, [Uuid.from_string("AAAAAAAAAAAAAAAAAAAAAA")])


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), cut=st.floats(0.05, 1.0), picks=st.lists(st.integers(0, 10_000), min_size=1,
                                                                              max_size=4))
def test_the_affected_partitions_alone_give_the_same_prediction(seed: int, cut: float, picks: list[int]) -> None:
    """What ``jbod whatif --tables`` builds for a large cluster (only the partitions on the failed disks) predicts
    what the whole image does: the same records, the same impacts."""
    entries = churn_log(ChurnSpec(brokers=4, dirs_per_broker=3, topics=4, partitions_per_topic=6,
                                  replication_factor=3, operations=150, fence_share=0.15, seed=seed))
    image = replay_entries(entries[:max(1, int(len(entries) * cut))])
    online = sorted({d for b in image.cluster.brokers.values() for d in b.directories})
    if not online:
        return
    dirs = sorted({online[i % len(online)] for i in picks})
    whole = what_if_directories_fail(image, dirs)
    part = affected_image(image, dirs)
    kept = {(t.id, pid) for t, pid, _ in part.topics.partitions()}
    assert kept == {(t.id, pid) for t, pid, p in image.topics.partitions() if set(p.directories) & set(dirs)}
    assert part.topics.by_name == image.topics.by_name
    alone = what_if_directories_fail(part, dirs)
    assert (alone.failed, alone.records, alone.impacts) == (whole.failed, whole.records, whole.impacts)
