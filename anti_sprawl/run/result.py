"""The State Reducer: a finished node's worktree and finish call become a ``TaskResult``.

Only the ``TaskResult`` flows downstream (summary, interfaces, files changed, test outcome);
the transcript and raw tool outputs stay in the run's artifacts.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, Field, computed_field

from ..agent.tools import FinishArgs
from ..agent.worker import TestOutcome, WorkerResult
from ..context.sections import UpstreamSummary
from ..errors import InternalError
from ..fs.firewall import Violation
from ..fs.scope_grant import ScopeGrant
from ..git.patch_definitions import patch_definitions
from ..git.workspace import ChangeFacts, DiffStat, Workspace, diff, diffstat
from ..lifecycle import FailReason, NodeStatus
from ..plan.intent_checks import written_paths
from ..plan.model import TaskNode
from ..providers.base import Usage
from .failure_note import AttemptRecord

__all__ = [
    "Status",
    "TaskResult",
    "Tokens",
    "cache_share",
    "now",
    "reduce",
    "upstream_summary",
]

Status = NodeStatus  # the scheduler's words: pending, running, succeeded, failed, skipped
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


def cache_share(usage: Usage) -> float | None:
    """The share of input tokens read from the provider's cache (None: no input yet)."""
    if usage.input_tokens <= 0:
        return None
    return round(usage.cache_read_tokens / usage.input_tokens, 4)


class TaskResult(BaseModel):
    """What the run keeps of one node (docs/architecture.md, "TaskResult"), also its journal record."""

    task_id: str
    name: str = ""
    status: Status = "pending"
    reason: FailReason | None = None
    message: str = ""
    summary: FinishArgs | None = None
    # Why the model never called finish, when its change was taken because it passes the
    # whole test command (agent/worker.py, UNCLAIMED_ENDINGS); empty when it did.
    unclaimed: str = ""
    files_changed: list[str] = Field(default_factory=list)
    diffstat: DiffStat | None = None
    diff: str = ""
    commit: str | None = None
    tokens: Tokens = Field(default_factory=Usage, description="Charged over the last attempt.")
    total_tokens: Tokens = Field(
        default_factory=Usage, description="Charged over every attempt of the node."
    )
    cost_usd: float | None = Field(
        default=None, description="Dollars over every attempt; None while its model is unpriced."
    )
    model: str = Field(default="", description="The model of the node's calls.")
    token_budget: int = 0
    tool_calls: int = 0
    max_tool_calls: int = 0
    calls: int = 0
    # Model responses cut at the output limit (their tool calls were lost and reported).
    truncated_responses: int = 0
    violations: list[Violation] = Field(default_factory=list)
    # The last attempt's scope requests, granted or refused (run/scope_grants.py).
    scope_grants: list[ScopeGrant] = Field(default_factory=list)
    tests: TestOutcome | None = None
    setup: TestOutcome | None = None  # the plan's setup_command in this node's worktree
    skipped_because: str | None = None
    # Zero-width, bidi or Unicode-tag characters in what the model was shown (PI-7): the
    # firewall does not care, but a reviewer should know a hidden payload was there.
    hidden_chars: dict[str, int] = Field(default_factory=dict)
    transcript: str | None = None
    attempts: int = Field(
        default=0, description="Attempts started, interrupted ones too (files are numbered by it)."
    )
    counted: int = Field(
        default=0,
        description="Attempts of the current allowance that came to an outcome (an interrupted "
        "one does not count): what 'attempt N of max_attempts' says.",
    )
    earlier_attempts: int = Field(
        default=0, description="Counted attempts of earlier allowances (resume gave a fresh one)."
    )
    max_attempts: int = 1
    attempt_log: list[AttemptRecord] = Field(
        default_factory=list, description="Every attempt of the node, oldest first."
    )
    started_at: str | None = None
    finished_at: str | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def cache_share(self) -> float | None:
        """Share of the node's input tokens (all attempts) read from the provider's cache."""
        return cache_share(self.total_tokens)

    # -- transitions (lifecycle.py draws them): the only places a status is set -------------

    def start(self, model: str | None = None) -> None:
        """A new attempt begins (with ``model``): running, numbered, with nothing of the last
        attempt's outcome (its violations stay: the caller keeps what every attempt was refused)."""
        self._expect("start", "pending", "failed")
        self.status, self.attempts = "running", self.attempts + 1
        self.started_at, self.finished_at = now(), None
        self.reason, self.message, self.skipped_because = None, "", None
        self.tokens, self.calls, self.tool_calls, self.truncated_responses = Usage(), 0, 0, 0
        self.summary, self.tests, self.setup, self.transcript = None, None, None, None
        self.commit, self.diff, self.diffstat, self.files_changed = None, "", None, []
        if model is not None:
            self.model = model

    def fail(self, reason: FailReason, message: str) -> None:
        """The attempt (or its landing) failed, for ``reason``."""
        self._expect("fail", "running")
        self.status, self.reason, self.message, self.commit = "failed", reason, message, None

    def skip(self, because: str) -> None:
        """Never run: the dependency ``because`` failed."""
        self._expect("skip", "pending")
        self.status, self.skipped_because = "skipped", because
        self.reason, self.message = "dependency_failed", f"skipped because {because} failed"

    def interrupt(self, why: str) -> None:
        """The node is not done and will run again (the run stopped before it was, or ``resume``
        found no commit of it on the run branch): back to pending."""
        self.status, self.skipped_because, self.commit = "pending", None, None
        self.reason, self.message = None, why

    def land(self, commit: str) -> None:
        """The node's commit is on the run branch: done."""
        self._expect("land", "running")
        self.status, self.commit, self.reason, self.message = "succeeded", commit, None, ""

    def revoke(self, reason: FailReason, message: str) -> None:
        """The node's landed commit was taken off the run branch (run/integration.py: the
        integrated branch fails from it on): failed, its attempt spent."""
        self._expect("revoke", "succeeded")
        self.status, self.reason, self.message, self.commit = "failed", reason, message, None

    def recover(self, commit: str, message: str = "") -> None:
        """``resume`` found the node's commit on the run branch although the journal missed it."""
        self.status, self.commit, self.reason = "succeeded", commit, None
        self.message, self.skipped_because = message, None
        self.finished_at = self.finished_at or now()

    def _expect(self, transition: str, *statuses: Status) -> None:
        if self.status not in statuses:
            raise InternalError(
                f"task {self.task_id!r}: cannot {transition} a {self.status} node "
                f"(only {', '.join(statuses)})"
            )


def upstream_summary(result: TaskResult, node: TaskNode) -> UpstreamSummary:
    """The slice of a dependency's result a downstream prompt gets: never its transcript; with
    the files of ``node``'s write scope its summary names and its change left alone."""
    finish = result.summary
    named = written_paths(finish.summary, node) if finish else []
    unchanged = [p for p in named if p not in result.files_changed]
    return UpstreamSummary(
        task_id=result.task_id,
        name=result.name,
        summary=finish.summary if finish else "",
        interfaces=finish.interfaces if finish else "",
        notes=finish.notes if finish else "",
        files_changed=result.files_changed,
        tests_passed=result.tests.passed if result.tests else None,
        unchanged_named=unchanged,
        defines=patch_definitions(result.diff),
    )


def reduce(
    record: TaskResult,
    worker: WorkerResult,
    ws: Workspace,
    base: str,
    commit: str | None,
    audit_violations: Sequence[Violation],
    tests: TestOutcome | None,
    staged: ChangeFacts | None = None,
) -> TaskResult:
    """Fill ``record`` from the worker's outcome and the committed worktree; ``staged`` is
    the change the commit holds over ``base`` when the caller already read it (no git then)."""
    record.summary = worker.finish
    record.unclaimed = worker.unclaimed
    record.tokens = worker.usage
    record.tool_calls = worker.tool_calls
    record.calls = worker.calls
    record.truncated_responses = worker.truncated
    record.violations = [*worker.violations, *audit_violations]
    record.tests = tests or worker.tests
    record.transcript = worker.transcript
    record.commit = commit
    if commit:
        stat = diffstat(ws, base, commit) if staged is None else staged.stat
        record.diffstat = stat
        record.files_changed = [f.path for f in stat.files]
        text = diff(ws, base, commit, record.files_changed) if staged is None else staged.patch
        record.diff = (
            text if len(text) <= MAX_DIFF_CHARS else text[:MAX_DIFF_CHARS] + "\n[diff truncated]\n"
        )
    return record
