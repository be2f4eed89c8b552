"""The jbod CLI commands that need no Spark: image, controller, inspect, dirs (typer's CliRunner)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from jbod_model.directory_id import random_directory_id
from jbod_model.image_json import image_to_json
from jbod_model.records.entry import LogEntry
from jbod_model.records.json_codec import dumps, record_to_json
from jbod_model.records.metadata import (
    BrokerRegistrationChangeRecord,
    FeatureLevelRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from jbod_model.replay import replay_records
from jbod_model.storage.log_writer import write_segment_entries
from jbod_model.uuid import Uuid
from pipelines.cli import app
from pipelines.cli.shared import EXIT_DECODE, EXIT_INPUT, EXIT_REPLAY

runner = CliRunner(env={"COLUMNS": "200"})
D1, D2 = sorted([random_directory_id(), random_directory_id()])
E1 = random_directory_id()
TOPIC = Uuid.from_string("YNY5hm01SZ-bAGeCLAGqWA")


def disk_failure_records() -> list[object]:
    """Broker 1 with two dirs leads p0 on D1 and p1 on D2; D1 fails (BRCR drops it, the controller moved p0)."""
    return [
        FeatureLevelRecord(name="metadata.version", feature_level=21),
        RegisterBrokerRecord(broker_id=1, broker_epoch=1, fenced=False, log_dirs=(D1, D2)),
        RegisterBrokerRecord(broker_id=2, broker_epoch=2, fenced=False, log_dirs=(E1,)),
        TopicRecord(name="orders", topic_id=TOPIC),
        PartitionRecord(version=1, topic_id=TOPIC, partition_id=0, replicas=(1, 2), isr=(1, 2), leader=1,
                        leader_epoch=0, partition_epoch=0, directories=(D1, E1)),
        PartitionRecord(version=1, topic_id=TOPIC, partition_id=1, replicas=(1, 2), isr=(1, 2), leader=1,
                        leader_epoch=0, partition_epoch=0, directories=(D2, E1)),
        PartitionChangeRecord(version=1, topic_id=TOPIC, partition_id=0, isr=(2,), leader=2),
        BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=1, log_dirs=(D2,)),
    ]


def write_jsonl(path: Path, records: list[object]) -> Path:
    path.write_text("".join(dumps({"offset": i, **record_to_json(r)}) + "\n"  # type: ignore[arg-type]
                            for i, r in enumerate(records)))
    return path


def test_image_json_equals_the_model(tmp_path: Path) -> None:
    records = disk_failure_records()
    result = runner.invoke(app, ["image", str(write_jsonl(tmp_path / "in.jsonl", records)), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == image_to_json(replay_records(records))  # type: ignore[arg-type]


def test_image_as_of_offset_stops_before_the_failure(tmp_path: Path) -> None:
    records = disk_failure_records()
    path = write_jsonl(tmp_path / "in.jsonl", records)
    # As of offset 6: record 6 included (the convention of the tables and of an image's lastOffset).
    doc = json.loads(runner.invoke(app, ["image", str(path), "--json", "--as-of-offset", "6"]).stdout)
    assert doc["lastOffset"] == 6
    assert not any(r["offline"] for r in doc["replicas"])
    doc = json.loads(runner.invoke(app, ["image", str(path), "--json"]).stdout)
    offline = [(r["partitionId"], r["brokerId"], r["offlineReason"]) for r in doc["replicas"] if r["offline"]]
    assert offline == [(0, 1, "DIRECTORY_OFFLINE")]


@pytest.mark.parametrize("command", [["image"], ["report"], ["whatif", "--fail-dir", str(D2)]])
def test_one_offset_convention_and_the_old_flag_deprecated(tmp_path: Path, command: list[str]) -> None:
    """--as-of-offset N (records <= N) on INPUT as on --tables; --until-offset N (records < N) still works as
    --as-of-offset N-1, says so, and is not offered in --help."""
    path = str(write_jsonl(tmp_path / "in.jsonl", disk_failure_records()))
    new = runner.invoke(app, [*command, path, "--json", "--as-of-offset", "6"])
    old = runner.invoke(app, [*command, path, "--json", "--until-offset", "7"])
    assert new.exit_code == 0 and old.exit_code == 0, (new.output, old.output)
    assert json.loads(old.stdout) == json.loads(new.stdout)
    assert "deprecated: --until-offset 7 (records with offset < 7) is --as-of-offset 6" in old.stderr
    assert "deprecated" not in new.stderr
    both = runner.invoke(app, [*command, path, "--as-of-offset", "6", "--until-offset", "7"])
    assert both.exit_code == EXIT_INPUT and "--as-of-offset N alone" in both.stderr
    help_text = runner.invoke(app, [command[0], "--help"]).stdout
    assert "--as-of-offset" in help_text and "--until-offset" not in help_text


def test_image_tables_name_the_offline_replica(tmp_path: Path) -> None:
    result = runner.invoke(app, ["image", str(write_jsonl(tmp_path / "in.jsonl", disk_failure_records()))])
    assert result.exit_code == 0
    assert "Offline replicas (1)" in result.stdout and str(D1) in result.stdout
    assert "DIRECTORY_OFFLINE" in result.stdout


def test_image_of_a_binary_segment_equals_the_jsonl(tmp_path: Path) -> None:
    records = disk_failure_records()
    seg = tmp_path / "00000000000000000000.log"
    write_segment_entries(seg, [LogEntry(offset=i, record=r, timestamp=1000) for i, r in enumerate(records)])  # type: ignore[arg-type]
    binary = json.loads(runner.invoke(app, ["image", str(seg), "--json"]).stdout)
    text = json.loads(runner.invoke(app, ["image", str(write_jsonl(tmp_path / "a.jsonl", records)), "--json"]).stdout)
    assert binary == text


def test_inspect_round_trip_through_dump_text_and_jsonl(tmp_path: Path) -> None:
    records = disk_failure_records()
    seg = tmp_path / "00000000000000000000.log"
    write_segment_entries(seg, [LogEntry(offset=i, record=r, timestamp=1000) for i, r in enumerate(records)])  # type: ignore[arg-type]
    dump = runner.invoke(app, ["inspect", str(seg)])
    assert dump.exit_code == 0 and dump.stdout.startswith(f"Dumping {seg}\nLog starting offset: 0\n")
    (tmp_path / "dump.txt").write_text(dump.stdout)
    from_dump = json.loads(runner.invoke(app, ["image", str(tmp_path / "dump.txt"), "--json"]).stdout)
    as_jsonl = runner.invoke(app, ["inspect", str(seg), "--json"]).stdout
    (tmp_path / "again.jsonl").write_text(as_jsonl)
    from_jsonl = json.loads(runner.invoke(app, ["image", str(tmp_path / "again.jsonl"), "--json"]).stdout)
    assert from_dump == from_jsonl == image_to_json(replay_records(records))  # type: ignore[arg-type]


def test_exit_codes_name_the_problem(tmp_path: Path) -> None:
    bad_json = tmp_path / "bad.jsonl"
    bad_json.write_text('{"offset": 0, "type": "NOT_A_RECORD", "version": 0, "data": {}}\n')
    result = runner.invoke(app, ["image", str(bad_json)])
    assert result.exit_code == EXIT_DECODE and "bad.jsonl, line 1: " in result.stderr  # undecodable text

    seg = tmp_path / "00000000000000000000.log"
    write_segment_entries(seg, [LogEntry(offset=0, record=FeatureLevelRecord(name="metadata.version",
                                                                             feature_level=21), timestamp=1)])
    data = bytearray(seg.read_bytes())
    data[-1] ^= 0xFF
    seg.write_bytes(bytes(data))
    result = runner.invoke(app, ["image", str(seg)])
    assert result.exit_code == EXIT_DECODE and "crc" in result.stderr.lower() and str(seg) in result.stderr

    orphan = [PartitionChangeRecord(version=1, topic_id=TOPIC, partition_id=0, leader=1)]
    result = runner.invoke(app, ["image", str(write_jsonl(tmp_path / "orphan.jsonl", orphan))])  # type: ignore[arg-type]
    assert result.exit_code == EXIT_REPLAY and "offset 0" in result.stderr

    result = runner.invoke(app, ["image", str(tmp_path / "missing.jsonl")])
    assert result.exit_code == EXIT_INPUT and "no such file" in result.stderr


def test_skip_policy_keeps_the_good_records(tmp_path: Path) -> None:
    records = disk_failure_records()
    seg = tmp_path / "00000000000000000000.log"
    write_segment_entries(seg, [LogEntry(offset=i, record=r, timestamp=1000) for i, r in enumerate(records)])  # type: ignore[arg-type]
    seg.write_bytes(seg.read_bytes() + b"\x00" * 20)  # a torn tail
    assert runner.invoke(app, ["image", str(seg)]).exit_code == EXIT_DECODE
    result = runner.invoke(app, ["image", str(seg), "--json", "--policy", "skip"])
    assert result.exit_code == 0 and "skipped" in result.stderr
    # The counts are what was read: the line must not read as if 1 file, N records were skipped.
    assert result.stderr.startswith("read with damage skipped (--policy skip): 1 file"), result.stderr
    assert json.loads(result.stdout) == image_to_json(replay_records(records))  # type: ignore[arg-type]


@pytest.mark.samples
def test_image_of_real_metadata_dir_snapshot_plus_log_equals_full_log(samples_dir: Path) -> None:
    node = samples_dir / "indus-local-test-rig-kafka4.2" / "kafka-data"
    from_snapshot = json.loads(runner.invoke(app, ["image", str(node), "--json"]).stdout)
    full = json.loads(runner.invoke(app, ["image", str(node), "--json", "--full-log"]).stdout)
    assert from_snapshot == full
    assert full["metadataVersion"] == "4.2-IV1" and full["brokers"][0]["logDirs"] == ["Teb3PFb009qvAZgMDEFH4g"]


@pytest.mark.samples
def test_image_of_a_snapshot_file_has_its_provenance(samples_dir: Path) -> None:
    snap = (samples_dir / "indus-local-test-rig-kafka4.2/kafka-data/__cluster_metadata-0/"
            "00000000000000046533-0000000004.checkpoint")
    doc = json.loads(runner.invoke(app, ["image", str(snap), "--json"]).stdout)
    assert doc["lastOffset"] == 46532


@pytest.mark.samples
def test_dirs_inventory_of_real_meta_properties(samples_dir: Path) -> None:
    result = runner.invoke(app, ["dirs", str(samples_dir / "indus-local-test-rig-kafka4.2"), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [d["directoryId"] for d in doc["directories"]] == ["Teb3PFb009qvAZgMDEFH4g"]


def test_dirs_exits_1_on_a_duplicate_directory_id(tmp_path: Path) -> None:
    same = random_directory_id()
    for name in ("d1", "d2"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "meta.properties").write_text(
            f"version=1\nnode.id=1\ncluster.id=abc\ndirectory.id={same}\n")
    result = runner.invoke(app, ["dirs", str(tmp_path)])
    assert result.exit_code == 1 and "Duplicate directory ID" in result.stdout


DEMO = Path(__file__).resolve().parents[3] / "pipelines" / "examples" / "demo-disk-failure.jsonl"


def test_whatif_by_uuid_and_by_meta_properties_path(tmp_path: Path) -> None:
    by_uuid = runner.invoke(app, ["whatif", str(DEMO), "--fail-dir", "JbzRyYgxSHyV9F8hM29Rbg", "--json"])
    assert by_uuid.exit_code == 0, by_uuid.output
    doc = json.loads(by_uuid.stdout)
    # No inventory given: the disk's path is unknown.
    assert doc["failed"] == [{"brokerId": 2, "directory": "JbzRyYgxSHyV9F8hM29Rbg", "path": None}]
    assert {(p["topicName"], p["partitionId"], p["losesLeader"]) for p in doc["partitions"]} == {
        ("orders", 1, True), ("payments", 0, False)}
    assert doc["records"][-1]["type"] == "BROKER_REGISTRATION_CHANGE_RECORD"

    disk = tmp_path / "mnt-d2"
    disk.mkdir()
    (disk / "meta.properties").write_text("version=1\nnode.id=2\ncluster.id=c\ndirectory.id=JbzRyYgxSHyV9F8hM29Rbg\n")
    by_path = runner.invoke(app, ["whatif", str(DEMO), "--fail-dir", str(disk), "--json"])
    assert json.loads(by_path.stdout) == doc
    table = runner.invoke(app, ["whatif", str(DEMO), "--fail-dir", str(disk)])
    assert "1 partition loses its leader" in table.stdout and "leader moves" in table.stdout


def test_whatif_on_a_directory_no_broker_has_is_an_input_error() -> None:
    result = runner.invoke(app, ["whatif", str(DEMO), "--fail-dir", "Y8UXxSTrSB2pCc9s439Vkw"])  # already failed
    assert result.exit_code == EXIT_INPUT and "not an online directory" in result.stderr


def test_progress_on_a_terminal_passes_every_entry_through(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from rich.console import Console

    from pipelines.cli import shared

    screen = io.StringIO()
    monkeypatch.setattr(shared, "console", lambda stderr=False: Console(file=screen, force_terminal=True, width=100))
    entries = [LogEntry(offset=i, record=r) for i, r in enumerate(disk_failure_records() * 300)]  # type: ignore[arg-type]
    assert list(shared.tracked(iter(entries), "replaying")) == entries
    assert "replaying" in screen.getvalue()
