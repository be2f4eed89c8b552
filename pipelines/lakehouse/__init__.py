"""The Delta tables (delta-rs): where a new table goes.

``tables`` holds the table contracts (names, schemas, keys), the writers, the as-of reads and the directory
inventory; ``maintenance`` compacts, vacuums and checkpoints them. May import ``pipelines.config`` and
``jbod_model``; every other room of ``pipelines`` reads and writes the tables through this one.
"""

from __future__ import annotations
