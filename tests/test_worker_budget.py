"""The per-call cap, the model-call cap and the run-wide cap, on real files and the real loop.

Every check is made against what the scripted provider recorded: the requests it was sent
(their exact token count is what it charges) and nothing else.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from anti_sprawl.agent.artifacts import ArtifactStore
from anti_sprawl.agent.budget import RunBudget
from anti_sprawl.agent.digest import DIGEST_HEADER
from anti_sprawl.agent.nudges import TEXT_TURN_LIMIT
from anti_sprawl.agent.tools import WORKER_TOOLS
from anti_sprawl.agent.worker import (
    CALL_SLACK,
    TestOutcome,
    WorkerContext,
    WorkerLimits,
    WorkerResult,
    run_worker,
)
from anti_sprawl.context.manifest import conversation_items
from anti_sprawl.fs.firewall import Firewall
from anti_sprawl.providers.base import (
    ModelRequest,
    SystemBlock,
    UserMessage,
    raw_request_tokens,
    request_text,
)
from anti_sprawl.providers.scripted import Script, ScriptedProvider

FINISH = {"tool": "finish", "args": {"summary": "done"}}
SECRET_LINE = "UNIQUE-BODY-LINE"  # in file bodies only: a digest must never carry it


@pytest.fixture
def root(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "app.py").write_text("def hello():\n    return 'hi'\n")
    (repo / "docs").mkdir()
    for name in "abcde":
        body = "\n".join(
            f"{SECRET_LINE} {name} {i}: some prose about the module" for i in range(60)
        )
        (repo / "docs" / f"{name}.md").write_text(body + "\n")
    return repo


@pytest.fixture
def firewall(root: Path) -> Iterator[Firewall]:
    with Firewall(root, ["docs/**"], ["src/app.py"]) as fw:
        yield fw


def make_ctx(
    root: Path,
    firewall: Firewall,
    provider: ScriptedProvider,
    *,
    task: str = "t1",
    budget: int,
    max_tool_calls: int = 40,
    run_budget: RunBudget | None = None,
    tests: TestOutcome | None = None,
) -> WorkerContext:
    return WorkerContext(
        task_id=task,
        provider=provider,
        firewall=firewall,
        system=[SystemBlock(text="You are a worker.", cache=True)],
        first_message="Change hello() and keep the docs in mind.",
        limits=WorkerLimits(token_budget=budget, max_tool_calls=max_tool_calls),
        artifacts=ArtifactStore(root.parent / "artifacts"),
        run_tests=(lambda args: tests) if tests else None,
        run_budget=run_budget,
    )


def run(
    root: Path, firewall: Firewall, turns: list[Any], **kw: Any
) -> tuple[WorkerResult, ScriptedProvider]:
    provider = ScriptedProvider(Script.from_data({"workers": {kw.get("task", "t1"): turns}}))
    return run_worker(make_ctx(root, firewall, provider, **kw)), provider


def fits(request: ModelRequest, cap: int) -> bool:
    return raw_request_tokens(request) + request.max_output_tokens <= cap


def thirty_turns() -> list[Any]:
    """29 varied tool turns (reads, searches, rewrites, tests, listings), then finish: 30 calls."""
    turns: list[Any] = []
    for i in range(29):
        kind = i % 6
        if kind in (0, 1):
            turns.append({"tool": "read_file", "args": {"path": f"docs/{'abcde'[i % 5]}.md"}})
        elif kind == 2:
            turns.append({"tool": "grep", "args": {"pattern": f"prose.*{i % 5}", "path": "docs"}})
        elif kind == 3:
            # a whole-file rewrite: the model's own turn is big, and stays in the history
            body = "".join(f"def f{i}_{k}():\n    return {k}  # version {i}\n" for k in range(40))
            turns.append({"tool": "write_file", "args": {"path": "src/app.py", "content": body}})
        elif kind == 4:
            turns.append({"tool": "run_tests", "args": {}})
        else:
            turns.append({"tool": "list_dir", "args": {"path": "docs"}})
    return [*turns, FINISH]


def test_a_thirty_call_conversation_never_sends_a_request_over_the_cap(
    root: Path, firewall: Firewall
) -> None:
    tail = "\n".join(f"tests/test_app.py::test_{i} PASSED" for i in range(80))
    tests = TestOutcome(command=["pytest", "-q"], exit_code=0, tail=tail)
    cap = 6_000
    result, provider = run(root, firewall, thirty_turns(), budget=cap, tests=tests)
    assert result.status == "succeeded", result.message
    assert result.calls == len(provider.requests) == 30
    for request in provider.requests:
        assert fits(request, cap), request.call_id
    # both ways of shrinking the conversation were needed, and they show in the requests
    assert result.masked > 0
    assert result.digests > 0
    digests = [
        m.content
        for r in provider.requests
        for m in r.messages[1:]
        if isinstance(m, UserMessage) and m.content.startswith(DIGEST_HEADER)
    ]
    assert digests
    last = digests[-1]
    assert "read_file docs/" in last
    assert "write_file src/app.py -> ok: wrote" in last
    assert "run_tests -> ok: tests passed (exit code 0)" in last
    assert SECRET_LINE not in last  # essentials only, never the raw output
    # the manifest records the digest as untrusted: it names paths the model chose
    digested = next(r for r in provider.requests if DIGEST_HEADER in request_text(r))
    [item] = [i for i in conversation_items(digested.messages) if i.source == "digest"]
    assert (item.kind, item.trust) == ("observation", "untrusted")
    # every request starts with the first prompt, unchanged (the manifest relies on it)
    assert all(r.messages[0] == provider.requests[0].messages[0] for r in provider.requests)
    # the run spent far more than one cap in total: the cap is per call
    assert result.usage.total > 3 * cap
    assert result.usage.total <= cap * result.calls


def test_the_tool_table_offers_exactly_the_contract_tools(root: Path, firewall: Firewall) -> None:
    """One table row per tool of ``agent/tools.py``: what the manifest lists is what is sent."""
    _, provider = run(root, firewall, [FINISH], budget=20_000)
    assert provider.requests[0].tools == sorted(WORKER_TOOLS, key=lambda t: t.name)


def test_text_only_turns_hit_the_model_call_cap(root: Path, firewall: Firewall) -> None:
    think = [{"text": f"let me think ({n})"} for n in range(10)]
    read = {"tool": "read_file", "args": {"path": "docs/a.md"}}
    turns = [*think[:3], read, *think[3:], FINISH]  # fewer than TEXT_TURN_LIMIT in a row
    result, provider = run(root, firewall, turns, budget=20_000, max_tool_calls=3)
    assert (result.status, result.reason) == ("failed", "calls")
    assert len(provider.requests) == result.calls == 3 + CALL_SLACK
    assert "model-call cap of 5" in result.message
    assert "count too" in result.message


def test_the_same_reply_three_times_in_a_row_ends_the_attempt_stalled(
    root: Path, firewall: Firewall
) -> None:
    """A model that repeats itself is stopped before its cap (agent/worker.py); a tool call
    in between starts the count again."""
    read = {"tool": "read_file", "args": {"path": "docs/a.md"}}
    same = {"text": "I added the function and the tests pass."}
    turns = [same, same, read, same, same, same, FINISH]
    result, provider = run(root, firewall, turns, budget=20_000, max_tool_calls=5)
    assert (result.status, result.reason) == ("failed", "stalled")
    assert "the same reply 3 times without calling a tool in between" in result.message
    assert len(provider.requests) == 6  # the read broke the first run of two


def test_replies_in_a_row_without_a_tool_call_end_the_attempt_stalled(
    root: Path, firewall: Firewall
) -> None:
    """Differing replies count too (make real-model 2026-12-03 run 7: seven in a row until the
    token cap); a tool call in between starts the count again."""
    think = [{"text": f"let me think ({n})"} for n in range(10)]
    read = {"tool": "read_file", "args": {"path": "docs/a.md"}}
    turns = [*think[:3], read, *think[3:], FINISH]
    result, provider = run(root, firewall, turns, budget=20_000, max_tool_calls=8)
    assert (result.status, result.reason) == ("failed", "stalled")
    assert f"sent {TEXT_TURN_LIMIT} replies in a row without calling a tool" in result.message
    assert len(provider.requests) == 3 + 1 + TEXT_TURN_LIMIT


def test_a_run_of_text_only_turns_keeps_only_the_latest_exchange(
    root: Path, firewall: Firewall
) -> None:
    """A small model copies its own last reply (make real-model 2026-12-03, calls 6-9): each
    request holds the latest text-only turn and our answer to it, not the whole run of them
    (agent/loop.py); a tool call and its result stay."""
    read = {"tool": "read_file", "args": {"path": "docs/a.md"}}
    turns = [read, {"text": "sorry (1)"}, {"text": "sorry (2)"}, {"text": "sorry (3)"}, FINISH]
    result, provider = run(root, firewall, turns, budget=20_000, max_tool_calls=5)
    assert result.status == "succeeded", result.message
    texts = [request_text(r) for r in provider.requests]
    assert "sorry (1)" in texts[2]
    assert "sorry (1)" not in texts[3]
    assert "sorry (2)" in texts[3]
    assert "sorry (2)" not in texts[4]
    assert "sorry (3)" in texts[4]
    last = provider.requests[-1].messages
    # the brief, the read and its result, then one text turn and the nudge that answered it
    assert [m.role for m in last] == ["user", "assistant", "tool_results", "assistant", "user"]
    assert SECRET_LINE in texts[4]  # the read's result was not dropped with them


def test_a_node_fails_only_when_the_essentials_do_not_fit(root: Path, firewall: Firewall) -> None:
    reads = [{"tool": "read_file", "args": {"path": f"docs/{n}.md"}} for n in "abcd"]
    result, provider = run(root, firewall, [reads, FINISH], budget=4_000)
    assert (result.status, result.reason) == ("failed", "budget")
    assert len(provider.requests) == 1  # the second call was never made
    # the message says what did not fit: the pieces and the cap
    for piece in ("system, tools and first prompt", "latest turn", "per-call cap 4,000"):
        assert piece in result.message
    assert all(fits(r, 4_000) for r in provider.requests)


def test_the_run_cap_stops_before_the_call_that_could_cross_it(
    root: Path, firewall: Firewall
) -> None:
    exhausted: list[str] = []
    run_budget = RunBudget(9_000, on_exhausted=exhausted.append)
    turns = [{"tool": "read_file", "args": {"path": "docs/a.md"}}] * 20 + [FINISH]
    result, provider = run(root, firewall, turns, budget=4_000, run_budget=run_budget)
    assert (result.status, result.reason) == ("failed", "max_tokens")
    assert "--max-tokens 9,000" in result.message
    spent = run_budget.spent.total
    assert spent == result.usage.total <= 9_000
    # the refused call would have needed more than what was left, even at the least output:
    # it is the last one sent plus one more turn (about what the last turn added)
    last, before = (raw_request_tokens(r) for r in provider.requests[-1:-3:-1])
    next_input = last + max(0, last - before)
    assert spent + next_input + 64 > 9_000
    assert exhausted == [result.message]


def test_the_run_cap_holds_across_parallel_nodes(root: Path, firewall: Firewall) -> None:
    run_budget = RunBudget(20_000)
    turns = [{"tool": "read_file", "args": {"path": "docs/b.md"}}] * 30 + [FINISH]
    script = Script.from_data({"workers": {f"n{i}": turns for i in range(4)}})
    provider = ScriptedProvider(script)
    results: list[WorkerResult] = []
    lock = threading.Lock()

    def one(task: str) -> None:
        ctx = make_ctx(root, firewall, provider, task=task, budget=4_000, run_budget=run_budget)
        res = run_worker(ctx)
        with lock:
            results.append(res)

    threads = [threading.Thread(target=one, args=(f"n{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {r.reason for r in results} == {"max_tokens"}
    charged = sum(r.usage.total for r in results)
    assert charged == run_budget.spent.total <= 20_000
    # what the provider was actually sent (input) plus what it produced stays under the cap
    sent = sum(raw_request_tokens(r) for r in provider.requests)
    assert sent <= 20_000
    assert all(request_text(r) for r in provider.requests)


def test_a_restart_says_which_files_the_attempt_deleted(root: Path, firewall: Firewall) -> None:
    """Two empty replies in a row restart the conversation with where the attempt stands
    (agent/worker.py); a file the attempt deleted is said to be gone, not "changed on disk"
    (make real-model 2026-12-05 run ag: calc.py deleted, and the model's next edit of it
    found no file)."""
    gone = {"tool": "delete_file", "args": {"path": "src/app.py"}}
    turns = [gone, {"text": ""}, {"text": "```\n```"}, FINISH]
    provider = ScriptedProvider(Script.from_data({"workers": {"t1": turns}}))
    ctx = make_ctx(root, firewall, provider, budget=20_000)
    ctx.changed_files = lambda: [] if (root / "src" / "app.py").exists() else ["src/app.py"]
    run_worker(ctx)
    restart = provider.requests[3].messages
    assert [m.role for m in restart] == ["user", "user"]
    assert restart[1].content == (
        "# Where you are\nYour earlier turns in this attempt were removed: the last ones called "
        "no tool.\nThey deleted src/app.py: it is gone now (write_file creates a file again, "
        "whole).\n\nNow reply with your next tool call."
    )
