"""``jbod check``: data-quality checks on the Delta tables — great-expectations suites for the KIP-858 invariants
(:mod:`pipelines.quality`, docs/data-quality.md).

:func:`register` adds the command to the ``jbod`` app (``pipelines.cli.main``). great-expectations, pandas and
Delta are imported only when the command runs: they take seconds to load, and no other command should pay for them.

Exit codes: 0 when no expectation fails at the configured level (``quality.fail_on``: ``error`` by default,
``warning``, or ``never``), 1 when one does, 2 for bad input (no tables, an unknown cluster or suite).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from pipelines.cli import shared

if TYPE_CHECKING:
    from rich.console import Console

    from pipelines.quality import CheckResult, QualityRun

_STATUS_STYLE = {"passed": "green", "failed": "bold red", "error": "bold red", "skipped": "dim"}


def _sample_text(result: CheckResult) -> str:
    """The first offending row, short: its offset and what identifies it."""
    if result.status == "skipped":
        return result.note or ""
    if result.status == "error":
        return f"GX error: {result.note}"
    if not result.sample:
        return result.note or ""
    first = result.sample[0]
    # The predicate's own column (False) says nothing the expectation's name does not.
    keys = [k for k in first if k not in ("row", "offset") and first[k] not in (None, [], "", False)]
    where = ", ".join(f"{k}={first[k]}" for k in keys[:5])
    count = result.unexpected_count or 0
    more = f" (+{count - 1} more)" if count > 1 else ""
    return f"offset {first.get('offset')}: {where}{more}"


def _print_run(run: QualityRun, fail_on: str, console: Console, table: Any) -> None:
    clusters = list(dict.fromkeys(r.cluster_id for r in run.results))
    console.print(f"jbod check: run {run.run_id}, {len(clusters)} cluster(s), suites {', '.join(run.suites)}, "
                  f"engine {run.engine} ({run.seconds:.1f} s)", highlight=False)
    for cid in clusters:
        rows = [r for r in run.results if r.cluster_id == cid]
        out = table(f"Data quality of cluster {cid}", "suite", "expectation", "invariant", "severity", "status",
                    "unexpected", "first offending row / note")
        for r in rows:
            style = _STATUS_STYLE.get(r.status, "")
            if r.status == "failed" and r.severity == "warning":
                style = "bold yellow"
            out.add_row(r.suite, r.expectation, r.invariant or "-", r.severity, Text(r.status, style=style),
                        "" if r.unexpected_count is None else str(r.unexpected_count), _sample_text(r))
        console.print(out)
        counts = {s: sum(1 for r in rows if r.status == s) for s in ("passed", "failed", "error", "skipped")}
        failed_errors = sum(1 for r in rows if r.status in ("failed", "error") and r.severity == "error")
        failed_warnings = sum(1 for r in rows if r.status in ("failed", "error") and r.severity == "warning")
        console.print(f"{counts['passed']} passed, {counts['failed'] + counts['error']} failed "
                      f"({failed_errors} error, {failed_warnings} warning severity), {counts['skipped']} skipped",
                      highlight=False)
    failing = run.failing(fail_on)
    verdict = (f"[bold red]FAIL[/]: {len(failing)} expectation(s) failed at fail_on={fail_on}" if failing
               else f"[green]OK[/] at fail_on={fail_on}")
    console.print(verdict, highlight=False)
    if run.data_docs is not None:
        console.print(f"Data docs: {run.data_docs}", highlight=False)
    if run.results_table is not None:
        console.print(f"Results appended to {run.results_table} (run_id {run.run_id})", highlight=False)


def register(app: typer.Typer) -> None:
    """Add ``check`` to ``app``."""

    @app.command("check")
    def check(
        tables: Annotated[Path | None, typer.Option(
            "--tables", help="The Delta tables of `jbod run` (profile: ./lakehouse).", show_default=False)] = None,
        cluster: Annotated[str | None, typer.Option(
            "--cluster", help="Check one cluster (default: every cluster in the tables).", show_default=False)] = None,
        suite: Annotated[list[str] | None, typer.Option(
            "--suite", help="A suite to run: structural, semantic, history, log, external (repeat for several; "
                            "default: quality.suites of the profile).", show_default=False)] = None,
        engine: Annotated[str | None, typer.Option(
            "--engine", help="Where great-expectations validates: pandas (default) or spark.",
            show_default=False)] = None,
        dirs: Annotated[list[Path] | None, typer.Option(
            "--dirs", help="meta.properties files, log dirs or folders holding them (I22, I24); repeat for several.",
            show_default=False)] = None,
        broker_config: Annotated[list[Path] | None, typer.Option(
            "--broker-config", help="Broker server.properties files (I22: log.dirs per broker); repeat for several.",
            show_default=False)] = None,
        fail_on: Annotated[str | None, typer.Option(
            "--fail-on", help="Exit 1 when an expectation of this severity fails: error, warning or never "
                              "(profile: quality.fail_on).", show_default=False)] = None,
        conf: Annotated[str | None, typer.Option(
            "--conf", help="A profile in conf/ (local, standalone, cluster) or a YAML file.",
            show_default=False)] = None,
        no_docs: Annotated[bool, typer.Option(
            "--no-docs", help="Do not build the great-expectations data docs site.")] = False,
        as_json: Annotated[bool, typer.Option("--json", help="The results as JSON (docs/data-quality.md).")] = False,
    ) -> None:
        """Check the Delta tables against the KIP-858 invariants (I1–I25) with great-expectations.

        Runs the suites, appends one row per expectation to the [bold]dq_results[/] Delta table, builds the data
        docs under [italic]<tables>/_dq/data_docs[/] and exits 1 when an expectation fails at the [bold]--fail-on[/]
        level (errors, by default).
        """

        with shared.fail():
            from pipelines.config.profiles import resolve_config  # noqa: PLC0415
            from pipelines.quality import ExternalInputs, run_checks  # noqa: PLC0415

            config = resolve_config(conf, cli={"tables": tables, "quality.suites": suite,
                                               "quality.engine": engine, "quality.fail_on": fail_on})
            quality = config.quality
            inputs = ExternalInputs(dirs=tuple(dirs or ()), broker_configs=tuple(broker_config or ()))
            if quality.engine == "spark":
                run = _run_on_spark(config, cluster, inputs, not no_docs)
            else:
                run = run_checks(config.tables, cluster=cluster, settings=quality, inputs=inputs, docs=not no_docs)
            if as_json:
                import json  # noqa: PLC0415

                print(json.dumps(run.to_json(quality.fail_on), sort_keys=True))
                if run.data_docs is not None:
                    shared.console(stderr=True).print(f"Data docs: {run.data_docs}", highlight=False)
            else:
                _print_run(run, quality.fail_on, shared.console(), shared.table)
        code = run.exit_code(quality.fail_on)
        if code:
            raise typer.Exit(code)


def _run_on_spark(config: Any, cluster: str | None, inputs: Any, docs: bool) -> QualityRun:
    """The spark engine: a session from the profile (its stdout chatter sent to stderr), stopped afterwards."""
    from pyspark.sql import SparkSession  # noqa: PLC0415

    from pipelines.quality import run_checks  # noqa: PLC0415
    from pipelines.streaming.job import stdout_to_stderr  # noqa: PLC0415
    from pipelines.streaming.session import spark_session  # noqa: PLC0415

    with stdout_to_stderr():
        # Reuse a session this process already runs (and leave it running); stop only the one started here.
        existing = SparkSession.getActiveSession()
        spark = existing or spark_session(config.spark.master, config.spark.conf, app_name="kraft-jbod-check")
        try:
            return run_checks(config.tables, cluster=cluster, settings=config.quality, engine="spark",
                              inputs=inputs, spark=spark, docs=docs)
        finally:
            if existing is None:
                spark.stop()
