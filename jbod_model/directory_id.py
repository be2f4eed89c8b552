"""Log-directory ids and the three reserved placeholders. Mirrors ``org.apache.kafka.common.DirectoryId``.

The values are Kafka's shipped ones (since 3.7.0, commit bd18551b32a), which differ from the KIP text
(see docs/divergences.md): MIGRATING is the zero Uuid so that any record without directory information
(KRPC's default for a uuid) reads as "placed before directory assignment existed".
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from enum import Enum

from jbod_model.errors import InputError
from jbod_model.uuid import Uuid

#: The replica was placed before directory assignment existed; which directory is unknown. Counts as online.
MIGRATING = Uuid(0, 0)
#: The replica is not placed yet; its broker will choose a directory and report it. Counts as online.
UNASSIGNED = Uuid(0, 1)
#: The replica is in an offline directory that cannot be identified. Never online.
LOST = Uuid(0, 2)

RESERVED_LSB_LIMIT = 100


def is_reserved(uuid: Uuid) -> bool:
    """Mirrors ``DirectoryId.reserved``: ``msb == 0 and lsb < 100`` with Java's signed compare."""
    return uuid.msb == 0 and uuid.lsb < RESERVED_LSB_LIMIT


def random_directory_id() -> Uuid:
    """Mirrors ``DirectoryId.random``: a random Uuid outside the reserved range (hence never ZERO/ONE either)."""
    while True:
        u = Uuid.random()
        if not is_reserved(u):
            return u


def is_online(directory: Uuid, online_dirs: Collection[Uuid]) -> bool:
    """Mirrors ``DirectoryId.isOnline`` (R2.1).

    UNASSIGNED and MIGRATING are online, LOST is offline. An *empty* online list means every directory is online:
    registrations written before metadata.version 3.7-IV2 carry no directories (KAFKA-16162). Any other id is
    online iff it is in the list — so reserved ids 3..99 are offline whenever the list is non-empty.
    """
    # The three placeholders are (0, 0), (0, 1) and (0, 2): told apart on the halves, without building them.
    if directory.msb == 0:
        lsb = directory.lsb
        if lsb in (0, 1):  # MIGRATING, UNASSIGNED
            return True
        if lsb == 2:  # LOST
            return False
    if not online_dirs:
        return True
    return directory in online_dirs


def create_assignment_map(replicas: Sequence[int], directories: Sequence[Uuid]) -> dict[int, Uuid]:
    """Mirrors ``DirectoryId.createAssignmentMap``: replica → directory, rejecting length and duplicate errors."""
    if len(replicas) != len(directories):
        raise InputError("The lengths for replicas and directories do not match.")
    result: dict[int, Uuid] = {}
    for replica, directory in zip(replicas, directories, strict=True):
        if replica in result:
            raise InputError("Duplicate broker ID in assignment")
        result[replica] = directory
    return result


def migrating_array(n: int) -> tuple[Uuid, ...]:
    """``DirectoryId.migratingArray``: n copies of MIGRATING."""
    return (MIGRATING,) * n


def unassigned_array(n: int) -> tuple[Uuid, ...]:
    """``DirectoryId.unassignedArray``: n copies of UNASSIGNED."""
    return (UNASSIGNED,) * n


class DirectoryState(Enum):
    """What a replica's recorded directory says about its placement (the replica view's ``directoryState``)."""

    ASSIGNED = "ASSIGNED"
    UNASSIGNED = "UNASSIGNED"
    LOST = "LOST"
    MIGRATING = "MIGRATING"
    #: A reserved id other than the three placeholders (3..99): never written by Kafka, offline when seen.
    RESERVED = "RESERVED"

    @classmethod
    def of(cls, directory: Uuid) -> DirectoryState:
        """Classify a recorded directory id."""
        # Nearly every id is a real directory: one look at the halves settles it (the placeholders are reserved).
        # (Module constants: an enum member read through its class costs more than the whole test.)
        if directory.msb != 0 or directory.lsb >= RESERVED_LSB_LIMIT:
            return _ASSIGNED
        return _RESERVED_STATES.get(directory.lsb, _RESERVED)


_ASSIGNED = DirectoryState.ASSIGNED
_RESERVED = DirectoryState.RESERVED
#: The state of each placeholder, by its least significant half (MIGRATING, UNASSIGNED, LOST: most significant 0).
_RESERVED_STATES = {MIGRATING.lsb: DirectoryState.MIGRATING, UNASSIGNED.lsb: DirectoryState.UNASSIGNED,
                    LOST.lsb: DirectoryState.LOST}
