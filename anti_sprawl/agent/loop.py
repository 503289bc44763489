"""The one agent loop the worker and the planner share.

A ``Loop`` holds a conversation, a ``Budget`` and a tool table (name -> argument model and
handler). Each turn: fit the next request to the budget (compacting the conversation when the
policy allows), call the provider, charge the response, then dispatch every tool call through
one function that checks arguments, runs the handler and renders the observation
(``dispatch``). The
``Policy`` supplies what differs: how to answer a text-only turn, per-call checks (caps), and
what to do after a tool ran. Each step is appended to the transcript when a store is given.

Adding a tool is one row in the table (``Tool(spec, args_model, handler)``) plus its handler.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .. import tracing
from ..errors import ProviderError
from ..providers.base import (
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
)
from ..redact import redact_data
from .artifacts import ArtifactStore, Observer
from .budget import Budget, Refusal, Ticket
from .dispatch import Ending, Tool, ToolOutcome, dispatch

__all__ = ["TRANSCRIPT", "Loop", "Policy", "Transcript"]


TRANSCRIPT = "transcript.jsonl"
"""A node's transcript artifact: JSON Lines, one event per line."""


class Transcript:
    """Every event of one conversation, one JSON line each, appended as it happens (an artifact).

    Appending costs the same at the hundredth event as at the first (the file used to be
    rewritten whole after every event), and a process killed mid-write leaves every earlier
    event readable (``artifacts.read_json_lines``). Redacted first: tool arguments and the
    model's text (a token it copied) are kept here. A new transcript starts its file over.
    """

    def __init__(
        self,
        artifacts: ArtifactStore,
        task_id: str,
        redact: Callable[[str], str] = str,
        name: str = TRANSCRIPT,
    ):
        self.artifacts = artifacts
        self.task_id = task_id
        self.redact = redact
        self.name = name
        self.ref: str | None = None

    def log(self, event: dict[str, Any]) -> None:
        line = json.dumps(redact_data(event, self.redact), default=str) + "\n"
        self.ref = self.artifacts.append(self.task_id, self.name, line, fresh=self.ref is None)


class Policy(Protocol):
    """What the worker and the planner decide differently."""

    def text_turn(self, response: ModelResponse) -> str | Ending | list[ToolCall]:
        """A turn without tool calls: the message to send next, the end, or the tool calls
        the policy reads in its text (the worker's whole-file blocks, agent/file_blocks.py)."""
        ...

    def shown(self, text: str) -> str:
        """What the conversation keeps of a model turn's ``text`` (the transcript keeps it all):
        the worker leaves out our own instructions copied back (agent/echoes.py)."""
        ...

    def cut_turn(self, max_output_tokens: int, text: str) -> str | Ending:
        """A response cut at the output limit (its tool calls dropped; ``text``: what it
        said): what to say, or the end."""
        ...

    def before_tool(self, call: ToolCall) -> Ending | None:
        """Before a tool call runs: end the loop here (a cap), or None to go on."""
        ...

    def after_tool(self, call: ToolCall, outcome: ToolOutcome | None) -> Ending | None:
        """After a tool call ran (``outcome`` None when it was refused)."""
        ...

    def compactions(self) -> Sequence[Callable[[], bool]]:
        """Ways to shrink the conversation when a request does not fit, mildest first."""
        ...

    def compact_early(self) -> int | None:
        """Input size past which the mildest compaction runs even when the call would fit."""
        ...

    def explain(self) -> str:
        """What the next request is made of, for a refusal message."""
        ...


@dataclass
class Loop:
    """One conversation with a model under a budget; ``run`` drives it to an ``Ending``."""

    task_id: str
    provider: Provider
    system: list[SystemBlock]
    tools: Mapping[str, Tool]
    budget: Budget
    max_calls: int
    observer: Observer
    messages: list[Message]
    stop: threading.Event = field(default_factory=threading.Event)
    on_request: Callable[[ModelRequest, int], None] | None = None
    # After each call is charged: the conversation's tokens and dollars so far (live views).
    on_charged: Callable[[Usage, float], None] | None = None
    transcript: Transcript | None = None
    calls: int = 0
    model: str | None = None  # None: the provider's own
    call_prefix: str | None = None  # call ids read "<prefix>-<n>" (default: the task id)

    @property
    def specs(self) -> list[ToolSpec]:
        """The tool schemas, sorted by name: byte-identical for every conversation."""
        return [self.tools[name].spec for name in sorted(self.tools)]

    def build(self, max_output: int) -> ModelRequest:
        return ModelRequest(
            system=self.system,
            messages=list(self.messages),
            tools=self.specs,
            max_output_tokens=max(1, max_output),
            task_id=self.task_id,
            call_id=f"{self.call_prefix or self.task_id}-{self.calls + 1}",
            model=self.model,
        )

    def log(self, event: dict[str, Any]) -> None:
        if self.transcript is not None:
            self.transcript.log(event)

    def run(self, policy: Policy) -> Ending:
        """Call the model and run its tools until a tool, a cap, or the provider ends it."""
        ending = self._run(policy)
        self.log({"event": "end", "reason": ending.reason, "message": ending.message})
        return ending

    def _run(self, policy: Policy) -> Ending:
        while True:
            ending = self._turn(policy)
            if ending is not None:
                return ending

    def _turn(self, policy: Policy) -> Ending | None:
        """One model call and what its answer leads to; None: the conversation goes on."""
        if self.stop.is_set():
            return Ending("stopped", "stopped by the orchestrator")
        if self.calls >= self.max_calls:
            return Ending("calls", f"model-call cap of {self.max_calls} reached")
        fitted = self.budget.fit(
            self.build, policy.compactions(), policy.explain, policy.compact_early()
        )
        if isinstance(fitted, Refusal):
            return Ending(fitted.reason, fitted.message)
        response = self._call(fitted)
        if isinstance(response, Ending):
            return response
        usage, overrun = self._charge(fitted, response)
        if self.stop.is_set():
            # Stopped (Ctrl-C) while the call was in flight: the tokens are charged, the
            # turn itself is discarded (none of its tools runs).
            return Ending("stopped", "stopped by the orchestrator")
        # A response cut at the output limit, or stopped because it ran on, holds an
        # incomplete tool call: never run it.
        cut = response.stop_reason in ("max_tokens", "ran_on")
        self._record(response, usage, cut, policy.shown(response.text))
        if overrun:
            return Ending("budget", overrun)
        if cut:
            return self._after_cut(policy, fitted.request.max_output_tokens, response.text)
        if not response.tool_calls:
            return self._after_text(policy, response)
        return self._tools(policy, response.tool_calls)

    def _after_text(self, policy: Policy, response: ModelResponse) -> Ending | None:
        follow = policy.text_turn(response)
        if isinstance(follow, Ending):
            return follow
        if isinstance(follow, list):
            # The turn is kept as the one that made these calls, so their results answer it.
            self.messages[-1] = AssistantMessage(
                text=policy.shown(response.text), tool_calls=follow
            )
            self.log({"event": "recovered", "tool_calls": [c.model_dump() for c in follow]})
            return self._tools(policy, follow)
        self._drop_earlier_text_exchange()
        self.messages.append(UserMessage(content=follow))
        return None

    def _drop_earlier_text_exchange(self) -> None:
        """Before a reply to a text-only turn: the text-only turn before it and our reply to
        that go, so a run of them leaves one exchange in the conversation, not a growing
        script. A small model copies its own last reply (make real-model 2026-12-03, calls
        6-9: one apology four times over, each request longer by the one before)."""
        m = self.messages
        if (
            len(m) >= 4
            and isinstance(m[-3], AssistantMessage)
            and not m[-3].tool_calls
            and isinstance(m[-2], UserMessage)
        ):
            del m[-3:-1]

    def _charge(self, fitted: Ticket, response: ModelResponse) -> tuple[Usage, str | None]:
        charged = self.budget.charge(fitted, response)
        tracing.chat_answered(response, charged[0])  # the span carries the tokens charged
        if self.on_charged:
            self.on_charged(self.budget.spent, self.budget.spent_cost)
        return charged

    def _call(self, fitted: Ticket) -> ModelResponse | Ending:
        """The provider's answer to ``fitted``, or how its error ends the conversation."""
        self.calls += 1
        tracing.chat_started(
            self.provider.name, fitted.request.model or self.provider.model, fitted.request
        )
        if self.on_request:
            self.on_request(fitted.request, self.calls)
        try:
            # providers retry retryable errors themselves, with bounded backoff
            return self.provider.complete(fitted.request)
        except ProviderError as exc:
            self.budget.release(fitted)
            tracing.chat_failed(exc)
            self.log({"event": "error", "message": str(exc)})
            reason = "script" if isinstance(exc, ScriptExhausted) else "provider"
            return Ending(reason, str(exc))

    def _record(self, response: ModelResponse, usage: Usage, cut: bool, shown: str) -> None:
        """Append the model's turn as ``shown`` (without the tool calls of a cut one) and log
        it whole."""
        calls = [] if cut else response.tool_calls
        self.messages.append(AssistantMessage(text=shown, tool_calls=calls))
        self.log(
            {
                "event": "response",
                "call": self.calls,
                "text": response.text,
                "tool_calls": [c.model_dump() for c in response.tool_calls],
                "usage": usage.model_dump(),
                "model": response.model,
                "stop_reason": response.stop_reason,
            }
        )

    def _after_cut(self, policy: Policy, max_output: int, text: str) -> Ending | None:
        told = policy.cut_turn(max_output, text or "")
        if isinstance(told, Ending):
            return told
        self.log({"event": "cut", "message": told})
        self._drop_earlier_text_exchange()
        self.messages.append(UserMessage(content=told))
        return None

    def _tools(self, policy: Policy, calls: Sequence[ToolCall]) -> Ending | None:
        results: list[ToolResult] = []
        seen: dict[str, ToolResult] = {}
        for call in calls:
            # The same call twice in one turn runs, and counts, once (a small model sent two
            # identical submit_plan calls and spent two repair rounds; issue 23).
            key = json.dumps([call.name, call.arguments], sort_keys=True, default=str)
            if key in seen:
                same = seen[key]
                results.append(
                    ToolResult(
                        call_id=call.id,
                        content=f"(the same call as the one before in this turn; not run again) "
                        f"{same.content}",
                        is_error=same.is_error,
                    )
                )
                self.log({"event": "duplicate", "call": call.model_dump()})
                continue
            ending = policy.before_tool(call)
            if ending is not None:
                return ending
            with tracing.tool(call.name, call.id, call.arguments) as span:
                result, outcome = dispatch(self.tools, call, self.observer)
                span.result(result.content, result.is_error)
            self.log({"event": "tool", "call": call.model_dump(), "result": result.model_dump()})
            ending = policy.after_tool(call, outcome)
            if ending is None and outcome is not None:
                ending = outcome.ending
            if ending is not None:
                return ending
            seen[key] = result
            results.append(result)
        self.messages.append(ToolResultMessage(results=results))
        return None
