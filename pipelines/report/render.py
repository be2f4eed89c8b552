"""Renderers of a :class:`jbod_model.report.JbodReport`: rich tables for the terminal, JSON (the stable shape of
docs/report-json.md), and one self-contained HTML file (inline CSS, plots as inline PNG) to attach to an incident.

They format what ``jbod_model.report`` computed and decide nothing: which replica is offline, why, since when, which
disk a Uuid is, what a timeline line says — all of that is the model's, so the terminal, the JSON and the HTML can
never disagree. Plots use matplotlib's object API on the Agg canvas (no pyplot state, no display needed).
"""

from __future__ import annotations

import base64
import io
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar

import jinja2
from rich.console import Console

from jbod_model.errors import InputError
from jbod_model.records.json_codec import PIECE_ROWS, Slices
from jbod_model.report import (
    AffectedPartition,
    BrokerState,
    DirectoryRef,
    DiskStat,
    DiskState,
    EventKind,
    Incident,
    IncidentRow,
    JbodReport,
    LogPosition,
    OfflineGroup,
    OfflineReplica,
    PartitionRef,
    PartitionStatus,
    ReportSummary,
    TimelineEvent,
    format_duration_ms,
    format_partitions,
)
from jbod_model.slots import gc_paused, gc_paused_iteration
from jbod_model.uuid import Uuid
from pipelines.report.wording import FIRST_NAMES, counted, split_long

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: Bumped only when a key of docs/report-json.md is renamed or removed (adding keys keeps the version).
REPORT_JSON_VERSION: Final = 1
#: Partitions a terminal cell lists before "and N more" (the JSON lists them all, the HTML behind <details>).
TERMINAL_PARTITIONS: Final = 20
#: Rows an HTML table shows before the rest go behind a ``<details>`` element (the heading keeps the count): a
#: failed broker of a 200 k-partition cluster leaves thousands of leaderless partitions, a long log thousands of
#: timeline events, and a page of 100,000 table rows is neither readable nor quick to open.
FIRST_ROWS: Final = 25

class RowTable(Protocol):
    """A table :func:`render_terminal` fills and prints (the CLI's :class:`pipelines.cli.text_table.TextTable`)."""

    def add_row(self, *cells: str) -> None: ...


TableFactory = Callable[..., RowTable]


# ---------------------------------------------------------------------------------------------------------------
# Small formatters shared by every renderer


def format_timestamp(ms: int | None) -> str:
    """UTC, to the second: an incident review compares times across hosts."""
    if ms is None:
        return ""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def format_position(pos: LogPosition | None) -> str:
    """``offset 32`` or ``offset 32 · 2024-05-01 12:00:03 UTC``; ``—`` when unknown."""
    if pos is None:
        return "—"
    when = format_timestamp(pos.timestamp)
    return f"offset {pos.offset}" + (f" · {when}" if when else "")


def format_since(pos: LogPosition) -> str:
    """Where a history starts: ``the start of the log`` for offset -1 (nothing replayed before it), else
    :func:`format_position`."""
    return "the start of the log" if pos.offset < 0 else format_position(pos)


def format_age(offsets: int | None, ms: int | None) -> str:
    if offsets is None:
        return "unknown"
    text = f"{offsets} offset{'s' if offsets != 1 else ''}"
    return text if ms is None else f"{text} ({format_duration_ms(ms)})"


def _ids(values: Sequence[int]) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"


def _offline_labels(replicas: Sequence[OfflineReplica]) -> str:
    return "; ".join(f"{r.directory.label if r.directory.path else f'broker {r.broker_id} {r.directory.label}'}: "
                     f"{r.reason.value}" for r in replicas)


def short_directory(ref: DirectoryRef, width: int = 18) -> str:
    """A directory in a plot cell: its path (the tail when long), else the first characters of its Uuid."""
    if ref.path:
        if len(ref.path) <= width:
            return ref.path
        # Keep whole trailing components (…/broker-2/data-1): the end of a mount path is what tells disks apart.
        tail = ""
        for part in reversed(ref.path.rstrip("/").split("/")):
            if len(tail) + len(part) + 1 > width - 1 and tail:
                break
            tail = f"/{part}{tail}"
        return "…" + tail if len(tail) <= width else "…" + ref.path[-(width - 1):]
    text = ref.label
    return text if len(text) <= 10 else text[:8] + "…"


# ---------------------------------------------------------------------------------------------------------------
# JSON (docs/report-json.md)


def _pos(pos: LogPosition | None) -> dict[str, Any] | None:
    return None if pos is None else {"offset": pos.offset, "timestamp": pos.timestamp}


def _dir(ref: DirectoryRef | None) -> dict[str, Any] | None:
    if ref is None:
        return None
    return {"directoryId": str(ref.directory), "state": ref.state.value, "brokerId": ref.broker_id,
            "nodeId": ref.node_id, "path": ref.path, "label": ref.label}


def _part(ref: PartitionRef) -> dict[str, Any]:
    return {"topicId": str(ref.topic_id), "topicName": ref.topic_name, "partitionId": ref.partition_id}


def _status(s: PartitionStatus) -> dict[str, Any]:
    return {**_part(s.partition), "leader": s.leader, "replicas": list(s.replicas), "isr": list(s.isr),
            "eligibleLeaderReplicas": list(s.elr), "minIsr": s.min_isr,
            "offlineReplicas": [{"brokerId": r.broker_id, "directory": _dir(r.directory), "reason": r.reason.value,
                                 "inIsr": r.in_isr} for r in s.offline_replicas],
            "leaderlessSince": _pos(s.leaderless_since)}


def _incident(i: Incident) -> list[dict[str, Any]]:
    # One dict per partition, :func:`_part`'s keys first, written out: a disk's incident lists every partition it
    # held (633 k rows in a 200 k cluster's report), and a merged _part dict and four calls each cost 2.5× as much
    # (docs/performance.md, "Image and what-if within the goal").
    # What repeats within an incident is made once: a topic id's text (a disk holds partitions of few topics; Uuid
    # remembers its text too, but asking it is a Python call a row), and each position's object (a disk's replicas
    # move off it in a few batches) — by the position's id, which stays its own while the incident, and so the
    # position, lives.
    rows = []
    ids: dict[Uuid, str] = {}
    made: dict[int, dict[str, Any]] = {}

    def pos(at: LogPosition) -> dict[str, Any]:
        made[id(at)] = out = {"offset": at.offset, "timestamp": at.timestamp}
        return out

    for p in i.partitions:
        ref, restored, back, moved, deleted = p.partition, p.leader_restored, p.isr_restored, p.moved, p.deleted
        topic = ids.get(ref.topic_id)
        if topic is None:
            topic = ids[ref.topic_id] = str(ref.topic_id)
        rows.append({"topicId": topic, "topicName": ref.topic_name, "partitionId": ref.partition_id,
                     "lostLeadership": p.lost_leadership, "lostIsr": p.lost_isr, "leaderless": p.leaderless,
                     "leaderRestored": None if restored is None else made.get(id(restored)) or pos(restored),
                     "isrRestored": None if back is None else made.get(id(back)) or pos(back),
                     "moved": None if moved is None else made.get(id(moved)) or pos(moved),
                     "deleted": None if deleted is None else made.get(id(deleted)) or pos(deleted)})
    return rows


def timeline_json(report: JbodReport, *, partitions: bool = True) -> list[dict[str, Any]]:
    """The report's timeline as :func:`report_to_json` gives it (``timeline``), without the rest of the document —
    which at 2 M partitions is gigabytes of offline replicas and incidents' partitions (the incident notebook's).
    ``partitions=False``: each event's ``partitionCount`` instead of its ``partitions`` — a disk's failure names
    each of its partitions, hundreds of thousands at 2 M (47 s to list them all in the notebook)."""
    return [_event(e, partitions) for e in report.timeline]


def _event(e: TimelineEvent, partitions: bool = True) -> dict[str, Any]:
    return {"offset": e.at.offset, "timestamp": e.at.timestamp, "kind": e.kind.value, "incidentId": e.incident_id,
            "brokerId": e.broker_id, "directory": _dir(e.directory),
            **({"partitions": [_part(p) for p in e.partitions]} if partitions else
               {"partitionCount": len(e.partitions)}),
            "summary": e.summary}


def _offline_group(g: OfflineGroup) -> dict[str, Any]:
    return {"brokerId": g.broker_id, "directory": _dir(g.directory), "reasons": [r.value for r in g.reasons],
            "incidentId": g.incident_id, "since": _pos(g.since),
            "replicas": [{**_part(r.partition), "reason": r.reason.value, "inIsr": r.in_isr} for r in g.replicas]}


def _incident_row(r: IncidentRow) -> dict[str, Any]:
    return {"id": r.incident.id, "kind": r.incident.kind.value, "brokerId": r.incident.broker_id,
            "directory": _dir(r.directory), "trigger": r.incident.trigger.value, "title": r.title,
            "started": _pos(r.incident.started), "ended": _pos(r.incident.ended),
            "resolution": r.incident.resolution.value if r.incident.resolution else None,
            "durationOffsets": r.duration_offsets, "durationMs": r.duration_ms,
            "replicasOffline": r.incident.replicas_offline, "partitions": _incident(r.incident)}


#: How many of a long list's items one slice of a sliced document makes (:func:`report_to_json`): an incident or
#: an offline disk lists every partition it holds, tens of thousands at 2 M partitions, so those come one a slice.
_SLICE_ITEMS: Final = {"offlineReplicas": 1, "incidents": 1, "leaderlessPartitions": PIECE_ROWS,
                       "timeline": PIECE_ROWS}


_Item = TypeVar("_Item")


def _rows(items: Sequence[_Item], row: Callable[[_Item], dict[str, Any]], per_slice: int | None,
          ) -> list[dict[str, Any]] | Slices:
    """``row`` of each item: a list, or with ``per_slice`` :class:`Slices` of that many items' rows, each made with
    the cyclic collector paused when the writer asks for it."""
    if per_slice is None:
        return [row(i) for i in items]
    return Slices(gc_paused_iteration([row(i) for i in items[lo:lo + per_slice]]
                                      for lo in range(0, len(items), per_slice)))


@gc_paused()  # the JSON rows of a 200 k report's incidents are millions of objects (see build_report)
def report_to_json(report: JbodReport, *, sliced: bool = False) -> dict[str, Any]:
    """The report as JSON-ready values, in the shape docs/report-json.md documents. ``sliced``: its long lists
    (offline replicas, leaderless partitions, incidents, timeline) as :class:`~jbod_model.records.json_codec.Slices`
    made while :func:`~jbod_model.records.json_codec.dumps_pieces` writes them, for a document written once and
    never held whole (the report must outlive the writing): at 2 M partitions those rows are millions of dicts,
    gigabytes beside the report they are made from."""
    s = report.summary
    inv = report.inventory
    per = _SLICE_ITEMS if sliced else {}
    return {
        "reportVersion": REPORT_JSON_VERSION,
        "asOf": _pos(report.as_of),
        "historySince": _pos(report.history_since),
        "metadataVersion": report.metadata_version,
        "featureLevel": report.feature_level,
        "summary": {"brokers": s.brokers, "fencedBrokers": s.fenced_brokers, "disks": s.disks,
                    "offlineDisks": s.offline_disks, "topics": s.topics, "partitions": s.partitions,
                    "replicas": s.replicas, "offlineReplicas": s.offline_replicas,
                    "leaderlessPartitions": s.leaderless_partitions,
                    "underMinIsrPartitions": s.under_min_isr_partitions,
                    "pendingPlacements": s.pending_placements, "openIncidents": s.open_incidents},
        "brokers": [{"brokerId": b.broker_id, "state": b.state.value, "epoch": b.epoch,
                     "onlineDirectories": [_dir(d) for d in b.online_directories], "replicas": b.replicas,
                     "leaders": b.leaders, "offlineReplicas": b.offline_replicas} for b in report.brokers],
        "disks": [{"brokerId": d.broker_id, "directory": _dir(d.directory), "state": d.state.value,
                   "brokerState": d.broker_state.value, "replicas": d.replicas, "leaders": d.leaders,
                   "offlineReplicas": d.offline_replicas} for d in report.disks],
        "offlineReplicas": _rows(report.offline, _offline_group, per.get("offlineReplicas")),
        "leaderlessPartitions": _rows(report.leaderless, _status, per.get("leaderlessPartitions")),
        "underMinIsrPartitions": [_status(p) for p in report.under_min_isr],
        "pendingPlacements": [{**_part(p.partition), "brokerId": p.broker_id, "directoryState": p.state.value,
                               "brokerDirectories": p.broker_directories, "since": _pos(p.since),
                               "ageOffsets": p.age_offsets, "ageMs": p.age_ms} for p in report.pending],
        "incidents": _rows(report.incidents, _incident_row, per.get("incidents")),
        "timeline": _rows(report.timeline, _event, per.get("timeline")),
        "offlineSeries": [{"offset": p.at.offset, "timestamp": p.at.timestamp,
                           "offlineReplicas": p.offline_replicas, "leaderlessPartitions": p.leaderless_partitions,
                           "failedDirectories": p.failed_directories} for p in report.offline_series],
        "inventory": None if inv is None else {
            "directories": inv.directories, "matched": inv.matched,
            "unmapped": [_dir(d) for d in inv.unmapped],
            "unknown": [{"directoryId": str(d), "nodeId": loc.node_id, "path": loc.path} for d, loc in inv.unknown],
            "nodeMismatches": [_dir(d) for d in inv.node_mismatches],
            "conflicts": [{"directoryId": str(d), "locations": [{"nodeId": loc.node_id, "path": loc.path}
                                                                for loc in locs]} for d, locs in inv.conflicts]},
        "droppedIncidents": report.dropped_incidents,
    }


# ---------------------------------------------------------------------------------------------------------------
# Terminal


def summary_line(report: JbodReport) -> str:
    s = report.summary
    since = (f"history from {format_since(report.history_since)}" if report.history_since is not None
             else "no history (image only)")
    return (f"As of {format_position(report.as_of)} · metadata.version {report.metadata_version} · {since}\n"
            f"{counted(s.brokers, 'broker')} ({s.fenced_brokers} fenced), {counted(s.disks, 'disk')} "
            f"({s.offline_disks} offline), {counted(s.partitions, 'partition')}, {counted(s.replicas, 'replica')}: "
            f"{s.offline_replicas} offline, {s.leaderless_partitions} leaderless, {s.under_min_isr_partitions} "
            f"under min ISR, {counted(s.pending_placements, 'pending placement')}, "
            f"{counted(s.open_incidents, 'open incident')}")


def render_terminal(report: JbodReport, console: Console, make_table: TableFactory) -> None:
    """Print the report as tables. ``make_table(title, *columns)`` builds each table (the CLI passes its own, so
    every jbod command's tables look and wrap alike)."""
    console.print(summary_line(report), highlight=False)

    if report.offline:
        groups, left_out = _cut(report.offline, "offline disk")
        t = make_table(f"Offline replicas by disk ({report.summary.offline_replicas})", "disk", "broker", "reason",
                       "since", "replicas", "partitions")
        for g in groups:
            t.add_row(g.directory.label, str(g.broker_id), ", ".join(r.value for r in g.reasons),
                      format_position(g.since), str(len(g.replicas)),
                      format_partitions([r.partition for r in g.replicas], TERMINAL_PARTITIONS))
        _print_cut(console, t, left_out)
    else:
        console.print("No offline replicas.")

    if report.timeline:
        events, left_out = _cut(report.timeline, "event", latest=True)
        t = make_table(f"Incident timeline ({counted(len(report.timeline), 'event')})", "offset", "time", "incident",
                       "event", "what happened")
        for e in events:
            t.add_row(str(e.at.offset), format_timestamp(e.at.timestamp), f"#{e.incident_id}", e.kind.value,
                      e.summary)
        _print_cut(console, t, left_out)
    elif report.history_since is not None:
        console.print(f"No incidents since {format_since(report.history_since)}.", highlight=False)

    if report.incidents:
        incidents, left_out = _cut(report.incidents, "incident", latest=True)
        t = make_table(f"Incidents ({len(report.incidents)})", "#", "incident", "started", "ended", "lasted",
                       "replicas offline")
        for r in incidents:
            ended = (f"{format_position(r.incident.ended)} ({r.incident.resolution.value})"
                     if r.incident.ended is not None and r.incident.resolution is not None else "OPEN")
            lasted = format_age(r.duration_offsets, r.duration_ms) + (" so far" if r.incident.is_open else "")
            t.add_row(str(r.incident.id), r.title, format_position(r.incident.started), ended, lasted,
                      str(r.incident.replicas_offline))
        _print_cut(console, t, left_out)

    _status_table(console, make_table, "Leaderless partitions", report.leaderless, leaderless=True)
    _status_table(console, make_table, "Under min ISR", report.under_min_isr, leaderless=False)

    if report.pending:
        pending, left_out = _cut(report.pending, "pending placement")
        t = make_table(f"Pending placements ({len(report.pending)})", "partition", "broker", "state",
                       "broker dirs", "since", "age")
        for p in pending:
            t.add_row(p.partition.label, str(p.broker_id), p.state.value, str(p.broker_directories),
                      format_position(p.since), format_age(p.age_offsets, p.age_ms))
        _print_cut(console, t, left_out)
    else:
        console.print("No pending placements.")

    disks, left_out = _cut(report.disks, "disk")
    t = make_table(f"Disks (broker × directory, {len(report.disks)})", "broker", "disk", "state", "broker state",
                   "replicas", "leaders", "offline")
    for d in disks:
        t.add_row(str(d.broker_id), d.directory.label, d.state.value, d.broker_state.value, str(d.replicas),
                  str(d.leaders), str(d.offline_replicas))
    _print_cut(console, t, left_out)

    inv = report.inventory
    if inv is not None:
        console.print(f"Inventory: {inv.matched} of the metadata's directories have a known path "
                      f"({inv.directories} in the inventory).", highlight=False)
        for ref in inv.unmapped:
            console.print(f"  [yellow]no meta.properties given[/] for broker {ref.broker_id} {ref.label}",
                          highlight=False)
        for ref in inv.node_mismatches:
            console.print(f"  [yellow]node mismatch[/]: {ref.path} says node {ref.node_id}, the metadata places "
                          f"{ref.directory} on broker {ref.broker_id}", highlight=False)
        for directory_id, loc in inv.unknown:
            console.print(f"  [yellow]not in the metadata[/]: node {loc.node_id} {loc.path} ({directory_id})",
                          highlight=False)
    if report.dropped_incidents:
        console.print(f"({report.dropped_incidents} older finished incidents not kept)", highlight=False)


def _status_table(console: Console, make_table: TableFactory, title: str, rows: Sequence[PartitionStatus], *,
                  leaderless: bool) -> None:
    if not rows:
        console.print(f"No {title[0].lower() + title[1:]}." if leaderless else "No partitions under min ISR.")
        return
    cols = ["partition", "leader", "replicas", "ISR", "min ISR", "offline replicas"]
    if leaderless:
        cols[1:2] = ["ELR"]
        cols.append("since")
    t = make_table(f"{title} ({len(rows)})", *cols)
    shown, left_out = (_cut(rows, "leaderless partition") if leaderless
                       else _cut(rows, "partition under min ISR", "partitions under min ISR"))
    for s in shown:
        cells = [s.partition.label, str(s.leader), _ids(s.replicas), _ids(s.isr), str(s.min_isr),
                 _offline_labels(s.offline_replicas)]
        if leaderless:
            cells[1] = _ids(s.elr)
            cells.append(format_position(s.leaderless_since))
        t.add_row(*cells)
    _print_cut(console, t, left_out)


def _cut(items: Sequence[_Item], noun: str, plural: str | None = None, *, latest: bool = False,
         ) -> tuple[Sequence[_Item], str | None]:
    """The rows a terminal table prints and the line saying which it left out (None: it prints them all) — the
    HTML report's cut (:func:`~pipelines.report.wording.split_long` at :data:`FIRST_ROWS`, the latest rows of a list
    in log order). A 200 k-partition cluster's report listed 23,777 timeline events and 26,472 leaderless partitions:
    51,000 lines, 21 MB of text scrolling past the operator; the JSON and the HTML report list every row."""
    shown, hidden = split_long(items, FIRST_ROWS, latest=latest)
    if not hidden:
        return shown, None
    word = "earlier " if latest else "more "
    return shown, (f"{counted(len(hidden), word + noun, word + plural if plural else None)} not shown "
                   "(--json or --html lists every one)")


def _print_cut(console: Console, table: RowTable, left_out: str | None) -> None:
    console.print(table)
    if left_out is not None:
        console.print(left_out, highlight=False)


# ---------------------------------------------------------------------------------------------------------------
# Plots


_OFFLINE_COLOUR: Final = "#c62828"
_PLACEHOLDER_COLOUR: Final = "#9e9e9e"
_FENCED_COLOUR: Final = "#ef6c00"
#: Inches (at 110 dpi about 2,600 pixels): wider would not fit a screen.
_MAX_FIGURE_WIDTH: Final = 24.0


def _png(fig: Figure) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: PLC0415 - see disk_heatmap_png

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    # No "Software" chunk: the file must carry no URL, not even inside an image.
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight", metadata={"Software": None})
    return buf.getvalue()


def _broker_columns(disks: Sequence[DiskStat]) -> tuple[list[int], dict[int, list[DiskStat]]]:
    by_broker: dict[int, list[DiskStat]] = {}
    for d in disks:
        by_broker.setdefault(d.broker_id, []).append(d)
    return sorted(by_broker), by_broker


def disk_heatmap_png(report: JbodReport) -> bytes | None:
    """Disk × broker heatmap: one column per broker, one cell per directory (ordered as the report orders them),
    coloured by replica count; offline disks hatched and outlined in red, placeholders (UNASSIGNED/MIGRATING) grey.
    None when the report has no disk."""
    # matplotlib is imported where a chart is drawn: only the HTML report draws one, and its import was a third of
    # a second of every ``jbod report`` (--json and the terminal's included).
    from matplotlib import colormaps  # noqa: PLC0415
    from matplotlib.cm import ScalarMappable  # noqa: PLC0415
    from matplotlib.colors import Normalize  # noqa: PLC0415
    from matplotlib.figure import Figure  # noqa: PLC0415
    from matplotlib.patches import Rectangle  # noqa: PLC0415
    from matplotlib.ticker import MaxNLocator  # noqa: PLC0415

    if not report.disks:
        return None
    brokers, by_broker = _broker_columns(report.disks)
    rows = max(len(v) for v in by_broker.values())
    vmax = max(1, *(d.replicas for d in report.disks))
    norm = Normalize(vmin=0, vmax=vmax)
    cmap = colormaps["Blues"]
    # A cell wide enough for its path and counts up to a dozen brokers; beyond, the figure stops growing (it must
    # fit a screen) and cells say less: the count alone, then only the colour (the table lists every disk).
    width = min(_MAX_FIGURE_WIDTH, max(5.5, 1.7 * len(brokers) + 1.5))
    cell = (width - 1.5) / len(brokers)
    detail = 2 if cell >= 1.3 else (1 if cell >= 0.35 else 0)
    fig = Figure(figsize=(width, max(2.8, 0.95 * rows + 1.6)))
    ax = fig.add_subplot()
    for col, b in enumerate(brokers):
        for row, d in enumerate(by_broker[b]):
            if d.state is DiskState.PLACEHOLDER:
                ax.add_patch(Rectangle((col - 0.5, row - 0.5), 1, 1, facecolor=_PLACEHOLDER_COLOUR, alpha=0.55,
                                       edgecolor="white", linewidth=2))
            else:
                ax.add_patch(Rectangle((col - 0.5, row - 0.5), 1, 1, facecolor=cmap(norm(d.replicas)),
                                       edgecolor="white", linewidth=2))
            if d.state is DiskState.OFFLINE:
                ax.add_patch(Rectangle((col - 0.45, row - 0.45), 0.9, 0.9, fill=False, hatch="///",
                                       edgecolor=_OFFLINE_COLOUR, linewidth=2.5))
            if detail:
                dark = d.replicas > 0.6 * vmax and d.state is DiskState.ONLINE
                lines = ([short_directory(d.directory), f"{d.replicas} replicas · {d.leaders} leaders"]
                         if detail == 2 else [str(d.replicas)])
                if d.state is DiskState.OFFLINE and detail == 2:
                    lines.append(f"OFFLINE · {d.offline_replicas} offline")
                colour = "white" if dark else (_OFFLINE_COLOUR if d.state is DiskState.OFFLINE else "#1a1a1a")
                ax.text(col, row, "\n".join(lines), ha="center", va="center", fontsize=7.5 if detail == 2 else 6.5,
                        color=colour, fontweight="bold" if d.state is DiskState.OFFLINE else "normal",
                        bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "none", "pad": 1.5}
                        if d.state is DiskState.OFFLINE and detail == 2 else None)
    labels = []
    for b in brokers:
        state = by_broker[b][0].broker_state
        labels.append(f"broker {b}" + ("" if state is BrokerState.ACTIVE else f"\n{state.value}"))
    ax.set_xlim(-0.5, len(brokers) - 0.5)
    ax.set_ylim(rows - 0.5, -0.5)  # disk 1 on top, as a table reads
    ax.set_xticks(range(len(brokers)), labels if detail == 2 else [str(b) for b in brokers],
                  rotation=0 if cell >= 0.35 else 90, fontsize=None if detail == 2 else 7)
    if detail < 2:
        ax.set_xlabel("broker (fenced or unregistered brokers: see the disks table)")
    ax.set_yticks(range(rows), [f"disk {i + 1}" for i in range(rows)])
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    ax.set_title(f"Replicas per disk (broker × directory), offset {report.as_of.offset}", fontsize=10, loc="left")
    bar = fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=ax, label="replicas", fraction=0.04, pad=0.02)
    bar.locator = MaxNLocator(integer=True)
    bar.update_ticks()
    return _png(fig)


_START_KINDS: Final = (EventKind.DIRECTORY_FAILED, EventKind.BROKER_OFFLINE)
_END_KINDS: Final = (EventKind.DIRECTORY_RETURNED, EventKind.DIRECTORY_EVACUATED, EventKind.BROKER_UNFENCED)
#: Incident markers labelled on the time plot; beyond this a long log's labels would only overlap.
_MAX_LABELLED_EVENTS: Final = 12
#: Incident starts and ends drawn as full-height lines; beyond this they are ticks along the top edge.
_MAX_FULL_MARKS: Final = 40


_TIME_STEPS_MS: Final = tuple(s * 1000 for s in (1, 5, 10, 30, 60, 300, 600, 900, 1800, 3600, 7200, 21_600,
                                                  43_200, 86_400, 7 * 86_400, 30 * 86_400))


def _time_step(span_ms: float) -> int:
    """The smallest round time step that puts at most eight ticks on the axis."""
    return next((s for s in _TIME_STEPS_MS if span_ms / s <= 8), _TIME_STEPS_MS[-1])


def offline_series_png(report: JbodReport) -> bytes | None:
    """Offline replicas and leaderless partitions over the log (step lines; each point is the state after a batch),
    with incident starts (red) and ends (green) marked. The x axis is UTC time when every point has a batch
    timestamp — "out for 20 minutes" is what an operator asks — else the metadata offset. None without history."""
    from matplotlib.figure import Figure  # noqa: PLC0415 - see disk_heatmap_png
    from matplotlib.ticker import FuncFormatter, MaxNLocator, MultipleLocator  # noqa: PLC0415

    points = list(report.offline_series)
    if not points:
        return None
    by_time = report.as_of.timestamp is not None and all(p.at.timestamp is not None for p in points)

    def x_of(pos: LogPosition) -> float | None:
        if not by_time:
            return float(pos.offset)
        return None if pos.timestamp is None else float(pos.timestamp)

    xs = [x for x in (x_of(p.at) for p in points) if x is not None]
    offline = [p.offline_replicas for p in points]
    leaderless = [p.leaderless_partitions for p in points]
    # Carry the last state on past the report's position: an outage that began in the last batch must show as a
    # plateau, not as a line on the right edge.
    end = max(x_of(report.as_of) or xs[-1], xs[-1])
    pad = 0.06 * (end - xs[0]) or (1.0 if not by_time else 60_000.0)  # 6% of the range, else an offset / a minute
    xs.append(end + pad)
    offline.append(offline[-1])
    leaderless.append(leaderless[-1])
    fig = Figure(figsize=(9, 3.4))
    ax = fig.add_subplot()
    ax.step(xs, offline, where="post", color=_OFFLINE_COLOUR, linewidth=2, label="offline replicas")
    ax.fill_between(xs, offline, step="post", color=_OFFLINE_COLOUR, alpha=0.12)
    ax.step(xs, leaderless, where="post", color="#6a1b9a", linewidth=1.5, linestyle="--",
            label="leaderless partitions")
    top = max(*offline, *leaderless, 1)
    ax.set_ylim(0, top * 1.35 + 0.5)
    ax.set_xlim(xs[0], xs[-1])
    ax.axvline(end, color="#90a4ae", linewidth=1)
    ax.annotate(f"as of offset {report.as_of.offset}", (end, 0), fontsize=7, color="#607d8b", ha="right",
                va="bottom", xytext=(-3, 2), textcoords="offset points")
    # Directory failures are what this report is about: always marked and labelled. Brokers going offline (every
    # restart fences one) are marked lighter and labelled only when few, so that they cannot bury the failures.
    starts = [e for e in report.timeline if e.kind in _START_KINDS]
    label_brokers = len(starts) <= 4
    # A long log of a big cluster has hundreds of starts and ends: full-height lines would curtain the curves, so
    # they shrink to ticks along the top edge (a rug) and carry no label — the timeline table names them.
    crowded = sum(1 for e in report.timeline if e.kind in _START_KINDS or e.kind in _END_KINDS) > _MAX_FULL_MARKS
    band = {"ymin": 0.93, "ymax": 1.0} if crowded else {}
    span = xs[-1] - xs[0]
    # A label's width in x units, from its length: 7.5 pt characters are about 4.6 pt wide, on an axis about
    # 0.8 of the 9-inch figure. The right end of the last label at each height keeps the next one clear of it.
    per_char = 4.6 / (0.8 * 9 * 72) * span
    levels: list[float | None] = [None, None, None]
    labelled = 0
    for e in report.timeline:
        x = x_of(e.at)
        if x is None:
            continue
        if e.kind is EventKind.DIRECTORY_FAILED or (e.kind is EventKind.BROKER_OFFLINE):
            failed = e.kind is EventKind.DIRECTORY_FAILED
            ax.axvline(x, color=_OFFLINE_COLOUR if failed else _FENCED_COLOUR, linestyle="-" if crowded else ":",
                       linewidth=1.2 if failed else 0.8, alpha=1 if failed else 0.6, **band)
            if crowded or labelled >= _MAX_LABELLED_EVENTS or not (failed or label_brokers):
                continue
            what = short_directory(e.directory) if e.directory is not None else "broker"
            text = f"b{e.broker_id} {what} failed" if failed else f"b{e.broker_id} offline"
            near_right = x > xs[0] + 0.7 * span
            width = (len(text) + 2) * per_char
            left, right = (x - width, x) if near_right else (x, x + width)
            level = next((i for i, end in enumerate(levels) if end is None or left > end), None)
            if level is None:
                continue  # too crowded here: the line and the timeline table still show it
            levels[level] = right
            ax.annotate(text, (x, top * (1.3 - 0.09 * level)), fontsize=7.5,
                        color=_OFFLINE_COLOUR if failed else _FENCED_COLOUR,
                        ha="right" if near_right else "left", va="top",
                        xytext=(-3 if near_right else 3, 0), textcoords="offset points")
            labelled += 1
        elif e.kind in _END_KINDS:
            ax.axvline(x, color="#2e7d32", linestyle="-" if crowded else ":", linewidth=0.8, alpha=0.6, **band)
    if by_time:
        step = _time_step(xs[-1] - xs[0])
        fmt = "%H:%M:%S" if step < 60_000 else ("%H:%M" if xs[-1] - xs[0] < 86_400_000 else "%m-%d %H:%M")
        ax.xaxis.set_major_locator(MultipleLocator(step))  # multiples of the epoch: whole UTC minutes, hours
        ax.xaxis.set_major_formatter(FuncFormatter(
            lambda v, _pos: datetime.fromtimestamp(v / 1000, tz=UTC).strftime(fmt)))
        ax.set_xlabel("time (UTC)")
        title = (f"Offline replicas over time, offsets {points[0].at.offset}–{report.as_of.offset} "
                 f"({format_timestamp(points[0].at.timestamp)} → {format_timestamp(report.as_of.timestamp)})")
    else:
        ax.set_xlabel("metadata log offset")
        title = "Offline replicas over the metadata log (no batch timestamps in the input)"
    ax.set_ylabel("count")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # counts: no 0.5 replica ticks
    ax.set_title(title, fontsize=10, loc="left")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, fontsize=8, frameon=False)
    ax.grid(axis="y", alpha=0.25)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return _png(fig)


# ---------------------------------------------------------------------------------------------------------------
# HTML


def _hit(p: AffectedPartition) -> str:
    """What an incident's batch did to a partition, in words: ``lost leader, left ISR``."""
    return ", ".join(w for w, on in (("lost leader", p.lost_leadership), ("left ISR", p.lost_isr),
                                     ("leaderless", p.leaderless)) if on)


def _data_uri(png: bytes | None) -> str | None:
    return None if png is None else "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("pipelines.report", "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["pos"] = format_position
    env.filters["ts"] = format_timestamp
    env.filters["ids"] = _ids
    env.filters["hit"] = _hit
    env.globals["format_age"] = format_age
    env.globals["format_partitions"] = format_partitions
    env.globals["first_names"] = FIRST_NAMES
    env.globals["first_rows"] = FIRST_ROWS
    env.globals["split_long"] = split_long
    env.globals["counted"] = counted
    return env


def render_html(report: JbodReport, *, title: str = "kraft-jbod report") -> str:
    """One self-contained HTML page: summary, the two plots, and every table. Nothing is fetched when it is opened
    (no scripts, fonts, stylesheets or images from elsewhere), so it can be mailed or attached to a ticket."""
    template = _environment().get_template("report.html.j2")
    return template.render(
        report=report, title=title, summary=summary_line(report).splitlines(),
        heatmap=_data_uri(disk_heatmap_png(report)), series=_data_uri(offline_series_png(report)),
        generated=datetime.now(tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC"), DiskState=DiskState)


def write_html(path: Path, html: str) -> None:
    """Write a page (a cluster's report, a fleet's index); a path that cannot be written is the operator's input."""
    try:
        path.write_text(html, encoding="utf-8")
    except OSError as e:
        raise InputError(f"cannot write the HTML report to {path}: {e.strerror or e}") from None


# ---------------------------------------------------------------------------------------------------------------
# A fleet: one page per cluster and an index


@dataclass(frozen=True, slots=True)
class FleetRow:
    """One cluster of a fleet report as its index shows it: its id, its page (a file name beside the index), where
    its report stands, its headline counts and the labels of its offline disks — small, unlike the report itself,
    so a fleet's rows can be ranked and drawn without holding every cluster's report."""

    cluster: str
    page: str
    as_of: LogPosition
    metadata_version: str
    summary: ReportSummary
    offline_disks: tuple[str, ...]

    @classmethod
    def of(cls, cluster: str, report: JbodReport) -> FleetRow:
        return cls(cluster=cluster, page=page_name(cluster), as_of=report.as_of,
                   metadata_version=report.metadata_version, summary=report.summary,
                   offline_disks=tuple(group.directory.label for group in report.offline))


def page_name(cluster: str) -> str:
    """A file name for a cluster's page: Kafka cluster ids are URL-safe base64, but ids given to JSONL or dump text
    inputs may be anything, so every other character becomes ``_``."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", cluster).lstrip(".") + ".html"


def fleet_rows(reports: Mapping[str, JbodReport]) -> list[FleetRow]:
    """The clusters' rows worst first (:func:`worst_first`)."""
    return worst_first(FleetRow.of(cid, r) for cid, r in reports.items())


def worst_first(rows: Iterable[FleetRow]) -> list[FleetRow]:
    """The clusters worst first — what an on-call reads top down: leaderless partitions (unavailable), then offline
    replicas, open incidents, partitions under min ISR, pending placements; ties by cluster id."""
    def badness(row: FleetRow) -> tuple[int, int, int, int, int, str]:
        s = row.summary
        return (-s.leaderless_partitions, -s.offline_replicas, -s.open_incidents, -s.under_min_isr_partitions,
                -s.pending_placements, row.cluster)

    return sorted(rows, key=badness)


def render_fleet_html(rows: Sequence[FleetRow], *, skipped: Sequence[str] = (), as_of: str | None = None,
                      title: str = "kraft-jbod fleet report", now: datetime | None = None) -> str:
    """The index page of a fleet report: one row per cluster (as :func:`fleet_rows` orders them) with its headline
    counts and offline disks, linking to its own page. Each row also says how old the cluster's last record is: a
    KRaft controller appends a NoOpRecord every ``metadata.max.idle.interval.ms`` (500 ms by default) even when
    nothing happens, so a last record hours old means the metadata copy (or the ingest) stopped, not a quiet
    cluster."""
    when = now or datetime.now(tz=UTC)
    now_ms = int(when.timestamp() * 1000)
    ages = {r.cluster: None if r.as_of.timestamp is None
            else format_duration_ms(max(0, now_ms - r.as_of.timestamp)) for r in rows}
    troubled = sum(1 for r in rows if r.summary.offline_replicas or r.summary.leaderless_partitions
                   or r.summary.open_incidents)
    return _environment().get_template("fleet.html.j2").render(
        rows=rows, ages=ages, troubled=troubled, skipped=skipped, as_of=as_of, title=title,
        generated=when.strftime("%Y-%m-%d %H:%M:%S UTC"))
