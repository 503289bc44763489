"""The scoped files of one commit, read from git into memory: what a plan's pre-flight reads.

``validate --repo`` and ``execute``'s pre-flight build every node's first prompt from the
commit the run would start from (context/essentials.py). They used to export its scoped files
into a temporary directory and read each back through a firewall: at 1,000 files the writes
alone were a sixth of ``validate --repo`` (issue 29, item 3). Here one ``ls-tree`` lists the
commit and one ``cat-file --batch`` reads the files any scope matches; their bytes stay in the
batch's output, and the view of the start commit (context/start_view.py) checks each one as
a firewall would check the file (``Firewall.text_of``). ``export`` still writes them out for
what needs a directory (a node with more scoped files than a listing keeps, ``scope_snapshot``).
Secret names, symlinks, submodules and files over the read cap are never read.
"""

from __future__ import annotations

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
    """Files of one commit by repo-relative path, their bytes held as git returned them."""

    def __init__(
        self,
        batch: bytes,
        spans: dict[str, tuple[int, int]],
        matches: dict[tuple[str, ...], list[str]] | None = None,
    ):
        self._batch = batch
        self._spans = spans
        self.paths: list[str] = list(spans)
        # each scope's (normalized entries) matches among the commit's readable files, read
        # or not: ``FileIndex.matching`` over the listing, which the start view filters
        # rather than matching every node's scope again (context/start_view.py)
        self.matches = matches or {}

    def data(self, path: str) -> bytes:
        start, end = self._spans[path]
        return self._batch[start:end]

    def export(self, root: Path) -> None:
        """Write every file under ``root`` (a directory of the same files)."""
        for path, (start, end) in self._spans.items():
            target = root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(self._batch[start:end])


def read_commit_files(repo: Path, commit: str, scopes: Sequence[Scope]) -> CommitFiles:
    """``commit``'s files that any of ``scopes`` matches (one ``ls-tree`` and one ``cat-file
    --batch``). The matching goes through a ``FileIndex``: a plan's thousand scopes are not
    each tested against every file."""
    eligible = _exportable(
        run_git(["ls-tree", "-r", "-z", "-l", "--full-tree", commit], repo).stdout
    )
    index = FileIndex(path for _, path, _ in eligible)
    matches = {scope.entries: index.matching(scope) for scope in scopes}
    matched = {path for found in matches.values() for path in found}
    wanted: list[tuple[str, str]] = []
    total = 0
    for sha, path, size in eligible:
        if path not in matched:
            continue
        total += size
        if total > MAX_EXPORT_TOTAL:
            break
        wanted.append((sha, path))
    if not wanted:
        return CommitFiles(b"", {}, matches)
    batch = "".join(f"{sha}\n" for sha, _ in wanted).encode()
    out = run_git(["cat-file", "--batch"], repo, input_bytes=batch).stdout
    spans: dict[str, tuple[int, int]] = {}
    pos = 0
    for _, path in wanted:
        header_end = out.index(b"\n", pos)
        length = int(out[pos:header_end].split()[2])
        spans[path] = (header_end + 1, header_end + 1 + length)
        pos = header_end + 1 + length + 1
    return CommitFiles(out, spans, matches)


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
