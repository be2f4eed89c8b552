"""What every ``jbod`` command shares: the console, the one mapping of errors to exit codes (:func:`fail`), terminal
tables, live progress, the option types several commands take, and the INPUT-or-``--tables`` checks.

Command modules import this module; it imports no command module and never the app (``pipelines.cli.main``), so
the package has no import circle (import-linter's ``pipelines.cli`` layers contract). Exit codes: 2 bad input or
usage, 3 undecodable bytes or text, 4 a record that cannot be replayed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

from jbod_model.controller.context import ControllerConfig
from jbod_model.controller.controller import ReferenceController
from jbod_model.errors import DecodeError, InputError, JbodError, ReplayFault
from jbod_model.meta_properties import DirInventory
from jbod_model.sources import LoadedInput
from jbod_model.storage.log_reader import ReadPolicy
from jbod_model.stream import StreamEntry, StreamRunner
from pipelines.cli.text_table import TextTable

#: The width of output that is not a terminal (a pipe, a log, a file) and has no COLUMNS: wide enough that rich
#: never wraps a table cell (``DIRECTORY_OFF`` / ``LINE``), so every line can be grepped and every name copied.
UNWRAPPED_WIDTH = 100_000


def console(*, stderr: bool = False) -> Console:
    """A console for one use: built per use so the terminal width (COLUMNS) is read when printing, not at import.
    On a terminal, or with COLUMNS set, tables fit that width; elsewhere they are not wrapped at all (rich would
    otherwise assume 80 columns and break words mid-way)."""
    out = Console(stderr=stderr, soft_wrap=True)
    if not out.is_terminal and not os.environ.get("COLUMNS"):
        out.width = UNWRAPPED_WIDTH
    return out


def heading(text: str) -> None:
    """A section heading on stdout: a rule across a terminal; in a pipe or a log (no width to fill) one line,
    ``== text ==``, rather than a rule as wide as the unwrapped width."""
    out = console()
    if out.is_terminal or os.environ.get("COLUMNS"):
        out.rule(text)
    else:
        print(f"== {text} ==")


EXIT_INPUT, EXIT_DECODE, EXIT_REPLAY = 2, 3, 4

InputsArg = Annotated[list[Path], typer.Argument(
    help="A node's metadata log dir (or several nodes' copies of one cluster), segment(s) <offset>.log, a "
         "snapshot <offset>-<epoch>.checkpoint, kafka-dump-log text, or canonical JSONL.", show_default=False)]
#: ``--policy``: a Literal, so ``--help`` lists its values and click refuses others (``--policy maybe``).
PolicyOpt = Annotated[ReadPolicy, typer.Option("--policy",
                                        help="On undecodable input: 'fail', or 'skip' it and report what was skipped "
                                             "(every good record is kept).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable JSON instead of tables.")]
#: ``--as-of-offset N``: one convention for INPUT and ``--tables`` — the state after every record with offset <= N,
#: as the history tables and ``lastOffset`` of an image count (an image "as of offset N" includes record N).
AsOfOffsetOpt = Annotated[int | None, typer.Option(
    "--as-of-offset", help="As of offset N: the state after every record with offset <= N (INPUT or --tables); "
                           "default: the latest.", metavar="N", show_default=False)]
#: ``--until-offset N`` (records < N), the exclusive spelling this CLI had beside ``--as-of-offset``: still read,
#: as ``--as-of-offset N-1``, with a deprecation message; hidden from ``--help`` so that one convention is shown.
UntilOffsetOpt = Annotated[int | None, typer.Option(
    "--until-offset", help="Deprecated: --as-of-offset N-1.", metavar="N", hidden=True, show_default=False)]
AsOfOpt = Annotated[str | None, typer.Option(
    "--as-of", help="With --tables: as of a time (ISO 8601, UTC unless it says otherwise): the last offset whose "
                    "batch was appended by then.", metavar="TIME", show_default=False)]


def as_of_offset(as_of: int | None, until: int | None) -> int | None:
    """The ``--as-of-offset`` a command was given, the deprecated ``--until-offset N`` read as ``N - 1`` (and the
    user told so on stderr); both at once is an input error."""
    if until is None:
        return as_of
    if as_of is not None:
        raise InputError("give --as-of-offset N alone (--until-offset is deprecated: --until-offset N is "
                         "--as-of-offset N-1)")
    console(stderr=True).print(f"[yellow]deprecated:[/] --until-offset {until} (records with offset < {until}) is "
                               f"--as-of-offset {until - 1} (records with offset <= {until - 1}); use that",
                               highlight=False)
    return until - 1


def until_offset(as_of: int | None) -> int | None:
    """The exclusive bound the input readers take (Kafka's snapshot end-offset convention: a snapshot named N holds
    the records before N) for ``--as-of-offset`` ``as_of``."""
    return None if as_of is None else as_of + 1


def policy(value: str) -> ReadPolicy:
    """``--policy``'s value as a read policy; anything but ``fail`` or ``skip`` is an input error."""
    if value not in ("fail", "skip"):
        raise InputError(f"--policy must be 'fail' or 'skip', not {value!r}")
    return "fail" if value == "fail" else "skip"


def conventional_metavar(param: Any, ctx: Any) -> None:
    """Give ``param`` the metavar click and Kafka's tools would show: nothing for a flag (typer writes ``<bool>``,
    even for ``--help``, which reads as if the flag took a value: ``--json true``), the choices for a choice
    (``[fail|skip]``), the argument's name for an argument, else click's type name (``INTEGER``, ``PATH``,
    ``TEXT``). A metavar the command sets itself wins."""
    if param.metavar is not None:
        return
    if isinstance(param, TyperArgument):
        param.metavar = (param.name or "arg").upper()
        # typer would add the argument's Python type in a column of its own (``<list[Path]>``).
        param.display_type_rich = lambda ctx: None  # type: ignore[method-assign]
    elif isinstance(param, TyperOption):
        if param.is_flag or param.count:
            param.metavar = ""
        elif param.type_descriptor.is_choice:
            param.metavar = "[" + param.display_type(ctx).strip("<>") + "]"
        else:
            label = param.display_type(ctx).strip("<>").removeprefix("list[").removesuffix("]")
            param.metavar = _CLICK_TYPE_NAMES.get(label, label.upper())


_CLICK_TYPE_NAMES = {"str": "TEXT", "int": "INTEGER", "int range": "INTEGER", "float": "FLOAT",
                     "float range": "FLOAT", "path": "PATH", "Path": "PATH"}


class JbodCommand(TyperCommand):
    """A typer command whose help shows conventional metavars (:func:`conventional_metavar`)."""

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)
        for param in params:  # the --help option is made here, per call: set each time
            conventional_metavar(param, ctx)
        return params


class JbodGroup(TyperGroup):
    """A typer group whose help shows conventional metavars (:func:`conventional_metavar`)."""

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)
        for param in params:
            conventional_metavar(param, ctx)
        return params


#: Every error message of the CLI starts with this, as click's own usage errors do.
ERROR_PREFIX = "Error:"


@contextmanager
def fail() -> Iterator[None]:
    """The one place that turns model errors into messages and exit codes."""
    try:
        yield
    except ReplayFault as e:
        console(stderr=True).print(f"[bold red]{ERROR_PREFIX}[/] replay fault: {escape(str(e))}", highlight=False)
        raise typer.Exit(EXIT_REPLAY) from None
    except DecodeError as e:
        console(stderr=True).print(f"[bold red]{ERROR_PREFIX}[/] cannot decode: {escape(str(e))}", highlight=False)
        raise typer.Exit(EXIT_DECODE) from None
    except (InputError, JbodError) as e:
        console(stderr=True).print(f"[bold red]{ERROR_PREFIX}[/] {escape(str(e))}", highlight=False)
        raise typer.Exit(EXIT_INPUT) from None


def tracked(entries: Iterable[StreamEntry], what: str) -> Iterator[StreamEntry]:
    """Entries as they are read, with a live count on a terminal's stderr (decode and replay of a large log take
    minutes; a silent terminal looks hung). Nothing is drawn when stderr is not a terminal, so pipes stay clean."""
    out = console(stderr=True)
    if not out.is_terminal:
        yield from entries
        return
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TextColumn("{task.completed:,} entries"),
               TimeElapsedColumn())
    with Progress(*columns, console=out, transient=True) as progress:
        task = progress.add_task(what, total=None)
        for i, entry in enumerate(entries, start=1):
            if i % 1024 == 0:
                progress.update(task, completed=i)
            yield entry


class SparkProgress:
    """What :func:`batch_progress` yields: called with each micro-batch's
    :class:`pipelines.streaming.job.BatchStats`; :meth:`session_started` when the Spark session is up."""

    def __init__(self, on_batch: Callable[[Any], None], on_session: Callable[[], None]) -> None:
        self._on_batch, self.session_started = on_batch, on_session

    def __call__(self, stats: Any) -> None:
        self._on_batch(stats)


@contextmanager
def batch_progress() -> Iterator[SparkProgress]:
    """The Spark job's progress on stderr: on a terminal a live line — "starting Spark" while the session starts
    (about ten seconds that would otherwise look hung), then each micro-batch; else one line per micro-batch (a
    scheduled job's log shows how far a long replay got)."""
    out = console(stderr=True)
    done = {"batches": 0, "rows": 0}

    def line(stats: Any) -> str:
        done["batches"] += 1
        done["rows"] += stats.rows
        return (f"micro-batch {stats.batch_id}: {stats.rows:,} rows in {stats.seconds:.1f} s "
                f"(replay {stats.compute_seconds:.1f} s, Delta writes {stats.seconds - stats.compute_seconds:.1f} s); "
                f"{done['batches']} batches, {done['rows']:,} rows so far")

    if not out.is_terminal:
        yield SparkProgress(lambda stats: out.print(line(stats), highlight=False), lambda: None)
        return
    # The live line is drawn on a copy of the terminal's fd 2, which no redirect of this process's file descriptors
    # moves (``jbod run`` points fd 1 at fd 2 while the job runs: pipelines.streaming.job.stdout_to_stderr); drawn on
    # a redirected fd 2, it would land in a file, and the terminal would show a spinner frozen at 0:00:00.
    with os.fdopen(os.dup(out.file.fileno()), "w", buffering=1) as terminal:
        columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
        live = Console(file=terminal, soft_wrap=True)
        with Progress(*columns, console=live, transient=True) as progress:
            task = progress.add_task("starting Spark", total=None)
            yield SparkProgress(
                lambda stats: progress.update(task, description=line(stats)),
                lambda: progress.update(task, description="replaying on Spark: waiting for the first micro-batch"))


def stream_runner(loaded: LoadedInput, cluster_id: str | None = None) -> StreamRunner:
    """A stream runner whose controller starts from the input's base image (a snapshot, or empty)."""
    return StreamRunner(ReferenceController(loaded.base_image, ControllerConfig(cluster_id=cluster_id)))


def report_skips(loaded: LoadedInput) -> None:
    """Say on stderr what the input readers skipped under ``--policy skip`` (and the records left out because of
    it)."""
    lines = loaded.skipped()
    if not loaded.report.clean and lines:
        # The first line is the readers' summary (LoadedInput.skipped): it counts what was READ, then what was
        # skipped; under a "skipped:" prefix those counts read as if they had been skipped.
        console(stderr=True).print(f"[yellow]read with damage skipped (--policy skip):[/] {escape(lines[0])}",
                                   highlight=False)
        lines = lines[1:]
    report_skipped(lines)


def report_skipped(lines: Iterable[str]) -> None:
    """``skipped:`` lines on stderr. Escaped: a message quotes input (file names, JSON) rich would take for markup."""
    for line in lines:
        console(stderr=True).print(f"[yellow]skipped:[/] {escape(line)}", highlight=False)


def table(title: str, *columns: str) -> TextTable:
    """A table whose cells wrap rather than truncate (:class:`~pipelines.cli.text_table.TextTable`: a cell is literal
    text, a long table prints line by line)."""
    return TextTable(title, *columns)


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
        raise InputError(f"{', '.join(wrong)} {'goes' if len(wrong) == 1 else 'go'} with {other}, not with "
                         f"{given}")


def load_inventory(tables: Path, inv: DirInventory, cluster_id: str | None) -> None:
    """Load ``inv`` into ``dir_inventory`` and say so on stderr (stdout may be JSON)."""
    from pipelines.lakehouse.tables import DIR_INVENTORY, load_dir_inventory  # noqa: PLC0415 - pyarrow/deltalake

    if not inv.rows:
        raise InputError("no meta.properties found: nothing to load into the dir_inventory table")
    loaded = load_dir_inventory(tables, inv, cluster_id=cluster_id)
    for cid, n in loaded.items():
        console(stderr=True).print(f"Loaded {n} directories of cluster {cid} into {tables / DIR_INVENTORY}.",
                                   highlight=False)
