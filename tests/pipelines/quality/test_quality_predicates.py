"""The small additions to ``jbod_model.invariants`` that the data-quality layer reuses on table rows: per-row
predicates (I1 on raw arrays, I9's carried-over clock, I12's pending clock, I21, I22, I24), the registry of the
external invariants I22–I25, the replay-fault classification, and the tracker without its history. Plus the promise
that ``jbod check``'s modules do not load great-expectations until a check runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from jbod_model.directory_id import LOST, MIGRATING, UNASSIGNED
from jbod_model.image import BrokerRegistration
from jbod_model.invariants import (
    EXTERNAL_INVARIANTS,
    INVARIANTS,
    InvariantTracker,
    Kind,
    Scope,
    Severity,
    directories_length_ok,
    disk_directory_id_ok,
    fault_invariant,
    invariant,
    jbod_supported,
    online_directory_on_disk,
    registration_carried_over,
    replica_directory_registered,
    replica_pending_placement,
)
from jbod_model.metadata_version import UNSET, MetadataVersion
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import (
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    FeatureLevelRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from jbod_model.uuid import Uuid

MV_3_6, MV_3_7, MV_3_9 = MetadataVersion(14), MetadataVersion(17), MetadataVersion(21)
D1, D2, D3 = Uuid(11, 1), Uuid(11, 2), Uuid(11, 3)


def broker(fenced: bool = False, *dirs: Uuid) -> BrokerRegistration:
    return BrokerRegistration(id=1, epoch=1, incarnation_id=Uuid(1, 1), fenced=fenced, directories=dirs)


def test_directories_length_on_raw_arrays() -> None:
    assert directories_length_ok([1, 2], ["a", "b"])
    assert not directories_length_ok([1, 2], ["a"])
    assert not directories_length_ok([1], [])  # an empty array on a replica is a mismatch in a table row


def test_pending_placement_clock() -> None:
    assert replica_pending_placement(broker(False, D1, D2), UNASSIGNED, MV_3_9)
    assert replica_pending_placement(broker(False, D1, D2), MIGRATING, MV_3_7)
    assert not replica_pending_placement(broker(False, D1, D2), D1, MV_3_9)  # resolved
    assert not replica_pending_placement(broker(True, D1, D2), UNASSIGNED, MV_3_9)  # fenced: cannot send
    assert not replica_pending_placement(None, UNASSIGNED, MV_3_9)  # unregistered
    assert not replica_pending_placement(broker(False), MIGRATING, MV_3_6)  # no directories below the gate
    assert not replica_pending_placement(broker(False, D1, D2), LOST, MV_3_9)  # LOST is offline, not pending


def test_carried_over_registration_clock() -> None:
    assert registration_carried_over(broker(False), MV_3_9)
    assert not registration_carried_over(broker(False, D1), MV_3_9)
    assert not registration_carried_over(broker(False), MV_3_6)  # an empty list is normal below 3.7-IV2


def test_i21_directory_registered() -> None:
    assert replica_directory_registered(D1, {D1, D2})
    assert not replica_directory_registered(D3, {D1, D2})
    assert replica_directory_registered(UNASSIGNED, set()) and replica_directory_registered(LOST, set())


def test_i22_jbod_needs_the_gate() -> None:
    assert not jbod_supported(2, MV_3_6)
    assert jbod_supported(1, MV_3_6) and jbod_supported(2, MV_3_7) and jbod_supported(3, UNSET)


def test_i24_disks() -> None:
    assert online_directory_on_disk(D1, {D1, D2}) and not online_directory_on_disk(D3, {D1, D2})
    assert disk_directory_id_ok(D1) and not disk_directory_id_ok(Uuid(0, 42)) and not disk_directory_id_ok(Uuid(0, 0))


def test_external_invariants_registry() -> None:
    assert list(EXTERNAL_INVARIANTS) == ["I22", "I23", "I24", "I25"]
    for name, inv in EXTERNAL_INVARIANTS.items():
        assert inv.name == name and inv.scope == Scope.EXTERNAL and inv.kind == Kind.EXTERNAL
        assert inv.rationale and inv.source and inv.image_check is None and inv.step_check is None
    assert {n for n, i in EXTERNAL_INVARIANTS.items() if i.severity == Severity.WARNING} == {"I23", "I25"}
    assert invariant("I4") is INVARIANTS["I4"] and invariant("I24") is EXTERNAL_INVARIANTS["I24"]
    with pytest.raises(KeyError):
        invariant("I26")


def test_fault_invariant_reads_the_reason() -> None:
    assert fault_invariant("Unable to replay … : directory X is already assigned to broker 1") == "I6"
    assert fault_invariant("no broker registration with epoch 9 found for broker 1 (current epoch 1)") == "I7"
    assert fault_invariant("Can't find topic with ID x") is None


def _entries() -> list[LogEntry]:
    ep = (BrokerEndpoint(name="P", host="h", port=1, security_protocol=0),)
    records = [FeatureLevelRecord(name="metadata.version", feature_level=21),
               RegisterBrokerRecord(version=3, broker_id=1, broker_epoch=1, incarnation_id=Uuid(1, 1),
                                    end_points=ep, log_dirs=(D1, D2)),
               BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=1, fenced=-1),
               TopicRecord(name="t", topic_id=Uuid(7, 7)),
               PartitionRecord(version=1, partition_id=0, topic_id=Uuid(7, 7), replicas=(1,), isr=(1,), leader=1,
                               directories=(UNASSIGNED,))]
    return [LogEntry(offset=i, record=r, batch_base_offset=i) for i, r in enumerate(records)]


def test_the_tracker_without_history_keeps_its_step_checks() -> None:
    """``history_checks=False``: no pending-placement bookkeeping (nor I12), the step checks still run."""
    with_history = InvariantTracker(max_pending_offsets=0)
    without = InvariantTracker(max_pending_offsets=0, history_checks=False)
    found: dict[str, list[str]] = {"with": [], "without": []}
    for e in _entries():
        found["with"] += [v.invariant for v in with_history.feed_batch([e])]
        found["without"] += [v.invariant for v in without.feed_batch([e])]
    assert with_history.pending_placements() and not without.pending_placements()
    assert "I12" not in found["without"]
    assert without.image.topics.get_partition(Uuid(7, 7), 0) is not None


def test_check_modules_import_great_expectations_lazily() -> None:
    code = ("import sys, pipelines.quality, pipelines.cli.check, pipelines.config.profiles\n"
            "print('great_expectations' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[3])
    assert out.stdout.strip() == "False"
