"""``directory_state_allowed``: where it says any record may carry directory state, I3
(``record_free_of_directory_state``) holds for every record — the quality suite's ``records`` frame relies on it to
leave those records undecoded. And below the gate it is not vacuous: some record breaks I3 there."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from record_strategies import RECORD_VERSIONS, message_strategy

from jbod_model.invariants import directory_state_allowed, record_free_of_directory_state
from jbod_model.metadata_version import UNSET, MetadataVersion
from jbod_model.records.metadata import MetadataRecord, PartitionChangeRecord

#: Every feature level the model names, and the unknown one (before any FeatureLevelRecord).
_LEVELS = st.one_of(st.just(UNSET), st.integers(1, 40).map(MetadataVersion))


@pytest.mark.parametrize(("cls", "version"), RECORD_VERSIONS,
                         ids=[f"{c.TYPE_NAME}-v{v}" for c, v in RECORD_VERSIONS])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), mv=_LEVELS)
def test_where_directory_state_is_allowed_every_record_is_free_of_it(cls: type[MetadataRecord], version: int,
                                                                    data: st.DataObject,
                                                                    mv: MetadataVersion) -> None:
    record = data.draw(message_strategy(cls, version))
    if directory_state_allowed(mv):
        assert record_free_of_directory_state(record, mv)


def test_below_the_gate_a_record_can_break_i3() -> None:
    below = MetadataVersion(14)  # 3.6-IV2
    assert not directory_state_allowed(below)
    assert not record_free_of_directory_state(PartitionChangeRecord(version=1), below)
    assert directory_state_allowed(UNSET)
    assert directory_state_allowed(MetadataVersion(17))  # 3.7-IV2
