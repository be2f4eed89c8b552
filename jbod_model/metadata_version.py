"""``metadata.version`` feature levels and the gates that depend on them.

Mirrors ``org.apache.kafka.server.common.MetadataVersion`` on the 3.9 branch (the reference), with the 4.x levels
seen in real logs. ELR gating follows the 3.9 branch (``IBP_4_0_IV0``); see docs/divergences.md for the trunk
difference (4.0-IV1).
"""

from __future__ import annotations

from dataclasses import dataclass

from jbod_model.errors import InputError

FEATURE_NAME = "metadata.version"

_NAMES: dict[int, str] = {
    1: "3.0-IV1", 2: "3.1-IV0", 3: "3.2-IV0", 4: "3.3-IV0", 5: "3.3-IV1", 6: "3.3-IV2", 7: "3.3-IV3",
    8: "3.4-IV0", 9: "3.5-IV0", 10: "3.5-IV1", 11: "3.5-IV2", 12: "3.6-IV0", 13: "3.6-IV1", 14: "3.6-IV2",
    15: "3.7-IV0", 16: "3.7-IV1", 17: "3.7-IV2", 18: "3.7-IV3", 19: "3.7-IV4", 20: "3.8-IV0", 21: "3.9-IV0",
    22: "4.0-IV0", 23: "4.0-IV1", 24: "4.0-IV2", 25: "4.0-IV3", 26: "4.1-IV0", 27: "4.1-IV1", 28: "4.2-IV0",
    29: "4.2-IV1", 30: "4.3-IV0", 31: "4.4-IV0", 32: "4.4-IV1", 33: "4.4-IV2", 34: "4.5-IV0",
}

IBP_3_3_IV2 = 6
IBP_3_3_IV3 = 7
IBP_3_4_IV0 = 8
IBP_3_6_IV0 = 12
IBP_3_7_IV0 = 15
IBP_3_7_IV2 = 17
IBP_4_0_IV0 = 22


@dataclass(frozen=True, slots=True, order=True)
class MetadataVersion:
    """A finalized ``metadata.version`` feature level. Level 0 means "no FeatureLevelRecord seen yet"."""

    feature_level: int

    @classmethod
    def of(cls, feature_level: int) -> MetadataVersion:
        """The (shared) value for a feature level."""
        mv = _BY_LEVEL.get(feature_level)
        if mv is None:
            mv = _BY_LEVEL.setdefault(feature_level, cls(feature_level))
        return mv

    @classmethod
    def from_name(cls, name: str) -> MetadataVersion:
        """Parse a release name such as ``3.7-IV2`` (or a bare level, ``17``)."""
        if name.isdigit():
            return cls(int(name))
        for level, n in _NAMES.items():
            if n == name or f"IBP_{n.replace('.', '_').replace('-', '_')}" == name:
                return cls(level)
        raise InputError(f"Unknown metadata.version {name!r}")

    @property
    def name(self) -> str:
        """Kafka's release name for the level, e.g. ``3.7-IV2``; ``unknown(N)`` for levels this model does not know."""
        return _NAMES.get(self.feature_level, f"unknown({self.feature_level})")

    def __str__(self) -> str:
        return self.name

    def is_at_least(self, level: int) -> bool:
        return self.feature_level >= level

    def is_directory_assignment_supported(self) -> bool:
        """``isDirectoryAssignmentSupported``: MV ≥ 3.7-IV2 gates every KIP-858 behaviour (R12)."""
        return self.feature_level >= IBP_3_7_IV2

    def is_elr_supported(self) -> bool:
        """``isElrSupported`` on the 3.9 branch (4.0-IV0)."""
        return self.feature_level >= IBP_4_0_IV0

    def is_broker_registration_change_record_supported(self) -> bool:
        return self.feature_level >= IBP_3_3_IV2

    def is_in_controlled_shutdown_state_supported(self) -> bool:
        return self.feature_level >= IBP_3_3_IV3

    def is_migration_supported(self) -> bool:
        return self.feature_level >= IBP_3_4_IV0

    def is_leader_epoch_bump_required_on_isr_shrink(self) -> bool:
        """Before 3.6-IV0 an ISR shrink also bumped the leader epoch (R9.4)."""
        return self.feature_level < IBP_3_6_IV0

    def register_broker_record_version(self) -> int:
        """``registerBrokerRecordVersion`` (§1.3)."""
        if self.is_directory_assignment_supported():
            return 3
        if self.is_migration_supported():
            return 2
        if self.is_in_controlled_shutdown_state_supported():
            return 1
        return 0

    def partition_record_version(self) -> int:
        """``partitionRecordVersion`` / ``partitionChangeRecordVersion`` (§1.3)."""
        if self.is_elr_supported():
            return 2
        if self.is_directory_assignment_supported():
            return 1
        return 0

    def partition_change_record_version(self) -> int:
        return self.partition_record_version()


_BY_LEVEL: dict[int, MetadataVersion] = {}

#: The level an image has before any FeatureLevelRecord for metadata.version is replayed.
UNSET = MetadataVersion(0)
#: The latest level on the 3.9 branch (LATEST_PRODUCTION = 3.9-IV0), the controller's default.
LATEST_PRODUCTION = MetadataVersion(21)
