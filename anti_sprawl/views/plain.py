"""Plain-text views of runs too big for Rich's tables: ``status RUN`` and ``inspect RUN``.

Rich lays out every cell of a table (measure, wrap, pad, crop), about a millisecond a row on
this project's machines, and ``inspect`` printed one table per model call: a 1,000-node run's
``status`` took 6 s and its ``inspect`` 85 s (issue 22). Past ``LARGE`` nodes ``status`` prints
aligned columns instead, one line a row, in one write; past ``MANY_CALLS`` calls ``inspect``
gives each call one line (``--task`` or ``--json`` shows its items). The cells are the same ones views/run.py and
context/manifest.py compute for the Rich tables.
"""

from __future__ import annotations

import textwrap
from collections.abc import Collection, Iterable, Sequence

from rich.console import Console
from rich.text import Text

from ..context.manifest import ContextManifest
from .terminal import inert

__all__ = [
    "LARGE",
    "MANY_CALLS",
    "columns",
    "plain",
    "print_lines",
    "render_manifest_lines",
    "wrapped",
]

LARGE = 100  # nodes up to which Rich's tables are quick enough (a few tenths of a second)
MANY_CALLS = 40  # model calls past which ``inspect`` gives each one line, not a table of items


def columns(
    headers: Sequence[str], rows: Iterable[Sequence[str]], right: Collection[int] = ()
) -> list[str]:
    """``rows`` under ``headers`` in aligned columns (those numbered in ``right`` aligned
    right); plain text in and out."""
    table = [list(headers), *(list(r) for r in rows)]
    widths = [max(len(row[i]) for row in table) for i in range(len(headers))]
    lines = []
    for row in table:
        cells = [
            cell.rjust(w) if i in right else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
    lines.insert(1, "-" * len(lines[0]))
    return lines


def plain(markup: str) -> str:
    """A line of Rich markup as the text it shows."""
    return Text.from_markup(markup).plain


def wrapped(line: str, width: int, indent: str = "    ") -> list[str]:
    """``line`` in lines of at most ``width`` columns, broken at spaces only (an id, a path or
    a number is never split; one longer than the width keeps a line of its own), the
    continuations indented: a log line in a pipe that stays readable at 80 columns."""
    return textwrap.wrap(
        line,
        width=max(width, 20),
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [line]


def print_lines(console: Console, lines: Iterable[str]) -> None:
    """Plain lines written to the console's file at once: even one Rich print of them all
    costs a fifth of a millisecond a line (it splits, strips and measures each). They are
    made inert first (views/terminal.py): they hold task messages and test output."""
    console.file.write(inert("".join(f"{line}\n" for line in lines)))
    console.file.flush()


def render_manifest_lines(manifests: Sequence[ContextManifest], console: Console) -> None:
    """``inspect`` of many calls: one line per call, then the tokens per task."""
    lines = [f"{len(manifests):,} model calls (one line each; --task TASK shows a call's items)"]
    lines += columns(
        ("task", "call", "attempt", "model", "items", "tokens", "dropped", "stable prefix"),
        (
            (
                m.task_id,
                str(m.n),
                str(m.attempt),
                m.model or "-",
                str(len(m.items)),
                f"{m.total_tokens:,}",
                str(len(m.dropped)),
                f"{m.stable_prefix_bytes:,} B {m.stable_prefix_sha256[:12]}",
            )
            for m in manifests
        ),
        right={1, 2, 4, 5, 6},
    )
    by_task: dict[str, list[ContextManifest]] = {}
    for m in manifests:
        by_task.setdefault(m.task_id, []).append(m)
    lines += ["", "tokens per task"]
    lines += columns(
        ("task", "calls", "input tokens", "untrusted", "hidden chars"),
        (
            (
                task_id,
                str(len(ms)),
                f"{sum(m.total_tokens for m in ms):,}",
                f"{sum(i.tokens for m in ms for i in m.items if i.trust == 'untrusted'):,}",
                str(sum(i.hidden_chars for m in ms for i in m.items)),
            )
            for task_id, ms in by_task.items()
        ),
        right={1, 2, 3, 4},
    )
    print_lines(console, lines)
