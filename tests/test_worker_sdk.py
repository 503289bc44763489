"""A worker completes a small edit through the real Anthropic and OpenAI SDKs.

The SDKs talk to a fake server on 127.0.0.1 that speaks their wire formats, including a 429
before success; usage (cache fields included) is accounted into the worker's result.
"""

from __future__ import annotations

import json
from pathlib import Path

from anti_sprawl.agent.artifacts import ArtifactStore
from anti_sprawl.agent.worker import WorkerContext, WorkerLimits, WorkerResult, run_worker
from anti_sprawl.fs.firewall import Firewall
from anti_sprawl.providers.anthropic import AnthropicProvider
from anti_sprawl.providers.base import Provider, SystemBlock
from anti_sprawl.providers.openai import OpenAIProvider

from .fake_llm_server import (
    FakeLLMServer,
    anthropic_error,
    anthropic_message,
    openai_completion,
    openai_tool_call,
)

KEY = "sk-test-CANARY-KEY-123"
EDIT = {"path": "src/app.py", "old": "'hi'", "new": "'hello'"}


def run(tmp_path: Path, provider: Provider) -> tuple[WorkerResult, Path]:
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "app.py").write_text("def hello():\n    return 'hi'\n")
    with Firewall(repo, [], ["src/app.py"]) as fw:
        ctx = WorkerContext(
            task_id="edit",
            provider=provider,
            firewall=fw,
            system=[SystemBlock(text="You are a worker.", cache=True)],
            first_message="Make hello() return 'hello'.",
            limits=WorkerLimits(token_budget=50_000, max_tool_calls=10),
            artifacts=ArtifactStore(tmp_path / "artifacts"),
        )
        return run_worker(ctx), repo


def test_worker_edits_through_anthropic_sdk(tmp_path: Path, server: FakeLLMServer) -> None:
    usage = {
        "input_tokens": 4000,
        "output_tokens": 120,
        "cache_read_input_tokens": 300,
        "cache_creation_input_tokens": 0,
    }
    server.enqueue(
        anthropic_error("rate_limit_error", "slow down"), status=429, headers={"retry-after": "0"}
    )
    turns = [
        [{"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "src/app.py"}}],
        [{"type": "tool_use", "id": "t2", "name": "edit_file", "input": EDIT}],
        [
            {
                "type": "tool_use",
                "id": "t3",
                "name": "finish",
                "input": {"summary": "hello() says hello"},
            }
        ],
    ]
    for i, content in enumerate(turns):
        server.enqueue(
            anthropic_message(content, stop_reason="tool_use", usage=usage, msg_id=f"m{i}")
        )
    provider = AnthropicProvider(
        "claude-test", api_key=KEY, base_url=server.url, sleep=lambda s: None
    )
    result, repo = run(tmp_path, provider)
    assert result.status == "succeeded", result.message
    assert "'hello'" in (repo / "src" / "app.py").read_text()
    assert len(server.requests) == 4  # the 429 was retried
    assert result.usage.input_tokens == 3 * (4000 + 300)  # cached tokens count as input
    assert result.usage.output_tokens == 3 * 120
    assert result.usage.cache_read_tokens == 3 * 300
    assert not result.usage.estimated  # the server's counts were the larger ones
    last = server.requests[-1].body
    assert last["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert last["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert [b["type"] for b in last["messages"][-1]["content"]] == ["tool_result"]
    assert all(KEY not in json.dumps(r.body) for r in server.requests)


def test_worker_edits_through_openai_sdk(tmp_path: Path, server: FakeLLMServer) -> None:
    usage = {
        "prompt_tokens": 5000,
        "completion_tokens": 90,
        "prompt_tokens_details": {"cached_tokens": 32},
    }
    calls = [
        ("c1", "read_file", {"path": "src/app.py"}),
        ("c2", "edit_file", EDIT),
        ("c3", "finish", {"summary": "hello() says hello"}),
    ]
    for call_id, name, args in calls:
        body = openai_completion(
            tool_calls=[openai_tool_call(call_id, name, json.dumps(args))],
            finish_reason="tool_calls",
            usage=usage,
        )
        server.enqueue(body)
    provider = OpenAIProvider(
        "gpt-test", api_key=KEY, base_url=f"{server.url}/v1", sleep=lambda s: None
    )
    result, repo = run(tmp_path, provider)
    assert result.status == "succeeded", result.message
    assert "'hello'" in (repo / "src" / "app.py").read_text()
    assert (
        result.usage.input_tokens,
        result.usage.output_tokens,
        result.usage.cache_read_tokens,
    ) == (15000, 270, 96)
    last = server.requests[-1].body
    assert [m["role"] for m in last["messages"]][-2:] == ["assistant", "tool"]
    assert {t["function"]["name"] for t in last["tools"]} >= {"read_file", "edit_file", "finish"}


def test_an_under_reporting_server_is_charged_what_we_measured(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """A server claiming 1 token per call cannot stretch a budget: our own count is charged."""
    calls = [
        ("c1", "read_file", {"path": "src/app.py"}),
        ("c2", "edit_file", EDIT),
        ("c3", "finish", {"summary": "hello() says hello"}),
    ]
    for call_id, name, args in calls:
        body = openai_completion(
            tool_calls=[openai_tool_call(call_id, name, json.dumps(args))],
            finish_reason="tool_calls",
            usage={"prompt_tokens": 1, "completion_tokens": 1},
        )
        server.enqueue(body)
    provider = OpenAIProvider(
        "gpt-test", api_key=KEY, base_url=f"{server.url}/v1", sleep=lambda s: None
    )
    result, _ = run(tmp_path, provider)
    assert result.status == "succeeded", result.message
    # each request carries the system prompt and tool schemas: hundreds of tokens, not one
    assert result.usage.input_tokens > 3 * 300
    assert result.usage.output_tokens > 3 * 5
    assert result.usage.estimated
