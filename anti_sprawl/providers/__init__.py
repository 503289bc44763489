"""Model providers behind one small protocol: Anthropic, OpenAI(-compatible) and scripted.

Importing this package never imports the ``anthropic`` or ``openai`` SDKs; each provider
imports its SDK when it is constructed. Keys and base URLs come only from the ``env`` mapping
the CLI passes in (the process environment), never from files in the target repository.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from ..errors import UsageError
from .anthropic import DEFAULT_ANTHROPIC_MODEL, AnthropicProvider
from .base import (
    INVALID_ARGUMENTS_KEY,
    AssistantMessage,
    AuthenticationFailed,
    BadRequest,
    MalformedResponse,
    Message,
    ModelRequest,
    ModelResponse,
    Overloaded,
    Provider,
    ProviderConnectionError,
    ProviderTimeout,
    RateLimited,
    ScriptExhausted,
    StopReason,
    SystemBlock,
    ToolCall,
    ToolResult,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
    estimate_request_tokens,
    observe_usage,
    raw_request_tokens,
    request_text,
    with_retries,
)
from .openai import DEFAULT_OPENAI_MODEL, OpenAIProvider
from .scripted import Script, ScriptedProvider

__all__ = [
    "DEFAULT_ANTHROPIC_MODEL",
    "DEFAULT_OPENAI_MODEL",
    "INVALID_ARGUMENTS_KEY",
    "NO_PROVIDER_MESSAGE",
    "PROVIDER_NAMES",
    "AnthropicProvider",
    "AssistantMessage",
    "AuthenticationFailed",
    "BadRequest",
    "MalformedResponse",
    "Message",
    "ModelRequest",
    "ModelResponse",
    "OpenAIProvider",
    "Overloaded",
    "Provider",
    "ProviderConnectionError",
    "ProviderTimeout",
    "RateLimited",
    "Script",
    "ScriptExhausted",
    "ScriptedProvider",
    "StopReason",
    "SystemBlock",
    "ToolCall",
    "ToolResult",
    "ToolResultMessage",
    "ToolSpec",
    "Usage",
    "UserMessage",
    "check_base_url",
    "estimate_request_tokens",
    "observe_usage",
    "raw_request_tokens",
    "request_text",
    "select_provider",
    "with_retries",
]

PROVIDER_NAMES = ("anthropic", "openai", "scripted")
NO_PROVIDER_MESSAGE = (
    "no model provider: set ANTHROPIC_API_KEY or OPENAI_API_KEY, pass --provider/--base-url, "
    "or use --provider scripted --script FILE to run offline"
)


def _env(env: Mapping[str, str], key: str) -> str | None:
    return env.get(key) or None  # an empty variable counts as unset


def _env_url(env: Mapping[str, str], key: str) -> str | None:
    url = _env(env, key)
    return None if url is None else check_base_url(url, key)


def check_base_url(url: str, source: str) -> str:
    """``url`` when it is a usable http(s) server URL; else a one-line UsageError naming ``source``.

    The SDKs would accept many malformed URLs at construction and fail deep inside the HTTP
    client later (``http://[::1`` is a 70-line traceback), so they are checked here first.
    """
    problem = None
    try:
        parts = urlsplit(url)
        port = parts.port  # raises for a non-numeric or out-of-range port
        if parts.scheme not in ("http", "https"):
            problem = "it must start with http:// or https://"
        elif not parts.hostname:
            problem = "it has no host"
        elif port == 0:
            problem = "port 0 is not a server port"
        elif any(ch.isspace() or ord(ch) < 32 for ch in url):
            problem = "it contains whitespace or control characters"
    except ValueError as exc:
        problem = str(exc)
    if problem:
        raise UsageError(f"invalid {source} {url!r}: {problem}")
    return url


def select_provider(
    *,
    provider: str | None,
    model: str | None,
    base_url: str | None,
    script: Path | None,
    env: Mapping[str, str],
    timeout: float | None = None,
) -> Provider:
    """Pick and build the provider from the CLI flags and the environment.

    Without ``provider``: ``--script`` means scripted, ``--base-url`` means openai, then
    ``ANTHROPIC_API_KEY`` means anthropic, then ``OPENAI_API_KEY``/``OPENAI_BASE_URL`` openai.
    ``timeout`` is the overall deadline of one call (``--request-timeout``; None: the default
    of the server kind, providers/limits.py).
    """
    if base_url:
        check_base_url(base_url, "--base-url")
    name = _provider_name(provider, base_url=base_url, script=script, env=env)
    if name == "scripted":
        if script is None:
            raise UsageError("--provider scripted requires --script FILE")
        if base_url:
            raise UsageError("--base-url does not apply to --provider scripted")
        return ScriptedProvider(Script.load(script), model=model or "scripted")
    if script is not None:
        raise UsageError("--script is only used with --provider scripted")
    if name == "anthropic":
        return _anthropic(model, base_url, env, timeout)
    return _openai(model, base_url, env, timeout)


def _provider_name(
    provider: str | None, *, base_url: str | None, script: Path | None, env: Mapping[str, str]
) -> str:
    """The provider named by ``provider``, or the one the other flags and the environment imply."""
    if provider:
        name = provider.strip().lower()
        if name not in PROVIDER_NAMES:
            raise UsageError(f"unknown provider {provider!r} (choose {', '.join(PROVIDER_NAMES)})")
        return name
    if script is not None:
        return "scripted"
    if base_url:
        return "openai"
    if _env(env, "ANTHROPIC_API_KEY"):
        return "anthropic"
    if _env(env, "OPENAI_API_KEY") or _env(env, "OPENAI_BASE_URL"):
        return "openai"
    raise UsageError(NO_PROVIDER_MESSAGE)


def _anthropic(
    model: str | None, base_url: str | None, env: Mapping[str, str], timeout: float | None
) -> Provider:
    key = _env(env, "ANTHROPIC_API_KEY")
    if key is None:
        raise UsageError("--provider anthropic needs ANTHROPIC_API_KEY in the environment")
    return AnthropicProvider(
        model or DEFAULT_ANTHROPIC_MODEL,
        api_key=key,
        base_url=base_url or _env_url(env, "ANTHROPIC_BASE_URL"),
        timeout=timeout,
    )


def _openai(
    model: str | None, base_url: str | None, env: Mapping[str, str], timeout: float | None
) -> Provider:
    url = base_url or _env_url(env, "OPENAI_BASE_URL")
    key = _env(env, "OPENAI_API_KEY")
    if key is None and url is None:
        raise UsageError("--provider openai needs OPENAI_API_KEY, or --base-url for a local server")
    if url is not None and model is None:
        raise UsageError(
            "--model is required with an OpenAI-compatible --base-url / OPENAI_BASE_URL"
        )
    return OpenAIProvider(model or DEFAULT_OPENAI_MODEL, api_key=key, base_url=url, timeout=timeout)
