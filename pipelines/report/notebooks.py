"""Run the exploration notebooks headless with parameters (``jbod notebook``; the tests run them the same way).

Every notebook in ``notebooks/`` has one cell tagged ``parameters`` holding its defaults (``SCENARIO = …``,
``WORKDIR = …``). Parameters given here go into a new cell right after it, tagged ``injected-parameters`` — the
convention papermill set, so a notebook run by either reads the same — and the notebook runs top to bottom in a
fresh ``python3`` kernel (nbclient). The executed notebook, with its outputs and plots, is written next to the work.
"""

from __future__ import annotations

import ast
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from jbod_model.errors import InputError, JbodError

NOTEBOOK_DIR = Path(__file__).resolve().parents[2] / "notebooks"
PARAMETERS_TAG = "parameters"
INJECTED_TAG = "injected-parameters"


def notebooks(folder: Path = NOTEBOOK_DIR) -> list[Path]:
    """The notebooks shipped in ``folder``, by name."""
    return sorted(folder.glob("*.ipynb"))


def find_notebook(name: str, folder: Path = NOTEBOOK_DIR) -> Path:
    """A notebook by path, by file name, or by a unique prefix of its name (``02`` → ``02-disk-failure-…``)."""
    path = Path(name)
    if path.suffix == ".ipynb" and path.is_file():
        return path
    matches = [p for p in notebooks(folder) if p.stem == name or p.stem.startswith(name)]
    if len(matches) == 1:
        return matches[0]
    known = ", ".join(p.stem for p in notebooks(folder)) or "none"
    what = "matches several" if matches else "matches none"
    raise InputError(f"notebook {name!r} {what} of the notebooks in {folder} ({known})")


def parse_params(pairs: Sequence[str]) -> dict[str, Any]:
    """``NAME=VALUE`` pairs; a value that reads as a Python literal (``7``, ``True``, ``[1, 2]``, ``'x'``) is taken as
    one, anything else is a string — so ``TABLES=lakehouse`` needs no quotes."""
    out: dict[str, Any] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier():
            raise InputError(f"--param takes NAME=VALUE with NAME a Python identifier, not {pair!r}")
        try:
            out[name] = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            out[name] = raw
    return out


def declared_params(book: nbformat.NotebookNode) -> dict[str, str]:
    """The names the ``parameters`` cell assigns, with their default expressions as written."""
    cell = _parameters_cell(book)
    out = {}
    for node in ast.parse(cell.source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            out[node.targets[0].id] = ast.get_source_segment(cell.source, node.value) or ""
    return out


def _parameters_cell(book: nbformat.NotebookNode) -> Any:
    tagged = [c for c in book.cells if PARAMETERS_TAG in c.metadata.get("tags", [])]
    if len(tagged) != 1:
        raise InputError(f"a notebook needs exactly one cell tagged {PARAMETERS_TAG!r}, this one has {len(tagged)}")
    return tagged[0]


def inject_params(book: nbformat.NotebookNode, params: Mapping[str, Any]) -> None:
    """Add the ``injected-parameters`` cell after the ``parameters`` cell. Unknown names are refused: a typo would
    otherwise run the notebook on its defaults without a word."""
    declared = declared_params(book)
    unknown = sorted(set(params) - set(declared))
    if unknown:
        raise InputError(f"unknown notebook parameter(s) {', '.join(unknown)} (parameters: "
                         f"{', '.join(f'{k} = {v}' for k, v in declared.items())})")
    if not params:
        return
    cell = nbformat.v4.new_code_cell("\n".join(f"{k} = {v!r}" for k, v in params.items()))
    cell.metadata["tags"] = [INJECTED_TAG]
    index = book.cells.index(_parameters_cell(book))
    book.cells.insert(index + 1, cell)


@dataclass(frozen=True, slots=True)
class NotebookRun:
    """What :func:`run_notebook` did."""

    notebook: Path
    output: Path
    cells: int
    plots: int
    seconds: float


def run_notebook(path: Path, params: Mapping[str, Any], output: Path, *, cwd: Path | None = None,
                 timeout: int = 1800) -> NotebookRun:
    """Run ``path`` with ``params`` in a fresh kernel started in ``cwd`` (default: the current directory, so
    relative paths such as ``TABLES=lakehouse`` mean what they mean on the command line) and write the executed
    notebook to ``output`` — also when a cell fails, so the traceback can be read in place."""
    book = nbformat.read(path, as_version=4)
    inject_params(book, params)
    started = time.monotonic()
    output.parent.mkdir(parents=True, exist_ok=True)
    # The kernel talks to us over Unix sockets in a private folder, not TCP on localhost: nothing else on the
    # machine can connect to it, and ipykernel has no reason to print its "running over TCP without encryption"
    # warning to the user.
    with tempfile.TemporaryDirectory(prefix="jbod-kernel-") as sockets:
        km = KernelManager(kernel_name="python3", transport="ipc", ip=str(Path(sockets) / "kernel"))
        client = NotebookClient(book, km=km, timeout=timeout, kernel_name="python3",
                                resources={"metadata": {"path": str((cwd or Path.cwd()).resolve())}})
        try:
            # The kernel stopped here, not when this process exits: nbclient leaves a kernel manager it was handed
            # running, and the orphaned kernel then said "Parent appears to have exited" on the user's terminal.
            client.execute(cleanup_kc=True)
        except CellExecutionError as e:
            nbformat.write(book, output)
            # The exception's text is the failing cell's traceback, already readable.
            raise JbodError(f"{path.name} failed (executed notebook with the error: {output}):\n{e}") from None
    nbformat.write(book, output)
    code = [c for c in book.cells if c.cell_type == "code"]
    plots = sum("image/png" in o.get("data", {}) for c in code for o in c.get("outputs", []))
    return NotebookRun(notebook=path, output=output, cells=len(code), plots=plots,
                       seconds=time.monotonic() - started)
