"""The worker: one node's tool loop, with hard caps on tokens and tool calls.

Every file operation goes through the node's ``Firewall``; ``run_tests`` goes through the
sandboxed runner the orchestrator hands in. Before each model call the request is estimated
and a call that could overrun ``token_budget`` (its input plus the output it may produce) is
not made. Long outputs are stored as artifacts and replaced by compact observations; when the
conversation nears the budget, older observations are masked the same way.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from . import change_tools
from .artifacts import ArtifactStore, Observation
from .errors import ProviderError
from .firewall import EditError, Firewall, FirewallError, Violation
from .providers.base import (
    INVALID_ARGUMENTS_KEY,
    AssistantMessage,
    Message,
    ModelRequest,
    ModelResponse,
    Provider,
    ScriptExhausted,
    SystemBlock,
    ToolCall,
    ToolResult,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
    estimate_request_tokens,
    observe_usage,
)
from .providers.limits import cut_message
from .redact import redact_data
from .tokens import TokenCounter
from .tools import WORKER_TOOLS, FinishArgs, tool_args_model
from .trust import wrap_data

__all__ = [
    "TestOutcome",
    "TokenUsage",
    "WorkerContext",
    "WorkerLimits",
    "WorkerResult",
    "run_worker",
]

Reason = Literal["finished", "budget", "tool_calls", "script", "provider", "stopped"]
CONTINUE_PROMPT = "Continue with your tools; call `finish` when the task is done."


class TokenUsage(BaseModel):
    """Tokens summed over a node's calls (input includes cached tokens)."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0

    @property
    def total(self) -> int:
        return self.input + self.output

    @classmethod
    def of_usage(cls, usage: Usage) -> TokenUsage:
        """The counts of one provider call."""
        return cls(
            input=usage.input_tokens,
            output=usage.output_tokens,
            cache_read=usage.cache_read_tokens,
            cache_write=usage.cache_write_tokens,
        )

    def plus(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            input=self.input + other.input,
            output=self.output + other.output,
            cache_read=self.cache_read + other.cache_read,
            cache_write=self.cache_write + other.cache_write,
        )

    @classmethod
    def sum(cls, items: Sequence[TokenUsage]) -> TokenUsage:
        total = cls()
        for item in items:
            total = total.plus(item)
        return total


class TestOutcome(BaseModel):
    """One run of the node's test command."""

    __test__ = False  # not a pytest test class

    command: list[str]
    exit_code: int | None
    timed_out: bool = False
    tail: str = ""
    log: str | None = None
    layer: str = ""
    limit: str = ""  # which sandbox limit (probably) ended the run, in words; "" for none

    @property
    def passed(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


class WorkerLimits(BaseModel):
    token_budget: int = Field(gt=0)
    max_tool_calls: int = Field(gt=0)
    max_output_tokens: int = 4096
    min_output_tokens: int = 64
    observation_chars: int = 6000
    mask_ratio: float = 0.5  # mask old observations once a request needs this share of what's left


class WorkerResult(BaseModel):
    """What the loop produced; the reducer turns it (plus the worktree) into a TaskResult."""

    task_id: str
    status: Literal["succeeded", "failed"]
    reason: Reason
    message: str = ""
    finish: FinishArgs | None = None
    usage: TokenUsage = Field(default_factory=TokenUsage)
    calls: int = 0
    tool_calls: int = 0
    violations: list[Violation] = Field(default_factory=list)
    tool_errors: list[str] = Field(default_factory=list)
    truncated: int = Field(default=0, description="Responses cut at the output limit.")
    tests: TestOutcome | None = None
    transcript: str | None = None


@dataclass
class WorkerContext:
    """Everything one worker run needs; built by the scheduler from the plan and the run."""

    task_id: str
    provider: Provider
    firewall: Firewall
    system: list[SystemBlock]
    first_message: str
    limits: WorkerLimits
    artifacts: ArtifactStore
    counter: TokenCounter = field(default_factory=TokenCounter)
    # the node's test command with extra arguments appended (none: the whole command)
    run_tests: Callable[[Sequence[str]], TestOutcome] | None = None
    tools: tuple[ToolSpec, ...] = WORKER_TOOLS
    on_request: Callable[[ModelRequest, int], None] | None = None
    on_tool: Callable[[str], None] | None = None  # after each executed tool call (crash tests)
    redact: Callable[[str], str] = str  # scrubs secrets from observations (see redact.py)
    stop: threading.Event = field(default_factory=threading.Event)


@dataclass
class _State:
    messages: list[Message]
    usage: TokenUsage = field(default_factory=TokenUsage)
    calls: int = 0
    tool_calls: int = 0
    tool_errors: list[str] = field(default_factory=list)
    truncated: int = 0
    tests: TestOutcome | None = None
    kept: dict[str, _Kept] = field(default_factory=dict)  # call_id -> the full observation
    transcript: list[dict[str, Any]] = field(default_factory=list)
    transcript_ref: str | None = None
    masked: set[str] = field(default_factory=set)


@dataclass
class _Kept:
    status: str
    text: str
    ref: str | None = None


def run_worker(ctx: WorkerContext) -> WorkerResult:
    """Run the tool loop until ``finish``, a cap, a provider failure or a stop request."""
    state = _State(messages=[UserMessage(content=ctx.first_message)])
    limits = ctx.limits
    while True:
        if ctx.stop.is_set():
            return _result(ctx, state, "failed", "stopped", "stopped by the orchestrator")
        request = _fit_request(ctx, state)
        if request is None:
            left = limits.token_budget - state.usage.total
            msg = f"the next model call could overrun the token budget ({left:,} tokens left)"
            return _result(ctx, state, "failed", "budget", msg)
        state.calls += 1
        if ctx.on_request:
            ctx.on_request(request, state.calls)
        try:
            # providers retry retryable errors themselves, with bounded backoff
            response = ctx.provider.complete(request)
        except ProviderError as exc:
            reason: Reason = "script" if isinstance(exc, ScriptExhausted) else "provider"
            _log(ctx, state, {"event": "error", "message": str(exc)})
            return _result(ctx, state, "failed", reason, str(exc))
        _account(ctx, state, request, response)
        if state.usage.total > limits.token_budget:
            msg = f"the provider reported {state.usage.total:,} tokens, over the budget"
            return _result(ctx, state, "failed", "budget", msg)
        if response.stop_reason == "max_tokens":
            # A cut response's tool call is incomplete: never run it, say what happened.
            state.truncated += 1
            told = cut_message(request.max_output_tokens)
            state.messages.append(UserMessage(content=told))
            _log(ctx, state, {"event": "cut", "message": told})
            continue
        if not response.tool_calls:
            state.messages.append(UserMessage(content=CONTINUE_PROMPT))
            continue
        results: list[ToolResult] = []
        for call in response.tool_calls:
            if state.tool_calls >= limits.max_tool_calls:
                msg = f"tool-call cap of {limits.max_tool_calls} reached"
                return _result(ctx, state, "failed", "tool_calls", msg)
            state.tool_calls += 1
            result, finished = _dispatch(ctx, state, call)
            if ctx.on_tool:
                ctx.on_tool(call.name)
            _log(
                ctx,
                state,
                {"event": "tool", "call": call.model_dump(), "result": result.model_dump()},
            )
            if finished is not None:
                res = _result(ctx, state, "succeeded", "finished", "")
                res.finish = finished
                return res
            results.append(result)
        state.messages.append(ToolResultMessage(results=results))


def _build(ctx: WorkerContext, state: _State, max_out: int) -> ModelRequest:
    return ModelRequest(
        system=ctx.system,
        messages=list(state.messages),
        tools=list(ctx.tools),
        max_output_tokens=max(1, max_out),
        task_id=ctx.task_id,
        call_id=f"{ctx.task_id}-{state.calls + 1}",
    )


def _fit_request(ctx: WorkerContext, state: _State) -> ModelRequest | None:
    """The next request, masked if needed, with output capped to what the budget leaves."""
    limits = ctx.limits
    remaining = limits.token_budget - state.usage.total
    request = _build(ctx, state, limits.max_output_tokens)
    needed = estimate_request_tokens(request, ctx.counter)
    if needed > remaining * limits.mask_ratio and _mask_old(ctx, state):
        request = _build(ctx, state, limits.max_output_tokens)
        needed = estimate_request_tokens(request, ctx.counter)
    max_out = min(limits.max_output_tokens, remaining - needed)
    if max_out < limits.min_output_tokens:
        return None
    return _build(ctx, state, max_out)


def _mask_old(ctx: WorkerContext, state: _State) -> bool:
    """Replace every tool result but the latest turn's with a masked reference."""
    changed = False
    last = max(
        (i for i, m in enumerate(state.messages) if isinstance(m, ToolResultMessage)), default=-1
    )
    for i, message in enumerate(state.messages):
        if i == last or not isinstance(message, ToolResultMessage):
            continue
        new_results = []
        for r in message.results:
            if r.call_id in state.masked:
                new_results.append(r)
                continue
            state.masked.add(r.call_id)
            kept = state.kept.get(r.call_id) or _Kept("error" if r.is_error else "ok", r.content)
            if kept.ref is None:
                kept.ref = ctx.artifacts.save(ctx.task_id, "observation", kept.text)
            masked = Observation.masked(kept.status, len(kept.text), kept.ref)
            new_results.append(ToolResult(call_id=r.call_id, content=masked, is_error=r.is_error))
            changed = True
        state.messages[i] = ToolResultMessage(results=new_results)
    return changed


def _account(ctx: WorkerContext, state: _State, req: ModelRequest, resp: ModelResponse) -> None:
    u = resp.usage
    state.usage = state.usage.plus(TokenUsage.of_usage(u))
    observe_usage(req, u, ctx.counter)
    calls = [] if resp.stop_reason == "max_tokens" else resp.tool_calls
    state.messages.append(AssistantMessage(text=resp.text, tool_calls=calls))
    _log(
        ctx,
        state,
        {
            "event": "response",
            "call": state.calls,
            "text": resp.text,
            "tool_calls": [c.model_dump() for c in resp.tool_calls],
            "usage": u.model_dump(),
            "stop_reason": resp.stop_reason,
        },
    )


def _dispatch(
    ctx: WorkerContext, state: _State, call: ToolCall
) -> tuple[ToolResult, FinishArgs | None]:
    """Run one tool call; errors become observations for the model, never exceptions."""

    def error(text: str) -> tuple[ToolResult, None]:
        state.tool_errors.append(f"{call.name}: {text}")
        return ToolResult(call_id=call.id, content=f"error: {text}", is_error=True), None

    model = tool_args_model(call.name) if call.name in {t.name for t in ctx.tools} else None
    if model is None:
        names = ", ".join(t.name for t in ctx.tools)
        return error(f"unknown tool {call.name!r}; available tools: {names}")
    if INVALID_ARGUMENTS_KEY in call.arguments:
        return error("arguments are not a JSON object")
    try:
        args = model.model_validate(call.arguments)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'args'}: {e['msg']}" for e in exc.errors()
        )
        return error(f"invalid arguments for {call.name}: {problems}")
    if isinstance(args, FinishArgs):
        return ToolResult(call_id=call.id, content="finished"), args
    try:
        status, text = _execute(ctx, state, call.name, args)
    except FirewallError as exc:
        v = exc.violation
        return error(
            f"blocked by the scope firewall: {v.op} {v.path!r}: {v.reason}. {v.detail}".strip()
        )
    except EditError as exc:
        return error(str(exc))
    return ToolResult(call_id=call.id, content=_observe(ctx, state, call, status, text)), None


def _execute(ctx: WorkerContext, state: _State, name: str, args: Any) -> tuple[str, str]:
    fw = ctx.firewall
    if name == "read_file":
        return "ok", fw.read_text(args.path)
    if name == "list_dir":
        entries = fw.list_dir(args.path)
        lines = [f"{e.name}/" if e.kind == "dir" else e.name for e in entries]
        return "ok", "\n".join(lines) if lines else "(empty)"
    if name == "grep":
        matches = fw.grep(args.pattern, args.path)
        return "ok", "\n".join(f"{m.path}:{m.line_no}: {m.line}" for m in matches) or "(no matches)"
    if name == "write_file":
        return "ok", change_tools.write_file(fw, args)
    if name == "delete_file":
        return "ok", change_tools.delete_file(fw, args)
    if name == "move_file":
        return "ok", change_tools.move_file(fw, args)
    if name == "edit_file":
        change_tools.refuse_placeholder(args.new)
        kept = fw.edit_text(args.path, args.old, args.new)
        return "ok", f"edited {args.path}" + (f" ({kept})" if kept else "")
    if name == "run_tests":
        if ctx.run_tests is None:
            return "error", "this task has no test command"
        run = ctx.run_tests(args.args)
        state.tests = run
        verdict = "passed" if run.passed else ("timed out" if run.timed_out else "failed")
        limit = f"; {run.limit}" if run.limit else ""
        head = f"tests {verdict} (exit code {run.exit_code}{limit}): {' '.join(run.command)}"
        return ("ok" if run.passed else "failed"), f"{head}\n{run.tail}"
    raise AssertionError(f"unhandled tool {name}")  # tool_args_model covers every tool


def _observe(ctx: WorkerContext, state: _State, call: ToolCall, status: str, text: str) -> str:
    """The text the model sees; long outputs are kept in full as an artifact."""
    text = ctx.redact(text)  # before it is kept, logged, stored or shown to the model
    kept = state.kept[call.id] = _Kept(status, text)
    path = call.arguments.get("path") or call.arguments.get("source")
    source = f"{call.name} {path}" if isinstance(path, str) and path else call.name
    if len(text) > ctx.limits.observation_chars:
        kept.ref = ctx.artifacts.save(ctx.task_id, f"{call.name}-output", text)
        text = Observation.compact(status, text, kept.ref)
    # Tool output is data, never instructions: delimited, with delimiter look-alikes escaped.
    return wrap_data("observation", source, text)


def _log(ctx: WorkerContext, state: _State, event: dict[str, Any]) -> None:
    """Append to the transcript and save it: the whole transcript is on disk after every step.

    Redacted first: tool arguments and the model's text (a token it copied) are kept here.
    """
    state.transcript.append(redact_data(event, ctx.redact))
    text = json.dumps(state.transcript, indent=1, default=str)
    state.transcript_ref = ctx.artifacts.put(ctx.task_id, "transcript.json", text)


def _result(
    ctx: WorkerContext,
    state: _State,
    status: Literal["succeeded", "failed"],
    reason: Reason,
    msg: str,
) -> WorkerResult:
    _log(ctx, state, {"event": "end", "status": status, "reason": reason, "message": msg})
    return WorkerResult(
        task_id=ctx.task_id,
        status=status,
        reason=reason,
        message=msg,
        usage=state.usage.model_copy(),
        calls=state.calls,
        tool_calls=state.tool_calls,
        violations=list(ctx.firewall.violations),
        tool_errors=list(state.tool_errors),
        truncated=state.truncated,
        tests=state.tests,
        transcript=state.transcript_ref,
    )
