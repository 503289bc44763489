"""The planner on real temporary git repositories, driven by scripted-provider scripts."""

from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Callable
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console

from anti_sprawl.cli.plan import run_plan_command
from anti_sprawl.errors import UsageError
from anti_sprawl.ids import PLANNER_TASK_ID
from anti_sprawl.plan.model import Plan, load_plan_data
from anti_sprawl.planner.planner import NUDGE, plan_requirement
from anti_sprawl.providers import (
    Script,
    ScriptedProvider,
    ToolResultMessage,
    UserMessage,
    request_text,
)

from . import e2e_fixture as fx
from .conftest import node, plan_data

CANARY = "CANARY-ENV-7f3a9c"
FILES = {
    "README.md": "# demo\n",
    "app/__init__.py": "",
    "app/core.py": "from app import util\n\n\ndef run():\n    return util.helper()\n",
    "app/util.py": "from app import deep\n\n\ndef helper():\n    return deep.VALUE\n",
    "app/deep.py": "VALUE = 1\n",
    "app/api.py": "from .core import run\n\n\ndef handle():\n    return run()\n",
    "tests/test_core.py": "from app.core import run\n\n\ndef test_run():\n    assert run() == 1\n",
    "tests/test_util.py": "from app.util import helper\n",
    ".env": f"API_TOKEN={CANARY}\n",
}
GOOD = plan_data(
    node("core", write_scope=["app/core.py", "tests/test_core.py"], read_scope=["app/util.py"]),
    node(
        "api",
        dependencies=["core"],
        write_scope=["app/api.py", "tests/test_api.py"],
        read_scope=["app/core.py"],
    ),
    plan_id="demo",
)
WRITE_TOOLS = {"write_file", "edit_file", "run_tests"}

MakeRepo = Callable[..., Path]


@pytest.fixture
def repo(make_repo: MakeRepo) -> Path:
    return make_repo(FILES)


def scripted(tmp_path: Path, turns: list[Any]) -> ScriptedProvider:
    """A scripted provider read from a script file, like ``--script`` does."""
    path = tmp_path / "script.yaml"
    path.write_text(yaml.safe_dump({"planner": turns}, sort_keys=False))
    return ScriptedProvider(Script.load(path))


def submit(plan: dict[str, Any]) -> dict[str, Any]:
    return {"tool": "submit_plan", "args": plan}


def console() -> tuple[Console, StringIO]:
    buf = StringIO()
    return Console(file=buf, width=120, highlight=False), buf


def last_results(request: Any) -> ToolResultMessage:
    message = request.messages[-1]
    assert isinstance(message, ToolResultMessage)
    return message


def test_good_plan_is_saved_and_shown(tmp_path: Path, repo: Path) -> None:
    provider = scripted(tmp_path, [submit(GOOD)])
    out, buf = console()
    code = run_plan_command(
        "Add an API handler",
        repo,
        None,
        provider,
        expand_read_scope=False,
        max_rounds=3,
        console=out,
        as_json=False,
    )
    text = buf.getvalue()
    assert code == 0, text
    saved = repo / ".anti-sprawl" / "plans" / "demo.yaml"
    data = load_plan_data(saved)
    assert [t["task_id"] for t in data["tasks"]] == ["core", "api"]
    assert data["requirement"] == "Add an API handler"  # the user's words, not the model's
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True)
    assert data["base"] == head.stdout.decode().strip()
    assert "layer 1" in text
    assert "api" in text
    assert "app/api.py" in text
    first = data["tasks"][0]
    high = first["token_budget"] * (first["max_tool_calls"] + 2) * 2  # two attempts by default
    assert "estimated cost" in text
    assert f"..{high:,} " in text  # the first task's row
    assert f"plan written to {saved}" in text
    # run data stays out of git
    status = subprocess.run(["git", "-C", str(repo), "status", "--porcelain"], capture_output=True)
    assert status.stdout == b""
    provider.assert_complete()


def test_json_output_and_explicit_output_file(
    tmp_path: Path, repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    provider = scripted(tmp_path, [submit(GOOD)])
    out, buf = console()
    target = tmp_path / "out" / "plan.json"
    code = run_plan_command(
        "Add an API handler",
        repo,
        target,
        provider,
        expand_read_scope=False,
        max_rounds=3,
        console=out,
        as_json=True,
    )
    doc = json.loads(capsys.readouterr().out)
    assert buf.getvalue() == ""
    assert code == 0
    assert set(doc) == {
        "plan_file",
        "plan",
        "warnings",
        "estimated_tokens",
        "estimated_cost",
        "valid",
        "errors",
        "next_command",
    }
    assert doc["plan_file"] == str(target)
    assert doc["valid"] is True
    assert doc["errors"] == []
    # token_budget is a per-call cap: the ceiling is every call at the cap, for every attempt
    tasks = doc["plan"]["tasks"]
    ceiling = sum(t["token_budget"] * (t["max_tool_calls"] + 2) * 2 for t in tasks)
    assert doc["estimated_tokens"] == ceiling == doc["estimated_cost"]["high"]
    cost = doc["estimated_cost"]
    assert [c["task_id"] for c in cost["tasks"]] == [t["task_id"] for t in tasks]
    assert all(0 < c["low"] < c["high"] and c["attempts"] == 2 for c in cost["tasks"])
    # no price for the scripted model in an empty table: tokens only, the model named
    assert all(c["usd_high"] is None for c in cost["tasks"])
    assert cost["unpriced"] == [provider.model]
    assert cost["usd_high"] == 0.0
    assert cost["low"] == sum(c["low"] for c in cost["tasks"]) < ceiling
    assert json.loads(target.read_text())["plan_id"] == "demo"


def test_cycle_and_outside_path_are_repaired_in_the_next_round(tmp_path: Path, repo: Path) -> None:
    bad = plan_data(
        node("a", dependencies=["b"], write_scope=["../outside.py"]),
        node("b", dependencies=["a"], write_scope=["app/util.py"]),
    )
    provider = scripted(tmp_path, [submit(bad), submit(GOOD)])
    result = plan_requirement("Add an API handler", repo, provider)
    assert result.ok
    assert result.plan is not None
    assert (result.rounds, result.requests) == (2, 2)
    first, second = provider.requests
    assert not any(isinstance(m, ToolResultMessage) for m in first.messages)
    [feedback] = last_results(second).results
    assert feedback.is_error
    assert "[cycle] dependency cycle:" in feedback.content
    assert "../outside.py" in feedback.content
    assert "'..'" in feedback.content
    provider.assert_complete()


def test_a_plan_that_stays_invalid_fails_after_the_limit(tmp_path: Path, repo: Path) -> None:
    bad = plan_data(
        node("a", write_scope=["/etc/passwd"]),
        node("b", dependencies=["ghost"], write_scope=["app/util.py"]),
    )
    provider = scripted(tmp_path, [submit(bad)] * 3)
    out, buf = console()
    code = run_plan_command(
        "Add an API handler",
        repo,
        None,
        provider,
        expand_read_scope=False,
        max_rounds=2,
        console=out,
        as_json=False,
    )
    text = buf.getvalue()
    assert code == 1
    assert len(provider.requests) == 2  # the limit, not the script's length
    assert "planning failed" in text
    assert "after 2 submission(s)" in text
    assert "absolute path" in text
    # a planner's dependency on no task is left out (planner/submission_repairs.py)
    assert "unknown task 'ghost'" not in text
    assert "1 error(s)" in text
    assert not (repo / ".anti-sprawl" / "plans").exists()


def test_failure_as_json(tmp_path: Path, repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = plan_data(node("a", write_scope=["/etc/passwd"]))
    provider = scripted(tmp_path, [submit(bad)])
    out, buf = console()
    code = run_plan_command(
        "X", repo, None, provider, expand_read_scope=False, max_rounds=1, console=out, as_json=True
    )
    doc = json.loads(capsys.readouterr().out)
    assert buf.getvalue() == ""
    assert code == 1
    assert doc["valid"] is False
    assert doc["plan"] is None
    assert doc["plan_file"] is None
    assert [e["code"] for e in doc["errors"]] == ["bad_scope"]
    assert doc["errors"][0]["tasks"] == ["a"]


def test_the_planner_never_gets_a_write_tool(tmp_path: Path, repo: Path) -> None:
    turns = [
        {"tool": "write_file", "args": {"path": "app/evil.py", "content": "x"}},
        {"tool": "edit_file", "args": {"path": "app/core.py", "old": "run", "new": "walk"}},
        submit(GOOD),
    ]
    provider = scripted(tmp_path, turns)
    before = (repo / "app" / "core.py").read_text()
    result = plan_requirement("Add an API handler", repo, provider)
    assert result.ok
    for request in provider.requests:
        names = {t.name for t in request.tools}
        assert names == {"grep", "list_dir", "read_file", "submit_plan"}
        assert not names & WRITE_TOOLS
    [refusal] = last_results(provider.requests[1]).results
    assert refusal.is_error
    assert "unknown tool 'write_file'" in refusal.content
    assert not (repo / "app" / "evil.py").exists()
    assert (repo / "app" / "core.py").read_text() == before


def test_secrets_and_git_internals_are_refused(tmp_path: Path, repo: Path) -> None:
    turns = [
        [
            {"tool": "read_file", "args": {"path": ".env"}},
            {"tool": "read_file", "args": {"path": ".git/config"}},
            {"tool": "read_file", "args": {"path": "../outside.txt"}},
            {"tool": "grep", "args": {"pattern": "CANARY"}},
            {"tool": "list_dir", "args": {"path": "."}},
            {"tool": "read_file", "args": {"path": "app/core.py"}},
        ],
        submit(GOOD),
    ]
    (tmp_path / "outside.txt").write_text("CANARY-OUT\n")
    provider = scripted(tmp_path, turns)
    manifests = tmp_path / "manifests"
    result = plan_requirement("Add an API handler", repo, provider, manifest_dir=manifests)
    assert result.ok
    env, git, outside, grep, listing, core = last_results(provider.requests[1]).results
    assert env.is_error
    assert "denied_secret" in env.content
    assert git.is_error
    assert "denied_internal" in git.content
    assert outside.is_error
    assert "escape_root" in outside.content
    assert not grep.is_error
    assert "app/" not in grep.content
    assert CANARY not in grep.content
    assert ".env" not in listing.content
    assert "app/" in listing.content
    assert 'trust="untrusted"' in core.content
    assert "def run()" in core.content
    assert {v.reason for v in result.violations} >= {"denied_secret", "denied_internal"}
    for request in provider.requests:
        assert CANARY not in request_text(request)
        assert "CANARY-OUT" not in request_text(request)
    for path in manifests.rglob("*.json"):
        assert CANARY not in path.read_text()


def test_unknown_tools_bad_arguments_and_silence_keep_the_loop_going(
    tmp_path: Path, repo: Path
) -> None:
    turns = [
        {"tool": "frobnicate", "args": {}},
        {"tool": "read_file", "args": {"path": "app/core.py", "cwd": "/"}},
        {"text": "Let me think about the plan."},
        submit(GOOD),
    ]
    provider = scripted(tmp_path, turns)
    result = plan_requirement("Add an API handler", repo, provider)
    # refused calls spend no exploration call; the model-call cap bounds them
    assert result.ok
    assert result.requests == 4
    assert result.tool_calls == 0
    r2, r3, r4 = provider.requests[1:]
    assert "unknown tool 'frobnicate'" in last_results(r2).results[0].content
    bad_args = last_results(r3).results[0]
    assert bad_args.is_error
    assert "cwd" in bad_args.content
    assert r4.messages[-1] == UserMessage(content=NUDGE)


def test_exploration_is_capped(tmp_path: Path, repo: Path) -> None:
    reads = [{"tool": "read_file", "args": {"path": p}} for p in ("app/core.py", "app/util.py")]
    provider = scripted(tmp_path, [reads, submit(GOOD)])
    result = plan_requirement("X", repo, provider, max_tool_calls=1)
    assert result.ok
    assert result.tool_calls == 1
    first, second = last_results(provider.requests[1]).results
    assert not first.is_error
    assert second.is_error
    assert "cap of 1 exploration calls" in second.content


def test_token_budget_is_enforced(tmp_path: Path, repo: Path) -> None:
    provider = scripted(tmp_path, [submit(GOOD)])
    result = plan_requirement("X", repo, provider, token_budget=2_000)
    assert result.outcome == "budget"
    assert result.plan is None
    assert provider.requests == []  # the first call alone would not fit
    assert result.report.errors[-1].code == "planner_budget"
    assert "2,000" in result.message


def test_provider_failure_keeps_the_validation_errors(tmp_path: Path, repo: Path) -> None:
    bad = plan_data(node("a", write_scope=["/abs.py"]))
    provider = scripted(tmp_path, [submit(bad)])  # runs out before a second submission
    result = plan_requirement("X", repo, provider)
    assert result.outcome == "provider"
    assert not result.report.valid
    assert [p.code for p in result.report.errors] == ["bad_scope", "planner_provider"]
    assert "ran out" in result.message


def test_plan_id_is_forced_and_manifests_are_saved(tmp_path: Path, repo: Path) -> None:
    bad = plan_data(node("a", write_scope=["/abs.py"]))
    provider = scripted(tmp_path, [submit(bad), submit(GOOD)])
    manifests = tmp_path / "m"
    result = plan_requirement("X", repo, provider, plan_id="chosen", manifest_dir=manifests)
    assert result.plan is not None
    assert result.plan.plan_id == "chosen"
    assert '"chosen"' in provider.requests[0].messages[0].content  # type: ignore[union-attr]
    assert result.manifest_paths == [manifests / PLANNER_TASK_ID / f"{n}.json" for n in (1, 2)]
    first, second = (json.loads(p.read_text()) for p in result.manifest_paths)
    assert first["task_id"] == PLANNER_TASK_ID
    assert second["n"] == 2
    kinds = {(i["item_id"], i["kind"], i["source"], i["trust"]) for i in first["items"]}
    assert ("repomap", "stub", "repomap", "untrusted") in kinds
    assert ("requirement", "task", "requirement", "trusted") in kinds
    assert ("tool:submit_plan", "tool_schema", "submit_plan", "trusted") in kinds
    observations = [i for i in second["items"] if i["kind"] == "observation"]
    assert len(observations) == 2  # the model's turn and the validation feedback
    assert first["total_tokens"] == sum(i["tokens"] for i in first["items"])


def test_requirement_from_a_file(tmp_path: Path, repo: Path) -> None:
    req = tmp_path / "req.md"
    req.write_text("Add an API handler\nwith details\n")
    provider = scripted(tmp_path, [submit(GOOD)])
    out, _ = console()
    args: dict[str, Any] = {
        "expand_read_scope": False,
        "max_rounds": 1,
        "console": out,
        "as_json": False,
    }
    assert run_plan_command(f"@{req}", repo, None, provider, **args) == 0
    saved = load_plan_data(repo / ".anti-sprawl" / "plans" / "demo.yaml")
    assert saved["requirement"] == "Add an API handler\nwith details\n"
    with pytest.raises(UsageError, match="requirement file not found"):
        run_plan_command(f"@{tmp_path / 'nope.md'}", repo, None, provider, **args)
    with pytest.raises(UsageError, match="repository not found"):
        run_plan_command("X", tmp_path / "no-repo", None, provider, **args)


def plan_with(repo: Path, tmp_path: Path, plan: dict[str, Any], **kw: Any) -> Any:
    result = plan_requirement("X", repo, scripted(tmp_path, [submit(plan)]), **kw)
    assert result.ok, result.report.errors
    return result


def test_missing_tests_are_warned_about(tmp_path: Path, repo: Path) -> None:
    plan = plan_data(
        node("util", write_scope=["app/util.py"]),
        node("api", write_scope=["app/api.py"]),
        node("core", write_scope=["app/core.py"]),
        node("core_tests", dependencies=["core"], write_scope=["tests/test_core.py"]),
    )
    result = plan_with(repo, tmp_path, plan)
    assert sorted(result.warnings) == [
        "task 'api' changes app/api.py but no task writes a test for it "
        "(expected tests/test_api.py or app/api_test.py)",
        # validation traces what the code uses (plan/reference_checks.py): api calls core's
        # run(), core calls util's helper(), and no dependency ordered those tasks; the
        # planner orders them (planner/assist.py with_writer_dependencies)
        "task 'api' dependencies: added 'core': its files use names defined in app/core.py, "
        "which 'core' writes",
        # then applies validation's read_coverage warnings (with_used_definitions): a worker
        # cannot read a file its scopes miss
        "task 'api' read_scope: added app/core.py: its files use names defined there, which "
        "its worker could not read",
        "task 'core' dependencies: added 'util': its files use names defined in app/util.py, "
        "which 'util' writes",
        "task 'core' read_scope: added app/util.py: its files use names defined there, which "
        "its worker could not read",
        "task 'core_tests' read_scope: added app/core.py: its files use names defined there, "
        "which its worker could not read",
        "task 'util' changes app/util.py but its tests (tests/test_util.py) are in no "
        "task's write scope",
        "task 'util' read_scope: added app/deep.py: its files use names defined there, which "
        "its worker could not read",
    ]
    tasks = {t.task_id: t for t in result.plan.tasks}
    assert tasks["core_tests"].read_scope == ["app/core.py"]
    assert tasks["util"].read_scope == ["app/deep.py"]
    assert (tasks["api"].dependencies, tasks["api"].read_scope) == (["core"], ["app/core.py"])
    assert (tasks["core"].dependencies, tasks["core"].read_scope) == (["util"], ["app/util.py"])
    assert plan_with(repo, tmp_path, GOOD).warnings == []


def test_read_scope_expansion_follows_imports_and_references(tmp_path: Path, repo: Path) -> None:
    plan = plan_data(
        node("core", write_scope=["app/core.py", "tests/test_core.py"]),
        node("api", dependencies=["core"], write_scope=["app/api.py", "tests/test_api.py"]),
    )
    plain = plan_with(repo, tmp_path, plan).plan
    # without the flag, only the files defining names the write files use directly
    assert [t.read_scope for t in plain.tasks] == [["app/util.py"], ["app/core.py"]]
    expanded = plan_with(repo, tmp_path, plan, expand_read_scope=True).plan
    core, api = expanded.tasks
    assert "app/util.py" in core.read_scope  # app/core.py imports app.util
    # ...whose helper(), which core calls, returns deep.VALUE: a reference two deep
    assert "app/deep.py" in core.read_scope
    # `from .core import run`, written upstream, then what run() uses
    assert api.read_scope == ["app/core.py", "app/util.py"]


def test_expansion_never_creates_a_stale_read(tmp_path: Path, repo: Path) -> None:
    plan = plan_data(
        node("core", write_scope=["app/core.py", "tests/test_core.py"]),
        node("util", write_scope=["app/util.py", "tests/test_util.py"]),
    )
    from anti_sprawl.planner.assist import expand_read_scopes

    files = fx.git(repo, "ls-files").splitlines()
    expanded, warnings = expand_read_scopes(
        Plan.model_validate(plan), files, lambda p: (repo / p).read_text()
    )
    core, util = expanded.tasks
    assert "app/util.py" not in core.read_scope
    assert util.read_scope == ["app/deep.py"]
    assert any("not adding import app/util.py" in w and "'util' writes it" in w for w in warnings)
    # the planner orders them first (with_writer_dependencies): core waits for util, reads it
    core, util = plan_with(repo, tmp_path, plan, expand_read_scope=True).plan.tasks
    assert (core.dependencies, "app/util.py" in core.read_scope) == (["util"], True)


def test_default_budgets_when_the_model_leaves_them_out(tmp_path: Path, repo: Path) -> None:
    from anti_sprawl.planner.assist import budget_for, estimated_tokens, prompt_sizes

    plan = plan_data(
        node("core", write_scope=["app/core.py", "tests/test_core.py"], read_scope=["app/util.py"]),
        node(
            "api",
            dependencies=["core"],
            write_scope=["app/api.py", "tests/test_api.py"],
            token_budget=12_345,
            max_tool_calls=9,
        ),
    )
    result = plan_with(repo, tmp_path, plan)
    core, api = result.plan.tasks
    natural, minimal = prompt_sizes(core, sorted(FILES), FILES.get)
    assert core.token_budget == budget_for(natural, minimal) == 24_000  # small files: the floor
    assert core.max_tool_calls == 2 * 3 + 6  # three scoped files
    assert (api.token_budget, api.max_tool_calls) == (12_345, 9)
    assert result.estimated_tokens == estimated_tokens(result.plan)
    assert result.estimated_tokens == (24_000 * 14 + 12_345 * 11) * 2  # two attempts each


def test_silence_ends_as_stalled(tmp_path: Path, repo: Path) -> None:
    provider = scripted(tmp_path, [{"text": "hmm"}] * 5)
    result = plan_requirement("X", repo, provider)
    assert result.outcome == "stalled"
    assert result.requests == 4  # three nudges, then stop
    assert result.report.errors[-1].code == "planner_stalled"


def test_the_planners_own_reads_are_not_violations(tmp_path: Path, make_repo: MakeRepo) -> None:
    repo = make_repo({**FILES, "assets/logo.bin": "\x00\x01\x02binary"})
    plan = plan_data(node("assets", write_scope=["assets/"]))
    result = plan_with(repo, tmp_path, plan)
    assert result.violations == []  # the budget estimate's refused binary read is not one
    assert result.plan.tasks[0].max_tool_calls == 2 * 1 + 6


def test_a_submission_cut_at_the_output_limit_is_reported_and_retried(
    tmp_path: Path, repo: Path
) -> None:
    long = json.loads(json.dumps(GOOD))
    long["tasks"][0]["goal"] = "Explain everything at length. " * 400  # > 1,000 tokens
    provider = scripted(tmp_path, [submit(long), submit(GOOD)])
    result = plan_requirement("Add an API handler", repo, provider, max_output_tokens=1000)
    assert result.ok, result.message
    first, second = provider.requests_for(PLANNER_TASK_ID)
    assert first.max_output_tokens == 1000
    told = [m.content for m in second.messages if isinstance(m, UserMessage)][-1]
    assert told.startswith("Your response was cut at 1,000 output tokens")
    assert "shorter plan" in told
    assert result.rounds == 1  # the cut submission never reached validation


def test_planner_read_file_takes_the_same_line_ranges(tmp_path: Path, repo: Path) -> None:
    turns = [
        [
            {"tool": "read_file", "args": {"path": "app/core.py", "start_line": 4, "end_line": 5}},
            {"tool": "read_file", "args": {"path": "app/core.py", "start_line": 9}},
            {"tool": "read_file", "args": {"path": "app/core.py", "start_line": 0}},
        ],
        submit(GOOD),
    ]
    provider = scripted(tmp_path, turns)
    result = plan_requirement("Add an API handler", repo, provider)
    assert result.ok
    ranged, past, zero = last_results(provider.requests[1]).results
    assert "app/core.py lines 4-5 of 5\n4\tdef run():\n5\t    return util.helper()" in (
        ranged.content
    )
    assert past.is_error
    assert "app/core.py has 5 lines: the range 9-5 goes past the end" in past.content
    assert zero.is_error
    assert "greater than or equal to 1" in zero.content


# --- plan --models -----------------------------------------------------------------------


def with_models(core: str | None, api: str | None, *, why: bool = True) -> dict[str, Any]:
    data = copy.deepcopy(GOOD)
    for task, model in zip(data["tasks"], (core, api), strict=True):
        if model is not None:
            task["model"] = model
            if why:
                task["goal"] += f"\nModel: {model}, because it is mechanical work."
    return data


def test_the_planner_assigns_allowed_models_and_says_why(tmp_path: Path, repo: Path) -> None:
    wrong = with_models("claude-haiku-5-5", "gpt-9-ultra")  # not in the list
    silent = with_models("claude-haiku-5-5", None, why=False)  # no reason in the goal
    good = with_models("claude-haiku-5-5", None)
    provider = scripted(tmp_path, [submit(wrong), submit(silent), submit(good)])
    allowed = ["claude-sonnet-5-5", "claude-haiku-5-5"]
    result = plan_requirement("Add an API handler", repo, provider, models=allowed)
    assert result.ok, result.message
    assert result.plan is not None, result.message
    core, api = result.plan.tasks
    assert core.model == "claude-haiku-5-5"
    assert "because" in core.goal
    assert api.model is None
    assert result.plan.default_model == "claude-sonnet-5-5"
    first, second, third = provider.requests
    assert "claude-sonnet-5-5" in first.messages[0].content  # the list is in the brief
    [bad_model] = last_results(second).results
    assert "[model_not_allowed]" in bad_model.content
    assert "gpt-9-ultra" in bad_model.content
    [no_reason] = last_results(third).results
    assert "[model_reason]" in no_reason.content
    assert "'core'" in no_reason.content
    provider.assert_complete()


def test_without_models_a_model_the_planner_picks_is_left_out(tmp_path: Path, repo: Path) -> None:
    """Without ``--models`` the user chose none: a model the submission names (make real-model
    2026-12-04 run c: 'python', in all three submissions, and planning failed on that alone)
    is left out with a warning, and the run's model does that work."""
    named = with_models("claude-haiku-5-5", None) | {"default_model": "python"}
    provider = scripted(tmp_path, [submit(named)])
    result = plan_requirement("Add an API handler", repo, provider, max_rounds=2)
    assert result.ok, result.message
    assert result.plan is not None
    assert result.plan.default_model is None
    assert [t.model for t in result.plan.tasks] == [None, None]
    left_out = [p.message for p in result.report.warnings if p.code == "model_left_out"]
    assert left_out == [
        "default_model 'python' left out: the user allowed no models (plan --models), so the "
        "run's model does this work",
        "task 'core' model 'claude-haiku-5-5' left out: the user allowed no models (plan "
        "--models), so the run's model does this work",
    ]
    assert all(message in result.warnings for message in left_out)
    assert "Models" not in provider.requests[0].messages[0].content
    provider.assert_complete()


def test_models_flag_through_the_cli(tmp_path: Path, repo: Path) -> None:
    from typer.testing import CliRunner

    from anti_sprawl.cli.app import app

    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({"plan": with_models("claude-haiku-5-5", None)}))
    args = ["plan", "Add an API handler", "--repo", str(repo), "--script", str(script)]
    out = tmp_path / "plan.yaml"
    ok = CliRunner().invoke(
        app, [*args, "--models", "claude-sonnet-5-5, claude-haiku-5-5", "-o", str(out)]
    )
    assert ok.exit_code == 0, ok.output
    saved = load_plan_data(out)
    assert saved["default_model"] == "claude-sonnet-5-5"
    assert saved["tasks"][0]["model"] == "claude-haiku-5-5"
    bad = CliRunner().invoke(app, [*args, "--models", " , "])
    assert bad.exit_code == 2
    assert "--models needs" in bad.output


SUBTRACT = "Add a function subtract(a, b) to calc.py that returns a - b, and a test for it in test_calc.py."


@pytest.mark.parametrize(
    ("requirement", "tasks", "given"),
    [
        # make real-model 2026-12-05 run ao, the planner's last submission (verbatim scopes):
        # one task, which could write calc.py alone
        (
            SUBTRACT,
            [
                (
                    "01",
                    "Implement the subtract function in calc.py and write a test for it.",
                    ["./calc.py"],
                )
            ],
            {"01": ["./calc.py", "test_calc.py"]},
        ),
        # the one task whose goal names it, among several
        (
            SUBTRACT,
            [
                ("code", "Add subtract() to calc.py.", ["calc.py"]),
                ("docs", "Describe subtract() in README.md.", ["README.md"]),
                ("test", "Test subtract() in test_calc.py.", ["tests/"]),
            ],
            {"code": ["calc.py"], "docs": ["README.md"], "test": ["tests/", "test_calc.py"]},
        ),
        # several tasks and none names it: whose part it is stays the user's call
        (
            SUBTRACT,
            [("code", "Add subtract().", ["calc.py"]), ("docs", "Describe it.", ["README.md"])],
            {"code": ["calc.py"], "docs": ["README.md"]},
        ),
        # the requirement asks to leave it alone
        (
            "Add subtract(a, b) to calc.py. Leave test_calc.py untouched.",
            [("01", "Add subtract() to calc.py.", ["calc.py"])],
            {"01": ["calc.py"]},
        ),
    ],
)
def test_a_file_the_requirement_names_goes_to_the_one_task_that_does_that_part(
    requirement: str, tasks: list[tuple[str, str, list[str]]], given: dict[str, list[str]]
) -> None:
    from anti_sprawl.plan.validate import validate
    from anti_sprawl.planner.assist import with_named_files

    data = plan_data(*(node(i, goal=g, write_scope=w) for i, g, w in tasks))
    plan = Plan.model_validate({**data, "requirement": requirement})
    report = validate(plan)
    unwritten = [p for p in report.warnings if p.code == "requirement_path_unwritten"]
    assert [p.paths for p in unwritten] == [["test_calc.py"]]
    planned, notes = with_named_files(plan, report.warnings)
    assert {t.task_id: t.write_scope for t in planned.tasks} == given
    changed = [i for i, _, w in tasks if given[i] != w]
    assert [n.split("'")[1] for n in notes] == changed
    if changed:
        assert "requirement_path_unwritten" not in {p.code for p in validate(planned).warnings}
