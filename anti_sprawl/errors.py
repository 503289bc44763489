"""One error tree for the whole tool, and the boundary that maps anything else onto it.

Two roots. An ``AntiSprawlError`` is what a command can end with: its class fixes the exit
code. A ``ToolError`` is what a model's tool call can run into: the agent loop answers it with
an error observation and the conversation goes on; it never reaches the CLI. Every exception
class of the package is drawn here, in the module that defines it, and
``tests/test_errors.py`` checks the drawing against the real classes::

    AntiSprawlError              errors            raised on purpose; carries .exit_code
    ├── UsageError               errors            the user's mistake: bad flag or plan (exit 2)
    │   ├── InternalStateError   git.layout        .anti-sprawl is tracked, a symlink, not ours
    │   └── BranchCheckedOut     git.branch        the run branch is checked out somewhere
    ├── Interrupted              errors            Ctrl-C/TERM/HUP: resumable (exit 128+sig)
    └── RunError                 errors            the work failed: a node, git, a model (exit 1)
        ├── GitError             git.cmd           a git command failed; its stderr is kept
        ├── LandingConflict      git.branch        a commit does not replay onto the run branch
        ├── OrderKept            git.reorder       the branch's commits cannot take the plan's order
        ├── ResultRefused        git.landing_audit a remote node's result fails the re-audit
        ├── SandboxUnavailable   sandbox.sandbox   no OS sandbox works here
        ├── TestsCannotStart     run.baseline      a test command fails before any test runs
        ├── StorageError         errors            local state unwritable (disk full, quota)
        ├── ExecutorLost         errors            the Dask scheduler is gone: the run stops
        ├── InternalError        errors            a bug: an exception nothing translated
        └── ProviderError        errors            a model call failed; .retryable, .status
            └── ProviderFailure  providers.errors  translated from an SDK; .retry_after
                ├── RateLimited              providers.errors  429               retryable
                ├── Overloaded               providers.errors  5xx, 529          retryable
                ├── ProviderTimeout          providers.errors  timeout, 408      retryable
                ├── ProviderConnectionError  providers.errors  refused, reset    retryable
                ├── BadRequest               providers.errors  other 4xx
                ├── AuthenticationFailed     providers.errors  401, 403
                ├── MalformedResponse        providers.errors  a body we cannot read
                └── ScriptExhausted          providers.errors  the scripted model ran out

    ToolError                    errors            a tool call that cannot be done as asked
    ├── FirewallError            fs.path_rules     refused by the scope firewall; .violation
    ├── EditError                fs.path_rules     edit_file's old text: zero or several matches
    │   └── LineRangeError       outline.views     a line range outside the file
    └── ToolRefusal              agent.dispatch    a handler's refusal, worded for the model

    Exception                                      signals that never leave their module:
    ├── Refusal                  fs.path_rules     the firewall words it as a FirewallError
    └── _Limit                   fs.userdata       worded as a UsageError naming the file

Foreign exceptions (OSError, git, SDK errors) are translated where they enter our code,
with ``raise ... from exc`` so the cause is kept for debugging. ``at_boundary`` is the last
resort the CLI applies to whatever still escapes, so a user never sees a traceback; with
``ANTI_SPRAWL_DEBUG=1`` an internal error keeps its traceback for whoever fixes it.
"""

from __future__ import annotations

__all__ = [
    "AntiSprawlError",
    "ExecutorLost",
    "InternalError",
    "Interrupted",
    "ProviderError",
    "RunError",
    "StorageError",
    "ToolError",
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
    """Ctrl-C, SIGTERM or SIGHUP stopped the run; what finished is kept, the rest can be resumed.

    Exits with 128 + the signal's number (130 for Ctrl-C), as a shell reports a signal."""

    exit_code = 130

    def __init__(self, message: str, *, exit_code: int = 130):
        super().__init__(message)
        self.exit_code = exit_code


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


class ExecutorLost(RunError):
    """Where the nodes run is gone (a lost Dask scheduler): the run stops, no node is blamed,
    and ``resume`` does what is left."""


class InternalError(RunError):
    """An exception nothing translated: a bug, reported in one line instead of a traceback."""


class ToolError(Exception):
    """A tool call that cannot be done as asked; the model is told why and may try otherwise.

    Not an ``AntiSprawlError``: it ends a tool call, never a command.
    """


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
