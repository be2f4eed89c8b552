"""The command lines that start a job of ``jobs.yaml`` outside this shell: under spark-submit
(``jbod jobs spark-submit NAME``, :func:`spark_submit_argv`) and under cron (``jbod jobs crontab``, :func:`jbod_argv`),
both through :data:`SUBMIT_SCRIPT`, the ``jbod`` command line as a file (``pipelines/cli/__main__.py``).
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

#: The file spark-submit runs: every ``jbod`` command works through it.
SUBMIT_SCRIPT = Path(__file__).resolve().with_name("__main__.py")
#: The driver's log4j2 configuration under spark-submit: warnings and errors only (Spark's default, INFO, prints some
#: forty lines of start-up before the job's first word). Read by the JVM as it starts, so it is a flag of the command
#: line, not something the job could set later (``setLogLevel`` comes after the session, and after those lines).
LOG4J2_PROPERTIES = Path(__file__).resolve().with_name("log4j2.properties")


def jbod_argv(python: str = sys.executable) -> list[str]:
    """The ``jbod`` command line by absolute paths, for callers without this shell's PATH (cron): this interpreter
    running :data:`SUBMIT_SCRIPT`, so the job runs the very code that wrote the line."""
    return [python, str(SUBMIT_SCRIPT)]


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
    profile, the driver memory, JVM options and Python interpreter spark-submit must set when it starts the driver,
    then ``jobs run NAME`` through :data:`SUBMIT_SCRIPT`. The profile's other ``spark.*`` settings need no flag:
    the job adds every one spark-submit leaves unset. The driver logs with :data:`LOG4J2_PROPERTIES`."""
    from pipelines.streaming.session import DEFAULT_CONF, JIT_OPTIONS, with_exit_on_oom  # noqa: PLC0415 - Spark loads only for this

    # Only settings that must exist when the driver JVM starts: the job's default memory if the profile has none.
    memory = conf.get("spark.driver.memory", DEFAULT_CONF["spark.driver.memory"])
    return [spark_submit or spark_submit_path(), "--master", master, "--name", f"kraft-jbod-{name}",
            "--driver-memory", memory,
            "--driver-java-options",
            with_exit_on_oom(f"-Dlog4j2.configurationFile={LOG4J2_PROPERTIES} {JIT_OPTIONS}"),
            "--conf", f"spark.pyspark.python={python}",
            "--conf", f"spark.pyspark.driver.python={python}",
            str(SUBMIT_SCRIPT), "jobs", "run", name, "--file", str(jobs_file)]
