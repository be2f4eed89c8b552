"""The ``jbod`` app: every command group registered, in the order ``jbod --help`` lists them.

A new command goes in its own module of ``pipelines.cli`` with a ``register(app)`` function, and gets one line here.
Exit codes are mapped in one place, :func:`pipelines.cli.shared.fail`: 2 bad input or usage, 3 undecodable bytes or
text, 4 a record that cannot be replayed.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from inspect import getdoc
from typing import Annotated

import typer
from typer.core import TyperCommand, TyperGroup

from jbod_model.slots import skip_final_collection
from pipelines.cli import check, dirs, jobs, maintain, notebook, replay, report, run, shared, simulate, whatif

app = typer.Typer(no_args_is_help=True, rich_markup_mode="rich", add_completion=False, cls=shared.JbodGroup,
                  help="Replay KRaft metadata with JBOD log directories (KIP-858): where every replica lives, "
                       "which went offline, on which disk, when and why.")

replay.register(app)  # image, controller, inspect
dirs.register(app)
whatif.register(app)
jobs_app = jobs.register(app)
run.register(app)
report.register(app)
simulate.register(app)
check.register(app)
maintain.register(app)
notebook.register(app)


def _version(value: bool) -> None:
    if value:
        try:
            print(f"jbod (kraft-jbod) {version('kraft-jbod')}")
        except PackageNotFoundError:  # a checkout on PYTHONPATH without the package installed
            print("jbod (kraft-jbod) unknown version: not installed")
        raise typer.Exit()


@app.callback()
def _options(show_version: Annotated[bool, typer.Option(
        "--version", is_eager=True, callback=_version, help="Print the version and exit.")] = False) -> None:
    """The options of ``jbod`` itself (before the command)."""


def _conventional_help(*apps: typer.Typer) -> None:
    """Every command and group with :class:`pipelines.cli.shared.JbodCommand`'s help: click's metavars."""
    for sub in apps:
        for info in sub.registered_commands:
            if info.cls in (None, TyperCommand):  # typer's default: a command class of our own wins
                info.cls = shared.JbodCommand
        for group in sub.registered_groups:
            if group.cls in (None, TyperGroup):
                group.cls = shared.JbodGroup


def _reflowed_helps(*apps: typer.Typer) -> None:
    """Each command's ``--help`` text: its docstring with every paragraph joined into one line, for rich to wrap at the
    terminal's width; and its line in ``jbod --help``: the first of those paragraphs. (In rich markup mode typer
    keeps the line breaks of a docstring's paragraphs, so a paragraph wrapped at 120 columns in the source came out
    broken mid-sentence, and at 80 columns in short pieces.)"""
    for sub in apps:
        for info in sub.registered_commands:
            if info.callback is None:
                continue
            if info.help is None:
                doc = getdoc(info.callback) or ""
                info.help = "\n\n".join(" ".join(paragraph.split()) for paragraph in doc.split("\n\n"))
            if info.short_help is None:
                info.short_help = " ".join(info.help.split("\n\n")[0].split())


_reflowed_helps(app, jobs_app)
_conventional_help(app, jobs_app)


def main() -> None:  # pragma: no cover - console entry point
    """The ``jbod`` command (the console script, ``python -m pipelines.cli``): the command, then the process' end
    without the garbage collector's last passes over what it left (:func:`jbod_model.slots.skip_final_collection`)."""
    try:
        app()
    finally:
        skip_final_collection()
