"""The plan's graph algorithms against their definitions and networkx, on random DAGs.

Which implementation each piece uses (networkx or hand-written) is decided by
``benchmarks/validate_scale.py``; these tests hold every piece to the same answers.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from anti_sprawl.cli.app import app
from anti_sprawl.plan.graph import (
    Ordering,
    critical_path,
    dependency_edges,
    plan_layers,
    topological_order,
)
from anti_sprawl.plan.model import Plan

from .conftest import node, plan_data

# A random DAG: node i may depend only on nodes listed before it; the list is then shuffled
# so plan order is not the topological order.
_dags = st.integers(min_value=1, max_value=14).flatmap(
    lambda n: st.tuples(
        st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=3 * n),
        st.permutations(range(n)),
        st.lists(st.integers(0, 9), min_size=n, max_size=n),
    ).map(lambda x: (n, *x))
)


def _plan(n: int, pairs: list[tuple[int, int]], order: list[int]) -> Plan:
    deps: dict[int, set[int]] = {i: set() for i in range(n)}
    for a, b in pairs:
        if a > b:
            deps[a].add(b)  # a depends on an earlier node: never a cycle
    tasks = [
        node(f"t{i}", dependencies=[f"t{d}" for d in sorted(deps[i])], write_scope=[f"w/{i}.py"])
        for i in order
    ]
    return Plan.model_validate(plan_data(*tasks))


def _graph(plan: Plan) -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_nodes_from(t.task_id for t in plan.tasks)
    g.add_edges_from((d, t.task_id) for t in plan.tasks for d in t.dependencies)
    return g


@settings(max_examples=300, deadline=None)
@given(_dags)
def test_layers_meet_their_definition(
    dag: tuple[int, list[tuple[int, int]], list[int], list[int]],
) -> None:
    n, pairs, order, _ = dag
    plan = _plan(n, pairs, order)
    layers = plan_layers(plan)
    layer_of = {t.task_id: k for k, layer in enumerate(layers) for t in layer}
    assert sorted(layer_of) == sorted(t.task_id for t in plan.tasks)  # each node exactly once
    position = {t.task_id: i for i, t in enumerate(plan.tasks)}
    for k, layer in enumerate(layers):
        ids = [t.task_id for t in layer]
        assert ids == sorted(ids, key=position.__getitem__)  # plan order inside a layer
        for t in layer:
            assert all(layer_of[d] < k for d in t.dependencies)
            if k:  # as early as possible: something in the layer just before holds it back
                assert any(layer_of[d] == k - 1 for d in t.dependencies)


@settings(max_examples=300, deadline=None)
@given(_dags)
def test_ordering_and_topological_order_agree_with_networkx(
    dag: tuple[int, list[tuple[int, int]], list[int], list[int]],
) -> None:
    n, pairs, order, _ = dag
    plan = _plan(n, pairs, order)
    g = _graph(plan)
    edges = dependency_edges(plan)
    ordering = Ordering(edges)
    for a, b in itertools.permutations(edges, 2):
        assert ordering.depends_on(b, a) == nx.has_path(g, a, b)
        assert ordering.ordered(a, b) == (nx.has_path(g, a, b) or nx.has_path(g, b, a))
    topo = topological_order(edges)
    assert sorted(topo) == sorted(edges)
    seen = {tid: i for i, tid in enumerate(topo)}
    assert all(seen[d] < seen[tid] for tid, deps in edges.items() for d in deps)


@settings(max_examples=300, deadline=None)
@given(_dags)
def test_critical_path_is_the_heaviest_chain(
    dag: tuple[int, list[tuple[int, int]], list[int], list[int]],
) -> None:
    n, pairs, order, weights = dag
    plan = _plan(n, pairs, order)
    weight = {f"t{i}": float(w) for i, w in enumerate(weights)}
    chain, total = critical_path(plan, lambda t: weight[t.task_id])
    g = _graph(plan)
    # a real chain: each step depends on the one before, and the total is its weight
    assert all(g.has_edge(a, b) for a, b in itertools.pairwise(chain))
    assert total == sum(weight[t] for t in chain)
    # and no chain is heavier (networkx enumerates every path from a source to a sink)
    sources = [v for v in g if g.in_degree(v) == 0]
    sinks = [v for v in g if g.out_degree(v) == 0]
    heaviest = max(
        sum(weight[v] for v in path)
        for s in sources
        for t in sinks
        for path in (nx.all_simple_paths(g, s, t) if s != t else [[s]])
    )
    assert total == heaviest


def test_critical_path_of_a_small_plan() -> None:
    plan = Plan.model_validate(
        plan_data(
            node("api", token_budget=10_000),
            node("db", token_budget=50_000),
            node("handler", dependencies=["api", "db"], token_budget=20_000),
            node("docs", dependencies=["api"], token_budget=40_000),
        )
    )
    assert critical_path(plan, lambda t: t.token_budget) == (["db", "handler"], 70_000)


def test_a_self_dependency_does_not_hide_the_node_from_the_layers() -> None:
    # show draws plans that are invalid for other reasons; the node still gets its layer.
    plan = Plan.model_validate(plan_data(node("a"), node("b", dependencies=["b", "a"])))
    assert [[t.task_id for t in layer] for layer in plan_layers(plan)] == [["a"], ["b"]]


def test_a_cycle_is_refused_by_the_layers() -> None:
    plan = Plan.model_validate(
        plan_data(node("a", dependencies=["b"]), node("b", dependencies=["a"]))
    )
    with pytest.raises(ValueError, match="cycle"):
        plan_layers(plan)


def test_show_draws_the_layers(tmp_path: Path) -> None:
    import json

    path = tmp_path / "plan.json"
    data = plan_data(
        node("c", dependencies=["a", "b"]),
        node("b", dependencies=["a"]),
        node("a"),
        node("d", dependencies=["a"]),
    )
    path.write_text(json.dumps(data))
    shown = CliRunner().invoke(app, ["show", str(path), "--format", "json"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["layers"] == [["a"], ["b", "d"], ["c"]]
    tree = CliRunner().invoke(app, ["show", str(path)])
    layer_lines = [ln for ln in tree.stdout.splitlines() if "layer " in ln]
    assert [ln.split("── ")[1] for ln in layer_lines] == [
        "layer 0 (1 single)",
        "layer 1 (2 parallel)",
        "layer 2 (1 single)",
    ]
