"""An app holding one command module's command, for CLI tests of that module alone."""

from __future__ import annotations

from collections.abc import Callable

import typer


def command_app(register: Callable[[typer.Typer], None]) -> typer.Typer:
    """A typer group with the commands ``register`` adds, as the ``jbod`` app has them (a group, since a lone
    command would swallow its own name as INPUT)."""
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """The jbod command line (test stand-in)."""

    register(app)
    return app
