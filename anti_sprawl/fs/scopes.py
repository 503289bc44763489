"""Scope entries: lexical checks, matching, and pattern overlap.

A scope entry is a repo-relative POSIX path: a file (``orders/service.py``), a directory
(``orders/`` — everything below it), or a glob where ``*`` and ``?`` never cross ``/`` and a
whole ``**`` component crosses any number of them. Entries are matched component-wise, so
``src/app`` never admits ``src/app2`` (the string-prefix bug in docs/security.md, P1).

Matching uses ``pathspec`` (gitignore-style wildmatch, every entry anchored at the repo root); the
pattern/pattern overlap test used by plan validation is a small product-automaton search
over components, which is sound with respect to that matcher (tested with hypothesis).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import Any

import pathspec

from ..ids import STATE_DIR_NAME

__all__ = [
    "ALWAYS_DENIED_DIRS",
    "MAX_COMPONENT",
    "MAX_PATH",
    "FileSet",
    "Scope",
    "entry_problem",
    "is_glob",
    "literal_prefix",
    "may_overlap",
    "normalize_entry",
]

MAX_PATH = 4096
MAX_COMPONENT = 255
ALWAYS_DENIED_DIRS = (".git", STATE_DIR_NAME)
_GLOB_CHARS = frozenset("*?[")
_DRIVE = re.compile(r"^[A-Za-z]:")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


# The entry-level functions below are pure functions of a short string, and a plan repeats its
# entries: a 10k-node plan names ``shared/`` 10k times and each dependency's module in every
# dependent's read scope, and validation asks about each entry several times (the model, the
# path checks, the overlap trie). Caching them made validation of benchmarks/validate_scale.py's
# 10k-node plan about 1.6-2.5x faster (measured side by side in one session). Bounded: a plan
# larger than the cache only recomputes.
_ENTRY_CACHE = 1 << 17


def entry_problem(entry: object) -> str | None:
    """Why ``entry`` is not an acceptable scope entry, or None when it is."""
    if not isinstance(entry, str):
        return "scope entries must be strings"
    return _entry_problem(entry)


@lru_cache(maxsize=_ENTRY_CACHE)
def _entry_problem(entry: str) -> str | None:
    if entry == "" or entry.strip() == "":
        return "empty scope entry"
    problem = _text_problem(entry)
    if problem:
        return problem
    parts = [p for p in entry.split("/") if p not in ("", ".")]
    if not parts:
        return "scope entry names the repository root itself; use '**' for everything"
    for part in parts:
        problem = _component_problem(part)
        if problem:
            return problem
    return None


def _text_problem(entry: str) -> str | None:
    """The characters, prefixes and length a repo-relative POSIX path never has."""
    if "\x00" in entry:
        return "NUL byte in path"
    if _CONTROL.search(entry):
        return "control character in path"
    if entry != entry.strip():
        return "leading or trailing whitespace"
    if "\\" in entry:
        return "backslash in path (use POSIX '/' separators)"
    if _DRIVE.match(entry):
        return "drive letter in path"
    if entry.startswith("/"):
        return "absolute path (scopes are relative to the repository root)"
    if entry.startswith("~"):
        return "home-relative path (scopes are relative to the repository root)"
    if len(entry) > MAX_PATH:
        return f"path longer than {MAX_PATH} characters"
    return None


def _component_problem(part: str) -> str | None:
    if part == "..":
        return "'..' segment escapes the repository"
    if len(part) > MAX_COMPONENT:
        return f"path component longer than {MAX_COMPONENT} characters"
    if part.lower() in ALWAYS_DENIED_DIRS:
        return f"'{part}/' is never in scope"
    return None


@lru_cache(maxsize=_ENTRY_CACHE)
def normalize_entry(entry: str) -> str:
    """Canonical form: no ``.`` or empty components; a trailing ``/`` kept for directories."""
    is_dir = entry.endswith("/")
    parts = [p for p in entry.split("/") if p not in ("", ".")]
    return "/".join(parts) + ("/" if is_dir else "")


@lru_cache(maxsize=_ENTRY_CACHE)
def is_glob(entry: str) -> bool:
    return any(ch in _GLOB_CHARS for ch in entry)


@lru_cache(maxsize=_ENTRY_CACHE)
def literal_prefix(entry: str) -> tuple[str, ...]:
    """The leading components of ``entry`` that contain no glob characters."""
    out: list[str] = []
    for part in normalize_entry(entry).rstrip("/").split("/"):
        if is_glob(part):
            break
        out.append(part)
    return tuple(out)


def _components(entry: str) -> tuple[str, ...]:
    # Every entry also covers what lies below it (a file name may be a directory), so the
    # pattern language is "entry" followed by an implicit "/**".
    return (*normalize_entry(entry).rstrip("/").split("/"), "**")


@lru_cache(maxsize=65536)
def _segments_intersect(a: str, b: str) -> bool:
    """Can one path component match both single-segment globs ``a`` and ``b``?"""
    return _intersect(_tokens(a), _tokens(b), "*", _chars_compatible)


def _intersect(
    a: Sequence[str], b: Sequence[str], star: str, compatible: Callable[[str, str], bool]
) -> bool:
    """Does some word match both token sequences ``a`` and ``b``?

    A product-automaton search: ``star`` matches any run of symbols (none included), any other
    token exactly one symbol, and two such tokens can match the same symbol when
    ``compatible``. Used twice: over the characters of one path component (``*``) and over
    the components of a path (``**``), with the first as the second's ``compatible``.
    """
    seen: set[tuple[int, int]] = set()
    stack = [(0, 0)]
    while stack:
        i, j = stack.pop()
        if (i, j) in seen:
            continue
        seen.add((i, j))
        if i == len(a) and j == len(b):
            return True
        x = a[i] if i < len(a) else None
        y = b[j] if j < len(b) else None
        if x == star:  # epsilon moves: a star may match nothing
            stack.append((i + 1, j))
        if y == star:
            stack.append((i, j + 1))
        if x is not None and y is not None and (x == star or y == star or compatible(x, y)):
            stack.append((i if x == star else i + 1, j if y == star else j + 1))
    return False


def _tokens(segment: str) -> list[str]:
    """Split a glob segment into tokens: '*', '?' (also stands for a [class]), or a literal."""
    out: list[str] = []
    i = 0
    while i < len(segment):
        ch = segment[i]
        if ch == "*":
            if not out or out[-1] != "*":
                out.append("*")
        elif ch == "[":
            end = segment.find("]", i + 2)
            if end == -1:
                out.append("[")
            else:
                out.append("?")  # over-approximate a class by "any character": stays sound
                i = end
        else:
            out.append(ch)
        i += 1
    return out


def _chars_compatible(x: str, y: str) -> bool:
    if x in ("*", "?") or y in ("*", "?"):
        return True
    return x == y


# One compiled pattern per entry text, shared by every Scope naming it: a plan's pre-flight
# builds several scopes per node from the same entries, and compiling each pattern's regex
# again was a third of ``validate --repo``'s time at 1,000 nodes (issue 29, item 3). A
# pattern is immutable once compiled.
_pattern = lru_cache(maxsize=_ENTRY_CACHE)(pathspec.util.lookup_pattern("gitignore"))


@lru_cache(maxsize=4096)
def _compiled(entries: tuple[str, ...]) -> tuple[tuple[str, ...], pathspec.PathSpec[Any]]:
    """The normalized ``entries`` and their matcher, built once per distinct entry list: the
    pre-flight builds each node's read, write and combined scopes in several places, and
    building the matcher again (pathspec joins every pattern into one regex) was a tenth of
    ``validate --repo`` at 1,000 nodes (issue 29, item 3). Both are only ever read."""
    normalized = tuple(normalize_entry(e) for e in entries)
    for raw in normalized:
        problem = entry_problem(raw)
        if problem:
            raise ValueError(f"bad scope entry {raw!r}: {problem}")
    return normalized, pathspec.PathSpec.from_lines(_pattern, ["/" + e for e in normalized])


def may_overlap(a: str, b: str) -> bool:
    """Could some path be matched by both scope entries ``a`` and ``b``?"""
    return _intersect(_components(a), _components(b), "**", _segments_intersect)


class Scope:
    """A set of scope entries that answers "is this canonical relative path inside?"."""

    def __init__(self, entries: Iterable[str]):
        self.entries, self._spec = _compiled(tuple(entries))

    def __repr__(self) -> str:
        return f"Scope({list(self.entries)!r})"

    def __bool__(self) -> bool:
        return bool(self.entries)

    def matches(self, relpath: str) -> bool:
        """True when the canonical repo-relative ``relpath`` lies inside this scope."""
        if not relpath or relpath.startswith("/"):
            return False
        return bool(self._spec.match_file(relpath))

    def may_contain(self, dir_relpath: str) -> bool:
        """True when something below directory ``dir_relpath`` ('' for the root) may match."""
        if dir_relpath in ("", "."):
            return bool(self.entries)
        probe = dir_relpath.rstrip("/") + "/"
        return self.matches(dir_relpath) or any(may_overlap(probe, e) for e in self.entries)

    def roots(self) -> list[str]:
        """The directory each directory or glob entry hangs from (``src/app`` for
        ``src/app/**``, ``""`` for ``**``); file entries have none."""
        return [
            "/".join(literal_prefix(e)) if is_glob(e) else e.rstrip("/")
            for e in self.entries
            if e.endswith("/") or is_glob(e)
        ]

    def union(self, other: Scope | Sequence[str]) -> Scope:
        more = other.entries if isinstance(other, Scope) else tuple(other)
        return Scope(dict.fromkeys((*self.entries, *more)))


class FileSet(Scope):
    """Exactly these files, and the directories that lead to them: a read scope that is a
    listing rather than patterns (the planner sees the repository map's file set and nothing
    else, so an ignored file is neither read nor listed nor searched: docs/security.md P20)."""

    def __init__(self, files: Iterable[str]):  # no patterns to compile: a set lookup
        self.files = frozenset(files)
        self.entries = tuple(sorted(self.files))
        self._dirs = {
            "/".join(f.split("/")[:i]) for f in self.files for i in range(1, f.count("/") + 1)
        }

    def __repr__(self) -> str:
        return f"FileSet({len(self.files)} files)"

    def matches(self, relpath: str) -> bool:
        return relpath in self.files

    def may_contain(self, dir_relpath: str) -> bool:
        if dir_relpath in ("", "."):
            return bool(self.files)
        return dir_relpath.rstrip("/") in self._dirs

    def union(self, other: Scope | Sequence[str]) -> Scope:
        more = other.entries if isinstance(other, Scope) else tuple(other)
        if more:
            raise ValueError("a file set takes no other scope")
        return self
