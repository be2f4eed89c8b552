"""The notebooks run, top to bottom, on a small scenario (nbclient), so they cannot rot; and they are committed
with their outputs stripped. Each notebook's ``parameters`` cell is replaced to write under a temporary folder."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks() -> None:
    assert len(NOTEBOOKS) >= 2


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebooks_are_committed_without_outputs(path: Path) -> None:
    book = nbformat.read(path, as_version=4)
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in book.cells if c.cell_type == "code")
    assert sum("parameters" in c.metadata.get("tags", []) for c in book.cells) == 1


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes(path: Path, tmp_path: Path) -> None:
    book = nbformat.read(path, as_version=4)
    cell = next(c for c in book.cells if "parameters" in c.metadata.get("tags", []))
    lines = [line for line in cell.source.splitlines() if not line.startswith("WORKDIR")]
    cell.source = "\n".join([*lines, f"WORKDIR = {str(tmp_path / 'work')!r}"])
    NotebookClient(book, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    images = sum("image/png" in o.get("data", {}) for c in book.cells for o in c.get("outputs", []))
    assert images >= 2, "each notebook shows at least two plots"
    errors = [o for c in book.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert errors == []
