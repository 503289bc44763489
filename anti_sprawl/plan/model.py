"""The plan: a DAG of scoped subtasks (``TaskNode``) and its file formats (YAML or JSON)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StringConstraints

from ..errors import UsageError
from ..fs.files import atomic_write_text
from ..fs.userdata import load_document
from ..ids import TaskId

__all__ = [
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_MAX_TOOL_CALLS",
    "DEFAULT_TOKEN_BUDGET",
    "ModelName",
    "Plan",
    "TaskNode",
    "command_argv",
    "load_plan_data",
    "save_plan",
]

DEFAULT_TOKEN_BUDGET = 60_000
DEFAULT_MAX_TOOL_CALLS = 30
DEFAULT_MAX_ATTEMPTS = 2
MAX_ATTEMPTS = 10
# A model name as the provider's API takes it: claude-sonnet-5-5, gpt-5.6-sol, llama3:8b...
ModelName = Annotated[str, StringConstraints(pattern=r"^[^\s]{1,200}$")]
TestCommand = str | list[str] | None


class TaskNode(BaseModel):
    """One subtask: what to do, what it may read and write, and its hard caps."""

    model_config = ConfigDict(extra="forbid")

    task_id: TaskId = Field(description="Unique id; used in branch trailers and file names.")
    name: str = Field(min_length=1, description="Short human title; the commit subject.")
    goal: str = Field(min_length=1, description="Instructions for the worker.")
    dependencies: list[str] = Field(default_factory=list, description="task_ids that run first.")
    read_scope: list[str] = Field(
        default_factory=list,
        description="Repo-relative files, directories (trailing '/') or globs the worker may read.",
    )
    write_scope: list[str] = Field(
        default_factory=list,
        description="Repo-relative files, directories or globs the worker may create or change.",
    )
    # Strict: `token_budget: true` or `30000.0` is a mistake to report, not a 1 or a 30000.
    token_budget: StrictInt = Field(
        default=DEFAULT_TOKEN_BUDGET,
        description="Per-call cap: no model call of this node carries more than this many "
        "tokens (its input plus the output it may produce). Older tool output is masked or "
        "digested to stay under it; the node spends at most about "
        "token_budget x (max_tool_calls + 2) in all.",
    )
    max_tool_calls: StrictInt = Field(
        default=DEFAULT_MAX_TOOL_CALLS,
        description="Tool-call cap; model calls are capped at max_tool_calls + 2 "
        "(turns without a tool call count too).",
    )
    test_command: TestCommand = Field(
        default=None,
        description="What run_tests executes (argv list or a string split like a shell would); "
        "'{checkout}' is the user's checkout, bound read-only.",
    )
    model: ModelName | None = Field(
        default=None,
        description="The model this node's calls use; wins over the plan's default_model and "
        "the command line's --model.",
    )
    max_attempts: int | None = Field(
        default=None,
        ge=1,
        le=MAX_ATTEMPTS,
        description="Attempts before the node fails (default: the plan's max_attempts); each "
        "retry starts from a fresh worktree with a note on why the last attempt failed.",
    )
    expect_changes: bool = Field(
        default=True,
        description="False for a verify-only node that may legitimately change no file; "
        "otherwise a node whose diff is empty, or only deletes text or changes whitespace "
        "while its goal asks for more than a removal, fails (no_changes) and is retried.",
    )


class Plan(BaseModel):
    """A requirement broken into a DAG of TaskNodes."""

    model_config = ConfigDict(extra="forbid")

    plan_id: TaskId = Field(description="Identifier; names the default run branch.")
    requirement: str = Field(min_length=1)
    base: str | None = Field(default=None, description="Commit the plan was made against.")
    test_command: TestCommand = Field(default=None, description="Default test command for nodes.")
    integration_command: TestCommand = Field(
        default=None,
        description="Run once on the run branch's tip after the last node lands, against the "
        "start commit's failures (default: the plan's test_command); when it fails, the "
        "breaking node is found by bisection and retried (run/integration.py).",
    )
    setup_command: TestCommand = Field(
        default=None,
        description="Run once in each node's worktree before the worker (sandboxed; it may "
        "write only git-ignored paths, e.g. node_modules/ or .venv/; nothing it writes lands).",
    )
    default_model: ModelName | None = Field(
        default=None,
        description="Model for nodes without their own; the command line's --model overrides it.",
    )
    max_attempts: int = Field(
        default=DEFAULT_MAX_ATTEMPTS,
        ge=1,
        le=MAX_ATTEMPTS,
        description="Default attempts per node (a node's own max_attempts wins).",
    )
    known_failures: list[str] = Field(
        default_factory=list,
        description="Test ids (pytest's, e.g. tests/test_x.py::test_y) known to fail before the "
        "run: a node is not failed for them, only for failures it introduces.",
    )
    tasks: list[TaskNode] = Field(min_length=1)

    def task(self, task_id: str) -> TaskNode:
        for node in self.tasks:
            if node.task_id == task_id:
                return node
        raise KeyError(task_id)

    def model_for(self, node: TaskNode, override: str | None = None) -> str | None:
        """The model of ``node``'s calls: its own, else ``override`` (--model), else the plan's
        default; None leaves it to the provider's default."""
        return node.model or override or self.default_model

    def attempts_for(self, node: TaskNode) -> int:
        return node.max_attempts or self.max_attempts

    def test_command_for(self, node: TaskNode) -> list[str] | None:
        """The node's test command (its own, else the plan's) as a template argv."""
        return command_argv(
            node.test_command if node.test_command is not None else self.test_command
        )

    def integration_argv(self) -> list[str] | None:
        """The integration command (its own, else the plan's test_command) as a template argv."""
        chosen = self.integration_command
        return command_argv(chosen if chosen is not None else self.test_command)

    def commands(self) -> list[tuple[str, list[str], TestCommand]]:
        """Every command of the plan: ``(where, task ids, command)`` for validation."""
        out: list[tuple[str, list[str], TestCommand]] = [
            ("the plan's test_command", [], self.test_command),
            ("the plan's setup_command", [], self.setup_command),
            ("the plan's integration_command", [], self.integration_command),
        ]
        out += [
            (f"task '{t.task_id}' test_command", [t.task_id], t.test_command) for t in self.tasks
        ]
        return [entry for entry in out if entry[2] is not None]


def command_argv(command: TestCommand) -> list[str] | None:
    """An argument list for ``command``; strings are split like a POSIX shell, never run by one."""
    if command is None:
        return None
    if isinstance(command, list):
        return list(command) or None
    try:
        return shlex.split(command) or None
    except ValueError as exc:
        raise UsageError(f"cannot split command {command!r}: {exc}") from exc


def load_plan_data(path: Path) -> dict[str, Any]:
    """Read a plan file as a mapping; any unreadable or unparseable file is a UsageError.

    Size, nesting, integer and duplicate-key limits are those of :mod:`.userdata`.
    """
    data = load_document(path, "plan")
    if not isinstance(data, dict):
        raise UsageError(f"plan file {path} must contain a mapping with 'plan_id' and 'tasks'")
    return data


def dump_plan(plan: Plan, fmt: str = "yaml") -> str:
    data = plan.model_dump(mode="json", exclude_none=True)
    for task in data["tasks"]:
        if task.get("expect_changes") is True:
            del task["expect_changes"]  # the default: plans stay as short as they were
    if fmt == "json":
        return json.dumps(data, indent=2) + "\n"
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)


def save_plan(plan: Plan, path: Path, header: str = "") -> None:
    """Write ``plan`` atomically; JSON when the suffix is .json, YAML otherwise (then with
    ``header``'s lines as comments first: what to review, what to run next)."""
    fmt = "json" if path.suffix.lower() == ".json" else "yaml"
    comments = "".join(f"# {line}".rstrip() + "\n" for line in header.splitlines())
    atomic_write_text(path, (comments if fmt == "yaml" else "") + dump_plan(plan, fmt))
