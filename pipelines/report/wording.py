"""Counts and name lists in the words of the reports and the CLI: ``1 open incident``, ``55: a-0, b-1, … and 45
more``. Kept apart from :mod:`pipelines.report.render` (matplotlib, jinja2) so that a quick command can use them
without loading plotting.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def counted(n: int, singular: str, plural: str | None = None) -> str:
    """``1 open incident``, ``2 open incidents``: a count with its noun in the right number."""
    return f"{n} {singular if n == 1 else plural or singular + 's'}"


#: How many names a collapsed list shows before ``and N more``.
FIRST_NAMES = 10


def split_long(items: Sequence[T], first: int, *, latest: bool = False) -> tuple[Sequence[T], Sequence[T]]:
    """``(shown, hidden)``: where a long list is cut for a reader. Every item is shown when there are at most
    ``first`` + 1 (``and 1 more`` would save nothing); else the first ``first`` — the last ``first`` with
    ``latest``, for lists in log order whose end is what is happening now — and the rest are hidden (behind
    ``and N more`` in the terminal, a ``<details>`` element in the HTML report)."""
    if len(items) <= first + 1:
        return items, items[:0]
    if latest:
        return items[-first:], items[:-first]
    return items[:first], items[first:]


def collapsed(names: Sequence[str], first: int = FIRST_NAMES) -> str:
    """A list of names for one line: all of them when they are few (:func:`split_long`), else the count, the first
    ``first`` and how many more — a line of 55 partition names is unreadable in a terminal and useless in a log."""
    shown, hidden = split_long(names, first)
    if not hidden:
        return ", ".join(shown)
    return f"{len(names)}: {', '.join(shown)} and {len(hidden)} more"
