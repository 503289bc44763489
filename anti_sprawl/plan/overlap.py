"""Write/write overlap and stale reads between nodes the DAG leaves unordered.

Either node of an unordered pair could run first, or both at once: two writers of one path
would conflict when landing, and a reader could see the file before or after the writer.
The checks avoid comparing every pair of nodes: write entries are bucketed by their literal
path prefix in a trie, so only entries on one root-to-leaf path of the trie are compared, and
"is A an ancestor of B" is a bit test on per-node ancestor sets (``plan.graph.Ordering``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

from ..fs.scopes import entry_problem, literal_prefix, may_overlap, normalize_entry
from .graph import Ordering
from .model import Plan, TaskNode
from .report import Problem, problem

__all__ = ["overlap_problems"]

Kind = Literal["write", "read"]


class _Trie:
    """Scope entries keyed by their literal path prefix."""

    def __init__(self) -> None:
        self.children: dict[str, _Trie] = {}
        self.items: list[tuple[str, str]] = []  # (task_id, entry)

    def add(self, prefix: tuple[str, ...], item: tuple[str, str]) -> None:
        node = self
        for part in prefix:
            node = node.children.setdefault(part, _Trie())
        node.items.append(item)

    def related(self, prefix: tuple[str, ...]) -> Iterator[tuple[str, str]]:
        """Items whose literal prefix is a component-prefix of ``prefix`` or extends it."""
        node: _Trie | None = self
        for part in prefix:
            assert node is not None
            yield from node.items
            node = node.children.get(part)
            if node is None:
                return
        stack = [node]
        while stack:
            cur = stack.pop()
            assert cur is not None
            yield from cur.items
            stack.extend(cur.children.values())


def overlap_problems(plan: Plan, edges: dict[str, list[str]]) -> list[Problem]:
    """Unordered writers of one path, and reads another unordered node writes (acyclic plans)."""
    ordering = Ordering(edges)
    writes = _write_trie(plan)
    problems: list[Problem] = []
    reported: set[tuple[str, str, str]] = set()
    for t in plan.tasks:
        for kind, entry, other, other_entry in _unordered_writes(t, writes, ordering):
            key = (kind, t.task_id, other)
            if key in reported or not may_overlap(entry, other_entry):
                continue
            reported.add(key)
            problems.append(_overlap_problem(kind, t.task_id, entry, other, other_entry))
    return problems


def _write_trie(plan: Plan) -> _Trie:
    writes = _Trie()
    for t in plan.tasks:
        for entry in dict.fromkeys(t.write_scope):
            if not entry_problem(entry):
                writes.add(literal_prefix(entry), (t.task_id, normalize_entry(entry)))
    return writes


def _unordered_writes(
    t: TaskNode, writes: _Trie, ordering: Ordering
) -> Iterator[tuple[Kind, str, str, str]]:
    """``(kind, entry, other task, its write entry)``: the writes of nodes the DAG does not
    order against ``t`` that share a literal prefix with one of ``t``'s entries."""
    checks: list[tuple[Kind, str]] = [
        *(("write", e) for e in t.write_scope),
        *(("read", e) for e in t.read_scope),
    ]
    for kind, entry in checks:
        if entry_problem(entry):
            continue
        norm = normalize_entry(entry)
        for other, other_entry in writes.related(literal_prefix(entry)):
            if other == t.task_id or ordering.ordered(t.task_id, other):
                continue
            if kind == "write" and other < t.task_id:
                continue  # each unordered pair of writers is reported once
            yield kind, norm, other, other_entry


def _overlap_problem(kind: Kind, task: str, entry: str, other: str, other_entry: str) -> Problem:
    if kind == "write":
        msg = (
            f"tasks '{task}' and '{other}' may run at the same time but both write "
            f"{_pair(entry, other_entry)}; make one depend on the other or split the scopes"
        )
        return problem("write_overlap", msg, [task, other], sorted({entry, other_entry}))
    msg = (
        f"task '{task}' reads {entry!r}, which task '{other}' writes ({other_entry!r}), but neither "
        f"depends on the other: the read may be stale; add a dependency"
    )
    return problem("stale_read", msg, [task, other], sorted({entry, other_entry}))


def _pair(a: str, b: str) -> str:
    return repr(a) if a == b else f"{a!r} / {b!r}"
