"""OpenAI chat completions through the official ``openai`` SDK, also for compatible servers.

With ``base_url`` it talks to OpenAI-compatible servers (Ollama, vLLM, llama.cpp, LM Studio),
which often omit optional fields; we tolerate a missing ``usage`` (counted offline and marked
``estimated``), ``id``, ``finish_reason`` and tool-call ids. Tool-call arguments that are not a
JSON object become ``{INVALID_ARGUMENTS_KEY: raw_text}`` so the worker can answer with an error
observation. A ``--base-url`` server's answer is streamed and watched, so a runaway is stopped
while it runs (providers/streamed.py). The SDK is imported inside the constructor.
"""

from __future__ import annotations

import itertools
import json
import time
import uuid
from collections.abc import Callable, Iterator
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
from .errors import ProviderFailure
from .limits import echoed_answer_at
from .sdk import SdkProvider
from .streamed import RAN_ON_FINISH, assemble_stream, is_event_stream
from .text_calls import recover_text_calls, text_call_problem
from .wire import OpenAIBody, OpenAIContentPart, OpenAIToolCall, OpenAIUsage

__all__ = [
    "DEFAULT_OPENAI_MODEL",
    "LOCAL_API_KEY_PLACEHOLDER",
    "OpenAIProvider",
    "parse_arguments",
    "to_openai_params",
]

DEFAULT_OPENAI_MODEL = "gpt-5.5"
# Local servers ignore the key, but the SDK refuses to start without one.
LOCAL_API_KEY_PLACEHOLDER = "not-needed"
_STOP_REASONS: dict[str, StopReason] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    RAN_ON_FINISH: "ran_on",  # our own: we stopped the answer (providers/streamed.py)
}


class OpenAIProvider(SdkProvider):
    """Chat completions with function tools; ``base_url`` selects a compatible server."""

    name = "openai"
    _schema = OpenAIBody

    def __init__(
        self,
        model: str = DEFAULT_OPENAI_MODEL,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | None = None,
        attempts: int = 4,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        import openai

        super().__init__(
            model,
            base_url=base_url,
            attempts=attempts,
            sleep=sleep,
            timeout=timeout,
            local=bool(base_url),
        )
        self._sdk = openai
        self._sdk_error = openai.OpenAIError
        if not api_key and base_url:
            api_key = LOCAL_API_KEY_PLACEHOLDER
        try:
            # max_retries=0: our with_retries is the only retry layer, so it is the tested one.
            self._client = openai.OpenAI(
                api_key=api_key, base_url=base_url, timeout=self.client_timeout, max_retries=0
            )
        except openai.OpenAIError as exc:
            raise UsageError(
                "no OpenAI API key: set OPENAI_API_KEY, or pass --base-url for a local server"
            ) from exc
        key = self._client.api_key
        self._secrets = tuple(s for s in (api_key, key) if s and s != LOCAL_API_KEY_PLACEHOLDER)
        # A --base-url server's answers are streamed, so a runaway is stopped while it runs
        # (providers/streamed.py); off for good once the server refuses a streamed request.
        self._streaming = bool(base_url)

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        # OpenAI's newer models accept only max_completion_tokens; compatible servers
        # generally know only max_tokens.
        limit_key = "max_tokens" if self._base_url else "max_completion_tokens"
        params = to_openai_params(request, request.model or self.model, limit_key=limit_key)
        if self._streaming:
            params["stream"] = True
            params["stream_options"] = {"include_usage": True}  # the counts, in the last event
        return params

    def _stream(self, params: dict[str, Any]) -> Any:
        return self._client.chat.completions.with_streaming_response.create(**params)

    def _call(self, params: dict[str, Any], deadline: float) -> Any:
        try:
            return super()._call(params, deadline)
        except ProviderFailure as exc:
            if not params.get("stream") or not _refused_streaming(exc):
                raise
        # A server that cannot stream (llama.cpp before mid-2025 answered "Cannot use tools
        # with stream"; some refuse stream_options): asked again unstreamed, from now on.
        self._streaming = False
        del params["stream"], params["stream_options"]
        return super()._call(params, deadline)

    def _body(self, http_response: Any, chunks: Iterator[bytes]) -> bytes:
        first = next(chunks, b"")
        rest = itertools.chain([first], chunks)
        if is_event_stream(http_response.headers.get("content-type"), first):
            return assemble_stream(rest, provider=self.name)
        return b"".join(rest)  # a server that ignored stream: true

    def _response(self, request: ModelRequest, body: OpenAIBody) -> ModelResponse:
        message = body.choices[0].message
        text = _content_text(message.content if message else None)
        calls = [_tool_call(raw) for raw in (message.tool_calls if message else None) or []]
        finish = body.choices[0].finish_reason
        if finish is None:
            stop: StopReason = "tool_use" if calls else "end_turn"
        else:
            stop = _STOP_REASONS.get(finish, "other")
        problem = None
        at = echoed_answer_at(text) if self._base_url and not calls else None
        if at is not None:
            # a small model that writes the answer it expects from a tool after its call
            # (providers/streamed.py): its turn ended where that answer begins
            text, stop = text[:at], "end_turn"
        if not calls and stop not in ("max_tokens", "ran_on"):
            # small local models write their calls as text (providers/text_calls.py)
            calls = recover_text_calls(text, request.tools)
            if calls:
                text, stop = "", "tool_use"
            else:
                problem = text_call_problem(text, request.tools)
                if at is not None and request.tools:
                    problem = problem or "it wrote what a tool would answer, which only a tool does"
        return ModelResponse(
            text_call_problem=problem,
            text=text,
            tool_calls=calls,
            stop_reason=stop,
            usage=_usage(body.usage) or estimated_usage(request, text, calls),
            model=body.model or request.model or self.model,
            raw_id=None if body.id is None else str(body.id),
        )


def _refused_streaming(exc: ProviderFailure) -> bool:
    """Whether an HTTP error answers the streaming itself: it says "stream"."""
    return exc.status is not None and exc.status != 429 and "stream" in str(exc).lower()


def _content_text(content: str | list[OpenAIContentPart] | None) -> str:
    """Message text; some compatible servers send a list of typed parts instead of a string."""
    if isinstance(content, list):
        return "".join(part.text or "" for part in content if part.type in (None, "text"))
    return content or ""


def parse_arguments(raw: Any) -> dict[str, Any]:
    """Tool-call arguments as a dict; anything but a JSON object is kept raw for the worker."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    if isinstance(raw, dict):
        return raw
    if not isinstance(raw, str):
        return {INVALID_ARGUMENTS_KEY: json.dumps(raw)}
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return {INVALID_ARGUMENTS_KEY: raw}
    return value if isinstance(value, dict) else {INVALID_ARGUMENTS_KEY: raw}


def _tool_call(raw: OpenAIToolCall) -> ToolCall:
    function = raw.function
    return ToolCall(
        id=str(raw.id) if raw.id is not None and raw.id != "" else f"call_{uuid.uuid4().hex[:16]}",
        name=(function.name if function else None) or "",
        arguments=parse_arguments(function.arguments if function else None),
    )


def _usage(usage: OpenAIUsage | None) -> Usage | None:
    if usage is None or usage.prompt_tokens is None:
        return None
    details = usage.prompt_tokens_details
    # prompt_tokens already includes cached_tokens, as our convention wants.
    return Usage(
        input_tokens=usage.prompt_tokens,
        output_tokens=usage.completion_tokens or 0,
        cache_read_tokens=(details.cached_tokens if details else None) or 0,
        cache_write_tokens=(details.cache_write_tokens if details else None) or 0,
    )


def to_openai_params(
    request: ModelRequest, model: str, *, limit_key: str = "max_completion_tokens"
) -> dict[str, Any]:
    """The ``chat.completions.create`` keyword arguments for ``request``."""
    messages: list[dict[str, Any]] = []
    system = "\n\n".join(b.text for b in request.system if b.text)
    if system:
        messages.append({"role": "system", "content": system})
    for message in request.messages:
        messages += _messages(message)
    params: dict[str, Any] = {
        "model": model,
        "messages": messages,
        limit_key: request.max_output_tokens,
    }
    if request.tools:
        params["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                },
            }
            for t in request.tools
        ]
    return params


def _arguments_text(arguments: dict[str, Any]) -> str:
    if set(arguments) == {INVALID_ARGUMENTS_KEY}:
        return str(arguments[INVALID_ARGUMENTS_KEY])
    return json.dumps(arguments, ensure_ascii=False)


def _messages(message: Message) -> list[dict[str, Any]]:
    if isinstance(message, UserMessage):
        return [{"role": "user", "content": message.content}]
    if isinstance(message, AssistantMessage):
        out: dict[str, Any] = {"role": "assistant", "content": message.text or None}
        if message.tool_calls:
            out["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": _arguments_text(c.arguments)},
                }
                for c in message.tool_calls
            ]
        else:
            out["content"] = message.text
        return [out]
    # Chat completions has no error flag on tool messages; say it in the content.
    return [
        {
            "role": "tool",
            "tool_call_id": r.call_id,
            "content": f"ERROR: {r.content}" if r.is_error else r.content,
        }
        for r in message.results
    ]
