"""The cluster-halt rule of a bucketed replay (jbod_model.buckets.cluster_halt, past_halt): a fault in any bucket
stops the whole cluster at its offset, as the single replay stops at the first entry it refuses."""

from __future__ import annotations

from jbod_model.buckets import cluster_halt, past_halt


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
