"""Reports (jbod_model.report): offline replicas by disk, the incident timeline and its follow-ups, pending placement
ages, min ISR, and directory names — on the demo stream and on synthetic logs with timestamps."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest
from report_support import T0, batches, register

import jbod_model.report as report_module
from jbod_model.directory_id import UNASSIGNED, DirectoryState
from jbod_model.errors import InputError
from jbod_model.image import MetadataImage
from jbod_model.meta_properties import DirInventoryRow
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import (
    NO_LEADER,
    AbortTransactionRecord,
    BeginTransactionRecord,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    EndTransactionRecord,
    FeatureLevelRecord,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    RemoveTopicRecord,
    TopicRecord,
)
from jbod_model.replay import replay_entries, replay_records
from jbod_model.report import (
    AffectedPartition,
    DirectoryPaths,
    DiskState,
    EventKind,
    Incident,
    IncidentKind,
    IncidentTracker,
    LogPosition,
    PartitionRef,
    ReportTracker,
    Resolution,
    Trigger,
    build_report,
    directory_ref,
    format_directory,
    format_duration_ms,
    format_partitions,
    run_and_track,
    timeline_events,
)
from jbod_model.stream import RequestEntry, StreamRunner, load_jsonl
from jbod_model.uuid import Uuid

DEMO = Path(__file__).resolve().parents[2] / "pipelines" / "examples" / "demo-disk-failure.jsonl"
FAILED = Uuid.from_string("Y8UXxSTrSB2pCc9s439Vkw")  # broker 2's first disk in the demo
ORDERS = Uuid.from_string("KfaKMz6vRniukx00uvRwwA")
PAYMENTS = Uuid.from_string("jVaGuYd1RguOT2X2Imx41g")


def run_demo(entries: list[object] | None = None) -> tuple[StreamRunner, ReportTracker]:
    runner = StreamRunner()
    tracker = ReportTracker()
    run_and_track(runner, load_jsonl(DEMO) if entries is None else entries, tracker)  # type: ignore[arg-type]
    return runner, tracker


def labels(refs: object) -> set[str]:
    return {r.partition.label for r in refs}  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------------------------------------------
# A synthetic log with timestamps: broker 1's disk A1 fails, the broker comes back with it, ISRs recover.

A1, A2, B1, B2, C1, C2 = (Uuid.from_bytes(bytes([0x40 + i]) * 16) for i in range(6))
T_ORDERS = Uuid.from_string("YNY5hm01SZ-bAGeCLAGqWA")
T_PENDING = Uuid.from_string("cYmH5bB1QyuZJd0WkA7bYg")


def prelude() -> list[tuple[int, list[Record]]]:
    """Offsets 0-10: three brokers with two disks each; orders-0 [1,2] on A1/B1 (leader 1), orders-1 [2,1] on B2/A1,
    orders-2 [1] on A1 alone; pending-0 [2,3] with broker 2's replica UNASSIGNED since offset 9 (T0+10s);
    min.insync.replicas=2 on orders."""
    return [
        (0, [FeatureLevelRecord(name="metadata.version", feature_level=21)]),
        (1, [register(1, 1, (A1, A2)), register(2, 2, (B1, B2)), register(3, 3, (C1, C2))]),
        (2, [TopicRecord(name="orders", topic_id=T_ORDERS),
             PartitionRecord(version=1, topic_id=T_ORDERS, partition_id=0, replicas=(1, 2), isr=(1, 2), leader=1,
                             directories=(A1, B1)),
             PartitionRecord(version=1, topic_id=T_ORDERS, partition_id=1, replicas=(2, 1), isr=(2, 1), leader=2,
                             directories=(B2, A1)),
             PartitionRecord(version=1, topic_id=T_ORDERS, partition_id=2, replicas=(1,), isr=(1,), leader=1,
                             directories=(A1,))]),
        (10, [TopicRecord(name="pending", topic_id=T_PENDING),
              PartitionRecord(version=1, topic_id=T_PENDING, partition_id=0, replicas=(2, 3), isr=(2, 3), leader=3,
                              directories=(UNASSIGNED, C1))]),
        (20, [ConfigRecord(resource_type=2, resource_name="orders", name="min.insync.replicas", value="2")]),
    ]


FAILURE = (60, [  # offsets 11-14: what handleDirectoriesOffline writes for A1, in one batch
    PartitionChangeRecord(topic_id=T_ORDERS, partition_id=0, isr=(2,), leader=2),
    PartitionChangeRecord(topic_id=T_ORDERS, partition_id=1, isr=(2,)),
    PartitionChangeRecord(topic_id=T_ORDERS, partition_id=2, leader=NO_LEADER),  # last ISR member stays
    BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=1, log_dirs=(A2,)),
])
RECOVERY = [
    (300, [register(1, 20, (A1, A2), fenced=True)]),  # 15: the broker restarts with the disk back
    (310, [BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=20, fenced=-1)]),  # 16: unfenced
    (330, [PartitionChangeRecord(topic_id=T_ORDERS, partition_id=2, leader=1),  # 17-19: leader and ISRs back
           PartitionChangeRecord(topic_id=T_ORDERS, partition_id=0, isr=(2, 1)),
           PartitionChangeRecord(topic_id=T_ORDERS, partition_id=1, isr=(2, 1))]),
]


def track(entries: list[LogEntry], image: MetadataImage | None = None, **kwargs: int) -> ReportTracker:
    tracker = ReportTracker(image) if image is not None else ReportTracker(**kwargs)  # type: ignore[arg-type]
    tracker.feed_all(entries)
    return tracker


# ---------------------------------------------------------------------------------------------------------------
# The demo stream


def test_demo_offline_replicas_are_grouped_by_the_failed_disk() -> None:
    runner, tracker = run_demo()
    assert tracker.image.same_state(runner.image)
    report = build_report(runner.image, history=tracker.history())
    assert [(g.broker_id, g.directory.directory) for g in report.offline] == [(2, FAILED)]
    group = report.offline[0]
    assert group.reasons == (group.replicas[0].reason,) and group.reasons[0].value == "DIRECTORY_OFFLINE"
    assert labels(group.replicas) == {"orders-0", "orders-2", "payments-1"}
    assert not any(r.in_isr for r in group.replicas)
    assert group.since == LogPosition(32) and group.incident_id == 1
    disks = {(d.broker_id, d.directory.directory): d for d in report.disks}
    assert len(disks) == 6 and report.summary.offline_disks == 1 and report.summary.offline_replicas == 3
    failed = disks[(2, FAILED)]
    assert (failed.state, failed.replicas, failed.leaders, failed.offline_replicas) == (DiskState.OFFLINE, 3, 0, 3)
    assert sum(d.replicas for d in report.disks) == 15
    assert sum(d.leaders for d in report.disks) == 5  # every partition has a leader, on some disk
    assert all(d.state is DiskState.ONLINE for k, d in disks.items() if k != (2, FAILED))
    assert report.leaderless == () and report.under_min_isr == () and report.pending == ()


def test_a_report_is_built_with_the_collector_paused(monkeypatch: pytest.MonkeyPatch) -> None:
    """``build_report`` runs with the cyclic collector off (each full pass walked the rows it was building beside
    the image's objects) and leaves it on, as it found it."""
    runner, tracker = run_demo()
    seen: list[bool] = []
    real = report_module.directory_ref

    def watched(*args: Any, **kw: Any) -> Any:
        seen.append(gc.isenabled())
        return real(*args, **kw)

    monkeypatch.setattr(report_module, "directory_ref", watched)
    assert gc.isenabled()
    report = build_report(runner.image, history=tracker.history())
    assert gc.isenabled() and seen and not any(seen)
    assert [(g.broker_id, g.directory.directory) for g in report.offline] == [(2, FAILED)]


def test_demo_timeline_shows_broker_2s_disk_failure_with_its_batch() -> None:
    entries = load_jsonl(DEMO)
    runner, tracker = run_demo()
    # What the controller wrote in reaction to the offlineLogDirs heartbeat: one batch ending with the BRCR.
    cut = next(i for i, e in enumerate(entries)
               if isinstance(e, RequestEntry) and getattr(e.request, "offline_log_dirs", ()))
    probe = StreamRunner()
    list(probe.run(entries[:cut]))
    before = probe.image
    batch = next(probe.run(entries[cut:cut + 1])).entries
    brcr = batch[-1]
    assert isinstance(brcr.record, BrokerRegistrationChangeRecord) and brcr.offset == 32
    lost_isr = {f"{before.topics.by_id[e.record.topic_id].name}-{e.record.partition_id}" for e in batch[:-1]
                if isinstance(e.record, PartitionChangeRecord)
                and e.record.isr is not None and 2 not in e.record.isr}

    report = build_report(runner.image, history=tracker.history())
    (event,) = report.timeline
    assert (event.kind, event.at.offset, event.broker_id, event.directory and event.directory.directory) == (
        EventKind.DIRECTORY_FAILED, 32, 2, FAILED)
    (incident,) = tracker.history().incidents
    assert (incident.kind, incident.trigger, incident.started.offset, incident.is_open) == (
        IncidentKind.DIRECTORY_FAILURE, Trigger.REGISTRATION_CHANGE, 32, True)
    assert labels(incident.lost_isr) == lost_isr == {"orders-0", "orders-2", "payments-1"}
    assert labels(incident.lost_leadership) == {"payments-1"}  # broker 2 led it; leadership moved to 3
    assert incident.leaderless == ()
    assert "payments-1" in event.summary and "3 replicas offline" in event.summary
    assert {p.label for p in event.partitions} == lost_isr
    series = tracker.history().offline_series
    assert (series[-1].at.offset, series[-1].offline_replicas, series[-1].failed_directories) == (32, 3, 1)
    assert all(p.offline_replicas == 0 for p in series[:-1])


def test_pending_placement_age_in_offsets_on_the_demo() -> None:
    entries = load_jsonl(DEMO)
    # Stop before broker 3 assigns its replicas: they stay UNASSIGNED on a two-directory broker.
    assigns = [i for i, e in enumerate(entries) if isinstance(e, RequestEntry)
               and e.request.TYPE_NAME == "ASSIGN_REPLICAS_TO_DIRS_REQUEST"]
    runner, tracker = run_demo(entries[:assigns[2]])
    history = tracker.history()
    report = build_report(runner.image, history=history)
    assert {(p.partition.label, p.broker_id) for p in report.pending} == {
        ("orders-0", 3), ("orders-1", 3), ("orders-2", 3), ("payments-0", 3), ("payments-1", 3)}
    create = next(i for i, e in enumerate(entries)
                  if isinstance(e, RequestEntry) and e.request.TYPE_NAME == "CREATE_TOPICS_REQUEST")
    probe = StreamRunner()
    list(probe.run(entries[:create]))
    created = next(probe.run(entries[create:create + 1])).entries[-1].offset  # the CreateTopics batch placed them
    for p in report.pending:
        assert p.state is DirectoryState.UNASSIGNED and p.broker_directories == 2
        assert p.since == LogPosition(created)
        assert p.age_offsets == report.as_of.offset - created == 23 - 13
        assert p.age_ms is None  # the demo carries no timestamps
    assert report.summary.pending_placements == 5


def test_pending_placement_age_in_ms_from_batch_timestamps() -> None:
    tracker = track(batches(*prelude(), FAILURE))
    report = build_report(tracker.image, history=tracker.history())
    (p,) = report.pending
    assert (p.partition.label, p.broker_id, p.since) == ("pending-0", 2, LogPosition(9, T0 + 10_000))
    assert report.as_of == LogPosition(14, T0 + 60_000)
    assert (p.age_offsets, p.age_ms) == (5, 50_000)


def test_min_isr_comes_from_the_topic_config_record() -> None:
    runner, _ = run_demo()
    assert build_report(runner.image).under_min_isr == ()
    image = replay_records([ConfigRecord(resource_type=2, resource_name="orders", name="min.insync.replicas",
                                         value="3")], runner.image, first_offset=runner.image.last_offset + 1)
    report = build_report(image)
    assert {(s.partition.label, s.min_isr, s.isr) for s in report.under_min_isr} == {
        ("orders-0", 3, (1, 3)), ("orders-2", 3, (3, 1))}
    (orders_0,) = [s for s in report.under_min_isr if s.partition.partition_id == 0]
    assert [(r.broker_id, r.directory.directory) for r in orders_0.offline_replicas] == [(2, FAILED)]


# ---------------------------------------------------------------------------------------------------------------
# Directory names


def test_format_directory_with_and_without_the_inventory() -> None:
    paths = DirectoryPaths.from_inventory([
        DirInventoryRow(node_id=2, path="/mnt/d1", directory_id=FAILED, cluster_id="c", version=1),
        DirInventoryRow(node_id=2, path="/mnt/meta", directory_id=None, cluster_id="c", version=1)])
    assert format_directory(FAILED, paths, 2) == "broker 2 /mnt/d1 (Y8UXxSTr…)"
    assert format_directory(FAILED, paths) == "broker 2 /mnt/d1 (Y8UXxSTr…)"  # the node from meta.properties
    assert format_directory(FAILED) == "Y8UXxSTrSB2pCc9s439Vkw"
    assert format_directory(FAILED, DirectoryPaths(), 2) == "Y8UXxSTrSB2pCc9s439Vkw"
    assert format_directory(UNASSIGNED, paths, 2) == "UNASSIGNED"
    ref = directory_ref(FAILED, paths, 2)
    assert (ref.path, ref.node_id, ref.label) == ("/mnt/d1", 2, "broker 2 /mnt/d1 (Y8UXxSTr…)")


def test_the_report_names_disks_by_path_everywhere() -> None:
    runner, tracker = run_demo()
    paths = DirectoryPaths.from_inventory([
        DirInventoryRow(node_id=2, path="/mnt/d1", directory_id=FAILED, cluster_id="c", version=1),
        DirInventoryRow(node_id=9, path="/srv/spare", directory_id=A1, cluster_id="c", version=1)])
    report = build_report(runner.image, paths=paths, history=tracker.history())
    label = "broker 2 /mnt/d1 (Y8UXxSTr…)"
    assert report.offline[0].directory.label == label
    assert report.timeline[0].summary.startswith(f"{label} failed")
    assert report.incidents[0].title == f"{label} failed"
    assert any(d.directory.label == label for d in report.disks)
    inv = report.inventory
    assert inv is not None and inv.matched == 1 and len(inv.unmapped) == 5
    assert inv.unknown == ((A1, paths.locations[A1]),)
    assert build_report(runner.image, history=tracker.history()).inventory is None


def test_directory_paths_keep_the_first_location_of_a_duplicated_id() -> None:
    rows = [DirInventoryRow(node_id=3, path="/b", directory_id=A1, cluster_id="c", version=1),
            DirInventoryRow(node_id=1, path="/a", directory_id=A1, cluster_id="c", version=1)]
    paths = DirectoryPaths.from_inventory(rows)
    assert paths.get(A1) is not None and paths.get(A1).path == "/a"  # type: ignore[union-attr]
    assert len(paths.conflicts) == 1 and len(paths.conflicts[0][1]) == 2


def test_the_timeline_groups_each_kind_of_follow_up_by_position_with_its_own_summary() -> None:
    """Every follow-up kind an incident's partitions record, grouped by where it happened, each with its own words;
    a broker going offline says the broker left the replicas where a failed disk says the replica moved off it."""
    topic = Uuid.from_bytes(bytes([0x31]) * 16)
    ref = [PartitionRef(topic, "orders", i) for i in range(4)]
    t1, t2 = LogPosition(20, T0 + 60_000), LogPosition(30, T0 + 120_000)
    hit = (AffectedPartition(ref[0], True, True, True, leader_restored=t1, isr_restored=t2),
           AffectedPartition(ref[1], False, True, False, isr_restored=t2, moved=t1),
           AffectedPartition(ref[2], False, False, False, moved=t1),
           AffectedPartition(ref[3], True, False, False, deleted=t2))
    start = LogPosition(10, T0)
    disk = Incident(id=1, kind=IncidentKind.DIRECTORY_FAILURE, broker_id=1, directory=A1,
                    trigger=Trigger.REGISTRATION_CHANGE, started=start, replicas_offline=4, partitions=hit)
    broker = Incident(id=2, kind=IncidentKind.BROKER_OFFLINE, broker_id=2, directory=None,
                      trigger=Trigger.FENCE, started=start, replicas_offline=1, partitions=hit[2:3])
    follow_ups = [(e.at.offset, e.incident_id, e.kind, [p.label for p in e.partitions], e.summary)
                  for e in timeline_events([disk, broker]) if e.at != start]
    name = f"broker 1 directory {format_directory(A1)}"
    assert follow_ups == [
        (20, 1, EventKind.LEADER_RESTORED, ["orders-0"], "orders-0: leader elected again after 10 offsets (1m)"),
        (20, 1, EventKind.REPLICAS_MOVED, ["orders-1", "orders-2"], f"orders-1, orders-2: replica moved off {name}"),
        (20, 2, EventKind.REPLICAS_MOVED, ["orders-2"], "orders-2: broker 2 removed from the replicas"),
        (30, 1, EventKind.ISR_RESTORED, ["orders-0", "orders-1"],
         "broker 1 back in the ISR of orders-0, orders-1 after 20 offsets (2m)"),
        (30, 1, EventKind.PARTITIONS_DELETED, ["orders-3"], "orders-3: topic deleted")]


# ---------------------------------------------------------------------------------------------------------------
# Incidents over a synthetic log


def test_a_directory_that_comes_back_closes_its_incident_and_follow_ups_are_timed() -> None:
    tracker = track(batches(*prelude(), FAILURE, *RECOVERY))
    history = tracker.history()
    disk, broker = history.incidents
    assert (disk.kind, disk.broker_id, disk.directory, disk.trigger) == (
        IncidentKind.DIRECTORY_FAILURE, 1, A1, Trigger.REGISTRATION_CHANGE)
    assert disk.started == LogPosition(14, T0 + 60_000)
    assert (disk.ended, disk.resolution) == (LogPosition(15, T0 + 300_000), Resolution.DIRECTORY_RETURNED)
    parts = {p.partition.label: p for p in disk.partitions}
    assert set(parts) == {"orders-0", "orders-1", "orders-2"} and disk.replicas_offline == 3
    assert (parts["orders-0"].lost_leadership, parts["orders-0"].lost_isr) == (True, True)
    assert (parts["orders-1"].lost_leadership, parts["orders-1"].lost_isr) == (False, True)
    assert (parts["orders-2"].lost_leadership, parts["orders-2"].lost_isr, parts["orders-2"].leaderless) == (
        True, False, True)
    # Follow-ups are dated by the batch that brought them (offsets 17-19).
    assert parts["orders-2"].leader_restored == LogPosition(19, T0 + 330_000)
    assert parts["orders-0"].isr_restored == parts["orders-1"].isr_restored == LogPosition(19, T0 + 330_000)
    assert all(p.moved is None and p.deleted is None for p in disk.partitions)
    # The restart itself: registered fenced (a broker offline incident), unfenced at 16.
    assert (broker.kind, broker.trigger, broker.started.offset, broker.resolution, broker.ended) == (
        IncidentKind.BROKER_OFFLINE, Trigger.REREGISTRATION, 15, Resolution.BROKER_UNFENCED,
        LogPosition(16, T0 + 310_000))

    report = build_report(tracker.image, history=history)
    assert [(e.at.offset, e.kind, e.incident_id) for e in report.timeline] == [
        (14, EventKind.DIRECTORY_FAILED, 1), (15, EventKind.DIRECTORY_RETURNED, 1), (15, EventKind.BROKER_OFFLINE, 2),
        (16, EventKind.BROKER_UNFENCED, 2), (19, EventKind.LEADER_RESTORED, 1), (19, EventKind.ISR_RESTORED, 1)]
    assert {p.label for p in report.timeline[-1].partitions} == {"orders-0", "orders-1"}
    assert report.timeline[-1].summary == "broker 1 back in the ISR of orders-0, orders-1 after 5 offsets (4m 30s)"
    returned = report.timeline[1].summary
    assert "online again after 1 offset (4m)" in returned
    assert "left without a leader (orders-2)" in report.timeline[0].summary
    assert report.summary.open_incidents == 0 and report.offline == () and report.leaderless == ()
    assert [(r.incident.id, r.duration_offsets, r.duration_ms) for r in report.incidents] == [
        (1, 1, 240_000), (2, 1, 10_000)]
    series = [(p.at.offset, p.offline_replicas, p.leaderless_partitions, p.failed_directories)
              for p in history.offline_series]
    assert series == [(0, 0, 0, 0), (14, 3, 1, 1), (15, 3, 1, 0), (16, 0, 1, 0), (19, 0, 0, 0)]


def test_while_the_disk_is_out_the_report_shows_the_leaderless_partition_and_min_isr() -> None:
    tracker = track(batches(*prelude(), FAILURE))
    report = build_report(tracker.image, history=tracker.history())
    (lost,) = report.leaderless
    assert (lost.partition.label, lost.isr, lost.leaderless_since) == ("orders-2", (1,), LogPosition(13, T0 + 60_000))
    assert [(r.broker_id, r.reason.value, r.in_isr) for r in lost.offline_replicas] == [(1, "DIRECTORY_OFFLINE", True)]
    # min.insync.replicas=2 from the topic's ConfigRecord (capped by the replication factor of partition 0).
    assert {s.partition.label for s in report.under_min_isr} == {"orders-0", "orders-1", "orders-2"}
    assert all(s.min_isr == 2 for s in report.under_min_isr)
    assert report.incidents[0].incident.is_open and report.incidents[0].duration_offsets == 0


def test_re_registration_without_a_directory_is_a_failure() -> None:
    restart = (120, [register(1, 20, (A2,), fenced=True)])  # offset 11: broker 1 comes back without A1
    tracker = track(batches(*prelude(), restart))
    disk, broker = tracker.history().incidents
    assert (disk.kind, disk.trigger, disk.directory, disk.started.offset) == (
        IncidentKind.DIRECTORY_FAILURE, Trigger.REREGISTRATION, A1, 11)
    assert disk.replicas_offline == 3
    # Nothing moved in that batch (the broker was gone): no leader or ISR change is attributed to it.
    assert disk.lost_isr == () and disk.lost_leadership == ()
    assert (broker.kind, broker.trigger, broker.replicas_offline) == (IncidentKind.BROKER_OFFLINE,
                                                                      Trigger.REREGISTRATION, 3)
    report = build_report(tracker.image, history=tracker.history())
    assert {(g.broker_id, g.directory.directory) for g in report.offline} == {(1, A1)}
    # Fenced first in Kafka's order: the broker is fenced, so its replicas are offline for that reason.
    assert report.offline[0].reasons[0].value == "BROKER_FENCED" and report.offline[0].incident_id == 1


def test_replicas_moved_off_the_failed_disk_evacuate_it() -> None:
    moves = (400, [PartitionChangeRecord(topic_id=T_ORDERS, partition_id=0, directories=(A2, B1)),
                   PartitionChangeRecord(topic_id=T_ORDERS, partition_id=1, directories=(B2, A2))])
    delete = (500, [RemoveTopicRecord(topic_id=T_ORDERS)])
    tracker = track(batches(*prelude(), FAILURE, moves))
    (disk,) = tracker.history().incidents
    assert disk.is_open  # orders-2 still lives on A1
    tracker.feed_batch(batches(*prelude(), FAILURE, moves, delete)[-1:])
    (disk,) = tracker.history().incidents
    assert (disk.resolution, disk.ended) == (Resolution.DIRECTORY_EVACUATED, LogPosition(17, T0 + 500_000))
    moved = {p.partition.label: p for p in disk.partitions}
    assert moved["orders-0"].moved == LogPosition(16, T0 + 400_000) and moved["orders-2"].deleted is not None
    kinds = [e.kind for e in build_report(tracker.image, history=tracker.history()).timeline]
    assert kinds == [EventKind.DIRECTORY_FAILED, EventKind.REPLICAS_MOVED, EventKind.PARTITIONS_DELETED,
                     EventKind.DIRECTORY_EVACUATED]


def test_what_is_broken_in_the_starting_image_is_an_incident_from_the_base_image() -> None:
    entries = batches(*prelude(), FAILURE, *RECOVERY)
    snapshot = replay_entries(entries[:15])  # up to the failure: a snapshot taken while A1 is out
    tracker = ReportTracker(snapshot)
    tracker.feed_all(entries[15:])
    disk = tracker.history().incidents[0]
    assert (disk.trigger, disk.started, disk.directory) == (Trigger.BASE_IMAGE, LogPosition(14), A1)
    assert (disk.resolution, disk.ended) == (Resolution.DIRECTORY_RETURNED, LogPosition(15, T0 + 300_000))
    assert {p.partition.label for p in disk.leaderless} == {"orders-2"}
    assert tracker.history().since == LogPosition(14)
    report = build_report(tracker.image, history=tracker.history())
    assert report.timeline[0].summary.endswith("already offline at the start: 3 replicas offline (the starting image)")


def test_feeding_entries_batches_or_replayed_batches_gives_the_same_history() -> None:
    groups = [*prelude(), FAILURE, *RECOVERY]
    entries = batches(*groups)
    by_entry = track(entries).history()
    by_batch = ReportTracker()
    observed = ReportTracker()
    image = observed.image
    start = 0
    for _, records in groups:
        batch = entries[start:start + len(records)]
        start += len(records)
        by_batch.feed_batch(batch)
        image = replay_entries(batch, image)
        observed.observe_batch(batch, image)
    assert by_batch.history() == by_entry == observed.history()


def test_a_transaction_is_seen_at_its_end_and_an_aborted_one_never() -> None:
    head = batches(*prelude())
    n = len(head)
    failure = [LogEntry(offset=n, record=BeginTransactionRecord(name="t"), batch_base_offset=n),
               *(LogEntry(offset=n + 1 + i, record=r, batch_base_offset=n) for i, r in enumerate(FAILURE[1]))]
    end = LogEntry(offset=n + 5, record=EndTransactionRecord(), batch_base_offset=n + 5)
    tracker = track(head + failure)
    assert tracker.history().incidents == ()  # still open: nothing visible yet
    tracker.feed_all([end])
    assert [i.started.offset for i in tracker.history().incidents] == [n + 4]
    aborted = track([*head, *failure, LogEntry(offset=n + 5, record=AbortTransactionRecord(), batch_base_offset=n + 5)])
    assert aborted.history().incidents == () and aborted.image.last_offset == n + 5


def test_memory_stays_bounded_over_many_incidents() -> None:
    groups = list(prelude())
    epoch = 1
    for k in range(10):  # ten restarts of broker 3: each one a broker-offline incident
        epoch += 10
        groups.append((1000 + k, [register(3, epoch, (C1, C2), fenced=True)]))
        groups.append((1000 + k, [BrokerRegistrationChangeRecord(broker_id=3, broker_epoch=epoch, fenced=-1)]))
    tracker = IncidentTracker(max_closed_incidents=3, max_series_points=4)
    tracker.feed_all(batches(*groups))
    assert [i.id for i in tracker.incidents()] == [8, 9, 10] and tracker.dropped_incidents == 7
    series = tracker.offline_series()
    assert len(series) <= 4 and max(p.offline_replicas for p in series) == 1
    assert series[0].at.offset == 0 and series[-1].offline_replicas == 0


def test_a_report_from_an_image_alone_has_no_history() -> None:
    tracker = track(batches(*prelude(), FAILURE))
    report = build_report(tracker.image)
    assert report.history_since is None and report.timeline == () and report.incidents == ()
    assert report.offline[0].since is None and report.leaderless[0].leaderless_since is None
    assert [(p.since, p.age_offsets, p.age_ms) for p in report.pending] == [(None, None, None)]
    assert report.summary.offline_replicas == 3


def test_a_history_of_another_offset_is_refused() -> None:
    entries = batches(*prelude(), FAILURE)
    tracker = track(entries)
    with pytest.raises(InputError, match="history ends at offset 14 but the image is at offset 10"):
        build_report(replay_entries(entries[:11]), history=tracker.history())


@pytest.mark.parametrize(("ms", "text"), [(850, "850 ms"), (42_000, "42s"), (303_000, "5m 3s"), (240_000, "4m"),
                                          (7_500_000, "2h 5m"), (273_600_000, "3d 4h")])
def test_durations_read_like_an_incident_log(ms: int, text: str) -> None:
    assert format_duration_ms(ms) == text


def test_a_partition_list_names_the_first_few_in_order_and_counts_the_rest() -> None:
    t1, t2 = Uuid(0, 11), Uuid(0, 12)
    refs = [PartitionRef(t1, "orders", 2), PartitionRef(t2, "events", 0), PartitionRef(t1, "orders", 0)]
    assert format_partitions(refs) == "events-0, orders-0, orders-2"
    # Given in order (as the report's own lists are), or in reverse.
    assert format_partitions([refs[1], refs[2], refs[0]], limit=2) == "events-0, orders-0 and 1 more"
    assert format_partitions([refs[0], refs[2], refs[1]]) == "events-0, orders-0, orders-2"
    assert format_partitions(refs, limit=2) == "events-0, orders-0 and 1 more"
    assert format_partitions(refs, limit=3) == "events-0, orders-0, orders-2"
    assert format_partitions([]) == ""
