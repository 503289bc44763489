"""How plan validation scales, and which graph code earns its place: hand-written or networkx.

Part 1: validation of plans of 1k and 10k nodes, time and its growth ratio. Each generated
node writes its own module and test, reads its dependencies' modules plus a shared read-only
package, and depends on up to three earlier nodes (a random DAG). Validation should grow
near-linearly with nodes + edges: the ratio of times should be close to the ratio of sizes
(10x), far from the 100x a naive all-pairs overlap check would give.

Part 2: each graph piece of ``plan/graph.py`` (and the run branch's commit order) on the
10k-node plan, the hand-written loop and networkx timed in this same run, interleaved (the
machine is shared, so only ratios measured together mean anything). The networkx times
include building its graph from the plan, which the hand-written code does not need. The
package uses whichever is faster (docs/reference.md, "Dependencies"); the other lives here, so the
comparison stays runnable, and a line says so when this run disagrees with the choice beyond
the machine's noise. networkx is a development dependency only: the tests check the
hand-written code against it.
"""

from __future__ import annotations

import random
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import networkx as nx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from anti_sprawl.plan.graph import (
    Ordering,
    critical_path,
    dependency_edges,
    find_cycle,
    plan_layers,
)
from anti_sprawl.plan.model import Plan, TaskNode
from anti_sprawl.plan.validate import validate
from anti_sprawl.run.scheduler import topological_order as scheduler_order


def make_plan(n: int, seed: int = 7, foundation: bool = False) -> tuple[dict[str, Any], int]:
    """The benchmark plan; with ``foundation``, t0 also writes ``shared/base.py`` and every
    node without dependencies depends on t0 (a common shape: everyone reads what one writes)."""
    rng = random.Random(seed)
    tasks: list[dict[str, Any]] = []
    edges = 0
    for i in range(n):
        deps = sorted({f"t{rng.randrange(i)}" for _ in range(min(i, rng.randint(0, 3)))})
        if foundation and i and not deps:
            deps = ["t0"]
        edges += len(deps)
        pkg = f"pkg{i % 50}"
        write = [f"{pkg}/mod_{i}.py", f"tests/{pkg}/test_mod_{i}.py"]
        tasks.append(
            {
                "task_id": f"t{i}",
                "name": f"node {i}",
                "goal": "generated",
                "dependencies": deps,
                "read_scope": ["shared/", *(f"pkg{int(d[1:]) % 50}/mod_{d[1:]}.py" for d in deps)],
                "write_scope": [*write, "shared/base.py"] if foundation and i == 0 else write,
                "token_budget": 40_000,
                "max_tool_calls": 20,
            }
        )
    return {"plan_id": f"bench{n}", "requirement": "benchmark", "tasks": tasks}, edges


def measure(n: int, repeats: int = 3) -> tuple[float, int]:
    plan, edges = make_plan(n)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        report = validate(plan)
        best = min(best, time.perf_counter() - start)
        assert report.valid, report.errors[:3]
    return best, n + edges


# --- the implementations the package does not use ---------------------------------------


def nx_graph(edges: Mapping[str, Sequence[str]]) -> nx.DiGraph:
    graph = nx.DiGraph()
    graph.add_nodes_from(edges)
    graph.add_edges_from((d, tid) for tid, deps in edges.items() for d in deps)
    return graph


def before_layers(plan: Plan) -> list[list[TaskNode]]:
    """The layering ``views/plan.py`` had before ``plan/graph.py`` (depths by waves, sorted)."""
    by_id = {t.task_id: t for t in plan.tasks}
    depth: dict[str, int] = {}
    order = {t.task_id: i for i, t in enumerate(plan.tasks)}
    remaining = {t.task_id: {d for d in t.dependencies if d in by_id} for t in plan.tasks}
    dependents: dict[str, list[str]] = {tid: [] for tid in by_id}
    for tid, deps in remaining.items():
        for d in deps:
            dependents[d].append(tid)
    frontier = [tid for tid, deps in remaining.items() if not deps]
    for tid in frontier:
        depth[tid] = 0
    while frontier:
        nxt: list[str] = []
        for tid in frontier:
            for child in dependents[tid]:
                remaining[child].discard(tid)
                depth[child] = max(depth.get(child, 0), depth[tid] + 1)
                if not remaining[child]:
                    nxt.append(child)
        frontier = nxt
    layers: list[list[TaskNode]] = []
    for tid in sorted(depth, key=lambda t: (depth[t], order[t])):
        while len(layers) <= depth[tid]:
            layers.append([])
        layers[depth[tid]].append(by_id[tid])
    return layers


def nx_layers(plan: Plan) -> list[list[TaskNode]]:
    """``networkx.topological_generations``, each layer in plan order (what ``show`` needs)."""
    by_id = {t.task_id: t for t in plan.tasks}
    graph = nx_graph(dependency_edges(plan))
    position = {tid: i for i, tid in enumerate(by_id)}
    return [
        [by_id[tid] for tid in sorted(layer, key=position.__getitem__)]
        for layer in nx.topological_generations(graph)
    ]


def nx_find_cycle(edges: Mapping[str, Sequence[str]]) -> list[str] | None:
    try:
        return [u for u, _ in nx.find_cycle(nx_graph(edges))]
    except nx.NetworkXNoCycle:
        return None


def nx_scc_cycle(edges: Mapping[str, Sequence[str]]) -> list[str] | None:
    """networkx's best route: strongly connected components, then a cycle inside one."""
    graph = nx_graph(edges)
    for component in nx.strongly_connected_components(graph):
        if len(component) > 1:
            return [u for u, _ in nx.find_cycle(graph.subgraph(component))]
    return None


def candidate_pairs(plan: Plan) -> list[tuple[str, str]]:
    """(task, writer) pairs whose scopes name the same path: what the overlap check orders."""
    writers: dict[str, list[str]] = {}
    for t in plan.tasks:
        for entry in t.write_scope:
            writers.setdefault(entry, []).append(t.task_id)
    under: dict[str, list[str]] = {}  # directory entry -> written paths below it
    for t in plan.tasks:
        for entry in t.read_scope:
            if entry.endswith("/") and entry not in under:
                under[entry] = [w for w in writers if w.startswith(entry)]
    pairs = []
    for t in plan.tasks:
        for entry in [*t.write_scope, *t.read_scope]:
            names = under.get(entry, [entry] if entry in writers else [])
            pairs += [(t.task_id, o) for w in names for o in writers[w] if o != t.task_id]
    return pairs


def hand_ordering(edges: Mapping[str, Sequence[str]], pairs: list[tuple[str, str]]) -> int:
    ordering = Ordering(edges)
    return sum(ordering.ordered(a, b) for a, b in pairs)


def nx_ordering(edges: Mapping[str, Sequence[str]], pairs: list[tuple[str, str]]) -> int:
    graph = nx_graph(edges)
    return sum(nx.has_path(graph, a, b) or nx.has_path(graph, b, a) for a, b in pairs)


def nx_critical_path(plan: Plan, weight: Callable[[TaskNode], float]) -> list[str]:
    """``dag_longest_path`` weighs edges: each edge carries its tail's weight, plus a sink."""
    by_id = {t.task_id: t for t in plan.tasks}
    edges = dependency_edges(plan)
    graph = nx.DiGraph()
    graph.add_nodes_from(edges)
    graph.add_edges_from(
        (d, tid, {"w": weight(by_id[d])}) for tid, deps in edges.items() for d in deps
    )
    sinks = [tid for tid in edges if graph.out_degree(tid) == 0]
    graph.add_edges_from((tid, "\0sink", {"w": weight(by_id[tid])}) for tid in sinks)
    return list(nx.dag_longest_path(graph, weight="w"))[:-1]


def nx_scheduler_order(edges: Mapping[str, Sequence[str]], order: Sequence[str]) -> list[str]:
    rank = {t: i for i, t in enumerate(order)}
    return list(nx.lexicographical_topological_sort(nx_graph(edges), key=rank.__getitem__))


NOISE = 1.25  # this shared machine's run-to-run spread: smaller differences are a tie


def best_of(fns: list[Callable[[], object]], repeats: int) -> list[float]:
    """Best time of each function, runs interleaved so both see the same machine load."""
    best = [float("inf")] * len(fns)
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            start = time.perf_counter()
            fn()
            best[i] = min(best[i], time.perf_counter() - start)
    return best


def compare_pieces(n: int = 10_000, repeats: int = 5) -> None:
    plan = Plan.model_validate(make_plan(n)[0])
    found = Plan.model_validate(make_plan(n, foundation=True)[0])
    edges, found_edges = dependency_edges(plan), dependency_edges(found)
    order = [t.task_id for t in plan.tasks]
    pairs, found_pairs = candidate_pairs(plan), candidate_pairs(found)
    sample = found_pairs[-2000:]  # has_path is slow here: time both sides on the same 2,000
    budget: Callable[[TaskNode], float] = lambda t: float(t.token_budget)  # noqa: E731

    ids = [[t.task_id for t in layer] for layer in plan_layers(plan)]
    assert ids == [[t.task_id for t in layer] for layer in before_layers(plan)]
    assert ids == [[t.task_id for t in layer] for layer in nx_layers(plan)]
    assert find_cycle(edges) is None
    assert nx_scc_cycle(edges) is None
    assert hand_ordering(edges, pairs) == nx_ordering(edges, pairs) == len(pairs)
    assert scheduler_order(edges, order) == nx_scheduler_order(edges, order)
    weight_of = {t.task_id: t.token_budget for t in plan.tasks}
    chain, total = critical_path(plan, budget)
    assert (
        sum(weight_of[t] for t in nx_critical_path(plan, budget))
        == total
        == sum(weight_of[t] for t in chain)
    )

    pieces: list[tuple[str, Callable[[], object], Callable[[], object], str]] = [
        ("layers (show)", lambda: plan_layers(plan), lambda: nx_layers(plan), "hand"),
        (
            "cycle finding: find_cycle",
            lambda: find_cycle(edges),
            lambda: nx_find_cycle(edges),
            "hand",
        ),
        (
            "cycle finding: SCC first",
            lambda: find_cycle(edges),
            lambda: nx_scc_cycle(edges),
            "hand",
        ),
        (
            f"ordering, {len(pairs):,} pairs",
            lambda: hand_ordering(edges, pairs),
            lambda: nx_ordering(edges, pairs),
            "hand",
        ),
        (
            f"ordering, foundation, {len(sample):,} pairs",
            lambda: hand_ordering(found_edges, sample),
            lambda: nx_ordering(found_edges, sample),
            "hand",
        ),
        (
            "critical path",
            lambda: critical_path(plan, budget),
            lambda: nx_critical_path(plan, budget),
            "hand",
        ),
        (
            "run branch commit order",
            lambda: scheduler_order(edges, order),
            lambda: nx_scheduler_order(edges, order),
            "hand",
        ),
    ]
    print(f"\n{n // 1000}k nodes, best of {repeats}, hand-written vs networkx in this run:")
    print(f"{'piece':40} {'hand':>10} {'networkx':>10} {'nx/hand':>8}  used")
    for label, hand, with_nx, used in pieces:
        t_hand, t_nx = best_of([hand, with_nx], repeats)
        ratio = t_nx / t_hand
        print(f"{label:40} {t_hand * 1000:8.1f}ms {t_nx * 1000:8.1f}ms {ratio:7.2f}x  {used}")
        slower = ratio if used == "networkx" else 1 / ratio
        if slower > NOISE:
            print(f"  ^ here the implementation used was {slower:.2f}x slower than the other")
    t_now, t_before = best_of([lambda: plan_layers(plan), lambda: before_layers(plan)], repeats)
    print(
        f"layers, the code before plan/graph.py: {t_before * 1000:.1f}ms, now "
        f"{t_now * 1000:.1f}ms ({t_before / t_now:.2f}x faster now)"
    )


def import_cost(module: str, repeats: int = 5) -> float:
    """Seconds a fresh interpreter spends importing ``module``, best of ``repeats``."""

    def run(code: str) -> float:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        return time.perf_counter() - start

    bare, loaded = [], []
    for _ in range(repeats):
        bare.append(run("pass"))
        loaded.append(run(f"import {module}"))
    return min(loaded) - min(bare)


def main() -> None:
    small_t, small_size = measure(1_000)
    large_t, large_size = measure(10_000)
    print(f"1k nodes:  {small_t * 1000:8.1f} ms  (nodes+edges = {small_size:,})")
    print(f"10k nodes: {large_t * 1000:8.1f} ms  (nodes+edges = {large_size:,})")
    size_ratio = large_size / small_size
    time_ratio = large_t / small_t
    print(f"size ratio {size_ratio:.1f}x, time ratio {time_ratio:.1f}x")
    print(
        f"growth relative to linear: {time_ratio / size_ratio:.2f} (1.0 = linear; ~10 = quadratic)"
    )
    compare_pieces()
    print(f"import networkx: {import_cost('networkx') * 1000:.0f} ms over a bare interpreter")


if __name__ == "__main__":
    main()
