"""``jbod report``: what is broken now, on which disk (by path), since when, and what happened — in the terminal,
as JSON (docs/report-json.md) or as one self-contained HTML page.

The data is loaded by :mod:`pipelines.report.load` (INPUT replayed, or the Spark job's tables), the report built by
:func:`jbod_model.report.build_report` and drawn by :mod:`pipelines.report.render`; this module parses the options
and says where things went. :func:`register` adds the command to the ``jbod`` app. The renderers are imported when
the command runs: they pull in matplotlib and jinja2, which no other command needs at start.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated

import typer

from jbod_model.errors import InputError
from jbod_model.gaps import with_consequences
from jbod_model.records.json_codec import dumps_pieces, dumps_without_floats
from jbod_model.report import DirectoryPaths, build_report
from jbod_model.slots import gc_paused
from jbod_model.storage.log_reader import ReadPolicy
from jbod_model.stream import StreamEntry
from pipelines.cli import shared
from pipelines.cli.shared import check_source
from pipelines.report.load import directory_paths_for, load_from_inputs, load_from_tables, load_paths


def _print_text(text: str, end: str = "\n") -> None:
    """``print(text, end=end)`` in slices: printing a str encodes it whole first (a 245 MB report's JSON at 200 k
    partitions held twice, as text and as bytes)."""
    step = 1 << 20
    for i in range(0, len(text), step):
        sys.stdout.write(text[i:i + step])
    sys.stdout.write(end)


def _fleet_report(tables: Path, as_of: str | None, explicit: DirectoryPaths | None, *, html: Path | None,
                  as_json: bool, jobs: int | None) -> None:
    """``--all-clusters``: every cluster's report (a cluster with nothing by ``--as-of`` is left out, and said so),
    ``jobs`` clusters at a time (:mod:`pipelines.report.fleet`)."""
    from pipelines.lakehouse.tables import clusters  # noqa: PLC0415
    from pipelines.report.fleet import default_jobs, fleet_report  # noqa: PLC0415
    from pipelines.report.render import render_fleet_html, render_terminal, write_html  # noqa: PLC0415

    if html is not None:
        try:
            html.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise InputError(f"--html with --all-clusters names a directory; cannot create {html}: "
                             f"{e.strerror or e}") from None
    with fleet_report(tables, clusters(tables), as_of=as_of, explicit=explicit, html=html,
                      keep="json" if as_json else "report",
                      jobs=jobs or default_jobs()) as fleet:
        for outcome in sorted(fleet.reported, key=lambda o: o.cluster):
            for line in outcome.warnings:
                shared.console(stderr=True).print(f"[yellow]cluster {outcome.cluster}:[/] {line}", highlight=False)
        skipped = [o.not_reported for o in fleet.not_reported if o.not_reported is not None]
        for line in skipped:
            shared.console(stderr=True).print(f"[yellow]not reported:[/] {line}", highlight=False)
        if not fleet.reported:
            raise InputError(f"no cluster of {tables} has anything to report")
        if html is not None:
            write_html(html / "index.html", render_fleet_html(fleet.rows, skipped=skipped, as_of=as_of))
            shared.console(stderr=True).print(f"wrote {html / 'index.html'} and {len(fleet.reported)} cluster pages",
                                              highlight=False)
        if as_json:
            # The fleet's document, cluster by cluster from the documents kept (never every report at once): the
            # bytes one dumps of the whole document would give. Each kept document is copied as its bytes into the
            # buffer under stdout, between the pieces this process writes as text: the text is flushed into that
            # buffer before each copy, and what it writes after a copy lands after it.
            out = sys.stdout.buffer
            sys.stdout.write('{"clusters":[')
            for i, outcome in enumerate(fleet.reported):
                sys.stdout.write(("," if i else "") + '{"clusterId":' + dumps_without_floats(outcome.cluster)
                                 + ',"report":')
                sys.stdout.flush()
                outcome.copy_json(out)
                sys.stdout.write("}")
            sys.stdout.write('],"notReported":' + dumps_without_floats(skipped) + "}\n")
            return
        for outcome in fleet.reported:
            shared.heading(f"cluster {outcome.cluster}")
            render_terminal(outcome.report(), shared.console(), shared.table)


def register(app: typer.Typer) -> None:
    """Add ``report`` to ``app``."""

    @app.command("report")
    def report(
        inputs: Annotated[list[Path] | None, typer.Argument(
            help="A node's metadata log dir (or several nodes' copies of one cluster), segment(s) <offset>.log, a "
                 "snapshot <offset>-<epoch>.checkpoint, kafka-dump-log text, or canonical JSONL. Not with "
                 "--tables.", show_default=False)] = None,
        tables: Annotated[Path | None, typer.Option(
            "--tables", help="Read the log from the Spark job's Delta tables (the records table) instead of "
                             "INPUT; disks are named from its dir_inventory table.", show_default=False)] = None,
        cluster: Annotated[str | None, typer.Option(
            "--cluster", help="With --tables: the cluster (optional when the tables hold one).",
            show_default=False)] = None,
        as_of_offset: shared.AsOfOffsetOpt = None,
        until_offset: shared.UntilOffsetOpt = None,
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
        jobs: Annotated[int | None, typer.Option(
            "--jobs", min=1, help="With --all-clusters: clusters reported at once (default: one per core).",
            show_default=False)] = None,
        policy: Annotated[ReadPolicy, typer.Option(
            "--policy", help="On undecodable input: 'fail', or 'skip' it and report what was skipped.")] = "fail",
    ) -> None:
        """Report offline replicas by disk, leaderless and under-min-ISR partitions, pending placements, per-disk
        replica and leader counts, and the incident timeline (directory failures, fencing, and what followed).

        Replays INPUT (requests in a JSONL input are run through the reference controller), or the Spark job's
        tables with [bold]--tables[/]. With [bold]--dirs[/] (or a loaded dir_inventory table) every directory is
        named by broker and path, e.g. [italic]broker 3 /mnt/d2 (P2aL9r4s…)[/].
        """
        # Imported here: the renderers pull in matplotlib and jinja2, which only this command needs (not every
        # `jbod` start).
        from pipelines.report.render import (  # noqa: PLC0415
            render_html,
            render_terminal,
            report_to_json,
            write_html,
        )

        with shared.fail():
            if policy not in ("fail", "skip"):
                raise InputError(f"--policy must be 'fail' or 'skip', not {policy!r}")
            as_of_offset = shared.as_of_offset(as_of_offset, until_offset)
            check_source(inputs, tables, tables_only={"--cluster": cluster, "--as-of": as_of},
                         input_only={"--full-log": full_log,
                                     "--policy": None if policy == "fail" else policy})
            explicit, inv = load_paths(dirs, as_root=as_root)
            if jobs is not None and not all_clusters:
                raise InputError("--jobs says how many clusters --all-clusters reports at once: not without it")
            if all_clusters:
                if tables is None or cluster is not None or as_of_offset is not None:
                    raise InputError("--all-clusters reports every cluster of --tables: not with INPUT, --cluster "
                                     "or --as-of-offset (offsets are per cluster; --as-of TIME works for all)")
                _fleet_report(tables, as_of, explicit, html=html, as_json=as_json, jobs=jobs)
                return
            def track(entries: Iterable[StreamEntry]) -> Iterable[StreamEntry]:
                return shared.tracked(entries, "decoding and replaying")

            if tables is not None:
                from pipelines.lakehouse.tables import one_version  # noqa: PLC0415 - pyarrow/deltalake when asked

                # Every read of the report at one version of each table: two dozen queries, twelve of `records`.
                with one_version():
                    data, cid = load_from_tables(tables, cluster, as_of_offset, as_of, track=track)
                    paths = directory_paths_for(tables, cid, explicit)
            else:
                data = load_from_inputs(inputs or [], until_offset=shared.until_offset(as_of_offset),
                                        policy="fail" if policy == "fail" else "skip", full_log=full_log,
                                        track=track)
                paths = explicit  # an input's disks are named by --dirs alone
            shared.report_skipped(data.skipped)
            for finding in inv.all_findings if inv is not None else ():
                shared.console(stderr=True).print(f"[yellow]{finding.severity}[/] {finding.path}: {finding.message}",
                                            highlight=False)
            result = build_report(data.image, paths=paths, history=data.history)
            if html is not None:
                write_html(html, render_html(result))
                shared.console(stderr=True).print(f"wrote {html}", highlight=False)
            if as_json:
                # The document's long lists are made while they are written, a slice at a time: at 2 M partitions
                # their rows were 1.4 GB held at once beside the report.
                doc = report_to_json(result, sliced=True)
                if data.consequences is not None:
                    doc = with_consequences(doc, data.consequences)
                # The report's document is all that is left to print: at 200 k partitions the image, the history and
                # the report are each hundreds of MB, and so is the document's text.
                del data, result
                # The document holds no float (offsets, times, counts, names), for which orjson writes what json
                # writes, several times faster: 24 MB at 20 k partitions. Written in pieces, never encoded whole
                # (2.3 GB at 2 M partitions, held as orjson's bytes and as the str: docs/performance.md).
                # The collector stays paused while the pieces are made and written: a slice's rows are acyclic and
                # gone once written, and with the collector back between two slices its collections walked the rows
                # still held and, now and then, the report the slices are made from (0.3–0.5 s of the 200 k report's
                # 2.6–3.6 s of JSON, docs/performance.md "The report's JSON written with the collector paused").
                with gc_paused():
                    for piece in dumps_pieces(doc):
                        _print_text(piece, end="")
                sys.stdout.write("\n")
            else:
                render_terminal(result, shared.console(), shared.table)
