"""One view of the start commit for every node's first prompt: read once, outlined once.

``validate --repo`` and ``execute``'s pre-flight assemble every node's lean first prompt
(context/essentials.py). Each node used to get its own ``Firewall`` over the exported
snapshot, list it, read its files and parse and tokenize each of them again: at 1,000 nodes
that did not finish in 150 s while plain ``validate`` took 4 s (issue 29, item 3). Here the
snapshot's file list (one ``ls-tree`` of the commit) becomes one ``FileIndex``; each file is
read once, through one firewall that serves exactly those files (deny rules, size cap and
binary check as every node's firewall applies them); each node gets the files its own scopes
match, in the same forms and with the same refusals recorded as ``read_scoped_files`` gives
it; and what a file's text yields (outline, references, tokens) is computed once
(``file_facts``). A node whose scopes match more than ``MAX_SCOPED_FILES`` files gets its own
firewall and listing, as before, so which files it keeps stays exactly the run's.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from ..fs.deny_rules import DEFAULT_ALLOW, DEFAULT_DENY, DenyRules
from ..fs.file_index import FileIndex
from ..fs.firewall import Firewall, FirewallError
from ..fs.scopes import FileSet, Scope
from ..outline.pyfacts import python_imports
from ..plan.model import TaskNode
from .file_facts import FileFacts
from .manifest import DroppedItem, FileChoice
from .read_scoped import MAX_SCOPED_FILES, read_scoped_files, refuse_file

__all__ = ["StartView"]

_Unreadable = Literal["unreadable", "denied"]


class StartView:
    """The files of one snapshot directory (``files``: its regular files, repo-relative),
    shared by every node's first-prompt assembly. Use as a context manager."""

    def __init__(self, root: Path, files: Iterable[str]):
        rules = DenyRules(DEFAULT_DENY, DEFAULT_ALLOW)
        visible = [f for f in files if _visible(f, rules)]  # what a firewall's listing shows
        self.root = root
        self.facts = FileFacts()
        self._index = FileIndex(visible)
        self._firewall = Firewall(root, FileSet(visible), [], durable=False)
        self._texts: dict[str, str] = {}
        self._refused: dict[str, _Unreadable] = {}
        self._imports: dict[str, list[str]] = {}

    def close(self) -> None:
        self._firewall.close()

    def __enter__(self) -> StartView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def read_scoped(
        self, node: TaskNode, dropped: list[DroppedItem], choices: list[FileChoice]
    ) -> tuple[dict[str, str], dict[str, str]]:
        """What ``read_scoped.read_scoped_files`` gives ``node`` through its own firewall."""
        paths = self._index.matching(Scope([*node.read_scope, *node.write_scope]))
        if len(paths) > MAX_SCOPED_FILES:  # which ones it keeps depends on its own listing
            with Firewall(self.root, node.read_scope, node.write_scope, durable=False) as fw:
                return read_scoped_files(fw, node, dropped, choices)
        write_scope = Scope(node.write_scope)
        write_texts: dict[str, str] = {}
        read_texts: dict[str, str] = {}
        for path in paths:
            writable = write_scope.matches(path)
            text = self._text(path)
            if text is None:
                reason = self._refused[path]
                refuse_file(path, writable, reason, dropped, choices)
                continue
            (write_texts if writable else read_texts)[path] = text
        return write_texts, read_texts

    def imports(self, path: str, text: str) -> list[str]:
        """``outline.pyfacts.python_imports`` of a file of this view, parsed once."""
        if path not in self._imports:
            self._imports[path] = python_imports(text, path)
        return self._imports[path]

    def _text(self, path: str) -> str | None:
        """The file's text, read once; None when the firewall refuses it (``_refused``)."""
        if path not in self._texts and path not in self._refused:
            try:
                self._texts[path] = self._firewall.read_text(path)
            except FirewallError as exc:
                bad = exc.violation.reason in ("binary", "too_large")
                self._refused[path] = "unreadable" if bad else "denied"
        return self._texts.get(path)


def _visible(path: str, rules: DenyRules) -> bool:
    """Would a firewall's directory listing show ``path`` (and every directory above it)?"""
    parts = path.split("/")
    for i in range(1, len(parts) + 1):
        rel = "/".join(parts[:i])
        if rules.reason(rel) or rules.reason(rel, True):
            return False
    return True
