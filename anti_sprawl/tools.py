"""The worker's tools: names, argument schemas (part of the contract) and the finish schema."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .providers.base import ToolSpec

__all__ = [
    "PLANNER_TOOLS",
    "WORKER_TOOLS",
    "EditFileArgs",
    "FinishArgs",
    "GrepArgs",
    "PathArgs",
    "ReadFileArgs",
    "RunTestsArgs",
    "WriteFileArgs",
    "tool_args_model",
]


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
    content: str = Field(description="The whole new file content.")


class EditFileArgs(_Args):
    path: str = Field(description="Repo-relative POSIX path inside your write scope.")
    old: str = Field(description="Exact text to replace; must occur exactly once.")
    new: str = Field(description="Replacement text.")


class RunTestsArgs(_Args):
    pass


class FinishArgs(_Args):
    """What a worker hands downstream when it is done: checked against this schema."""

    summary: str = Field(min_length=1, max_length=4000, description="What you changed and why.")
    notes: str = Field(default="", max_length=4000, description="Caveats, follow-ups.")
    interfaces: str = Field(
        default="",
        max_length=8000,
        description="What downstream tasks need to know: new or changed signatures, events.",
    )


_SPECS: dict[str, tuple[str, type[_Args]]] = {
    "read_file": (
        "Read a text file inside your read or write scope; with start_line/end_line, "
        "just those lines, numbered.",
        ReadFileArgs,
    ),
    "list_dir": ("List a directory (entries inside your scopes only).", PathArgs),
    "grep": ("Search readable files for a regular expression.", GrepArgs),
    "write_file": ("Create or replace a file inside your write scope.", WriteFileArgs),
    "edit_file": ("Replace one exact, unique occurrence of `old` with `new`.", EditFileArgs),
    "run_tests": (
        "Run this task's test command (read-only, no network, time-limited).",
        RunTestsArgs,
    ),
    "finish": ("Finish the task with a summary for the tasks that depend on it.", FinishArgs),
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
