"""Claude through the official ``anthropic`` SDK (Messages API, tool use, prompt caching).

The SDK is imported inside the constructor so ``anti-sprawl --help`` never loads it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from ..errors import UsageError
from .base import (
    INVALID_ARGUMENTS_KEY,
    AssistantMessage,
    Message,
    ModelRequest,
    ModelResponse,
    StopReason,
    ToolCall,
    Usage,
    UserMessage,
    estimated_usage,
)
from .errors import MalformedResponse
from .sdk import SdkProvider
from .wire import AnthropicBody, AnthropicUsage

__all__ = ["DEFAULT_ANTHROPIC_MODEL", "AnthropicProvider", "to_anthropic_params"]

DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-5-5"
_EPHEMERAL = {"type": "ephemeral"}
_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
}


class AnthropicProvider(SdkProvider):
    """Claude via the Messages API; system + tool schemas form the cached prefix."""

    name = "anthropic"
    _schema = AnthropicBody

    def __init__(
        self,
        model: str = DEFAULT_ANTHROPIC_MODEL,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | None = None,
        attempts: int = 4,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        import anthropic

        super().__init__(
            model, base_url=base_url, attempts=attempts, sleep=sleep, timeout=timeout, local=False
        )
        self._sdk = anthropic
        self._sdk_error = anthropic.AnthropicError
        try:
            # max_retries=0: our with_retries is the only retry layer, so it is the tested one.
            self._client = anthropic.Anthropic(
                api_key=api_key, base_url=base_url, timeout=self.client_timeout, max_retries=0
            )
        except anthropic.AnthropicError as exc:
            raise UsageError(f"cannot set up the Anthropic client: {type(exc).__name__}") from exc
        self._secrets = tuple(
            s for s in (api_key, self._client.api_key, self._client.auth_token) if s
        )

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        return to_anthropic_params(request, request.model or self.model)

    def _stream(self, params: dict[str, Any]) -> Any:
        return self._client.messages.with_streaming_response.create(**params)

    def _response(self, request: ModelRequest, body: AnthropicBody) -> ModelResponse:
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in body.content:
            if block.type == "text":
                texts.append(block.text or "")
            elif block.type == "tool_use":
                if block.id is None or not block.name:
                    raise MalformedResponse(f"{self.name}: a tool_use block has no id or name")
                raw = block.input
                arguments = (
                    raw if isinstance(raw, dict) else {INVALID_ARGUMENTS_KEY: json.dumps(raw)}
                )
                calls.append(ToolCall(id=str(block.id), name=block.name, arguments=arguments))
        text = "\n".join(t for t in texts if t)
        return ModelResponse(
            text=text,
            tool_calls=calls,
            stop_reason=_STOP_REASONS.get(body.stop_reason or "", "other"),
            usage=_usage(body.usage) or estimated_usage(request, text, calls),
            model=body.model or request.model or self.model,
            raw_id=None if body.id is None else str(body.id),
        )


def _usage(usage: AnthropicUsage | None) -> Usage | None:
    if usage is None:
        return None
    cache_read = usage.cache_read_input_tokens or 0
    cache_write = usage.cache_creation_input_tokens or 0
    # Anthropic's input_tokens excludes cached tokens; our convention includes them.
    return Usage(
        input_tokens=usage.input_tokens + cache_read + cache_write,
        output_tokens=usage.output_tokens or 0,
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
    )


def to_anthropic_params(request: ModelRequest, model: str) -> dict[str, Any]:
    """The ``messages.create`` keyword arguments for ``request``, with cache breakpoints."""
    params: dict[str, Any] = {
        "model": model,
        "max_tokens": request.max_output_tokens,
        "messages": _messages(request.messages),
    }
    blocks = [b for b in request.system if b.text]
    if blocks:
        last_cached = max((i for i, b in enumerate(blocks) if b.cache), default=None)
        params["system"] = [
            {
                "type": "text",
                "text": b.text,
                **({"cache_control": _EPHEMERAL} if i == last_cached else {}),
            }
            for i, b in enumerate(blocks)
        ]
    if request.tools:
        tools = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in request.tools
        ]
        # The prefix order is tools, system, messages: a breakpoint on the last tool caches the
        # schemas even when no system block asks for caching.
        tools[-1]["cache_control"] = _EPHEMERAL
        params["tools"] = tools
    return params


def _blocks(message: Message) -> tuple[str, list[dict[str, Any]]]:
    if isinstance(message, UserMessage):
        return "user", ([{"type": "text", "text": message.content}] if message.content else [])
    if isinstance(message, AssistantMessage):
        blocks: list[dict[str, Any]] = []
        if message.text:
            blocks.append({"type": "text", "text": message.text})
        blocks += [
            {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
            for c in message.tool_calls
        ]
        return "assistant", blocks
    return "user", [
        {
            "type": "tool_result",
            "tool_use_id": r.call_id,
            "content": r.content,
            "is_error": r.is_error,
        }
        for r in message.results
    ]


def _messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Anthropic wants alternating roles: merge neighbours that map to the same role."""
    out: list[dict[str, Any]] = []
    for message in messages:
        role, blocks = _blocks(message)
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return out
