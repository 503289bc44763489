"""Stale git lock files left by a killed git process, and their safe removal.

A ``kill -9`` during ``git commit`` often leaves ``index.lock`` or a ref ``.lock`` behind
(docs/architecture.md, guarantee 6), and git then refuses to work. They are removed
only when no live git process is working in the repository; the caller holds the run lock.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import RunError
from .cmd import common_dir

__all__ = ["clean_stale_locks", "find_locks", "live_git_processes"]

_PROC = Path("/proc")


def _worktree_roots(common: Path) -> list[Path]:
    """The main working tree plus every linked worktree, read from the admin files."""
    roots = [common.parent] if common.name == ".git" else []
    admin = common / "worktrees"
    if admin.is_dir():
        for entry in admin.iterdir():
            gitdir = entry / "gitdir"
            try:
                text = gitdir.read_text(encoding="utf-8", errors="surrogateescape").strip()
            except OSError:
                continue
            roots.append(Path(text).parent)
    return roots


def _inside(path: str, roots: list[Path]) -> bool:
    candidate = Path(path)
    return candidate.is_absolute() and any(candidate.is_relative_to(r) for r in roots)


def live_git_processes(repo: Path) -> list[int]:
    """Pids of git processes whose cwd or a path argument lies in ``repo`` or its worktrees."""
    common = common_dir(repo)
    roots = [common, *_worktree_roots(common)]
    roots += [Path(os.path.realpath(r)) for r in roots]
    found: list[int] = []
    for entry in _PROC.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue  # gone, or not ours to inspect
        args = [a.decode("utf-8", "surrogateescape") for a in argv if a]
        if not args or not Path(args[0]).name.startswith("git"):
            continue
        paths = [cwd, *(a.split("=", 1)[-1] for a in args[1:])]
        if any(_inside(p, roots) for p in paths):
            found.append(int(entry.name))
    return sorted(found)


def find_locks(repo: Path) -> list[Path]:
    """Every ``*.lock`` file git may leave in the shared git dir and per-worktree dirs."""
    common = common_dir(repo)
    found = [p for p in common.glob("*.lock") if not p.is_dir()]
    found += [p for p in (common / "worktrees").glob("*/*.lock") if not p.is_dir()]
    for sub in ("refs", "logs"):
        for dirpath, _dirs, files in os.walk(common / sub):
            found += [Path(dirpath) / f for f in files if f.endswith(".lock")]
    return sorted(found)


def clean_stale_locks(repo: Path) -> list[Path]:
    """Remove stale git locks; raise RunError while a live git process uses the repo."""
    locks = find_locks(repo)
    if not locks:
        return []
    holders = live_git_processes(repo)
    if holders:
        pids = ", ".join(map(str, holders))
        raise RunError(f"git is running in {repo} (pid {pids}); not removing its lock files")
    for lock in locks:
        lock.unlink(missing_ok=True)
    return locks
