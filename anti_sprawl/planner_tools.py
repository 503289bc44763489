"""The planner's side of its tools: read-only exploration, and turning a submission into a plan.

Exploration goes through the planner's ``Firewall`` (read scope the whole repository, write
scope empty), so secrets, ``.git/`` and anything outside the repository are refused and the
refusal goes back to the model as an error observation. Results are untrusted data blocks.
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from .file_views import LineRangeError, read_view
from .firewall import Firewall, FirewallError
from .providers.base import INVALID_ARGUMENTS_KEY, ToolCall, ToolResult
from .providers.scripted import SUBMIT_PLAN_TOOL
from .tools import tool_args_model
from .trust import wrap_data
from .validate import Report

__all__ = [
    "EXPLORE_TOOLS",
    "OBSERVATION_CHARS",
    "default_plan_id",
    "explore",
    "feedback",
    "missing_budgets",
    "submission_data",
    "tool_error",
]

EXPLORE_TOOLS = ("grep", "list_dir", "read_file")
OBSERVATION_CHARS = 24_000  # about 6k tokens: one file must not eat the planner's budget


def tool_error(call: ToolCall, text: str) -> ToolResult:
    """An error observation for ``call``."""
    return ToolResult(call_id=call.id, content=f"error: {text}", is_error=True)


def explore(firewall: Firewall, call: ToolCall, available: Sequence[str]) -> ToolResult:
    """Run one read-only tool call; every failure is an error observation, never an exception."""
    model = tool_args_model(call.name) if call.name in EXPLORE_TOOLS else None
    if model is None:
        return tool_error(
            call, f"unknown tool {call.name!r}; available tools: {', '.join(available)}"
        )
    if INVALID_ARGUMENTS_KEY in call.arguments:
        return tool_error(call, "arguments are not a JSON object")
    try:
        args: Any = model.model_validate(call.arguments)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'args'}: {e['msg']}" for e in exc.errors()
        )
        return tool_error(call, f"invalid arguments for {call.name}: {problems}")
    try:
        if call.name == "read_file":
            full = firewall.read_text(args.path)
            ranged = read_view(
                args.path, full, args.start_line, args.end_line, max_chars=OBSERVATION_CHARS
            )
            kind, text = "file", ranged
        elif call.name == "list_dir":
            entries = firewall.list_dir(args.path)
            kind = "listing"
            text = "\n".join(f"{e.name}/" if e.kind == "dir" else e.name for e in entries)
        else:
            matches = firewall.grep(args.pattern, args.path)
            kind = "search"
            text = "\n".join(f"{m.path}:{m.line_no}: {m.line}" for m in matches)
    except FirewallError as exc:
        v = exc.violation
        return tool_error(call, f"refused: {v.op} {v.path!r}: {v.reason}. {v.detail}".strip())
    except LineRangeError as exc:
        return tool_error(call, str(exc))
    if len(text) > OBSERVATION_CHARS:
        cut = len(text) - OBSERVATION_CHARS
        text = text[:OBSERVATION_CHARS] + f"\n[... {cut} more characters not shown]"
    source = str(args.path or ".")
    return ToolResult(call_id=call.id, content=wrap_data(kind, source, text or "(empty)"))


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
    return data


def missing_budgets(raw: dict[str, Any]) -> dict[str, set[str]]:
    """task_id -> the budget fields (``token_budget``, ``max_tool_calls``) a submission omits."""
    out: dict[str, set[str]] = {}
    tasks = raw.get("tasks")
    for task in tasks if isinstance(tasks, list) else []:
        if isinstance(task, dict) and isinstance(task.get("task_id"), str):
            fields = {f for f in ("token_budget", "max_tool_calls") if task.get(f) is None}
            out[task["task_id"]] = fields
    return out


def feedback(call: ToolCall, report: Report | None, rounds: int, max_rounds: int) -> ToolResult:
    """The error result of an invalid ``submit_plan``: every validation error, one a line."""
    errors = report.errors if report is not None else []
    lines = [
        f"The plan is invalid ({len(errors)} error(s)). Fix every one and call "
        f"{SUBMIT_PLAN_TOOL} again with the whole corrected plan "
        f"(submission {rounds} of {max_rounds}):",
        *(f"- [{p.code}] {p.message}" for p in errors),
    ]
    return ToolResult(call_id=call.id, content="\n".join(lines), is_error=True)
