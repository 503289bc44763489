"""The planner: requirement + repository map -> a validated Plan, with a bounded repair loop.

The model gets read-only tools (``read_file``, ``list_dir``, ``grep`` through a ``Firewall``
whose write scope is empty, so secrets and ``.git/`` are refused) and ``submit_plan``. Each
submission is validated against the repository; its errors go back as the tool's error result,
up to ``max_rounds`` submissions. A valid plan gets scope assistance (``scope_assist``) before
it is returned. Tokens are capped over the whole planning conversation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from .errors import ProviderError, UsageError
from .firewall import Firewall, FirewallError, Violation
from .gitcmd import run_git
from .plan import Plan, atomic_write_text
from .planner_prompt import (
    PromptPart,
    first_message_parts,
    planner_manifest,
    planner_system,
    planner_tools,
)
from .planner_tools import (
    default_plan_id,
    explore,
    feedback,
    missing_budgets,
    submission_data,
    tool_error,
)
from .providers.base import (
    INVALID_ARGUMENTS_KEY,
    AssistantMessage,
    Message,
    ModelRequest,
    ModelResponse,
    Provider,
    ToolCall,
    ToolResult,
    ToolResultMessage,
    Usage,
    UserMessage,
    estimate_request_tokens,
    observe_usage,
)
from .providers.limits import cut_message
from .providers.scripted import PLANNER_TASK_ID, SUBMIT_PLAN_TOOL
from .repofiles import list_repo_files
from .repomap import build_repo_map
from .scope_assist import (
    default_budgets,
    estimated_tokens,
    expand_read_scopes,
    missing_test_warnings,
)
from .tokens import TokenCounter
from .validate import Problem, Report, validate

__all__ = ["NUDGE", "Outcome", "PlannerResult", "default_plan_id", "plan_requirement"]

Outcome = Literal["planned", "invalid", "budget", "stalled", "provider"]
NUDGE = (
    "Call submit_plan now with the whole plan (read_file, list_dir and grep are there if you "
    "still need to look at the repository)."
)
MAX_OUTPUT_TOKENS = 8192
CUT_ADVICE = "Call submit_plan again with a shorter plan: concise goals, no code in them."
MIN_OUTPUT_TOKENS = 512  # less than this cannot hold a plan: stop instead of asking
MAX_NUDGES = 3
MAX_LISTED_FILES = 200_000


class PlannerResult(BaseModel):
    """What planning produced: the plan (when valid), the last validation report, the cost."""

    outcome: Outcome
    message: str = ""
    plan: Plan | None = None
    report: Report
    rounds: int = Field(description="submit_plan calls made.")
    requests: int = Field(description="Model calls made.")
    tool_calls: int = Field(description="Exploration tool calls made (read_file/list_dir/grep).")
    usage: Usage = Field(default_factory=Usage)
    warnings: list[str] = Field(default_factory=list)
    estimated_tokens: int = Field(default=0, description="Sum of the plan's token budgets.")
    violations: list[Violation] = Field(default_factory=list)
    manifest_paths: list[Path] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.outcome == "planned" and self.plan is not None


def plan_requirement(
    requirement: str,
    repo: Path,
    provider: Provider,
    *,
    max_rounds: int = 3,
    max_tool_calls: int = 20,
    map_budget: int = 6000,
    expand_read_scope: bool = False,
    plan_id: str | None = None,
    manifest_dir: Path | None = None,
    token_budget: int = 200_000,
    max_output_tokens: int | None = None,
) -> PlannerResult:
    """Ask ``provider`` for a plan of ``requirement`` on ``repo`` and validate it.

    At most ``max_rounds`` submissions, ``max_tool_calls`` exploration calls and
    ``token_budget`` tokens over all model calls, each response capped at
    ``max_output_tokens`` (default ``MAX_OUTPUT_TOKENS``). Provider failures end planning with outcome
    ``provider``; nothing is raised for a model that does not produce a valid plan.
    """
    if not requirement.strip():
        raise UsageError("the requirement is empty")
    if not repo.is_dir():
        raise UsageError(f"repository not found: {repo}")
    if max_rounds < 1 or max_tool_calls < 0 or token_budget < 1:
        raise UsageError("max_rounds and token_budget must be >= 1, max_tool_calls >= 0")
    repo_map = build_repo_map(repo, requirement, token_budget=map_budget)
    parts = first_message_parts(
        requirement,
        repo_map.text,
        max_tool_calls=max_tool_calls,
        plan_id=plan_id,
        omitted=repo_map.omitted,
    )
    with Firewall(repo, ["**"], []) as firewall:
        session = _Session(
            requirement=requirement,
            repo=repo,
            provider=provider,
            firewall=firewall,
            parts=parts,
            max_rounds=max_rounds,
            max_tool_calls=max_tool_calls,
            token_budget=token_budget,
            expand=expand_read_scope,
            plan_id=plan_id,
            manifest_dir=manifest_dir,
            base=_head(repo),
            max_output_tokens=max_output_tokens or MAX_OUTPUT_TOKENS,
        )
        return session.run()


def _head(repo: Path) -> str | None:
    if not (repo / ".git").exists():
        return None
    proc = run_git(["rev-parse", "--verify", "-q", "HEAD"], repo, check=False)
    sha = proc.stdout.decode("ascii", "replace").strip()
    return sha if proc.returncode == 0 and sha else None


@dataclass
class _Session:
    requirement: str
    repo: Path
    provider: Provider
    firewall: Firewall
    parts: list[PromptPart]
    max_rounds: int
    max_tool_calls: int
    token_budget: int
    expand: bool
    plan_id: str | None
    manifest_dir: Path | None
    base: str | None
    max_output_tokens: int = MAX_OUTPUT_TOKENS
    messages: list[Message] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    counter: TokenCounter = field(default_factory=TokenCounter)
    requests: int = 0
    tool_calls: int = 0
    rounds: int = 0
    nudges: int = 0
    report: Report | None = None
    manifests: list[Path] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.system = planner_system()
        self.tools = planner_tools()
        self.messages = [UserMessage(content="".join(p.text for p in self.parts))]
        # every turn either spends a tool call or a round, or is one of a few nudges/refusals
        self.max_requests = self.max_tool_calls + self.max_rounds + 2 * MAX_NUDGES

    def run(self) -> PlannerResult:
        while True:
            if self.requests >= self.max_requests:
                return self._fail("stalled", f"no valid plan after {self.requests} model calls")
            request = self._fit()
            if request is None:
                left = self.token_budget - self.usage.total
                return self._fail(
                    "budget",
                    f"the planner's token budget of {self.token_budget:,} is spent "
                    f"({left:,} left, not enough for another call)",
                )
            self._save_manifest(request)
            self.requests += 1
            try:
                response = self.provider.complete(request)
            except ProviderError as exc:
                return self._fail("provider", f"model call failed: {exc}")
            self._account(request, response)
            if self.usage.total > self.token_budget:
                return self._fail(
                    "budget",
                    f"the planner used {self.usage.total:,} tokens, over its budget of "
                    f"{self.token_budget:,}",
                )
            cut = response.stop_reason == "max_tokens"
            if cut or not response.tool_calls:
                self.nudges += 1
                if self.nudges > MAX_NUDGES:
                    return self._fail("stalled", "the model did not call submit_plan")
                # A cut response's tool call is incomplete: never run it, say what happened.
                text = cut_message(request.max_output_tokens, CUT_ADVICE) if cut else NUDGE
                self.messages.append(UserMessage(content=text))
                continue
            results: list[ToolResult] = []
            for call in response.tool_calls:
                if call.name != SUBMIT_PLAN_TOOL:
                    results.append(self._explore(call))
                    continue
                done = self._submit(call)
                if done is not None:
                    return done
                results.append(feedback(call, self.report, self.rounds, self.max_rounds))
                if self.rounds >= self.max_rounds:
                    return self._fail(
                        "invalid",
                        f"the plan is still invalid after {self.rounds} submission(s)",
                    )
            self.messages.append(ToolResultMessage(results=results))

    # -- model calls ---------------------------------------------------------------------

    def _request(self, max_out: int) -> ModelRequest:
        return ModelRequest(
            system=self.system,
            messages=list(self.messages),
            tools=self.tools,
            max_output_tokens=max(1, max_out),
            task_id=PLANNER_TASK_ID,
            call_id=f"{PLANNER_TASK_ID}-{self.requests}",
        )

    def _fit(self) -> ModelRequest | None:
        """The next request with its output capped to what the budget leaves, or None."""
        remaining = self.token_budget - self.usage.total
        needed = estimate_request_tokens(self._request(self.max_output_tokens), self.counter)
        max_out = min(self.max_output_tokens, remaining - needed)
        return self._request(max_out) if max_out >= MIN_OUTPUT_TOKENS else None

    def _account(self, request: ModelRequest, response: ModelResponse) -> None:
        self.usage = self.usage.plus(response.usage)
        observe_usage(request, response.usage, self.counter)
        cut = response.stop_reason == "max_tokens"
        calls = [] if cut else response.tool_calls
        self.messages.append(AssistantMessage(text=response.text, tool_calls=calls))
        if calls:
            self.nudges = 0

    # -- tools ---------------------------------------------------------------------------

    def _explore(self, call: ToolCall) -> ToolResult:
        if self.tool_calls >= self.max_tool_calls:
            return tool_error(
                call,
                f"the cap of {self.max_tool_calls} exploration calls is reached; "
                f"call {SUBMIT_PLAN_TOOL} with the whole plan now",
            )
        self.tool_calls += 1
        seen = len(self.firewall.violations)
        result = explore(self.firewall, call, [t.name for t in self.tools])
        # only the model's refused calls count; the orchestrator's own reads are not violations
        self.violations += self.firewall.violations[seen:]
        return result

    def _submit(self, call: ToolCall) -> PlannerResult | None:
        """Validate one submission; the final result when it is valid, else None."""
        self.rounds += 1
        raw = call.arguments
        if INVALID_ARGUMENTS_KEY in raw:
            problem = Problem(code="schema", message="submit_plan arguments are not a JSON object")
            self.report = Report(valid=False, errors=[problem])
            return None
        data = submission_data(
            raw,
            requirement=self.requirement,
            plan_id=self.plan_id or default_plan_id(self.requirement),
            force_id=self.plan_id is not None,
            base=self.base,
        )
        report = validate(data, self.repo)
        self.report = report
        if not report.valid or report.plan is None:
            return None
        plan, warnings = self._assist(report.plan, missing_budgets(raw))
        final = validate(plan, self.repo)
        if not final.valid or final.plan is None:  # assistance must never break a valid plan
            warnings.append("scope assistance was not applied: it made the plan invalid")
            plan, final = report.plan, report
        warnings += [p.message for p in final.warnings]
        self.report = final
        return self._result("planned", "", plan, warnings)

    def _assist(self, plan: Plan, missing: dict[str, set[str]]) -> tuple[Plan, list[str]]:
        files = list_repo_files(self.repo, max_files=MAX_LISTED_FILES).files
        warnings: list[str] = []
        if self.expand:
            plan, warnings = expand_read_scopes(plan, files, self._read)
        plan = default_budgets(plan, missing, files, self._read)
        return plan, missing_test_warnings(plan, files) + warnings

    def _read(self, path: str) -> str | None:
        try:
            return self.firewall.read_text(path)
        except FirewallError:
            return None

    # -- results and manifests -----------------------------------------------------------

    def _fail(self, outcome: Outcome, message: str) -> PlannerResult:
        report = self.report or Report(valid=False)
        if outcome != "invalid":
            code = f"planner_{outcome}"
            extra = Problem(code=code, message=message)
            report = Report(valid=False, errors=[*report.errors, extra], warnings=report.warnings)
        return self._result(outcome, message, None, [], report)

    def _result(
        self,
        outcome: Outcome,
        message: str,
        plan: Plan | None,
        warnings: list[str],
        report: Report | None = None,
    ) -> PlannerResult:
        return PlannerResult(
            outcome=outcome,
            message=message,
            plan=plan,
            report=report or self.report or Report(valid=False),
            rounds=self.rounds,
            requests=self.requests,
            tool_calls=self.tool_calls,
            usage=self.usage,
            warnings=warnings,
            estimated_tokens=estimated_tokens(plan) if plan is not None else 0,
            violations=list(self.violations),
            manifest_paths=list(self.manifests),
        )

    def _save_manifest(self, request: ModelRequest) -> None:
        if self.manifest_dir is None:
            return
        manifest = planner_manifest(request, self.parts, n=self.requests)
        path = self.manifest_dir / PLANNER_TASK_ID / f"{self.requests}.json"
        atomic_write_text(path, manifest.model_dump_json(indent=2) + "\n")
        self.manifests.append(path)
