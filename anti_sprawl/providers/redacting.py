"""A provider wrapper that passes every request through the one redactor before it is sent.

The CLI wraps the chosen provider once (``RedactingProvider(provider, Redactor(env_secrets(
os.environ)))``): whatever a prompt, a tool result or the model's own earlier text copied from
a file, the exact values of this process's secret variables and the catalogue's secret shapes
never leave the machine (docs/security.md).
"""

from __future__ import annotations

from typing import Any

from ..redact import Redactor
from .base import (
    AssistantMessage,
    Message,
    ModelRequest,
    ModelResponse,
    Provider,
    SystemBlock,
    ToolCall,
    ToolResult,
    ToolResultMessage,
    UserMessage,
)

__all__ = ["RedactingProvider", "redact_request"]


class RedactingProvider:
    """Wraps a provider so every request is redacted before it leaves the process."""

    def __init__(self, inner: Provider, redactor: Redactor):
        self.inner = inner
        self.redactor = redactor
        self.name = inner.name
        self.model = inner.model
        self.base_url: str | None = getattr(inner, "base_url", None)

    def complete(self, request: ModelRequest) -> ModelResponse:
        return self.inner.complete(redact_request(self.redactor, request))


def redact_request(redact: Redactor, request: ModelRequest) -> ModelRequest:
    """``request`` with every text field redacted: a copy where anything changed, else the
    (immutable) request itself, so a call's unchanged messages are not built again (each
    conversation re-sends all of them; issue 29)."""
    system = [_block(redact, b) for b in request.system]
    messages = [_message(redact, m) for m in request.messages]
    if _same(system, request.system) and _same(messages, request.messages):
        return request
    return request.model_copy(update={"system": system, "messages": messages})


def _same(new: list[Any], old: list[Any]) -> bool:
    return all(a is b for a, b in zip(new, old, strict=True))


def _block(redact: Redactor, block: SystemBlock) -> SystemBlock:
    text = redact(block.text)
    return block if text == block.text else block.model_copy(update={"text": text})


def _message(redact: Redactor, message: Message) -> Message:
    if isinstance(message, UserMessage):
        content = redact(message.content)
        return message if content == message.content else UserMessage(content=content)
    if isinstance(message, AssistantMessage):
        calls = [_call(redact, c) for c in message.tool_calls]
        text = redact(message.text)
        if text == message.text and _same(calls, message.tool_calls):
            return message
        return AssistantMessage(text=text, tool_calls=calls)
    results = [_result(redact, r) for r in message.results]
    if _same(results, message.results):
        return message
    return ToolResultMessage(results=results)


def _result(redact: Redactor, result: ToolResult) -> ToolResult:
    content = redact(result.content)
    if content == result.content:
        return result
    return ToolResult(call_id=result.call_id, content=content, is_error=result.is_error)


def _call(redact: Redactor, call: ToolCall) -> ToolCall:
    args = {k: redact(v) if isinstance(v, str) else v for k, v in call.arguments.items()}
    if all(args[k] == v for k, v in call.arguments.items()):
        return call
    return call.model_copy(update={"arguments": args})
