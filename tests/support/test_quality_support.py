"""Lakehouses for the data-quality tests without Spark: the job's own operator (``replay_batch``) over in-memory
stand-ins of Spark's state, and its own Delta writer (``DeltaRsWriter``) — so the tables have exactly the contract of
``jbod run`` and take milliseconds to make. Also the helpers the injection tests share, and a check that the helper's
tables are what the model says."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from jbod_model.directory_id import UNASSIGNED
from jbod_model.image_json import image_to_json
from jbod_model.records.entry import LogEntry
from jbod_model.records.json_codec import dumps, record_to_json
from jbod_model.records.metadata import BrokerEndpoint, NoOpRecord, PartitionRecord, Record, RegisterBrokerRecord
from jbod_model.replay import replay_entries
from jbod_model.simulator.churn import ChurnSpec, churn_log
from jbod_model.stream import RequestEntry, StreamEntry, StreamRunner, load_jsonl
from jbod_model.uuid import Uuid
from pipelines.lakehouse.tables import DeltaRsWriter, as_of_image
from pipelines.streaming.codec import entry_to_row
from pipelines.streaming.processor import replay_batch
from pipelines.streaming.stateful import MAP_STATES

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "pipelines" / "examples" / "demo-disk-failure.jsonl"
DEMO_CLUSTER = "demo-disk-failure"
#: A small synthetic JBOD cluster with timestamps: brokers with two disks, ISR changes, a directory failure,
#: reassignments between directories, a transaction, topic re-creation.
SYNTHETIC = ChurnSpec(brokers=3, dirs_per_broker=2, topics=3, partitions_per_topic=2, replication_factor=2,
                          operations=40, noop_share=0.2, seed=11)


class FakeMapState:
    """The MapState calls the operator makes, on a dict; counts the calls (each is a round trip in Spark)."""

    def __init__(self) -> None:
        self.data: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        self.calls = 0

    def getValue(self, key: tuple[Any, ...]) -> tuple[Any, ...] | None:
        self.calls += 1
        return self.data.get(tuple(key))

    def containsKey(self, key: tuple[Any, ...]) -> bool:
        self.calls += 1
        return tuple(key) in self.data

    def updateValue(self, key: tuple[Any, ...], value: tuple[Any, ...]) -> None:
        self.calls += 1
        self.data[tuple(key)] = tuple(value)

    def removeKey(self, key: tuple[Any, ...]) -> None:
        self.calls += 1
        self.data.pop(tuple(key), None)

    def iterator(self) -> Iterator[tuple[tuple[Any, ...], tuple[Any, ...]]]:
        self.calls += 1
        return iter(list(self.data.items()))

    def keys(self) -> Iterator[tuple[Any, ...]]:
        self.calls += 1
        return iter(list(self.data))


class FakeValueState:
    """The ValueState calls the operator makes."""

    def __init__(self) -> None:
        self.value: tuple[Any, ...] | None = None

    def exists(self) -> bool:
        return self.value is not None

    def get(self) -> tuple[Any, ...] | None:
        return self.value

    def update(self, value: tuple[Any, ...]) -> None:
        self.value = tuple(value)


def write_lakehouse(tables: Path, cluster_id: str, entries: Sequence[StreamEntry], *, input_kind: str = "log",
                    batch_size: int | None = None, snapshot: tuple[Sequence[Record], int] | None = None) -> Path:
    """Replay ``entries`` (records, or a JSONL request stream with ``input_kind="jsonl"``) with the job's operator
    and write the job's Delta tables for ``cluster_id`` under ``tables`` (several clusters may share it).
    ``snapshot`` (its records, its end offset) is where the stream starts, as the source starts a log whose
    beginning was deleted."""
    maps = {name: FakeMapState() for name in MAP_STATES}
    meta = FakeValueState()
    writer = DeltaRsWriter(tables, f"kraft-jbod:test:{cluster_id}")
    writer.ensure_tables()
    rows_in: list[Any] = []
    if snapshot is not None:
        records, end = snapshot
        rows_in += [entry_to_row(cluster_id, "snapshot", i, LogEntry(offset=i, record=r), snapshot_end=end)
                    for i, r in enumerate(records)]
    rows_in += [entry_to_row(cluster_id, "request" if isinstance(e, RequestEntry) else "record", len(rows_in) + i, e,
                             input_kind=input_kind) for i, e in enumerate(entries)]
    size = batch_size or max(1, len(rows_in))
    for batch_id, start in enumerate(range(0, len(rows_in), size)):
        frame = pd.DataFrame([dataclasses.asdict(r) for r in rows_in[start:start + size]])
        writer.write_batch(batch_id, replay_batch(cluster_id, frame, meta, maps))  # type: ignore[arg-type]
    return tables


def demo_lakehouse(tables: Path) -> Path:
    """The bundled demo (broker registrations, topics, placements, then broker 2's disk fails) through the
    reference controller, as ``jbod run`` replays it."""
    return write_lakehouse(tables, DEMO_CLUSTER, load_jsonl(DEMO), input_kind="jsonl")


def synthetic_lakehouse(tables: Path, cluster_id: str = "synthetic") -> Path:
    return write_lakehouse(tables, cluster_id, churn_log(SYNTHETIC), batch_size=17)


#: The demo's clock for the metadata-log versions of it: one second per offset from here.
DEMO_START_MS = 1_700_000_000_000
#: The threshold the stuck-placement log is checked with (conf: quality.pending_placement_max_offsets).
STUCK_MAX_OFFSETS = 5


def demo_log() -> list[LogEntry]:
    """The demo as a metadata log: the records it holds plus those the reference controller wrote for its requests,
    in offset order, with batch times (one second per offset) so it can be written as segments."""
    runner = StreamRunner()
    log: list[LogEntry] = []
    for entry in load_jsonl(DEMO):
        if isinstance(entry, LogEntry):
            log.append(entry)
        for event in runner.run([entry]):
            log.extend(event.entries)
    return [dataclasses.replace(e, leader_epoch=1, timestamp=DEMO_START_MS + 1000 * e.offset,
                                batch_base_offset=e.offset if e.batch_base_offset is None else e.batch_base_offset)
            for e in sorted(log, key=lambda e: e.offset)]


def _appended(log: list[LogEntry], *records: Record) -> list[LogEntry]:
    """``records`` after ``log``, each a batch of its own, one second apart."""
    start = log[-1].offset + 1
    return [*log, *(LogEntry(offset=start + i, record=r, batch_base_offset=start + i, leader_epoch=1,
                             timestamp=DEMO_START_MS + 1000 * (start + i)) for i, r in enumerate(records))]


def bad_logs() -> dict[str, list[LogEntry]]:
    """Replayable (or deliberately not) corruptions of the demo's metadata log, by cluster id:

    * ``leader-on-offline-dir`` — broker 2's disk fails (offset 32) but the batch lacks the controller's ISR and
      leader changes (29–31 are NoOps instead): broker 2 keeps leading payments-1 from the failed disk (I14), and
      the failure was not handled in its batch (I16);
    * ``directory-of-two-brokers`` — broker 4 registers with broker 1's disk: replay refuses it (a replay fault, I6);
    * ``stuck-unassigned`` — a new partition placed UNASSIGNED on brokers 1 and 3 (both have two disks, so that is
      legal) that no AssignReplicasToDirs ever resolves: pending for more than ``STUCK_MAX_OFFSETS`` offsets (I12).
    """
    log = demo_log()
    orders = next(e.record.topic_id for e in log if type(e.record).__name__ == "TopicRecord")
    endpoint = (BrokerEndpoint(name="PLAINTEXT", host="broker-4.demo", port=9092, security_protocol=0),)
    thief = RegisterBrokerRecord(version=3, broker_id=4, broker_epoch=33, incarnation_id=Uuid(4, 4),
                                 end_points=endpoint, log_dirs=(Uuid.from_string("NXGV69yVQ06uYL_ESF8CWA"),))
    stuck = PartitionRecord(version=1, partition_id=3, topic_id=orders, replicas=(1, 3), isr=(1, 3), leader=1,
                            directories=(UNASSIGNED, UNASSIGNED))
    return {
        # Offsets stay contiguous (a segment requires it): the dropped records become NoOps in the same batch.
        "leader-on-offline-dir": [dataclasses.replace(e, record=NoOpRecord()) if e.offset in (29, 30, 31) else e
                                  for e in log],
        "directory-of-two-brokers": _appended(log, thief),
        "stuck-unassigned": _appended(log, stuck, *([NoOpRecord()] * (STUCK_MAX_OFFSETS + 3))),
    }


#: What ``jbod check`` says about each bad log: the expectations that fail, and the exit code at fail_on=error.
BAD_LOG_VERDICTS: dict[str, tuple[set[str], int]] = {
    "leader-on-offline-dir": ({"I14.leader_acceptable", "I16.directory_failure_handled_in_batch"}, 1),
    "directory-of-two-brokers": ({"I6.replay_refused"}, 1),
    "stuck-unassigned": ({"I12.pending_placement_offsets"}, 0),
}


def record_row(cluster_id: str, offset: int, record: Record, *, batch_base_offset: int | None = None,
               timestamp: pd.Timestamp | None = None) -> dict[str, Any]:
    """A bronze ``records`` row for ``record`` applied at ``offset`` (for tests that append to the log)."""
    obj = record_to_json(record)
    return {"cluster_id": cluster_id, "offset": offset, "batch_base_offset": batch_base_offset or offset,
            "leader_epoch": 1, "timestamp": timestamp, "type": obj["type"], "version": obj["version"],
            "data": dumps(obj["data"]), "payload": None, "source": "test", "origin": "log", "snapshot_index": None,
            "applied_offset": offset}


# -------------------------------------------------------------------------------------------------------------
# The helper itself


def test_the_helper_writes_the_model_image(tmp_path: Path) -> None:
    entries = churn_log(SYNTHETIC)
    synthetic_lakehouse(tmp_path)
    want = image_to_json(replay_entries([e for e in entries if isinstance(e, LogEntry)]))
    got = as_of_image(tmp_path, "synthetic")
    assert got["partitions"] == want["partitions"] and got["replicas"] == want["replicas"]
    assert got["brokers"] == want["brokers"] and got["lastOffset"] == want["lastOffset"]


def test_the_demo_log_replays_to_the_demo_image() -> None:
    log = demo_log()
    assert [e.offset for e in log] == list(range(33))
    runner = StreamRunner()
    for _ in runner.run(load_jsonl(DEMO)):
        pass
    assert image_to_json(replay_entries(log)) == image_to_json(runner.image)
