"""The notebooks run, top to bottom, on a small scenario (nbclient), so they cannot rot; and they are committed
with their outputs stripped. They run through :func:`pipelines.report.notebooks.run_notebook` — what ``jbod notebook``
calls — with ``WORKDIR`` pointed at a temporary folder."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from typer.testing import CliRunner

from jbod_model.errors import InputError
from pipelines.cli import app
from pipelines.report.notebooks import (
    INJECTED_TAG,
    declared_params,
    find_notebook,
    inject_params,
    notebooks,
    parse_params,
    run_notebook,
)

NOTEBOOKS = notebooks()


def test_there_are_notebooks() -> None:
    assert len(NOTEBOOKS) >= 3


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebooks_are_committed_without_outputs(path: Path) -> None:
    book = nbformat.read(path, as_version=4)
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in book.cells if c.cell_type == "code")
    assert sum("parameters" in c.metadata.get("tags", []) for c in book.cells) == 1
    assert "WORKDIR" in declared_params(book)


def test_params_parse_literals_and_bare_strings() -> None:
    assert parse_params(["SEED=7", "TABLES=lakehouse", "FLAG=True", "NAME='x y'", "EMPTY="]) == {
        "SEED": 7, "TABLES": "lakehouse", "FLAG": True, "NAME": "x y", "EMPTY": ""}
    with pytest.raises(InputError, match="NAME=VALUE"):
        parse_params(["no-equals"])
    with pytest.raises(InputError, match="NAME=VALUE"):
        parse_params(["1x=2"])


def test_injected_cell_follows_the_parameters_cell_and_unknown_names_are_refused() -> None:
    book = nbformat.read(NOTEBOOKS[0], as_version=4)
    index = next(i for i, c in enumerate(book.cells) if "parameters" in c.metadata.get("tags", []))
    inject_params(book, {"SEED": 3})
    injected = book.cells[index + 1]
    assert injected.metadata["tags"] == [INJECTED_TAG]
    assert injected.source == "SEED = 3"
    with pytest.raises(InputError, match="unknown notebook parameter"):
        inject_params(book, {"SEDE": 3})


def test_find_notebook_by_prefix_and_errors() -> None:
    assert find_notebook("02").stem.startswith("02-")
    assert find_notebook(str(NOTEBOOKS[0])) == NOTEBOOKS[0]
    with pytest.raises(InputError, match="matches none"):
        find_notebook("99")
    with pytest.raises(InputError, match="matches several"):
        find_notebook("0")


def test_cli_lists_notebooks_and_refuses_a_bad_parameter(tmp_path: Path) -> None:
    runner = CliRunner()
    listed = runner.invoke(app, ["notebook"], env={"COLUMNS": "200"})
    assert listed.exit_code == 0, listed.output
    for path in NOTEBOOKS:
        assert path.stem in listed.output
    bad = runner.invoke(app, ["notebook", "01", "--param", "NOPE=1", "--out", str(tmp_path / "x.ipynb")])
    assert bad.exit_code == 2
    assert "unknown notebook parameter" in bad.output
    assert not (tmp_path / "x.ipynb").exists()


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes(path: Path, tmp_path: Path) -> None:
    out = tmp_path / f"{path.stem}.ipynb"
    result = run_notebook(path, {"WORKDIR": str(tmp_path / "work")}, out, cwd=tmp_path, timeout=900)
    assert result.plots >= 2, "each notebook shows at least two plots"
    book = nbformat.read(out, as_version=4)
    errors = [o for c in book.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert errors == []
    assert any(INJECTED_TAG in c.metadata.get("tags", []) for c in book.cells)


def test_the_kernel_says_nothing_to_the_user(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """The kernel's own log (it inherits our stderr) stays quiet: over TCP, ipykernel warns on every start that the
    kernel 'is running over TCP without encryption'."""
    book = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("ANSWER = 0", metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell("print(ANSWER * 2)")])
    nbformat.write(book, tmp_path / "tiny.ipynb")
    result = run_notebook(tmp_path / "tiny.ipynb", {"ANSWER": 21}, tmp_path / "out.ipynb", cwd=tmp_path)
    out = nbformat.read(result.output, as_version=4)
    assert out.cells[-1].outputs[0]["text"] == "42\n"
    captured = capfd.readouterr()
    assert "WARNING" not in captured.err and "without encryption" not in captured.err, captured.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.ipynb", "tiny.ipynb"]  # no socket files left here


def test_jbod_notebook_stops_its_kernel_before_it_exits(tmp_path: Path) -> None:
    """``jbod notebook`` stops the kernel it started: nbclient leaves a kernel manager it is handed running, and the
    kernel, orphaned when the command exited, printed "[IPKernelApp] WARNING | Parent appears to have exited,
    shutting down." after every run."""
    book = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("ANSWER = 0", metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell("print(ANSWER * 2)")])
    nbformat.write(book, tmp_path / "tiny.ipynb")
    done = subprocess.run([sys.executable, "-m", "pipelines.cli", "notebook", str(tmp_path / "tiny.ipynb"),
                           "--param", "ANSWER=21", "--out", str(tmp_path / "out.ipynb")],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert "3 cells" in done.stdout
    # The output is read to its end, which an orphaned kernel holding the same stderr delays until it says it.
    assert "Parent appears to have exited" not in done.stderr and "WARNING" not in done.stderr, done.stderr
