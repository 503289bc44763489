"""The scripted provider: pre-written model turns, for the demo, tests and evaluation.

It is a real provider: it records every request it receives and reports usage counted from
that request with the project's offline tokenizer, so budgets and manifests behave as they
would with a model. It does not enforce budgets; the worker does. Script format::

    plan: {...}                 # the planner's single turn: submit_plan(args=this document)
    planner: [turns]            # optional: a multi-round planner instead (overrides ``plan``)
    workers:
      task_id: [turns]          # a turn: {tool, args} | [{tool, args}, ...] | {text} (+ tool)
"""

from __future__ import annotations

import copy
import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..errors import UsageError
from ..fs.userdata import load_document
from ..ids import FINISH_TOOL, PLANNER_TASK_ID, SUBMIT_PLAN_TOOL
from ..tokens import count_tokens
from .base import ModelRequest, ModelResponse, ToolCall, Usage, raw_request_tokens, turn_text
from .errors import BadRequest, ScriptExhausted

__all__ = [
    "Script",
    "ScriptedCall",
    "ScriptedProvider",
    "ScriptedTurn",
]

_TOP_KEYS = ("plan", "planner", "workers")
_TURN_KEYS = ("tool", "args", "text")


class ScriptedCall(BaseModel):
    """One scripted tool call."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: str
    args: dict[str, Any] = Field(default_factory=dict)


class ScriptedTurn(BaseModel):
    """One scripted model turn: optional text and zero or more tool calls."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str = ""
    calls: list[ScriptedCall] = Field(default_factory=list)


class Script(BaseModel):
    """A parsed script; build it with ``Script.load`` or ``Script.from_data``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    plan: dict[str, Any] | None = None
    planner: list[ScriptedTurn] | None = None
    workers: dict[str, list[ScriptedTurn]] = Field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> Script:
        """Read a YAML (or JSON) script; any problem is a one-line ``UsageError``."""
        return cls.from_data(load_document(path, "script"), source=str(path))

    @classmethod
    def from_data(cls, data: Any, *, source: str = "script") -> Script:
        """Validate an already-parsed script document."""
        return _parse_script(data, source)

    def turns_for(self, task_id: str) -> list[ScriptedTurn]:
        """The turns served to ``task_id`` (the planner's come from ``planner`` or ``plan``)."""
        if task_id == PLANNER_TASK_ID:
            if self.planner is not None:
                return self.planner
            if self.plan is not None:
                return [ScriptedTurn(calls=[ScriptedCall(tool=SUBMIT_PLAN_TOOL, args=self.plan)])]
            return []
        return self.workers.get(task_id, [])


class ScriptedProvider:
    """Serves a ``Script`` turn by turn per ``request.task_id``; thread-safe, records requests."""

    name = "scripted"

    def __init__(self, script: Script, *, model: str = "scripted") -> None:
        self.model = model
        self.script = script
        self._lock = threading.Lock()
        self._cursor: dict[str, int] = {}
        self._requests: list[ModelRequest] = []

    def __repr__(self) -> str:
        return f"ScriptedProvider(tasks={sorted(self.script.workers)!r})"

    @property
    def requests(self) -> list[ModelRequest]:
        """Every request received so far, in arrival order (a snapshot)."""
        with self._lock:
            return list(self._requests)

    def requests_for(self, task_id: str) -> list[ModelRequest]:
        """The requests made for one task, in order."""
        with self._lock:
            return [r for r in self._requests if r.task_id == task_id]

    def reset(self, task_id: str) -> None:
        """Serve ``task_id``'s script from the start again (a node re-run after a crash)."""
        with self._lock:
            self._cursor.pop(task_id, None)

    def position(self, task_id: str) -> int:
        """How many of ``task_id``'s turns were served (a remote node reports it back)."""
        with self._lock:
            return self._cursor.get(task_id, 0)

    def seek(self, task_id: str, position: int) -> None:
        """Serve ``task_id``'s script from turn ``position`` (a remote node's next attempt)."""
        with self._lock:
            self._cursor[task_id] = position

    def complete(self, request: ModelRequest) -> ModelResponse:
        """The next scripted turn for ``request.task_id``; ``ScriptExhausted`` when none is left."""
        task = request.task_id
        if task is None:
            raise BadRequest("scripted provider: the request has no task_id")
        turns = self.script.turns_for(task)
        with self._lock:
            self._requests.append(request)
            index = self._cursor.get(task, 0)
            if index >= len(turns):
                raise ScriptExhausted(_exhausted_message(task, len(turns)))
            self._cursor[task] = index + 1
        turn = turns[index]
        calls = [
            ToolCall(
                id=f"call_{task}_{index + 1}_{k}", name=c.tool, arguments=copy.deepcopy(c.args)
            )
            for k, c in enumerate(turn.calls, start=1)
        ]
        output = count_tokens(turn_text(turn.text, calls))
        if output > request.max_output_tokens:
            # A real model stops at max_tokens: the turn is cut off and its tool calls lost.
            return ModelResponse(
                text=turn.text[: request.max_output_tokens],
                stop_reason="max_tokens",
                usage=Usage(
                    input_tokens=raw_request_tokens(request),
                    output_tokens=request.max_output_tokens,
                ),
                model=request.model or self.model,
                raw_id=f"scripted_{task}_{index + 1}",
            )
        usage = Usage(input_tokens=raw_request_tokens(request), output_tokens=output)
        return ModelResponse(
            text=turn.text,
            tool_calls=calls,
            stop_reason="tool_use" if calls else "end_turn",
            usage=usage,
            model=request.model or self.model,
            raw_id=f"scripted_{task}_{index + 1}",
        )

    def assert_complete(self) -> None:
        """Raise ``AssertionError`` naming every task whose scripted turns were not all served.

        Worker scripts and an explicit ``planner:`` list are checked; the implicit
        ``submit_plan`` turn from ``plan:`` is not, so one script can serve ``execute`` alone.
        """
        expected = {task: len(turns) for task, turns in self.script.workers.items()}
        if self.script.planner is not None:
            expected[PLANNER_TASK_ID] = len(self.script.planner)
        with self._lock:
            unused = [
                f"{task} ({self._cursor.get(task, 0)} of {count} turns used)"
                for task, count in sorted(expected.items())
                if self._cursor.get(task, 0) < count
            ]
        if unused:
            raise AssertionError("scripted turns not consumed: " + ", ".join(unused))


def _exhausted_message(task: str, count: int) -> str:
    if count == 0:
        return f"scripted model: the script has no turns for task {task!r}"
    last = SUBMIT_PLAN_TOOL if task == PLANNER_TASK_ID else FINISH_TOOL
    return (
        f"scripted model: the script for task {task!r} ran out after {count} turn(s) "
        f"before '{last}'"
    )


def _fail(source: str, where: str, problem: str) -> UsageError:
    return UsageError(
        f"script {source}: {where}: {problem}" if where else f"script {source}: {problem}"
    )


def _parse_script(data: Any, source: str) -> Script:
    if not isinstance(data, dict):
        raise _fail(source, "", "expected a mapping with 'plan', 'planner' and/or 'workers'")
    for key in data:
        if key not in _TOP_KEYS:
            raise _fail(source, "", f"unknown key {key!r} (expected {', '.join(_TOP_KEYS)})")
    if not any(data.get(key) is not None for key in _TOP_KEYS):
        raise _fail(source, "", "defines nothing: expected 'plan', 'planner' or 'workers'")
    plan = data.get("plan")
    if plan is not None and not isinstance(plan, dict):
        raise _fail(source, "plan", "must be a mapping (a plan document)")
    planner = data.get("planner")
    workers = data.get("workers") or {}
    if not isinstance(workers, dict):
        raise _fail(source, "workers", "must be a mapping of task_id to a list of turns")
    return Script(
        plan=plan,
        planner=None if planner is None else _parse_turns(planner, source, "planner"),
        workers={
            str(task): _parse_turns(turns, source, f"workers.{task}")
            for task, turns in workers.items()
        },
    )


def _parse_turns(raw: Any, source: str, where: str) -> list[ScriptedTurn]:
    if not isinstance(raw, list):
        raise _fail(source, where, "must be a list of turns")
    return [_parse_turn(turn, source, f"{where}, turn {n}") for n, turn in enumerate(raw, 1)]


def _parse_turn(raw: Any, source: str, where: str) -> ScriptedTurn:
    if isinstance(raw, list):
        if not raw:
            raise _fail(source, where, "an empty list of tool calls")
        return ScriptedTurn(
            calls=[_parse_call(c, source, f"{where}, call {k}") for k, c in enumerate(raw, 1)]
        )
    if not isinstance(raw, dict):
        raise _fail(source, where, "expected {tool, args}, {text} or a list of tool calls")
    for key in raw:
        if key not in _TURN_KEYS:
            raise _fail(source, where, f"unknown key {key!r} (expected {', '.join(_TURN_KEYS)})")
    if "tool" not in raw and "text" not in raw:
        raise _fail(source, where, "needs 'tool' or 'text'")
    text = raw.get("text", "")
    if not isinstance(text, str):
        raise _fail(source, where, "'text' must be a string")
    if "tool" not in raw:
        if "args" in raw:
            raise _fail(source, where, "'args' without 'tool'")
        return ScriptedTurn(text=text)
    call = _parse_call({k: v for k, v in raw.items() if k != "text"}, source, where)
    return ScriptedTurn(text=text, calls=[call])


def _parse_call(raw: Any, source: str, where: str) -> ScriptedCall:
    if not isinstance(raw, dict):
        raise _fail(source, where, "a tool call must be a mapping {tool, args}")
    for key in raw:
        if key not in ("tool", "args"):
            raise _fail(source, where, f"unknown key {key!r} in a tool call (expected tool, args)")
    tool = raw.get("tool")
    if not isinstance(tool, str) or not tool:
        raise _fail(source, where, "'tool' must be a non-empty string")
    args = raw.get("args")
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise _fail(source, where, "'args' must be a mapping")
    return ScriptedCall(tool=tool, args=args)
