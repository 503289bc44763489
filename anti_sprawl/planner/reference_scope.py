"""Read scopes from references: the modules that define what a task's write files use, ranked.

One hop of imports misses what a change actually needs (issue 27: 0.08-0.39 of the names real
diffs used had their defining module in the prompt): ``from attr import attrib`` imports a
package ``__init__`` that only re-exports ``_make.attrib``. ``outline.references`` resolves
each used name to its defining module; here those modules form a reference graph (write files
-> defining modules -> what those use, ``DEPTH`` levels), weighted by how often a name is
used, ranked by a personalised PageRank (``repomap.ranking``) that restarts at the write files
and at the modules defining identifiers the goal names, and cut where their smallest outlines
would pass ``share`` tokens.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence

from ..outline.references import References
from ..tokens import fill_budget
from .repomap.ranking import personalized_pagerank

__all__ = ["DEPTH", "MAX_GRAPH_FILES", "goal_identifiers", "ranked_references"]

DEPTH = 2  # write files' definers, and what those use in turn
MAX_GRAPH_FILES = 400  # files parsed for one task's graph at most
GOAL_SEED = 0.5  # restart mass of the goal's identifiers, against 1.0 for the write files
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")


def goal_identifiers(goal: str) -> set[str]:
    """Identifier-like words of the goal, as written (``attrib``, ``NotCallableError``)."""
    return set(_IDENTIFIER.findall(goal))


def reference_graph(
    refs: References, write_files: Sequence[str]
) -> dict[str, dict[str, float | None]]:
    """File -> the files defining what it uses (weight ``1 + ln(uses)``), ``DEPTH`` levels
    from the write files; every target is a key."""
    graph: dict[str, dict[str, float | None]] = {}
    frontier = list(write_files)
    expanded: set[str] = set()
    for _ in range(DEPTH):
        following: list[str] = []
        for path in frontier:
            if path in expanded or len(graph) >= MAX_GRAPH_FILES:
                continue
            expanded.add(path)
            counts: dict[str, int] = {}
            for use in refs.uses(path):
                counts[use.definition.path] = counts.get(use.definition.path, 0) + use.times
            graph[path] = {t: 1.0 + math.log(n) for t, n in sorted(counts.items())}
            for target in counts:
                graph.setdefault(target, {})
                following.append(target)
        frontier = following
    return graph


def ranked_references(
    refs: References,
    write_files: Sequence[str],
    goal: str,
    share: int,
    cost: Callable[[str], int],
) -> list[str]:
    """Files (not ``write_files``) defining what they use, best first, within ``share``
    tokens of ``cost`` (a file's smallest outline)."""
    graph = reference_graph(refs, write_files)
    seeds = {w: 1.0 for w in write_files if w in graph}
    if not seeds:
        return []
    wanted = goal_identifiers(goal)
    named = [
        p
        for p in graph
        if p not in seeds and (f := refs.facts(p)) is not None and wanted & f.defined.keys()
    ]
    for p in named:
        seeds[p] = GOAL_SEED * len(write_files) / len(named)
    scores = personalized_pagerank(graph, seeds)
    candidates = sorted(
        (p for p in graph if p not in set(write_files)), key=lambda p: (-scores[p], p)
    )
    return fill_budget(candidates, cost, share, skip=True)[0]
