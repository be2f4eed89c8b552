"""``jbod simulate`` (pipelines/cli/simulate.py) on a fresh Typer app with ``register`` applied, as the jbod app wires
it: scenarios, generated and random clusters, --list, --json, the output directory rules and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from cli_support import command_app
from typer.testing import CliRunner

from jbod_model.replay import replay_entries
from jbod_model.simulator.scenarios import SCENARIOS
from jbod_model.storage.metadata_dir import MetadataLog
from jbod_model.stream import load_jsonl, run_stream
from pipelines.cli.simulate import EXIT_INPUT, register

runner = CliRunner(env={"COLUMNS": "200"})


def make_app() -> typer.Typer:
    return command_app(register)


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(make_app(), ["simulate", *args])
    return result.exit_code, result.output


def test_list_shows_every_scenario() -> None:
    code, out = invoke("--list")
    assert code == 0
    for name in SCENARIOS:
        assert name in out
    code, out = invoke("--list", "--json")
    assert code == 0
    listed = json.loads(out)
    assert [s["name"] for s in listed] == list(SCENARIOS)
    assert {"AlwaysEventuallyAnyOfflineReplicaGetsLeadershipUpdate"} <= {
        p for s in listed for p in s["expectedViolations"]}


def test_a_scenario_writes_a_replayable_log(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    code, text = invoke("demo", "--out", str(out), "--seed", "2")
    assert code == 0, text
    assert "demo (seed 2)" in text and "Every property and invariant held." in text
    log = MetadataLog.open(out / "metadata")
    image = replay_entries(log.read(from_snapshot=False))
    assert image.same_state(replay_entries(log.read(from_snapshot=True)))
    _events, streamed = run_stream(load_jsonl(out / "stream.jsonl"))
    assert streamed.same_state(image)
    assert (out / "broker-2" / "data-1" / "meta.properties").is_file()
    assert (out / "broker-2" / "metadata" / "meta.properties").is_file()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["scenario"] == "demo" and summary["seed"] == 2 and summary["openOfflineIntervals"] > 0


def test_json_output_and_expected_violations(tmp_path: Path) -> None:
    code, out = invoke("jbod-on-old-mv-disk-failure", "--out", str(tmp_path / "old"), "--json", "--strict")
    assert code == 0, out  # the violations are the ones the scenario documents
    doc = json.loads(out)
    assert doc["violations"] and doc["unexpectedViolations"] == []
    assert doc["quiescent"] is True and doc["metadataVersion"] == "3.6-IV2"


def test_a_generated_cluster(tmp_path: Path) -> None:
    out = tmp_path / "gen"
    code, text = invoke("--brokers", "4", "--dirs", "2", "--partitions", "30", "--topics", "3", "--rf", "2",
                        "--failures", "1", "--out", str(out), "--json")
    assert code == 0, text
    doc = json.loads(text)
    assert doc["quiescent"] is True and doc["offlineIntervals"] > 0
    image = replay_entries(MetadataLog.open(out / "metadata").read())
    assert len(image.cluster.brokers) == 4 and len(image.topics.by_id) == 3
    assert sum(len(t.partitions) for t in image.topics.by_id.values()) == 30
    assert len(list(out.glob("broker-*/*/meta.properties"))) == 4 * 3


def test_a_generated_cluster_with_the_churn_workload(tmp_path: Path) -> None:
    """--workload churn: the log (after the LEADER_CHANGE batch at offset 0), its snapshot, records.jsonl and the
    request stream all give the same image; restarts replaced or removed disks, so directories.json lists them."""
    out = tmp_path / "churn"
    code, text = invoke("--brokers", "5", "--dirs", "3", "--partitions", "41", "--topics", "4", "--workload", "churn",
                        "--operations", "400", "--restart-weight", "2", "--reassign-weight", "2", "--seed", "3",
                        "--segment-bytes", "4096", "--out", str(out), "--json")
    assert code == 0, text
    doc = json.loads(text)
    assert len(doc["segments"]) > 1 and doc["requests"] > 0
    log = MetadataLog.open(out / "metadata")
    entries = list(log.read(from_snapshot=False))
    assert entries[0].offset == 1
    image = replay_entries(entries)
    assert image.same_state(replay_entries(log.read(from_snapshot=True)))
    assert image.same_state(replay_entries(load_jsonl(out / "records.jsonl")))
    _events, streamed = run_stream(load_jsonl(out / "stream.jsonl"))
    assert streamed.same_state(image)
    assert sum(len(t.partitions) for t in image.topics.by_id.values()) == 41
    summary = json.loads((out / "summary.json").read_text())
    assert summary["records"]["PARTITION_CHANGE_RECORD"] > 100 and summary["records"]["NO_OP_RECORD"] > 50
    statuses = {d["status"] for d in json.loads((out / "directories.json").read_text())}
    assert {"ONLINE", "REPLACED"} <= statuses, statuses
    assert len(list(out.glob("broker-*/*/meta.properties"))) == sum(
        1 for d in json.loads((out / "directories.json").read_text()) if d["status"] in ("ONLINE", "FAILED"))


def test_a_churn_workload_at_metadata_version_4_0_writes_version_2_partition_records(tmp_path: Path) -> None:
    """--metadata-version: the log starts at that level, and from 4.0 its partition records are version 2, as Kafka
    4.x writes them (what a benchmark of a 4.x cluster's log reads). A name the model does not know is refused, and
    so is the option without the churn workload."""
    out = tmp_path / "churn40"
    code, text = invoke("--brokers", "4", "--dirs", "2", "--partitions", "20", "--workload", "churn", "--operations",
                        "200", "--metadata-version", "4.0-IV0", "--out", str(out), "--json")
    assert code == 0, text
    assert json.loads(text)["metadataVersion"] == "4.0-IV0"
    entries = list(MetadataLog.open(out / "metadata").read(from_snapshot=False))
    versions = {(type(e.record).__name__, e.record.version) for e in entries
                if type(e.record).__name__ in ("PartitionRecord", "PartitionChangeRecord")}
    assert versions == {("PartitionRecord", 2), ("PartitionChangeRecord", 2)}
    assert replay_entries(entries).same_state(replay_entries(load_jsonl(out / "records.jsonl")))
    code, text = invoke("--workload", "churn", "--metadata-version", "9.9", "--out", str(tmp_path / "bad"))
    assert code == EXIT_INPUT and "Unknown metadata.version '9.9'" in text
    # Only the churn workload takes it: elsewhere it would be ignored without a word.
    code, text = invoke("--brokers", "3", "--metadata-version", "4.0-IV0", "--out", str(tmp_path / "none"))
    assert code == EXIT_INPUT and "--metadata-version applies to" in text


def test_a_random_schedule(tmp_path: Path) -> None:
    code, text = invoke("--random", "8", "--seed", "5", "--out", str(tmp_path / "random"), "--json")
    assert code == 0, text
    assert json.loads(text)["scenario"] == "random-5"


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    code, out = invoke("no-such-scenario", "--out", str(tmp_path / "x"))
    assert code == EXIT_INPUT and "unknown scenario" in out
    code, out = invoke("demo")
    assert code == EXIT_INPUT and "--out" in out
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("not ours")
    code, out = invoke("demo", "--out", str(foreign))
    assert code == EXIT_INPUT and "not empty" in out
    assert (foreign / "keep.txt").read_text() == "not ours"


def test_rerunning_into_the_same_directory_replaces_the_previous_run(tmp_path: Path) -> None:
    out = tmp_path / "again"
    assert invoke("single-disk-failure", "--out", str(out))[0] == 0
    assert invoke("intra-broker-move", "--out", str(out))[0] == 0
    assert json.loads((out / "summary.json").read_text())["scenario"] == "intra-broker-move"
    assert len(list((out / "metadata" / "__cluster_metadata-0").glob("*.checkpoint"))) == 1
