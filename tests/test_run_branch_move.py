"""The run branch's memory follows the moves the run makes itself.

``RunBranch`` remembers the tip it last read or wrote and the tasks landed as of that tip
(issue 29), and its landing's compare-and-swap expects that tip. The integration check's
rebuild (run/rebuild.py) moves the branch with ``RunBranch.move``: what follows (the dropped
nodes' new worktrees, their landings) must see the rebuilt branch, not the one it replaced.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from anti_sprawl.git.branch import TRAILER_RUN, TRAILER_TASK, RunBranch
from anti_sprawl.git.cmd import GitError

_IDENTITY = ("-c", "user.name=t", "-c", "user.email=t@t")


def _git(repo: Path, *args: str) -> str:
    env = {"PATH": "/usr/bin:/bin:/usr/local/bin", "HOME": str(repo.parent)}
    done = subprocess.run(["git", "-C", str(repo), *args], check=True, env=env, capture_output=True)
    return done.stdout.decode().strip()


def _node_commit(repo: Path, parent: str, task: str, name: str) -> str:
    """A commit on ``parent`` adding file ``name``, with ``task``'s trailers."""
    blob = subprocess.run(
        ["git", "-C", str(repo), "hash-object", "-w", "--stdin"],
        input=task.encode(),
        check=True,
        capture_output=True,
    ).stdout.decode()
    _git(repo, "read-tree", parent)
    _git(repo, "update-index", "--add", "--cacheinfo", f"100644,{blob.strip()},{name}")
    tree = _git(repo, "write-tree")
    message = f"node {task}\n\n{TRAILER_RUN}: r1\n{TRAILER_TASK}: {task}\n"
    return _git(repo, *_IDENTITY, "commit-tree", tree, "-p", parent, "-m", message)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("hi\n")
    _git(repo, "add", "README.md")
    _git(repo, *_IDENTITY, "commit", "-q", "-m", "init")
    return repo


def test_a_landing_after_a_move_lands_on_the_moved_tip(repo: Path) -> None:
    base = _git(repo, "rev-parse", "HEAD")
    branch = RunBranch(repo, "anti-sprawl/p", "r1")
    branch.create(base)
    first = branch.land(_node_commit(repo, base, "a", "a.txt"), "a", base)
    second = branch.land(_node_commit(repo, first, "b", "b.txt"), "b", first)
    assert branch.tip() == second
    branch.move(first, second)  # the rebuild drops b
    assert branch.tip() == first
    assert _git(repo, "rev-parse", "refs/heads/anti-sprawl/p") == first
    # b runs again on the rebuilt branch: it is not landed any more, and its landing's
    # compare-and-swap expects the moved tip.
    again = branch.land(_node_commit(repo, first, "b", "b2.txt"), "b", first)
    assert again != second
    assert branch.tip() == again == _git(repo, "rev-parse", "refs/heads/anti-sprawl/p")
    assert branch.landed_tasks() == {"a": 1, "b": 1}


def test_a_failed_move_forgets_what_it_remembered(repo: Path) -> None:
    base = _git(repo, "rev-parse", "HEAD")
    branch = RunBranch(repo, "anti-sprawl/p", "r1")
    branch.create(base)
    first = branch.land(_node_commit(repo, base, "a", "a.txt"), "a", base)
    outside = _node_commit(repo, first, "x", "x.txt")
    _git(repo, "update-ref", "refs/heads/anti-sprawl/p", outside)  # moved outside the run
    with pytest.raises(GitError):
        branch.move(base, first)  # its compare-and-swap fails: nothing moves
    assert branch.tip() == outside  # read again from git, not the stale memory
