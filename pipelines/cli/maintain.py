"""``jbod maintain``: compaction, vacuum, checkpoint and log clean-up of every Delta table under the tables
directory (:mod:`pipelines.lakehouse.maintenance`, docs/jobs.md).

:func:`register` adds the command to the ``jbod`` app (``pipelines.cli.main``). Delta loads only when the command
runs.

Exit codes: 0 every table maintained, 1 a table was not (a concurrent commit won, or Delta failed: the table's row
says which), 2 bad input (no tables, a retention below 168 h without ``--force``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from pipelines.cli import shared

if TYPE_CHECKING:
    from pipelines.lakehouse.maintenance import MaintenanceRun


def _bytes(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    size = float(n)
    for unit in ("KiB", "MiB", "GiB"):
        size /= 1024
        if size < 1024 or unit == "GiB":
            break
    return f"{size:.1f} {unit}"


def _print(run: MaintenanceRun, console: Any, table: Any) -> None:
    what = "Would maintain" if run.dry_run else "Maintained"
    out = table(f"{what} {len(run.tables)} tables in {run.tables_dir} (vacuum retention {run.retention_hours} h, "
                f"compaction {'on' if run.optimize else 'off'})",
                "table", "files before", "files after", "size before", "size after", "folded", "compacted",
                "vacuumed", "checkpoint", "status")
    for t in run.tables:
        status = Text("ok", style="green") if t.status == "ok" else Text(t.status, style="bold red")
        out.add_row(t.table, str(t.files_before), str(t.files_after), _bytes(t.bytes_before), _bytes(t.bytes_after),
                    str(t.rows_folded),
                    f"{t.files_compacted} → {t.files_written}" if not run.dry_run else str(t.files_compacted),
                    f"{t.files_vacuumed} ({_bytes(t.bytes_vacuumed)})",
                    "" if t.checkpoint_version is None else f"v{t.checkpoint_version}", status)
    console.print(out)
    for t in run.tables:
        if t.message:
            console.print(f"[bold red]{t.table}[/]: {t.message}", highlight=False)
    files_before = sum(t.files_before for t in run.tables)
    files_after = sum(t.files_after for t in run.tables)
    console.print(f"{files_before} data files → {files_after}; {sum(t.files_vacuumed for t in run.tables)} "
                  f"unreferenced files {'to vacuum' if run.dry_run else 'vacuumed'} "
                  f"({_bytes(sum(t.bytes_vacuumed for t in run.tables))}); {run.seconds:.1f} s", highlight=False)


def register(app: typer.Typer) -> None:
    """Add ``maintain`` to ``app``."""

    @app.command("maintain")
    def maintain(
        tables: Annotated[Path | None, typer.Option(
            "--tables", help="The tables directory (profile: ./lakehouse); every Delta table under it is maintained.",
            show_default=False)] = None,
        conf: Annotated[str | None, typer.Option(
            "--conf", help="A profile in conf/ (local, standalone, cluster) or a YAML file.",
            show_default=False)] = None,
        optimize: Annotated[bool | None, typer.Option(
            "--optimize/--no-optimize", help="Compact small files (profile: maintenance.optimize).",
            show_default=False)] = None,
        retention_hours: Annotated[int | None, typer.Option(
            "--vacuum-retention-hours", min=0, help="Vacuum files removed longer ago than this (profile: "
                                                    "maintenance.retention_hours, 168).", show_default=False)] = None,
        force: Annotated[bool, typer.Option(
            "--force", help="Allow a retention below 168 h (only when nothing reads or writes the tables).")] = False,
        table_names: Annotated[list[str] | None, typer.Option(
            "--table", help="Maintain only this table (repeat for several).", show_default=False)] = None,
        dry_run: Annotated[bool, typer.Option(
            "--dry-run", help="Count what would be compacted and vacuumed; change nothing.")] = False,
        as_json: Annotated[bool, typer.Option("--json", help="The per-table report as JSON.")] = False,
    ) -> None:
        """Compact small files, vacuum unreferenced files, checkpoint the Delta log and drop its expired entries,
        for every Delta table under [bold]--tables[/] (the job's tables, dq_results, …).

        Safe next to the streaming job: its exactly-once app transactions survive compaction, and a compaction
        that races one of its commits is reported as a conflict (exit 1) instead of being forced.
        """

        with shared.fail():
            from pipelines.config.profiles import resolve_config  # noqa: PLC0415
            from pipelines.lakehouse.maintenance import maintain as run_maintenance  # noqa: PLC0415

            config = resolve_config(conf, cli={"tables": tables, "maintenance.optimize": optimize,
                                               "maintenance.retention_hours": retention_hours})
            run = run_maintenance(config.tables, config.maintenance, dry_run=dry_run, force=force, only=table_names)
            if as_json:
                import json  # noqa: PLC0415

                print(json.dumps(run.to_json(), sort_keys=True))
            else:
                _print(run, shared.console(), shared.table)
        if not run.ok:
            raise typer.Exit(1)
