"""Getting a report's data, one seam between *load* and *build and render*: an image and a
:class:`~jbod_model.report.ReportHistory` (a :class:`ReportData`), wherever they come from.

:func:`load_from_inputs` replays metadata files (``open_inputs`` + ``StreamRunner``, requests run through the
reference controller) and feeds a :class:`~jbod_model.report.ReportTracker` as it goes; :func:`load_from_tables`
reads the Spark job's tables (``--tables DIR [--cluster C] [--as-of-offset N]``) into the same image and history
a replay of the input with the same ``--as-of-offset N`` gives, without replaying the log
(:func:`history_from_tables`): the image from the current and history tables, the placement clocks, leaderless
partitions and the offline series' counts from the history tables' intervals (:mod:`jbod_model.report_rows`), the
incidents from a :class:`~jbod_model.report.SparseIncidentTracker` that replays only the broker records and reads
the partitions it follows from the history tables (:class:`TablePartitions`). :func:`load_from_records` replays
records into image and history with the full :class:`~jbod_model.report.ReportTracker`.
:func:`jbod_model.report.build_report` then builds the report, and :mod:`pipelines.report.render` draws it.

Disks are named by path through :class:`~jbod_model.report.DirectoryPaths`: from ``--dirs`` (meta.properties
files or folders; ``--as-root`` for copies of brokers' filesystems) and, with ``--tables``, from the
``dir_inventory`` table, ``--dirs`` winning for the ids it knows (:func:`directory_paths_for`). ``jbod whatif``
and ``jbod image`` load the same way.
"""

from __future__ import annotations

import bisect
import itertools
from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any

from jbod_model.controller.controller import ReferenceController
from jbod_model.errors import InputError
from jbod_model.gaps import GapConsequences
from jbod_model.image import EMPTY_IMAGE, MetadataImage
from jbod_model.invariants import PLACEHOLDERS
from jbod_model.meta_properties import DirInventory, inventory
from jbod_model.metadata_version import FEATURE_NAME
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import (
    NO_LEADER,
    BrokerRegistrationChangeRecord,
    FenceBrokerRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)
from jbod_model.report import (
    NEVER,
    DirectoryPaths,
    FirstSeen,
    FollowAsks,
    HostedChange,
    LogPosition,
    PartitionKey,
    ReplicaKey,
    ReportHistory,
    ReportTracker,
    SparseIncidentTracker,
    run_and_track,
)
from jbod_model.report_rows import (
    BrokerVersion,
    LeaderlessVersion,
    LevelVersion,
    ObservedBatch,
    PartitionTouch,
    PlacementVersion,
    counts_at,
    leaderless_batches,
    leaderless_since,
    observed_batches,
    offline_series,
    pending_since,
)
from jbod_model.slots import gc_paused
from jbod_model.sources import open_inputs
from jbod_model.storage.log_reader import ReadPolicy
from jbod_model.stream import StreamEntry, StreamRunner
from jbod_model.uuid import Uuid


@dataclass(frozen=True, slots=True)
class ReportData:
    """What a report is built from, wherever it came from: the image, the history, and what the input readers had
    to skip (shown as warnings)."""

    image: MetadataImage
    history: ReportHistory | None
    skipped: tuple[str, ...] = ()
    #: Records the replay left out as consequences of skipped ranges (policy skip), and the entities now unknown.
    consequences: GapConsequences | None = None


#: Wraps the entries as they are read, e.g. to show progress (the CLI's live count on a terminal).
Track = Callable[[Iterable[StreamEntry]], Iterable[StreamEntry]]


def _untracked(entries: Iterable[StreamEntry]) -> Iterable[StreamEntry]:
    return entries


# With the collector paused, as cluster_from_tables is: the tracker's index of a 200 k-partition base image and the
# history it builds are hundreds of thousands of long-lived objects, and full passes walked them (1.8 s of a 6 s
# report).
@gc_paused()
def load_from_inputs(inputs: list[Path], *, until_offset: int | None = None, policy: ReadPolicy = "fail",
                     full_log: bool = False, track: Track = _untracked) -> ReportData:
    """Replay metadata files (a log dir, segments, a snapshot, dump text or JSONL with controller requests) and
    track the history while doing so. The history starts at the input's base image (a snapshot's, or empty)."""
    loaded = open_inputs(inputs, policy=policy, until_offset=until_offset, from_snapshot=not full_log)
    runner = StreamRunner(ReferenceController(loaded.base_image))
    tracker = ReportTracker(loaded.base_image)
    with loaded.replaying():
        run_and_track(runner, track(loaded.entries), tracker)
    return ReportData(image=runner.image, history=tracker.history(), skipped=tuple(loaded.skipped()),
                      consequences=loaded.consequences)


@gc_paused()  # see load_from_inputs
def load_from_records(entries: Iterable[LogEntry], base_image: MetadataImage = EMPTY_IMAGE) -> ReportData:
    """Replay committed records (no controller requests) from ``base_image`` and track the history: for sources
    that hold the whole log, the controller's writes included (the Spark job's ``records`` table)."""
    tracker = ReportTracker(base_image)
    tracker.feed_all(entries)
    return ReportData(image=tracker.image, history=tracker.history())


def load_from_tables(tables: Path, cluster: str | None = None, as_of_offset: int | None = None,
                     as_of: str | None = None, track: Track = _untracked) -> tuple[ReportData, str]:
    """The report's data from the Spark job's tables (the ``records`` table, see the module docstring), as of
    ``as_of_offset`` inclusive or the time ``as_of`` (None: the latest), and the cluster read. Where the job's
    replay of the cluster stopped (``replay_faults``) is passed on as a warning: the tables, and so the report,
    end before it."""
    from pipelines.lakehouse.tables import resolve_cluster  # noqa: PLC0415 - pyarrow/deltalake

    cid = resolve_cluster(tables, cluster)
    return cluster_from_tables(tables, cid, as_of_offset, as_of), cid


def cluster_from_tables(tables: Path, cid: str, as_of_offset: int | None = None,
                        as_of: str | None = None) -> ReportData:
    """:func:`load_from_tables` for a cluster known to be in the tables (a fleet's, listed once): the cluster is not
    looked up again — that reads the ``records`` table whole."""
    from pipelines.lakehouse.tables import replay_faults  # noqa: PLC0415 - pyarrow/deltalake

    n = resolve_as_of(tables, cid, as_of_offset, as_of)
    with gc_paused():
        image, history = history_from_tables(tables, cid, n)
    stopped = tuple(f"the tables end before offset {f['offset']}, where the job's replay of cluster {cid} stopped: "
                    f"{f['message']}" for f in replay_faults(tables, cid))
    return ReportData(image=image, history=history, skipped=stopped)


def history_from_tables(tables: Path, cid: str, n: int | None, *, max_closed_incidents: int | None = 1000,
                        max_series_points: int = 10_000) -> tuple[MetadataImage, ReportHistory]:
    """The image and the report's history of cluster ``cid`` as of offset ``n`` (None: the latest) without replaying
    the log: equal to what a :class:`~jbod_model.report.ReportTracker` replaying the ``records`` table gives. The
    image from the current and history tables (``metadata_image``); the placement clocks, leaderless partitions and
    the offline series' counts from the history tables' intervals (:mod:`jbod_model.report_rows`); the incidents
    by a :class:`~jbod_model.report.SparseIncidentTracker`, which replays only the broker records and reads the
    partitions it follows from ``partition_history`` (:class:`TablePartitions`).
    ``max_closed_incidents`` and ``max_series_points`` bound the history as the tracker's do."""
    from pipelines.lakehouse.tables import log_entries, metadata_image  # noqa: PLC0415 - pyarrow/deltalake

    observed = observed_from_tables(tables, cid, n)
    upto = observed.last
    # The snapshot the log starts from, if any (its image seeds the incidents open in it); the records after it,
    # a lazy iterator, are not read.
    base, _ = log_entries(tables, cid, n)
    start = base if base is not None else EMPTY_IMAGE
    tracker = SparseIncidentTracker(start, max_closed_incidents=max_closed_incidents,
                                    max_series_points=max_series_points)
    # The tracker seeded from the base image adds its first point (counted on the whole image) as the replay does.
    seed = tracker.offline_series()
    ends = [b.end for b in observed.batches]
    partitions = TablePartitions(tables, cid, upto, observed.snapshot)
    failed = tracker.run(ends, [b.first_ts for b in observed.batches], _broker_entries(tables, cid, observed),
                         partitions)
    leaderless = counts_at(ends, *partitions.leaderless_spans())
    still = partitions.leaderless_now()
    # The versions go before the offline intervals are read and the image is built: at 200 k partitions each of
    # the three is hundreds of MB (nothing else holds them).
    del partitions
    _release_memory()  # before the next read, which would otherwise grow on top of what glibc kept of them
    offline = counts_at(ends, *offline_spans(tables, cid, upto))
    series = offline_series(seed[0] if seed else None, observed.batches, offline, leaderless, failed,
                            max_series_points)
    del offline, leaderless, failed
    history = replace(tracker.history(pending_from_tables(tables, cid, observed)), offline_series=series,
                      leaderless_since=MappingProxyType(leaderless_from_tables(tables, cid, observed, still)))
    del tracker
    image = metadata_image(tables, cid, n)
    _release_memory()
    return image, history


#: The records that change a broker's registration: all an incident starts or ends with.
_BROKER_RECORDS = (RegisterBrokerRecord, BrokerRegistrationChangeRecord, UnregisterBrokerRecord, FenceBrokerRecord,
                   UnfenceBrokerRecord)


def _broker_entries(tables: Path, cluster: str, observed: Observed) -> dict[int, list[LogEntry]]:
    """The committed broker records after the snapshot by the last observed batch, by the index of the batch they
    take effect in (``applied_offset``: their own, or their transaction's end), in the order they do."""
    from pipelines.lakehouse.tables import query, record_from_row  # noqa: PLC0415 - pyarrow/deltalake

    upto = observed.last
    if upto is None or not observed.batches:
        return {}
    types = ", ".join(f"'{t.TYPE_NAME}'" for t in _BROKER_RECORDS)
    after = "" if observed.snapshot is None else f' AND "offset" > {int(observed.snapshot)}'
    rows = query(tables, "records", 'SELECT "offset", applied_offset, type, version, data, payload, source FROM t '
                                    f"WHERE cluster_id = '{cluster.replace(chr(39), chr(39) * 2)}' AND origin <> "
                                    f"'snapshot' AND type IN ({types}) AND applied_offset IS NOT NULL AND "
                                    f"applied_offset <= {int(upto)}{after}").to_pylist()
    ends = [b.end for b in observed.batches]
    out: dict[int, list[LogEntry]] = {}
    for row in sorted(rows, key=lambda r: (r["applied_offset"], r["offset"])):
        k = bisect.bisect_left(ends, row["applied_offset"])
        out.setdefault(k, []).append(LogEntry(offset=row["offset"], record=record_from_row(
            row["type"], row["version"], row["data"], row["payload"]), source=row["source"]))
    return out


class TablePartitions:
    """:class:`~jbod_model.report.PartitionHistory` from the tables: the cluster's ``partition_history`` versions
    that start by ``upto`` (read once, indexed by partition; each broker's replicas over time are indexed from them
    at the first ``hosted_change``).

    Held compactly, since at 200 k partitions there are over a million versions and millions of replica versions:
    offsets and row numbers in ``array('q')`` (8 bytes each, where a list of ints costs about 40), the repeated
    strings (topic names, directory ids) dictionary-encoded, and only the columns the incident rules read (the
    topic's name, the replicas, their directories, the ISR and the leader): no registration is ever built."""

    _COLUMNS = ("topic_name", "replicas", "isr", "leader", "directories")
    #: The list columns, in the order ``_lists`` holds them (:meth:`_holding` names them by position).
    _LISTS = ("replicas", "directories", "isr")

    def __init__(self, tables: Path, cluster: str, upto: int | None, snapshot: int | None) -> None:
        import pyarrow as pa  # noqa: PLC0415 - only the tables' readers need pyarrow
        import pyarrow.compute as pc  # noqa: PLC0415

        from pipelines.lakehouse.tables import ENTITIES, entity_version_rows  # noqa: PLC0415 - pyarrow/deltalake

        self._tables, self._cluster, self._upto, self._snapshot = tables, cluster, upto, snapshot
        bound = -1 if upto is None else upto
        # The stored rows as read, and the versions' rows among them in partition, then start order: the scalar
        # columns are taken in that order, the lists gathered from their flat values (:func:`_gathered`).
        read, rows, starts, ends = entity_version_rows(tables, ENTITIES["partition"], cluster, bound, self._COLUMNS)
        # Every list column as plain arrays (its values and each row's first index), read through numpy views
        # (:meth:`_numpy`) by the rows the rules ask for; the directory ids as indices into their distinct values.
        # Gathered first, the directories first of them, each column let go once gathered: at 2 M partitions the
        # lists are 1 GB of the 1.65 GB read (the directories' texts 0.8 GB), and gathered after the scalar
        # columns' arrays were made, each one's gathering peaked on top of those (4.9 GB).
        lists: dict[str, tuple[array[int], array[int]]] = {}
        texts: list[str] = []
        for c in sorted(self._LISTS, key=lambda c: c != "directories"):
            values, firsts, distinct = _gathered(read.column(c), rows, encoded=c == "directories")
            lists[c] = (values, firsts)
            if c == "directories":
                texts = distinct
            read = read.drop_columns([c])
        self._lists = tuple(lists[c] for c in self._LISTS)
        self._directory_ids = [Uuid.from_string(d) for d in texts]
        self._directory_index = {d: i for i, d in enumerate(self._directory_ids)}
        del lists, texts
        versions = read.select(["topic_id", "partition_id", "leader"]).take(rows).combine_chunks()
        n = versions.num_rows
        self._starts = _offsets(starts)
        self._ends = _offsets(ends)
        # Rows come ordered by partition, then start: each partition's rows are one range, found by where the key
        # differs from the previous row's (vectorised: a million versions at 200 k partitions).
        if n:
            topic, partition = versions.column("topic_id"), versions.column("partition_id")
            differs = pc.or_(pc.not_equal(topic.slice(1), topic.slice(0, n - 1)),
                             pc.not_equal(partition.slice(1), partition.slice(0, n - 1)))
            heads = pa.concat_arrays([pa.array([0], pa.int64()),
                                      pc.add(pc.indices_nonzero(differs), 1).cast(pa.int64())])
            # Each row's partition, as an index into the partitions: how many key changes precede it.
            self._key_index = _offsets(pa.concat_arrays([pa.array([0], pa.int64()), *pc.cumulative_sum(
                pc.cast(differs, pa.int64())).chunks]))
        else:
            heads, self._key_index = pa.array([], pa.int64()), array("q")
        ids = _uuids(versions.column("topic_id"))
        self._unique: list[PartitionKey] = [(ids[t], p) for t, p in zip(
            versions.column("topic_id").take(heads).to_pylist(),
            versions.column("partition_id").take(heads).to_pylist(), strict=True)]
        # Partition i's rows are firsts[i]:firsts[i + 1].
        self._firsts = _offsets(pa.concat_arrays([heads, pa.array([n], pa.int64())]))
        self._index: dict[PartitionKey, int] = {pk: i for i, pk in enumerate(self._unique)}
        # The versions without a leader, for the series' counts (leader_spans).
        no_leader = pc.equal(versions.column("leader"), pa.scalar(NO_LEADER, pa.int32()))
        self._leaderless = (_ascending(starts.filter(no_leader)), _ascending(pc.drop_null(ends.filter(no_leader))))
        # The names as indices into their distinct values (encoded as read, then taken).
        names, self._topic_names = _encoded(read.column("topic_name"))
        self._names = _ints(names.take(rows), "i")
        self._leader = _ints(versions.column("leader"), "q")
        del read, rows, starts, ends, versions, names
        _release_memory()
        # Each broker's replicas over time, made at the first ``hosted_change`` (:meth:`_index_replicas`; None until
        # then): its (version, replica) pairs, and its replicas' spans.
        self._pair_rows: Any = None
        self._pair_directories: Any = None
        self._broker_pairs: dict[int, tuple[int, int]] = {}
        self._span_starts: Any = None
        self._span_ends: Any = None
        self._broker_spans: dict[int, tuple[int, int]] = {}
        # Numpy views of the columns (:meth:`_numpy`).
        self._np_keyed: Any = None
        self._np_starts: Any = None
        self._np_ends: Any = None
        self._np_firsts: Any = None
        self._np_leader: Any = None
        self._np_names: Any = None
        self._np_base = 0
        self._np_lists: list[tuple[Any, Any]] = []
        # The batch ends :meth:`first_seen` was last asked with, as numpy, and each version's (:meth:`_batch_view`).
        self._batches: tuple[Sequence[int], Any, Any] | None = None
        # The versions' rows by their end, and those ends (:meth:`_ending_within`).
        self._np_by_end: Any = None
        self._np_sorted_ends: Any = None
        self._np_key_index: Any = None

    def hosted_change(self, broker_id: int, before: int, after: int, failing: frozenset[Uuid]) -> HostedChange:
        # Numpy over the partitions' columns: the columns of the partitions hit, without building a registration
        # (the rules over them are HostedChange's). The broker's replicas over time (:meth:`_index_replicas`) give
        # what the batch did not change: how many partitions it hosted, and which sit in a failing directory.
        import numpy as np  # noqa: PLC0415 - with pyarrow, only the tables' readers need it

        b = broker_id
        self._index_replicas()
        # The broker's replicas then: its spans that start by ``before``, less those that also end by then.
        lo, hi = self._broker_spans.get(b, (0, 0))
        hosted = (int(np.searchsorted(self._span_starts[lo:hi], before, "right"))
                  - int(np.searchsorted(self._span_ends[lo:hi], before, "right")))
        # Hit by a change: the broker's partitions whose version at ``before`` ends in the batch (replaced, or the
        # partition deleted), found among the versions by their end: as many as the batch changed, not as many as
        # the broker hosts.
        rows = self._ending_within(before, after)
        rows = rows[self._holding(b, 0, rows)[0]]
        # Hit for its directory: the broker's partitions in a directory that fails in the batch (the batch where a
        # disk fails, not every later one: this reads the broker's whole history).
        gone = [self._directory_index[d] for d in failing if d in self._directory_index]
        if gone:
            lo, hi = self._broker_pairs.get(b, (0, 0))
            held = self._pair_rows[lo:hi]
            stranded = held[(self._np_starts[held] <= before) & (self._np_ends[held] > before)
                            & np.isin(self._pair_directories[lo:hi], gone)]
            rows = np.union1d(rows, stranded)
        rows = np.sort(rows)  # in the partitions' order, as the registrations list them
        rows_after = self._rows_at(self._np_key_index[rows], after)
        exists = rows_after >= 0
        later = np.maximum(rows_after, 0)
        leader = self._np_leader
        in_isr, _ = self._holding(b, 2, rows)
        in_isr_after, _ = self._holding(b, 2, later)
        # The broker's directory of each before and after the batch: the directory beside it in the lists.
        directory = self._directory_of(b, rows)
        directory_after = np.full(len(later), -1, np.int64)
        directory_after[exists] = self._directory_of(b, later[exists])
        unique, names, topic, directory_ids = self._unique, self._topic_names, self._np_names, self._directory_ids
        handles = self._np_key_index[rows].tolist()
        return HostedChange(
            broker_id=b, hosted=hosted, keys=[unique[k] for k in handles], handles=handles,
            names=[names[t] for t in topic[rows].tolist()], directories=[directory_ids[d] for d in directory.tolist()],
            leaders=leader[rows].tolist(), in_isr=in_isr.tolist(), exists_after=exists.tolist(),
            leaders_after=np.where(exists, leader[later], NO_LEADER).tolist(),
            in_isr_after=(exists & in_isr_after).tolist(),
            directories_after=[None if d < 0 else directory_ids[d] for d in directory_after.tolist()])

    def _ending_within(self, before: int, after: int) -> Any:
        """The rows of the versions that are the state at ``before`` and end by ``after`` (in no order)."""
        import numpy as np  # noqa: PLC0415 - with pyarrow, only the tables' readers need it

        if self._np_by_end is None:
            self._np_by_end = np.argsort(self._np_ends, kind="stable")
            self._np_sorted_ends = self._np_ends[self._np_by_end]
        first, last = np.searchsorted(self._np_sorted_ends, [before, after], "right")
        rows = self._np_by_end[first:last]
        return rows[self._np_starts[rows] <= before]

    def _rows_at(self, partitions: Any, offset: int) -> Any:
        """The row of each partition's version at ``offset`` (-1: none then)."""
        import numpy as np  # noqa: PLC0415 - with pyarrow, only the tables' readers need it

        self._numpy()
        keys = partitions.astype(np.int64)
        rows = np.searchsorted(self._np_keyed, (keys << _START_BITS) + self._start_key(offset), "right") - 1
        found = rows >= self._np_firsts[keys]
        safe = np.maximum(rows, 0)
        return np.where(found & (self._np_ends[safe] > offset), rows, -1)

    def _numpy(self) -> None:
        """Numpy views of the columns (made once, at the first call that reads them as arrays)."""
        import numpy as np  # noqa: PLC0415 - with pyarrow, only the tables' readers need it

        if self._np_keyed is not None:
            return
        self._np_starts = np.frombuffer(self._starts, np.int64)
        self._np_ends = np.frombuffer(self._ends, np.int64)
        self._np_firsts = np.frombuffer(self._firsts, np.int64)
        self._np_leader = np.frombuffer(self._leader, np.int64)
        self._np_names = np.frombuffer(self._names, np.int32)
        self._np_lists = [(np.frombuffer(v, np.int32), np.frombuffer(f, np.int64)) for v, f in self._lists]
        # The rows are ordered by partition, then start: one sorted key, the partition above the start.
        self._np_base = int(self._np_starts.min()) if len(self._np_starts) else 0
        self._np_key_index = np.frombuffer(self._key_index, np.int64)
        self._np_keyed = (self._np_key_index << _START_BITS) + (self._np_starts - self._np_base)

    def _start_key(self, offset: int) -> int:
        """``offset`` as the start part of :meth:`_numpy`'s sorted keys, clamped to their range."""
        return min(max(offset - self._np_base, -1), (1 << _START_BITS) - 1)

    def _holding(self, brokers: Any, column: int, rows: Any) -> tuple[Any, Any]:
        """Whether each of ``rows`` lists its broker (``brokers``: one for all, or one per row) in list column
        ``column`` of :data:`_LISTS` (0: the replicas, 2: the ISR), and where in the column's flattened values
        (meaningless where not)."""
        import numpy as np  # noqa: PLC0415 - with pyarrow, only the tables' readers need it

        # Every item of the rows' lists at once (a handful a row), compared with the row's broker: the lists of
        # neighbouring versions lie side by side, where a search of a sorted index would jump about.
        values, firsts = self._np_lists[column]
        rows = np.asarray(rows, np.int64)
        lo = firsts[rows]
        counts = firsts[rows + 1] - lo
        owner = np.repeat(np.arange(len(rows)), counts)
        flat = np.arange(len(owner)) + np.repeat(lo - (np.cumsum(counts) - counts), counts)
        wanted = np.asarray(brokers, np.int64)
        match = np.flatnonzero(values[flat] == (wanted[owner] if wanted.ndim else wanted))
        held, where = np.zeros(len(rows), bool), np.zeros(len(rows), np.int64)
        held[owner[match]] = True
        where[owner[match]] = flat[match]
        return held, where

    def _directory_of(self, brokers: Any, rows: Any) -> Any:
        """The directory (an index into the directory ids) beside each row's broker in its replicas, -1 where the
        row does not list the broker as a replica."""
        import numpy as np  # noqa: PLC0415 - with pyarrow, only the tables' readers need it

        held, at = self._holding(brokers, 0, rows)
        (_, replica_firsts), (directory_values, directory_firsts) = self._np_lists[0], self._np_lists[1]
        if np.any(held & (directory_firsts[rows + 1] - directory_firsts[rows] != replica_firsts[rows + 1]
                          - replica_firsts[rows])):
            raise InputError(f"partition_history holds a version of cluster {self._cluster} whose directories do not "
                             "match its replicas")
        if not len(rows):
            return np.zeros(0, np.int64)
        return np.where(held, directory_values[np.where(held, directory_firsts[rows] + at - replica_firsts[rows], 0)],
                        -1)

    def _index_replicas(self) -> None:
        """Each broker's replicas over time, from the partitions' versions themselves (at the first
        :meth:`hosted_change`): every (version, replica) pair as the version's row and the replica's directory (an
        index into the directory ids), grouped by broker in the versions' order; and, for how many partitions a
        broker hosts at an offset (two searches), the starts and the ends of its replicas' spans, each sorted
        (:func:`replica_spans`). The ``replica_assignment_history`` table holds the same intervals split otherwise;
        reading it cost a second at 200 k partitions and 17 s at 2 M. The pairs are grouped by a radix sort of the
        broker ids: sorting every pair by broker and start cost two comparison sorts of 30 M pairs at 2 M partitions,
        and the reads by row in that order jumped about the columns."""
        if self._pair_rows is not None:
            return
        import numpy as np  # noqa: PLC0415 - with pyarrow, only the tables' readers need it

        self._numpy()
        (brokers, firsts), (directories, directory_firsts) = self._np_lists[0], self._np_lists[1]
        if not np.array_equal(firsts, directory_firsts):
            raise InputError(f"partition_history holds a version of cluster {self._cluster} whose directories do not "
                             "match its replicas")
        index_type = np.int32 if len(firsts) <= 1 << 31 else np.int64  # 4 bytes a pair: tens of millions at 2 M
        order = _grouping(brokers)
        rows = np.repeat(np.arange(len(firsts) - 1, dtype=index_type), np.diff(firsts))[order]
        self._pair_rows, self._pair_directories = rows, directories[order]
        brokers = brokers[order]
        del order
        self._broker_pairs = _ranges(brokers)
        self._span_starts, self._span_ends, self._broker_spans = replica_spans(
            brokers, self._np_starts[rows], self._np_ends[rows])

    def first_seen(self, asks: FollowAsks, ends: Sequence[int]) -> FirstSeen:
        # Every version of each pair's partition that is the state after some batch, at once (a few per partition):
        # the one at the pair's ``after`` if it is still the state at the next batch end, and each later one that
        # is still the state at the end of the batch it starts in. The first that shows a thing is where a
        # follow-up first sees it (the rows come in start order); the partition is gone at the end of the batch
        # its last version ends in.
        import numpy as np  # noqa: PLC0415 - with pyarrow, only the tables' readers need it

        n = len(asks)
        self._numpy()
        if not n or not len(self._np_starts) or not len(ends):  # no version, or no batch: nothing is ever seen
            return FirstSeen(*(array("q", [NEVER]) * n for _ in range(5)))
        batch_ends, seen_at = self._batch_view(ends)
        index, directory_index = self._index, self._directory_index
        # Each partition as its index here: the one hosted_change handed out with it, else looked up (-1: no version,
        # so none of its states shows anything).
        keys = np.array(asks.handles, np.int64) if len(asks.handles) == n else np.full(n, -1, np.int64)
        unknown = np.flatnonzero(keys < 0).tolist()
        if unknown:
            partitions = asks.partitions
            keys[unknown] = [index.get(partitions[i], -1) for i in unknown]
        brokers = np.array(asks.broker_ids, np.int64)
        # The pair's directory as an index into the directory ids: -1 none named, -2 one no version names.
        away_from = np.array([-1 if d is None else directory_index.get(d, -2) for d in asks.directories], np.int64)
        afters = np.array(asks.afters, np.int64)
        known = keys >= 0
        safe_keys = np.maximum(keys, 0)
        version_ends = self._np_ends
        hi = np.where(known, self._np_firsts[safe_keys + 1], 0)
        start_keys = np.clip(afters - self._np_base, -1, (1 << _START_BITS) - 1)
        later = np.where(known, np.searchsorted(self._np_keyed, (safe_keys << _START_BITS) + start_keys, "right"), 0)
        # The version at ``after``, and the first batch end after it, where that version is seen if it lasts.
        current = np.maximum(later - 1, 0)
        live = known & (later > self._np_firsts[safe_keys]) & (version_ends[current] > afters)
        following = np.searchsorted(batch_ends, afters, "right")
        next_end = np.where(following < len(batch_ends), batch_ends[np.minimum(following, len(batch_ends) - 1)],
                            _OPEN)
        current_seen = np.where(live & (version_ends[current] > next_end), next_end, _OPEN)
        # The partition's end: its last version's (an open one never ends), seen at the end of that batch.
        last = np.maximum(hi - 1, 0)
        deleted = version_ends[last]
        at = np.searchsorted(batch_ends, deleted, "left")
        gone = np.where(live & (deleted != _OPEN) & (at < len(batch_ends)),
                        batch_ends[np.minimum(at, len(batch_ends) - 1)], _OPEN)
        counts = live.astype(np.int64) + np.where(known, np.maximum(hi - later, 0), 0)
        columns = [np.full(n, NEVER, np.int64) for _ in range(4)]
        total = int(counts.sum())
        if total:
            asked = np.flatnonzero(counts)
            heads = np.cumsum(counts) - counts
            ask = np.repeat(np.arange(n), counts)
            # Each ask's rows: its current version (where live), then the later ones.
            step = np.arange(total) - heads[ask]
            rows = np.where(live[ask], current[ask] + step, later[ask] + step)
            when = np.where(live[ask] & (step == 0), current_seen[ask], seen_at[rows])
            b = brokers[ask]
            in_isr, _ = self._holding(b, 2, rows)
            directory = self._directory_of(b, rows)
            away = away_from[ask]
            for column, shown in zip(columns, (self._np_leader[rows] != NO_LEADER, in_isr, directory < 0,
                                               (directory >= 0) & (away != -1) & (directory != away)), strict=True):
                column[asked] = np.minimum.reduceat(np.where(shown, when, _OPEN), heads[asked])
        # As machine integers (the tracker keeps them so): a list made each one an integer object, millions at 2 M.
        leader, in_isr, out, off_disk, gone_at = (array("q", np.ascontiguousarray(c, np.int64).tobytes())
                                                  for c in (*columns, gone))
        return FirstSeen(leader=leader, in_isr=in_isr, out=out, off_disk=off_disk, gone=gone_at)

    def _batch_view(self, ends: Sequence[int]) -> tuple[Any, Any]:
        """The batch ends as a numpy array, and for each version the batch end at which it is the state: the end of
        the batch it starts in, if it lasts past it (:data:`_OPEN`: none, replaced inside its batch or starting
        after the last). Made once per ``ends``."""
        import numpy as np  # noqa: PLC0415 - with pyarrow, only the tables' readers need it

        if self._batches is None or self._batches[0] is not ends:
            batch_ends = np.asarray(ends, np.int64)
            at = np.searchsorted(batch_ends, self._np_starts, "left")
            end = batch_ends[np.minimum(at, len(batch_ends) - 1)]
            seen = (at < len(batch_ends)) & (self._np_ends > end)
            self._batches = (ends, batch_ends, np.where(seen, end, _OPEN))
        return self._batches[1], self._batches[2]

    def next_touches(self, keys: Iterable[PartitionKey], after: int) -> dict[PartitionKey, int]:
        import pyarrow as pa  # noqa: PLC0415 - only the tables' readers need pyarrow
        import pyarrow.compute as pc  # noqa: PLC0415

        from pipelines.lakehouse.tables import query  # noqa: PLC0415 - pyarrow/deltalake

        wanted = {f"{t}:{p}": (t, p) for t, p in keys}
        if not wanted or self._upto is None:
            return {}
        types = ", ".join(f"'{t.TYPE_NAME}'" for t in (PartitionRecord, PartitionChangeRecord))
        found = query(self._tables, "records", "SELECT applied_offset, data FROM t WHERE cluster_id = "
                                               f"'{self._cluster.replace(chr(39), chr(39) * 2)}' AND origin <> "
                                               f"'snapshot' AND type IN ({types}) AND applied_offset > {int(after)} "
                                               f"AND applied_offset <= {int(self._upto)}")
        data = found.column("data")
        names = _partition_keys(pc.struct_field(pc.extract_regex(data, _TOPIC_ID), 0),
                                pc.struct_field(pc.extract_regex(data, _PARTITION_ID), 0))
        mine = pc.is_in(names, value_set=pa.array(sorted(wanted), pa.string()))
        out: dict[PartitionKey, int] = {}
        for name, applied in zip(names.filter(mine).to_pylist(), found.column("applied_offset").filter(
                mine).to_pylist(), strict=True):
            pk = wanted[name]
            if pk not in out or applied < out[pk]:
                out[pk] = applied
        return out

    def leaderless_spans(self) -> tuple[array[int], array[int]]:
        """The starts, and the ends of those that ended, of the versions without a leader, each ascending."""
        return self._leaderless

    def leaderless_now(self) -> list[LeaderlessVersion]:
        """The versions without a leader (leader -1) of each partition that has none after ``upto``, by partition,
        then start: what :func:`leaderless_from_tables` dates them from. Taken from the versions read here, not read
        again: ``partition_history`` filtered on the leader was a second scan of the same versions (0.35 s of the
        200 k report, a fleet cluster's 84 ms)."""
        import numpy as np  # noqa: PLC0415 - with pyarrow, only the tables' readers need it

        if self._upto is None or not len(self._leader):
            return []
        self._numpy()
        rows = np.flatnonzero(self._np_leader == NO_LEADER)
        keys, starts, ends = self._np_key_index[rows], self._np_starts[rows], self._np_ends[rows]
        # Leaderless after ``upto``: a version without a leader that started by then (all here did) and had not
        # ended by then (an open end is _OPEN, later than any offset).
        wanted = np.isin(keys, keys[ends > self._upto])
        unique = self._unique
        return [LeaderlessVersion(unique[k][0], unique[k][1], s, None if e == _OPEN else e) for k, s, e in zip(
            keys[wanted].tolist(), starts[wanted].tolist(), ends[wanted].tolist(), strict=True)]


def _grouping(groups: Any) -> Any:
    """The order that groups ``groups`` (small integers, e.g. broker ids), ascending, keeping each group's items in
    their order: numpy's stable sort, a radix sort where the values span at most :data:`_RADIX_SPAN` (as 16-bit
    integers), linear in the items."""
    import numpy as np  # noqa: PLC0415 - with pyarrow, only the tables' readers need it

    if not len(groups):
        return np.zeros(0, np.int64)
    low = int(groups.min())
    if int(groups.max()) - low < _RADIX_SPAN:
        return np.argsort((groups - low).astype(np.uint16), kind="stable")
    return np.argsort(groups, kind="stable")


def replica_spans(brokers: Any, starts: Any, ends: Any) -> tuple[Any, Any, dict[int, tuple[int, int]]]:
    """How many replicas each broker holds at any offset, from its replicas' intervals (numpy arrays, one item per
    interval, each broker's side by side): the starts and the ends, sorted within each broker's range of both (its
    count at offset ``t`` is how many of its starts are ``<= t`` less how many of its ends are), and those ranges by
    broker. An interval that starts where the broker's one before it ends continues that one's span, and both leave
    the arrays: an equal end and start cancel in every count, so a partition's version that changes only its leader
    or ISR adds nothing to sort."""
    import numpy as np  # noqa: PLC0415 - with pyarrow, only the tables' readers need it

    n = len(brokers)
    if not n:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), {}
    joined = np.zeros(n, bool)
    joined[1:] = (starts[1:] == ends[:-1]) & (brokers[1:] == brokers[:-1])  # never across brokers
    opens = ~joined
    closes = np.ones(n, bool)
    closes[:-1] = opens[1:]
    span_starts, span_ends = starts[opens], ends[closes]
    # A span has one start and one end: the broker's spans are one range of both.
    span_brokers = brokers[opens]
    ranges = _ranges(span_brokers)
    for lo, hi in ranges.values():
        span_starts[lo:hi].sort()
        span_ends[lo:hi].sort()
    return span_starts, span_ends, ranges


def _ranges(groups: Any) -> dict[int, tuple[int, int]]:
    """Each value's range in ``groups`` (a numpy array, grouped: each value's items side by side)."""
    import numpy as np  # noqa: PLC0415 - with pyarrow, only the tables' readers need it

    if not len(groups):
        return {}
    bounds = [0, *(np.flatnonzero(groups[1:] != groups[:-1]) + 1).tolist(), len(groups)]
    return {int(groups[lo]): (lo, hi) for lo, hi in itertools.pairwise(bounds)}


def _release_memory() -> None:
    """:func:`pipelines.lakehouse.tables.release_memory`, imported when first needed (pyarrow, deltalake)."""
    from pipelines.lakehouse.tables import release_memory  # noqa: PLC0415 - pyarrow/deltalake

    release_memory()


#: The widest span of values :func:`_grouping` sorts as 16-bit integers (numpy's stable sort of those is a radix sort);
#: wider ones (broker ids far apart) take a comparison sort.
_RADIX_SPAN = 1 << 16
#: An open version's end in :class:`TablePartitions`' offset arrays: later than every offset, as :data:`NEVER` (what
#: :meth:`TablePartitions.first_seen` gives where nothing is seen) is — an open end is never seen ending.
_OPEN = NEVER
#: How many low bits of :meth:`TablePartitions._rows_at`'s sorted key hold a version's start (from the first
#: start): offsets up to 2^40, partitions up to 2^23.
_START_BITS = 40


def _offsets(column: Any) -> array[int]:
    """An integer Arrow column (nulls: :data:`_OPEN`) as ``array('q')``: 8 bytes an item, where a list of a million
    Python ints costs some 40 MB, and ``bisect`` searches it as fast."""
    import pyarrow as pa  # noqa: PLC0415 - only the tables' readers need pyarrow
    import pyarrow.compute as pc  # noqa: PLC0415

    out = array("q")
    if len(column):
        out.frombytes(pc.fill_null(column, _OPEN).cast(pa.int64()).to_numpy().tobytes())
    return out


def _shared_texts(column: Any) -> list[str]:
    """A text column as a list whose equal texts are one object (a few distinct values over millions of rows)."""
    import numpy as np  # noqa: PLC0415 - with pyarrow, only the tables' readers need it
    import pyarrow.compute as pc  # noqa: PLC0415 - only the tables' readers need pyarrow

    if column.null_count:
        return list(column.to_pylist())
    encoded = pc.dictionary_encode(column.combine_chunks() if hasattr(column, "combine_chunks") else column)
    texts = np.array(encoded.dictionary.to_pylist(), dtype=object)
    return list(texts[encoded.indices.to_numpy(zero_copy_only=False)].tolist())


def _ints(column: Any, typecode: str) -> array[int]:
    """An integer Arrow column without nulls as an ``array`` of ``typecode`` ('i': 32-bit, 'q': 64-bit)."""
    import pyarrow as pa  # noqa: PLC0415 - only the tables' readers need pyarrow

    out = array(typecode)
    if len(column):
        if column.null_count:
            raise InputError("partition_history holds a null where a partition registration needs a value")
        out.frombytes(column.cast(pa.int32() if typecode == "i" else pa.int64()).to_numpy().tobytes())
    return out


def _gathered(column: Any, rows: Any, *, encoded: bool = False) -> tuple[array[int], array[int], list[str]]:
    """Rows ``rows`` (row numbers, in the order wanted) of a list column as their values (``array('i')``) and where
    each row's values start, with the end as the last item (``array('q')``): row ``i`` of ``rows`` is
    ``values[starts[i]:starts[i + 1]]``. A list of integers gives its integers; with ``encoded`` a list of strings
    gives each string's index into its distinct strings, returned third (empty otherwise). Gathered with numpy from
    the column's values chunk by chunk, never a contiguous copy of the lists: Arrow's take of the lists cost a second
    at 200 k partitions, and a copy of every list at 2 M."""
    import numpy as np  # noqa: PLC0415 - with pyarrow, only the tables' readers need it
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.compute as pc  # noqa: PLC0415

    picked = np.asarray(rows, np.int64)
    # The rows not picked (a removed partition's last row) may hold nulls.
    if column.null_count and pc.is_null(column).to_numpy(zero_copy_only=False)[picked].any():
        raise InputError("partition_history holds a null list where a partition registration needs one")
    # The column's offsets from 0 over its values, each chunk's values the range its offsets span.
    heads, pieces, base = [np.zeros(1, np.int64)], [], 0
    for chunk in column.chunks if isinstance(column, pa.ChunkedArray) else [column]:
        bounds = chunk.offsets.to_numpy().astype(np.int64)
        heads.append(bounds[1:] - bounds[0] + base)
        base += int(bounds[-1] - bounds[0])
        pieces.append(chunk.values.slice(int(bounds[0]), int(bounds[-1] - bounds[0])))
    offsets = np.concatenate(heads)
    distinct: list[str] = []
    if encoded:
        # One dictionary over every chunk (Arrow encodes a chunked array with a shared one).
        codes = pc.dictionary_encode(pa.chunked_array(pieces, column.type.value_type))
        distinct = codes.chunk(0).dictionary.to_pylist() if codes.num_chunks else []
        pieces = [c.indices for c in codes.chunks]
    lo = offsets[picked]
    counts = offsets[picked + 1] - lo
    starts = np.zeros(len(picked) + 1, np.int64)
    np.cumsum(counts, out=starts[1:])
    # Item j of the output is item (lo - starts)[row] + j of the column's values, row being the one j falls in.
    gather = np.repeat(lo - starts[:-1], counts)
    gather += np.arange(len(gather), dtype=np.int64)
    if any(p.null_count for p in pieces) and np.concatenate(
            [p.is_null().to_numpy(zero_copy_only=False) for p in pieces])[gather].any():
        raise InputError("partition_history holds a null item in a list where a partition registration needs one")
    values = np.concatenate([p.to_numpy(zero_copy_only=False) for p in pieces]) if pieces else np.zeros(0, np.int32)
    out, firsts = array("i"), array("q")
    out.frombytes(values[gather].astype(np.int32, copy=False).tobytes())
    firsts.frombytes(starts.tobytes())
    return out, firsts, distinct


def _ascending(column: Any) -> array[int]:
    """An integer Arrow column without nulls, sorted, as ``array('q')`` — sorted by numpy, in place in the copy the
    array is made from (Arrow's sort gives indices, stably, and a take: twice the time for ten million offsets)."""
    import numpy as np  # noqa: PLC0415 - with pyarrow, only the tables' readers need it
    import pyarrow as pa  # noqa: PLC0415

    out = array("q")
    if len(column):
        values = (column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column).cast(pa.int64())
        ordered = np.array(values.to_numpy(zero_copy_only=False), dtype=np.int64)
        ordered.sort()
        out.frombytes(ordered.tobytes())
    return out


def _encoded(column: Any) -> tuple[Any, list[str]]:
    """A string column without nulls as ``int32`` indices into its distinct strings, and those strings."""
    import pyarrow as pa  # noqa: PLC0415 - only the tables' readers need pyarrow
    import pyarrow.compute as pc  # noqa: PLC0415

    encoded = pc.dictionary_encode(column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column)
    return encoded.indices, encoded.dictionary.to_pylist()


def offline_spans(tables: Path, cluster: str, upto: int | None) -> tuple[array[int], array[int]]:
    """The starts, and the ends of those that ended, of the cluster's ``offline_replicas`` intervals that start by
    ``upto`` (None: all), each ascending: millions at 200 k partitions (every fencing takes a broker's replicas
    offline), so sorted by Arrow and held as ``array('q')``."""
    import pyarrow.compute as pc  # noqa: PLC0415 - only the tables' readers need pyarrow

    from pipelines.lakehouse.tables import ENTITIES, version_spans  # noqa: PLC0415 - pyarrow/deltalake

    starts, ends = version_spans(tables, ENTITIES["offline"], cluster, upto)
    spans = _ascending(starts), _ascending(pc.drop_null(ends))
    del starts, ends
    _release_memory()
    return spans


def offline_curve(tables: Path, cluster: str, upto: int | None = None) -> tuple[list[int], list[int]]:
    """The cluster's offline replicas over time: each offset by ``upto`` (None: the last) at which their number
    changes, and the number after it — :func:`~jbod_model.report_rows.counts_at` of the ``offline_replicas``
    intervals, as the report's offline series counts them, so the count at any offset N is the last one at an
    offset ≤ N. What a plot of them needs, without the millions of intervals as rows (the notebooks')."""
    import numpy as np  # noqa: PLC0415 - with pyarrow, only the tables' readers need it

    starts, ends = offline_spans(tables, cluster, upto)
    # The arrays' own buffers (int64): no Python int per interval. Both are sorted, so their union is a merge — a
    # stable sort of the two runs, which finds them (``np.union1d`` sorted the 18.6 M offsets of the 2 M-partition
    # cluster afresh: 2.0 s, 0.18 s this way) — then each offset once.
    points = np.concatenate((np.frombuffer(starts, dtype=np.int64), np.frombuffer(ends, dtype=np.int64)))
    points.sort(kind="stable")
    if len(points):
        first = np.empty(len(points), dtype=bool)
        first[0] = True
        np.not_equal(points[1:], points[:-1], out=first[1:])
        points = points[first]
    if upto is not None:
        points = points[points <= upto]  # an interval's end after ``upto`` is kept as stored
    offsets = points.tolist()
    return offsets, counts_at(offsets, starts, ends)


@dataclass(frozen=True, slots=True)
class Observed:
    """The batches a replay of the ``records`` table observes as of an offset: the position of the snapshot it
    starts from (None: the log's start) and each batch after it where a report's history can change — the idle
    batches, NoOps alone, left out but for the few that date it (:func:`jbod_model.report_rows.observed_batches`
    with ``changes_only``)."""

    snapshot: int | None
    batches: list[ObservedBatch]

    @property
    def base(self) -> LogPosition | None:
        return None if self.snapshot is None else LogPosition(self.snapshot)

    @property
    def last(self) -> int | None:
        """The last offset a replay has seen: the last batch's end, else the snapshot's (None: nothing)."""
        return self.batches[-1].end if self.batches else self.snapshot


def observed_from_tables(tables: Path, cluster: str, as_of_offset: int | None) -> Observed:
    """The batches a replay of the cluster's ``records`` table from the latest snapshot by ``as_of_offset`` (None:
    the latest) observes, from the records' offsets, batches, times and types alone (no ``data`` read); of the idle
    ones only those a report's history is dated by (:class:`Observed`)."""
    from pipelines.lakehouse.tables import log_positions  # noqa: PLC0415 - pyarrow/deltalake

    snapshot, positions = log_positions(tables, cluster, as_of_offset)
    applied = positions.column("applied_offset")
    # Millions of rows at 2 M partitions: the integer columns as ``array`` (8 bytes a row, where a list holds an int
    # object of 32 more) unless they hold nulls, and each type's name one shared string (a list of them made one
    # object a row: 4 GB for the four columns at 2 M).
    offsets, bases, stamps = (_ints(column, "q") if not column.null_count else column.to_pylist()
                              for column in (positions.column(c) for c in ("offset", "batch_base_offset",
                                                                           "timestamp")))
    types = _shared_texts(positions.column("type"))
    # Most logs have no row that never took effect (an aborted or interrupted transaction's): then none is looked at.
    observed = Observed(snapshot, observed_batches(offsets, bases, stamps, types,
                                                   applied.to_pylist() if applied.null_count else None,
                                                   changes_only=True))
    del offsets, bases, stamps, types
    del positions
    _release_memory()
    return observed


def pending_from_tables(tables: Path, cluster: str, observed: Observed) -> dict[ReplicaKey, LogPosition]:
    """Since when each placement has been pending after the ``observed`` batches, as a replay of the ``records``
    table tracks it (``InvariantTracker.pending_placements``), from the history tables
    (:func:`jbod_model.report_rows.pending_since`): only the cluster's rows that start by the last batch and the
    columns needed are read, no record is decoded."""
    import pyarrow as pa  # noqa: PLC0415 - only the tables' readers need pyarrow
    import pyarrow.compute as pc  # noqa: PLC0415

    from pipelines.lakehouse.tables import ENTITIES, entity_versions  # noqa: PLC0415 - pyarrow/deltalake

    upto = observed.last
    if upto is None:
        return {}
    # Only a placeholder version can make a placement pending: read the versions of the replicas that had one (all
    # of each, for the ends), then keep those.
    placeholders = [str(d) for d in PLACEHOLDERS]
    replicas = entity_versions(tables, ENTITIES["replica"], cluster, upto, ["directory"],
                               keys_where="directory IN (" + ", ".join(f"'{d}'" for d in placeholders) + ")")
    replicas = replicas.filter(pc.is_in(replicas.column("directory"), value_set=pa.array(placeholders, pa.string())))
    brokers = entity_versions(tables, ENTITIES["broker"], cluster, upto, ["fenced"])
    levels = entity_versions(tables, ENTITIES["feature"], cluster, upto, ["level"], where=f"name = '{FEATURE_NAME}'")
    return pending_since(
        observed.base, [LogPosition(b.end, b.last_ts) for b in observed.batches],
        (PlacementVersion(Uuid.from_string(t), p, b, Uuid.from_string(d), s, e) for t, p, b, d, s, e in zip(
            *(replicas.column(c).to_pylist()
              for c in ("topic_id", "partition_id", "broker_id", "directory", "start", "end")), strict=True)),
        (BrokerVersion(b, f, s, e) for b, f, s, e in zip(
            *(brokers.column(c).to_pylist() for c in ("broker_id", "fenced", "start", "end")), strict=True)),
        (LevelVersion(v, s, e) for v, s, e in zip(
            *(levels.column(c).to_pylist() for c in ("level", "start", "end")), strict=True)))


#: The partition a PartitionRecord's or PartitionChangeRecord's ``data`` (kafka-dump-log's JSON) names: two
#: top-level fields (neither record has a nested object with the same name).
_TOPIC_ID = r'"topicId":\s*"(?P<topic>[^"]*)"'
_PARTITION_ID = r'"partitionId":\s*(?P<partition>-?[0-9]+)'
#: How many batches' ranges one query of the ``records`` table names (a longer OR is slower to plan than to scan).
_RANGES_PER_QUERY = 500


def leaderless_from_tables(tables: Path, cluster: str, observed: Observed, versions: Sequence[LeaderlessVersion],
                           ) -> dict[PartitionKey, LogPosition]:
    """Since when each partition without a leader after the ``observed`` batches has been so, as a replay's
    ``IncidentTracker.leaderless_since`` dates it (:func:`jbod_model.report_rows.leaderless_since`): from
    ``versions``, the ``partition_history`` versions with leader -1 of those partitions
    (:meth:`TablePartitions.leaderless_now`), then only the partition records of the batches where a still-open
    leaderless stretch began (their own offsets date it), decoded."""
    import pyarrow as pa  # noqa: PLC0415 - only the tables' readers need pyarrow
    import pyarrow.compute as pc  # noqa: PLC0415

    from pipelines.lakehouse.tables import query  # noqa: PLC0415 - pyarrow/deltalake

    if observed.last is None:
        return {}
    ends = [b.end for b in observed.batches]
    starts = leaderless_batches(observed.base, ends, versions)
    wanted = sorted({k for k in starts.values() if k is not None})
    starting = pa.array(sorted(f"{t}:{p}" for (t, p), k in starts.items() if k is not None), pa.string())
    touches: list[PartitionTouch] = []
    quoted = cluster.replace("'", "''")
    types = ", ".join(f"'{t.TYPE_NAME}'" for t in (PartitionRecord, PartitionChangeRecord))
    for i in range(0, len(wanted), _RANGES_PER_QUERY):
        ranges = " OR ".join(
            f"(applied_offset <= {ends[k]}" + ("" if k == 0 and observed.snapshot is None
                                               else f" AND applied_offset > {ends[k - 1] if k else observed.snapshot}")
            + ")" for k in wanted[i:i + _RANGES_PER_QUERY])
        found = query(tables, "records", 'SELECT "offset", applied_offset, data FROM t '
                                         f"WHERE cluster_id = '{quoted}' AND origin <> 'snapshot' AND type IN "
                                         f"({types}) AND ({ranges})")
        # Only the partition of each record is needed, and tens of thousands of them are (a broker's fencing
        # touches every partition it led): read its two top-level fields out of the JSON text in one vectorised
        # pass rather than decoding every record.
        data = found.column("data")
        topic = pc.struct_field(pc.extract_regex(data, _TOPIC_ID), 0)
        partition = pc.struct_field(pc.extract_regex(data, _PARTITION_ID), 0)
        if found.num_rows and (pc.any(pc.is_null(topic)).as_py() or pc.any(pc.is_null(partition)).as_py()):
            raise InputError("a PartitionRecord or PartitionChangeRecord row of the records table names no topicId or "
                             "partitionId in its data")
        # The records on partitions that start no stretch are many (a fencing's batch touches thousands): drop them.
        mine = pc.is_in(_partition_keys(topic, partition), value_set=starting)
        topic, partition, found = topic.filter(mine), partition.filter(mine), found.filter(mine)
        ids = _uuids(topic)
        touches.extend(PartitionTouch(ids[t], int(p), o, a) for t, p, o, a in zip(
            topic.to_pylist(), partition.to_pylist(), found.column("offset").to_pylist(),
            found.column("applied_offset").to_pylist(), strict=True))
    return leaderless_since(observed.base, observed.batches, starts, touches)


def _partition_keys(topics: Any, partitions: Any) -> Any:
    """``topic-id:partition`` strings of two columns (the partition as a number or as its digits): one Arrow
    column to match partitions by."""
    import pyarrow as pa  # noqa: PLC0415 - only the tables' readers need pyarrow
    import pyarrow.compute as pc  # noqa: PLC0415

    return pc.binary_join_element_wise(topics, pc.cast(partitions, pa.string()), ":")


def _uuids(column: Any) -> dict[str, Uuid]:
    """Each distinct id of a string column (a table's topic ids: a few hundred topics over millions of rows),
    parsed once."""
    import pyarrow.compute as pc  # noqa: PLC0415 - only the tables' readers need pyarrow

    return {s: Uuid.from_string(s) for s in pc.unique(column).to_pylist() if s is not None}


def load_paths(dirs: list[Path] | None, *, as_root: bool = False,
               ) -> tuple[DirectoryPaths | None, DirInventory | None]:
    """The Uuid → path join from meta.properties files or folders holding them (``jbod dirs`` reads the same);
    with ``as_root`` each folder is a copy of one broker's filesystem root (paths as the broker sees them)."""
    if not dirs:
        return None, None
    inv = inventory(dirs, as_root=as_root)
    if not inv.rows:
        raise InputError(f"no meta.properties found under {', '.join(str(d) for d in dirs)}")
    return DirectoryPaths.from_inventory(inv.rows), inv


def directory_paths_for(tables: Path | None, cluster: str | None, explicit: DirectoryPaths | None,
                        ) -> DirectoryPaths | None:
    """The paths a command names disks with: ``dir_inventory``'s for the cluster when reading tables, with the
    explicit ``--dirs`` on top (they win for the ids they know)."""
    if tables is None or cluster is None:
        return explicit
    from pipelines.lakehouse.tables import directory_paths  # noqa: PLC0415 - pyarrow/deltalake

    stored = directory_paths(tables, cluster)
    if stored is None:
        return explicit
    return stored if explicit is None else stored.overlay(explicit)


def parse_time(text: str) -> datetime:
    """An ISO-8601 time (``2026-11-21T03:00``, ``2026-11-21 03:00:00+01:00``, ``…Z``); without an offset it is
    UTC, as Kafka's batch times are."""
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InputError(f"--as-of takes an ISO-8601 time such as 2026-11-21T03:00Z, not {text!r}") from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def resolve_as_of(tables: Path, cluster: str, as_of_offset: int | None, as_of: str | None) -> int | None:
    """``--as-of-offset N`` or ``--as-of TIME`` (the last offset that took effect by then), at most one."""
    if as_of is None:
        return as_of_offset
    if as_of_offset is not None:
        raise InputError("give --as-of-offset or --as-of, not both")
    from pipelines.lakehouse.tables import offset_at_time  # noqa: PLC0415 - pyarrow/deltalake

    return offset_at_time(tables, cluster, parse_time(as_of))
