"""What a file's text yields for a prompt, computed once per file rather than once per node.

A plan's pre-flight assembles every node's first prompt from the same start commit
(context/start_view.py): at 1,000 nodes the same module was parsed for its outline and its
references, and its whole and outlined forms tokenized, once for every node that reads it
(issue 29, item 3). These results depend only on the file's path and text, so one
``FileFacts`` shared by those assemblies computes each once; the parts it hands out are frozen
(``read_scoped.Part``), so sharing them cannot leak one node's choices into another's.
"""

from __future__ import annotations

from typing import Literal

from ..outline.parsed import file_entries
from ..outline.pyrefs import ModuleRefs
from ..outline.python import OutlineLine
from ..outline.regions import line_count
from ..outline.views import Level, render_outline
from .read_scoped import Part, Section, data_part
from .used import Used, detail_lines, used_entries

__all__ = ["FileFacts", "defined_names"]

_Key = tuple[str, str]  # (path, text)


def defined_names(entries: list[OutlineLine] | None) -> frozenset[str]:
    """The names of the classes, functions and assigned names among outline ``entries``."""
    return frozenset(e.name for e in entries or () if e.kind in ("class", "def", "name"))


class FileFacts:
    """Outline entries, line counts, whole and outlined parts per (path, text), the outline
    lines shown in full per set of used definitions, and the ``outline.references`` facts per
    path (``refs``: texts fixed per path, as in one commit)."""

    def __init__(self) -> None:
        self.refs: dict[str, ModuleRefs | None] = {}
        self._entries: dict[_Key, list[OutlineLine] | None] = {}
        self._lines: dict[_Key, int] = {}
        self._defined: dict[_Key, frozenset[str]] = {}
        self._whole: dict[tuple[Section, str, str], Part] = {}
        self._outlines: dict[tuple[str, str, str, frozenset[int]], Part] = {}
        self._detailed: dict[tuple[str, str, frozenset[tuple[str, int]]], frozenset[int]] = {}

    def detailed(
        self, path: str, text: str, entries: list[OutlineLine] | None, used: Used
    ) -> frozenset[int]:
        """``used.detail_lines(entries, used)``, by the definitions used (not by whom): every
        node that uses the same names of a file shows the same lines of it in full."""
        if not used:
            return frozenset()
        key = (path, text, frozenset(used))
        found = self._detailed.get(key)
        if found is None:
            found = self._detailed[key] = detail_lines(entries, used)
        return found

    def entries(self, path: str, text: str) -> list[OutlineLine] | None:
        key = (path, text)
        if key not in self._entries:
            self._entries[key] = file_entries(path, text)
        return self._entries[key]

    def defined(self, path: str, text: str) -> frozenset[str]:
        """The names the file's outline defines (``lean.relevance`` asks for every node)."""
        key = (path, text)
        if key not in self._defined:
            self._defined[key] = defined_names(self.entries(path, text))
        return self._defined[key]

    def n_lines(self, path: str, text: str) -> int:
        key = (path, text)
        if key not in self._lines:
            self._lines[key] = line_count(text)
        return self._lines[key]

    def whole(self, section: Section, path: str, text: str) -> Part:
        key = (section, path, text)
        if key not in self._whole:
            self._whole[key] = data_part(section, f"file:{path}", "file", path, "file", text)
        return self._whole[key]

    def outline(
        self,
        path: str,
        text: str,
        level: Level | Literal["used"],
        entries: list[OutlineLine],
        detailed: frozenset[int],
    ) -> Part:
        """The outline part at ``level`` (``"used"``: only the ``detailed`` entries, the
        form ``lean.Scoped.used_view`` shows)."""
        key = (path, text, level, detailed)
        if key not in self._outlines:
            n_lines = self.n_lines(path, text)
            if level == "used":
                shown = used_entries(entries, detailed)
                rendered = render_outline(shown, "names", n_lines, detailed)
                item_id = f"used:{path}"
            else:
                rendered = render_outline(entries, level, n_lines, detailed)
                item_id = f"stub:{path}"
            self._outlines[key] = data_part("stubs", item_id, "stub", path, "stub", rendered)
        return self._outlines[key]
