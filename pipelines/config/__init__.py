"""The profiles: ``profiles`` models ``conf/*.yaml`` (Spark, tables, trigger, quality, maintenance) and resolves a
profile with command-line and environment overrides.

Every room reads a profile, so this room sits below them all: it imports only ``jbod_model``.
"""

from __future__ import annotations
