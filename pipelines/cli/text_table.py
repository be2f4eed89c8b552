"""The terminal tables of every ``jbod`` command: laid out as rich lays out its :class:`rich.table.Table`, line by line
when nothing wraps.

rich measures and renders every cell through its whole layout machinery (markup, wrapping, cropping, padding as
segments), about 0.5 ms a row: ``jbod image --tables`` at 200 k partitions printed 133 k offline replicas in about a
minute, and the report's leaderless partitions and timeline (50 k rows) took 31 of its 54 s (docs/performance.md).
When every cell is one line of printable text, what rich would print is known in closed form: each column as wide as
its widest cell when the table fits the width (else as rich narrows it, from those widest cells alone), cells padded
by one space and folded where wider than their column, the box's borders. :class:`TextTable` prints exactly that, a
line at a time, and hands anything else (a styled or multi-line cell, a column too narrow for a character) to rich
itself. The two are proven equal by property tests (``tests/pipelines/cli/test_text_table.py``).

A cell is literal text: a topic, a path or an error message is printed as it is, never read as rich markup (``[b]``)
or an emoji code (``:fire:``). A cell that needs a style is a :class:`rich.text.Text`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from rich import box
from rich.cells import cell_len, get_character_cell_size
from rich.console import Console, ConsoleOptions, RenderResult
from rich.segment import Segment
from rich.style import Style
from rich.table import Table
from rich.text import Text

Cell = str | Text

#: The box every table is drawn with: rich's default.
BOX = box.HEAVY_HEAD
#: One space either side of a cell's text (rich's default padding, edges included).
PAD = 1


class TextTable:
    """A titled table of text cells: :meth:`add_row`, then ``console.print(table)``. Columns wrap (fold) rather than
    truncate when the table is wider than the console: a directory id cut to 'AAAA…' is useless to an operator."""

    def __init__(self, title: str, *columns: str) -> None:
        self.title = title
        self.columns = columns
        self._rows: list[Sequence[Cell]] = []

    def add_row(self, *cells: Cell) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"a row of {len(cells)} cells in a table of {len(self.columns)} columns")
        self._rows.append(cells)

    def as_rich(self) -> Table:
        """The same table as a :class:`rich.table.Table` (str cells as literal :class:`~rich.text.Text`): what rich
        prints for it is what :meth:`__rich_console__` prints."""
        out = Table(title=_literal(self.title, "table.title"), title_justify="left", box=BOX)
        for col in self.columns:
            out.add_column(_literal(col), overflow="fold")
        for row in self._rows:
            out.add_row(*(_literal(c) for c in row))
        return out

    def line_by_line(self, console: Console) -> bool:
        """Whether the table prints line by line on ``console`` (else rich lays it out)."""
        return self._layout(console, console.options) is not None

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        layout = self._layout(console, options)
        if layout is None:
            yield self.as_rich()
            return
        yield from self._lines(console, options, *layout)

    def _layout(self, console: Console, options: ConsoleOptions) -> tuple[list[list[str]], list[int], bool] | None:
        """How the table prints line by line: its cells column by column, each column's width (:meth:`_widths`) and
        whether every cell is ASCII; None when rich must lay it out — a cell not a str, or holding a character that
        does not take one or two cells of the terminal (a newline, a tab, a control, combining or zero-width one:
        rich's own rules place those)."""
        if not self.columns:
            return None
        columns: list[list[str]] = []
        widest: list[str] = []
        all_ascii = True
        for i, header in enumerate(self.columns):
            column = [row[i] for row in self._rows]
            if not all(type(c) is str for c in column):
                return None
            text = header + "".join(column)  # type: ignore[arg-type]  # all str, checked above
            ascii_column = text.isascii()
            if not text.isprintable() or (not ascii_column
                                          and any(get_character_cell_size(ch) == 0 for ch in set(text))):
                return None
            columns.append(column)  # type: ignore[arg-type]  # all str, checked above
            widest.append(max((header, *column), key=len if ascii_column else cell_len))  # type: ignore[arg-type]
            all_ascii = all_ascii and ascii_column
        widths = self._widths(console, options, widest)
        return None if widths is None else (columns, widths, all_ascii)

    def _widths(self, console: Console, options: ConsoleOptions, widest: list[str]) -> list[int] | None:
        """Each column's width without its padding, from each column's widest cell (``widest``), as rich's
        ``Table`` sizes it: that cell's width when the table fits ``options.max_width``; else what rich gives a table
        holding one row of those cells (rich narrows the widest columns first, from the columns' widest cells
        alone), read off that table's top border. None when a column would be too narrow for a character."""
        widths = [cell_len(cell) for cell in widest]
        if sum(widths) + len(widths) * (2 * PAD + 1) + 1 <= options.max_width:
            return widths
        sizing = Table(box=BOX)
        for header in self.columns:
            sizing.add_column(_literal(header), overflow="fold")
        sizing.add_row(*map(_literal, widest))
        # Drawn with the box itself whatever the console's encoding (an ASCII box's top border has no column
        # dividers): every glyph of a box is one cell, so the widths are the same.
        unicode = options.copy()
        unicode.encoding, unicode.legacy_windows = "utf-8", False
        top = "".join(segment.text for segment in console.render_lines(sizing, unicode, pad=False)[0])
        padded = [len(part) for part in top[len(BOX.top_left):-len(BOX.top_right)].split(BOX.top_divider)]
        if len(padded) != len(widest) or min(padded) < 2 * PAD + 1:
            return None
        return [w - 2 * PAD for w in padded]

    def _lines(self, console: Console, options: ConsoleOptions, columns: list[list[str]], widths: list[int],
               all_ascii: bool) -> Iterator[Segment]:
        """What rich's ``Table.__rich_console__`` yields for this table at these widths: the title (rendered by rich:
        it may wrap), the top border and the header (rendered by rich at these widths: its header style), the rows —
        a cell wider than its column folded by rich's ``Text.wrap``, the row as tall as its tallest cell —, the
        bottom border."""
        padded = [w + 2 * PAD for w in widths]
        table_width = sum(padded) + len(padded) + 1
        render_options = options.update(width=table_width, highlight=False, height=None)
        new_line = Segment.line()
        title = _literal(self.title, "table.title")
        if title:  # rich's test: a title of control characters alone is empty
            yield from console.render(title, render_options.update(justify="left"))
        # The top border and the header, laid out by rich at these widths (its header style, its box for this
        # console): one row, whatever its cells; the table without rows ends with its bottom border, left out.
        head = Table(box=BOX, show_edge=True)
        for header, width in zip(self.columns, widths, strict=True):
            head.add_column(_literal(header), width=width, overflow="fold")
        for line in console.render_lines(head, render_options, pad=False)[:-1]:
            yield from line
            yield new_line
        the_box = BOX.substitute(options, safe=console.safe_box)
        pad = " " * PAD
        last = len(self._rows) - 1
        mid = (the_box.mid_left + pad, pad + the_box.mid_vertical + pad, pad + the_box.mid_right)
        foot = (the_box.foot_left + pad, pad + the_box.foot_vertical + pad, pad + the_box.foot_right)
        for index, row in enumerate(zip(*columns, strict=True)):
            left, divider, right = foot if index == last else mid
            if all_ascii and all(len(c) <= w for c, w in zip(row, widths, strict=True)):
                yield Segment(left + divider.join([c.ljust(w) for c, w in zip(row, widths, strict=True)]) + right)
                yield new_line
                continue
            cells = [_cell_lines(console, c, w) for c, w in zip(row, widths, strict=True)]
            for line_no in range(max(map(len, cells))):
                yield Segment(left + divider.join([c[line_no] if line_no < len(c) else " " * w
                                                   for c, w in zip(cells, widths, strict=True)]) + right)
                yield new_line
        yield Segment(the_box.get_bottom(padded), Style.null())
        yield new_line


def _cell_lines(console: Console, text: str, width: int) -> list[str]:
    """A cell's lines at ``width`` terminal cells: the text padded, or folded as rich folds it (``Text.wrap``, left
    justified: each line padded to the width)."""
    if cell_len(text) <= width:
        return [_ljust(text, width)]
    if text.isascii() and " " not in text:
        # One word (an id, a path) wider than the column: rich folds it into pieces of the column's width.
        return [text[i:i + width].ljust(width) for i in range(0, len(text), width)]
    return [_ljust(line.plain, width) for line in Text(text).wrap(console, width, justify="left", overflow="fold")]


def _ljust(text: str, width: int) -> str:
    """``text`` padded with spaces to ``width`` terminal cells (a wide character takes two)."""
    return text + " " * (width - cell_len(text))


def _literal(cell: Cell, style: str = "") -> Text:
    """A str cell as rich :class:`~rich.text.Text` taken literally (no markup, no emoji codes)."""
    return Text(cell, style=style) if isinstance(cell, str) else cell
