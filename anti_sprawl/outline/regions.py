"""The parts of a big file that matter to a goal: symbols it names, lines that use its words.

A worker asked to change ``Command.parse_args`` in a 3,000-line module needs that method and
the lines around the names its goal mentions, not the other 2,900 lines. ``goal_terms`` pulls
identifiers out of the goal, the brief and the upstream interfaces (code-looking ones are
*strong*: ``snake_case``, ``CamelCase``, ``dotted.names``, ``call()``, ```quoted```; plain
words are *weak*). ``select_regions`` scores line ranges of one file and keeps the best that
fit a token budget: the definition of a named symbol first, then windows around lines that
use strong terms, then (for files the node writes) the head of the file.
"""

from __future__ import annotations

import itertools
import keyword
import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import NamedTuple

from ..tokens import count_tokens
from .langs import OutlineLine

__all__ = [
    "Region",
    "Terms",
    "goal_terms",
    "line_count",
    "number_lines",
    "render_regions",
    "select_regions",
    "source_lines",
]

MAX_SYMBOL_LINES = 80  # a longer definition contributes its first SYMBOL_HEAD lines
SYMBOL_HEAD = 30
WINDOW = 3  # lines of context on each side of a line that uses a goal term
HEAD_LINES = 40
MAX_HITS = 300  # line hits considered per file: a term used everywhere says little
_IDENT = re.compile(r"`[^`\n]{1,80}`|[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*\(?")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_LINE_SPLIT = re.compile(r"\r\n|\r|\n")
_STOP = frozenset(
    {
        "about", "above", "add", "added", "adds", "after", "again", "against", "also", "because",
        "been", "before", "being", "below", "between", "both", "cannot", "change", "changed",
        "changes", "code", "could", "does", "doing", "down", "during", "each", "else", "every",
        "file", "files", "from", "further", "goal", "have", "having", "here", "instead", "into",
        "itself", "just", "keep", "like", "make", "more", "most", "much", "must", "need", "needs",
        "new", "next", "node", "none", "old", "only", "other", "over", "remove", "removed",
        "removes", "same", "should", "some", "still", "such", "task", "test", "tests", "than",
        "that", "their", "them", "then", "there", "these", "they", "this", "those", "through",
        "under", "until", "update", "updated", "updates", "used", "uses", "using", "very", "want",
        "what", "when", "where", "which", "while", "will", "with", "without", "would", "your",
    }
)  # fmt: skip


class Terms(NamedTuple):
    """Identifiers a goal mentions: ``strong`` look like code, ``weak`` are plain words."""

    strong: frozenset[str]
    weak: frozenset[str]

    @property
    def all(self) -> frozenset[str]:
        return self.strong | self.weak


class Region(NamedTuple):
    """An inclusive, 1-based range of source lines."""

    start: int
    end: int


def source_lines(text: str) -> list[str]:
    """``text`` split the way Python's parser numbers lines (``\\n``, ``\\r\\n``, ``\\r``)."""
    lines = _LINE_SPLIT.split(text)
    return lines[:-1] if lines and lines[-1] == "" else lines


def line_count(text: str) -> int:
    """``len(source_lines(text))``, without the list: counted for every scoped file of a
    plan's pre-flight, where splitting each one was 1,001 lists thrown away (issue 29)."""
    if "\r" in text:
        return len(source_lines(text))
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def _code_like(word: str) -> bool:
    return (
        "_" in word.strip("_")
        or any(c.isdigit() for c in word)
        or any(a.islower() and b.isupper() for a, b in itertools.pairwise(word))
        or sum(c.isupper() for c in word) >= 2
    )


def goal_terms(texts: Iterable[str]) -> Terms:
    """The identifiers of ``texts`` (goal, brief, upstream interfaces), strong and weak."""
    strong: set[str] = set()
    weak: set[str] = set()
    for text in texts:
        text_strong, text_weak = _text_terms(text)
        strong |= text_strong
        weak |= text_weak
    return Terms(frozenset(strong), frozenset(weak - strong))


@lru_cache(maxsize=1024)
def _text_terms(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """One text's strong and weak words, kept by content: every node's terms read the plan's
    requirement (the pre-flight reads it once per node of the plan)."""
    strong: set[str] = set()
    weak: set[str] = set()
    for match in _IDENT.finditer(text):
        token = match.group(0)
        quoted = token.startswith("`")
        called = token.endswith("(")
        words = _WORD.findall(token)
        dotted = len(words) > 1 and not quoted and "/" not in token
        for word in words:
            if len(word) < 3 or keyword.iskeyword(word):
                continue
            if quoted or called or dotted or _code_like(word):
                strong.add(word)
            elif len(word) >= 4 and word.lower() not in _STOP:
                weak.add(word)
    return frozenset(strong), frozenset(weak)


def number_lines(lines: Sequence[str], start: int, width: int) -> list[str]:
    """``lines`` (the first being line ``start``) as ``cat -n`` style numbered lines."""
    return [f"{n:>{width}}\t{line}" for n, line in enumerate(lines, start)]


def _candidates(
    lines: Sequence[str], entries: Sequence[OutlineLine], terms: Terms, *, head: bool
) -> list[tuple[float, Region]]:
    n = len(lines)
    found: list[tuple[float, Region]] = []
    for e in entries:
        if e.line < 1 or not e.name:
            continue
        words = set(_WORD.findall(e.name)) if e.kind == "heading" else {e.name}
        score = 3.0 if words & terms.strong else (1.0 if words & terms.weak else 0.0)
        if score:
            end = e.end if e.end - e.line < MAX_SYMBOL_LINES else e.line + SYMBOL_HEAD - 1
            found.append((score, Region(e.line, min(n, end))))
    pattern = _alternation(terms.strong or terms.weak)
    if pattern is not None:
        hits: list[tuple[float, Region]] = []
        for i, line in enumerate(lines, 1):
            used = set(pattern.findall(line))
            if used:
                score = (1.0 if terms.strong else 0.3) * len(used)
                hits.append((score, Region(max(1, i - WINDOW), min(n, i + WINDOW))))
        hits.sort(key=lambda h: -h[0])
        found += hits[:MAX_HITS]
    if head and n:
        found.append((0.1, Region(1, min(n, HEAD_LINES))))
    return found


def _alternation(words: frozenset[str]) -> re.Pattern[str] | None:
    if not words:
        return None
    ordered = sorted(words, key=lambda w: (-len(w), w))
    return re.compile(r"\b(" + "|".join(map(re.escape, ordered)) + r")\b")


def select_regions(
    lines: Sequence[str],
    entries: Sequence[OutlineLine],
    terms: Terms,
    budget: int,
    *,
    head: bool = False,
) -> list[Region]:
    """The best-scoring line ranges of a file that fit ``budget`` tokens, merged, in order.

    ``head`` adds the top of the file as a last resort (a file the node writes: imports and
    module constants are what an edit most often needs besides the named symbols).
    """
    width = len(str(len(lines)))
    cost: dict[int, int] = {}

    def tokens(i: int) -> int:
        if i not in cost:
            cost[i] = count_tokens(f"{i:>{width}}\t{lines[i - 1]}\n")
        return cost[i]

    chosen: set[int] = set()
    used = 0
    candidates = _candidates(lines, entries, terms, head=head)
    candidates.sort(key=lambda c: (-c[0], c[1].start))
    for _, region in candidates:
        new = [i for i in range(region.start, region.end + 1) if i not in chosen]
        if not new:
            continue
        extra = sum(tokens(i) for i in new) + 8  # the region's separator line
        if used + extra > budget:
            continue
        chosen.update(new)
        used += extra
    return _merge(sorted(chosen))


def _merge(numbers: list[int]) -> list[Region]:
    regions: list[Region] = []
    for i in numbers:
        if regions and i == regions[-1].end + 1:
            regions[-1] = Region(regions[-1].start, i)
        else:
            regions.append(Region(i, i))
    return regions


def render_regions(lines: Sequence[str], regions: Sequence[Region]) -> str:
    """The regions' exact lines, numbered, each under a ``--- lines a-b`` separator."""
    width = len(str(len(lines)))
    out: list[str] = []
    for r in regions:
        out.append(f"--- lines {r.start}-{r.end}")
        out += number_lines(lines[r.start - 1 : r.end], r.start, width)
    return "\n".join(out)
