"""A lost Dask scheduler is one event for the run, not a failure of every node after it.

Once the scheduler process is gone, every call on the client fails in its own way (a connect
timeout, a cancelled future, ``AttributeError`` on the closed client), and a run that took
each for its node's failure blamed a dozen nodes as ``internal`` or ``storage``. Instead, any
error while the scheduler is unreachable becomes one ``ExecutorLost``: the runner stops
handing out nodes, the run ends ``interrupted`` with one line naming the scheduler, and
``resume`` (against a live cluster, or ``--executor local``) does what is left.

While the scheduler goes away, ``distributed``'s own threads log what they saw, some with the
exception attached (``distributed/batched.py`` logs "Batched Comm Closed" with its traceback).
``one_line_logs`` keeps those lines and drops the tracebacks: the user's terminal gets the
run's one line, not a stack from a library's comm thread.
"""

from __future__ import annotations

import logging
import socket
from typing import Any
from urllib.parse import urlsplit

from ..errors import ExecutorLost

__all__ = ["one_line_logs", "scheduler_gone", "scheduler_lost"]

_PROBE_SECONDS = 2.0


def scheduler_gone(client: Any, address: str) -> bool:
    """True when the client has lost its scheduler, or nothing answers at its address."""
    if getattr(client, "status", "running") != "running":
        return True
    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    if parts.scheme not in ("tcp", "tls") or not parts.hostname or not parts.port:
        return False  # no address to knock on (inproc://): the client's status says it all
    try:
        with socket.create_connection((parts.hostname, parts.port), timeout=_PROBE_SECONDS):
            return False
    except OSError:
        return True


def scheduler_lost(address: str, exc: BaseException) -> ExecutorLost:
    """The run's one error for a scheduler that is gone (the resume hint is added by the run)."""
    why = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
    return ExecutorLost(
        f"lost the Dask scheduler at {address} ({why}); no node failed for it, the run stopped"
    )


class _OneLine(logging.Filter):
    """Turns a record's exception into a suffix of its message (a handler filter, so it sees
    records from every child logger that reaches the handler)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            why = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
            record.msg = f"{record.getMessage()} ({type(exc).__name__}{': ' if why else ''}{why})"
            record.args = None
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        return True


def one_line_logs(prefixes: tuple[str, ...] = ("distributed", "tornado")) -> None:
    """Every handler on the loggers under ``prefixes`` prints records as one line each.

    ``distributed`` configures its handlers when it is imported (its ``config.py``), so call
    this after the import; calling it again adds nothing."""
    names = [n for n in list(logging.Logger.manager.loggerDict) if n.split(".")[0] in prefixes]
    for name in names:
        for handler in logging.getLogger(name).handlers:
            if not any(isinstance(f, _OneLine) for f in handler.filters):
                handler.addFilter(_OneLine())
