"""OpenTelemetry traces of a real run (scripted provider, real git repos, the real CLI), exported
over OTLP/HTTP to a receiver on 127.0.0.1 that decodes the protobuf (tests/otlp_receiver.py)."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from anti_sprawl import tracing
from anti_sprawl.cli.app import app
from anti_sprawl.run import otel_export

from . import e2e_fixture as fx
from .otlp_receiver import OTLPReceiver, Span

pytestmark = pytest.mark.usefixtures("python_on_path")
runner = CliRunner()

SECRET = "sk-live-otel-9f8e7d6c5b4a3f2e1d0c"  # planted in the environment and the repository
HEADER_TOKEN = "otlp-header-token-5a4b3c2d1e"  # the exporter's header: sent, never exported
FILE_TEXT = "MARKER_FILE_CONTENT_71 = 'only the worker read this'"
TOOLS = ["read_file", "write_file", "run_tests", "finish"]


@pytest.fixture
def receiver() -> Any:
    with OTLPReceiver() as r:
        yield r


def _run(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    endpoint: str,
    *extra: str,
    script: dict[str, Any] | None = None,
) -> Any:
    repo, args = _prepare(tmp_path, monkeypatch, endpoint, script)
    result = runner.invoke(app, [*args, "--json", *extra])
    return repo, result


def _prepare(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    endpoint: str,
    script: dict[str, Any] | None = None,
) -> tuple[Path, list[str]]:
    """A repository holding a marker text and a secret, the tracing environment, and the
    ``execute`` arguments of the sample plan."""
    repo = fx.make_repo(tmp_path)
    (repo / "pkg" / "base.py").write_text(
        f"def base() -> int:\n    return 1\n\n{FILE_TEXT}\nKEY = {SECRET!r}\n"
    )
    fx.git(repo, "commit", "-qam", "marker")
    plan_path, script_path = fx.write_inputs(tmp_path, fx.plan(), script or fx.script())
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"authorization=Bearer {HEADER_TOKEN}")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "otel-test-service")
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=ci")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
    monkeypatch.setenv("DEPLOY_API_TOKEN", SECRET)
    args = ["execute", str(plan_path), "--repo", str(repo), "--script", str(script_path)]
    return repo, args


def _run_apart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, endpoint: str) -> Any:
    """``_run`` in a process of its own: an exporter still retrying an unreachable receiver
    (with random jitter) must not outlive the run inside pytest, where it would change the
    ``random`` state under hypothesis's strategies in later tests."""
    repo, args = _prepare(tmp_path, monkeypatch, endpoint)
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}"
    done = subprocess.run(
        [sys.executable, "-m", "anti_sprawl", *args, "--json"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=300,
    )
    return repo, done


def _by_name(spans: list[Span], prefix: str) -> list[Span]:
    return [s for s in spans if s.name.startswith(prefix)]


def _transcript_usage(repo: Path, task: str) -> list[dict[str, Any]]:
    [path] = repo.glob(f".anti-sprawl/runs/*/artifacts/{task}/transcript.jsonl")
    events = [json.loads(line) for line in path.read_text().splitlines()]
    return [e["usage"] for e in events if e["event"] == "response"]


@pytest.mark.parametrize("executor", ["local", "dask-processes"])
def test_a_run_exports_the_genai_span_tree_with_the_journals_tokens(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    receiver: OTLPReceiver,
    executor: str,
    request: pytest.FixtureRequest,
) -> None:
    extra: list[str] = []
    if executor != "local":
        cluster = request.getfixturevalue(executor.replace("-", "_"))
        extra = ["--executor", "dask", "--dask-scheduler", cluster.scheduler_address]
    repo, result = _run(tmp_path, monkeypatch, receiver.endpoint, *extra)
    assert result.exit_code == 0, result.output
    state = json.loads(result.stdout)
    spans = receiver.spans()

    [run] = _by_name(spans, "invoke_workflow ")
    assert run.name == "invoke_workflow demo"
    assert run.parent_id == ""
    assert run.attributes["gen_ai.operation.name"] == "invoke_workflow"
    assert run.attributes["anti_sprawl.run.id"] == state["run_id"]
    assert run.resource["service.name"] == "otel-test-service"
    assert run.resource["deployment.environment"] == "ci"
    assert {s.trace_id for s in spans} == {run.trace_id}  # Dask nodes' spans joined the trace

    agents = {s.attributes["anti_sprawl.node.id"]: s for s in _by_name(spans, "invoke_agent ")}
    assert sorted(agents) == ["a", "b", "c"]
    for task, agent in agents.items():
        assert agent.name == f"invoke_agent {task}"
        assert agent.parent_id == run.span_id
        attrs = agent.attributes
        assert attrs["gen_ai.operation.name"] == "invoke_agent"
        assert attrs["anti_sprawl.scope.write"] == [f"pkg/{task}.py"]
        assert attrs["anti_sprawl.scope.read"] == ["pkg/base.py"]
        assert attrs["anti_sprawl.token_budget.per_call"] == 40_000
        assert attrs["anti_sprawl.outcome"] == "succeeded"
        assert attrs["anti_sprawl.reverted_paths"] == []

        record = state["tasks"][task]
        [attempt] = record["attempt_log"]
        chats = [s for s in _by_name(spans, "chat ") if s.parent_id == agent.span_id]
        assert len(chats) == attempt["calls"] == len(TOOLS)  # one chat span per model call
        chats.sort(key=lambda s: int(s.attributes["anti_sprawl.call.id"].rsplit("-", 1)[1]))
        for chat, usage in zip(chats, _transcript_usage(repo, task), strict=True):
            a = chat.attributes
            assert chat.name == f"chat {a['gen_ai.request.model']}"
            assert a["gen_ai.operation.name"] == "chat"
            assert a["gen_ai.provider.name"] == "scripted"
            assert a["gen_ai.usage.input_tokens"] == usage["input_tokens"] > 0
            assert a["gen_ai.usage.output_tokens"] == usage["output_tokens"]
            assert a["gen_ai.usage.cache_read.input_tokens"] == usage["cache_read_tokens"]
            assert a["gen_ai.response.finish_reasons"] == ["tool_use"]
            manifest = (
                repo / ".anti-sprawl" / "runs" / state["run_id"] / a["anti_sprawl.manifest.path"]
            )
            assert (
                a["anti_sprawl.manifest.sha256"]
                == hashlib.sha256(manifest.read_bytes()).hexdigest()
            )
        tokens = attempt["tokens"]
        assert (
            sum(c.attributes["gen_ai.usage.input_tokens"] for c in chats) == tokens["input_tokens"]
        )
        assert (
            sum(c.attributes["gen_ai.usage.output_tokens"] for c in chats)
            == tokens["output_tokens"]
        )

        tools = [s for s in _by_name(spans, "execute_tool ") if s.parent_id == agent.span_id]
        assert sorted(s.attributes["gen_ai.tool.name"] for s in tools) == sorted(TOOLS)
        for tool in tools:
            assert tool.name == f"execute_tool {tool.attributes['gen_ai.tool.name']}"
            assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
            assert tool.attributes["gen_ai.tool.call.id"]
    assert Counter(s.name.split()[0] for s in spans) == {
        "invoke_workflow": 1,
        "invoke_agent": 3,
        "chat": 12,
        "execute_tool": 12,
    }

    # No content by default: no prompt, no file text, no secret, anywhere in what was sent.
    sent = b"".join(receiver.raw)
    for text in (FILE_TEXT, SECRET, HEADER_TOKEN, "Add modules a, b and c", "Create pkg/a.py"):
        assert text.encode() not in sent
    assert not any(k.startswith("gen_ai.input") for s in spans for k in s.attributes)
    # The standard exporter environment reached the receiver (the header), and no output shows
    # it; headers never travel to a Dask worker (its own environment names its own).
    sent_headers = {h.get("authorization") for h in receiver.headers}
    assert sent_headers == ({f"Bearer {HEADER_TOKEN}"} | ({None} if extra else set()))
    assert HEADER_TOKEN not in result.output


def test_content_is_exported_only_when_opted_in_and_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, receiver: OTLPReceiver
) -> None:
    monkeypatch.setenv("ANTI_SPRAWL_OTEL_CONTENT", "1")
    # The model's own tool arguments hold the secret: only the tracing redactor stands between.
    leaky = {"tool": "read_file", "args": {"path": f"notes/{SECRET}.txt"}}
    turns = [leaky, *fx.worker_turns("pkg/a.py", "A = 1\n")]
    _, result = _run(tmp_path, monkeypatch, receiver.endpoint, script=fx.script(a=turns))
    assert result.exit_code == 0, result.output
    spans = receiver.spans()
    chats = _by_name(spans, "chat ")
    assert all("gen_ai.input.messages" in s.attributes for s in chats)
    assert any("Add modules a, b and c" in s.attributes["gen_ai.input.messages"] for s in chats)
    reads = [s for s in spans if s.attributes.get("gen_ai.tool.name") == "read_file"]
    assert any(FILE_TEXT in s.attributes["gen_ai.tool.call.result"] for s in reads)
    [asked] = [s for s in reads if "notes/" in s.attributes["gen_ai.tool.call.arguments"]]
    assert "notes/[REDACTED:env].txt" in asked.attributes["gen_ai.tool.call.arguments"]
    sent = b"".join(receiver.raw)
    assert SECRET.encode() not in sent
    assert HEADER_TOKEN.encode() not in sent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_a_receiver_that_is_down_does_not_break_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
    repo, result = _run_apart(tmp_path, monkeypatch, f"http://127.0.0.1:{_free_port()}")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert json.loads(result.stdout)["status"] == "succeeded"
    assert sorted(fx.task_trailers(repo)) == ["a", "b", "c"]
    assert result.stderr.count("traces could not be exported") == 1, result.stderr
    assert "Traceback" not in output
    assert HEADER_TOKEN not in output


# Runs the real CLI with every `opentelemetry` import failing, as when the extra is absent.
BLOCKED = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Block())
sys.argv = ["anti-sprawl", *sys.argv[1:]]
from anti_sprawl.cli.app import main
main()
"""


def _blocked(tmp_path: Path, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    repo = fx.make_repo(tmp_path)
    plan_path, script_path = fx.write_inputs(tmp_path, fx.plan(), fx.script())
    args = ["execute", str(plan_path), "--repo", str(repo), "--script", str(script_path), *extra]
    full = {**os.environ, **env}
    full.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    full.update(env)
    return subprocess.run(
        [sys.executable, "-c", BLOCKED, *args],
        capture_output=True,
        text=True,
        env=full,
        check=False,
    )


def test_otel_without_the_extra_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = _blocked(tmp_path, {}, "--otel")
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "anti-sprawl: error: --otel needs OpenTelemetry: pip install 'anti-sprawl[otel]' "
        "(opentelemetry is missing)"
    ]
    assert not list((tmp_path / "repo").glob(".anti-sprawl/runs/*"))  # nothing started


def test_the_otlp_environment_without_the_extra_is_a_note_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    done = _blocked(tmp_path, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    assert done.returncode == 0, done.stderr
    notes = [line for line in done.stderr.splitlines() if "OpenTelemetry" in line]
    assert notes == [
        "anti-sprawl: note: tracing needs OpenTelemetry: pip install 'anti-sprawl[otel]' "
        "(opentelemetry is missing); the run goes on without traces"
    ]
    assert sorted(fx.task_trailers(tmp_path / "repo")) == ["a", "b", "c"]


def test_grpc_asked_for_without_its_exporter_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    _, result = _run(tmp_path, monkeypatch, "http://127.0.0.1:9", "--otel")
    assert result.exit_code == 2
    assert "OTEL_EXPORTER_OTLP_PROTOCOL=grpc needs the gRPC exporter" in result.stderr


def test_a_run_without_tracing_never_imports_opentelemetry(tmp_path: Path) -> None:
    loaded = tmp_path / "loaded.txt"
    code = (
        "import atexit, sys\n"
        f"atexit.register(lambda: open({str(loaded)!r}, 'w').write("
        "' '.join(sorted(m for m in sys.modules if m.startswith('opentelemetry')))))\n"
        "sys.argv = ['anti-sprawl', *sys.argv[1:]]\n"
        "from anti_sprawl.cli.app import main\n"
        "main()\n"
    )
    repo = fx.make_repo(tmp_path)
    plan_path, script_path = fx.write_inputs(tmp_path, fx.plan(), fx.script())
    args = ["execute", str(plan_path), "--repo", str(repo), "--script", str(script_path)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    assert loaded.read_text() == ""
    assert sorted(fx.task_trailers(repo)) == ["a", "b", "c"]


def test_plan_traces_the_planners_calls_under_one_agent_span(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, receiver: OTLPReceiver
) -> None:
    repo = fx.make_repo(tmp_path)
    script = tmp_path / "script.yaml"
    script.write_text(json.dumps({"plan": fx.plan()}))
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
    args = ["plan", "Add modules a, b and c", "--repo", str(repo), "--script", str(script)]
    out = tmp_path / "plan.yaml"
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"{receiver.endpoint}/v1/traces")
    result = runner.invoke(app, [*args, "-o", str(out), "--otel"])
    assert result.exit_code == 0, result.output
    spans = receiver.spans()
    [planner] = _by_name(spans, "invoke_agent ")
    assert planner.name == "invoke_agent planner"
    chats = _by_name(spans, "chat ")
    assert chats
    assert all(c.parent_id == planner.span_id for c in chats)
    submits = [s for s in spans if s.attributes.get("gen_ai.tool.name") == "submit_plan"]
    assert [s.parent_id for s in submits] == [planner.span_id]
    assert b"Add modules a, b and c" not in b"".join(receiver.raw)


def test_a_failed_call_and_a_blocked_write_are_on_the_spans(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, receiver: OTLPReceiver
) -> None:
    # Node a writes outside its scope, then its script runs out (a provider error) twice.
    turns = [{"tool": "write_file", "args": {"path": "pkg/util.py", "content": "X = 1\n"}}]
    _, result = _run(tmp_path, monkeypatch, receiver.endpoint, script=fx.script(a=turns))
    assert result.exit_code == 1, result.output
    state = json.loads(result.stdout)
    assert state["tasks"]["a"]["reason"] == "script"
    spans = receiver.spans()
    agents = [s for s in _by_name(spans, "invoke_agent ") if s.name == "invoke_agent a"]
    attempts = [a["attempt"] for a in state["tasks"]["a"]["attempt_log"]]
    assert sorted(a.attributes["anti_sprawl.attempt"] for a in agents) == attempts
    [first] = [a for a in agents if a.attributes["anti_sprawl.attempt"] == 1]
    assert first.attributes["error.type"] == "script"
    assert first.attributes["anti_sprawl.outcome"] == "failed"
    assert first.attributes["anti_sprawl.blocked_paths"] == ["pkg/util.py"]
    assert first.status == 2  # STATUS_CODE_ERROR
    chats = [s for s in _by_name(spans, "chat ") if s.parent_id == first.span_id]
    assert [c.attributes.get("error.type") for c in chats] == [None, "ScriptExhausted"]
    assert "gen_ai.usage.input_tokens" not in chats[1].attributes
    assert not _by_name(spans, "invoke_agent c")  # skipped: never attempted


def test_resume_traces_only_the_nodes_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, receiver: OTLPReceiver
) -> None:
    short = [{"tool": "read_file", "args": {"path": "pkg/base.py"}}]  # then the script runs out
    repo, first = _run(tmp_path, monkeypatch, "http://127.0.0.1:9", script=fx.script(a=short))
    assert first.exit_code == 1, first.output
    run_id = json.loads(first.stdout)["run_id"]
    (tmp_path / "script.yaml").write_text(json.dumps(fx.script()))
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"{receiver.endpoint}/v1/traces")
    args = ["resume", run_id, "--repo", str(repo), "--script", str(tmp_path / "script.yaml")]
    result = runner.invoke(app, [*args, "--otel", "--json"])
    assert result.exit_code == 0, result.output
    spans = receiver.spans()
    [run] = _by_name(spans, "invoke_workflow ")
    assert run.attributes["anti_sprawl.run.id"] == run_id
    assert run.attributes["anti_sprawl.status"] == "succeeded"
    assert sorted(s.name for s in _by_name(spans, "invoke_agent ")) == [
        "invoke_agent a",
        "invoke_agent c",
    ]


# --- shutdown: the export thread never outlives it (run/otel_export.py) ---------------------


def _new_threads(before: set[int | None]) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.ident not in before and t.is_alive()]


def _one_span(monkeypatch: pytest.MonkeyPatch, endpoint: str) -> list[str]:
    """Tracing started in this process towards ``endpoint`` with one span ended and waiting in
    the batch (only ``shutdown`` sends it); the notes it says."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "600000")
    notes: list[str] = []
    assert otel_export.start(otel_export.trace_config(False, os.environ), str, notes.append)
    with tracing.agent("a", {}):
        pass
    return notes


def test_shutdown_joins_the_export_thread_when_the_receiver_is_down(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Refused connections make the exporter retry with backoff for its whole timeout (10 s by
    default): shutdown stops it and joins its thread instead of leaving it to retry, and note,
    under whatever this process does next."""
    before = {t.ident for t in threading.enumerate()}
    notes = _one_span(monkeypatch, f"http://127.0.0.1:{_free_port()}")
    assert _new_threads(before), "the batch processor exports from a thread of its own"
    otel_export.shutdown(timeout=2.0)
    assert _new_threads(before) == []
    [note] = notes
    assert "traces could not be exported" in note
    assert otel_export.current() is None


def test_shutdown_is_bounded_when_the_receiver_never_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A receiver that takes the request and never answers holds the export thread for the
    exporter's own timeout: shutdown gives up on it when its time is up, and the stopped
    exporter ends as soon as the request fails."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "120")
    before = {t.ident for t in threading.enumerate()}
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    try:
        _one_span(monkeypatch, f"http://127.0.0.1:{listener.getsockname()[1]}")
        otel_export.shutdown(timeout=1.0)
        held = _new_threads(before)
        assert held, "the request is still unanswered, so its thread must be waiting on it"
        conn, _ = listener.accept()  # the request shutdown did not wait for
    finally:
        listener.close()  # a retry is refused from now on
    conn.close()  # the request fails; the stopped exporter does not try again
    for thread in held:
        thread.join(60)
    assert _new_threads(before) == []
