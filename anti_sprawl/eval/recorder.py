"""A provider wrapper that records every request and the usage the provider reported for it.

The evaluation scores what crossed the provider seam (canaries in requests, tokens per call),
whatever provider sits behind it, so the scripted and live runs are measured the same way.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from ..providers.base import ModelRequest, ModelResponse, Provider, Usage

__all__ = ["RecordedCall", "RecordingProvider"]


@dataclass(frozen=True)
class RecordedCall:
    """One request as sent, with the reported usage (None when the call raised)."""

    request: ModelRequest
    usage: Usage | None
    error: str | None = None


class RecordingProvider:
    """Forwards to ``inner`` and keeps every call; thread-safe like the providers it wraps."""

    def __init__(self, inner: Provider) -> None:
        self.inner = inner
        self.name = inner.name
        self.model = inner.model
        self._lock = threading.Lock()
        self._calls: list[RecordedCall] = []

    @property
    def calls(self) -> list[RecordedCall]:
        """Every call so far, in arrival order (a snapshot)."""
        with self._lock:
            return list(self._calls)

    def complete(self, request: ModelRequest) -> ModelResponse:
        try:
            response = self.inner.complete(request)
        except BaseException as exc:
            self._add(RecordedCall(request, None, f"{type(exc).__name__}: {exc}"))
            raise
        self._add(RecordedCall(request, response.usage))
        return response

    def add_remote(self, request: ModelRequest, usage: Usage | None, error: str | None) -> None:
        """A call a node made on a Dask worker (``--executor dask``), recorded as if here."""
        self._add(RecordedCall(request, usage, error))

    def _add(self, call: RecordedCall) -> None:
        with self._lock:
            self._calls.append(call)
