"""Clean slate and cache stability, checked on every request the model received."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

from anti_sprawl.context.assemble import tool_json
from anti_sprawl.plan.model import Plan
from anti_sprawl.providers.base import ModelRequest, request_text
from anti_sprawl.providers.scripted import Script, ScriptedProvider
from anti_sprawl.run.runner import ExecuteOptions, RunSettings, execute

from . import e2e_fixture as fx

SENTINEL = "SENTINEL-7f3c-only-in-a"
SUMMARY = "a-summary-marker: added pkg/a.py with A"


def run(tmp_path: Path) -> ScriptedProvider:
    repo = fx.make_repo(tmp_path)
    (repo / "pkg" / "secret_notes.py").write_text(f"NOTE = '{SENTINEL}'\n")
    fx.git(repo, "add", "-A")
    fx.git(repo, "-c", "user.name=t", "-c", "user.email=t@l", "commit", "-qm", "notes")
    plan = fx.plan()
    plan["tasks"][0]["read_scope"] = ["pkg/base.py", "pkg/secret_notes.py"]
    script = fx.script(
        a=[
            {"text": f"I will look at the notes ({SENTINEL})."},
            {"tool": "read_file", "args": {"path": "pkg/secret_notes.py"}},
            {"tool": "write_file", "args": {"path": "pkg/a.py", "content": "A = 1\n"}},
            {"tool": "finish", "args": {"summary": SUMMARY}},
        ]
    )
    provider = ScriptedProvider(Script.from_data(script))
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    state = execute(
        Plan.model_validate(plan), repo, ExecuteOptions(provider, RunSettings(command_env=env))
    )
    assert state.status == "succeeded", {t: r.message for t, r in state.tasks.items()}
    transcript = (
        repo / ".anti-sprawl" / "runs" / state.run_id / "artifacts" / "a" / "transcript.jsonl"
    )
    assert SENTINEL in transcript.read_text()  # A really saw it
    return provider


def test_downstream_sees_summaries_never_transcripts(tmp_path: Path) -> None:
    provider = run(tmp_path)
    a_requests = provider.requests_for("a")
    assert any(SENTINEL in request_text(r) for r in a_requests)
    c_requests = provider.requests_for("c")
    assert c_requests
    for request in c_requests + provider.requests_for("b"):
        assert SENTINEL not in request.model_dump_json()
    assert SUMMARY in request_text(c_requests[0])


def _first(provider: ScriptedProvider, task: str) -> ModelRequest:
    return provider.requests_for(task)[0]


def test_sibling_prefixes_are_byte_identical(tmp_path: Path) -> None:
    provider = run(tmp_path)
    a, b = _first(provider, "a"), _first(provider, "b")
    assert a.system == b.system
    assert a.tools == b.tools
    stable = "\n".join([*(s.text for s in a.system), *(tool_json(t) for t in a.tools)])
    assert request_text(a).startswith(stable)
    assert request_text(b).startswith(stable)
    assert len(stable) > 1000  # rules, data policy and every tool schema


def test_requests_within_a_node_only_append(tmp_path: Path) -> None:
    provider = run(tmp_path)
    for task in ("a", "b", "c"):
        requests = provider.requests_for(task)
        assert len(requests) >= 3
        for earlier, later in itertools.pairwise(requests):
            assert later.system == earlier.system
            assert later.tools == earlier.tools
            assert later.messages[: len(earlier.messages)] == earlier.messages
            assert request_text(later).startswith(request_text(earlier))


def test_memory_facts_reach_only_matching_nodes(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path)
    (repo / ".anti-sprawl").mkdir()
    (repo / ".anti-sprawl" / "memory.yaml").write_text(
        "facts:\n"
        "  - {text: 'MEM-A: pkg.a must stay dependency-free', source: user_stated,"
        " scope: [pkg/a.py], expires: 2099-01-01T00:00:00Z}\n"
        "  - {text: 'MEM-OLD: expired fact', source: user_stated, scope: ['**'],"
        " expires: 2000-01-01T00:00:00Z}\n"
        "  - {text: 'MEM-GUESS: b is probably slow', source: model_inferred,"
        " scope: [pkg/b.py], expires: 2099-01-01T00:00:00Z}\n"
        "  - {text: 'MEM-RUMOUR: from nowhere', source: forum, scope: ['**'],"
        " expires: 2099-01-01T00:00:00Z}\n"
    )
    provider = ScriptedProvider(Script.from_data(fx.script()))
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    state = execute(
        Plan.model_validate(fx.plan()), repo, ExecuteOptions(provider, RunSettings(command_env=env))
    )
    assert state.status == "succeeded"
    a, b = request_text(_first(provider, "a")), request_text(_first(provider, "b"))
    assert "MEM-A" in a
    assert "MEM-A" not in b
    assert "MEM-GUESS" in b
    assert "hypothes" in b.lower()
    for text in (a, b):
        assert "MEM-OLD" not in text
        assert "MEM-RUMOUR" not in text
