"""A ``--base-url`` server's answers are streamed and watched (providers/streamed.py).

The real OpenAI SDK talks to the fake server on 127.0.0.1, which sends server-sent events the
way llama.cpp's server does (tests/fake_llm_server.py ``openai_events``) and notes a client
that stopped reading before the last event, which is what makes llama.cpp stop generating.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from anti_sprawl.providers import (
    BadRequest,
    MalformedResponse,
    ModelRequest,
    OpenAIProvider,
    ToolSpec,
    UserMessage,
)

from .fake_llm_server import FakeLLMServer, openai_completion

TOOLS = [
    ToolSpec(
        name="write_file",
        description="Write a file",
        parameters={
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
        },
    )
]
USAGE = {"prompt_tokens": 120, "completion_tokens": 30}
ROOT = Path(__file__).resolve().parent.parent
WRITE = '{"name": "write_file", "arguments": {"path": "calc.py", "content": "X = 1\\n"}}'


def local(server: FakeLLMServer) -> OpenAIProvider:
    return OpenAIProvider("qwen", base_url=f"{server.url}/v1", sleep=lambda _: None)


def ask(provider: OpenAIProvider) -> ModelRequest:
    return ModelRequest(
        messages=[UserMessage(content="Add X.")], tools=TOOLS, max_output_tokens=2048
    )


def events(*data: object) -> bytes:
    """A raw event stream of ``data`` (objects as JSON, strings as they are)."""
    lines = [d if isinstance(d, str) else json.dumps(d) for d in data]
    return b"".join(f"data: {line}\n\n".encode() for line in lines)


def test_a_local_server_is_asked_to_stream_and_a_hosted_api_is_not(
    server: FakeLLMServer,
) -> None:
    server.enqueue(openai_completion(content="ok", usage=USAGE), stream=True)
    response = local(server).complete(ask(local(server)))
    assert (response.text, response.usage.output_tokens) == ("ok", 30)
    assert not response.usage.estimated  # the counts of the last event
    sent = server.requests[0].body
    assert (sent["stream"], sent["stream_options"]) == (True, {"include_usage": True})
    hosted = OpenAIProvider("gpt-test", api_key="sk-test")
    assert "stream" not in hosted._params(ask(hosted))


def test_tool_calls_streamed_in_pieces_are_put_together(server: FakeLLMServer) -> None:
    """Arguments arrive in pieces, merged by the call's index, as vLLM and llama.cpp send
    them; two calls in one answer stay two."""
    pieces = ['{"path": "a.py", ', '"content": "A = 1\\n"}']
    chunks: list[object] = [
        {"choices": [{"index": 0, "delta": {"role": "assistant"}}]},
        *(
            {"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}
            for call in (
                {"index": 0, "id": "c1", "function": {"name": "write_file", "arguments": ""}},
                {"index": 0, "function": {"arguments": pieces[0]}},
                {"index": 0, "function": {"arguments": pieces[1]}},
                {"index": 1, "id": "c2", "function": {"name": "write_file", "arguments": "{}"}},
            )
        ),
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        "[DONE]",
    ]
    server.enqueue(raw=events(*chunks), headers={"Content-Type": "text/event-stream"})
    response = local(server).complete(ask(local(server)))
    assert [(c.id, c.arguments) for c in response.tool_calls] == [
        ("c1", {"path": "a.py", "content": "A = 1\n"}),
        ("c2", {}),
    ]
    assert (response.stop_reason, response.usage.estimated) == ("tool_use", True)


def test_a_reply_that_repeats_itself_is_stopped_while_it_runs(server: FakeLLMServer) -> None:
    """The recorded runaway's kind (subtract_run_e calls 1-2: one line over and over to the
    2,048-token cap, 5 minutes each): stopped once what it wrote repeats itself (its last
    2,000 characters, or all of it when shorter, compress to under a tenth), and the
    connection closed before the server's last event."""
    runaway = WRITE[:-3] + "assert subtract(2, 3) == -1\\n" * 400
    server.enqueue(openai_completion(content=runaway, finish_reason="length"), stream=True)
    response = local(server).complete(ask(local(server)))
    assert response.stop_reason == "ran_on"
    assert len(response.text) < 2_000 < 10_000 < len(runaway)
    assert response.tool_calls == []
    assert response.usage.estimated
    assert server.streams_left() == 1


def test_a_call_followed_by_the_answer_it_expects_is_the_call(server: FakeLLMServer) -> None:
    """make real-model 2026-12-04 run f, worker call 18: a write_file written as text, then
    ``<data kind="file" ...>`` as if the tool had answered, then more calls made up on that.
    The turn ends where the answer begins; the call before it is the reply."""
    text = f"```json\n{WRITE}\n```\n\n" + '<data kind="file" source="calc.py">\nX = 2\n' * 40
    server.enqueue(openai_completion(content=text, finish_reason="stop"), stream=True)
    response = local(server).complete(ask(local(server)))
    assert [(c.name, c.arguments["path"]) for c in response.tool_calls] == [
        ("write_file", "calc.py")
    ]
    assert response.stop_reason == "tool_use"
    assert server.streams_left() == 1


def test_a_whole_answer_is_cut_at_a_tool_answer_too(server: FakeLLMServer) -> None:
    """A server that ignores ``stream`` answers JSON: read whole, and cut the same way."""
    text = "<tool_response>\nERROR: blocked\n</tool_response>\n" * 30
    server.enqueue(openai_completion(content=text, finish_reason="length"))
    response = local(server).complete(ask(local(server)))
    assert (response.text, response.stop_reason) == ("", "end_turn")
    assert response.text_call_problem == "it wrote what a tool would answer, which only a tool does"


def test_a_server_that_cannot_stream_is_asked_again_unstreamed(server: FakeLLMServer) -> None:
    """llama.cpp before mid-2025 refused tools with stream; the same request goes again
    without it, and so does every later one."""
    refusal = {"error": {"type": "server_error", "message": "Cannot use tools with stream"}}
    server.enqueue(refusal, status=500)
    server.enqueue(openai_completion(content="one", usage=USAGE))
    server.enqueue(openai_completion(content="two", usage=USAGE))
    provider = local(server)
    assert provider.complete(ask(provider)).text == "one"
    assert provider.complete(ask(provider)).text == "two"
    assert [r.body.get("stream") for r in server.requests] == [True, None, None]


def test_a_refusal_about_something_else_stays_a_refusal(server: FakeLLMServer) -> None:
    server.enqueue({"error": {"message": "the request exceeds the context size"}}, status=400)
    server.enqueue(openai_completion(content="ok"), stream=True)
    provider = local(server)
    with pytest.raises(BadRequest, match="context size"):
        provider.complete(ask(provider))
    assert provider.complete(ask(provider)).text == "ok"
    assert [r.body.get("stream") for r in server.requests] == [True, True]


@pytest.mark.parametrize(
    ("stream", "message"),
    [
        (events("not json"), "not JSON"),
        (events({"error": {"message": "slot unavailable"}}), "error mid-answer: slot unavailable"),
        (
            events({"choices": [{"index": 0, "delta": {"content": "half"}}]}),
            "ended before the answer did",
        ),
        (b": keep-alive\n\n", "held no event"),
        (events(["a list"]), "not an object"),
    ],
    ids=["not-json", "error-event", "ended-early", "no-event", "not-object"],
)
def test_a_broken_stream_is_a_malformed_response(
    server: FakeLLMServer, stream: bytes, message: str
) -> None:
    """Malformed answers are retried, so each is queued as often as the provider tries."""
    for _ in range(4):
        server.enqueue(raw=stream, headers={"Content-Type": "text/event-stream"})
    provider = local(server)
    with pytest.raises(MalformedResponse, match=message):
        provider.complete(ask(provider))


def test_the_recorder_passes_a_stream_on_as_it_comes(
    tmp_path: Path, server: FakeLLMServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """``make real-model --record`` sits between anti-sprawl and the server: it must pass each
    event on as it comes, and close the server's request when the client leaves, or a stopped
    runaway would go on generating behind it (tasks/real_model.py)."""
    spec = importlib.util.spec_from_file_location("real_model", ROOT / "tasks" / "real_model.py")
    assert spec is not None
    assert spec.loader is not None
    real_model = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(real_model)
    port = int(server.url.rsplit(":", 1)[1])
    recorder = real_model.Recorder(port, tmp_path / "calls")
    runaway = "assert subtract(2, 3) == -1\n" * 400
    server.enqueue(openai_completion(content=runaway, finish_reason="length"), stream=True)
    provider = OpenAIProvider("qwen", base_url=f"http://127.0.0.1:{recorder.port}/v1")
    try:
        assert provider.complete(ask(provider)).stop_reason == "ran_on"
        assert server.streams_left() == 1
    finally:
        provider.close()
        recorder.httpd.shutdown()
        recorder.httpd.server_close()
    (entry,) = [json.loads(p.read_text()) for p in (tmp_path / "calls").iterdir()]
    assert entry["client_left"] is True
    kept = entry["response"]["choices"][0]["message"]["content"]
    assert 0 < len(kept) < len(runaway)
    assert runaway.startswith(kept)
    # make real-model 2026-12-04 run l: the report after execute raised on this entry's
    # "usage": null and hid the verdict
    assert entry["response"]["usage"] is None
    real_model.report(recorder, 1, 2.0, "")
    assert "prompt ? tok, completion ? tok, HTTP 200, stopped early" in capsys.readouterr().out
    # a node landed without the model's finish says so (run o)
    state = {"tasks": {"t": {"status": "succeeded", "unclaimed": "4 replies in a row"}}}
    real_model.report(None, 0, 2.0, json.dumps(state))
    assert "node t: succeeded (-)" in (out := capsys.readouterr().out)
    assert "never claimed: 4 replies in a row" in out


def test_a_long_passage_in_a_loop_is_stopped(server: FakeLLMServer) -> None:
    """subtract_run_i, its last call (make real-model 2026-12-04, second session, run i): a
    900-character report written 8 times over to the 2,048-token cap in 345 s. Its 2,000
    characters compress only to a fifth; it is stopped once its last 600 characters are there
    twice before."""
    fixture = Path(__file__).parent / "fixtures" / "real_model" / "subtract_run_i.json"
    body = json.loads(fixture.read_text())["calls"][-1]["response"]
    text = body["choices"][0]["message"]["content"]
    assert body["choices"][0]["finish_reason"] == "length"
    server.enqueue(body, stream=True)
    response = local(server).complete(ask(local(server)))
    assert response.stop_reason == "ran_on"
    assert len(response.text) < 4_000 < 7_000 < len(text)
    assert server.streams_left() == 1


def test_a_tag_after_a_long_answer_still_ends_the_turn(server: FakeLLMServer) -> None:
    """Each look searches for a tag only in the text new since the last one (plus a tag's
    length, for one split across events) and judges repeats in the last 20,000 characters,
    so a look costs the same however long the answer; a tool's answer after 300,000
    characters of distinct lines still ends the turn where it begins."""
    lines = "".join(f"line {i}: {i * 7919 % 104729}\n" for i in range(15_000))
    text = lines + "<tool_response>\nok\n</tool_response>\n"
    server.enqueue(openai_completion(content=text, finish_reason="stop"), stream=True, piece=300)
    response = local(server).complete(ask(local(server)))
    assert response.text == lines
    assert response.stop_reason == "end_turn"


def test_a_whole_file_in_our_data_tag_is_read_to_its_end(server: FakeLLMServer) -> None:
    """make real-model 2026-12-04 run g, call 21, and 2026-12-05 run ag, call 8: the model
    wrote its changed files the way its brief shows them, in our data tag with a bare path as
    the source. Streamed in small pieces (the tag itself split across looks), a file longer
    than a look is read to its end and kept; the tag of anything else after it still ends the
    turn there, and so does a file tag that another tag follows before it closes."""
    body = "".join(f"def f{i}(a, b):\n    return a - b + {i}\n\n\n" for i in range(40))
    files = f'# Write-scope files\n<data kind="file" source="calc.py" trust="untrusted">\n{body}</data>\n'
    note = '<data kind="failure_note" source="attempt 2" trust="untrusted">\nno_changes\n</data>\n'
    server.enqueue(openai_completion(content=files + note * 30), stream=True, piece=7)
    response = local(server).complete(ask(local(server)))
    assert response.text == files
    assert server.streams_left() == 1  # stopped at the note, before the server's last event
    unclosed = '<data kind="file" source="calc.py">\nX = 2\n' * 40
    server.enqueue(openai_completion(content=unclosed), stream=True, piece=7)
    assert local(server).complete(ask(local(server))).text == ""
    assert server.streams_left() == 2  # this one too


def test_what_ends_a_reply_as_a_tools_answer() -> None:
    """``echoed_answer_at``: a tool's answer (its source names the tool, or another kind) ends
    the reply; a whole file in our tag, closed, does not; one not closed yet is judged once
    the text stops growing."""
    from anti_sprawl.providers.limits import echoed_answer_at, unfinished_tag_at

    file = '<data kind="file" source="calc.py" trust="untrusted">\nX = 1\n</data>\n'
    read = '<data kind="file" source="read_file calc.py" trust="untrusted">\nX = 1\n</data>\n'
    assert echoed_answer_at("ok\n" + file) is None
    assert echoed_answer_at(read) == 0
    assert echoed_answer_at(file + read) == len(file)
    assert echoed_answer_at(file[:-8]) == 0  # never closed
    assert echoed_answer_at(file[:-8], growing=True) is None  # not closed yet
    half = file + '### <data kind="file" source="calc.py" trust="un'  # run ah, call 5
    assert echoed_answer_at(half, growing=True) is None  # the tag is not written yet
    assert echoed_answer_at(half) == len(file) + 4  # and never was
    assert unfinished_tag_at('text <data kind="fi') == 5
    assert unfinished_tag_at("text <da") == 5
    assert unfinished_tag_at("a < b and c") is None
    assert unfinished_tag_at(file) is None
