from __future__ import annotations

import gc
import itertools
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anti_sprawl.plan.graph import find_cycle
from anti_sprawl.plan.validate import collector_paused, validate

from .conftest import node, plan_data


def codes(data: dict[str, Any], repo: Path | None = None) -> list[str]:
    return [p.code for p in validate(data, repo).errors]


def test_minimal_plan_is_valid() -> None:
    report = validate(plan_data(node("a"), node("b", dependencies=["a"])))
    assert report.valid, report.errors
    assert report.errors == []


def test_duplicate_ids() -> None:
    report = validate(plan_data(node("a"), node("a", write_scope=["src/other.py"])))
    assert [p.code for p in report.errors] == ["duplicate_task"]
    assert report.errors[0].tasks == ["a"]


def test_unknown_and_self_dependencies_each_reported() -> None:
    report = validate(plan_data(node("a", dependencies=["a", "ghost"])))
    got = {(p.code, tuple(p.tasks)) for p in report.errors}
    assert ("self_dependency", ("a",)) in got
    assert ("unknown_dependency", ("a", "ghost")) in got


def test_cycle_is_printed_in_order() -> None:
    data = plan_data(
        node("a", dependencies=["c"]), node("b", dependencies=["a"]), node("c", dependencies=["b"])
    )
    report = validate(data)
    (cycle,) = [p for p in report.errors if p.code == "cycle"]
    # a -> b -> c -> a, starting anywhere on the loop
    text = cycle.message.split(": ", 1)[1]
    steps = text.split(" -> ")
    assert steps[0] == steps[-1]
    assert len(steps) == 4
    for x, y in itertools.pairwise(steps):
        assert x in next(t for t in data["tasks"] if t["task_id"] == y)["dependencies"]
    assert sorted(cycle.tasks) == ["a", "b", "c"]


@pytest.mark.parametrize(
    "entry", ["/abs/path", "../up", "a/../../b", "a\\b", "C:/x", "a\x00b", "", ".git/config"]
)
def test_bad_scope_entries(entry: str) -> None:
    report = validate(plan_data(node("a", write_scope=[entry]), node("b", read_scope=[entry])))
    bad = [p for p in report.errors if p.code == "bad_scope"]
    assert {tuple(p.tasks) for p in bad} == {("a",), ("b",)}
    assert all(p.paths == [entry] for p in bad)


def test_budgets_must_be_positive_and_bounded() -> None:
    report = validate(
        plan_data(
            node("a", token_budget=0),
            node("b", max_tool_calls=-1),
            node("c", token_budget=10**12),
            node("d", max_tool_calls=10**6),
        )
    )
    assert sorted(t for p in report.errors if p.code == "bad_budget" for t in p.tasks) == [
        "a",
        "b",
        "c",
        "d",
    ]


def test_empty_write_scope_is_an_error() -> None:
    assert "empty_write_scope" in codes(plan_data(node("a", write_scope=[])))


def test_schema_errors_name_the_task() -> None:
    data = plan_data(node("a", token_budget="lots"), node("b", surprise=True))
    report = validate(data)
    assert not report.valid
    assert {p.code for p in report.errors} == {"schema"}
    assert {t for p in report.errors for t in p.tasks} == {"a", "b"}


def test_unordered_write_overlap_is_an_error() -> None:
    data = plan_data(node("a", write_scope=["src/app/"]), node("b", write_scope=["src/app/x.py"]))
    report = validate(data)
    (p,) = report.errors
    assert p.code == "write_overlap"
    assert sorted(p.tasks) == ["a", "b"]
    assert sorted(p.paths) == ["src/app/", "src/app/x.py"]


def test_ordered_write_overlap_is_fine() -> None:
    data = plan_data(
        node("a", write_scope=["src/app/"]),
        node("m", write_scope=["src/m.py"], dependencies=["a"]),
        node("b", write_scope=["src/app/x.py"], dependencies=["m"]),  # transitively after a
    )
    assert validate(data).valid


def test_prefix_siblings_do_not_overlap() -> None:
    data = plan_data(node("a", write_scope=["src/app"]), node("b", write_scope=["src/app2"]))
    assert validate(data).valid


def test_glob_overlap_judged_on_patterns() -> None:
    clash = plan_data(node("a", write_scope=["src/*.py"]), node("b", write_scope=["src/x.py"]))
    fine = plan_data(node("a", write_scope=["src/*.py"]), node("b", write_scope=["src/*.md"]))
    assert codes(clash) == ["write_overlap"]
    assert validate(fine).valid


def test_stale_read_needs_a_dependency() -> None:
    stale = plan_data(
        node("w", write_scope=["src/lib.py"]), node("r", read_scope=["src/"], write_scope=["x.py"])
    )
    report = validate(stale)
    (p,) = report.errors
    assert p.code == "stale_read"
    assert p.tasks == ["r", "w"]
    ordered = plan_data(
        node("w", write_scope=["src/lib.py"]),
        node("r", read_scope=["src/"], write_scope=["x.py"], dependencies=["w"]),
    )
    assert validate(ordered).valid


def test_every_problem_is_reported_at_once() -> None:
    data = plan_data(
        node("a", write_scope=["/abs"], dependencies=["nope"], token_budget=0),
        node("b", write_scope=["src/a.py"]),
        node("c", write_scope=["src/a.py"]),
    )
    assert sorted(codes(data)) == ["bad_budget", "bad_scope", "unknown_dependency", "write_overlap"]


def test_repo_aware_checks(make_repo: Callable[..., Path]) -> None:
    repo = make_repo({"src/app/x.py": "x = 1\n", "docs/a.md": "# a\n"})
    good = plan_data(
        node(
            "a",
            read_scope=["docs/a.md", "src/**/*.py", "src/app/"],
            write_scope=["src/app/new.py", "src/app/", "src/app/*.py", "tests/"],
        )
    )
    assert validate(good, repo).valid, validate(good, repo).errors
    bad = plan_data(
        node(
            "a",
            read_scope=["docs/missing.md", "src/**/*.rs"],
            write_scope=["nowhere/deep/new.py", "nowhere/*.py"],
        )
    )
    report = validate(bad, repo)
    assert sorted((p.code, p.paths[0]) for p in report.errors) == [
        ("read_scope_missing", "docs/missing.md"),
        ("read_scope_missing", "src/**/*.rs"),
        ("write_scope_missing", "nowhere/*.py"),
        ("write_scope_missing", "nowhere/deep/new.py"),
    ]


def test_repo_must_exist(tmp_path: Path) -> None:
    assert codes(plan_data(node("a")), tmp_path / "missing") == ["repo"]


# --- property: our cycle detection agrees with networkx ---------------------------------

_graphs = st.integers(min_value=1, max_value=12).flatmap(
    lambda n: st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=3 * n).map(
        lambda edges: (n, edges)
    )
)


@settings(max_examples=400, deadline=None)
@given(_graphs)
def test_cycle_detection_matches_networkx(graph: tuple[int, list[tuple[int, int]]]) -> None:
    n, pairs = graph
    edges: dict[str, list[str]] = {f"t{i}": [] for i in range(n)}
    g = nx.DiGraph()
    g.add_nodes_from(edges)
    for a, b in pairs:
        if a != b and f"t{b}" not in edges[f"t{a}"]:
            edges[f"t{a}"].append(f"t{b}")
            g.add_edge(f"t{a}", f"t{b}")
    cycle = find_cycle(edges)
    assert (cycle is None) == nx.is_directed_acyclic_graph(g)
    if cycle:
        # the reported cycle is a real one: each step is a dependency edge, reversed
        loop = [*cycle, cycle[0]]
        for x, y in itertools.pairwise(loop):
            assert x in edges[y]
    # and validate() classifies the same way
    data = plan_data(
        *(node(tid, dependencies=deps, write_scope=[f"w/{tid}.py"]) for tid, deps in edges.items())
    )
    assert ("cycle" in codes(data)) == (not nx.is_directed_acyclic_graph(g))


def test_read_of_a_file_an_ancestor_creates(make_repo: Callable[..., Path]) -> None:
    repo = make_repo({"src/a.py": "a = 1\n"})
    data = plan_data(
        node("make", write_scope=["src/new.py"]),
        node("mid", write_scope=["src/mid.py"], dependencies=["make"]),
        node("use", read_scope=["src/new.py"], write_scope=["src/b.py"], dependencies=["mid"]),
        node("other", read_scope=["src/ghost.py"], write_scope=["src/c.py"]),
    )
    report = validate(data, repo)
    assert [(p.code, p.tasks) for p in report.errors] == [("read_scope_missing", ["other"])]


def test_secret_files_in_a_scope_are_a_warning() -> None:
    report = validate(plan_data(node("a", read_scope=[".env", "config/id_rsa", ".env.example"])))
    assert report.valid
    assert [(p.code, p.paths) for p in report.warnings] == [
        ("secret_in_scope", [".env"]),
        ("secret_in_scope", ["config/id_rsa"]),
    ]


def test_validation_gives_back_the_collector_as_it_found_it() -> None:
    """validate pauses Python's cycle collector (plan/validate.py) and must restore it."""
    plan = {"plan_id": "p", "requirement": "r", "tasks": []}
    assert gc.isenabled()
    validate(plan)
    assert gc.isenabled()
    gc.disable()
    try:
        validate({"plan_id": 3})  # a schema error returns early
        assert not gc.isenabled()
    finally:
        gc.enable()


class _Cyclic:
    """An object that can be weakly referenced and made part of a reference cycle."""

    me: _Cyclic | None = None


def test_what_a_pause_kept_is_old_and_its_cycles_still_collected() -> None:
    """At a pause's end what it made and kept goes to the oldest generation without a scan
    (plan/validate.py ``collector_paused``), and cyclic garbage made in it is still found by
    the next full collection."""
    with collector_paused():
        cycle = _Cyclic()
        cycle.me = cycle
        gone = weakref.ref(cycle)
        del cycle
        kept = _Cyclic()
    assert gc.isenabled()
    assert any(o is kept for o in gc.get_objects(generation=2))
    gc.collect()
    assert gone() is None


def test_a_pause_leaves_what_others_froze_frozen() -> None:
    """A process that froze its objects (before forking) keeps them frozen across a pause."""
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen
        with collector_paused():
            pass
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()


@pytest.mark.parametrize("command", ["{{}}", ["{{}}"], "'{}' -q", "--"])
def test_a_command_that_names_no_program_is_an_error(command: Any) -> None:
    """A small model filled every command of its plan with "{{}}" (make real-model
    2026-12-03, runs 10 and 13): a program no node could run."""
    report = validate(plan_data(node("a"), test_command=command))
    assert not report.valid
    assert [p.code for p in report.errors] == ["bad_command"]
    assert "names no program" in report.errors[0].message
    for fine in ("python -m pytest -q", "env PYTHONPATH=src pytest", "./run-tests.sh"):
        assert validate(plan_data(node("a"), test_command=fine)).valid
