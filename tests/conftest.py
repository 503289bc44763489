"""Shared fixtures: plan builders and real temporary git repositories."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from .fake_llm_server import FakeLLMServer

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


@pytest.fixture
def python_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Test commands resolve their interpreter through PATH inside the sandbox: this venv's
    interpreter first (use with ``pytestmark = pytest.mark.usefixtures("python_on_path")``)."""
    bindir = Path(sys.executable).parent
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ.get('PATH', '/usr/bin:/bin')}")


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    """A fake model server on 127.0.0.1 for tests that drive the real SDKs."""
    with FakeLLMServer() as srv:
        yield srv
