"""The plan a run grew to: its plan with the scopes its nodes were granted, written beside it.

Scope requests (run/scope_grants.py) add files to a node's scopes during the run. The run keeps
its plan as validated (the journal's copy is never widened) and writes the revised one beside
it, ``.anti-sprawl/runs/<run_id>/plan.revised.yaml``, whose comment lines say what was added:
``validate`` checks it, ``status RUN --plan`` prints it, ``resume RUN --plan`` accepts it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from ..fs.scope_grant import ScopeGrant
from ..plan.model import Plan, save_plan

__all__ = ["GrantsByTask", "revised_header", "revised_plan", "write_revised_plan"]

GrantsByTask = Mapping[str, Sequence[ScopeGrant]]


def revised_plan(plan: Plan, grants: GrantsByTask) -> tuple[Plan, list[str]]:
    """The plan with each node's granted paths added to its scopes, and one line per addition
    (what the run added: ``status --plan`` and the revised plan file show it)."""
    tasks, added = [], []
    for t in plan.tasks:
        extra = [g for g in grants.get(t.task_id, ()) if g.granted]
        reads = [g.path for g in extra if g.mode == "read" and g.path not in t.read_scope]
        writes = [g.path for g in extra if g.mode == "write" and g.path not in t.write_scope]
        added += [f"task '{t.task_id}': read {p}" for p in reads]
        added += [f"task '{t.task_id}': write {p}" for p in writes]
        update = {"read_scope": [*t.read_scope, *reads], "write_scope": [*t.write_scope, *writes]}
        tasks.append(t.model_copy(update=update) if reads or writes else t)
    return plan.model_copy(update={"tasks": tasks}), added


def revised_header(run_id: str, added: Sequence[str]) -> str:
    """The comment lines of a revised plan: whose it is and what the run added."""
    lines = [f"The plan of run {run_id} with the scopes its nodes were granted added:"]
    return "\n".join([*lines, *(f"  added {line}" for line in added)])


def write_revised_plan(path: Path, plan: Plan, run_id: str, grants: GrantsByTask) -> list[str]:
    """Write the revised plan beside the run's journal; the lines of what was added."""
    revised, added = revised_plan(plan, grants)
    if added:
        save_plan(revised, path, revised_header(run_id, added))
    return added
