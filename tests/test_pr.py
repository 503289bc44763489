"""``anti-sprawl pr`` end to end: real runs, a real bare repository as the remote, real gh stand-ins."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from anti_sprawl.cli.app import app
from anti_sprawl.cli.pr import pr_title
from anti_sprawl.run.journal import RepoLock

from . import e2e_fixture as fx

runner = CliRunner()
BRANCH = "anti-sprawl/demo"
TITLE = "Add modules a, b and c"
JSON_KEYS = {"run_id", "branch", "remote", "pushed", "pr_body", "report", "opened", "command"}


pytestmark = pytest.mark.usefixtures("python_on_path")


def invoke(*args: str) -> Result:
    result = runner.invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    return result


def one_error_line(result: Result) -> str:
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert lines[0].startswith("anti-sprawl: error: ")
    return lines[0]


def executed(
    tmp_path: Path, plan: dict[str, Any] | None = None, script: dict[str, Any] | None = None
) -> tuple[Path, str, str]:
    """A repo after `execute` of the fixture plan: (repo, run_id, run status)."""
    repo = fx.make_repo(tmp_path)
    plan_path, script_path = fx.write_inputs(tmp_path, plan or fx.plan(), script or fx.script())
    args = ["execute", str(plan_path), "--repo", str(repo), "--script", str(script_path), "--json"]
    state = json.loads(runner.invoke(app, args).stdout)
    return repo, state["run_id"], state["status"]


def bare_remote(tmp_path: Path, repo: Path, name: str = "origin") -> Path:
    bare = tmp_path / f"{name}.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    fx.git(repo, "remote", "add", name, str(bare))
    return bare


def remote_ref(bare: Path, branch: str = BRANCH) -> str | None:
    proc = subprocess.run(
        ["git", f"--git-dir={bare}", "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"],
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.stdout.strip() if proc.returncode == 0 else None


def pr_md(repo: Path, run_id: str) -> Path:
    return repo / ".anti-sprawl" / "runs" / run_id / "PR.md"


def gh_argv(repo: Path, run_id: str, base: str = "main") -> list[str]:
    body = str(pr_md(repo, run_id))
    return [
        "gh",
        "pr",
        "create",
        "--head",
        BRANCH,
        "--base",
        base,
        "--title",
        TITLE,
        "--body-file",
        body,
    ]


def only_git_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PATH holding git alone (so no gh); returns the directory for gh stand-ins."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    git = shutil.which("git")
    assert git is not None
    (bindir / "git").symlink_to(git)
    monkeypatch.setenv("PATH", str(bindir))
    return bindir


def fake_gh(bindir: Path, log: Path, auth_exit: int) -> None:
    """A gh stand-in: logs each call's argv (one per line) and answers like gh would."""
    script = bindir / "gh"
    lines = [
        "#!/bin/sh",
        f"printf '%s\\n' \"$@\" >> '{log}'",
        f"printf -- '---\\n' >> '{log}'",
        f'if [ "$1" = auth ]; then exit {auth_exit}; fi',
        "echo https://example.invalid/o/r/pull/7",
    ]
    script.write_text("\n".join(lines) + "\n")
    script.chmod(0o755)


def test_pr_pushes_the_run_branch_and_leaves_the_checkout_alone(tmp_path: Path) -> None:
    repo, run_id, status = executed(tmp_path)
    assert status == "succeeded"
    bare = bare_remote(tmp_path, repo)
    pr_md(repo, run_id).unlink()  # pr rewrites it from the journal
    before = fx.checkout_fingerprint(repo)
    result = invoke("pr", run_id, "--repo", str(repo), "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert set(doc) == JSON_KEYS
    assert doc["run_id"] == run_id
    assert doc["branch"] == BRANCH
    assert doc["remote"] == "origin"
    assert doc["pushed"] is True
    assert doc["opened"] is False
    assert doc["command"] == gh_argv(repo, run_id)  # the command the text output prints
    assert remote_ref(bare) == fx.git(repo, "rev-parse", BRANCH)
    body = Path(doc["pr_body"]).read_text()
    assert Path(doc["pr_body"]) == pr_md(repo, run_id)
    assert "```mermaid" in body
    assert "flowchart TD" in body
    assert "| `c` |" in body
    assert "Partial run" not in body
    assert fx.checkout_fingerprint(repo) == before
    assert remote_ref(bare, "main") is None  # only the run branch is pushed

    # A second push is a no-op that still succeeds; people get the gh command to open the PR.
    again = invoke("pr", run_id, "--repo", str(repo))
    assert again.exit_code == 0, again.output
    assert f"pushed {BRANCH} (" in again.output
    assert "to origin" in again.output
    assert shlex.join(gh_argv(repo, run_id)) in again.output.replace("\n", "")
    assert fx.checkout_fingerprint(repo) == before


def test_unknown_remote_is_a_usage_error_listing_the_remotes(tmp_path: Path) -> None:
    repo, run_id, _ = executed(tmp_path)
    none = invoke("pr", run_id, "--repo", str(repo))
    assert none.exit_code == 2
    assert "no remote 'origin'" in one_error_line(none)
    assert "git remote add" in none.output
    bare = bare_remote(tmp_path, repo)
    fx.git(repo, "remote", "add", "backup", str(tmp_path / "elsewhere.git"))
    result = invoke("pr", run_id, "--repo", str(repo), "--remote", "upstream")
    assert result.exit_code == 2
    line = one_error_line(result)
    assert "'upstream'" in line
    assert "remotes: backup, origin" in line
    assert remote_ref(bare) is None


def test_failed_run_is_refused_unless_partial_is_allowed(tmp_path: Path) -> None:
    script = fx.script(a=[{"tool": "read_file", "args": {"path": "pkg/base.py"}}])
    repo, run_id, status = executed(tmp_path, script=script)
    assert status == "failed"
    bare = bare_remote(tmp_path, repo)
    refused = invoke("pr", run_id, "--repo", str(repo))
    assert refused.exit_code == 1
    line = one_error_line(refused)
    assert "did not succeed" in line
    assert "--allow-partial" in line
    assert remote_ref(bare) is None

    partial = invoke("pr", run_id, "--repo", str(repo), "--allow-partial", "--json")
    assert partial.exit_code == 0, partial.output
    assert remote_ref(bare) == fx.git(repo, "rev-parse", BRANCH)
    body = pr_md(repo, run_id).read_text()
    assert body.startswith(f"# {TITLE}\n\n> **Partial run (failed)**")
    assert "> - failed: `a` (script" in body
    assert "> - skipped: `c` (because `a` failed)" in body
    assert "failed: `b`" not in body


def test_a_run_still_marked_running_needs_partial_and_a_free_lock(tmp_path: Path) -> None:
    repo, run_id, _ = executed(tmp_path)
    bare = bare_remote(tmp_path, repo)
    journal = repo / ".anti-sprawl" / "runs" / run_id / "run.json"
    state = json.loads(journal.read_text())
    state["status"] = "running"  # as a killed run leaves it
    journal.write_text(json.dumps(state))
    assert invoke("pr", run_id, "--repo", str(repo)).exit_code == 1
    lock = RepoLock(repo)
    lock.acquire("live-run-42")
    try:
        live = invoke("pr", run_id, "--repo", str(repo), "--allow-partial")
    finally:
        lock.release()
    assert live.exit_code == 2
    assert "live-run-42" in one_error_line(live)
    assert remote_ref(bare) is None
    dead = invoke("pr", run_id, "--repo", str(repo), "--allow-partial")
    assert dead.exit_code == 0, dead.output
    assert remote_ref(bare) == fx.git(repo, "rev-parse", BRANCH)


def test_open_without_gh_prints_the_exact_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, run_id, _ = executed(tmp_path)
    bare = bare_remote(tmp_path, repo)
    only_git_on_path(tmp_path, monkeypatch)
    result = invoke("pr", run_id, "--repo", str(repo), "--open", "--json")
    assert result.exit_code == 1, result.output  # pushed, but no PR opened
    doc = json.loads(result.stdout)
    assert doc["opened"] is False
    assert doc["pushed"] is True
    assert doc["command"] == gh_argv(repo, run_id)
    assert remote_ref(bare) == fx.git(repo, "rev-parse", BRANCH)

    human = invoke("pr", run_id, "--repo", str(repo), "--open")
    assert human.exit_code == 1, human.output
    flat = human.output.replace("\n", "")
    assert "gh (the GitHub CLI) is not installed" in flat
    assert shlex.join(gh_argv(repo, run_id)) in flat
    assert "other hosts" in flat


def test_open_with_a_logged_in_gh_creates_the_pr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, run_id, _ = executed(tmp_path)
    bare_remote(tmp_path, repo)
    log = tmp_path / "gh.log"
    fake_gh(only_git_on_path(tmp_path, monkeypatch), log, auth_exit=0)
    result = invoke("pr", run_id, "--repo", str(repo), "--open", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["opened"] is True
    assert doc["command"] == gh_argv(repo, run_id)
    calls = [c.strip().splitlines() for c in log.read_text().split("---") if c.strip()]
    assert calls == [["auth", "status"], gh_argv(repo, run_id)[1:]]

    human = invoke("pr", run_id, "--repo", str(repo), "--open")
    assert "opened pull request: https://example.invalid/o/r/pull/7" in human.output


def test_open_with_a_logged_out_gh_prints_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, run_id, _ = executed(tmp_path)
    bare_remote(tmp_path, repo)
    log = tmp_path / "gh.log"
    fake_gh(only_git_on_path(tmp_path, monkeypatch), log, auth_exit=1)
    result = invoke("pr", run_id, "--repo", str(repo), "--open")
    assert result.exit_code == 1, result.output  # asked to open one; none was opened
    assert "gh is not logged in" in result.output
    assert shlex.join(gh_argv(repo, run_id)) in result.output.replace("\n", "")
    assert "create" not in log.read_text()  # never tried to open the PR


def test_push_failures_are_run_errors_with_gits_words(tmp_path: Path) -> None:
    repo, run_id, _ = executed(tmp_path)
    bare = bare_remote(tmp_path, repo)
    # Someone else's unrelated commit already sits at the branch name on the remote.
    tree = fx.git(repo, "rev-parse", "main^{tree}")
    other = subprocess.run(
        ["git", "commit-tree", tree, "-m", "unrelated"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **fx.GIT_ENV},
    ).stdout.strip()
    fx.git(repo, "push", "-q", "origin", f"{other}:refs/heads/{BRANCH}")
    rejected = invoke("pr", run_id, "--repo", str(repo))
    assert rejected.exit_code == 1
    line = one_error_line(rejected)
    assert f"pushing {BRANCH} to origin failed" in line
    assert "rejected" in line
    assert "hint:" not in line
    assert remote_ref(bare) == other

    fx.git(repo, "remote", "add", "gone", str(tmp_path / "missing" / "repo.git"))
    unreachable = invoke("pr", run_id, "--repo", str(repo), "--remote", "gone")
    assert unreachable.exit_code == 1
    assert "does not appear to be a git repository" in one_error_line(unreachable)


def test_base_branch_is_where_the_run_started_unless_overridden(tmp_path: Path) -> None:
    repo, run_id, _ = executed(tmp_path)
    bare_remote(tmp_path, repo)
    # The user moved on to a feature branch with its own commit; main still holds the base.
    fx.git(repo, "checkout", "-q", "-b", "feature")
    (repo / "notes.txt").write_text("later\n")
    fx.git(repo, "add", "notes.txt")
    subprocess.run(
        ["git", "commit", "-q", "-m", "later"],
        cwd=repo,
        check=True,
        env={**os.environ, **fx.GIT_ENV},
    )
    doc = json.loads(invoke("pr", run_id, "--repo", str(repo), "--open", "--json").stdout)
    assert doc["command"] == gh_argv(repo, run_id, base="main")
    override = invoke(
        "pr", run_id, "--repo", str(repo), "--open", "--json", "--base-branch", "release"
    )
    assert json.loads(override.stdout)["command"] == gh_argv(repo, run_id, base="release")


def test_unknown_run_missing_repo_and_lost_branch(tmp_path: Path) -> None:
    repo, run_id, _ = executed(tmp_path)
    bare_remote(tmp_path, repo)
    unknown = invoke("pr", "no-such-run", "--repo", str(repo))
    assert unknown.exit_code == 2
    assert "no run 'no-such-run'" in one_error_line(unknown)
    missing = invoke("pr", run_id, "--repo", str(tmp_path / "nope"))
    assert missing.exit_code == 2
    assert "repository not found" in one_error_line(missing)
    fx.git(repo, "branch", "-D", BRANCH)
    lost = invoke("pr", run_id, "--repo", str(repo))
    assert lost.exit_code == 2
    assert "no longer exists" in one_error_line(lost)


def test_pr_title_is_the_first_line_cut_at_a_word_boundary() -> None:
    assert pr_title("\n  Add a bus  \nmore detail", "plan") == "Add a bus"
    long = pr_title("word " * 40, "plan")
    assert len(long) <= 72
    assert long.endswith("word…")
    assert long.startswith("word word")
    req = (
        "Publish an OrderCreated event on an in-process bus instead of calling notifications "
        "synchronously"
    )
    title = pr_title(req, "plan")
    assert title == "Publish an OrderCreated event on an in-process bus instead of calling…"
    assert len(title) <= 72
    assert pr_title("x" * 100, "plan") == "x" * 71 + "…"  # no space to cut at
    assert pr_title("   \n", "fallback-id") == "fallback-id"


def test_pr_output_keeps_the_body_path_on_one_line() -> None:
    from io import StringIO

    from rich.console import Console

    from anti_sprawl.cli.pr import PrOutcome, render_outcome

    path = "/home/someone/projects/a-rather-long-repository-name/.anti-sprawl/runs/" + (
        "order-events-20261130-175654-452f/PR.md"
    )
    outcome = PrOutcome(
        run_id="r",
        branch="anti-sprawl/order-events",
        remote="origin",
        pushed=True,
        pr_body=path,
        opened=False,
        command=["gh", "pr", "create"],
        tip="0" * 40,
        gh_argv=["gh", "pr", "create", "--body-file", path],
    )
    out = StringIO()
    render_outcome(outcome, Console(file=out, width=80))
    assert f"PR body: {path}" in out.getvalue().splitlines()
