"""Shared fixtures: plan builders and real temporary git repositories."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

GIT_ENV = {
    "GIT_AUTHOR_NAME": "test",
    "GIT_AUTHOR_EMAIL": "test@localhost",
    "GIT_COMMITTER_NAME": "test",
    "GIT_COMMITTER_EMAIL": "test@localhost",
}


def node(task_id: str, **kw: Any) -> dict[str, Any]:
    """A minimal valid task mapping; keyword arguments override fields."""
    data: dict[str, Any] = {
        "task_id": task_id,
        "name": f"Task {task_id}",
        "goal": f"Do {task_id}",
        "write_scope": [f"src/{task_id}.py"],
    }
    data.update(kw)
    return data


def plan_data(*tasks: dict[str, Any], **kw: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"plan_id": "p1", "requirement": "Do the thing", "tasks": list(tasks)}
    data.update(kw)
    return data


@pytest.fixture
def make_repo(tmp_path: Path) -> Callable[[dict[str, str]], Path]:
    """Create a real git repository with the given files committed."""

    def make(files: dict[str, str], name: str = "repo") -> Path:
        repo = tmp_path / name
        repo.mkdir()
        for rel, text in files.items():
            path = repo / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        env = {**GIT_ENV, "PATH": "/usr/bin:/bin:/usr/local/bin", "HOME": str(tmp_path)}
        subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True, env=env)
        subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True, env=env)
        subprocess.run(
            ["git", "-C", str(repo), "commit", "-q", "-m", "initial"], check=True, env=env
        )
        return repo

    return make
