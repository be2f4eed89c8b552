"""``jbod report``: what is broken now, on which disk (by path), since when, and what happened — in the terminal,
as JSON (docs/report-json.md) or as one self-contained HTML page.

:func:`register` adds the command to the ``jbod`` app (``pipelines.cli`` calls it at the bottom of its module, so
the helpers it shares — ``_fail``, ``_table``, ``_console`` — are imported inside the command, never at import time,
which would be an import cycle).

Getting a report is two steps with one seam between them:

1. *load* — an image and a :class:`~jbod_model.report.ReportHistory` (a :class:`ReportData`).
   :func:`load_from_inputs` replays metadata files (``open_inputs`` + ``StreamRunner``, requests run through the
   reference controller) and feeds a :class:`~jbod_model.report.ReportTracker` as it goes; :func:`load_from_tables`
   reads the Spark job's ``records`` table (``--tables DIR [--cluster C] [--as-of-offset N]``), which holds every
   record replayed — read, or written by the reference controller — with its offset, batch and time:
   ``pipelines.tables.log_entries`` gives the latest snapshot at or before N as the base image and the records
   after it, and :func:`load_from_records` replays them into the same image and history a replay of the input
   with ``--until-offset N+1`` gives;
2. *build and render* — :func:`jbod_model.report.build_report`, then ``pipelines.report_render``.

Disks are named by path through :class:`~jbod_model.report.DirectoryPaths`: from ``--dirs`` (meta.properties
files or folders; ``--as-root`` for copies of brokers' filesystems) and, with ``--tables``, from the
``dir_inventory`` table, ``--dirs`` winning for the ids it knows (:func:`directory_paths_for`). ``jbod whatif``
(``pipelines.cli``) loads the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from jbod_model.controller.controller import ReferenceController
from jbod_model.errors import InputError
from jbod_model.gaps import GapConsequences, with_consequences
from jbod_model.image import EMPTY_IMAGE, MetadataImage
from jbod_model.meta_properties import DirInventory, inventory
from jbod_model.records.entry import LogEntry
from jbod_model.records.json_codec import dumps
from jbod_model.report import (
    DirectoryPaths,
    JbodReport,
    ReportHistory,
    ReportTracker,
    build_report,
    run_and_track,
)
from jbod_model.sources import open_inputs
from jbod_model.storage.log_reader import ReadPolicy
from jbod_model.stream import StreamEntry, StreamRunner


@dataclass(frozen=True, slots=True)
class ReportData:
    """What a report is built from, wherever it came from: the image, the history, and what the input readers had
    to skip (shown as warnings)."""

    image: MetadataImage
    history: ReportHistory | None
    skipped: tuple[str, ...] = ()
    #: Records the replay left out as consequences of skipped ranges (policy skip), and the entities now unknown.
    consequences: GapConsequences | None = None


#: Wraps the entries as they are read, e.g. to show progress (the CLI's live count on a terminal).
Track = Callable[[Iterable[StreamEntry]], Iterable[StreamEntry]]


def _untracked(entries: Iterable[StreamEntry]) -> Iterable[StreamEntry]:
    return entries


def load_from_inputs(inputs: list[Path], *, until_offset: int | None = None, policy: ReadPolicy = "fail",
                     full_log: bool = False, track: Track = _untracked) -> ReportData:
    """Replay metadata files (a log dir, segments, a snapshot, dump text or JSONL with controller requests) and
    track the history while doing so. The history starts at the input's base image (a snapshot's, or empty)."""
    loaded = open_inputs(inputs, policy=policy, until_offset=until_offset, from_snapshot=not full_log)
    runner = StreamRunner(ReferenceController(loaded.base_image))
    tracker = ReportTracker(loaded.base_image)
    with loaded.replaying():
        run_and_track(runner, track(loaded.entries), tracker)
    return ReportData(image=runner.image, history=tracker.history(), skipped=tuple(loaded.skipped()),
                      consequences=loaded.consequences)


def load_from_records(entries: Iterable[LogEntry], base_image: MetadataImage = EMPTY_IMAGE) -> ReportData:
    """Replay committed records (no controller requests) from ``base_image`` and track the history: for sources
    that hold the whole log, the controller's writes included (the Spark job's ``records`` table)."""
    tracker = ReportTracker(base_image)
    tracker.feed_all(entries)
    return ReportData(image=tracker.image, history=tracker.history())


def load_from_tables(tables: Path, cluster: str | None = None, as_of_offset: int | None = None,
                     as_of: str | None = None, track: Track = _untracked) -> tuple[ReportData, str]:
    """The report's data from the Spark job's tables (the ``records`` table, see the module docstring), as of
    ``as_of_offset`` inclusive or the time ``as_of`` (None: the latest), and the cluster read. Where the job's
    replay of the cluster stopped (``replay_faults``) is passed on as a warning: the tables, and so the report,
    end before it."""
    from pipelines.tables import log_entries, replay_faults, resolve_cluster  # noqa: PLC0415 - pyarrow/deltalake

    cid = resolve_cluster(tables, cluster)
    base, entries = log_entries(tables, cid, resolve_as_of(tables, cid, as_of_offset, as_of))
    records = (e for e in track(entries) if isinstance(e, LogEntry))
    data = load_from_records(records, base if base is not None else EMPTY_IMAGE)
    stopped = tuple(f"the tables end before offset {f['offset']}, where the job's replay of cluster {cid} stopped: "
                    f"{f['message']}" for f in replay_faults(tables, cid))
    return ReportData(image=data.image, history=data.history, skipped=stopped), cid


def load_paths(dirs: list[Path] | None, *, as_root: bool = False,
               ) -> tuple[DirectoryPaths | None, DirInventory | None]:
    """The Uuid → path join from meta.properties files or folders holding them (``jbod dirs`` reads the same);
    with ``as_root`` each folder is a copy of one broker's filesystem root (paths as the broker sees them)."""
    if not dirs:
        return None, None
    inv = inventory(dirs, as_root=as_root)
    if not inv.rows:
        raise InputError(f"no meta.properties found under {', '.join(str(d) for d in dirs)}")
    return DirectoryPaths.from_inventory(inv.rows), inv


def directory_paths_for(tables: Path | None, cluster: str | None, explicit: DirectoryPaths | None,
                        ) -> DirectoryPaths | None:
    """The paths a command names disks with: ``dir_inventory``'s for the cluster when reading tables, with the
    explicit ``--dirs`` on top (they win for the ids they know)."""
    if tables is None or cluster is None:
        return explicit
    from pipelines.tables import directory_paths  # noqa: PLC0415 - pyarrow/deltalake

    stored = directory_paths(tables, cluster)
    if stored is None:
        return explicit
    return stored if explicit is None else stored.overlay(explicit)


def parse_time(text: str) -> datetime:
    """An ISO-8601 time (``2026-11-21T03:00``, ``2026-11-21 03:00:00+01:00``, ``…Z``); without an offset it is
    UTC, as Kafka's batch times are."""
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InputError(f"--as-of takes an ISO-8601 time such as 2026-11-21T03:00Z, not {text!r}") from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def resolve_as_of(tables: Path, cluster: str, as_of_offset: int | None, as_of: str | None) -> int | None:
    """``--as-of-offset N`` or ``--as-of TIME`` (the last offset that took effect by then), at most one."""
    if as_of is None:
        return as_of_offset
    if as_of_offset is not None:
        raise InputError("give --as-of-offset or --as-of, not both")
    from pipelines.tables import offset_at_time  # noqa: PLC0415 - pyarrow/deltalake

    return offset_at_time(tables, cluster, parse_time(as_of))


def check_source(inputs: list[Path] | None, tables: Path | None, *, tables_only: dict[str, object],
                 input_only: dict[str, object]) -> None:
    """INPUT or ``--tables``, exactly one, and the options that go with the one given (the others are errors,
    not silently ignored)."""
    if tables is not None and inputs:
        raise InputError("give INPUT or --tables, not both")
    if tables is None and not inputs:
        raise InputError("give INPUT (a metadata dir, segment, snapshot, dump text or JSONL) or --tables DIR")
    given, other = ("--tables", "INPUT") if tables is not None else ("INPUT", "--tables")
    wrong = [name for name, value in (input_only if tables is not None else tables_only).items()
             if value not in (None, False)]
    if wrong:
        hints = {"--until-offset": " (with --tables: --as-of-offset N, the records with offset <= N)",
                 "--as-of-offset": " (with INPUT: --until-offset N+1)"}
        raise InputError(f"{', '.join(wrong)} {'goes' if len(wrong) == 1 else 'go'} with {other}, not with "
                         f"{given}{''.join(hints.get(w, '') for w in wrong)}")


def _write_html(path: Path, html: str) -> None:
    try:
        path.write_text(html, encoding="utf-8")
    except OSError as e:
        raise InputError(f"cannot write the HTML report to {path}: {e.strerror or e}") from None


def _fleet_report(tables: Path, as_of: str | None, explicit: DirectoryPaths | None, *, html: Path | None,
                  as_json: bool) -> None:
    """``--all-clusters``: every cluster's report (a cluster with nothing by ``--as-of`` is left out, and said so)."""
    from pipelines.cli import _console, _table  # noqa: PLC0415
    from pipelines.report_render import (  # noqa: PLC0415
        fleet_rows,
        render_fleet_html,
        render_html,
        render_terminal,
        report_to_json,
    )
    from pipelines.tables import clusters  # noqa: PLC0415

    reports: dict[str, JbodReport] = {}
    skipped: list[str] = []
    for cid in clusters(tables):
        try:
            data, _ = load_from_tables(tables, cid, None, as_of)
        except InputError as e:
            skipped.append(str(e))
            continue
        for line in data.skipped:
            _console(stderr=True).print(f"[yellow]cluster {cid}:[/] {line}", highlight=False)
        reports[cid] = build_report(data.image, paths=directory_paths_for(tables, cid, explicit), history=data.history)
    for line in skipped:
        _console(stderr=True).print(f"[yellow]not reported:[/] {line}", highlight=False)
    if not reports:
        raise InputError(f"no cluster of {tables} has anything to report")
    rows = fleet_rows(reports)
    if html is not None:
        try:
            html.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise InputError(f"--html with --all-clusters names a directory; cannot create {html}: "
                             f"{e.strerror or e}") from None
        for row in rows:
            _write_html(html / row.page, render_html(row.report, title=f"kraft-jbod report · cluster {row.cluster}"))
        _write_html(html / "index.html", render_fleet_html(rows, skipped=skipped, as_of=as_of))
        _console(stderr=True).print(f"wrote {html / 'index.html'} and {len(rows)} cluster pages", highlight=False)
    if as_json:
        print(dumps({"clusters": [{"clusterId": r.cluster, "report": report_to_json(r.report)} for r in rows],
                     "notReported": skipped}))
        return
    for row in rows:
        _console().rule(f"cluster {row.cluster}")
        render_terminal(row.report, _console(), _table)


def register(app: typer.Typer) -> None:
    """Add ``report`` to ``app``."""

    @app.command("report")
    def report(
        inputs: Annotated[list[Path] | None, typer.Argument(
            help="A node's metadata log dir (or several nodes' copies of one cluster), segment(s) <offset>.log, a "
                 "snapshot <offset>-<epoch>.checkpoint, kafka-dump-log text, or canonical JSONL. Not with "
                 "--tables.", show_default=False)] = None,
        until_offset: Annotated[int | None, typer.Option(
            "--until-offset", help="Report as of offset N: replay only records with offset < N.")] = None,
        tables: Annotated[Path | None, typer.Option(
            "--tables", help="Read the log from the Spark job's Delta tables (the records table) instead of "
                             "INPUT; disks are named from its dir_inventory table.", show_default=False)] = None,
        cluster: Annotated[str | None, typer.Option(
            "--cluster", help="With --tables: the cluster (optional when the tables hold one).",
            show_default=False)] = None,
        as_of_offset: Annotated[int | None, typer.Option(
            "--as-of-offset", help="With --tables: report as of offset N (records with offset <= N); default: the "
                                   "latest.", show_default=False)] = None,
        as_of: Annotated[str | None, typer.Option(
            "--as-of", help="With --tables: report as of a time (ISO 8601, UTC unless it says otherwise): the last "
                            "offset whose batch was appended by then.", metavar="TIME", show_default=False)] = None,
        all_clusters: Annotated[bool, typer.Option(
            "--all-clusters", help="With --tables: one report per cluster, worst first (a fleet); with --html DIR, "
                                   "one page per cluster and an index.html ranking them.")] = False,
        dirs: Annotated[list[Path] | None, typer.Option(
            "--dirs", help="meta.properties files, log dirs or folders holding them, to name disks by path "
                           "(repeat for several; with --tables they win over dir_inventory).",
            show_default=False)] = None,
        as_root: Annotated[bool, typer.Option(
            "--as-root", help="Each --dirs folder is a copy of one broker's filesystem root: name disks by their "
                              "path on the broker (/collected/b3/mnt/d2 under /collected/b3 is /mnt/d2).")] = False,
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

        Replays INPUT (requests in a JSONL input are run through the reference controller), or the Spark job's
        tables with [bold]--tables[/]. With [bold]--dirs[/] (or a loaded dir_inventory table) every directory is
        named by broker and path, e.g. [italic]broker 3 /mnt/d2 (P2aL9r4s…)[/].
        """
        # Imported here: pipelines.cli imports this module to call register(app), and the renderers pull in
        # matplotlib and jinja2, which only this command needs (not every `jbod` start).
        from pipelines.cli import _console, _fail, _table, _tracked  # noqa: PLC0415
        from pipelines.report_render import render_html, render_terminal, report_to_json  # noqa: PLC0415

        with _fail():
            if policy not in ("fail", "skip"):
                raise InputError(f"--policy must be 'fail' or 'skip', not {policy!r}")
            check_source(inputs, tables, tables_only={"--cluster": cluster, "--as-of-offset": as_of_offset,
                                                      "--as-of": as_of},
                         input_only={"--until-offset": until_offset, "--full-log": full_log,
                                     "--policy": None if policy == "fail" else policy})
            explicit, inv = load_paths(dirs, as_root=as_root)
            if all_clusters:
                if tables is None or cluster is not None or as_of_offset is not None:
                    raise InputError("--all-clusters reports every cluster of --tables: not with INPUT, --cluster "
                                     "or --as-of-offset (offsets are per cluster; --as-of TIME works for all)")
                _fleet_report(tables, as_of, explicit, html=html, as_json=as_json)
                return
            cid: str | None = None
            def track(entries: Iterable[StreamEntry]) -> Iterable[StreamEntry]:
                return _tracked(entries, "decoding and replaying")

            if tables is not None:
                data, cid = load_from_tables(tables, cluster, as_of_offset, as_of, track=track)
            else:
                data = load_from_inputs(inputs or [], until_offset=until_offset,
                                        policy="fail" if policy == "fail" else "skip", full_log=full_log,
                                        track=track)
            paths = directory_paths_for(tables, cid, explicit)
            for line in data.skipped:
                _console(stderr=True).print(f"[yellow]skipped:[/] {escape(line)}", highlight=False)
            for finding in inv.all_findings if inv is not None else ():
                _console(stderr=True).print(f"[yellow]{finding.severity}[/] {finding.path}: {finding.message}",
                                            highlight=False)
            result = build_report(data.image, paths=paths, history=data.history)
            if html is not None:
                _write_html(html, render_html(result))
                _console(stderr=True).print(f"wrote {html}", highlight=False)
            if as_json:
                doc = report_to_json(result)
                print(dumps(doc if data.consequences is None else with_consequences(doc, data.consequences)))
            else:
                render_terminal(result, _console(), _table)
