"""kraft-jbod's reference model of KRaft metadata with JBOD log directories (KIP-858), as Apache Kafka ships it.

Pure Python: records and their codecs, the metadata image and replay, the replica view, the reference
controller, readers of real metadata files and named invariants. Nothing here imports Spark, Delta or
great-expectations (an import-linter contract in pyproject.toml enforces it).
"""

from __future__ import annotations

__version__ = "0.1.0"
