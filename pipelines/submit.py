"""The entry script for spark-submit: ``spark-submit [--master …] <this file> run --input … --tables …``.

Every ``jbod`` command works through it (``run``, ``check --engine spark``, ``jobs run NAME`` …). Under spark-submit
the job uses the session spark-submit configured — its master, its ``--conf`` and spark-defaults.conf win over the
profile's ``spark.*`` settings (``pipelines.job.spark_session``; docs/jobs.md). :func:`spark_submit_argv` writes
the command line for a job of ``jobs.yaml`` (``jbod jobs spark-submit NAME``).

spark-submit runs this file as a script, which puts its folder (``pipelines/``) first on ``sys.path``: its modules
(``tables``, ``config``, ``jobs``, …) would then shadow top-level packages of the same name — pandas imports
``tables`` (PyTables) when it finds one. So the folder is taken off the path before anything else is imported, and
the folder that holds the package goes at the end instead: ``import pipelines`` then finds this very package (the
code next to the script, installed or a checkout) without shadowing anything.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

_HERE = Path(__file__).resolve().parent
if __name__ == "__main__":
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
    if str(_HERE.parent) not in sys.path:
        sys.path.append(str(_HERE.parent))

SUBMIT_SCRIPT = _HERE / "submit.py"


def spark_submit_path() -> str:
    """``spark-submit`` on the PATH, else the one inside the pyspark package."""
    found = shutil.which("spark-submit")
    if found is not None:
        return found
    import pyspark  # noqa: PLC0415 - only to locate its bin/ folder

    return str(Path(pyspark.__file__).resolve().parent / "bin" / "spark-submit")


def spark_submit_argv(name: str, *, jobs_file: Path, master: str, conf: Mapping[str, str],
                      spark_submit: str | None = None, python: str = sys.executable) -> list[str]:
    """The command line that runs job ``name`` (and its dependencies) under spark-submit: the master of the job's
    profile, the driver memory and Python interpreter spark-submit must set when it starts the driver,
    then ``jobs run NAME`` through :data:`SUBMIT_SCRIPT`. The profile's other ``spark.*`` settings need no flag:
    the job adds every one spark-submit leaves unset."""
    from pipelines.job import DEFAULT_CONF  # noqa: PLC0415 - Spark loads only for this

    # Only settings that must exist when the driver JVM starts: the job's default memory if the profile has none.
    memory = conf.get("spark.driver.memory", DEFAULT_CONF["spark.driver.memory"])
    return [spark_submit or spark_submit_path(), "--master", master, "--name", f"kraft-jbod-{name}",
            "--driver-memory", memory, "--conf", f"spark.pyspark.python={python}",
            "--conf", f"spark.pyspark.driver.python={python}",
            str(SUBMIT_SCRIPT), "jobs", "run", name, "--file", str(jobs_file)]


def main() -> None:
    """Run the ``jbod`` command line with this process's arguments."""
    from pipelines.cli import app  # noqa: PLC0415 - after the sys.path fix above

    app(prog_name="jbod")


if __name__ == "__main__":
    main()
