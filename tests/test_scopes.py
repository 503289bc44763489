from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anti_sprawl.fs.file_index import FileIndex
from anti_sprawl.fs.scopes import Scope, entry_problem, literal_prefix, may_overlap, normalize_entry


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("/etc/passwd", "absolute"),
        ("../x", ".."),
        ("src/../../x", ".."),
        ("src\\app", "backslash"),
        ("C:/x", "drive"),
        ("c:foo", "drive"),
        ("a\x00b", "NUL"),
        ("a\nb", "control"),
        (" src", "whitespace"),
        ("~/.ssh/id_rsa", "home"),
        (".git/hooks/pre-commit", ".git"),
        ("sub/.GIT/config", ".GIT"),
        (".anti-sprawl/plan.json", ".anti-sprawl"),
        ("./", "root"),
        ("x" * 300, "component"),
        ("a/" * 2100, "longer"),
    ],
)
def test_bad_entries_are_named(entry: str, reason: str) -> None:
    problem = entry_problem(entry)
    assert problem is not None
    assert reason.lower() in problem.lower()


@pytest.mark.parametrize("entry", ["src/app.py", "src/app/", "src/**/*.py", "**", "./src//a.py"])
def test_good_entries(entry: str) -> None:
    assert entry_problem(entry) is None


def test_normalize_keeps_directory_marker() -> None:
    assert normalize_entry("./src//app/./") == "src/app/"
    assert normalize_entry("src/a.py") == "src/a.py"


@pytest.mark.parametrize(
    ("entries", "path", "expected"),
    [
        (["src/app"], "src/app/x.py", True),
        (["src/app"], "src/app2/x.py", False),  # P1: component-wise, not string prefix
        (["src/app/"], "src/app_backup/x.py", False),
        (["docs/**"], "docs-private/a.md", False),
        (["src/*.py"], "src/a.py", True),
        (["src/*.py"], "src/sub/a.py", False),  # '*' never crosses '/'
        (["src/**/*.py"], "src/sub/deep/a.py", True),
        (["src/*.py"], "etc/x/src/a.py", False),  # anchored at the root, not right-anchored
        (["setup.py"], "pkg/setup.py", False),
        (["**"], "anything/at/all.txt", True),
        (["!secret"], "!secret", True),  # a leading '!' is literal, never a negation
    ],
)
def test_scope_matching(entries: list[str], path: str, expected: bool) -> None:
    assert Scope(entries).matches(path) is expected


def test_may_contain_directories() -> None:
    scope = Scope(["src/app/x.py", "docs/"])
    assert scope.may_contain("src")
    assert scope.may_contain("src/app")
    assert scope.may_contain("docs/deep")
    assert not scope.may_contain("src/other")
    assert not scope.may_contain("tests")


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("src/app/", "src/app/x.py", True),
        ("src/app", "src/app2", False),
        ("src/*.py", "src/*.txt", False),
        ("src/*.py", "src/a.*", True),
        ("src/**/test_*.py", "src/*.py", True),
        ("src/**", "docs/**", False),
        ("**/x.py", "a/b/x.py", True),
        ("a/*/c.py", "a/b/d.py", False),
        ("a/b?.py", "a/bc.py", True),
        ("a/[ab].py", "a/c.py", True),  # classes are over-approximated: sound, not exact
    ],
)
def test_may_overlap(a: str, b: str, expected: bool) -> None:
    assert may_overlap(a, b) is expected
    assert may_overlap(b, a) is expected


def test_literal_prefix() -> None:
    assert literal_prefix("src/app/*.py") == ("src", "app")
    assert literal_prefix("src/app/") == ("src", "app")
    assert literal_prefix("**/x") == ()


_seg = st.sampled_from(["a", "b", "ab", "x.py", "y.txt", "*", "*.py", "a*", "?", "**"])
_entry = st.lists(_seg, min_size=1, max_size=4).map("/".join)
_pseg = st.sampled_from(["a", "b", "ab", "x.py", "y.txt", "aa.py", "b.txt"])
_path = st.lists(_pseg, min_size=1, max_size=5).map("/".join)


@settings(max_examples=300, deadline=None)
@given(_entry, _entry, _path)
def test_overlap_is_sound_against_the_matcher(a: str, b: str, path: str) -> None:
    """If one concrete path is matched by both entries, may_overlap must say so."""
    if Scope([a]).matches(path) and Scope([b]).matches(path):
        assert may_overlap(a, b)


def test_a_file_index_matches_exactly_what_testing_every_file_gives() -> None:
    """fs/file_index.py tests only the files under an entry's literal prefix: the same answer
    as every file against the scope, for files, directories, globs and near-miss names."""
    files = [
        "a/b.py", "a/b.py/x", "a/bc.py", "a-b/c", "a/b/c/d.txt", "README.md", "docs/x.md",
        "src/pkg/__init__.py", "src/pkg/m.py", "src/pkgs/n.py", "x[1].py", "deep/a/b/c.md",
    ]  # fmt: skip
    index = FileIndex(files)
    for entries in (
        ["a/b.py"], ["a/"], ["a"], ["src/**/*.py"], ["**/*.md"], ["*.md"], ["a/b*"],
        ["src/pkg/"], ["src/pkg"], ["docs/x.md", "a/b/"], ["x[1].py"], ["deep/**"], ["nothing/"],
    ):  # fmt: skip
        scope = Scope(entries)
        assert index.matching(scope) == sorted(f for f in files if scope.matches(f)), entries
    assert len(index.matching(Scope(["**/*.md"]))) == 3  # the check above is not vacuous
