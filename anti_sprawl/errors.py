"""One error tree for the whole tool, and the boundary that maps anything else onto it.

    AntiSprawlError
    ├── UsageError            the user's mistake: bad flag, unreadable plan, wrong repo (exit 2)
    ├── Interrupted           Ctrl-C: the run stopped and is resumable (exit 130)
    └── RunError              the work itself failed: invalid plan, a node failed (exit 1)
        ├── ProviderError     a model provider call failed (translated at the SDK boundary)
        ├── StorageError      local state could not be written or read (disk full, quota)
        └── InternalError     a bug: an exception nothing else translated

Foreign exceptions (OSError, git, SDK errors) are translated where they enter our code,
with ``raise ... from exc`` so the cause is kept for debugging. ``at_boundary`` is the last
resort the CLI applies to whatever still escapes, so a user never sees a traceback; with
``ANTI_SPRAWL_DEBUG=1`` an internal error keeps its traceback for whoever fixes it.
"""

from __future__ import annotations

__all__ = [
    "AntiSprawlError",
    "InternalError",
    "Interrupted",
    "ProviderError",
    "RunError",
    "StorageError",
    "UsageError",
    "at_boundary",
]


class AntiSprawlError(Exception):
    """Base of every error the tool raises on purpose."""

    exit_code = 1


class UsageError(AntiSprawlError):
    """The user asked for something we cannot do: print one line, exit 2."""

    exit_code = 2


class Interrupted(AntiSprawlError):
    """The user pressed Ctrl-C; what finished is kept and the rest can be resumed."""

    exit_code = 130


class RunError(AntiSprawlError):
    """The requested work failed: exit 1."""

    exit_code = 1


class ProviderError(RunError):
    """A model provider call failed; ``retryable`` says whether trying again can help."""

    def __init__(self, message: str, *, retryable: bool = False, status: int | None = None):
        super().__init__(message)
        self.retryable = retryable
        self.status = status


class StorageError(RunError):
    """Reading or writing local state failed (disk full, quota, permissions, a broken file)."""


class InternalError(RunError):
    """An exception nothing translated: a bug, reported in one line instead of a traceback."""


def at_boundary(exc: Exception) -> AntiSprawlError:
    """The error-tree form of an exception that reached the CLI untranslated."""
    if isinstance(exc, AntiSprawlError):
        return exc
    if isinstance(exc, OSError):
        where = f": {exc.filename}" if exc.filename else ""
        return StorageError(f"{exc.strerror or exc}{where}")
    if isinstance(exc, MemoryError):
        return RunError("out of memory")
    detail = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
    return InternalError(
        f"internal error ({type(exc).__name__}{': ' + detail if detail else ''}); "
        "set ANTI_SPRAWL_DEBUG=1 to see the traceback"
    )
