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
file of the listed size whose git object id (``blob <size>\0`` and its bytes, hashed as the
repository hashes: SHA-1 or SHA-256) is the listed one, so its bytes are the commit's, byte for
byte, wherever they were read. Only the others (changed, missing, converted by a filter) come
from one ``cat-file --batch``: in a clean checkout of the 1,000-module benchmark plan, that
process inflating every object was 0.06 s of ``validate --repo``'s CPU, the reads and hashes
0.01 s (issue 29, item 3).
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
        # rather than matching every node's scope again (context/start_view.py)
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
    of a file where it is the commit's blob, else one ``cat-file --batch``). The matching goes
    through a ``FileIndex``: a plan's thousand scopes are not each tested against every file."""
    eligible = _exportable(
        run_git(["ls-tree", "-r", "-z", "-l", "--full-tree", commit], repo).stdout
    )
    index = FileIndex(path for _, path, _ in eligible)
    matches = {scope.entries: index.matching(scope) for scope in scopes}
    matched = {path for found in matches.values() for path in found}
    wanted: list[tuple[str, str]] = []
    found: dict[str, bytes] = {}
    total = 0
    for sha, path, size in eligible:
        if path not in matched:
            continue
        total += size
        if total > MAX_EXPORT_TOTAL:
            break
        wanted.append((sha, path))
        checked_out = _checked_out(repo, path, sha, size)
        if checked_out is not None:
            found[path] = checked_out
    rest = [(sha, path) for sha, path in wanted if path not in found]
    if rest:
        batch = "".join(f"{sha}\n" for sha, _ in rest).encode()
        out = run_git(["cat-file", "--batch"], repo, input_bytes=batch).stdout
        pos = 0
        for _, path in rest:
            header_end = out.index(b"\n", pos)
            length = int(out[pos:header_end].split()[2])
            found[path] = out[header_end + 1 : header_end + 1 + length]
            pos = header_end + 1 + length + 1
    return CommitFiles({path: found[path] for _, path in wanted}, matches)


_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_HASHES = {40: "sha1", 64: "sha256"}  # git's object formats, by the length of an id


def _checked_out(repo: Path, path: str, blob: str, size: int) -> bytes | None:
    """The checkout's copy of ``path`` when it is the blob ``blob`` of ``size`` bytes, else
    None: a symlink (``O_NOFOLLOW``), anything but a regular file (``O_NONBLOCK``: a FIFO
    cannot hang the read), another size, other bytes, or nothing readable there."""
    algorithm = _HASHES.get(len(blob))
    if algorithm is None:
        return None
    try:
        fd = os.open(f"{repo}/{path}", _OPEN)  # a str: no Path built per file
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size != size:
            return None
        data = os.read(fd, size + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    digest = hashlib.new(algorithm, b"blob %d\0" % len(data))
    digest.update(data)
    return data if len(data) == size and digest.hexdigest() == blob else None


def _exportable(listing: bytes) -> list[tuple[str, str, int]]:
    """(blob, path, size) of each regular file of an ``ls-tree -r -z -l`` listing that may be
    read: no symlinks or submodules, no secret names, none over the read cap."""
    out: list[tuple[str, str, int]] = []
    for record in filter(None, listing.split(b"\0")):
        meta, _, raw = record.partition(b"\t")
        mode, kind, sha, size = meta.decode().split()
        path = raw.decode("utf-8", "surrogateescape")
        if kind != "blob" or mode not in ("100644", "100755") or size == "-":
            continue  # symlinks, submodules
        if any(p in ("", ".", "..") for p in path.split("/")) or is_secret_path(path):
            continue
        if int(size) <= MAX_EXPORT_BYTES:
            out.append((sha, path, int(size)))
    return out
