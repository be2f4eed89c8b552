"""The ``jbod`` app: every command group registered, in the order ``jbod --help`` lists them.

A new command goes in its own module of ``pipelines.cli`` with a ``register(app)`` function, and gets one line here.
Exit codes are mapped in one place, :func:`pipelines.cli.shared.fail`: 2 bad input or usage, 3 undecodable bytes or
text, 4 a record that cannot be replayed.
"""

from __future__ import annotations

from inspect import getdoc

import typer

from pipelines.cli import check, dirs, jobs, maintain, notebook, replay, report, run, simulate, whatif

app = typer.Typer(no_args_is_help=True, rich_markup_mode="rich", add_completion=False,
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


def _one_line_short_helps(*apps: typer.Typer) -> None:
    """Each command's line in ``jbod --help``: its docstring's first paragraph joined into one line. (In rich markup
    mode typer keeps the docstring's line breaks, so a paragraph wrapped at 120 columns in the source would be
    broken again, mid-sentence, in the command list.)"""
    for sub in apps:
        for info in sub.registered_commands:
            if info.short_help is None and info.callback is not None:
                doc = info.help or getdoc(info.callback) or ""
                info.short_help = " ".join(doc.split("\n\n")[0].split())


_one_line_short_helps(app, jobs_app)


def main() -> None:  # pragma: no cover - console entry point
    app()
