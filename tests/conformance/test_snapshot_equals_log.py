"""A Kafka snapshot ``N-e.checkpoint`` holds the image after log offsets ``< N``: replaying the log's records
up to (excluding) ``N`` must give the same image as replaying the snapshot's records (provenance aside).

This checks the reader (offset conventions, copy merging) and the replay together against real Kafka output:
the snapshots were written by Kafka's own ``MetadataImage.write`` from its own replay of the same log.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest
from samples_support import SAMPLE_FILES, sample_path
from samples_support import SAMPLES_DIR as SAMPLES

from jbod_model import replay
from jbod_model.records.entry import LogEntry
from jbod_model.storage.metadata_dir import MetadataLog, read_snapshot_entries

pytestmark = pytest.mark.samples

#: Each cluster's copies of its metadata log (greenlemont: only kafka1 kept its .log; all three kept
#: snapshots).
CLUSTERS = {
    "indus-4.2": ["indus-local-test-rig-kafka4.2/kafka-data"],
    "greenlemont-3.5": [f"greenlemont-3node-kafka3.5/data/kafka{i}" for i in (1, 2, 3)],
}


def _open(cluster: str) -> MetadataLog:
    dirs = [SAMPLES / d for d in CLUSTERS[cluster]]
    if not all(d.is_dir() for d in dirs):
        pytest.skip(f"real Kafka samples not found at {SAMPLES} (expected ../shared beside the repo)")
    return MetadataLog.open(dirs)


def _snapshot_params() -> list[object]:
    """One case per listed snapshot of each cluster's copies (listed, so they are collected without the samples)."""
    params: list[object] = []
    for cluster, dirs in CLUSTERS.items():
        found = sorted(f for d in dirs for f in SAMPLE_FILES
                       if f.startswith(f"{d}/__cluster_metadata-0/") and f.endswith(".checkpoint"))
        params += [pytest.param(cluster, f, id=f"{cluster}:{Path(f).parent.parent.name}/{Path(f).name}")
                   for f in found]
    return params


def _non_empty(entries: Iterable[LogEntry]) -> list[LogEntry]:
    out = list(entries)
    assert out, "expected some records"
    return out


@pytest.mark.parametrize(("cluster", "relative"), _snapshot_params())
def test_snapshot_equals_the_replayed_log_prefix(cluster: str, relative: str) -> None:
    snapshot = sample_path(relative)
    log = _open(cluster)
    end_offset = int(snapshot.name[:20])
    from_log = replay.replay_entries(_non_empty(log.read(from_snapshot=False, until_offset=end_offset)))
    from_snapshot = replay.replay_entries(_non_empty(read_snapshot_entries(snapshot)))
    assert from_log.last_offset == end_offset - 1  # the log really reached the snapshot's end offset
    assert from_log.same_state(from_snapshot)


@pytest.mark.parametrize("cluster", list(CLUSTERS))
def test_latest_snapshot_plus_log_equals_the_full_log(cluster: str) -> None:
    log = _open(cluster)
    stream = log.read()
    assert stream.snapshot is not None
    image = replay.replay_entries(stream.snapshot_entries())
    image = replay.replay_entries(stream.log_entries(), image)
    full = replay.replay_entries(log.read(from_snapshot=False))
    assert image.same_state(full)
