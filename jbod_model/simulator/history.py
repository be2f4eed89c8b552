"""What happened in a run, in words: the narrative of physical and operator events (:class:`Happening`) and the
inventory of every simulated disk (:class:`DirectoryInfo`).

Neither is in the metadata log. Happenings are what a broker's ``server.log`` and an operator's notes would say
(a disk failed, a broker halted, an assignment was dropped); the directory inventory is what the
``meta.properties`` files on each disk say, including disks that were replaced or removed during the run.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from jbod_model.uuid import Uuid


class HappeningKind(StrEnum):
    """The kinds of event the narrative records."""

    BROKER_STARTED = "BROKER_STARTED"
    BROKER_REGISTERED = "BROKER_REGISTERED"
    BROKER_REREGISTERED = "BROKER_REREGISTERED"
    BROKER_UNFENCED = "BROKER_UNFENCED"
    BROKER_SESSION_EXPIRED = "BROKER_SESSION_EXPIRED"
    BROKER_SHUTDOWN_STARTED = "BROKER_SHUTDOWN_STARTED"
    BROKER_STOPPED = "BROKER_STOPPED"
    BROKER_HALTED = "BROKER_HALTED"
    DIR_FAILED = "DIR_FAILED"
    DIR_FAILURE_REPORTED = "DIR_FAILURE_REPORTED"
    DIR_FAILURE_TIMEOUT = "DIR_FAILURE_TIMEOUT"
    DIR_REPLACED = "DIR_REPLACED"
    DIR_REMOVED = "DIR_REMOVED"
    DIR_ADDED = "DIR_ADDED"
    REPLICA_NOT_CREATED = "REPLICA_NOT_CREATED"
    ASSIGNMENT_DROPPED = "ASSIGNMENT_DROPPED"
    MOVE_STARTED = "MOVE_STARTED"
    MOVE_COMPLETED = "MOVE_COMPLETED"
    MOVE_REVERTED = "MOVE_REVERTED"
    TOPIC_CREATED = "TOPIC_CREATED"
    TOPIC_DELETED = "TOPIC_DELETED"
    PARTITIONS_CREATED = "PARTITIONS_CREATED"
    REASSIGNMENT_REQUESTED = "REASSIGNMENT_REQUESTED"
    METADATA_VERSION_CHANGED = "METADATA_VERSION_CHANGED"
    CONTROLLER_OVERLOADED = "CONTROLLER_OVERLOADED"
    BROKER_ISOLATED = "BROKER_ISOLATED"
    ZK_MIGRATION = "ZK_MIGRATION"
    NOTE = "NOTE"


@dataclass(frozen=True, slots=True)
class Happening:
    """One event: simulated time, the metadata log end offset at that moment (records with a smaller offset were
    written before it), what happened, to which broker and directory, and a sentence."""

    time_ms: int
    offset: int
    kind: HappeningKind
    broker_id: int | None = None
    directory: Uuid | None = None
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"timeMs": self.time_ms, "offset": self.offset, "kind": self.kind.value, "brokerId": self.broker_id,
                "directory": None if self.directory is None else str(self.directory), "detail": self.detail}


class DirectoryStatus(StrEnum):
    """A simulated disk at the end of the run."""

    ONLINE = "ONLINE"
    FAILED = "FAILED"
    #: Swapped for a new disk (new ``directory.id``) at the same path.
    REPLACED = "REPLACED"
    #: Taken out of ``log.dirs``.
    REMOVED = "REMOVED"


@dataclass(frozen=True, slots=True)
class DirectoryInfo:
    """One simulated disk: what its ``meta.properties`` says (node, directory id) and where it was mounted.

    ``path`` is relative to the output directory (``broker-<id>/<name>``); disks that were replaced or removed keep
    the path they had, so two disks can share one path over a run (the metadata log names both ids)."""

    broker_id: int
    name: str
    path: str
    directory_id: Uuid
    holds_metadata: bool
    is_data_dir: bool
    status: DirectoryStatus
    failed_at_ms: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"brokerId": self.broker_id, "name": self.name, "path": self.path,
                "directoryId": str(self.directory_id), "holdsMetadata": self.holds_metadata,
                "isDataDir": self.is_data_dir, "status": self.status.value, "failedAtMs": self.failed_at_ms}
