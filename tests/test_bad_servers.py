"""Faulty model servers through the real CLI and the real SDKs (a fake server on 127.0.0.1).

A 200 whose body is not JSON (truncated, an HTML error page), wrong field types (usage as a
string or a list, ``tool_calls: 5``, text as a number), negative or absurd usage: in ``plan``
and ``execute``, with either provider, each is a typed provider error. ``plan`` exits 1 saying
why; ``execute`` exits 1 with the node ``failed`` (never left ``running``) and nothing landed.
A malformed base URL, from the flag or the environment, is one line and exit 2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from anti_sprawl.cli.app import app

from . import e2e_fixture as fx
from .fake_llm_server import FakeLLMServer, anthropic_message, openai_completion
from .test_bad_input import one_line_error

runner = CliRunner()
KEY = "sk-ant-test-CANARY-0123456789"


def bad_body(provider: str, kind: str) -> dict[str, Any]:
    """``FakeLLMServer.enqueue`` arguments for one kind of broken 200 response."""
    if kind == "truncated":
        return {"raw": b'{"id": "x", "choices": [{"message": {"content": "hel'}
    if kind == "html":
        return {"raw": b"<html><body><h1>502 Bad Gateway</h1></body></html>"}
    if provider == "openai":
        base = openai_completion(content="hi", usage={"prompt_tokens": 5, "completion_tokens": 1})
        broken: dict[str, Any] = {
            "usage_string": {**base, "usage": {"prompt_tokens": "many", "completion_tokens": 1}},
            "usage_list": {**base, "usage": [1, 2]},
            "tool_calls_int": {
                **base,
                "choices": [{"index": 0, "message": {"content": None, "tool_calls": 5}}],
            },
            "negative_usage": {**base, "usage": {"prompt_tokens": -900, "completion_tokens": -5}},
            "absurd_usage": {**base, "usage": {"prompt_tokens": 10**15, "completion_tokens": 1}},
        }
        return {"body": broken[kind]}
    base = anthropic_message([{"type": "text", "text": "hi"}])
    broken = {
        "usage_string": {**base, "usage": {"input_tokens": "many", "output_tokens": 1}},
        "usage_list": {**base, "usage": [1, 2]},
        "tool_calls_int": {**base, "content": [{"type": "text", "text": 5}]},
        "negative_usage": {**base, "usage": {"input_tokens": -900, "output_tokens": -5}},
        "absurd_usage": {**base, "usage": {"input_tokens": 10**15, "output_tokens": 1}},
    }
    return {"body": broken[kind]}


KINDS = [
    "truncated",
    "html",
    "usage_string",
    "usage_list",
    "tool_calls_int",
    "negative_usage",
    "absurd_usage",
]
EXPECTED = {"truncated": "not JSON", "html": "not JSON"}


def provider_args(provider: str, server: FakeLLMServer) -> tuple[list[str], dict[str, str | None]]:
    env: dict[str, str | None] = {
        "ANTHROPIC_API_KEY": KEY if provider == "anthropic" else None,
        "OPENAI_API_KEY": None,
        "ANTHROPIC_BASE_URL": None,
        "OPENAI_BASE_URL": None,
    }
    if provider == "anthropic":
        return ["--provider", "anthropic", "--base-url", server.url], env
    return ["--provider", "openai", "--base-url", f"{server.url}/v1", "--model", "m"], env


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
@pytest.mark.parametrize("kind", KINDS)
def test_plan_with_a_broken_response_fails_cleanly(
    tmp_path: Path, server: FakeLLMServer, provider: str, kind: str
) -> None:
    repo = fx.make_repo(tmp_path)
    server.enqueue(**bad_body(provider, kind))
    args, env = provider_args(provider, server)
    result = runner.invoke(app, ["plan", "add a module", "--repo", str(repo), *args], env=env)
    assert result.exit_code == 1, (result.stdout, result.stderr, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.stdout + result.stderr
    assert "planning failed" in result.stdout
    assert EXPECTED.get(kind, "malformed response") in result.stdout
    assert len(server.requests) == 1  # not retried: a broken body is not a transient failure
    assert not list((repo / ".anti-sprawl").glob("plans/*"))


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
@pytest.mark.parametrize("kind", KINDS)
def test_execute_with_a_broken_response_fails_the_node(
    tmp_path: Path, server: FakeLLMServer, provider: str, kind: str
) -> None:
    repo = fx.make_repo(tmp_path)
    before = fx.checkout_fingerprint(repo)
    one = fx.plan(tasks=[fx.node("a", [], "pkg/a.py", "A = 1\n")], max_attempts=1)
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(json.dumps(one))
    server.enqueue(**bad_body(provider, kind))
    args, env = provider_args(provider, server)
    result = runner.invoke(
        app, ["execute", str(plan_path), "--repo", str(repo), "--json", *args], env=env
    )
    assert result.exit_code == 1, (result.stdout, result.stderr, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.stdout + result.stderr
    state = json.loads(result.stdout)
    record = state["tasks"]["a"]
    assert state["status"] == "failed"
    assert record["status"] == "failed", record
    assert record["reason"] == "provider", record
    assert EXPECTED.get(kind, "malformed response") in record["message"]
    assert record["tokens"]["input_tokens"] >= 0
    assert record["tokens"]["output_tokens"] >= 0
    # the journal on disk says the same: nothing is left `running`
    journal = repo / ".anti-sprawl" / "runs" / state["run_id"] / "run.json"
    assert json.loads(journal.read_text())["tasks"]["a"]["status"] == "failed"
    assert fx.task_trailers(repo) == []
    assert fx.checkout_fingerprint(repo) == before
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    "url", ["http://[::1", "ftp://example.com", "http://", "localhost:8080", "http://h:99999"]
)
def test_malformed_base_url_is_one_line(tmp_path: Path, url: str) -> None:
    repo = fx.make_repo(tmp_path)
    plan_path, _ = fx.write_inputs(tmp_path, fx.plan(), fx.script())
    env: dict[str, str | None] = {"ANTHROPIC_API_KEY": None, "OPENAI_API_KEY": None}
    for args in (
        ["plan", "req", "--repo", str(repo), "--base-url", url, "--model", "m"],
        ["execute", str(plan_path), "--repo", str(repo), "--base-url", url, "--model", "m"],
        ["resume", "some-run", "--repo", str(repo), "--base-url", url, "--model", "m"],
    ):
        line = one_line_error(runner.invoke(app, args, env=env))
        assert line.startswith(f"anti-sprawl: error: invalid --base-url {url!r}"), line
    for var, provider in (("ANTHROPIC_BASE_URL", "anthropic"), ("OPENAI_BASE_URL", "openai")):
        env = {"ANTHROPIC_API_KEY": KEY, "OPENAI_API_KEY": KEY, var: url}
        args = ["plan", "req", "--repo", str(repo), "--provider", provider, "--model", "m"]
        line = one_line_error(runner.invoke(app, args, env=env))
        assert f"invalid {var} {url!r}" in line, line
        assert KEY not in line, line
    assert not (repo / ".anti-sprawl" / "runs").exists()
