"""``anti-sprawl cancel RUN``: stop a run from another terminal, as a Ctrl-C in its own would.

The run lock (run/journal.py's ``RepoLock``) is held by the live process of the run and names
its pid. If the lock is still held (a dead process holds no ``flock``) and the note names this
run, that process gets one SIGINT: no further node starts, running nodes wind down, and the
journal ends ``interrupted`` (run/interrupts.py), so ``resume`` finishes it.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
from pathlib import Path

from ..errors import UsageError
from ..git.layout import StateLayout

__all__ = ["cancel_run"]


def _live_holder(lock: Path) -> dict[str, object] | None:
    """The note of the process holding the lock, or None when nobody holds it."""
    try:
        fh = lock.open("r", encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UsageError(f"cannot read the run lock {lock}: {exc.strerror or exc}") from exc
    with fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                note = json.loads(fh.read())
            except ValueError:
                return {}
            return note if isinstance(note, dict) else {}
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        return None


def cancel_run(repo: Path, run_id: str) -> int:
    """Ask the live process of ``run_id`` to stop; returns its pid (UsageError if none runs)."""
    holder = _live_holder(StateLayout(repo).lock())
    if holder is None:
        raise UsageError(f"run {run_id} is not running in {repo} (see 'anti-sprawl status')")
    if holder.get("run_id") != run_id:
        other = holder.get("run_id") or "another run"
        raise UsageError(f"run {run_id} is not running in {repo} ({other} is)")
    pid = holder.get("pid")
    if not isinstance(pid, int) or pid <= 1:
        raise UsageError(f"the run lock does not say which process runs {run_id}")
    try:
        os.kill(pid, signal.SIGINT)
    except ProcessLookupError:
        raise UsageError(f"run {run_id} is not running (process {pid} is gone)") from None
    except PermissionError:
        raise UsageError(f"process {pid} of run {run_id} belongs to another user") from None
    return pid
