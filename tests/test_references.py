"""Names resolved to their defining modules (outline/references.py): one test per case of
issue 27 (re-export chains, aliased module imports, relative imports, star imports bounded,
cycles, class bases, decorators, annotations), and read scopes grown by them."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

from anti_sprawl.outline import pyrefs
from anti_sprawl.outline.parsed import python_module
from anti_sprawl.outline.pyfacts import scan_python
from anti_sprawl.outline.references import Definition, References, module_index
from anti_sprawl.plan.model import Plan
from anti_sprawl.plan.validate import validate
from anti_sprawl.planner.assist import expand_read_scopes
from anti_sprawl.planner.reference_scope import ranked_references

from .conftest import node, plan_data


def refs_of(sources: dict[str, str]) -> References:
    return References(sorted(sources), sources.get)


def used(sources: dict[str, str], path: str) -> dict[Definition, int]:
    return {u.definition: u.times for u in refs_of(sources).uses(path)}


def test_a_re_export_chain_leads_to_the_defining_module() -> None:
    sources = {
        "src/pkg/__init__.py": "from .api import attrib, Thing\n",
        "src/pkg/api.py": "from ._make import attrib\nfrom ._things import *\n",
        "src/pkg/_make.py": "def attrib(default=None):\n    return default\n",
        "src/pkg/_things.py": "class Thing:\n    size = 1\n",
        "src/user.py": "from pkg import attrib, Thing\n\nx = attrib(1)\ny = attrib(2)\nz = Thing\n",
    }
    assert used(sources, "src/user.py") == {
        Definition("src/pkg/_make.py", "attrib", 1): 2,
        Definition("src/pkg/_things.py", "Thing", 1): 1,
    }


def test_aliased_and_dotted_module_imports_resolve_their_attributes() -> None:
    sources = {
        "pkg/__init__.py": "",
        "pkg/mod.py": "LIMIT = 3\n\n\nclass Box:\n    def open(self): ...\n\n\ndef f(): ...\n",
        "a.py": "import pkg.mod as m\n\nm.f()\nm.Box.open\n",
        "b.py": "import pkg.mod\n\npkg.mod.LIMIT\n",
        "c.py": "from pkg import mod\n\nmod.f()\n",
    }
    assert used(sources, "a.py") == {
        Definition("pkg/mod.py", "f", 8): 1,
        Definition("pkg/mod.py", "Box.open", 5): 1,
    }
    assert used(sources, "b.py") == {Definition("pkg/mod.py", "LIMIT", 1): 1}
    assert used(sources, "c.py") == {Definition("pkg/mod.py", "f", 8): 1}


def test_relative_imports_resolve_against_the_package() -> None:
    sources = {
        "src/pkg/__init__.py": "VERSION = 1\n",
        "src/pkg/sub/__init__.py": "",
        "src/pkg/sub/x.py": "def helper(): ...\n",
        "src/pkg/sub/y.py": "from .x import helper\nfrom .. import VERSION\n\nhelper(VERSION)\n",
    }
    assert used(sources, "src/pkg/sub/y.py") == {
        Definition("src/pkg/sub/x.py", "helper", 1): 1,
        Definition("src/pkg/__init__.py", "VERSION", 1): 1,
    }


def test_star_imports_are_followed_only_two_deep() -> None:
    sources = {
        "p/__init__.py": "",
        "p/one.py": "from p.two import *\n",
        "p/two.py": "from p.three import *\nNEAR = 1\n",
        "p/three.py": "FAR = 2\n",
        "user.py": "from p.one import *\n\nNEAR, FAR\n",
    }
    # user -> one -> two finds NEAR; FAR would take a third star import: not followed
    assert used(sources, "user.py") == {Definition("p/two.py", "NEAR", 2): 1}


def test_a_cycle_of_re_exports_ends_without_a_definition() -> None:
    sources = {
        "a.py": "from b import thing\n",
        "b.py": "from a import thing\n",
        "c.py": "from a import thing\n\nthing()\n",
    }
    assert used(sources, "c.py") == {}


def test_bases_decorators_annotations_and_inherited_self_attributes() -> None:
    sources = {
        "lib/__init__.py": "",
        "lib/base.py": "class Base:\n    def helper(self): ...\n",
        "lib/deco.py": "def register(f):\n    return f\n",
        "lib/types.py": "class Config: ...\nclass Later: ...\n",
        "app.py": (
            "from lib.base import Base\nfrom lib.deco import register\n"
            "from lib import types\n\n\n"
            "class Child(Base):\n"
            "    @register\n"
            "    def run(self, config: types.Config) -> 'types.Later':\n"
            "        return self.helper()\n"
        ),
    }
    assert used(sources, "app.py") == {
        Definition("lib/base.py", "Base", 1): 1,
        Definition("lib/base.py", "Base.helper", 2): 1,
        Definition("lib/deco.py", "register", 1): 1,
        Definition("lib/types.py", "Config", 1): 1,
        Definition("lib/types.py", "Later", 2): 1,
    }


def test_names_from_outside_the_repository_and_unparsable_files_lead_nowhere() -> None:
    sources = {"a.py": "import os\nfrom json import dumps\nos.path.join(dumps(1))\n", "b.py": "("}
    assert used(sources, "a.py") == {}
    assert used(sources, "b.py") == {}


# -- read scopes -----------------------------------------------------------------------------

SOURCES = {
    "src/pkg/__init__.py": "from ._make import attrib\nfrom ._other import unused\n",
    "src/pkg/_make.py": "from ._deep import base\n\n\ndef attrib():\n    return base()\n",
    "src/pkg/_deep.py": "def base(): ...\n",
    "src/pkg/_other.py": "def unused(): ...\n",
    "src/pkg/validators.py": "from pkg import attrib\n\n\ndef check():\n    return attrib()\n",
}
FILES = sorted(SOURCES)


def test_read_scope_adds_the_defining_module_behind_a_re_export() -> None:
    p = Plan.model_validate(plan_data(node("v", write_scope=["src/pkg/validators.py"])))
    expanded, warnings = expand_read_scopes(p, FILES, SOURCES.get)
    # the import (the package __init__), then what the used name resolves to, then its use;
    # never _other.py, which the __init__ imports but the task's file does not use
    assert expanded.tasks[0].read_scope == [
        "src/pkg/__init__.py",
        "src/pkg/_make.py",
        "src/pkg/_deep.py",
    ]
    assert warnings == []


def test_referenced_modules_are_ranked_and_cut_to_the_share() -> None:
    refs = References(FILES, SOURCES.get)
    everything = ranked_references(refs, ["src/pkg/validators.py"], "", 10_000, lambda _: 10)
    assert everything == ["src/pkg/_make.py", "src/pkg/_deep.py"]
    assert ranked_references(refs, ["src/pkg/validators.py"], "", 15, lambda _: 10) == [
        "src/pkg/_make.py"
    ]


def test_a_referenced_module_another_unordered_task_writes_is_not_added() -> None:
    p = Plan.model_validate(
        plan_data(
            node("v", write_scope=["src/pkg/validators.py"]),
            node("m", write_scope=["src/pkg/_make.py"]),
        )
    )
    expanded, warnings = expand_read_scopes(p, FILES, SOURCES.get)
    assert "src/pkg/_make.py" not in expanded.tasks[0].read_scope
    assert warnings == [
        "task 'v': not adding referenced module src/pkg/_make.py to its read scope: task 'm' "
        "writes it and neither depends on the other"
    ]


# -- validation ------------------------------------------------------------------------------


def test_validate_warns_of_stale_references_and_uncovered_definitions(
    make_repo: Callable[[dict[str, str]], Path],
) -> None:
    repo = make_repo(SOURCES)
    plan = Plan.model_validate(
        plan_data(
            node("v", write_scope=["src/pkg/validators.py"], read_scope=["src/pkg/__init__.py"]),
            node("d", write_scope=["src/pkg/_deep.py"]),
        )
    )
    report = validate(plan, repo)
    assert report.valid
    # validators.py uses attrib, which the package __init__ re-exports from _make.py: the read
    # scope names only the __init__, so the worker could not read the definition
    assert [(w.code, w.paths) for w in report.warnings] == [("read_coverage", ["src/pkg/_make.py"])]
    ordered = plan.model_copy(
        update={"tasks": [t.model_copy(update={"read_scope": ["src/pkg/"]}) for t in plan.tasks]}
    )
    # with _make.py readable, a task writing it unordered against v is a stale reference
    # (and m's own _make.py uses _deep.py, which d writes)
    writer = node("m", write_scope=["src/pkg/_make.py"])
    stale = Plan.model_validate(
        {**ordered.model_dump(), "tasks": [*ordered.model_dump()["tasks"], writer]}
    )
    assert [(w.code, w.tasks) for w in validate(stale, repo).warnings] == [
        ("stale_reference", ["v", "m"]),
        ("stale_reference", ["m", "d"]),
    ]


def test_the_imports_read_with_the_names_are_the_statement_scans() -> None:
    """``python_module``'s imports come from the walk that reads the names a module uses
    (outline/pyrefs.py); they are the same names ``scan_python`` finds by statement, on every
    module of this repository and on a module with imports nested in blocks and handlers."""
    root = Path(__file__).resolve().parents[1]
    nested = (
        "import a.b as ab, c\nfrom . import sibling\nfrom ..up import (one, two as deux)\n"
        "from .pkg.mod import *\ntry:\n    import x\nexcept ImportError:\n    from y import z\n"
        "def f():\n    import inner.mod\n    class K:\n        from w import v\n"
        "match q:\n    case 1:\n        import m1\n"
    )
    sources = {"pkg/sub/mod.py": nested} | {
        p.relative_to(root).as_posix(): p.read_text(encoding="utf-8")
        for d in ("anti_sprawl", "tests")
        for p in (root / d).rglob("*.py")
    }
    for path, text in sources.items():
        facts = scan_python(text, path)
        assert facts is not None, path
        assert set(python_module(text, path).imports) == set(facts.imports), path
    assert set(python_module(nested, "pkg/sub/mod.py").imports) >= {"inner.mod", "w.v", "m1"}


def test_the_names_walk_meets_every_node_but_contexts_and_operators() -> None:
    """``outline.pyrefs._walk`` skips the fields that hold no node and adds a list of nodes
    whole: on every module of this repository (tests and benchmarks too) it yields
    ``ast.walk``'s nodes, in its order, less contexts and operators."""
    root = Path(__file__).resolve().parents[1]
    leaves = (ast.expr_context, ast.operator, ast.unaryop, ast.boolop, ast.cmpop)
    # the list fields that may hold a non-node (None, a name) are read item by item
    mixed = "global g\nd = {**m, 'k': f(x)}\ndef f(*, a, b=c.d, **kw):\n    nonlocal n\n"
    ours = [p for d in ("anti_sprawl", "tests", "benchmarks") for p in (root / d).rglob("*.py")]
    texts = [(path, path.read_text(encoding="utf-8")) for path in sorted(ours)]
    for path, text in [*texts, (Path("mixed.py"), mixed)]:
        tree = ast.parse(text)
        expected = [n for n in ast.walk(tree) if not isinstance(n, leaves)]
        assert pyrefs._walk(tree)[0] == expected, path


def test_reference_checks_read_a_file_as_read_text_does(tmp_path: Path) -> None:
    """plan/reference_checks.py reads each file's bytes and decodes them at once (issue 29,
    item 3): the text is what ``Path.read_text(encoding="utf-8")`` gives, universal newlines
    included, and what it cannot read (a symlink, a file over the cap, bad UTF-8, a
    directory) is None."""
    from anti_sprawl.plan import reference_checks

    bodies = {
        "crlf.py": b"a = 1\r\nb = 2\r\n",
        "cr.py": b"a = 1\rb = 2\r",
        "mixed.py": b"a = 1\r\n\rb = '\xc3\xa9'\n\r\n",
        "bom.py": b"\xef\xbb\xbfx = 1\n",
        "plain.py": b"x = 1\n",
        "empty.py": b"",
    }
    for name, data in bodies.items():
        (tmp_path / name).write_bytes(data)
        assert reference_checks._read(tmp_path, name) == (tmp_path / name).read_text("utf-8")
    (tmp_path / "bad.py").write_bytes(b"x = '\xff'\n")
    (tmp_path / "big.py").write_bytes(b"#" * (reference_checks._MAX_BYTES + 1))
    (tmp_path / "link.py").symlink_to(tmp_path / "plain.py")
    (tmp_path / "pkg.py").mkdir()
    for name in ("bad.py", "big.py", "link.py", "pkg.py", "missing.py"):
        assert reference_checks._read(tmp_path, name) is None


def test_classes_without_bases_or_self_attributes_have_no_entries() -> None:
    """A module's facts keep no empty bases or ``self`` entries (outline/pyrefs.py: fewer
    objects in the parse cache); the first class of a name still decides its bases, and a
    method reached through an inherited ``self`` still resolves."""
    source = (
        "from pkg.base import Base\n\n"
        "class Plain:\n    X = 1\n\n"
        "class Child(Base):\n    def go(self):\n        return self.run()\n\n"
        "class Twice:\n    pass\n\n"
        "class Twice(Base):\n    pass\n"
    )
    refs = pyrefs.module_refs(source, "pkg/mod.py")
    assert refs is not None
    assert refs.bases == {"Child": [("Base",)]}  # Twice's first definition has no bases
    assert refs.self_uses == {"Child": {"run"}}
    texts = {
        "pkg/base.py": "class Base:\n    def run(self):\n        return 1\n",
        "pkg/mod.py": source,
    }
    found = {u.definition for u in References(sorted(texts), texts.get).uses("pkg/mod.py")}
    assert found == {Definition("pkg/base.py", "Base", 1), Definition("pkg/base.py", "Base.run", 2)}


def test_the_files_a_write_file_imports_are_found_in_the_shared_module_index() -> None:
    """A node's assembly builds one ``module_index`` of its scoped files for the names its
    write files use and for the files they import (issue 29, item 3): ``imported_by`` finds
    the same read files in it as in an index of the reads alone, also when a write file is a
    package's ``__init__.py`` and so names the read files otherwise (``sub.b`` for ``b``,
    ``pkg.a`` alone for ``a``)."""
    from anti_sprawl.context.used import imported_by

    reads = {"pkg/a.py": "", "pkg/sub/b.py": "", "src/c.py": "", "lib/pkg/d.py": ""}
    cases = [
        {"pkg/w.py": "from pkg import a\nfrom pkg.sub import b\nimport c\nimport pkg.d\n"},
        {"pkg/sub/__init__.py": "import b\n"},
        {"pkg/__init__.py": "", "pkg/w.py": "import a\n"},
    ]
    for writes in cases:
        alone = imported_by(writes, reads)
        assert alone, writes
        assert imported_by(writes, reads, module_index([*reads, *writes])) == alone
