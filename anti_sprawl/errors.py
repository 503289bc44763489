"""One error tree for the whole tool.

    AntiSprawlError
    ├── UsageError        the user's mistake: bad flag, unreadable plan, wrong repo (exit 2)
    └── RunError          the work itself failed: invalid plan, a node failed (exit 1)
        └── ProviderError a model provider call failed (translated at the SDK boundary)

Foreign exceptions (OSError, git, SDK errors) are translated where they enter our code,
with ``raise ... from exc`` so the cause is kept for debugging.
"""

from __future__ import annotations

__all__ = ["AntiSprawlError", "ProviderError", "RunError", "UsageError"]


class AntiSprawlError(Exception):
    """Base of every error the tool raises on purpose."""

    exit_code = 1


class UsageError(AntiSprawlError):
    """The user asked for something we cannot do: print one line, exit 2."""

    exit_code = 2


class RunError(AntiSprawlError):
    """The requested work failed: exit 1."""

    exit_code = 1


class ProviderError(RunError):
    """A model provider call failed; ``retryable`` says whether trying again can help."""

    def __init__(self, message: str, *, retryable: bool = False, status: int | None = None):
        super().__init__(message)
        self.retryable = retryable
        self.status = status
