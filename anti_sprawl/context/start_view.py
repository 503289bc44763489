"""One view of the start commit for every node's first prompt: read once, outlined once.

``validate --repo`` and ``execute``'s pre-flight assemble every node's lean first prompt
(context/essentials.py). Each node used to get its own ``Firewall`` over an exported
snapshot, list it, read its files and parse and tokenize each of them again: at 1,000 nodes
that did not finish in 150 s while plain ``validate`` took 4 s (issue 29, item 3). Here the
commit's scoped files, read from git once (context/commit_files.py), become one
``FileIndex``; each file's bytes are checked once by one firewall that serves exactly those
files, as it checks a file it reads (``Firewall.text_of``: deny rules, size cap, binary check,
line breaks), with nothing written to disk; each node gets the files its own scopes match, in
the same forms and with the same refusals recorded as ``read_scoped_files`` gives it; and what
a file's text yields (outline, references, tokens) is computed once (``file_facts``). A node
whose scopes match more than ``MAX_SCOPED_FILES`` files gets its own firewall and listing over
the files exported to a directory (once, for the first such node), so which files it keeps
stays exactly the run's.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Literal

from ..fs.deny_rules import DEFAULT_ALLOW, DEFAULT_DENY, DenyRules
from ..fs.file_index import FileIndex
from ..fs.firewall import Firewall, FirewallError
from ..fs.scopes import FileSet, Scope
from ..plan.model import TaskNode
from .commit_files import CommitFiles
from .file_facts import FileFacts
from .manifest import DroppedItem, FileChoice
from .read_scoped import MAX_SCOPED_FILES, read_scoped_files, refuse_file

__all__ = ["StartView"]

_Unreadable = Literal["unreadable", "denied"]


class StartView:
    """The files of one commit (``files``), shared by every node's first-prompt assembly.
    Use as a context manager: ``root`` is a temporary directory, empty unless a node needed
    the files on disk."""

    def __init__(self, files: CommitFiles):
        visible = _visible(files.paths, DenyRules(DEFAULT_DENY, DEFAULT_ALLOW))
        self._tmp = tempfile.TemporaryDirectory(prefix="anti-sprawl-start-view-")
        self.root = Path(self._tmp.name)
        self.facts = FileFacts()
        self._files = files
        self._exported = False
        self._index = FileIndex(visible)
        self._visible = frozenset(visible)
        self._firewall = Firewall(self.root, FileSet(visible), [], durable=False)
        self._texts: dict[str, str] = {}
        self._refused: dict[str, _Unreadable] = {}

    def close(self) -> None:
        self._firewall.close()
        self._tmp.cleanup()

    def __enter__(self) -> StartView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def read_scoped(
        self, node: TaskNode, dropped: list[DroppedItem], choices: list[FileChoice]
    ) -> tuple[dict[str, str], dict[str, str]]:
        """What ``read_scoped.read_scoped_files`` gives ``node`` through its own firewall."""
        paths = self._matching(Scope([*node.read_scope, *node.write_scope]))
        if len(paths) > MAX_SCOPED_FILES:  # which ones it keeps depends on its own listing
            if not self._exported:
                self._files.export(self.root)
                self._exported = True
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

    def _matching(self, scope: Scope) -> list[str]:
        """``self._index.matching(scope)``: the visible files among those the scope matched
        when the commit's files were read (kept in order: both lists are sorted), where it
        was one of those scopes; matched again otherwise."""
        found = self._files.matches.get(scope.entries)
        if found is None:
            return self._index.matching(scope)
        return [path for path in found if path in self._visible]

    def _text(self, path: str) -> str | None:
        """The file's text, read once; None when the firewall refuses it (``_refused``)."""
        if path not in self._texts and path not in self._refused:
            try:
                self._texts[path] = self._firewall.text_of(path, self._files.data(path))
            except FirewallError as exc:
                bad = exc.violation.reason in ("binary", "too_large")
                self._refused[path] = "unreadable" if bad else "denied"
        return self._texts.get(path)


def _visible(paths: list[str], rules: DenyRules) -> list[str]:
    """The ``paths`` a firewall's directory listing shows: neither a path nor a directory
    above it is denied, as a file or as a directory. Each directory is judged once, for all
    the files below it, and each name by itself (``DenyRules.entry_reason``, its parents
    judged already): a path's every prefix probed again was 0.009 s of the start view of the
    1,000-node benchmark plan's 1,051 files (issue 29, item 3)."""
    judged: dict[str, bool] = {"": True}

    def shown(rel: str) -> bool:
        return rules.entry_reason(rel, False) is None and rules.entry_reason(rel, True) is None

    def directory(rel: str) -> bool:
        found = judged.get(rel)
        if found is None:
            found = judged[rel] = directory(rel.rpartition("/")[0]) and shown(rel)
        return found

    return [path for path in paths if directory(path.rpartition("/")[0]) and shown(path)]
