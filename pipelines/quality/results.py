"""The outcome of a check run: one :class:`CheckResult` per expectation and cluster, a :class:`QualityRun`, and the
``dq_results`` Delta table they are appended to (docs/data-quality.md)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, write_deltalake

from pipelines.lakehouse.tables import TIME
from pipelines.quality.inputs import read_delta

#: The results table (appended once per run, one row per expectation and cluster; docs/data-quality.md).
RESULTS_TABLE = "dq_results"
#: The key of a run's id in the metadata of the commit that appended it.
_RUN_ID_KEY = "kraft_jbod.dq_run_id"


RESULTS_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("run_time", TIME), ("cluster_id", pa.string()), ("suite", pa.string()),
    ("expectation", pa.string()), ("invariant", pa.string()), ("severity", pa.string()), ("status", pa.string()),
    ("success", pa.bool_()), ("element_count", pa.int64()), ("unexpected_count", pa.int64()),
    ("sample", pa.string()), ("note", pa.string()), ("engine", pa.string())])


@dataclass(frozen=True, slots=True)
class CheckResult:
    """One expectation on one cluster: ``status`` is ``passed``, ``failed``, ``skipped`` (with the reason in
    ``note``) or ``error`` (GX raised; the message in ``note``). ``sample`` holds up to ``sample_rows`` offending
    rows, each with its ``offset``."""

    cluster_id: str
    suite: str
    expectation: str
    invariant: str | None
    severity: str
    status: str
    success: bool | None
    element_count: int | None = None
    unexpected_count: int | None = None
    sample: tuple[dict[str, Any], ...] = ()
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"clusterId": self.cluster_id, "suite": self.suite, "expectation": self.expectation,
                "invariant": self.invariant, "severity": self.severity, "status": self.status,
                "success": self.success, "elementCount": self.element_count,
                "unexpectedCount": self.unexpected_count, "sample": list(self.sample), "note": self.note}


_FAIL_LEVELS: Mapping[str, frozenset[str]] = {"error": frozenset({"error"}),
                                              "warning": frozenset({"error", "warning"}), "never": frozenset()}


@dataclass(slots=True)
class QualityRun:
    """A ``jbod check`` run: every result of every cluster, where the data docs and results went."""

    run_id: str
    run_time: datetime
    tables_dir: str | None
    engine: str
    suites: tuple[str, ...]
    results: list[CheckResult] = field(default_factory=list)
    data_docs: Path | None = None
    results_table: Path | None = None
    seconds: float = 0.0

    def failing(self, fail_on: str = "error") -> list[CheckResult]:
        """Results that fail the run under ``fail_on`` (``error``, ``warning`` or ``never``); an expectation GX
        could not evaluate counts as failed."""
        levels = _FAIL_LEVELS[fail_on]
        return [r for r in self.results if r.status in ("failed", "error") and r.severity in levels]

    def exit_code(self, fail_on: str = "error") -> int:
        """1 when a result fails the run under ``fail_on``, else 0."""
        return 1 if self.failing(fail_on) else 0

    def failed_expectations(self, cluster_id: str | None = None) -> set[str]:
        """Names of the failed (or erroring) expectations, of one cluster or all."""
        return {r.expectation for r in self.results if r.status in ("failed", "error")
                and (cluster_id is None or r.cluster_id == cluster_id)}

    def to_json(self, fail_on: str = "error") -> dict[str, Any]:
        return {"runId": self.run_id, "runTime": self.run_time.isoformat(), "tables": self.tables_dir,
                "engine": self.engine, "suites": list(self.suites), "failOn": fail_on,
                "exitCode": self.exit_code(fail_on), "seconds": round(self.seconds, 3),
                "dataDocs": None if self.data_docs is None else str(self.data_docs),
                "resultsTable": None if self.results_table is None else str(self.results_table),
                "counts": {s: sum(1 for r in self.results if r.status == s)
                           for s in ("passed", "failed", "skipped", "error")},
                "results": [r.to_json() for r in self.results]}


def jsonable(value: Any) -> Any:
    if value is None or value is pd.NA:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "item") and not isinstance(value, (list, tuple, dict, str)):
        try:
            return value.item()
        except (ValueError, AttributeError):
            pass
    if isinstance(value, (list, tuple)) or hasattr(value, "tolist"):
        return [jsonable(v) for v in (value.tolist() if hasattr(value, "tolist") else value)]
    if isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def write_results(tables_dir: str | Path, run: QualityRun) -> Path:
    """Append a run's results to the ``dq_results`` Delta table (created on first use), one commit per run, with
    the run id in the commit's metadata — the writer conventions of :mod:`pipelines.lakehouse.tables`."""
    path = Path(tables_dir) / RESULTS_TABLE
    DeltaTable.create(str(path), schema=RESULTS_SCHEMA, mode="ignore")
    run_time = int(run.run_time.timestamp() * 1_000_000)
    columns: dict[str, list[Any]] = {f.name: [] for f in RESULTS_SCHEMA}
    for r in run.results:
        for name, value in (("run_id", run.run_id), ("run_time", run_time), ("cluster_id", r.cluster_id),
                            ("suite", r.suite), ("expectation", r.expectation), ("invariant", r.invariant),
                            ("severity", r.severity), ("status", r.status), ("success", r.success),
                            ("element_count", r.element_count), ("unexpected_count", r.unexpected_count),
                            ("sample", json.dumps([jsonable(s) for s in r.sample], sort_keys=True)),
                            ("note", r.note), ("engine", run.engine)):
            columns[name].append(value)
    arrays = {f.name: (pa.array(columns[f.name], pa.int64()).cast(TIME) if f.type == TIME
                       else pa.array(columns[f.name], f.type)) for f in RESULTS_SCHEMA}
    write_deltalake(str(path), pa.table(arrays, schema=RESULTS_SCHEMA), mode="append",
                    commit_properties=CommitProperties(custom_metadata={_RUN_ID_KEY: run.run_id}))
    return path


def read_results(tables_dir: str | Path, run_id: str | None = None) -> pd.DataFrame:
    """The ``dq_results`` rows (of one run, or all), through the Delta log."""
    filters = [] if run_id is None else [("run_id", "=", run_id)]
    return read_delta(Path(tables_dir) / RESULTS_TABLE, filters).to_pandas()


@dataclass(frozen=True, slots=True)
class StoredRun:
    """A run of the checks stored in ``dq_results``: its id and when it ran."""

    run_id: str
    run_time: datetime


def latest_run(tables_dir: str | Path, cluster: str | None = None) -> StoredRun | None:
    """The newest run in ``dq_results`` (that checked ``cluster``), None when the tables hold none: what a review of
    the scheduled checks' results reads instead of running them again (minutes at millions of partitions)."""
    if not (Path(tables_dir) / RESULTS_TABLE / "_delta_log").is_dir():
        return None
    filters = [] if cluster is None else [("cluster_id", "=", cluster)]
    runs = read_delta(Path(tables_dir) / RESULTS_TABLE, filters, ["run_id", "run_time"])
    if runs.num_rows == 0:
        return None
    times = dict(zip(runs.column("run_id").to_pylist(), runs.column("run_time").to_pylist(), strict=True))
    newest = max(times.values())
    tied = {run_id for run_id, at in times.items() if at == newest}
    if len(tied) > 1:
        # Runs within one second (run_time is whole seconds): the later commit is the later run (write_results
        # names its run in the commit's metadata).
        for commit in DeltaTable(str(Path(tables_dir) / RESULTS_TABLE)).history():
            if commit.get(_RUN_ID_KEY) in tied:
                tied = {commit[_RUN_ID_KEY]}
                break
    return StoredRun(run_id=min(tied), run_time=newest)
