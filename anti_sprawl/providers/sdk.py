"""What the two SDK-backed providers share: retries, error translation, repr, close.

Subclasses build the SDK client in their constructor (importing the SDK there, so
``anti-sprawl --help`` never loads it) and supply ``_params``, ``_stream`` (the SDK's
streaming-response call), ``_schema`` (the body schema in :mod:`.wire`) and ``_response``. The body is parsed and
checked here, not by the SDK: a body that is not JSON or does not match the schema is a
``MalformedResponse``, never a Python error from deep inside the SDK or our conversion.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

from .base import ModelRequest, ModelResponse
from .errors import ProviderConnectionError, ProviderTimeout, translate_sdk_error
from .limits import call_deadline
from .retry import MAX_RETRY_AFTER, TimeoutRetry, with_retries
from .wire import WireBody, parse_body

__all__ = ["SdkProvider"]


class SdkProvider:
    """One model call = the SDK request, retried by us (the SDK's own retries are off).

    Every call has an overall wall-clock deadline (``limits.call_deadline``): the body is read
    as it arrives and the call is abandoned, as a retryable ``ProviderTimeout``, once the
    deadline passes, so a server trickling a byte a second cannot hold it. The SDK's own
    timeout is per read and set to the same value, which bounds a server that goes silent: a
    call takes at most about twice its deadline (headers that take the whole deadline, then a
    silent body), and a steadily trickling one is cut at the deadline.
    """

    name: str
    _schema: ClassVar[type[WireBody]]

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None,
        attempts: int,
        sleep: Callable[[float], None] = time.sleep,
        timeout: float | None = None,
        local: bool = False,
    ) -> None:
        self.model = model
        self._base_url = base_url
        self._attempts = attempts
        self._sleep = sleep
        self.request_timeout = timeout
        # A local single-slot server is not sent an identical request straight after a timeout.
        self._local = local
        self._client: Any = None
        self._sdk: Any = None
        self._sdk_error: type[BaseException] = Exception
        self._secrets: tuple[str, ...] = ()
        import httpx2  # both SDKs' HTTP client: its read errors end a streamed body

        self._http = httpx2

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self._base_url!r})"

    @property
    def client_timeout(self) -> float:
        """The SDK client's per-read timeout (the deadline of a default-sized call)."""
        return call_deadline(self.request_timeout, 0, local=self._local)

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
        # a long response is not a stalled one: the default deadline grows with the output cap
        deadline = call_deadline(self.request_timeout, request.max_output_tokens, local=self._local)
        params["timeout"] = deadline
        raw = with_retries(
            lambda: self._call(params, deadline),
            attempts=self._attempts,
            sleep=self._sleep,
            on_timeout=TimeoutRetry(wait=min(deadline, MAX_RETRY_AFTER)) if self._local else None,
        )
        return self._response(request, raw)

    def _call(self, params: dict[str, Any], deadline: float) -> Any:
        ends = time.monotonic() + deadline
        try:
            with self._stream(params) as response:
                content = self._read(response.http_response, ends, deadline)
        except self._sdk_error as exc:
            raise translate_sdk_error(
                exc, sdk=self._sdk, provider=self.name, secrets=self._secrets
            ) from exc
        except self._http.TimeoutException as exc:
            raise ProviderTimeout(f"{self.name}: request timed out") from exc
        except self._http.TransportError as exc:
            raise ProviderConnectionError(
                f"{self.name}: the connection broke while reading the response "
                f"({type(exc).__name__})"
            ) from exc
        return parse_body(content, self._schema, provider=self.name)

    def _read(self, http_response: Any, ends: float, deadline: float) -> bytes:
        """The body (``_body``), unless the deadline passes first (checked as each chunk
        arrives)."""

        def chunks() -> Iterator[bytes]:
            for chunk in http_response.iter_bytes():
                yield chunk
                if time.monotonic() > ends:
                    raise ProviderTimeout(
                        f"{self.name}: the response took longer than the {deadline:.0f} s "
                        "deadline of one call (--request-timeout)"
                    )

        return self._body(http_response, chunks())

    def _body(self, http_response: Any, chunks: Iterator[bytes]) -> bytes:
        """The JSON body to parse, from the response's chunks; a subclass may stop reading
        early (leaving the ``with`` around it closes the connection)."""
        return b"".join(chunks)

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        raise NotImplementedError

    def _stream(self, params: dict[str, Any]) -> Any:
        """The SDK's streaming-response call (a context manager; the body is not read yet)."""
        raise NotImplementedError

    def _response(self, request: ModelRequest, raw: Any) -> ModelResponse:
        raise NotImplementedError
