"""The Spark home the driver's JVM starts with (``pipelines.streaming.sparkhome``): the installed pyspark's, minus the
zip that made Spark's Python processes compile pyspark again."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.streaming.sparkhome import PYSPARK_ZIP, installed_pyspark, python_home, use_python_home

REAL = installed_pyspark()
pytestmark = pytest.mark.skipif(not (REAL / PYSPARK_ZIP).is_file(),
                                reason="this pyspark is not pip's (no pyspark.zip in its own Spark home)")


def test_the_home_is_the_real_one_entry_by_entry_but_the_zip(tmp_path: Path) -> None:
    home = python_home(REAL, tmp_path)
    assert home is not None
    assert (home / "jars").resolve() == (REAL / "jars").resolve()
    assert (home / "bin" / "spark-submit").is_file()
    assert not (home / PYSPARK_ZIP).exists()
    lib = sorted(p.name for p in (home / "python" / "lib").iterdir())
    assert lib == sorted(p.name for p in (REAL / "python" / "lib").iterdir() if p.name != "pyspark.zip")
    assert any(name.startswith("py4j") for name in lib), "py4j's zip stays: pyspark needs it"
    assert python_home(REAL, tmp_path) == home, "made once, then reused"
    assert [p.name for p in (tmp_path / "spark-home").iterdir()] == [home.name], "no half-built homes left"


def test_only_the_installed_pyspark_is_mirrored_and_an_operators_choices_win(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = tmp_path / "spark-3.5"
    (other / PYSPARK_ZIP).parent.mkdir(parents=True)
    (other / PYSPARK_ZIP).write_bytes(b"")
    assert python_home(other, tmp_path) is None
    monkeypatch.setenv("SPARK_HOME", str(other))
    use_python_home(tmp_path)
    assert os.environ["SPARK_HOME"] == str(other)
    monkeypatch.delenv("SPARK_HOME")
    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/other/python3")
    use_python_home(tmp_path)
    assert "SPARK_HOME" not in os.environ
    assert not (tmp_path / "spark-home").exists()


_SESSION = """
import pyspark
from pyspark.sql.datasource import DataSource
from pipelines.streaming.session import spark_session

class Where(DataSource):
    # schema() runs in one of Spark's planning processes (create_data_source): it names the pyspark it imported.
    @classmethod
    def name(cls):
        return "where"

    def schema(self):
        import pyspark
        return f"`{pyspark.__file__}` string"

spark = spark_session("local[1]")
spark.dataSource.register(Where)
print("planner:", spark.read.format("where").load().schema.fieldNames()[0])
print("driver:", pyspark.__file__)
spark.stop()
"""


def test_sparks_planning_processes_import_the_installed_pyspark(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "SPARK_HOME"} | {"KRAFT_JBOD_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", _SESSION], env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = dict(line.split(": ", 1) for line in done.stdout.splitlines() if ": " in line)
    assert seen["planner"] == seen["driver"] == str(REAL / "__init__.py")
