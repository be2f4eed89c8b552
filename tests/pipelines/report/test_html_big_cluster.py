"""The HTML report stays readable for a big cluster (issue #14 item 5): a disk's partition list shows the first
few names and keeps the rest behind a ``<details>`` element, instead of a wall of hundreds of names. The structure
is checked on the HTML; a headless Chromium screenshot checks that a browser shows it collapsed (skipped, with the
reason, where Chromium is not installed)."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from jbod_model.report import JbodReport, build_report
from pipelines.report.load import load_from_inputs
from pipelines.report.render import render_html
from pipelines.report.wording import FIRST_NAMES

DEMO = Path(__file__).resolve().parents[3] / "pipelines" / "examples" / "demo-disk-failure.jsonl"
#: Replicas on the failed disk of the big report.
REPLICAS = 300


def big_report() -> JbodReport:
    """The demo's report with its failed disk holding REPLICAS offline replicas (a broker with many partitions)."""
    data = load_from_inputs([DEMO])
    report = build_report(data.image, history=data.history)
    group = report.offline[0]
    one = group.replicas[0]
    replicas = tuple(replace(one, partition=replace(one.partition, topic_name=f"topic{i:03d}", partition_id=i))
                     for i in range(REPLICAS))
    return replace(report, offline=(replace(group, replicas=replicas), *report.offline[1:]))


def offline_cell(html: str) -> str:
    row = re.search(r'<tr class="offline">.*?</tr>', html, re.S)
    assert row is not None
    return row.group(0)


def test_a_long_partition_list_collapses_behind_details() -> None:
    html = render_html(big_report())
    cell = offline_cell(html)
    visible, _, hidden = cell.partition("<details")
    assert visible.count("topic") == FIRST_NAMES  # topic000-0 … topic009-9 shown
    assert f'<summary>and {REPLICAS - FIRST_NAMES} more</summary>' in hidden
    assert "topic010-10" in hidden and f"topic{REPLICAS - 1}-{REPLICAS - 1}" in hidden


def test_a_short_list_is_shown_whole() -> None:
    data = load_from_inputs([DEMO])
    html = render_html(build_report(data.image, history=data.history))
    assert "<details" not in offline_cell(html)


def _chromium() -> str | None:
    return next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p), None)


@pytest.mark.skipif(_chromium() is None, reason="headless Chromium is not installed (apt-get install chromium)")
def test_chromium_shows_the_list_collapsed(tmp_path: Path) -> None:
    """Rendered by a real browser, the page with 300 names on a disk is about as tall as the one with three: the
    hidden names take no space. The screenshot is left in tmp_path to look at."""
    heights = {}
    data = load_from_inputs([DEMO])
    for name, report in (("big", big_report()), ("small", build_report(data.image, history=data.history))):
        page = tmp_path / f"{name}.html"
        page.write_text(render_html(report), encoding="utf-8")
        shot = tmp_path / f"{name}.png"
        subprocess.run([str(_chromium()), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        "--window-size=1280,4000", f"--screenshot={shot}", page.as_uri()],
                       check=True, capture_output=True, timeout=120)
        heights[name] = _content_height(shot)
    # 290 hidden names at ~6 per line would add ~50 lines of table cell; collapsed, the cell grows by ~1-2 lines.
    assert heights["big"] - heights["small"] < 120, heights


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
