"""Spark pipelines, data-quality checks and the ``jbod`` CLI: thin callers of ``jbod_model``."""

from __future__ import annotations
