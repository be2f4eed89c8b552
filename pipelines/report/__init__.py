"""What an operator reads: ``jbod report``'s data loaded from INPUT or the tables (``load``), drawn in the terminal,
as JSON or as HTML (``render``, ``templates/``), and the exploration notebooks run headless (``notebooks``).

May import ``pipelines.lakehouse``, ``pipelines.config`` and ``jbod_model``; never the CLI, streaming, quality or
scheduling rooms. The report itself is built by ``jbod_model.report``.
"""

from __future__ import annotations
