"""Tables that keep names whole at any width: ids, branches and paths are never cut or broken.

Rich fits a table to the console by wrapping, folding or cropping its cells, so at 80 columns
a task id became ``write-the-subscrib…`` or broke over two lines, and neither can be copied
into ``inspect --task`` (issue 26, item 5). :func:`print_table` makes the columns that hold
names unbreakable; when the table then does not fit, it prints one block per row instead (the
name on its own line, the other cells below it as ``header: value``, broken at spaces), so
nothing is wider than the console, no name is split and no cell is cut short.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Collection

from rich.console import Console, RenderableType
from rich.segment import Segment, Segments
from rich.table import Table
from rich.text import Text

__all__ = ["print_table"]


def _plain(cell: RenderableType) -> str:
    if isinstance(cell, Text):
        return cell.plain
    return Text.from_markup(cell).plain if isinstance(cell, str) else str(cell)


def _header(column_header: RenderableType) -> str:
    return _plain(column_header).strip()


def print_table(console: Console, table: Table, whole: Collection[str]) -> None:
    """``table`` on ``console`` with the columns headed ``whole`` never cut or broken; as
    one block per row when the table cannot fit the console's width that way."""
    names = [i for i, column in enumerate(table.columns) if _header(column.header) in whole]
    for i in names:
        table.columns[i].no_wrap = True
        table.columns[i].overflow = "ignore"
    values = [[_plain(cell) for cell in column.cells] for column in table.columns]
    # Drawn once: the segments that decide whether it fits are the ones printed (a
    # 1,000-row table drawn twice was a tenth of validate --repo, issue 29 item 3).
    drawn = list(console.render(table, console.options))
    headers = [_header(column.header) for column in table.columns]
    if _fits(console, drawn, values, [v for i, v in enumerate(values) if i in names], headers):
        console.print(Segments(drawn))
        return
    if table.title:
        console.print(_plain(table.title), markup=False, highlight=False)
    key = names[0] if names else 0
    for row in range(table.row_count):
        console.print(values[key][row], markup=False, highlight=False, soft_wrap=True)
        cells = [
            f"{_header(column.header)}: {values[i][row]}"
            for i, column in enumerate(table.columns)
            if i != key and values[i][row].strip()
        ]
        text = "; ".join(cells)
        for line in textwrap.wrap(
            text,
            width=max(console.width - 2, 20),
            initial_indent="  ",
            subsequent_indent="    ",
            break_long_words=False,
            break_on_hyphens=False,
        ):
            console.print(line, markup=False, highlight=False, soft_wrap=True)


def _fits(
    console: Console,
    drawn: list[Segment],
    values: list[list[str]],
    whole: list[list[str]],
    headers: list[str],
) -> bool:
    """Whether a table ``drawn`` at the console's width shows every name whole on one line,
    and cuts no other cell short (an ellipsis that no cell holds) or folds it mid-word."""
    text = "".join(segment.text for segment in drawn if not segment.control)
    lines = text.splitlines()
    if any(len(line) > console.width for line in lines):
        return False
    if "…" in text and not any("…" in v for column in values for v in column):
        return False
    if not all(any(name in line for line in lines) for column in whole for name in column):
        return False
    # No other cell or header folded mid-word either ("yes" as y/e/s down a squeezed column):
    # every word of them is a word of the drawing (a set lookup: 1,000-row tables).
    shown = set(_CELL_SPLIT.split(text))
    words = {w for column in values for v in column for w in v.split()}
    words |= {w for header in headers for w in header.split()}
    return words <= shown


# Between the words of a drawn table: spaces and the box-drawing characters of its borders.
_CELL_SPLIT = re.compile(r"[\s\u2500-\u257f]+")
