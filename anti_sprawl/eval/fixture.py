"""A case's fixture as a fresh git repository, and read-only looks at the run's result branch."""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import UsageError
from ..git.cmd import run_git
from ..ids import STATE_DIR_NAME

__all__ = ["branch_checkout", "changed_files", "commit_log", "make_fixture_repo"]

# Build litter of the fixture folder itself; never part of a case.
_IGNORED = shutil.ignore_patterns("__pycache__", ".pytest_cache", STATE_DIR_NAME, ".git")


def _copy_regular(src: str, dst: str) -> object:
    # A FIFO or device in a case's fixture would hang or read the host's device: refuse it.
    if not stat.S_ISREG(os.lstat(src).st_mode):
        raise UsageError(f"fixture {src}: not a regular file, folder or symlink")
    return shutil.copy2(src, dst)


def make_fixture_repo(fixture: Path, repo: Path, message: str) -> str:
    """Copy ``fixture`` to ``repo`` (symlinks kept as links), commit it; returns the commit."""
    shutil.copytree(fixture, repo, symlinks=True, ignore=_IGNORED, copy_function=_copy_regular)
    run_git(["init", "-q", "-b", "main"], repo)
    run_git(["add", "-A"], repo)
    run_git(["commit", "-q", "--no-verify", "-m", message], repo)
    return run_git(["rev-parse", "HEAD"], repo).stdout.decode().strip()


def branch_exists(repo: Path, branch: str) -> bool:
    ref = f"refs/heads/{branch}"
    return run_git(["rev-parse", "--verify", "--quiet", ref], repo, check=False).returncode == 0


def changed_files(repo: Path, base: str, branch: str) -> list[str]:
    """Paths that differ between ``base`` and ``branch`` (renames as delete + add)."""
    if not branch_exists(repo, branch):
        return []
    out = run_git(["diff", "--name-only", "-z", "--no-renames", base, branch], repo).stdout
    return sorted(p.decode("utf-8", "surrogateescape") for p in out.split(b"\0") if p)


def commit_log(repo: Path, base: str, branch: str) -> str:
    """``git log -p base..branch``: every commit on the branch with its patch."""
    if not branch_exists(repo, branch):
        return ""
    args = ["log", "-p", "--no-ext-diff", "--no-textconv", "--binary", f"{base}..{branch}"]
    return run_git(args, repo).stdout.decode("utf-8", "replace")


def git_status(repo: Path) -> str:
    """The user's checkout as ``git status --porcelain`` (run data is excluded by execute)."""
    out = run_git(["status", "--porcelain", "--untracked-files=all"], repo).stdout
    return out.decode("utf-8", "replace").strip()


@contextmanager
def branch_checkout(repo: Path, branch: str, where: Path) -> Iterator[Path]:
    """A temporary detached worktree of ``branch`` at ``where``; removed afterwards."""
    run_git(["worktree", "add", "--quiet", "--detach", str(where), branch], repo)
    try:
        yield where
    finally:
        run_git(["worktree", "remove", "--force", str(where)], repo, check=False)
        run_git(["worktree", "prune"], repo, check=False)
