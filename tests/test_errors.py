"""The error tree drawn in ``errors.py`` is the real one: every exception class of the package
appears there under its real parent, in its real module, with the exit code its root implies.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from dataclasses import dataclass

import pytest

import anti_sprawl
from anti_sprawl import errors
from anti_sprawl.errors import (
    AntiSprawlError,
    InternalError,
    Interrupted,
    RunError,
    StorageError,
    ToolError,
    UsageError,
    at_boundary,
)

_LINE = re.compile(r"^(?P<indent>[ │├└─]*)(?P<name>_?[A-Z]\w*)(?:\s+(?P<module>[a-z_.]+))?")


@dataclass(frozen=True)
class Drawn:
    name: str
    parent: str
    module: str


def drawn_tree(doc: str) -> dict[str, Drawn]:
    """The classes of the docstring's drawing: name -> (parent, module). Each level of the
    drawing indents the name by four columns; a root's parent is ``Exception``."""
    lines: list[str] = []
    for line in doc.split("::", 1)[1].splitlines():
        if line.strip() and not line.startswith("    "):
            break  # the indented block ends at the next paragraph of prose
        if line.strip():
            lines.append(line[4:])
    out: dict[str, Drawn] = {}
    stack: list[str] = []
    for line in lines:
        m = _LINE.match(line)
        assert m, f"not a line of the drawing: {line!r}"
        depth = len(m["indent"]) // 4
        del stack[depth:]
        name = m["name"]
        parent = stack[-1] if stack else "Exception"
        stack.append(name)
        if name != "Exception":
            assert m["module"], f"{name} names no module"
            out[name] = Drawn(name, parent, "anti_sprawl." + m["module"])
    return out


def real_classes() -> dict[str, type[BaseException]]:
    """Every exception class defined in the package (all modules imported)."""
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(anti_sprawl.__path__, "anti_sprawl."):
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and obj.__module__.startswith("anti_sprawl.")
            ):
                assert found.get(obj.__name__, obj) is obj, f"two classes named {obj.__name__}"
                found[obj.__name__] = obj
    return found


def test_the_drawing_names_every_exception_class_and_only_those() -> None:
    drawn, real = drawn_tree(errors.__doc__ or ""), real_classes()
    assert len(real) > 20
    assert sorted(set(real) - set(drawn)) == [], "classes missing from the drawing"
    assert sorted(set(drawn) - set(real)) == [], "drawn classes that do not exist"


def test_each_drawn_class_has_its_real_parent_and_module() -> None:
    real = real_classes()
    for name, d in drawn_tree(errors.__doc__ or "").items():
        cls = real[name]
        assert [b.__name__ for b in cls.__bases__] == [d.parent], name
        assert cls.__module__ == d.module, name


def test_the_parser_reads_depth_parent_and_module() -> None:
    doc = """x::

    Root                 errors   a root
    ├── Child            errors   under the root
    │   └── Grandchild   agent.loop  under the child
    └── Second           errors   back under the root
    """
    tree = drawn_tree(doc)
    assert tree["Grandchild"] == Drawn("Grandchild", "Child", "anti_sprawl.agent.loop")
    assert tree["Second"].parent == "Root"
    assert tree["Root"].parent == "Exception"


@pytest.mark.parametrize("name", sorted(real_classes()))
def test_exit_codes_follow_the_roots(name: str) -> None:
    cls = real_classes()[name]
    if issubclass(cls, UsageError):
        assert cls.exit_code == 2
    elif issubclass(cls, RunError):
        assert cls.exit_code == 1
    elif issubclass(cls, Interrupted):
        assert cls.exit_code == 130
    elif cls is AntiSprawlError:
        assert cls.exit_code == 1  # the root: a failure unless a subclass says otherwise
    else:
        # Tool errors and module-private signals never reach the CLI on their own.
        assert not issubclass(cls, AntiSprawlError)


def test_tool_errors_are_never_command_errors() -> None:
    assert not issubclass(ToolError, AntiSprawlError)
    assert not issubclass(AntiSprawlError, ToolError)


def test_at_boundary_maps_foreign_exceptions_onto_the_tree() -> None:
    full = at_boundary(OSError(28, "No space left on device", "/x/run.json"))
    assert isinstance(full, StorageError)
    assert "No space left on device: /x/run.json" in str(full)
    assert type(at_boundary(MemoryError())) is RunError
    bug = at_boundary(KeyError("task"))
    assert isinstance(bug, InternalError)
    assert "KeyError" in str(bug)
    mine = UsageError("bad flag")
    assert at_boundary(mine) is mine
