"""``jbod report`` and ``jbod whatif`` read from the Delta tables: the same report (JSON) and the same what-if as a
replay of the input, at the latest offset and as of offsets in the middle (``--as-of-offset N`` on the tables is
``--as-of-offset N`` on the input), for the bundled demo (requests through the reference controller), a simulated
disk failure (a real metadata log with batch times) and a log whose beginning was deleted (the job starts from a
snapshot). The tables are written once, by ``jbod run`` itself (its Spark call given the shared session), with the
demo's disks loaded by ``--dirs``.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from unittest.mock import patch

import nbformat
import pytest
from pyspark.sql import SparkSession
from typer.testing import CliRunner

import pipelines.streaming.job
from jbod_model.meta_properties import read_file as read_meta_properties
from jbod_model.records.entry import LogEntry
from jbod_model.simulator.churn import ChurnSpec, churn_log
from jbod_model.simulator.output import write_jsonl_file, write_metadata_dir, write_result
from jbod_model.simulator.scenarios import run_scenario
from jbod_model.storage.files import parse_segment_name
from jbod_model.stream import StreamRunner, load_jsonl
from pipelines.cli import app
from pipelines.cli.run import DEMO_CLUSTER_ID, DEMO_INPUT, DEMO_LOG_DIRS
from pipelines.config.profiles import JobConfig
from pipelines.lakehouse.tables import as_of_image, replica_assignments_with_paths
from pipelines.quality import RESULTS_TABLE, CheckResult, QualityRun, read_results, write_results
from pipelines.report.load import offline_curve
from pipelines.streaming.job import RunSummary, run_job

runner = CliRunner(env={"COLUMNS": "200"})
DEMO_DIRS = [str(p) for p in sorted(DEMO_LOG_DIRS.iterdir())]
TRUNCATED = "truncated"
#: Where the truncated log's snapshot stands (its end offset); its log starts in the segment holding that offset.
SNAPSHOT_END = 30


@dataclass(frozen=True)
class Lake:
    tables: Path
    run_output: str
    #: The demo's metadata log (the records its requests made the controller write), as record-only JSONL.
    demo_log: Path
    sim: Path
    sim_cluster: str
    truncated: Path


def _demo_log(path: Path) -> Path:
    entries: list[LogEntry] = []
    controller = StreamRunner()
    for entry in load_jsonl(DEMO_INPUT):
        if isinstance(entry, LogEntry):
            entries.append(entry)
        for event in controller.run([entry]):
            entries.extend(event.entries)
    return write_jsonl_file(path, entries)


def _truncated_log(root: Path) -> Path:
    """A synthetic log with a snapshot at offset ``SNAPSHOT_END`` whose segments before it were deleted."""
    entries = [e for e in churn_log(ChurnSpec(seed=5, operations=60)) if isinstance(e, LogEntry)]
    write_metadata_dir(root, entries, cluster_id=TRUNCATED, records_per_segment=8, snapshot_at=SNAPSHOT_END)
    segments = sorted((root / "__cluster_metadata-0").glob("*.log"))
    bases = [parse_segment_name(p.name) for p in segments]
    keep_from = max(b for b in bases if b is not None and b <= SNAPSHOT_END)
    for path, base in zip(segments, bases, strict=True):
        if base is not None and base < keep_from:
            path.unlink()
    assert keep_from > 0, "the test needs a log whose first segments are gone"
    return root


@pytest.fixture(scope="module")
def lake(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lake]:
    root = tmp_path_factory.mktemp("report-tables")
    sim = root / "sim"
    write_result(run_scenario("single-disk-failure", seed=7), sim)
    sim_cluster = read_meta_properties(sim / "broker-1" / "metadata" / "meta.properties").cluster_id
    assert sim_cluster is not None
    truncated = _truncated_log(root / "truncated")
    tables = root / "tables"

    def run_with_config(inputs: list[Path], config: JobConfig, **_kw: Any) -> RunSummary:
        # The CLI's own Spark call, on the tests' session; the simulator's log dir has no meta.properties beside it.
        return run_job(inputs, config.tables, spark=spark, cluster_id=config.cluster_id,
                       cluster_ids={str(sim / "metadata"): sim_cluster})

    with patch.object(pipelines.streaming.job, "run_with_config", run_with_config):
        ran = runner.invoke(app, ["run", "--input", str(DEMO_INPUT), "--input", str(sim / "metadata"), "--input",
                                  str(truncated), "--tables", str(tables), "--cluster-id", DEMO_CLUSTER_ID,
                                  *(a for d in DEMO_DIRS for a in ("--dirs", d)), "--as-root"])
    assert ran.exit_code == 0, ran.output
    loaded = runner.invoke(app, ["dirs", "--as-root", *sorted(str(p) for p in sim.glob("broker-*")),
                                 "--tables", str(tables)])
    assert loaded.exit_code == 0, loaded.output
    yield Lake(tables, ran.output, _demo_log(root / "demo-log.jsonl"), sim, sim_cluster, truncated)
    shutil.rmtree(root, ignore_errors=True)


def _json(args: list[str]) -> Any:
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _report_tables(lake: Lake, cluster: str, as_of: int | None = None) -> Any:
    return _json(["report", "--tables", str(lake.tables), "--cluster", cluster, "--json",
                  *(["--as-of-offset", str(as_of)] if as_of is not None else [])])


def _dirs(roots: list[str]) -> list[str]:
    return [*(a for d in roots for a in ("--dirs", d)), "--as-root"]


def test_the_run_names_the_failed_disk_by_path(lake: Lake) -> None:
    assert "broker 2 /mnt/d1 (Y8UXxSTr…)" in lake.run_output
    assert f"Loaded 6 directories of cluster {DEMO_CLUSTER_ID}" in lake.run_output


def test_demo_report_from_tables_equals_the_replay_of_the_input(lake: Lake) -> None:
    from_tables = _report_tables(lake, DEMO_CLUSTER_ID)
    # The request stream itself, its disks named by the same meta.properties given on the command line.
    assert from_tables == _json(["report", str(DEMO_INPUT), "--json", *_dirs(DEMO_DIRS)])
    failed = [d for d in from_tables["disks"] if d["state"] == "OFFLINE"]
    assert [(d["directory"]["path"], d["directory"]["label"]) for d in failed] == [
        ("/mnt/d1", "broker 2 /mnt/d1 (Y8UXxSTr…)")]


@pytest.mark.parametrize("as_of", [3, 20, 28, 31, 32])
def test_demo_report_as_of_an_offset_equals_the_input_as_of_it(lake: Lake, as_of: int) -> None:
    # --as-of-offset on INPUT cuts records, not requests: the demo's log (the controller's records) is the input to cut.
    assert _report_tables(lake, DEMO_CLUSTER_ID, as_of) == _json(
        ["report", str(lake.demo_log), "--as-of-offset", str(as_of), "--json", *_dirs(DEMO_DIRS)])


def test_simulated_disk_failure_report_from_tables_equals_the_replay_of_the_log(lake: Lake) -> None:
    sim_dirs = sorted(str(p) for p in lake.sim.glob("broker-*"))
    metadata = str(lake.sim / "metadata")
    latest = _report_tables(lake, lake.sim_cluster)
    assert latest == _json(["report", metadata, "--full-log", "--json", *_dirs(sim_dirs)])
    # The incident timeline has the batches' append times (ms), not values a thousand times off.
    records = [json.loads(line) for line in (lake.sim / "records.jsonl").read_text().splitlines()]
    times = {r["offset"]: r["timestamp"] for r in records}
    assert latest["timeline"] and all(e["timestamp"] == times[e["offset"]] for e in latest["timeline"])
    assert any(e["timestamp"] for e in latest["timeline"])
    failure = min(e["offset"] for e in latest["timeline"] if e["kind"] == "DIRECTORY_FAILED")
    for as_of in (failure - 1, failure, (failure + latest["asOf"]["offset"]) // 2):
        assert _report_tables(lake, lake.sim_cluster, as_of) == _json(
            ["report", metadata, "--full-log", "--as-of-offset", str(as_of), "--json", *_dirs(sim_dirs)]), as_of


def test_a_log_that_starts_at_a_snapshot_reports_from_it(lake: Lake) -> None:
    # The job starts from the snapshot (the log before it is gone), as a replay of the dir does.
    assert _report_tables(lake, TRUNCATED) == _json(["report", str(lake.truncated), "--json"])
    for as_of in (SNAPSHOT_END - 1, SNAPSHOT_END + 7):
        assert _report_tables(lake, TRUNCATED, as_of) == _json(
            ["report", str(lake.truncated), "--as-of-offset", str(as_of), "--json"])
    before = runner.invoke(app, ["report", "--tables", str(lake.tables), "--cluster", TRUNCATED,
                                 "--as-of-offset", str(SNAPSHOT_END - 5)])
    assert before.exit_code == 2 and f"from the snapshot at offset {SNAPSHOT_END - 1}" in before.stderr


def test_whatif_from_tables_equals_whatif_on_the_input(lake: Lake) -> None:
    fail = "JbzRyYgxSHyV9F8hM29Rbg"  # broker 2's surviving disk, /mnt/d2
    from_tables = _json(["whatif", "--tables", str(lake.tables), "--cluster", DEMO_CLUSTER_ID, "--fail-dir", fail,
                         "--json"])
    assert from_tables == _json(["whatif", str(DEMO_INPUT), "--fail-dir", fail, "--json", *_dirs(DEMO_DIRS)])
    assert from_tables["failed"] == [{"brokerId": 2, "directory": fail, "path": "/mnt/d2"}]
    # The same disk named by its path on broker 2, as the inventory knows it.
    assert _json(["whatif", "--tables", str(lake.tables), "--cluster", DEMO_CLUSTER_ID, "--fail-dir", "2:/mnt/d2",
                  "--json"]) == from_tables
    terminal = runner.invoke(app, ["whatif", "--tables", str(lake.tables), "--cluster", DEMO_CLUSTER_ID,
                                   "--fail-dir", fail])
    assert "If broker 2 /mnt/d2 (JbzRyYgx…) failed now" in terminal.stdout

    # The simulated failure asked before it happened, as of the offset before it.
    event = next(e for e in _report_tables(lake, lake.sim_cluster)["timeline"] if e["kind"] == "DIRECTORY_FAILED")
    as_of, sim_fail = event["offset"] - 1, event["directory"]["directoryId"]
    before = _json(["whatif", "--tables", str(lake.tables), "--cluster", lake.sim_cluster, "--as-of-offset",
                    str(as_of), "--fail-dir", sim_fail, "--json"])
    assert before["partitions"] and before == _json(
        ["whatif", str(lake.sim / "metadata"), "--as-of-offset", str(as_of), "--fail-dir", sim_fail, "--json",
         *_dirs(sorted(str(p) for p in lake.sim.glob("broker-*")))])


def test_replica_assignments_joined_with_the_inventory(lake: Lake) -> None:
    rows = replica_assignments_with_paths(lake.tables, DEMO_CLUSTER_ID).to_pylist()
    assert len(rows) == 15 and all(r["path"] in ("/mnt/d1", "/mnt/d2") for r in rows)
    assert all(r["node_id"] == r["broker_id"] for r in rows)
    offline = sorted((r["broker_id"], r["path"]) for r in rows if r["offline"])
    assert offline == [(2, "/mnt/d1")] * 3
    # Before the placements (offset 8 has the partitions, not yet their directories) nothing has a path.
    early = replica_assignments_with_paths(lake.tables, DEMO_CLUSTER_ID, as_of_offset=12).to_pylist()
    assert early and all(r["path"] is None and r["node_id"] is None for r in early)


@pytest.mark.parametrize("name", ["01", "02", "03"])
def test_notebook_explores_the_tables_jbod_run_wrote(lake: Lake, name: str, tmp_path: Path) -> None:
    """The README's path from ``jbod run`` to a notebook: ``jbod notebook NAME --param TABLES=…`` reads the tables
    instead of simulating, and names the failed disk by its path from ``dir_inventory``."""
    out = tmp_path / f"{name}.ipynb"
    cluster = [] if name == "03" else ["--param", f"CLUSTER={DEMO_CLUSTER_ID}"]
    result = runner.invoke(app, ["notebook", name, "--param", f"TABLES={lake.tables}", *cluster, "--param",
                                 f"WORKDIR={tmp_path / 'work'}", "--out", str(out)])
    assert result.exit_code == 0, result.output
    book = nbformat.read(out, as_version=4)
    outputs = [o for c in book.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert [o for o in outputs if o.get("output_type") == "error"] == []
    text = "\n".join(str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    if name == "03":
        assert "run " in text and "results in" in text, "the checks ran on the tables"
    else:
        assert "/mnt/d1" in text, "the disk is named by its path from the inventory"
    assert not (tmp_path / "work" / "sim").exists(), "with TABLES the notebook does not simulate"


def test_the_quality_notebook_reviews_the_stored_run_instead_of_checking_again(lake: Lake, tmp_path: Path) -> None:
    """Notebook 03 over an operator's tables shows the newest run of the checks stored in ``dq_results`` (the
    schedule's) and checks nothing itself (at millions of partitions a run takes minutes); with none stored and
    ``RUN_CHECKS=False`` it says so."""
    tables = tmp_path / "lakehouse"
    shutil.copytree(lake.tables, tables, ignore=shutil.ignore_patterns(RESULTS_TABLE, "_checkpoints", "_dq"))

    def notebook(*params: str) -> tuple[int, str]:
        out = tmp_path / "03.ipynb"
        result = runner.invoke(app, ["notebook", "03", "--param", f"TABLES={tables}", "--param",
                                     f"WORKDIR={tmp_path / 'work'}", *params, "--out", str(out)])
        book = nbformat.read(out, as_version=4)
        outputs = [o for c in book.cells if c.cell_type == "code" for o in c.get("outputs", [])]
        return result.exit_code, "\n".join(str(o.get("text", "")) + str(o.get("evalue", "")) +
                                           str(o.get("data", {}).get("text/plain", "")) for o in outputs)

    code, text = notebook("--param", "RUN_CHECKS=False")
    assert code != 0 and "holds no run of the checks" in text
    stored = QualityRun(run_id="a" * 32, run_time=datetime(2026, 11, 25, 9, 0, tzinfo=UTC), tables_dir=str(tables),
                        engine="pandas", suites=("structural",),
                        results=[CheckResult(lake.sim_cluster, "structural", "I2.replicas_unique", "I2", "error",
                                             "passed", True, element_count=3, unexpected_count=0)])
    write_results(tables, stored)
    code, text = notebook("--param", f"CLUSTER={lake.sim_cluster}")
    assert code == 0, text
    assert f"run {stored.run_id} of 2026-11-25 09:00:00 UTC, stored in dq_results" in text
    assert "I2.replicas_unique" in text and "results in" not in text, "the stored run shown, no new one"
    assert list(read_results(tables)["run_id"].unique()) == [stored.run_id]
    assert not (tmp_path / "work" / "sim").exists()


def test_the_offline_curve_counts_the_offline_replicas_of_the_image_at_every_offset(lake: Lake) -> None:
    """``offline_curve`` (notebook 01's plot): at every offset, the last count at or before it is the number of
    offline replicas in the image as of that offset — the tables' image, itself equal to the replay's."""
    cluster = lake.sim_cluster
    offsets, counts = offline_curve(lake.tables, cluster)
    assert offsets == sorted(set(offsets)) and len(offsets) == len(counts) and max(counts) > 0
    last = json.loads(runner.invoke(app, ["image", "--tables", str(lake.tables), "--cluster", cluster,
                                          "--json"]).stdout)["lastOffset"]
    for at in sorted({0, offsets[0], *offsets[::3], offsets[-1], last}):
        image = as_of_image(lake.tables, cluster, as_of_offset=at)
        expected = sum(r["offline"] for r in image["replicas"])
        shown = next((c for o, c in zip(reversed(offsets), reversed(counts), strict=True) if o <= at), 0)
        assert shown == expected, at
    # Up to an offset: the changes after it are left out, the ones before it are the same.
    middle = offsets[len(offsets) // 2]
    assert offline_curve(lake.tables, cluster, middle) == ([o for o in offsets if o <= middle],
                                                            [c for o, c in zip(offsets, counts, strict=True)
                                                             if o <= middle])


def test_as_of_a_time_is_the_last_offset_appended_by_then(lake: Lake) -> None:
    """``--as-of TIME`` on image, report and whatif: the state as of the last record whose batch was appended at or
    before TIME (the simulator's batches carry real append times)."""
    records = [json.loads(line) for line in (lake.sim / "records.jsonl").read_text().splitlines()]
    stamps = sorted({r["timestamp"] for r in records if r.get("timestamp") is not None})
    assert len(stamps) > 3
    base = ["--tables", str(lake.tables), "--cluster", lake.sim_cluster]
    for ms in (stamps[1], stamps[len(stamps) // 2], stamps[-1]):
        expected = max(r["offset"] for r in records if r.get("timestamp") is not None and r["timestamp"] <= ms)
        when = datetime.fromtimestamp(ms / 1000, UTC).replace(tzinfo=None).isoformat()  # naive: read as UTC
        image = _json(["image", *base, "--as-of", when, "--json"])
        assert image == _json(["image", *base, "--as-of-offset", str(expected), "--json"])
        assert image["lastOffset"] == expected
        assert _json(["report", *base, "--as-of", when, "--json"]) == _report_tables(lake, lake.sim_cluster, expected)
    too_early = datetime.fromtimestamp(stamps[0] / 1000 - 3600, UTC).isoformat()
    result = runner.invoke(app, ["whatif", *base, "--as-of", too_early, "--fail-dir", "x"])
    assert result.exit_code == 2 and "no record at or before" in result.stderr
    both = runner.invoke(app, ["image", *base, "--as-of", too_early, "--as-of-offset", "3"])
    assert both.exit_code == 2 and "not both" in both.stderr


def test_all_clusters_is_each_clusters_own_report_worst_first(lake: Lake, tmp_path: Path) -> None:
    """``--all-clusters``: a fleet of three clusters in one set of tables — each cluster's report is exactly its own
    ``--cluster`` report, worst first (leaderless partitions, then offline replicas, open incidents, under min ISR,
    pending placements), and ``--html DIR`` writes one page per cluster plus an index linking them in that order."""
    out = tmp_path / "fleet"
    doc = _json(["report", "--tables", str(lake.tables), "--all-clusters", "--json", "--html", str(out)])
    got = {c["clusterId"]: c["report"] for c in doc["clusters"]}
    assert set(got) == {DEMO_CLUSTER_ID, lake.sim_cluster, TRUNCATED} and doc["notReported"] == []
    for cid, report in got.items():
        assert report == _report_tables(lake, cid), cid
    def badness(cid: str) -> tuple[int, ...]:
        s = got[cid]["summary"]
        return (-s["leaderlessPartitions"], -s["offlineReplicas"], -s["openIncidents"], -s["underMinIsrPartitions"],
                -s["pendingPlacements"])

    order = [c["clusterId"] for c in doc["clusters"]]
    assert order == sorted(got, key=lambda c: (badness(c), c))
    assert got[order[0]]["summary"]["leaderlessPartitions"] > 0, "the simulated failure left a partition leaderless"
    assert order[-1] == DEMO_CLUSTER_ID, "the demo's failure left no partition leaderless"
    index = (out / "index.html").read_text()
    positions = [index.index(f'href="{c["clusterId"]}.html"') for c in doc["clusters"]]
    assert positions == sorted(positions)
    for cid in got:
        page = (out / f"{cid}.html").read_text()
        assert f"cluster {cid}" in page and page.count("data:image/png;base64,") >= 1
    assert "broker 2 /mnt/d1" in index, "offline disks are named by path in the index"
    wrong = runner.invoke(app, ["report", "--tables", str(lake.tables), "--all-clusters", "--cluster", TRUNCATED])
    assert wrong.exit_code == 2 and "--all-clusters" in wrong.stderr
    # The clusters are reported by a pool of processes (one per core by default): one at a time, the same document.
    alone = runner.invoke(app, ["report", "--tables", str(lake.tables), "--all-clusters", "--json", "--jobs", "1"])
    assert alone.exit_code == 0 and json.loads(alone.stdout) == doc
    pooled = runner.invoke(app, ["report", "--tables", str(lake.tables), "--all-clusters", "--json", "--jobs", "3"])
    assert pooled.stdout == alone.stdout
    lone = runner.invoke(app, ["report", "--tables", str(lake.tables), "--cluster", TRUNCATED, "--jobs", "2"])
    assert lone.exit_code == 2 and "--jobs" in lone.stderr
    # In a pipe, each cluster's section starts with one short heading line, not a rule as wide as the unwrapped width.
    text = runner.invoke(app, ["report", "--tables", str(lake.tables), "--all-clusters"], env={"COLUMNS": None})
    assert text.exit_code == 0, text.output
    headings = [line for line in text.stdout.splitlines() if "cluster " in line and ("==" in line or "─" in line)]
    assert headings == [f"== cluster {c} ==" for c in order]
