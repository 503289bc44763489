"""What one case measured, and the per-variant aggregates the report compares.

Token figures come from two places kept side by side: the run's journal (``TaskResult.tokens``)
and the usage the provider reported for each recorded request; for the scripted provider the
input is also recounted from the request text. ``agree`` says the sources match exactly.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field, computed_field

from ..agent.budget import total_usage
from ..providers.base import Usage

__all__ = [
    "Aggregate",
    "CaseResult",
    "CheckOutcome",
    "Leak",
    "Rates",
    "SuiteResult",
    "TaskMetrics",
    "Tokens",
    "VariantResult",
    "aggregate",
    "paired_input_ratio",
    "ratio",
]


# Token counts: the one usage type (``input_tokens`` includes cached tokens).
Tokens = Usage


class TaskMetrics(BaseModel):
    """One task of one run: the journal's figures and the provider seam's, side by side."""

    task_id: str
    status: str
    reason: str | None = None
    tokens: Tokens = Field(description="From the run's TaskResult.")
    provider_tokens: Tokens = Field(description="Sum of the usage reported per recorded request.")
    recounted_input: int | None = Field(
        default=None, description="Input recounted from the request text (scripted provider)."
    )
    calls: int = Field(description="Model calls, per the journal.")
    recorded_calls: int = Field(description="Requests seen at the provider seam.")
    first_call_input: int | None = None
    call_inputs: list[int] = Field(
        default_factory=list, description="Input tokens of each answered call, in order."
    )
    tool_calls: int = 0
    violations: int = 0
    attempts: int = Field(default=1, description="Attempts the task made (all sessions).")
    first_attempt: bool = Field(
        default=False, description="Its first attempt succeeded (no retry needed)."
    )
    empty_success: bool = Field(
        default=False,
        description="It succeeded with no file changed though it was to change some (a false "
        "success: a model's claim without a diff).",
    )
    unclaimed: bool = Field(
        default=False,
        description="It landed without the model's finish: its change passed the whole test "
        "command after the model stopped calling tools (agent/worker.py, UNCLAIMED_ENDINGS).",
    )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def agree(self) -> bool:
        recount_ok = (
            self.recounted_input is None or self.recounted_input == self.tokens.input_tokens
        )
        same_calls = self.calls == self.recorded_calls
        return self.tokens == self.provider_tokens and recount_ok and same_calls


class CheckOutcome(BaseModel):
    """One scored check."""

    name: str
    passed: bool
    detail: str = ""


class Leak(BaseModel):
    """A forbidden string found somewhere it must never be."""

    needle: str
    where: str
    task: str | None = Field(default=None, description="For cross-task leaks: the task reached.")


class CaseResult(BaseModel):
    """One case under one variant (baseline or an ablation)."""

    case: str
    variant: str
    run_status: str = Field(description="The run's status, or 'error' when it did not finish.")
    error: str | None = None
    run_id: str | None = None
    passed: bool
    checks: list[CheckOutcome]
    tasks: list[TaskMetrics] = Field(default_factory=list)
    planner_tokens: Tokens | None = Field(default=None, description="From the planner's result.")
    planner_provider_tokens: Tokens | None = Field(
        default=None, description="Sum of the usage reported for the planner's requests."
    )
    changed: list[str] = Field(default_factory=list, description="Files changed on the branch.")
    out_of_scope: list[str] = Field(
        default_factory=list, description="Changed files outside every succeeded task's scope."
    )
    leaks: list[Leak] = Field(default_factory=list)
    cross_task_leaks: list[Leak] = Field(default_factory=list)
    run_seconds: float = 0.0
    wall_seconds: float = 0.0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def tokens(self) -> Tokens:
        return total_usage([t.tokens for t in self.tasks])

    @computed_field  # type: ignore[prop-decorator]
    @property
    def tokens_agree(self) -> bool:
        planner_ok = self.planner_tokens == self.planner_provider_tokens
        return planner_ok and all(t.agree for t in self.tasks)

    @property
    def failed_checks(self) -> list[CheckOutcome]:
        return [c for c in self.checks if not c.passed]


class Rates(BaseModel):
    """Tokens per task (means)."""

    input: float
    output: float
    cached: float
    total: float


def _mean(total: float, count: int) -> float | None:
    return round(total / count, 1) if count else None


class Aggregate(BaseModel):
    """A variant's figures over all its cases (the columns of the comparison table)."""

    variant: str
    cases: int
    passed: int
    success_rate: float
    errors: int
    tasks: int
    tasks_succeeded: int
    completion_rate: float = Field(description="Tasks that succeeded in the end.")
    tasks_first_attempt: int = Field(description="Tasks whose first attempt succeeded.")
    first_attempt_rate: float
    retried: int = Field(description="Tasks that took more than one attempt.")
    attempts: int = Field(description="Attempts over all tasks.")
    tokens: Tokens
    tokens_per_succeeded_task: Rates | None
    tokens_per_task: float | None = Field(description="Total tokens per task that made a call.")
    input_per_call: float | None
    first_call_input: float | None = Field(description="Mean input of each task's first call.")
    calls: int
    tool_calls: int
    violations: int
    out_of_scope: int
    leaks: int = Field(description="Distinct canaries found, summed over cases.")
    cross_task_leaks: int = Field(description="Distinct (task, string) pairs that reached a task.")
    tokens_agree: bool
    wall_seconds: float
    empty_successes: int = Field(
        default=0, description="Tasks that succeeded with no file changed (must be 0)."
    )
    unclaimed_successes: int = Field(
        default=0, description="Tasks that landed a passing change the model never claimed."
    )


def aggregate(variant: str, results: Sequence[CaseResult]) -> Aggregate:
    """Sum and average ``results`` (one variant's cases)."""
    tasks = [t for r in results for t in r.tasks]
    done = [t for t in tasks if t.status == "succeeded"]
    spent = [t for t in tasks if t.calls > 0]
    tokens = total_usage([t.tokens for t in tasks])
    ok = total_usage([t.tokens for t in done])
    calls = sum(t.calls for t in tasks)
    firsts = [t.first_call_input for t in tasks if t.first_call_input is not None]
    passed = sum(r.passed for r in results)
    per_done = None
    if done:
        n = len(done)
        per_done = Rates(
            input=round(ok.input_tokens / n, 1),
            output=round(ok.output_tokens / n, 1),
            cached=round(ok.cache_read_tokens / n, 1),
            total=round(ok.total / n, 1),
        )
    return Aggregate(
        variant=variant,
        cases=len(results),
        passed=passed,
        success_rate=round(passed / len(results), 4) if results else 0.0,
        errors=sum(r.error is not None for r in results),
        tasks=len(tasks),
        tasks_succeeded=len(done),
        completion_rate=round(len(done) / len(tasks), 4) if tasks else 0.0,
        tasks_first_attempt=sum(t.first_attempt for t in tasks),
        first_attempt_rate=round(sum(t.first_attempt for t in tasks) / len(tasks), 4)
        if tasks
        else 0.0,
        retried=sum(t.attempts > 1 for t in tasks),
        attempts=sum(t.attempts for t in tasks),
        tokens=tokens,
        tokens_per_succeeded_task=per_done,
        tokens_per_task=_mean(sum(t.tokens.total for t in spent), len(spent)),
        input_per_call=_mean(tokens.input_tokens, calls),
        first_call_input=_mean(sum(firsts), len(firsts)),
        calls=calls,
        tool_calls=sum(t.tool_calls for t in tasks),
        violations=sum(t.violations for t in tasks),
        out_of_scope=sum(len(r.out_of_scope) for r in results),
        leaks=sum(len({leak.needle for leak in r.leaks}) for r in results),
        cross_task_leaks=sum(
            len({(leak.task, leak.needle) for leak in r.cross_task_leaks}) for r in results
        ),
        tokens_agree=all(r.tokens_agree for r in results),
        wall_seconds=round(sum(r.wall_seconds for r in results), 2),
        empty_successes=sum(t.empty_success for t in tasks),
        unclaimed_successes=sum(t.unclaimed and t.status == "succeeded" for t in tasks),
    )


class VariantResult(BaseModel):
    """The whole suite under one variant."""

    name: str
    ablate: list[str]
    cases: list[CaseResult]
    aggregate: Aggregate


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """``numerator / denominator`` rounded, or None when either is missing or zero."""
    if not numerator or not denominator:
        return None
    return round(numerator / denominator, 2)


def paired_input_ratio(base: VariantResult, other: VariantResult) -> tuple[float | None, int]:
    """Input tokens of ``other`` / ``base`` over the model calls both made, and how many.

    Scripts are the same in both, so call n of a task is the same step of the same
    conversation: the ratio compares like with like even when one variant stops early.
    """
    theirs = {(r.case, t.task_id): t.call_inputs for r in other.cases for t in r.tasks}
    num = den = pairs = 0
    for r in base.cases:
        for t in r.tasks:
            other_calls = theirs.get((r.case, t.task_id), [])
            # zip stops at the shorter: only calls both variants made are compared
            for mine, other_call in zip(t.call_inputs, other_calls, strict=False):
                den += mine
                num += other_call
                pairs += 1
    return ratio(num, den), pairs


class SuiteResult(BaseModel):
    """Every variant's results; the first variant is the baseline."""

    variants: list[VariantResult]
    scoping_input_ratio: float | None = Field(
        default=None,
        description="Input tokens with scoping off / baseline, over the calls both made.",
    )
    scoping_paired_calls: int = 0
    scoping_first_call_ratio: float | None = Field(
        default=None, description="Mean first-call input with scoping off / baseline."
    )

    @property
    def baseline(self) -> VariantResult:
        return self.variants[0]
