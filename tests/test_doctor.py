"""``anti-sprawl doctor`` (issue 24, item 6): one line per check, exit 1 when something would
stop a run; the provider is reached with a models list (no tokens), keys are never printed."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from anti_sprawl.cli.app import app

from .conftest import node, plan_data
from .fake_llm_server import Canned, FakeLLMServer
from .test_baseline import SRC_FILES

runner = CliRunner()
CANARY = "sk-CANARY-doctor-5d1e"


def _plan(tmp_path: Path, test_command: str) -> Path:
    path = tmp_path / "plan.yaml"
    data = plan_data(node("a", write_scope=["src/mypkg/a.py"]), test_command=test_command)
    path.write_text(yaml.safe_dump(data))
    return path


def _lines(output: str) -> dict[str, list[str]]:
    by: dict[str, list[str]] = {}
    for line in output.splitlines():
        level, what, *_ = line.split()
        by.setdefault(what, []).append(level)
    return by


def test_doctor_names_what_would_stop_a_run_without_spending_a_token(
    tmp_path: Path, make_repo: Any, server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    repo = make_repo(SRC_FILES)
    server.routes["/v1/models"] = {"object": "list", "data": [{"id": "m", "object": "model"}]}
    model = ["--base-url", f"{server.url}/v1", "--model", "m"]
    args = ["doctor", "--repo", str(repo), "--plan", str(_plan(tmp_path, "python -m pytest -q"))]
    result = runner.invoke(app, [*args, *model])
    assert result.exit_code == 1, result.output
    seen = _lines(result.stdout)
    assert seen["git"] == ["ok"]
    assert seen["sandbox"] == ["ok"]
    assert seen["keys"] == ["ok"]
    assert seen["provider"] == ["ok"]
    assert seen["repository"] == ["ok"]
    # what it runs (and a note on its src layout), then: it cannot start
    assert seen["tests"] == ["ok", "ok", "problem"]
    assert "a src layout (mypkg)" in result.stdout
    assert seen["disk"] == ["ok"]
    assert "cannot start: No module named 'mypkg'" in " ".join(result.stdout.split())
    assert "OPENAI_API_KEY set (values never printed)" in result.stdout
    assert CANARY not in result.stdout
    assert [(r.method, r.path) for r in server.gets] == [("GET", "/v1/models")]
    assert server.requests == []  # no model call: nothing spent
    # fixed as the hint says: nothing stops a run any more
    fixed = _plan(tmp_path, "env PYTHONPATH=src python -m pytest -q")
    server.routes["/v1/models"] = {"object": "list", "data": []}
    args[-1] = str(fixed)
    result = runner.invoke(app, [*args, *model])
    assert result.exit_code == 0, result.output
    assert "problem" not in result.stdout


def test_doctor_says_when_the_server_is_unreachable_or_refuses_the_key(
    server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    server.routes["/v1/models"] = Canned(401, {"error": {"message": "bad key"}})
    refused = runner.invoke(app, ["doctor", "--base-url", f"{server.url}/v1", "--model", "m"])
    assert refused.exit_code == 1
    assert f"problem  provider    openai at {server.url}/v1 refuses the key (HTTP 401)" in (
        refused.stdout
    )
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    down = runner.invoke(
        app, ["doctor", "--base-url", f"http://127.0.0.1:{port}/v1", "--model", "m"]
    )
    assert down.exit_code == 1
    assert f"openai at http://127.0.0.1:{port}/v1 is not reachable" in down.stdout
    assert CANARY not in refused.stdout + down.stdout
