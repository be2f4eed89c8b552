"""``--help`` everywhere: every command and sub-command documents itself, and its line in the command list is one
paragraph, not a docstring broken at the source's line width."""

from __future__ import annotations

import itertools
import re

import pytest
import typer
from typer.testing import CliRunner

from pipelines.cli.main import app, jobs_app

runner = CliRunner(env={"COLUMNS": "120"})
COMMANDS = [[c.name or c.callback.__name__] for c in app.registered_commands if c.callback is not None] + [
    ["jobs", c.name or c.callback.__name__] for c in jobs_app.registered_commands if c.callback is not None]


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_every_command_has_help(argv: list[str]) -> None:
    result = runner.invoke(app, [*argv, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output and len(result.output.splitlines()) > 5


@pytest.mark.parametrize("sub", [app, jobs_app], ids=["jbod", "jbod jobs"])
def test_command_lines_are_one_paragraph(sub: typer.Typer) -> None:
    for info in sub.registered_commands:
        assert info.short_help, info.name
        assert "\n" not in info.short_help and len(info.short_help) > 20, info.name


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_help_paragraphs_are_wrapped_at_the_terminal_not_at_the_source(argv: list[str]) -> None:
    """Each paragraph of a command's description fills the terminal's lines: at 120 columns no line of it ends
    short of the width while the paragraph goes on (the docstring's own line breaks, kept, did that)."""
    result = runner.invoke(app, [*argv, "--help"])
    description = result.output.split("Usage:")[1].split("╭")[0].splitlines()[2:]
    lines = [line.strip() for line in description]
    for line, following in itertools.pairwise(lines):
        if line and following:
            # A wrapped line is full but for the next word: the next line's first word would not have fitted.
            assert len(line) + 1 + len(following.split()[0]) > 120 - 2, (argv, line)


def test_the_command_list_names_every_command() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for name in ("image", "controller", "inspect", "dirs", "whatif", "run", "report", "simulate", "check",
                 "maintain", "notebook", "jobs"):
        assert f" {name} " in result.output, name


#: What typer writes in place of a metavar: ``<bool>`` for a flag (even ``--help``), ``<str>``, ``<list[Path]>``.
PYTHON_TYPE_METAVAR = re.compile(r"<(?:bool|str|int|float|path|Path|list\[[^\]]*\]|int range|float range)>")


@pytest.mark.parametrize("argv", [[], *COMMANDS], ids=lambda a: " ".join(a) or "jbod")
def test_help_shows_click_metavars_not_python_types(argv: list[str]) -> None:
    result = runner.invoke(app, [*argv, "--help"])
    assert result.exit_code == 0, result.output
    assert not PYTHON_TYPE_METAVAR.findall(result.output), result.output


def test_flags_take_no_value_and_choices_are_listed() -> None:
    out = runner.invoke(app, ["image", "--help"]).output
    assert re.search(r"--json\s+Machine-readable", out), out  # no metavar: --json takes no value
    assert "[fail|skip]" in out
    bad = runner.invoke(app, ["image", "x.jsonl", "--policy", "maybe"])
    assert bad.exit_code == 2 and "'maybe' is not one of" in bad.output


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert re.fullmatch(r"jbod \(kraft-jbod\) \d+\.\d+\.\d+\S*\n", result.stdout), result.stdout


@pytest.mark.parametrize(("argv", "message"), [
    (["image", "/no/such/input"], "/no/such/input: no such file or directory"),
    (["simulate", "no-such-scenario"], "--out DIR is required"),
])
def test_errors_share_one_prefix(argv: list[str], message: str) -> None:
    result = runner.invoke(app, argv)
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: ") and message in result.stderr, result.stderr
