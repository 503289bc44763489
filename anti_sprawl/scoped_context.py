"""A node's repository files and memory as prompt parts: read through its firewall, packed.

Files are found by listing through the ``Firewall`` (never following symlinks) and read only
through it. Write-scope files are essential and go in whole; read-scope files and screened
memory compete for what the budget leaves (``packing.pack_context``): first each file's
outline and the memory, then whole files where they still fit.
"""

from __future__ import annotations

import hashlib
import re
from collections import deque
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from .firewall import Firewall, FirewallError
from .manifest import ContextItem, DroppedItem, ItemKind, Trust, make_item
from .memory import MEMORY_TRUST, MemoryFact
from .outline import outline_file
from .packing import ContextCandidate, PackResult, pack_context
from .plan import TaskNode
from .scopes import Scope
from .sections import SECTION_HEADERS, render_memory
from .tokens import count_tokens
from .trust import wrap_data

__all__ = [
    "MAX_SCOPED_FILES",
    "SECTIONS",
    "Part",
    "Section",
    "drop",
    "header",
    "make_item",
    "memory_id",
    "pack_optional",
    "part",
    "read_scoped_files",
    "scoped_files",
]

Section = Literal["stable", "brief", "upstream", "stubs", "files", "memory", "retry"]
SECTIONS: tuple[Section, ...] = (
    "stable",
    "brief",
    "upstream",
    "stubs",
    "files",
    "memory",
    "retry",  # a retry's failure note (failure_note.py)
)
MAX_SCOPED_FILES = 2000
MAX_LISTED_DIRS = 20_000
_MEMORY_AUTHORITY = {"system_record": 1.0, "user_stated": 0.9, "model_inferred": 0.5}


class Part(BaseModel):
    """One prompt item: its section, its manifest record and its exact text."""

    model_config = ConfigDict(frozen=True)

    section: Section
    item: ContextItem
    text: str


def part(
    section: Section, item_id: str, kind: ItemKind, source: str, trust: Trust, text: str
) -> Part:
    return Part(section=section, item=make_item(item_id, kind, source, trust, text), text=text)


def header(section: Section) -> Part:
    """The trusted heading that opens ``section`` in the first user message."""
    text = SECTION_HEADERS[section]
    return part(section, f"section:{section}", "instruction", "anti-sprawl", "trusted", text)


def drop(item_id: str, kind: ItemKind, source: str, tokens: int, reason: str) -> DroppedItem:
    return DroppedItem.model_validate(
        {"item_id": item_id, "kind": kind, "source": source, "tokens": tokens, "reason": reason}
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
    firewall: Firewall, node: TaskNode, dropped: list[DroppedItem]
) -> tuple[list[Part], dict[str, str]]:
    """Whole write-scope files as parts, and the text of each read-only file by path.

    Files the firewall refuses to read are recorded in ``dropped`` (``denied``, or
    ``unreadable`` for binaries and oversized files), never included.
    """
    write_scope = Scope(node.write_scope)
    write_parts: list[Part] = []
    read_texts: dict[str, str] = {}
    for path in scoped_files(firewall, Scope([*node.read_scope, *node.write_scope])):
        try:
            text = firewall.read_text(path)
        except FirewallError as exc:
            bad = exc.violation.reason in ("binary", "too_large")
            dropped.append(drop(f"file:{path}", "file", path, 0, "unreadable" if bad else "denied"))
            continue
        if write_scope.matches(path):
            block = wrap_data("file", path, text)
            write_parts.append(part("files", f"file:{path}", "file", path, "untrusted", block))
        else:
            read_texts[path] = text
    return write_parts, read_texts


def _relevance(path: str, node: TaskNode) -> float:
    """A cheap, deterministic stand-in for retrieval: named in goal or scope beats a glob hit."""
    if path in node.goal or path in node.read_scope:
        return 1.0
    stem = path.rsplit("/", 1)[-1].split(".", 1)[0]
    if stem and re.search(rf"\b{re.escape(stem)}\b", node.goal):
        return 0.7
    return 0.4


def _candidate(
    p: Part, relevance: float, authority: float = 1.0, tokens: int | None = None
) -> ContextCandidate:
    return ContextCandidate(
        item_id=p.item.item_id,
        kind=p.item.kind,
        source=p.item.source,
        trust=p.item.trust,
        tokens=p.item.tokens if tokens is None else tokens,
        relevance=relevance,
        authority=authority,
    )


def pack_optional(
    node: TaskNode,
    read_texts: dict[str, str],
    facts: Sequence[MemoryFact],
    budget: int,
    dropped: list[DroppedItem],
) -> tuple[list[Part], list[Part]]:
    """Pack read-scope files and memory into ``budget``: the stub parts and the memory parts.

    Pass 1 packs each file's cheaper form (its outline, or the whole file when that is no
    longer) together with memory; pass 2 spends what is left upgrading outlines to whole files
    (each costs the difference) and on files that have no outline. Drops go to ``dropped``.
    """
    budget -= count_tokens(SECTION_HEADERS["stubs"]) if read_texts else 0
    budget -= count_tokens(SECTION_HEADERS["memory"]) if facts else 0
    full: dict[str, Part] = {}
    first: dict[str, Part] = {}  # pass-1 form of each file that has an outline
    for path, text in read_texts.items():
        whole = wrap_data("file", path, text)
        full[path] = part("stubs", f"file:{path}", "file", path, "untrusted", whole)
        outline = outline_file(path, text)
        if outline is not None:
            block = wrap_data("stub", path, outline)
            stub = part("stubs", f"stub:{path}", "stub", path, "untrusted", block)
            first[path] = stub if stub.item.tokens < full[path].item.tokens else full[path]
    mem: dict[str, tuple[MemoryFact, Part]] = {}
    for f in facts:
        p = part("memory", memory_id(f), "memory", f.source, MEMORY_TRUST, render_memory(f))
        mem.setdefault(p.item.item_id, (f, p))  # the same text twice is one item
    pass1 = [_candidate(p, _relevance(path, node)) for path, p in first.items()]
    pass1 += [_candidate(p, 1.0, _MEMORY_AUTHORITY[f.source]) for f, p in mem.values()]
    result1 = pack_context(pass1, budget)
    chosen = set(result1.selected_ids)
    upgrades: list[ContextCandidate] = []
    for path, whole_part in full.items():
        cheap = first.get(path)
        if cheap is None:
            upgrades.append(_candidate(whole_part, _relevance(path, node)))
        elif cheap is not whole_part and cheap.item.item_id in chosen:
            cost = whole_part.item.tokens - cheap.item.tokens
            upgrades.append(_candidate(whole_part, _relevance(path, node), tokens=cost))
    result2 = pack_context(upgrades, budget - result1.used_tokens)
    chosen |= set(result2.selected_ids)
    _record_drops(dropped, (result1, result2), [*full.values(), *first.values()], mem)
    stub_parts: list[Part] = []
    for path in sorted(read_texts):
        if full[path].item.item_id in chosen:
            stub_parts.append(full[path])
        elif path in first and first[path].item.item_id in chosen:
            stub_parts.append(first[path])
    mem_parts = [p for item_id, (_, p) in mem.items() if item_id in chosen]
    return (
        [header("stubs"), *stub_parts] if stub_parts else [],
        [header("memory"), *mem_parts] if mem_parts else [],
    )


def _record_drops(
    dropped: list[DroppedItem],
    results: Sequence[PackResult],
    file_parts: Sequence[Part],
    mem: dict[str, tuple[MemoryFact, Part]],
) -> None:
    by_id = {p.item.item_id: p for p in file_parts}
    by_id.update({item_id: p for item_id, (_, p) in mem.items()})
    for result in results:
        for c, reason in result.dropped:
            it = by_id[c.item_id].item
            dropped.append(drop(c.item_id, it.kind, it.source, it.tokens, reason))
