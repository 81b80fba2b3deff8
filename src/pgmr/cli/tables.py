"""Tables that fit the terminal: the least important columns go first, long text wraps, nothing is cut.

Rich alone squeezes every column when a table is wider than the terminal, and at 80 columns that cuts headers
and IDs into ellipses ("placeho…", "confide…"). A `FittedTable` chooses its columns when it is rendered, at
the width it is given: columns a reader can do without are dropped, least important first, until the others
fit at a readable width; text columns (labels, descriptions) then wrap at word boundaries, and every other
column keeps its values on one line. `--wide` keeps every column, as wide as it needs, whatever the terminal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import typer
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

WIDE_OPTION = typer.Option(
    False,
    "--wide",
    help="Show every table column, each as wide as it needs, however narrow the terminal (lines may then be "
    "longer than it); by default the least important columns are left out when the terminal is too narrow",
)

# The narrowest a wrapped label or description is still read in a glance; a droppable column stays only while
# the wrapped ones keep at least this (or their whole text, when shorter).
LABEL_FLOOR = 12
DESCRIPTION_FLOOR = 24
# Wikidata IDs run to Q + 9 digits: reserving that much makes the choice of columns the same for tables whose
# IDs happen to be shorter, so that the tables of one answer show the same columns.
ID_WIDTH = 10

Justify = Literal["left", "right"]


@dataclass(frozen=True)
class Column:
    """`drop`: 0 for a column that is always shown; otherwise the order in which columns go when the width runs
    short, the highest first. `floor`: for a wrapped column, the narrowest it may become before a droppable
    column goes; for a one-line column, the width reserved for it when columns are chosen."""

    header: str
    drop: int = 0
    wrap: bool = False
    floor: int = 0
    justify: Justify = "left"


@dataclass(frozen=True)
class Row:
    cells: tuple[str | Text, ...]  # a str is plain text, never markup: labels may hold [brackets]
    style: str | None = None


def row(*cells: str | Text, style: str | None = None) -> Row:
    return Row(cells, style)


def _text(cell: str | Text) -> Text:
    return cell if isinstance(cell, Text) else Text(cell)


def _longest_word(text: Text) -> int:
    return max((cell_len(word) for word in text.plain.split()), default=0)


def _longest_line(text: Text) -> int:
    return max((cell_len(line) for line in text.plain.splitlines()), default=0)


def _shrink(widths: dict[int, int], lows: dict[int, int], room: int) -> bool:
    """Narrow the widest wrapped column, one cell at a time, until they fit `room` (rich's own order), never
    below `lows`; False when they cannot, with `widths` left at `lows` for a next try with lower ones."""
    while sum(widths.values()) > room:
        movable = [i for i in widths if widths[i] > lows[i]]
        if not movable:
            return False
        widest = max(movable, key=lambda i: widths[i])
        widths[widest] -= 1
    return True


def _edges(columns: int) -> int:
    """Cells a table spends around its columns: one cell of padding either side of each, and a border line
    between and around them."""
    return 3 * columns + 1


@dataclass(frozen=True)
class FittedTable:
    """A rich table laid out at the width it is rendered at (see the module docstring)."""

    columns: tuple[Column, ...]
    rows: tuple[Row, ...]
    title: str | None = None  # markup
    caption: str | None = None  # markup
    wide: bool = False
    header_style: str = "table.header"

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.layout(options.max_width)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.layout(options.max_width))

    def layout(self, width: int) -> Table:
        cells = [[_text(c) for c in r.cells] for r in self.rows]
        headers = [cell_len(c.header) for c in self.columns]
        # An empty column takes no cell but its padding, as in rich.
        natural = [max([headers[i], *(_longest_line(r[i]) for r in cells)]) for i in range(len(self.columns))]

        def reserved(i: int) -> int:
            column = self.columns[i]
            # A wrapped column reserves its floor whatever its text, short in one table and long in the next,
            # so that the tables of one answer show the same columns.
            return max(headers[i], column.floor) if column.wrap else max(natural[i], column.floor)

        kept = list(range(len(self.columns)))

        def needed() -> int:
            return _edges(len(kept)) + sum(reserved(i) for i in kept)

        if self.wide:
            width = max(width, needed())
        while needed() > width and (droppable := [i for i in kept if self.columns[i].drop]):
            kept.remove(max(droppable, key=lambda i: self.columns[i].drop))

        wrapped = [i for i in kept if self.columns[i].wrap]
        room = width - _edges(len(kept)) - sum(natural[i] for i in kept if i not in wrapped)
        widths = {i: natural[i] for i in wrapped}
        words = {i: max([headers[i], *(_longest_word(r[i]) for r in cells)]) for i in wrapped}
        floors = {i: max(words[i], min(reserved(i), natural[i])) for i in wrapped}
        # Floors and whole words first, then whole words alone; a word wider than the room left is folded (split
        # over lines, never cut) as a last resort.
        if not _shrink(widths, floors, room) and not _shrink(widths, words, room):
            _shrink(widths, {i: min(reserved(i), natural[i]) for i in wrapped}, room)

        table = Table(
            title=self.title,
            caption=self.caption,
            title_justify="left",
            header_style=self.header_style,
        )
        for i in kept:
            column = self.columns[i]
            table.add_column(
                column.header,
                justify=column.justify,
                no_wrap=not column.wrap,
                width=widths.get(i),
                overflow="fold",  # never an ellipsis, even in a terminal too narrow for the essentials
            )
        if self.wide:
            # Rich would squeeze the table back into the terminal; a wide one is meant to be wider.
            table.width = _edges(len(kept)) + sum(widths.get(i, natural[i]) for i in kept)
        for r, texts in zip(self.rows, cells, strict=True):
            table.add_row(*(texts[i] for i in kept), style=r.style)
        return table


__all__ = [
    "DESCRIPTION_FLOOR",
    "ID_WIDTH",
    "LABEL_FLOOR",
    "WIDE_OPTION",
    "Column",
    "FittedTable",
    "Row",
    "row",
]
