"""The job's worker daemon (``pipelines.streaming.daemon``): what it changes before pyspark's daemon runs."""

from __future__ import annotations

import sys
import zipimport
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest

from pipelines.streaming import daemon


@pytest.fixture
def saved_path() -> Iterator[list[str]]:
    saved = list(sys.path)
    yield saved
    sys.path[:] = saved


def test_the_installed_pysparks_own_zip_leaves_the_path(saved_path: list[str]) -> None:
    own = Path(pyspark.__file__).parent / "python" / "lib" / "pyspark.zip"
    if not own.exists():
        pytest.skip("this pyspark install ships no python/lib/pyspark.zip")
    sys.path.insert(0, str(own))
    daemon.prefer_installed_pyspark()
    assert str(own) not in sys.path
    assert sys.path == saved_path


def test_another_sparks_zip_stays(saved_path: list[str], tmp_path: Path) -> None:
    other = tmp_path / "spark" / "python" / "lib" / "pyspark.zip"
    other.parent.mkdir(parents=True)
    other.write_bytes(b"")
    sys.path.insert(0, str(other))
    daemon.prefer_installed_pyspark()
    assert sys.path[0] == str(other)


def test_zip_importers_keep_their_directory_across_invalidation(saved_path: list[str]) -> None:
    original = zipimport.zipimporter.invalidate_caches
    try:
        daemon.install()
        assert zipimport.zipimporter.invalidate_caches is not original
    finally:
        zipimport.zipimporter.invalidate_caches = original  # type: ignore[method-assign]


def test_preload_imports_the_operator() -> None:
    daemon.preload()
    assert "pipelines.streaming.processor" in sys.modules
