""":func:`jbod_model.invariants.check_step` records each batch once and lets every step check read that recording;
each step check called on its own records the batch itself, lazily, as it walks. Both must find the same
violations, in the same order, on any batch — valid ones from hypothesis' ``valid_streams``, and the same records
with some dropped and regrouped, which breaks invariants (and replay) in every way a walk must survive: changes to
partitions that are not there, epochs that skip, directories that are offline, topics removed mid-batch."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from test_replay_properties import SETTINGS, Stream, valid_streams

from jbod_model.errors import ReplayFault
from jbod_model.image import EMPTY_IMAGE, MetadataImage
from jbod_model.invariants import INVARIANTS, Violation, check_step
from jbod_model.records.entry import LogEntry
from jbod_model.replay import replay_entries


def one_by_one(before: MetadataImage, entries: list[LogEntry], after: MetadataImage) -> list[Violation]:
    """Every step check called directly, in check_step's order (each records the batch itself)."""
    return [v for inv in INVARIANTS.values() if inv.step_check is not None
            for v in inv.step_check(before, entries, after)]


@SETTINGS
@given(stream=valid_streams(), data=st.data())
def test_a_shared_recording_finds_what_each_check_finds_alone(stream: Stream, data: st.DataObject) -> None:
    records = stream.records
    kept = data.draw(st.lists(st.booleans(), min_size=len(records), max_size=len(records)), label="kept")
    sizes = data.draw(st.lists(st.integers(1, 12), min_size=len(records), max_size=len(records)), label="sizes")
    chosen = [r for r, keep in zip(records, kept, strict=True) if keep or data.draw(st.booleans())]
    image, offset, i = EMPTY_IMAGE, 0, 0
    while i < len(chosen):
        batch = [LogEntry(offset=offset + k, record=r, batch_base_offset=offset)
                 for k, r in enumerate(chosen[i:i + sizes[i]])]
        try:
            after = replay_entries(batch, image)
        except ReplayFault:
            after = image  # a refused batch: the checks explain it against the image before
        assert check_step(image, batch, after) == one_by_one(image, batch, after), f"batch at offset {offset}"
        image, offset, i = after, offset + len(batch), i + len(batch)
