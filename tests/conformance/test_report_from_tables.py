"""The report from the tables (``jbod report --tables``: no replay, the incidents followed through the stored
versions, the batches walked without the idle ones) against a :class:`~jbod_model.report.ReportTracker` replaying
the same log, on Kafka's own logs: their batches are a NoOpRecord alone but for a few hundred (26,698 of 26,880 in
the 3.5 cluster's), and their fencings and registrations open dozens of incidents. The generated logs of the
hypothesis property (``tests/properties/test_report_rows_properties.py``) are small; these are a controller's."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from samples_support import sample_path
from test_quality_support import write_lakehouse

from jbod_model.records.entry import LogEntry
from jbod_model.report import ReportTracker
from jbod_model.sources import open_inputs
from pipelines.report.load import load_from_tables

pytestmark = pytest.mark.samples

LOGS = (
    "greenlemont-3node-kafka3.5/data/kafka1/__cluster_metadata-0/00000000000000000000.log",
    "indus-local-test-rig-kafka4.2/kafka-data/__cluster_metadata-0/00000000000000000000.log",
    "otus-kafka-kafka3.8/data/__cluster_metadata-0/00000000000000000000.log",
)


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.split("/")[0])
def test_the_report_history_from_the_tables_equals_the_replay_on_a_kafka_log(log: str) -> None:
    entries = [e for e in open_inputs([sample_path(log)], from_snapshot=False).entries if isinstance(e, LogEntry)]
    offsets = [e.offset for e in entries]
    with tempfile.TemporaryDirectory() as tmp:
        tables = write_lakehouse(Path(tmp), "c", entries)
        for as_of in (offsets[len(offsets) // 2], offsets[-1]):
            got, _ = load_from_tables(tables, "c", as_of_offset=as_of)
            tracker = ReportTracker()
            tracker.feed_all(e for e in entries if e.offset <= as_of)
            assert got.history == tracker.history(), as_of
