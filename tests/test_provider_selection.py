"""Which provider the flags and the environment select, and that the SDKs load lazily."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from anti_sprawl.errors import UsageError
from anti_sprawl.providers import (
    DEFAULT_ANTHROPIC_MODEL,
    DEFAULT_OPENAI_MODEL,
    NO_PROVIDER_MESSAGE,
    AnthropicProvider,
    ModelRequest,
    OpenAIProvider,
    ScriptedProvider,
    UserMessage,
    select_provider,
)

from .fake_llm_server import FakeLLMServer, anthropic_message, openai_completion

ANTHROPIC_KEY = "sk-ant-selection-CANARY-KEY-123456"
OPENAI_KEY = "sk-proj-selection-CANARY-KEY-123456"


def select(
    env: dict[str, str] | None = None,
    *,
    provider: str | None = None,
    model: str | None = None,
    base_url: str | None = None,
    script: Path | None = None,
) -> Any:
    return select_provider(
        provider=provider, model=model, base_url=base_url, script=script, env=env or {}
    )


@pytest.fixture
def script_file(tmp_path: Path) -> Path:
    path = tmp_path / "script.yaml"
    path.write_text("workers:\n  t1:\n    - tool: finish\n      args: {summary: done}\n")
    return path


def test_nothing_configured_is_a_usage_error() -> None:
    with pytest.raises(UsageError) as info:
        select({"OPENAI_API_KEY": "", "PATH": "/usr/bin"})
    assert str(info.value) == NO_PROVIDER_MESSAGE
    assert "--provider scripted --script FILE" in NO_PROVIDER_MESSAGE


def test_keys_come_only_from_the_env_mapping(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    with pytest.raises(UsageError):
        select({})


def test_anthropic_key_selects_anthropic() -> None:
    p = select({"ANTHROPIC_API_KEY": ANTHROPIC_KEY, "OPENAI_API_KEY": OPENAI_KEY})
    assert isinstance(p, AnthropicProvider)
    assert p.model == DEFAULT_ANTHROPIC_MODEL
    assert ANTHROPIC_KEY not in repr(p)


def test_openai_key_selects_openai() -> None:
    p = select({"OPENAI_API_KEY": OPENAI_KEY}, model="gpt-x")
    assert isinstance(p, OpenAIProvider)
    assert p.model == "gpt-x"
    assert OPENAI_KEY not in repr(p)
    assert select({"OPENAI_API_KEY": OPENAI_KEY}).model == DEFAULT_OPENAI_MODEL


def test_openai_base_url_env_selects_openai() -> None:
    p = select({"OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}, model="qwen")
    assert isinstance(p, OpenAIProvider)
    assert "127.0.0.1:1" in repr(p)


def test_base_url_flag_implies_openai_and_needs_a_model() -> None:
    env = {"ANTHROPIC_API_KEY": ANTHROPIC_KEY}
    p = select(env, base_url="http://127.0.0.1:1/v1", model="llama3")
    assert isinstance(p, OpenAIProvider)
    with pytest.raises(UsageError, match="--model is required"):
        select(env, base_url="http://127.0.0.1:1/v1")


def test_explicit_provider_needs_its_key() -> None:
    with pytest.raises(UsageError, match="ANTHROPIC_API_KEY"):
        select({"OPENAI_API_KEY": OPENAI_KEY}, provider="anthropic")
    with pytest.raises(UsageError, match="OPENAI_API_KEY"):
        select({"ANTHROPIC_API_KEY": ANTHROPIC_KEY}, provider="openai")


def test_scripted_requires_a_script(script_file: Path) -> None:
    with pytest.raises(UsageError, match="--provider scripted requires --script FILE"):
        select({}, provider="scripted")
    p = select({"ANTHROPIC_API_KEY": ANTHROPIC_KEY}, provider="scripted", script=script_file)
    assert isinstance(p, ScriptedProvider)
    assert isinstance(select({}, script=script_file), ScriptedProvider)  # --script implies it


def test_script_problems_are_usage_errors(tmp_path: Path, script_file: Path) -> None:
    with pytest.raises(UsageError, match="script file not found"):
        select({}, provider="scripted", script=tmp_path / "missing.yaml")
    with pytest.raises(UsageError, match="only used with --provider scripted"):
        select({"OPENAI_API_KEY": OPENAI_KEY}, provider="openai", script=script_file)
    with pytest.raises(UsageError, match="--base-url does not apply"):
        select({}, provider="scripted", script=script_file, base_url="http://x")


def test_unknown_provider() -> None:
    with pytest.raises(UsageError, match="unknown provider 'gemini'"):
        select({"ANTHROPIC_API_KEY": ANTHROPIC_KEY}, provider="gemini")


def test_selected_providers_use_the_env_key_and_url() -> None:
    with FakeLLMServer() as server:
        server.enqueue(anthropic_message([{"type": "text", "text": "hi"}]))
        server.enqueue(openai_completion(content="hi"))
        req = ModelRequest(messages=[UserMessage(content="hello")], task_id="t")
        env = {"ANTHROPIC_API_KEY": ANTHROPIC_KEY, "ANTHROPIC_BASE_URL": server.url}
        assert select(env).complete(req).text == "hi"
        env = {"OPENAI_API_KEY": OPENAI_KEY, "OPENAI_BASE_URL": f"{server.url}/v1"}
        assert select(env, provider="openai", model="m").complete(req).text == "hi"
    first, second = server.requests
    assert first.path == "/v1/messages"
    assert ANTHROPIC_KEY in first.headers["authorization"]
    assert second.path == "/v1/chat/completions"
    assert second.headers["authorization"] == f"Bearer {OPENAI_KEY}"


@pytest.mark.parametrize("module", ["anti_sprawl.providers", "anti_sprawl.cli.app"])
def test_sdks_are_imported_lazily(module: str) -> None:
    code = (
        f"import {module}, sys; "
        "loaded = [m for m in ('anthropic', 'openai') if m in sys.modules]; "
        "assert not loaded, loaded"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
