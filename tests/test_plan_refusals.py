"""``plan`` is as careful as ``execute`` (issue 24, item 3): a directory that is not a git
repository, or a subdirectory of one, is refused before any model call, and nothing is left
behind in either."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from anti_sprawl.cli.app import app

from .fake_llm_server import FakeLLMServer

runner = CliRunner()


def _listing(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if ".git/" not in str(p))


def _plan(repo: Path, server: FakeLLMServer) -> Any:
    model = ["--provider", "openai", "--base-url", f"{server.url}/v1", "--model", "m"]
    return runner.invoke(app, ["plan", "add a module", "--repo", str(repo), *model])


def test_plan_refuses_a_directory_that_is_not_a_repository(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    plain = tmp_path / "project"
    plain.mkdir()
    (plain / "main.py").write_text("print('hi')\n")
    result = _plan(plain, server)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"anti-sprawl: error: not a git repository: {plain} (")
    assert "'git init' and commit first" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert server.requests == []
    assert _listing(plain) == ["main.py"]


def test_plan_refuses_a_subdirectory_and_names_the_root(
    tmp_path: Path, server: FakeLLMServer, make_repo: Any
) -> None:
    repo = make_repo({"pkg/__init__.py": "", "pkg/mod.py": "X = 1\n"})
    before = _listing(repo)
    exclude = (repo / ".git" / "info" / "exclude").read_text()
    result = _plan(repo / "pkg", server)
    assert result.exit_code == 2
    root = repo.resolve()
    line = f"{repo / 'pkg'} is inside the repository {root}; pass the root with --repo {root}"
    assert line in result.stderr
    assert server.requests == []
    assert _listing(repo) == before  # no .anti-sprawl, here or in pkg/
    assert (repo / ".git" / "info" / "exclude").read_text() == exclude
    status = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True)
    assert status.stdout == b""
