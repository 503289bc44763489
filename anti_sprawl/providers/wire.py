"""The response bodies we accept from model servers, as schemas checked at the boundary.

A model server's answer is untrusted input: a proxy's HTML error page, a truncated body, a
lax local server with a number where a string belongs, or negative token counts (which would
make a budget grow). The SDK clients do not validate bodies (they build their objects without
checking types), so we read the raw body ourselves: it must be JSON and match these schemas,
else the call fails with ``MalformedResponse``, a typed provider error the retry policy and
the node's failure handling understand. The schemas are lax only where real servers are
(optional ids, usage, finish reasons; numeric ids); counts are non-negative integers below
``MAX_REPORTED_TOKENS``.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, Strict, ValidationError

from .errors import MalformedResponse, redact

__all__ = [
    "MAX_REPORTED_TOKENS",
    "AnthropicBody",
    "AnthropicUsage",
    "OpenAIBody",
    "OpenAIUsage",
    "WireBody",
    "parse_body",
]

# No model call reads or writes ten million tokens; a count above it is a broken server.
MAX_REPORTED_TOKENS = 10_000_000

Count = Annotated[int, Strict(), Field(ge=0, le=MAX_REPORTED_TOKENS)]
Text = Annotated[str, Strict()]
# Ids only label a turn or a call: a server that sends a number is forgiven.
Id = Annotated[str, Strict()] | Annotated[int, Strict()]


class WireBody(BaseModel):
    # Servers add fields all the time (reasoning, logprobs, system_fingerprint...): ignore them.
    model_config = ConfigDict(extra="ignore", frozen=True)


# --- Anthropic Messages API -----------------------------------------------------------------


class AnthropicUsage(WireBody):
    input_tokens: Count
    output_tokens: Count | None = None
    cache_read_input_tokens: Count | None = None
    cache_creation_input_tokens: Count | None = None


class AnthropicBlock(WireBody):
    """One content block; only ``text`` and ``tool_use`` are read, others are skipped."""

    type: Text
    text: Text | None = None
    id: Id | None = None
    name: Text | None = None
    input: Any = None


class AnthropicBody(WireBody):
    content: list[AnthropicBlock]
    stop_reason: Text | None = None
    usage: AnthropicUsage | None = None
    model: Text | None = None
    id: Id | None = None


# --- OpenAI chat completions ----------------------------------------------------------------


class OpenAIFunction(WireBody):
    name: Text | None = None
    arguments: Any = None  # normally a JSON string; lax servers send an object


class OpenAIToolCall(WireBody):
    id: Id | None = None
    function: OpenAIFunction | None = None


class OpenAIContentPart(WireBody):
    type: Text | None = None
    text: Text | None = None


class OpenAIMessage(WireBody):
    content: Text | list[OpenAIContentPart] | None = None
    tool_calls: list[OpenAIToolCall] | None = None


class OpenAIChoice(WireBody):
    message: OpenAIMessage | None = None
    finish_reason: Text | None = None


class OpenAIPromptDetails(WireBody):
    cached_tokens: Count | None = None
    cache_write_tokens: Count | None = None


class OpenAIUsage(WireBody):
    prompt_tokens: Count | None = None
    completion_tokens: Count | None = None
    prompt_tokens_details: OpenAIPromptDetails | None = None


class OpenAIBody(WireBody):
    choices: list[OpenAIChoice] = Field(min_length=1)
    usage: OpenAIUsage | None = None
    model: Text | None = None
    id: Id | None = None


B = TypeVar("B", bound=WireBody)


def parse_body(content: bytes, schema: type[B], *, provider: str) -> B:
    """The JSON body ``content`` checked against ``schema``; ``MalformedResponse`` otherwise."""
    try:
        data = json.loads(content)
    except (ValueError, RecursionError):  # JSONDecodeError, bad UTF-8, absurd nesting
        head = redact(content[:40].decode("utf-8", "replace"))
        raise MalformedResponse(
            f"{provider}: the response body is not JSON ({head!r}...)"
        ) from None
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(part) for part in err["loc"]) or "body"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise MalformedResponse(
            f"{provider}: malformed response: {where}: {err['msg']}{more}"
        ) from exc
