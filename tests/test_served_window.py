"""A token_budget above the local server's context window is an error with the numbers.

The window is read where the server says it: llama.cpp's /v1/models (meta.n_ctx, as recorded
from xllamacpp in tests/fixtures/real_model/) and Ollama's /api/show (num_ctx), served here by
the fake server on 127.0.0.1; a server that says nothing gets no check.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from anti_sprawl.providers.server_info import served_context_window

from .fake_llm_server import FakeLLMServer, openai_completion, openai_tool_call
from .test_no_changes import execute, plan

pytestmark = pytest.mark.usefixtures("python_on_path")
# what xllamacpp's llama.cpp server answered on /v1/models (trimmed), n_ctx 16384
LLAMA_CPP = {
    "object": "list",
    "data": [
        {
            "id": "-",
            "object": "model",
            "owned_by": "llamacpp",
            "meta": {"n_vocab": 151936, "n_ctx": 16384, "n_ctx_train": 32768},
        }
    ],
}
OLLAMA_SHOW = {
    "parameters": 'num_ctx                        8192\nstop                           "<|im_end|>"',
    "model_info": {"qwen2.context_length": 32768},
}


def test_llama_cpp_says_n_ctx(server: FakeLLMServer) -> None:
    server.routes["/v1/models"] = LLAMA_CPP
    window = served_context_window(f"{server.url}/v1", "local-test")
    assert window is not None
    assert window.tokens == 16384
    assert window.source.endswith("/v1/models (n_ctx)")


def test_ollama_says_num_ctx(server: FakeLLMServer) -> None:
    server.routes["/api/version"] = {"version": "0.12.0"}
    server.routes["/api/show"] = OLLAMA_SHOW
    window = served_context_window(f"{server.url}/v1", "qwen2.5-coder:7b")
    assert window is not None
    assert window.tokens == 8192


def test_a_server_that_says_nothing_is_not_asked_twice(server: FakeLLMServer) -> None:
    assert served_context_window(f"{server.url}/v1", "m") is None
    assert server.requests == []  # no POST reached the chat queue


def test_execute_refuses_a_budget_above_the_window(tmp_path: Path, server: FakeLLMServer) -> None:
    server.routes["/models"] = LLAMA_CPP  # the fake server's base URL has no /v1
    _, result = execute(tmp_path, server, plan(token_budget=40_000))
    assert result.exit_code == 2
    assert "token_budget 40,000 is above the server's context window of 16,384" in result.output
    assert server.requests == []  # refused before any model call


def test_a_budget_inside_the_window_runs(tmp_path: Path, server: FakeLLMServer) -> None:
    server.routes["/models"] = LLAMA_CPP
    for n, (name, args) in enumerate(
        [
            ("write_file", '{"path": "pkg/a.py", "content": "A = 1\\n"}'),
            ("finish", '{"summary": "A"}'),
        ]
    ):
        call = openai_tool_call(f"c{n}", name, args)
        server.enqueue(openai_completion(tool_calls=[call], finish_reason="tool_calls"))
    _, result = execute(tmp_path, server, plan(token_budget=12_000))
    assert result.exit_code == 0, result.output


def test_a_plan_for_a_server_fits_its_budgets_to_the_window(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """make real-model 2026-12-03 run 11: the planner's first submission was valid, with
    token_budget 60,000 for each of its three tasks on a 16,384-token server, and execute
    refused the plan it had just written. ``plan`` reads the same window and lowers them."""
    import yaml
    from typer.testing import CliRunner

    from anti_sprawl.cli.app import app

    from . import e2e_fixture as fx

    server.routes["/models"] = LLAMA_CPP
    fixture = Path(__file__).parent / "fixtures" / "real_model" / "planner_over_window_run11.txt"
    server.enqueue(openai_completion(content=fixture.read_text(), finish_reason="stop"))
    calc = "def add(a, b):\n    return a + b\n"
    repo = fx.make_repo(tmp_path, {"calc.py": calc, "test_calc.py": "from calc import add\n"})
    out = tmp_path / "plan.yaml"
    args = ["plan", "Add subtract(a, b) to calc.py, with a test in test_calc.py", "--repo"]
    args += [str(repo), "--output", str(out), "--provider", "openai", "--base-url", server.url]
    result = CliRunner().invoke(app, [*args, "--model", "local-test"])
    assert result.exit_code == 0, result.output
    budgets = [t["token_budget"] for t in yaml.safe_load(out.read_text())["tasks"]]
    assert budgets == [16_384] * 3
    flat = " ".join(result.output.split())
    assert "token_budget 60,000 lowered to 16,384, the context window" in flat
    assert "/models (n_ctx) reports" in flat
