"""Repositories over the network as git bundles: the run's tips in, one node commit out.

Central side: ``BundleChain`` turns each run-branch tip a node starts from into a bundle,
made once and shared by every node that starts from that tip. The first is the whole history
up to the run's base; each later one holds only what is new since the tips bundled before it
(a thin pack, whose prerequisites are those earlier tips). A bundle's bytes are published
once (for Dask: scattered to the cluster) and named by a key.

Worker side: ``CacheRepo`` is a bare clone kept on the worker's disk per repository (keyed by
the repository's root commits), shared by the worker processes of that machine under a file
lock. For a node it fetches only the bundles it lacks, newest first until it reaches a commit
it has, and adds the node's worktree from it (``workspace.py``). The node's commit goes back
as a one-commit bundle whose only prerequisite is the node's base (``landing_audit.py``
checks it before anything lands).

Bundles are written here rather than by ``git bundle create``, which refuses to bundle a bare
commit id: that would mean a temporary ref in the user's repository for every tip.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from ..errors import RunError, UsageError
from .admin import SHARED_LOCK, admin_lock
from .cmd import run_git

__all__ = [
    "BUNDLE_REF",
    "BundleChain",
    "BundleHeader",
    "BundleRef",
    "CacheRepo",
    "check_object_format",
    "make_bundle",
    "parse_header",
    "repo_identity",
    "write_bundle",
]

BUNDLE_REF = "refs/anti-sprawl/tip"
_HAVE = "refs/anti-sprawl/have"  # a cache clone's ref per tip it holds (CacheRepo)
_OBJECT_ID = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
_SIGNATURE = b"# v2 git bundle\n"
_MAX_HEADER = 1 << 20


class BundleRef(BaseModel):
    """One published bundle: where to get it, the commit it brings, what it needs first."""

    model_config = ConfigDict(frozen=True)

    key: str
    tip: str
    prerequisites: tuple[str, ...] = ()
    size: int = 0


class BundleHeader(BaseModel):
    """What a bundle says it holds (refs) and needs (prerequisite commits)."""

    refs: dict[str, str]
    prerequisites: tuple[str, ...]
    header_size: int


def _git_out(repo: Path, args: list[str], stdin: bytes | None = None) -> bytes:
    return run_git(args, repo, input_bytes=stdin).stdout


def check_object_format(repo: Path) -> None:
    """UsageError unless ``repo`` uses SHA-1 ids: the v2 bundles written here (and the
    workers' cache clones) carry nothing else; a SHA-256 repository runs with the local
    executor (one line, exit 2, before anything is written)."""
    found = _git_out(repo, ["rev-parse", "--show-object-format"]).decode().strip() or "sha1"
    if found != "sha1":
        raise UsageError(
            f"--executor dask needs a repository with SHA-1 object ids; {repo} uses {found} "
            "(git init --object-format): run it with --executor local"
        )


def repo_identity(repo: Path, commit: str) -> str:
    """A short name for a repository: its root commits, so clones and forks share a cache."""
    roots = sorted(_git_out(repo, ["rev-list", "--max-parents=0", commit]).decode().split())
    return hashlib.sha256(" ".join(roots).encode()).hexdigest()[:20]


def make_bundle(
    repo: Path, tip: str, exclude: Sequence[str] = (), *, boundary: Sequence[str] | None = None
) -> tuple[bytes, tuple[str, ...]]:
    """A v2 bundle of ``tip`` without what ``exclude`` reaches: (bytes, prerequisites).
    ``boundary``: the prerequisites when the caller knows them (else ``rev-list`` finds them)."""
    revs = "".join(f"{r}\n" for r in [tip, *(f"^{e}" for e in exclude)]).encode()
    if boundary is None:
        listing = _git_out(repo, ["rev-list", "--boundary", "--stdin"], stdin=revs).decode()
        boundary = [ln[1:] for ln in listing.split() if ln.startswith("-")]
    prerequisites = tuple(sorted(set(boundary)))
    pack = _git_out(
        repo,
        ["pack-objects", "--stdout", "--revs", "--thin", "--delta-base-offset", "-q"],
        stdin=revs,
    )
    header = _SIGNATURE
    header += b"".join(f"-{p}\n".encode() for p in prerequisites)
    header += f"{tip} {BUNDLE_REF}\n\n".encode()
    return header + pack, prerequisites


def parse_header(data: bytes) -> BundleHeader:
    """The header of a v2 bundle; RunError when ``data`` is not one."""
    if not data.startswith(_SIGNATURE):
        raise RunError("not a git bundle (v2)")
    end = data.find(b"\n\n", 0, _MAX_HEADER)
    if end < 0:
        raise RunError("malformed git bundle: no end of header")
    refs: dict[str, str] = {}
    prerequisites: list[str] = []
    for line in data[len(_SIGNATURE) : end].decode("ascii", "replace").split("\n"):
        if line.startswith("-"):
            prerequisites.append(line[1:].split(" ", 1)[0])
        else:
            sha, _, name = line.partition(" ")
            if not name or name in refs:
                raise RunError(f"malformed git bundle: bad ref line {line[:80]!r}")
            refs[name] = sha
    return BundleHeader(refs=refs, prerequisites=tuple(prerequisites), header_size=end + 2)


def write_bundle(directory: Path, data: bytes) -> Path:
    """``data`` in a fresh file under ``directory`` (git reads bundles from files)."""
    directory.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix="in-", suffix=".bundle", dir=directory)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    return Path(name)


class BundleChain:
    """The bundles of one run's tips, each made once; ``publish`` stores bytes, returns a key."""

    def __init__(self, repo: Path, publish: Callable[[bytes], str]):
        self.repo = repo
        self.publish = publish
        self._lock = threading.Lock()
        self._bundles: list[BundleRef] = []
        self.bytes_made = 0

    def chain_for(self, tip: str) -> list[BundleRef]:
        """Every bundle a worker may need to reach ``tip``, oldest first (``tip``'s is last)."""
        return self.chain_from(tip, None)[1]

    def chain_from(self, tip: str, needs: Sequence[str] | None) -> tuple[str, list[BundleRef]]:
        """A tip to start a node from and the bundles that reach it: the newest tip already
        bundled that ``tip`` descends from in one line and that holds every commit of
        ``needs`` (the node's dependencies), else ``tip`` itself, bundled now.

        Each landing makes a new tip, so a node started from the newest tip almost always
        needed a new bundle made here and fetched by the worker (docs/development.md, issue
        29); a node whose dependencies an earlier bundle holds starts from that one. With
        ``needs`` None, or a history this cannot read as one line, ``tip``."""
        with self._lock:
            since, linear = self._since(tip)
            ancestors = self._ancestors(tip, since)
            start = tip
            if needs is not None and linear and all(b.tip != tip for b in self._bundles):
                assert since is not None
                start = self._newest_holding(tip, since, ancestors, needs)
            mine = next((b for b in self._bundles if b.tip == start), None)
            if mine is None:
                earlier = [b.tip for b in self._bundles if b.tip in ancestors]
                data, prerequisites = make_bundle(self.repo, start, earlier)
                mine = BundleRef(
                    key=self.publish(data), tip=start, prerequisites=prerequisites, size=len(data)
                )
                self._bundles.append(mine)
                self.bytes_made += len(data)
            if start != tip and since is not None:  # the bundles before ``start``
                older = since[since.index(start) + 1 :] if start in since else None
                ancestors = self._ancestors(start, older)
            return start, [b for b in self._bundles if b is mine or b.tip in ancestors]

    def _since(self, tip: str) -> tuple[list[str] | None, bool]:
        """The commits after the first bundled tip up to ``tip``, newest first (None when
        ``tip`` does not descend from it, or nothing is bundled yet), and whether they are one
        line of single-parent commits (a run branch is: each landing and reorder makes one
        parent). Two git calls however many commits."""
        if not self._bundles:
            return None, False
        first = self._bundles[0].tip
        if first == tip:
            return [], True
        args = ["merge-base", "--is-ancestor", first, tip]
        if run_git(args, self.repo, check=False).returncode != 0:
            return None, False
        rows = _git_out(self.repo, ["rev-list", "--parents", tip, f"^{first}"]).decode()
        since, parents = [], []
        for row in rows.splitlines():
            commit, *its = row.split()
            since.append(commit)
            parents.append(its)
        # one line: each commit's one parent is the next one listed, the last one's ``first``
        linear = all(
            its == [after] for its, after in zip(parents, [*since[1:], first], strict=True)
        )
        return since, linear

    def _ancestors(self, tip: str, since: list[str] | None) -> set[str]:
        """The bundled tips that ``tip`` may descend from (a run branch only grows between
        reorders: every later tip descends from the first one bundled)."""
        if not self._bundles or since is None:
            return set()
        return {self._bundles[0].tip, *since} - {tip}

    def _newest_holding(
        self, tip: str, line: list[str], ancestors: set[str], needs: Sequence[str]
    ) -> str:
        """The newest bundled tip on ``line`` (newest first) at or before ``tip`` that holds
        every commit of ``needs``; ``tip`` when a needed commit is not on the line (nor the
        first bundled tip) or no bundled tip holds them all."""
        first = self._bundles[0].tip
        age = {commit: i for i, commit in enumerate(line)}  # 0: ``tip``, the newest
        age[first] = len(line)
        if any(commit not in age for commit in needs):
            return tip
        youngest_need = min((age[c] for c in needs), default=len(line))
        bundled = [age[b.tip] for b in self._bundles if b.tip in ancestors and b.tip in age]
        fits = [a for a in bundled if a <= youngest_need]  # at or after each needed commit
        if not fits:
            return tip
        newest = min(fits)
        return line[newest] if newest < len(line) else first


class CacheRepo:
    """A worker's bare clone of one repository, shared by the processes of that machine."""

    def __init__(self, root: Path, identity: str):
        self.root = root
        self.path = root / f"{identity}.git"
        self.worktrees = root / "worktrees"
        self._lock_path = root / f"{identity}.lock"

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Held while bundles are fetched: two processes never write the same refs at once."""
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def ensure(self) -> None:
        if (self.path / "HEAD").is_file():
            return
        self.path.mkdir(parents=True, exist_ok=True)
        run_git(["init", "--quiet", "--bare", str(self.path)], self.root)
        # gc never runs on its own here: a node's commit must outlive its worktree.
        run_git(["config", "gc.auto", "0"], self.path)
        (self.path / SHARED_LOCK).touch()

    def has(self, commits: Sequence[str]) -> bool:
        """True when every commit in ``commits`` is in the clone."""
        if not commits:
            return True
        query = "".join(f"{c}^{{commit}}\n" for c in commits).encode()
        out = _git_out(self.path, ["cat-file", "--batch-check"], stdin=query)
        return b"missing" not in out

    def kept(self, tip: str) -> bool:
        """``tip``'s ``have`` ref is there as a file: an earlier ``materialize`` brought it, its
        objects first (no git process; a packed ref or another ref backend is asked of git)."""
        return bool(_OBJECT_ID.match(tip)) and (self.path / _HAVE / tip).is_file()

    def materialize(self, chain: Sequence[BundleRef], fetch: Callable[[str], bytes]) -> int:
        """Bring the clone up to ``chain[-1].tip``; returns the bundle bytes fetched."""
        if self.kept(chain[-1].tip):  # most nodes: no lock to wait for, no git process
            return 0
        fetched = 0
        with self.locked():
            self.ensure()
            if self.has([chain[-1].tip]):
                return 0
            start = len(chain) - 1
            while start > 0 and not self.has(chain[start].prerequisites):
                start -= 1
            for ref in chain[start:]:
                if self.has([ref.tip]):
                    continue
                data = fetch(ref.key)
                fetched += len(data)
                path = write_bundle(self.root / "incoming", data)
                try:
                    with admin_lock(self.path):  # it reads every worktree's HEAD
                        run_git(["bundle", "unbundle", str(path)], self.path)
                finally:
                    path.unlink(missing_ok=True)
                # A ref keeps each tip (and so its history) for later nodes and runs.
                run_git(["update-ref", f"{_HAVE}/{ref.tip}", ref.tip], self.path)
        return fetched

    def bundle_commit(self, commit: str, base: str) -> bytes:
        """The node's commit as a bundle whose only prerequisite is ``base``: its parent (a
        node makes one commit on its base), so one git process, no ``rev-list`` for the
        boundary. A commit on anything else is refused centrally all the same (its parents,
        or objects the pack lacks: landing_audit.py)."""
        data, _ = make_bundle(self.path, commit, [base], boundary=[base])
        return data
