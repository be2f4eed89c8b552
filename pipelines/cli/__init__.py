"""The ``jbod`` command line (typer): where a new command goes.

``main`` holds the app and registers every command group; each command group is one module that adds its
commands with ``register(app)``; ``shared`` holds what they share (console, the error → exit code mapping, terminal
tables, progress, option types). Command modules import ``shared``, never ``main`` nor each other; ``__main__`` is
the file ``python -m pipelines.cli`` and spark-submit run. The CLI sits on top: it may import every other room and
``jbod_model``; nothing imports it. ``app`` is exported here for tests and callers that invoke the app; the ``jbod``
console script runs ``main.main``.
"""

from __future__ import annotations

from pipelines.cli.main import app

__all__ = ["app"]
