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


@pytest.fixture(autouse=True)
def python_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Test commands resolve their interpreter through the user's PATH (sandbox/user_env.py):
    every test is a user who activated this venv, so ``python -m pytest`` finds pytest. A test
    about PATH itself sets its own."""
    bindir = Path(sys.executable).parent
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ.get('PATH', '/usr/bin:/bin')}")


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    """A fake model server on 127.0.0.1 for tests that drive the real SDKs."""
    with FakeLLMServer() as srv:
        yield srv


@pytest.fixture
def served_execute(server: FakeLLMServer) -> Callable[..., Any]:
    """``anti-sprawl execute PLAN --repo REPO [extra...]`` through the click runner, against
    the ``server`` fixture's model ``gpt-test`` (its answers queued with
    ``fake_llm_server.enqueue_node``); the runner's result."""
    from typer.testing import CliRunner

    from anti_sprawl.cli.app import app

    def run(plan: Path, repo: Path, *extra: str) -> Any:
        served = ["--base-url", f"{server.url}/v1", "--model", "gpt-test"]
        args = ["execute", str(plan), "--repo", str(repo), *served, *extra]
        return CliRunner().invoke(app, args)

    return run


# --- Dask clusters for the --executor dask tests (real LocalClusters, offline) ---------------


@pytest.fixture(scope="session")
def _dask_env(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Worker processes inherit this at spawn: a private cache and the venv's python."""
    os.environ["ANTI_SPRAWL_CACHE_DIR"] = str(tmp_path_factory.mktemp("dask-cache"))
    bindir = str(Path(sys.executable).parent)
    if not os.environ.get("PATH", "").startswith(bindir):
        os.environ["PATH"] = f"{bindir}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    import dask

    # A worker that dies fails its task at once (KilledWorker): retries are ours to decide.
    dask.config.set({"distributed.scheduler.allowed-failures": 0})


def _cluster(processes: bool) -> Any:
    from distributed import LocalCluster

    return LocalCluster(
        n_workers=2,
        processes=processes,
        threads_per_worker=2,
        dashboard_address=":0",  # no fixed port: another cluster may hold 8787
        protocol="tcp",
        host="127.0.0.1",
    )


# Module-scoped: a live cluster's threads in this process use the `random` module, which
# hypothesis (rightly) takes for a strategy depending on outside state in other modules' tests.
@pytest.fixture(scope="module")
def dask_inprocess(_dask_env: None) -> Iterator[Any]:
    """A real Dask cluster whose workers are threads of this process."""
    with _cluster(processes=False) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def dask_processes(_dask_env: None) -> Iterator[Any]:
    """A real Dask cluster with two worker processes (what a killed worker needs)."""
    with _cluster(processes=True) as cluster:
        yield cluster


EXECUTORS = ["local", "dask-inprocess", "dask-processes"]


@pytest.fixture(params=EXECUTORS)
def executor_args(request: pytest.FixtureRequest) -> list[str]:
    """CLI arguments choosing where nodes run; the same test runs once per executor."""
    if request.param == "local":
        return []
    cluster = request.getfixturevalue(request.param.replace("-", "_"))
    return ["--executor", "dask", "--dask-scheduler", cluster.scheduler_address]
