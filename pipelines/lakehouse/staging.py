"""Write-behind for the job's micro-batches: the Delta writes of batch N run while Spark computes batch N+1.

Spark commits a micro-batch's offsets once ``foreachBatch`` returns, and never runs that batch again. To return
before the tables hold the batch, the sink first *stages* it: the batch's settled rows, as Arrow IPC files, under
``<checkpoint>/staged/<batch_id>`` (written under a temporary name and renamed into place, so a staged batch is
whole or absent). A thread then appends them to the Delta tables — each table's commit carries the writer's app
transaction (``DeltaRsWriter``) — and removes the staged copy. At most one batch is in flight: staging batch N+1
waits for batch N's commit, so batches reach the tables in order and at most one staged batch exists.

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
written everything (:meth:`WriteBehind.drain`).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa

from pipelines.lakehouse.tables import TableWriter

#: The folder of staged batches inside a job's checkpoint.
STAGED_DIR = "staged"
_PARTIAL = ".partial-"


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
    """A batch :func:`stage_batch` wrote."""
    out: dict[str, pa.Table] = {}
    for file in sorted(path.glob("*.arrow")):
        with pa.memory_map(str(file)) as source:
            out[file.stem] = pa.ipc.open_file(source).read_all()
    return out


def flush_staged(staged: Path, writer: TableWriter) -> list[int]:
    """Append the batches a stopped run left staged, in batch order, and remove them; return their ids. A partial
    staging (the run died while staging, before ``foreachBatch`` returned) is removed unwritten: Spark runs that
    batch again."""
    if not staged.is_dir():
        return []
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

    def submit(self, batch_id: int, batch: Mapping[str, pa.Table]) -> None:
        """Wait for the previous batch's write (raising its error, if it failed), stage this one, start its write."""
        self.drain()
        started = time.monotonic()
        path = stage_batch(self._staged, batch_id, batch)
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
