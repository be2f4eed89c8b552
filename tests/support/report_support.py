"""Synthetic logs for report tests: batches of records at known times, and broker registrations; the bundled demo's
report and long tables of partitions to render."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import Record, RegisterBrokerRecord
from jbod_model.report import JbodReport, PartitionStatus, build_report
from jbod_model.uuid import Uuid
from pipelines.report.load import load_from_inputs

DEMO = Path(__file__).resolve().parents[2] / "pipelines" / "examples" / "demo-disk-failure.jsonl"

T0 = 1_714_550_400_000  # 2024-05-01 08:00:00 UTC


def batches(*groups: tuple[int, list[Record]]) -> list[LogEntry]:
    """Consecutive offsets; each group is one batch written at T0 + the given seconds."""
    out: list[LogEntry] = []
    for seconds, records in groups:
        base = len(out)
        out += [LogEntry(offset=base + i, record=r, batch_base_offset=base, timestamp=T0 + seconds * 1000)
                for i, r in enumerate(records)]
    return out


def register(broker: int, epoch: int, dirs: tuple[Uuid, ...], fenced: bool = False) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(broker_id=broker, broker_epoch=epoch, fenced=fenced, log_dirs=dirs,
                                incarnation_id=Uuid.from_bytes(bytes([broker, epoch]) * 8))


def demo_report() -> JbodReport:
    """The demo (:data:`DEMO`) reported as ``jbod report`` does: one failed disk holding three replicas."""
    data = load_from_inputs([DEMO])
    return build_report(data.image, history=data.history)


def partition_statuses(n: int, *, leader: int = -1) -> tuple[PartitionStatus, ...]:
    """``n`` partitions ``lost-0`` … of a topic of the demo's, replicas 1-3, ISR 1, min ISR 2 and ``leader`` (-1: the
    rows of a long leaderless table; a broker: of a long under-min-ISR one)."""
    part = demo_report().offline[0].replicas[0].partition
    return tuple(PartitionStatus(partition=replace(part, topic_name="lost", partition_id=i), leader=leader,
                                 replicas=(1, 2, 3), isr=(1,), elr=(), min_isr=2, offline_replicas=())
                 for i in range(n))
