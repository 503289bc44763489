"""The files of a listing that a scope matches, found by prefix instead of testing every file.

``Scope.matches`` tests one path against every pattern, so "which of these N files does each
of a plan's T tasks match" costs N × T tests: at 1,000 nodes on a 1,000-file repository that
was two million pathspec calls in ``plan/reference_checks.py`` (issue 29, item 3). Every path a
scope entry matches lies under the entry's literal prefix (the entry itself, or what is below
it: ``fs/scopes.py``'s "entry followed by an implicit /**"), so the candidates are one
contiguous run of the sorted listing; only those are tested with the scope itself, so the
answer is exactly what testing every file would give.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable

from .scopes import Scope, is_glob, literal_prefix, normalize_entry

__all__ = ["FileIndex"]


class FileIndex:
    """A sorted listing of repo-relative paths, queried by scope."""

    def __init__(self, files: Iterable[str]):
        self.files: list[str] = sorted(set(files))
        # Each entry's candidates, found once: a plan's scopes share entries (``shared/`` in
        # every node's read scope, a module in each of its dependents'); reading the
        # 1,000-node benchmark plan's files at its commit, 24.6-25.0 -> 22.2-22.8 ms
        # (context/commit_files.py; issue 29, item 3).
        self._candidates: dict[str, tuple[str, ...]] = {}

    def __len__(self) -> int:
        return len(self.files)

    def _under(self, base: str) -> Iterable[str]:
        """``base`` itself and every path below it (``""``: every path)."""
        if not base:
            return self.files
        out: list[str] = []
        i = bisect_left(self.files, base)
        while i < len(self.files) and self.files[i].startswith(base):
            path = self.files[i]
            if len(path) == len(base) or path[len(base)] == "/":
                out.append(path)
            i += 1
        return out

    def candidates(self, entry: str) -> tuple[str, ...]:
        """Paths ``entry`` may match: those under its literal prefix (a superset)."""
        found = self._candidates.get(entry)
        if found is None:
            found = self._candidates[entry] = tuple(self._find(entry))
        return found

    def _find(self, entry: str) -> Iterable[str]:
        norm = normalize_entry(entry)
        if not is_glob(norm) and "\\" not in norm:
            return self._under(norm.rstrip("/"))
        parts: list[str] = []
        for part in literal_prefix(norm):
            if "\\" in part:  # an escape: the pattern's literal text may differ from the entry's
                break
            parts.append(part)
        return self._under("/".join(parts))

    def matching(self, scope: Scope) -> list[str]:
        """The listed paths ``scope`` matches, sorted: what ``[f for f in files if
        scope.matches(f)]`` returns, testing only the candidates."""
        found: set[str] = set()
        for entry in scope.entries:
            found.update(p for p in self.candidates(entry) if p not in found and scope.matches(p))
        return sorted(found)
