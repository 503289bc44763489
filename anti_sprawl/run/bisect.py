"""Which node broke the integrated branch: a binary search over its node commits.

The run branch is linear, one commit per node (git/branch.py). When the integration command
fails on the tip but passed at the start commit (the baseline), the first commit at which it
fails is the node that broke it: the same answer ``git bisect run`` gives, found in our own
code so that every probe runs in a fresh temporary worktree under the run's sandbox
(run/integration.py) and nothing touches the user's checkout or its ``BISECT_*`` state.
⌈log₂ N⌉ probes for N commits, the tip's own check not counted again.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["first_failing"]


def first_failing(count: int, fails: Callable[[int], bool]) -> int:
    """The smallest index in ``0..count-1`` at which ``fails`` is true, given that it is true
    at ``count - 1`` (the tip, already checked) and false before the first commit (the
    baseline). ``fails`` is called at most ⌈log₂ count⌉ times, never at ``count - 1``."""
    if count < 1:
        raise ValueError("nothing to bisect")
    good, bad = -1, count - 1  # fails(good) is false (the baseline), fails(bad) is true
    while bad - good > 1:
        middle = (good + bad) // 2
        if fails(middle):
            bad = middle
        else:
            good = middle
    return bad
