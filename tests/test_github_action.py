"""The GitHub Action end to end: ``anti-sprawl github event`` (what action.yml runs) on real
issue events, a real repository with a bare remote, the scripted provider, and ``gh`` absent
or a stand-in on PATH that keeps the issue's comments and records every call (tests/fake_gh.py).
Also the CLI pieces it stands on: ``plan --format github-comment`` and ``execute --plan-sha256``.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from anti_sprawl.cli.app import app
from anti_sprawl.cli.ci import plan_sha256
from anti_sprawl.sandbox.sandbox import sandbox_env
from anti_sprawl.sandbox.user_env import user_command_env
from anti_sprawl.views.github import STICKY, plan_in_comment

from . import e2e_fixture as fx
from . import fake_gh
from .conftest import GIT_ENV

runner = CliRunner()
KEY = "sk-ant-" + "k" * 40
TOKEN = "ghp_" + "t" * 36
# The node's test: exit 3 if the API key or the gh token (by name or value) reached it.
ENV_CHECK = [
    sys.executable,
    "-c",
    "import os, sys; bad = [k for k, v in os.environ.items() if 'KEY' in k or 'TOKEN' in k "
    "or 'sk-ant-' in v or 'ghp_' in v]; sys.exit(3 if bad else 0)",
]
ISSUE = 7
BRANCH = f"anti-sprawl/issue-{ISSUE}"


class Setup:
    """A repository with a bare origin, a script (planner and workers), and the step's env."""

    def __init__(self, tmp_path: Path, gh: bool, partial: bool = False) -> None:
        self.tmp = tmp_path
        self.repo = fx.make_repo(tmp_path)
        self.bare = tmp_path / "origin.git"
        subprocess.run(["git", "init", "-q", "--bare", str(self.bare)], check=True)
        fx.git(self.repo, "remote", "add", "origin", str(self.bare))
        plan = fx.plan(test_command=ENV_CHECK)
        workers: dict[str, Any] = {}
        if partial:  # b stops without finishing: b fails, c is skipped, the PR is a draft
            workers["b"] = [{"tool": "read_file", "args": {"path": "pkg/base.py"}}]
        self.script = tmp_path / "script.yaml"
        self.script.write_text(yaml.safe_dump({"plan": plan, **fx.script(**workers)}))
        self.work = tmp_path / "work"
        self.state = tmp_path / "gh-state"
        bindir = tmp_path / "bin"
        bindir.mkdir()
        (bindir / "git").symlink_to("/usr/bin/git")
        if gh:
            fake_gh.install(bindir, self.state, {"alice": "write", "mallory": "read"})
        self.output = tmp_path / "github_output"
        self.summary = tmp_path / "step_summary.md"
        self.env = {
            "PATH": f"{bindir}:{Path(sys.executable).parent}:/bin",
            "HOME": str(tmp_path),
            "ANTHROPIC_API_KEY": KEY,
            "GH_TOKEN": TOKEN,
            "GITHUB_OUTPUT": str(self.output),
            "GITHUB_STEP_SUMMARY": str(self.summary),
            **GIT_ENV,
        }

    def event(self, name: str, payload: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        """The action's step, as action.yml runs it."""
        path = self.tmp / "event.json"
        path.write_text(json.dumps(payload))
        self.output.write_text("")
        argv = [sys.executable, "-m", "anti_sprawl", "github", "event", "--repo", str(self.repo)]
        argv += ["--event-name", name, "--event-path", str(path), "--repository", "o/r"]
        argv += ["--work-dir", str(self.work), "--script", str(self.script), "--max-usd", "5"]
        return subprocess.run(
            argv, env=self.env, capture_output=True, text=True, timeout=600, check=False
        )

    def outputs(self) -> dict[str, str]:
        lines = self.output.read_text().splitlines()
        return dict(line.split("=", 1) for line in lines)

    def remote_branch(self) -> str | None:
        proc = subprocess.run(
            ["git", f"--git-dir={self.bare}", "rev-parse", "--verify", "--quiet", BRANCH],
            capture_output=True,
            text=True,
            check=False,
        )
        return proc.stdout.strip() or None


def comment_event(body: str, login: str = "alice") -> dict[str, Any]:
    return {
        "action": "created",
        "issue": {"number": ISSUE, "title": "Add modules a, b and c", "body": "As planned."},
        "comment": {"body": body, "user": {"login": login}, "author_association": "MEMBER"},
    }


def label_event(label: str = "anti-sprawl") -> dict[str, Any]:
    return {
        "action": "labeled",
        "label": {"name": label},
        "issue": {"number": ISSUE, "title": "Add modules a, b and c", "body": "As planned."},
        "sender": {"login": "alice"},
    }


def sticky(state: Path) -> str:
    found = [c["body"] for c in fake_gh.comments(state) if STICKY in c["body"]]
    assert len(found) == 1, fake_gh.comments(state)
    return str(found[0])


# --- the CLI pieces -------------------------------------------------------------------------


def test_plan_as_a_github_comment_has_the_dag_scopes_estimate_and_the_plan_by_hash(
    tmp_path: Path,
) -> None:
    s = Setup(tmp_path, gh=False)
    plan_file = tmp_path / "plan.yaml"
    args = ["plan", "Add modules a, b and c", "--repo", str(s.repo), "-o", str(plan_file)]
    result = runner.invoke(app, [*args, "--script", str(s.script), "--format", "github-comment"])
    assert result.exit_code == 0, result.output
    body = result.stdout
    assert body.startswith(STICKY)
    assert "```mermaid\nflowchart TD\n" in body
    assert "n_a --> n_c" in body
    assert "n_b --> n_c" in body
    assert "### Scopes" in body
    assert "| `c` Write pkg/c.py | 1 | `a`, `b` | `pkg/c.py` |" in body
    assert "### Estimated cost" in body
    assert "**Total**:" in body
    sha = plan_sha256(plan_file.read_bytes())
    assert plan_in_comment(body) == (sha, plan_file.read_bytes())
    assert f"/anti-sprawl approve {sha[:12]}" in body
    assert "{" not in body.split(STICKY, 1)[0]  # stdout is the comment alone


def test_execute_runs_only_the_plan_with_the_approved_hash(tmp_path: Path) -> None:
    s = Setup(tmp_path, gh=False)
    plan_file, _ = fx.write_inputs(tmp_path, fx.plan(), fx.script())
    sha = plan_sha256(plan_file.read_bytes())
    base = ["execute", str(plan_file), "--repo", str(s.repo), "--script", str(s.script)]
    plan_file.write_bytes(plan_file.read_bytes() + b"# edited after the approval\n")
    refused = runner.invoke(app, [*base, "--plan-sha256", sha])
    assert refused.exit_code == 2
    lines = refused.output.strip().splitlines()
    assert len(lines) == 1, refused.output
    assert lines[0].startswith("anti-sprawl: error: ")
    assert sha[:12] in lines[0]
    assert "nothing was run" in lines[0]
    assert not (s.repo / ".anti-sprawl" / "runs").exists()
    bad = runner.invoke(app, [*base, "--plan-sha256", "abc"])
    assert bad.exit_code == 2
    assert "64 hex digits" in bad.output
    ok = runner.invoke(app, [*base, "--plan-sha256", plan_sha256(plan_file.read_bytes()).upper()])
    assert ok.exit_code == 0, ok.output


# --- the action's step ----------------------------------------------------------------------


def test_plan_approve_with_gh_posts_the_plan_runs_it_by_hash_and_opens_a_draft(
    tmp_path: Path,
) -> None:
    s = Setup(tmp_path, gh=True, partial=True)
    planned = s.event("issue_comment", comment_event("/anti-sprawl plan"))
    assert planned.returncode == 0, planned.stderr
    assert s.outputs()["command"] == "plan"
    body = sticky(s.state)
    sha, data = plan_in_comment(body) or ("", b"")
    assert sha == plan_sha256(data)
    assert b"plan_id: demo" in data
    # The label plans again: the same sticky comment is edited, not a second one posted.
    assert s.event("issues", label_event()).returncode == 0
    assert len(fake_gh.comments(s.state)) == 1

    planned_at = fx.git(s.repo, "rev-parse", "HEAD")
    (s.repo / "README.md").write_text("# demo, moved on\n")  # main moves after the plan
    env = {**os.environ, **GIT_ENV}
    subprocess.run(["git", "commit", "-qam", "later"], cwd=s.repo, env=env, check=True)

    approved = s.event("issue_comment", comment_event(f"/anti-sprawl approve {sha[:12]}"))
    assert approved.returncode == 1, approved.stderr  # a node failed: the job says so
    out = s.outputs()
    assert out["command"] == "approve"
    assert out["branch-name"] == BRANCH
    assert out["nodes-failed"] == "2"  # b failed, c skipped
    assert out["pr-url"] == fake_gh.PR_URL
    assert float(out["cost-usd"]) == 0.0
    assert s.remote_branch() == fx.git(s.repo, "rev-parse", BRANCH)
    creates = [c for c in fake_gh.calls(s.state) if c[:2] == ["pr", "create"]]
    assert len(creates) == 1
    assert creates[0][:6] == ["pr", "create", "--head", BRANCH, "--base", "main"]
    assert "--draft" in creates[0]
    # a succeeded under the sandbox, so no key reached its test command (ENV_CHECK)
    state = json.loads((s.repo / ".anti-sprawl" / "runs").glob("*/run.json").__next__().read_text())
    assert state["base"] == planned_at  # the approved plan runs where it was planned
    assert state["tasks"]["a"]["status"] == "succeeded"
    assert state["tasks"]["a"]["tests"]["exit_code"] == 0
    # the summary, the annotations, the comment, the reports
    summary = s.summary.read_text()
    assert "## anti-sprawl run" in summary
    assert "| `b` | failed |" in summary
    errors = [ln for ln in approved.stdout.splitlines() if ln.startswith("::error ")]
    assert len(errors) == 1
    assert "title=anti-sprawl node b failed" in errors[0]
    assert any(ln.startswith("::stop-commands::") for ln in approved.stdout.splitlines())
    done = sticky(s.state)
    assert plan_in_comment(done) is None
    assert f"pull request: {fake_gh.PR_URL}" in done
    assert Path(out["sarif-file"]).is_file()
    assert Path(out["junit-file"]).is_file()
    for text in (approved.stdout, approved.stderr, summary, done, s.output.read_text()):
        assert KEY not in text
        assert TOKEN not in text
    # the plan was used up: approving again finds nothing to run
    again = s.event("issue_comment", comment_event(f"/anti-sprawl approve {sha[:12]}"))
    assert again.returncode == 2
    assert "no plan to approve" in again.stderr


def test_approve_refuses_readers_other_hashes_and_edited_plans(tmp_path: Path) -> None:
    s = Setup(tmp_path, gh=True)
    assert s.event("issue_comment", comment_event("/anti-sprawl plan")).returncode == 0
    sha, data = plan_in_comment(sticky(s.state)) or ("", b"")

    reader = s.event("issue_comment", comment_event("/anti-sprawl approve", login="mallory"))
    assert reader.returncode == 2
    assert "mallory has read access" in reader.stderr
    other = s.event("issue_comment", comment_event("/anti-sprawl approve 0123456789ab"))
    assert other.returncode == 2
    assert f"the comment shows {sha[:12]}" in other.stderr
    # Someone edits the plan inside the comment (the hash marker left as it was).
    items = fake_gh.comments(s.state)
    original = items[0]["body"]
    edited = data.replace(b"Create pkg/a.py", b"Create pkg/a.py and delete everything else")
    assert edited != data
    items[0]["body"] = original.replace(
        base64.b64encode(data).decode(), base64.b64encode(edited).decode()
    )
    fake_gh.set_comments(s.state, items)
    changed = s.event("issue_comment", comment_event(f"/anti-sprawl approve {sha[:12]}"))
    assert changed.returncode == 2
    assert "no longer hashes" in changed.stderr
    # A comment by someone else holding a plan and the marker is never taken for the sticky one.
    forged = {"id": 1, "user": "mallory", "body": original}
    fake_gh.set_comments(s.state, [forged])
    assert (
        "no plan to approve"
        in s.event("issue_comment", comment_event(f"/anti-sprawl approve {sha[:12]}")).stderr
    )
    for refused in (reader, other, changed):
        assert "Traceback" not in refused.stderr
    assert not (s.repo / ".anti-sprawl" / "runs").exists()
    assert s.remote_branch() is None
    assert not [c for c in fake_gh.calls(s.state) if c[:2] == ["pr", "create"]]


def test_cancel_drops_the_plan_and_other_comments_do_nothing(tmp_path: Path) -> None:
    s = Setup(tmp_path, gh=True)
    assert s.event("issue_comment", comment_event("/anti-sprawl plan")).returncode == 0
    cancelled = s.event("issue_comment", comment_event("/anti-sprawl cancel"))
    assert cancelled.returncode == 0, cancelled.stderr
    body = sticky(s.state)
    assert plan_in_comment(body) is None
    assert "plan cancelled by alice" in body
    assert (
        "no plan to approve"
        in s.event("issue_comment", comment_event("/anti-sprawl approve")).stderr
    )
    before = len(fake_gh.calls(s.state))
    for payload in (
        comment_event("looks good"),
        comment_event("/anti-sprawl dance"),
        label_event("bug"),
    ):
        name = "issues" if "label" in payload else "issue_comment"
        assert s.event(name, payload).returncode == 0
        assert s.outputs() == {"command": "none"}
    assert len(fake_gh.calls(s.state)) == before


def test_without_gh_the_comment_is_a_file_and_the_cli_steps_still_push(tmp_path: Path) -> None:
    s = Setup(tmp_path, gh=False, partial=True)
    planned = s.event("issues", label_event())
    assert planned.returncode == 0, planned.stderr
    comment = (s.work / "comment.md").read_text()
    sha, data = plan_in_comment(comment) or ("", b"")
    assert sha == plan_sha256(data)
    assert s.outputs()["plan-file"].endswith(f"plan-issue-{ISSUE}.yaml")
    approve = s.event("issue_comment", comment_event("/anti-sprawl approve"))
    assert approve.returncode == 2
    assert "gh (the GitHub CLI) is not on PATH" in approve.stderr
    # What approve runs after its checks, step by step: execute by hash, then pr.
    plan_file = Path(s.outputs().get("plan-file", s.work / f"plan-issue-{ISSUE}.yaml"))
    plan_file.write_bytes(data)
    base = [sys.executable, "-m", "anti_sprawl"]
    run = subprocess.run(
        [
            *base,
            "execute",
            str(plan_file),
            "--repo",
            str(s.repo),
            "--script",
            str(s.script),
            "--plan-sha256",
            sha,
            "--branch",
            BRANCH,
            "--json",
        ],
        env=s.env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert run.returncode == 1, run.stderr
    run_id = json.loads(run.stdout)["run_id"]
    pr = subprocess.run(
        [*base, "pr", run_id, "--repo", str(s.repo), "--open", "--allow-partial"],
        env=s.env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert pr.returncode == 1  # asked to open one, and gh is not there
    assert "gh (the GitHub CLI) is not installed" in pr.stdout
    assert "--draft" in pr.stdout
    assert s.remote_branch() == fx.git(s.repo, "rev-parse", BRANCH)
    summary = subprocess.run(
        [*base, "github", "summary", run_id, "--repo", str(s.repo)],
        env={**s.env, "GITHUB_STEP_SUMMARY": ""},
        capture_output=True,
        text=True,
        check=False,
    )
    assert summary.returncode == 0, summary.stderr
    assert summary.stdout.startswith("::error file=pkg/b.py,title=anti-sprawl node b failed::")
    assert "::warning file=pkg/c.py,title=anti-sprawl node c skipped::" in summary.stdout
    assert f"## anti-sprawl run `{run_id}`: failed" in summary.stdout


def test_a_missing_event_is_one_line(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["github", "event", "--repo", str(tmp_path)], env={"GITHUB_EVENT_NAME": ""}
    )
    assert result.exit_code == 2
    assert result.output.strip() == (
        "anti-sprawl: error: no event: pass --event-name and --event-path (or run in GitHub "
        "Actions)"
    )


@pytest.mark.parametrize("env_name", ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GH_TOKEN"])
def test_the_command_environment_never_holds_a_key(env_name: str) -> None:
    """sandbox/user_env.py and sandbox/sandbox.py build a command's environment from an
    allow-list: a key in this process's environment is not in it, even when asked for."""
    environ = {**os.environ, env_name: KEY, "MY_SETTING": "1"}
    base = user_command_env(environ, ["MY_SETTING", env_name])
    env = sandbox_env(base, allow=["MY_SETTING", env_name])
    assert env["MY_SETTING"] == "1"  # an allowed name passes: the check sees what it builds
    assert env_name not in env
    assert KEY not in env.values()
