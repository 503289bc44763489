"""A small repository, plan and script for end-to-end tests of execute/resume."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from .conftest import GIT_ENV

FILES = {
    "pkg/__init__.py": "",
    "pkg/base.py": "def base() -> int:\n    return 1\n",
    "pkg/util.py": "def helper() -> int:\n    return 2\n",
    "README.md": "# demo\n",
}
TEST_CMD = [sys.executable, "-c", "import pkg.base; print('ok')"]


def node(task_id: str, deps: list[str], writes: str, content: str, **kw: Any) -> dict[str, Any]:
    return {
        "task_id": task_id,
        "name": f"Write {writes}",
        "goal": f"Create {writes}",
        "dependencies": deps,
        "read_scope": ["pkg/base.py"],
        "write_scope": [writes],
        "token_budget": 40_000,
        "max_tool_calls": 10,
        **kw,
    }


def plan(**overrides: Any) -> dict[str, Any]:
    tasks = [
        node("a", [], "pkg/a.py", "A = 1\n"),
        node("b", [], "pkg/b.py", "B = 2\n"),
        node("c", ["a", "b"], "pkg/c.py", "C = 3\n"),
    ]
    data: dict[str, Any] = {
        "plan_id": "demo",
        "requirement": "Add modules a, b and c",
        "test_command": TEST_CMD,
        "tasks": tasks,
    }
    data.update(overrides)
    return data


def worker_turns(path: str, content: str) -> list[Any]:
    return [
        {"tool": "read_file", "args": {"path": "pkg/base.py"}},
        {"tool": "write_file", "args": {"path": path, "content": content}},
        {"tool": "run_tests", "args": {}},
        {"tool": "finish", "args": {"summary": f"created {path}", "interfaces": f"{path}"}},
    ]


def script(**workers: list[Any]) -> dict[str, Any]:
    base = {
        "a": worker_turns("pkg/a.py", "A = 1\n"),
        "b": worker_turns("pkg/b.py", "B = 2\n"),
        "c": worker_turns("pkg/c.py", "C = 3\n"),
    }
    base.update(workers)
    return {"workers": base}


def make_repo(root: Path, files: dict[str, str] | None = None) -> Path:
    repo = root / "repo"
    for rel, text in (FILES if files is None else files).items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    env = {**os.environ, **GIT_ENV}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "initial"]):
        subprocess.run(["git", *args], cwd=repo, check=True, env=env)
    return repo


def write_inputs(
    root: Path, plan_data: dict[str, Any], script_data: dict[str, Any]
) -> tuple[Path, Path]:
    plan_path, script_path = root / "plan.yaml", root / "script.yaml"
    plan_path.write_text(yaml.safe_dump(plan_data))
    script_path.write_text(yaml.safe_dump(script_data))
    return plan_path, script_path


def git(repo: Path, *args: str) -> str:
    out = subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True)
    return out.stdout.strip()


def checkout_fingerprint(repo: Path) -> dict[str, str]:
    """Hashes of every file of the user's checkout (worktree + .git index/HEAD), minus run data."""
    out: dict[str, str] = {}
    for path in sorted(repo.rglob("*")):
        rel = path.relative_to(repo).as_posix()
        if rel.startswith(".anti-sprawl") or not path.is_file():
            continue
        if rel.startswith(".git/") and rel not in (".git/HEAD", ".git/index", ".git/config"):
            continue
        out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    out["status"] = git(repo, "status", "--porcelain", "--untracked-files=all")
    out["head"] = git(repo, "rev-parse", "HEAD")
    out["branch"] = git(repo, "branch", "--show-current")
    return out


def branch_tree(repo: Path, branch: str = "anti-sprawl/demo") -> dict[str, str]:
    listing = git(repo, "ls-tree", "-r", branch)
    return {line.split("\t")[1]: line.split()[2] for line in listing.splitlines()}


def task_trailers(repo: Path, branch: str = "anti-sprawl/demo") -> list[str]:
    text = git(repo, "log", "--format=%(trailers:key=Anti-Sprawl-Task,valueonly)", branch)
    return [line.strip() for line in text.splitlines() if line.strip()]
