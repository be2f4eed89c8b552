"""Data quality: the KIP-858 invariants as great-expectations suites over the Delta tables (``jbod check``;
docs/data-quality.md): where a new check goes.

May import ``pipelines.lakehouse``, ``pipelines.config`` and ``jbod_model``; never the CLI, streaming, scheduling
or report rooms. Every rule an expectation checks is a predicate of ``jbod_model.invariants``.
"""

from __future__ import annotations
