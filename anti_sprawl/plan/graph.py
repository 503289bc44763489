"""The plan's dependency graph: cycles, layers, which nodes are ordered, the critical path.

Every piece is a short hand-written loop because ``benchmarks/validate_scale.py``, which
times it against networkx on a 10,000-node plan in the same run, found networkx slower or no
faster each time (figures in docs/reference.md, "Dependencies"); networkx is a development
dependency only, the oracle ``tests/test_plan_graph.py`` checks these answers against:

- cycle finding: a linear depth-first search that already returns the cycle to print;
  ``networkx.find_cycle`` revisits explored nodes on an acyclic graph (tens of times slower),
  and even strongly connected components first are several times slower.
- ordering for the unordered-pair checks: per-node ancestor bitsets; a ``has_path`` per
  candidate pair is a graph search each time, several times slower, and quadratic when many
  nodes read what one early node writes.
- the critical path: one pass over a topological order; ``dag_longest_path`` weighs edges,
  not nodes, so the graph must be rebuilt with weights and a sink.
- layers (``show``): Kahn's algorithm by waves; ``topological_generations`` was a tie, and
  importing networkx alone takes longer than layering 10,000 nodes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence

from .model import Plan, TaskNode

__all__ = [
    "Ordering",
    "critical_path",
    "dependency_edges",
    "find_cycle",
    "plan_layers",
    "topological_order",
]

Edges = Mapping[str, Sequence[str]]
"""``task_id -> its dependencies``: every dependency is itself a key, none is the task itself."""


def dependency_edges(plan: Plan) -> dict[str, list[str]]:
    """Each task's known dependencies, without itself: what the graph algorithms assume."""
    known = {t.task_id for t in plan.tasks}
    return {
        t.task_id: [d for d in t.dependencies if d in known and d != t.task_id] for t in plan.tasks
    }


def find_cycle(edges: Edges) -> list[str] | None:
    """One cycle of ``edges`` in execution order, or None.

    Iterative three-colour DFS; returns the cycle as ``[a, b, c]`` meaning a runs before b
    before c before a (printed ``a -> b -> c -> a``). Hand-written: see the module docstring.
    """
    white, grey, black = 0, 1, 2
    colour = dict.fromkeys(edges, white)
    for start in edges:
        if colour[start] != white:
            continue
        path: list[str] = [start]
        iters = [iter(edges[start])]
        colour[start] = grey
        while iters:
            nxt = next(iters[-1], None)
            if nxt is None:
                colour[path.pop()] = black
                iters.pop()
                continue
            state = colour.get(nxt, black)
            if state == grey:
                found = path[path.index(nxt) :]
                # path runs dependent -> dependency; report in execution order
                return list(reversed(found))
            if state == white:
                colour[nxt] = grey
                path.append(nxt)
                iters.append(iter(edges[nxt]))
    return None


def topological_order(edges: Edges) -> list[str]:
    """Kahn's order of an acyclic ``edges`` (dependencies first); a cycle's nodes are left out."""
    indegree = {n: len(deps) for n, deps in edges.items()}
    dependents: dict[str, list[str]] = defaultdict(list)
    for n, deps in edges.items():
        for d in deps:
            dependents[d].append(n)
    ready = [n for n, k in indegree.items() if k == 0]
    order: list[str] = []
    while ready:
        n = ready.pop()
        order.append(n)
        for m in dependents[n]:
            indegree[m] -= 1
            if indegree[m] == 0:
                ready.append(m)
    return order


class Ordering:
    """Whether the DAG orders two tasks (one is an ancestor of the other), in O(1) per pair.

    Per task, a bitset of its transitive dependencies (a Python int); built once in one pass
    over a topological order. Hand-written: see the module docstring.
    """

    def __init__(self, edges: Edges):
        self._index = {tid: i for i, tid in enumerate(edges)}
        self._ancestors: dict[str, int] = {}
        for tid in topological_order(edges):
            bits = 0
            for dep in edges[tid]:
                bits |= self._ancestors[dep] | (1 << self._index[dep])
            self._ancestors[tid] = bits

    def depends_on(self, task: str, other: str) -> bool:
        """True when ``other`` is a (transitive) dependency of ``task``."""
        return bool(self._ancestors[task] >> self._index[other] & 1)

    def ordered(self, a: str, b: str) -> bool:
        """True when one of ``a`` and ``b`` must finish before the other starts."""
        anc, index = self._ancestors, self._index
        return bool(anc[b] >> index[a] & 1) or bool(anc[a] >> index[b] & 1)


def plan_layers(plan: Plan) -> list[list[TaskNode]]:
    """Topological layers: every node in layer k depends only on nodes in layers < k.

    Nodes in one layer never depend on each other, so they may run at the same time; within
    a layer, nodes keep their plan order. Unknown dependencies and self-dependencies are
    ignored; a plan with a cycle raises ``ValueError`` (validate first). Kahn's algorithm
    by waves, hand-written: see the module docstring.
    """
    edges = dependency_edges(plan)
    by_id = {t.task_id: t for t in plan.tasks}
    position = {tid: i for i, tid in enumerate(edges)}
    waiting = {tid: len(set(deps)) for tid, deps in edges.items()}
    dependents: dict[str, list[str]] = {tid: [] for tid in edges}
    for tid, deps in edges.items():
        for dep in set(deps):
            dependents[dep].append(tid)
    layers: list[list[TaskNode]] = []
    wave = [tid for tid, count in waiting.items() if count == 0]
    placed = 0
    while wave:
        layers.append([by_id[tid] for tid in sorted(wave, key=position.__getitem__)])
        placed += len(wave)
        following: list[str] = []
        for tid in wave:
            for child in dependents[tid]:
                waiting[child] -= 1
                if waiting[child] == 0:
                    following.append(child)
        wave = following
    if placed != len(edges):
        raise ValueError("the plan has a dependency cycle")
    return layers


def critical_path(plan: Plan, weight: Callable[[TaskNode], float]) -> tuple[list[str], float]:
    """The chain of dependent tasks with the largest total ``weight``, and that total.

    Whatever ``--jobs`` allows, these tasks run one after another, so their total bounds the
    run from below (in time, or in tokens spent in sequence). Of equally heavy chains, the
    one ending at the task listed first wins. Nodes on a cycle are left out (validate first).
    """
    edges = dependency_edges(plan)
    by_id = {t.task_id: t for t in plan.tasks}
    position = {t.task_id: i for i, t in enumerate(plan.tasks)}
    best: dict[str, float] = {}
    previous: dict[str, str | None] = {}
    for tid in topological_order(edges):
        before, via = 0.0, None
        for dep in edges[tid]:
            if via is None or best[dep] > before:
                before, via = best[dep], dep
        best[tid] = before + weight(by_id[tid])
        previous[tid] = via
    if not best:
        return [], 0.0
    last = max(best, key=lambda tid: (best[tid], -position[tid]))
    chain: list[str] = []
    step: str | None = last
    while step is not None:
        chain.append(step)
        step = previous[step]
    return chain[::-1], best[last]
