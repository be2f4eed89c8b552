"""great-expectations plumbing: each :class:`~pipelines.quality.expectations.Check` as a GX expectation, run on
pandas or Spark DataFrames, its result turned into a :class:`~pipelines.quality.results.CheckResult`, and the data
docs site. great-expectations is imported only when a runner first validates: it takes seconds to load."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from jbod_model.errors import InputError
from pipelines.config.profiles import QualitySettings
from pipelines.quality.expectations import Check
from pipelines.quality.frames import Frame, optional_int
from pipelines.quality.results import CheckResult, jsonable

DOCS_SITE = "kraft_jbod"


ENGINES = ("pandas", "spark")


@contextmanager
def _quiet() -> Iterator[None]:
    """GX logs and warns freely (and draws tqdm bars unless told not to, see ``_context``): keep the CLI clean."""
    logger = logging.getLogger("great_expectations")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


_SEVERITY_TO_GX = {"error": "critical", "warning": "warning"}


class GxRunner:
    """Validates frames with great-expectations, offline: a file context under ``<tables>/_dq/gx`` (suites,
    validation definitions and results kept across runs, so the data docs show history) or, with
    ``project_dir=None``, an ephemeral one (tests). The data docs site goes to ``docs_dir``.

    great-expectations is imported, and its context opened, at the first validation (or the docs' build), not when
    the runner is made: the import takes seconds, and ``jbod check`` makes its runner before it starts building the
    log suite's frame in a second process — the check's longest part, which would otherwise wait for the import
    (docs/data-quality.md, "twelfth round")."""

    def __init__(self, engine: str = "pandas", project_dir: Path | None = None, docs_dir: Path | None = None,
                 spark: Any = None) -> None:
        if engine not in ENGINES:
            raise InputError(f"--engine must be one of {', '.join(ENGINES)}, not {engine!r}")
        self.engine = engine
        self.docs_dir = docs_dir
        self._project_dir = project_dir
        self._spark = spark
        self._ctx: Any = None
        self._batches: dict[str, Any] = {}

    def _open(self) -> None:
        """Import great-expectations and open the context, once."""
        if self._ctx is not None:
            return
        with _quiet():
            import great_expectations as gx  # noqa: PLC0415 - slow import, only for checks
            import great_expectations.expectations as gxe  # noqa: PLC0415
            from great_expectations.core.run_identifier import RunIdentifier  # noqa: PLC0415
            from great_expectations.data_context.types.base import ProgressBarsConfig  # noqa: PLC0415

            self._gx, self._gxe, self._run_identifier = gx, gxe, RunIdentifier
            project_dir, docs_dir = self._project_dir, self.docs_dir
            ctx: Any
            if project_dir is None:
                ctx = gx.get_context(mode="ephemeral")
            else:
                project_dir.mkdir(parents=True, exist_ok=True)
                ctx = gx.get_context(mode="file", project_root_dir=str(project_dir))
            ctx.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
            ctx.variables.analytics_enabled = False
            if project_dir is not None:
                ctx.variables.save()
            if docs_dir is not None:
                sites = ctx.list_data_docs_sites()
                if "local_site" in sites:
                    ctx.delete_data_docs_site("local_site")
                site: Any = {"class_name": "SiteBuilder", "show_how_to_buttons": False,
                        "store_backend": {"class_name": "TupleFilesystemStoreBackend",
                                          "base_directory": str(docs_dir)},
                        "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"}}
                if DOCS_SITE in sites:
                    ctx.update_data_docs_site(DOCS_SITE, site)
                else:
                    ctx.add_data_docs_site(DOCS_SITE, site)
            self._source: Any
            if self.engine == "spark":
                self._source = ctx.data_sources.add_or_update_spark("kraft_jbod_spark")
            else:
                self._source = ctx.data_sources.add_or_update_pandas("kraft_jbod_pandas")
            self._ctx = ctx

    def _batch_definition(self, frame: str) -> Any:
        if frame not in self._batches:
            asset = self._source.add_dataframe_asset(frame)
            self._batches[frame] = asset.add_batch_definition_whole_dataframe("whole")
        return self._batches[frame]

    def _expectation(self, check: Check, settings: QualitySettings) -> Any:
        gxe = self._gxe
        kw: dict[str, Any] = {"column": check.column, "meta": check.meta(settings),
                              "description": f"{check.name} ({check.severity_name}): {check.summary}",
                              "severity": _SEVERITY_TO_GX[check.severity_name],
                              "notes": f"**{check.name}** — {check.summary}. {check.rationale}"
                                       + ("" if check.definition is None else f" Source: {check.definition.source}.")}
        if check.rule == "true":
            return gxe.ExpectColumnValuesToBeInSet(value_set=[True], **kw)
        if check.rule == "unique":
            return gxe.ExpectColumnValuesToBeUnique(**kw)
        if check.rule == "not_in":
            return gxe.ExpectColumnValuesToNotBeInSet(value_set=[check.value], **kw)
        if check.rule == "at_most":
            assert check.threshold is not None
            return gxe.ExpectColumnValuesToBeBetween(max_value=getattr(settings, check.threshold), **kw)
        raise ValueError(f"unknown rule {check.rule!r}")

    def _dataframe(self, frame: Frame) -> Any:
        data = frame.gx_data()
        if self.engine == "pandas":
            return data
        # Through Arrow: nullable pandas columns arrive as Spark nulls (a float NaN would not be null there).
        return self._spark.createDataFrame(pa.Table.from_pandas(data, preserve_index=False))

    def validate(self, suite: str, frame: Frame, checks: Sequence[Check], settings: QualitySettings,
                 run_name: str, run_time: datetime) -> list[tuple[Check, Any]]:
        """Run one GX suite (``<suite>.<frame>``) on one frame; return each check with its GX result."""
        self._open()
        gx = self._gx
        with _quiet():
            gx_suite = gx.ExpectationSuite(
                name=f"{suite}.{frame.name}",
                expectations=[self._expectation(c, settings) for c in checks],
                meta={"suite": suite, "frame": frame.name, "notes": "kraft-jbod data quality (docs/data-quality.md)"})
            gx_suite = self._ctx.suites.add_or_update(gx_suite)
            definition = self._ctx.validation_definitions.add_or_update(
                gx.ValidationDefinition(name=f"{suite}.{frame.name}", data=self._batch_definition(frame.name),
                                        suite=gx_suite))
            result = definition.run(
                batch_parameters={"dataframe": self._dataframe(frame)},
                result_format={"result_format": "SUMMARY", "partial_unexpected_count": settings.sample_rows,
                               "unexpected_index_column_names": list(frame.keys)},
                run_id=self._run_identifier(run_name=run_name, run_time=run_time))
            # GX keeps each asset's last batch in the data source's execution engine — for pandas the frame itself —
            # so every frame validated stayed alive to the end of the check: 0.5 GB at 200 k partitions, gigabytes at
            # 2 M (docs/data-quality.md, "eighteenth round"). The results above are all it is needed for.
            batches = self._source.get_execution_engine().batch_manager
            batches.reset_batch_cache()
            batches.batch_data_cache.clear()
        by_name = {(r.expectation_config.meta or {}).get("expectation") if r.expectation_config else None: r
                   for r in result.results}
        return [(c, by_name.get(c.name)) for c in checks]

    def build_docs(self) -> Path | None:
        """Build the data docs site; its ``index.html`` (None without a docs dir)."""
        if self.docs_dir is None:
            return None
        self._open()
        with _quiet():
            self._ctx.build_data_docs(site_names=[DOCS_SITE])
        return self.docs_dir / "index.html"


def _sample(frame: Frame, gx_result: Any, limit: int) -> tuple[dict[str, Any], ...]:
    """The offending rows GX reported (their key columns), completed with the frame's context columns."""
    listed = (gx_result.result or {}).get("partial_unexpected_index_list") or []
    data = frame.data
    out = []
    for item in listed[:limit]:
        row = {k: jsonable(v) for k, v in item.items()}
        index = row.get("row")
        if index is not None and 0 <= int(index) < len(data):
            for col in frame.context:
                row[col] = jsonable(data.iloc[int(index)][col])
        out.append(row)
    return tuple(out)


def to_result(cluster_id: str, check: Check, frame: Frame, gx_result: Any, limit: int) -> CheckResult:
    base = CheckResult(cluster_id=cluster_id, suite=check.suite, expectation=check.name, invariant=check.invariant,
                       severity=check.severity_name, status="error", success=False)
    if gx_result is None:
        return replace(base, note="great-expectations returned no result for this expectation")
    info = gx_result.exception_info or {}
    if info.get("raised_exception"):
        return replace(base, note=str(info.get("exception_message")))
    stats = gx_result.result or {}
    unexpected = stats.get("unexpected_count")
    return replace(base, status="passed" if gx_result.success else "failed", success=bool(gx_result.success),
                   note=frame.note, element_count=optional_int(stats.get("element_count")),
                   unexpected_count=optional_int(unexpected) if unexpected is not None else 0,
                   sample=() if gx_result.success else _sample(frame, gx_result, limit))
