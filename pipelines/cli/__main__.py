"""The ``jbod`` command line as a file: ``python -m pipelines.cli …`` (how the scheduler runs each job) and the entry
script for spark-submit, ``spark-submit [--master …] <this file> run --input … --tables …``.

Every ``jbod`` command works through it (``run``, ``check --engine spark``, ``jobs run NAME`` …). Under spark-submit
the job uses the session spark-submit configured — its master, its ``--conf`` and spark-defaults.conf win over the
profile's ``spark.*`` settings (``pipelines.streaming.session.spark_session``; docs/jobs.md).
:func:`pipelines.cli.spark_submit.spark_submit_argv` writes the command line for a job of ``jobs.yaml``
(``jbod jobs spark-submit NAME``).

spark-submit runs this file as a script, which puts its folder (``pipelines/cli/``) first on ``sys.path``: its
modules (``main``, ``report``, ``check``, …) would then shadow top-level modules of the same name. So the folder is
taken off the path before anything else is imported, and the folder that holds the ``pipelines`` package goes at the
end instead: ``import pipelines`` then finds this very package (the code next to the script, installed or a
checkout) without shadowing anything.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":
    _HERE = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
    if str(_HERE.parents[1]) not in sys.path:
        sys.path.append(str(_HERE.parents[1]))

    from pipelines.cli.main import main  # after the sys.path fix above

    main()
