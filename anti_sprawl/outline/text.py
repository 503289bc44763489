"""Outlines of text files: Markdown and reST headings, YAML keys, TOML/INI sections.

A 13k-token ``CHANGES.rst`` is mostly history a worker does not need; its headings, with line
numbers, tell it where to look (``read_file`` with a line range). Plain line scans, no parser:
a file that does not follow the convention simply yields fewer entries.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from .langs import MAX_OUTLINE_LINES, OutlineLine

__all__ = ["text_outlinable", "text_outline_lines"]

_ATX = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_SETEXT = re.compile(r"^(=+|-+)\s*$")
_RST_UNDERLINE = re.compile(r"^([=\-~^\"'`#*+:.<>_])\1{2,}\s*$")
_YAML_KEY = re.compile(r"^( {0,2})([^\s#:\-][^:#]*?|\"[^\"]*\"|'[^']*'):(\s|$)")
_SECTION = re.compile(r"^\s*\[{1,2}([^\]]+)\]{1,2}\s*(#.*|;.*)?$")
_KINDS = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".rst": "rst",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".toml": "sections",
    ".ini": "sections",
    ".cfg": "sections",
}
_LINE_LIMIT = 120


def text_outlinable(path: str) -> bool:
    """Whether ``text_outline_lines`` knows this kind of text file."""
    return PurePosixPath(path).suffix.lower() in _KINDS


def text_outline_lines(path: str, text: str) -> list[OutlineLine] | None:
    """Headings (or keys, or sections) of a text file with their line spans; None if unknown."""
    kind = _KINDS.get(PurePosixPath(path).suffix.lower())
    if kind is None:
        return None
    lines = text.splitlines()
    if kind == "markdown":
        found = _markdown(lines)
    elif kind == "rst":
        found = _rst(lines)
    elif kind == "yaml":
        found = [
            (i, len(m.group(1)) // 2, m.group(2).strip("\"'")) for i, m in _scan(_YAML_KEY, lines)
        ]
    else:
        found = [(i, 0, m.group(1).strip()) for i, m in _scan(_SECTION, lines)]
    return _with_spans(found[:MAX_OUTLINE_LINES], len(lines))


def _scan(pattern: re.Pattern[str], lines: list[str]) -> list[tuple[int, re.Match[str]]]:
    return [(i, m) for i, line in enumerate(lines, 1) if (m := pattern.match(line))]


def _markdown(lines: list[str]) -> list[tuple[int, int, str]]:
    found: list[tuple[int, int, str]] = []
    fenced = False
    for i, line in enumerate(lines, 1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        atx = _ATX.match(line)
        if atx:
            found.append((i, len(atx.group(1)) - 1, atx.group(2)))
        elif i > 1 and _SETEXT.match(line) and lines[i - 2].strip():
            title = lines[i - 2].strip()
            if not _SETEXT.match(lines[i - 2]) and not title.startswith(("-", "*", "|")):
                found.append((i - 1, 0 if line.startswith("=") else 1, title))
    return found


def _rst(lines: list[str]) -> list[tuple[int, int, str]]:
    """reST titles: a line underlined (optionally overlined) by one repeated punctuation char;
    levels in order of first appearance of each style, as docutils assigns them."""
    styles: list[tuple[str, bool]] = []
    found: list[tuple[int, int, str]] = []
    for i in range(1, len(lines)):
        under = _RST_UNDERLINE.match(lines[i])
        title = lines[i - 1].strip()
        if not under or not title or _RST_UNDERLINE.match(lines[i - 1]):
            continue
        if len(lines[i].rstrip()) < len(title):
            continue
        over = i >= 2 and lines[i - 2].rstrip() == lines[i].rstrip()
        style = (under.group(1), over)
        if style not in styles:
            styles.append(style)
        found.append((i, styles.index(style), title))
    return found


def _with_spans(found: list[tuple[int, int, str]], n_lines: int) -> list[OutlineLine]:
    """Each entry spans to the line before the next entry of the same or a higher level."""
    out: list[OutlineLine] = []
    for k, (line, depth, title) in enumerate(found):
        end = n_lines
        for later, later_depth, _ in found[k + 1 :]:
            if later_depth <= depth:
                end = later - 1
                break
        short = title if len(title) <= _LINE_LIMIT else title[: _LINE_LIMIT - 3] + "..."
        out.append(OutlineLine(line, max(line, end), depth, "heading", title, "  " * depth + short))
    return out
