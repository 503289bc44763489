"""The overall deadline of one model call: set by --request-timeout, cut even when a body trickles.

A CPU server takes minutes to read a long first prompt (issue 23), and a server that sends a
byte a second would hold a per-read timeout forever (issue 22, item 3). The deadline is the
whole call; past it the call is abandoned as a retryable timeout, and a --base-url server (one
slot: it finishes the abandoned request first) gets at most one more identical request.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from anti_sprawl.cli.app import app
from anti_sprawl.providers.base import ModelRequest, UserMessage
from anti_sprawl.providers.errors import ProviderTimeout
from anti_sprawl.providers.limits import LOCAL_REQUEST_TIMEOUT, call_deadline
from anti_sprawl.providers.openai import OpenAIProvider

from .fake_llm_server import FakeLLMServer, openai_completion
from .test_no_changes import execute, plan

runner = CliRunner()
pytestmark = pytest.mark.usefixtures("python_on_path")
BODY = json.dumps(openai_completion(content="done")).encode()


class TricklingServer:
    """Answers every request with headers at once, then its body one byte a second."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sent: list[int] = []  # bytes of body sent, per request
        self.done = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"

    def _serve(self) -> None:
        while not self.done.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return  # the client went away before its request was whole
                data += chunk
            head, _, rest = data.partition(b"\r\n\r\n")
            sizes = [
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            ]
            length = sizes[0] if sizes else 0  # a GET (a models list) has no body
            while len(rest) < length:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                rest += chunk
            index = len(self.sent)
            self.sent.append(0)
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(BODY)}\r\n\r\n".encode()
            )
            for byte in BODY:
                if self.done.wait(1.0):
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    return  # the client abandoned the call
                self.sent[index] += 1

    def close(self) -> None:
        self.done.set()
        self.sock.close()


@pytest.fixture
def trickling() -> Iterator[TricklingServer]:
    server = TricklingServer()
    yield server
    server.close()


def request() -> ModelRequest:
    return ModelRequest(messages=[UserMessage(content="hi")], max_output_tokens=64)


def test_a_trickling_body_cannot_extend_the_deadline(trickling: TricklingServer) -> None:
    sleeps: list[float] = []
    provider = OpenAIProvider(
        "local", base_url=trickling.url, timeout=3.0, attempts=4, sleep=sleeps.append
    )
    with pytest.raises(ProviderTimeout) as info:
        provider.complete(request())
    assert info.value.retryable
    # abandoned mid-body: a byte a second never finished a body of this size
    assert len(trickling.sent) == 2
    assert all(0 < n < len(BODY) for n in trickling.sent)
    # a --base-url server gets one more identical request after a wait, not a storm
    assert sleeps == [3.0]
    assert "the 3 s deadline of one call" in str(info.value)
    assert "the server may still be busy" in str(info.value)


def test_defaults_are_larger_for_a_local_server() -> None:
    assert call_deadline(None, 4096, local=True) == LOCAL_REQUEST_TIMEOUT
    assert call_deadline(None, 4096, local=False) < LOCAL_REQUEST_TIMEOUT
    assert call_deadline(42.0, 128_000, local=False) == 42.0


@pytest.mark.parametrize("how", ["flag", "environment"])
def test_the_setting_reaches_the_sdk_call(tmp_path: Path, server: FakeLLMServer, how: str) -> None:

    for _ in range(3):
        server.enqueue(openai_completion(content="late"), delay=3.0)
    args = ["--request-timeout", "1"] if how == "flag" else []
    env = {"ANTI_SPRAWL_REQUEST_TIMEOUT": "1"} if how == "environment" else {}
    _, result = execute(tmp_path, server, plan(max_attempts=1), *args, env=env)
    assert result.exit_code == 1, result.output
    a = json.loads(result.stdout)["tasks"]["a"]
    assert a["reason"] == "provider"
    assert "timed out" in a["message"]
    assert "the server may still be busy" in a["message"]
    assert len(server.requests) == 2  # the first and one retry, never four


def test_a_bad_setting_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = runner.invoke(app, ["plan", "x", "--repo", str(tmp_path), "--request-timeout", "0"])
    assert result.exit_code == 2
    assert "--request-timeout" in result.output
