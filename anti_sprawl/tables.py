"""Tables that keep names whole at any width: ids, branches and paths are never cut or broken.

Rich fits a table to the console by wrapping, folding or cropping its cells, so at 80 columns
a task id became ``write-the-subscrib…`` or broke over two lines, and neither can be copied
into ``inspect --task`` (issue 26, item 5). :func:`print_table` makes the columns that hold
names unbreakable; when the table then does not fit, it prints one block per row instead (the
name on its own line, the other cells below it as ``header: value``, broken at spaces), so
nothing is wider than the console, no name is split and no cell is cut short.
"""

from __future__ import annotations

import io
import textwrap
from collections.abc import Collection

from rich.console import Console, RenderableType
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
    if _fits(console, table, values, [v for i, v in enumerate(values) if i in names]):
        console.print(table)
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


def _fits(console: Console, table: Table, values: list[list[str]], whole: list[list[str]]) -> bool:
    """Whether ``table`` drawn at the console's width shows every name whole on one line,
    and cuts no other cell short (an ellipsis that no cell holds) or folds it mid-word."""
    probe = Console(
        file=io.StringIO(), width=console.width, color_system=None, legacy_windows=False
    )
    probe.print(table)
    drawn = probe.file.getvalue()  # type: ignore[attr-defined]
    if any(len(line) > console.width for line in drawn.splitlines()):
        return False
    if "…" in drawn and not any("…" in v for column in values for v in column):
        return False
    lines = drawn.splitlines()
    if not all(any(name in line for line in lines) for column in whole for name in column):
        return False
    # no other cell or header folded mid-word either ("yes" as y/e/s down a squeezed column)
    words = {w for column in values for v in column for w in v.split()}
    words |= {w for column in table.columns for w in _header(column.header).split()}
    return all(any(word in line for line in lines) for word in words)
