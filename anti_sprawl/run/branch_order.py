"""The run branch in the plan's fixed order: what the integration check and the user see.

Nodes land as they finish (run/scheduler.py), so two runs of one plan with the same outcomes
can leave the commits of unordered nodes in different orders, and bisection (run/
integration.py) would then blame whichever of two conflicting nodes happened to land second.
``settle_order`` puts the commits in the plan's topological order (ties by plan position)
before each integration check and when the run winds up (run/runner.py), with git/reorder.py:
a handful of git processes however many nodes, and one compare-and-swap of the branch. So
the branch and the blame are the same however the nodes' timings fell, and a resumed run
ends with the same branch as one that never stopped.

Crash safety: until the branch moves, nothing has changed; after, the journal's commit ids
follow (``report``), and a crash in between is put right by ``resume``, which reads every
node's commit from the trailers (run/runner.py ``_reconcile``). When the commits cannot trade
places (two unordered nodes changed one path, which validation forbids but a conflict-free
merge could have let through) or git fails, the branch stays in landing order and the
journal says why (``RunState.branch_order``, shown under the verdict).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import RunError
from ..git.branch import BranchCheckedOut
from ..git.reorder import reorder
from ..plan.model import Plan
from .scheduler import topological_order

if TYPE_CHECKING:
    from .node import NodeRunner

__all__ = ["fixed_order", "settle_order"]


def fixed_order(plan: Plan) -> list[str]:
    """The order the branch's commits are kept in: topological, ties by plan position."""
    deps = {t.task_id: list(t.dependencies) for t in plan.tasks}
    return topological_order(deps, [t.task_id for t in plan.tasks])


def settle_order(run: NodeRunner) -> None:
    """Put the run branch's node commits in ``fixed_order``; journal their new ids, or why
    the branch was left as it landed."""
    state = run.journal.state

    def crash() -> None:
        if run.opts.hooks.crash is not None:
            run.opts.hooks.crash("mid_reorder", "")

    try:
        done = reorder(run.branch, state.base, fixed_order(state.plan), before_move=crash)
    except (RunError, BranchCheckedOut) as exc:  # OrderKept, git failing, a checked-out branch
        note = f"left in the order the nodes landed: {exc}"
    else:
        note = ""
        for task_id, sha in done.moved.items():
            record = state.tasks.get(task_id)
            if record is not None and record.commit != sha:
                record.commit = sha
                run.report(record)
    if state.branch_order != note:
        state.branch_order = note
        run.journal.checkpoint()
