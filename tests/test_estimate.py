"""The estimate before a run: a range per node and in total, tokens and dollars.

``plan`` and ``execute --dry-run`` print it; ``--dry-run`` runs nothing (no branch, no run
directory, no model call) and refuses like ``execute`` when a node could not start. The range
is checked against what a real scripted run spends, node by node.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from anti_sprawl.cli.app import app
from anti_sprawl.context.essentials import first_prompts
from anti_sprawl.plan.model import Plan
from anti_sprawl.planner.estimate import History, estimate, plan_estimate
from anti_sprawl.providers.prices import Price, PriceTable
from anti_sprawl.run.history import used_share

from . import e2e_fixture as fx
from .fake_llm_server import FakeLLMServer, enqueue_node
from .test_essentials import big_repo
from .test_essentials import plan_data as unfit_plan

runner = CliRunner()
PRICED = "claude-sonnet-5-5"  # in the bundled table: $2 in, $10 out per million


pytestmark = pytest.mark.usefixtures("python_on_path")


def test_each_node_ranges_from_its_first_call_to_every_call_of_every_attempt() -> None:
    data = fx.plan(max_attempts=2)
    data["tasks"][0].update(model="cheap", token_budget=20_000, max_tool_calls=8)
    data["tasks"][1].update(model="mystery", max_attempts=3)
    data["tasks"][2].update(token_budget=10_000, max_tool_calls=3, max_attempts=1)
    plan = Plan.model_validate(data)
    # cache writes dearer than input: the worst call pays them on all its input
    cheap = Price(input=1.0, output=5.0, cache_read=0.1, cache_write=1.25)
    table = PriceTable({"cheap": cheap, "strong": Price(input=3.0, output=15.0)}, described="t")
    est = estimate(
        plan,
        {"a": 3_000, "b": 4_000, "c": 5_000},
        lambda n: plan.model_for(n, "strong") or "provider",
        table,
        lambda model: {"cheap": 4_096, "strong": 8_192}[model],
    )
    a, b, c = est.tasks
    assert (a.model, b.model, c.model) == ("cheap", "mystery", "strong")
    assert (a.low, a.high, a.attempts) == (3_000, 20_000 * 10 * 2, 2)
    assert (b.low, b.high, b.attempts) == (4_000, 40_000 * 12 * 3, 3)
    assert (c.low, c.high, c.attempts) == (5_000, 10_000 * 5 * 1, 1)
    # dollars: the first prompt as plain input, up to every call at its worst
    assert a.usd_low == pytest.approx(3_000 * 1.0 / 1e6)
    worst_a = ((20_000 - 4_096) * 1.25 + 4_096 * 5.0) / 1e6
    assert a.usd_high == pytest.approx(worst_a * 10 * 2)
    assert b.usd_low is None
    assert b.usd_high is None  # unpriced: tokens only
    worst_c = ((10_000 - 8_192) * 3.0 + 8_192 * 15.0) / 1e6  # strong's own output limit
    assert c.usd_high == pytest.approx(worst_c * 5)
    assert (est.low, est.high) == (12_000, a.high + b.high + c.high)
    assert est.usd_high == pytest.approx(worst_a * 20 + worst_c * 5)
    assert est.usd_low == pytest.approx((3_000 * 1.0 + 5_000 * 3.0) / 1e6)
    assert est.unpriced == ["mystery"]
    assert est.prices == "t"
    # b (12 calls x 3 attempts) then c (5 calls) outweighs a (10 x 2) then c
    assert (est.critical_path, est.critical_calls) == (["b", "c"], 36 + 5)
    # an output limit above the per-call cap: the worst call is all output, within the cap
    roomy = estimate(plan, {}, lambda n: "strong", table, lambda _: 128_000)
    assert roomy.tasks[2].usd_high == pytest.approx(10_000 * 15.0 / 1e6 * 5)
    # a user's price with input dearer than output: the worst call is all input
    odd = PriceTable({"strong": Price(input=20.0, output=1.0)})
    skewed = estimate(plan, {}, lambda n: "strong", odd, lambda _: 4_096)
    assert skewed.tasks[2].usd_high == pytest.approx(10_000 * 20.0 / 1e6 * 5)
    # a local server prices the unknown model at zero, not at "unknown"
    local = PriceTable({}, local=True)
    free = estimate(plan, {}, lambda n: plan.model_for(n) or "x", local, lambda _: 4_096)
    assert free.unpriced == []
    assert free.usd_high == 0.0


def dry_run(tmp_path: Path, *extra: str, plan: dict[str, Any] | None = None) -> Any:
    repo = tmp_path / "repo" if (tmp_path / "repo").exists() else fx.make_repo(tmp_path)
    plan_path, script_path = fx.write_inputs(tmp_path, plan or fx.plan(), fx.script())
    args = ["execute", str(plan_path), "--repo", str(repo), "--script", str(script_path)]
    return runner.invoke(app, [*args, "--dry-run", *extra]), repo


def test_execute_dry_run_prints_the_estimate_and_runs_nothing(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path)
    before = fx.checkout_fingerprint(repo)
    result, _ = dry_run(tmp_path, "--model", PRICED)
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert "estimated cost" in out
    assert PRICED in out
    for task in "abc":
        assert f"│ {task} " in result.output  # one row per node
    high = 40_000 * 12 * 2 * 3
    assert f"to {high:,} tokens" in out
    assert "$" in out
    assert "no model was called and nothing was committed" in out
    # nothing ran: no run directory, no branch, no worktree, the checkout untouched
    assert not (repo / ".anti-sprawl" / "runs").exists()
    assert "anti-sprawl/demo" not in fx.git(repo, "branch", "--list")
    assert len(fx.git(repo, "worktree", "list").splitlines()) == 1
    assert fx.checkout_fingerprint(repo) == before

    as_json, _ = dry_run(tmp_path, "--model", PRICED, "--json")
    assert as_json.exit_code == 0, as_json.output
    doc = json.loads(as_json.stdout)
    assert doc["base"] == fx.git(repo, "rev-parse", "HEAD")
    assert doc["plan_id"] == "demo"
    cost = doc["estimated_cost"]
    assert [t["task_id"] for t in cost["tasks"]] == ["a", "b", "c"]
    assert all(t["model"] == PRICED and 0 < t["usd_low"] < t["usd_high"] for t in cost["tasks"])
    assert cost["high"] == high
    assert cost["unpriced"] == []
    assert cost["usd_high"] == pytest.approx(sum(t["usd_high"] for t in cost["tasks"]))
    assert "2026-11-30" in cost["prices"]
    assert doc["cannot_start"] == []
    assert doc["caps_reachable"] == []
    assert not (repo / ".anti-sprawl" / "runs").exists()


def test_dry_run_names_caps_the_high_end_could_reach(tmp_path: Path) -> None:
    fx.make_repo(tmp_path)
    result, _ = dry_run(
        tmp_path, "--model", PRICED, "--max-cost", "0.05", "--max-tokens", "1000000", "--json"
    )
    assert result.exit_code == 0, result.output
    caps = json.loads(result.stdout)["caps_reachable"]
    assert len(caps) == 2
    assert caps[0].startswith("--max-tokens 1,000,000 is below the high end")
    assert caps[1].startswith("--max-cost $0.0500 is below the high end")
    # the same checks as a run: a dollar cap needs a price, a base must exist
    unpriced, _ = dry_run(tmp_path, "--max-cost", "1", "--model", "claude-mystery")
    assert unpriced.exit_code == 0  # the scripted provider is local: unpriced is free
    bad_base, _ = dry_run(tmp_path, "--base", "no-such-ref")
    assert bad_base.exit_code == 2
    assert "unknown base revision: no-such-ref" in bad_base.output
    assert "Traceback" not in bad_base.output


def test_dry_run_refuses_like_execute_when_a_node_cannot_start(tmp_path: Path) -> None:
    repo = big_repo(tmp_path)
    result, _ = dry_run(tmp_path, plan=unfit_plan())
    assert result.exit_code == 1, result.output
    out = " ".join(result.output.split())
    assert "cannot start: node b: its essential first prompt needs" in out
    assert "the run would refuse to start" in out
    assert "estimated cost" in out
    assert not (repo / ".anti-sprawl" / "runs").exists()
    doc = json.loads(dry_run(tmp_path, "--json", plan=unfit_plan())[0].stdout)
    assert [m.split(":")[0] for m in doc["cannot_start"]] == ["node b"]


def test_plan_prints_the_range_in_tokens_and_dollars(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path)
    plan = fx.plan()
    script = tmp_path / "planner.yaml"
    script.write_text(yaml.safe_dump({"planner": [{"tool": "submit_plan", "args": plan}]}))
    args = ["plan", "add modules", "--repo", str(repo), "--script", str(script)]
    shown = runner.invoke(app, [*args, "--model", PRICED, "-o", str(tmp_path / "p.yaml")])
    assert shown.exit_code == 0, shown.output
    out = " ".join(shown.output.split())
    assert "estimated cost" in out
    assert f"to {40_000 * 12 * 2 * 3:,} tokens" in out
    assert "dollars at list prices of 2026-11-30" in out
    again = runner.invoke(app, [*args, "--model", PRICED, "--json"])
    assert again.exit_code == 0, again.output
    doc = json.loads(again.stdout)
    cost = doc["estimated_cost"]
    assert cost["high"] == doc["estimated_tokens"] == 40_000 * 12 * 2 * 3
    assert all(t["model"] == PRICED and t["usd_high"] > 0 for t in cost["tasks"])
    assert cost["usd_high"] == pytest.approx(sum(t["usd_high"] for t in cost["tasks"]))


def test_the_range_holds_what_a_scripted_run_spends(tmp_path: Path) -> None:
    """Per node, the run's tokens over all its attempts lie inside the estimate made at the
    commit it started from (a retried node too: c fails its first attempt)."""
    repo = fx.make_repo(tmp_path)
    plan_data = fx.plan()
    plan_data["tasks"][2]["test_command"] = [
        sys.executable,
        "-c",
        "import pkg.c, sys; sys.exit(0 if pkg.c.C == 3 else 1)",
    ]
    finish = {"tool": "finish", "args": {"summary": "wrote c"}}
    wrong = [*fx.worker_turns("pkg/c.py", "C = 0\n")[:3], finish]
    script = fx.script(c=[*wrong, *fx.worker_turns("pkg/c.py", "C = 3\n")])
    plan_path, script_path = fx.write_inputs(tmp_path, plan_data, script)
    args = ["execute", str(plan_path), "--repo", str(repo), "--script", str(script_path)]
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    state = json.loads(result.stdout)
    assert state["tasks"]["c"]["attempts"] == 2
    plan = Plan.model_validate(state["plan"])
    est, fits = plan_estimate(
        plan, repo, state["base"], lambda n: "scripted", PriceTable({}), lambda _: 128_000
    )
    assert [f.first_call for f in fits] == [
        f.first_call for f in first_prompts(plan, repo, state["base"])
    ]
    for node in est.tasks:
        record = state["tasks"][node.task_id]
        spent = record["total_tokens"]["input_tokens"] + record["total_tokens"]["output_tokens"]
        assert node.low <= spent <= node.high, (node.task_id, node.low, spent, node.high)


def test_the_expected_value_lies_in_the_range_and_says_what_it_assumes() -> None:
    data = fx.plan(max_attempts=2)
    data["tasks"][0].update(token_budget=20_000, max_tool_calls=8)
    plan = Plan.model_validate(data)
    table = PriceTable({"m": Price(input=1.0, output=5.0)}, described="t")
    first = {"a": 3_000, "b": 4_000, "c": 5_000}
    prior = estimate(plan, first, lambda n: "m", table, lambda _: 4_096)
    a = prior.tasks[0]
    # no history: one attempt, half of its 8 + 2 calls, each the size of its first call
    assert a.expected == 3_000 * 5
    assert all(t.low <= t.expected <= t.high for t in prior.tasks)
    assert prior.expected == sum(t.expected for t in prior.tasks)
    assert a.usd_expected == pytest.approx(3_000 * 5 * 1.0 / 1e6)
    assert "half its calls" in prior.expected_basis

    learned = History(share=0.05, nodes=4, runs=2)
    est = estimate(plan, first, lambda n: "m", table, lambda _: 4_096, learned)
    assert est.tasks[0].expected == round(0.05 * a.high)
    assert "4 finished node(s) of 2 earlier run(s)" in est.expected_basis
    # a share below a node's first call never puts the expectation under its low end
    tiny = estimate(
        plan, first, lambda n: "m", table, lambda _: 4_096, History(share=0.0, nodes=3, runs=1)
    )
    assert [t.expected for t in tiny.tasks] == [t.low for t in tiny.tasks]


def test_earlier_runs_against_a_real_server_set_the_expectation(
    tmp_path: Path, server: FakeLLMServer, served_execute: Callable[..., Any]
) -> None:
    """Scripted runs say nothing about a model; a run against a served model does."""
    repo = fx.make_repo(tmp_path)
    result, _ = dry_run(tmp_path)
    assert result.exit_code == 0, result.output
    plan_path, script_path = fx.write_inputs(tmp_path, fx.plan(), fx.script())
    scripted = runner.invoke(
        app, ["execute", str(plan_path), "--repo", str(repo), "--script", str(script_path)]
    )
    assert scripted.exit_code == 0, scripted.output
    assert used_share(repo) is None
    assert "half its calls" in " ".join(dry_run(tmp_path)[0].output.split())

    usage = {"prompt_tokens": 2_000, "completion_tokens": 40}
    for path in ("pkg/a.py", "pkg/b.py", "pkg/c.py"):
        enqueue_node(server, path, usage, summary="wrote it")
    served = served_execute(plan_path, repo, "--jobs", "1", "--branch", "anti-sprawl/served")
    assert served.exit_code == 0, served.output
    history = used_share(repo)
    assert history is not None
    assert (history.nodes, history.runs) == (3, 1)
    high = 40_000 * 12 * 2  # each node's cap: token_budget x (max_tool_calls + 2) x attempts
    assert history.share == pytest.approx(2 * 2_040 / high)
    shown = " ".join(dry_run(tmp_path)[0].output.split())
    assert "expected: about" in shown
    assert "3 finished node(s) of 1 earlier run(s) here spent (0.4%)" in shown
