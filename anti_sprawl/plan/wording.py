"""Schema errors in the words of the person who edited the plan file (issue 24, item 4).

Pydantic says ``tasks.0.depends_on: Extra inputs are not permitted``; a person fixing a plan
by hand wants ``task 'api': unknown field 'depends_on' (did you mean 'dependencies'?)``. Each
error names the task by its id and the field as written, and a near miss gets a suggestion:
a field name (common synonyms, then close spellings), an integer written as ``40k`` or
``40,000``, an unknown dependency close to a real task id (``doc`` -> ``docs``).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["closest", "describe_error", "integer_hint"]

# Names people (and other tools' plan formats) use for our fields.
_SYNONYMS = {
    "depends_on": "dependencies",
    "depends": "dependencies",
    "deps": "dependencies",
    "requires": "dependencies",
    "needs": "dependencies",
    "after": "dependencies",
    "id": "task_id",
    "title": "name",
    "description": "goal",
    "instructions": "goal",
    "prompt": "goal",
    "reads": "read_scope",
    "read": "read_scope",
    "writes": "write_scope",
    "write": "write_scope",
    "files": "write_scope",
    "budget": "token_budget",
    "tokens": "token_budget",
    "max_tokens": "token_budget",
    "tool_calls": "max_tool_calls",
    "tests": "test_command",
    "test": "test_command",
    "setup": "setup_command",
    "attempts": "max_attempts",
    "retries": "max_attempts",
    "nodes": "tasks",
    "steps": "tasks",
}
_SUFFIXED = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmM])\s*$")
_GROUPED = re.compile(r"^\s*\d{1,3}(?:[,_ ]\d{3})+\s*$")
_INTEGER_ERRORS = ("int_type", "int_parsing", "int_from_float")


def closest(name: str, known: Iterable[str]) -> str | None:
    """The known name ``name`` most likely means: a synonym, else the closest spelling."""
    names = list(known)
    synonym = _SYNONYMS.get(name.lower())
    if synonym in names:
        return synonym
    match = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    return match[0] if match else None


def integer_hint(value: Any) -> int | None:
    """The integer a person meant by ``40k``, ``1.5M``, ``40,000`` or ``30000.0``, if any."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if not isinstance(value, str):
        return None
    if match := _SUFFIXED.match(value):
        scale = 1_000 if match.group(2).lower() == "k" else 1_000_000
        return int(float(match.group(1)) * scale)
    if _GROUPED.match(value):
        return int(re.sub(r"[,_ ]", "", value))
    if value.strip().isdigit():
        return int(value)
    return None


def _where(loc: Sequence[Any], tasks: Any) -> tuple[str, list[str], list[Any]]:
    """``task 'a'`` or ``the plan``, the task ids it names, and the rest of the location."""
    if len(loc) >= 2 and loc[0] == "tasks" and isinstance(loc[1], int):
        item = tasks[loc[1]] if isinstance(tasks, list) and loc[1] < len(tasks) else None
        tid = item.get("task_id") if isinstance(item, dict) else None
        if tid is not None:
            return f"task '{tid}'", [str(tid)], list(loc[2:])
        return f"task #{loc[1] + 1} (no task_id)", [f"#{loc[1]}"], list(loc[2:])
    return "the plan", [], list(loc)


def describe_error(
    err: Any, data: Any, fields: Mapping[str, Sequence[str]]
) -> tuple[str, list[str]]:
    """One pydantic error as a sentence, and the task ids it names. ``fields``: the known
    field names of ``"plan"`` and ``"task"``."""
    tasks = data.get("tasks") if isinstance(data, dict) else None
    who, tids, rest = _where(err.get("loc", ()), tasks)
    kind, value = err.get("type", ""), err.get("input")
    if not rest:
        return f"{who}: {err.get('msg', 'invalid')}", tids
    field = str(rest[0])
    item = "".join(f" item {i + 1}" if isinstance(i, int) else f".{i}" for i in rest[1:])
    known = fields["task" if tids else "plan"]
    if kind == "extra_forbidden":
        guess = closest(field, known)
        hint = f" (did you mean '{guess}'?)" if guess else f" (known: {', '.join(known)})"
        return f"{who}: unknown field '{field}'{hint}", tids
    if kind == "missing":
        return f"{who}: the field '{field}' is missing", tids
    if kind in _INTEGER_ERRORS:
        meant = integer_hint(value)
        hint = f" (did you mean {meant}?)" if meant is not None else ""
        return f"{who} field '{field}'{item}: {value!r} is not an integer{hint}", tids
    return f"{who} field '{field}'{item}: {err.get('msg', 'invalid')}", tids
