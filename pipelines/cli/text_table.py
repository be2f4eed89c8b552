"""The terminal tables of every ``jbod`` command: laid out as rich lays out its :class:`rich.table.Table`, line by line
when nothing wraps.

rich measures and renders every cell through its whole layout machinery (markup, wrapping, cropping, padding as
segments), about 0.5 ms a row: ``jbod image --tables`` at 200 k partitions printed 133 k offline replicas in about a
minute, and the report's leaderless partitions and timeline (50 k rows) took 31 of its 54 s (docs/performance.md).
When every cell is one line of printable text and the table fits the width, what rich would print is known in closed
form: each column as wide as its widest cell, cells padded by one space, the box's borders. :class:`TextTable`
prints exactly that, a line at a time, and hands anything else (a table wider than the terminal, whose cells rich
folds; a styled or multi-line cell) to rich itself. The two are proven equal by property tests
(``tests/pipelines/cli/test_text_table.py``).

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

    @property
    def row_count(self) -> int:
        return len(self._rows)

    def as_rich(self) -> Table:
        """The same table as a :class:`rich.table.Table` (str cells as literal :class:`~rich.text.Text`): what rich
        prints for it is what :meth:`__rich_console__` prints."""
        out = Table(title=_literal(self.title, "table.title"), title_justify="left", box=BOX)
        for col in self.columns:
            out.add_column(_literal(col), overflow="fold")
        for row in self._rows:
            out.add_row(*(_literal(c) for c in row))
        return out

    def line_by_line(self, options: ConsoleOptions) -> bool:
        """Whether the table prints line by line with these console options (else rich lays it out)."""
        return self._plain_widths(options) is not None

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        widths = self._plain_widths(options)
        if widths is None:
            yield self.as_rich()
            return
        yield from self._lines(console, options, widths)

    def _plain_widths(self, options: ConsoleOptions) -> list[int] | None:
        """Each column's width without its padding when the table can be printed line by line (every cell one line
        of printable str, the whole within ``options.max_width``); None when rich must lay it out."""
        if not self._rows and not self.columns:
            return None
        widths = []
        for i, header in enumerate(self.columns):
            column = [row[i] for row in self._rows]
            if not all(type(c) is str for c in column):
                return None
            text = header + "".join(column)  # type: ignore[arg-type]  # all str, checked above
            if not text.isprintable():  # a newline, a tab, a control character: rich's own rules apply
                return None
            cells: list[str] = column  # type: ignore[assignment]
            if text.isascii():
                widths.append(max(len(header), *map(len, cells)) if cells else len(header))
            elif any(get_character_cell_size(ch) == 0 for ch in set(text)):
                return None  # a combining or zero-width character: rich's own rules place it
            else:
                widths.append(max(cell_len(header), *map(cell_len, cells)) if cells else cell_len(header))
        if sum(widths) + len(widths) * 2 * PAD + len(widths) + 1 > options.max_width:
            return None
        return widths

    def _lines(self, console: Console, options: ConsoleOptions, widths: list[int]) -> Iterator[Segment]:
        """What rich's ``Table.__rich_console__`` yields for this table when nothing wraps: the title (rendered by
        rich: it may wrap), the top border, the header in the header style, the rows, the bottom border."""
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
        ascii_cells = all(header.isascii() for header in self.columns)
        for index, row in enumerate(self._rows):
            left, divider, right = foot if index == last else mid
            if ascii_cells and all(c.isascii() for c in row):  # type: ignore[union-attr]  # str, checked
                cells = [c.ljust(w) for c, w in zip(row, widths, strict=True)]  # type: ignore[union-attr]
            else:
                cells = [_ljust(c, w) for c, w in zip(row, widths, strict=True)]  # type: ignore[arg-type]
            yield Segment(left + divider.join(cells) + right)
            yield new_line
        yield Segment(the_box.get_bottom(padded), Style.null())
        yield new_line


def _ljust(text: str, width: int) -> str:
    """``text`` padded with spaces to ``width`` terminal cells (a wide character takes two)."""
    return text + " " * (width - cell_len(text))


def _literal(cell: Cell, style: str = "") -> Text:
    """A str cell as rich :class:`~rich.text.Text` taken literally (no markup, no emoji codes)."""
    return Text(cell, style=style) if isinstance(cell, str) else cell
