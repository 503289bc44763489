"""How one file is shown to a model: whole, as a numbered outline, or outline plus regions.

Outlines come at three levels, so a big file can shrink before anything is dropped:
``full`` (signatures, first docstring lines, imports, module names), ``signatures`` (no
docstrings or decorators) and ``names`` (only what each definition is called). Every outline
line starts with the line number of what it stands for, so ``read_file`` with ``start_line`` /
``end_line`` (``read_view``) can fetch the body. A file too large for its share of the prompt
becomes a *region view*: its outline plus the regions most relevant to the goal
(``regions.select_regions``), exact text with line numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from typing import Literal, NamedTuple

from ..fs.path_rules import EditError
from ..tokens import count_tokens
from .python import OutlineLine, outline_lines
from .regions import (
    Region,
    Terms,
    number_lines,
    render_regions,
    select_regions,
    source_lines,
)
from .text import text_outline_lines

__all__ = [
    "LEVELS",
    "MIN_REGION_TOKENS",
    "Level",
    "LineRangeError",
    "RegionView",
    "file_outline",
    "read_view",
    "region_view",
    "render_outline",
]

Level = Literal["full", "signatures", "names"]
LEVELS: tuple[Level, ...] = ("full", "signatures", "names")
MIN_REGION_TOKENS = 300  # even the smallest view of a file the node writes shows some text
_NAMED = frozenset({"class", "def", "name", "heading"})


class LineRangeError(EditError):
    """A ``read_file`` range that does not lie inside the file (reported to the model)."""


def file_outline(path: str, text: str) -> list[OutlineLine] | None:
    """Numbered outline entries of any file we can outline (code or text), else None."""
    entries = outline_lines(path, text)
    return entries if entries is not None else text_outline_lines(path, text)


def _short(e: OutlineLine) -> str:
    indent = e.text[: len(e.text) - len(e.text.lstrip())]
    body = e.text.lstrip()
    if e.kind == "class" and body.startswith("class "):
        return f"{indent}class {e.name}"
    if e.kind == "def" and e.name and body.startswith(("def ", "async def ")):
        return f"{indent}{'async def' if body.startswith('async') else 'def'} {e.name}"
    if e.kind == "heading":
        return e.text
    if e.name:
        return indent + e.name
    return e.text if len(e.text) <= 60 else e.text[:57] + "..."


def render_outline(
    entries: Sequence[OutlineLine],
    level: Level,
    n_lines: int,
    detailed: AbstractSet[int] = frozenset(),
) -> str:
    """The outline at ``level``, each line prefixed with its source line number; entries
    starting on a ``detailed`` line show their whole signature even at ``names``."""
    width = len(str(max(n_lines, 1)))
    out: list[str] = []
    for e in entries:
        if level != "full" and (
            e.kind in ("doc", "decorator") or (e.kind == "other" and e.text.strip() == "...")
        ):
            continue
        if level == "names" and e.kind not in _NAMED and e.line:
            continue
        short = level == "names" and e.line not in detailed
        text = _short(e) if short else e.text
        if level != "full" and e.kind == "def" and text.endswith(":"):
            text += " ..."
        prefix = f"{e.line:>{width}}: " if e.line else " " * (width + 2)
        out.append(prefix + text)
    return "\n".join(out)


class RegionView(NamedTuple):
    """A big file as outline plus regions: the text and what went into it."""

    text: str
    level: Level | None
    regions: list[Region]


def region_view(
    path: str,
    text: str,
    entries: Sequence[OutlineLine] | None,
    terms: Terms,
    budget: int,
    *,
    head: bool,
) -> RegionView:
    """``path`` in about ``budget`` tokens: the richest outline level that leaves
    ``MIN_REGION_TOKENS`` for regions, then the most relevant regions in what is left."""
    lines = source_lines(text)
    intro = (
        f"{path}: {len(lines):,} lines, too large to show whole here. Below: its outline "
        "(line number: definition) and the regions most relevant to the goal (exact text, "
        "numbered). read_file with start_line/end_line shows any other lines; edit_file "
        "works on the whole file.\n"
    )
    used = count_tokens(intro) + 20  # and the data block around it
    outline = "(no outline for this kind of file)"
    level: Level | None = None
    if entries is not None:
        level = "names"
        outline = render_outline(entries, "names", len(lines))
        for candidate in LEVELS[:-1]:
            rendered = render_outline(entries, candidate, len(lines))
            if used + count_tokens(rendered) + MIN_REGION_TOKENS <= budget:
                outline, level = rendered, candidate
                break
    used += count_tokens(outline) + 10
    left = max(MIN_REGION_TOKENS, budget - used)
    regions = select_regions(lines, entries or (), terms, left, head=head)
    shown = render_regions(lines, regions) if regions else "(no region matched the goal)"
    body = f"{intro}## outline\n{outline}\n## regions\n{shown}\n"
    return RegionView(body, level, regions)


def read_view(
    path: str, text: str, start_line: int | None, end_line: int | None, *, max_chars: int
) -> str:
    """What ``read_file`` returns: the text, or numbered lines ``start_line..end_line``.

    A whole read longer than ``max_chars`` returns the file's numbered outline instead (the
    model then asks for ranges); a range longer than ``max_chars`` stops early and says where
    to continue; one that ends past the file's end is read to it. LineRangeError for a range
    that starts outside the file.
    """
    if start_line is None and end_line is None:
        if len(text) <= max_chars:
            return text
        return _too_long(path, text, max_chars)
    lines = source_lines(text)
    n = len(lines)
    first = start_line if start_line is not None else 1
    last = end_line if end_line is not None else n
    if first < 1 or (end_line is not None and last < first):
        raise LineRangeError(
            f"{path}: bad line range {first}-{last}: lines are numbered from 1 and "
            "end_line may not be before start_line"
        )
    if n == 0:
        raise LineRangeError(f"{path} is empty: it has no lines to show")
    if first > n:
        raise LineRangeError(
            f"{path} has {n:,} lines: the range {first}-{last} goes past the end "
            f"(ask for lines 1-{n} at most)"
        )
    # a range that starts inside the file and ends past it is read to the end (make
    # real-model 2026-12-04 run e, planner call 3: lines 3-7 of a 5-line calc.py, refused,
    # and the model answered nothing)
    ends = f" (the file ends at line {n})" if last > n else ""
    last = min(last, n)
    width = len(str(n))
    shown: list[str] = []
    size = 0
    for number, line in zip(
        range(first, last + 1), number_lines(lines[first - 1 : last], first, width), strict=True
    ):
        if shown and size + len(line) + 1 > max_chars - 120:
            more = f" (stopped at the observation limit; continue with start_line={number})"
            return f"{path} lines {first}-{number - 1} of {n}{more}\n" + "\n".join(shown)
        shown.append(line)
        size += len(line) + 1
    return f"{path} lines {first}-{last} of {n}{ends}\n" + "\n".join(shown)


def _too_long(path: str, text: str, max_chars: int) -> str:
    lines = source_lines(text)
    head = (
        f"{path}: {len(lines):,} lines ({len(text):,} characters), too long to return whole. "
        "Read it in parts with start_line/end_line"
    )
    entries = file_outline(path, text)
    if entries:
        room = max_chars - len(head) - 80
        for level in LEVELS:
            outline = render_outline(entries, level, len(lines))
            if len(outline) <= room:
                return f"{head}; its outline (line number: definition):\n{outline}"
        cut = outline[:room].rsplit("\n", 1)[0]
        return f"{head}; the start of its outline (line number: name):\n{cut}\n[outline cut]"
    width = len(str(len(lines)))
    numbered: list[str] = []
    size = len(head) + 60
    for line in number_lines(lines, 1, width):
        if size + len(line) + 1 > max_chars:
            break
        numbered.append(line)
        size += len(line) + 1
    return f"{head}; its first {len(numbered)} lines:\n" + "\n".join(numbered)
