"""The worker loop's rules, driven by the scripted provider on real files and the real firewall."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from anti_sprawl.agent.artifacts import ArtifactStore
from anti_sprawl.agent.worker import (
    TestOutcome,
    WorkerContext,
    WorkerLimits,
    WorkerResult,
    run_worker,
)
from anti_sprawl.fs.firewall import Firewall
from anti_sprawl.providers.base import (
    ModelRequest,
    SystemBlock,
    ToolResultMessage,
    UserMessage,
    raw_request_tokens,
)
from anti_sprawl.providers.scripted import Script, ScriptedProvider


@pytest.fixture
def root(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "app.py").write_text("def hello():\n    return 'hi'\n")
    (repo / "src" / "other.py").write_text("X = 1\n")
    (repo / "docs").mkdir()
    (repo / "docs" / "notes.md").write_text("notes\n")
    return repo


@pytest.fixture
def firewall(root: Path) -> Iterator[Firewall]:
    with Firewall(root, ["docs/**", "src/other.py"], ["src/app.py", "src/new.py"]) as fw:
        yield fw


def run(
    root: Path,
    firewall: Firewall,
    turns: list[Any],
    *,
    budget: int = 50_000,
    max_tool_calls: int = 20,
    tests: TestOutcome | None = None,
    task: str = "t1",
) -> tuple[WorkerResult, ScriptedProvider, ArtifactStore]:
    provider = ScriptedProvider(Script.from_data({"workers": {task: turns}}))
    artifacts = ArtifactStore(root.parent / "artifacts")
    ctx = WorkerContext(
        task_id=task,
        provider=provider,
        firewall=firewall,
        system=[SystemBlock(text="You are a worker.", cache=True)],
        first_message="Change hello() to return 'hello'.",
        limits=WorkerLimits(token_budget=budget, max_tool_calls=max_tool_calls),
        artifacts=artifacts,
        run_tests=(lambda args: tests) if tests else None,
    )
    return run_worker(ctx), provider, artifacts


FINISH = {"tool": "finish", "args": {"summary": "done"}}


def test_small_edit_succeeds(root: Path, firewall: Firewall) -> None:
    turns = [
        {"tool": "read_file", "args": {"path": "src/app.py"}},
        {"tool": "edit_file", "args": {"path": "src/app.py", "old": "'hi'", "new": "'hello'"}},
        FINISH,
    ]
    result, _, artifacts = run(root, firewall, turns)
    assert result.status == "succeeded", result.message
    assert result.finish is not None
    assert result.finish.summary == "done"
    assert "'hello'" in (root / "src" / "app.py").read_text()
    assert result.tool_calls == 3
    assert result.calls == 3
    # usage equals what the provider reported for each recorded request
    assert result.usage.input_tokens > 0
    assert result.usage.output_tokens > 0
    assert result.transcript
    assert artifacts.path(result.transcript).exists()


def test_rereading_stays_under_the_cap_until_the_script_ends(
    root: Path, firewall: Firewall
) -> None:
    turns = [{"tool": "read_file", "args": {"path": "docs/notes.md"}}] * 120
    result, provider, _ = run(root, firewall, turns, budget=3_000, max_tool_calls=500)
    # the per-call cap holds for every request actually sent
    assert all(fits(r, 3_000) for r in provider.requests)
    assert len(provider.requests) == result.calls == 121  # the last one finds the script empty
    assert (result.status, result.reason) == ("failed", "script")
    # re-reading one file collapses into one digest line, so the digest does not grow: the
    # last digest holds a single line for every call it covers (when the digest was last
    # rebuilt depends on how many tokens the fixed prompt and tool schemas take)
    digest = user_texts(provider.requests[-1])[1]
    lines = [ln for ln in digest.splitlines() if ln.startswith("- calls ")]
    assert len(lines) == 1, digest
    first, last, times = map(int, re.findall(r"calls (\d+)-(\d+) \((\d+) times\)", lines[0])[0])
    assert first == 1
    assert times == last >= 90
    assert lines[0].startswith(f"- calls 1-{last} ({last} times), by you: read_file docs/")


def test_tool_call_cap(root: Path, firewall: Firewall) -> None:
    turns = [{"tool": "read_file", "args": {"path": "docs/notes.md"}}] * 10
    result, _, _ = run(root, firewall, turns, max_tool_calls=3)
    assert (result.status, result.reason, result.tool_calls) == ("failed", "tool_calls", 3)


def test_unknown_tool_and_bad_arguments_are_observations(root: Path, firewall: Firewall) -> None:
    turns = [
        {"tool": "delete_everything", "args": {}},
        {"tool": "read_file", "args": {"file": "src/app.py"}},
        {"tool": "read_file", "args": {"path": "src/app.py", "cwd": "/"}},
        FINISH,
    ]
    result, provider, _ = run(root, firewall, turns)
    assert result.status == "succeeded"
    assert len(result.tool_errors) == 3
    contents = [r for req in provider.requests[1:] for r in last_results_of(req)]
    assert any("unknown tool 'delete_everything'" in c for c in contents)
    assert any("invalid arguments for read_file" in c for c in contents)


def last_results_of(request: Any) -> list[str]:
    last = request.messages[-1]
    return [r.content for r in last.results] if isinstance(last, ToolResultMessage) else []


def test_blocked_write_leaves_file_and_loop_goes_on(root: Path, firewall: Firewall) -> None:
    before = (root / "src" / "other.py").read_bytes()
    turns = [
        {"tool": "write_file", "args": {"path": "src/other.py", "content": "X = 2\n"}},
        {"tool": "write_file", "args": {"path": "../outside.txt", "content": "x"}},
        {"tool": "write_file", "args": {"path": "src/new.py", "content": "Y = 1\n"}},
        FINISH,
    ]
    result, provider, _ = run(root, firewall, turns)
    assert result.status == "succeeded"
    assert (root / "src" / "other.py").read_bytes() == before
    assert not (root.parent / "outside.txt").exists()
    assert (root / "src" / "new.py").read_text() == "Y = 1\n"
    assert [v.path for v in result.violations] == ["src/other.py", "../outside.txt"]
    assert all(v.op == "write" for v in result.violations)
    assert "blocked by the scope firewall" in last_results_of(provider.requests[1])[0]


def test_script_exhaustion_fails_clearly(root: Path, firewall: Firewall) -> None:
    result, _, _ = run(root, firewall, [{"tool": "read_file", "args": {"path": "src/app.py"}}])
    assert (result.status, result.reason) == ("failed", "script")
    assert "ran out" in result.message
    assert "t1" in result.message


def test_invalid_finish_is_returned_for_correction(root: Path, firewall: Firewall) -> None:
    turns = [
        {"tool": "finish", "args": {"notes": "forgot the summary"}},
        {"tool": "finish", "args": {"summary": ""}},
        {"tool": "finish", "args": {"summary": "fixed", "interfaces": "hello() -> str"}},
    ]
    result, provider, _ = run(root, firewall, turns)
    assert result.status == "succeeded"
    assert result.finish is not None
    assert result.finish.interfaces == "hello() -> str"
    assert "summary" in last_results_of(provider.requests[1])[0]
    assert result.calls == 3


def test_huge_test_output_is_truncated_and_masked(root: Path, firewall: Firewall) -> None:
    huge = "\n".join(f"line {i}: ok" for i in range(20_000)) + "\nFAILED test_x - boom"
    tests = TestOutcome(command=["pytest"], exit_code=1, tail=huge)
    turns = [
        {"tool": "run_tests", "args": {}},
        {"tool": "read_file", "args": {"path": "docs/notes.md"}},
        {"tool": "read_file", "args": {"path": "docs/notes.md"}},
        FINISH,
    ]
    result, provider, artifacts = run(root, firewall, turns, tests=tests, budget=60_000)
    assert result.status == "succeeded", result.message
    observed = last_results_of(provider.requests[1])[0]
    assert "output truncated" in observed
    assert "FAILED test_x - boom" in observed  # key lines survive
    assert len(observed) < 6_000
    ref = observed.split("full text: ")[1].split("]")[0]
    assert artifacts.path(ref).read_text().endswith("FAILED test_x - boom")
    # every request stays far below the raw output's size
    assert all(len(str(r.messages)) < 40_000 for r in provider.requests)


def test_masking_when_the_conversation_nears_the_budget(root: Path, firewall: Firewall) -> None:
    (root / "docs" / "big.md").write_text("word " * 1_100)  # under the truncation limit
    turns = [{"tool": "read_file", "args": {"path": "docs/big.md"}}] * 4 + [FINISH]
    result, provider, _ = run(root, firewall, turns, budget=10_000)
    assert result.status == "succeeded", result.message
    assert all(fits(r, 10_000) for r in provider.requests)
    later = provider.requests[-1]
    masked = [
        r.content
        for m in later.messages
        if isinstance(m, ToolResultMessage)
        for r in m.results
        if "masked" in r.content
    ]
    assert masked, "older observations should be masked near the budget"
    assert result.masked == len(masked)
    assert result.digests == 0


def fits(request: ModelRequest, cap: int) -> bool:
    """The request's input (our exact count: the scripted provider's) plus its output cap."""
    return raw_request_tokens(request) + request.max_output_tokens <= cap


def user_texts(request: ModelRequest) -> list[str]:
    return [m.content for m in request.messages if isinstance(m, UserMessage)]
