"""The cluster-halt rule of a bucketed replay (jbod_model.buckets.cluster_halt, past_halt): a fault in any bucket
stops the whole cluster at its offset, as the single replay stops at the first entry it refuses; and which bucket
writes a record's bronze row (writes_routed_bronze_row)."""

from __future__ import annotations

import pytest

from jbod_model.buckets import cluster_halt, owned_routed_step, past_halt, writes_routed_bronze_row
from jbod_model.changes import Step
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import (
    FenceBrokerRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
)
from jbod_model.uuid import Uuid


def test_no_fault_keeps_the_earlier_halt() -> None:
    assert cluster_halt(None, []) == (None, None)
    assert cluster_halt(7, []) == (7, None)


def test_the_earliest_fault_halts_the_cluster_and_is_the_one_reported() -> None:
    # Bucket 1 refused offset 10; bucket 0 went on and refused 11, a consequence the single replay never reached.
    assert cluster_halt(None, [(11, 0), (10, 1)]) == (10, 1)


def test_a_shared_record_refused_by_every_bucket_is_reported_once_by_the_lowest_bucket() -> None:
    assert cluster_halt(None, [(10, 2), (10, 0), (10, 1)]) == (10, 1)


def test_a_cluster_halted_in_an_earlier_batch_reports_no_later_fault() -> None:
    assert cluster_halt(10, [(12, 0)]) == (10, None)
    assert cluster_halt(10, [(10, 0)]) == (10, None)


def test_a_fault_before_the_earlier_halt_moves_the_halt_back() -> None:
    assert cluster_halt(12, [(9, 3)]) == (9, 0)


def test_rows_at_or_after_the_halt_are_past_it() -> None:
    assert not past_halt(9, 10)
    assert past_halt(10, 10) and past_halt(11, 10)
    assert not past_halt(11, None)
    # A controller response has no offset: it is never cut.
    assert not past_halt(None, 10)


@pytest.mark.parametrize("buckets", [1, 2, 4])
@pytest.mark.parametrize("record", [
    NoOpRecord(),
    PartitionChangeRecord(version=1, topic_id=Uuid(1, 2), partition_id=3, isr=(1,)),
    PartitionRecord(version=1, topic_id=Uuid(1, 2), partition_id=3, replicas=(1,), isr=(1,), leader=1),
    FenceBrokerRecord(id=1, epoch=2),
])
def test_a_records_bronze_row_is_written_where_owned_routed_step_keeps_it(record: Record, buckets: int) -> None:
    """``writes_routed_bronze_row`` is what ``owned_routed_step`` keeps of a one-record step, in every bucket."""
    step = Step(offset=5, timestamp=None, entries=(LogEntry(offset=5, record=record),))
    for bucket in range(buckets):
        kept = owned_routed_step(step, bucket, buckets).entries != ()
        assert writes_routed_bronze_row(record, bucket, buckets) == kept, (bucket, buckets)
