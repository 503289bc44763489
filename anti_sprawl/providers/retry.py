"""Bounded retries with exponential backoff and jitter; the SDKs' own retries are disabled."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from ..errors import ProviderError
from .errors import ProviderTimeout

__all__ = ["BUSY_HINT", "MAX_RETRY_AFTER", "TimeoutRetry", "backoff_delay", "with_retries"]

T = TypeVar("T")
log = logging.getLogger(__name__)

# A server asking us to wait longer than this gets its error raised instead: a worker blocked
# for minutes is worse than a failed node the user can resume.
MAX_RETRY_AFTER = 60.0


def backoff_delay(
    attempt: int, *, base_delay: float, max_delay: float, rand: Callable[[], float]
) -> float:
    """Delay before retry ``attempt`` (1-based): half fixed, half jitter, capped at max_delay."""
    ceiling = min(max_delay, base_delay * 2.0 ** (attempt - 1))
    return ceiling * (0.5 + 0.5 * rand())


@dataclass(frozen=True)
class TimeoutRetry:
    """How a timed-out call is retried on a single-slot server (llama.cpp, Ollama, ...).

    Such a server finishes the request the client abandoned before it starts the identical
    retry, which then times out too: so at most ``retries`` more calls, each after ``wait``
    seconds, and the last error says the server may still be busy.
    """

    retries: int = 1
    wait: float = MAX_RETRY_AFTER  # the provider waits as long as the deadline, at most this


BUSY_HINT = (
    "; the server may still be busy with the abandoned request (a local server with one slot "
    "finishes it first): raise --request-timeout or use a smaller prompt"
)


def with_retries(
    fn: Callable[[], T],
    *,
    attempts: int = 4,
    base_delay: float = 0.5,
    max_delay: float = 8.0,
    sleep: Callable[[float], None] = time.sleep,
    rand: Callable[[], float] = random.random,
    on_timeout: TimeoutRetry | None = None,
) -> T:
    """Call ``fn``; retry retryable ``ProviderError``s up to ``attempts`` calls in all.

    A ``retry_after`` hint on the error is honoured (up to ``MAX_RETRY_AFTER``) in place of the
    backoff delay. Non-retryable errors and the last failure propagate unchanged. With
    ``on_timeout``, a ``ProviderTimeout`` follows that policy instead (see ``TimeoutRetry``).
    """
    if attempts < 1:
        raise ValueError("attempts must be at least 1")
    timeouts = 0
    for attempt in range(1, attempts + 1):
        try:
            return fn()
        except ProviderError as exc:
            if on_timeout is not None and isinstance(exc, ProviderTimeout):
                timeouts += 1
                if timeouts > on_timeout.retries or attempt == attempts:
                    raise ProviderTimeout(f"{exc}{BUSY_HINT}") from exc
                _wait(exc, attempt, attempts, on_timeout.wait, sleep)
                continue
            if not exc.retryable or attempt == attempts:
                raise
            hint: float | None = getattr(exc, "retry_after", None)
            if hint is not None and hint > MAX_RETRY_AFTER:
                raise
            delay = (
                hint
                if hint is not None
                else backoff_delay(attempt, base_delay=base_delay, max_delay=max_delay, rand=rand)
            )
            _wait(exc, attempt, attempts, delay, sleep)
    raise AssertionError("unreachable")  # pragma: no cover


def _wait(
    exc: ProviderError, attempt: int, attempts: int, delay: float, sleep: Callable[[float], None]
) -> None:
    log.warning("%s; retry %d of %d in %.2fs", exc, attempt, attempts - 1, delay)
    sleep(delay)
