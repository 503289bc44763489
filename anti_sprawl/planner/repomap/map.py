"""The repository map: file tree, outlines and import graph, ranked for a requirement.

What the planner sees of a repository before it plans: every (non-secret, non-ignored) file
named in a compact tree, and the interfaces of the files most relevant to the requirement,
in at most ``token_budget`` tokens. Building it reads each source file once, to find its
imports and defined names; outlines are rendered lazily, only for the files that fit.

    listing (fs.repofiles) -> scan (pyscan) -> import graph + relevance (ranking) -> text (render)
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict

from ...errors import UsageError
from ...fs.repofiles import FileListing, RepoReader
from ...outline.langs import language_for
from ...outline.python import outlinable, outline_file
from .pyscan import scan_python_fast
from .ranking import (
    build_import_graph,
    defining_files,
    explicit_files,
    identifier_words,
    module_index,
    personalized_pagerank,
    relevance,
    requirement_terms,
)
from .render import COMPACT_TREE_SHARE, TREE_SHARE, dense_outline, render_map

__all__ = ["MAX_MAP_FILES", "SCAN_BYTES", "MapSignals", "RepoMap", "build_repo_map"]

MAX_MAP_FILES = 50_000
"""Files the map lists at most (sorted by path); past it, the map says it was cut."""

SCAN_BYTES = 64 * 1024 * 1024
"""Total source bytes read to find imports and symbols; past it, files rank by path alone."""

_MAX_SYMBOLS = 500
PRIOR_SHARE = 0.25
_TEST_PATH = re.compile(r"(?:^|/)(?:tests?|testing)/|(?:^|/)test_[^/]*$|_test\.[^/]*$")
_DEFINED_NAME = re.compile(
    r"\b(?:function|class|def|fn|struct|trait|interface|enum|type|func|record)\s+\*?\s*([A-Za-z_]\w*)"
)


class RepoMap(BaseModel):
    """A ranked map of a repository that fits its token budget.

    ``ranked`` holds every listed file with its score, files the requirement names first.
    ``omitted`` counts listed files that the text does not name at all (collapsed or cut).
    """

    model_config = ConfigDict(frozen=True)

    files: list[str]
    ranked: list[tuple[str, float]]
    text: str
    tokens: int
    included_outlines: list[str]
    omitted: int


class MapSignals(NamedTuple):
    """What makes the map dense (issue 27; each can be turned off to measure its worth,
    ``benchmarks/repomap_history.py --ablation``): files defining a code identifier the
    requirement names rank with the files it names (``symbols``); outlines without docstring
    lines but the module's first (``no_docstrings``); a tree at most ``COMPACT_TREE_SHARE`` of
    the budget, so definitions get the rest (``compact_tree``); a prior for source modules
    that define much (``prior``: ``PRIOR_SHARE`` of the restart mass, by the log of their
    definitions, tests and ``.pyi`` stubs left out: a stub declares another module's names), so a requirement that says little ranks code over docs;
    words the requirement shares with the identifiers a file uses, at a quarter weight
    (``text_words``)."""

    symbols: bool = True
    no_docstrings: bool = True
    compact_tree: bool = True
    prior: bool = True
    text_words: bool = True


class _Scan(NamedTuple):
    imports: dict[str, list[str]]
    symbols: dict[str, list[str]]
    words: dict[str, frozenset[str]]  # words of the identifiers each source file uses


def build_repo_map(
    root: Path,
    requirement: str,
    *,
    token_budget: int,
    max_files: int = MAX_MAP_FILES,
    listing: FileListing | None = None,
    signals: MapSignals = MapSignals(),
) -> RepoMap:
    """Map ``root`` for ``requirement`` in at most ``token_budget`` tokens (cl100k count).

    ``listing`` is the repository's listing when the caller has made it already (the planner
    lists once for the map and for scope assistance); the map takes its first ``max_files``.
    """
    if token_budget < 0:
        raise ValueError("token_budget must be >= 0")
    if not root.is_dir():
        raise UsageError(f"not a directory: {root}")
    reader = RepoReader(root)
    if listing is None:
        listing = reader.list_files(max_files=max_files)
    elif len(listing.files) > max_files:
        listing = FileListing(listing.files[:max_files], truncated=True)
    files = listing.files
    scan = _scan(reader, files)
    index = module_index(files)
    ranked = _rank(requirement, files, scan, index, signals)

    def outline_of(path: str) -> str | None:
        if not outlinable(path):
            return None
        text = reader.read(path)
        if text is None:
            return None
        return dense_outline(path, text) if signals.no_docstrings else outline_file(path, text)

    rendered = render_map(
        files,
        [f for f, _ in ranked],
        outline_of,
        token_budget=token_budget,
        listing_truncated=listing.truncated,
        has_code=any(outlinable(f) for f in files),
        tree_share=COMPACT_TREE_SHARE if signals.compact_tree else TREE_SHARE,
    )
    return RepoMap(
        files=files,
        ranked=ranked,
        text=rendered.text,
        tokens=rendered.tokens,
        included_outlines=rendered.included_outlines,
        omitted=len(files) - len(rendered.shown),
    )


def _rank(
    requirement: str,
    files: list[str],
    scan: _Scan,
    index: dict[str, list[str]],
    signals: MapSignals,
) -> list[tuple[str, float]]:
    """Every file with its score: files the requirement names first, then by PageRank."""
    graph = build_import_graph(scan.imports, index)
    terms = requirement_terms(requirement)
    named = explicit_files(terms.mentions, files, index)
    if signals.symbols:
        named += [f for f in defining_files(requirement, scan.symbols) if f not in set(named)]
    personalization = relevance(
        files, scan.symbols, terms, scan.words if signals.text_words else None
    )
    # Files the user names hold at least half of the restart mass, however many files the
    # words match, so their import neighbours rank next.
    mass = max(sum(personalization.values()), 1.0)
    for path in named:
        personalization[path] = personalization.get(path, 0.0) + mass / len(named)
    if signals.prior:
        _add_prior(personalization, scan.symbols)
    scores = personalized_pagerank(graph, personalization)
    first = set(named)
    rest = sorted((f for f in files if f not in first), key=lambda f: (-scores.get(f, 0.0), f))
    return [(f, scores.get(f, 0.0)) for f in [*named, *rest]]


def _add_prior(personalization: dict[str, float], symbols: dict[str, list[str]]) -> None:
    weights = {
        f: math.log1p(len(names))
        for f, names in symbols.items()
        if names and not _TEST_PATH.search(f) and not f.endswith(".pyi")
    }
    total = sum(weights.values())
    if total <= 0:
        return
    mass = PRIOR_SHARE * max(sum(personalization.values()), 1.0)
    for f, w in weights.items():
        personalization[f] = personalization.get(f, 0.0) + mass * w / total


def _scan(reader: RepoReader, files: list[str]) -> _Scan:
    """Imports of Python files and defined names of all source files, within ``SCAN_BYTES``."""
    imports: dict[str, list[str]] = {}
    symbols: dict[str, list[str]] = {}
    words: dict[str, frozenset[str]] = {}
    budget = SCAN_BYTES
    for path in files:
        if budget <= 0:
            break
        is_python = path.endswith((".py", ".pyi"))
        if not is_python and language_for(path) is None:
            continue
        text = reader.read(path)
        if text is None:
            continue
        budget -= len(text)
        words[path] = identifier_words(text)
        if is_python:
            facts = scan_python_fast(text, path)
            imports[path] = facts.imports
            symbols[path] = facts.symbols[:_MAX_SYMBOLS]
        else:
            symbols[path] = _DEFINED_NAME.findall(text)[:_MAX_SYMBOLS]
    return _Scan(imports, symbols, words)
