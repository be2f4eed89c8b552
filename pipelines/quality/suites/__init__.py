"""The suites, one module each — ``structural``, ``semantic``, ``history``, ``log``, ``external``
(:data:`pipelines.config.profiles.SUITE_NAMES`). A suite module declares its expectations (``CHECKS``), the
invariants it cannot check yet (``SKIPS``) and the frame builders its expectations read (``FRAMES``, by frame name);
a new check is one :class:`~pipelines.quality.expectations.Check` there, plus a frame column if it needs a new one.
docs/data-quality.md lists every expectation.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from jbod_model.errors import InputError
from jbod_model.slots import gc_paused
from pipelines.config.profiles import SUITE_NAMES, QualitySettings
from pipelines.lakehouse.tables import release_memory, scan_partitions
from pipelines.quality.apart import Apart
from pipelines.quality.expectations import Check, Skip
from pipelines.quality.frames import Build, Frame, FrameBuilder
from pipelines.quality.inputs import ExternalInputs, TableSet
from pipelines.quality.suites import external, history, log, semantic, structural

_MODULES = {"structural": structural, "semantic": semantic, "history": history, "log": log, "external": external}
#: Every expectation, suite by suite in :data:`~pipelines.config.profiles.SUITE_NAMES` order.
CHECKS: tuple[Check, ...] = tuple(c for name in SUITE_NAMES for c in _MODULES[name].CHECKS)
#: Invariants no suite can check yet, and why.
SKIPS: tuple[Skip, ...] = tuple(s for name in SUITE_NAMES for s in _MODULES[name].SKIPS)
#: Every frame builder, by frame name (a frame may serve expectations of several suites).
FRAMES: Mapping[str, FrameBuilder] = {frame: builder for name in SUITE_NAMES
                                      for frame, builder in _MODULES[name].FRAMES.items()}
#: The tables each frame reads through its ``Build``, by frame name (``partitions``: the table and its registrations;
#: ``partition_rows``: the table's columns as Python values): what no frame still to build reads is let go
#: (:func:`_building`).
READS: Mapping[str, frozenset[str]] = {frame: reads for name in SUITE_NAMES
                                       for frame, reads in _MODULES[name].READS.items()}


def checks_for(suites: Sequence[str]) -> list[Check]:
    """The expectations of the named suites, in :data:`CHECKS` order."""
    unknown = [s for s in suites if s not in SUITE_NAMES]
    if unknown:
        raise InputError(f"unknown suite(s) {', '.join(unknown)} (suites: {', '.join(SUITE_NAMES)})")
    return [c for c in CHECKS if c.suite in suites]


#: The frames built in a process of their own when :func:`build_frames` may use two cores: the log suite's (it
#: decodes and replays every record), which shares nothing with the other frames but the tables read — about half
#: of the check's work on a large cluster (docs/data-quality.md). The bronze records' frame reads few records
#: since it stopped decoding those I3 holds for anyway, so it is built here, beside the others.
APART: tuple[str, ...] = ("log_violations",)
#: The ``records`` rows (NoOpRecords left out) from which a second process pays: it starts a Python interpreter and
#: imports pandas, pyarrow and deltalake again (≈ 1 s).
APART_FROM_RECORDS = 100_000


def build_frames(tables: TableSet, checks: Sequence[Check], settings: QualitySettings | None = None,
                 inputs: ExternalInputs = ExternalInputs(), *, workers: int = 1,
                 apart_from_records: int = APART_FROM_RECORDS) -> dict[str, Frame]:
    """The frames ``checks`` validate, built once each, by name (:func:`frames_as_built`, kept)."""
    built = dict(frames_as_built(tables, checks, settings, inputs, workers=workers,
                                 apart_from_records=apart_from_records))
    return {name: built[name] for name in dict.fromkeys(c.frame for c in checks)}


def frames_as_built(tables: TableSet, checks: Sequence[Check], settings: QualitySettings | None = None,
                    inputs: ExternalInputs = ExternalInputs(), *, workers: int = 1,
                    apart_from_records: int = APART_FROM_RECORDS) -> Iterator[tuple[str, Frame]]:
    """The frames ``checks`` validate, each built once and given as soon as it is built, with its name: a caller
    that validates each and lets it go never holds them all (at 2 M partitions they were most of the check's
    15 GB). With ``workers`` ≥ 2, tables read from a directory (nothing injected) and at least
    ``apart_from_records`` records, the :data:`APART` frames are built in a second process
    (:mod:`pipelines.quality.apart`) while this one builds the others, and come last — the same frames."""
    settings = settings or QualitySettings()
    names = list(dict.fromkeys(c.frame for c in checks))
    apart = frames_apart(tables, names, workers, apart_from_records)
    if not apart:
        yield from _building(tables, names, settings, inputs)
        return
    # Two processes, each keeping a core busy: each plans its scans on one (``scan_partitions``).
    with Apart(build_apart, tables.cluster_id, tables.tables_dir, apart, settings, inputs) as there:
        with scan_partitions(1):
            yield from _building(tables, [n for n in names if n not in apart], settings, inputs)
        yield from there.result().items()


def _building(tables: TableSet, names: Sequence[str], settings: QualitySettings,
              inputs: ExternalInputs) -> Iterator[tuple[str, Frame]]:
    """The frames ``names``, built in this process from one :class:`Build` (the tables read once between them),
    one at a time: a frame is not kept here once given."""
    build = Build(tables, settings, inputs)
    for i, name in enumerate(names):
        # The frames are built from millions of small objects (typed records, registrations, rows) while millions
        # more stay alive; the collector's passes walked them again and again — a third of the check's CPU at
        # 200 k partitions (docs/data-quality.md). Reference counting frees them; the frames hold no cycles.
        with gc_paused():
            frame = FRAMES[name](build)
        yield name, frame
        del frame
        # What no frame still to build reads goes now, not at the end: at 2 M partitions the partitions' table and
        # registrations (≈ 3 GB) and the replicas' rows lived through every frame after their last reader.
        build.release_all_but(frozenset().union(*(READS[n] for n in names[i + 1:])))
        # And what was let go to the system: at 2 M partitions the first process stayed resident at 3.7 GB between
        # frames that held none of it, and the next large frame grew on top.
        release_memory()


def frames_apart(tables: TableSet, names: Sequence[str], workers: int,
                 apart_from_records: int = APART_FROM_RECORDS) -> list[str]:
    """Which of the frames ``names`` :func:`build_frames` builds in a second process (none: all of them here)."""
    apart = [n for n in names if n in APART]
    if workers < 2 or not apart or len(apart) == len(names) or tables.tables_dir is None or tables.injected \
            or tables.record_rows() < apart_from_records:
        return []
    return apart


def build_apart(cluster_id: str, tables_dir: Path, names: Sequence[str], settings: QualitySettings,
                inputs: ExternalInputs) -> dict[str, Frame]:
    """:func:`frames_as_built`' second process: ``names`` built from the tables as the first process reads them."""
    with scan_partitions(1):
        return dict(_building(TableSet(cluster_id, tables_dir), names, settings, inputs))
