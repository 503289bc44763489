"""Per-node git worktrees, commits with trailers, and diffs for the reducer.

A node works in its own worktree, detached at its base commit, under
``<repo>/.anti-sprawl/worktrees/<name>``; the user's branch, index and working tree are never
touched (docs/architecture.md, guarantee 5). Earlier versions put each worktree on a temporary
branch ``anti-sprawl/wt/<name>``; the clean-up still removes such branches. A node's git work
is counted in processes (issue 29): the worktree's admin dir and HEAD are read from the files
``git worktree add`` wrote, everything is staged once, and one ``git diff --cached`` gives the
raw entries, the numbers, the stat and the patch (:func:`stage`). Git always runs through :mod:`.cmd` (no hooks,
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
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from pydantic import BaseModel

from ..errors import RunError
from ..fs.files import atomic_write_text
from ..fs.placement import spread_subdirectories
from ..ids import STATE_DIR_NAME
from .admin import RETRY_DELAYS, admin_lock
from .cmd import DEFAULT_IDENTITY, GitError, common_dir_once, git_dir, run_git

__all__ = [
    "BRANCH_PREFIX",
    "FACT_ARGS",
    "ChangeFacts",
    "DiffStat",
    "FileStat",
    "Trailers",
    "Workspace",
    "change_between",
    "commit",
    "compose_message",
    "diff",
    "diffstat",
    "ensure_excluded",
    "parse_facts",
    "remove_stale_worktrees",
    "stage",
]

BRANCH_PREFIX = "anti-sprawl/wt/"
EXCLUDE_LINE = f"/{STATE_DIR_NAME}/"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_TRAILER_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*$")
_FULL_ID = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")  # a SHA-1 or SHA-256 object id


def _check_name(name: str) -> None:
    if not _NAME.match(name) or ".." in name or name.endswith(".lock"):
        raise RunError(f"bad workspace name {name!r}: use letters, digits, '_', '.', '-'")


class Workspace:
    """One git worktree for one node: created at a commit, removed when done with (a run
    hands a finished node's to its next node instead: git/worktree_pool.py)."""

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
        spread_subdirectories(worktrees_dir)  # each worktree in a block group of its own
        worktrees_dir = worktrees_dir.resolve()
        if worktrees_dir.is_relative_to(repo):
            ensure_excluded(repo)
        if _FULL_ID.match(commit):
            base = commit  # `worktree add` refuses an id that names no commit
        else:
            sha = run_git(
                ["rev-parse", "--verify", "--end-of-options", f"{commit}^{{commit}}"], repo
            )
            base = sha.stdout.decode().strip()
        path = worktrees_dir / name
        branch = BRANCH_PREFIX + name
        if os.path.lexists(path) or (common_dir_once(repo) / "worktrees" / name).exists():
            _remove_worktree(repo, path, branch)  # what a killed attempt of that name left
        patterns = None if sparse is None else tuple(sparse)
        try:
            ws = cls._add(repo, path, name, base, patterns)
        except GitError:
            # Something of that name that the checks above did not see (a leftover registered
            # under another admin name): `_add` has removed it all; one more try.
            ws = cls._add(repo, path, name, base, patterns)
        for delay in RETRY_DELAYS:
            if ws is not None:
                return ws
            time.sleep(delay)
            ws = cls._add(repo, path, name, base, patterns)
        if ws is None:
            raise RunError(f"git worktree add left {path} without HEAD at {base[:12]}")
        return ws

    @classmethod
    def _add(
        cls, repo: Path, path: Path, name: str, base: str, patterns: tuple[str, ...] | None
    ) -> Workspace | None:
        """One ``git worktree add --detach --no-checkout``, then the checkout; None (and
        nothing left) when the new worktree's HEAD is not ``base`` (a race with another
        process's admin dirs: admin.py).

        Only the add holds the admin lock: once it returns, the admin dir is whole, and the
        checkout writes only this worktree's index and files. ``worktree add`` with its
        checkout is the same three git processes (the add runs ``update-ref HEAD`` and ``reset
        --hard`` itself), but held the lock through the checkout, so the nodes of a run made
        their worktrees one at a time, and each landing's check waited behind them
        (docs/development.md, issue 29)."""
        branch = BRANCH_PREFIX + name
        add = ["worktree", "add", "--quiet", "--detach", "--no-checkout"]
        try:
            with admin_lock(repo):
                run_git([*add, "--", str(path), base], repo)
            ws = cls(repo, path, name, _admin_dir(path), base, patterns)
            if ws.head != base:
                _remove_worktree(repo, path, branch)
                return None
            if patterns is not None:
                lines = "".join(f"/{entry.lstrip('/')}\n" for entry in patterns)
                atomic_write_text(ws.admin_dir / "info" / "sparse-checkout", lines)
                ws.git(["read-tree", "-mu", "HEAD"])
            else:  # what `worktree add` itself runs for its checkout
                ws.git(["reset", "--hard", "--quiet", "--no-recurse-submodules"])
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
        config: Sequence[str] = (),
    ) -> subprocess.CompletedProcess[bytes]:
        """Run git in this worktree; the admin dir is named explicitly, not read from ``.git``.
        ``config``: ``key=value`` settings for this one command."""
        argv = [f"--git-dir={self.admin_dir}", f"--work-tree={self.path}", *args]
        return run_git(
            argv,
            self.path,
            config=[*self._config(), *config],
            check=check,
            input_bytes=input_bytes,
            identity=identity,
            author=author,
        )

    @property
    def head(self) -> str:
        """The commit the worktree's (detached) HEAD is at now: read from the admin dir's
        ``HEAD`` file, which holds the id itself, else asked of git (another ref backend)."""
        try:
            text = (self.admin_dir / "HEAD").read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError):
            text = ""
        if _FULL_ID.match(text):
            return text
        return self.git(["rev-parse", "HEAD"]).stdout.decode().strip()

    def remove(self) -> None:
        """Delete the worktree (and a branch of that name); idempotent and safe after a crash.

        What ``git worktree remove --force --force`` deletes (the working tree, then its admin
        dir, then an empty ``worktrees/``) is deleted here, under the admin lock, when the admin
        dir is plainly this worktree's; anything else goes through git (issue 29: one process
        fewer per node)."""
        with admin_lock(self.repo):
            if not self._remove_by_files():
                _remove_worktree_locked(self.repo, self.path, self.branch)

    def _remove_by_files(self) -> bool:
        common = common_dir_once(self.repo.resolve())
        admin = self.admin_dir
        if admin.parent != common / "worktrees" or admin.is_symlink():
            return False
        try:
            gitdir = (admin / "gitdir").read_text(encoding="utf-8", errors="surrogateescape")
        except OSError:
            return False
        if gitdir.strip() != str(self.path / ".git") or (admin / "locked").exists():
            return False
        if os.path.lexists(self.path):
            _remove_entry(self.path)  # never through a symlinked parent; links not followed
        shutil.rmtree(admin)
        with contextlib.suppress(OSError):
            (common / "worktrees").rmdir()  # as git does when the last one goes
        if _branch_ref_may_exist(self.repo, self.branch):
            _delete_branch(self.repo, self.branch)
        return True

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


def _admin_dir(path: Path) -> Path:
    """The admin dir ``git worktree add`` just made for ``path``: its ``.git`` file names it."""
    try:
        text = (path / ".git").read_text(encoding="utf-8", errors="surrogateescape")
    except OSError:
        text = ""
    if text.startswith("gitdir: "):
        found = Path(text[len("gitdir: ") :].strip())
        if found.is_absolute() and found.is_dir():
            return found
    return git_dir(path)


def _remove_worktree(repo: Path, path: Path, branch: str) -> None:
    with admin_lock(repo):
        _remove_worktree_locked(repo, path, branch)


def _remove_worktree_locked(repo: Path, path: Path, branch: str) -> None:
    proc = run_git(["worktree", "remove", "--force", "--force", "--", str(path)], repo, check=False)
    if proc.returncode != 0:
        if os.path.lexists(path):
            # Not a registered worktree (or a half-created one): delete the entry itself, but
            # only when its parent is a real directory, so a symlinked parent is never followed.
            _remove_entry(path)
        run_git(["worktree", "prune"], repo)
    # A worktree of an earlier version (or one a kill left mid-add) may have its branch.
    if _branch_ref_may_exist(repo, branch):
        _delete_branch(repo, branch)


def _delete_branch(repo: Path, branch: str) -> None:
    exists = run_git(
        ["rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"], repo, check=False
    )
    if exists.returncode == 0:
        run_git(["branch", "-D", "--", branch], repo)


def _branch_ref_may_exist(repo: Path, branch: str) -> bool:
    """False only when the files ref backend shows no such branch: no loose ref and no
    ``packed-refs`` naming it (anything else is asked of git)."""
    common = common_dir_once(repo.resolve())
    if (common / "reftable").exists() or os.path.lexists(common / "refs" / "heads" / branch):
        return True
    try:
        packed = (common / "packed-refs").read_bytes()
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return f" refs/heads/{branch}\n".encode() in packed


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
    exclude = common_dir_once(repo.resolve()) / "info" / "exclude"
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
    staged: ChangeFacts | None = None,
) -> str | None:
    """Stage everything in the (audited) worktree and commit; None when nothing changed.

    ``identity`` commits; ``author`` (the user, see ``git.cmd.user_identity``) authors, so
    the history says whose change it is and the trailers say which tool made it.
    ``allow_empty`` commits even when nothing changed. ``staged`` is what :func:`stage` just
    staged: the commit holds exactly that (what the secret scan read), nothing is re-added.
    """
    text = compose_message(message, trailers)
    if staged is None:
        ws.git(["add", "-A"] if ws.sparse is None else ["add", "-A", "--sparse"])
        if not allow_empty:
            unchanged = ws.git(["diff", "--cached", "--quiet", "--no-ext-diff"], check=False)
            if unchanged.returncode == 0:
                return None
    elif not allow_empty and not staged.raw:
        return None
    argv = ["commit", "--quiet", "--no-verify", "--no-gpg-sign", "--cleanup=whitespace"]
    ws.git(
        [*argv, *(["--allow-empty"] if allow_empty else []), "-F", "-"],
        input_bytes=text.encode("utf-8"),
        identity=identity,
        author=(*author, "") if author else None,
    )
    return ws.head


@dataclass(frozen=True)
class ChangeFacts:
    """A change against a base (what ``git add -A`` staged over ``HEAD``, or one commit over
    another) as one ``git diff`` prints it (:func:`stage`, :func:`change_between`)."""

    raw: bytes  # ``--raw -z --no-abbrev`` records: the secret scan's blob ids
    stat: DiffStat  # ``--numstat``: the record's per-file counts
    stat_text: str  # ``--stat=72``: the commit message's "what git says changed"
    patch: str  # the unified diff: the record's diff


# The diff options ``parse_facts`` reads (``git log -1`` of a one-parent commit takes them too).
# a/ and b/ whatever the user's diff.noprefix or diff.mnemonicPrefix: the patch is read for
# the definitions it adds (git/patch_definitions.py)
_PREFIXES = ("--src-prefix=a/", "--dst-prefix=b/")
FACT_ARGS = (
    *("--raw", "-z", "--numstat", "--stat=72", "--patch", "--no-renames", "--no-abbrev"),
    *("--no-ext-diff", "--no-textconv", "--no-color", *_PREFIXES),
)


def stage(ws: Workspace) -> ChangeFacts:
    """Stage everything in the (audited) worktree and read the staged change in one diff."""
    ws.git(["add", "-A"] if ws.sparse is None else ["add", "-A", "--sparse"])
    return parse_facts(ws.git(["diff", "--cached", *FACT_ARGS]).stdout)


def change_between(repo: Path, base: str, commit: str) -> ChangeFacts:
    """What ``commit`` changes over ``base``, in one ``git diff`` run in ``repo``."""
    return parse_facts(run_git(["diff", *FACT_ARGS, base, commit, "--"], repo).stdout)


def parse_facts(out: bytes) -> ChangeFacts:
    """git prints the formats of ``FACT_ARGS`` in a fixed order: the ``--raw`` records, the
    ``--numstat`` records (NUL-terminated with ``-z``), the stat text, a NUL, then the patch.
    Renames are a delete and an add throughout, as the audit and the secret scan see them."""
    pos, count = 0, 0
    if out.startswith(b"---\n"):
        pos = 4  # what ``git log`` prints between a commit's header and its diff
    raw_start = pos
    while out.startswith(b":", pos):  # a raw record: its meta field, then its path
        meta_end = out.index(b"\0", pos)
        pos = out.index(b"\0", meta_end + 1) + 1
        count += 1
    raw_end = pos
    files: list[FileStat] = []
    for _ in range(count):
        end = out.index(b"\0", pos)
        added, deleted, path = out[pos:end].decode("utf-8", "replace").split("\t", 2)
        files.append(
            FileStat(
                path=path,
                added=None if added == "-" else int(added),
                deleted=None if deleted == "-" else int(deleted),
            )
        )
        pos = end + 1
    stat_text, _, patch = out[pos:].partition(b"\0")
    return ChangeFacts(
        raw=out[raw_start:raw_end],
        stat=_totals(files),
        stat_text=stat_text.decode("utf-8", "replace").rstrip(),
        patch=patch.decode("utf-8", "replace"),
    )


def _totals(files: list[FileStat]) -> DiffStat:
    return DiffStat(
        files=files,
        insertions=sum(f.added or 0 for f in files),
        deletions=sum(f.deleted or 0 for f in files),
    )


def _diff_args(base: str, head: str, paths: Sequence[str] | None) -> list[str]:
    args = ["--no-ext-diff", "--no-textconv", "--no-color", *_PREFIXES, base, head, "--"]
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
    return _totals(files)
