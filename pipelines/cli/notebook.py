"""``jbod notebook``: list the exploration notebooks and run one headless with parameters
(:mod:`pipelines.report.notebooks`).

:func:`register` adds the command to the ``jbod`` app (``pipelines.cli.main``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pipelines.cli import shared


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

        from pipelines.report.notebooks import (  # noqa: PLC0415
            declared_params,
            find_notebook,
            notebooks,
            parse_params,
            run_notebook,
        )

        with shared.fail():
            if name is None:
                listing = shared.table("Notebooks (jbod notebook NAME --param K=V)", "notebook",
                                       "parameters (defaults)")
                for path in notebooks():
                    params = declared_params(nbformat.read(path, as_version=4))
                    listing.add_row(path.stem, "\n".join(f"{k} = {v}" for k, v in params.items()))
                shared.console().print(listing)
                return
            path = find_notebook(name)
            target = out if out is not None else Path("out") / "notebooks" / f"{path.stem}.ipynb"
            shared.console(stderr=True).print(f"running {path.name} …", highlight=False)
            result = run_notebook(path, parse_params(param or []), target)
            shared.console().print(f"{result.notebook.name}: {result.cells} cells, {result.plots} plots in "
                             f"{result.seconds:.0f} s → {result.output}", highlight=False)
