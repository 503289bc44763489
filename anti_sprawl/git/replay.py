"""Re-landing node commits on a new tip, in memory: what rebuilding the run branch is made of.

When the integration check blames a node (run/integration.py), the run branch is rebuilt
without it: the nodes after it are replayed, in order, onto the commit before it. A replay is
a cherry-pick: the three-way merge of the new tip and the commit with *the commit's own
parent* as the base. ``git merge-tree --merge-base`` says that directly from git 2.40 on;
for older gits (Debian's 2.39) the base is made explicit instead: two parentless stand-ins
(the new tip's tree and the commit's tree) over one shared parent holding the old parent's
tree, whose only merge base is then that parent. No working tree, no index, no user
checkout: objects only, like landing (git/branch.py). Nodes the DAG leaves unordered have
disjoint write scopes, so a replay conflicts only when a dropped node's change was under a
later one; that is reported as a ``LandingConflict``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .branch import TRAILER_RUN, TRAILER_TASK, LandingConflict
from .cmd import GitError, run_git

__all__ = ["NodeCommit", "node_commits", "replay"]


@dataclass(frozen=True)
class NodeCommit:
    """One commit of the run branch, oldest first: its id and the node its trailer names."""

    sha: str
    task_id: str


def _out(repo: Path, args: list[str], data: bytes | None = None) -> str:
    proc = run_git(args, repo, input_bytes=data)
    return proc.stdout.decode("utf-8", "surrogateescape").strip()


def node_commits(repo: Path, base: str, tip: str, run_id: str) -> list[NodeCommit]:
    """The first-parent commits from ``base`` (excluded) to ``tip``, oldest first; a commit
    that is not one of this run's nodes (no trailer of ``run_id``) has task id ""."""
    fmt = (
        f"%H%x00%(trailers:key={TRAILER_RUN},valueonly,separator=%x01)"
        f"%x00%(trailers:key={TRAILER_TASK},valueonly,separator=%x01)"
    )
    text = _out(repo, ["log", "--first-parent", "--reverse", f"--format={fmt}", f"{base}..{tip}"])
    out: list[NodeCommit] = []
    for line in text.splitlines():
        sha, run, task = [*line.split("\x00"), "", ""][:3]
        out.append(NodeCommit(sha, task.strip() if run.strip() == run_id else ""))
    return out


def _commit(repo: Path, tree: str, parents: list[str], message: str, author: list[str]) -> str:
    args = ["commit-tree", tree]
    for parent in parents:
        args += ["-p", parent]
    name, email, date = [*author, "", "", ""][:3]
    proc = run_git(
        [*args, "-F", "-"], repo, input_bytes=message.encode(), author=(name, email, date)
    )
    return proc.stdout.decode().strip()


def replay(repo: Path, commit: str, onto: str, task_id: str) -> str:
    """``commit``'s change (against its parent) as a new commit on ``onto``: same message,
    author and date. Returns ``commit`` itself when it already sits on ``onto``."""
    parent = _out(repo, ["rev-parse", f"{commit}^"])
    if parent == onto:
        return commit
    who = _out(repo, ["log", "-1", "--format=%an%x00%ae%x00%ad", "--date=raw", commit])
    author = who.split("\x00")
    message = _out(repo, ["log", "-1", "--format=%B", commit]) + "\n"
    stand_in = _commit(repo, f"{parent}^{{tree}}", [], "replay base\n", author)
    ours = _commit(repo, f"{onto}^{{tree}}", [stand_in], "replay onto\n", author)
    theirs = _commit(repo, f"{commit}^{{tree}}", [stand_in], "replay change\n", author)
    try:
        tree = _out(repo, ["merge-tree", "--write-tree", "--no-messages", ours, theirs])
    except GitError as exc:
        if exc.returncode != 1:  # 1 is a conflict; anything else is git failing
            raise
        raise LandingConflict(
            f"task {task_id}: its changes conflict with the rebuilt run branch; not re-landed"
        ) from exc
    return _commit(repo, tree.splitlines()[0], [onto], message, author)
