"""The run branch without a node that broke it: the others' commits re-landed in order.

After bisection names a culprit (run/integration.py), the branch is rebuilt from the commit
before it: every later node commit that is not the culprit's or a descendant's is replayed on
top, in the order it had (git/replay.py; the DAG left them unordered with the culprit, so
their scopes are disjoint). The new commits are made in memory and the branch is moved to
the new tip with one compare-and-swap (``RunBranch.move``): a crash leaves the old branch or
the new one, never half of it, and the trailers on whichever it is say which nodes are done
(``resume`` reconciles the journal with them, run/runner.py).
"""

from __future__ import annotations

from collections.abc import Collection

from ..git.branch import RunBranch
from ..git.replay import NodeCommit, replay

__all__ = ["rebuild_without"]


def rebuild_without(
    branch: RunBranch, base: str, commits: list[NodeCommit], dropped: Collection[str]
) -> dict[str, str]:
    """Move ``branch`` (whose first-parent history after ``base`` is ``commits``) to a tip
    without the commits of the nodes in ``dropped``. Returns task_id -> its commit on the
    rebuilt branch, for every node kept. Raises ``LandingConflict`` before moving anything."""
    tip = commits[-1].sha if commits else base
    onto = base
    kept: dict[str, str] = {}
    for commit in commits:
        if commit.task_id in dropped:
            continue
        onto = replay(branch.repo, commit.sha, onto, commit.task_id)
        kept[commit.task_id] = onto
    if onto != tip:
        branch.move(onto, tip)
    return kept
