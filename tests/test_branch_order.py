"""The run branch put back in the plan's order (git/reorder.py), on real repositories.

Nodes land as they finish, so a branch can hold its unordered nodes' commits in any order;
``reorder`` rewrites them into the order asked for, with each commit's change, message,
author and committer kept, the same final tree, and the branch moved by one compare-and-
swap. Commits already in place are kept as they are. Two nodes that changed the same path
never trade places: the branch stays as it was. The end-to-end checks (the blame and the
branch the same whichever node finished first, a kill mid-reorder) are in
tests/test_integration.py.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from anti_sprawl.git.branch import TRAILER_RUN, TRAILER_TASK, RunBranch
from anti_sprawl.git.reorder import OrderKept, reorder, scratch_ref

_ENV = {
    "PATH": "/usr/bin:/bin:/usr/local/bin",
    "GIT_AUTHOR_NAME": "Ada",
    "GIT_AUTHOR_EMAIL": "ada@example.org",
    "GIT_COMMITTER_NAME": "anti-sprawl",
    "GIT_COMMITTER_EMAIL": "anti-sprawl@localhost",
}
Change = str | None | tuple[str, str]  # content, a deletion, or (mode, content)


def _git(repo: Path, *args: str, data: bytes | None = None, **env: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args],
        input=data,
        check=True,
        env={**_ENV, "HOME": str(repo.parent), **env},
        capture_output=True,
    )
    return done.stdout.decode().strip()


def _commit(repo: Path, parent: str, task: str, changes: dict[str, Change], when: int) -> str:
    """A node commit on ``parent`` with ``changes``, made with a private index."""
    index = {"GIT_INDEX_FILE": str(repo.parent / f"index-{task}")}
    _git(repo, "read-tree", parent, **index)
    for path, change in changes.items():
        if change is None:
            _git(repo, "update-index", "--force-remove", "--", path, **index)
            continue
        mode, text = change if isinstance(change, tuple) else ("100644", change)
        blob = _git(repo, "hash-object", "-w", "--stdin", data=text.encode())
        _git(repo, "update-index", "--add", "--cacheinfo", f"{mode},{blob},{path}", **index)
    tree = _git(repo, "write-tree", **index)
    message = f"node {task}\n\nbody of {task}\n\n{TRAILER_RUN}: r1\n{TRAILER_TASK}: {task}\n"
    dates = {"GIT_AUTHOR_DATE": f"{when} +0100", "GIT_COMMITTER_DATE": f"{when + 7} +0000"}
    return _git(repo, "commit-tree", tree, "-p", parent, "-m", message, **dates)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("hi\n")
    (repo / "old").write_text("a file that becomes a directory\n")
    (repo / "gone.txt").write_text("deleted by c\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "init")
    return repo


def _order(repo: Path, branch: RunBranch, base: str) -> list[str]:
    fmt = f"--format=%(trailers:key={TRAILER_TASK},valueonly)"
    text = _git(repo, "log", "--reverse", fmt, f"{base}..{branch.ref}")
    return [line.strip() for line in text.splitlines() if line.strip()]


def _facts(repo: Path, sha: str) -> tuple[str, str]:
    """A commit's author, committer and message, and its change against its parent."""
    meta = _git(repo, "log", "-1", "--format=%an <%ae> %ad|%cn <%ce> %cd|%B", "--date=raw", sha)
    change = _git(repo, "diff-tree", "-r", "--no-commit-id", "--raw", "--no-renames", sha)
    return meta, change


CHANGES: dict[str, dict[str, Change]] = {
    "a": {"a.txt": "a\n", 'we"ird\\ na\tme é.txt': "odd\n"},
    "b": {"old": None, "old/inner.txt": "now a directory\n", "run.sh": ("100755", "echo\n")},
    "c": {"gone.txt": None, "link": ("120000", "README.md")},
    "d": {"d.txt": "d\n"},
}


def _landed(repo: Path, order: list[str]) -> tuple[RunBranch, str, dict[str, str]]:
    """The nodes' commits (each made on the base, as unordered nodes are) landed in ``order``."""
    base = _git(repo, "rev-parse", "HEAD")
    branch = RunBranch(repo, "anti-sprawl/p", "r1")
    branch.create(base)
    made = {t: _commit(repo, base, t, CHANGES[t], 1_800_000_000 + i) for i, t in enumerate(order)}
    landed = {t: branch.land(made[t], t, base) for t in order}
    return branch, base, landed


def test_commits_are_put_in_order_with_their_changes_and_the_same_tree(repo: Path) -> None:
    branch, base, landed = _landed(repo, ["a", "d", "c", "b"])
    old_tip = branch.tip()
    old_tree = _git(repo, "rev-parse", f"{old_tip}^{{tree}}")
    before = {t: _facts(repo, sha) for t, sha in landed.items()}
    done = reorder(branch, base, ["a", "b", "c", "d"])
    assert _order(repo, branch, base) == ["a", "b", "c", "d"]
    assert done.tip == branch.tip() == _git(repo, "rev-parse", branch.ref)
    assert _git(repo, "rev-parse", f"{done.tip}^{{tree}}") == old_tree
    # a was in place: kept as it was; the others are new commits with the same facts
    assert set(done.moved) == {"b", "c", "d"}
    assert branch.task_commits() == {**landed, **done.moved}
    for task, sha in done.moved.items():
        assert sha != landed[task]
        assert _facts(repo, sha) == before[task]
    assert _git(repo, "for-each-ref", scratch_ref(branch.name)) == ""  # deleted with the move
    subprocess.run(["git", "-C", str(repo), "fsck", "--no-progress"], check=True)
    # in order already: nothing moves
    again = reorder(branch, base, ["a", "b", "c", "d"])
    assert (again.tip, again.moved) == (done.tip, {})


def test_two_nodes_that_changed_one_path_keep_their_order(repo: Path) -> None:
    """b and a both edit notes.txt (different lines: the landing's merge took both), so
    putting b first would change what a's commit does: the branch stays as it landed."""
    base = _git(repo, "rev-parse", "HEAD")
    branch = RunBranch(repo, "anti-sprawl/p", "r1")
    branch.create(base)
    lines = [f"line {i}\n" for i in range(12)]
    shared = _commit(repo, base, "s", {"notes.txt": "".join(lines)}, 1_800_000_000)
    branch.land(shared, "s", base)
    first = lines.copy()
    first[0] = "a's line\n"
    second = lines.copy()
    second[-1] = "b's line\n"
    branch.land(
        _commit(repo, shared, "b", {"notes.txt": "".join(second)}, 1_800_000_001), "b", shared
    )
    branch.land(
        _commit(repo, shared, "a", {"notes.txt": "".join(first)}, 1_800_000_002), "a", shared
    )
    tip = branch.tip()
    with pytest.raises(OrderKept, match=r"b and a both changed notes\.txt"):
        reorder(branch, base, ["s", "a", "b"])
    assert branch.tip() == tip == _git(repo, "rev-parse", branch.ref)
    assert _order(repo, branch, base) == ["s", "b", "a"]


def test_a_commit_of_no_node_keeps_the_order(repo: Path) -> None:
    branch, base, _ = _landed(repo, ["b", "a"])
    tip = branch.tip()
    outside = _git(repo, "commit-tree", f"{tip}^{{tree}}", "-p", tip, "-m", "by hand")
    branch.move(outside, tip)
    with pytest.raises(OrderKept, match="not one node's"):
        reorder(branch, base, ["a", "b"])
    assert branch.tip() == outside


def test_a_crash_before_the_move_leaves_the_branch_as_it_was(repo: Path) -> None:
    branch, base, _ = _landed(repo, ["b", "a"])
    tip = branch.tip()

    class Killed(Exception):
        pass

    def crash() -> None:
        raise Killed

    with pytest.raises(Killed):
        reorder(branch, base, ["a", "b"], before_move=crash)
    assert _git(repo, "rev-parse", branch.ref) == tip  # nothing lost: the old tip stays
    assert _order(repo, branch, base) == ["b", "a"]
    assert _git(repo, "for-each-ref", "--format=%(refname)", scratch_ref(branch.name))
    done = reorder(RunBranch(repo, "anti-sprawl/p", "r1"), base, ["a", "b"])  # the next try
    assert _order(repo, branch, base) == ["a", "b"]
    assert _git(repo, "rev-parse", branch.ref) == done.tip
    assert _git(repo, "for-each-ref", scratch_ref(branch.name)) == ""
