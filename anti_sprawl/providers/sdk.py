"""What the two SDK-backed providers share: retries, error translation, repr, close.

Subclasses build the SDK client in their constructor (importing the SDK there, so
``anti-sprawl --help`` never loads it) and supply ``_params``, ``_send`` (the SDK's raw-response
call), ``_schema`` (the body schema in :mod:`.wire`) and ``_response``. The body is parsed and
checked here, not by the SDK: a body that is not JSON or does not match the schema is a
``MalformedResponse``, never a Python error from deep inside the SDK or our conversion.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, ClassVar

from .base import ModelRequest, ModelResponse
from .errors import translate_sdk_error
from .limits import response_timeout
from .retry import with_retries
from .wire import WireBody, parse_body

__all__ = ["SdkProvider"]


class SdkProvider:
    """One model call = the SDK request, retried by us (the SDK's own retries are off)."""

    name: str
    _schema: ClassVar[type[WireBody]]

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None,
        attempts: int,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.model = model
        self._base_url = base_url
        self._attempts = attempts
        self._sleep = sleep
        self._client: Any = None
        self._sdk: Any = None
        self._sdk_error: type[BaseException] = Exception
        self._secrets: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self._base_url!r})"

    @property
    def base_url(self) -> str | None:
        """The server this provider calls (None: the SDK's public endpoint)."""
        return self._base_url

    def close(self) -> None:
        """Release the HTTP connection pool."""
        self._client.close()

    def complete(self, request: ModelRequest) -> ModelResponse:
        """One call, retried on rate limits, overload, timeouts and connection resets."""
        params = self._params(request)
        base = self._client.timeout
        if isinstance(base, int | float):  # a long response is not a stalled one
            params["timeout"] = response_timeout(float(base), request.max_output_tokens)
        raw = with_retries(lambda: self._call(params), attempts=self._attempts, sleep=self._sleep)
        return self._response(request, raw)

    def _call(self, params: dict[str, Any]) -> Any:
        try:
            # the raw body: the SDK has read it in full (no streaming) while mapping its errors
            content = self._send(params).http_response.read()
        except self._sdk_error as exc:
            raise translate_sdk_error(
                exc, sdk=self._sdk, provider=self.name, secrets=self._secrets
            ) from exc
        return parse_body(content, self._schema, provider=self.name)

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        raise NotImplementedError

    def _send(self, params: dict[str, Any]) -> Any:
        raise NotImplementedError

    def _response(self, request: ModelRequest, raw: Any) -> ModelResponse:
        raise NotImplementedError
