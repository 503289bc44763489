"""``--scope-requests auto|ask|never`` of ``execute`` and ``resume``: the option, and ``ask``.

The option is recorded in the run's launch settings like every other (cli/launch.py), so a
``resume`` goes on the way the run was started. ``ask`` needs someone to answer: on a terminal
each request that passes the automatic checks (run/scope_grants.py) is put to the user, one at
a time; without a terminal (or for a node on a Dask worker) it is ``never``, said once on
stderr. What the model wrote (the path, its reason) is shown without terminal control bytes.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer

from .output import stderr

if TYPE_CHECKING:  # the run's modules load when a run starts, not for --help
    from ..fs.scope_grant import ScopeGrant
    from ..run.scope_grants import ScopeRequests

__all__ = ["ScopeRequestsChoice", "ScopeRequestsOpt", "asker", "resolve"]


class ScopeRequestsChoice(StrEnum):
    """The modes of run/scope_grants.py (``SCOPE_REQUESTS``; tests/test_scope_requests.py
    checks they are the same)."""

    auto = "auto"
    ask = "ask"
    never = "never"


ScopeRequestsOpt = Annotated[
    ScopeRequestsChoice,
    typer.Option(
        "--scope-requests",
        case_sensitive=False,
        help="A worker's request_scope for a file outside its scopes: auto grants reads of "
        "files the repository map lists and writes no unordered node touches (3 per node); "
        "ask puts each to you on a terminal (never without one); never refuses all.",
    ),
]


def resolve(choice: ScopeRequestsChoice | str, *, terminal: bool | None = None) -> ScopeRequests:
    """The mode this session runs with: ``ask`` without a terminal is ``never`` (said once)."""
    mode: ScopeRequests = ScopeRequestsChoice(choice).value
    if terminal is None:
        terminal = sys.stdin.isatty() and sys.stderr.isatty()
    if mode == "ask" and not terminal:
        stderr().print(
            "anti-sprawl: note: --scope-requests ask needs a terminal to ask on; every scope "
            "request of this session is refused (never)",
            markup=False,
        )
        return "never"
    return mode


def asker(
    mode: str, paused: Callable[[], AbstractContextManager[None]] | None = None
) -> Callable[[str, ScopeGrant], bool] | None:
    """The prompt for ``ask`` (None for the other modes): one question at a time, with the
    live view ``paused`` while it is asked."""
    if mode != "ask":
        return None
    from ..views.terminal import inert  # Rich: not for --help (tests/test_cli_startup.py)

    lock = threading.Lock()

    def ask(task_id: str, request: ScopeGrant) -> bool:
        path, reason = inert(request.path), inert(request.reason)
        with lock, paused() if paused is not None else contextlib.nullcontext():
            return typer.confirm(
                f"task {task_id!r} asks to {request.mode} {path!r} ({reason}). Grant it?",
                default=False,
                err=True,
            )

    return ask
