"""``--help`` everywhere: every command and sub-command documents itself, and its line in the command list is one
paragraph, not a docstring broken at the source's line width."""

from __future__ import annotations

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


def test_the_command_list_names_every_command() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for name in ("image", "controller", "inspect", "dirs", "whatif", "run", "report", "simulate", "check",
                 "maintain", "notebook", "jobs"):
        assert f" {name} " in result.output, name
