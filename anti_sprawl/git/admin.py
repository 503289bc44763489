"""git's worktree admin dirs under race: one lock for this process, retries for the others.

``git worktree add/remove`` makes and deletes ``.git/worktrees/<id>/`` in steps (the dir,
then ``gitdir``, ``commondir``, a ``HEAD`` of zeros, then the real ``HEAD``; a removal deletes
the empty ``worktrees/`` too). Any git command that walks the admin dirs in between (``worktree
list``, ``branch -D``, ``bundle unbundle``, another ``worktree add``) dies with ``failed to read
.git/worktrees/X/commondir`` or ``bad object worktrees/X/HEAD``, before it changed anything.

- This process's own add/remove/prune and its reads that walk the admin dirs take
  :func:`admin_lock` (one per repository), so they never see each other half-done. In a Dask
  worker's shared cache clone (transport.py) a file lock extends it to the machine's processes.
- Another process (the user's own linked worktrees, which the README supports) takes no lock
  of ours: ``cmd.run_git`` retries a command that failed with one of :data:`TRANSIENT`'s
  errors, briefly and with a bounded backoff (:data:`RETRY_DELAYS`), before it counts.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path

__all__ = ["RETRY_DELAYS", "SHARED_LOCK", "TRANSIENT", "admin_lock", "is_transient"]

# A Dask worker's cache clone (transport.py) is shared by the worker processes of a machine,
# which no run lock keeps apart: a lock file in the clone makes them take turns too.
SHARED_LOCK = "anti-sprawl-shared.lock"

# Seconds to wait before each retry: 7 retries, ~3 s in all, then the error counts.
RETRY_DELAYS = (0.02, 0.05, 0.1, 0.2, 0.4, 0.8, 1.5)

# What git says when it met another process's half-made or half-deleted admin dir (measured
# with git 2.39 against a loop of `git worktree add/remove`; tests/test_worktree_race.py).
TRANSIENT = (
    re.compile(r"failed to read \S*worktrees/[^/\s]+/(commondir|gitdir)"),
    re.compile(r"bad object \S*worktrees/[^/\s]+/HEAD"),
    re.compile(r"could not create directory of '\S*worktrees/"),
    re.compile(r"\S*worktrees/[^/\s]+/(commondir|gitdir|HEAD)\S*: No such file or directory"),
    re.compile(r"Invalid path '[^']*worktrees/[^']*': No such file or directory"),
)

_locks: dict[Path, threading.Lock] = {}
_locks_guard = threading.Lock()


def is_transient(stderr: str) -> bool:
    """True when ``stderr`` is git tripping over another process's worktree admin dir."""
    return any(pattern.search(stderr) for pattern in TRANSIENT)


@contextlib.contextmanager
def admin_lock(repo: Path) -> Iterator[None]:
    """Held by this process's worktree add/remove/prune and by its reads that walk the admin
    dirs of ``repo`` (not reentrant: the shared clone's file lock would wait on itself)."""
    repo = repo.resolve()
    with _locks_guard:
        lock = _locks.setdefault(repo, threading.Lock())
    with lock:
        shared = repo / SHARED_LOCK
        if not (repo / "objects").is_dir() or not shared.is_file():
            yield  # a checkout: the run lock keeps other runs out
            return
        fd = os.open(shared, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)
