"""Bad or unusual input is handled the same by every command (issue #15): the model's readers (``report``,
``image``, ``inspect``) and the Spark source (``run``), driven here without a session."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from jbod_model.replay import replay_entries
from jbod_model.sources import InputKind, detect_kind, open_inputs
from jbod_model.storage.files import METADATA_PARTITION_DIR
from jbod_model.storage.log_reader import ReadPolicy
from jbod_model.storage.metadata_dir import MetadataLogDir, read_snapshot_entries
from jbod_model.stream import StreamEntry
from pipelines.codec import InputRow
from pipelines.source import SourceConfig, SourcePlanner, discover, read_range, source_options
from pipelines.synthetic import SyntheticSpec, generate, write_metadata_dir

ENTRIES = generate(SyntheticSpec(seed=5, operations=20))


def _rows(paths: list[Path], policy: ReadPolicy = "fail") -> list[InputRow]:
    """Every row the source emits for ``paths``, read as a run that stops at what is there (``jbod run``)."""
    opts = source_options(paths, policy=policy)
    planner = SourcePlanner(SourceConfig.from_options(opts))
    start: dict[str, dict[str, int]] = {}
    rows: list[InputRow] = []
    while (end := planner.latest()) != start:
        for ci, s, e in planner.plan(start, end):
            rows += list(read_range(ci, s, e, policy=policy))
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
