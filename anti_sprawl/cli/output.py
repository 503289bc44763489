"""The command line's boundary with the terminal: the consoles (whose texts are inert:
views/terminal.py), the error boundary (one line on stderr and the matching exit code, never a
traceback), the ``--json`` printer, and outputs that may close under us.

A reader that goes away (``status RUN | head -1``: EPIPE) or a terminal that closed (SIGHUP,
then EIO) must not change what the command does or its exit code, which says whether the work
failed: ``guard_output`` makes stdout and stderr drop what no one reads any more (fd pointed
at ``/dev/null``, so neither Python's exit nor a later write fails) and the command goes on.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import os
import sys
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any, ParamSpec, TypeVar

import typer

from ..errors import InternalError, Interrupted, at_boundary

if TYPE_CHECKING:  # rich loads when a command prints, not for --help (tests/test_cli_startup.py)
    from rich.console import Console

__all__ = ["guard_output", "handle_errors", "print_json", "redact", "stderr", "stdout"]

P = ParamSpec("P")
R = TypeVar("R")


def stdout() -> Console:
    """The console for people: every text on it is inert (views/terminal.py)."""
    from ..views.terminal import inert_console

    return inert_console()


def stderr() -> Console:
    """Progress and error lines, inert like ``stdout``."""
    from ..views.terminal import inert_console

    return inert_console(stderr=True, soft_wrap=True)


def handle_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """The error boundary: one line on stderr and the matching exit code, never a traceback.

    Our own errors carry their exit code; anything else is mapped by ``errors.at_boundary``
    (an OSError such as a full disk, a bug). Typer's own exits pass through untouched.
    """

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, typer.TyperException):
            raise
        except KeyboardInterrupt:
            stderr().print("anti-sprawl: interrupted", markup=False)
            raise typer.Exit(130) from None
        except Exception as exc:
            error = at_boundary(exc)
            if isinstance(error, InternalError) and os.environ.get("ANTI_SPRAWL_DEBUG"):
                raise
            text = str(error).strip()
            lines = text.splitlines() or [type(error).__name__]
            prefix = "" if isinstance(error, Interrupted) else "error: "
            # One line, or one per item for an error that lists several (run/baseline.py).
            for line in lines if getattr(error, "multiline", False) else lines[:1]:
                stderr().print(f"anti-sprawl: {prefix}{redact(line)}", markup=False)
            raise typer.Exit(error.exit_code) from None

    return wrapper


def redact(text: str) -> str:
    """Secret values of this environment never reach the terminal, even inside an error."""
    from ..redact import Redactor, env_secrets

    return Redactor(env_secrets(os.environ))(text)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    sys.stdout.flush()


class _Unread:
    """A text stream that, once its reader is gone (EPIPE, EIO), writes to ``/dev/null``."""

    def __init__(self, stream: IO[str]):
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as exc:
            self._gone(exc)
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            self._gone(exc)

    def _gone(self, exc: OSError) -> None:
        if exc.errno not in (errno.EPIPE, errno.EIO):
            raise exc
        # The buffered text would fail again at every flush (and at exit): the fd goes to
        # /dev/null, so it drains there.
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, self._stream.fileno())
        finally:
            os.close(devnull)
        with contextlib.suppress(OSError):  # what was buffered for the gone reader goes too
            self._stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def guard_output() -> None:
    """Make the process's stdout and stderr survive their reader going away (module docstring)."""
    if not isinstance(sys.stdout, _Unread) and sys.stdout is not None:
        sys.stdout = _Unread(sys.stdout)
    if not isinstance(sys.stderr, _Unread) and sys.stderr is not None:
        sys.stderr = _Unread(sys.stderr)
