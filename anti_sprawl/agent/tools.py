"""The worker's tools: names, argument schemas (part of the contract) and the finish schema."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..ids import FINISH_TOOL
from ..providers.base import ToolSpec

__all__ = [
    "MAX_TEST_ARGS",
    "MAX_TEST_ARG_CHARS",
    "PLANNER_TOOLS",
    "WORKER_TOOLS",
    "EditFileArgs",
    "FinishArgs",
    "GrepArgs",
    "MoveFileArgs",
    "PathArgs",
    "ReadFileArgs",
    "RequestScopeArgs",
    "RunTestsArgs",
    "WriteFileArgs",
    "tool_args_model",
]

MAX_TEST_ARGS = 32
MAX_TEST_ARG_CHARS = 1000


class _Args(BaseModel):
    # Unknown arguments (a model's invented `cwd` or `root`, P5) are refused, not ignored
    # silently: the model gets an error observation and can correct itself.
    model_config = ConfigDict(extra="forbid")


class PathArgs(_Args):
    path: str = Field(description="Repo-relative POSIX path.")


class ReadFileArgs(_Args):
    path: str = Field(description="Repo-relative POSIX path.")
    start_line: int | None = Field(
        default=None, ge=1, description="First line to return (1-based); numbered lines."
    )
    end_line: int | None = Field(
        default=None, ge=1, description="Last line to return (inclusive); numbered lines."
    )

    @model_validator(mode="after")
    def _ordered(self) -> ReadFileArgs:
        start, end = self.start_line, self.end_line
        if start is not None and end is not None and end < start:
            raise ValueError(f"end_line {self.end_line} is before start_line {self.start_line}")
        return self


class GrepArgs(_Args):
    pattern: str = Field(description="Python regular expression.")
    path: str = Field(default="", description="Repo-relative directory or file; default: all.")


class WriteFileArgs(_Args):
    path: str = Field(description="Repo-relative POSIX path inside your write scope.")
    content: str = Field(description="The whole new file content (with append: the next part).")
    append: bool = Field(
        default=False,
        description="Add content to the end of the file instead of replacing it: build a file "
        "too large for one response in parts.",
    )


class MoveFileArgs(_Args):
    source: str = Field(description="File or directory to move, inside your write scope.")
    destination: str = Field(description="New path inside your write scope; it must not exist yet.")


class EditFileArgs(_Args):
    path: str = Field(description="Repo-relative POSIX path inside your write scope.")
    old: str = Field(description="Exact text to replace; must occur exactly once.")
    new: str = Field(description="Replacement text.")


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


class RunTestsArgs(_Args):
    args: list[str] = Field(
        default_factory=list,
        max_length=MAX_TEST_ARGS,
        description="Extra arguments appended to the test command, e.g. a test file, a test "
        "id or ['-k', 'expression']; omit to run the whole command.",
    )

    @field_validator("args")
    @classmethod
    def _plain_arguments(cls, args: list[str]) -> list[str]:
        for arg in args:
            if len(arg) > MAX_TEST_ARG_CHARS:
                raise ValueError(f"an argument is longer than {MAX_TEST_ARG_CHARS} characters")
            if _CONTROL.search(arg):
                raise ValueError("an argument holds a NUL or control character")
        return args


MAX_SCOPE_PATHS = 8


class RequestScopeArgs(_Args):
    """Ask the run for files outside the node's scopes (run/scope_grants.py decides)."""

    paths: list[str] = Field(
        min_length=1,
        max_length=MAX_SCOPE_PATHS,
        description="Repo-relative files (no globs, no directories) you need and lack.",
    )
    mode: Literal["read", "write"] = Field(description="read, or write (create or change).")
    reason: str = Field(
        min_length=1, max_length=500, description="One line: why the task needs them."
    )


class FinishArgs(_Args):
    """What a worker hands downstream when it is done: checked against this schema."""

    summary: str = Field(min_length=1, max_length=4000, description="What you changed and why.")
    notes: str = Field(default="", max_length=4000, description="Caveats, follow-ups.")
    interfaces: str = Field(
        default="",
        max_length=8000,
        description="What downstream tasks need to know: new or changed signatures, events.",
    )
    files: list[str] = Field(
        default_factory=list,
        max_length=200,
        description="The files you changed (checked against the diff).",
    )


_SPECS: dict[str, tuple[str, type[_Args]]] = {
    "read_file": (
        "Read a text file inside your read or write scope; with start_line/end_line, "
        "just those lines, numbered.",
        ReadFileArgs,
    ),
    "list_dir": ("List a directory (entries inside your scopes only).", PathArgs),
    "grep": ("Search readable files for a regular expression.", GrepArgs),
    "write_file": (
        "Create or replace a file inside your write scope (append: true adds to its end).",
        WriteFileArgs,
    ),
    "edit_file": ("Replace one exact, unique occurrence of `old` with `new`.", EditFileArgs),
    "delete_file": (
        "Delete a file, or a directory whose files are all inside your write scope.",
        PathArgs,
    ),
    "move_file": (
        "Move or rename a file or directory; both paths inside your write scope, the "
        "destination must not exist.",
        MoveFileArgs,
    ),
    "run_tests": (
        "Run this task's test command (read-only, no network, time-limited), optionally "
        "with extra arguments such as one test file or test id.",
        RunTestsArgs,
    ),
    "request_scope": (
        "Ask for files outside your scopes (a read, or a write); the run grants or refuses "
        "each with one line saying why. Refused: finish with what you have.",
        RequestScopeArgs,
    ),
    FINISH_TOOL: ("Finish the task with a summary for the tasks that depend on it.", FinishArgs),
}


def _spec(name: str) -> ToolSpec:
    description, model = _SPECS[name]
    schema: dict[str, Any] = model.model_json_schema()
    schema.pop("title", None)
    schema.pop("description", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    return ToolSpec(name=name, description=description, parameters=schema)


# Sorted by name, so the tool block of the prompt is byte-identical for every worker.
WORKER_TOOLS: tuple[ToolSpec, ...] = tuple(_spec(name) for name in sorted(_SPECS))
PLANNER_TOOLS: tuple[ToolSpec, ...] = tuple(
    _spec(name) for name in sorted(("read_file", "list_dir", "grep"))
)


def tool_args_model(name: str) -> type[_Args] | None:
    """The argument model of worker tool ``name``, or None for an unknown tool."""
    entry = _SPECS.get(name)
    return entry[1] if entry else None
