"""``resume RUN`` works as the tool prints it: the journal keeps what the run was started with.

A run against a local OpenAI-compatible server (tests/fake_llm_server.py, through the real
OpenAI SDK) stopped by its token cap; then ``anti-sprawl resume RUN``, with nothing else and
from inside the repository, finishes it against the same server (the provider, model and base
URL come from the journal, no key is recorded), and flags given to ``resume`` override.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from anti_sprawl.cli.app import app

from . import e2e_fixture as fx
from .fake_llm_server import FakeLLMServer, enqueue_node

pytestmark = pytest.mark.usefixtures("python_on_path")
runner = CliRunner()
USAGE = {"prompt_tokens": 1_000, "completion_tokens": 10}
KEY = "sk-test-resume-0123456789abcdef"


def two_nodes() -> dict[str, Any]:
    data = fx.plan()
    data["tasks"] = data["tasks"][:2]  # a and b, independent
    return data


def node_turns(server: FakeLLMServer, path: str) -> None:
    enqueue_node(server, path, USAGE, summary=f"wrote {path}", interfaces=path)


def start(
    tmp_path: Path, server: FakeLLMServer, served_execute: Callable[..., Any], cap: int
) -> tuple[Path, dict[str, Any]]:
    repo = fx.make_repo(tmp_path)
    plan_path = tmp_path / "plan.yaml"
    plan_path.write_text(yaml.safe_dump(two_nodes()))
    for path in ("pkg/a.py", "pkg/b.py"):
        node_turns(server, path)
    first = served_execute(plan_path, repo, "--max-tokens", str(cap), "--jobs", "1", "--json")
    assert first.exit_code == 1, first.output
    state: dict[str, Any] = json.loads(first.stdout)
    return repo, state


def test_a_capped_run_resumes_with_nothing_but_its_id(
    tmp_path: Path,
    server: FakeLLMServer,
    served_execute: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    repo, state = start(tmp_path, server, served_execute, cap=3_500)
    assert state["status"] == "interrupted"
    assert "--max-tokens" in state["stopped_by"]
    assert state["tasks"]["a"]["status"] == "succeeded"
    assert state["tasks"]["b"]["status"] != "succeeded"
    journal = (repo / ".anti-sprawl" / "runs" / state["run_id"] / "run.json").read_text()
    launch = json.loads(journal)["launch"]
    assert launch["provider"] == "openai"
    assert launch["base_url"] == f"{server.url}/v1"
    assert launch["model"] == "gpt-test"
    assert launch["max_tokens"] == 3_500
    assert KEY not in journal
    served = len(server.requests)
    server.clear()
    node_turns(server, "pkg/b.py")
    # From inside the repository, as the verdict prints it but without even --repo; the
    # public endpoint is one exported key away, and must not be used.
    monkeypatch.chdir(repo / "pkg")
    resumed = runner.invoke(app, ["resume", state["run_id"], "--json"])
    assert resumed.exit_code == 0, resumed.output
    final = json.loads(resumed.stdout)
    assert final["status"] == "succeeded"
    assert len(server.requests) > served  # the same server answered
    assert sorted(fx.task_trailers(repo)) == ["a", "b"]
    assert "this session may spend 3,500 more tokens" in resumed.stderr
    # status, inspect and pr find the repository the same way
    listed = runner.invoke(app, ["status"])
    assert listed.exit_code == 0, listed.output
    assert state["run_id"] in listed.output
    assert runner.invoke(app, ["inspect", state["run_id"]]).exit_code == 0


def test_a_flag_given_to_resume_overrides_the_record_and_says_so(
    tmp_path: Path,
    server: FakeLLMServer,
    served_execute: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    repo, state = start(tmp_path, server, served_execute, cap=3_500)
    with FakeLLMServer() as other:
        node_turns(other, "pkg/b.py")
        resumed = runner.invoke(
            app,
            ["resume", state["run_id"], "--repo", str(repo), "--base-url", f"{other.url}/v1"],
        )
        assert resumed.exit_code == 0, resumed.output
        assert other.requests
    assert f"this session uses --base-url {other.url}/v1 (the run was started with " in (
        resumed.stderr
    )
    launch = json.loads((repo / ".anti-sprawl" / "runs" / state["run_id"] / "run.json").read_text())
    assert launch["launch"]["base_url"] == f"{other.url}/v1"
