"""Spark pipelines, data-quality checks and the ``jbod`` CLI: thin callers of ``jbod_model``, in rooms by role.

==================  ==========================================================  ==================================
room                holds                                                       may import
==================  ==========================================================  ==================================
``cli``             the ``jbod`` typer app, one module per command group        every room below, ``jbod_model``
``streaming``       the Spark job: source, row codec, stateful operator, runner  lakehouse, config, ``jbod_model``
``quality``         the KIP-858 invariants as great-expectations suites          lakehouse, config, ``jbod_model``
``scheduling``      ``jobs.yaml`` and the scheduler that runs it                 lakehouse, config, ``jbod_model``
``report``          loading a report's data, rendering it, the notebooks         lakehouse, config, ``jbod_model``
``lakehouse``       the Delta tables: contracts, writers, as-of reads, upkeep    config, ``jbod_model``
``config``          the profiles (``conf/*.yaml``) every room reads              ``jbod_model``
==================  ==========================================================  ==================================

``streaming``, ``quality``, ``scheduling`` and ``report`` are independent of each other. import-linter enforces the
table (``pyproject.toml``, ``lint-imports`` in the test command); docs/architecture.md draws it. Generated logs for
tests and benchmarks come from ``jbod_model.simulator`` (the churn workload), not from here.
"""

from __future__ import annotations
