"""A class-data archive for the driver's JVM (AppCDS, JEP 350): Spark's classes as the last run left them loaded.

Every JVM the job starts loads, verifies and links about 12,000 of Spark's classes before its first micro-batch, at
about one core: measured here, a session and a trivial query took 6.1–7.5 s + 2.8–3.2 s, 3.6–4.2 s + 1.3–1.5 s with
an archive, and an incremental run of the 200 k-partition benchmark cluster 25.0–29.5 s → 20.6–22.5 s from the
command's start (docs/state-design.md, "fourteenth round"). The JVM maps the archive's classes instead
(``-XX:SharedArchiveFile``).

The archive is made by the JVM itself: a session that finds none asks its JVM to write one when it exits
(``-XX:ArchiveClassesAtExit``), into a file reserved for it (``<key>.<token>.partial``; the JVM writes it after the
Python process has gone, ≈ 8 s of CPU, and that run starts ≈ 5 s slower). A later session takes that file as the
archive once it is complete: the JVM writes an archive's header — its magic number first — after everything else,
so a dump cut short (kill -9) has none and is removed, never mapped (a truncated archive with a header crashes the
JVM). While a dump is pending, other sessions run without an archive rather than dump again.

An archive is only valid for the JVM, its base archive, the classpath and the options it was made with: the file's
name is a hash of the java binary, the JDK's own base archives, Spark's jars and the driver's options, so a changed
install gets a new archive and a stale one is never offered. The JVM's own messages about archives are off: one it
still refuses costs the speed, nothing else.
An operator's own ``-Xshare`` or archive options win (nothing is added), and the cache can be moved with
``$KRAFT_JBOD_CACHE_DIR`` (default ``~/.cache/kraft-jbod``; archives are ``jvm/*.jsa``, 140–170 MB each).
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import time
from pathlib import Path

#: The first bytes of a finished dynamic archive: ``CDS_DYNAMIC_ARCHIVE_MAGIC`` (0xf00baba8), little-endian.
ARCHIVE_MAGIC = (0xF00BABA8).to_bytes(4, "little")
#: A finished dump is taken only this long after its last write: the header is its last write, not an atomic one.
SETTLE_SECONDS = 30.0
#: A reservation still without a finished archive this long after its last write belonged to a JVM that was killed
#: or still runs (a long ``--follow``): given up, and another session may dump.
PENDING_SECONDS = 24 * 3600.0
#: An archive no session has mapped for this long (another pyspark's, another heap's) is removed.
UNUSED_SECONDS = 30 * 24 * 3600.0
#: Options by which an operator already chose what the JVM does with class data.
_OWN_OPTIONS = ("-Xshare", "SharedArchiveFile", "ArchiveClassesAtExit", "DumpLoadedClassList")
#: The JVM's messages about archives (a refused archive is reported as a warning on every start).
_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def cache_dir() -> Path | None:
    """Where kraft-jbod keeps what it can rebuild: ``$KRAFT_JBOD_CACHE_DIR``, else ``$XDG_CACHE_HOME/kraft-jbod``,
    else ``~/.cache/kraft-jbod``; None when there is no home to find it in (a service account without one)."""
    own = os.environ.get("KRAFT_JBOD_CACHE_DIR")
    if own:
        return Path(own)
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return Path(xdg) / "kraft-jbod"
    try:
        return Path.home() / ".cache" / "kraft-jbod"
    except RuntimeError:
        return None


def java_binary() -> Path | None:
    """The java that Spark's launcher runs (``bin/spark-class``: ``$JAVA_HOME/bin/java``, else ``java`` on the
    PATH), resolved; None when there is none."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if found is None or not Path(found).exists():
        return None
    return Path(found).resolve()


def base_archives(java: Path) -> list[Path]:
    """The JDK's own class-data archives beside ``java`` (``lib/server/classes*.jsa``): the base a dynamic archive
    is made on top of. ``java -Xshare:dump`` writes them again (a JDK package's install does), and a dynamic archive
    made on an earlier base is then refused — silently, the JVM's archive messages being off."""
    return sorted((java.parent.parent / "lib" / "server").glob("classes*.jsa"))


def archive_key(java: Path, jars: Path, options: str, memory: str) -> str:
    """A name for the archive of this JVM, classpath, options and heap size (past 32 GB the JVM's object layout
    changes), and the JDK's base archives it is made on (:func:`base_archives`): what the JVM checks an archive
    against."""
    digest = hashlib.sha256()
    for path in (java, *base_archives(java), *sorted(jars.iterdir())):
        stat = path.stat()
        digest.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    digest.update(f"{options}\0{memory}".encode())
    return digest.hexdigest()[:20]


def _finished(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(len(ARCHIVE_MAGIC)) == ARCHIVE_MAGIC
    except OSError:
        return False


def _mapped(archive: Path, now: float) -> str:
    """The options that map ``archive``, marked as used now; the folder's archives unused for
    :data:`UNUSED_SECONDS` removed (a JVM that still maps one keeps its pages)."""
    os.utime(archive, (now, now))
    for other in archive.parent.glob("*.jsa"):
        if now - other.stat().st_mtime >= UNUSED_SECONDS:
            other.unlink(missing_ok=True)
    return f"-XX:SharedArchiveFile={archive} {_QUIET}"


def archive_options(options: str, jars: Path, memory: str = "", *, java: Path | None = None,
                    cache: Path | None = None, now: float | None = None) -> str:
    """JVM options to add to the driver's ``options`` (its ``spark.driver.extraJavaOptions``; ``memory``: its
    ``spark.driver.memory``): map the archive when there is one, else reserve a file and ask the JVM to dump into
    it, else (a dump pending, no java, no writable cache, the operator's own class-data options) nothing."""
    if any(own in options for own in _OWN_OPTIONS):
        return ""
    java = java or java_binary()
    if java is None or not jars.is_dir():
        return ""
    cache = cache or cache_dir()
    if cache is None:
        return ""
    folder = cache / "jvm"
    now = time.time() if now is None else now
    try:
        key = archive_key(java, jars, options, memory)
        archive = folder / f"{key}.jsa"
        pending = False
        for partial in folder.glob(f"{key}.*.partial"):
            age, finished = now - partial.stat().st_mtime, _finished(partial)
            if finished and age >= SETTLE_SECONDS:
                if archive.is_file():
                    partial.unlink(missing_ok=True)  # a second dump, finished after the first was taken
                else:
                    os.replace(partial, archive)
            elif not finished and age >= PENDING_SECONDS:
                partial.unlink(missing_ok=True)
            else:
                pending = True
        if archive.is_file():
            return _mapped(archive, now)
        if pending:
            return ""
        folder.mkdir(parents=True, exist_ok=True)
        reserved = folder / f"{key}.{secrets.token_hex(4)}.partial"
        reserved.touch(exist_ok=False)
    except OSError:
        return ""  # no cache to write to (read-only home, full disk): the JVM starts as it would without one
    return f"-XX:ArchiveClassesAtExit={reserved} {_QUIET}"


def release(options: str) -> None:
    """Give back the reservation ``options`` asked a JVM to dump into, when that JVM never started (a session that
    failed to launch would otherwise keep other sessions from dumping for :data:`PENDING_SECONDS`)."""
    for option in options.split():
        if option.startswith("-XX:ArchiveClassesAtExit="):
            reserved = Path(option.partition("=")[2])
            if reserved.name.endswith(".partial") and reserved.is_file() and reserved.stat().st_size == 0:
                reserved.unlink(missing_ok=True)
