"""Reading a repository never runs its configured commands nor follows a caller's GIT_* variables.

Every git call goes through ``git.cmd.run_git`` (docs/security.md, P7). These are the two
properties a library that inspects repositories its own way would lose (GitPython runs
``core.fsmonitor`` in its dirty check and passes the inherited environment to git;
``benchmarks/gitpython_inspection.py`` shows both), so they are checked here on the
functions that inspect the user's repository: the dirty check, the repository check, the
base branch for ``pr``, the checked-out test and the run branch's trailers.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from anti_sprawl.cli.pr import base_branch_of
from anti_sprawl.git.branch import TRAILER_RUN, TRAILER_TASK, RunBranch, checked_out_in
from anti_sprawl.run.preflight import check_repo, uncommitted_changes


def _git(repo: Path, *args: str) -> str:
    env = {"PATH": "/usr/bin:/bin:/usr/local/bin", "HOME": str(repo.parent)}
    done = subprocess.run(["git", "-C", str(repo), *args], check=True, env=env, capture_output=True)
    return done.stdout.decode().strip()


def _with_run_branch(repo: Path) -> str:
    """A run branch ``anti-sprawl/p`` with one node commit; returns the base commit."""
    base = _git(repo, "rev-parse", "HEAD")
    _git(repo, "branch", "anti-sprawl/p")
    tree = _git(repo, "rev-parse", "HEAD^{tree}")
    message = f"node a\n\n{TRAILER_RUN}: r1\n{TRAILER_TASK}: a\n"
    identity = ("-c", "user.name=t", "-c", "user.email=t@t")
    commit = _git(repo, *identity, "commit-tree", tree, "-p", base, "-m", message)
    _git(repo, "update-ref", "refs/heads/anti-sprawl/p", commit)
    return base


def _inspect(repo: Path, base: str) -> tuple[int, Path, str | None, Path | None, dict[str, int]]:
    return (
        uncommitted_changes(repo),
        check_repo(repo),
        base_branch_of(repo, base, "anti-sprawl/p"),
        checked_out_in(repo, "main"),
        RunBranch(repo, "anti-sprawl/p", "r1").landed_tasks(),
    )


def test_inspection_never_runs_commands_the_repository_configures(
    make_repo: Callable[..., Path], tmp_path: Path
) -> None:
    repo = make_repo({"src/app.py": "x = 1\n"})
    base = _with_run_branch(repo)
    marker = tmp_path / "ran"
    # core.fsmonitor is a command git runs to refresh the index; the hooks run when it does.
    _git(repo, "config", "core.fsmonitor", f"touch {marker}-fsmonitor; false")
    hooks = repo / ".git" / "hooks"
    for name in ("post-index-change", "post-checkout", "reference-transaction"):
        hook = hooks / name
        hook.write_text(f"#!/bin/sh\ntouch {marker}-{name}\n")
        hook.chmod(0o755)
    (repo / "src" / "app.py").write_text("x = 2\n")  # a dirty file: the index gets refreshed

    changed, top, base_branch, where, landed = _inspect(repo, base)

    assert (changed, top, base_branch, where, landed) == (1, repo.resolve(), "main", repo, {"a": 1})
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("ran")) == []
    # the probe is real: git run plainly does run the configured command
    subprocess.run(["git", "-C", str(repo), "status", "--porcelain"], capture_output=True)
    assert Path(f"{marker}-fsmonitor").exists()


def test_inspection_ignores_git_variables_inherited_from_a_calling_hook(
    make_repo: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo({"src/app.py": "x = 1\n"})
    base = _with_run_branch(repo)
    other = make_repo({"elsewhere.py": "y = 1\n"}, name="other")
    (other / "stray.txt").write_text("untracked in the other repository\n")
    _git(other, "checkout", "-q", "-b", "feature")
    # What git exports to a hook; anti-sprawl started from one must still see its --repo.
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(other))
    monkeypatch.setenv("GIT_INDEX_FILE", str(other / ".git" / "index"))

    changed, top, base_branch, where, landed = _inspect(repo, base)

    assert (changed, top, base_branch, where, landed) == (0, repo.resolve(), "main", repo, {"a": 1})
