"""submit_plan round trips through the real Anthropic and OpenAI SDKs and a local fake server."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from anti_sprawl.planner.planner import plan_requirement
from anti_sprawl.providers import AnthropicProvider, OpenAIProvider

from .conftest import node, plan_data
from .fake_llm_server import (
    FakeLLMServer,
    anthropic_message,
    openai_completion,
    openai_tool_call,
)

FILES = {"app/core.py": "def run():\n    return 1\n", "tests/test_core.py": "", ".env": "K=1\n"}
GOOD = plan_data(node("core", write_scope=["app/core.py", "tests/test_core.py"]), plan_id="sdk")
BAD = plan_data(node("core", write_scope=["../escape.py"]), plan_id="sdk")
EXPLORE = {"grep", "list_dir", "read_file", "submit_plan"}


@pytest.fixture
def repo(make_repo: Callable[[dict[str, str]], Path]) -> Path:
    return make_repo(FILES)


def no_sleep(seconds: float) -> None:
    pass


def anthropic_submit(plan: dict[str, Any], call_id: str) -> dict[str, Any]:
    block = {"type": "tool_use", "id": call_id, "name": "submit_plan", "input": plan}
    usage = {"input_tokens": 5000, "output_tokens": 300}  # more than our own count: charged
    return anthropic_message([block], stop_reason="tool_use", usage=usage, msg_id=f"msg_{call_id}")


def openai_submit(plan: dict[str, Any], call_id: str) -> dict[str, Any]:
    return openai_completion(
        tool_calls=[openai_tool_call(call_id, "submit_plan", json.dumps(plan))],
        finish_reason="tool_calls",
        usage={"prompt_tokens": 6000, "completion_tokens": 400, "total_tokens": 6400},
    )


def test_anthropic_submit_plan_with_one_repair(server: FakeLLMServer, repo: Path) -> None:
    server.enqueue(anthropic_submit(BAD, "toolu_1"))
    server.enqueue(anthropic_submit(GOOD, "toolu_2"))
    provider = AnthropicProvider(
        "claude-test", api_key="sk-ant-test", base_url=server.url, sleep=no_sleep
    )
    result = plan_requirement("Tidy run()", repo, provider)
    assert result.ok
    assert result.plan is not None
    assert result.plan.tasks[0].write_scope == ["app/core.py", "tests/test_core.py"]
    assert (result.rounds, result.requests) == (2, 2)
    assert result.usage.input_tokens == 10_000
    assert result.usage.output_tokens == 600

    first, second = (r.body for r in server.requests)
    tools = {t["name"]: t for t in first["tools"]}
    assert set(tools) == EXPLORE
    schema = tools["submit_plan"]["input_schema"]
    assert "$defs" not in json.dumps(schema)  # self-contained for every server
    assert schema["properties"]["tasks"]["items"]["properties"]["write_scope"]["type"] == "array"
    # the second request carries the validation errors as the tool's error result
    [result_block] = second["messages"][-1]["content"]
    assert result_block["type"] == "tool_result"
    assert result_block["tool_use_id"] == "toolu_1"
    assert result_block["is_error"] is True
    assert "'..' segment escapes the repository" in json.dumps(result_block["content"])


def test_openai_submit_plan_with_one_repair(server: FakeLLMServer, repo: Path) -> None:
    server.enqueue(openai_submit(BAD, "call_1"))
    server.enqueue(openai_submit(GOOD, "call_2"))
    provider = OpenAIProvider(
        "gpt-test", api_key="sk-test", base_url=f"{server.url}/v1", sleep=no_sleep
    )
    result = plan_requirement("Tidy run()", repo, provider)
    assert result.ok
    assert result.plan is not None
    assert result.plan.plan_id == "sdk"
    assert result.usage.input_tokens == 12_000

    first, second = (r.body for r in server.requests)
    names = {t["function"]["name"] for t in first["tools"]}
    assert names == EXPLORE
    [submit] = [t for t in first["tools"] if t["function"]["name"] == "submit_plan"]
    assert "tasks" in submit["function"]["parameters"]["required"]
    tool_msg = second["messages"][-1]
    assert tool_msg["role"] == "tool"
    assert tool_msg["tool_call_id"] == "call_1"
    assert "'..' segment escapes the repository" in json.dumps(tool_msg["content"])


def test_two_identical_submissions_in_one_turn_count_once(
    server: FakeLLMServer, repo: Path
) -> None:
    """Issue 23: a small model sent the same submit_plan twice in one response."""
    call = json.dumps(BAD)
    twice = [
        openai_tool_call("c1", "submit_plan", call),
        openai_tool_call("c2", "submit_plan", call),
    ]
    server.enqueue(openai_completion(tool_calls=twice, finish_reason="tool_calls"))
    server.enqueue(openai_submit(GOOD, "c3"))
    provider = OpenAIProvider("local", base_url=server.url, sleep=no_sleep)
    result = plan_requirement("Tidy run()", repo, provider, max_rounds=2)
    assert result.ok, result.message
    assert result.rounds == 2  # the duplicate spent no round
    answers = [m for m in server.requests[1].body["messages"] if m["role"] == "tool"]
    assert [a["tool_call_id"] for a in answers] == ["c1", "c2"]
    assert "the same call as the one before in this turn; not run again" in answers[1]["content"]


def test_the_same_error_twice_brings_the_skeleton_of_a_valid_task(
    server: FakeLLMServer, repo: Path
) -> None:
    for n in range(2):
        server.enqueue(openai_submit(BAD, f"c{n}"))
    server.enqueue(openai_submit(GOOD, "c2"))
    provider = OpenAIProvider("local", base_url=server.url, sleep=no_sleep)
    result = plan_requirement("Tidy run() in app/core.py, tested in nope.py", repo, provider)
    assert result.ok, result.message
    first, second = (server.requests[n].body["messages"][-1]["content"] for n in (1, 2))
    assert "The same error came back twice" not in first
    assert "The same error came back twice" in second
    assert '"token_budget": 30000' in second
    # over the files the requirement names that exist: make real-model 2026-12-05 run ad
    # copied the skeleton's src/module.py as src/calc.py, which does not exist
    skeleton = json.loads(second[second.index("shape:\n") + 7 :])["tasks"][0]
    assert (skeleton["read_scope"], skeleton["write_scope"]) == (["app/core.py"], ["app/core.py"])


def test_a_local_server_gets_the_lean_planner_prompt(server: FakeLLMServer, repo: Path) -> None:
    """Issue 23: the fixed prompt was 3.7k tokens, 5-7 minutes to a first token on a CPU."""
    from typer.testing import CliRunner

    from anti_sprawl.cli.app import app
    from anti_sprawl.tokens import count_tokens

    server.enqueue(openai_submit(GOOD, "c1"))
    args = ["plan", "Tidy run()", "--repo", str(repo), "--base-url", server.url, "--model", "m"]
    result = CliRunner().invoke(app, [*args, "--output", str(repo.parent / "plan.yaml")])
    assert result.exit_code == 0, result.output
    body = server.requests[0].body
    system = body["messages"][0]["content"]
    assert "<plan_schema>" not in system
    submit = next(t for t in body["tools"] if t["function"]["name"] == "submit_plan")
    assert "description" not in json.dumps(submit["function"]["parameters"])
    fixed = count_tokens(system) + count_tokens(json.dumps(body["tools"]))
    assert fixed < 2_000
