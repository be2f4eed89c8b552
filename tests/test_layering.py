"""The layering: the pure model stays pure (no Spark, Delta, great-expectations, pandas, CLI libraries or pipelines),
the rooms of ``pipelines/`` import only the rooms under them, and no private name crosses a module.

import-linter enforces the contracts on the source in the test command (pyproject.toml [tool.importlinter]); these
tests also prove them at run time, each in a fresh interpreter.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

FORBIDDEN = ("pyspark", "delta", "deltalake", "great_expectations", "pandas", "pyarrow", "typer", "rich",
             "matplotlib", "jinja2", "yaml", "pydantic", "pipelines")
MODEL = Path(__file__).resolve().parents[1] / "jbod_model"


def test_no_forbidden_import_anywhere_in_jbod_model_source() -> None:
    offenders = []
    for path in MODEL.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] in FORBIDDEN]
    assert offenders == []


def test_importing_every_model_module_loads_no_forbidden_package() -> None:
    modules = sorted(
        ".".join(p.relative_to(MODEL.parent).with_suffix("").parts).removesuffix(".__init__")
        for p in MODEL.rglob("*.py")
    )
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=MODEL.parent)
    assert out.stdout.strip() == ""


# The rooms of pipelines/ and the rooms each may import (pyproject.toml's layers contract; docs/architecture.md).
ROOMS: dict[str, tuple[str, ...]] = {
    "pipelines.config": (),
    "pipelines.lakehouse": ("pipelines.config",),
    "pipelines.streaming": ("pipelines.lakehouse", "pipelines.config"),
    "pipelines.quality": ("pipelines.lakehouse", "pipelines.config"),
    "pipelines.scheduling": ("pipelines.lakehouse", "pipelines.config"),
    "pipelines.report": ("pipelines.lakehouse", "pipelines.config"),
}
ROOT = MODEL.parent


def _modules(package: str) -> list[str]:
    folder = ROOT.joinpath(*package.split("."))
    return sorted(".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
                  for p in folder.rglob("*.py") if p.name != "__main__.py")


@pytest.mark.parametrize("room", sorted(ROOMS))
def test_importing_a_room_loads_no_room_beside_or_above_it(room: str) -> None:
    """What import-linter checks on the source, at run time: importing every module of a room loads only that room,
    the rooms under it and the root package (the CLI, and every sibling room, stay out)."""
    allowed = (room, *ROOMS[room])
    code = (
        "import importlib, sys\n"
        f"for m in {_modules(room)!r}: importlib.import_module(m)\n"
        "print(','.join(sorted(m for m in sys.modules if m.startswith('pipelines.'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    loaded = [m for m in out.stdout.strip().split(",") if m]
    assert loaded, "the room imported nothing of pipelines"
    assert [m for m in loaded if not any(m == a or m.startswith(a + ".") for a in allowed)] == []


def test_no_private_name_is_imported_across_modules() -> None:
    """``_x`` is private to its module: nothing of the project imports one from another module (tests included)."""
    offenders = []
    for folder in ("jbod_model", "pipelines", "tests", "benchmarks", "scripts"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                        and node.module.split(".")[0] in ("jbod_model", "pipelines"):
                    offenders += [f"{path.relative_to(ROOT)}:{node.lineno}: {node.module}.{a.name}"
                                  for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
    assert offenders == []


def test_the_cli_and_the_reports_text_and_json_load_no_plotting_library() -> None:
    """matplotlib is imported where a chart is drawn (the HTML report, the notebooks): its import was a third of a
    second of every ``jbod report``, most of which print text or JSON."""
    code = (
        "import sys\n"
        "import pipelines.cli.main, pipelines.report.render, pipelines.report.load\n"
        "print('matplotlib' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "False"
