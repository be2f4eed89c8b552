"""jbod_model.slots: the collector pause gives the caller back the collector as it was, whatever happens."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from jbod_model.records.entry import LogEntry
from jbod_model.replay import Replayer, replay_entries
from jbod_model.simulator.churn import ChurnSpec, churn_log
from jbod_model.slots import gc_paused, gc_paused_iteration
from jbod_model.uuid import Uuid


def test_items_are_produced_with_the_collector_off_and_consumed_with_it_on() -> None:
    seen: list[tuple[bool, bool]] = []

    def produce() -> Iterator[int]:
        for i in range(3):
            seen.append((gc.isenabled(), True))
            yield i

    assert gc.isenabled()
    for _ in gc_paused_iteration(produce()):
        seen.append((gc.isenabled(), False))
    assert seen == [(False, True), (True, False)] * 3
    assert gc.isenabled()


def test_the_collector_comes_back_after_a_fault_and_stays_off_if_it_was() -> None:
    def fail() -> Iterator[int]:
        yield 1
        raise ValueError("bad record")

    with pytest.raises(ValueError, match="bad record"):
        list(gc_paused_iteration(fail()))
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert list(gc_paused_iteration(iter([1, 2]))) == [1, 2]
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_pause_that_leaves_many_objects_puts_them_in_the_oldest_generation_and_cycles_are_still_collected(
) -> None:
    import weakref

    from jbod_model.slots import PROMOTE_AFTER

    class Node:
        pass

    gc.collect()
    with gc_paused():
        kept = [[i] for i in range(PROMOTE_AFTER + 10_000)]
        a, b = Node(), Node()
        a.other, b.other = b, a  # type: ignore[attr-defined]
        cycle = weakref.ref(a)
        del a, b
        assert gc.get_count()[0] > PROMOTE_AFTER
    # No young collection left to walk them, nothing frozen, the collector on.
    assert gc.get_count()[0] < 1_000 and gc.get_freeze_count() == 0 and gc.isenabled()
    assert all(gc.is_tracked(x) for x in kept[:3])
    assert cycle() is not None
    gc.collect()  # a full collection still finds the cycle made during the pause
    assert cycle() is None


def test_writable_twins_only_for_plain_slots_classes_and_what_they_build_stays_frozen() -> None:
    from dataclasses import FrozenInstanceError

    from jbod_model.records.entry import LogEntry, new_log_entry
    from jbod_model.records.metadata import NoOpRecord, PartitionChangeRecord
    from jbod_model.slots import slot_constructor, writable_twin

    assert writable_twin(LogEntry) is not None
    entry = new_log_entry(5, NoOpRecord(), 5, 1, 2, "s")
    assert type(entry) is LogEntry and entry == LogEntry(5, NoOpRecord(), 5, 1, 2, "s")
    assert hash(entry) == hash(LogEntry(5, NoOpRecord(), 5, 1, 2, "s"))
    with pytest.raises(FrozenInstanceError):
        entry.offset = 6  # type: ignore[misc]

    # A class whose bases hold slots and a frozen __setattr__ (every message) gets a subclass as its twin; what it
    # builds is a plain frozen record again, and the twin never escapes.
    twin = writable_twin(PartitionChangeRecord)
    assert twin is not None and issubclass(twin, PartitionChangeRecord)
    made = slot_constructor(PartitionChangeRecord)(1, 7, Uuid(1, 2), (3, 5), 3, None, None, None, -1, None, None, None)
    expected = PartitionChangeRecord(version=1, partition_id=7, topic_id=Uuid(1, 2), isr=(3, 5), leader=3)
    assert type(made) is PartitionChangeRecord and made == expected and hash(made) == hash(expected)
    with pytest.raises(FrozenInstanceError):
        made.leader = 4  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        del made.leader  # type: ignore[misc]
    assert writable_twin(dict) is None  # no slots


def test_a_twin_takes_plain_stores_only_with_both_of_objects_attribute_hooks() -> None:
    """CPython keeps one C slot for ``__setattr__`` and ``__delattr__``: a twin that took ``object``'s
    ``__setattr__`` alone would inherit the frozen ``__delattr__`` and have every store dispatched through Python,
    which is slower than the descriptors the twin replaces. What the subclass twin must hold, checked where it is
    made, since nothing else would notice (the records built are the same either way)."""
    from jbod_model.records.metadata import PartitionChangeRecord
    from jbod_model.slots import writable_twin

    twin = writable_twin(PartitionChangeRecord)
    assert twin is not None
    assert twin.__dict__["__setattr__"] is object.__setattr__ and twin.__dict__["__delattr__"] is object.__delattr__
    assert twin.__dict__["__slots__"] == ()  # the same layout as the record, or __class__ assignment fails


def test_a_replay_of_many_entries_reads_and_replays_them_with_the_collector_off() -> None:
    """``Replayer.replay_all`` (``replay_entries``: a snapshot's records into an image, a log into a report's base)
    pulls and replays its entries with the collector paused — full passes walked the registrations it had built —
    and leaves it on; the image is the one a replay entry by entry gives."""
    entries = churn_log(ChurnSpec(seed=3, operations=10))
    seen: list[bool] = []

    def watched() -> Iterator[LogEntry]:
        for entry in entries:
            seen.append(gc.isenabled())
            yield entry

    assert gc.isenabled()
    image = replay_entries(watched())
    assert gc.isenabled() and len(seen) == len(entries) and not any(seen)
    one_by_one = Replayer()
    for entry in entries:
        one_by_one.replay(entry)
    assert image.same_state(one_by_one.image)


def test_slot_values_reads_the_named_fields_in_order_and_refuses_a_name_that_is_not_a_slot() -> None:
    from jbod_model.records.entry import LogEntry
    from jbod_model.records.metadata import NoOpRecord
    from jbod_model.slots import slot_values

    entry = LogEntry(5, NoOpRecord(), 4, 1, 2, "s")
    assert slot_values(LogEntry, ("source", "offset", "record"))(entry) == ("s", 5, NoOpRecord())
    assert slot_values(LogEntry, ())(entry) == ()
    with pytest.raises(TypeError, match="is not a slot"):
        slot_values(LogEntry, ("offset", "nope"))
