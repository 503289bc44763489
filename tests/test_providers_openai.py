"""The OpenAI provider against a local server speaking the chat completions wire format."""

from __future__ import annotations

import json
import logging

import pytest

from anti_sprawl.providers import (
    INVALID_ARGUMENTS_KEY,
    AssistantMessage,
    AuthenticationFailed,
    BadRequest,
    ModelRequest,
    OpenAIProvider,
    Provider,
    RateLimited,
    SystemBlock,
    ToolCall,
    ToolResult,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
    raw_request_tokens,
)
from anti_sprawl.providers.openai import parse_arguments, to_openai_params

from .fake_llm_server import FakeLLMServer, openai_completion, openai_tool_call

KEY = "sk-proj-test-SECRET-0123456789abcdef"
TOOLS = [
    ToolSpec(
        name="read_file",
        description="Read a file",
        parameters={"type": "object", "properties": {"path": {"type": "string"}}},
    )
]
SYSTEM = [SystemBlock(text="You are a careful worker.", cache=True), SystemBlock(text="Task: X.")]


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def provider(
    server: FakeLLMServer, sleeps: Sleeps | None = None, api_key: str | None = KEY
) -> OpenAIProvider:
    return OpenAIProvider(
        "gpt-test",
        api_key=api_key,
        base_url=f"{server.url}/v1",
        sleep=sleeps if sleeps is not None else Sleeps(),
    )


def request(*messages: object) -> ModelRequest:
    msgs = list(messages) or [UserMessage(content="Please add the event.")]
    return ModelRequest(
        system=SYSTEM,
        messages=msgs,  # type: ignore[arg-type]
        tools=TOOLS,
        max_output_tokens=256,
        task_id="t1",
    )


def error_body(message: str, kind: str) -> dict[str, object]:
    return {"error": {"message": message, "type": kind, "code": None}}


def test_two_turn_tool_use_exchange(server: FakeLLMServer) -> None:
    server.enqueue(
        openai_completion(
            tool_calls=[openai_tool_call("call_1", "read_file", '{"path": "a.py"}')],
            finish_reason="tool_calls",
            usage={"prompt_tokens": 50, "completion_tokens": 7, "total_tokens": 57},
        )
    )
    server.enqueue(
        openai_completion(
            content="All done.",
            usage={"prompt_tokens": 80, "completion_tokens": 3, "total_tokens": 83},
        )
    )
    p = provider(server)
    assert isinstance(p, Provider)

    first = p.complete(request())
    assert first.stop_reason == "tool_use"
    assert first.tool_calls == [ToolCall(id="call_1", name="read_file", arguments={"path": "a.py"})]
    assert first.raw_id == "chatcmpl-1"
    assert first.model == "gpt-test"

    history = [
        UserMessage(content="Please add the event."),
        AssistantMessage(text=first.text, tool_calls=first.tool_calls),
        ToolResultMessage(results=[ToolResult(call_id="call_1", content="x = 1")]),
    ]
    second = p.complete(request(*history))
    assert (second.stop_reason, second.text, second.tool_calls) == ("end_turn", "All done.", [])

    assert [r.path for r in server.requests] == ["/v1/chat/completions"] * 2
    sent = server.requests[1].body
    assert sent["model"] == "gpt-test"
    assert sent["max_tokens"] == 256  # compatible servers get max_tokens
    roles = [m["role"] for m in sent["messages"]]
    assert roles == ["system", "user", "assistant", "tool"]
    assert sent["messages"][0]["content"] == "You are a careful worker.\n\nTask: X."
    call = sent["messages"][2]["tool_calls"][0]
    assert call["id"] == "call_1"
    assert call["type"] == "function"
    assert json.loads(call["function"]["arguments"]) == {"path": "a.py"}
    assert sent["messages"][3] == {"role": "tool", "tool_call_id": "call_1", "content": "x = 1"}
    assert sent["tools"][0] == {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file",
            "parameters": TOOLS[0].parameters,
        },
    }
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_usage_with_cached_tokens(server: FakeLLMServer) -> None:
    server.enqueue(
        openai_completion(
            content="ok",
            usage={
                "prompt_tokens": 1200,
                "completion_tokens": 30,
                "total_tokens": 1230,
                "prompt_tokens_details": {"cached_tokens": 1024},
            },
        )
    )
    usage = provider(server).complete(request()).usage
    # prompt_tokens already includes the cached ones.
    assert (usage.input_tokens, usage.output_tokens, usage.total) == (1200, 30, 1230)
    assert (usage.cache_read_tokens, usage.cache_write_tokens) == (1024, 0)
    assert not usage.estimated


def test_rate_limit_is_retried_by_our_helper(server: FakeLLMServer) -> None:
    server.enqueue(
        error_body("Rate limit reached", "requests"), status=429, headers={"retry-after": "0"}
    )
    server.enqueue(openai_completion(content="ok"))
    sleeps = Sleeps()
    assert provider(server, sleeps).complete(request()).text == "ok"
    assert len(server.requests) == 2
    assert sleeps == [0.0]


def test_rate_limit_error_carries_the_hint(server: FakeLLMServer) -> None:
    server.enqueue(error_body("slow", "requests"), status=429, headers={"retry-after-ms": "1500"})
    p = OpenAIProvider("gpt-test", api_key=KEY, base_url=server.url, attempts=1)
    with pytest.raises(RateLimited) as info:
        p.complete(request())
    assert info.value.retry_after == 1.5
    assert info.value.retryable


def test_bad_request_is_not_retried(server: FakeLLMServer) -> None:
    server.enqueue(error_body("Invalid schema for function", "invalid_request_error"), status=400)
    sleeps = Sleeps()
    with pytest.raises(BadRequest) as info:
        provider(server, sleeps).complete(request())
    assert info.value.status == 400
    assert not info.value.retryable
    assert "Invalid schema for function" in str(info.value)
    assert len(server.requests) == 1
    assert sleeps == []


def test_authentication_failure_never_shows_the_key(
    server: FakeLLMServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.enqueue(
        error_body(f"Incorrect API key provided: {KEY}.", "invalid_request_error"), status=401
    )
    p = provider(server)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(AuthenticationFailed) as info:
        p.complete(request())
    err = info.value
    assert err.status == 401
    assert not err.retryable
    assert "Incorrect API key provided" in str(err)
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


def test_lax_compatible_server(server: FakeLLMServer) -> None:
    """No usage, no id, no finish_reason, a tool call without id and with broken JSON."""
    server.enqueue(
        openai_completion(
            tool_calls=[
                openai_tool_call(None, "read_file", '{"path": "a.py"'),
                openai_tool_call(None, "list_dir", ""),
            ],
            finish_reason=None,
            usage=None,
            completion_id=None,
        )
    )
    req = request()
    response = provider(server, api_key=None).complete(req)
    assert response.raw_id is None
    assert response.stop_reason == "tool_use"
    first, second = response.tool_calls
    assert first.id
    assert second.id
    assert first.id != second.id
    assert first.arguments == {INVALID_ARGUMENTS_KEY: '{"path": "a.py"'}
    assert second.arguments == {}
    assert response.usage.estimated
    assert response.usage.input_tokens == raw_request_tokens(req)
    assert response.usage.output_tokens > 0
    # A local server without a key still gets a syntactically valid placeholder.
    assert server.requests[0].headers["authorization"] == "Bearer not-needed"


def test_text_only_reply_without_finish_reason(server: FakeLLMServer) -> None:
    server.enqueue(openai_completion(content="thinking", finish_reason=None))
    response = provider(server).complete(request())
    assert (response.text, response.stop_reason) == ("thinking", "end_turn")


def test_invalid_arguments_and_errors_are_sent_back_verbatim(server: FakeLLMServer) -> None:
    server.enqueue(openai_completion(content="ok"))
    bad = ToolCall(id="c1", name="read_file", arguments={INVALID_ARGUMENTS_KEY: '{"path": '})
    history = [
        UserMessage(content="go"),
        AssistantMessage(tool_calls=[bad]),
        ToolResultMessage(results=[ToolResult(call_id="c1", content="not JSON", is_error=True)]),
    ]
    provider(server).complete(request(*history))
    messages = server.requests[0].body["messages"]
    assert messages[2]["tool_calls"][0]["function"]["arguments"] == '{"path": '
    assert messages[3]["content"] == "ERROR: not JSON"


def test_official_api_uses_max_completion_tokens() -> None:
    params = to_openai_params(request(), "gpt-5.5")
    assert params["max_completion_tokens"] == 256
    assert "max_tokens" not in params


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ("", {}),
        (None, {}),
        ({"a": 1}, {"a": 1}),
        ("[1, 2]", {INVALID_ARGUMENTS_KEY: "[1, 2]"}),
        ("{oops", {INVALID_ARGUMENTS_KEY: "{oops"}),
    ],
)
def test_parse_arguments(raw: object, expected: dict[str, object]) -> None:
    assert parse_arguments(raw) == expected
