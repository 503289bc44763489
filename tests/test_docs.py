"""The docs and the code point at each other, and every pointer leads somewhere real.

``docs/architecture.md`` and ``docs/security.md`` name the tests that hold each guarantee;
code comments cite sections of those pages (``docs/architecture.md, guarantee 5``,
``docs/architecture.md, "TaskResult"``, ``docs/security.md P7``). A renamed test, a removed
section or a citation of a page outside the repository fails here.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "docs" / "architecture.md", ROOT / "docs" / "security.md"]
CODE = sorted(
    p
    for folder in ("anti_sprawl", "tests", "benchmarks")
    for p in (ROOT / folder).rglob("*.py")
    if p != Path(__file__).resolve()
)
_TEST_REF = re.compile(r"(tests/[\w/]+\.py)?::(test_\w+)")
_TEST_FILE = re.compile(r"tests/[\w/]+\.py")
_ARCH_CITE = re.compile(r'docs/architecture\.md(?:, (?:guarantee (\d+)|"([^"]+)"))?')
_SECURITY_CITE = re.compile(r"docs/security\.md([^\n]*)")
_SECURITY_ID = re.compile(r"\b(P\d+|F\d+|SL-\d+|PI-\d+)\b")
_OUTSIDE = ("ARCHITECTURE.md", "SECURITY.md", "../shared", "shared/design")
_LINK = re.compile(r"\]\(([^)#\s]*)(?:#([^)\s]+))?\)")


def _headings(path: Path) -> list[str]:
    return [ln.lstrip("#").strip() for ln in path.read_text().splitlines() if ln.startswith("#")]


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def _test_functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}


def _security_ids() -> set[str]:
    text = (ROOT / "docs" / "security.md").read_text()
    return set(re.findall(r"^\| (P\d+|F\d+|SL-\d+|PI-\d+) \|", text, re.MULTILINE))


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_test_a_doc_names_exists(doc: Path) -> None:
    missing: list[str] = []
    named = 0
    # (security.md's appendix quotes attacker text naming made-up files: not references)
    for file in _TEST_FILE.findall(doc.read_text().split("\n## Appendix")[0]):
        if not (ROOT / file).is_file():
            missing.append(file)
    current: str | None = None
    for file, name in _TEST_REF.findall(doc.read_text()):
        current = file or current  # "::name" continues the last file named
        assert current is not None, f"::{name} before any test file in {doc.name}"
        named += 1
        if (ROOT / current).is_file() and name not in _test_functions(ROOT / current):
            missing.append(f"{current}::{name}")
    assert missing == []
    assert named >= 20  # the page really names its tests


@pytest.mark.parametrize(
    "doc", [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"], ids=lambda p: p.name
)
def test_links_between_the_docs_resolve(doc: Path) -> None:
    broken: list[str] = []
    for target, anchor in _LINK.findall(doc.read_text()):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path = (doc.parent / target).resolve() if target else doc
        if not path.exists():
            broken.append(target)
        elif anchor and path.suffix == ".md" and anchor not in map(_slug, _headings(path)):
            broken.append(f"{target}#{anchor}")
    assert broken == []


def test_code_cites_only_pages_in_the_repository_and_only_real_sections() -> None:
    headings, ids = set(_headings(DOCS[0])), _security_ids()
    bad: list[str] = []
    cited = 0
    for path in CODE:
        text = path.read_text()
        where = str(path.relative_to(ROOT))
        bad += [f"{where}: cites {o}" for o in _OUTSIDE if o in text]
        bad += [f"{where}: {problem}" for problem in _architecture_cite_problems(text, headings)]
        bad += [f"{where}: {problem}" for problem in _security_cite_problems(text, ids)]
        cited += len(_ARCH_CITE.findall(text)) + len(_SECURITY_CITE.findall(text))
    assert bad == []
    assert cited >= 20


def _architecture_cite_problems(text: str, headings: set[str]) -> Iterator[str]:
    """Citations of docs/architecture.md that name no section, or one it does not have."""
    guarantees = {m.group(1) for h in headings if (m := re.match(r"(\d+)\. ", h))}
    for match in _ARCH_CITE.finditer(text):
        number, heading = match.groups()
        if number is None and heading is None:
            yield "docs/architecture.md without a section"
        elif number is not None and number not in guarantees:
            yield f"docs/architecture.md has no guarantee {number}"
        elif heading is not None and heading not in headings:
            yield f"docs/architecture.md has no section {heading!r}"


def _security_cite_problems(text: str, ids: set[str]) -> Iterator[str]:
    """Identifiers cited from docs/security.md that it does not define."""
    for rest in _SECURITY_CITE.findall(text):
        for ident in _SECURITY_ID.findall(rest):
            if ident not in ids:
                yield f"docs/security.md has no {ident}"
