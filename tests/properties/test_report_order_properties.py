"""The report's partition order (``jbod_model.report.in_partition_order``): by topic name, partition id, then the
topic id's text — also when two topics of one name (one deleted, then created again) are in one list."""

from __future__ import annotations

import operator

from hypothesis import given
from hypothesis import strategies as st

from jbod_model.report import PartitionRef, in_partition_order
from jbod_model.uuid import Uuid

# Few names, ids and partitions, so that one name with two topic ids and equal (name, partition) pairs are common.
_refs = st.lists(st.builds(PartitionRef, topic_id=st.sampled_from([Uuid(0, 7), Uuid(-5, 3), Uuid(9, 1 << 62)]),
                           topic_name=st.sampled_from(["a", "b", "orders"]), partition_id=st.integers(0, 3)),
                 max_size=30)


@given(_refs)
def test_partitions_come_in_the_reports_order(refs: list[PartitionRef]) -> None:
    expected = sorted(refs, key=lambda r: (r.topic_name, r.partition_id, str(r.topic_id)))
    got = in_partition_order(refs, operator.attrgetter("topic_name", "partition_id"), lambda r: r)
    assert [(r.topic_name, r.partition_id, r.topic_id) for r in got] == \
        [(r.topic_name, r.partition_id, r.topic_id) for r in expected]
