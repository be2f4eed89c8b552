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
invalidated. Everything else is pyspark's daemon, unchanged.
"""

from __future__ import annotations

import zipimport


def _keep_directory(_importer: zipimport.zipimporter) -> None:
    """``zipimporter.invalidate_caches`` for archives that do not change while the worker runs."""


def install() -> None:
    """Keep zip importers' directories across ``importlib.invalidate_caches()`` in this process."""
    zipimport.zipimporter.invalidate_caches = _keep_directory  # type: ignore[method-assign,assignment]


if __name__ == "__main__":
    install()
    from pyspark.daemon import manager

    manager()  # type: ignore[no-untyped-call]
