"""Whether a run said to be ``running`` still is: its journal cannot say it died.

A run's journal says ``running`` until its last write, so a process killed outright (``kill
-9``, a lost machine, a signal before the run's handlers were in) leaves it saying so forever.
The run lock tells the truth (``journal.RepoLock``: a ``flock`` the kernel frees when the
process is gone, with the holder's run id written in it): a run whose lock nobody holds, or
that another run holds, is not running, and ``status`` shows it ``interrupted``, as ``resume``
will treat it. Whether the lock is held is read from ``/proc/locks``, never by taking it: a
probe could make an ``execute`` starting at that moment refuse to run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import UsageError
from ..git.layout import StateLayout
from .journal import Journal, RunState

__all__ = ["as_seen", "lock_holder"]

GONE = "its process is gone (the run lock is free); resume finishes it"
_PROC_LOCKS = Path("/proc/locks")


def lock_holder(repo: Path) -> str | None:
    """The run id holding the repository's run lock; "" when held by a holder that wrote no
    id, None when nobody holds it. Unknown (no ``/proc/locks``) counts as held by ""."""
    path = StateLayout(repo).lock()
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    except OSError:
        return ""
    try:
        table = _PROC_LOCKS.read_text(encoding="ascii", errors="replace")
    except OSError:
        return ""
    where = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    if not any(
        len(fields) > 5 and fields[1] == "FLOCK" and fields[5] == where
        for fields in (line.split() for line in table.splitlines())
    ):
        return None
    try:
        return str(json.loads(path.read_text(encoding="utf-8"))["run_id"])
    except (OSError, ValueError, KeyError, TypeError):
        return ""


def as_seen(repo: Path, state: RunState) -> RunState:
    """``state``, or, when it says ``running`` but its process is gone, a copy that says
    ``interrupted`` with its running nodes ``pending`` (the journal is not written)."""
    if state.status != "running":
        return state
    holder = lock_holder(repo)
    if holder is not None and holder in ("", state.run_id):
        return state
    try:  # read again: a run that ended after the first read wrote its verdict, then let go
        latest = Journal.load(repo, state.run_id).state
    except UsageError:
        latest = state
    if latest.status != "running":
        return latest
    seen = latest.model_copy(deep=True)
    seen.status, seen.stopped_by = "interrupted", seen.stopped_by or GONE
    for record in seen.tasks.values():
        if record.status == "running":
            record.interrupt(GONE)
    return seen
