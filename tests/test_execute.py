"""execute end to end through the real CLI, on real temporary git repositories."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from anti_sprawl.cli.app import app
from anti_sprawl.run.journal import RepoLock

from . import e2e_fixture as fx

runner = CliRunner()


pytestmark = pytest.mark.usefixtures("python_on_path")


def execute(tmp_path: Path, plan: dict, script: dict, *extra: str) -> tuple[Path, object]:
    repo = fx.make_repo(tmp_path)
    plan_path, script_path = fx.write_inputs(tmp_path, plan, script)
    args = ["execute", str(plan_path), "--repo", str(repo), "--script", str(script_path), *extra]
    return repo, runner.invoke(app, args)


def test_execute_lands_one_commit_per_node(tmp_path: Path, executor_args: list[str]) -> None:
    repo = fx.make_repo(tmp_path / "x")
    before = fx.checkout_fingerprint(repo)
    plan_path, script_path = fx.write_inputs(tmp_path, fx.plan(), fx.script())
    args = ["execute", str(plan_path), "--repo", str(repo), "--script", str(script_path), "--json"]
    args += executor_args
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    state = json.loads(result.stdout)
    assert state["status"] == "succeeded"
    assert sorted(fx.task_trailers(repo)) == ["a", "b", "c"]
    tree = fx.branch_tree(repo)
    assert {"pkg/a.py", "pkg/b.py", "pkg/c.py"} <= set(tree)
    # the user's checkout is byte-identical
    assert fx.checkout_fingerprint(repo) == before
    # trailers: run and tokens on every node commit
    log = fx.git(repo, "log", "--format=%B%x00", "anti-sprawl/demo", "-3")
    for message in filter(str.strip, log.split("\x00")):
        assert f"Anti-Sprawl-Run: {state['run_id']}" in message
        assert "Anti-Sprawl-Tokens: " in message
    # no worktree is left behind
    assert not list((repo / ".anti-sprawl" / "worktrees").glob("*"))
    assert ".anti-sprawl" in (repo / ".git" / "info" / "exclude").read_text()
    pr = (repo / ".anti-sprawl" / "runs" / state["run_id"] / "PR.md").read_text()
    assert "```mermaid" in pr
    assert "| `c` |" in pr


def test_parallel_siblings_overlap(tmp_path: Path) -> None:
    repo, result = execute(tmp_path, fx.plan(), fx.script(), "--jobs", "2", "--json")
    assert result.exit_code == 0, result.output
    run_dir = next((repo / ".anti-sprawl" / "runs").iterdir())

    # manifests are written at each model call; their files' mtimes interleave when nodes overlap
    def span(task: str) -> tuple[float, float]:
        times = [p.stat().st_mtime_ns for p in (run_dir / "manifests" / task).glob("*.json")]
        return min(times), max(times)

    (a0, a1), (b0, b1) = span("a"), span("b")
    assert max(a0, b0) < min(a1, b1), "a and b did not run at the same time"


def test_failure_skips_dependents_and_independent_branch_completes(
    tmp_path: Path, executor_args: list[str]
) -> None:
    plan = fx.plan()
    plan["tasks"].append(fx.node("d", [], "pkg/d.py", "D = 4\n"))
    script = fx.script(a=[{"tool": "read_file", "args": {"path": "pkg/base.py"}}])
    script["workers"]["d"] = fx.worker_turns("pkg/d.py", "D = 4\n")
    repo, result = execute(tmp_path, plan, script, "--jobs", "2", *executor_args)
    assert result.exit_code == 1
    assert "skipped: a failed" in result.output
    assert "failed (script)" in result.output
    assert sorted(fx.task_trailers(repo)) == ["b", "d"]


def test_out_of_scope_write_is_blocked_and_reported(
    tmp_path: Path, executor_args: list[str]
) -> None:
    turns = fx.worker_turns("pkg/a.py", "A = 1\n")
    turns.insert(1, {"tool": "edit_file", "args": {"path": "pkg/util.py", "old": "2", "new": "3"}})
    repo, result = execute(tmp_path, fx.plan(), fx.script(a=turns), "--json", *executor_args)
    assert result.exit_code == 0, result.output
    state = json.loads(result.stdout)
    assert [v["path"] for v in state["tasks"]["a"]["violations"]] == ["pkg/util.py"]
    assert (
        fx.git(repo, "show", "anti-sprawl/demo:pkg/util.py") == "def helper() -> int:\n    return 2"
    )


def test_failing_tests_fail_the_node(tmp_path: Path, executor_args: list[str]) -> None:
    plan = fx.plan(max_attempts=1)  # a retry would run out of script: one attempt here
    plan["tasks"][0]["test_command"] = [sys.executable, "-c", "raise SystemExit(3)"]
    _, result = execute(tmp_path, plan, fx.script(), "--json", *executor_args)
    assert result.exit_code == 1
    state = json.loads(result.stdout)
    assert state["tasks"]["a"]["reason"] == "tests"
    assert state["tasks"]["c"]["status"] == "skipped"


def test_second_execute_is_refused_while_one_holds_the_lock(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path)
    plan_path, script_path = fx.write_inputs(tmp_path, fx.plan(), fx.script())
    lock = RepoLock(repo)
    lock.acquire("other-run-123")
    try:
        args = ["execute", str(plan_path), "--repo", str(repo), "--script", str(script_path)]
        result = runner.invoke(app, args)
    finally:
        lock.release()
    assert result.exit_code == 2
    assert "other-run-123" in result.output
    assert "Traceback" not in result.output


def test_execute_usage_errors(tmp_path: Path) -> None:
    plan_path, script_path = fx.write_inputs(tmp_path, fx.plan(), fx.script())
    not_git = tmp_path / "plain"
    not_git.mkdir()
    for name, rel in fx.FILES.items():
        (not_git / name).parent.mkdir(parents=True, exist_ok=True)
        (not_git / name).write_text(rel)
    result = runner.invoke(
        app, ["execute", str(plan_path), "--repo", str(not_git), "--script", str(script_path)]
    )
    assert result.exit_code == 2
    assert "not a git repository" in result.output
    result = runner.invoke(app, ["execute", str(plan_path), "--repo", str(not_git)])
    assert result.exit_code == 2


def test_status_and_inspect(tmp_path: Path) -> None:
    repo, result = execute(tmp_path, fx.plan(), fx.script(), "--json")
    run_id = json.loads(result.stdout)["run_id"]
    listing = runner.invoke(app, ["status", "--repo", str(repo), "--json"])
    [listed] = json.loads(listing.stdout)
    assert listed["run_id"] == run_id
    assert listed["tokens"] > 0
    assert listed["cost_usd"] == 0.0
    one = runner.invoke(app, ["status", run_id, "--repo", str(repo)])
    assert one.exit_code == 0
    assert "succeeded" in one.output
    manifests = json.loads(
        runner.invoke(
            app, ["inspect", run_id, "--repo", str(repo), "--task", "c", "--manifests", "--json"]
        ).stdout
    )
    assert manifests
    assert all(m["task_id"] == "c" for m in manifests)
    kinds = {i["kind"] for i in manifests[0]["items"]}
    assert {"instruction", "task", "upstream_summary", "tool_schema"} <= kinds
    bad = runner.invoke(app, ["inspect", "nope", "--repo", str(repo)])
    assert bad.exit_code == 2


def test_sparse_checkout_materializes_only_scopes(tmp_path: Path) -> None:
    plan = fx.plan(max_attempts=1)
    # pkg/util.py is in no scope: present in a full worktree, absent in a sparse one
    absent = "import os, sys; sys.exit(1 if os.path.exists('pkg/util.py') else 0)"
    plan["test_command"] = [sys.executable, "-c", absent]
    repo, result = execute(tmp_path, plan, fx.script(), "--sparse", "--json")
    assert result.exit_code == 0, result.output
    tree = fx.branch_tree(repo)
    assert {"pkg/util.py", "pkg/a.py", "pkg/b.py", "pkg/c.py", "README.md"} <= set(tree)
    assert fx.git(repo, "show", "anti-sprawl/demo:pkg/util.py").startswith("def helper")
    _, full = execute(tmp_path / "full", plan, fx.script(), "--json")
    assert full.exit_code == 1  # the same check fails when everything is checked out
    assert json.loads(full.stdout)["tasks"]["a"]["reason"] == "tests"


def test_uncommitted_changes_are_named_not_included(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path)
    (repo / "pkg" / "util.py").write_text("def helper() -> int:\n    return 99\n")
    (repo / "scratch.txt").write_text("wip\n")
    plan_path, script_path = fx.write_inputs(tmp_path, fx.plan(), fx.script())
    args = ["execute", str(plan_path), "--repo", str(repo), "--script", str(script_path)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "2 uncommitted change(s)" in result.output
    assert "return 2" in fx.git(repo, "show", "anti-sprawl/demo:pkg/util.py")
    assert (repo / "scratch.txt").read_text() == "wip\n"  # the user's work is left alone


def test_repo_must_be_the_repository_root(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path)
    plan_path, script_path = fx.write_inputs(tmp_path, fx.plan(), fx.script())
    args = ["execute", str(plan_path), "--repo", str(repo / "pkg"), "--script", str(script_path)]
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert "pass the root with --repo" in result.output


def test_commits_land_in_a_fixed_order_whatever_finishes_first(
    tmp_path: Path, executor_args: list[str]
) -> None:
    plan = fx.plan()
    # a is slow, so b finishes first; b still lands after a (plan order breaks the tie)
    plan["tasks"][0]["test_command"] = [sys.executable, "-c", "import time; time.sleep(1)"]
    repo, result = execute(tmp_path, plan, fx.script(), "--jobs", "2", "--json", *executor_args)
    assert result.exit_code == 0, result.output
    order = fx.git(
        repo,
        "log",
        "--reverse",
        "--format=%(trailers:key=Anti-Sprawl-Task,valueonly)",
        "main..anti-sprawl/demo",
    )
    assert [line.strip() for line in order.splitlines() if line.strip()] == ["a", "b", "c"]
    state = json.loads(result.stdout)
    assert state["tasks"]["b"]["finished_at"] <= state["tasks"]["a"]["finished_at"]


def test_a_summary_naming_a_file_its_node_left_alone_is_set_against_the_diff(
    tmp_path: Path,
) -> None:
    """make real-model 2026-12-05 run aa: node 1 changed calc.py only and summed up "a test
    for it passed in test_calc.py"; the test node read that as done and changed nothing. The
    downstream prompt now says which files of the upstream write scope the summary names and
    the change left alone."""
    plan = fx.plan()
    plan["tasks"][0]["write_scope"] = ["pkg/a.py", "pkg/test_a.py"]
    turns = fx.worker_turns("pkg/a.py", "A = 1\n")
    turns[-1]["args"]["summary"] = "created pkg/a.py and its test in pkg/test_a.py; uses README.md"
    repo, result = execute(tmp_path, plan, fx.script(a=turns), "--json")
    assert result.exit_code == 0, result.output
    line = "named in the summary but not changed by this node: pkg/test_a.py"
    seen = {
        p.relative_to(repo / ".anti-sprawl" / "runs").parts[2]
        for p in (repo / ".anti-sprawl" / "runs").rglob("*")
        if p.is_file() and line in p.read_text(errors="replace")
    }
    assert seen == {"c"}  # the one node that depends on a; README.md is no file of a's scope


def test_a_downstream_prompt_names_what_its_dependency_s_diff_defines(tmp_path: Path) -> None:
    """make real-model 2026-12-05 runs ak, am and an: the test node had calc.py with its new
    subtract() in view and still wrote its own copy into test_calc.py. The definitions a
    dependency's diff adds are now listed in its block, read from the diff, whatever its
    summary says; a node that depends on nothing sees no such list."""
    plan = fx.plan()
    code = (
        "import os\n\n\ndef area(width, height):\n    return width * height\n\n\n"
        "class Shape:\n    def side(self):\n        return 1\n\n\n"
        "async def fetch(\n    url,\n):\n    return url\n"
    )
    turns = fx.worker_turns("pkg/a.py", code)
    turns[-1]["args"]["summary"] = "did what was asked"
    repo, result = execute(tmp_path, plan, fx.script(a=turns), "--json")
    assert result.exit_code == 0, result.output
    runs = repo / ".anti-sprawl" / "runs"
    block = (
        "definitions its diff adds or changes:\n"
        "- pkg/a.py: area(width, height)\n- pkg/a.py: class Shape\n- pkg/a.py: fetch(...)\n"
    )
    written = json.dumps(block)[1:-1]  # as a JSON string holds it (manifests, requests)
    seen = {
        p.relative_to(runs).parts[2]
        for p in runs.rglob("*")
        if p.is_file() and written in p.read_text(errors="replace")
    }
    assert seen == {"c"}
