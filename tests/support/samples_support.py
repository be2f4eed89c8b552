"""The real Kafka samples the tests expect in ``../shared/kraft-metadata-samples``, listed here by path.

Parametrized tests take their cases from this list, never from a glob or from a file inside the samples: without
``../shared`` every case is still collected and skips with the missing path named, so a missing sample shows as a
skip with its reason and never as a smaller test count. ``test_every_sample_file_is_listed`` keeps the list equal
to the files on disk (and to ``RECORD_COUNTS.txt``) when the samples are present.
"""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
SAMPLES_DIR = REPO_ROOT.parent / "shared" / "kraft-metadata-samples"
COUNTS_FILE = SAMPLES_DIR / "RECORD_COUNTS.txt"

#: Every ``.log`` / ``.checkpoint`` file of the samples, relative to :data:`SAMPLES_DIR`.
SAMPLE_FILES: tuple[str, ...] = (
    "greenlemont-3node-kafka3.5/data/kafka1/__cluster_metadata-0/00000000000000000000.log",
    "greenlemont-3node-kafka3.5/data/kafka1/__cluster_metadata-0/00000000000000028869-0000000189.checkpoint",
    "greenlemont-3node-kafka3.5/data/kafka1/bootstrap.checkpoint",
    "greenlemont-3node-kafka3.5/data/kafka2/__cluster_metadata-0/00000000000000028869-0000000189.checkpoint",
    "greenlemont-3node-kafka3.5/data/kafka2/bootstrap.checkpoint",
    "greenlemont-3node-kafka3.5/data/kafka3/__cluster_metadata-0/00000000000000028870-0000000189.checkpoint",
    "greenlemont-3node-kafka3.5/data/kafka3/bootstrap.checkpoint",
    "indus-local-test-rig-kafka4.2/kafka-data/__cluster_metadata-0/00000000000000000000.log",
    "indus-local-test-rig-kafka4.2/kafka-data/__cluster_metadata-0/00000000000000010744-0000000004.checkpoint",
    "indus-local-test-rig-kafka4.2/kafka-data/__cluster_metadata-0/00000000000000017908-0000000004.checkpoint",
    "indus-local-test-rig-kafka4.2/kafka-data/__cluster_metadata-0/00000000000000025077-0000000004.checkpoint",
    "indus-local-test-rig-kafka4.2/kafka-data/__cluster_metadata-0/00000000000000032233-0000000004.checkpoint",
    "indus-local-test-rig-kafka4.2/kafka-data/__cluster_metadata-0/00000000000000039383-0000000004.checkpoint",
    "indus-local-test-rig-kafka4.2/kafka-data/__cluster_metadata-0/00000000000000046533-0000000004.checkpoint",
    "indus-local-test-rig-kafka4.2/kafka-data/bootstrap.checkpoint",
    "otus-kafka-kafka3.8/data/__cluster_metadata-0/00000000000000000000.log",
    "otus-kafka-kafka3.8/data/bootstrap.checkpoint",
)


def sample_path(relative: str) -> Path:
    """The path of a listed sample file; skips the calling test, naming the path, when it is absent."""
    path = SAMPLES_DIR / relative
    if not path.is_file():
        pytest.skip(f"real Kafka sample {relative} not found under {SAMPLES_DIR} (expected ../shared beside the "
                    "repo)")
    return path
