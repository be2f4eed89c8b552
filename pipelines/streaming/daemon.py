"""Spark's Python worker daemon for the job (``spark.python.daemon.module``): pyspark's own, without a cache
invalidation that costs most of a second per task.

Before every task a Python worker runs ``pyspark.worker_util.setup_spark_files``, which ends with
``importlib.invalidate_caches()``. Since Python 3.10 that makes every ``zipimport.zipimporter`` on ``sys.path`` read
its archive's central directory again, and Spark puts three archives on a worker's path: ``pyspark.zip``, py4j's
and the ``spark-core`` jar (thousands of entries). Measured here: 0.82 s per call — per task, and a micro-batch of
the job runs several (the source's read, the stateful operator's partitions, the collect) — 27 % of a worker's time
on the 200 k-partition benchmark (py-spy, docs/state-design.md "Profile").

The archives never change while a worker lives, so their importers keep what they read; a path added for a task
(``--py-files``) gets a new importer, which reads its archive when first used. Finders of plain directories are still
invalidated.

The daemon also imports the job's modules (the operator, the source, pandas, pyarrow and pyspark's serializers)
before it forks workers, which share what it imported: a worker otherwise imports them itself when it unpickles its
task's function. And it imports pyspark from the installed package when the ``pyspark.zip`` Spark puts first on a
worker's path is that package's own copy: zip imports keep no bytecode cache, so every process compiled pyspark's
modules again (measured here: 1.55 s CPU to import what a task needs from the zip, 0.75 s from the package).
Everything else is pyspark's daemon, unchanged.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import os
import sys
import zipimport
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pipelines.streaming.sparkhome import PYSPARK_ZIP


def _keep_directory(_importer: zipimport.zipimporter) -> None:
    """``zipimporter.invalidate_caches`` for archives that do not change while the worker runs."""


def install() -> None:
    """Keep zip importers' directories across ``importlib.invalidate_caches()`` in this process."""
    zipimport.zipimporter.invalidate_caches = _keep_directory  # type: ignore[method-assign,assignment]


#: What every task of the job imports: loaded once in the daemon, inherited by every forked worker.
PRELOAD = ("pandas", "pyarrow", "pyspark.worker", "pyspark.sql.pandas.serializers",
           "pyspark.sql.streaming.stateful_processor", "pipelines.streaming.stateful", "pipelines.streaming.processor",
           "pipelines.streaming.source")


def prefer_installed_pyspark() -> None:
    """Drop from ``sys.path`` a ``pyspark.zip`` that is the installed pyspark package's own copy (pip's pyspark
    ships it as ``pyspark/python/lib/pyspark.zip``): the same modules then import from the package, with cached
    bytecode. Any other archive (a different Spark's) stays."""
    zips = [p for p in sys.path if os.path.basename(p) == PYSPARK_ZIP.name]
    if not zips:
        return
    spec = importlib.machinery.PathFinder.find_spec("pyspark", [p for p in sys.path if p not in zips])
    if spec is None or spec.origin is None:
        return
    own = (Path(spec.origin).parent / PYSPARK_ZIP).resolve()
    for path in zips:
        if Path(path).resolve() == own:
            sys.path.remove(path)


def preload() -> None:
    """Import :data:`PRELOAD`; a module that cannot be imported here is left to the worker that needs it."""
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            continue


def warm_up(batches: Iterable[Any]) -> Iterable[Any]:
    """The task of ``pipelines.streaming.session.warm_workers``' job: its rows as they came. What it is for is where
    it runs — in a worker this daemon forked, which the stream's first tasks then reuse."""
    return batches


if __name__ == "__main__":
    install()
    prefer_installed_pyspark()
    preload()
    from pyspark.daemon import manager

    manager()  # type: ignore[no-untyped-call]
