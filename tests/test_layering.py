"""The pure model must stay pure: no Spark, Delta, great-expectations, pandas, CLI libraries or pipelines.

import-linter enforces the contract in the test command (pyproject.toml [tool.importlinter]); this test also
proves it at run time, in a fresh interpreter, so a lazy import inside a function cannot slip through either.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

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
