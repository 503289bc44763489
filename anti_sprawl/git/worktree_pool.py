"""A run's worktrees, handed from a finished node to the next instead of made afresh.

A fresh worktree per node is a checkout of the whole tree and, after the node, a deletion of
it file by file: 17 ms and more a node on the benchmark VM, growing with the tree, and the
deletions feed ext4's inode search on a journal-less disk (fs/placement.py; docs/benchmarks.md,
issue 29). A finished node's worktree differs from the next node's base only by what changed
in between, so ``git reset --hard <base>`` rewrites only those files and ``git clean -ffdx``
removes what nothing tracks.

The guarantee (docs/architecture.md, guarantee 5): a node gets a worktree that looks, to it
and to its commands, as ``Workspace.create`` at its base would make it, or a fresh one. A
worktree is handed over again only when every step below holds; at the first that does not,
it is deleted and a fresh one is made in its place (``refusals`` says why):

1. before git runs: its admin dir holds only what our own git steps write (``HEAD``,
   ``commondir``, ``gitdir``, ``index``, and ``ORIG_HEAD``, ``COMMIT_EDITMSG``, ``logs/``,
   which hold the last node's commit and are removed), both pointers between it and the
   worktree are as git wrote them, and nothing can make git write a file other than its
   blob: no attributes file anywhere in the tree or in ``info/attributes``, no
   ``core.autocrlf``, ``core.eol``, attributes file or filter in git's configuration (git
   judges a file by its cleaned content, so a file written under other attributes would be
   left as it is; git writes into a node's worktree only when it is made or reset, and in the
   audit's revert, which deletes new files, a new attributes file among them, before it
   restores tracked ones: git/audit.py ``_revert``);
2. ``git reset --hard <base>`` exits 0, with git's stat checks pinned on (``core.trustctime``,
   ``core.checkStat=default``, ``core.fileMode``), and the detached ``HEAD`` is ``base``;
3. the tree matches its index entry by entry (git/fresh_tree.py): each tracked
   path with its type and, for a file, exactly the mode a checkout under this umask gives,
   one link, no extended attribute, not immutable or append-only; each directory of a tracked
   path with a checkout's mode; everything owned by us; no ``.git`` below the top (git never
   looks inside one) and no fifo, socket or device (git neither lists nor removes them);
4. what else is there (untracked or ignored files and directories, nested repositories)
   goes with ``git clean -ffdx`` over exactly those paths, which must exit 0, and the
   survey must then find nothing else.

Sparse worktrees are never handed on (they check out only a node's scopes: cheap already).
Worktrees are named after their slot (``<run>-w<k>``), never after a node, so the path a
command sees (a test's traceback) is the same whichever node held it before; a slot is one
running node's at a time. The run's wind-up deletes the idle ones (``close``), and
``remove_stale_worktrees`` whatever a kill left, as before.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from ..errors import RunError
from ..fs.files import atomic_write_text
from .cmd import common_dir_once, git_env, run_git
from .fresh_tree import index_entries, plain_file_holds, survey
from .workspace import Workspace

__all__ = ["WorktreePool"]

_ADMIN_NEEDS = {"HEAD", "commondir", "gitdir", "index"}
_ADMIN_LAST_NODE = ("ORIG_HEAD", "COMMIT_EDITMSG", "logs")  # the last node's commit, removed
_RESET_CONFIG = (
    "core.trustctime=true",
    "core.checkStat=default",
    "core.fileMode=true",
    "core.logAllRefUpdates=false",  # a fresh worktree's reflog names no earlier node
)
_CONVERTING = r"^(core\.(autocrlf|eol|attributesfile)|filter\.)"
_MANY = 1000  # more untracked entries than this: clean the whole tree, not path by path


class WorktreePool:
    """One run's worktrees: ``lease`` one per running node; it comes back when the node ends."""

    def __init__(self, repo: Path, worktrees_dir: Path, run_id: str):
        self.repo, self.worktrees_dir, self.run_id = repo, worktrees_dir, run_id
        self.reused = 0
        self.fresh = 0
        self.refusals: list[str] = []  # why a worktree was not handed on, in order
        self._lock = threading.Lock()
        self._idle: list[Workspace] = []
        self._taken: set[str] = set()  # slots running nodes hold (or that could not be deleted)
        self._closed = False
        self._umask: int | None = None
        self._plain: bool | None = None  # git converts nothing on checkout (step 1)

    @contextlib.contextmanager
    def lease(self, base: str, sparse: Sequence[str] | None = None) -> Iterator[Workspace]:
        """A worktree at ``base`` for one node, given back when the block ends."""
        ws = self.take(base, sparse)
        try:
            yield ws
        finally:
            self.give_back(ws)

    def take(self, base: str, sparse: Sequence[str] | None = None) -> Workspace:
        """An idle worktree brought to ``base`` (module docstring), else a fresh one."""
        with self._lock:
            ws = self._idle.pop() if sparse is None and self._idle else None
            name = ws.name if ws is not None else self._free_slot()
            self._taken.add(name)
        if ws is not None:
            try:
                why = self._bring_to(ws, base)
            except (OSError, RunError) as exc:  # any step that fails refuses the worktree
                why = f"{type(exc).__name__}: {exc}"
            with self._lock:
                if why is None:
                    self.reused += 1
                    return ws
                self.refusals.append(why)
            with contextlib.suppress(RunError, OSError):
                ws.remove()
            if os.path.lexists(ws.path) or os.path.lexists(ws.admin_dir):
                with self._lock:  # left for the wind-up; the fresh one gets another slot
                    name = self._free_slot()
                    self._taken.add(name)
        try:
            fresh = Workspace.create(self.repo, self.worktrees_dir, name, base, sparse=sparse)
        except BaseException:
            with self._lock:
                self._taken.discard(name)
            raise
        with self._lock:
            self.fresh += 1
        return fresh

    def give_back(self, ws: Workspace) -> None:
        """Keep ``ws`` for the next node (a full checkout, the pool still open), else delete it."""
        with self._lock:
            if not self._closed and ws.sparse is None and self._plain is not False:
                self._idle.append(ws)
                self._taken.discard(ws.name)
                return
        with contextlib.suppress(RunError, OSError):  # what is left: runner._wind_up
            ws.remove()
        with self._lock:
            self._taken.discard(ws.name)

    def close(self) -> None:
        """Delete the idle worktrees; any given back later is deleted at once."""
        with self._lock:
            self._closed, idle, self._idle = True, self._idle, []
        for ws in idle:
            with contextlib.suppress(RunError, OSError):
                ws.remove()

    def _free_slot(self) -> str:
        k = 0
        idle = {ws.name for ws in self._idle}
        while f"{self.run_id}-w{k}" in self._taken | idle:
            k += 1
        return f"{self.run_id}-w{k}"

    def _bring_to(self, ws: Workspace, base: str) -> str | None:
        """Steps 1-4 of the module docstring on ``ws``; why it cannot be handed on, or None."""
        if not self._converts_nothing() or self._umask is None:
            return "git may convert files on checkout here (or the umask is unknown)"
        if len(base) not in (40, 64):
            return "the base is not a full commit id"
        umask = self._umask
        why = _admin_as_written(ws) or _attributes_in(ws.path)
        if why:
            return why
        reset = ["reset", "--hard", "--quiet", "--no-recurse-submodules", base, "--"]
        if ws.git(reset, check=False, config=_RESET_CONFIG).returncode != 0:
            return "git reset --hard failed"
        ws.base = base
        if ws.head != base:
            return "HEAD is not at the base after the reset"
        # as a fresh one's reset leaves it; no fsync: a crash discards the worktree
        atomic_write_text(ws.admin_dir / "ORIG_HEAD", base + "\n", durable=False)
        files = index_entries(ws.admin_dir / "index", len(base) // 2)
        if files is None:
            return "the index is not a plain checkout's"
        pointer = f"gitdir: {ws.admin_dir}\n".encode()
        extra, why = survey(ws.path, files, pointer, umask)
        if why is None and extra:
            paths = ["--", *extra] if len(extra) <= _MANY else []
            clean = ws.git(["clean", "-ffdxq", *paths], check=False)
            if clean.returncode != 0 or clean.stderr.strip():
                return "git clean -ffdx failed"
            extra, why = survey(ws.path, files, pointer, umask)
            if extra and why is None:
                why = f"{extra[0]}: still there after git clean"
        return why

    def _converts_nothing(self) -> bool:
        """Whether git's configuration leaves checked-out files as their blobs (asked once)."""
        if self._plain is None:
            self._umask = _process_umask()
            found = run_git(["config", "-z", "--get-regexp", _CONVERTING], self.repo, check=False)
            settings = [
                e.split("\n", 1) for e in found.stdout.decode("utf-8", "replace").split("\0")
            ]
            converting = [kv for kv in settings if kv[0] and kv != ["core.autocrlf", "false"]]
            # ~/.config/git/attributes is read when core.attributesFile is unset
            home = git_env().get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
            self._plain = (
                self._umask is not None
                and found.returncode in (0, 1)  # 1: none set; anything else: unknown
                and not converting
                and not os.path.lexists(Path(home) / "git" / "attributes")
            )
        return self._plain


def _process_umask() -> int | None:
    """This process's umask, read without changing it (``os.umask`` would, for every thread)."""
    try:
        with Path("/proc/self/status").open(encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        return None
    return None


def _admin_as_written(ws: Workspace) -> str | None:
    """Step 1 for the admin dir and the ``.git`` pointers; removes the last node's commit."""
    admin = ws.admin_dir
    common = common_dir_once(ws.repo.resolve())
    if admin.parent != common / "worktrees" or not stat.S_ISDIR(os.lstat(admin).st_mode):
        return "the admin dir moved"
    names = {entry.name for entry in admin.iterdir()}
    if not _ADMIN_NEEDS <= names <= _ADMIN_NEEDS | set(_ADMIN_LAST_NODE):
        return f"the admin dir holds {sorted(names - _ADMIN_NEEDS)}"
    expected = {"commondir": b"../..\n", "gitdir": f"{ws.path}/.git\n".encode()}
    for name, content in expected.items():
        if not plain_file_holds(admin / name, content):
            return f"the admin dir's {name} changed"
    if os.path.lexists(common / "info" / "attributes"):
        return "info/attributes"
    for name in _ADMIN_LAST_NODE:
        path = admin / name
        if stat.S_ISDIR(os.lstat(path).st_mode) if os.path.lexists(path) else False:
            shutil.rmtree(path)  # rmtree refuses a symlink
        else:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
    return None


def _attributes_in(root: Path) -> str | None:
    """Step 1 for the tree: any ``.gitattributes`` (the last node's included), by name only."""
    stack = [str(root)]
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    if entry.name == ".gitattributes":
                        return f"{entry.path}: an attributes file"
                    if entry.is_dir(follow_symlinks=False) and entry.name != ".git":
                        stack.append(entry.path)
        except OSError as exc:
            return f"cannot list the tree: {exc}"
    return None
