"""The run branch: one commit per node, landed with git plumbing, trailers as the truth.

A node commits in its own worktree on top of the tip it started from. Landing replays that
commit onto the run branch's current tip with ``git merge-tree --write-tree`` (an in-memory
three-way merge: no working tree, no index, so the user's checkout is never touched),
``commit-tree`` and a compare-and-swap ``update-ref``. Unordered nodes have disjoint write
scopes, so this never conflicts; if it does, the node fails instead of corrupting the branch.
Git failing for another reason is no conflict: the landing is tried again, and if git still
fails, the run stops with the node left for ``resume`` (run/node.py), never failed for it.
Which nodes are done is read back from the branch's ``Anti-Sprawl-Task`` trailers. Nodes
land in the order they finish; git/reorder.py puts the commits in the plan's order after.

A branch checked out in any worktree of the repository (the user's main checkout or a
``git worktree add``) is never moved: ``update-ref`` would change it underneath that checkout,
whose files would then show the run's work as staged deletions. ``execute`` and ``resume``
refuse such a branch, and landing checks again right before each update (the user may check
the branch out while the run goes on): the run then stops cleanly, resumable once the branch
is no longer checked out.
"""

from __future__ import annotations

import os
import re
import threading
import time
import zlib
from pathlib import Path

from ..errors import RunError, UsageError
from .admin import admin_lock
from .cmd import GitError, common_dir_once, run_git

__all__ = [
    "TRAILER_RUN",
    "TRAILER_TASK",
    "TRAILER_TOKENS",
    "BranchCheckedOut",
    "LandingConflict",
    "RunBranch",
    "checked_out_in",
    "refuse_checked_out",
]

TRAILER_RUN = "Anti-Sprawl-Run"
TRAILER_TASK = "Anti-Sprawl-Task"
TRAILER_TOKENS = "Anti-Sprawl-Tokens"
# One line per granted or refused scope request: ``<mode> <path>`` (run/scope_grants.py).
TRAILER_SCOPE_GRANTED = "Anti-Sprawl-Scope-Granted"
TRAILER_SCOPE_REFUSED = "Anti-Sprawl-Scope-Refused"
LAND_RETRY_DELAYS = (0.5, 1.0, 2.0)  # seconds before each new try of a landing
_OBJECT_ID = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
_BRANCH_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,200}$")


class LandingConflict(RunError):
    """A node's commit does not apply cleanly on the run branch."""


class BranchCheckedOut(UsageError):
    """The run branch is some worktree's current branch: moving it would change that checkout."""


def checked_out_in(repo: Path, name: str) -> Path | None:
    """The worktree (main checkout included) whose HEAD is branch ``name``, if any.

    The files are read without the admin lock: a half-made or half-deleted admin dir of
    this process's is a detached worktree's (git/workspace.py), never on a branch, and a
    missing file is skipped as git's list would; taking the lock made every landing wait
    for the worktree a node was checking out (1.4 s of a 19 s run, docs/development.md)."""
    found = _checked_out_from_files(repo, name)
    if found is not _ASK_GIT:
        return found
    with admin_lock(repo):  # git walks the admin dirs: never while this process changes them
        out = run_git(["worktree", "list", "--porcelain", "-z"], repo).stdout
    ref = f"branch refs/heads/{name}".encode()
    where: bytes = b""
    for field in out.split(b"\0"):
        if field.startswith(b"worktree "):
            where = field[len(b"worktree ") :]
        elif field == ref:
            return Path(where.decode("utf-8", "surrogateescape"))
    return None


_ASK_GIT = Path("/nonexistent/ask-git")  # files that do not settle it: ask git


def _checked_out_from_files(repo: Path, name: str) -> Path | None:
    """What ``git worktree list`` would say, read from the files it reads (the ``HEAD`` of
    ``<repo>/.git`` and of each ``.git/worktrees/<id>``), with no process: checked before every
    landing (issue 29). A layout this does not know (a reftable repository, a git dir not
    named ``.git``, an unreadable ``HEAD``) is :data:`_ASK_GIT`."""
    common = common_dir_once(repo.resolve())
    if common.name != ".git" or (common / "reftable").exists():
        return _ASK_GIT
    ref = f"ref: refs/heads/{name}"
    try:
        if (common / "HEAD").read_text(encoding="utf-8", errors="replace").strip() == ref:
            return common.parent
        entries = list(os.scandir(common / "worktrees"))
    except FileNotFoundError:
        return None  # no linked worktree
    except OSError:
        return _ASK_GIT
    for entry in entries:
        try:
            head = Path(entry.path, "HEAD").read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            continue  # half made or half deleted (admin.py): git's list would skip it too
        except OSError:
            return _ASK_GIT
        if head.strip() == ref:
            try:
                gitdir = Path(entry.path, "gitdir").read_text(encoding="utf-8").strip()
            except OSError:
                return Path(entry.path)
            return Path(gitdir).parent
    return None


def refuse_checked_out(repo: Path, name: str, hint: str) -> None:
    """BranchCheckedOut (exit 2) when ``name`` is checked out anywhere; ``hint`` says what to do."""
    where = checked_out_in(repo, name)
    if where is not None:
        raise BranchCheckedOut(
            f"branch {name!r} is checked out in {where}; a run never moves a checked-out "
            f"branch: {hint}"
        )


def _out(repo: Path, args: list[str], *, input_text: str | None = None) -> str:
    data = input_text.encode("utf-8") if input_text is not None else None
    proc = run_git(args, repo, input_bytes=data)
    return proc.stdout.decode("utf-8", "surrogateescape").strip()


def check_branch_name(repo: Path, name: str) -> None:
    """Refuse names git would reject or that look like options."""
    if not _BRANCH_OK.match(name) or ".." in name or name.endswith((".lock", "/")):
        raise UsageError(f"invalid branch name: {name!r}")
    if run_git(["check-ref-format", "--branch", name], repo, check=False).returncode != 0:
        raise UsageError(f"invalid branch name: {name!r}")


class RunBranch:
    """The branch a run builds; all updates are serialized through one lock."""

    def __init__(self, repo: Path, name: str, run_id: str):
        self.repo = repo
        self.name = name
        self.ref = f"refs/heads/{name}"
        self.run_id = run_id
        self._lock = threading.Lock()
        # What this process last read or wrote: the tip, and this run's landed tasks as of
        # that tip. The compare-and-swap update-ref still checks the tip; a failure forgets.
        self._tip: str | None = None
        self._landed: dict[str, str] | None = None
        self._landed_at: str | None = None

    def exists(self) -> bool:
        return (
            run_git(
                ["rev-parse", "--verify", "--quiet", self.ref], self.repo, check=False
            ).returncode
            == 0
        )

    def tip(self) -> str:
        """The branch's commit: as this process last read or moved it (nothing else moves a
        run's branch while the run lock is held; if something did, landing finds out)."""
        known = self._tip
        if known is None:
            known = self._tip = _out(self.repo, ["rev-parse", "--verify", f"{self.ref}^{{commit}}"])
        return known

    def _forget(self) -> None:
        self._tip = self._landed = self._landed_at = None

    def create(self, base: str) -> None:
        """Create the branch at ``base``; an existing branch must belong to this run."""
        if self.exists():
            owners = self.run_ids()
            if owners and owners != {self.run_id}:
                raise UsageError(
                    f"branch {self.name!r} already exists and belongs to run(s) {', '.join(sorted(owners))}; "
                    "pass --branch NAME"
                )
            if not owners and self.tip() != base:
                raise UsageError(
                    f"branch {self.name!r} already exists; pass --branch NAME or delete it"
                )
            return
        # An empty old value: "must not exist yet", whatever the repository's object format
        # (a null id of 40 zeros is SHA-1's only).
        run_git(["update-ref", self.ref, base, ""], self.repo)
        self._tip = base

    def _trailer_log(self, at: str | None = None) -> list[tuple[str, str, str]]:
        """(commit, run_id, task_id) for every commit on the branch (or from ``at``) that
        carries our trailers."""
        if at is None and not self.exists():
            return []
        fmt = (
            f"%H%x00%(trailers:key={TRAILER_RUN},valueonly,separator=%x01)"
            f"%x00%(trailers:key={TRAILER_TASK},valueonly,separator=%x01)"
        )
        out = []
        for line in _out(self.repo, ["log", f"--format={fmt}", at or self.ref]).splitlines():
            parts = line.split("\x00")
            if len(parts) == 3 and parts[1]:
                out.append((parts[0], parts[1].strip(), parts[2].strip()))
        return out

    def run_ids(self) -> set[str]:
        return {run for _, run, _ in self._trailer_log()}

    def landed_tasks(self) -> dict[str, int]:
        """task_id -> how many commits of this run on the branch carry its trailer."""
        counts: dict[str, int] = {}
        for _, run, task in self._trailer_log():
            if run == self.run_id and task:
                counts[task] = counts.get(task, 0) + 1
        return counts

    def task_commits(self) -> dict[str, str]:
        """task_id -> the branch commit carrying its trailer for this run (one ``git log``)."""
        out: dict[str, str] = {}
        for sha, run, task in self._trailer_log():
            if run == self.run_id and task:
                out.setdefault(task, sha)
        return out

    def move(self, new: str, expected: str, *, scratch: str | None = None) -> None:
        """Point the branch at ``new`` if it is still at ``expected`` (one compare-and-swap:
        a rebuilt branch replaces the old one whole, or not at all; run/rebuild.py). With
        ``scratch``, that ref (where ``new`` was written, git/reorder.py) is deleted in the
        same transaction. What this object remembers follows: the tip becomes ``new``, the
        landed tasks are re-read."""
        with self._lock:
            refuse_checked_out(
                self.repo,
                self.name,
                "the run stopped before rebuilding it; check out another branch there first",
            )
            try:
                if scratch is None:
                    run_git(["update-ref", self.ref, new, expected], self.repo)
                else:
                    steps = f"update {self.ref} {new} {expected}\ndelete {scratch}\n"
                    run_git(["update-ref", "--stdin"], self.repo, input_bytes=steps.encode())
            except GitError:
                self._forget()  # moved or not: the next read asks git
                raise
            # The branch is a new history: the tip is known, the landed tasks are read again.
            self._tip, self._landed, self._landed_at = new, None, None

    def task_commit(self, task_id: str) -> str | None:
        """The branch commit carrying ``task_id``'s trailer for this run, if any."""
        for sha, run, task in self._trailer_log():
            if run == self.run_id and task == task_id:
                return sha
        return None

    def land(self, commit: str, task_id: str, parent: str | None = None) -> str:
        """Replay ``commit`` (made on top of an earlier tip: ``parent``, when the caller knows
        it) onto the current tip.

        A git failure that is not a conflict (git's own transient errors are already retried
        by ``run_git``) is tried again from the start a few times: each try re-reads the tip
        and is a compare-and-swap, so a try that half happened lands nothing twice."""
        for delay in LAND_RETRY_DELAYS:
            try:
                return self._land_once(commit, task_id, parent)
            except (LandingConflict, BranchCheckedOut):
                raise
            except GitError:
                self._forget()
                time.sleep(delay)
        self._forget()
        return self._land_once(commit, task_id, parent)

    def _landed_tasks_at(self, tip: str) -> dict[str, str]:
        """task -> its newest commit of this run on the branch at ``tip`` (read once, then
        kept up to date by the landings of this process)."""
        if self._landed is None or self._landed_at != tip:
            landed: dict[str, str] = {}
            for sha, run, task in self._trailer_log(tip):
                if run == self.run_id and task:
                    landed.setdefault(task, sha)
            self._landed, self._landed_at = landed, tip
        return self._landed

    def _land_once(self, commit: str, task_id: str, parent: str | None) -> str:
        with self._lock:
            tip = self.tip()
            existing = self._landed_tasks_at(tip).get(task_id)
            if existing:
                return existing  # idempotent: a resumed run never lands a node twice
            if parent is None:
                parent = _out(self.repo, ["rev-parse", f"{commit}^"])
            new = commit if parent == tip else self._replay(commit, task_id, tip)
            refuse_checked_out(
                self.repo,
                self.name,
                f"the run stopped before landing {task_id}; check out another branch there first",
            )
            run_git(["update-ref", self.ref, new, tip], self.repo)
            landed = self._landed_tasks_at(tip)
            landed[task_id] = new
            self._tip = self._landed_at = new
            return new

    def _replay(self, commit: str, task_id: str, tip: str) -> str:
        """``commit``'s change as a new commit on ``tip``: its message, its author and date."""
        try:
            tree = _out(self.repo, ["merge-tree", "--write-tree", "--no-messages", tip, commit])
        except GitError as exc:
            if exc.returncode != 1:  # 1 is a conflict; anything else is git failing
                raise
            raise LandingConflict(
                f"task {task_id}: its changes conflict with the run branch; not landed"
            ) from exc
        tree_id = tree.splitlines()[0]
        # The replayed commit keeps its author (the user) and date; we commit it.
        name, email, date, body = _author_and_message(self.repo, commit)
        data = (body.strip() + "\n").encode("utf-8", "surrogateescape")
        made = run_git(
            ["commit-tree", tree_id, "-p", tip, "-F", "-"],
            self.repo,
            input_bytes=data,
            author=(name, email, date),
        )
        return made.stdout.decode("utf-8", "surrogateescape").strip()


def _author_and_message(repo: Path, commit: str) -> tuple[str, str, str, str]:
    """``commit``'s author name, email, raw date (``<epoch> <tz>``) and message: read from its
    loose object when it is one (a node's commit is, fresh), else asked of ``git log``."""
    fields = _loose_commit_fields(common_dir_once(repo.resolve()), commit)
    if fields is not None:
        return fields
    fmt = "--format=%an%x00%ae%x00%ad%x00%B"
    out = run_git(["log", "-1", fmt, "--date=raw", commit], repo).stdout
    name, email, date, body = [
        *out.decode("utf-8", "surrogateescape").split("\x00", 3),
        "",
        "",
        "",
    ][:4]
    return name, email, date, body


def _loose_commit_fields(common: Path, commit: str) -> tuple[str, str, str, str] | None:
    """The fields of ``_author_and_message`` from ``objects/<xx>/<rest>`` (zlib, ``commit
    <size>\\0`` then headers, a blank line, the message); None when that is not plainly there
    (packed, another encoding, an author line this does not read)."""
    if not _OBJECT_ID.match(commit):
        return None
    try:
        data = zlib.decompress((common / "objects" / commit[:2] / commit[2:]).read_bytes())
    except (OSError, zlib.error):
        return None
    head, _, rest = data.partition(b"\0")
    if not head.startswith(b"commit "):
        return None
    headers, sep, body = rest.partition(b"\n\n")
    if not sep:
        return None
    author = b""
    for line in headers.split(b"\n"):
        if line.startswith(b"encoding "):
            return None  # git log would re-encode the message
        if line.startswith(b"author "):
            author = line[len(b"author ") :]
    name, lt, tail = author.partition(b" <")
    email, gt, date = tail.partition(b"> ")
    if not (lt and gt and date):
        return None

    def text(raw: bytes) -> str:
        return raw.decode("utf-8", "surrogateescape")

    return text(name), text(email), text(date), text(body)
