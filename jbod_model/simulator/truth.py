"""The ground truth: which replica was *physically* offline, when and why — from what the simulator knows failed,
not from what the metadata says.

A replica (partition, broker) the metadata names is physically offline when its broker process is not running
(halted after a disk failure, shut down, or not started yet), when its log sits on a failed disk — also after a
restart that left that disk out, until the broker re-creates the replica elsewhere — or when its running broker
refuses to create it (assigned to a dir that is not online while the broker has offline dirs, KAFKA-16234). A
replica that is still being created (the broker has not seen the partition yet) is not offline: there is nothing on
disk to lose.

The timeline is a list of :class:`OfflineInterval`; an interval is split when the reason changes and ends when the
replica comes back or stops being a replica (topic deleted, reassigned away). Offsets are the metadata log end
offset at that moment. :func:`compare_with_image` sets the timeline's open intervals against Kafka's offline
definition (``jbod_model.replicas``) on an image: at quiescence the two must agree, and where they do not (a
failure the controller was never told about, KAFKA-15649 / KAFKA-16606) that disagreement is the finding.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from jbod_model.image import MetadataImage
from jbod_model.replicas import OfflineReason, replica_view
from jbod_model.uuid import Uuid

ReplicaKey = tuple[Uuid, int, int]


class TruthReason(StrEnum):
    """Why a replica is physically offline."""

    #: Its log is on a disk that failed.
    DIRECTORY_FAILED = "DIRECTORY_FAILED"
    #: Its broker halted (metadata dir failed, its last log dir failed, or a dir failed in ZK-migration mode).
    BROKER_HALTED = "BROKER_HALTED"
    #: Its broker is shut down (controlled shutdown, ``log.dir.failure.timeout.ms``, a crash) or not started.
    BROKER_STOPPED = "BROKER_STOPPED"
    #: Its running broker took the partition on but will not create the log: the assigned dir is not online and
    #: the broker has offline dirs (``Partition.createLogInAssignedDirectoryId``, KAFKA-16234).
    NOT_CREATED = "NOT_CREATED"

    def agrees_with(self, reason: OfflineReason) -> bool:
        """Whether Kafka's metadata-side reason (``KRaftMetadataCache.getOfflineReplicas``) says the same."""
        if self in (TruthReason.DIRECTORY_FAILED, TruthReason.NOT_CREATED):
            return reason in (OfflineReason.DIRECTORY_OFFLINE, OfflineReason.DIRECTORY_LOST)
        return reason in (OfflineReason.BROKER_FENCED, OfflineReason.BROKER_UNREGISTERED)


@dataclass(frozen=True, slots=True)
class OfflineInterval:
    """One stretch of time during which one replica was physically offline for one reason. ``end_ms`` /
    ``end_offset`` are None while it still is. ``directory`` is the disk holding the replica's log (None when the
    broker is down and never had a log for it)."""

    topic_id: Uuid
    topic: str
    partition: int
    broker_id: int
    directory: Uuid | None
    reason: TruthReason
    start_ms: int
    start_offset: int
    end_ms: int | None = None
    end_offset: int | None = None

    @property
    def is_open(self) -> bool:
        return self.end_ms is None

    @property
    def key(self) -> ReplicaKey:
        return (self.topic_id, self.partition, self.broker_id)

    def to_json(self) -> dict[str, Any]:
        return {"topicId": str(self.topic_id), "topic": self.topic, "partition": self.partition,
                "brokerId": self.broker_id, "directory": None if self.directory is None else str(self.directory),
                "reason": self.reason.value, "startMs": self.start_ms, "startOffset": self.start_offset,
                "endMs": self.end_ms, "endOffset": self.end_offset}


PhysicalStatus = tuple[TruthReason, Uuid | None]


class GroundTruth:
    """Keeps the offline timeline incrementally: the simulator reports every (partition, broker) whose physical
    status may have changed, with its new status."""

    __slots__ = ("_closed", "_open")

    def __init__(self) -> None:
        self._open: dict[ReplicaKey, OfflineInterval] = {}
        self._closed: list[OfflineInterval] = []

    @property
    def open_count(self) -> int:
        return len(self._open)

    def update(self, key: ReplicaKey, topic: str, status: PhysicalStatus | None, now_ms: int, offset: int) -> None:
        """Record ``key``'s status now (None = online or no longer a replica)."""
        current = self._open.get(key)
        if current is not None and status is not None and (current.reason, current.directory) == status:
            return
        if current is not None:
            self._closed.append(replace(current, end_ms=now_ms, end_offset=offset))
            del self._open[key]
        if status is not None:
            reason, directory = status
            self._open[key] = OfflineInterval(topic_id=key[0], topic=topic, partition=key[1], broker_id=key[2],
                                              directory=directory, reason=reason, start_ms=now_ms,
                                              start_offset=offset)

    def intervals(self) -> tuple[OfflineInterval, ...]:
        """Every interval, closed and open, by start time then replica."""
        every = [*self._closed, *self._open.values()]
        return tuple(sorted(every, key=lambda i: (i.start_ms, i.start_offset, str(i.topic_id), i.partition,
                                                   i.broker_id)))


@dataclass(frozen=True, slots=True)
class TruthMismatch:
    """A replica on which the ground truth and the metadata's replica view disagree at the end of a run."""

    topic_id: Uuid
    partition: int
    broker_id: int
    truth: TruthReason | None
    metadata: OfflineReason | None

    def describe(self) -> str:
        said = "online" if self.metadata is None else f"offline ({self.metadata.value})"
        truth = "online" if self.truth is None else f"offline ({self.truth.value})"
        return (f"replica {self.broker_id} of {self.topic_id}-{self.partition}: physically {truth}, the metadata "
                f"says {said}")


def compare_with_image(timeline: Iterable[OfflineInterval], image: MetadataImage) -> list[TruthMismatch]:
    """Every replica of ``image`` on which the timeline's open intervals and Kafka's offline definition disagree
    (offline vs online, or offline for reasons that do not match), plus open intervals of replicas the image
    does not have. Sorted by topic id string, partition, broker."""
    open_now = {i.key: i for i in timeline if i.is_open}
    out: list[TruthMismatch] = []
    for row in replica_view(image):
        key = (row.topic_id, row.partition_id, row.broker_id)
        interval = open_now.pop(key, None)
        truth = None if interval is None else interval.reason
        meta = row.offline_reason
        if truth is None and meta is None:
            continue
        if truth is not None and meta is not None and truth.agrees_with(meta):
            continue
        out.append(TruthMismatch(row.topic_id, row.partition_id, row.broker_id, truth, meta))
    for key, interval in open_now.items():
        out.append(TruthMismatch(key[0], key[1], key[2], interval.reason, None))
    return sorted(out, key=lambda m: (str(m.topic_id), m.partition, m.broker_id))
