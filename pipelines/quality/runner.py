"""Running checks: every suite over one cluster (:func:`check_cluster`) or over every cluster of a tables directory
(:func:`run_checks`, what ``jbod check`` calls), results appended to ``dq_results``."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jbod_model import invariants as inv
from jbod_model.errors import InputError
from pipelines.config.profiles import SUITE_NAMES, QualitySettings, available_cores
from pipelines.lakehouse.tables import clusters
from pipelines.quality.expectations import Check
from pipelines.quality.frames import Frame
from pipelines.quality.gx import ENGINES, GxRunner, to_result
from pipelines.quality.inputs import ExternalInputs, TableSet
from pipelines.quality.results import CheckResult, QualityRun, write_results
from pipelines.quality.suites import SKIPS, checks_for, frames_as_built

#: Under the tables directory: the GX project (``gx/``) and the data docs site (``data_docs/``).
DQ_DIR = "_dq"


def _run_name(run_id: str, cluster_id: str) -> str:
    """GX's name for one cluster's validations in a run (its file store refuses path separators in keys)."""
    safe = cluster_id.replace("/", "_").replace("\\", "_")
    return f"{safe}@{run_id}"


def check_cluster(tables: TableSet, runner: GxRunner, *, suites: Sequence[str] = SUITE_NAMES,
                  settings: QualitySettings | None = None, inputs: ExternalInputs = ExternalInputs(),
                  run_name: str | None = None, run_time: datetime | None = None,
                  workers: int = 1) -> list[CheckResult]:
    """Every expectation of ``suites`` on one cluster's tables, in :data:`CHECKS` order, then the skips. ``workers``:
    the processes its frames may be built in (:func:`~pipelines.quality.suites.frames_as_built`)."""
    settings = settings or QualitySettings()
    checks = checks_for(suites)
    run_time = run_time or datetime.now(UTC)
    run_name = run_name or _run_name(uuid.uuid4().hex, tables.cluster_id)
    groups: dict[str, dict[str, list[Check]]] = {}  # frame -> suite -> its checks of that frame
    for c in checks:
        groups.setdefault(c.frame, {}).setdefault(c.suite, []).append(c)
    results: dict[str, CheckResult] = {}
    # Each frame validated as soon as it is built, then let go: not all of them held until the last is built.
    for frame_name, frame in frames_as_built(tables, checks, settings, inputs, workers=workers):
        for suite, group in groups[frame_name].items():
            results.update(_validated(tables.cluster_id, runner, suite, frame, group, settings, run_name, run_time))
        del frame
    out = [results[c.name] for c in checks]
    for s in SKIPS:
        if s.suite in suites:
            definition = inv.invariant(s.invariant)
            out.append(CheckResult(tables.cluster_id, s.suite, s.name, s.invariant,
                                   definition.severity.value.lower(), "skipped", None, note=s.reason))
    return out


def _validated(cluster_id: str, runner: GxRunner, suite: str, frame: Frame, group: Sequence[Check],
               settings: QualitySettings, run_name: str, run_time: datetime) -> dict[str, CheckResult]:
    """One suite's checks of one frame, by name: skipped with the frame's reason when it could not be built."""
    if frame.skip is not None:
        return {c.name: CheckResult(cluster_id, c.suite, c.name, c.invariant, c.severity_name, "skipped", None,
                                    note=frame.skip) for c in group}
    return {c.name: to_result(cluster_id, c, frame, gx_result, settings.sample_rows)
            for c, gx_result in runner.validate(suite, frame, group, settings, run_name, run_time)}


def run_checks(tables_dir: str | Path, *, cluster: str | None = None, suites: Sequence[str] | None = None,
               settings: QualitySettings | None = None, engine: str = "pandas",
               inputs: ExternalInputs = ExternalInputs(), spark: Any = None, write: bool = True,
               docs: bool = True, workers: int | None = None) -> QualityRun:
    """Check one cluster (or every cluster) of the tables under ``tables_dir``: run the suites (default: the
    settings' ``suites``), append the results to ``dq_results`` (``write``) and build the data docs under
    ``<tables>/_dq/data_docs`` (``docs``). ``spark`` is the session for ``engine="spark"`` (the caller owns it).
    ``workers``: the processes a cluster's frames may be built in (None: the settings' ``workers``, else one per core
    this process may use)."""
    started = time.monotonic()
    settings = settings or QualitySettings()
    root = Path(tables_dir)
    chosen = tuple(suites) if suites else tuple(settings.suites)
    checks_for(chosen)  # unknown suite names fail before anything is read
    if engine not in ENGINES:
        raise InputError(f"--engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    if engine == "spark" and spark is None:
        raise InputError("the spark engine needs a Spark session")
    known = clusters(root)
    if cluster is not None and cluster not in known:
        raise InputError(f"cluster {cluster!r} is not in {root} (clusters: {', '.join(known) or 'none'})")
    targets = [cluster] if cluster is not None else known
    run = QualityRun(run_id=uuid.uuid4().hex, run_time=datetime.now(UTC).replace(microsecond=0),
                     tables_dir=str(root), engine=engine, suites=chosen)
    dq = root / DQ_DIR
    runner = GxRunner(engine, project_dir=dq if docs else None, docs_dir=dq / "data_docs" if docs else None,
                      spark=spark)
    for cid in targets:
        run.results += check_cluster(TableSet(cid, root), runner, suites=chosen, settings=settings, inputs=inputs,
                                     run_name=_run_name(run.run_id, cid), run_time=run.run_time,
                                     workers=workers or settings.workers or available_cores())
    if docs:
        run.data_docs = runner.build_docs()
    if write:
        run.results_table = write_results(root, run)
    run.seconds = time.monotonic() - started
    return run
