"""What the Spark tables are compared with: the pure model's replay of the same input, and table snapshots."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jbod_model.controller.context import ControllerConfig
from jbod_model.controller.controller import ReferenceController
from jbod_model.image_json import image_to_json
from jbod_model.records.entry import LogEntry
from jbod_model.replay import Replayer
from jbod_model.sources import open_inputs
from jbod_model.stream import StreamRunner
from pipelines.lakehouse.tables import as_of_image, read_table, table_schemas


def model_log(inputs: Sequence[str | Path]) -> tuple[Any, list[LogEntry]]:
    """The model's view of an input: the base image (a snapshot, or empty) and every record of the resulting
    metadata log in offset order — read records, plus those the reference controller wrote for requests."""
    loaded = open_inputs(list(inputs))
    runner = StreamRunner(ReferenceController(loaded.base_image, ControllerConfig()))
    log: list[LogEntry] = []
    for entry in loaded.entries:
        if isinstance(entry, LogEntry):
            log.append(entry)
        for event in runner.run([entry]):
            log.extend(event.entries)
    return loaded.base_image, log


def model_images(inputs: Sequence[str | Path], offsets: Sequence[int | None]) -> dict[int | None, dict[str, Any]]:
    """``image_to_json`` of the model's replay up to each offset (every record with offset ≤ N; None = all)."""
    base, log = model_log(inputs)
    out: dict[int | None, dict[str, Any]] = {}
    for n in offsets:
        replayer = Replayer(base)
        for e in log:
            if n is not None and e.offset > n:
                break
            replayer.replay(e)
        out[n] = image_to_json(replayer.image)
    return out


def assert_tables_match_model(tables: Path, inputs: Sequence[str | Path], cluster: str | None,
                              offsets: Sequence[int | None]) -> None:
    """The as-of image of the tables equals the model's image at each offset, and the current tables equal the
    model's final image."""
    want = model_images(inputs, [None, *offsets])
    got = as_of_image(tables, cluster)
    assert_same_image(got, want[None], "latest")
    for n in offsets:
        assert_same_image(as_of_image(tables, cluster, n), want[n], f"as of offset {n}")


def assert_same_image(got: dict[str, Any], want: dict[str, Any], label: str) -> None:
    for key, value in want.items():
        assert got[key] == value, f"{label}: {key} differs:\n got  {str(got[key])[:800]}\n want {str(value)[:800]}"
    assert got == want


def snapshot_tables(tables: Path) -> dict[str, list[dict[str, Any]]]:
    """Every table's rows, sorted: two runs that should be equal compare equal."""
    out = {}
    for name in sorted(table_schemas()):
        rows = read_table(tables, name).to_pylist()
        out[name] = sorted(rows, key=lambda r: repr(sorted(r.items())))
    return out


def step_offsets(log: Sequence[LogEntry], limit: int | None = None) -> list[int]:
    """Offsets worth asking about: every one for short logs, a spread (with the first and last) otherwise."""
    offsets = sorted({e.offset for e in log})
    if limit is None or len(offsets) <= limit:
        return offsets
    step = max(1, len(offsets) // limit)
    return sorted({*offsets[::step], offsets[0], offsets[-1]})
