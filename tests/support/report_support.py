"""Synthetic logs for report tests: batches of records at known times, and broker registrations."""

from __future__ import annotations

from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import Record, RegisterBrokerRecord
from jbod_model.uuid import Uuid

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
