"""The Spark structured-streaming job that replays KRaft metadata into the Delta tables.

``source`` reads metadata inputs as a Spark data source, ``codec`` turns entries and state into rows and back,
``processor`` is the stateful operator that replays each cluster through ``jbod_model``, ``job`` builds the session
and runs the query. May import ``pipelines.lakehouse``, ``pipelines.config`` and ``jbod_model``; never the CLI,
quality, scheduling or report rooms. No domain rule lives here: every rule is a call into ``jbod_model``.
"""

from __future__ import annotations
