"""Which changes hold no work: text only taken away or re-spaced (git/substance.py).

Pure text cases first, then the check on a real worktree of a real repository.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from anti_sprawl.git.audit import changes
from anti_sprawl.git.substance import goal_allows_removal, only_removes, text_only_removes
from anti_sprawl.git.workspace import Workspace

from . import e2e_fixture as fx

OLD = 'def add(a, b):\n    """Sum."""\n\n    return a + b\n\n\ndef test_add():\n    assert add(1, 2) == 3\n'


@pytest.mark.parametrize(
    ("new", "removes"),
    [
        ("def add(a, b):\n    return a + b\n", True),  # the docstring and blank lines gone
        ("def add(a,b):\n  return a+b", True),  # re-spaced, no final newline
        ("def test_add():\n    assert add(\n        1, 2\n    ) == 3\n", True),  # reflowed
        ("", True),
        (OLD + "\ndef subtract(a, b):\n    return a - b\n", False),
        ("def test_add():\n    assert add(1, 2) == 3\ndef add(a, b):\n    return a + b\n", False),
        (OLD.replace("a + b", "a - b"), False),
        ("def add(a, b):\n    return a + b  # sum\n", False),
    ],
)
def test_text_only_removes(new: str, removes: bool) -> None:
    assert text_only_removes(OLD, new) is removes


@pytest.mark.parametrize(
    ("goal", "allows"),
    [
        ("Remove the unused helper", True),
        ("Delete deprecated code paths in api.py", True),
        ("Reformat util.py with black", True),
        ("Clean up imports", True),
        ("Add subtract(a, b) to calc.py", False),
        ("Implement the retry loop", False),
    ],
)
def test_goal_allows_removal(goal: str, allows: bool) -> None:
    assert goal_allows_removal(goal) is allows


@pytest.fixture
def worktree(tmp_path: Path) -> Iterator[Workspace]:
    repo = fx.make_repo(tmp_path, {"calc.py": OLD, "other.py": "X = 1\n", "blob.bin": "a\0b"})
    with Workspace.create(repo, tmp_path / "worktrees", "judge", "HEAD") as ws:
        yield ws


def edit(ws: Workspace, files: dict[str, str | None]) -> bool:
    for rel, text in files.items():
        if text is None:
            (ws.path / rel).unlink()
        else:
            (ws.path / rel).write_text(text)
    return only_removes(ws, changes(ws))


def test_an_edit_that_only_removes_is_found(worktree: Workspace) -> None:
    assert edit(worktree, {"calc.py": "def add(a, b):\n    return a + b\n"})


def test_one_file_with_new_text_is_a_change(worktree: Workspace) -> None:
    assert not edit(
        worktree, {"calc.py": "def add(a, b):\n    return a + b\n", "other.py": "X = 2\n"}
    )


def test_a_deleted_file_is_a_change(worktree: Workspace) -> None:
    assert not edit(worktree, {"other.py": None})


def test_a_new_file_is_a_change(worktree: Workspace) -> None:
    assert not edit(worktree, {"new.py": ""})


def test_a_binary_file_is_not_judged(worktree: Workspace) -> None:
    assert not edit(worktree, {"blob.bin": "a"})


def test_no_change_is_not_a_removal(worktree: Workspace) -> None:
    assert not edit(worktree, {})
