"""A provider wrapper that passes every request through the one redactor before it is sent.

The CLI wraps the chosen provider once (``RedactingProvider(provider, Redactor(env_secrets(
os.environ)))``): whatever a prompt, a tool result or the model's own earlier text copied from
a file, the exact values of this process's secret variables and the catalogue's secret shapes
never leave the machine (docs/security.md).
"""

from __future__ import annotations

from ..redact import Redactor
from .base import (
    AssistantMessage,
    Message,
    ModelRequest,
    ModelResponse,
    Provider,
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
    """A copy of ``request`` with every text field redacted."""
    return request.model_copy(
        update={
            "system": [b.model_copy(update={"text": redact(b.text)}) for b in request.system],
            "messages": [_message(redact, m) for m in request.messages],
        }
    )


def _message(redact: Redactor, message: Message) -> Message:
    if isinstance(message, UserMessage):
        return UserMessage(content=redact(message.content))
    if isinstance(message, AssistantMessage):
        calls = [_call(redact, c) for c in message.tool_calls]
        return AssistantMessage(text=redact(message.text), tool_calls=calls)
    results = [
        ToolResult(call_id=r.call_id, content=redact(r.content), is_error=r.is_error)
        for r in message.results
    ]
    return ToolResultMessage(results=results)


def _call(redact: Redactor, call: ToolCall) -> ToolCall:
    args = {k: redact(v) if isinstance(v, str) else v for k, v in call.arguments.items()}
    return call.model_copy(update={"arguments": args})
