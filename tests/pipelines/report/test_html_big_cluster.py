"""The HTML report stays readable for a big cluster (issue #14 item 5): a list of partition names shows its first
few and keeps the rest behind a ``<details>`` element, a long table its first rows (its last, for lists in log
order); short lists are printed whole. The structure is checked on the HTML; headless Chromium checks that a real
browser shows the page collapsed (skipped, with the reason, where Chromium is not installed)."""

from __future__ import annotations

import gc
import html as htmlmod
import re
import shutil
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from report_support import DEMO, demo_report, partition_statuses

from jbod_model.records.json_codec import Slices, dumps_pieces, dumps_without_floats
from jbod_model.report import DirLocation, InventoryJoin, JbodReport, LogPosition, build_report
from jbod_model.simulator.cluster import Simulation
from jbod_model.simulator.config import SimulationConfig
from jbod_model.uuid import Uuid
from pipelines.report import render
from pipelines.report.load import load_from_inputs, load_from_records
from pipelines.report.render import FIRST_ROWS, fleet_rows, render_fleet_html, render_html, report_to_json
from pipelines.report.wording import FIRST_NAMES, split_long

#: 1,000 partitions × 3 replicas on 3 brokers × 2 disks: 500 replicas on the disk that fails.
PARTITIONS = 1000


@cache
def big_report() -> JbodReport:
    """A simulated cluster (3 brokers, 2 disks each, 1,000 partitions of replication factor 3) after broker 2's
    disk data-1 failed: 500 offline replicas on one disk, replayed and reported as ``jbod report`` does."""
    sim = Simulation(SimulationConfig.uniform(brokers=3, dirs=2, monitor=False), seed=1)
    sim.start_brokers()
    sim.run_until_quiescent()
    sim.create_topic("orders", PARTITIONS, 3)
    sim.run_for(5_000)
    sim.fail_dir(2, "data-1")
    sim.run_until_quiescent()
    log = sim.result(checks=False).log
    assert log is not None
    data = load_from_records(log)
    return build_report(data.image, history=data.history)


def offline_labels(report: JbodReport) -> list[str]:
    """The partition labels of the first offline disk, as the page prints them."""
    return [r.partition.label + (" (in ISR)" if r.in_isr else "") for r in report.offline[0].replicas]


def offline_cell(page: str) -> str:
    row = re.search(r'<tr class="offline">.*?</tr>', page, re.S)
    assert row is not None
    cell = re.search(r'<td class="list">(.*?)</td>', row.group(0), re.S)
    assert cell is not None
    return cell.group(1)


def section(page: str, heading: str) -> str:
    """The HTML between the heading that starts with ``heading`` and the next heading."""
    start = page.index(f"<h2>{heading}")
    end = page.find("<h2>", start + 1)
    return page[start:end if end >= 0 else len(page)]


def test_a_disk_with_three_partitions_prints_them_inline() -> None:
    report = demo_report()
    assert len(report.offline[0].replicas) == 3
    cell = offline_cell(render_html(report))
    assert "<details" not in cell
    assert cell.strip() == ", ".join(offline_labels(report))


def test_a_disk_with_500_partitions_shows_the_count_the_first_ones_and_keeps_all_behind_details() -> None:
    report = big_report()
    labels = offline_labels(report)
    assert len(labels) == PARTITIONS // 2
    cell = offline_cell(render_html(report))
    visible, _, hidden = cell.partition('<details class="more">')
    assert visible.strip() == ", ".join(labels[:FIRST_NAMES])
    assert f"<summary>and {len(labels) - FIRST_NAMES} more ({len(labels)} in all)</summary>" in hidden
    body = hidden.split("</summary>", 1)[1].removesuffix("</details>")
    assert body == ", ".join(labels[FIRST_NAMES:])  # every one of the 500 is on the page, in order


def test_names_are_html_escaped() -> None:
    report = demo_report()
    group = report.offline[0]
    nasty = 'a<b>&"c'
    many = tuple(replace(group.replicas[0], partition=replace(group.replicas[0].partition, topic_name=nasty,
                                                              partition_id=i)) for i in range(40))
    page = render_html(replace(report, offline=(replace(group, replicas=many),)))
    cell = offline_cell(page)
    assert nasty not in page and "<b>" not in cell
    assert cell.count("a&lt;b&gt;&amp;&#34;c-") == 40  # shown and hidden alike


def test_a_long_table_shows_its_first_rows_and_the_rest_behind_details() -> None:
    n = 300
    page = render_html(replace(demo_report(), leaderless=partition_statuses(n)))
    part = section(page, "Leaderless partitions")
    shown, _, rest = part.partition('<details class="rows">')
    assert shown.count("<tr") - 1 == FIRST_ROWS  # the header, then the first rows
    assert f"lost-{FIRST_ROWS - 1}<" in shown and f"lost-{FIRST_ROWS}<" not in shown
    assert f"<summary>{n - FIRST_ROWS} more leaderless partitions</summary>" in rest
    assert all(f"lost-{i}<" in rest for i in range(FIRST_ROWS, n))


def test_a_short_table_is_printed_whole() -> None:
    page = render_html(replace(demo_report(), leaderless=partition_statuses(FIRST_ROWS + 1)))
    part = section(page, "Leaderless partitions")
    assert "<details" not in part and part.count("<tr") == FIRST_ROWS + 2


def test_the_timeline_alone_is_the_documents_and_can_count_its_partitions() -> None:
    """``timeline_json`` (notebook 02's) is the report document's ``timeline``; without the partitions listed, each
    event counts them."""
    report = demo_report()
    whole = render.timeline_json(report)
    assert whole and whole == report_to_json(report)["timeline"] and any(e["partitions"] for e in whole)
    counted = render.timeline_json(report, partitions=False)
    assert counted == [{**{k: v for k, v in e.items() if k != "partitions"}, "partitionCount": len(e["partitions"])}
                       for e in whole]


def test_the_timeline_keeps_its_latest_events_in_view() -> None:
    report = demo_report()
    event = report.timeline[0]
    events = tuple(replace(event, at=replace(event.at, offset=1000 + i), summary=f"event number {i}")
                   for i in range(100))
    part = section(render_html(replace(report, timeline=events)), "Incident timeline")
    earlier, _, latest = part.partition("</details>")
    assert f"<summary>{100 - FIRST_ROWS} earlier events</summary>" in earlier
    assert [f"event number {i}" in latest for i in (74, 75, 99)] == [False, True, True]
    assert "event number 0<" in earlier


def test_inventory_findings_of_every_kind_share_one_collapsed_table() -> None:
    report = demo_report()
    ref = report.disks[0].directory
    unmapped = tuple(replace(ref, broker_id=100 + i) for i in range(FIRST_ROWS + 5))
    spare = Uuid.from_bytes(bytes(range(16)))
    inventory = InventoryJoin(directories=3, matched=0, unmapped=unmapped, unknown=((spare, DirLocation(7, "/mnt/x")),),
                              node_mismatches=(), conflicts=((spare, (DirLocation(1, "/a"), DirLocation(2, "/b"))),))
    part = section(render_html(replace(report, inventory=inventory)), "Directory inventory")
    shown, _, rest = part.partition('<details class="rows">')
    assert shown.count("no meta.properties given") == FIRST_ROWS and "broker 100<" in shown
    assert "<summary>7 more findings</summary>" in rest
    assert "broker 129<" in rest and "node 7 /mnt/x" in rest and "node 1 /a; node 2 /b" in rest


def test_the_fleet_index_collapses_a_cluster_with_many_offline_disks() -> None:
    report = demo_report()
    group = report.offline[0]
    disks = tuple(replace(group, directory=replace(group.directory, label=f"broker 1 /mnt/d{i}")) for i in range(30))
    page = render_fleet_html(fleet_rows({"big": replace(report, offline=disks), "small": report}))
    big, small = (re.search(rf'href="{c}.html".*?</tr>', page, re.S) for c in ("big", "small"))
    assert big is not None and small is not None
    visible, _, hidden = big.group(0).partition('<details class="more">')
    assert visible.rstrip().endswith("broker 1 /mnt/d9") and "/mnt/d10" not in visible  # the tenth is the last
    assert "<summary>and 20 more (30 in all)</summary>" in hidden and "broker 1 /mnt/d29" in hidden
    assert "<details" not in small.group(0) and group.directory.label in small.group(0)


def test_split_long() -> None:
    items = list(range(12))
    assert split_long(items, 10) == (items[:10], [10, 11])  # "and 2 more" is worth it
    assert split_long(items[:11], 10) == (items[:11], [])  # "and 1 more" is not
    assert split_long(items, 5) == (items[:5], items[5:])
    assert split_long(items, 5, latest=True) == (items[-5:], items[:-5])


def test_the_json_lists_every_replica() -> None:
    """The JSON is the contract (docs/report-json.md): collapsing is the HTML's alone."""
    assert len(report_to_json(big_report())["offlineReplicas"][0]["replicas"]) == PARTITIONS // 2


def test_an_incidents_json_rows_are_its_partitions_field_by_field() -> None:
    """Each row of an incident's ``partitions`` is its partition: the topic's id and name, the partition, what it
    lost, and each follow-up's position — the renderer makes a position's object once per incident and a topic id's
    text once, so here the four positions of each row differ, are shared between rows, or are equal but not the same
    object, and the partitions span two topics with the same partition ids."""
    report = big_report()
    row = report.incidents[0]
    at = [LogPosition(100 + k, None if k % 3 == 0 else 1_700_000_000_000 + k) for k in range(7)]
    other_topic = Uuid.from_string("AAAAAAAAAAAAAAAAAAAAAQ")
    # A fifth of them in a second topic, numbered as the first topic's partitions are.
    parts = tuple(replace(p, partition=replace(p.partition, topic_id=other_topic, topic_name="other",
                                               partition_id=i // 5) if i % 5 == 0 else p.partition,
                          leader_restored=at[i % 7] if i % 2 else None, isr_restored=at[(i + 1) % 7],
                          moved=LogPosition(at[(i + 2) % 7].offset, at[(i + 2) % 7].timestamp) if i % 3 else None,
                          deleted=at[(i + 3) % 7] if i % 4 == 0 else None)
                  for i, p in enumerate(row.incident.partitions))
    edited = replace(report, incidents=(replace(row, incident=replace(row.incident, partitions=parts)),))

    def pos(p: LogPosition | None) -> dict[str, Any] | None:
        return None if p is None else {"offset": p.offset, "timestamp": p.timestamp}

    got = report_to_json(edited)["incidents"][0]["partitions"]
    assert got == [{"topicId": str(p.partition.topic_id), "topicName": p.partition.topic_name,
                    "partitionId": p.partition.partition_id, "lostLeadership": p.lost_leadership,
                    "lostIsr": p.lost_isr, "leaderless": p.leaderless, "leaderRestored": pos(p.leader_restored),
                    "isrRestored": pos(p.isr_restored), "moved": pos(p.moved), "deleted": pos(p.deleted)}
                   for p in parts]
    assert len(parts) == PARTITIONS // 2 and {r["topicName"] for r in got} == {"orders", "other"}


# ---------------------------------------------------------------------------------------------------------------
# A real browser


def _chromium() -> str | None:
    return next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p), None)


needs_chromium = pytest.mark.skipif(_chromium() is None,
                                    reason="headless Chromium is not installed (apt-get install chromium)")


def _browser(*args: str) -> str:
    done = subprocess.run([str(_chromium()), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           *args], check=True, capture_output=True, text=True, timeout=120)
    return done.stdout


@needs_chromium
def test_chromium_shows_the_count_and_the_first_names_but_not_the_hidden_ones(tmp_path: Path) -> None:
    """What a reader sees is the rendered text (``innerText`` leaves out what a closed ``<details>`` hides). The
    report has no script of its own; the test's copy of the page gets one that writes that text into the page,
    and Chromium's ``--dump-dom`` hands it back."""
    report = big_report()
    labels = offline_labels(report)
    probe = ("<script>const t = document.createElement('pre'); t.id = 'visible-text';"
             "t.textContent = document.body.innerText; document.body.append(t);</script>")
    page = tmp_path / "big.html"
    page.write_text(render_html(report).replace("</body>", probe + "</body>"), encoding="utf-8")
    dom = _browser("--dump-dom", page.as_uri())
    found = re.search(r'<pre id="visible-text">(.*?)</pre>', dom, re.S)
    assert found is not None, dom[-2000:]
    visible = htmlmod.unescape(found.group(1))
    assert f"and {len(labels) - FIRST_NAMES} more ({len(labels)} in all)" in visible
    assert labels[0] in visible and labels[FIRST_NAMES - 1] in visible
    assert labels[-1] not in visible and labels[FIRST_NAMES] not in visible
    assert '<details class="more">' in dom and "<details open" not in dom and 'class="more" open' not in dom


@needs_chromium
def test_chromium_page_with_500_names_is_about_as_tall_as_with_three(tmp_path: Path) -> None:
    """Rendered by a real browser, the page with 500 names on a disk is about as tall as the demo's with three:
    the hidden names take no space. The screenshots are left in tmp_path to look at."""
    heights = {}
    for name, report in (("big", big_report()), ("small", demo_report())):
        page = tmp_path / f"{name}.html"
        page.write_text(render_html(report), encoding="utf-8")
        shot = tmp_path / f"{name}.png"
        _browser("--window-size=1280,4000", f"--screenshot={shot}", page.as_uri())
        heights[name] = _content_height(shot)
    # 490 hidden names at ~6 per line would add ~80 lines of table cell; collapsed, the cell grows by ~1-2 lines
    # (and the big cluster's disks table by a few rows).
    assert heights["big"] - heights["small"] < 200, heights


def _content_height(png: Path) -> int:
    """The last row of the screenshot that is not the page's background (white): how tall the content is."""
    from PIL import Image

    with Image.open(png) as img:
        rgb = img.convert("RGB")
        width, height = rgb.size
        background = rgb.getpixel((width - 1, height - 1))
        for y in range(height - 1, -1, -1):
            if any(rgb.getpixel((x, y)) != background for x in range(0, width, 4)):
                return y
    return 0


def test_the_reports_json_is_built_with_the_collector_paused(monkeypatch: pytest.MonkeyPatch) -> None:
    """``report_to_json`` makes a big report's rows with the cyclic collector off (a 200 k-partition report's
    incidents are millions of values, and a full pass walked them) and leaves it on."""
    seen: list[bool] = []
    real = render._pos

    def watched(*args: Any) -> Any:
        seen.append(gc.isenabled())
        return real(*args)

    monkeypatch.setattr(render, "_pos", watched)
    assert gc.isenabled()
    doc = report_to_json(big_report())
    assert gc.isenabled() and seen and not any(seen)
    assert doc["summary"]["offlineReplicas"] == len(big_report().offline[0].replicas)


def test_the_sliced_json_is_the_whole_documents_text_its_rows_made_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    """``report_to_json(sliced=True)``, what ``jbod report --json`` writes through ``dumps_pieces``, is the whole
    document's text; its long lists' rows are made only as the pieces are written, a slice at a time, each with the
    collector paused (at 2 M partitions the rows held at once were 1.4 GB)."""
    # Each long list twice over, so that every one is cut (the rows need not agree with each other here).
    big = big_report()
    report = replace(big, offline=big.offline * 2, incidents=big.incidents * 2, timeline=big.timeline * 3,
                     leaderless=big.leaderless * 2)
    whole = dumps_without_floats(report_to_json(report))
    assert report.incidents and report.offline and report.timeline
    # A slice per item and a piece per row: every list of the document cut at every item.
    monkeypatch.setattr(render, "_SLICE_ITEMS", dict.fromkeys(render._SLICE_ITEMS, 1))
    made: list[bool] = []
    real = render._pos

    def watched(*args: Any) -> Any:
        made.append(gc.isenabled())
        return real(*args)

    monkeypatch.setattr(render, "_pos", watched)
    doc = report_to_json(report, sliced=True)
    before = len(made)
    assert all(isinstance(doc[k], Slices) for k in ("offlineReplicas", "leaderlessPartitions", "incidents", "timeline"))
    pieces = []
    for piece in dumps_pieces(doc, rows=1):
        pieces.append(piece)
        assert gc.isenabled()
    assert "".join(pieces) == whole
    assert len(made) > before and not any(made[before:])


def test_a_report_from_metadata_files_is_loaded_with_the_collector_paused() -> None:
    """``load_from_inputs`` tracks the replay with the collector off (the tracker's index of a big base image and the
    history it builds were walked by every full pass: 1.8 s of a 6 s report at 200 k partitions), and leaves it on."""
    seen: list[bool] = []

    def track(entries: Iterable[Any]) -> Iterator[Any]:
        for entry in entries:
            seen.append(gc.isenabled())
            yield entry

    assert gc.isenabled()
    data = load_from_inputs([DEMO], track=track)
    assert gc.isenabled() and seen and not any(seen)
    assert build_report(data.image, history=data.history).summary.offline_replicas == 3
