"""The CLI's tables (:class:`pipelines.cli.text_table.TextTable`) print what rich prints for the same table, byte for
byte, in a pipe and on a colour terminal, whether they take the line-by-line way (every cell one printable line, the
table within the width) or rich's (anything else); and a cell is literal text."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.text import Text

from pipelines.cli import shared
from pipelines.cli.text_table import TextTable

#: ASCII, spaces, markup and emoji look-alikes, wide and combining characters, and the odd control character.
_CHARS = st.sampled_from([*"abcXYZ019 -_.,/:[]#@→·é", "日", "本", "\u0301", "\t", "\n", "\x07"])
_TEXT = st.text(_CHARS, max_size=24)


@st.composite
def _tables(draw: st.DrawFn) -> tuple[str, list[str], list[list[str]]]:
    n = draw(st.integers(1, 5))
    title = draw(st.text(_CHARS, max_size=40))
    headers = draw(st.lists(_TEXT.filter(lambda t: t.isprintable()), min_size=n, max_size=n))
    rows = draw(st.lists(st.lists(_TEXT, min_size=n, max_size=n), max_size=6))
    return title, headers, rows


def _printed(console_args: dict[str, object], table: object) -> str:
    if console_args.get("encoding") == "ascii":  # a console that cannot print box-drawing characters
        raw = io.BytesIO()
        file = io.TextIOWrapper(raw, encoding="ascii", errors="replace")
        Console(file=file, soft_wrap=True, **{k: v for k, v in console_args.items() if k != "encoding"}
                ).print(table)  # type: ignore[arg-type]
        file.flush()
        return raw.getvalue().decode("ascii")
    out = io.StringIO()
    Console(file=out, soft_wrap=True, **console_args).print(table)  # type: ignore[arg-type]
    return out.getvalue()


def _same_as_rich(console_args: dict[str, object], table: TextTable) -> None:
    """The table prints what rich prints for it; else the first line that differs (pytest's diff of two texts of
    thousands of lines would take minutes)."""
    ours, theirs = _printed(console_args, table), _printed(console_args, table.as_rich())
    if ours != theirs:
        a, b = ours.splitlines(), theirs.splitlines()
        first = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
        raise AssertionError(f"{console_args}: line {first} of {len(a)} (rich: {len(b)} lines) differs:\n"
                             f"ours: {a[first] if first < len(a) else None!r}\n"
                             f"rich: {b[first] if first < len(b) else None!r}")


_CONSOLES = st.sampled_from([
    {"width": 100_000, "color_system": None},            # a pipe (shared.UNWRAPPED_WIDTH)
    {"width": 60, "color_system": None},                 # COLUMNS=60: wide tables fold
    {"width": 80, "force_terminal": True, "color_system": "truecolor"},
    {"width": 30, "force_terminal": True, "color_system": "standard"},
    {"width": 50, "color_system": None, "encoding": "ascii"},  # LANG=C: rich draws ASCII boxes
])


@settings(max_examples=500, deadline=None)
@given(_tables(), _CONSOLES)
def test_a_table_prints_what_rich_prints(table: tuple[str, list[str], list[list[str]]],
                                         console_args: dict[str, object]) -> None:
    title, headers, rows = table
    t = TextTable(title, *headers)
    for row in rows:
        t.add_row(*row)
    _same_as_rich(console_args, t)


_PRINTABLE = st.text(st.sampled_from([*"abcXYZ019 -_.,/:[]#@→·é", "日", "本"]), max_size=30)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text("abcdefgh", min_size=1, max_size=8), min_size=1, max_size=5).flatmap(
    lambda headers: st.tuples(st.just(headers), st.lists(st.lists(_PRINTABLE, min_size=len(headers),
                                                                  max_size=len(headers)), max_size=8))),
       st.integers(24, 120), st.booleans())
def test_a_table_of_printable_cells_folds_as_rich_folds_it(table: tuple[list[str], list[list[str]]], width: int,
                                                           colour: bool) -> None:
    """The line-by-line way at any width: cells wider than their column (one word or several, wide characters)
    folded over several lines, as rich folds them."""
    headers, rows = table
    t = TextTable("Title", *headers)
    for row in rows:
        t.add_row(*row)
    args: dict[str, object] = ({"width": width, "force_terminal": True, "color_system": "standard"} if colour
                               else {"width": width, "color_system": None})
    if t.line_by_line(Console(**args)):  # type: ignore[arg-type]  # not when a column is too narrow for a character
        _same_as_rich(args, t)


def test_the_line_by_line_way_is_taken_and_equals_rich_on_a_long_table() -> None:
    t = TextTable("Offline replicas (3000)", "topic", "partition", "directory", "since")
    for i in range(3000):
        t.add_row(f"topic-{i % 7}", str(i), "OknBn8CpyL5stzbYd_HK8A" if i % 2 else "LOST",
                  f"offset {i} · 2023-11-15 06:17:52 UTC")
    # Within the width, and too wide for 40 columns (each row folded over several lines as rich folds it).
    for args in ({"width": 100_000, "color_system": None},
                 {"width": 200, "force_terminal": True, "color_system": "256"},
                 {"width": 40, "color_system": None}):
        assert t.line_by_line(Console(**args))  # type: ignore[arg-type]
        _same_as_rich(args, t)
    assert len(_printed({"width": 40, "color_system": None}, t).splitlines()) > 2 * 3000
    # A console that cannot print box-drawing characters (LANG=C): rich's ASCII box, the same way.
    assert t.line_by_line(Console(file=io.TextIOWrapper(io.BytesIO(), encoding="ascii"), width=40))
    _same_as_rich({"width": 40, "color_system": None, "encoding": "ascii"}, t)
    # A cell of two lines, or a styled one: rich lays the table out.
    t.add_row("a", "b", "c\nd", "e")
    assert not t.line_by_line(Console(width=200))
    _same_as_rich({"width": 200, "color_system": None}, t)


def test_a_cell_is_literal_text_and_a_styled_cell_keeps_its_style() -> None:
    t = TextTable("Paths [b]x[/b]", "path", "status")
    t.add_row("/mnt/[bold]d1[/bold] :fire:", Text("failed", style="red"))
    printed = _printed({"width": 200, "force_terminal": True, "color_system": "standard"}, t)
    assert "Paths [b]x[/b]" in printed and "/mnt/[bold]d1[/bold] :fire:" in printed
    assert "\x1b[31mfailed" in printed


def test_shared_table_is_a_text_table_and_prints_unwrapped_in_a_pipe() -> None:
    t = shared.table("T", "a", "b")
    assert isinstance(t, TextTable)
    t.add_row("x" * 300, "y")
    out = io.StringIO()
    console = Console(file=out, soft_wrap=True, width=shared.UNWRAPPED_WIDTH)
    console.print(t)
    assert any(line.startswith("│ " + "x" * 300 + " │ y │") for line in out.getvalue().splitlines())


def test_a_row_of_the_wrong_length_is_refused() -> None:
    with pytest.raises(ValueError, match="1 cells in a table of 2 columns"):
        TextTable("T", "a", "b").add_row("only one")
