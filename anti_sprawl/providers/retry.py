"""Bounded retries with exponential backoff and jitter; the SDKs' own retries are disabled."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import TypeVar

from ..errors import ProviderError

__all__ = ["MAX_RETRY_AFTER", "backoff_delay", "with_retries"]

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


def with_retries(
    fn: Callable[[], T],
    *,
    attempts: int = 4,
    base_delay: float = 0.5,
    max_delay: float = 8.0,
    sleep: Callable[[float], None] = time.sleep,
    rand: Callable[[], float] = random.random,
) -> T:
    """Call ``fn``; retry retryable ``ProviderError``s up to ``attempts`` calls in all.

    A ``retry_after`` hint on the error is honoured (up to ``MAX_RETRY_AFTER``) in place of the
    backoff delay. Non-retryable errors and the last failure propagate unchanged.
    """
    if attempts < 1:
        raise ValueError("attempts must be at least 1")
    for attempt in range(1, attempts + 1):
        try:
            return fn()
        except ProviderError as exc:
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
            log.warning("%s; retry %d of %d in %.2fs", exc, attempt, attempts - 1, delay)
            sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover
