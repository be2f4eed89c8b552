"""``jbod report``: what is broken now, on which disk (by path), since when, and what happened — in the terminal,
as JSON (docs/report-json.md) or as one self-contained HTML page.

:func:`register` adds the command to the ``jbod`` app (``pipelines.cli`` calls it at the bottom of its module, so
the helpers it shares — ``_fail``, ``_table``, ``_console`` — are imported inside the command, never at import time,
which would be an import cycle).

Getting a report is two steps with one seam between them:

1. *load* — an image and a :class:`~jbod_model.report.ReportHistory` (a :class:`ReportData`).
   :func:`load_from_inputs` replays metadata files (``open_inputs`` + ``StreamRunner``, requests run through the
   reference controller) and feeds a :class:`~jbod_model.report.ReportTracker` as it goes; :func:`load_from_records`
   does the same for a source that already holds every committed record, the controller's included;
2. *build and render* — :func:`jbod_model.report.build_report`, then ``pipelines.report_render``.

Hook for the Delta tables (not implemented here): ``--tables DIR [--cluster C] [--as-of-offset N]`` is a third
loader returning the same :class:`ReportData`. The Spark job's ``records`` table (``pipelines.tables``) holds every
record replayed — read or written by the reference controller — with its offset, batch base offset and time: read
the cluster's rows with offset ≤ N in offset order, turn each into a ``LogEntry`` (``record_from_json`` on
type/version/data) and hand them to :func:`load_from_records`, which gives the image and the history in one pass.
For a long history, start from a snapshot instead: an image as of some offset M (``pipelines.tables.as_of_image``)
as ``base_image`` and only the records after M. The command then takes INPUT or ``--tables`` (exclusive) and
everything after step 1 stays as it is; ``--dirs`` works unchanged (a ``dir_inventory`` table would become
:class:`~jbod_model.report.DirectoryPaths` the same way).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from jbod_model.controller.controller import ReferenceController
from jbod_model.errors import InputError
from jbod_model.image import EMPTY_IMAGE, MetadataImage
from jbod_model.meta_properties import DirInventory, inventory
from jbod_model.records.entry import LogEntry
from jbod_model.records.json_codec import dumps
from jbod_model.report import DirectoryPaths, ReportHistory, ReportTracker, build_report, run_and_track
from jbod_model.sources import open_inputs
from jbod_model.storage.log_reader import ReadPolicy
from jbod_model.stream import StreamRunner


@dataclass(frozen=True, slots=True)
class ReportData:
    """What a report is built from, wherever it came from: the image, the history, and what the input readers had
    to skip (shown as warnings)."""

    image: MetadataImage
    history: ReportHistory | None
    skipped: tuple[str, ...] = ()


def load_from_inputs(inputs: list[Path], *, until_offset: int | None = None, policy: ReadPolicy = "fail",
                     full_log: bool = False) -> ReportData:
    """Replay metadata files (a log dir, segments, a snapshot, dump text or JSONL with controller requests) and
    track the history while doing so. The history starts at the input's base image (a snapshot's, or empty)."""
    loaded = open_inputs(inputs, policy=policy, until_offset=until_offset, from_snapshot=not full_log)
    runner = StreamRunner(ReferenceController(loaded.base_image))
    tracker = ReportTracker(loaded.base_image)
    run_and_track(runner, loaded.entries, tracker)
    skipped = [] if loaded.report.clean else [loaded.report.summary()]
    for reader in loaded.dump_readers:
        skipped.extend(str(p) for p in reader.report().problems)
    return ReportData(image=runner.image, history=tracker.history(), skipped=tuple(skipped))


def load_from_records(entries: Iterable[LogEntry], base_image: MetadataImage = EMPTY_IMAGE) -> ReportData:
    """Replay committed records (no controller requests) from ``base_image`` and track the history: for sources
    that hold the whole log, the controller's writes included (the Spark job's ``records`` table)."""
    tracker = ReportTracker(base_image)
    tracker.feed_all(entries)
    return ReportData(image=tracker.image, history=tracker.history())


def load_paths(dirs: list[Path] | None) -> tuple[DirectoryPaths | None, DirInventory | None]:
    """The Uuid → path join from meta.properties files or folders holding them (``jbod dirs`` reads the same)."""
    if not dirs:
        return None, None
    inv = inventory(dirs)
    if not inv.rows:
        raise InputError(f"no meta.properties found under {', '.join(str(d) for d in dirs)}")
    return DirectoryPaths.from_inventory(inv.rows), inv


def _write_html(path: Path, html: str) -> None:
    try:
        path.write_text(html, encoding="utf-8")
    except OSError as e:
        raise InputError(f"cannot write the HTML report to {path}: {e.strerror or e}") from None


def register(app: typer.Typer) -> None:
    """Add ``report`` to ``app``."""

    @app.command("report")
    def report(
        inputs: Annotated[list[Path], typer.Argument(
            help="A node's metadata log dir (or several nodes' copies of one cluster), segment(s) <offset>.log, a "
                 "snapshot <offset>-<epoch>.checkpoint, kafka-dump-log text, or canonical JSONL.",
            show_default=False)],
        until_offset: Annotated[int | None, typer.Option(
            "--until-offset", help="Report as of offset N: replay only records with offset < N.")] = None,
        dirs: Annotated[list[Path] | None, typer.Option(
            "--dirs", help="meta.properties files, log dirs or folders holding them, to name disks by path "
                           "(repeat for several).", show_default=False)] = None,
        as_json: Annotated[bool, typer.Option("--json", help="The report as JSON (docs/report-json.md).")] = False,
        html: Annotated[Path | None, typer.Option(
            "--html", help="Also write a self-contained HTML report (plots and tables) to FILE.", metavar="FILE",
            show_default=False)] = None,
        full_log: Annotated[bool, typer.Option(
            "--full-log", help="For a metadata dir: replay the whole log instead of the latest snapshot plus the "
                               "log after it (a longer history).")] = False,
        policy: Annotated[str, typer.Option(
            "--policy", help="On undecodable input: 'fail', or 'skip' it and report what was skipped.")] = "fail",
    ) -> None:
        """Report offline replicas by disk, leaderless and under-min-ISR partitions, pending placements, per-disk
        replica and leader counts, and the incident timeline (directory failures, fencing, and what followed).

        Replays INPUT (requests in a JSONL input are run through the reference controller). With [bold]--dirs[/]
        every directory is named by broker and path, e.g. [italic]broker 3 /mnt/d2 (P2aL9r4s…)[/].
        """
        # Imported here: pipelines.cli imports this module to call register(app), and the renderers pull in
        # matplotlib and jinja2, which only this command needs (not every `jbod` start).
        from pipelines.cli import _console, _fail, _table  # noqa: PLC0415
        from pipelines.report_render import render_html, render_terminal, report_to_json  # noqa: PLC0415

        with _fail():
            if policy not in ("fail", "skip"):
                raise InputError(f"--policy must be 'fail' or 'skip', not {policy!r}")
            paths, inv = load_paths(dirs)
            data = load_from_inputs(inputs, until_offset=until_offset, policy="fail" if policy == "fail" else "skip",
                                    full_log=full_log)
            for line in data.skipped:
                _console(stderr=True).print(f"[yellow]skipped:[/] {line}", highlight=False)
            for finding in inv.all_findings if inv is not None else ():
                _console(stderr=True).print(f"[yellow]{finding.severity}[/] {finding.path}: {finding.message}",
                                            highlight=False)
            result = build_report(data.image, paths=paths, history=data.history)
            if html is not None:
                _write_html(html, render_html(result))
                _console(stderr=True).print(f"wrote {html}", highlight=False)
            if as_json:
                print(dumps(report_to_json(result)))
            else:
                render_terminal(result, _console(), _table)
