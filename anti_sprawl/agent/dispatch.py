"""The tool table and its one dispatcher, shared by the worker's and the planner's loops.

A tool is one row: the schema the model sees, the argument model, the handler. ``dispatch``
checks a call's arguments against the row, runs the handler and renders the observation;
every failure (unknown tool, bad arguments, a firewall refusal, a handler's own refusal)
becomes an error observation for the model, never an exception out of the loop.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from ..errors import ToolError
from ..fs.firewall import FirewallError
from ..providers.base import INVALID_ARGUMENTS_KEY, ToolCall, ToolResult, ToolSpec
from .artifacts import Observer

__all__ = ["Ending", "Handler", "Tool", "ToolOutcome", "ToolRefusal", "dispatch"]


@dataclass(frozen=True)
class Ending:
    """Why a loop stopped; ``value`` carries the policy's result (finish arguments, a plan)."""

    reason: str
    message: str = ""
    value: Any = None


class ToolRefusal(ToolError):
    """Raised by a handler: the call is answered with this message as an error observation."""


@dataclass(frozen=True)
class ToolOutcome:
    """What a handler produced. ``kind`` names the data block; ``ending`` stops the loop.

    ``summary`` is the essentials in a few words (``wrote a.py (120 chars)``, ``tests failed
    (exit code 1)``): what a digest keeps of the call instead of its output.
    """

    text: str
    status: str = "ok"  # ok | failed (e.g. tests failed) | error
    summary: str = ""
    kind: str = "observation"
    wrap: bool = True  # untrusted output goes into a data block; orchestrator text does not
    ending: Ending | None = None


Handler = Callable[[Any], ToolOutcome]


@dataclass(frozen=True)
class Tool:
    """One row of a tool table: the schema the model sees, the argument model, the handler.

    ``args`` None hands the raw argument mapping to the handler (``submit_plan``).
    """

    spec: ToolSpec
    args: type[BaseModel] | None
    run: Handler


def dispatch(
    tools: Mapping[str, Tool], call: ToolCall, observer: Observer
) -> tuple[ToolResult, ToolOutcome | None]:
    """Run one tool call; every failure becomes an error observation, never an exception."""
    tool = tools.get(call.name)
    if tool is None:
        names = ", ".join(sorted(tools))
        return observer.error(call, f"unknown tool {call.name!r}; available tools: {names}"), None
    if INVALID_ARGUMENTS_KEY in call.arguments:
        return observer.error(call, "arguments are not a JSON object"), None
    args: Any = call.arguments
    if tool.args is not None:
        try:
            args = tool.args.model_validate(call.arguments)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'args'}: {e['msg']}" for e in exc.errors()
            )
            text = f"invalid arguments for {call.name}: {problems}{_takes(tool.spec, exc)}"
            return observer.error(call, text), None
    try:
        outcome = tool.run(args)
    except FirewallError as exc:
        v = exc.violation
        text = f"blocked by the scope firewall: {v.op} {v.path!r}: {v.reason}. {v.detail}"
        return observer.error(call, text.strip()), None
    except ToolError as exc:  # EditError, ToolRefusal: the message is for the model
        return observer.error(call, str(exc)), None
    content = observer.render(call, outcome)
    return ToolResult(call_id=call.id, content=content, is_error=outcome.status == "error"), outcome


def _takes(spec: ToolSpec, exc: ValidationError) -> str:
    """The arguments the tool takes, when the call sent one it does not (recorded, make
    real-model 2026-12-05 run ai, call 20: ``run_tests`` with ``"type": "object"`` beside its
    args, copied from the schema; told only "Extra inputs are not permitted", the model gave
    up on the attempt)."""
    if not any(e["type"] == "extra_forbidden" for e in exc.errors()):
        return ""
    names = ", ".join(spec.parameters.get("properties", {})) or "none"
    return f". {spec.name} takes only: {names}; call it again with just those"
