"""A node's repository files as prompt material: listed and read through its firewall.

Files are found by listing through the ``Firewall`` (never following symlinks) and read only
through it; what form each takes in the prompt is decided by ``lean``. ``Part`` is one prompt
item: its section, its manifest record and its exact text.
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Sequence
from functools import lru_cache
from typing import Literal, NamedTuple

from ..fs.firewall import Firewall, FirewallError
from ..fs.scopes import Scope
from ..plan.model import TaskNode
from ..trust import data_block
from .manifest import ContextItem, DroppedItem, FileChoice, ItemKind, Trust, make_item
from .memory import MemoryFact
from .sections import SECTION_HEADERS

__all__ = [
    "MAX_SCOPED_FILES",
    "SECTIONS",
    "Part",
    "Section",
    "data_part",
    "drop",
    "header",
    "make_item",
    "memory_id",
    "part",
    "pieces_part",
    "read_scoped_files",
    "scoped_files",
]

Section = Literal["stable", "brief", "upstream", "stubs", "files", "memory", "retry", "guidance"]
SECTIONS: tuple[Section, ...] = (
    "stable",
    "brief",
    "upstream",
    "stubs",
    "files",
    "memory",
    "retry",  # a retry's failure note (run/failure_note.py)
    "guidance",  # the repository's notes for agents (context/guidance.py)
)
MAX_SCOPED_FILES = 2000
MAX_LISTED_DIRS = 20_000


class Part(NamedTuple):
    """One prompt item: its section, its manifest record and its exact text. A plain record:
    it never leaves the process (the manifest keeps its ``item``), and validating one per
    item was 0.007 s of the 1,000-node benchmark plan's pre-flight (issue 29, item 3)."""

    section: Section
    item: ContextItem
    text: str


def part(
    section: Section, item_id: str, kind: ItemKind, source: str, trust: Trust, text: str
) -> Part:
    return Part(section=section, item=make_item(item_id, kind, source, trust, text), text=text)


def pieces_part(
    section: Section,
    item_id: str,
    kind: ItemKind,
    source: str,
    trust: Trust,
    pieces: Sequence[str],
) -> Part:
    """``part`` of the text ``pieces`` join to, counted piece by piece where that is exact: a
    data block's content (``trust.data_block``) or a plan's requirement in a brief is encoded
    once however many items hold it."""
    text = "".join(pieces)
    item = make_item(item_id, kind, source, trust, text, pieces)
    return Part(section=section, item=item, text=text)


def data_part(
    section: Section, item_id: str, kind: ItemKind, source: str, block: str, content: str
) -> Part:
    """An untrusted ``part`` holding ``content`` as a ``block`` data block from ``source``."""
    return pieces_part(
        section, item_id, kind, source, "untrusted", data_block(block, source, content)
    )


@lru_cache(maxsize=len(SECTION_HEADERS))  # a frozen Part per section: counted once
def header(section: Section) -> Part:
    """The trusted heading that opens ``section`` in the first user message."""
    text = SECTION_HEADERS[section]
    return part(section, f"section:{section}", "instruction", "anti-sprawl", "trusted", text)


def drop(item_id: str, kind: ItemKind, source: str, tokens: int, reason: str) -> DroppedItem:
    return DroppedItem.model_validate(
        {"item_id": item_id, "kind": kind, "source": source, "tokens": tokens, "reason": reason}
    )


def refuse_file(
    path: str,
    writable: bool,
    reason: str,
    dropped: list[DroppedItem],
    choices: list[FileChoice],
) -> None:
    """Record a scoped file that could not be shown: a dropped item and its file choice."""
    dropped.append(drop(f"file:{path}", "file", path, 0, reason))
    choices.append(
        FileChoice(
            path=path,
            scope="write" if writable else "read",
            form="dropped",
            reason=reason,
            tokens=0,
            whole_tokens=0,
        )
    )


def memory_id(fact: MemoryFact) -> str:
    return "memory:" + hashlib.sha256(fact.text.encode("utf-8")).hexdigest()[:12]


def scoped_files(firewall: Firewall, scope: Scope, *, limit: int = MAX_SCOPED_FILES) -> list[str]:
    """Regular files matching ``scope``, found by listing through the firewall, sorted.

    Breadth-first from the root; symlinks are never followed; a directory is entered only when
    something below it can match; at most ``limit`` files and ``MAX_LISTED_DIRS`` listings.
    """
    found: list[str] = []
    queue = deque([""])
    listed = 0
    while queue and len(found) < limit and listed < MAX_LISTED_DIRS:
        directory = queue.popleft()
        listed += 1
        try:
            entries = firewall.list_dir(directory)
        except FirewallError:
            continue  # vanished or refused since its parent was listed
        for entry in entries:
            rel = f"{directory}/{entry.name}" if directory else entry.name
            if entry.kind == "dir" and scope.may_contain(rel):
                queue.append(rel)
            elif entry.kind == "file" and scope.matches(rel) and len(found) < limit:
                found.append(rel)
    return sorted(found)


def read_scoped_files(
    firewall: Firewall, node: TaskNode, dropped: list[DroppedItem], choices: list[FileChoice]
) -> tuple[dict[str, str], dict[str, str]]:
    """The text of each write-scope file and of each read-only file, by path.

    Files the firewall refuses to read are recorded in ``dropped`` and ``choices``
    (``denied``, or ``unreadable`` for binaries and oversized files), never included.
    """
    write_scope = Scope(node.write_scope)
    write_texts: dict[str, str] = {}
    read_texts: dict[str, str] = {}
    for path in scoped_files(firewall, Scope([*node.read_scope, *node.write_scope])):
        writable = write_scope.matches(path)
        try:
            text = firewall.read_text(path)
        except FirewallError as exc:
            bad = exc.violation.reason in ("binary", "too_large")
            reason: Literal["unreadable", "denied"] = "unreadable" if bad else "denied"
            refuse_file(path, writable, reason, dropped, choices)
            continue
        (write_texts if writable else read_texts)[path] = text
    return write_texts, read_texts
