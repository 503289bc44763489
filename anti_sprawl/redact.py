"""Secret redaction at the provider boundary: nothing that looks like a key leaves the machine.

Secret *files* never reach a prompt (the firewall refuses them); this is the second net for
secrets inside ordinary files or tool output: the exact values of the secret-looking
environment variables the CLI was started with (API keys included), and well-known token
shapes (AWS, GitHub, Slack, OpenAI/Anthropic keys, private-key blocks, passwords in URLs).
Each is replaced by ``[REDACTED:<type>]`` in every request before the provider sees it.
Writing a placeholder back into a file is refused by the worker, so a real secret is never
overwritten with its placeholder.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from .providers.base import (
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

__all__ = ["PLACEHOLDER", "RedactingProvider", "Redactor", "env_secrets"]

PLACEHOLDER = "[REDACTED:"
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.I)
_MIN_VALUE = 8
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "private-key",
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)"
        ),
    ),
    ("aws-access-key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("github-token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})")),
    ("slack-token", re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}")),
    ("anthropic-key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,}")),
    ("openai-key", re.compile(r"\bsk-(?:proj-)?[A-Za-z0-9_-]{20,}")),
    ("url-password", re.compile(r"(?<=://)[^\s:/@]+:[^\s@/]+(?=@)")),
)


def env_secrets(env: Mapping[str, str]) -> list[str]:
    """Values of secret-looking variables (``*KEY*``, ``*TOKEN*``, ...) long enough to match."""
    return sorted(
        {v for k, v in env.items() if _SECRET_NAME.search(k) and len(v.strip()) >= _MIN_VALUE},
        key=len,
        reverse=True,
    )


class Redactor:
    """Replaces exact secret values and well-known secret shapes in text."""

    def __init__(self, values: Iterable[str] = ()):
        self._values = [v for v in values if len(v) >= _MIN_VALUE]

    def __call__(self, text: str) -> str:
        for value in self._values:
            if value in text:
                text = text.replace(value, "[REDACTED:env]")
        for kind, pattern in _PATTERNS:
            text = pattern.sub(f"[REDACTED:{kind}]", text)
        return text

    def request(self, request: ModelRequest) -> ModelRequest:
        """A copy of ``request`` with every text field redacted."""
        return request.model_copy(
            update={
                "system": [b.model_copy(update={"text": self(b.text)}) for b in request.system],
                "messages": [self._message(m) for m in request.messages],
            }
        )

    def _message(self, message: Message) -> Message:
        if isinstance(message, UserMessage):
            return UserMessage(content=self(message.content))
        if isinstance(message, AssistantMessage):
            calls = [self._call(c) for c in message.tool_calls]
            return AssistantMessage(text=self(message.text), tool_calls=calls)
        results = [
            ToolResult(call_id=r.call_id, content=self(r.content), is_error=r.is_error)
            for r in message.results
        ]
        return ToolResultMessage(results=results)

    def _call(self, call: ToolCall) -> ToolCall:
        args = {k: self(v) if isinstance(v, str) else v for k, v in call.arguments.items()}
        return call.model_copy(update={"arguments": args})


class RedactingProvider:
    """Wraps a provider so every request is redacted before it leaves the process."""

    def __init__(self, inner: Provider, redactor: Redactor):
        self.inner = inner
        self.redactor = redactor
        self.name = inner.name
        self.model = inner.model

    def complete(self, request: ModelRequest) -> ModelResponse:
        return self.inner.complete(self.redactor.request(request))
