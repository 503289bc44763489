"""Output limits: per-model defaults, --max-output-tokens, and responses cut at the limit.

Real CLI, real repositories; the Anthropic and OpenAI SDKs talk to the fake server on
127.0.0.1, the scripted provider cuts a turn longer than the request allows, as a model does.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from anti_sprawl.agent.artifacts import read_json_lines
from anti_sprawl.cli.app import app
from anti_sprawl.providers.limits import (
    DEFAULT_LOCAL_LIMIT,
    default_output_limit,
    response_timeout,
)
from anti_sprawl.tokens import count_tokens

from . import e2e_fixture as fx
from .fake_llm_server import FakeLLMServer, anthropic_message, openai_completion, openai_tool_call

runner = CliRunner()
KEY = "sk-test-CANARY-KEY-42"


@pytest.mark.parametrize(
    ("provider", "model", "local", "limit"),
    [
        ("anthropic", "claude-sonnet-5-5", False, 128_000),
        ("anthropic", "claude-opus-5", False, 128_000),
        ("anthropic", "claude-opus-4-6", False, 128_000),
        ("anthropic", "claude-sonnet-4-5-20250929", False, 64_000),
        ("anthropic", "claude-haiku-4-5", False, 64_000),
        ("anthropic", "claude-opus-4-1-20250805", False, 32_000),
        ("anthropic", "claude-sonnet-4-20250514", False, 64_000),
        ("anthropic", "claude-3-5-haiku-latest", False, 8_192),
        ("anthropic", "claude-3-haiku-20240307", False, 4_096),
        ("anthropic", "claude-someday-9", False, 32_000),
        ("openai", "gpt-5.5", False, 128_000),
        ("openai", "gpt-5-chat-latest", False, 16_384),
        ("openai", "gpt-4.1-mini", False, 32_768),
        ("openai", "gpt-4o", False, 16_384),
        ("openai", "o4-mini", False, 100_000),
        ("openai", "some-new-model", False, 16_384),
        ("openai", "qwen2.5-coder", True, DEFAULT_LOCAL_LIMIT),
        ("openai", "gpt-5.5", True, 128_000),  # a known model behind a proxy URL
        ("scripted", "scripted", False, 128_000),
    ],
)
def test_default_table(provider: str, model: str, local: bool, limit: int) -> None:
    assert default_output_limit(provider, model, local_server=local) == limit


def test_a_long_answer_gets_time() -> None:
    assert response_timeout(120.0, 4096) == 120.0
    assert response_timeout(120.0, 1000) == 120.0
    assert response_timeout(120.0, 128_000) > 3000


def _inputs(tmp_path: Path, workers: dict[str, Any] | None = None) -> tuple[Path, Path, Path]:
    repo = fx.make_repo(tmp_path)
    plan = {
        "plan_id": "limits",
        "requirement": "Write a big module",
        "tasks": [
            {
                "task_id": "big",
                "name": "Big module",
                "goal": "Create pkg/big.py",
                "read_scope": ["pkg/base.py"],
                "write_scope": ["pkg/big.py"],
                "token_budget": 300_000,
                "max_tool_calls": 10,
                "expect_changes": False,  # the worker only finishes: these tests are on limits
            }
        ],
    }
    plan_path, script_path = fx.write_inputs(tmp_path, plan, {"workers": workers or {}})
    return repo, plan_path, script_path


def _finish_message(n: int) -> dict[str, Any]:
    block = {"type": "tool_use", "id": f"t{n}", "name": "finish", "input": {"summary": "done"}}
    return anthropic_message([block], stop_reason="tool_use", msg_id=f"m{n}")


def test_anthropic_default_and_a_cut_response(tmp_path: Path, server: FakeLLMServer) -> None:
    repo, plan_path, _ = _inputs(tmp_path)
    # The first answer hit max_tokens in the middle of a write_file: its input is partial.
    cut = {"type": "tool_use", "id": "t1", "name": "write_file", "input": {"path": "pkg/big.py"}}
    server.enqueue(
        anthropic_message(
            [{"type": "text", "text": "Writing the module."}, cut],
            stop_reason="max_tokens",
            usage={"input_tokens": 900, "output_tokens": 64_000},
        )
    )
    server.enqueue(_finish_message(2))
    args = ["execute", str(plan_path), "--repo", str(repo), "--provider", "anthropic"]
    args += ["--model", "claude-haiku-4-5", "--base-url", server.url, "--json"]
    result = runner.invoke(app, args, env={"ANTHROPIC_API_KEY": KEY})
    assert result.exit_code == 0, result.output
    first, second = (r.body for r in server.requests)
    assert first["max_tokens"] == 64_000  # the model's own limit, not 4,096
    # the cut tool call was never run and never replayed; the worker was told what happened
    assert not (repo / "pkg/big.py").exists()
    sent = json.dumps(second["messages"])
    assert "tool_use" not in json.dumps(second["messages"][1])
    assert "Your response was cut at 64,000 output tokens" in sent
    assert "write_file with append: true" in sent
    state = json.loads(result.stdout)
    assert state["tasks"]["big"]["truncated_responses"] == 1
    pr = (repo / ".anti-sprawl/runs" / state["run_id"] / "PR.md").read_text()
    assert "1 response cut at the output limit" in pr
    assert "Responses cut at the output limit: 1" in pr
    status = runner.invoke(app, ["status", state["run_id"], "--repo", str(repo)])
    assert "cut big: 1 response cut at the output limit" in status.stdout


def test_the_flag_wins_and_local_servers_get_4k(tmp_path: Path, server: FakeLLMServer) -> None:
    repo, plan_path, _ = _inputs(tmp_path)
    finish = openai_tool_call("c1", "finish", json.dumps({"summary": "done"}))
    for _ in range(2):
        server.enqueue(openai_completion(tool_calls=[finish], finish_reason="tool_calls"))
    base = ["execute", str(plan_path), "--repo", str(repo), "--base-url", f"{server.url}/v1"]
    local = runner.invoke(app, [*base, "--model", "qwen2.5-coder"])
    assert local.exit_code == 0, local.output
    assert server.requests[0].body["max_tokens"] == DEFAULT_LOCAL_LIMIT
    flagged = runner.invoke(
        app, [*base, "--model", "qwen2.5-coder", "--max-output-tokens", "12000", "--branch", "b2"]
    )
    assert flagged.exit_code == 0, flagged.output
    assert server.requests[1].body["max_tokens"] == 12_000


def test_scripted_cut_then_a_file_built_in_parts(tmp_path: Path) -> None:
    lines = [f"ITEM_{i:05d} = {i}  # generated\n" for i in range(3000)]
    whole = "".join(lines)
    assert count_tokens(whole) > 20_000
    parts = ["".join(lines[i : i + 250]) for i in range(0, len(lines), 250)]
    turns: list[Any] = [{"tool": "write_file", "args": {"path": "pkg/big.py", "content": whole}}]
    turns.append({"tool": "write_file", "args": {"path": "pkg/big.py", "content": parts[0]}})
    turns += [
        {"tool": "write_file", "args": {"path": "pkg/big.py", "content": p, "append": True}}
        for p in parts[1:]
    ]
    turns.append({"tool": "finish", "args": {"summary": "built in parts"}})
    repo, plan_path, script_path = _inputs(tmp_path, {"big": turns})
    plan = yaml.safe_load(plan_path.read_text())
    plan["tasks"][0]["max_tool_calls"] = 20
    plan["tasks"][0]["token_budget"] = 3_000_000
    plan_path.write_text(yaml.safe_dump(plan))
    args = ["execute", str(plan_path), "--repo", str(repo), "--script", str(script_path)]
    result = runner.invoke(app, [*args, "--max-output-tokens", "4000", "--json"])
    assert result.exit_code == 0, result.output
    state = json.loads(result.stdout)
    assert state["tasks"]["big"]["truncated_responses"] == 1
    show = ["git", "show", f"{state['branch']}:pkg/big.py"]
    landed = subprocess.run(show, cwd=repo, capture_output=True, check=True).stdout
    assert landed == whole.encode()  # every byte of the 20k-token file, in order
    transcript = repo / ".anti-sprawl/runs" / state["run_id"] / "artifacts/big/transcript.jsonl"
    events = read_json_lines(transcript)
    cut = [e for e in events if e.get("event") == "response" and e["stop_reason"] == "max_tokens"]
    assert len(cut) == 1  # the first, whole-file write
    told = [e["message"] for e in events if e.get("event") == "cut"]
    assert len(told) == 1
    assert told[0].startswith("Your response was cut at 4,000 output tokens")
    manifest = repo / ".anti-sprawl/runs" / state["run_id"] / "manifests/big/2.json"
    items = json.loads(manifest.read_text())["items"]
    assert [i["kind"] for i in items if i["item_id"] == "message:2"] == ["instruction"]
