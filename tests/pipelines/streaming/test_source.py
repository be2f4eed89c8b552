"""The streaming source without Spark: discovery and cluster ids, offsets and caps, growing inputs, snapshots."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jbod_model.errors import DecodeError, InputError
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import NoOpRecord
from jbod_model.replay import replay_entries
from jbod_model.simulator.churn import ChurnSpec, churn_log
from jbod_model.simulator.output import append_to_segment, corrupt_batch, write_jsonl_file, write_metadata_dir
from jbod_model.storage.files import METADATA_PARTITION_DIR
from jbod_model.storage.log_reader import iter_batches
from jbod_model.stream import entry_to_line
from pipelines.streaming import source
from pipelines.streaming.codec import (
    DATA,
    KIND,
    OFFSET,
    PACKED_FIELDS,
    PAYLOAD,
    SEQ,
    SOURCE,
    TYPE,
    VERSION,
    entry_to_row,
    packed_row,
    row_to_entry,
    unpack_rows,
)
from pipelines.streaming.source import (
    KraftMetadataSource,
    SourceConfig,
    SourcePlanner,
    available_offsets,
    checkpointed_offsets,
    discover,
    input_schema,
    read_range,
    share_budget,
    source_options,
    split_range,
)

ENTRIES = churn_log(ChurnSpec(seed=5, operations=20))


def _planner(paths: list[Path], **kw: object) -> SourcePlanner:
    return SourcePlanner(SourceConfig.from_options(source_options(paths, **kw)))  # type: ignore[arg-type]


def _read_all(planner: SourcePlanner, start: dict[str, dict[str, int]] | None = None,
              ) -> list[tuple[str, int | None]]:
    """Drive the planner like Spark: latest → plan → read, until nothing is new."""
    out = []
    start = {} if start is None else start
    for _ in range(1000):
        end = planner.latest()
        plan = planner.plan(start, end)
        if not plan:
            return out
        for ci, s, e in plan:
            out += [(r.kind, r.offset) for r in read_range(ci, s, e)]
        start.clear()
        start.update(end)
    raise AssertionError("the source never caught up")


def test_cluster_ids_come_from_meta_properties_then_options_then_names(tmp_path: Path) -> None:
    write_metadata_dir(tmp_path / "a" / "n1", ENTRIES, cluster_id="alpha")
    write_metadata_dir(tmp_path / "a" / "n2", ENTRIES, cluster_id="alpha", node_id=2)
    write_jsonl_file(tmp_path / "b" / "beta.jsonl", ENTRIES)
    (tmp_path / "b" / "NOTES.txt").write_text("not an input\n")
    found = discover([tmp_path])
    assert [(c.cluster_id, c.kind, len(c.paths)) for c in found] == [("alpha", "log", 2), ("beta", "jsonl", 1)]
    renamed = discover([tmp_path / "b"], cluster_ids={str(tmp_path / "b" / "beta.jsonl"): "gamma"})
    assert [c.cluster_id for c in renamed] == ["gamma"]
    with pytest.raises(InputError, match="neither"):
        discover([tmp_path / "b" / "NOTES.txt"])


def test_options_are_read_case_insensitively() -> None:
    config = SourceConfig.from_options({k.lower(): v for k, v in
                                        source_options(["/x"], max_entries_per_batch=3, cluster_id="c").items()})
    assert config.max_entries == 3 and config.cluster_id == "c"


def test_capped_micro_batches_read_every_record_once(tmp_path: Path) -> None:
    node = write_metadata_dir(tmp_path / "n", ENTRIES, cluster_id="c", records_per_segment=9)
    rows = _read_all(_planner([node], max_entries_per_batch=4))
    assert rows == [("record", e.offset) for e in ENTRIES]


def test_a_micro_batch_cap_is_shared_among_the_clusters(tmp_path: Path) -> None:
    """The cap bounds a micro-batch, not each cluster's part of it: a fleet of logs read in one run must not make a
    batch (and the memory of the operator's input and output) as many times larger as it has clusters. The smallest
    backlog goes first, a cluster takes at least the cap's floor (here all that is left), and the others wait; a JSONL
    cluster, whose backlog is not known, takes an equal share in every batch."""
    for i, n in enumerate((40, 40, 6)):
        write_metadata_dir(tmp_path / "in" / f"n{i}", ENTRIES[:n], cluster_id=f"c{i}")
    write_jsonl_file(tmp_path / "in" / "j.jsonl", ENTRIES[:40])
    planner = _planner([tmp_path / "in"], max_entries_per_batch=24)
    start: dict[str, dict[str, int]] = {}
    sizes: list[dict[str, int]] = []
    read: dict[str, list[int | None]] = {}
    while plan := planner.plan(start, end := planner.latest()):
        batch = {ci.cluster_id: [r.offset for r in read_range(ci, s, e)] for ci, s, e in plan}
        sizes.append({cid: len(offsets) for cid, offsets in batch.items()})
        for cid, offsets in batch.items():
            read.setdefault(cid, []).extend(offsets)
        start = end
    assert sizes[:2] == [{"j": 6, "c2": 6, "c0": 12}, {"j": 8, "c0": 16}]  # j: 24 // 4, then 24 // 3
    assert all(sum(batch.values()) <= 24 for batch in sizes)
    assert read == {"c0": list(range(40)), "c1": list(range(40)), "c2": list(range(6)), "j": list(range(40))}


def test_shares_of_a_cap_fill_it_without_giving_a_cluster_more_than_it_has() -> None:
    assert share_budget({"a": 100}, 10) == {"a": 10}
    assert share_budget({"a": 1, "b": 100, "c": None}, 10, floor=1) == {"a": 1, "b": 6, "c": 3}
    # Backlogs not known (JSONL, dump text) each take an equal share, every batch: none can starve another.
    assert share_budget({"a": None, "b": None}, 20) == {"a": 10, "b": 10}
    assert share_budget({"a": 0, "b": 3}, 10) == {"a": 0, "b": 3}
    # Each takes at least the floor: once the cap is spent, the others wait for a later batch.
    assert share_budget({"a": 50, "b": 50, "c": 50}, 100, floor=40) == {"a": 40, "b": 40, "c": 20}
    assert share_budget({"a": 5, "b": 5, "c": 5}, 2, floor=1) == {"a": 1, "b": 1, "c": 0}


@given(st.dictionaries(st.text("abcdef", min_size=1, max_size=3), st.none() | st.integers(0, 50), max_size=8),
       st.integers(1, 120), st.integers(1, 60))
def test_shares_of_a_cap_never_exceed_it_nor_what_a_cluster_has(pending: dict[str, int | None], cap: int,
                                                                  floor: int) -> None:
    shares = share_budget(pending, cap, floor)
    assert shares.keys() == pending.keys()
    unknown = [cid for cid, has in pending.items() if has is None]
    assert sum(shares.values()) <= max(cap, len(unknown) + 1)
    for cid, has in pending.items():
        assert shares[cid] >= 0 and (has is None or shares[cid] <= has)
        assert has is not None or shares[cid] >= 1, "a backlog not known is never held back"
    if any(has for has in pending.values()):
        assert any(shares[c] for c, has in pending.items() if has), "someone with a known backlog moves on"
    least = min(cap - sum(shares[c] for c in unknown), floor)
    for cid, has in pending.items():
        if has is not None and shares[cid] < min(has, least):
            assert sum(shares.values()) >= cap, "held back below the floor only once the cap is spent"
        for other, more in pending.items():
            if has is not None and more is not None and has < more and shares[other] > 0:
                # Smallest backlog first: a larger one reads only once the smaller took all it has, or the floor.
                assert shares[cid] == has or shares[cid] >= least
    known = [has for has in pending.values() if has is not None]
    if len(known) == len(pending) and sum(known) <= cap:
        assert shares == pending  # room for everything: nobody is held back


def test_jsonl_lines_are_read_as_they_are_completed(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    lines = [entry_to_line(LogEntry(offset=i, record=NoOpRecord())) for i in range(5)]
    path.write_text("\n".join(lines[:3]) + "\n" + lines[3][:10])  # the fourth line is being written
    planner = _planner([path], max_entries_per_batch=2)
    position: dict[str, dict[str, int]] = {}
    assert [o for _, o in _read_all(planner, position)] == [0, 1, 2]
    path.write_text("\n".join(lines) + "\n")
    assert [o for _, o in _read_all(planner, position)] == [3, 4]
    assert position["c"]["seq"] == 5


def test_a_truncated_log_starts_from_a_snapshot(tmp_path: Path) -> None:
    probe = write_metadata_dir(tmp_path / "probe", ENTRIES, cluster_id="c", records_per_segment=20)
    cut = sorted(int(s.stem) for s in (probe / METADATA_PARTITION_DIR).glob("*.log"))[1]
    node = write_metadata_dir(tmp_path / "n", ENTRIES, cluster_id="c", records_per_segment=20, snapshot_at=cut)
    part = node / METADATA_PARTITION_DIR
    # Kafka deleted the segments before the snapshot: the log now starts at its end offset.
    for segment in sorted(part.glob("*.log")):
        if int(segment.stem) < cut:
            segment.unlink()
    rows = _read_all(_planner([node], max_entries_per_batch=5))
    snapshot = [o for k, o in rows if k == "snapshot"]
    assert snapshot and rows[: len(snapshot)] == [("snapshot", o) for o in snapshot]
    assert [o for k, o in rows if k == "record"] == [e.offset for e in ENTRIES if e.offset >= cut]


def test_rows_decode_into_the_entries_read(tmp_path: Path) -> None:
    node = write_metadata_dir(tmp_path / "n", ENTRIES, cluster_id="c")
    ci = discover([node])[0]
    rows = list(read_range(ci, {"next": -1, "snap": -1}, {"next": len(ENTRIES), "snap": -1}))
    decoded = [row_to_entry(packed_row(dataclasses.asdict(r))) for r in rows]
    assert [(e.offset, e.record, e.timestamp, e.leader_epoch) for e in decoded] == \
        [(e.offset, e.record, e.timestamp, e.leader_epoch) for e in ENTRIES]


def test_noops_are_routed_over_every_bucket_by_offset() -> None:
    """A quiet cluster's log is mostly NoOps: each goes to its offset's bucket, so one cluster's NoOps are replayed
    by all its buckets (and so all its cores), not by bucket 0 alone; a JSONL input's rows all go to bucket 0."""
    rows = [entry_to_row("c", "record", seq, LogEntry(offset=seq + 40, record=NoOpRecord()), buckets=4)
            for seq in range(8)]
    assert [r.bucket for r in rows] == [0, 1, 2, 3, 0, 1, 2, 3]
    jsonl = entry_to_row("c", "record", 0, LogEntry(offset=41, record=NoOpRecord()), input_kind="jsonl", buckets=4)
    assert jsonl.bucket == 0


def test_a_restarted_reader_finds_its_start_in_the_checkpoint(tmp_path: Path) -> None:
    offsets = tmp_path / "ckpt" / "offsets"
    offsets.mkdir(parents=True)
    (offsets / "0").write_text('v1\n{"batchWatermarkMs":0}\n' + json.dumps({"c": {"next": 5, "snap": -1}}) + "\n")
    (offsets / "1").write_text('v1\n{"batchWatermarkMs":0}\n' + json.dumps({"c": {"next": 9, "snap": -1}}) + "\n")
    assert checkpointed_offsets(str(tmp_path / "ckpt")) == {"c": {"next": 9, "snap": -1}}
    node = write_metadata_dir(tmp_path / "n", ENTRIES, cluster_id="c")
    planner = _planner([node], max_entries_per_batch=3, checkpoint=tmp_path / "ckpt")
    assert planner.latest() == {"c": {"next": 12, "snap": -1}}


def test_end_offsets_stop_the_stream_where_the_run_began(tmp_path: Path) -> None:
    """AvailableNow for a source without admission control: offsets past ``endOffsets`` are left for the next run,
    and a cluster that appears after the run began is not read."""
    node = write_metadata_dir(tmp_path / "in" / "n", ENTRIES[:30], cluster_id="c")
    options = source_options([tmp_path / "in"], max_entries_per_batch=8)
    end = available_offsets(options)
    assert end == {"c": {"next": 30, "snap": -1}}
    write_jsonl_file(tmp_path / "in" / "late.jsonl", ENTRIES[:5])
    planner = SourcePlanner(SourceConfig.from_options({**options, "endOffsets": json.dumps(end)}))
    # The log grows after the run began: the run still stops at offset 30.
    append_to_segment(next((node / METADATA_PARTITION_DIR).glob("*.log")), ENTRIES[30:])
    rows = _read_all(planner)
    assert [o for _, o in rows] == list(range(30))


def _retention(tmp_path: Path, first_run_until: int, snapshot_at: int | None, log_start: int,
               ) -> tuple[Path, dict[str, dict[str, int]]]:
    """A stream that read offsets ``< first_run_until``; then the cluster went on, Kafka wrote a snapshot at
    ``snapshot_at`` and deleted the segments before ``log_start`` (metadata.max.retention.ms): the log dir as it is
    when the job comes back, and the stream's position."""
    node = tmp_path / "n"
    write_metadata_dir(node, [e for e in ENTRIES if e.offset < first_run_until], cluster_id="c")
    position: dict[str, dict[str, int]] = {}
    assert [o for _, o in _read_all(_planner([node]), position)] == list(range(first_run_until))
    shutil.rmtree(node)
    write_metadata_dir(node, ENTRIES, cluster_id="c", records_per_segment=10, snapshot_at=snapshot_at)
    for segment in (node / METADATA_PARTITION_DIR).glob("*.log"):
        if int(segment.stem) < log_start:
            segment.unlink()
    return node, position


def _bases(tmp_path: Path) -> list[int]:
    """The segment base offsets of ENTRIES written 10 records a segment."""
    probe = write_metadata_dir(tmp_path / "probe", ENTRIES, cluster_id="c", records_per_segment=10)
    bases = sorted(int(s.stem) for s in (probe / METADATA_PARTITION_DIR).glob("*.log"))
    assert len(bases) >= 4
    return bases


def test_a_stream_behind_the_log_start_re_bootstraps_from_the_snapshot_that_covers_the_gap(tmp_path: Path) -> None:
    bases = _bases(tmp_path)
    node, position = _retention(tmp_path, bases[1], snapshot_at=bases[3], log_start=bases[3])
    assert sorted(int(s.stem) for s in (node / METADATA_PARTITION_DIR).glob("*.log"))[0] == bases[3]
    planner = _planner([node], max_entries_per_batch=4)
    planner.seen(position)  # a restarted query: its checkpoint says where it stands
    rows = []
    start = dict(position)
    while (end := planner.latest()) != start:
        for ci, s, e in planner.plan(start, end):
            rows += list(read_range(ci, s, e))
        start = end
    assert start == {"c": {"next": len(ENTRIES), "snap": bases[3]}}
    snapshot = [r for r in rows if r.kind == "snapshot"]
    assert snapshot and rows[: len(snapshot)] == snapshot
    # Every snapshot row says which offsets were never read: bases[1] .. the snapshot's end - 1.
    assert {(r.gap_from, r.snapshot_end) for r in snapshot} == {(bases[1], bases[3])}
    read = [row_to_entry(packed_row(dataclasses.asdict(r))) for r in snapshot]
    image = replay_entries([e for e in read if isinstance(e, LogEntry)])
    assert image.same_state(replay_entries([e for e in ENTRIES if e.offset < bases[3]]))
    assert [r.offset for r in rows if r.kind == "record"] == [e.offset for e in ENTRIES if e.offset >= bases[3]]


def test_a_stream_that_starts_from_a_snapshot_has_no_gap(tmp_path: Path) -> None:
    bases = _bases(tmp_path)
    node, _ = _retention(tmp_path, bases[1], snapshot_at=bases[3], log_start=bases[3])
    rows = [r for ci in discover([node])
            for r in read_range(ci, {"next": -1, "snap": -1}, {"next": len(ENTRIES), "snap": bases[3]})]
    assert rows[0].kind == "snapshot" and {r.gap_from for r in rows} == {None}


@pytest.mark.parametrize("snapshot_at", [None, "below the log start"])
def test_a_gap_no_snapshot_covers_fails_naming_the_deleted_offsets_or_is_skipped(tmp_path: Path,
                                                                                 snapshot_at: str | None) -> None:
    bases = _bases(tmp_path)
    # A snapshot the log does not continue from (it ends before the log's start) covers nothing.
    node, position = _retention(tmp_path, bases[1], snapshot_at=None if snapshot_at is None else bases[2],
                                log_start=bases[3])
    for policy, cap in (("fail", None), ("skip", 3)):
        planner = _planner([node], policy=policy, max_entries_per_batch=cap)
        planner.seen(position)
        start = dict(position)
        rows = []
        with contextlib.ExitStack() as stack:
            if policy == "fail":
                stack.enter_context(pytest.raises(DecodeError, match=rf"offsets {bases[1]}\.\.{bases[3] - 1} were "
                                                  rf"deleted .* log now starts at offset {bases[3]}"))
            while (end := planner.latest()) != start:
                for ci, s, e in planner.plan(start, end):
                    rows += list(read_range(ci, s, e, policy=policy))
                start = end
        if policy == "skip":
            # The offsets no snapshot covers are skipped — reported once, whole, by a gap row although the reads
            # are capped — and the rest is read once.
            assert [(r.kind, r.offset) for r in rows] == [("gap", bases[1])] + [
                ("record", e.offset) for e in ENTRIES if e.offset >= bases[3]]
            gap = rows[0]
            assert (gap.gap_from, gap.gap_last, gap.source) == (bases[1], bases[3] - 1, None)
            assert gap.message is not None and "deleted" in gap.message and "no snapshot covers" in gap.message
            assert start["c"]["snap"] == -1


def _corrupt_mid_segment(node: Path, which: int) -> tuple[Path, int, int]:
    """Corrupt a batch of several records inside segment ``which`` (neither its first nor its last batch)."""
    segment = sorted((node / METADATA_PARTITION_DIR).glob("*.log"))[which]
    batches = [b.header for b in iter_batches(segment)]
    target = next(h for h in batches[1:-1] if h.last_offset > h.base_offset)
    return corrupt_batch(node, target.base_offset)


@pytest.mark.parametrize("which", [1, 0], ids=["closed segment", "active segment"])
@pytest.mark.parametrize("cap", [None, 1, 4])
def test_an_unreadable_batch_is_one_gap_row_under_skip_and_an_error_naming_it_under_fail(
        tmp_path: Path, which: int, cap: int | None) -> None:
    """A batch whose CRC fails in the middle of a segment: under ``skip`` every other record is read once and one
    ``gap`` row names exactly its offsets and file, however the micro-batches cut it (a cap of 1 or 4 ends ranges
    inside it); under ``fail`` the read stops naming the file, the byte and the offsets. In the active segment too:
    the good batches after it show it is damaged, not being written."""
    # "active segment": the log is one segment, so the damaged batch is in the one the tail scan polls.
    node = write_metadata_dir(tmp_path / "n", ENTRIES, cluster_id="c", records_per_segment=20 if which else None)
    segment, first, last = _corrupt_mid_segment(node, which)
    planner = _planner([node], policy="skip", max_entries_per_batch=cap)
    start: dict[str, dict[str, int]] = {}
    rows = []
    while (end := planner.latest()) != start:
        for ci, s, e in planner.plan(start, end):
            rows += list(read_range(ci, s, e, policy="skip"))
        start = end
    assert start["c"]["next"] == len(ENTRIES)
    assert [(r.kind, r.offset) for r in rows] == [
        ("gap", first) if e.offset == first else ("record", e.offset) for e in ENTRIES
        if not first < e.offset <= last]
    [gap] = [r for r in rows if r.kind == "gap"]
    assert (gap.gap_from, gap.gap_last, gap.source) == (first, last, str(segment))
    assert gap.message is not None and f"offsets {first}..{last} could not be read" in gap.message
    assert "skipped" in gap.message and "may differ from Kafka's" in gap.message

    planner = _planner([node], policy="fail", max_entries_per_batch=cap)
    with pytest.raises(DecodeError, match=rf"offsets {first}\.\.{last} cannot be read from {segment} at byte \d+: "
                                          "Record batch is corrupt"):
        start = {}
        while (end := planner.latest()) != start:
            for ci, s, e in planner.plan(start, end):
                list(read_range(ci, s, e, policy="fail"))
            start = end


def _rows_whole_and_split(node: Path, policy: str, cap: int | None, parts: int,
                          final: bool = False) -> tuple[list[object], list[object]]:
    """Every range the planner gives, read whole and read as ``split_range``'s pieces one after the other."""
    planner = _planner([node], policy=policy, max_entries_per_batch=cap)
    start: dict[str, dict[str, int]] = {}
    whole: list[object] = []
    split: list[object] = []
    while (end := planner.latest()) != start:
        for ci, s, e in planner.plan(start, end):
            whole += list(read_range(ci, s, e, policy=policy, final=final))  # type: ignore[arg-type]
            pieces = split_range(ci, s, e, parts, min_entries=1)
            assert [p[0] for p in pieces[1:]] == [p[1] for p in pieces[:-1]] and pieces[0][0] == s
            assert pieces[-1][1] == e and len(pieces) <= parts
            for ps, pe in pieces:
                split += list(read_range(ci, ps, pe, policy=policy,  # type: ignore[arg-type]
                                         final=final and pe is e))
        start = end
    return whole, split


@pytest.mark.parametrize("parts", [2, 3, 7])
@pytest.mark.parametrize("cap", [None, 6])
def test_a_range_read_in_pieces_gives_the_rows_of_the_whole_range(tmp_path: Path, parts: int,
                                                                  cap: int | None) -> None:
    """``split_range`` (one cluster's range read by several tasks): the pieces' rows, in order, are the range's —
    on a clean log, around a corrupt batch under ``skip`` (reported once, however the cuts fall), from a snapshot
    after Kafka deleted the log's start, and with a torn tail a bounded run leaves unread."""
    clean = write_metadata_dir(tmp_path / "clean", ENTRIES, cluster_id="c", records_per_segment=20)
    whole, split = _rows_whole_and_split(clean, "fail", cap, parts)
    assert split == whole and len(whole) == len(ENTRIES)

    damaged = write_metadata_dir(tmp_path / "damaged", ENTRIES, cluster_id="c", records_per_segment=20)
    _segment, first, _last = _corrupt_mid_segment(damaged, 1)
    whole, split = _rows_whole_and_split(damaged, "skip", cap, parts)
    assert split == whole and [r.offset for r in whole if r.kind == "gap"] == [first]  # type: ignore[attr-defined]

    probe = write_metadata_dir(tmp_path / "probe", ENTRIES, cluster_id="c", records_per_segment=20)
    cut = sorted(int(s.stem) for s in (probe / METADATA_PARTITION_DIR).glob("*.log"))[1]
    truncated = write_metadata_dir(tmp_path / "truncated", ENTRIES, cluster_id="c", records_per_segment=20,
                                   snapshot_at=cut)
    for segment in sorted((truncated / METADATA_PARTITION_DIR).glob("*.log")):
        if int(segment.stem) < cut:
            segment.unlink()
    whole, split = _rows_whole_and_split(truncated, "fail", cap, parts)
    assert split == whole and whole[0].kind == "snapshot"  # type: ignore[attr-defined]

    torn = write_metadata_dir(tmp_path / "torn", ENTRIES, cluster_id="c", records_per_segment=20)
    last = sorted((torn / METADATA_PARTITION_DIR).glob("*.log"))[-1]
    last.write_bytes(last.read_bytes() + b"\x00" * 30)
    whole, split = _rows_whole_and_split(torn, "skip", cap, parts, final=True)
    assert split == whole and whole[-1].kind == "gap"  # type: ignore[attr-defined]


def test_a_range_is_split_only_where_it_is_worth_it(tmp_path: Path) -> None:
    node = write_metadata_dir(tmp_path / "n", ENTRIES, cluster_id="c", records_per_segment=20)
    [(ci, s, e)] = _planner([node]).plan({}, _planner([node]).latest())
    assert len(split_range(ci, s, e, 4, min_entries=len(ENTRIES))) == 1  # too few offsets for two pieces
    assert len(split_range(ci, s, e, 1, min_entries=1)) == 1
    pieces = split_range(ci, s, e, 4, min_entries=len(ENTRIES) // 2)
    assert len(pieces) == 2 and pieces[0][1]["next"] == len(ENTRIES) // 2
    jsonl = write_jsonl_file(tmp_path / "c.jsonl", ENTRIES)
    [(ci, s, e)] = _planner([jsonl]).plan({}, _planner([jsonl]).latest())
    assert split_range(ci, s, e, 4, min_entries=1) == [(s, e)]  # byte positions: read by one task


def test_a_packed_row_holds_an_entrys_own_fields_where_row_to_entry_reads_them() -> None:
    """``row_to_entry`` reads an entry's fields from a packed row in one slice: they must stay together, in order."""
    assert PACKED_FIELDS[OFFSET:SOURCE + 1] == ("offset", "batch_base_offset", "leader_epoch", "timestamp", "type",
                                                "version", "data", "payload", "source")
    assert [PACKED_FIELDS[i] for i in (KIND, SEQ, TYPE, VERSION, DATA, PAYLOAD)] == \
        ["kind", "seq", "type", "version", "data", "payload"]


def test_an_input_row_reads_back_as_the_entry_it_was_made_from() -> None:
    """``row_to_entry`` reads a record row through its type's generated reader (``typed_record_reader``): every
    entry of a churn log (every record type it writes, NoOps included) comes back whole — offset, record, batch,
    epoch, time, source — and data that reader refuses still gets the general reader's error."""
    entries = churn_log(ChurnSpec(seed=11, operations=120, noop_share=0.2))
    rows = [dataclasses.asdict(entry_to_row("c", "record", i, e, buckets=4)) for i, e in enumerate(entries)]
    assert [row_to_entry(packed_row(r)) for r in rows] == entries
    assert len({type(e.record) for e in entries}) >= 5
    change = next(r for r in rows if r["type"] == "PARTITION_CHANGE_RECORD")
    bad = {**change, "data": json.dumps({**json.loads(change["data"]), "partitionId": "seven"})}
    with pytest.raises(InputError, match="partitionId"):
        row_to_entry(packed_row(bad), "c")


def test_with_a_checkpoint_a_read_hands_each_buckets_rows_over_in_files(tmp_path: Path) -> None:
    """A streaming query's source (it has a checkpoint) writes each bucket's packet to a file under the checkpoint's
    ``staged/parts`` and its row names the file; the files hold exactly the rows the packets through Spark hold."""
    node = write_metadata_dir(tmp_path / "n", ENTRIES, cluster_id="c")

    def read(options: dict[str, str]) -> list[tuple[Any, ...]]:
        reader = KraftMetadataSource(options).streamReader(input_schema())
        start, end = reader.initialOffset(), reader.latestOffset()
        return [row for partition in reader.partitions(start, end) for row in reader.read(partition)]

    inline = read(source_options([node], buckets=3))
    assert all(row[3] is not None and row[4] is None for row in inline)
    checkpoint = tmp_path / "checkpoint"
    filed = read(source_options([node], buckets=3, checkpoint=checkpoint))
    assert all(row[3] is None and row[4] is not None for row in filed)
    # Outside a streaming batch (no batch id) the files go to a folder of their own.
    assert {Path(row[4]).parent for row in filed} == {checkpoint / "staged" / "parts" / "unbatched"}

    def by_bucket(rows: list[tuple[Any, ...]], packet: Callable[[tuple[Any, ...]], bytes]) -> dict[int, list[Any]]:
        out: dict[int, list[Any]] = {}
        for row in sorted(rows, key=lambda r: (r[1], r[2])):
            out.setdefault(row[1], []).extend(unpack_rows(packet(row)))
        return out

    assert by_bucket(filed, lambda r: Path(r[4]).read_bytes()) == by_bucket(inline, lambda r: r[3])
    assert sum(len(rows) for rows in by_bucket(filed, lambda r: Path(r[4]).read_bytes()).values()) >= len(ENTRIES)


def test_a_read_makes_each_packet_with_the_collector_paused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The executor's read decodes and packs with the cyclic collector paused (its full passes walked the worker's
    objects again and again while the decoder's window survived young ones), and hands each packet to pyspark with
    the collector on again, so pyspark's own code never runs with it off."""
    node = write_metadata_dir(tmp_path / "n", ENTRIES, cluster_id="c")
    monkeypatch.setattr(source, "PACKET_ROWS", 3)
    seen: list[tuple[str, bool]] = []
    real = source.read_range

    def watched(*args: Any, **kw: Any) -> Iterator[Any]:
        for row in real(*args, **kw):
            seen.append(("row", gc.isenabled()))
            yield row

    monkeypatch.setattr(source, "read_range", watched)
    reader = KraftMetadataSource(source_options([node])).streamReader(input_schema())
    start, end = reader.initialOffset(), reader.latestOffset()
    assert gc.isenabled()
    for partition in reader.partitions(start, end):
        for _ in reader.read(partition):
            seen.append(("packet", gc.isenabled()))
    assert gc.isenabled()
    assert seen.count(("row", False)) >= len(ENTRIES) and ("row", True) not in seen
    assert seen.count(("packet", True)) >= 2 and ("packet", False) not in seen


def test_the_classes_sparks_planning_processes_unpickle_import_no_table_writer_nor_replay() -> None:
    """Before a run's first micro-batch, Spark starts Python processes one after the other, each unpickling the data
    source or the stateful processor class, which imports its module; the run waits on every one. Neither class needs
    the Delta writer (deltalake, ``pipelines.lakehouse.tables``), the replay (``jbod_model.changes``, which imports
    the reference controller), the report or pandas: each was a tenth of a second or more of every such process."""
    heavy = ("pandas", "deltalake", "pipelines.lakehouse.tables", "jbod_model.changes", "jbod_model.report")
    code = ("import sys\nimport pipelines.streaming.source, pipelines.streaming.stateful\n"
            f"print(','.join(m for m in {heavy!r} if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[3])
    assert out.stdout.strip() == ""
