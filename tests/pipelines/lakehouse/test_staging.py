"""The job's output files and write-behind (``pipelines.lakehouse.staging``): the operator's files read back as the
batch's rows; a batch is staged whole before ``foreachBatch`` returns (its files moved in, or its settled rows
written), written in order on a thread, removed once written; a failed write is raised to the caller and its batch
stays staged for the next run's flush; a partial staging, and files of batches never staged, are never written. The
Spark job around it: tests/pipelines/streaming/test_restart.py."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path

import pyarrow as pa
import pytest

from pipelines.lakehouse.staging import (
    Part,
    WriteBehind,
    flush_staged,
    parts_dir,
    read_parts,
    read_staged,
    stage_batch,
    stage_parts,
    write_part,
)


def _batch(n: int) -> dict[str, pa.Table]:
    return {"records": pa.table({"ord": pa.array(range(n), pa.int64()), "text": [f"r{i}" for i in range(n)]}),
            "brokers": pa.table({"ord": pa.array([n], pa.int64()), "broker_id": pa.array([n % 7], pa.int32())})}


class _Recording:
    """A :class:`pipelines.lakehouse.tables.TableWriter` that keeps what it was given; fails on ``fail_on``."""

    def __init__(self, fail_on: int | None = None, gate: threading.Event | None = None) -> None:
        self.written: list[tuple[int, dict[str, pa.Table]]] = []
        self.fail_on, self.gate = fail_on, gate

    def ensure_tables(self) -> None:
        pass

    def write_batch(self, batch_id: int, batch: Mapping[str, pa.Table]) -> dict[str, int]:
        if self.gate is not None:
            self.gate.wait(10)
        if batch_id == self.fail_on:
            raise OSError("disk full")
        self.written.append((batch_id, dict(batch)))
        return {name: t.num_rows for name, t in batch.items()}


def test_a_staged_batch_reads_back_equal_with_its_types(tmp_path: Path) -> None:
    batch = _batch(5)
    path = stage_batch(tmp_path / "staged", 3, batch)
    assert path == tmp_path / "staged" / "3"
    back = read_staged(path)
    assert back.keys() == batch.keys()
    for name, table in batch.items():
        assert back[name].equals(table)
        assert back[name].schema == table.schema


def test_flush_writes_staged_batches_in_batch_order_and_drops_partial_ones(tmp_path: Path) -> None:
    staged = tmp_path / "staged"
    for batch_id in (10, 9, 11):
        stage_batch(staged, batch_id, _batch(batch_id))
    (staged / ".partial-12").mkdir()  # a run died while staging batch 12: foreachBatch never returned
    writer = _Recording()
    assert flush_staged(staged, writer) == [9, 10, 11]
    assert [b for b, _ in writer.written] == [9, 10, 11]
    assert writer.written[0][1]["records"].num_rows == 9
    assert list(staged.iterdir()) == []
    assert flush_staged(tmp_path / "no-such-dir", writer) == []


def test_write_behind_writes_in_order_and_reports_each_batch(tmp_path: Path) -> None:
    writer, seen = _Recording(), []
    behind = WriteBehind(writer, tmp_path / "staged", lambda b, w, s: seen.append((b, w)))
    try:
        for batch_id in range(4):
            behind.submit(batch_id, _batch(batch_id + 1))
        behind.drain()
    finally:
        behind.close()
    assert [b for b, _ in writer.written] == [0, 1, 2, 3]
    assert seen == [(b, {"records": b + 1, "brokers": 1}) for b in range(4)]
    assert list((tmp_path / "staged").iterdir()) == []


def test_the_caller_goes_on_while_the_write_runs_and_the_batch_is_staged_meanwhile(tmp_path: Path) -> None:
    gate = threading.Event()
    writer = _Recording(gate=gate)
    behind = WriteBehind(writer, tmp_path / "staged", lambda b, w, s: None)
    try:
        behind.submit(0, _batch(2))  # returns although the write is held
        assert writer.written == []
        assert (tmp_path / "staged" / "0").is_dir()
        gate.set()
        behind.drain()
    finally:
        behind.close()
    assert [b for b, _ in writer.written] == [0]
    assert not (tmp_path / "staged" / "0").exists()


def test_a_failed_write_is_raised_at_the_next_batch_and_stays_staged_for_the_next_run(tmp_path: Path) -> None:
    staged = tmp_path / "staged"
    behind = WriteBehind(_Recording(fail_on=1), staged, lambda b, w, s: None)
    try:
        behind.submit(0, _batch(1))
        behind.submit(1, _batch(2))
        with pytest.raises(OSError, match="disk full"):
            behind.submit(2, _batch(3))  # batch 2 is not staged: Spark runs it again
    finally:
        behind.close()
    assert sorted(p.name for p in staged.iterdir()) == ["1"]
    rerun = _Recording()
    assert flush_staged(staged, rerun) == [1]
    assert rerun.written[0][1]["records"].equals(_batch(2)["records"])


def _parts(staged: Path, batch_id: int, n: int) -> list[Part]:
    """Batch ``n``'s rows as two buckets' output files (the first bucket's records, the second's records and
    brokers), written where the operator's tasks write them."""
    directory = parts_dir(staged, batch_id)
    batch = _batch(n)
    records = batch["records"]
    first, rest = records.slice(0, n // 2), records.slice(n // 2)
    return [Part("c", 0, "records", write_part(directory, "records", first), first.num_rows),
            Part("c", 1, "brokers", write_part(directory, "brokers", batch["brokers"]), 1),
            Part("c", 1, "records", write_part(directory, "records", rest), rest.num_rows)]


def _as_read(n: int) -> dict[str, pa.Table]:
    """What :func:`_parts` reads back as: each row with its cluster and bucket first."""
    batch = _batch(n)
    buckets = {"records": [0] * (n // 2) + [1] * (n - n // 2), "brokers": [1]}
    return {name: t.add_column(0, "bucket", pa.array(buckets[name], pa.int32())).add_column(
        0, "cluster_id", pa.array(["c"] * t.num_rows)) for name, t in batch.items()}


def test_the_operators_files_read_back_as_the_batch_with_each_rows_cluster_and_bucket(tmp_path: Path) -> None:
    parts = _parts(tmp_path / "staged", 4, 5)
    assert all(Path(p.file).parent == tmp_path / "staged" / "parts" / "4" for p in parts)
    assert len({p.file for p in parts}) == 3  # a name of each file's own: no two task attempts write the same one
    back = read_parts(parts)
    expected = _as_read(5)
    assert back.keys() == expected.keys()
    for name, table in expected.items():
        assert back[name].equals(table), name


def test_a_batch_staged_from_the_operators_files_moves_them_and_reads_back_equal(tmp_path: Path) -> None:
    staged = tmp_path / "staged"
    parts = _parts(staged, 7, 6)
    orphan = write_part(parts_dir(staged, 7), "records", _batch(1)["records"])  # a failed task attempt's file
    writer = _Recording()
    behind = WriteBehind(writer, staged, lambda b, w, s: None)
    try:
        behind.submit(7, read_parts(parts), parts)
        behind.drain()
    finally:
        behind.close()
    assert [b for b, _ in writer.written] == [7]
    assert not Path(orphan).exists() and not parts_dir(staged, 7).exists()
    assert list(staged.iterdir()) == [staged / "parts"]


def test_flush_writes_a_batch_staged_from_files_and_drops_files_never_staged(tmp_path: Path) -> None:
    staged = tmp_path / "staged"
    stage_parts(staged, 3, _parts(staged, 3, 4))  # staged, not yet written, when the run stopped …
    never_staged = _parts(staged, 4, 2)  # … while batch 4's tasks had written their files: Spark runs it again
    rerun = _Recording()
    assert flush_staged(staged, rerun) == [3]
    expected = _as_read(4)
    assert rerun.written[0][1].keys() == expected.keys()
    for name, table in expected.items():
        assert rerun.written[0][1][name].equals(table), name
    assert not any(Path(p.file).exists() for p in never_staged)
    assert list(staged.iterdir()) == []
