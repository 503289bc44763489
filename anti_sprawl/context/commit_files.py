"""The scoped files of one commit, read from git into memory: what a plan's pre-flight reads.

``validate --repo`` and ``execute``'s pre-flight build every node's first prompt from the
commit the run would start from (context/essentials.py). They used to export its scoped files
into a temporary directory and read each back through a firewall: at 1,000 files the writes
alone were a sixth of ``validate --repo`` (issue 29, item 3). Here one ``ls-tree`` lists the
commit and the files any scope matches are read into memory, and the view of the start commit
(context/start_view.py) checks each one as a firewall would check the file
(``Firewall.text_of``). ``export`` still writes them out for what needs a directory (a node
with more scoped files than a listing keeps, ``scope_snapshot``). Secret names, symlinks,
submodules and files over the read cap are never read.

A file is taken from the checkout when the checked-out copy is the commit's blob: a regular
file whose git object id (``blob <size>\0`` and its bytes, hashed as the repository hashes:
SHA-1 or SHA-256) is the listed one, so its bytes are the commit's, byte for byte, wherever
they were read. Only the others (changed, missing, converted by a filter) come from git, their
sizes from one ``cat-file --batch-check`` and their bytes from one ``cat-file --batch``: in a
clean checkout of the 1,000-module benchmark plan, the ``cat-file`` inflating every object
was 0.06 s of ``validate --repo``'s CPU and the sizes ``ls-tree -l`` looked up 0.012 s, the
reads and hashes 0.01 s (issue 29, item 3).
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Sequence
from pathlib import Path

from ..fs.file_index import FileIndex
from ..fs.repofiles import is_secret_path
from ..fs.scopes import Scope
from ..git.cmd import run_git

__all__ = ["MAX_EXPORT_BYTES", "MAX_EXPORT_TOTAL", "CommitFiles", "read_commit_files"]

MAX_EXPORT_BYTES = 1_000_000  # the firewall's read cap: a larger blob would not be read anyway
MAX_EXPORT_TOTAL = 256 * 1024 * 1024


class CommitFiles:
    """Files of one commit by repo-relative path, and their bytes as the commit holds them."""

    def __init__(
        self,
        files: dict[str, bytes],
        matches: dict[tuple[str, ...], list[str]] | None = None,
    ):
        self._files = files
        self.paths: list[str] = list(files)
        # each scope's (normalized entries) matches among the commit's readable files, read
        # or not: ``FileIndex.matching`` over the listing, which the start view filters
        # rather than matching every node's scope again (context/start_view.py); of the
        # files past the total cap, never read, even one over the read cap may be named here
        self.matches = matches or {}

    def data(self, path: str) -> bytes:
        return self._files[path]

    def export(self, root: Path) -> None:
        """Write every file under ``root`` (a directory of the same files)."""
        for path, data in self._files.items():
            target = root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)


def read_commit_files(repo: Path, commit: str, scopes: Sequence[Scope]) -> CommitFiles:
    """``commit``'s files that any of ``scopes`` matches (one ``ls-tree``; the checkout's copy
    of a file where it is the commit's blob, else git's: the sizes of those in one ``cat-file
    --batch-check``, their bytes in one ``cat-file --batch``). The matching goes through a
    ``FileIndex``: a plan's thousand scopes are not each tested against every file."""
    listed = _readable(run_git(["ls-tree", "-r", "-z", "--full-tree", commit], repo).stdout)
    index = FileIndex(path for _, path in listed)
    matches = {scope.entries: index.matching(scope) for scope in scopes}
    matched = {path for found in matches.values() for path in found}
    in_scope = [(sha, path) for sha, path in listed if path in matched]
    found = _from_checkout(repo, in_scope)
    if sum(map(len, found.values())) > MAX_EXPORT_TOTAL:
        # the reads stopped at the file that passed the total cap: every later one is past it
        stop = [path for _, path in in_scope].index(next(reversed(found)))
        in_scope = in_scope[: stop + 1]
    sizes = {path: len(data) for path, data in found.items()}
    sizes.update(_git_sizes(repo, [(sha, p) for sha, p in in_scope if p not in found]))
    # a file over the read cap is neither matched nor read (no read would serve it)
    big = {path for path, size in sizes.items() if size > MAX_EXPORT_BYTES}
    if big:
        matches = {key: [p for p in paths if p not in big] for key, paths in matches.items()}
    wanted: list[tuple[str, str]] = []
    total = 0
    for sha, path in in_scope:
        if path in big:
            continue
        total += sizes[path]
        if total > MAX_EXPORT_TOTAL:
            break
        wanted.append((sha, path))
    found.update(_git_blobs(repo, [(sha, p) for sha, p in wanted if p not in found]))
    return CommitFiles({path: found[path] for _, path in wanted}, matches)


def _from_checkout(repo: Path, files: list[tuple[str, str]]) -> dict[str, bytes]:
    """The ``files`` (blob, path) whose checked-out copy is their blob, in order, until what
    they hold passes the total cap."""
    found: dict[str, bytes] = {}
    total = 0
    for sha, path in files:
        data = _checked_out(repo, path, sha)
        if data is not None:
            found[path] = data
            total += len(data)
            if total > MAX_EXPORT_TOTAL:
                break
    return found


def _git_sizes(repo: Path, files: list[tuple[str, str]]) -> dict[str, int]:
    """The size of each of ``files`` (blob, path), from one ``cat-file --batch-check``."""
    if not files:
        return {}
    query = "".join(f"{sha}\n" for sha, _ in files).encode()
    out = run_git(["cat-file", "--batch-check"], repo, input_bytes=query).stdout
    return {
        path: int(line.split()[2]) for (_, path), line in zip(files, out.splitlines(), strict=True)
    }


def _git_blobs(repo: Path, files: list[tuple[str, str]]) -> dict[str, bytes]:
    """The bytes of each of ``files`` (blob, path), from one ``cat-file --batch``."""
    if not files:
        return {}
    batch = "".join(f"{sha}\n" for sha, _ in files).encode()
    out = run_git(["cat-file", "--batch"], repo, input_bytes=batch).stdout
    blobs: dict[str, bytes] = {}
    pos = 0
    for _, path in files:
        header_end = out.index(b"\n", pos)
        length = int(out[pos:header_end].split()[2])
        blobs[path] = out[header_end + 1 : header_end + 1 + length]
        pos = header_end + 1 + length + 1
    return blobs


_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_HASHES = {40: "sha1", 64: "sha256"}  # git's object formats, by the length of an id


def _checked_out(repo: Path, path: str, blob: str) -> bytes | None:
    """The checkout's copy of ``path`` when it is the blob ``blob`` (at most the read cap),
    else None: a symlink (``O_NOFOLLOW``), anything but a regular file (``O_NONBLOCK``: a
    FIFO cannot hang the read), a larger file, other bytes, or nothing readable there."""
    algorithm = _HASHES.get(len(blob))
    if algorithm is None:
        return None
    try:
        fd = os.open(f"{repo}/{path}", _OPEN)  # a str: no Path built per file
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_EXPORT_BYTES:
            return None
        data = os.read(fd, info.st_size + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    digest = hashlib.new(algorithm, b"blob %d\0" % len(data))
    digest.update(data)
    return data if digest.hexdigest() == blob else None


def _readable(listing: bytes) -> list[tuple[str, str]]:
    """(blob, path) of each regular file of an ``ls-tree -r -z`` listing that may be read: no
    symlinks or submodules, no secret names."""
    out: list[tuple[str, str]] = []
    for record in filter(None, listing.split(b"\0")):
        meta, _, raw = record.partition(b"\t")
        mode, kind, sha = meta.decode().split()
        path = raw.decode("utf-8", "surrogateescape")
        if kind != "blob" or mode not in ("100644", "100755"):
            continue  # symlinks, submodules
        if any(p in ("", ".", "..") for p in path.split("/")) or is_secret_path(path):
            continue
        out.append((sha, path))
    return out
