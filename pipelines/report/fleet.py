"""A fleet's reports (``jbod report --tables DIR --all-clusters``): every cluster of the tables reported on its own,
several at once, ranked worst first.

Each cluster's report is exactly what ``--cluster`` gives. Clusters share nothing but the tables, so a pool of
processes reports them (one per core by default), and each process hands back only what the fleet needs of a
cluster: its row of the index (:class:`~pipelines.report.render.FleetRow`: headline counts, offline disks), its page
written beside the index, and its JSON document or its report in a scratch file, read back in the fleet's order. The
caller never holds more than one cluster's report at a time, whatever the fleet's size.
"""

from __future__ import annotations

import multiprocessing
import pickle
import shutil
import tempfile
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal

from jbod_model.errors import InputError
from jbod_model.records.json_codec import dumps_without_floats
from jbod_model.report import DirectoryPaths, JbodReport, build_report
from pipelines.config.profiles import available_cores
from pipelines.report.load import cluster_from_tables, directory_paths_for
from pipelines.report.render import FleetRow, render_html, report_to_json, worst_first, write_html

#: How much of a kept document :meth:`ClusterOutcome.copy_json` holds at a time.
_COPY_CHUNK = 1 << 20

#: What a fleet report keeps of each cluster's report besides its row and page: the JSON document's text, or the
#: report itself (for the terminal).
Keep = Literal["json", "report"]


@dataclass(frozen=True, slots=True)
class FleetJob:
    """What every cluster's report is made with: the tables, the time (``--as-of``) for all, the ``--dirs`` paths,
    where the pages go (None: no pages), what to keep, and the scratch folder it is kept in."""

    tables: Path
    as_of: str | None
    explicit: DirectoryPaths | None
    html: Path | None
    keep: Keep
    scratch: Path


@dataclass(frozen=True, slots=True)
class ClusterOutcome:
    """One cluster's part of a fleet report: its row (None: not reported, ``not_reported`` says why), the warnings
    its report came with (where the job's replay of it stopped), and the scratch file holding what was kept."""

    cluster: str
    row: FleetRow | None
    not_reported: str | None = None
    warnings: tuple[str, ...] = ()
    kept: Path | None = None

    def copy_json(self, out: BinaryIO) -> None:
        """The cluster's report as its JSON document's UTF-8 bytes (kept ``json``), copied to ``out`` as they are:
        decoded to text and encoded again, a 50-cluster fleet's 1.23 GB took 6.4 s where the copy takes 1.7 s, all of
        it after the last cluster's report."""
        assert self.kept is not None
        with self.kept.open("rb") as kept:
            shutil.copyfileobj(kept, out, _COPY_CHUNK)

    def report(self) -> JbodReport:
        """The cluster's report (kept ``report``)."""
        assert self.kept is not None
        with self.kept.open("rb") as f:
            report: JbodReport = pickle.load(f)
        return report


@dataclass(frozen=True, slots=True)
class Fleet:
    """The reported clusters' outcomes worst first, and those with nothing to report (by cluster id)."""

    reported: tuple[ClusterOutcome, ...]
    not_reported: tuple[ClusterOutcome, ...]

    @property
    def rows(self) -> list[FleetRow]:
        return [o.row for o in self.reported if o.row is not None]


def report_cluster(job: FleetJob, cluster: str, index: int) -> ClusterOutcome:
    """One cluster's report, as ``jbod report --tables … --cluster`` builds it; its page written, its document or
    report kept in the scratch folder (``index``: a file name of its own there)."""
    try:
        data = cluster_from_tables(job.tables, cluster, None, job.as_of)
    except InputError as e:
        return ClusterOutcome(cluster, None, not_reported=str(e))
    report = build_report(data.image, paths=directory_paths_for(job.tables, cluster, job.explicit),
                          history=data.history)
    warnings = data.skipped
    del data
    row = FleetRow.of(cluster, report)
    if job.html is not None:
        write_html(job.html / row.page, render_html(report, title=f"kraft-jbod report · cluster {cluster}"))
    if job.keep == "json":
        kept = job.scratch / f"{index}.json"
        kept.write_text(dumps_without_floats(report_to_json(report)), encoding="utf-8")
    else:
        kept = job.scratch / f"{index}.pickle"
        with kept.open("wb") as f:
            pickle.dump(report, f, protocol=pickle.HIGHEST_PROTOCOL)
    return ClusterOutcome(cluster, row, warnings=warnings, kept=kept)


def _start_worker() -> None:
    """A fleet worker's start: it keeps a core busy by itself, beside the others, so its scans are planned on one
    (:func:`pipelines.lakehouse.tables.set_scan_partitions`); and it reads one set of tables until it ends, so each
    table's Delta log is opened once for all its clusters (:func:`pipelines.lakehouse.tables.hold_versions`)."""
    from pipelines.lakehouse.tables import hold_versions, set_scan_partitions  # noqa: PLC0415 - pyarrow/deltalake

    set_scan_partitions(1)
    hold_versions()


def default_jobs() -> int:
    """Clusters reported at once by default: one per core this process may run on."""
    return available_cores()


@contextmanager
def fleet_report(tables: Path, clusters: list[str], *, as_of: str | None, explicit: DirectoryPaths | None,
                 html: Path | None, keep: Keep, jobs: int) -> Iterator[Fleet]:
    """Report every one of ``clusters`` (``jobs`` at a time), worst first. What was kept lives in a scratch folder
    until the context ends."""
    from pipelines.lakehouse.tables import one_version  # noqa: PLC0415 - pyarrow/deltalake, as load's

    with tempfile.TemporaryDirectory(prefix="jbod-fleet-") as scratch:
        job = FleetJob(tables, as_of, explicit, html, keep, Path(scratch))
        workers = max(1, min(jobs, len(clusters)))
        if workers == 1:
            with one_version():
                outcomes = [report_cluster(job, cid, i) for i, cid in enumerate(clusters)]
        else:
            # Fresh interpreters, not forks: the caller has opened the tables already, and a fork does not carry
            # over the reader's (delta-rs') threads. Each keeps a core busy, so each plans its scans on one, and
            # each reads the tables at the versions its first cluster's reads opened (_start_worker).
            with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                     initializer=_start_worker) as pool:
                outcomes = list(pool.map(report_cluster, [job] * len(clusters), clusters, range(len(clusters))))
        rows = worst_first(o.row for o in outcomes if o.row is not None)
        by_cluster = {o.cluster: o for o in outcomes}
        yield Fleet(reported=tuple(by_cluster[r.cluster] for r in rows),
                    not_reported=tuple(o for o in outcomes if o.row is None))
