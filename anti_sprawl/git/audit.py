"""The post-node audit: nothing outside a node's write scope survives in its worktree.

Whatever the worker or its test command did, :func:`audit` lists every change against
``HEAD`` (one ``git status``, untracked files included), keeps what lies inside the write scope and
puts everything else back as it was in ``HEAD``, recording one ``Violation`` per path
(docs/architecture.md, guarantee 1). A kept symlink must also point inside the write scope.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel

from ..errors import RunError
from ..fs.deny_rules import DenyRules
from ..fs.firewall import DEFAULT_ALLOW, DEFAULT_DENY, Violation
from ..fs.scopes import Scope

if TYPE_CHECKING:
    from .workspace import Workspace

__all__ = ["AuditResult", "Change", "ChangeKind", "audit", "changes"]

ChangeKind = Literal["added", "modified", "deleted", "renamed", "typechange"]
SYMLINK_MODE = "120000"
GITLINK_MODE = "160000"
DIR_MODE = "040000"
_MAX_PASSES = 5


class Change(BaseModel):
    """One path that differs from ``HEAD`` in a worktree; modes are git's octal strings."""

    path: str
    kind: ChangeKind
    old_path: str | None = None
    old_mode: str | None = None
    new_mode: str | None = None

    @property
    def is_symlink(self) -> bool:
        return self.new_mode == SYMLINK_MODE

    @property
    def mode_changed(self) -> bool:
        return None not in (self.old_mode, self.new_mode) and self.old_mode != self.new_mode


class AuditResult(BaseModel):
    """What the audit kept, what it put back, and the violations it recorded."""

    kept: list[Change]
    reverted: list[Change]
    violations: list[Violation]


def _worktree_mode(root: Path, relpath: str) -> str | None:
    """git's mode for what is at ``relpath`` now; None when absent or reached via a symlink."""
    parts = relpath.split("/")
    here = root
    try:
        for part in parts[:-1]:
            here = here / part
            if not stat.S_ISDIR(here.lstat().st_mode):
                return None
        st = (here / parts[-1]).lstat()
    except (FileNotFoundError, NotADirectoryError):
        return None
    if stat.S_ISLNK(st.st_mode):
        return SYMLINK_MODE
    if stat.S_ISDIR(st.st_mode):
        return DIR_MODE
    return "100755" if st.st_mode & stat.S_IXUSR else "100644"


def _head_modes(ws: Workspace) -> dict[str, str]:
    out = ws.git(["ls-tree", "-r", "-z", "--full-tree", "HEAD"]).stdout
    modes: dict[str, str] = {}
    for record in out.split(b"\0"):
        if record:
            meta, name = record.split(b"\t", 1)
            modes[name.decode("utf-8", "surrogateescape")] = meta.split(b" ", 1)[0].decode()
    return modes


def _kind(old: str | None, new: str | None) -> ChangeKind:
    if old is None:
        return "added"
    if new is None:
        return "deleted"
    if (old == SYMLINK_MODE) != (new == SYMLINK_MODE) or GITLINK_MODE in (old, new):
        return "typechange"
    return "modified"


def changes(ws: Workspace) -> list[Change]:
    """Every path whose worktree state differs from ``HEAD`` (staged, unstaged, untracked).

    One ``git status --porcelain=v2``: its entries carry the mode in ``HEAD`` (``000000``
    when absent), so no tree listing is read; an unmerged entry (its modes are the merge's
    stages) asks ``HEAD``'s tree.
    """
    args = ["status", "--porcelain=v2", "-z", "--untracked-files=all", "--no-renames"]
    out = ws.git(args).stdout
    head: dict[str, str] | None = None
    result: list[Change] = []
    seen: set[str] = set()
    for record in out.split(b"\0"):
        kind = record[:2]
        if kind == b"1 ":  # 1 XY sub mH mI mW hH hI path
            fields = record.split(b" ", 8)
            raw_path, mode = fields[8], fields[3].decode("ascii")
            old = None if mode == "000000" else mode
        elif kind == b"? ":
            raw_path, old = record[2:], None
        elif kind == b"u ":  # u XY sub m1 m2 m3 mW h1 h2 h3 path
            raw_path = record.split(b" ", 10)[10]
            head = _head_modes(ws) if head is None else head
            old = head.get(raw_path.decode("utf-8", "surrogateescape").rstrip("/"))
        else:
            continue  # "2" (renames are off), "!" (ignored is not asked for), headers
        path = raw_path.decode("utf-8", "surrogateescape").rstrip("/")
        if path in seen:
            continue
        seen.add(path)
        new = _worktree_mode(ws.path, path)
        if old is None and new is None:
            continue  # staged then deleted again: no difference from HEAD left
        result.append(Change(path=path, kind=_kind(old, new), old_mode=old, new_mode=new))
    return result


def _link_escapes(ws: Workspace, change: Change, scope: Scope) -> str | None:
    """Where a symlink points when that is outside ``scope`` (lexically or for real)."""
    link = ws.path / change.path
    target = os.readlink(link)
    if posixpath.isabs(target):
        return target
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(change.path), target))
    if joined == ".." or joined.startswith("../") or not scope.matches(joined):
        return target
    real, root = Path(os.path.realpath(link)), Path(os.path.realpath(ws.path))
    if not real.is_relative_to(root) or not scope.matches(real.relative_to(root).as_posix()):
        return target
    return None


def _remove(root: Path, relpath: str) -> None:
    """Delete ``root/relpath`` without following a symlink anywhere on the way."""
    mode = _worktree_mode(root, relpath)
    if mode is None:
        return  # absent, or below a replaced parent (that parent is its own change)
    if mode == DIR_MODE:
        shutil.rmtree(root / relpath)
    else:
        (root / relpath).unlink()
    # Directories left empty held nothing but what was removed (git tracks no empty dirs).
    parent = (root / relpath).parent
    while parent != root and parent.is_relative_to(root):
        try:
            parent.rmdir()
        except OSError:
            break
        parent = parent.parent


def _revert(ws: Workspace, bad: list[Change]) -> None:
    head = {c.path for c in bad if c.old_mode is not None}
    fresh = sorted(c.path for c in bad if c.old_mode is None)
    if fresh:
        ws.git(["rm", "-r", "-q", "--cached", "--ignore-unmatch", "--sparse", "--", *fresh])
    # Shallow paths first, so a directory or symlink that replaced a parent goes before
    # the tracked files that are restored below it.
    for path in sorted(fresh, key=lambda p: p.count("/")):
        _remove(ws.path, path)
    for c in bad:
        if c.old_mode not in (None, GITLINK_MODE) and c.new_mode == DIR_MODE:
            _remove(ws.path, c.path)  # a directory where HEAD has a file
    if head:
        ws.git(["checkout", "--ignore-skip-worktree-bits", "HEAD", "--", *sorted(head)])


def audit(
    ws: Workspace,
    write_scope: Sequence[str],
    *,
    deny: Sequence[str] = DEFAULT_DENY,
    allow: Sequence[str] = DEFAULT_ALLOW,
) -> AuditResult:
    """Revert every change outside ``write_scope`` and every escaping symlink inside it.

    ``.git``, ``.anti-sprawl`` and the firewall's secret names (``deny`` minus ``allow``) are
    outside every write scope.
    """
    scope = Scope(write_scope)
    rules = DenyRules(deny, allow)
    violations: dict[tuple[str, str], Violation] = {}
    reverted: list[Change] = []
    # Reverting a file such as .gitignore can reveal new untracked files: repeat until clean.
    bad: list[Change] = []
    for _ in range(_MAX_PASSES):
        current = changes(ws)
        bad = []
        for change in current:
            detail: str = change.kind
            if rules.reason(change.path) or not scope.matches(change.path):
                reason = "outside_write_scope"
            elif change.is_symlink and (target := _link_escapes(ws, change, scope)) is not None:
                reason, detail = "symlink", f"{change.kind} -> {target}"
            elif change.new_mode == DIR_MODE:
                # git reports a directory only for a nested repository; it would be committed
                # as a gitlink pointing at whatever that repository holds.
                reason = "embedded_repository"
            else:
                continue
            bad.append(change)
            violations.setdefault(
                (change.path, reason),
                Violation(op="audit", path=change.path, reason=reason, detail=detail),
            )
        if not bad:
            return AuditResult(
                kept=current, reverted=reverted, violations=list(violations.values())
            )
        _revert(ws, bad)
        reverted.extend(bad)
    left = ", ".join(c.path for c in bad[:10])
    raise RunError(f"audit of workspace {ws.name!r} could not revert: {left}")
