"""Which module defines each name a Python file uses: references resolved across files.

``outline.pyrefs`` reads one file's bindings, definitions and used chains; here a chain is
followed to the module that defines it: ``from pkg import name`` through the package's
``__init__`` re-exports (``from ._make import attrib``), ``import pkg.mod as m; m.f()``,
``pkg.mod.f`` after ``import pkg.mod``, relative imports, class bases (and the methods a
class reaches through ``self`` on them), decorators and annotations. Star imports are followed
only ``MAX_STARS`` deep and never for a name the module defines or binds itself; cycles end
at a name already being resolved. A chain that leads nowhere in the repository (the standard
library, a dependency) is left out.

The planner ranks the defining modules for read scopes (``planner.assist``), ``plan.validate``
checks them for stale reads, and the assembler shows their signatures (``context.lean``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import NamedTuple

from .parsed import python_module
from .pyrefs import Binding, ModuleRefs

__all__ = ["MAX_STARS", "Definition", "References", "Use", "module_index"]

MAX_STARS = 2  # star imports followed in a row before a name counts as not found
_AMBIGUOUS = 3  # a dotted module name found in more places than this is not followed
_MAX_DEPTH = 12  # re-export hops before giving up (a chain this long is a cycle in disguise)
_MAX_BASES = 4  # base classes climbed for a ``self`` attribute


class Definition(NamedTuple):
    """Where a name is defined: the file, the qualified name (``""`` for the module itself,
    ``Class.method`` for a member) and its line (0 for a module)."""

    path: str
    name: str
    line: int


class Use(NamedTuple):
    """One name ``user`` uses (``times`` over) and the definition it resolves to."""

    user: str
    definition: Definition
    times: int


class _Module(NamedTuple):
    path: str
    dotted: str


def module_index(files: Iterable[str]) -> dict[str, list[str]]:
    """Dotted module names -> Python files that may define them.

    Each file gets its full path name (``src.pkg.mod``) and its name from the top of its
    package chain (``pkg.mod`` when ``src/`` has no ``__init__.py``); a leading ``src/`` or
    ``lib/`` is also dropped, which covers namespace-package layouts.
    """
    py = sorted(f for f in files if f.endswith((".py", ".pyi")))
    packages = {f.rpartition("/")[0] for f in py if f.rpartition("/")[2] == "__init__.py"}
    index: dict[str, list[str]] = defaultdict(list)
    for f in py:
        directory, _, name = f.rpartition("/")
        dirs = directory.split("/") if directory else []
        stem = name.rpartition(".")[0]
        parts = dirs if stem == "__init__" else [*dirs, stem]
        names = {".".join(parts)}
        top = len(dirs)
        while top > 0 and "/".join(dirs[:top]) in packages:
            top -= 1
        names.add(".".join(parts[top:]))
        if parts and parts[0] in ("src", "lib"):
            names.add(".".join(parts[1:]))
        for module in names:
            if module and f not in index[module]:
                index[module].append(f)
    return dict(index)


class References:
    """Resolves the names files use, reading each file at most once (``read`` may return None
    for a file that cannot be read: its names then lead nowhere).

    ``facts``: a cache of each path's facts to share with other ``References`` over the same
    texts (every node's first prompt at one commit: context/file_facts.py); each one still
    sees only its own ``files``."""

    def __init__(
        self,
        files: Sequence[str],
        read: Callable[[str], str | None],
        index: Mapping[str, Sequence[str]] | None = None,
        facts: dict[str, ModuleRefs | None] | None = None,
    ) -> None:
        self._files = set(files)
        self._read = read
        self._index = index if index is not None else module_index(files)
        self._facts: dict[str, ModuleRefs | None] = {} if facts is None else facts

    def facts(self, path: str) -> ModuleRefs | None:
        if path not in self._files or not path.endswith(".py"):
            return None
        if path not in self._facts:
            text = self._read(path)
            # parsed once per (text, path) in this process, with the file's outline and
            # imports (outline/parsed.py): validate --repo reads the same files for its
            # reference warnings and for every node's first prompt (issue 29, item 3)
            self._facts[path] = python_module(text, path).refs if text is not None else None
        return self._facts[path]

    def module(self, dotted: str) -> _Module | None:
        found = self._index.get(dotted, ())
        if not 0 < len(found) <= _AMBIGUOUS:
            return None
        return _Module(found[0], dotted)

    def uses(self, path: str) -> list[Use]:
        """Every name ``path`` uses that another file in the repository defines."""
        facts = self.facts(path)
        if facts is None:
            return []
        counts: dict[Definition, int] = defaultdict(int)
        for chain, n in facts.uses.items():
            found = self.resolve_chain(path, chain)
            if found is not None and found.path != path:
                counts[found] += n
        for cls, attrs in facts.self_uses.items():
            for attr in sorted(attrs):
                inherited = self._inherited(path, cls, attr, set())
                if inherited is not None and inherited.path != path:
                    counts[inherited] += 1
        return [Use(path, d, n) for d, n in sorted(counts.items())]

    def resolve_chain(self, path: str, chain: Sequence[str]) -> Definition | None:
        """The definition a dotted ``chain`` used in ``path`` names, as deep as it resolves."""
        target = self._name(path, chain[0], set(), 0)
        for attr in chain[1:]:
            if isinstance(target, _Module):
                target = self._attribute(target, attr, set(), 0)
            elif target is not None and target.name and "." not in target.name:
                member = self._member(target.path, target.name, attr)
                return member or target
            else:
                break
        if isinstance(target, _Module):
            return Definition(target.path, "", 0)
        return target

    def _name(
        self, path: str, name: str, seen: set[tuple[str, str]], stars: int
    ) -> Definition | _Module | None:
        """What ``name`` means at the top of ``path``: defined there, bound by an import, or
        found through a star import."""
        if (path, name) in seen or len(seen) > _MAX_DEPTH:
            return None  # a cycle of re-exports, or a chain too long to be real
        seen.add((path, name))
        facts = self.facts(path)
        if facts is None:
            return None
        if name in facts.defined:
            return Definition(path, name, facts.defined[name])
        binding = facts.bindings.get(name)
        if binding is not None:
            return self._binding(binding, seen, stars)
        if stars >= MAX_STARS:
            return None
        for base in facts.stars:
            module = self.module(base)
            found = self._name(module.path, name, seen, stars + 1) if module else None
            if found is not None:
                return found
        return None

    def _binding(
        self, binding: Binding, seen: set[tuple[str, str]], stars: int
    ) -> Definition | _Module | None:
        if not binding.attr:
            return self.module(binding.module)
        module = self.module(binding.module)
        if module is None:
            return self.module(f"{binding.module}.{binding.attr}")
        return self._attribute(module, binding.attr, seen, stars)

    def _attribute(
        self, module: _Module, attr: str, seen: set[tuple[str, str]], stars: int
    ) -> Definition | _Module | None:
        """``module.attr``: a name the module defines or re-exports, else its submodule."""
        found = self._name(module.path, attr, seen, stars)
        if found is not None:
            return found
        return self.module(f"{module.dotted}.{attr}")

    def _member(self, path: str, cls: str, attr: str) -> Definition | None:
        facts = self.facts(path)
        members = facts.members.get(cls, {}) if facts is not None else {}
        if attr in members:
            return Definition(path, f"{cls}.{attr}", members[attr])
        return self._inherited(path, cls, attr, set())

    def _inherited(
        self, path: str, cls: str, attr: str, seen: set[tuple[str, str]]
    ) -> Definition | None:
        """``attr`` as a member of one of ``cls``'s base classes (in ``path``), climbing up."""
        facts = self.facts(path)
        if facts is None or (path, cls) in seen or len(seen) >= _MAX_BASES:
            return None
        seen.add((path, cls))
        for base in facts.bases.get(cls, ()):
            found = self.resolve_chain(path, base)
            if found is None or not found.name or "." in found.name:
                continue
            base_facts = self.facts(found.path)
            members = base_facts.members.get(found.name, {}) if base_facts else {}
            if attr in members:
                return Definition(found.path, f"{found.name}.{attr}", members[attr])
            deeper = self._inherited(found.path, found.name, attr, seen)
            if deeper is not None:
                return deeper
        return None
