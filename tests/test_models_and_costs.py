"""A model per node and dollar caps, through the real CLI and the real SDKs.

The Anthropic SDK talks to the local fake server, which records every request body: each
node's requests carry its own model. A run capped in dollars stops before the call that
would cross the cap and resumes to completion with a higher one. Prices come from the
bundled table, the user's config directory (an environment override through the CLI) and
``--prices``, in that order of precedence.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from anti_sprawl.cli.app import app

from . import e2e_fixture as fx
from .fake_llm_server import FakeLLMServer, anthropic_message

runner = CliRunner()
KEY = "sk-ant-test-models-000"


pytestmark = pytest.mark.usefixtures("python_on_path")


def enqueue_node(server: FakeLLMServer, task: str, usage: dict[str, int] | None = None) -> None:
    """A node's two turns: write its module, finish."""
    path = f"pkg/{task}.py"
    turns = [
        ("write_file", {"path": path, "content": f"{task.upper()} = 1\n"}),
        ("finish", {"summary": f"created {path}"}),
    ]
    for n, (name, args) in enumerate(turns):
        block = {"type": "tool_use", "id": f"toolu_{task}{n}", "name": name, "input": args}
        server.enqueue(anthropic_message([block], stop_reason="tool_use", usage=usage))


def invoke(server: FakeLLMServer, *args: str, env: dict[str, str] | None = None) -> Any:
    base = ["--provider", "anthropic", "--base-url", server.url, "--jobs", "1"]
    return runner.invoke(app, [*args, *base], env={"ANTHROPIC_API_KEY": KEY, **(env or {})})


def models_by_node(server: FakeLLMServer) -> list[str]:
    return [r.body["model"] for r in server.requests]


def test_each_node_calls_its_own_model_and_the_cli_overrides_only_the_default(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    plan = fx.plan(default_model="claude-plan-default")
    plan["tasks"][0]["model"] = "claude-node-a"  # a's own model; b and c take a default
    plan_path, _ = fx.write_inputs(tmp_path, plan, {"workers": {}})

    repo = fx.make_repo(tmp_path / "one")
    for task in "abc":
        enqueue_node(server, task)
    result = invoke(server, "execute", str(plan_path), "--repo", str(repo), "--json")
    assert result.exit_code == 0, result.output
    assert "warning" not in result.stderr  # a local server: unpriced models are free
    a, b = "claude-node-a", "claude-plan-default"
    assert models_by_node(server) == [a, a, b, b, b, b]
    state = json.loads(result.stdout)
    assert {t: r["model"] for t, r in state["tasks"].items()} == {"a": a, "b": b, "c": b}
    # the model of every call, in its manifest
    run_dir = repo / ".anti-sprawl" / "runs" / state["run_id"]
    for task, model in (("a", a), ("b", b), ("c", b)):
        for path in (run_dir / "manifests" / task).glob("*.json"):
            assert json.loads(path.read_text())["model"] == model
    pr = (run_dir / "PR.md").read_text()
    assert f"`{a}`" in pr
    assert f"`{b}`" in pr
    status = runner.invoke(app, ["status", state["run_id"], "--repo", str(repo), "--json"])
    assert json.loads(status.stdout)["tasks"]["c"]["model"] == b
    shown = runner.invoke(app, ["inspect", state["run_id"], "--repo", str(repo), "--task", "a"])
    assert a in shown.output

    # --model replaces the plan's default, never a node's own model
    repo2 = fx.make_repo(tmp_path / "two")
    for task in "abc":
        enqueue_node(server, task)
    args = ["execute", str(plan_path), "--repo", str(repo2), "--model", "claude-cli", "--json"]
    again = invoke(server, *args)
    assert again.exit_code == 0, again.output
    assert models_by_node(server)[6:] == [a, a, *["claude-cli"] * 4]


def test_the_planners_and_the_bundled_defaults_resolve_in_order(tmp_path: Path) -> None:
    from anti_sprawl.plan.model import Plan

    plan = Plan.model_validate(fx.plan())
    node = plan.tasks[0]
    assert plan.model_for(node) is None  # the provider's own
    assert plan.model_for(node, "cli") == "cli"
    with_default = plan.model_copy(update={"default_model": "plan"})
    assert with_default.model_for(node) == "plan"
    assert with_default.model_for(node, "cli") == "cli"
    own = node.model_copy(update={"model": "own"})
    assert with_default.model_for(own, "cli") == "own"
    assert plan.attempts_for(node) == 2
    assert plan.attempts_for(node.model_copy(update={"max_attempts": 1})) == 1


USAGE = {"input_tokens": 20_000, "output_tokens": 500}
PRICES = {"claude-capped": {"input": 10.0, "output": 50.0}}  # $0.225 per call above
PER_CALL = 20_000 * 10 / 1e6 + 500 * 50 / 1e6


def test_a_dollar_cap_stops_before_the_crossing_call_and_resume_finishes(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    repo = fx.make_repo(tmp_path)
    plan_path, _ = fx.write_inputs(tmp_path, fx.plan(), {"workers": {}})
    prices = tmp_path / "prices.yaml"
    prices.write_text(yaml.safe_dump(PRICES))
    common = ["--repo", str(repo), "--model", "claude-capped", "--prices", str(prices), "--json"]
    # a (2 calls, $0.45) fits a $0.80 cap; b's first call fits what is left, its second
    # (~20k input at $10/M plus output at $50/M) could cross it: not made
    enqueue_node(server, "a", USAGE)
    enqueue_node(server, "b", USAGE)
    capped = invoke(server, "execute", str(plan_path), *common, "--max-cost", "0.80")
    assert capped.exit_code == 1, capped.output
    state = json.loads(capped.stdout)
    assert state["status"] == "interrupted"
    assert state["max_cost"] == 0.80
    assert {t: r["status"] for t, r in state["tasks"].items()} == {
        "a": "succeeded",
        "b": "pending",
        "c": "pending",
    }
    assert "--max-cost $0.80" in state["stopped_by"]
    assert len(server.requests) == 3  # a's two calls and b's first; b's second never left
    assert state["cost_usd"] == pytest.approx(3 * PER_CALL)
    assert state["cost_usd"] <= 0.80
    assert state["tasks"]["a"]["cost_usd"] == pytest.approx(2 * PER_CALL)
    assert fx.task_trailers(repo) == ["a"]
    shown = runner.invoke(app, ["status", state["run_id"], "--repo", str(repo)])
    assert f"to finish it:\n  anti-sprawl resume {state['run_id']} --repo {repo}" in shown.output
    assert "of --max-cost $0.80" in shown.output

    # resume with a higher cap: b starts again (its queued turns), then c
    server.clear()
    enqueue_node(server, "b", USAGE)
    enqueue_node(server, "c", USAGE)
    resume = ["resume", state["run_id"], *common, "--max-cost", "5"]
    done = invoke(server, *resume)
    assert done.exit_code == 0, done.output
    final = json.loads(done.stdout)
    assert final["status"] == "succeeded"
    assert final["max_cost"] == 5.0
    assert sorted(fx.task_trailers(repo)) == ["a", "b", "c"]
    # every call of both sessions is in the run's dollars, the interrupted b attempt's too
    assert final["cost_usd"] == pytest.approx(7 * PER_CALL)
    assert final["tasks"]["b"]["cost_usd"] == pytest.approx(3 * PER_CALL)


def test_a_dollar_cap_needs_a_price_for_every_model(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path)
    plan_path, script_path = fx.write_inputs(tmp_path, fx.plan(), fx.script())
    args = ["execute", str(plan_path), "--repo", str(repo), "--script", str(script_path)]
    # the scripted provider is local: an unpriced model is free, so the cap holds trivially
    free = runner.invoke(app, [*args, "--max-cost", "0.01", "--json"])
    assert free.exit_code == 0, free.output
    assert json.loads(free.stdout)["cost_usd"] == 0.0
    repo2 = fx.make_repo(tmp_path / "two")
    mystery = ["--model", "claude-mystery", "--max-cost", "1"]
    bad = runner.invoke(
        app,
        ["execute", str(plan_path), "--repo", str(repo2), *mystery],
        env={"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": ""},
    )
    assert bad.exit_code == 2, bad.output
    assert "--max-cost needs a price" in bad.output
    assert "Traceback" not in bad.output
    # the one warning an unpriced model gets, before the refusal
    assert bad.output.count("warning: no price for model claude-mystery") == 1


def scripted_cost(
    tmp_path: Path, name: str, *extra: str, env: dict[str, str] | None = None
) -> dict[str, Any]:
    repo = fx.make_repo(tmp_path / name)
    plan_path, script_path = fx.write_inputs(tmp_path, fx.plan(), fx.script())
    args = ["execute", str(plan_path), "--repo", str(repo), "--script", str(script_path)]
    result = runner.invoke(app, [*args, "--model", "claude-sonnet-5-5", "--json", *extra], env=env)
    assert result.exit_code == 0, result.output
    state: dict[str, Any] = json.loads(result.stdout)
    return state


def dollars(state: dict[str, Any], rates: tuple[float, float]) -> float:
    tokens = state["tokens"]
    return (tokens["input_tokens"] * rates[0] + tokens["output_tokens"] * rates[1]) / 1e6


def test_prices_from_the_users_files_override_the_bundled_ones(tmp_path: Path) -> None:
    empty = tmp_path / "no-config"
    empty.mkdir()
    bundled = scripted_cost(tmp_path, "bundled", env={"XDG_CONFIG_HOME": str(empty)})
    assert bundled["cost_usd"] == pytest.approx(dollars(bundled, (2.0, 10.0)))  # the table's
    assert "2026-11-30" in bundled["prices"]

    config = tmp_path / "config"
    (config / "anti-sprawl").mkdir(parents=True)
    (config / "anti-sprawl" / "prices.yaml").write_text(
        yaml.safe_dump({"claude-sonnet-5-5": {"input": 100, "output": 1000}})
    )
    from_config = scripted_cost(tmp_path, "config", env={"XDG_CONFIG_HOME": str(config)})
    assert from_config["cost_usd"] == pytest.approx(dollars(from_config, (100, 1000)))
    assert str(config) in from_config["prices"]

    flag = tmp_path / "flag.json"
    flag.write_text(json.dumps({"claude-sonnet-5-5": {"input": 1, "output": 1}}))
    from_flag = scripted_cost(
        tmp_path, "flag", "--prices", str(flag), env={"XDG_CONFIG_HOME": str(config)}
    )
    assert from_flag["cost_usd"] == pytest.approx(dollars(from_flag, (1, 1)))
    per_node = sum(t["cost_usd"] for t in from_flag["tasks"].values())
    assert per_node == pytest.approx(from_flag["cost_usd"])

    broken = tmp_path / "broken.yaml"
    broken.write_text("claude-sonnet-5-5: {input: -3, output: 1}")
    repo = fx.make_repo(tmp_path / "broken")
    plan_path, script_path = fx.write_inputs(tmp_path, fx.plan(), fx.script())
    bad = runner.invoke(
        app,
        [
            "execute",
            str(plan_path),
            "--repo",
            str(repo),
            "--script",
            str(script_path),
            "--prices",
            str(broken),
        ],
    )
    assert bad.exit_code == 2
    assert "claude-sonnet-5-5.input" in bad.output


CACHED = {  # 20k input, three quarters of it read from the provider's cache
    "input_tokens": 5_000,
    "cache_read_input_tokens": 15_000,
    "cache_creation_input_tokens": 0,
    "output_tokens": 500,
}
UNCACHED = {"input_tokens": 20_000, "output_tokens": 500}


def test_cache_share_per_node_and_run_at_the_users_prices(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    repo = fx.make_repo(tmp_path)
    plan_path, _ = fx.write_inputs(tmp_path, fx.plan(), {"workers": {}})
    config = tmp_path / "config"
    (config / "anti-sprawl").mkdir(parents=True)
    mine = {"input": 4.0, "output": 20.0, "cache_read": 0.4, "cache_write": 5.0}
    (config / "anti-sprawl" / "prices.yaml").write_text(yaml.safe_dump({"claude-sonnet-5-5": mine}))
    enqueue_node(server, "a", CACHED)
    enqueue_node(server, "b", UNCACHED)
    enqueue_node(server, "c", CACHED)
    args = ["execute", str(plan_path), "--repo", str(repo), "--model", "claude-sonnet-5-5"]
    result = invoke(server, *args, "--json", env={"XDG_CONFIG_HOME": str(config)})
    assert result.exit_code == 0, result.output
    state = json.loads(result.stdout)
    shares = {t: r["cache_share"] for t, r in state["tasks"].items()}
    assert shares == {"a": 0.75, "b": 0.0, "c": 0.75}
    assert state["cache_share"] == 0.5  # 60k of the run's 120k input tokens
    # the user's prices, not the bundled ones: cache reads at their own rate
    cached_call = (5_000 * 4.0 + 15_000 * 0.4 + 500 * 20.0) / 1e6
    plain_call = (20_000 * 4.0 + 500 * 20.0) / 1e6
    assert state["tasks"]["a"]["cost_usd"] == pytest.approx(2 * cached_call)
    assert state["tasks"]["b"]["cost_usd"] == pytest.approx(2 * plain_call)
    assert state["cost_usd"] == pytest.approx(4 * cached_call + 2 * plain_call)
    assert str(config) in state["prices"]
    # shown in the verdict's spend lines, the PR body and status --json
    shown = runner.invoke(app, ["status", state["run_id"], "--repo", str(repo)])
    out = " ".join(shown.output.split())
    assert "a: claude-sonnet-5-5" in out
    assert "75% of input cached" in out
    assert "(60,000 cache reads, 50% of input)" in out
    pr = (repo / ".anti-sprawl" / "runs" / state["run_id"] / "PR.md").read_text()
    assert "| 75% |" in pr
    assert "| 0% |" in pr
    status = runner.invoke(app, ["status", state["run_id"], "--repo", str(repo), "--json"])
    doc = json.loads(status.stdout)
    assert doc["cache_share"] == 0.5
    assert doc["tasks"]["a"]["cache_share"] == 0.75


def test_each_node_gets_its_own_models_output_limit(tmp_path: Path, server: FakeLLMServer) -> None:
    plan = fx.plan(default_model="claude-3-haiku")  # 4,096 output tokens (providers/limits.py)
    plan["tasks"][0]["model"] = "claude-3-5-sonnet"  # 8,192
    plan_path, _ = fx.write_inputs(tmp_path, plan, {"workers": {}})
    repo = fx.make_repo(tmp_path / "one")
    for task in "abc":
        enqueue_node(server, task)
    result = invoke(server, "execute", str(plan_path), "--repo", str(repo), "--json")
    assert result.exit_code == 0, result.output
    caps = [(r.body["model"], r.body["max_tokens"]) for r in server.requests]
    assert caps == [("claude-3-5-sonnet", 8_192)] * 2 + [("claude-3-haiku", 4_096)] * 4
    # --max-output-tokens is every node's cap
    repo2 = fx.make_repo(tmp_path / "two")
    for task in "abc":
        enqueue_node(server, task)
    args = ["execute", str(plan_path), "--repo", str(repo2), "--max-output-tokens", "1000"]
    again = invoke(server, *args, "--json")
    assert again.exit_code == 0, again.output
    assert [r.body["max_tokens"] for r in server.requests[6:]] == [1_000] * 6
