"""The State Reducer: a finished node's worktree and finish call become a ``TaskResult``.

Only the ``TaskResult`` flows downstream (summary, interfaces, files changed, test outcome);
the transcript and raw tool outputs stay in the run's artifacts.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, Field

from .firewall import Violation
from .providers.base import Usage
from .sections import UpstreamSummary
from .tools import FinishArgs
from .worker import TestOutcome, WorkerResult
from .workspace import DiffStat, Workspace, diff, diffstat

__all__ = ["Status", "TaskResult", "Tokens", "now", "reduce", "upstream_summary"]

Status = Literal["pending", "running", "succeeded", "failed", "skipped"]
MAX_DIFF_CHARS = 200_000


_LEGACY_TOKENS = {
    "input": "input_tokens",
    "output": "output_tokens",
    "cache_read": "cache_read_tokens",
    "cache_write": "cache_write_tokens",
}


def _legacy_tokens(value: Any) -> Any:
    """Journals written before the one usage type used short names: read them as ``Usage``."""
    if isinstance(value, dict) and any(k in _LEGACY_TOKENS for k in value):
        return {_LEGACY_TOKENS.get(k, k): v for k, v in value.items()}
    return value


Tokens = Annotated[Usage, BeforeValidator(_legacy_tokens)]


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class TaskResult(BaseModel):
    """What the run keeps of one node (docs/architecture.md, "TaskResult"), also its journal record."""

    task_id: str
    name: str = ""
    status: Status = "pending"
    reason: str | None = None
    message: str = ""
    summary: FinishArgs | None = None
    files_changed: list[str] = Field(default_factory=list)
    diffstat: DiffStat | None = None
    diff: str = ""
    commit: str | None = None
    tokens: Tokens = Field(default_factory=Usage, description="Charged over the last attempt.")
    token_budget: int = 0
    tool_calls: int = 0
    max_tool_calls: int = 0
    calls: int = 0
    # Model responses cut at the output limit (their tool calls were lost and reported).
    truncated_responses: int = 0
    violations: list[Violation] = Field(default_factory=list)
    tests: TestOutcome | None = None
    setup: TestOutcome | None = None  # the plan's setup_command in this node's worktree
    skipped_because: str | None = None
    # Zero-width, bidi or Unicode-tag characters in what the model was shown (PI-7): the
    # firewall does not care, but a reviewer should know a hidden payload was there.
    hidden_chars: dict[str, int] = Field(default_factory=dict)
    transcript: str | None = None
    attempts: int = 0
    started_at: str | None = None
    finished_at: str | None = None


def upstream_summary(result: TaskResult) -> UpstreamSummary:
    """The slice of a dependency's result a downstream prompt gets: never its transcript."""
    finish = result.summary
    return UpstreamSummary(
        task_id=result.task_id,
        name=result.name,
        summary=finish.summary if finish else "",
        interfaces=finish.interfaces if finish else "",
        notes=finish.notes if finish else "",
        files_changed=result.files_changed,
        tests_passed=result.tests.passed if result.tests else None,
    )


def reduce(
    record: TaskResult,
    worker: WorkerResult,
    ws: Workspace,
    base: str,
    commit: str | None,
    audit_violations: Sequence[Violation],
    tests: TestOutcome | None,
) -> TaskResult:
    """Fill ``record`` from the worker's outcome and the committed worktree."""
    record.summary = worker.finish
    record.tokens = worker.usage
    record.tool_calls = worker.tool_calls
    record.calls = worker.calls
    record.truncated_responses = worker.truncated
    record.violations = [*worker.violations, *audit_violations]
    record.tests = tests or worker.tests
    record.transcript = worker.transcript
    record.commit = commit
    if commit:
        stat = diffstat(ws, base, commit)
        record.diffstat = stat
        record.files_changed = [f.path for f in stat.files]
        text = diff(ws, base, commit, record.files_changed)
        record.diff = (
            text if len(text) <= MAX_DIFF_CHARS else text[:MAX_DIFF_CHARS] + "\n[diff truncated]\n"
        )
    return record
