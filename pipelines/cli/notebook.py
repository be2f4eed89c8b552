"""``jbod notebook``: list the exploration notebooks and run one headless with parameters
(:mod:`pipelines.report.notebooks`).

:func:`register` adds the command to the ``jbod`` app; ``pipelines.cli.main`` calls it at the bottom of its module (its
shared helpers are imported inside the command: importing them at module level would be an import cycle).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    """Add ``notebook`` to ``app``."""

    @app.command("notebook")
    def notebook(
        name: Annotated[str | None, typer.Argument(
            help="A notebook in notebooks/ (its name or a unique prefix, e.g. 02) or an .ipynb path; none: list "
                 "them with their parameters.", show_default=False)] = None,
        param: Annotated[list[str] | None, typer.Option(
            "--param", "-p", help="NAME=VALUE for the notebook's parameters cell (repeat), e.g. TABLES=lakehouse.",
            show_default=False)] = None,
        out: Annotated[Path | None, typer.Option(
            "--out", help="Where the executed notebook goes (default: out/notebooks/<name>.ipynb).",
            show_default=False)] = None,
    ) -> None:
        """Run a notebook top to bottom in a fresh kernel and save it with its outputs and plots (open the result in
        Jupyter or VS Code). Without NAME, list the notebooks and their parameters."""
        import nbformat  # noqa: PLC0415 - the Jupyter stack loads only for this command

        from pipelines.cli.main import _console, _fail, _table  # noqa: PLC0415
        from pipelines.report.notebooks import (  # noqa: PLC0415
            declared_params,
            find_notebook,
            notebooks,
            parse_params,
            run_notebook,
        )

        with _fail():
            if name is None:
                table = _table("Notebooks (jbod notebook NAME --param K=V)", "notebook", "parameters (defaults)")
                for path in notebooks():
                    params = declared_params(nbformat.read(path, as_version=4))
                    table.add_row(path.stem, "\n".join(f"{k} = {v}" for k, v in params.items()))
                _console().print(table)
                return
            path = find_notebook(name)
            target = out if out is not None else Path("out") / "notebooks" / f"{path.stem}.ipynb"
            _console(stderr=True).print(f"running {path.name} …", highlight=False)
            result = run_notebook(path, parse_params(param or []), target)
            _console().print(f"{result.notebook.name}: {result.cells} cells, {result.plots} plots in "
                             f"{result.seconds:.0f} s → {result.output}", highlight=False)
