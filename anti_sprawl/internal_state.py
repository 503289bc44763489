"""The tool's own state directory, ``<repo>/.anti-sprawl``, is never repository content.

A repository someone else committed could ship ``.anti-sprawl`` (or a path under it) as a
symlink: the lock, the run data (transcripts hold read-scope contents), the worktrees and the
PR body would then land wherever the link points, and the stale-worktree cleanup would delete
that directory's entries. So before any use: nothing under ``.anti-sprawl`` may be tracked
(in the index or in ``HEAD``), ``.anti-sprawl`` itself and every fixed name below it must be a
real directory or file (``lstat``, never following a link), and it must sit directly in the
resolved repository root. Any breach is a ``UsageError``: one line, exit 2, nothing written.
The directory is created mode 0700: run data is private to the user who ran the tool.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .errors import UsageError
from .gitcmd import run_git

__all__ = ["STATE_DIR_NAME", "InternalStateError", "check_state_dir", "ensure_state_dir"]

STATE_DIR_NAME = ".anti-sprawl"
# Names the tool itself creates directly under the state directory.
_FIXED = ("runs", "worktrees", "plans", "planner", "run.lock", "memory.yaml")
# Directories whose entries are per-run (or per-node) and must be real directories too.
_PER_ENTRY = ("runs", "worktrees")


class InternalStateError(UsageError):
    """``.anti-sprawl`` is tracked, a symlink, or otherwise not the tool's own directory."""


def _refuse(repo: Path, what: str) -> InternalStateError:
    return InternalStateError(
        f"refusing to use {repo / STATE_DIR_NAME}: {what}; anti-sprawl keeps its own state "
        "there and never follows repository content (remove it from the repository first)"
    )


def _tracked(repo: Path) -> str | None:
    """The first tracked path at or below ``.anti-sprawl`` (index or HEAD), if any."""
    for args in (
        ["ls-files", "-z", "--", STATE_DIR_NAME],
        ["ls-tree", "-r", "-z", "--name-only", "HEAD", "--", STATE_DIR_NAME],
    ):
        proc = run_git(args, repo, check=False)
        if proc.returncode == 0:
            first = proc.stdout.split(b"\0", 1)[0]
            if first:
                return first.decode("utf-8", "replace")
    return None


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UsageError(f"cannot inspect {path}: {exc.strerror}") from exc


def _check_entry(repo: Path, path: Path, *, want_dir: bool | None) -> None:
    st = _lstat(path)
    if st is None:
        return
    rel = path.relative_to(repo).as_posix()
    if stat.S_ISLNK(st.st_mode):
        raise _refuse(repo, f"{rel} is a symlink")
    if want_dir is True and not stat.S_ISDIR(st.st_mode):
        raise _refuse(repo, f"{rel} is not a directory")
    if want_dir is False and not stat.S_ISREG(st.st_mode):
        raise _refuse(repo, f"{rel} is not a regular file")


def check_state_dir(repo: Path) -> Path:
    """The checked state directory of ``repo`` (which may not exist yet); refuses a breach."""
    root = repo.resolve()
    tracked = _tracked(root)
    if tracked is not None:
        raise _refuse(root, f"{tracked} is tracked by git")
    state = root / STATE_DIR_NAME
    _check_entry(root, state, want_dir=True)
    if not os.path.lexists(state):
        return state
    for name in _FIXED:
        _check_entry(root, state / name, want_dir="." not in name)
    for name in _PER_ENTRY:
        parent = state / name
        if not parent.is_dir():
            continue
        try:
            entries = sorted(os.scandir(parent), key=lambda e: e.name)
        except OSError as exc:
            raise UsageError(f"cannot list {parent}: {exc.strerror}") from exc
        for entry in entries:
            if entry.is_symlink() or not entry.is_dir(follow_symlinks=False):
                raise _refuse(root, f"{STATE_DIR_NAME}/{name}/{entry.name} is not a directory")
    if os.path.realpath(state) != str(state):
        raise _refuse(root, "it resolves outside the repository")
    return state


def ensure_state_dir(repo: Path) -> Path:
    """The checked state directory, created (mode 0700) if it does not exist yet."""
    state = check_state_dir(repo)
    try:
        os.mkdir(state, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise UsageError(f"cannot create {state}: {exc.strerror}") from exc
    # Re-check what now exists: a directory, not something swapped in since.
    try:
        fd = os.open(state, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise _refuse(state.parent, "it is not a directory") from exc
    os.close(fd)
    return state
