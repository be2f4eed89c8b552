"""``jbod report`` (pipelines.cli.report) on a fresh typer app: disks named by path with --dirs, the JSON shape of
docs/report-json.md, and a self-contained HTML file with its two plots."""

from __future__ import annotations

import gc
import json
import re
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import typer
from cli_support import command_app
from typer.testing import CliRunner

import pipelines.cli.report as report_cli
from jbod_model.records.entry import LogEntry
from jbod_model.records.json_codec import dumps, dumps_pieces
from jbod_model.records.metadata import (
    BrokerRegistrationChangeRecord,
    FeatureLevelRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from jbod_model.report import build_report
from jbod_model.stream import entry_to_line
from jbod_model.uuid import Uuid
from pipelines.cli.report import register
from pipelines.cli.shared import EXIT_INPUT
from pipelines.report.load import load_from_inputs, load_from_records
from pipelines.report.render import fleet_rows, page_name, render_fleet_html

runner = CliRunner(env={"COLUMNS": "200"})
DEMO = Path(__file__).resolve().parents[3] / "pipelines" / "examples" / "demo-disk-failure.jsonl"
CLUSTER = "JbodDemoCluster0000001"
#: The demo's log directories: (broker, mount, directory id). Broker 2's d1 fails.
DEMO_DIRS = [(1, "d1", "NXGV69yVQ06uYL_ESF8CWA"), (1, "d2", "BQ-LPFdpRnmFTqeC4c0zkw"),
             (2, "d1", "Y8UXxSTrSB2pCc9s439Vkw"), (2, "d2", "JbzRyYgxSHyV9F8hM29Rbg"),
             (3, "d1", "MKv6YMH9TJCAPloPsswckQ"), (3, "d2", "TKhUioecQoa8mVZoh91UrA")]
FAILED_LABEL = "broker 2 mnt/b2/d1 (Y8UXxSTr…)"


def make_app() -> typer.Typer:
    return command_app(register)


@pytest.fixture
def mnt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """meta.properties for the demo's directories under ./mnt/b<broker>/<disk> (relative: short labels that a
    table never has to wrap)."""
    monkeypatch.chdir(tmp_path)
    for broker, disk, directory_id in DEMO_DIRS:
        d = tmp_path / "mnt" / f"b{broker}" / disk
        d.mkdir(parents=True)
        (d / "meta.properties").write_text(
            f"version=1\ncluster.id={CLUSTER}\nnode.id={broker}\ndirectory.id={directory_id}\n")
    return Path("mnt")


def test_terminal_names_the_failed_disk_by_path(mnt: Path) -> None:
    result = runner.invoke(make_app(), ["report", str(DEMO), "--dirs", str(mnt)])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "Offline replicas by disk (3)" in out and "Incident timeline" in out
    assert f"{FAILED_LABEL} failed: 3 replicas offline" in out
    offline_row = next(line for line in out.splitlines() if "DIRECTORY_OFFLINE" in line)
    assert FAILED_LABEL in offline_row and "orders-0, orders-2, payments-1" in offline_row
    assert "Y8UXxSTrSB2pCc9s439Vkw" not in out.split("Disks (broker")[0]  # the path, not the bare Uuid
    assert "Inventory: 6 of the metadata's directories have a known path" in out


def test_terminal_without_dirs_shows_the_uuid() -> None:
    result = runner.invoke(make_app(), ["report", str(DEMO)])
    assert result.exit_code == 0, result.output
    assert "broker 2 directory Y8UXxSTrSB2pCc9s439Vkw failed" in result.stdout
    assert "Inventory" not in result.stdout


def test_json_shape(mnt: Path) -> None:
    result = runner.invoke(make_app(), ["report", str(DEMO), "--dirs", str(mnt), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    # Written by orjson, the text is json's own compact text (Jackson's, docs/report-json.md): no float to differ.
    assert result.stdout.rstrip("\n") == dumps(doc)
    assert set(doc) == {"reportVersion", "asOf", "historySince", "metadataVersion", "featureLevel", "summary",
                        "brokers", "disks", "offlineReplicas", "leaderlessPartitions", "underMinIsrPartitions",
                        "pendingPlacements", "incidents", "timeline", "offlineSeries", "inventory",
                        "droppedIncidents"}
    assert doc["reportVersion"] == 1 and doc["asOf"] == {"offset": 32, "timestamp": None}
    assert doc["summary"]["offlineReplicas"] == 3 and doc["summary"]["offlineDisks"] == 1
    (group,) = doc["offlineReplicas"]
    assert group["directory"] == {"directoryId": "Y8UXxSTrSB2pCc9s439Vkw", "state": "ASSIGNED", "brokerId": 2,
                                  "nodeId": 2, "path": "mnt/b2/d1", "label": FAILED_LABEL}
    assert group["reasons"] == ["DIRECTORY_OFFLINE"] and group["since"] == {"offset": 32, "timestamp": None}
    assert [(r["topicName"], r["partitionId"]) for r in group["replicas"]] == [
        ("orders", 0), ("orders", 2), ("payments", 1)]
    (event,) = doc["timeline"]
    assert (event["offset"], event["kind"], event["brokerId"], event["directory"]["path"]) == (
        32, "DIRECTORY_FAILED", 2, "mnt/b2/d1")
    (incident,) = doc["incidents"]
    assert incident["kind"] == "DIRECTORY_FAILURE" and incident["ended"] is None
    assert {(p["topicName"], p["partitionId"]) for p in incident["partitions"] if p["lostLeadership"]} == {
        ("payments", 1)}
    assert {d["directory"]["label"] for d in doc["disks"] if d["state"] == "OFFLINE"} == {FAILED_LABEL}
    assert doc["offlineSeries"][-1] == {"offset": 32, "timestamp": None, "offlineReplicas": 3,
                                        "leaderlessPartitions": 0, "failedDirectories": 1}
    assert doc["inventory"]["matched"] == 6 and doc["inventory"]["unmapped"] == []


def test_the_json_is_written_with_the_collector_paused_and_it_runs_again_after(
        mnt: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every piece of the document is made and written with the cyclic collector off (a collection between two
    slices walked the rows they hold), and the collector is back on once the document is out; the text is the same
    either way."""
    seen: list[bool] = []

    def pieces(doc: dict[str, Any]) -> Iterator[str]:
        for piece in dumps_pieces(doc):
            seen.append(gc.isenabled())
            yield piece

    monkeypatch.setattr(report_cli, "dumps_pieces", pieces)
    assert gc.isenabled()
    result = runner.invoke(make_app(), ["report", str(DEMO), "--dirs", str(mnt), "--json"])
    assert result.exit_code == 0, result.output
    assert seen and not any(seen)
    assert gc.isenabled()
    assert result.stdout.rstrip("\n") == dumps(json.loads(result.stdout))


def test_html_is_self_contained_with_two_plots_and_the_tables(mnt: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    result = runner.invoke(make_app(), ["report", str(DEMO), "--dirs", str(mnt), "--html", str(out)])
    assert result.exit_code == 0, result.output
    html = out.read_text(encoding="utf-8")
    assert html.count('<img alt="') == 2
    assert len(re.findall(r'<img [^>]*src="data:image/png;base64,[A-Za-z0-9+/=]{200,}"', html)) == 2
    assert "Offline replicas by disk (3)" in html and "Incident timeline" in html and "<table>" in html
    assert FAILED_LABEL in html and "orders-0, orders-2, payments-1" in html
    text = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", html)
    assert not re.search(r"(?i)(https?:|ftp:)?//[a-z0-9]", text)  # no URL, not even protocol-relative
    assert not re.search(r"(?i)<(script|link|iframe)\b|@import|url\(", text)
    assert "Offline replicas by disk" in result.stdout  # the terminal report is printed too


def test_as_of_offset_reports_before_the_failure(tmp_path: Path) -> None:
    d1, d2 = Uuid.from_bytes(b"\x41" * 16), Uuid.from_bytes(b"\x42" * 16)
    topic = Uuid.from_string("YNY5hm01SZ-bAGeCLAGqWA")
    records = [FeatureLevelRecord(name="metadata.version", feature_level=21),
               RegisterBrokerRecord(broker_id=1, broker_epoch=1, fenced=False, log_dirs=(d1, d2)),
               TopicRecord(name="orders", topic_id=topic),
               PartitionRecord(version=1, topic_id=topic, partition_id=0, replicas=(1,), isr=(1,), leader=1,
                               directories=(d1,)),
               PartitionChangeRecord(topic_id=topic, partition_id=0, leader=-1),
               BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=1, log_dirs=(d2,))]
    path = tmp_path / "log.jsonl"
    path.write_text("".join(entry_to_line(LogEntry(offset=i, record=r, batch_base_offset=min(i, 4),
                                                   timestamp=1_714_550_400_000 + 1000 * i)) + "\n"
                            for i, r in enumerate(records)))
    before = json.loads(runner.invoke(make_app(), ["report", str(path), "--json", "--as-of-offset", "3"]).stdout)
    assert before["asOf"] == {"offset": 3, "timestamp": 1_714_550_403_000} and before["timeline"] == []
    after = json.loads(runner.invoke(make_app(), ["report", str(path), "--json"]).stdout)
    assert [e["kind"] for e in after["timeline"]] == ["DIRECTORY_FAILED"]
    assert after["leaderlessPartitions"][0]["leaderlessSince"] == {"offset": 4, "timestamp": 1_714_550_404_000}
    assert "left without a leader (orders-0)" in after["timeline"][0]["summary"]


def test_a_records_only_source_gives_the_same_report_data(tmp_path: Path) -> None:
    """The seam a Delta-table loader plugs into: every committed record (the controller's included) in, the same
    image and history out as replaying the original stream."""
    from jbod_model.report import ReportTracker, run_and_track
    from jbod_model.stream import StreamRunner, load_jsonl

    class Recorder(ReportTracker):
        def __init__(self) -> None:
            super().__init__()
            self.seen: list[LogEntry] = []

        def feed(self, entry: LogEntry) -> None:
            self.seen.append(entry)
            super().feed(entry)

    recorder = Recorder()
    run_and_track(StreamRunner(), load_jsonl(DEMO), recorder)
    from_stream = load_from_inputs([DEMO])
    from_records = load_from_records(recorder.seen)
    assert from_records.image.same_state(from_stream.image)
    assert from_records.history == from_stream.history


def test_bad_dirs_and_unwritable_html_exit_with_an_input_error(tmp_path: Path) -> None:
    result = runner.invoke(make_app(), ["report", str(DEMO), "--dirs", str(tmp_path / "nowhere")])
    assert result.exit_code == EXIT_INPUT and "no meta.properties found" in result.output
    result = runner.invoke(make_app(), ["report", str(DEMO), "--html", str(tmp_path / "no" / "such" / "r.html")])
    assert result.exit_code == EXIT_INPUT and "cannot write the HTML report" in result.output


def test_fleet_rows_put_the_worst_cluster_first_and_pages_are_safe_file_names(tmp_path: Path) -> None:
    failed = build_report(load_from_inputs([DEMO]).image)
    lines = DEMO.read_text().splitlines()
    # The same cluster before broker 2's heartbeat first reports its failed disk: nothing offline.
    failure = next(i for i, line in enumerate(lines) if '"offlineLogDirs":["' in line)
    before = tmp_path / "before.jsonl"
    before.write_text("\n".join(lines[:failure]) + "\n")
    healthy = build_report(load_from_inputs([before]).image)
    assert failed.summary.offline_replicas and not healthy.summary.offline_replicas
    rows = fleet_rows({"a-healthy": healthy, "z-failed": failed, "b-healthy": healthy})
    assert [r.cluster for r in rows] == ["z-failed", "a-healthy", "b-healthy"]
    assert page_name("ZRMnDiaeTTeyp03kUua0OA") == "ZRMnDiaeTTeyp03kUua0OA.html"
    assert page_name("../etc/x y") == "_etc_x_y.html"
    html = render_fleet_html(rows, skipped=["cluster q has no record at or before …"])
    assert html.index('href="z-failed.html"') < html.index('href="a-healthy.html"')
    assert "3 clusters · 1 with offline replicas" in html and "cluster q has no record" in html
    assert "<script" not in html and "http" not in html.replace("http-equiv", "")
    # How old each cluster's last record is, when the metadata has batch times (JSONL here has none).
    timed = replace(failed, as_of=replace(failed.as_of, timestamp=1_700_000_000_000))
    aged = render_fleet_html(fleet_rows({"t": timed}), now=datetime.fromtimestamp(1_700_000_000 + 7_500, UTC))
    assert "last record 2h 5m before this page" in aged
    assert "last record" not in html


def test_the_loader_feeds_every_entry_through_the_progress_hook() -> None:
    """``track`` sees every entry as it is read (the CLI shows a live count on a terminal), and changes nothing."""
    seen: list[int] = []

    def track(entries):  # type: ignore[no-untyped-def]
        for e in entries:
            seen.append(1)
            yield e

    tracked = load_from_inputs([DEMO], track=track)
    assert len(seen) == len(DEMO.read_text().splitlines())
    assert tracked.image == load_from_inputs([DEMO]).image
