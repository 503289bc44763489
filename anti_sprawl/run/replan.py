"""``resume RUN_ID --plan FILE``: which edits of a run's plan a resumed run accepts.

A node whose commit is on the run branch is done: its id, scopes and dependencies are what
the branch was built from, so they must not change (anything else about it is ignored, it
never runs again). Nodes that did not succeed may get new budgets, goals, scopes or test
commands; nodes may be added, and nodes that did not succeed may be removed. The new plan is
validated like any plan; each accepted edit is recorded in the journal with the plan it
replaced.
"""

from __future__ import annotations

from collections.abc import Collection

from pydantic import BaseModel, Field

from ..errors import UsageError
from ..fs.scopes import normalize_entry
from ..plan.model import Plan, TaskNode
from .result import now

__all__ = ["PlanRevision", "check_revision"]


class PlanRevision(BaseModel):
    """One accepted ``resume --plan``: when, what changed, and the plan it replaced."""

    at: str = Field(default_factory=now)
    source: str = Field(description="The plan file given to resume.")
    changed: list[str] = Field(default_factory=list, description="Nodes edited.")
    added: list[str] = Field(default_factory=list)
    removed: list[str] = Field(default_factory=list)
    previous: Plan


def _fixed(node: TaskNode) -> dict[str, frozenset[str]]:
    """The parts of a node the run branch was built from."""
    return {
        "read_scope": frozenset(normalize_entry(e) for e in node.read_scope),
        "write_scope": frozenset(normalize_entry(e) for e in node.write_scope),
        "dependencies": frozenset(node.dependencies),
    }


def check_revision(
    old: Plan, new: Plan, succeeded: Collection[str], source: str, granted: Plan | None = None
) -> PlanRevision:
    """The revision ``new`` makes to ``old``; UsageError naming the node when it is refused.

    ``granted`` is the run's revised plan (``old`` with the scopes its nodes were granted:
    run/scope_grants.py): a succeeded node may keep either its planned or its granted scopes.
    """
    if new.plan_id != old.plan_id:
        raise UsageError(
            f"{source} is plan {new.plan_id!r}, but the run is of plan {old.plan_id!r}"
        )
    new_ids = {t.task_id for t in new.tasks}
    for task_id in succeeded:
        if task_id not in new_ids:
            raise UsageError(
                f"task {task_id!r} already succeeded on the run branch; {source} must keep it"
            )
        before, after = _fixed(old.task(task_id)), _fixed(new.task(task_id))
        differ = [name for name in before if before[name] != after[name]]
        if differ and granted is not None and _fixed(granted.task(task_id)) == after:
            differ = []  # the scopes the branch was built with, grants included
        if differ:
            raise UsageError(
                f"task {task_id!r} already succeeded on the run branch; its "
                f"{' and '.join(differ)} cannot change in a resumed run"
            )
    old_ids = [t.task_id for t in old.tasks]
    changed = [
        t.task_id
        for t in new.tasks
        if t.task_id in old_ids and t.task_id not in succeeded and t != old.task(t.task_id)
    ]
    return PlanRevision(
        source=source,
        changed=changed,
        added=[t.task_id for t in new.tasks if t.task_id not in old_ids],
        removed=[t for t in old_ids if t not in new_ids],
        previous=old,
    )
