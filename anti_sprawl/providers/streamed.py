"""A chat-completions answer read as it is generated, so a runaway is stopped while it runs.

Why: on a CPU server a small model's runaway costs minutes. Of the 115 replies recorded from
Qwen2.5-Coder-1.5B under llama.cpp (``make real-model`` 2026-12-04, runs a-f), 7 ran to the
2,048-token output cap at 4-9 minutes each (the same lines over and over, or the answers it
expected from the tools written out as ``<tool_response>`` blocks). Read whole, each is judged
only after it ends. Read as server-sent events (``stream: true``, what every OpenAI-compatible
server speaks), the reply is watched as it grows, and 6 of the 7 end within their first 1,300
characters (of 7,400-8,500):

- where it starts writing a tool's answer (``limits.echoed_answer_at``), its turn is over:
  reading stops, and the text before the answer is read as a finished reply
  (providers/openai.py cuts it there, streamed or not);
- where its last 2,000 characters repeat themselves (``limits.repeating``), it is stopped,
  finish reason ``ran_on``, and the model is told so (``limits.cut_message``).

Closing the connection stops the generation: llama.cpp cancels a request whose client went
away (measured here: a 1,500-token answer dropped after 3 s, the next request answered in
1.2 s), so the retry or the next call does not queue behind the runaway.

The events are assembled into the body a non-streamed call would have returned (content, tool
calls merged by index, finish reason, usage from the last event when the server sends it), so
``wire.parse_body`` checks it against the same schema. A server that ignores ``stream`` and
answers JSON is read as before.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from .errors import MalformedResponse, redact
from .limits import echoed_answer_at, repeating, unfinished_tag_at

__all__ = ["RAN_ON_FINISH", "assemble_stream", "is_event_stream", "recorded_body"]

# The finish reason of an answer we stopped because it repeated itself (providers/openai.py).
RAN_ON_FINISH = "ran_on"
# How often the growing text is judged: every this many new characters.
_CHECK_EVERY = 256
# The stretch judged for repeats: longer than any reply a 2,048-token cap allows.
_JUDGED = 20_000
_LONGEST_TAG = 16  # len('<tool_response>') + 1, with room


def is_event_stream(content_type: str | None, head: bytes) -> bool:
    """Whether a body is server-sent events: by its type, or by its first bytes if untyped."""
    if content_type:
        return "text/event-stream" in content_type.lower()
    return head.lstrip().startswith((b"data:", b":"))


def _events(chunks: Iterable[bytes]) -> Iterator[str]:
    """The ``data`` of each server-sent event, in order, up to ``[DONE]``."""
    buffer = b""
    data: list[str] = []
    for chunk in chunks:
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for raw in lines:
            line = raw.rstrip(b"\r").decode("utf-8", "replace")
            if not line:
                if data:
                    yield "\n".join(data)
                    data = []
            elif line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
            # comments (":...") and the other fields (event, id, retry) carry nothing we use
    if buffer.startswith(b"data:"):
        data.append(buffer[5:].decode("utf-8", "replace").strip())
    if data:
        yield "\n".join(data)


class _Answer:
    """The body of one streamed answer, built from its events."""

    def __init__(self, provider: str) -> None:
        self.provider = provider
        self.content = ""
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish: str | None = None
        self.usage: Any = None
        self.model: Any = None
        self.id: Any = None
        self.judged = 0  # the content's length when it was last judged

    def add(self, event: Any) -> None:
        if not isinstance(event, dict):
            raise MalformedResponse(
                f"{self.provider}: an event of the answer stream is not an object"
            )
        if "error" in event:
            error = event["error"]
            message = error.get("message") if isinstance(error, dict) else error
            raise MalformedResponse(
                f"{self.provider}: the server reported an error mid-answer: "
                f"{redact(str(message))[:300]}"
            )
        self.model = event.get("model", self.model)
        self.id = event.get("id", self.id)
        if event.get("usage") is not None:
            self.usage = event["usage"]
        for choice in event.get("choices") or []:
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                self._choice(choice)

    def _choice(self, choice: dict[str, Any]) -> None:
        delta = choice.get("delta") or {}
        if not isinstance(delta, dict):
            return
        content = delta.get("content")
        if isinstance(content, str):
            self.content += content
        elif isinstance(content, list):  # typed parts, as some servers send
            self.content += "".join(p.get("text") or "" for p in content if isinstance(p, dict))
        for raw in delta.get("tool_calls") or []:
            if isinstance(raw, dict):
                self._call_delta(raw)
        if choice.get("finish_reason") is not None:
            self.finish = choice["finish_reason"]

    def _call_delta(self, raw: dict[str, Any]) -> None:
        index = raw.get("index")
        call = self.calls.setdefault(index if isinstance(index, int) else len(self.calls), {})
        if raw.get("id") is not None:
            call["id"] = raw["id"]
        function = raw.get("function") or {}
        if not isinstance(function, dict):
            return
        if function.get("name"):
            call["name"] = function["name"]
        arguments = function.get("arguments")
        if isinstance(arguments, str) and isinstance(call.get("arguments", ""), str):
            call["arguments"] = call.get("arguments", "") + arguments
        elif arguments is not None:
            call["arguments"] = arguments  # a lax server's whole object

    def ran_on(self) -> bool:
        """Judge the text grown since the last look: it ends where it started writing a
        tool's answer (providers/openai.py keeps the text before it), or is stopped where it
        repeats itself."""
        if len(self.content) - self.judged < _CHECK_EVERY:
            return False
        # only the text new since the last look can start a tag, and only the latest
        # stretch is judged for repeats: each look costs the same however long the answer
        # (a server streaming megabytes would otherwise make them quadratic)
        start = max(0, self.judged - _LONGEST_TAG)
        new = self.content[start:]
        pending = unfinished_tag_at(new)
        # a data tag not finished yet is looked at again, whole, next time
        self.judged = len(self.content) if pending is None else start + pending + _LONGEST_TAG
        if echoed_answer_at(new, growing=True) is not None:
            self.finish = "stop"
            return True
        if repeating(self.content[-_JUDGED:]):
            self.finish = RAN_ON_FINISH
            return True
        return False

    def body(self) -> bytes:
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.calls:
            message["tool_calls"] = [
                {
                    "id": call.get("id"),
                    "type": "function",
                    "function": {"name": call.get("name"), "arguments": call.get("arguments")},
                }
                for _, call in sorted(self.calls.items())
            ]
        body = {
            "id": self.id,
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish}],
            "usage": self.usage,
        }
        return json.dumps(body).encode()


def assemble_stream(chunks: Iterable[bytes], *, provider: str) -> bytes:
    """The chat-completions body the events in ``chunks`` make up; reading stops early when
    the answer runs on (the caller then closes the connection)."""
    answer = _Answer(provider)
    done = seen = False
    for event in _parsed(chunks, provider):
        if event is None:
            done = True
            break
        seen = True
        answer.add(event)
        if answer.finish is None and answer.ran_on():
            return answer.body()
    if not seen:
        raise MalformedResponse(f"{provider}: the answer stream held no event")
    if not done and answer.finish is None:
        raise MalformedResponse(f"{provider}: the answer stream ended before the answer did")
    return answer.body()


def recorded_body(stream: bytes) -> dict[str, Any]:
    """The body a whole recorded stream makes up, as far as it goes, unjudged: what
    ``make real-model --record`` keeps of a streamed answer (tasks/real_model.py)."""
    answer = _Answer("recorded")
    for event in _parsed([stream], "recorded"):
        if event is None:
            break
        answer.add(event)
    body: dict[str, Any] = json.loads(answer.body())
    return body


def _parsed(chunks: Iterable[bytes], provider: str) -> Iterator[Any]:
    """Each event's JSON, then None at ``[DONE]``."""
    for data in _events(chunks):
        if data.strip() == "[DONE]":
            yield None
            return
        try:
            yield json.loads(data)
        except (ValueError, RecursionError):
            head = redact(data[:40])
            raise MalformedResponse(
                f"{provider}: an event of the answer stream is not JSON ({head!r}...)"
            ) from None
