"""git/patch_definitions.py reads the top-level definitions a real ``git diff`` adds."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from anti_sprawl.git.patch_definitions import MAX_DEFINITIONS, patch_definitions
from anti_sprawl.git.workspace import diff

from .conftest import GIT_ENV


def diff_of(tmp_path: Path, before: dict[str, str], after: dict[str, str]) -> str:
    """The patch of a real commit from ``before`` to ``after`` (path -> text)."""
    env = {**os.environ, **GIT_ENV}

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", *args], cwd=tmp_path, env=env, check=True, capture_output=True
        )
        return done.stdout.decode()

    git("init", "-q", "-b", "main")
    for files in (before, after):
        for path, text in files.items():
            (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / path).write_text(text)
        git("add", "-A")
        git("commit", "-q", "--allow-empty", "-m", "step")
    return git("diff", "HEAD~1", "HEAD")


def test_new_and_changed_top_level_definitions_are_listed_and_nothing_else(
    tmp_path: Path,
) -> None:
    calc = "def add(a, b):\n    return a + b\n\n\ndef gone():\n    pass\n"
    before = {"calc.py": calc, "notes.txt": "x\n", "pkg/old.py": "X = 1\n"}
    after = {
        "calc.py": (
            "def add(a, b, c=0):\n    return a + b + c\n\n\n"
            "def subtract(a, b):\n    return a - b\n\n\n"
            "class Stack(list):\n    def push(self, item):\n        self.append(item)\n\n\n"
            "def long(\n    first,\n    second,\n):\n    return first\n"
        ),
        "notes.txt": "def not_code(x):\n",
        "pkg/old.py": "X = 1\n\n\nasync def fetch(url):\n    return url\n",
    }
    assert patch_definitions(diff_of(tmp_path, before, after)) == [
        "calc.py: add(a, b, c=0)",
        "calc.py: subtract(a, b)",
        "calc.py: class Stack",
        "calc.py: long(...)",
        "pkg/old.py: fetch(url)",
    ]


def test_a_long_list_is_cut_with_a_count(tmp_path: Path) -> None:
    many = "".join(f"def f{n}():\n    return {n}\n\n\n" for n in range(MAX_DEFINITIONS + 5))
    listed = patch_definitions(diff_of(tmp_path, {"a.py": ""}, {"a.py": many}))
    assert listed[:2] == ["a.py: f0()", "a.py: f1()"]
    assert listed[-1] == "... and 5 more"
    assert len(listed) == MAX_DEFINITIONS + 1


def test_a_patch_that_only_removes_or_changes_bodies_lists_nothing(tmp_path: Path) -> None:
    before = {"calc.py": "def add(a, b):\n    return a + b\n\n\ndef gone():\n    pass\n"}
    after = {"calc.py": "def add(a, b):\n    return b + a\n"}
    assert patch_definitions(diff_of(tmp_path, before, after)) == []


def test_our_patches_keep_git_s_prefixes_whatever_the_user_configured(tmp_path: Path) -> None:
    """diff.noprefix (or diff.mnemonicPrefix) in the user's config would drop the ``b/`` the
    reader looks for; the reducer's patches name both prefixes themselves."""
    diff_of(tmp_path, {"a.py": ""}, {"a.py": "def f(x):\n    return x\n"})
    env = {**os.environ, **GIT_ENV}
    for key in ("diff.noprefix", "diff.mnemonicPrefix"):
        subprocess.run(["git", "config", key, "true"], cwd=tmp_path, env=env, check=True)
    patch = diff(tmp_path, "HEAD~1", "HEAD")
    assert "\n+++ b/a.py\n" in patch
    assert patch_definitions(patch) == ["a.py: f(x)"]
