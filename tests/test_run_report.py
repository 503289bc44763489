"""Progress, verdict and PR body rendering, and hidden-character flags (PI-7)."""

from __future__ import annotations

import json
import os
import sys
from io import StringIO
from pathlib import Path

from rich.console import Console
from typer.testing import CliRunner

from anti_sprawl.cli.app import app
from anti_sprawl.plan.model import Plan
from anti_sprawl.redact import Redactor
from anti_sprawl.run.journal import RunState
from anti_sprawl.run.result import TaskResult
from anti_sprawl.views.pr_body import pr_body as pr_markdown
from anti_sprawl.views.run import Progress, render_runs, render_verdict

from . import e2e_fixture as fx

runner = CliRunner()


def state() -> RunState:
    plan = Plan.model_validate(fx.plan())
    tasks = {
        t.task_id: TaskResult(task_id=t.task_id, name=t.name, token_budget=t.token_budget)
        for t in plan.tasks
    }
    tasks["a"].status = "succeeded"
    tasks["b"].status, tasks["b"].reason, tasks["b"].message = "failed", "budget", "over budget"
    tasks["c"].status, tasks["c"].skipped_because = "skipped", "b"
    return RunState(
        run_id="r1",
        plan_id="demo",
        repo="/x",
        base="0" * 40,
        branch="anti-sprawl/demo",
        plan=plan,
        tasks=tasks,
    )


def test_plain_progress_lines_when_not_a_terminal() -> None:
    out = StringIO()
    progress = Progress(Console(file=out, width=60, force_terminal=False))
    s = state()
    progress.start(s)
    for record in s.tasks.values():
        progress.event(record)
    progress.stop()
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("a: succeeded")
    # within the console's 60 columns: broken at a space, the rest indented
    assert lines[1] == "b: failed (budget): over budget [0 (40,000/call) tokens, 0"
    assert lines[2] == "    tool calls]"
    assert lines[3] == "c: skipped: b failed"


def test_live_table_on_a_terminal() -> None:
    out = StringIO()
    progress = Progress(Console(file=out, width=100, force_terminal=True))
    s = state()
    progress.start(s)
    progress.event(s.tasks["a"])
    progress.stop()
    text = out.getvalue()
    assert "tokens (cap/call)" in text
    assert "\x1b[" in text  # a rendered, styled table
    assert "skipped" in text


def test_verdict_names_reasons_and_dependencies() -> None:
    out = StringIO()
    render_verdict(state(), Console(file=out, width=120))
    text = out.getvalue()
    assert "failed b (budget): over budget" in text
    assert "skipped c: b failed" in text
    assert "1 succeeded, 1 failed, 1 skipped" in text


def test_pr_body_has_dag_table_and_summaries() -> None:
    body = pr_markdown(state(), Redactor())
    assert "```mermaid" in body
    assert "n_a --> n_c" in body
    assert "| `b` | failed \\(budget\\): over budget |" in body
    assert "### `c`: " in body


def test_hidden_characters_are_flagged(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path)
    hidden = "# note\u200b for the agent\U000e0041\U000e0042\n"
    (repo / "pkg" / "base.py").write_text("def base() -> int:\n    return 1\n" + hidden)
    fx.git(repo, "-c", "user.name=t", "-c", "user.email=t@l", "commit", "-qam", "hidden")
    plan_path, script_path = fx.write_inputs(tmp_path, fx.plan(), fx.script())
    env = {"PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    args = ["execute", str(plan_path), "--repo", str(repo), "--script", str(script_path), "--json"]
    result = runner.invoke(app, args, env=env)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    flagged = doc["tasks"]["a"]["hidden_chars"]
    assert flagged
    assert all(count >= 3 for count in flagged.values())
    pr = (repo / ".anti-sprawl" / "runs" / doc["run_id"] / "PR.md").read_text()
    assert "Hidden characters" in pr


def test_success_with_blocked_attempts_says_so() -> None:
    from anti_sprawl.fs.firewall import Violation

    s = state()
    s.tasks["a"].violations = [
        Violation(op="write", path="src/auth.py", reason="not_writable_scope")
    ]
    out = StringIO()
    render_verdict(s, Console(file=out, width=120))
    assert "blocked a: write src/auth.py (not_writable_scope)" in out.getvalue()
    assert "| `a` | succeeded, 1 blocked |" in pr_markdown(s, Redactor())


def test_verdict_stays_readable_at_80_columns() -> None:
    from anti_sprawl.agent.worker import TestOutcome

    s = state()
    b = s.tasks["b"]
    b.reason, b.message = "tests", "tests failed after the audit (exit code 1)"
    b.tests = TestOutcome(
        command=["pytest"],
        exit_code=1,
        tail="collected 3 items\n\nFAILED tests/test_x.py::test_y - assert 1 == 2\n"
        "=========== 1 failed, 2 passed in 0.12s ===========\n",
    )
    s.tasks["a"].truncated_responses = 2
    out = StringIO()
    render_verdict(s, Console(file=out, width=80))
    lines = out.getvalue().splitlines()
    assert all(len(line) <= 80 for line in lines), "\n".join(lines)
    rows = [ln for ln in lines if ln.startswith("│")]
    assert len(rows) == 3, "every status fits on its row"
    assert any("│ failed " in r for r in rows)
    assert any("│ skipped " in r for r in rows)
    text = "\n".join(lines)
    assert "failed b (tests): tests failed after the audit (exit code 1)" in text
    assert "last test output: =========== 1 failed, 2 passed in 0.12s ===========" in text
    assert "cut a: 2 responses cut at the output limit" in text
    assert "2 responses cut at the output limit" in pr_markdown(s, Redactor())


def test_progress_prints_each_status_once() -> None:
    out = StringIO()
    progress = Progress(Console(file=out, width=80, force_terminal=False))
    s = state()
    progress.start(s)
    a = s.tasks["a"]
    a.status = "running"
    progress.event(a)
    progress.event(a)  # the journal update when the worktree work ends: still running
    a.status = "succeeded"
    progress.event(a)
    progress.stop()
    assert [ln.split(" [")[0] for ln in out.getvalue().splitlines()] == [
        "a: running",
        "a: succeeded",
    ]


def test_the_runs_list_keeps_ids_and_branches_whole_at_80_columns() -> None:
    short, long = state(), state()
    long.run_id = "a-rather-long-plan-identifier-20261201-221500-beef"
    long.branch = "anti-sprawl/a-rather-long-plan-identifier-for-the-branch"
    for width, runs in ((80, [short]), (80, [short, long]), (40, [short, long])):
        out = StringIO()
        render_runs(runs, Console(file=out, width=width))
        lines = out.getvalue().splitlines()
        text = out.getvalue()
        for s in runs:  # each on one line, whole
            assert any(s.run_id in ln for ln in lines), text
            assert any(s.branch in ln for ln in lines), text
        assert all(
            len(ln) <= width
            for ln in lines
            if not any(s.branch in ln or s.run_id in ln for s in runs)
        ), text
