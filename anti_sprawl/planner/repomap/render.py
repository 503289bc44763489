"""Render a repository map as text that fits a token budget exactly.

Layout: a one-line header, a compact file tree (one line per directory), then outlines of the
highest-ranked files, none over a quarter of their room (so a 6k map shows the definitions of
more files than a few big ones). The tree takes at most ``TREE_SHARE`` of the budget when
there is code to outline: it collapses each directory to its best-ranked files, then drops the lowest-ranked
directories behind a "... N more files" line. Outlines fill the rest, best first, and what they
leave unused goes back to the tree. Every piece is costed with ``count_tokens``; the final
string is counted again and trimmed until it fits.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import NamedTuple

from ...outline.python import outline_file, outline_lines
from ...tokens import count_tokens, fill_budget

__all__ = ["COMPACT_TREE_SHARE", "TREE_SHARE", "RenderedMap", "dense_outline", "render_map"]

TREE_SHARE = 0.4
COMPACT_TREE_SHARE = 0.15  # definition lines say more per token than tree lines
_TRUNCATION_LEVEL = 2  # files per directory kept when even collapsing is not enough
_OUTLINES_TITLE = "## Outlines\n"
_MIN_PARTIAL = 48  # below this many tokens a cut-off outline says too little to be worth it
_PLAIN_NAME = re.compile(r"[\w.\-@=,~][\w.\-+@=,~]*")


class RenderedMap(NamedTuple):
    """The map text, its token count, outlined files, and every file the text names."""

    text: str
    tokens: int
    included_outlines: list[str]
    shown: set[str]


class _Dir(NamedTuple):
    name: str
    files: list[str]  # file names in rank order
    best: int  # rank position of its best file


def render_map(
    files: Sequence[str],
    order: Sequence[str],
    outline_of: Callable[[str], str | None],
    *,
    token_budget: int,
    listing_truncated: bool,
    has_code: bool,
    tree_share: float = TREE_SHARE,
) -> RenderedMap:
    """Header + tree + outlines of ``order``'s files, at most ``token_budget`` tokens."""
    suffix = ", listing capped" if listing_truncated else ""
    header = f"# Repository map ({len(files)} files{suffix})\n"
    if count_tokens(header) > token_budget:
        return RenderedMap("", 0, [], set())
    rest = token_budget - count_tokens(header)
    tree, shown = _tree(files, order, int(rest * tree_share) if has_code else rest)
    left = token_budget - count_tokens(header + tree) - count_tokens(_OUTLINES_TITLE)
    sections, included = _outlines(order, outline_of, left)
    if len(shown) < len(files) and has_code:
        # budget the outlines left unused goes back to the collapsed tree
        used = count_tokens(_OUTLINES_TITLE + "".join(sections)) if sections else 0
        tree, shown = _tree(files, order, rest - used)
    text = _assemble(header, tree, sections)
    tokens = count_tokens(text)
    while tokens > token_budget:
        # piecewise costs are only near-additive: trim from the end until the whole fits
        if sections:
            sections.pop()
            included.pop()
        elif tree:
            tree, shown = "", set()
        else:
            return RenderedMap("", 0, [], set())
        text = _assemble(header, tree, sections)
        tokens = count_tokens(text)
    return RenderedMap(text, tokens, included, shown | set(included))


def dense_outline(path: str, text: str) -> str | None:
    """``outline_file`` without docstring lines but the module's own first one: in a map,
    a definition line says more per token than a description of it."""
    entries = outline_lines(path, text)
    if entries is None:
        return outline_file(path, text)
    kept = [e.text for e in entries if e.kind != "doc" or (e.depth == 0 and e.line <= 3)]
    return "\n".join(t for t in kept if t.strip() != "...")


def _assemble(header: str, tree: str, sections: list[str]) -> str:
    return header + tree + (_OUTLINES_TITLE + "".join(sections) if sections else "")


def _tree(files: Sequence[str], order: Sequence[str], budget: int) -> tuple[str, set[str]]:
    rank = {f: i for i, f in enumerate(order)}
    grouped: dict[str, list[str]] = defaultdict(list)
    for f in sorted(files, key=lambda f: rank.get(f, len(rank))):
        directory, _, name = f.rpartition("/")
        grouped[directory].append(name)
    dirs = [
        _Dir(d, names, min(rank.get(f"{d}/{n}" if d else n, len(rank)) for n in names))
        for d, names in sorted(grouped.items())
    ]
    title = "## Files\n"

    def render(level: int | None) -> tuple[str, set[str]] | None:
        lines = [_dir_line(d, level) for d in dirs]
        text = title + "".join(line for line, _ in lines)
        if count_tokens(text) > budget:
            return None
        return text, {
            _join(d.name, n) for d, (_, names) in zip(dirs, lines, strict=True) for n in names
        }

    best = render(None)
    if best is None:
        # binary search for the most files per directory that fit (more files, more tokens);
        # each fitting probe is larger than the last one that fitted
        low, high = 1, max((len(d.files) for d in dirs), default=0) - 1
        while low <= high:
            middle = (low + high) // 2
            candidate = render(middle)
            if candidate is None:
                high = middle - 1
            else:
                best, low = candidate, middle + 1
    return best if best is not None else _truncated_tree(dirs, title, budget, len(files))


def _truncated_tree(dirs: list[_Dir], title: str, budget: int, total: int) -> tuple[str, set[str]]:
    level = _TRUNCATION_LEVEL
    marker_cost = count_tokens(f"... {total} more files in {len(dirs)} directories\n")
    room = budget - count_tokens(title) - marker_cost
    if room < 0:
        return "", set()
    kept: list[tuple[_Dir, str, list[str]]] = []
    used = 0
    for d in sorted(dirs, key=lambda d: (d.best, d.name)):
        line, names = _dir_line(d, level)
        cost = count_tokens(line)
        if used + cost <= room:
            kept.append((d, line, names))
            used += cost
    kept.sort(key=lambda item: item[0].name)
    shown = {_join(d.name, n) for d, _, names in kept for n in names}
    hidden_dirs = len(dirs) - len(kept)
    marker = f"... {total - len(shown)} more files"
    marker += f" in {hidden_dirs} directories\n" if hidden_dirs else "\n"
    return title + "".join(line for _, line, _ in kept) + marker, shown


def _dir_line(d: _Dir, level: int | None) -> tuple[str, list[str]]:
    names = d.files if level is None else d.files[:level]
    more = len(d.files) - len(names)
    label = f"{d.name}/" if d.name else "./"
    tail = f" +{more} more" if more else ""
    return f"{label}: {' '.join(_quote(n) for n in sorted(names))}{tail}\n", names


def _outlines(
    order: Sequence[str], outline_of: Callable[[str], str | None], room: int
) -> tuple[list[str], list[str]]:
    cap = max(room // 4, _MIN_PARTIAL)  # no single file may crowd out all the others
    sections: list[str] = []
    included: list[str] = []
    used = 0
    for path in order:
        if room - used < _MIN_PARTIAL // 2:
            break
        outline = outline_of(path)
        if not outline or not outline.strip():
            continue
        section = f"### {path}\n{outline.rstrip()}\n"
        cost = count_tokens(section)
        limit = min(cap, room - used)
        if cost > limit:
            cut = _cut(section, limit) if limit >= _MIN_PARTIAL else None
            if cut is None:
                break
            section, cost = cut
        sections.append(section)
        included.append(path)
        used += cost
    return sections, included


def _cut(section: str, limit: int) -> tuple[str, int] | None:
    """The section's first lines within ``limit``; None unless its title and a line fit."""
    ending = "... (outline cut to fit the budget)\n"
    room = limit - count_tokens(ending)
    kept, _ = fill_budget(section.splitlines(keepends=True), count_tokens, room)
    if len(kept) < 2:
        return None
    text = "".join(kept) + ending
    return text, count_tokens(text)


def _join(directory: str, name: str) -> str:
    return f"{directory}/{name}" if directory else name


def _quote(name: str) -> str:
    return name if _PLAIN_NAME.fullmatch(name) else json.dumps(name)
