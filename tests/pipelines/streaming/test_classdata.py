"""The driver JVM's class-data archive (``pipelines.streaming.classdata``): made by one JVM, mapped by the next, never
a file a JVM could not map whole."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipelines.streaming.classdata import (
    ARCHIVE_MAGIC,
    PENDING_SECONDS,
    SETTLE_SECONDS,
    UNUSED_SECONDS,
    archive_key,
    archive_options,
    base_archives,
    cache_dir,
    java_binary,
    release,
)

OPTIONS = "-XX:TieredStopAtLevel=1"


@pytest.fixture
def install(tmp_path: Path) -> tuple[Path, Path]:
    """A java binary and a jars folder: what an archive's name is made of."""
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_bytes(b"java")
    jars = tmp_path / "spark" / "jars"
    jars.mkdir(parents=True)
    (jars / "spark-core.jar").write_bytes(b"core")
    return java, jars


def _options(install: tuple[Path, Path], cache: Path, now: float | None = None, options: str = OPTIONS) -> str:
    java, jars = install
    return archive_options(options, jars, "3g", java=java, cache=cache, now=now)


def _partials(cache: Path) -> list[Path]:
    return sorted((cache / "jvm").glob("*.partial"))


def _finish(path: Path, age: float) -> None:
    """What a JVM leaves when its dump ends: the header (magic first) written last, ``age`` seconds ago."""
    path.write_bytes(ARCHIVE_MAGIC + b"\0" * 64)
    then = time.time() - age
    os.utime(path, (then, then))


def test_a_session_without_an_archive_reserves_one_and_asks_its_jvm_to_dump_into_it(
        install: tuple[Path, Path], tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    extra = _options(install, cache)
    [reserved] = _partials(cache)
    assert reserved.stat().st_size == 0
    assert f"-XX:ArchiveClassesAtExit={reserved}" in extra.split()
    assert "-Xlog:cds=off" in extra.split()


def test_a_session_that_never_started_its_jvm_gives_its_reservation_back(
        install: tuple[Path, Path], tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    extra = _options(install, cache)
    release(f"{OPTIONS} {extra}")
    assert _partials(cache) == []
    extra = _options(install, cache)
    [reserved] = _partials(cache)
    _finish(reserved, age=1.0)
    release(extra)
    assert reserved.exists(), "a JVM's dump is never removed"


def test_while_a_dump_is_pending_other_sessions_start_without_an_archive(
        install: tuple[Path, Path], tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _options(install, cache)
    assert _options(install, cache) == ""
    assert len(_partials(cache)) == 1


def test_a_finished_dump_becomes_the_archive_once_settled(install: tuple[Path, Path], tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _options(install, cache)
    [reserved] = _partials(cache)
    _finish(reserved, age=1.0)
    assert _options(install, cache) == "", "a header written a moment ago may still be being written"
    _finish(reserved, age=SETTLE_SECONDS + 1)
    extra = _options(install, cache)
    [archive] = (cache / "jvm").glob("*.jsa")
    assert f"-XX:SharedArchiveFile={archive}" in extra.split()
    assert archive.read_bytes().startswith(ARCHIVE_MAGIC)
    assert _partials(cache) == []
    assert _options(install, cache) == extra, "every later session maps the same archive"


def test_a_dump_cut_short_is_never_mapped_and_is_given_up_after_a_day(
        install: tuple[Path, Path], tmp_path: Path) -> None:
    """A JVM killed while dumping leaves a file without a header (the JVM writes it last); mapping a file whose
    regions are missing crashes the JVM, so it is never taken, and past :data:`PENDING_SECONDS` another session
    dumps in its place."""
    cache = tmp_path / "cache"
    _options(install, cache)
    [cut] = _partials(cache)
    cut.write_bytes(b"\0" * 4096)
    assert _options(install, cache, now=time.time() + 3600) == ""
    extra = _options(install, cache, now=time.time() + PENDING_SECONDS + 60)
    assert not cut.exists()
    [reserved] = _partials(cache)
    assert f"-XX:ArchiveClassesAtExit={reserved}" in extra.split()
    assert not list((cache / "jvm").glob("*.jsa"))


def test_an_archive_unused_for_a_month_is_removed_when_another_is_mapped(
        install: tuple[Path, Path], tmp_path: Path) -> None:
    """Another pyspark's or another heap's archive (140–170 MB each) does not stay in the cache for ever."""
    cache = tmp_path / "cache"
    _options(install, cache)
    [reserved] = _partials(cache)
    _finish(reserved, age=SETTLE_SECONDS + 1)
    old, recent = cache / "jvm" / "0ld.jsa", cache / "jvm" / "recent.jsa"
    for path, age in ((old, UNUSED_SECONDS + 60), (recent, UNUSED_SECONDS - 3600)):
        _finish(path, age)
    extra = _options(install, cache)
    [archive] = [p for p in (cache / "jvm").glob("*.jsa") if p not in (old, recent)]
    assert f"-XX:SharedArchiveFile={archive}" in extra.split()
    assert not old.exists() and recent.exists()
    assert time.time() - archive.stat().st_mtime < 60, "the archive in use is marked as used"


def test_no_home_means_no_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("KRAFT_JBOD_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "kraft-jbod"
    monkeypatch.delenv("XDG_CACHE_HOME")

    def homeless() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(Path, "home", homeless)
    assert cache_dir() is None
    monkeypatch.setenv("KRAFT_JBOD_CACHE_DIR", str(tmp_path / "own"))
    assert cache_dir() == tmp_path / "own"


def test_the_archive_is_named_by_the_java_the_jars_and_the_options(install: tuple[Path, Path]) -> None:
    java, jars = install
    key = archive_key(java, jars, OPTIONS, "3g")
    assert archive_key(java, jars, OPTIONS, "3g") == key
    assert archive_key(java, jars, OPTIONS + " -Xss4m", "3g") != key
    assert archive_key(java, jars, OPTIONS, "48g") != key
    (jars / "delta.jar").write_bytes(b"delta")
    assert archive_key(java, jars, OPTIONS, "3g") != key


def test_the_archive_is_named_by_the_jdks_base_archive_too(install: tuple[Path, Path]) -> None:
    """A dynamic archive is made on the JDK's own base archive (``lib/server/classes.jsa``), which ``java
    -Xshare:dump`` writes again: one made on the earlier base is refused, so the new base gets an archive of its
    own."""
    java, jars = install
    server = java.parent.parent / "lib" / "server"
    server.mkdir(parents=True)
    base = server / "classes.jsa"
    base.write_bytes(b"base")
    assert base_archives(java) == [base]
    key = archive_key(java, jars, OPTIONS, "3g")
    base.write_bytes(b"base, dumped again")
    assert archive_key(java, jars, OPTIONS, "3g") != key
    (server / "libjvm.so").write_bytes(b"the JVM's library is not an archive")
    assert base_archives(java) == [base]


def test_an_operators_own_class_data_options_win_and_no_cache_means_no_archive(
        install: tuple[Path, Path], tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    for own in ("-Xshare:off", "-XX:SharedArchiveFile=/opt/spark.jsa", "-XX:ArchiveClassesAtExit=/tmp/a.jsa"):
        assert _options(install, cache, options=f"{OPTIONS} {own}") == ""
    assert not (cache / "jvm").exists()
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    assert _options(install, blocked) == ""


_SESSION = """
import sys
from pipelines.streaming.session import spark_session
spark = spark_session("local[1]")
options = spark.conf.get("spark.driver.extraJavaOptions")
assert spark.range(5).count() == 5
pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
print(options)
print("maps:", " ".join(sorted({line.split()[-1] for line in open(f"/proc/{pid}/maps") if line.endswith(".jsa\\n")})))
spark.stop()
"""


@pytest.mark.skipif(java_binary() is None, reason="no java on this machine")
def test_a_jvm_writes_the_archive_when_it_exits_and_the_next_one_maps_it(tmp_path: Path) -> None:
    """End to end with the real JVM: the first session's JVM dumps its classes after the Python process has gone,
    the file it leaves is a finished archive, and the next session's JVM starts with it and runs a query."""
    env = {**os.environ, "KRAFT_JBOD_CACHE_DIR": str(tmp_path)}

    def session() -> str:
        done = subprocess.run([sys.executable, "-c", _SESSION], env=env, capture_output=True, text=True,
                              timeout=300, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    assert "-XX:ArchiveClassesAtExit=" in session()
    [reserved] = _partials(tmp_path)
    deadline = time.monotonic() + 120
    while reserved.read_bytes()[:4] != ARCHIVE_MAGIC and time.monotonic() < deadline:
        time.sleep(1)  # the JVM dumps after the Python process that started it has exited
    assert reserved.read_bytes()[:4] == ARCHIVE_MAGIC
    then = time.time() - SETTLE_SECONDS - 1
    os.utime(reserved, (then, then))
    out = session()
    [archive] = (tmp_path / "jvm").glob("*.jsa")
    assert f"-XX:SharedArchiveFile={archive}" in out
    assert str(archive) in out.split("maps:")[1].split(), "the JVM maps the archive's classes"
