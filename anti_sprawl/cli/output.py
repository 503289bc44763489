"""The command line's boundary with the terminal: the consoles (whose texts are inert:
views/terminal.py), the error boundary (one line on stderr and the matching exit code, never a
traceback) and the ``--json`` printer."""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

import typer
from rich.console import Console

from ..errors import InternalError, Interrupted, at_boundary
from ..views.terminal import inert_console

__all__ = ["handle_errors", "print_json", "redact", "stderr", "stdout"]

P = ParamSpec("P")
R = TypeVar("R")


def stdout() -> Console:
    """The console for people: every text on it is inert (views/terminal.py)."""
    return inert_console()


def stderr() -> Console:
    """Progress and error lines, inert like ``stdout``."""
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
