"""A Spark home for the driver's JVM in which Spark's own Python processes import the installed pyspark, not its zip.

Before the first micro-batch, Spark starts five Python processes one after the other (the data source's lookup,
creation and read planning, the streaming source's runner, the stateful operator's driver worker), and Spark puts
``$SPARK_HOME/python/lib/pyspark.zip`` first on their path. Zip imports keep no bytecode, so each of them compiled
pyspark again: 0.5–0.8 s of each one's 1.0–1.5 s (py-spy, docs/state-design.md "fourteenth round"), at one core,
while the job waits. pip's pyspark is its own Spark home and ships that zip as a copy of the package
(``pipelines.streaming.daemon`` makes the same argument for the workers it forks).

So the driver's JVM is started with a Spark home that is the real one, entry by entry (symbolic links), minus that
zip: Spark's path names a file that is not there, Python skips it, and the processes import the installed package
with its cached bytecode. Only when it is safe: no ``SPARK_HOME`` of the operator's, the real home is the installed
pyspark package, and the Python processes run this interpreter (they must find the same package). The home is kept
in the cache (``classdata.cache_dir``: ``spark-home/<key>``, a few hundred links) and rebuilt for another pyspark.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

#: The zip Spark puts first on its Python processes' path (``PythonUtils.sparkPythonPath``).
PYSPARK_ZIP = Path("python") / "lib" / "pyspark.zip"


def installed_pyspark() -> Path:
    """The installed pyspark package's folder (pip's pyspark: also its Spark home)."""
    import pyspark  # noqa: PLC0415 - the package itself, not a module of it

    return Path(pyspark.__file__).resolve().parent


def _mirror(real: Path, into: Path, leave_out: Path) -> None:
    """``into``: a link to every entry of ``real``, except the folders on the way to ``leave_out`` (mirrored
    themselves) and ``leave_out`` (left out)."""
    into.mkdir()
    for entry in real.iterdir():
        inside = entry.relative_to(real)
        if inside == Path(leave_out.parts[0]):
            if len(leave_out.parts) > 1:
                _mirror(entry, into / inside, Path(*leave_out.parts[1:]))
            continue
        (into / inside).symlink_to(entry)


def python_home(real: Path, cache: Path) -> Path | None:
    """The Spark home whose Python processes import the installed pyspark (see the module docstring), made under
    ``cache`` when missing; None when ``real`` is not the installed pyspark package with its zip, or no cache can
    be written."""
    if not (real / PYSPARK_ZIP).is_file() or real.resolve() != installed_pyspark():
        return None
    names = "\0".join(sorted(p.name for p in real.iterdir()))
    key = hashlib.sha256(f"{real.resolve()}\0{names}".encode()).hexdigest()[:20]
    home = cache / "spark-home" / key
    if (home / "jars").is_dir():
        return home
    try:
        home.parent.mkdir(parents=True, exist_ok=True)
        building = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=home.parent))
        _mirror(real, building / "home", PYSPARK_ZIP)
        try:
            os.replace(building / "home", home)  # atomic: a concurrent session may have made the same home
        except OSError:
            if not (home / "jars").is_dir():
                raise
        finally:
            shutil.rmtree(building, ignore_errors=True)
    except OSError:
        return None
    return home


def use_python_home(cache: Path | None) -> None:
    """Point ``SPARK_HOME`` at :func:`python_home` for the JVM this process is about to start — unless the operator
    set one, Spark's Python processes run another interpreter, or there is no cache."""
    if cache is None or "SPARK_HOME" in os.environ \
            or os.environ.get("PYSPARK_PYTHON", sys.executable) != sys.executable:
        return
    home = python_home(installed_pyspark(), cache)
    if home is not None:
        os.environ["SPARK_HOME"] = str(home)
