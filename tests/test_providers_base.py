"""Normalized types, the retry helper, secret redaction and request token estimates."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import format_datetime

import pytest

from anti_sprawl.errors import ProviderError
from anti_sprawl.providers import (
    AssistantMessage,
    BadRequest,
    ModelRequest,
    Overloaded,
    RateLimited,
    SystemBlock,
    ToolCall,
    ToolResult,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
    estimate_request_tokens,
    raw_request_tokens,
    request_text,
    with_retries,
)
from anti_sprawl.providers.errors import parse_retry_after, redact
from anti_sprawl.providers.retry import MAX_RETRY_AFTER
from anti_sprawl.tokens import TokenCounter


class Flaky:
    """Fails with the given errors, then returns "ok"."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def test_success_needs_no_sleep() -> None:
    sleeps = Sleeps()
    assert with_retries(Flaky(), sleep=sleeps) == "ok"
    assert sleeps == []


def test_backoff_doubles_and_is_capped() -> None:
    fn = Flaky(*[Overloaded("busy") for _ in range(5)])
    sleeps = Sleeps()
    result = with_retries(
        fn, attempts=6, base_delay=0.5, max_delay=4, sleep=sleeps, rand=lambda: 1.0
    )
    assert result == "ok"
    assert fn.calls == 6
    assert sleeps == [0.5, 1.0, 2.0, 4.0, 4.0]


def test_jitter_stays_within_half_to_full_delay() -> None:
    sleeps = Sleeps()
    with_retries(Flaky(Overloaded("x"), Overloaded("x")), sleep=sleeps, rand=lambda: 0.0)
    assert sleeps == [0.25, 0.5]


def test_attempts_are_bounded_and_the_last_error_propagates() -> None:
    errors = [RateLimited(f"limited {n}") for n in range(4)]
    fn = Flaky(*errors)
    sleeps = Sleeps()
    with pytest.raises(RateLimited, match="limited 2"):
        with_retries(fn, attempts=3, sleep=sleeps)
    assert fn.calls == 3
    assert len(sleeps) == 2


def test_non_retryable_errors_are_raised_at_once() -> None:
    fn = Flaky(BadRequest("nope"))
    sleeps = Sleeps()
    with pytest.raises(BadRequest):
        with_retries(fn, sleep=sleeps)
    assert fn.calls == 1
    assert sleeps == []
    generic = Flaky(ProviderError("plain", retryable=False))
    with pytest.raises(ProviderError):
        with_retries(generic, sleep=sleeps)
    other = Flaky(KeyError("not ours"))
    with pytest.raises(KeyError):
        with_retries(other, sleep=sleeps)
    assert other.calls == 1
    assert sleeps == []


def test_retry_after_hint_replaces_the_backoff() -> None:
    sleeps = Sleeps()
    with_retries(Flaky(RateLimited("x", retry_after=3.0)), sleep=sleeps, max_delay=1)
    assert sleeps == [3.0]


def test_an_excessive_retry_after_is_not_waited_for() -> None:
    fn = Flaky(RateLimited("x", retry_after=MAX_RETRY_AFTER + 1))
    sleeps = Sleeps()
    with pytest.raises(RateLimited):
        with_retries(fn, sleep=sleeps)
    assert sleeps == []


def test_attempts_must_be_positive() -> None:
    with pytest.raises(ValueError, match="attempts must be at least 1"):
        with_retries(Flaky(), attempts=0)


def test_typed_errors_fix_retryability() -> None:
    assert RateLimited("x", status=429).retryable
    assert not BadRequest("x", status=400).retryable
    assert RateLimited("x").status is None


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("key=sk-ant-api03-abcdefgh12345", "sk-ant-api03-abcdefgh12345"),
        ("Authorization: Bearer abc.def-123", "abc.def-123"),
        ('{"x-api-key": "k-123456789"}', "k-123456789"),
        ("headers: x-api-key=zz-secret-value", "zz-secret-value"),
        ("provided: sk-proj-1234567890abc.", "sk-proj-1234567890abc"),
    ],
)
def test_redact_patterns(text: str, secret: str) -> None:
    out = redact(text)
    assert secret not in out
    assert "[REDACTED:" in out


def test_redact_known_values() -> None:
    assert redact("the key is hunter2-long", ["hunter2-long"]) == "the key is [REDACTED:env]"
    assert redact("nothing here") == "nothing here"


def test_parse_retry_after() -> None:
    assert parse_retry_after({"retry-after": "2"}) == 2.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None
    assert parse_retry_after(None) is None
    now = datetime(2030, 1, 1, tzinfo=UTC).timestamp()
    date = format_datetime(datetime(2030, 1, 1, 0, 0, 30, tzinfo=UTC), usegmt=True)
    assert parse_retry_after({"retry-after": date}, now=now) == 30.0


def conversation() -> ModelRequest:
    return ModelRequest(
        system=[SystemBlock(name="rules", text="Be careful.", cache=True)],
        messages=[
            UserMessage(content="Add the event."),
            AssistantMessage(
                text="Reading.",
                tool_calls=[ToolCall(id="c1", name="read_file", arguments={"path": "a"})],
            ),
            ToolResultMessage(results=[ToolResult(call_id="c1", content="x = 1")]),
        ],
        tools=[ToolSpec(name="read_file", description="Read a file")],
        task_id="t1",
    )


def test_messages_round_trip_through_json() -> None:
    request = conversation()
    again = ModelRequest.model_validate_json(request.model_dump_json())
    assert again == request
    assert [type(m) for m in again.messages] == [UserMessage, AssistantMessage, ToolResultMessage]


@pytest.mark.parametrize(
    "change",
    [
        lambda r: r.model_copy(update={"system": [SystemBlock(text="Be careful!!")]}),
        lambda r: r.model_copy(update={"tools": []}),
        lambda r: r.model_copy(update={"messages": r.messages[:1]}),
    ],
)
def test_request_text_covers_every_part(change: object) -> None:
    request = conversation()
    changed = change(request)  # type: ignore[operator]
    assert request_text(changed) != request_text(request)


def test_estimates_scale_with_calibration() -> None:
    request = conversation()
    raw = raw_request_tokens(request)
    assert raw > 0
    assert estimate_request_tokens(request, TokenCounter()) == raw
    assert estimate_request_tokens(request, TokenCounter(ratio=2.0)) == 2 * raw


def test_usage_total() -> None:
    usage = Usage(input_tokens=100, output_tokens=5, cache_read_tokens=80)
    assert usage.total == 105
