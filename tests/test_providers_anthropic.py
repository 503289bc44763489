"""The Anthropic provider against a local server speaking the Messages API wire format."""

from __future__ import annotations

import logging
import socket

import pytest

from anti_sprawl.errors import ProviderError
from anti_sprawl.providers import (
    AnthropicProvider,
    AssistantMessage,
    AuthenticationFailed,
    BadRequest,
    ModelRequest,
    Overloaded,
    Provider,
    ProviderConnectionError,
    ProviderTimeout,
    SystemBlock,
    ToolCall,
    ToolResult,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)

from .fake_llm_server import FakeLLMServer, anthropic_error, anthropic_message

KEY = "sk-ant-test-SECRET-0123456789abcdef"
TOOLS = [
    ToolSpec(
        name="read_file",
        description="Read a file",
        parameters={"type": "object", "properties": {"path": {"type": "string"}}},
    ),
    ToolSpec(name="finish", description="Finish", parameters={"type": "object"}),
]
SYSTEM = [
    SystemBlock(name="rules", text="You are a careful worker.", cache=False),
    SystemBlock(name="tools", text="Tool rules.", cache=True),
    SystemBlock(name="task", text="Task: add an event.", cache=False),
]


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def provider(
    server: FakeLLMServer, sleeps: Sleeps | None = None, **kw: object
) -> AnthropicProvider:
    return AnthropicProvider(
        "claude-test",
        api_key=KEY,
        base_url=server.url,
        sleep=sleeps if sleeps is not None else Sleeps(),
        **kw,  # type: ignore[arg-type]
    )


def request(*messages: object) -> ModelRequest:
    msgs = list(messages) or [UserMessage(content="Please add the event.")]
    return ModelRequest(
        system=SYSTEM, messages=msgs, tools=TOOLS, max_output_tokens=512, task_id="t1"
    )  # type: ignore[arg-type]


def test_two_turn_tool_use_exchange(server: FakeLLMServer) -> None:
    server.enqueue(
        anthropic_message(
            [
                {"type": "text", "text": "Reading first."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "read_file",
                    "input": {"path": "a.py"},
                },
            ],
            stop_reason="tool_use",
        )
    )
    server.enqueue(anthropic_message([{"type": "text", "text": "All done."}], msg_id="msg_02"))
    p = provider(server)
    assert isinstance(p, Provider)

    first = p.complete(request())
    assert first.stop_reason == "tool_use"
    assert first.text == "Reading first."
    assert first.tool_calls == [
        ToolCall(id="toolu_1", name="read_file", arguments={"path": "a.py"})
    ]
    assert first.raw_id == "msg_01"
    assert first.model == "claude-test"

    history = [
        UserMessage(content="Please add the event."),
        AssistantMessage(text=first.text, tool_calls=first.tool_calls),
        ToolResultMessage(results=[ToolResult(call_id="toolu_1", content="x = 1", is_error=False)]),
    ]
    second = p.complete(request(*history))
    assert second.stop_reason == "end_turn"
    assert second.text == "All done."
    assert second.tool_calls == []

    assert [r.path for r in server.requests] == ["/v1/messages", "/v1/messages"]
    sent = server.requests[1].body
    assert sent["model"] == "claude-test"
    assert sent["max_tokens"] == 512
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "user"]
    assert sent["messages"][1]["content"][1] == {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "read_file",
        "input": {"path": "a.py"},
    }
    assert sent["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "x = 1", "is_error": False}
    ]
    # The SDK sends the key itself (as a bearer token in SDK 2.x); we only pass it through.
    assert KEY in server.requests[0].headers["authorization"]


def test_cache_control_marks_the_stable_prefix(server: FakeLLMServer) -> None:
    server.enqueue(anthropic_message([{"type": "text", "text": "ok"}]))
    provider(server).complete(request())
    body = server.requests[0].body
    marks = [("cache_control" in block) for block in body["system"]]
    assert marks == [False, True, False]  # the last block marked cache=True, only
    assert body["system"][1]["cache_control"] == {"type": "ephemeral"}
    assert [("cache_control" in tool) for tool in body["tools"]] == [False, True]
    assert body["tools"][0]["input_schema"] == TOOLS[0].parameters


def test_usage_includes_cache_fields(server: FakeLLMServer) -> None:
    server.enqueue(
        anthropic_message(
            [{"type": "text", "text": "ok"}],
            usage={
                "input_tokens": 100,
                "output_tokens": 20,
                "cache_read_input_tokens": 1000,
                "cache_creation_input_tokens": 50,
            },
        )
    )
    usage = provider(server).complete(request()).usage
    # Anthropic's input_tokens excludes cached tokens; ours includes them.
    assert (usage.input_tokens, usage.output_tokens) == (1150, 20)
    assert (usage.cache_read_tokens, usage.cache_write_tokens) == (1000, 50)
    assert usage.total == 1170
    assert not usage.estimated


def test_rate_limit_is_retried_by_our_helper(server: FakeLLMServer) -> None:
    server.enqueue(
        anthropic_error("rate_limit_error", "slow down"), status=429, headers={"retry-after": "0"}
    )
    server.enqueue(anthropic_message([{"type": "text", "text": "ok"}]))
    sleeps = Sleeps()
    response = provider(server, sleeps).complete(request())
    assert response.text == "ok"
    assert len(server.requests) == 2
    assert sleeps == [0.0]  # our with_retries slept, honouring retry-after


def test_overloaded_retries_are_bounded(server: FakeLLMServer) -> None:
    for _ in range(3):
        server.enqueue(anthropic_error("overloaded_error", "busy"), status=529)
    sleeps = Sleeps()
    with pytest.raises(Overloaded) as info:
        provider(server, sleeps, attempts=3).complete(request())
    assert info.value.retryable
    assert info.value.status == 529
    assert len(server.requests) == 3
    assert len(sleeps) == 2
    assert all(0 < s <= 8 for s in sleeps)


def test_bad_request_is_not_retried(server: FakeLLMServer) -> None:
    server.enqueue(anthropic_error("invalid_request_error", "max_tokens too big"), status=400)
    sleeps = Sleeps()
    with pytest.raises(BadRequest) as info:
        provider(server, sleeps).complete(request())
    assert info.value.status == 400
    assert not info.value.retryable
    assert "max_tokens too big" in str(info.value)
    assert len(server.requests) == 1
    assert sleeps == []


def test_authentication_failure_never_shows_the_key(
    server: FakeLLMServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.enqueue(anthropic_error("authentication_error", f"invalid x-api-key: {KEY}"), status=401)
    p = provider(server)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(AuthenticationFailed) as info:
        p.complete(request())
    err = info.value
    assert isinstance(err, ProviderError)
    assert not err.retryable
    assert err.status == 401
    assert "authentication_error" in str(err)
    for text in (
        str(err),
        repr(err),
        str(err.__cause__),
        repr(err.__cause__),
        repr(p),
        caplog.text,
    ):
        assert KEY not in text
    assert len(server.requests) == 1


def test_connection_refused_is_retryable_connection_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    sleeps = Sleeps()
    p = AnthropicProvider(
        "claude-test", api_key=KEY, base_url=f"http://127.0.0.1:{port}", attempts=2, sleep=sleeps
    )
    with pytest.raises(ProviderConnectionError) as info:
        p.complete(request())
    assert info.value.retryable
    assert len(sleeps) == 1


def test_timeout_is_translated(server: FakeLLMServer) -> None:
    server.enqueue(anthropic_message([{"type": "text", "text": "late"}]), delay=1.0)
    p = provider(server, timeout=0.2, attempts=1)
    with pytest.raises(ProviderTimeout):
        p.complete(request())


def test_consecutive_user_side_messages_are_merged(server: FakeLLMServer) -> None:
    server.enqueue(anthropic_message([{"type": "text", "text": "ok"}]))
    history = [
        UserMessage(content="go"),
        AssistantMessage(tool_calls=[ToolCall(id="c1", name="finish", arguments={})]),
        ToolResultMessage(results=[ToolResult(call_id="c1", content="bad args", is_error=True)]),
        UserMessage(content="Continue."),
    ]
    provider(server).complete(request(*history))
    messages = server.requests[0].body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert [b["type"] for b in messages[2]["content"]] == ["tool_result", "text"]
    assert messages[2]["content"][0]["is_error"] is True
