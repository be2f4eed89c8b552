"""The job's micro-batches on their way to the tables: the operator's output files, and the write-behind — the Delta
writes of batch N run while Spark computes batch N+1.

**Output files.** The stateful operator does not return its rows through Spark: each task writes its bucket's rows,
one uncompressed Arrow IPC file per table (:func:`write_part`), under ``<checkpoint>/staged/parts/<batch_id>``, and
returns one small row per file naming it (:class:`Part`); the driver memory-maps them (:func:`read_parts`). The
source hands the operator its input rows the same way (``pipelines.streaming.source``), in the same folder. Through
Spark, every output byte was copied from the worker into the JVM, into Spark's rows, into the task's result, to the
driver's JVM and into the driver's Python — 1.2 GB for the 200 k-partition benchmark log, 10.7 s of the JVM's
24 s of CPU (docs/state-design.md, "seventeenth round") — and the driver's JVM held a whole micro-batch's output.
This is how Spark's own file sinks work: tasks write files, the driver commits what their results name. A file is
named by no result until it is written whole; a failed task attempt's files are named by none and are removed with
their batch's folder.

**Write-behind.** Spark commits a micro-batch's offsets once ``foreachBatch`` returns, and never runs that batch
again. To return before the tables hold the batch, the sink first *stages* it under ``<checkpoint>/staged/<batch_id>``
(built under a temporary name and renamed into place, so a staged batch is whole or absent): the operator's files,
moved there with a list of whose rows each holds (:func:`stage_parts`), or — when the settled batch is not the
operator's rows as they are, after a replay fault — the settled rows written as files (:func:`stage_batch`). A thread
then appends them to the Delta tables — each table's commit carries the writer's app transaction (``DeltaRsWriter``)
— and removes the staged copy. At most one batch is in flight: staging batch N+1 waits for batch N's commit, so
batches reach the tables in order and at most one staged batch exists.

Exactly once, whatever dies when:

* before the batch is staged: ``foreachBatch`` did not return, Spark runs the batch again (nothing was written);
* after it is staged, before Spark commits the offsets, or after: the next run's :func:`flush_staged`, called
  before the query starts, appends what is staged. Spark either runs the batch again — its output is the same
  (the batch's offset range and its input state are fixed in the checkpoint) and the app transaction makes the
  second write a no-op, as for a crash between a write and the offsets' commit without staging — or it does not,
  and the staged copy was the only one;
* in the middle of the Delta appends: a table whose commit is there is skipped by its app transaction, the others
  are written.

A reader of the tables during a run sees them one batch behind the stream at most; a run that returns has
written everything (:meth:`WriteBehind.drain`). A stopped run's output files of batches it never staged are removed
by the next run's :func:`flush_staged` (Spark runs those batches again).
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    # For annotations only: the stream's source imports this module (a task's file names) in each of Spark's
    # planning processes, which never write a table (docs/state-design.md, "The planning processes' imports").
    from pipelines.lakehouse.tables import TableWriter

#: The folder of staged batches inside a job's checkpoint.
STAGED_DIR = "staged"
#: Inside :data:`STAGED_DIR`: the operator's output files of the batches being computed, a folder per batch id.
PARTS_DIR = "parts"
_PARTIAL = ".partial-"
#: A batch staged from the operator's files lists them here, with the cluster and bucket whose rows each holds.
_PARTS_LIST = "parts.json"


@dataclass(frozen=True, slots=True)
class Part:
    """One output file of the operator: a cluster bucket's rows of one table in one micro-batch (``ord``, ``at`` and
    the table's operator columns, :func:`pipelines.lakehouse.tables.operator_schema`)."""

    cluster_id: str
    bucket: int
    table: str
    file: str
    rows: int


def parts_dir(staged: Path, batch_id: int | str) -> Path:
    """Where the operator's tasks write batch ``batch_id``'s files."""
    return staged / PARTS_DIR / str(batch_id)


def part_path(directory: str | Path, name: str) -> str:
    """A new file's path under ``directory`` (created if missing), ending in ``name``, that no other task attempt
    uses."""
    os.makedirs(directory, exist_ok=True)
    return os.path.join(directory, f"{uuid.uuid4().hex}.{name}")


def write_part(directory: str | Path, table_name: str, rows: pa.Table) -> str:
    """Write one table of a bucket's output under ``directory``, as an uncompressed Arrow IPC file
    (:func:`part_path`); return its path. Uncompressed: the file lives for one batch and is read once,
    memory-mapped; writing it is a memory copy."""
    path = part_path(directory, f"{table_name}.arrow")
    with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, rows.schema) as out:
        out.write_table(rows)
    return path


def _read_file(path: str | Path) -> pa.Table:
    """An Arrow IPC file, memory-mapped: its columns point into the file's pages (which stay valid after the file
    is renamed or removed)."""
    with pa.memory_map(str(path)) as source:
        return pa.ipc.open_file(source).read_all()


def owned(rows: pa.Table, cluster_id: str, bucket: int) -> pa.Table:
    """A bucket's rows of one table with the cluster and the bucket they came from as the first columns."""
    n = rows.num_rows
    return rows.add_column(0, "bucket", pa.repeat(pa.scalar(bucket, pa.int32()), n)).add_column(
        0, "cluster_id", pa.repeat(pa.scalar(cluster_id, pa.string()), n))


def read_parts(parts: Sequence[Part]) -> dict[str, pa.Table]:
    """The micro-batch's rows by table — ``cluster_id``, ``bucket``, then the files' columns — from the operator's
    files, in the order given (each file's rows in the order its bucket made them)."""
    found: dict[str, list[pa.Table]] = {}
    for part in parts:
        found.setdefault(part.table, []).append(owned(_read_file(part.file), part.cluster_id, part.bucket))
    return {name: tables[0] if len(tables) == 1 else pa.concat_tables(tables) for name, tables in found.items()}


def remove_parts(staged: Path, batch_id: int | str | None = None) -> None:
    """Remove the operator's files of batch ``batch_id`` left in :data:`PARTS_DIR` (a failed task attempt's, once
    the batch is staged), or of every batch (None: no query is running)."""
    shutil.rmtree(staged / PARTS_DIR if batch_id is None else parts_dir(staged, batch_id), ignore_errors=True)


def stage_parts(staged: Path, batch_id: int, parts: Sequence[Part]) -> Path:
    """Stage a batch whose rows are the operator's files as they are: the files are moved (renamed, on the same
    file system) under ``staged/<batch_id>``, listed with whose rows each holds, atomically."""
    staged.mkdir(parents=True, exist_ok=True)
    final = staged / str(batch_id)
    partial = staged / f"{_PARTIAL}{batch_id}"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    listed = []
    for i, part in enumerate(parts):
        name = f"{i:05d}.{part.table}.arrow"
        os.replace(part.file, partial / name)
        listed.append({"cluster_id": part.cluster_id, "bucket": part.bucket, "table": part.table, "file": name,
                       "rows": part.rows})
    (partial / _PARTS_LIST).write_text(json.dumps(listed))
    shutil.rmtree(final, ignore_errors=True)
    partial.rename(final)
    return final


def stage_batch(staged: Path, batch_id: int, batch: Mapping[str, pa.Table]) -> Path:
    """Write one settled batch (table → the operator's rows) under ``staged/<batch_id>``, atomically."""
    staged.mkdir(parents=True, exist_ok=True)
    final = staged / str(batch_id)
    partial = staged / f"{_PARTIAL}{batch_id}"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    for name, rows in batch.items():
        # Uncompressed IPC: the copy lives for one batch and is read back at most once; writing it is a memory copy.
        with pa.OSFile(str(partial / f"{name}.arrow"), "wb") as sink, pa.ipc.new_file(sink, rows.schema) as out:
            out.write_table(rows)
    shutil.rmtree(final, ignore_errors=True)
    partial.rename(final)
    return final


def read_staged(path: Path) -> dict[str, pa.Table]:
    """A batch :func:`stage_batch` or :func:`stage_parts` staged."""
    listed = path / _PARTS_LIST
    if listed.is_file():
        return read_parts([Part(p["cluster_id"], int(p["bucket"]), p["table"], str(path / p["file"]), int(p["rows"]))
                           for p in json.loads(listed.read_text())])
    return {file.stem: _read_file(file) for file in sorted(path.glob("*.arrow"))}


def flush_staged(staged: Path, writer: TableWriter) -> list[int]:
    """Append the batches a stopped run left staged, in batch order, and remove them; return their ids. A partial
    staging (the run died while staging, before ``foreachBatch`` returned) is removed unwritten, and so are the
    operator's files of batches never staged: Spark runs those batches again."""
    if not staged.is_dir():
        return []
    remove_parts(staged)
    for partial in staged.glob(f"{_PARTIAL}*"):
        shutil.rmtree(partial)
    done: list[int] = []
    for path in sorted((p for p in staged.iterdir() if p.name.isdigit()), key=lambda p: int(p.name)):
        writer.write_batch(int(path.name), read_staged(path))
        shutil.rmtree(path)
        done.append(int(path.name))
    return done


class WriteBehind:
    """Stages each batch and appends it to the tables on a thread while the caller goes on (see the module
    docstring). ``on_written(batch_id, rows written per table, seconds)`` is called on that thread after a batch's
    commit; ``seconds`` covers its staging and its write."""

    def __init__(self, writer: TableWriter, staged: Path,
                 on_written: Callable[[int, dict[str, int], float], None]) -> None:
        self._writer = writer
        self._staged = staged
        self._on_written = on_written
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kraft-jbod-writes")
        self._pending: Future[None] | None = None

    def submit(self, batch_id: int, batch: Mapping[str, pa.Table], parts: Sequence[Part] | None = None) -> None:
        """Wait for the previous batch's write (raising its error, if it failed), stage this one, start its write.
        ``parts``: the operator's files that hold ``batch`` as it is (they are moved into the staged batch);
        None: ``batch`` is written to the staged batch."""
        self.drain()
        started = time.monotonic()
        if parts is None:
            path = stage_batch(self._staged, batch_id, batch)
        else:
            path = stage_parts(self._staged, batch_id, parts)
        remove_parts(self._staged, batch_id)
        self._pending = self._pool.submit(self._write, batch_id, batch, path, started)

    def _write(self, batch_id: int, batch: Mapping[str, pa.Table], path: Path, started: float) -> None:
        written = self._writer.write_batch(batch_id, batch)
        shutil.rmtree(path)
        self._on_written(batch_id, written, time.monotonic() - started)

    def drain(self) -> None:
        """Wait until every submitted batch is in the tables; raise the error of a write that failed (its batch
        stays staged for the next run)."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def close(self) -> None:
        """Wait for the write in flight, if any, and stop the thread; a failure is left to :meth:`drain` (a caller
        closing after an error of its own still has the batch staged)."""
        self._pool.shutdown(wait=True)
