"""Which files matter for a requirement: mentions, word relevance, import-graph PageRank.

Relevance seeds a personalized PageRank over the Python import graph. An edge ``a -> b``
means "a imports b". We walk it both ways: forward edges (weight 1) lead from a relevant
module to the interfaces it uses, which a worker must read to change it; reverse edges
(weight ``reverse_weight``, 0.5 by default) lead to its importers, the callers a change may
break. Plain forward PageRank would only ever flow into widely imported utility modules;
plain reverse would ignore the contracts a module depends on. Out-weights are divided by
``max(total, 1)``, not by the total, so a module that is only imported (one reverse edge)
passes on half its mass rather than all of it and a leaf does not become a conduit. The
restart probability is 0.5 (``alpha`` 0.5): relevance to the requirement dominates and each
hop halves the mass, so direct neighbours of a relevant file outrank files two hops away.

The import graph is a plain mapping (file -> the files it imports, in order) and the power
iteration is done here over adjacency lists: ``networkx.pagerank`` needs numpy/scipy in
networkx 3.x, and networkx itself is not a runtime dependency (docs/reference.md, "Dependencies").
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import NamedTuple

from ...outline.references import module_index

__all__ = [
    "ImportGraph",
    "RequirementTerms",
    "WeightedGraph",
    "build_import_graph",
    "defining_files",
    "explicit_files",
    "identifier_words",
    "module_index",
    "personalized_pagerank",
    "relevance",
    "requirement_terms",
    "split_words",
]

_STOPWORDS = frozenset(
    (  # noqa: SIM905 -- a word list reads better as text
        "the and for from into with that this then than when what which where while have has had "
        "not but all any are was were will would should could can may must our its their there "
        "them they his her use using used make made add also each other some such only just more "
        "most very new old get set via per out off onto upon over under about after before"
    ).split()
)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_TOKEN = re.compile(r"[\w./\-]+")
_EXTENSION = re.compile(r"\.[A-Za-z][A-Za-z0-9]*$")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")
_INNER_CAPITAL = re.compile(r"[a-z][A-Z]")
_BACKTICKS = re.compile(r"`([^`\n]{1,80})`")
_MAX_MODULE_TARGETS = 5  # one dotted name found in many places is ambiguous; cap its edges


ImportGraph = dict[str, dict[str, None]]
"""File -> the files it imports, as an ordered set (dict keys): the edges PageRank walks."""

WeightedGraph = Mapping[str, Mapping[str, float | None]]
"""File -> the files it leads to, each with an edge weight (None: 1.0), e.g. names used."""


class RequirementTerms(NamedTuple):
    """Words (normalized), identifier-like tokens, and path-like mentions in a requirement."""

    words: frozenset[str]
    identifiers: frozenset[str]
    mentions: tuple[str, ...]


def split_words(name: str) -> list[str]:
    """``OrderCreatedEvent`` / ``order_created-event.py`` -> ``["order", "created", "event"]``."""
    return list(_words(name))


@lru_cache(maxsize=1 << 16)
def _words(name: str) -> tuple[str, ...]:
    # cached: directory names and symbol names repeat across thousands of files
    words: list[str] = []
    for chunk in _WORD.findall(name):
        for piece in _CAMEL.findall(chunk):
            word = _normalize(piece.lower())
            if len(word) >= 3 and word not in _STOPWORDS:
                words.append(word)
    return tuple(words)


def requirement_terms(requirement: str) -> RequirementTerms:
    """Split a requirement into the terms the ranking matches against paths and symbols."""
    mentions: list[str] = []
    identifiers: set[str] = set()
    for raw in _TOKEN.findall(requirement):
        token = raw.rstrip(".-").removeprefix("./").lstrip("/")  # sentence punctuation
        if "/" in token or _EXTENSION.search(token):
            mentions.append(token)
        for ident in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", token):
            if len(ident) >= 3 and ident.lower() not in _STOPWORDS:
                identifiers.add(ident.lower())
    return RequirementTerms(
        frozenset(split_words(requirement)), frozenset(identifiers), tuple(mentions)
    )


def build_import_graph(
    imports: Mapping[str, Sequence[str]], index: Mapping[str, Sequence[str]]
) -> ImportGraph:
    """File -> the in-repo files it imports (each once, in order); every file in ``imports``
    is a key, and so is every imported file."""
    graph: ImportGraph = {source: {} for source in imports}
    for source, names in imports.items():
        for name in names:
            targets = index.get(name, ())
            if len(targets) > _MAX_MODULE_TARGETS:
                continue
            for target in targets:
                if target != source:
                    graph[source][target] = None
                    graph.setdefault(target, {})
    return graph


def defining_files(requirement: str, symbols: Mapping[str, Sequence[str]]) -> list[str]:
    """Files defining a code identifier the requirement names (``deep_iterable``,
    ``OrderCreated``, anything in backticks), each found in at most a few files."""
    wanted = {
        ident
        for ident in _IDENT.findall(requirement)
        if "_" in ident.strip("_") or _INNER_CAPITAL.search(ident)
    }
    wanted |= {m for quoted in _BACKTICKS.findall(requirement) for m in _IDENT.findall(quoted)}
    by_symbol: dict[str, list[str]] = defaultdict(list)
    for path, names in symbols.items():
        for name in names:
            if name in wanted:
                by_symbol[name].append(path)
    found: dict[str, None] = {}
    for name in sorted(by_symbol):
        if len(by_symbol[name]) <= _MAX_MODULE_TARGETS:
            found.update(dict.fromkeys(sorted(by_symbol[name])))
    return list(found)


def explicit_files(
    mentions: Sequence[str], files: Sequence[str], index: Mapping[str, Sequence[str]]
) -> list[str]:
    """Files a requirement names: full paths, path suffixes, unique file names, module names."""
    by_name: dict[str, list[str]] = defaultdict(list)
    for f in files:
        by_name[f.rsplit("/", 1)[-1]].append(f)
    fileset = set(files)
    found: dict[str, None] = {}
    for mention in mentions:
        if mention.endswith("/"):
            continue  # a directory is relevant, not named: see ``relevance``
        if mention in fileset:
            hits = [mention]
        elif "/" in mention:
            hits = [f for f in files if f.endswith("/" + mention)]
        else:
            hits = list(by_name.get(mention, ())) or list(index.get(mention, ()))
        if 0 < len(hits) <= _MAX_MODULE_TARGETS:
            found.update(dict.fromkeys(sorted(hits)))
    return list(found)


def relevance(
    files: Sequence[str],
    symbols: Mapping[str, Sequence[str]],
    terms: RequirementTerms,
    text_words: Mapping[str, frozenset[str]] | None = None,
) -> dict[str, float]:
    """Score of each file against the requirement; rare words weigh more (inverse frequency).

    A word in the file's name weighs most, then one in the names it defines, then one of its
    directory: that one is shared by the directory's files, so each gets the word's weight
    over the square root of how many share it (``docs`` in a requirement must not lift every
    image under ``docs/`` over the code). ``text_words`` (the words of each file's
    identifiers, ``identifier_words``) add a quarter weight for words only its code uses."""
    if not terms.words and not terms.identifiers and not terms.mentions:
        return {}
    path_words: dict[str, tuple[set[str], set[str]]] = {}
    symbol_words: dict[str, set[str]] = {}
    used_words: dict[str, set[str]] = {}
    df: dict[str, int] = defaultdict(int)
    dir_df: dict[str, int] = defaultdict(int)
    text_df: dict[str, int] = defaultdict(int)
    for f in files:
        directory, _, name = f.rpartition("/")
        stem = set(_words(name.rpartition(".")[0] or name)) & terms.words
        dirs = set(_words(directory)) & terms.words
        syms = {w for s in symbols.get(f, ()) for w in _words(s)} & terms.words
        used = set((text_words or {}).get(f, frozenset()) & terms.words) - stem - dirs - syms
        path_words[f], symbol_words[f], used_words[f] = (stem, dirs), syms, used
        for word in stem | dirs | syms:
            df[word] += 1
        for word in dirs - stem:
            dir_df[word] += 1
        for word in used | syms:
            text_df[word] += 1
    # BM25's idf: a word found in nearly every file weighs nearly nothing
    n_files = len(files)
    idf = {w: math.log(1 + (n_files - n + 0.5) / (n + 0.5)) for w, n in df.items()}
    text_idf = {w: math.log(1 + (n_files - n + 0.5) / (n + 0.5)) for w, n in text_df.items()}
    directories = [m if m.endswith("/") else m + "/" for m in terms.mentions if "." not in m]
    scores: dict[str, float] = {}
    for f in files:
        stem, dirs = path_words[f]
        score = sum(2 * idf[w] for w in stem)
        score += sum(idf[w] / math.sqrt(dir_df[w]) for w in dirs - stem)
        score += sum(0.5 * idf[w] for w in symbol_words[f] - stem - dirs)
        score += sum(0.25 * text_idf[w] for w in used_words[f])
        score += 3.0 * sum(1 for s in symbols.get(f, ()) if s.lower() in terms.identifiers)
        if any(f.startswith(d) or ("/" + d) in ("/" + f) for d in directories):
            score += 3.0
        if score > 0:
            scores[f] = score
    return scores


def identifier_words(text: str) -> frozenset[str]:
    """The words (``split_words``) of every identifier in ``text``, each once."""
    return frozenset(w for ident in set(_IDENT.findall(text)) for w in _words(ident))


def personalized_pagerank(
    graph: WeightedGraph,
    personalization: Mapping[str, float],
    *,
    alpha: float = 0.5,
    reverse_weight: float = 0.5,
    max_iter: int = 100,
    tol: float = 1e-6,
) -> dict[str, float]:
    """PageRank restarting at ``personalization`` (uniform if empty), edges walked both ways."""
    nodes = list(graph)
    nodes += [n for n in personalization if n not in graph]
    if not nodes:
        return {}
    index = {n: i for i, n in enumerate(nodes)}
    restart = _restart(personalization, index)
    adjacency, leaky = _transitions(graph, index, reverse_weight)
    rank = restart[:]
    for _ in range(max_iter):
        nxt = _step(rank, adjacency, leaky, restart, alpha)
        delta = sum(abs(a - b) for a, b in zip(nxt, rank, strict=True))
        rank = nxt
        if delta < tol:
            break
    return dict(zip(nodes, rank, strict=True))


def _restart(personalization: Mapping[str, float], index: Mapping[str, int]) -> list[float]:
    """Where a random walk restarts: ``personalization`` normalised, or uniform without it."""
    count = len(index)
    total = sum(v for v in personalization.values() if v > 0)
    if total <= 0:
        return [1.0 / count] * count
    restart = [0.0] * count
    for node, value in personalization.items():
        restart[index[node]] = max(value, 0.0) / total
    return restart


def _transitions(
    graph: WeightedGraph, index: Mapping[str, int], reverse_weight: float
) -> tuple[list[list[tuple[int, float]]], list[tuple[int, float]]]:
    """Per node, its out-edges with the share of mass each passes on, and the nodes that leak
    mass (their edges pass on less than all of it) with the share that restarts instead."""
    count = len(index)
    weights: list[dict[int, float]] = [{} for _ in range(count)]
    for u, targets in graph.items():
        i = index[u]
        for v, given in targets.items():
            j = index[v]
            w = 1.0 if given is None else given
            if i != j:
                weights[i][j] = weights[i].get(j, 0.0) + w
                if reverse_weight > 0:
                    weights[j][i] = weights[j].get(i, 0.0) + reverse_weight * w
    adjacency: list[list[tuple[int, float]]] = []
    kept = [0.0] * count  # share of a node's mass its edges pass on; the rest restarts
    for i, out_weights in enumerate(weights):
        total_weight = sum(out_weights.values())
        norm = max(total_weight, 1.0)
        adjacency.append([(j, w / norm) for j, w in out_weights.items()])
        kept[i] = total_weight / norm
    leaky = [(i, 1.0 - kept[i]) for i in range(count) if kept[i] < 1.0]
    return adjacency, leaky


def _step(
    rank: list[float],
    adjacency: list[list[tuple[int, float]]],
    leaky: list[tuple[int, float]],
    restart: list[float],
    alpha: float,
) -> list[float]:
    """One power-iteration step: follow the edges with ``alpha``, restart with the rest."""
    nxt = [0.0] * len(rank)
    for i, out in enumerate(adjacency):
        mass = rank[i]
        if mass:
            for j, w in out:
                nxt[j] += mass * w
    leak = sum(rank[i] * share for i, share in leaky)
    return [alpha * (x + leak * r) + (1 - alpha) * r for x, r in zip(nxt, restart, strict=True)]


def _normalize(word: str) -> str:
    # crude plural folding so "orders" meets "order"; applied to both sides alike
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word
