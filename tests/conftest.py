"""Shared fixtures. The real Kafka samples live beside the repository (``../shared``), never inside it."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import settings

# No per-example deadline: speed is measured in benchmarks/, never in tests, and on a loaded 2-core machine an
# example of a correct property can take longer than hypothesis's default 200 ms (a "flaky" DeadlineExceeded).
settings.register_profile("kraft-jbod", deadline=None)
settings.load_profile("kraft-jbod")

REPO_ROOT = Path(__file__).resolve().parents[1]
SAMPLES_DIR = REPO_ROOT.parent / "shared" / "kraft-metadata-samples"


@pytest.fixture(scope="session")
def samples_dir() -> Path:
    """The real KRaft metadata samples (``../shared/kraft-metadata-samples``); skips when they are absent."""
    if not SAMPLES_DIR.is_dir():
        pytest.skip(f"real Kafka samples not found at {SAMPLES_DIR} (expected ../shared beside the repo)")
    return SAMPLES_DIR
