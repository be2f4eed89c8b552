"""The terminal report stays a screenful for a big cluster: a long table prints the rows the HTML report shows
(its first :data:`~pipelines.report.render.FIRST_ROWS`, its latest for lists in log order) and one line saying how
many it left out and where they all are; short tables are printed whole. A 200 k-partition cluster's report printed
51,000 lines before."""

from __future__ import annotations

import io
from dataclasses import replace

from report_support import demo_report, partition_statuses
from rich.console import Console

from jbod_model.report import JbodReport
from pipelines.cli.shared import table
from pipelines.report.render import FIRST_ROWS, render_terminal


def terminal(report: JbodReport) -> str:
    out = io.StringIO()
    render_terminal(report, Console(file=out, width=200, color_system=None), table)
    return out.getvalue()


def shown(out: str, label: str) -> list[int]:
    """Which of the partitions ``lost-0`` … the output lists (by the label's number)."""
    return sorted(int(word.removeprefix(label)) for line in out.splitlines() for word in line.split()
                  if word.startswith(label))


def test_the_demo_is_printed_whole() -> None:
    assert "not shown" not in terminal(demo_report())


def test_a_long_table_prints_its_first_rows_and_says_how_many_it_left_out() -> None:
    out = terminal(replace(demo_report(), leaderless=partition_statuses(300)))
    assert "Leaderless partitions (300)" in out
    assert shown(out, "lost-") == list(range(FIRST_ROWS))
    assert f"{300 - FIRST_ROWS} more leaderless partitions not shown (--json or --html lists every one)" in out


def test_a_table_one_row_over_is_printed_whole() -> None:
    out = terminal(replace(demo_report(), under_min_isr=partition_statuses(FIRST_ROWS + 1, leader=1)))
    assert shown(out, "lost-") == list(range(FIRST_ROWS + 1)) and "not shown" not in out
    out = terminal(replace(demo_report(), under_min_isr=partition_statuses(FIRST_ROWS + 2, leader=1)))
    assert "2 more partitions under min ISR not shown" in out


def test_the_timeline_prints_its_latest_events() -> None:
    report = demo_report()
    event = report.timeline[0]
    events = tuple(replace(event, at=replace(event.at, offset=1000 + i), summary=f"event-{i}") for i in range(100))
    out = terminal(replace(report, timeline=events))
    assert "Incident timeline (100 events)" in out
    assert shown(out, "event-") == list(range(100 - FIRST_ROWS, 100))
    assert f"{100 - FIRST_ROWS} earlier events not shown" in out
