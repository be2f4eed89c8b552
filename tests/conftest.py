"""Shared fixtures. The real Kafka samples live beside the repository (``../shared``), never inside it."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SAMPLES_DIR = REPO_ROOT.parent / "shared" / "kraft-metadata-samples"


@pytest.fixture(scope="session")
def samples_dir() -> Path:
    """The real KRaft metadata samples (``../shared/kraft-metadata-samples``); skips when they are absent."""
    if not SAMPLES_DIR.is_dir():
        pytest.skip(f"real Kafka samples not found at {SAMPLES_DIR} (expected ../shared beside the repo)")
    return SAMPLES_DIR
