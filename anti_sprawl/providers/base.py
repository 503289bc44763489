"""The Provider protocol and the normalized request/response types every provider speaks.

Token convention (the same for every provider): ``Usage.input_tokens`` counts *all* prompt
tokens, cached ones included; ``cache_read_tokens`` and ``cache_write_tokens`` say how many of
them were read from or written to the provider's prompt cache. ``total`` is input + output.
Anthropic reports cached tokens separately from ``input_tokens``; its provider adds them back.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from ..tokens import TokenCounter, count_joined, count_tokens
from .errors import (
    AuthenticationFailed,
    BadRequest,
    MalformedResponse,
    Overloaded,
    ProviderConnectionError,
    ProviderTimeout,
    RateLimited,
    ScriptExhausted,
)
from .retry import with_retries

__all__ = [
    "INVALID_ARGUMENTS_KEY",
    "AssistantMessage",
    "AuthenticationFailed",
    "BadRequest",
    "MalformedResponse",
    "Message",
    "ModelRequest",
    "ModelResponse",
    "Overloaded",
    "Provider",
    "ProviderConnectionError",
    "ProviderTimeout",
    "RateLimited",
    "ScriptExhausted",
    "StopReason",
    "SystemBlock",
    "ToolCall",
    "ToolResult",
    "ToolResultMessage",
    "ToolSpec",
    "Usage",
    "UserMessage",
    "estimate_request_tokens",
    "estimated_usage",
    "observe_usage",
    "raw_request_tokens",
    "request_pieces",
    "request_text",
    "turn_text",
    "with_retries",
]

# A tool call whose arguments were not a JSON object carries the raw text under this key, so
# the worker can answer it with an error observation instead of crashing the run.
INVALID_ARGUMENTS_KEY = "__invalid_json__"

# ran_on: we stopped the answer because it repeated itself (providers/streamed.py)
StopReason = Literal["end_turn", "tool_use", "max_tokens", "ran_on", "other"]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ToolSpec(_Frozen):
    """A tool the model may call; ``parameters`` is the JSON Schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class ToolCall(_Frozen):
    """One tool call requested by the model; ``from_text``: recovered from the reply's text
    (providers/text_calls.py), not sent through the tools interface."""

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    from_text: bool = False


class ToolResult(_Frozen):
    """The observation returned for one tool call."""

    call_id: str
    content: str
    is_error: bool = False


class UserMessage(_Frozen):
    """Text from the orchestrator in the user role."""

    role: Literal["user"] = "user"
    content: str


class AssistantMessage(_Frozen):
    """A model turn: optional text plus the tool calls it made."""

    role: Literal["assistant"] = "assistant"
    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)


class ToolResultMessage(_Frozen):
    """The results of the previous assistant turn's tool calls, in call order."""

    role: Literal["tool_results"] = "tool_results"
    results: list[ToolResult]


Message = Annotated[UserMessage | AssistantMessage | ToolResultMessage, Field(discriminator="role")]


class SystemBlock(_Frozen):
    """One named section of the system prompt; ``cache`` marks the end of a stable prefix."""

    text: str
    cache: bool = False
    name: str = ""


class ModelRequest(_Frozen):
    """Everything one model call sees; ``task_id``/``call_id`` tie it to the run's manifests.

    ``model`` picks the model for this call (a plan node's own); None means the provider's.
    """

    system: list[SystemBlock] = Field(default_factory=list)
    messages: list[Message]
    tools: list[ToolSpec] = Field(default_factory=list)
    max_output_tokens: int = Field(default=4096, gt=0)
    task_id: str | None = None
    call_id: str | None = None
    model: str | None = None


class Usage(_Frozen):
    """Tokens of one call; ``input_tokens`` includes cached tokens (see the module docstring).

    ``estimated`` is True when the server reported no usage and we counted offline instead.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    estimated: bool = False

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens

    def plus(self, other: Usage) -> Usage:
        """Both calls' counts; estimated when either was."""
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            estimated=self.estimated or other.estimated,
        )


class ModelResponse(_Frozen):
    """A model turn, normalized across providers."""

    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    stop_reason: StopReason
    usage: Usage
    model: str
    raw_id: str | None = None
    # A reply that looked like a tool call written as text but was not one: what was wrong.
    text_call_problem: str | None = None


@runtime_checkable
class Provider(Protocol):
    """A model endpoint. Implementations must be safe to call from several threads at once."""

    name: str
    model: str

    def complete(self, request: ModelRequest) -> ModelResponse:
        """Run one model call; failures raise ``anti_sprawl.errors.ProviderError`` subclasses."""
        ...


def _dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def turn_text(text: str, tool_calls: list[ToolCall]) -> str:
    """The serialized form of a model turn, for offline output-token counts."""
    parts = [text] if text else []
    parts += [_dump({"name": call.name, "arguments": call.arguments}) for call in tool_calls]
    return "\n".join(parts)


def request_text(request: ModelRequest) -> str:
    """One canonical serialization of system + tools + messages, the same for every provider.

    Budgets are checked against its token count, so it must change whenever the prompt does.
    """
    return "".join(request_pieces(request))


def request_pieces(request: ModelRequest) -> list[str]:
    """``request_text`` in pieces (each system block, tool schema and message, with the
    newline that joins it to the next), which a conversation's calls share."""
    parts = [block.text for block in request.system]
    parts += [_dump(tool.model_dump()) for tool in request.tools]
    for message in request.messages:
        if isinstance(message, UserMessage):
            parts.append(message.content)
        elif isinstance(message, AssistantMessage):
            parts.append(turn_text(message.text, message.tool_calls))
        else:
            parts += [result.content for result in message.results]
    return [f"{part}\n" for part in parts[:-1]] + parts[-1:]


def raw_request_tokens(request: ModelRequest) -> int:
    """Unscaled cl100k tokens of ``request`` (what ``TokenCounter.observe`` expects): counted
    by pieces (``tokens.count_joined``, exact), so the system, the tools and the messages a
    call repeats from the one before are not encoded again (issue 29)."""
    return count_joined(request_pieces(request))


def estimate_request_tokens(request: ModelRequest, counter: TokenCounter) -> int:
    """Calibrated estimate of the input tokens ``request`` will cost, for pre-call budget checks."""
    return counter.scale(raw_request_tokens(request))


def observe_usage(request: ModelRequest, usage: Usage, counter: TokenCounter) -> None:
    """Feed one call's reported input tokens back into ``counter``'s calibration."""
    if not usage.estimated:
        counter.observe(raw_request_tokens(request), usage.input_tokens)


def estimated_usage(request: ModelRequest, text: str, tool_calls: list[ToolCall]) -> Usage:
    """Offline usage for servers that report none (some OpenAI-compatible local servers)."""
    return Usage(
        input_tokens=raw_request_tokens(request),
        output_tokens=count_tokens(turn_text(text, tool_calls)),
        estimated=True,
    )
