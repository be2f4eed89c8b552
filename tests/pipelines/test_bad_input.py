"""Bad or unusual input is handled the same by every command (issue #15): the model's readers (``report``,
``image``, ``inspect``) and the Spark source (``run``), driven here without a session."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from test_quality_support import FakeMapState, FakeValueState
from typer.testing import CliRunner

from jbod_model.errors import DecodeError
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import BeginTransactionRecord, EndTransactionRecord, TopicRecord
from jbod_model.replay import replay_entries
from jbod_model.simulator.churn import ChurnSpec, churn_log
from jbod_model.simulator.output import write_jsonl_file, write_metadata_dir
from jbod_model.sources import InputKind, detect_kind, open_inputs
from jbod_model.storage.files import METADATA_PARTITION_DIR
from jbod_model.storage.log_reader import ReadPolicy, iter_batches
from jbod_model.storage.metadata_dir import MetadataLogDir, read_snapshot_entries
from jbod_model.stream import StreamEntry
from pipelines.cli import app
from pipelines.cli.shared import EXIT_DECODE
from pipelines.streaming.codec import InputRow, entry_to_row
from pipelines.streaming.processor import replay_batch
from pipelines.streaming.source import (
    GAP_ROW_TYPE,
    SourceConfig,
    SourcePlanner,
    available_offsets,
    discover,
    read_range,
    source_options,
)
from pipelines.streaming.stateful import MAP_STATES

ENTRIES = churn_log(ChurnSpec(seed=5, operations=20))
cli = CliRunner(env={"COLUMNS": "400"})


def _rows(paths: list[Path], policy: ReadPolicy = "fail", *, follow: bool = False,
          cap: int | None = None) -> list[InputRow]:
    """Every row the source emits for ``paths``, read as ``jbod run`` reads them: a run that stops at what is there
    when it starts (``endOffsets``), or with ``follow`` a stream that keeps polling."""
    opts = source_options(paths, policy=policy, max_entries_per_batch=cap)
    if not follow:
        opts["endOffsets"] = json.dumps(available_offsets(opts))
    planner = SourcePlanner(SourceConfig.from_options(opts))
    start: dict[str, dict[str, int]] = {}
    rows: list[InputRow] = []
    while (end := planner.latest()) != start:
        for ci, s, e in planner.plan(start, end):
            rows += list(read_range(ci, s, e, policy=policy, final=planner.config.reaches_end(ci.cluster_id, e)))
        start = end
    return rows


def _node(tmp_path: Path, **kw: object) -> Path:
    return write_metadata_dir(tmp_path / "n", ENTRIES, cluster_id="c", **kw)  # type: ignore[arg-type]


def _offsets(entries: list[StreamEntry]) -> list[int | None]:
    return [getattr(e, "offset", None) for e in entries]


# ---------------------------------------------------------------------------------------------------------------
# Item 4: a segment or snapshot is known by its content, and `run` reads one too


def test_a_segment_under_another_name_is_a_segment_with_the_base_offset_of_its_first_batch(tmp_path: Path) -> None:
    node = _node(tmp_path, records_per_segment=20)
    segments = sorted((node / METADATA_PARTITION_DIR).glob("*.log"))
    second = segments[1]
    copy = shutil.copy(second, tmp_path / "x.log")
    assert detect_kind(copy) is InputKind.SEGMENT
    assert MetadataLogDir.open(copy).segments[0].base_offset == int(second.stem) > 0
    loaded = open_inputs([copy])
    assert _offsets(list(loaded.entries)) == _offsets(list(open_inputs([second]).entries))
    # Several renamed segments are read in base-offset order, not name order.
    first = shutil.copy(segments[0], tmp_path / "z.bin")
    both = open_inputs([copy, first])
    assert _offsets(list(both.entries)) == _offsets(list(open_inputs(segments[:2]).entries))


def test_inspect_prints_a_renamed_segment_with_the_base_offset_of_its_first_batch(tmp_path: Path) -> None:
    node = _node(tmp_path, records_per_segment=20)
    second = sorted((node / METADATA_PARTITION_DIR).glob("*.log"))[1]
    copy = Path(shutil.copy(second, tmp_path / "x.log"))
    printed = cli.invoke(app, ["inspect", str(copy)])
    assert printed.exit_code == 0, printed.output
    assert printed.stdout.startswith(f"Dumping {copy}\nLog starting offset: {int(second.stem)}\n")
    original = cli.invoke(app, ["inspect", str(second)]).stdout
    assert printed.stdout.splitlines()[1:] == original.splitlines()[1:]


def test_a_snapshot_under_another_name_is_a_snapshot(tmp_path: Path) -> None:
    node = _node(tmp_path, snapshot_at=12)
    [snapshot] = (node / METADATA_PARTITION_DIR).glob("*.checkpoint")
    copy = Path(shutil.copy(snapshot, tmp_path / "snap.bin"))
    assert detect_kind(copy) is InputKind.SNAPSHOT
    loaded = open_inputs([copy])
    assert loaded.base_image.same_state(replay_entries(read_snapshot_entries(snapshot)))


def test_garbage_and_text_are_not_taken_for_segments(tmp_path: Path) -> None:
    garbage = tmp_path / "x.log"
    garbage.write_bytes(b"\x00\x01" * 100)
    with pytest.raises(Exception, match="neither a metadata segment nor a snapshot"):
        detect_kind(garbage)
    notes = tmp_path / "notes.log"
    notes.write_text("hello\n")
    with pytest.raises(Exception, match="neither canonical JSONL"):
        detect_kind(notes)


@pytest.mark.parametrize("name", ["00000000000000000000.log", "copy.log"])
def test_run_reads_a_single_segment_as_report_does(tmp_path: Path, name: str) -> None:
    node = _node(tmp_path)
    [segment] = (node / METADATA_PARTITION_DIR).glob("*.log")
    given = segment if name == segment.name else Path(shutil.copy(segment, tmp_path / name))
    [ci] = discover([given])
    # In its node dir a segment belongs to the node's cluster; a loose copy is named after itself.
    assert ci.cluster_id == ("c" if given == segment else "copy")
    rows = _rows([given])
    assert [(r.kind, r.offset) for r in rows] == [("record", e.offset) for e in ENTRIES]


def test_run_reads_a_single_snapshot(tmp_path: Path) -> None:
    node = _node(tmp_path, snapshot_at=12)
    [snapshot] = (node / METADATA_PARTITION_DIR).glob("*.checkpoint")
    rows = _rows([snapshot])
    expected = list(read_snapshot_entries(snapshot))
    assert rows and {r.kind for r in rows} == {"snapshot"} and len(rows) == len(expected)


# ---------------------------------------------------------------------------------------------------------------
# Item 2: a bad JSONL line is undecodable text — one message from every command, skipped under `skip`


def _jsonl_with_a_bad_line(tmp_path: Path, bad_line: int = 7) -> tuple[Path, list[str]]:
    path = write_jsonl_file(tmp_path / "c.jsonl", ENTRIES)
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[bad_line - 1] = lines[bad_line - 1][:40] + "\t\x01" + lines[bad_line - 1][40:]  # a raw control char
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path, lines


def test_a_bad_jsonl_line_is_the_same_decode_error_from_report_and_run(tmp_path: Path) -> None:
    path, _lines = _jsonl_with_a_bad_line(tmp_path)
    with pytest.raises(DecodeError) as from_model:
        list(open_inputs([path]).entries)
    with pytest.raises(DecodeError) as from_source:
        _rows([path])
    assert str(from_model.value) == str(from_source.value)
    assert str(from_model.value).startswith(f"{path}, line 7: not valid JSON: Invalid control character")
    assert (from_model.value.source, from_model.value.line) == (str(path), 7)


def test_a_bad_jsonl_line_is_skipped_and_reported_under_skip(tmp_path: Path) -> None:
    path, lines = _jsonl_with_a_bad_line(tmp_path)
    bad_offset = json.loads(lines[5])["offset"] + 1  # line 7 held the entry after line 6's
    kept = [e.offset for e in ENTRIES if e.offset != bad_offset]
    loaded = open_inputs([path], policy="skip")
    assert _offsets(list(loaded.entries)) == kept
    [skipped] = loaded.report.skipped
    position = sum(len(line.encode()) + 1 for line in lines[:6])
    assert (skipped.source, skipped.line, skipped.position) == (str(path), 7, position)
    assert any("line 7" in line and "not valid JSON" in line for line in loaded.skipped())

    rows = _rows([path], policy="skip")
    assert [r.offset for r in rows if r.kind == "record"] == kept
    [gap] = [r for r in rows if r.kind == "gap"]
    assert gap.message is not None and gap.message.startswith(str(skipped))
    assert gap.source == str(path) and gap.seq == 6  # the line's place in the input, between its neighbours
    assert [r.seq for r in rows] == list(range(len(rows)))


def test_report_and_image_skip_a_bad_jsonl_line_or_exit_3(tmp_path: Path) -> None:
    path, _lines = _jsonl_with_a_bad_line(tmp_path)
    for command in (["report", str(path)], ["image", str(path)]):
        failed = cli.invoke(app, command)
        assert failed.exit_code == EXIT_DECODE, failed.output
        assert f"{path}, line 7: not valid JSON" in failed.stderr.replace("\n", "")
        skipped = cli.invoke(app, [*command, "--policy", "skip"])
        assert skipped.exit_code == 0, skipped.output
        assert "line 7" in skipped.stderr and "not valid JSON" in skipped.stderr


# ---------------------------------------------------------------------------------------------------------------
# Item 3: a torn tail is what `report` says it is, in a run that stops too


def _torn(tmp_path: Path) -> tuple[Path, Path, int]:
    """A node dir whose only segment ends in the first 38 bytes of a batch (a write cut short); the byte where they
    start."""
    node = _node(tmp_path)
    [segment] = (node / METADATA_PARTITION_DIR).glob("*.log")
    data = segment.read_bytes()
    last = list(iter_batches(segment))[-1].header
    segment.write_bytes(data + data[last.position:last.position + 38])
    return node, segment, len(data)


def test_a_torn_tail_fails_run_as_it_fails_report(tmp_path: Path) -> None:
    node, segment, at = _torn(tmp_path)
    with pytest.raises(DecodeError) as reported:
        list(open_inputs([node]).entries)
    assert f"{segment}, byte {at}: Found 38 invalid bytes at the end of" in str(reported.value)
    for cap in (None, 4):
        with pytest.raises(DecodeError) as ran:
            _rows([node], cap=cap)
        assert str(ran.value) == str(reported.value)


def test_a_torn_tail_is_a_gap_naming_the_file_and_byte_under_skip(tmp_path: Path) -> None:
    node, segment, at = _torn(tmp_path)
    loaded = open_inputs([node], policy="skip")
    assert _offsets(list(loaded.entries)) == [e.offset for e in ENTRIES]
    [skipped] = loaded.report.skipped
    rows = _rows([node], policy="skip", cap=4)
    assert [(r.kind, r.offset) for r in rows] == [("record", e.offset) for e in ENTRIES] + [("gap", len(ENTRIES))]
    gap = rows[-1]
    assert gap.message is not None and gap.message.startswith(str(skipped)) and f"byte {at}" in gap.message
    assert (gap.source, gap.gap_from, gap.gap_last) == (str(segment), len(ENTRIES), None)


def test_a_followed_stream_waits_for_a_torn_tail(tmp_path: Path) -> None:
    node, _segment, _at = _torn(tmp_path)
    assert [(r.kind, r.offset) for r in _rows([node], follow=True)] == [("record", e.offset) for e in ENTRIES]


def test_a_torn_last_jsonl_line_fails_or_is_skipped_in_run_as_in_report(tmp_path: Path) -> None:
    path = write_jsonl_file(tmp_path / "c.jsonl", ENTRIES)
    text = path.read_text(encoding="utf-8")
    path.write_text(text + text.splitlines()[0][:25], encoding="utf-8")  # a last line cut short, no newline
    with pytest.raises(DecodeError) as reported:
        list(open_inputs([path]).entries)
    with pytest.raises(DecodeError) as ran:
        _rows([path])
    assert str(ran.value) == str(reported.value)
    loaded = open_inputs([path], policy="skip")
    assert len(list(loaded.entries)) == len(ENTRIES)
    [skipped] = loaded.report.skipped
    rows = _rows([path], policy="skip")
    assert [r.kind for r in rows] == ["record"] * len(ENTRIES) + ["gap"]
    assert rows[-1].message is not None and rows[-1].message.startswith(str(skipped))
    assert [r.kind for r in _rows([path], follow=True)] == ["record"] * len(ENTRIES)


# ---------------------------------------------------------------------------------------------------------------
# Item 12 in the Spark operator: a record that needs what a gap held is its consequence, across micro-batches


def _operator_rows(entries: list[LogEntry], gap_at: int | None, cut: int,
                   tables: tuple[str, ...] = ("log_gaps", "replay_faults")) -> tuple[list[dict[str, object]],
                                                                                 FakeValueState]:
    """Feed ``entries`` to the operator in two micro-batches split at ``cut``, with a ``gap`` row where offset
    ``gap_at`` (left out of ``entries``) was; its log_gaps and replay_faults rows, and the meta state."""
    rows = [dataclasses.asdict(entry_to_row("c", "record", e.offset, e)) for e in entries]
    if gap_at is not None:
        gap = InputRow("c", "gap", gap_at, gap_at, None, None, None, GAP_ROW_TYPE, 0, None, None, "f.log",
                       gap_from=gap_at, gap_last=gap_at, message=f"offsets {gap_at}..{gap_at} could not be read")
        rows.insert(gap_at, dataclasses.asdict(gap))
    maps = {name: FakeMapState() for name in MAP_STATES}
    meta, gap_state = FakeValueState(), FakeValueState()
    out = []
    for part in (rows[:cut], rows[cut:]):
        batch = replay_batch("c", pd.DataFrame(part), meta, maps, gap_state)  # type: ignore[arg-type]
        found = [{"table": name, **row} for name in tables if name in batch
                 for row in batch[name].to_pylist()]
        out += sorted(found, key=lambda r: r["ord"])
    return out, meta


def test_the_operator_leaves_out_the_consequences_of_a_gap_and_goes_on() -> None:
    at = next(i for i, e in enumerate(ENTRIES) if isinstance(e.record, TopicRecord))
    topic_id = ENTRIES[at].record.topic_id  # type: ignore[attr-defined]
    kept = ENTRIES[:at] + ENTRIES[at + 1:]
    rows, meta = _operator_rows(kept, at, at + 1)  # the gap in one micro-batch, its consequences in the next
    assert not [r for r in rows if r["table"] == "replay_faults"]
    consequences = [r for r in rows if r["table"] == "log_gaps" and r["dropped_records"] == 1]
    assert consequences and all(f"topic with ID {topic_id}" in str(r["message"]) for r in consequences)
    assert all(r["first_missing_offset"] == r["last_missing_offset"] for r in consequences)
    assert meta.get()[3] is None  # not halted

    # Without a gap before it, the same fault halts the cluster, as the CLI stops with exit 4.
    rows, meta = _operator_rows(kept, None, at + 1)
    assert [r["table"] for r in rows] == ["replay_faults"] and meta.get()[3] is not None


TRANSACTIONS = churn_log(ChurnSpec(seed=11, operations=60))  # four Begin/End pairs


@pytest.mark.parametrize("after_gap", [0, 1], ids=["gap-opens-the-next-batch", "gap-ends-its-batch"])
def test_the_operator_closes_a_transaction_whose_end_was_in_a_skipped_range(after_gap: int) -> None:
    """As the model does (``TransactionBuffer.interrupt``): at the ``gap`` row the open transaction is left out
    — a consequence at its Begin — and every record after the range replays; nothing stays pending behind an End
    that never comes, also when the gap is the last row of a micro-batch and the transaction was stored with it."""
    at = [i for i, e in enumerate(TRANSACTIONS) if isinstance(e.record, EndTransactionRecord)][-1]
    begin = max(e.offset for e in TRANSACTIONS[:at] if isinstance(e.record, BeginTransactionRecord))
    kept = TRANSACTIONS[:at] + TRANSACTIONS[at + 1:]
    rows, meta = _operator_rows(kept, at, at + after_gap, ("log_gaps", "replay_faults", "records"))
    assert not [r for r in rows if r["table"] == "replay_faults"]
    # The transaction's rows never took effect (what jbod report --tables batches by); every other row did.
    never = {r["offset"] for r in rows if r["table"] == "records" and r["applied_offset"] is None}
    assert never == set(range(begin, at))
    [consequence] = [r for r in rows if r["table"] == "log_gaps" and r["dropped_records"] == 1]
    assert consequence["first_missing_offset"] == begin
    assert "BEGIN_TRANSACTION_RECORD" in str(consequence["message"])
    last_offset, pending, _controller, halted = meta.get()[:4]
    assert (last_offset, pending, halted) == (TRANSACTIONS[-1].offset, None, None)
