"""Per-node git worktrees, commits with trailers, and diffs for the reducer.

A node works in its own worktree on a temporary branch ``anti-sprawl/wt/<name>`` under
``<repo>/.anti-sprawl/worktrees/``; the user's branch, index and working tree are never
touched (docs/architecture.md, guarantee 5). Git always runs through :mod:`.cmd` (no hooks,
no repo-configured programs); adding, removing and listing worktrees take :mod:`.admin`'s lock. The audit of a worktree is :mod:`.audit` (it takes a
``Workspace``; this module never imports it), stale git locks are :mod:`.locks`.

Over 300 lines: creating a worktree, removing it and cleaning up what a kill left share one
lock on git's worktree admin files and one naming rule (a worktree's name is its branch's);
apart, each half would need the other's.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

from pydantic import BaseModel

from ..errors import RunError
from ..fs.files import atomic_write_text
from ..ids import STATE_DIR_NAME
from .admin import RETRY_DELAYS, admin_lock
from .cmd import DEFAULT_IDENTITY, common_dir, git_dir, run_git

__all__ = [
    "BRANCH_PREFIX",
    "DiffStat",
    "FileStat",
    "Trailers",
    "Workspace",
    "commit",
    "compose_message",
    "diff",
    "diffstat",
    "ensure_excluded",
    "remove_stale_worktrees",
]

BRANCH_PREFIX = "anti-sprawl/wt/"
EXCLUDE_LINE = f"/{STATE_DIR_NAME}/"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_TRAILER_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*$")


def _check_name(name: str) -> None:
    if not _NAME.match(name) or ".." in name or name.endswith(".lock"):
        raise RunError(f"bad workspace name {name!r}: use letters, digits, '_', '.', '-'")


class Workspace:
    """One git worktree for one node: created at a commit, removed when the node is done."""

    def __init__(
        self,
        repo: Path,
        path: Path,
        name: str,
        admin_dir: Path,
        base: str,
        sparse: tuple[str, ...] | None = None,
    ):
        self.repo = repo
        self.path = path
        self.name = name
        self.branch = BRANCH_PREFIX + name
        self.admin_dir = admin_dir
        self.base = base
        self.sparse = sparse

    def __repr__(self) -> str:
        return f"Workspace({self.name!r}, path={str(self.path)!r}, base={self.base[:12]!r})"

    @classmethod
    def create(
        cls,
        repo: Path,
        worktrees_dir: Path,
        name: str,
        commit: str,
        *,
        sparse: Sequence[str] | None = None,
    ) -> Workspace:
        """Make a worktree of ``commit`` at ``worktrees_dir/name`` on its own branch.

        With ``sparse`` (scope entries), only matching paths are checked out (non-cone
        sparse-checkout kept in the worktree's own admin dir; the shared config is untouched).
        """
        _check_name(name)
        repo = repo.resolve()
        worktrees_dir.mkdir(parents=True, exist_ok=True)
        worktrees_dir = worktrees_dir.resolve()
        if worktrees_dir.is_relative_to(repo):
            ensure_excluded(repo)
        sha = run_git(["rev-parse", "--verify", "--end-of-options", f"{commit}^{{commit}}"], repo)
        base = sha.stdout.decode().strip()
        path = worktrees_dir / name
        branch = BRANCH_PREFIX + name
        _remove_worktree(repo, path, branch)
        patterns = None if sparse is None else tuple(sparse)
        for delay in RETRY_DELAYS:
            ws = cls._add(repo, path, name, base, patterns)
            if ws is not None:
                return ws
            time.sleep(delay)
        ws = cls._add(repo, path, name, base, patterns)
        if ws is None:
            raise RunError(f"git worktree add left {path} without its branch at {base[:12]}")
        return ws

    @classmethod
    def _add(
        cls, repo: Path, path: Path, name: str, base: str, patterns: tuple[str, ...] | None
    ) -> Workspace | None:
        """One ``git worktree add``; None (and nothing left) when the new worktree's HEAD is not
        ``base``: a race deleted its branch before it was checked out (admin.py)."""
        branch = BRANCH_PREFIX + name
        add = ["worktree", "add", "--quiet", "-B", branch]
        if patterns is not None:
            add.append("--no-checkout")
        try:
            with admin_lock(repo):
                run_git([*add, "--", str(path), base], repo)
            ws = cls(repo, path, name, git_dir(path), base, patterns)
            head = ws.git(["rev-parse", "--verify", "--quiet", "HEAD"], check=False)
            if head.stdout.decode().strip() != base:
                _remove_worktree(repo, path, branch)
                return None
            if patterns is not None:
                lines = "".join(f"/{entry.lstrip('/')}\n" for entry in patterns)
                atomic_write_text(ws.admin_dir / "info" / "sparse-checkout", lines)
                ws.git(["read-tree", "-mu", "HEAD"])
        except BaseException:
            # Also on KeyboardInterrupt: never leave a half-made worktree behind.
            _remove_worktree(repo, path, branch)
            raise
        return ws

    def _config(self) -> list[str]:
        if self.sparse is None:
            return []
        return ["core.sparseCheckout=true", "core.sparseCheckoutCone=false"]

    def git(
        self,
        args: Sequence[str],
        *,
        check: bool = True,
        input_bytes: bytes | None = None,
        identity: tuple[str, str] = DEFAULT_IDENTITY,
        author: tuple[str, str, str] | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        """Run git in this worktree; the admin dir is named explicitly, not read from ``.git``."""
        argv = [f"--git-dir={self.admin_dir}", f"--work-tree={self.path}", *args]
        return run_git(
            argv,
            self.path,
            config=self._config(),
            check=check,
            input_bytes=input_bytes,
            identity=identity,
            author=author,
        )

    @property
    def head(self) -> str:
        """The commit the worktree's branch points at now."""
        return self.git(["rev-parse", "HEAD"]).stdout.decode().strip()

    def remove(self) -> None:
        """Delete the worktree and its branch; idempotent and safe after a crash."""
        _remove_worktree(self.repo, self.path, self.branch)

    def __enter__(self) -> Workspace:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # A removal git refuses is no reason to fail the node's finished work: what it left
        # is on the run's temp branch, which the run's clean-up removes (runner._wind_up,
        # and resume before anything runs).
        with contextlib.suppress(RunError):
            self.remove()


def _remove_worktree(repo: Path, path: Path, branch: str) -> None:
    with admin_lock(repo):
        _remove_worktree_locked(repo, path, branch)


def _remove_worktree_locked(repo: Path, path: Path, branch: str) -> None:
    proc = run_git(["worktree", "remove", "--force", "--force", "--", str(path)], repo, check=False)
    if proc.returncode != 0 and os.path.lexists(path):
        # Not a registered worktree (or a half-created one): delete the entry itself, but
        # only when its parent is a real directory, so a symlinked parent is never followed.
        _remove_entry(path)
    run_git(["worktree", "prune"], repo)
    exists = run_git(
        ["rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"], repo, check=False
    )
    if exists.returncode == 0:
        run_git(["branch", "-D", "--", branch], repo)


def _remove_entry(path: Path) -> None:
    """Delete ``path`` (a link is unlinked, never followed) below a symlink-free parent."""
    parent = path.parent
    if os.path.realpath(parent) != os.path.abspath(parent):
        raise RunError(f"refusing to delete {path}: its parent directory is reached via a symlink")
    st = os.lstat(path)
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path)  # rmtree never follows links inside the tree
    else:
        path.unlink()


def _registered_worktrees(repo: Path) -> list[tuple[Path, str]]:
    """``(path, branch)`` of every worktree git knows about, from ``--porcelain -z``; the
    branch is ``""`` for a detached one, or one whose HEAD points at nothing."""
    with admin_lock(repo):
        out = run_git(["worktree", "list", "--porcelain", "-z"], repo).stdout
    found: list[tuple[Path, str]] = []
    path: Path | None = None
    branch = ""
    for field in out.decode("utf-8", "surrogateescape").split("\0"):
        if field.startswith("worktree "):
            path, branch = Path(field[len("worktree ") :]), ""
        elif field.startswith("branch "):
            branch = field[len("branch ") :].removeprefix("refs/heads/")
        elif not field and path is not None:  # an empty field ends a record
            found.append((path, branch))
            path = None
    if path is not None:
        found.append((path, branch))
    return found


def remove_stale_worktrees(
    repo: Path, worktrees_dir: Path, run_id: str | None = None
) -> list[Path]:
    """Remove this run's leftover worktrees and temp branches (every run's when no ``run_id``).

    Only worktrees that ``git worktree list`` reports, directly under ``worktrees_dir`` and on
    one of our temp branches, are removed: the directory is never listed or followed, so a
    symlinked ``worktrees_dir`` cannot turn the cleanup into a delete elsewhere.
    """
    prefix = BRANCH_PREFIX + (f"{run_id}-" if run_id else "")
    where = os.path.abspath(worktrees_dir)
    removed: list[Path] = []
    for path, listed in _registered_worktrees(repo):
        if os.path.dirname(os.path.abspath(path)) != where:
            continue
        # A process killed inside `git worktree add` can leave a registered worktree whose
        # HEAD points at nothing (no branch listed; `git fsck` then fails): its name is still
        # its branch's (Workspace.create), so it is recognised and removed all the same.
        branch = listed or BRANCH_PREFIX + path.name
        if branch.startswith(prefix):
            _remove_worktree(repo, path, branch)
            removed.append(path)
    # Under the lock: `worktree add -B` makes its branch before the worktree that checks it
    # out, so a `branch -D` in between would delete a live node's branch (a Dask worker's
    # cache clone is shared by the nodes of every worker process of its machine).
    with admin_lock(repo):
        run_git(["worktree", "prune"], repo)
        # for-each-ref patterns match whole components: list all temp branches, filter here.
        refs = run_git(
            ["for-each-ref", "--format=%(refname:short)", f"refs/heads/{BRANCH_PREFIX}"], repo
        )
        for branch in refs.stdout.decode("utf-8", "surrogateescape").split():
            if branch.startswith(prefix):
                run_git(["branch", "-D", "--", branch], repo, check=False)
    return removed


def ensure_excluded(repo: Path) -> None:
    """Add ``/.anti-sprawl/`` to the repo's ``info/exclude`` once, so run data never shows."""
    exclude = common_dir(repo) / "info" / "exclude"
    text = exclude.read_text(encoding="utf-8", errors="surrogateescape") if exclude.exists() else ""
    lines = {line.strip() for line in text.splitlines()}
    name = STATE_DIR_NAME
    if lines & {EXCLUDE_LINE, f"{name}/", f"/{name}", name}:
        return
    if text and not text.endswith("\n"):
        text += "\n"
    atomic_write_text(exclude, text + EXCLUDE_LINE + "\n")


Trailers = Mapping[str, str | tuple[str, ...]]
"""Trailer key -> its value, or its values (one ``Key: value`` line each, in order)."""


def compose_message(message: str, trailers: Trailers) -> str:
    """The commit message: ``message``, a blank line, then one ``Key: value`` line per trailer
    value."""
    body = message.strip()
    if not body:
        raise RunError("empty commit message")
    lines = []
    for key, values in trailers.items():
        for value in (values,) if isinstance(values, str) else values:
            if not _TRAILER_KEY.match(key) or "\n" in value or "\r" in value or not value.strip():
                raise RunError(f"bad commit trailer {key!r}: {value!r}")
            lines.append(f"{key}: {value.strip()}")
    return body + ("\n\n" + "\n".join(lines) if lines else "") + "\n"


def commit(
    ws: Workspace,
    message: str,
    trailers: Trailers,
    *,
    identity: tuple[str, str] = DEFAULT_IDENTITY,
    author: tuple[str, str] | None = None,
    allow_empty: bool = False,
) -> str | None:
    """Stage everything in the (audited) worktree and commit; None when nothing changed.

    ``identity`` commits; ``author`` (the user, see ``git.cmd.user_identity``) authors, so
    the history says whose change it is and the trailers say which tool made it.
    ``allow_empty`` commits even when nothing changed.
    """
    text = compose_message(message, trailers)
    add = ["add", "-A"] if ws.sparse is None else ["add", "-A", "--sparse"]
    ws.git(add)
    unchanged = ws.git(["diff", "--cached", "--quiet", "--no-ext-diff"], check=False)
    if unchanged.returncode == 0 and not allow_empty:
        return None
    argv = ["commit", "--quiet", "--no-verify", "--no-gpg-sign", "--cleanup=whitespace"]
    ws.git(
        [*argv, *(["--allow-empty"] if allow_empty else []), "-F", "-"],
        input_bytes=text.encode("utf-8"),
        identity=identity,
        author=(*author, "") if author else None,
    )
    return ws.head


def _diff_args(base: str, head: str, paths: Sequence[str] | None) -> list[str]:
    args = ["--no-ext-diff", "--no-textconv", "--no-color", base, head, "--"]
    return args + list(paths or ())


def _where(target: Workspace | Path) -> tuple[Path, Workspace | None]:
    return (target.path, target) if isinstance(target, Workspace) else (target, None)


def _git_at(target: Workspace | Path, args: list[str]) -> str:
    cwd, ws = _where(target)
    proc = ws.git(args) if ws is not None else run_git(args, cwd)
    return proc.stdout.decode("utf-8", "replace")


def diff(target: Workspace | Path, base: str, head: str, paths: Sequence[str] | None = None) -> str:
    """Unified diff ``base..head``, limited to literal repo-relative ``paths`` when given."""
    return _git_at(target, ["diff", *_diff_args(base, head, paths)])


class FileStat(BaseModel):
    """Lines added/deleted in one file (None for binary files)."""

    path: str
    added: int | None
    deleted: int | None


class DiffStat(BaseModel):
    """Per-file line counts of a diff plus totals."""

    files: list[FileStat]
    insertions: int
    deletions: int

    @property
    def summary(self) -> str:
        """``N files changed, A insertions(+), D deletions(-)``."""
        return (
            f"{len(self.files)} files changed, {self.insertions} insertions(+), "
            f"{self.deletions} deletions(-)"
        )


def diffstat(
    target: Workspace | Path, base: str, head: str, paths: Sequence[str] | None = None
) -> DiffStat:
    """Numeric stat of ``base..head`` (renames shown as delete + add)."""
    out = _git_at(
        target, ["diff", "--numstat", "-z", "--no-renames", *_diff_args(base, head, paths)]
    )
    files: list[FileStat] = []
    for record in out.split("\0"):
        if not record:
            continue
        added, deleted, path = record.split("\t", 2)
        files.append(
            FileStat(
                path=path,
                added=None if added == "-" else int(added),
                deleted=None if deleted == "-" else int(deleted),
            )
        )
    return DiffStat(
        files=files,
        insertions=sum(f.added or 0 for f in files),
        deletions=sum(f.deleted or 0 for f in files),
    )
