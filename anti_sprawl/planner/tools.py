"""The planner's side of ``submit_plan``: turning a submission into a plan document, and
what the planner is told back about it (errors, the task skeleton, models it may not use).
The repairs of a small model's submissions are ``submission_repairs.py``.

Exploration (``read_file``, ``list_dir``, ``grep``) uses the worker's handlers through the
planner's ``Firewall`` (read scope exactly the repository map's files, a ``FileSet``; write
scope empty), so ignored files, secrets, ``.git/`` and anything outside the repository are
refused by the same dispatch and with the same messages as a worker's (``agent/loop.py``).
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any

from ..ids import SUBMIT_PLAN_TOOL
from ..plan.model import Plan
from ..plan.validate import Problem, Report

__all__ = [
    "OBSERVATION_CHARS",
    "default_plan_id",
    "feedback",
    "missing_budgets",
    "model_problems",
    "submission_data",
    "task_skeleton",
    "unwritten_feedback",
]

OBSERVATION_CHARS = 24_000  # about 6k tokens: one file must not eat the planner's budget


_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def default_plan_id(requirement: str) -> str:
    """A readable, stable id: the requirement's first words plus a short hash."""
    words = re.sub(r"[^a-z0-9]+", "-", requirement.lower()).strip("-")[:40].strip("-")
    digest = hashlib.sha256(requirement.encode("utf-8")).hexdigest()[:6]
    return f"{words}-{digest}" if words else f"plan-{digest}"


def submission_data(
    raw: dict[str, Any], *, requirement: str, plan_id: str, force_id: bool, base: str | None
) -> dict[str, Any]:
    """The plan document to validate: the submission with orchestrator-owned fields set.

    The requirement is always the user's own text, never the model's paraphrase; ``plan_id``
    replaces the model's when ``force_id``, else fills it in when missing; ``base`` (the
    commit planned against) fills in when the model left it out.
    """
    data = copy.deepcopy(raw)
    data["requirement"] = requirement
    if force_id or "plan_id" not in data:
        data["plan_id"] = plan_id
    if base is not None and not data.get("base"):
        data["base"] = base
    _name_ids(data.get("tasks"))
    return data


def _name_ids(tasks: Any) -> None:
    """A task without a ``task_id`` takes its ``name`` as one when the name is a usable id
    and no other task has it: Qwen2.5-Coder-1.5B sent ``name: add_subtract_calc`` and no
    ``task_id`` in three submissions running, the example task notwithstanding (recorded)."""
    if not isinstance(tasks, list):
        return
    taken = {
        t.get("task_id") for t in tasks if isinstance(t, dict) and isinstance(t.get("task_id"), str)
    }
    for task in tasks:
        if not isinstance(task, dict) or "task_id" in task:
            continue
        name = task.get("name")
        if isinstance(name, str) and _ID.fullmatch(name) and name not in taken:
            task["task_id"] = name
            taken.add(name)


def missing_budgets(raw: dict[str, Any]) -> dict[str, set[str]]:
    """task_id -> the budget fields (``token_budget``, ``max_tool_calls``) a submission omits."""
    out: dict[str, set[str]] = {}
    tasks = raw.get("tasks")
    for task in tasks if isinstance(tasks, list) else []:
        if isinstance(task, dict) and isinstance(task.get("task_id"), str):
            fields = {f for f in ("token_budget", "max_tool_calls") if task.get(f) is None}
            out[task["task_id"]] = fields
    return out


# One valid task with every key a task must or usually should have: what a small model that
# repeats an error is shown (issue 23: small models copy a whole example better than they
# follow a list of errors; the recorded 1.5B model still did not, see _name_ids).
TASK_SKELETON = {
    "task_id": "add-feature",
    "name": "Add the feature",
    "goal": "What to change, in which files, and how to check it.",
    "dependencies": [],
    "read_scope": ["src/module.py"],
    "write_scope": ["src/module.py", "tests/test_module.py"],
    "token_budget": 30000,
    "max_tool_calls": 15,
}


def task_skeleton(paths: Sequence[str] = ()) -> dict[str, Any]:
    """``TASK_SKELETON`` over ``paths`` (files of the repository, the requirement's first)
    when there are any: a small model copies the skeleton's paths as they are (make
    real-model 2026-12-05 run ad: ``src/calc.py`` and ``tests/test_calc.py``, which do not
    exist, after the skeleton's ``src/module.py``; planning failed on them)."""
    if not paths:
        return TASK_SKELETON
    return {**TASK_SKELETON, "read_scope": list(paths[:1]), "write_scope": list(paths[:2])}


def feedback(
    report: Report | None,
    rounds: int,
    max_rounds: int,
    *,
    repeated: bool = False,
    paths: Sequence[str] = (),
) -> str:
    """The error text of an invalid ``submit_plan``: every validation error, one a line; when
    an error repeats the previous submission's, the skeleton of one valid task too, over
    ``paths`` when given (``task_skeleton``)."""
    errors = report.errors if report is not None else []
    lines = [
        f"The plan is invalid ({len(errors)} error(s)). Fix every one and call "
        f"{SUBMIT_PLAN_TOOL} again with the whole corrected plan "
        f"(submission {rounds} of {max_rounds}):",
        *(f"- [{p.code}] {p.message}" for p in errors),
    ]
    if repeated:
        skeleton = json.dumps({"tasks": [task_skeleton(paths)]}, indent=1)
        lines += [
            "The same error came back twice. Here is one valid task with every required key; "
            f"submit your tasks in this shape:\n{skeleton}",
        ]
    return "\n".join(lines)


def unwritten_feedback(warnings: Sequence[Problem]) -> str:
    """What the planner is told once about a valid plan that cannot change a file the
    requirement names."""
    lines = [
        "The plan is valid, but it cannot meet the requirement as written:",
        *(f"- {p.message}" for p in warnings),
        f"Fix it and call {SUBMIT_PLAN_TOOL} again with the whole plan; submit the same plan "
        "again to keep it as it is.",
    ]
    return "\n".join(lines)


def model_problems(plan: Plan, allowed: Sequence[str]) -> list[Problem]:
    """Models a submission may not use: only those of ``plan --models``, each with a reason.

    Without ``--models`` the user chose no models for the planner to pick from, so a
    submission that names one is sent back. With it, a task's model must be one of the list
    and its goal must say why (``Model: NAME, because ...``).
    """
    problems: list[Problem] = []
    shown = ", ".join(allowed)
    if plan.default_model is not None and plan.default_model not in allowed:
        problems.append(
            Problem(
                code="model_not_allowed",
                message=f"default_model '{plan.default_model}' is not allowed"
                + (f" (allowed: {shown})" if allowed else ": leave it out"),
            )
        )
    for task in plan.tasks:
        if task.model is None:
            continue
        if task.model not in allowed:
            why = f"allowed: {shown}" if allowed else "the user allowed no models: leave it out"
            problems.append(
                Problem(
                    code="model_not_allowed",
                    message=f"task '{task.task_id}' model '{task.model}' is not allowed ({why})",
                    tasks=[task.task_id],
                )
            )
        elif task.model not in task.goal:
            problems.append(
                Problem(
                    code="model_reason",
                    message=f"task '{task.task_id}' uses model '{task.model}' but its goal does "
                    f"not say why: end the goal with 'Model: {task.model}, because ...'",
                    tasks=[task.task_id],
                )
            )
    return problems
