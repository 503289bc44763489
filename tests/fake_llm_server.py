"""A tiny HTTP server on 127.0.0.1 that speaks the Anthropic and OpenAI wire formats.

Tests point the real SDKs at it with ``base_url``: it serves a queue of canned responses
(status, JSON body, headers, optional delay) and records every request's path, headers and body.
A chat-completions body enqueued with ``stream=True`` is sent as server-sent events, the way
llama.cpp streams (``openai_events``), one event at a time; ``streams_left()`` counts the
streams whose client went away before the last event.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any


@dataclass
class Canned:
    """One response to serve."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    raw: bytes | None = None  # sent as-is instead of ``body`` (a truncated or non-JSON body)
    events: list[bytes] | None = None  # server-sent events, written one by one


@dataclass
class Recorded:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


class FakeLLMServer:
    """Threaded server with a FIFO of canned responses; use as a context manager."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        # Fixed JSON answers by path (GET, or POST outside the queue): a server's model info.
        self.routes: dict[str, Any] = {}  # a JSON body (200), or a Canned
        self.gets: list[Recorded] = []  # GETs, and POSTs to a routed path (not in requests)
        self._queue: list[Canned] = []
        self._left = 0  # streamed answers the client stopped reading
        self._streaming = 0  # streams being written now
        self._lock = threading.Lock()
        self._streams_done = threading.Condition(self._lock)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        # A short poll interval keeps shutdown (each test's teardown) fast.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def enqueue(
        self,
        body: Any = None,
        *,
        status: int = 200,
        headers: dict[str, str] | None = None,
        delay: float = 0.0,
        raw: bytes | None = None,
        stream: bool = False,
        piece: int = 24,
    ) -> None:
        """Queue one response; ``stream``: the chat-completions ``body`` as events, its
        content ``piece`` characters each."""
        events = openai_events(body, piece) if stream else None
        with self._lock:
            self._queue.append(Canned(status, body, dict(headers or {}), delay, raw, events))

    def streams_left(self, timeout: float = 10.0) -> int:
        """How many streamed answers the client stopped reading before their end, once every
        stream begun has ended (a server sees a client gone only at its next write)."""
        with self._streams_done:
            self._streams_done.wait_for(lambda: self._streaming == 0, timeout)
            return self._left

    def clear(self) -> None:
        """Drop the responses not served yet."""
        with self._lock:
            self._queue.clear()

    def __enter__(self) -> FakeLLMServer:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def _routed(self, recorded: Recorded) -> Canned | None:
        """The fixed answer for the request's path; a GET with none is a 404 (only POSTs are
        queued). Either way a GET is kept in ``gets``, apart from the queued ``requests``."""
        answer = self.routes.get(recorded.path)
        if answer is None and recorded.method != "GET":
            return None
        with self._lock:
            self.gets.append(recorded)
        if answer is None:
            return Canned(404, {"error": "not found"})
        return answer if isinstance(answer, Canned) else Canned(200, answer)

    def _next(self, recorded: Recorded) -> Canned:
        with self._lock:
            self.requests.append(recorded)
            if self._queue:
                return self._queue.pop(0)
        return Canned(500, {"error": {"type": "fake", "message": "no canned response left"}})

    def _send(self, handler: BaseHTTPRequestHandler, canned: Canned) -> None:
        """One canned answer, whole (JSON unless its headers say otherwise)."""
        if canned.raw is not None:
            payload = canned.raw
        else:
            payload = b"" if canned.body is None else json.dumps(canned.body).encode()
        try:
            handler.send_response(canned.status)
            if "content-type" not in {k.lower() for k in canned.headers}:
                handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(payload)))
            for key, value in canned.headers.items():
                handler.send_header(key, value)
            handler.end_headers()
            handler.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test)

    def _send_events(self, handler: BaseHTTPRequestHandler, events: list[bytes]) -> None:
        """The events with a pause between them, as a server generating them does, so a
        client that stops reading is seen at the next write."""
        with self._lock:
            self._streaming += 1
        left = False
        try:
            handler.send_response(200)
            handler.send_header("Content-Type", "text/event-stream")
            handler.end_headers()
            for event in events:
                handler.wfile.write(event)
                handler.wfile.flush()
                time.sleep(0.002)
        except (BrokenPipeError, ConnectionResetError):
            left = True
        finally:
            with self._streams_done:
                self._streaming -= 1
                self._left += left
                self._streams_done.notify_all()

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # a models list (doctor, the served window): the routes
                self.do_POST()

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body: Any = json.loads(raw) if raw else None
                except json.JSONDecodeError:
                    body = raw.decode("utf-8", "replace")
                headers = {k.lower(): v for k, v in self.headers.items()}
                recorded = Recorded(self.command, self.path, headers, body)
                canned = server._routed(recorded) or server._next(recorded)
                if canned.delay:
                    time.sleep(canned.delay)
                if canned.events is not None:
                    server._send_events(self, canned.events)
                else:
                    server._send(self, canned)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


def openai_events(body: dict[str, Any], piece: int = 24) -> list[bytes]:
    """A chat-completions ``body`` as the server-sent events llama.cpp's server streams: the
    role, the content ``piece`` characters at a time, each tool call, the finish reason, the
    usage in an event of its own, then ``[DONE]``."""
    choice = body["choices"][0]
    message = choice.get("message") or {}
    head = {k: body[k] for k in ("id", "model") if k in body} | {"object": "chat.completion.chunk"}

    def event(delta: dict[str, Any], finish: str | None = None, **more: Any) -> bytes:
        data = {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return b"data: " + json.dumps(data | more).encode() + b"\n\n"

    events = [event({"role": "assistant", "content": None})]
    text = message.get("content") or ""
    events += [event({"content": text[i : i + piece]}) for i in range(0, len(text), piece)]
    for index, call in enumerate(message.get("tool_calls") or []):
        events.append(event({"tool_calls": [{"index": index, **call}]}))
    events.append(event({}, choice.get("finish_reason")))
    if "usage" in body:
        usage = {**head, "choices": [], "usage": body["usage"]}
        events.append(b"data: " + json.dumps(usage).encode() + b"\n\n")
    return [*events, b"data: [DONE]\n\n"]


def anthropic_message(
    content: list[dict[str, Any]],
    *,
    stop_reason: str = "end_turn",
    usage: dict[str, int] | None = None,
    model: str = "claude-test",
    msg_id: str = "msg_01",
) -> dict[str, Any]:
    """A Messages API response body."""
    return {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage or {"input_tokens": 10, "output_tokens": 5},
    }


def anthropic_error(kind: str, message: str) -> dict[str, Any]:
    """A Messages API error body."""
    return {"type": "error", "error": {"type": kind, "message": message}}


def openai_completion(
    *,
    content: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    finish_reason: str | None = "stop",
    usage: dict[str, Any] | None = None,
    model: str = "gpt-test",
    completion_id: str | None = "chatcmpl-1",
) -> dict[str, Any]:
    """A chat completions response body; ``None`` fields are left out, as lax servers do."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    choice: dict[str, Any] = {"index": 0, "message": message}
    if finish_reason is not None:
        choice["finish_reason"] = finish_reason
    body: dict[str, Any] = {
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [choice],
    }
    if completion_id is not None:
        body["id"] = completion_id
    if usage is not None:
        body["usage"] = usage
    return body


def openai_tool_call(call_id: str | None, name: str, arguments: str) -> dict[str, Any]:
    call: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": arguments}}
    if call_id is not None:
        call["id"] = call_id
    return call


def enqueue_node(server: FakeLLMServer, path: str, usage: dict[str, Any], **finish: str) -> None:
    """One worker's two turns as OpenAI tool calls: write ``path`` (``X = 1``), then
    ``finish`` with the given arguments (``summary``, ``interfaces``)."""
    for name, args in (("write_file", {"path": path, "content": "X = 1\n"}), ("finish", finish)):
        tool = openai_tool_call(f"call_{name}", name, json.dumps(args))
        server.enqueue(
            openai_completion(tool_calls=[tool], finish_reason="tool_calls", usage=usage)
        )
