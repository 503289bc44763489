"""Checks of a plan against the repository it will run on: scope entries that name nothing.

A read entry must match an existing file (or one an upstream node writes); a write entry must
exist or have an existing parent directory, so a typo in a path fails validation instead of
leaving a node with nothing it can read or nowhere it can write.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from ..fs.scopes import (
    ALWAYS_DENIED_DIRS,
    Scope,
    entry_problem,
    is_glob,
    literal_prefix,
    may_overlap,
    normalize_entry,
)
from .model import Plan, TaskNode
from .report import Problem, problem

__all__ = ["MAX_REPO_FILES", "repo_files", "repo_problems"]

# Reasonable cap on how many repository files we list for repo-aware checks.
MAX_REPO_FILES = 500_000


def repo_files(repo: Path) -> list[str]:
    """Repo-relative POSIX paths of the files under ``repo`` (no .git, no symlinked dirs).

    Not the planner's listing (fs/repofiles.py), which hides secret, ignored and vendored files
    from a model: validation checks entries against the checkout as the user sees it, so an
    entry naming a secret file gets its own ``secret_in_scope`` error, not "matches no file"."""
    out: list[str] = []
    root = str(repo)
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        rel_dir = os.path.relpath(dirpath, root)
        dirnames[:] = sorted(d for d in dirnames if d.lower() not in ALWAYS_DENIED_DIRS)
        for name in sorted(filenames):
            out.append(name if rel_dir == "." else f"{rel_dir.replace(os.sep, '/')}/{name}")
            if len(out) >= MAX_REPO_FILES:
                return out
    return out


def repo_problems(plan: Plan, repo: Path, files: list[str] | None = None) -> list[Problem]:
    """Read entries that match no file and write entries with no existing parent, per task
    (``files``: the checkout's ``repo_files`` when the caller has listed them already)."""
    if not repo.is_dir():
        return [problem("repo", f"repository directory not found: {repo}")]
    index = _RepoIndex(repo_files(repo) if files is None else files)
    by_id = {t.task_id: t for t in plan.tasks}
    problems: list[Problem] = []
    for t in plan.tasks:
        problems.extend(_missing_reads(t, index, by_id))
        problems.extend(_missing_writes(t, index))
    return problems


class _RepoIndex:
    """The files of a checkout and the directories they are in."""

    def __init__(self, files: list[str]):
        self.files = files
        self.file_set = set(files)
        self.dirs = {"/".join(f.split("/")[:i]) for f in files for i in range(1, f.count("/") + 1)}

    def exists(self, entry: str) -> bool:
        """Does ``entry`` name an existing file or directory (a glob: match any file)?"""
        if not is_glob(entry):
            norm = normalize_entry(entry).rstrip("/")
            return norm in self.file_set or norm in self.dirs
        scope = Scope([entry])
        return any(scope.matches(f) for f in self.files)


def _missing_reads(
    t: TaskNode, index: _RepoIndex, by_id: Mapping[str, TaskNode]
) -> Iterator[Problem]:
    for entry in t.read_scope:
        if entry_problem(entry) or index.exists(entry) or _written_upstream(t, entry, by_id):
            continue
        msg = f"task '{t.task_id}' read_scope entry {entry!r} matches no file in the repository"
        yield problem("read_scope_missing", msg, [t.task_id], [entry])


def _written_upstream(task: TaskNode, entry: str, by_id: Mapping[str, TaskNode]) -> bool:
    """A read of a file that does not exist yet is fine when an ancestor creates it."""
    seen: set[str] = set()
    stack = list(task.dependencies)
    while stack:
        tid = stack.pop()
        if tid in seen or tid not in by_id:
            continue
        seen.add(tid)
        if any(may_overlap(entry, w) for w in by_id[tid].write_scope if not entry_problem(w)):
            return True
        stack.extend(by_id[tid].dependencies)
    return False


def _missing_writes(t: TaskNode, index: _RepoIndex) -> Iterator[Problem]:
    for entry in t.write_scope:
        if entry_problem(entry) or index.exists(entry):
            continue
        # A new file or directory is fine when the directory it goes into exists.
        prefix = literal_prefix(entry)
        parent = "/".join(prefix if is_glob(entry) else prefix[:-1])
        if parent and parent not in index.dirs:
            msg = (
                f"task '{t.task_id}' write_scope entry {entry!r}: neither it nor its parent "
                f"directory '{parent}/' exists"
            )
            yield problem("write_scope_missing", msg, [t.task_id], [entry])
