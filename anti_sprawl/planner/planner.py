"""The planner: requirement + repository map -> a validated Plan, with a bounded repair loop.

The model gets read-only tools (``read_file``, ``list_dir``, ``grep`` through a ``Firewall``
whose read scope is the map's file set and whose write scope is empty, so ignored files, secrets
and ``.git/`` are refused and never listed) and ``submit_plan``. Each
submission is validated against the repository; its errors go back as the tool's error result,
up to ``max_rounds`` submissions. A valid plan gets scope assistance (``planner.assist``) before
it is returned. Tokens are capped over the whole planning conversation.

One cohesive module over 300 lines: ``_Session`` is the loop's policy, its tools and the state
they share (submissions, the manifest, the caps); splitting would pass that state around.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..agent.artifacts import Observer
from ..agent.budget import Budget
from ..agent.dispatch import Ending, Handler, Tool, ToolOutcome, ToolRefusal
from ..agent.handlers import read_handlers, tool_table
from ..agent.loop import Loop
from ..context.guidance import PLANNER_GUIDANCE_TOKENS, guidance_paths, read_guidance
from ..context.manifest import save_manifest
from ..errors import UsageError
from ..fs.firewall import Firewall, FirewallError, Violation
from ..fs.repofiles import list_repo_files
from ..fs.scopes import FileSet
from ..git.cmd import run_git
from ..ids import PLANNER_TASK_ID, SUBMIT_PLAN_TOOL
from ..plan.intent_checks import named_paths
from ..plan.model import Plan
from ..plan.validate import Problem, Report, validate
from ..providers.base import (
    ModelRequest,
    ModelResponse,
    Provider,
    ToolCall,
    Usage,
    UserMessage,
)
from ..providers.limits import cut_message
from ..providers.text_calls import fenced_objects, text_call_nudge
from .assist import (
    default_budgets,
    estimated_tokens,
    expand_read_scopes,
    fit_context_window,
    missing_test_warnings,
    with_named_files,
    with_used_definitions,
    with_writer_dependencies,
)
from .prompt import (
    PromptPart,
    first_message_parts,
    planner_manifest,
    planner_system,
    submit_plan_spec,
)
from .repomap.map import build_repo_map
from .submission_repairs import (
    reshaped_submission,
    unasked_models,
    with_earlier_tasks,
    without_fewer_attempts,
    without_missing_reads,
    without_unknown_dependencies,
    without_unresolved_base,
)
from .tools import (
    OBSERVATION_CHARS,
    default_plan_id,
    feedback,
    missing_budgets,
    model_problems,
    submission_data,
    unwritten_feedback,
)

__all__ = ["NUDGE", "Outcome", "PlannerResult", "default_plan_id", "plan_requirement"]

Outcome = Literal["planned", "invalid", "budget", "stalled", "provider"]
NUDGE = (
    "Call submit_plan now with the whole plan (read_file, list_dir and grep are there if you "
    "still need to look at the repository)."
)
# After an empty reply: the same NUDGE again drew empty replies in 0.1 s each, the prompt
# cached and the answer one end-of-text token (make real-model 2026-12-04 run o, planner calls
# 11-13), as the worker's did (agent/worker.py, EMPTY_REPLY_PROMPT).
EMPTY_NUDGE = (
    "Your reply was empty, so nothing was done. Send the whole plan now as one submit_plan "
    'call, written as a JSON object in a ```json block: {"name": "submit_plan", "arguments": '
    '{"tasks": [...]}}.'
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
    estimated_tokens: int = Field(
        default=0, description="Cost ceiling: every call of every task at its per-call cap."
    )
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
    models: Sequence[str] = (),
    max_output_tokens: int | None = None,
    lean: bool = False,
    context_window: tuple[int, str] | None = None,
) -> PlannerResult:
    """Ask ``provider`` for a plan of ``requirement`` on ``repo`` and validate it.

    ``lean``: the lean prompt, for a local server (``prompt.planner_system``).
    ``context_window``: (tokens, where it was read) of the server the plan's nodes will run
    on; a ``token_budget`` above it is lowered, with a warning (``fit_context_window``).

    With ``models`` (``plan --models``) the planner may give each task one of them, saying
    why in the task's goal; the plan's default model is the first unless it picks another.

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
    # One listing for the map and for scope assistance (the map shows its first part).
    listing = list_repo_files(repo, max_files=MAX_LISTED_FILES)
    repo_map = build_repo_map(repo, requirement, token_budget=map_budget, listing=listing)
    parts = first_message_parts(
        requirement,
        repo_map.text,
        max_tool_calls=max_tool_calls,
        plan_id=plan_id,
        omitted=repo_map.omitted,
        models=models,
        guidance=read_guidance(repo, guidance_paths(repo, []), PLANNER_GUIDANCE_TOKENS),
    )
    # The tools see exactly the map's files (tracked and untracked-not-ignored, minus secrets):
    # an ignored settings file or folder is refused and never listed (docs/security.md P20).
    with Firewall(repo, FileSet(listing.files), []) as firewall:
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
            files=listing.files,
            plan_id=plan_id,
            manifest_dir=manifest_dir,
            base=_head(repo),
            models=tuple(models),
            max_output_tokens=max_output_tokens or MAX_OUTPUT_TOKENS,
            lean=lean,
            context_window=context_window,
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
    """The planner policy over the agent loop: explore, submit, repair."""

    requirement: str
    repo: Path
    provider: Provider
    firewall: Firewall
    parts: list[PromptPart]
    max_rounds: int
    max_tool_calls: int
    token_budget: int
    expand: bool
    files: list[str]  # the repository's listing, made once with the map
    plan_id: str | None
    manifest_dir: Path | None
    base: str | None
    models: tuple[str, ...] = ()
    max_output_tokens: int = MAX_OUTPUT_TOKENS
    tool_calls: int = 0
    rounds: int = 0
    nudges: int = 0
    report: Report | None = None
    manifests: list[Path] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    _seen: int = 0
    # the (code, message) pairs of the last invalid submission: a repeat earns the skeleton
    _last_errors: set[tuple[str, str]] = field(default_factory=set)
    _told_unwritten: bool = False
    # the last submission's tasks: a repair may re-send only those it fixed (with_earlier_tasks)
    _earlier_tasks: list[Any] = field(default_factory=list)
    _prose_plans: set[str] = field(default_factory=set)  # replies read as a plan (once each)
    # the valid plan sent back once for that warning: still the answer if none better comes
    _held: tuple[Plan, dict[str, Any], Report] | None = None
    lean: bool = False  # the lean prompt (prompt.planner_system)
    context_window: tuple[int, str] | None = None  # (tokens, source) the nodes will run with

    def __post_init__(self) -> None:
        explore = read_handlers(self.firewall, OBSERVATION_CHARS)
        tools = {
            name: Tool(spec=tool.spec, args=tool.args, run=self._capped(tool.run))
            for name, tool in tool_table(explore).items()
        }
        tools[SUBMIT_PLAN_TOOL] = Tool(
            spec=submit_plan_spec(self.lean), args=None, run=self._submit
        )
        self.loop = Loop(
            task_id=PLANNER_TASK_ID,
            provider=self.provider,
            system=planner_system(self.lean),
            tools=tools,
            budget=Budget(
                total=self.token_budget,
                max_output=self.max_output_tokens,
                min_output=MIN_OUTPUT_TOKENS,
            ),
            # every turn either spends a tool call or a round, or is one of a few nudges/refusals
            max_calls=self.max_tool_calls + self.max_rounds + 2 * MAX_NUDGES,
            observer=Observer(PLANNER_TASK_ID, OBSERVATION_CHARS),
            messages=[UserMessage(content="".join(p.text for p in self.parts))],
            on_request=self._save_manifest,
        )

    def run(self) -> PlannerResult:
        ending = self.loop.run(self)
        if isinstance(ending.value, PlannerResult):
            return ending.value
        if self._held is not None:  # sent back with a warning, and nothing better came
            return self._accept(*self._held)
        left = self.token_budget - self.loop.budget.spent.total
        outcome: Outcome
        message = ending.message
        if ending.reason == "budget" and left >= 0:
            outcome = "budget"
            message = (
                f"the planner's token budget of {self.token_budget:,} is spent "
                f"({left:,} left, not enough for another call)"
            )
        elif ending.reason == "budget":
            outcome = "budget"
            message = (
                f"the planner used {self.loop.budget.spent.total:,} tokens, over its budget "
                f"of {self.token_budget:,}"
            )
        elif ending.reason == "calls":
            outcome, message = "stalled", f"no valid plan after {self.loop.calls} model calls"
        elif ending.reason in ("invalid", "stalled"):
            outcome = ending.reason  # type: ignore[assignment]
        else:
            outcome, message = "provider", f"model call failed: {ending.message}"
        return self._fail(outcome, message)

    # -- the policy ----------------------------------------------------------------------

    def text_turn(self, response: ModelResponse) -> str | Ending | list[ToolCall]:
        plan = self._plan_in_prose(response.text)
        if plan is not None:
            return [plan]
        self.nudges += 1
        if self.nudges > MAX_NUDGES:
            return Ending("stalled", "the model did not call submit_plan")
        if response.text_call_problem:
            return text_call_nudge(response.text_call_problem, self.loop.specs)
        return NUDGE if response.text.strip() else EMPTY_NUDGE

    def _plan_in_prose(self, text: str) -> ToolCall | None:
        """A reply that explains the plan and then writes it whole as one fenced JSON block
        (recorded from Qwen2.5-Coder-1.5B, tests/fixtures/real_model/planner_run5.json), or the
        whole submit_plan call so (planner_run7.json), is that submission: it is validated like
        any other. Only one block with a task list counts, and only once per reply (the same
        reply again is not a new submission). So is one block holding a single task (recorded,
        make real-model 2026-12-03 run 12, planner calls 1-7: ``{"task_id": ..., "goal": ...,
        "write_scope": [...]}``, read as a call of a tool named by its ``name`` field): the
        plan of that one task."""
        plans = [
            plan
            for data in fenced_objects(text)
            # the plan itself, or the call written out: {"name": "submit_plan", "arguments": ...}
            for plan in [data.get("arguments") if data.get("name") == SUBMIT_PLAN_TOOL else data]
            if isinstance(plan, dict) and isinstance(plan.get("tasks"), list)
        ]
        if not plans:
            plans = [{"tasks": [data]} for data in fenced_objects(text) if _one_task(data)]
        if len(plans) != 1 or text in self._prose_plans:
            return None
        self._prose_plans.add(text)
        call_id = f"call_prose_plan_{len(self._prose_plans)}"
        return ToolCall(id=call_id, name=SUBMIT_PLAN_TOOL, arguments=plans[0], from_text=True)

    def shown(self, text: str) -> str:
        return text

    def cut_turn(self, max_output_tokens: int, text: str) -> str | Ending:
        self.nudges += 1
        if self.nudges > MAX_NUDGES:
            return Ending("stalled", "the model's responses kept hitting the output limit")
        return cut_message(max_output_tokens, text, CUT_ADVICE)

    def before_tool(self, call: ToolCall) -> Ending | None:
        self.nudges = 0
        self._seen = len(self.firewall.violations)
        return None

    def after_tool(self, call: ToolCall, outcome: ToolOutcome | None) -> Ending | None:
        # only the model's refused calls count; the orchestrator's own reads are not violations
        self.violations += self.firewall.violations[self._seen :]
        return None

    def compactions(self) -> list[Callable[[], bool]]:
        return []

    def compact_early(self) -> None:
        return None

    def explain(self) -> str:
        return f"the planner's budget is {self.token_budget:,} tokens over all its calls"

    # -- tools ---------------------------------------------------------------------------

    def _capped(self, run: Handler) -> Handler:
        def capped(args: Any) -> ToolOutcome:
            if self.tool_calls >= self.max_tool_calls:
                raise ToolRefusal(
                    f"the cap of {self.max_tool_calls} exploration calls is reached; "
                    f"call {SUBMIT_PLAN_TOOL} with the whole plan now"
                )
            self.tool_calls += 1
            return run(args)

        return capped

    def _submit(self, raw: dict[str, Any]) -> ToolOutcome:
        """Validate one submission: the planner's result when valid, else the errors."""
        self.rounds += 1
        data = submission_data(
            raw,
            requirement=self.requirement,
            plan_id=self.plan_id or default_plan_id(self.requirement),
            force_id=self.plan_id is not None,
            base=self.base,
        )
        data, reshaped = reshaped_submission(data)
        data, whole = with_earlier_tasks(data, self._earlier_tasks)
        reshaped += whole
        if isinstance(data.get("tasks"), list):
            self._earlier_tasks = data["tasks"]
        data, left_out = unasked_models(data, self.models)
        data, fewer = without_fewer_attempts(data)
        left_out = [*reshaped, *left_out, *fewer]
        report = validate(data, self.repo)
        data, unread = without_missing_reads(data, report)
        data, unbased = without_unresolved_base(data, report, self.base)
        data, undepended = without_unknown_dependencies(data, report)
        unread += unbased + undepended
        if unread:
            report = validate(data, self.repo)
            left_out += unread
        if left_out:
            report = report.model_copy(update={"warnings": [*left_out, *report.warnings]})
        chosen = model_problems(report.plan, self.models) if report.plan is not None else []
        if chosen:
            errors = [*report.errors, *chosen]
            report = Report(valid=False, errors=errors, warnings=report.warnings, plan=report.plan)
        self.report = report
        if not report.valid or report.plan is None:
            seen = {(p.code, p.message) for p in report.errors}
            repeated = bool(seen & self._last_errors)
            self._last_errors = seen
            named = [p for p in named_paths(self.requirement) if p in self.files]
            text = feedback(
                self.report, self.rounds, self.max_rounds, repeated=repeated, paths=named
            )
            ending = None
            if self.rounds >= self.max_rounds:
                message = f"the plan is still invalid after {self.rounds} submission(s)"
                ending = Ending("invalid", message)
            return ToolOutcome(text, status="error", wrap=False, ending=ending)
        plan = report.plan
        if self.models and plan.default_model is None:
            plan = plan.model_copy(update={"default_model": self.models[0]})
        unwritten = [p for p in report.warnings if p.code == "requirement_path_unwritten"]
        if unwritten and not self._told_unwritten and self.rounds < self.max_rounds:
            # once: a plan that cannot change a file the requirement names is sent back; it
            # stays the answer if no better one comes (a requirement may name a file to leave
            # alone: "leave orders/util/ untouched")
            self._told_unwritten = True
            self._held = (plan, raw, report)
            return ToolOutcome(unwritten_feedback(unwritten), status="error", wrap=False)
        result = self._accept(plan, raw, report)
        return ToolOutcome("planned", wrap=False, ending=Ending("planned", value=result))

    def _accept(self, plan: Plan, raw: dict[str, Any], report: Report) -> PlannerResult:
        """A valid submission, with scope assistance applied where it keeps the plan valid."""
        plan, given = with_named_files(plan, report.warnings)
        given_warnings = validate(plan, self.repo).warnings if given else report.warnings
        plan, ordered = with_writer_dependencies(plan, given_warnings)
        # ordered now, the files it uses from its new dependencies may be added to its reads
        used = validate(plan, self.repo).warnings if ordered else given_warnings
        plan, covered = with_used_definitions(plan, used)
        plan, warnings = self._assist(plan, missing_budgets(raw))
        warnings = given + ordered + covered + warnings
        final = validate(plan, self.repo)
        if not final.valid or final.plan is None:  # assistance must never break a valid plan
            warnings.append("scope assistance was not applied: it made the plan invalid")
            plan, final = report.plan or plan, report
        left_out = [
            p for p in report.warnings if p.code in ("model_left_out", "submission_reshaped")
        ]
        if left_out and final is not report:  # said of the submission, not of the final plan
            final = final.model_copy(update={"warnings": [*left_out, *final.warnings]})
        warnings += [p.message for p in final.warnings]
        self.report = final
        return self._result("planned", "", plan, warnings)

    def _assist(self, plan: Plan, missing: dict[str, set[str]]) -> tuple[Plan, list[str]]:
        files = self.files
        warnings: list[str] = []
        if self.expand:
            plan, warnings = expand_read_scopes(plan, files, self._read)
        plan = default_budgets(plan, missing, files, self._read)
        window, source = self.context_window or (None, "")
        plan, lowered = fit_context_window(plan, window, source)
        return plan, missing_test_warnings(plan, files) + warnings + lowered

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
            requests=self.loop.calls,
            tool_calls=self.tool_calls,
            usage=self.loop.budget.spent,
            warnings=warnings,
            estimated_tokens=estimated_tokens(plan) if plan is not None else 0,
            violations=list(self.violations),
            manifest_paths=list(self.manifests),
        )

    def _save_manifest(self, request: ModelRequest, n: int) -> None:
        if self.manifest_dir is None:
            return
        manifest = planner_manifest(request, self.parts, n=n)
        self.manifests.append(save_manifest(self.manifest_dir, manifest))


def _one_task(data: dict[str, Any]) -> bool:
    """Whether ``data`` is one task of a plan (an id, a goal, a write scope), not a plan."""
    return (
        isinstance(data.get("task_id"), str)
        and isinstance(data.get("goal"), str)
        and isinstance(data.get("write_scope"), list)
        and "tasks" not in data
    )
