"""The ready/done loop: order, parallelism, failure propagation."""

from __future__ import annotations

import threading
import time

import pytest

from anti_sprawl.lifecycle import NodeVerdict
from anti_sprawl.run.scheduler import DagScheduler, run_dag

DIAMOND = {"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"], "e": []}


def test_get_ready_follows_dependencies() -> None:
    s = DagScheduler(DIAMOND)
    assert s.get_ready() == ["a", "e"]
    assert s.get_ready() == []  # each node handed out once
    s.done("a", "succeeded")
    assert s.get_ready() == ["b", "c"]
    s.done("b", "succeeded")
    assert s.get_ready() == []
    s.done("c", "succeeded")
    assert s.get_ready() == ["d"]


def test_get_ready_with_a_limit_hands_out_in_plan_order_as_nodes_become_ready() -> None:
    # Plan order is not the dict order here: ready nodes come out by their plan position,
    # the ones past the limit stay for the next call, and a resumed (marked) node is never
    # handed out.
    deps = {"a": [], "b": [], "c": ["a"], "d": [], "e": ["a"]}
    s = DagScheduler(deps, order=["d", "e", "c", "b", "a"])
    s.mark("b", "succeeded")
    assert s.get_ready(limit=1) == ["d"]
    assert s.get_ready(limit=5) == ["a"]
    s.done("a", "succeeded")
    assert s.get_ready(limit=1) == ["e"]
    assert s.get_ready() == ["c"]
    assert s.get_ready() == []


def test_nodes_released_out_of_order_are_handed_out_in_plan_order() -> None:
    """A node becomes ready when its last dependency succeeds, whatever the order they finish
    in; get_ready hands the ready ones out in plan order, up to the limit, each once, and never
    one a failure skipped meanwhile."""
    deps = {"p": [], "q": [], "late": ["q"], "early": ["p"], "gone": ["p", "q"], "x": ["q"]}
    s = DagScheduler(deps, order=["early", "gone", "late", "p", "q", "x"])
    assert s.get_ready() == ["p", "q"]
    s.done("q", "succeeded")  # releases late and x
    s.done("p", "succeeded")  # releases early and gone, which come first in the plan
    assert s.get_ready(limit=3) == ["early", "gone", "late"]
    assert s.get_ready(limit=0) == []
    assert s.get_ready() == ["x"]
    t = DagScheduler(deps)
    t.get_ready()
    t.done("q", "failed")  # late, gone and x are skipped before they could be handed out
    t.done("p", "succeeded")
    assert t.get_ready() == ["early"]
    assert t.status["gone"] == "skipped"


def test_failure_skips_descendants_only() -> None:
    s = DagScheduler(DIAMOND)
    s.get_ready()
    s.done("a", "failed")
    assert s.status["b"] == s.status["c"] == s.status["d"] == "skipped"
    assert s.skipped_because == {"b": "a", "c": "a", "d": "a"}
    assert s.status["e"] == "running"
    s.done("e", "succeeded")
    assert not s.is_active()


def test_run_dag_overlaps_independent_nodes() -> None:
    """With two jobs, two independent nodes are inside run_node at the same time."""
    barrier = threading.Barrier(2, timeout=10)
    seen: list[str] = []

    def run_node(task: str) -> NodeVerdict:
        if task in ("x", "y"):
            barrier.wait()  # deadlocks (BrokenBarrierError) unless both run at once
        seen.append(task)
        return "succeeded"

    sched = run_dag({"x": [], "y": [], "z": ["x", "y"]}, run_node, jobs=2)
    assert seen[-1] == "z"
    assert set(sched.status.values()) == {"succeeded"}


def test_run_dag_propagates_failure_and_continues_elsewhere() -> None:
    skipped: list[tuple[str, str]] = []

    def run_node(task: str) -> NodeVerdict:
        return "failed" if task == "b" else "succeeded"

    sched = run_dag(DIAMOND, run_node, jobs=2, on_skip=lambda t, why: skipped.append((t, why)))
    assert sched.status == {
        "a": "succeeded",
        "b": "failed",
        "c": "succeeded",
        "d": "skipped",
        "e": "succeeded",
    }
    assert skipped == [("d", "b")]


def test_already_succeeded_nodes_are_not_rerun() -> None:
    ran: list[str] = []

    def run_node(task: str) -> NodeVerdict:
        ran.append(task)
        return "succeeded"

    run_dag(DIAMOND, run_node, already_succeeded=["a", "b"])
    assert sorted(ran) == ["c", "d", "e"]


def test_stop_prevents_new_starts() -> None:
    stop = threading.Event()

    def run_node(task: str) -> NodeVerdict:
        stop.set()
        time.sleep(0.01)
        return "succeeded"

    sched = run_dag({"a": [], "b": ["a"]}, run_node, stop=stop)
    assert sched.status == {"a": "succeeded", "b": "pending"}


def test_exception_in_a_node_is_raised_after_running_nodes_finish() -> None:
    def run_node(task: str) -> NodeVerdict:
        if task == "a":
            raise RuntimeError("boom")
        return "succeeded"

    with pytest.raises(RuntimeError, match="boom"):
        run_dag({"a": [], "b": []}, run_node, jobs=1)


def test_a_node_lands_when_it_finishes_and_its_dependents_start_at_once() -> None:
    """e (last in plan order) lands, and its dependent f runs, while a (first) is still
    running: a cannot finish until f has run. A node that fails to land skips its
    dependents; a node never lands before its dependencies."""
    landed: list[str] = []
    f_ran = threading.Event()

    def run_node(task: str) -> NodeVerdict:
        if task == "a":
            assert f_ran.wait(30), "f never ran while a was running"
        if task == "f":
            f_ran.set()
        return "succeeded"

    def land(task: str) -> NodeVerdict:
        landed.append(task)
        return "failed" if task == "c" else "succeeded"

    deps = {"d": ["b", "c"], "a": [], "b": ["a"], "c": ["a"], "e": [], "f": ["e"]}
    sched = run_dag(deps, run_node, jobs=4, land=land, order=list(deps))
    assert landed[0] == "e"  # before a, first in plan order
    assert sorted(landed[1:3]) == ["a", "f"]  # (finished together: landed in plan order)
    assert sorted(landed[3:]) == ["b", "c"]  # d is skipped: c failed to land
    assert sched.status == {
        "a": "succeeded",
        "b": "succeeded",
        "c": "failed",
        "d": "skipped",
        "e": "succeeded",
        "f": "succeeded",
    }


def test_topological_order_breaks_ties_by_plan_order() -> None:
    from anti_sprawl.run.scheduler import topological_order

    assert topological_order({"z": [], "y": ["z"], "x": []}, ["x", "y", "z"]) == ["x", "z", "y"]


def test_stop_hands_out_nothing_more_and_abandons_stuck_nodes_after_the_grace() -> None:
    """Ten ready nodes, two slots: after a stop only the two running ever started; a node
    stuck past the grace period is abandoned (run_dag returns without it)."""
    stop = threading.Event()
    release = threading.Event()
    started: list[str] = []

    def run_node(task: str) -> NodeVerdict:
        started.append(task)
        stop.set()
        if task == "n0":
            release.wait(30)  # a model call that never returns while we wait
        return "succeeded"

    deps: dict[str, list[str]] = {f"n{i}": [] for i in range(10)}
    sched = run_dag(deps, run_node, jobs=2, stop=stop, grace=0.2)
    release.set()
    assert sorted(started) == ["n0", "n1"]
    assert sched.abandoned == {"n0"}
    assert sched.status["n1"] == "succeeded"
    assert [t for t, s in sched.status.items() if s == "pending"] == [f"n{i}" for i in range(2, 10)]
