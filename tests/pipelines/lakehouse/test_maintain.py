"""``jbod maintain``: compaction, vacuum, checkpoint and log clean-up of every Delta table under a tables directory —
rows and app transactions unchanged, a short retention refused with the reason, a race with a writer reported.

Tables here are written with delta-rs the way the job writes them (MERGEs and appends, each commit carrying an app
transaction); tests/pipelines/lakehouse/test_maintain_job.py runs the real job around maintenance."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.table import TableOptimizer
from typer.testing import CliRunner

from jbod_model.errors import InputError
from pipelines.cli import app
from pipelines.cli.shared import EXIT_INPUT
from pipelines.config.profiles import MaintenanceSettings
from pipelines.lakehouse.maintenance import discover_tables, maintain
from pipelines.lakehouse.tables import read_table

runner = CliRunner(env={"COLUMNS": "200"})
APP = "kraft-jbod:test-query"


def _merge_batches(path: Path, batches: int) -> None:
    """``batches`` MERGE commits (one per micro-batch, each with its app transaction): a file per commit."""
    DeltaTable.create(path, schema=pa.schema([("k", pa.int64()), ("v", pa.string())]), mode="ignore")
    table = DeltaTable(path)
    for batch in range(batches):
        table.update_incremental()
        source = pa.table({"k": [batch % 3, 10 + batch], "v": [f"b{batch}", f"n{batch}"]})
        (table.merge(source, "t.k = s.k", source_alias="s", target_alias="t",
                     commit_properties=CommitProperties(app_transactions=[Transaction(APP, batch)]))
         .when_matched_update_all().when_not_matched_insert_all().execute())


def _appends(path: Path, batches: int) -> None:
    for batch in range(batches):
        write_deltalake(path, pa.table({"x": [batch]}), mode="append",
                        commit_properties=CommitProperties(app_transactions=[Transaction(APP, batch)]))


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    root = tmp_path / "lakehouse"
    _merge_batches(root / "merged", 6)
    _appends(root / "records", 5)
    _appends(root / "dq_results", 3)
    # Not tables of the job: the streaming checkpoint folder is skipped even if a Delta table sat in it.
    _appends(root / "_checkpoints" / "replay" / "not-mine", 3)
    (root / "_dq").mkdir()
    return root


def _rows(root: Path, table: str) -> list[dict[str, Any]]:
    return sorted(read_table(root, table).to_pylist(), key=lambda r: sorted(r.items()))


def _report(result: Any) -> dict[str, dict[str, Any]]:
    assert result.exit_code == 0, result.output
    return {r["table"]: r for r in json.loads(result.stdout)["results"]}


def test_discovery_finds_every_delta_table_but_not_underscore_folders(lake: Path) -> None:
    (lake / "nested" / "dir_inventory").mkdir(parents=True)
    _appends(lake / "nested" / "dir_inventory", 1)
    assert [p.relative_to(lake).as_posix() for p in discover_tables(lake)] == [
        "dq_results", "merged", "nested/dir_inventory", "records"]


def test_maintain_compacts_and_keeps_rows_and_app_transactions(lake: Path) -> None:
    before = {t: _rows(lake, t) for t in ("merged", "records", "dq_results")}
    live = len(DeltaTable(lake / "merged").file_uris())
    assert live > 1
    skipped_version = DeltaTable(lake / "_checkpoints" / "replay" / "not-mine").version()
    report = _report(runner.invoke(app, ["maintain", "--tables", str(lake), "--json"]))

    assert set(report) == {"merged", "records", "dq_results"}
    brokers = report["merged"]
    assert brokers["filesBefore"] == live and brokers["filesAfter"] == 1
    assert brokers["filesCompacted"] == live and brokers["filesWritten"] == 1
    assert brokers["bytesBefore"] > brokers["bytesAfter"] > 0
    assert report["records"]["filesBefore"] == 5 and report["records"]["filesAfter"] == 1
    assert brokers["checkpointVersion"] == brokers["versionAfter"] > brokers["versionBefore"]
    assert (lake / "merged" / "_delta_log" / "_last_checkpoint").is_file()
    # Files removed by the compaction are younger than the retention: still on disk for readers of older versions.
    assert brokers["filesVacuumed"] == 0
    assert {t: _rows(lake, t) for t in before} == before
    assert DeltaTable(lake / "merged").transaction_version(APP) == 5
    assert DeltaTable(lake / "records").transaction_version(APP) == 4
    assert DeltaTable(lake / "_checkpoints" / "replay" / "not-mine").version() == skipped_version

    again = _report(runner.invoke(app, ["maintain", "--tables", str(lake), "--json"]))
    assert again["merged"]["filesCompacted"] == 0 and again["merged"]["filesAfter"] == 1


def test_a_retention_below_168_hours_is_refused_with_the_reason(lake: Path) -> None:
    result = runner.invoke(app, ["maintain", "--tables", str(lake), "--vacuum-retention-hours", "24"])
    assert result.exit_code == EXIT_INPUT
    assert "168 h" in result.stderr and "older table version" in result.stderr and "--force" in result.stderr
    assert DeltaTable(lake / "merged").history(1)[0]["operation"] == "MERGE"  # nothing was done


def test_forced_vacuum_deletes_the_unreferenced_files(lake: Path) -> None:
    before = _rows(lake, "merged")
    on_disk = len(list((lake / "merged").glob("*.parquet")))
    report = _report(runner.invoke(app, ["maintain", "--tables", str(lake), "--vacuum-retention-hours", "0",
                                         "--force", "--json"]))
    kept = {p.name for p in (lake / "merged").glob("*.parquet")}
    live = {Path(u).name for u in DeltaTable(lake / "merged").file_uris()}
    assert kept == live and len(live) == 1
    # Every file there was: those the MERGEs rewrote and those the compaction replaced by the one it wrote.
    assert report["merged"]["filesVacuumed"] == on_disk > report["merged"]["filesBefore"]
    assert report["merged"]["bytesVacuumed"] > 0
    assert _rows(lake, "merged") == before
    assert DeltaTable(lake / "merged").transaction_version(APP) == 5


def test_expired_log_entries_are_dropped_and_the_transactions_stay_in_the_checkpoint(lake: Path) -> None:
    table = DeltaTable(lake / "merged")
    table.alter.set_table_properties({"delta.logRetentionDuration": "interval 0 seconds"})
    report = _report(runner.invoke(app, ["maintain", "--tables", str(lake), "--table", "merged", "--json"]))
    assert set(report) == {"merged"}
    assert report["merged"]["logFilesRemoved"] == 8  # the table's creation, 6 MERGEs, the property change
    assert not (lake / "merged" / "_delta_log" / "00000000000000000000.json").exists()
    assert DeltaTable(lake / "merged").transaction_version(APP) == 5


def test_dry_run_changes_nothing(lake: Path) -> None:
    files = sorted(str(p) for p in lake.rglob("*") if p.is_file())
    result = runner.invoke(app, ["maintain", "--tables", str(lake), "--dry-run", "--vacuum-retention-hours", "0",
                                 "--force", "--json"])
    report = _report(result)
    assert report["merged"]["filesCompacted"] == len(DeltaTable(lake / "merged").file_uris()) > 1
    assert report["merged"]["filesVacuumed"] > 0
    assert sorted(str(p) for p in lake.rglob("*") if p.is_file()) == files
    text = runner.invoke(app, ["maintain", "--tables", str(lake), "--dry-run"])
    assert text.exit_code == 0 and "Would maintain 3 tables" in text.stdout


def test_profile_env_and_cli_choose_compaction(lake: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    profile = tmp_path / "nightly.yaml"
    profile.write_text("maintenance:\n  optimize: false\n  retention_hours: 200\n")
    off = _report(runner.invoke(app, ["maintain", "--tables", str(lake), "--conf", str(profile), "--json"]))
    assert off["merged"]["filesCompacted"] == 0 and off["merged"]["filesAfter"] == off["merged"]["filesBefore"] > 1
    monkeypatch.setenv("JBOD_MAINTENANCE_RETENTION_HOURS", "12")
    refused = runner.invoke(app, ["maintain", "--tables", str(lake), "--conf", str(profile)])
    assert refused.exit_code == EXIT_INPUT and "12 h" in refused.stderr  # the environment beats the profile
    on = runner.invoke(app, ["maintain", "--tables", str(lake), "--conf", str(profile), "--optimize",
                             "--vacuum-retention-hours", "168", "--json"])
    assert json.loads(on.stdout)["retentionHours"] == 168  # and the CLI beats both
    assert _report(on)["merged"]["filesAfter"] == 1


def test_a_compaction_racing_a_writer_is_a_conflict_not_a_corruption(lake: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    original = TableOptimizer.compact

    def compact_after_a_concurrent_merge(self: TableOptimizer, *args: Any, **kwargs: Any) -> dict[str, Any]:
        # The job's next micro-batch commits between the compaction's planning snapshot and its commit.
        if "merged" in str(self.table.table_uri):
            writer = DeltaTable(lake / "merged")
            (writer.merge(pa.table({"k": [0], "v": ["racing"]}), "t.k = s.k", source_alias="s", target_alias="t",
                          commit_properties=CommitProperties(app_transactions=[Transaction(APP, 6)]))
             .when_matched_update_all().execute())
        return original(self, *args, **kwargs)  # type: ignore[no-any-return]

    monkeypatch.setattr(TableOptimizer, "compact", compact_after_a_concurrent_merge)
    result = runner.invoke(app, ["maintain", "--tables", str(lake), "--json"])
    assert result.exit_code == 1
    report = {r["table"]: r for r in json.loads(result.stdout)["results"]}
    assert report["merged"]["status"] == "conflict" and "concurrent" in report["merged"]["message"]
    assert report["records"]["status"] == "ok" and report["records"]["filesAfter"] == 1
    assert report["merged"]["checkpointVersion"] is not None  # the other steps still ran
    rows = {r["k"]: r["v"] for r in read_table(lake, "merged").to_pylist()}
    assert rows[0] == "racing" and DeltaTable(lake / "merged").transaction_version(APP) == 6


def test_no_tables_and_unknown_tables_are_input_errors(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match="no Delta tables"):
        maintain(empty, MaintenanceSettings())
    with pytest.raises(InputError, match="no such tables directory"):
        maintain(tmp_path / "missing", MaintenanceSettings())
    _appends(empty / "records", 1)
    with pytest.raises(InputError, match="no Delta table merged"):
        maintain(empty, MaintenanceSettings(), only=["merged"])
    result = runner.invoke(app, ["maintain", "--tables", str(empty)])
    assert result.exit_code == 0 and "records" in result.stdout
    assert os.path.isfile(empty / "records" / "_delta_log" / "_last_checkpoint")
