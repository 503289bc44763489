"""Typed provider errors, and their translation from the SDKs' exceptions at the boundary.

    ProviderError (anti_sprawl.errors)      .retryable, .status
    └── ProviderFailure                     .retry_after (seconds, from the server, or None)
        ├── RateLimited                     429                        retryable
        ├── Overloaded                      5xx, 529                   retryable
        ├── ProviderTimeout                 timeout, 408               retryable
        ├── ProviderConnectionError         connection refused/reset   retryable
        ├── BadRequest                      other 4xx                  not retryable
        ├── AuthenticationFailed            401, 403                   not retryable
        ├── MalformedResponse               a body we cannot read      not retryable
        └── ScriptExhausted                 the scripted model ran out not retryable

Messages never contain API keys: the known key values and anything that looks like an
``Authorization``/``x-api-key`` header or a bearer token are replaced by ``[REDACTED:<kind>]``
(the one redactor, ``anti_sprawl.redact``), in our error and in the SDK exception kept as its
``__cause__``.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Iterable, Mapping
from types import ModuleType
from typing import Any, ClassVar

from ..errors import ProviderError

__all__ = [
    "AuthenticationFailed",
    "BadRequest",
    "MalformedResponse",
    "Overloaded",
    "ProviderConnectionError",
    "ProviderFailure",
    "ProviderTimeout",
    "RateLimited",
    "ScriptExhausted",
    "parse_retry_after",
    "redact",
    "translate_sdk_error",
]

_MAX_MESSAGE = 500


class ProviderFailure(ProviderError):
    """Base of the typed provider errors: each subclass fixes whether retrying can help."""

    is_retryable: ClassVar[bool] = False

    def __init__(
        self, message: str, *, status: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message, retryable=self.is_retryable, status=status)
        self.retry_after = retry_after


class RateLimited(ProviderFailure):
    """HTTP 429: too many requests or tokens; wait (``retry_after`` if the server said)."""

    is_retryable = True


class Overloaded(ProviderFailure):
    """The provider is overloaded or failing (5xx, Anthropic's 529)."""

    is_retryable = True


class ProviderTimeout(ProviderFailure):
    """The call took longer than the configured timeout."""

    is_retryable = True


class ProviderConnectionError(ProviderFailure):
    """The provider could not be reached."""

    is_retryable = True


class BadRequest(ProviderFailure):
    """The provider rejected the request (4xx other than 401/403/408/429)."""


class AuthenticationFailed(ProviderFailure):
    """The API key is missing, wrong or lacks permission (401/403)."""


class MalformedResponse(ProviderFailure):
    """The provider answered with something we cannot interpret."""


class ScriptExhausted(ProviderFailure):
    """The scripted provider has no turn left for a task."""


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with known secret values, HTTP credentials and key shapes redacted."""
    from ..redact import Redactor  # here: redact.py imports the providers package

    return Redactor(secrets, min_value=4, http=True)(text)


def parse_retry_after(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` / ``retry-after`` (seconds or HTTP date)."""
    if not headers:
        return None
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _status_error_class(status: int) -> type[ProviderFailure]:
    if status == 429:
        return RateLimited
    if status in (401, 403):
        return AuthenticationFailed
    if status == 408:
        return ProviderTimeout
    if status >= 500:
        return Overloaded
    return BadRequest


def _api_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        error = body.get("error", body)
        if isinstance(error, Mapping):
            kind = error.get("type") or error.get("code")
            message = error.get("message")
            if message:
                return f"{kind}: {message}" if kind else str(message)
        elif isinstance(error, str):
            return error
    return str(getattr(exc, "message", None) or exc)


def _scrub(exc: BaseException, secrets: Iterable[str]) -> None:
    """Redact the SDK exception in place, since we keep it as ``__cause__`` for debugging."""
    secrets = tuple(secrets)
    exc.args = tuple(redact(a, secrets) if isinstance(a, str) else a for a in exc.args)
    message = getattr(exc, "message", None)
    if isinstance(message, str):
        exc.message = redact(message, secrets)  # type: ignore[attr-defined]


def translate_sdk_error(
    exc: BaseException, *, sdk: ModuleType, provider: str, secrets: Iterable[str] = ()
) -> ProviderError:
    """Map an Anthropic/OpenAI SDK exception (both share one shape) to our typed errors."""
    secrets = tuple(secrets)
    _scrub(exc, secrets)
    result: ProviderFailure
    if isinstance(exc, sdk.APITimeoutError):
        result = ProviderTimeout(f"{provider}: request timed out")
    elif isinstance(exc, sdk.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        detail = f" ({type(cause).__name__})" if cause is not None else ""
        result = ProviderConnectionError(f"{provider}: cannot connect{detail}")
    elif isinstance(exc, sdk.APIStatusError):
        status = int(exc.status_code)
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None)
        message = redact(_api_message(exc), secrets)[:_MAX_MESSAGE]
        result = _status_error_class(status)(
            f"{provider}: HTTP {status}: {message}",
            status=status,
            retry_after=parse_retry_after(headers),
        )
    elif isinstance(exc, sdk.APIResponseValidationError):
        result = MalformedResponse(f"{provider}: unexpected response shape")
    else:
        message = redact(str(exc), secrets)[:_MAX_MESSAGE]
        result = ProviderFailure(f"{provider}: {type(exc).__name__}: {message}")
    return result
