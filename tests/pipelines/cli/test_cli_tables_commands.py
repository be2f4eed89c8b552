"""``jbod report``, ``jbod whatif`` and ``jbod dirs`` on the Delta tables, without Spark (tables written by the job's
operator and Delta writer, as in the data-quality tests): INPUT or ``--tables`` and the options of each, clusters,
disks named from ``dir_inventory`` (``--dirs`` on top), and ``jbod dirs --tables`` loading it.
test_report_tables.py compares the reports with replays of the inputs on tables the Spark job wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_quality_support import DEMO, bad_logs, write_lakehouse
from typer.testing import CliRunner

from jbod_model.errors import InputError
from jbod_model.meta_properties import DirInventoryRow, MetaProperties, MetaPropertiesVersion, to_text
from jbod_model.report import DirectoryPaths
from jbod_model.stream import load_jsonl
from jbod_model.uuid import Uuid
from pipelines.cli import app
from pipelines.cli.run import DEMO_CLUSTER_ID, DEMO_LOG_DIRS
from pipelines.cli.shared import EXIT_INPUT
from pipelines.cli.whatif import directory_id
from pipelines.lakehouse.tables import DIR_INVENTORY, DeltaRsWriter, read_table

runner = CliRunner(env={"COLUMNS": "200"})
BROKERS = [str(p) for p in sorted(DEMO_LOG_DIRS.iterdir())]
FAILED = "Y8UXxSTrSB2pCc9s439Vkw"  # broker 2's /mnt/d1, offline at offset 32


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's tables under its own cluster id, its disks loaded by ``jbod dirs --tables``."""
    tables = tmp_path_factory.mktemp("demo-tables")
    write_lakehouse(tables, DEMO_CLUSTER_ID, load_jsonl(DEMO), input_kind="jsonl")
    loaded = runner.invoke(app, ["dirs", "--as-root", *BROKERS, "--tables", str(tables), "--json"])
    assert loaded.exit_code == 0, loaded.output
    return tables


def _error(args: list[str]) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == EXIT_INPUT, result.output
    return result.stderr


def test_dirs_loads_the_inventory_and_still_prints_it(demo: Path) -> None:
    again = runner.invoke(app, ["dirs", "--as-root", *BROKERS, "--tables", str(demo), "--json"])
    assert again.exit_code == 0
    doc = json.loads(again.stdout)  # stdout stays the JSON; the load is reported on stderr
    assert [(d["nodeId"], d["path"]) for d in doc["directories"]] == [
        (n, p) for n in (1, 2, 3) for p in ("/mnt/d1", "/mnt/d2")]
    assert doc["directories"][0]["readFrom"] == str(DEMO_LOG_DIRS / "broker-1" / "mnt" / "d1")
    assert f"Loaded 6 directories of cluster {DEMO_CLUSTER_ID}" in again.stderr
    assert read_table(demo, DIR_INVENTORY).num_rows == 6  # loaded twice, the same six rows
    assert "--cluster-id goes with --tables" in _error(["dirs", "--cluster-id", "c", *BROKERS])


def test_dirs_names_the_cluster_of_version_0_files(tmp_path: Path) -> None:
    disk = tmp_path / "disks" / "d1"
    disk.mkdir(parents=True)
    (disk / "meta.properties").write_text(to_text(MetaProperties(MetaPropertiesVersion.V0, node_id=4,
                                                                 directory_id=Uuid(3, 3))))
    assert "--cluster-id" in _error(["dirs", str(disk), "--tables", str(tmp_path / "t")])
    named = runner.invoke(app, ["dirs", str(disk), "--tables", str(tmp_path / "t"), "--cluster-id", "old"])
    # Loaded, and still exit 1: Kafka refuses a directory without cluster.id at startup (an error finding).
    assert named.exit_code == 1 and "Loaded 1 directories of cluster old" in named.stderr
    assert "cluster ID not found" in named.stdout
    assert read_table(tmp_path / "t", DIR_INVENTORY).to_pylist()[0]["findings"] == [
        {"severity": "error", "message": f"Error: cluster ID not found in {disk}"}]


def test_report_from_tables_names_disks_from_the_inventory(demo: Path) -> None:
    result = runner.invoke(app, ["report", "--tables", str(demo)])
    assert result.exit_code == 0, result.output
    assert "broker 2 /mnt/d1 (Y8UXxSTr…)" in result.stdout
    doc = json.loads(runner.invoke(app, ["report", "--tables", str(demo), "--json"]).stdout)
    assert doc["inventory"]["directories"] == 6 and doc["inventory"]["matched"] == 6


def test_dirs_given_on_the_command_line_win_over_the_table(demo: Path, tmp_path: Path) -> None:
    moved = tmp_path / "b2" / "srv" / "kafka-a"
    moved.mkdir(parents=True)
    (moved / "meta.properties").write_text(to_text(MetaProperties(
        MetaPropertiesVersion.V1, cluster_id=DEMO_CLUSTER_ID, node_id=2, directory_id=Uuid.from_string(FAILED))))
    doc = json.loads(runner.invoke(app, ["report", "--tables", str(demo), "--json", "--dirs", str(tmp_path / "b2"),
                                         "--as-root"]).stdout)
    labels = {d["directory"]["directoryId"]: d["directory"]["label"] for d in doc["disks"]}
    assert labels[FAILED] == "broker 2 /srv/kafka-a (Y8UXxSTr…)"
    assert labels["JbzRyYgxSHyV9F8hM29Rbg"] == "broker 2 /mnt/d2 (JbzRyYgx…)"  # from the table


def test_report_takes_input_or_tables(demo: Path) -> None:
    assert "not both" in _error(["report", str(DEMO), "--tables", str(demo)])
    assert "give INPUT" in _error(["report"])
    assert "--full-log goes with INPUT" in _error(["report", "--tables", str(demo), "--full-log"])
    assert "--as-of goes with --tables" in _error(["report", str(DEMO), "--as-of", "2024-05-01T00:00:00"])
    assert "--cluster goes with --tables" in _error(["report", str(DEMO), "--cluster", "c"])


def test_report_names_the_clusters_it_knows(demo: Path, tmp_path: Path) -> None:
    assert f"cluster 'nope' is not in {demo} (clusters: {DEMO_CLUSTER_ID})" in _error(
        ["report", "--tables", str(demo), "--cluster", "nope"])
    assert "is not a Delta table" in _error(["report", "--tables", str(tmp_path / "nothing")])
    DeltaRsWriter(tmp_path / "empty", "test").ensure_tables()
    assert "holds no cluster yet" in _error(["report", "--tables", str(tmp_path / "empty")])
    assert "holds no cluster yet" in _error(["whatif", "--tables", str(tmp_path / "empty"), "--fail-dir", FAILED])


def test_whatif_takes_a_disk_by_path_from_the_inventory(demo: Path) -> None:
    by_id = runner.invoke(app, ["whatif", "--tables", str(demo), "--fail-dir", "JbzRyYgxSHyV9F8hM29Rbg", "--json"])
    by_path = runner.invoke(app, ["whatif", "--tables", str(demo), "--fail-dir", "2:/mnt/d2", "--json"])
    assert by_id.exit_code == 0 and json.loads(by_path.stdout) == json.loads(by_id.stdout)
    assert "a disk of several brokers: name one as NODE:PATH (1:/mnt/d2, 2:/mnt/d2, 3:/mnt/d2)" in _error(
        ["whatif", "--tables", str(demo), "--fail-dir", "/mnt/d2"])
    assert "not a directory id, nor a log dir here, nor a path of the inventory" in _error(
        ["whatif", "--tables", str(demo), "--fail-dir", "2:/mnt/d9"])
    # Without an inventory a path cannot be a broker's disk.
    assert "need --dirs or a dir_inventory table" in _error(["whatif", str(DEMO), "--fail-dir", "/mnt/d2"])
    # A failed disk is not online any more: the model says so.
    assert "not an online directory" in _error(["whatif", "--tables", str(demo), "--fail-dir", FAILED])


def test_whatif_takes_input_or_tables(demo: Path) -> None:
    assert "not both" in _error(["whatif", str(DEMO), "--tables", str(demo), "--fail-dir", FAILED])
    assert "give INPUT" in _error(["whatif", "--fail-dir", FAILED])
    assert "--fail-dir" in _error(["whatif", "--tables", str(demo)])
    assert "--as-of goes with --tables" in _error(["whatif", str(DEMO), "--as-of", "2024-05-01T00:00:00",
                                                   "--fail-dir", FAILED])
    as_of = runner.invoke(app, ["whatif", "--tables", str(demo), "--as-of-offset", "31", "--fail-dir", FAILED])
    assert as_of.exit_code == 0 and "If broker 2 /mnt/d1 (Y8UXxSTr…) failed now: 3 replicas" in as_of.stdout


def test_report_says_where_the_jobs_replay_stopped(tmp_path: Path) -> None:
    write_lakehouse(tmp_path, "bad", bad_logs()["directory-of-two-brokers"])  # broker 4 registers broker 1's disk
    result = runner.invoke(app, ["report", "--tables", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["asOf"]["offset"] == 32
    assert "the tables end before offset 33, where the job's replay of cluster bad stopped" in result.stderr


def test_a_path_with_a_replaced_disk_means_the_online_directory() -> None:
    """dir_inventory keeps a replaced disk's old id at its path (retired): ``--fail-dir 2:/mnt/d1`` then means the
    directory broker 2 has online, not the old one; without that knowledge the path stays ambiguous."""
    old, new = Uuid(7, 1), Uuid(7, 2)
    paths = DirectoryPaths.from_inventory(
        [DirInventoryRow(node_id=2, path="/mnt/d1", directory_id=d, cluster_id="c", version=1) for d in (old, new)])
    assert directory_id("2:/mnt/d1", paths, frozenset({new, Uuid(7, 3)})) == new
    with pytest.raises(InputError, match="several"):
        directory_id("2:/mnt/d1", paths)
