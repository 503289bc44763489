"""The definitions a node's write files use from its read-scope files: what the change needs.

A names-only outline of a read-scope module says ``def attrib`` but not how to call it; a
whole outline of every module costs what the lean prompt exists to save. Issue 27 asks for the
signatures the change will use, before whole outlines of less relevant files: the write files'
names are resolved to their definitions (``outline.references``, over the scoped files only:
the node sees nothing else), and each read-scope file learns which of its outline lines to
show in full. ``lean`` spends its budget on those lines before raising whole outlines, and the
manifest records each one with its reason (``used_by:<file>``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import pairwise

from ..outline.parsed import python_module
from ..outline.pyrefs import ModuleRefs
from ..outline.python import OutlineLine
from ..outline.references import References, module_index
from .manifest import UsedSignature

__all__ = [
    "MAX_FIELDS",
    "Used",
    "detail_lines",
    "imported_by",
    "signatures",
    "used_entries",
    "uses_by_file",
]

MAX_FIELDS = 12  # a used class shows at most this many fields (dataclass fields, constants)

Used = dict[tuple[str, int], set[str]]
"""(qualified name, line) of a definition -> the write-scope files that use it."""


def uses_by_file(
    writes: Mapping[str, str],
    reads: Mapping[str, str],
    facts: dict[str, ModuleRefs | None] | None = None,
    index: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, Used]:
    """Per read-scope file, the definitions in it that the write files use (``facts``: a
    per-path cache shared over the same texts, ``References``; ``index``: their
    ``module_index``, when the caller has it)."""
    texts = {**reads, **writes}
    refs = References(sorted(texts), texts.get, index, facts)
    out: dict[str, Used] = {}
    for path in sorted(writes):
        for use in refs.uses(path):
            d = use.definition
            if d.path in reads and d.path not in writes and d.name:
                out.setdefault(d.path, {}).setdefault((d.name, d.line), set()).add(path)
    return out


def imported_by(
    writes: Mapping[str, str],
    reads: Mapping[str, str],
    index: Mapping[str, Sequence[str]] | None = None,
) -> set[str]:
    """Read-scope files a write file imports directly: where new uses most often come from
    (a file's imported names from its one parse, ``outline.parsed``). ``index``: the
    ``module_index`` of the reads and writes together (``uses_by_file``'s), whose read files
    are the reads' own index unless a write file is a package's ``__init__.py`` (which can
    name the reads otherwise)."""
    if index is None or any(p.rpartition("/")[2] == "__init__.py" for p in writes):
        index = module_index(reads)
    found: set[str] = set()
    for path, text in writes.items():
        if path.endswith(".py"):
            for name in python_module(text, path).imports:
                found.update(f for f in index.get(name, ()) if f in reads)
    return found


def detail_lines(entries: Sequence[OutlineLine] | None, used: Used) -> frozenset[int]:
    """Outline lines to show in full: each used definition; for a class, its fields, its
    properties and ``__init__``; for a method, its class's header."""
    if not entries or not used:
        return frozenset()
    lines = {line for _, line in used}
    classes = [e for e in entries if e.kind == "class"]
    for name, line in used:
        if "." in name:
            lines.update(c.line for c in classes if c.line < line <= c.end and c.depth == 0)
    for c in classes:
        if c.line in lines:
            members = [e for e in entries if c.line < e.line <= c.end and e.depth == c.depth + 1]
            fields = [e.line for e in members if e.kind == "name"][:MAX_FIELDS]
            lines.update(fields)
            # properties are a class's data as much as its fields (``url.port``)
            props = [
                e.line
                for before, e in pairwise(members)
                if e.kind == "def" and before.kind == "decorator" and _is_property(before.text)
            ]
            lines.update(props[:MAX_FIELDS])
            lines.update(e.line for e in members if e.kind == "def" and e.name == "__init__")
    return frozenset(lines)


def _is_property(decorator: str) -> bool:
    return decorator.strip().lstrip("@").rsplit(".", 1)[-1] in ("property", "cached_property")


def used_entries(entries: Iterable[OutlineLine], lines: frozenset[int]) -> list[OutlineLine]:
    """Only the outline entries on ``lines``: the smallest view of what the change uses."""
    return [e for e in entries if e.line in lines and e.kind in ("class", "def", "name")]


def signatures(used: Used) -> list[UsedSignature]:
    """The manifest's record of ``used``, by line."""
    return [
        UsedSignature(name=name, line=line, reason="used_by:" + ",".join(sorted(users)))
        for (name, line), users in sorted(used.items(), key=lambda kv: (kv[0][1], kv[0][0]))
    ]
