"""The scripted provider: turn order, recording, usage from the real request, script errors."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from anti_sprawl.errors import UsageError
from anti_sprawl.ids import PLANNER_TASK_ID
from anti_sprawl.providers import (
    BadRequest,
    ModelRequest,
    Provider,
    Script,
    ScriptedProvider,
    ScriptExhausted,
    SystemBlock,
    ToolSpec,
    UserMessage,
    estimate_request_tokens,
    observe_usage,
    raw_request_tokens,
)
from anti_sprawl.tokens import TokenCounter

EXAMPLE = """\
plan:
  plan_id: p1
  requirement: Add an event
  tasks:
    - {task_id: sub_task_01, name: Event, goal: Add it, write_scope: [orders/events.py]}
workers:
  sub_task_01:
    - tool: read_file
      args: {path: orders/events.py}
    - - tool: read_file
        args: {path: orders/bus.py}
      - tool: grep
        args: {pattern: "def publish"}
    - text: "thinking out loud"
    - tool: finish
      args: {summary: "Added OrderCreated event", notes: "..."}
  sub_task_02:
    - text: "checking"
      tool: list_dir
      args: {path: src}
    - tool: finish
"""


def req(task: str | None, text: str = "do it", **kw: Any) -> ModelRequest:
    return ModelRequest(
        system=[SystemBlock(text="rules", cache=True)],
        messages=[UserMessage(content=text)],
        task_id=task,
        **kw,
    )


@pytest.fixture
def script(tmp_path: Path) -> Script:
    path = tmp_path / "script.yaml"
    path.write_text(EXAMPLE)
    return Script.load(path)


def test_turns_are_served_in_order(script: Script) -> None:
    p = ScriptedProvider(script)
    assert isinstance(p, Provider)
    first = p.complete(req("sub_task_01"))
    assert first.stop_reason == "tool_use"
    assert [(c.id, c.name, c.arguments) for c in first.tool_calls] == [
        ("call_sub_task_01_1_1", "read_file", {"path": "orders/events.py"})
    ]
    multi = p.complete(req("sub_task_01"))
    assert [(c.id, c.name) for c in multi.tool_calls] == [
        ("call_sub_task_01_2_1", "read_file"),
        ("call_sub_task_01_2_2", "grep"),
    ]
    assert multi.tool_calls[1].arguments == {"pattern": "def publish"}
    text = p.complete(req("sub_task_01"))
    assert (text.text, text.tool_calls, text.stop_reason) == ("thinking out loud", [], "end_turn")
    done = p.complete(req("sub_task_01"))
    assert done.tool_calls[0].name == "finish"
    assert done.tool_calls[0].arguments["summary"] == "Added OrderCreated event"
    assert done.raw_id == "scripted_sub_task_01_4"


def test_text_with_a_tool_and_missing_args(script: Script) -> None:
    p = ScriptedProvider(script)
    turn = p.complete(req("sub_task_02"))
    assert turn.text == "checking"
    assert [c.name for c in turn.tool_calls] == ["list_dir"]
    assert p.complete(req("sub_task_02")).tool_calls[0].arguments == {}


def test_served_arguments_are_copies(script: Script) -> None:
    p = ScriptedProvider(script)
    turn = p.complete(req("sub_task_02"))
    turn.tool_calls[0].arguments["path"] = "changed"
    assert script.workers["sub_task_02"][0].calls[0].args == {"path": "src"}


def test_requests_are_recorded(script: Script) -> None:
    p = ScriptedProvider(script)
    a = req("sub_task_01", "first")
    b = req("sub_task_02", "second")
    p.complete(a)
    p.complete(b)
    assert p.requests == [a, b]
    assert p.requests_for("sub_task_02") == [b]
    assert p.requests_for("nope") == []


def test_usage_is_counted_from_the_request(script: Script) -> None:
    p = ScriptedProvider(script)
    small = req("sub_task_01", "short")
    big = req("sub_task_01", "a much longer request " * 50)
    u_small = p.complete(small).usage
    u_big = p.complete(big).usage
    assert u_small.input_tokens == raw_request_tokens(small) > 0
    assert u_big.input_tokens > u_small.input_tokens
    assert u_big.output_tokens > u_small.output_tokens > 0  # two calls serialize longer than one
    assert u_big.total == u_big.input_tokens + u_big.output_tokens


def test_tools_count_toward_input(script: Script) -> None:
    p = ScriptedProvider(script)
    tool = ToolSpec(
        name="read_file", description="Read a file " * 20, parameters={"type": "object"}
    )
    bare = p.complete(req("sub_task_01")).usage.input_tokens
    with_tools = p.complete(req("sub_task_01", tools=[tool])).usage.input_tokens
    assert with_tools > bare


def test_calibration_round_trip(script: Script) -> None:
    counter = TokenCounter()
    p = ScriptedProvider(script)
    request = req("sub_task_01", "some words " * 30)
    estimate = estimate_request_tokens(request, counter)
    response = p.complete(request)
    observe_usage(request, response.usage, counter)
    assert estimate == response.usage.input_tokens
    assert counter.ratio == 1.0


def test_exhaustion_names_the_task(script: Script) -> None:
    p = ScriptedProvider(script)
    for _ in range(2):
        p.complete(req("sub_task_02"))
    with pytest.raises(
        ScriptExhausted, match=r"'sub_task_02' ran out after 2 turn\(s\) before 'finish'"
    ):
        p.complete(req("sub_task_02"))
    with pytest.raises(ScriptExhausted, match="no turns for task 'ghost'") as info:
        p.complete(req("ghost"))
    assert not info.value.retryable
    assert len(p.requests_for("sub_task_02")) == 3  # the failed request is recorded too


def test_request_without_task_id(script: Script) -> None:
    with pytest.raises(BadRequest):
        ScriptedProvider(script).complete(req(None))


def test_assert_complete(script: Script) -> None:
    p = ScriptedProvider(script)
    for _ in range(4):
        p.complete(req("sub_task_01"))
    with pytest.raises(AssertionError, match=r"sub_task_02 \(0 of 2 turns used\)"):
        p.assert_complete()
    p.complete(req("sub_task_02"))
    p.complete(req("sub_task_02"))
    p.assert_complete()  # the implicit planner turn from `plan:` is not required


def test_reset_serves_a_task_again(script: Script) -> None:
    p = ScriptedProvider(script)
    p.complete(req("sub_task_02"))
    p.reset("sub_task_02")
    assert p.complete(req("sub_task_02")).tool_calls[0].id == "call_sub_task_02_1_1"


def test_planner_gets_submit_plan(script: Script) -> None:
    p = ScriptedProvider(script)
    turn = p.complete(req(PLANNER_TASK_ID))
    [call] = turn.tool_calls
    assert call.name == "submit_plan"
    assert call.arguments == script.plan
    assert call.arguments["tasks"][0]["task_id"] == "sub_task_01"
    with pytest.raises(ScriptExhausted, match="before 'submit_plan'"):
        p.complete(req(PLANNER_TASK_ID))


def test_multi_round_planner() -> None:
    script = Script.from_data(
        {
            "plan": {"plan_id": "ignored"},
            "planner": [
                {"tool": "list_dir", "args": {"path": "."}},
                {"tool": "submit_plan", "args": {"plan_id": "bad"}},
                {"tool": "submit_plan", "args": {"plan_id": "good"}},
            ],
        }
    )
    p = ScriptedProvider(script)
    names = [p.complete(req(PLANNER_TASK_ID)).tool_calls[0] for _ in range(3)]
    assert [c.name for c in names] == ["list_dir", "submit_plan", "submit_plan"]
    assert names[2].arguments == {"plan_id": "good"}
    p.assert_complete()


def test_unused_planner_rounds_are_reported() -> None:
    p = ScriptedProvider(Script.from_data({"planner": [{"tool": "submit_plan", "args": {}}]}))
    with pytest.raises(AssertionError, match="__planner__"):
        p.assert_complete()


def test_concurrent_tasks_are_independent() -> None:
    turns = [{"tool": "read_file", "args": {"path": f"f{i}"}} for i in range(20)]
    script = Script.from_data({"workers": {f"t{k}": turns for k in range(4)}})
    p = ScriptedProvider(script)
    seen: dict[str, list[str]] = {}
    barrier = threading.Barrier(4)

    def run(task: str) -> None:
        barrier.wait()
        seen[task] = [p.complete(req(task)).tool_calls[0].arguments["path"] for _ in range(20)]

    threads = [threading.Thread(target=run, args=(f"t{k}",)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {f"t{k}": [f"f{i}" for i in range(20)] for k in range(4)}
    assert len(p.requests) == 80
    p.assert_complete()


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("- just\n- a list\n", "expected a mapping"),
        ("plan: {}\nextra: 1\n", "unknown key 'extra'"),
        ("{}\n", "defines nothing"),
        ("plan: [1, 2]\n", "plan: must be a mapping"),
        ("workers: [a]\n", "workers: must be a mapping"),
        ("workers:\n  t1: {tool: x}\n", "workers.t1: must be a list of turns"),
        ("workers:\n  t1:\n    - tol: read_file\n", "workers.t1, turn 1: unknown key 'tol'"),
        ("workers:\n  t1:\n    - args: {a: 1}\n", "needs 'tool' or 'text'"),
        ("workers:\n  t1:\n    - text: hi\n      args: {a: 1}\n", "'args' without 'tool'"),
        ("workers:\n  t1:\n    - tool: x\n      args: [1]\n", "'args' must be a mapping"),
        ("workers:\n  t1:\n    - []\n", "an empty list of tool calls"),
        ("workers:\n  t1:\n    - [{tool: a}, {text: b}]\n", "turn 1, call 2: unknown key 'text'"),
        ("workers:\n  t1:\n    - tool: ''\n", "'tool' must be a non-empty string"),
        ("workers:\n  t1:\n    - 42\n", "expected {tool, args}"),
        ("workers:\n  t1:\n    - text: [1]\n", "'text' must be a string"),
        ("planner: {tool: submit_plan}\n", "planner: must be a list of turns"),
        ("workers: {t1: [\n", "cannot parse script file"),
    ],
)
def test_bad_scripts_are_usage_errors(tmp_path: Path, text: str, fragment: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(UsageError) as info:
        Script.load(path)
    message = str(info.value)
    assert fragment in message
    assert "\n" not in message
    assert str(path) in message


def test_missing_script_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="script file not found"):
        Script.load(tmp_path / "nope.yaml")
