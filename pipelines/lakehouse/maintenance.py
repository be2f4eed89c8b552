"""Delta table maintenance (``jbod maintain``): compact small files, vacuum files no longer referenced, checkpoint
the log and drop its expired entries — for every Delta table under a tables directory.

Why each step, and why it is safe next to the streaming job (docs/jobs.md):

* **Folding** (current and history tables, ``pipelines.lakehouse.tables.fold_versions``): the job only appends (a
  batch's cost must not grow with the table), so a current table gathers superseded rows and a history table open-ended
  versions that a later row ended; readers resolve both, and folding stores the result so that they read one row per
  live key again. Readers give the same answers before and after. A table of the old (MERGE) layout is migrated.
* **Compaction** (``DeltaTable.optimize.compact``): every micro-batch appends a few small files to each table, so a
  table read through its Delta log opens thousands of files after a few days of 15-minute runs. The OPTIMIZE
  commit only rewrites files; app transactions are table state carried from commit to commit (and into
  checkpoints), so the job's ``(kraft-jbod:<query id>, batch id)`` marks survive it and a re-run batch is still
  skipped. An OPTIMIZE that races a commit of the running job fails Delta's conflict check instead of corrupting
  anything; the table is reported as a conflict and the next run compacts it.
* **Vacuum** deletes files that the log no longer references (removed by folding or a compaction, or orphaned by a
  writer that crashed before committing) once they are older than the retention. A shorter retention than Delta's
  default (168 h) is refused unless forced: a reader of an older version (a query, or a fold that planned against
  the version before a compaction) may still open those files.
* **Checkpoint and log clean-up**: a checkpoint lets readers skip replaying every JSON commit; the clean-up deletes
  commits older than ``delta.logRetentionDuration`` (30 days by default) that precede the checkpoint.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deltalake import DeltaTable
from deltalake.exceptions import CommitFailedError, DeltaError

from jbod_model.errors import InputError
from pipelines.config.profiles import DELTA_DEFAULT_RETENTION_HOURS, MaintenanceSettings
from pipelines.lakehouse.tables import VERSIONED, fold_versions


@dataclass
class TableMaintenance:
    """What maintenance did to one table (or, in a dry run, would do)."""

    table: str
    path: str
    version_before: int
    files_before: int
    bytes_before: int
    version_after: int = 0
    files_after: int = 0
    bytes_after: int = 0
    #: Folding: rows of a current or history table dropped or closed (dry run: that it would).
    rows_folded: int = 0
    #: Compaction: data files rewritten and the files that replaced them (dry run: the small files it would take).
    files_compacted: int = 0
    files_written: int = 0
    files_vacuumed: int = 0
    bytes_vacuumed: int = 0
    checkpoint_version: int | None = None
    log_files_removed: int = 0
    #: ``ok``; ``conflict`` (a concurrent commit won, run again); ``error`` (the message says what failed).
    status: str = "ok"
    message: str | None = None
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"table": self.table, "path": self.path, "status": self.status, "message": self.message,
                "versionBefore": self.version_before, "versionAfter": self.version_after,
                "filesBefore": self.files_before, "filesAfter": self.files_after,
                "bytesBefore": self.bytes_before, "bytesAfter": self.bytes_after,
                "rowsFolded": self.rows_folded, "filesCompacted": self.files_compacted,
                "filesWritten": self.files_written,
                "filesVacuumed": self.files_vacuumed, "bytesVacuumed": self.bytes_vacuumed,
                "checkpointVersion": self.checkpoint_version, "logFilesRemoved": self.log_files_removed,
                "seconds": round(self.seconds, 3)}


@dataclass
class MaintenanceRun:
    """Every table's :class:`TableMaintenance`, with the settings used."""

    tables_dir: str
    retention_hours: int
    optimize: bool
    dry_run: bool
    tables: list[TableMaintenance] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(t.status == "ok" for t in self.tables)

    def to_json(self) -> dict[str, Any]:
        return {"tables": self.tables_dir, "retentionHours": self.retention_hours, "optimize": self.optimize,
                "dryRun": self.dry_run, "ok": self.ok, "seconds": round(self.seconds, 3),
                "results": [t.to_json() for t in self.tables]}


def discover_tables(root: str | Path) -> list[Path]:
    """Every Delta table under ``root`` (the job's tables, ``dq_results`` and any other), sorted. Folders whose name
    starts with ``_`` or ``.`` are skipped — ``_checkpoints`` (Spark's streaming state), ``_dq`` (data docs) — and
    nothing inside a table is searched."""
    base = Path(root)
    if not base.is_dir():
        raise InputError(f"{base}: no such tables directory")
    found: list[Path] = []

    def walk(folder: Path) -> Iterator[Path]:
        for child in sorted(folder.iterdir()):
            if not child.is_dir() or child.name.startswith(("_", ".")):
                continue
            if (child / "_delta_log").is_dir():
                yield child
            else:
                yield from walk(child)

    found.extend(walk(base))
    return found


def check_retention(hours: int, *, force: bool) -> None:
    """Refuse a vacuum retention below Delta's default unless forced, saying why."""
    if hours < DELTA_DEFAULT_RETENTION_HOURS and not force:
        raise InputError(
            f"a vacuum retention of {hours} h is below Delta's default of {DELTA_DEFAULT_RETENTION_HOURS} h: files "
            "removed more recently may still be read — by a reader of an older table version, such as a query or a "
            "fold that planned against the version it read before a compaction removed them — and deleting "
            "them makes that read fail. Pass --force to vacuum anyway (e.g. when nothing reads or writes the tables).")


def _file_sizes(table: DeltaTable) -> list[int]:
    adds = table.get_add_actions(flatten=True)
    return [int(s) for s in adds.column("size_bytes").to_pylist()] if adds.num_rows else []


def _files(table: DeltaTable) -> tuple[int, int]:
    sizes = _file_sizes(table)
    return len(sizes), sum(sizes)


def _log_files(path: Path) -> set[str]:
    return {f.name for f in (path / "_delta_log").iterdir() if f.name.endswith((".json", ".parquet"))}


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def maintain_table(path: str | Path, settings: MaintenanceSettings, *, dry_run: bool = False,
                   force: bool = False) -> TableMaintenance:
    """Compact (when ``settings.optimize``), vacuum, checkpoint and clean up one table; with ``dry_run`` only count
    what would happen. A concurrent commit that wins over the compaction is reported (``conflict``), not raised."""
    check_retention(settings.retention_hours, force=force)
    started = time.monotonic()
    root = Path(path)
    table = DeltaTable(str(root))
    files, size = _files(table)
    out = TableMaintenance(root.name, str(root), table.version(), files, size)
    log_before = _log_files(root)
    try:
        if root.name in VERSIONED:
            try:
                out.rows_folded = fold_versions(table, root.name, dry_run=dry_run)
            except CommitFailedError as e:
                out.status, out.message = "conflict", f"folding lost to a concurrent commit, run again: {e}"
            table.update_incremental()
        if settings.optimize:
            if dry_run:
                small = [s for s in _file_sizes(table) if s < settings.target_file_size]
                # Compaction rewrites small files together; a lone small file has nothing to be merged with.
                out.files_compacted = len(small) if len(small) > 1 else 0
            else:
                try:
                    metrics = table.optimize.compact(target_size=settings.target_file_size)
                    out.files_compacted = int(metrics.get("numFilesRemoved", 0))
                    out.files_written = int(metrics.get("numFilesAdded", 0))
                except CommitFailedError as e:
                    out.status, out.message = "conflict", f"compaction lost to a concurrent commit, run again: {e}"
                table.update_incremental()
        # ``full``: besides files removed by commits, also files no commit ever referenced (a writer that died
        # between writing its Parquet and committing); the retention protects files a live writer is committing.
        def vacuum(dry: bool) -> list[str]:
            return [str(f) for f in table.vacuum(retention_hours=settings.retention_hours, dry_run=dry,
                                                 enforce_retention_duration=not force, full=True)]

        # Sizes are taken before the real vacuum deletes the files.
        unreferenced = {f: _size(root / f) for f in vacuum(True)}
        deleted = list(unreferenced) if dry_run else vacuum(False)
        out.files_vacuumed = len(deleted)
        out.bytes_vacuumed = sum(unreferenced.get(f, 0) for f in deleted)
        if not dry_run:
            table.update_incremental()
            table.create_checkpoint()
            out.checkpoint_version = table.version()
            table.cleanup_metadata()
    except DeltaError as e:
        out.status, out.message = "error", str(e)
    table = DeltaTable(str(root))
    out.version_after = table.version()
    out.files_after, out.bytes_after = _files(table)
    out.log_files_removed = len(log_before - _log_files(root))
    out.seconds = time.monotonic() - started
    return out


def maintain(tables_dir: str | Path, settings: MaintenanceSettings, *, dry_run: bool = False, force: bool = False,
             only: Sequence[str] | None = None) -> MaintenanceRun:
    """Maintain every Delta table under ``tables_dir`` (or the ones named in ``only``)."""
    check_retention(settings.retention_hours, force=force)
    started = time.monotonic()
    found = discover_tables(tables_dir)
    if only:
        names = {p.name for p in found}
        unknown = sorted(set(only) - names)
        if unknown:
            raise InputError(f"no Delta table {', '.join(unknown)} under {tables_dir} "
                             f"(tables: {', '.join(sorted(names)) or 'none'})")
        found = [p for p in found if p.name in set(only)]
    if not found:
        raise InputError(f"no Delta tables under {tables_dir} (run `jbod run` first, or check --tables)")
    run = MaintenanceRun(os.fspath(tables_dir), settings.retention_hours, settings.optimize, dry_run)
    run.tables = [maintain_table(p, settings, dry_run=dry_run, force=force) for p in found]
    run.seconds = time.monotonic() - started
    return run
