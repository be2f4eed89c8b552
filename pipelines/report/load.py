"""Getting a report's data, one seam between *load* and *build and render*: an image and a
:class:`~jbod_model.report.ReportHistory` (a :class:`ReportData`), wherever they come from.

:func:`load_from_inputs` replays metadata files (``open_inputs`` + ``StreamRunner``, requests run through the
reference controller) and feeds a :class:`~jbod_model.report.ReportTracker` as it goes; :func:`load_from_tables`
reads the Spark job's tables (``--tables DIR [--cluster C] [--as-of-offset N]``) into the same image and history
a replay of the input with the same ``--as-of-offset N`` gives: the ``records`` table holds every record replayed
— read, or written by the reference controller — with its offset, batch and time;
``pipelines.lakehouse.tables.log_entries`` gives the latest snapshot at or before N as the base image and the records
after it, which an :class:`~jbod_model.report.IncidentTracker` replays (incidents, the offline series, leaderless
partitions), while the placement clocks come from the history tables without a replay
(:func:`pending_from_tables`, :mod:`jbod_model.report_rows`). :func:`load_from_records` replays records into image
and history with the full :class:`~jbod_model.report.ReportTracker`. :func:`jbod_model.report.build_report` then
builds the report, and :mod:`pipelines.report.render` draws it.

Disks are named by path through :class:`~jbod_model.report.DirectoryPaths`: from ``--dirs`` (meta.properties
files or folders; ``--as-root`` for copies of brokers' filesystems) and, with ``--tables``, from the
``dir_inventory`` table, ``--dirs`` winning for the ids it knows (:func:`directory_paths_for`). ``jbod whatif``
and ``jbod image`` load the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
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
from jbod_model.records.metadata import NO_LEADER, PartitionChangeRecord, PartitionRecord
from jbod_model.report import (
    DirectoryPaths,
    IncidentTracker,
    LogPosition,
    PartitionKey,
    ReplicaKey,
    ReportHistory,
    ReportTracker,
    run_and_track,
)
from jbod_model.report_rows import (
    BrokerVersion,
    LeaderlessVersion,
    LevelVersion,
    ObservedBatch,
    PartitionTouch,
    PlacementVersion,
    leaderless_batches,
    leaderless_since,
    observed_batches,
    pending_since,
)
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
    from pipelines.lakehouse.tables import log_entries, replay_faults, resolve_cluster  # noqa: PLC0415 - pyarrow/deltalake

    cid = resolve_cluster(tables, cluster)
    n = resolve_as_of(tables, cid, as_of_offset, as_of)
    base, entries = log_entries(tables, cid, n)
    # The incidents and the offline series still come from a replay; the placement clocks and since when each
    # partition has been leaderless come from the history tables (jbod_model.report_rows), so the replay needs no
    # InvariantTracker.
    tracker = IncidentTracker(base if base is not None else EMPTY_IMAGE)
    tracker.feed_all(e for e in track(entries) if isinstance(e, LogEntry))
    observed = observed_from_tables(tables, cid, n)
    history = replace(tracker.history(pending_from_tables(tables, cid, observed)),
                      leaderless_since=MappingProxyType(leaderless_from_tables(tables, cid, observed)))
    stopped = tuple(f"the tables end before offset {f['offset']}, where the job's replay of cluster {cid} stopped: "
                    f"{f['message']}" for f in replay_faults(tables, cid))
    return ReportData(image=tracker.image, history=history, skipped=stopped), cid


@dataclass(frozen=True, slots=True)
class Observed:
    """The batches a replay of the ``records`` table observes as of an offset: the position of the snapshot it
    starts from (None: the log's start) and each batch after it (:func:`jbod_model.report_rows.observed_batches`)."""

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
    the latest) observes, from the records' offsets, batches, times and types alone (no ``data`` read)."""
    from pipelines.lakehouse.tables import log_positions  # noqa: PLC0415 - pyarrow/deltalake

    snapshot, positions = log_positions(tables, cluster, as_of_offset)
    return Observed(snapshot, observed_batches(
        *(positions.column(c).to_pylist() for c in ("offset", "batch_base_offset", "timestamp", "type"))))


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


def leaderless_from_tables(tables: Path, cluster: str, observed: Observed) -> dict[PartitionKey, LogPosition]:
    """Since when each partition without a leader after the ``observed`` batches has been so, as a replay's
    ``IncidentTracker.leaderless_since`` dates it (:func:`jbod_model.report_rows.leaderless_since`): the
    ``partition_history`` versions with leader -1 of the partitions that ever had one, then only the partition
    records of the batches where a still-open leaderless stretch began (their own offsets date it), decoded."""
    import pyarrow as pa  # noqa: PLC0415 - only the tables' readers need pyarrow
    import pyarrow.compute as pc  # noqa: PLC0415

    from pipelines.lakehouse.tables import ENTITIES, entity_versions, query  # noqa: PLC0415 - pyarrow/deltalake

    upto = observed.last
    if upto is None:
        return {}
    rows = entity_versions(tables, ENTITIES["partition"], cluster, upto, ["leader"], keys_where=f"leader = {NO_LEADER}")
    rows = rows.filter(pc.equal(rows.column("leader"), pa.scalar(NO_LEADER, pa.int32())))
    # Only a partition leaderless after the last batch is listed: keep only those partitions' versions (a third of
    # the partitions that ever lost their leader, at 200 k).
    keys = _partition_keys(rows.column("topic_id"), rows.column("partition_id"))
    now = pc.and_kleene(pc.less_equal(rows.column("start"), upto),
                        pc.or_kleene(pc.is_null(rows.column("end")), pc.greater(rows.column("end"), upto)))
    rows = rows.filter(pc.is_in(keys, value_set=pc.unique(keys.filter(now))))
    topics = _uuids(rows.column("topic_id"))
    versions = [LeaderlessVersion(topics[t], p, s, e) for t, p, s, e in zip(
        *(rows.column(c).to_pylist() for c in ("topic_id", "partition_id", "start", "end")), strict=True)]
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
