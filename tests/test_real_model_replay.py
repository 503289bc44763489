"""What a real small model sent, replayed offline: the quirks CI must keep covered (issue 23).

``tests/fixtures/real_model/*.json`` are response bodies recorded verbatim from
``make real-model`` (Qwen2.5-Coder-1.5B-Instruct under llama.cpp's server, on this machine's
CPU). The fake server serves them in order to the real OpenAI SDK while the real CLI runs the
recorded plan on the recorded repository: every tool call the model wrote as text (fenced JSON
with Python triple-quoted strings) must run as a call, and no node may succeed with an empty
diff or with the model's wrong test.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from anti_sprawl.agent.digest import RESTART_HEADER
from anti_sprawl.agent.nudges import (
    EMPTY_REPLY_PROMPT,
    FAILING_FINISH_REFUSALS,
    TEXT_TURN_LIMIT,
)
from anti_sprawl.cli.app import app
from anti_sprawl.plan.model import DEFAULT_MAX_ATTEMPTS

from .conftest import GIT_ENV
from .fake_llm_server import FakeLLMServer, openai_completion, openai_tool_call

runner = CliRunner()
pytestmark = pytest.mark.usefixtures("python_on_path")
FIXTURES = Path(__file__).parent / "fixtures" / "real_model"


def recorded(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return data


def recorded_repo(tmp_path: Path, run: dict[str, Any]) -> Path:
    """The recorded run's repository, committed as ``main`` under ``tmp_path/calc``."""
    repo = tmp_path / "calc"
    repo.mkdir()
    for rel, text in run["repo"].items():
        (repo / rel).write_text(text)
    env = {**os.environ, **GIT_ENV}
    for argv in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "calc"]):
        subprocess.run(["git", *argv], cwd=repo, env=env, check=True)
    return repo


def replay(
    tmp_path: Path,
    server: FakeLLMServer,
    name: str,
    calls: slice,
    then: Sequence[dict[str, Any]] = (),
    exit_code: int = 1,
    attempts: int = 1,
    stream: bool = False,
) -> tuple[Path, dict[str, Any]]:
    """``execute`` (``attempts`` attempts) of the recorded plan on the recorded repository,
    served the recorded responses ``calls`` (``stream``: as events, the way llama.cpp streams
    them) and then the responses ``then``."""
    run = recorded(name)
    repo = recorded_repo(tmp_path, run)
    plan = tmp_path / "plan.yaml"
    tasks = [{**task, "max_attempts": attempts} for task in run["plan"]["tasks"]]
    plan.write_text(yaml.safe_dump({**run["plan"], "tasks": tasks}))
    for call in run["calls"][calls]:
        server.enqueue(call["response"], stream=stream)
    for body in then:
        server.enqueue(body)
    args = ["execute", str(plan), "--repo", str(repo), "--json", "--provider", "openai"]
    args += ["--base-url", server.url, "--model", run["calls"][0]["request"]["model"]]
    result = runner.invoke(app, args)
    assert result.exit_code == exit_code, result.output
    return repo, json.loads(result.stdout)


def insisting(body: dict[str, Any], *, sent: int = 0) -> list[dict[str, Any]]:
    """``body`` (a finish) as often as it takes to be taken over failing tests, less the
    ``sent`` copies the recording already holds: the model that will not fix its work
    (agent/worker.py refuses it FAILING_FINISH_REFUSALS times, then takes it)."""
    return [body] * (1 + FAILING_FINISH_REFUSALS - sent)


def finishes_refused(repo: Path, state: dict[str, Any]) -> list[str]:
    """What each finish refused over failing tests was answered."""
    answers = [e["result"]["content"] for e in transcript(repo, state) if e["event"] == "tool"
               and e["call"]["name"] == "finish"]  # fmt: skip
    return [a for a in answers if "the whole test command ran" in a]


def transcript(repo: Path, state: dict[str, Any], attempt: int = 1) -> list[dict[str, Any]]:
    """The events of the node's transcript of ``attempt`` (agent/loop.py names them)."""
    path = repo / ".anti-sprawl" / "runs" / state["run_id"] / "artifacts" / "subtract"
    name = "transcript.jsonl" if attempt == 1 else f"transcript-{attempt}.jsonl"
    return [json.loads(line) for line in (path / name).read_text().splitlines()]


def test_text_calls_with_triple_quoted_strings_run_and_the_wrong_test_fails(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """The first attempt: seven responses, every call fenced JSON, file contents in Python's
    triple quotes; the model drops add() and writes a test that asserts 2 - 3 == 5. Its
    finish is refused with the failure shown, and taken when the model insists."""
    run = recorded("subtract_run1.json")
    repo, state = replay(
        tmp_path,
        server,
        "subtract_run1.json",
        slice(0, 7),
        then=insisting(run["calls"][6]["response"], sent=1),
    )
    node = state["tasks"]["subtract"]
    assert (node["status"], node["reason"]) == ("failed", "tests")
    assert node["files_changed"] == []
    assert node["attempt_log"][0]["files_changed"] == [
        "calc.py",
        "test_calc.py",
    ]
    events = transcript(repo, state)
    ran = [e["call"]["name"] for e in events if e["event"] == "tool"]
    assert ran == ["write_file", "delete_file", "write_file", "move_file", "write_file"] + [
        "finish"
    ] * (1 + FAILING_FINISH_REFUSALS)
    refused = finishes_refused(repo, state)
    assert len(refused) == FAILING_FINISH_REFUSALS
    assert all("tests failed (exit code" in r for r in refused)
    assert all(e["call"]["from_text"] for e in events if e["event"] == "tool")
    assert fx_branch_commits(repo) == 0  # nothing landed


def test_the_recorded_false_claim_over_an_empty_diff_fails_no_changes(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """The recorded second attempt: a report in prose, then "Added the subtract function and a
    test ... The test passed" as a finish, having changed nothing. That finish is refused once
    (the goal names calc.py and test_calc.py); sent again, it is taken and fails no_changes."""
    finish = recorded("subtract_run1.json")["calls"][11]["response"]
    _, state = replay(tmp_path, server, "subtract_run1.json", slice(10, 12), [finish])
    node = state["tasks"]["subtract"]
    assert (node["status"], node["reason"]) == ("failed", "no_changes")
    assert "you changed no file" in node["message"]
    assert (
        "finish refused (this once): you changed no file"
        in (server.requests[2].body["messages"][-1]["content"])
    )
    continued = server.requests[1].body["messages"][-1]["content"]
    assert continued.startswith("Continue with your tools")  # prose is not taken for a call


def test_the_recorded_whole_files_in_prose_are_written_and_land(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """stalled_run4's third reply: no tool call, "Here is the complete implementation", then
    ``### calc.py`` and ``### test_calc.py`` each over the whole new file in a fenced block
    (and the files restated further down, indented). Sent ten times, it wrote nothing; now its
    two files are written through the firewall, and with the model's recorded finish (from
    subtract_run1) the node lands with its tests passing."""
    finish = recorded("subtract_run1.json")["calls"][11]["response"]
    repo, state = replay(
        tmp_path, server, "stalled_run4.json", slice(0, 3), then=[finish], exit_code=0
    )
    node = state["tasks"]["subtract"]
    assert (node["status"], node["files_changed"]) == ("succeeded", ["calc.py", "test_calc.py"])
    events = transcript(repo, state)
    recovered = [e for e in events if e["event"] == "recovered"]
    assert [[c["arguments"]["path"] for c in e["tool_calls"]] for e in recovered] == [
        ["calc.py", "test_calc.py"]
    ]
    assert all(c["from_text"] for c in recovered[0]["tool_calls"])
    show = ["git", "show", "anti-sprawl/add-subtract:calc.py"]
    landed = subprocess.run(show, cwd=repo, capture_output=True, text=True, check=True).stdout
    assert "def subtract(a, b):\n    return a - b" in landed
    assert "def add(a, b):" in landed
    # the model was answered with the writes' results, as if it had called write_file
    answered = server.requests[3].body["messages"]
    assert [m["role"] for m in answered[-3:]] == ["assistant", "tool", "tool"]
    assert fx_branch_commits(repo) == 1


def test_a_retry_after_an_attempt_that_only_talked_is_told_how_to_write_files(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """subtract_run11 over two attempts: the first ends stalled (echoes of our tags, no change
    that passes); the second attempt's first message says how to write files without a call."""
    _, state = replay(tmp_path, server, "subtract_run11.json", slice(0, 12), attempts=2)
    assert state["tasks"]["subtract"]["attempt_log"][0]["reason"] == "stalled"
    retry = next(
        r.body["messages"][-1]["content"]
        for r in server.requests
        if len(r.body["messages"]) == 2 and "This is attempt 2" in r.body["messages"][-1]["content"]
    )
    assert "- how to go on: call the tools. To change a file without a tool call" in retry


def fx_branch_commits(repo: Path) -> int:
    out = subprocess.run(
        ["git", "rev-list", "--count", "main..anti-sprawl/add-subtract"],
        cwd=repo,
        capture_output=True,
        text=True,
    )
    return int(out.stdout.strip() or 0)


def test_the_recorded_real_model_eval_cases_score_no_false_success() -> None:
    """tasks/eval-real-model: the recorded turns as scripted cases. On main before issue 23 the
    false claim scored green (1 of 2 nodes succeeded with an empty diff), and before
    git/substance.py the change that only took text away did too; now none does, and the
    whole files the model wrote in prose land, labelled or (since 2026-12-04) not. Since
    2026-12-05 (copies-code) a change that only copies code into a test module scores red."""
    from anti_sprawl.eval import load_cases, run_case
    from anti_sprawl.eval.metrics import aggregate

    cases = load_cases(Path(__file__).resolve().parents[1] / "tasks" / "eval-real-model")
    results = [run_case(case) for case in cases]
    assert [r.passed for r in results] == [True] * 6, [r.failed_checks for r in results]
    summary = aggregate("baseline", results)
    # whole-files and unlabelled-files land (their files written from the prose reply); no
    # empty success
    assert (summary.tasks, summary.tasks_succeeded, summary.empty_successes) == (6, 2, 0)


def test_the_recorded_planner_submission_written_as_text_is_planned(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """The planner's first recorded answer: the plan as a fenced JSON document (submit_plan's
    arguments, no tool name), its tasks named but without task_ids; it took three
    submissions and failed then. Now the text is the call and the names are the ids."""
    from anti_sprawl.planner.planner import plan_requirement
    from anti_sprawl.providers import OpenAIProvider

    run = recorded("planner_run2.json")
    repo = recorded_repo(tmp_path, run)
    server.enqueue(run["calls"][0]["response"])
    provider = OpenAIProvider("-", base_url=server.url)
    result = plan_requirement(run["requirement"], repo, provider, lean=True)
    assert result.ok, result.report.errors
    assert result.plan is not None
    assert [t.task_id for t in result.plan.tasks] == ["add_subtract_calc", "add_subtract_test"]
    assert result.rounds == 1


def test_the_recorded_calls_one_per_line_are_read_and_the_broken_one_named(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """planner_run3: four calls per reply, one per line, braces doubled unevenly; the three
    reads are valid once undoubled, the submit_plan is not. The nudge names that one call
    (it said only "not valid JSON" before, and the model sent the same reply four times)."""
    from anti_sprawl.planner.planner import plan_requirement
    from anti_sprawl.providers import OpenAIProvider
    from anti_sprawl.providers.loose_json import load_loose
    from anti_sprawl.providers.text_calls import _objects

    run = recorded("planner_run3.json")
    text = run["calls"][0]["response"]["choices"][0]["message"]["content"]
    blocks = _objects(text)
    assert blocks is not None
    parsed = [load_loose(block) for block in blocks]
    assert [p["name"] for p in parsed[:3]] == ["read_file", "read_file", "list_dir"]
    assert parsed[0]["arguments"] == {"path": "./calc.py"}
    assert parsed[3] is None
    repo = recorded_repo(tmp_path, run)
    for call in run["calls"]:
        server.enqueue(call["response"])
    provider = OpenAIProvider("-", base_url=server.url)
    result = plan_requirement(run["requirement"], repo, provider, lean=True)
    assert not result.ok
    nudge = server.requests[1].body["messages"][-1]["content"]
    assert "of its 4 tool calls, the 4th (submit_plan) was not valid JSON" in nudge


def test_the_recorded_same_reply_over_and_over_ends_the_attempt_and_its_passing_change_lands(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """stalled_run4: after two text-written writes the model sent one prose reply seven times
    (then two more attempts of one summary, over and over), each call up to a minute on a
    CPU, until its call cap. Three of the same reply in a row now end the attempt; its change
    (subtract() and its test, right) passes the whole test command, so it lands without a
    finish, marked so in the commit and the PR, instead of being thrown away."""
    repo, state = replay(tmp_path, server, "stalled_run4.json", slice(0, 10), exit_code=0)
    node = landed_node(repo, state, server, [], 7)
    assert node["summary"] is None
    assert "the same reply 3 times without calling a tool in between" in node["unclaimed"]
    assert node["files_changed"] == ["calc.py", "test_calc.py"]
    assert "def subtract(a, b):\n    return a - b" in landed_file(repo, "calc.py")
    assert "assert subtract(5, 3) == 2" in landed_file(repo, "test_calc.py")
    # two writes, a reply whose whole files are written, a near copy of it (one typo less:
    # written again), then that copy three times more
    assert (
        server.requests[-1]
        .body["messages"][-1]["content"]
        .startswith("The files in your reply are already written")
    )
    body = subprocess.run(
        ["git", "log", "-1", "--format=%B", "anti-sprawl/add-subtract"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "The worker never called finish (the model sent the same reply 3 times" in body
    assert "its claim" not in body


def _planned_from(
    tmp_path: Path,
    server: FakeLLMServer,
    name: str,
    calls: slice,
    then: Sequence[str] = (),
    stream: bool = False,
) -> Any:
    """``plan_requirement`` (lean) of the recorded requirement on the recorded repository,
    served the recorded responses ``calls`` (``stream``: as events) and then replies of the
    texts in the fixture files ``then``."""
    from anti_sprawl.planner.planner import plan_requirement
    from anti_sprawl.providers import OpenAIProvider

    run = recorded(name)
    repo = recorded_repo(tmp_path, run)
    for call in run["calls"][calls]:
        server.enqueue(call["response"], stream=stream)
    for fixture in then:
        text = (FIXTURES / fixture).read_text()
        server.enqueue(openai_completion(content=text, finish_reason="stop"))
    provider = OpenAIProvider("-", base_url=server.url)
    return plan_requirement(run["requirement"], repo, provider, lean=True)


def _planned_reply(tmp_path: Path, server: FakeLLMServer, reply: str) -> Any:
    """``_planned_from`` served only the recorded planner reply in the text fixture ``reply``,
    on the subtract requirement and repository (runs f-k planned the same task)."""
    return _planned_from(tmp_path, server, "planner_runaway_run_f.json", slice(0, 0), [reply])


def test_the_recorded_plan_in_prose_is_the_submission(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """planner_run5's first reply explains the plan and then writes it whole as a fenced JSON
    block. It was refused as "a tool call mixed with other text" and the planner stalled after
    four calls; now the block is the submission, validated like any other."""
    result = _planned_from(tmp_path, server, "planner_run5.json", slice(0, 1))
    assert result.ok, result.report
    assert [(t.task_id, t.write_scope) for t in result.plan.tasks] == [
        ("task1", ["calc.py"]),
        ("task2", ["test_calc.py"]),
    ]
    assert (result.rounds, len(server.requests)) == (1, 1)


def test_the_recorded_calls_over_many_lines_are_run_and_the_plan_judged(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """planner_run5's replies 2-4: three reads on a line each, then a submit_plan over 25
    lines, braces doubled unevenly. They were "not valid JSON" three times; now the reads run
    and the plan is judged on what it says: its test command is no command."""
    result = _planned_from(tmp_path, server, "planner_run5.json", slice(1, 4))
    assert (result.outcome, result.rounds, result.tool_calls) == ("invalid", 3, 9)
    assert {p.code for p in result.report.errors} == {"bad_command"}
    assert "test_command" in result.report.errors[0].message


def test_the_recorded_calls_followed_by_commentary_run(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """subtract_run6, attempt 1: calls written as one JSON object and then a fenced block
    restating the arguments as Python (``obj['arguments'] = {...}``). They were "not valid
    JSON" before, and the model answered the nudge with confusion; now the call runs. The
    model's own work is still wrong (calc.py without add()), and nothing lands."""
    repo, state = replay(tmp_path, server, "subtract_run6.json", slice(0, 10))
    node = state["tasks"]["subtract"]
    events = transcript(repo, state)
    ran = [e["call"]["name"] for e in events if e["event"] == "tool"]
    # before: write_file, then three nudges for "not valid JSON" among the ten calls
    assert ran == ["write_file", "run_tests", "finish", "request_scope", "write_file", "finish"]
    # the last finish is refused with the failing run shown: its test file has
    # `def test Subtract():`; that was the model's tenth call, its cap
    (refused,) = finishes_refused(repo, state)
    assert "tests failed" in refused
    assert "SyntaxError" in refused
    assert (node["status"], node["reason"]) == ("failed", "calls")
    assert fx_branch_commits(repo) == 0


def test_the_recorded_call_written_out_after_prose_is_a_submission(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """planner_run7: after the first submission's five errors, each reply explains the fixes
    and then writes the whole submit_plan call (name and arguments) as a fenced JSON block.
    Each was refused as "a tool call mixed with other text" and planning stalled; now each is
    a submission, and the model's plan is judged on what it says."""
    result = _planned_from(tmp_path, server, "planner_run7.json", slice(0, 5))
    # reply 2 writes four such blocks (one per fix): which is the plan is not clear, so it
    # stays prose and is answered with a nudge; reply 3 is the second submission, valid once
    # its made-up base ("./") gives way to the commit planned at (planner/submission_repairs.py
    # without_unresolved_base), which was its one error left
    assert (result.outcome, result.rounds, len(server.requests)) == ("planned", 2, 3)
    assert result.warnings == [
        "the plan's base './' names no commit: replaced by the commit planned at"
    ]


def test_a_recorded_bare_code_block_is_answered_with_what_it_lacks(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """subtract_run8, attempt 3: the new calc.py as a bare ```python block with no line naming
    the file, several times; each was answered "a tool call mixed with other text". Now the
    model is told the block lacks the path, which paths it may write, and the form."""
    replay(tmp_path, server, "subtract_run8.json", slice(10, 11), then=[FINISH_NOTHING])
    told = server.requests[1].body["messages"][-1]["content"]
    assert told.startswith("Your reply showed code in a fenced block, but the line before it")
    assert "(calc.py, test_calc.py)" in told


FINISH_NOTHING = openai_completion(
    tool_calls=[openai_tool_call("c1", "finish", json.dumps({"summary": "nothing"}))],
    finish_reason="tool_calls",
)


def test_the_recorded_files_under_bold_labels_are_written_and_their_wrong_test_fails(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """subtract_run9, attempt 3, after the retry note named the whole-file form: the model
    wrote both files in prose under ``**File: calc.py**`` and ``**File: test_calc.py**``.
    They are written (calc.py keeps add() and gains subtract()); its own test asserts
    subtract(2, 3) == 5 without importing it, so the node fails its tests and nothing lands."""
    repo, state = replay(
        tmp_path,
        server,
        "subtract_run9.json",
        slice(21, 23),
        then=insisting(FINISH_ALL),
    )
    node = state["tasks"]["subtract"]
    events = transcript(repo, state)
    written = [c["arguments"]["path"] for e in events if e["event"] == "recovered"
               for c in e["tool_calls"]]  # fmt: skip
    assert written == ["calc.py", "test_calc.py"]
    assert (node["status"], node["reason"]) == ("failed", "tests")
    assert "NameError" in node["tests"]["tail"] or "assert" in node["tests"]["tail"]
    assert fx_branch_commits(repo) == 0


FINISH_ALL = openai_completion(
    tool_calls=[
        openai_tool_call(
            "c2", "finish", json.dumps({"summary": "done", "files": ["calc.py", "test_calc.py"]})
        )
    ],
    finish_reason="tool_calls",
)


def test_the_recorded_change_that_adds_nothing_does_not_succeed(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """subtract_run10, attempt 3: calc.py rewritten as add() alone (its docstring, blank lines
    and final newline gone), test_calc.py as its old test reflowed, and a finish claiming
    "Added the subtract function and test". The old tests pass and the diff is not empty, so
    the node succeeded in the real run. Its first finish is now refused once: both files the
    goal names only lost text or changed whitespace (run al); sent again, it is taken, and the
    node fails ``no_changes`` with a note that says the change only took text away, and
    nothing lands (git/substance.py)."""
    finish = recorded("subtract_run10.json")["calls"][8]["response"]
    repo, state = replay(tmp_path, server, "subtract_run10.json", slice(7, 9), [finish])
    told = server.requests[2].body["messages"][-1]["content"]
    assert "your goal names calc.py, test_calc.py, in your write scope, and your" in told
    node = state["tasks"]["subtract"]
    assert (node["status"], node["reason"]) == ("failed", "no_changes")
    assert "only deleted text or changed whitespace" in node["message"]
    assert fx_branch_commits(repo) == 0


def test_the_recorded_name_error_names_the_missing_import(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """subtract_run11, attempt 1: subtract() appended to calc.py and its test appended to
    test_calc.py, which imports only add; run_tests fails with a NameError. The observation the
    model reads next names the import that is missing (agent/test_hints.py)."""
    repo, state = replay(
        tmp_path,
        server,
        "subtract_run11.json",
        slice(0, 3),
        then=insisting(FINISH_ALL),
    )
    seen = server.requests[3].body["messages"][-1]
    assert seen["role"] == "tool"
    assert "NameError: name 'subtract' is not defined" in seen["content"]
    assert "hint: subtract is defined in calc.py" in seen["content"]
    assert "`from calc import subtract`" in seen["content"]
    node = state["tasks"]["subtract"]
    assert (node["status"], node["reason"]) == ("failed", "tests")
    assert fx_branch_commits(repo) == 0


def test_the_recorded_alternating_echo_stalls(tmp_path: Path, server: FakeLLMServer) -> None:
    """subtract_run11, attempt 1, calls 4-10: a prose answer (call 4), then the model echoed
    the source tag of calc.py, then of test_calc.py, by turns, until its call cap. Call 4's
    unlabelled block shares the test file's import and keeps one of its tests but drops the
    other: a piece quoted, not the file (agent/file_blocks.py, run al), so it is one more reply
    without a tool call. The fourth in a row ends the attempt as stalled (call 7), before the
    same reply came a third time (call 9)."""
    _, state = replay(tmp_path, server, "subtract_run11.json", slice(0, 10))
    node = state["tasks"]["subtract"]
    assert (node["status"], node["reason"]) == ("failed", "stalled")
    assert f"sent {TEXT_TURN_LIMIT} replies in a row without calling a tool" in node["message"]
    assert len(server.requests) == 3 + TEXT_TURN_LIMIT


def writes_the_test(files: list[str]) -> list[dict[str, Any]]:
    """What a model told its finish was refused then does right: a test of subtract() written
    to test_calc.py, and a finish naming ``files``."""
    test = "from calc import add, subtract\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    test += "\n\ndef test_subtract():\n    assert subtract(5, 2) == 3\n"
    write = {"path": "test_calc.py", "content": test}
    finish = {"summary": "Added the test of subtract()", "files": files}
    return [
        openai_completion(tool_calls=[openai_tool_call("w", "write_file", json.dumps(write))]),
        openai_completion(tool_calls=[openai_tool_call("f", "finish", json.dumps(finish))]),
    ]


def refused_then_written(
    tmp_path: Path, server: FakeLLMServer, name: str, calls: int
) -> tuple[Path, dict[str, Any], str]:
    """The one node of the streamed replay of ``name``'s first ``calls`` recorded calls, whose
    last finish is refused, then ``writes_the_test``: the repository, the node (landed) and
    what the refused finish was answered."""
    run = recorded(name)
    then = writes_the_test(["test_calc.py"])
    repo, state = replay(tmp_path, server, name, slice(0, calls), then, 0, stream=True)
    (node,) = [state["tasks"][t["task_id"]] for t in run["plan"]["tasks"]]
    assert node["status"] == "succeeded", node["message"]
    return repo, node, server.requests[calls].body["messages"][-1]["content"]


def test_a_recorded_finish_that_leaves_a_file_the_goal_names_is_refused_once(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """subtract_run_t (make real-model 2026-12-05 run t), execute calls 1-2: subtract()
    appended to calc.py and a finish naming calc.py alone; it landed without the test the goal
    asks for in test_calc.py. That finish is now refused once, naming test_calc.py; a model
    that then writes the test lands both files."""
    then = writes_the_test(["calc.py", "test_calc.py"])
    repo, state = replay(tmp_path, server, "subtract_run_t.json", slice(0, 2), then, 0)
    node = landed_node(repo, state, server, [], 4)
    told = server.requests[2].body["messages"][-1]["content"]
    assert "finish refused (this once): your goal names test_calc.py, in your write scope" in told
    assert node["files_changed"] == ["calc.py", "test_calc.py"]
    assert "def test_subtract" in landed_file(repo, "test_calc.py")


def test_a_recorded_finish_over_no_change_is_refused_once_when_the_goal_names_a_file(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """subtract_run_aa (make real-model 2026-12-05 run aa), the test node's calls: it ran the
    old tests, which passed, then finished naming test_calc.py, which it never changed. The
    finish was taken and the attempt failed no_changes. Now, over no change, a finish whose
    goal names a file in the write scope is refused once, naming it; a model that then writes
    the test lands it, and one that finishes again fails no_changes as before."""
    repo, node, told = refused_then_written(tmp_path, server, "subtract_run_aa.json", 2)
    refused = "finish refused (this once): you changed no file, and your goal names test_calc.py"
    assert refused in told
    assert node["files_changed"] == ["test_calc.py"]
    assert "def test_subtract" in landed_file(repo, "test_calc.py")
    recorded_finish = recorded("subtract_run_aa.json")["calls"][1]["response"]
    (tmp_path / "again").mkdir()
    _, again = replay(
        tmp_path / "again", server, "subtract_run_aa.json", slice(0, 2), [recorded_finish]
    )
    node = again["tasks"]["02-write-test-subtract"]
    assert (node["status"], node["reason"]) == ("failed", "no_changes")


def test_two_recorded_empty_replies_in_a_row_restart_the_conversation_from_the_brief(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """subtract_run_x (make real-model 2026-12-05 run x), attempt 2: both files written, a
    finish refused over failing tests, then empty replies, which the same conversation never
    got out of. The second empty reply in a row now restarts the conversation: the brief, then
    where the attempt stands (the files as they are now, the failing lines), and one line
    asking for the next call. The recorded replies go on (a write, then empty replies again:
    a second restart), and the third empty reply in all stalls the attempt, as before."""
    repo, state = replay(tmp_path, server, "subtract_run_x.json", slice(0, 10))
    node = state["tasks"]["subtract"]
    assert (node["status"], node["reason"]) == ("failed", "stalled")
    restarted = server.requests[5].body["messages"]
    assert [m["role"] for m in restarted] == ["system", "user", "user"]
    assert restarted[1] == server.requests[0].body["messages"][1]  # the brief, as it was
    standing = restarted[2]["content"]
    assert standing.startswith("# Where you are\nYour earlier turns in this attempt were removed")
    assert "They changed calc.py, test_calc.py, which are now:" in standing
    assert '<data kind="file" source="test_calc.py" trust="untrusted">' in standing
    assert "The whole test command fails (exit code 1) with your changes" in standing
    assert standing.endswith("</data>\n\nNow reply with your next tool call.")
    restarts = [e for e in transcript(repo, state) if e["event"] == "restart"]
    assert len(restarts) == 2
    assert restarts[0]["message"] == standing
    manifests = repo / ".anti-sprawl" / "runs" / state["run_id"] / "manifests" / "subtract"
    sixth = json.loads((manifests / "6.json").read_text())
    (item,) = [i for i in sixth["items"] if i["source"] == "restart"]
    assert (item["kind"], item["trust"]) == ("observation", "untrusted")


def test_recorded_echoes_of_our_data_tag_restart_the_conversation(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """subtract_run_z (make real-model 2026-12-05 run z), attempt 1: a report twice, then our
    data tag's attributes written back as JSON (``{"kind": "file", "source": "calc.py", ...}``)
    around one scope request, each echo answered that it matched no tool, until the attempt
    stalled. Two echoes in a row now restart the conversation from the brief, as two empty
    replies do; the recorded echoes go on, and the attempt stalls as before."""
    _, state = replay(tmp_path, server, "subtract_run_z.json", slice(0, 8))
    node = state["tasks"]["subtract"]
    assert (node["status"], node["reason"]) == ("failed", "stalled")
    told = [r.body["messages"][-1]["content"] for r in server.requests[1:]]
    assert "matched no tool's" in told[4]  # the first echo after the scope request
    restarted = server.requests[6].body["messages"]
    assert [m["role"] for m in restarted] == ["system", "user", "user"]
    assert restarted[2]["content"] == (
        "# Where you are\nYour earlier turns in this attempt were removed: the last ones called "
        "no tool. You have changed no file yet.\n\nNow reply with your next tool call."
    )


def test_a_recorded_finish_over_a_copy_of_the_code_under_test_is_refused_once(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """subtract_run_ac (make real-model 2026-12-05 run ac), the test node: it appended a copy
    of ``subtract()``, which its dependency had written to calc.py (in its read scope), to
    test_calc.py, ran the tests and finished; the node landed, and the run "succeeded" with no
    test of subtract. The finish is now refused once, naming the copy; a model that then
    writes the test lands it."""
    repo, _, told = refused_then_written(tmp_path, server, "subtract_run_ac.json", 3)
    assert "finish refused (this once): test_calc.py defines `subtract`, as calc.py does" in told
    assert "def test_subtract" in landed_file(repo, "test_calc.py")


def test_a_recorded_call_whose_fence_info_came_on_the_next_line_is_run(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """subtract_run_w (make real-model 2026-12-05 run w), calls 1-4: an edit_file of calc.py,
    then ```` ``` ````, ``json`` on the next line and an edit_file of test_calc.py, three
    times. Each was answered as a block of code that named no file, and the attempt stalled.
    The call is now run; the same call again is already done."""
    repo, state = replay(tmp_path, server, "subtract_run_w.json", slice(0, 4))
    edits = [e for e in transcript(repo, state) if e["event"] == "tool"]
    assert [(e["call"]["name"], e["call"]["arguments"]["path"]) for e in edits[:2]] == [
        ("edit_file", "./calc.py"),
        ("edit_file", "./test_calc.py"),
    ]
    assert "\nedited ./test_calc.py\n" in edits[1]["result"]["content"]
    told = [r.body["messages"][-1]["content"] for r in server.requests[2:]]
    assert not any("code in a fenced block" in str(t) for t in told)


def test_recorded_responses_cut_over_and_over_stall_the_attempt(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """subtract_run_y (make real-model 2026-12-05 run y), the test node's calls 1-8, streamed:
    after a read_file, ``obj['test_calc.py']`` over and over, stopped as repeating six times
    running, each answered and none counted; the node went on to its call cap, 1,433 s in
    all. A cut response is a reply without a tool call: the third of the same ends the
    attempt as stalled."""
    _, state = replay(tmp_path, server, "subtract_run_y.json", slice(0, 8), stream=True)
    node = state["tasks"]["subtract"]
    assert (node["status"], node["reason"]) == ("failed", "stalled")
    assert "the same reply 3 times" in node["message"]
    assert len(server.requests) == 5


def test_a_recorded_test_file_holding_a_copy_of_the_code_does_not_land_unclaimed(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """subtract_run_o (make real-model 2026-12-05 run o), execute calls 1-7: a right calc.py,
    then test_calc.py written with test_add and a copy of `def subtract(a, b)`, and no test of
    it; then replies with no tool call until the attempt stalled. The tests passed, and it
    landed, never claimed, with that junk test file. A change whose test module copies the code under
    test is no longer taken unclaimed: the attempt fails as it ended, stalled."""
    repo, state = replay(tmp_path, server, "subtract_run_o.json", slice(0, 7))
    node = state["tasks"]["subtract"]
    assert (node["status"], node["reason"]) == ("failed", "stalled")
    assert not node.get("unclaimed")
    assert fx_branch_commits(repo) == 0


def test_the_recorded_wrong_test_is_shown_to_the_model_before_its_finish_is_taken(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """subtract_run12, attempt 1: subtract() right, in both files (blocks labelled by a
    first-line comment), with a test asserting subtract(2, 3) == 5, and a finish without
    running the tests, which was taken and lost the attempt. Now the finish runs the tests
    first and the model reads the failing assertion; a model that still insists finishes."""
    run = recorded("subtract_run12.json")
    repo, state = replay(
        tmp_path,
        server,
        "subtract_run12.json",
        slice(0, 4),
        then=insisting(run["calls"][3]["response"], sent=1),
    )
    refused = finishes_refused(repo, state)
    assert len(refused) == FAILING_FINISH_REFUSALS
    assert "assert -1 == 5" in refused[0]
    assert "hint: the test expects" not in refused[0]  # it primed the wrong value (test_hints)
    node = state["tasks"]["subtract"]
    assert (node["status"], node["reason"]) == ("failed", "tests")
    written = [c["arguments"]["path"] for e in transcript(repo, state) if e["event"] == "recovered"
               for c in e["tool_calls"]]  # fmt: skip
    assert written == ["calc.py", "test_calc.py"]


# make real-model 2026-12-03 run 8, call 1 (and calls 3, 4, 6 and 7, the same reply): a
# summary in sections, then "Tool Calls" with one write_file block per file
RECORDED_SECTIONS_WITH_CALLS = openai_completion(
    content=(FIXTURES / "sections_with_calls_run8.txt").read_text(), finish_reason="stop"
)
FINISH_CALC = openai_completion(
    tool_calls=[
        openai_tool_call("c3", "finish", json.dumps({"summary": "done", "files": ["calc.py"]}))
    ],
    finish_reason="tool_calls",
)


def test_a_recorded_reply_sent_again_does_not_run_its_changes_again(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """Run 8's reply holds write_file of calc.py with subtract() alone (added after add(), as
    a write read from prose that keeps none of the file's definitions) and of test_calc.py.
    The model sent it five times; run again, the calc.py write would replace the whole file
    with subtract() alone, since the file now defines it too. The same change read from prose
    runs once per attempt: the second time both are answered "already done". (Its test_calc.py
    is the old test with a blank line less: the first finish is refused once for it, run al.)"""
    repo, state = replay(
        tmp_path,
        server,
        "subtract_run12.json",
        slice(0, 0),
        then=[RECORDED_SECTIONS_WITH_CALLS, RECORDED_SECTIONS_WITH_CALLS, *[FINISH_CALC] * 2],
        exit_code=0,
    )
    node = state["tasks"]["subtract"]
    assert node["status"] == "succeeded", node["message"]
    events = transcript(repo, state)
    answers = [e["result"]["content"] for e in events if e["event"] == "tool"]
    assert sum("already done: this write_file of calc.py" in a for a in answers) == 1
    assert sum("already done: this write_file of test_calc.py" in a for a in answers) == 1
    show = ["git", "show", "anti-sprawl/add-subtract:calc.py"]
    landed = subprocess.run(show, cwd=repo, capture_output=True, text=True, check=True).stdout
    assert "def add(a, b):" in landed
    assert "def subtract(a, b):" in landed


def test_a_recorded_reply_sent_a_third_time_ends_the_attempt_over_its_passing_change(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """Run 8's reply a third time, its changes already made twice over: the model is repeating
    itself, as with the same text reply three times (agent/worker.py), so the attempt ends;
    what it wrote passes the tests, so it lands without a finish."""
    repo, state = replay(
        tmp_path,
        server,
        "subtract_run12.json",
        slice(0, 0),
        then=[RECORDED_SECTIONS_WITH_CALLS] * 3,
        exit_code=0,
    )
    node = landed_node(repo, state, server, [], 3)
    assert "sent changes it had already made 3 times" in node["unclaimed"]
    assert node["tests"]["exit_code"] == 0


def landed_file(repo: Path, path: str) -> str:
    show = ["git", "show", f"anti-sprawl/add-subtract:{path}"]
    return subprocess.run(show, cwd=repo, capture_output=True, text=True, check=True).stdout


def landed_node(
    repo: Path, state: dict[str, Any], server: FakeLLMServer, failed: list[str], requests: int
) -> dict[str, Any]:
    """The node of a replay that landed one commit after attempts that failed for ``failed``,
    having served ``requests`` recorded responses."""
    node: dict[str, Any] = state["tasks"]["subtract"]
    assert node["status"] == "succeeded", node["message"]
    assert [a["reason"] for a in node["attempt_log"][: len(failed)]] == failed
    assert len(server.requests) == requests
    assert fx_branch_commits(repo) == 1
    return node


def test_the_first_recorded_run_to_land_now_lands_on_its_first_attempt(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """subtract_run13's first attempt, calls 1-7: each write_file's triple-quoted content ends
    in an echoed ``</data>`` instead of its closing quotes (then no change was read, and the
    attempt failed no_changes). Now the value closes at the echoed tag; calc.py's first line,
    the docstring less its opening quotes, gets them back and the stray triple-quote line after
    it goes, so the file parses; the same write again is "already done"; test_calc.py is written;
    and the finish lands, with subtract() beside add()."""
    repo, state = replay(tmp_path, server, "subtract_run13.json", slice(0, 7), exit_code=0)
    landed_node(repo, state, server, [], 7)
    calc = landed_file(repo, "calc.py")
    assert calc.startswith('"""A tiny calculator."""\ndef add(a, b):\n    return a + b\n')
    assert "def subtract(a, b):\n    return a - b" in calc
    assert "</data>" not in calc
    assert "assert subtract(5, 3) == 2" in landed_file(repo, "test_calc.py")
    answers = [e["result"]["content"] for e in transcript(repo, state) if e["event"] == "tool"]
    assert sum("a line holding only triple quotes" in a for a in answers) == 1
    assert sum("already done: this write_file of calc.py" in a for a in answers) == 1


def test_the_second_attempt_of_the_first_recorded_run_to_land_lands_unclaimed(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """subtract_run13's attempt 2, calls 8-12: it adds subtract() to calc.py and then sends
    one prose plan three times over passing tests. That attempt used to be thrown away as
    stalled (the recorded run landed on attempt 3); now its change lands, unclaimed."""
    repo, state = replay(tmp_path, server, "subtract_run13.json", slice(7, 12), exit_code=0)
    node = landed_node(repo, state, server, [], 5)
    assert node["files_changed"] == ["calc.py"]
    assert "the same reply 3 times" in node["unclaimed"]
    assert "def subtract(a, b):\n    return a - b" in landed_file(repo, "calc.py")


def test_the_third_attempt_of_the_first_recorded_run_to_land(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """subtract_run13's attempt 3, calls 13-17: it writes both files from prose, runs the
    tests, sends the same writes again as JSON (the first, calc.py, is read and answered
    "already done"), and finishes. One commit, subtract() beside add()."""
    repo, state = replay(tmp_path, server, "subtract_run13.json", slice(12, 17), exit_code=0)
    node = landed_node(repo, state, server, [], 5)
    assert node["unclaimed"] == ""
    landed = landed_file(repo, "calc.py")
    assert "def add(a, b):" in landed
    assert "def subtract(a, b):\n    return a - b" in landed
    assert "assert subtract(5, 3) == 2" in landed_file(repo, "test_calc.py")
    answers = [e["result"]["content"] for e in transcript(repo, state) if e["event"] == "tool"]
    assert sum("already done: this write_file of calc.py" in a for a in answers) == 1


def test_a_recorded_submission_in_json_with_comments_is_a_submission(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """make real-model 2026-12-03 run 10, planner call 5: the whole submit_plan call as a
    fenced block of JSON with ``//`` comments after three of its values. It was prose, and
    planning ended there; now it is read without the comments and judged as a plan."""
    # planner_run2: the same calc.py repository and requirement
    result = _planned_from(
        tmp_path,
        server,
        "planner_run2.json",
        slice(0, 0),
        then=["planner_commented_json_run10.txt"],
    )
    assert result.rounds == 1
    codes = {p.code for p in result.report.errors}
    assert "base_unresolved" not in codes  # "base": "main" was read, comment and all
    assert [t.task_id for t in (result.plan.tasks if result.plan else [])] in ([], ["task1"])


def test_a_recorded_plan_of_one_task_written_as_the_task_alone_is_a_submission(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """make real-model 2026-12-03 run 12, planner calls 1-7: one fenced task object (its id,
    name, goal, scopes and budgets) four times, each answered as a call of a tool named
    "Add and Subtract Function", until planning stalled. It is the plan of that one task."""
    # planner_run2: the same calc.py repository and requirement
    result = _planned_from(
        tmp_path, server, "planner_run2.json", slice(0, 0), then=["planner_one_task_run12.txt"]
    )
    assert result.ok, result.report.errors
    assert result.plan is not None
    assert [t.task_id for t in result.plan.tasks] == ["add_subtract_task"]
    assert result.plan.tasks[0].write_scope == ["calc.py", "test_calc.py"]
    assert result.rounds == 1


def test_a_recorded_plan_that_named_a_model_in_every_submission_is_planned(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """make real-model 2026-12-04 run c: all three submissions name model 'python' (the
    default_model too), and the third had no other error, yet planning failed on it. Without
    ``plan --models`` those models are now left out with a warning; and the first
    submission's other error, task1 depending on 'test_add' (a test's name, no task), is left
    out too (run af), so the first submission is the plan: two tasks, each for the run's
    model, the second after the first."""
    result = _planned_from(tmp_path, server, "planner_models_run_c.json", slice(0, 3))
    assert result.ok, result.message
    assert result.rounds == 1
    assert result.plan is not None
    deps = [(t.task_id, t.dependencies) for t in result.plan.tasks]
    assert deps == [("task1", []), ("task2", ["task1"])]
    assert {t.model for t in result.plan.tasks} == {None}
    assert result.plan.default_model is None
    assert sum("left out: the user allowed no models" in w for w in result.warnings) == 2
    assert "task 'task1' dependency 'test_add' names no task: left out" in result.warnings


def test_run_tests_with_the_test_command_as_its_args_runs_it_whole(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """subtract_run_c, attempt 2, calls 6-10: run_tests with ``args: ["python -m pytest -q"]``
    ran ``python -m pytest -q python -m pytest -q`` ("file or directory not found"), and the
    model then advised installing pytest. Now the whole command runs once, and the model is
    told; the attempt still stalls on bare blocks that name no file (an import alone, then
    subtract() alone, which no file of the scope shares a line with)."""
    repo, state = replay(tmp_path, server, "subtract_run_c.json", slice(5, 10))
    node = state["tasks"]["subtract"]
    assert (node["status"], node["reason"]) == ("failed", "stalled")
    (ran,) = [e["result"]["content"] for e in transcript(repo, state) if e["event"] == "tool"]
    assert "tests passed (exit code 0): python -m pytest -q\n" in ran
    assert "not found" not in ran
    assert "note: your args were the test command itself" in ran


def test_a_reply_that_writes_a_tools_answer_ends_where_that_answer_begins(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """subtract_run_d, attempt 3, calls 11-16: its call 15 wrote what run_tests would answer
    (``<tool_response>`` and the test output) to the 2,048-token limit, and was told to write
    large files in parts, which its next reply set out to do. A reply's turn now ends where a
    tool's answer begins: this one held nothing before it, and is told what it did."""
    replay(tmp_path, server, "subtract_run_d.json", slice(10, 16))
    after = server.requests[5].body["messages"][-1]["content"]
    assert "it wrote what a tool would answer, which only a tool does" in after
    assert "Write large files in parts" not in after


def test_what_ran_on_and_what_is_a_large_write() -> None:
    """The recorded runaways ran on (run b's 1,700 zeros are subtract_run12's kind too: one
    digit over and over); a cut write of distinct lines did not."""
    from anti_sprawl.providers.limits import ran_on

    run12 = recorded("subtract_run12.json")["calls"][14]["response"]
    assert run12["choices"][0]["finish_reason"] == "length"
    assert ran_on(run12["choices"][0]["message"]["content"])
    run_d = recorded("subtract_run_d.json")["calls"][14]["response"]
    assert ran_on(run_d["choices"][0]["message"]["content"])
    digits = '{"name": "write_file", "arguments": {"content": "assert add(1' + "0" * 1700
    assert ran_on(digits)
    lines = "".join(f"def f{i}(x):\n    return x * {i} + {i * i}\n\n" for i in range(120))
    assert not ran_on('{"name": "write_file", "arguments": {"path": "a.py", "content": "' + lines)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_the_run_that_landed_on_the_final_code_lands_on_its_second_attempt(
    tmp_path: Path, server: FakeLLMServer, stream: bool
) -> None:
    """subtract_run_e, all 6 calls over two attempts (make real-model 2026-12-04 run e, the
    second live landing): two runaways cut at the limit, each answered that it ran on; the
    tests of the old files pass and the finish over no change fails no_changes; the retry
    writes both files from triple-quoted text calls and lands one commit, its tests passing.
    Streamed, each runaway is stopped at its first repeating 2,000 characters (of 7,406) and
    the connection closed, so the server stops generating; the node lands the same. (The
    finish over no change is refused once now, the goal naming both files: the model is
    served its finish again, and the retry follows as recorded.)"""
    calls = recorded("subtract_run_e.json")["calls"]
    again = [c["response"] for c in calls[3:6]]  # the finish over no change, then attempt 2
    repo, state = replay(
        tmp_path, server, "subtract_run_e.json", slice(0, 4), again, 0, attempts=3, stream=stream
    )
    node = landed_node(repo, state, server, ["no_changes"], 7)
    for cut in (server.requests[1], server.requests[2]):
        assert "It ran on" in cut.body["messages"][-1]["content"]
    stops = [e["stop_reason"] for e in transcript(repo, state) if e["event"] == "response"]
    assert stops[:2] == (["ran_on"] * 2 if stream else ["max_tokens"] * 2)
    assert server.streams_left() == (2 if stream else 0)
    assert "def subtract(a, b):\n    return a - b" in landed_file(repo, "calc.py")
    assert "assert subtract(2, 3) == -1" in landed_file(repo, "test_calc.py")
    assert node["tests"]["exit_code"] == 0


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_planner_reply_that_writes_its_tools_answers_is_told_so(
    tmp_path: Path, server: FakeLLMServer, stream: bool
) -> None:
    """make real-model 2026-12-04 run f, planner call 2: the tools' answers written out as
    ``<tool_response>`` blocks until the output cap (4 minutes), then told to submit a shorter
    plan (its next reply ran on the same way). Its turn ends where a tool's answer begins, here
    at once: it is told that only a tool writes that. Streamed, the reply is read no further
    than the tag and the connection closed."""
    _planned_from(
        tmp_path,
        server,
        "planner_runaway_run_f.json",
        slice(0, 2),
        then=["planner_one_task_run12.txt"],  # a plan, so planning ends there
        stream=stream,
    )
    cut = recorded("planner_runaway_run_f.json")["calls"][1]["response"]
    assert cut["choices"][0]["finish_reason"] == "length"
    told = server.requests[2].body["messages"][-1]["content"]
    assert "it wrote what a tool would answer, which only a tool does" in told
    assert "shorter plan" not in told
    assert server.streams_left() == (1 if stream else 0)


def test_files_written_indented_or_fenced_are_written_as_python(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """subtract_run_g, attempt 1, calls 1-3 (make real-model 2026-12-04, second session): both
    files written in triple quotes with every line indented to the JSON around them, then a
    finish. calc.py did not parse and replaced add(); the tests stopped at collection (exit 2)
    and the model never found out why. Dedented, subtract() is added after add(), and the
    finish is refused over the model's own wrong test, which now runs."""
    run = recorded("subtract_run_g.json")
    repo, state = replay(
        tmp_path,
        server,
        "subtract_run_g.json",
        slice(0, 3),
        then=insisting(run["calls"][2]["response"], sent=1),
    )
    writes = [e["result"]["content"] for e in transcript(repo, state) if e["event"] == "tool"
              and e["call"]["name"] == "write_file"]  # fmt: skip
    assert all("its lines were indented, so the indent common to them" in w for w in writes)
    assert "appended to calc.py" in writes[0]
    refused = finishes_refused(repo, state)
    assert refused
    assert all("tests failed (exit code 1)" in r for r in refused)
    assert all("assert subtract(2, 3) == 5" in r for r in refused)


def test_a_file_written_inside_a_code_fence_is_written_without_it(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """subtract_run_g, attempt 3, calls 5-8: both files written as JSON whose content is a
    fenced python block; appended fences made both files invalid. The fence is dropped."""
    repo, state = replay(tmp_path, server, "subtract_run_g.json", slice(13, 15))
    (calc, test) = [e["result"]["content"] for e in transcript(repo, state, attempt=1)
                    if e["event"] == "tool" and e["call"]["name"] == "write_file"]  # fmt: skip
    assert "the code fence around it was dropped" in calc
    assert "the code fence around it was dropped" in test


def test_the_first_streamed_live_run_lands_on_its_first_attempt(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """subtract_run_h, all 3 calls (make real-model 2026-12-04, second session, run h: the
    first live run with streamed answers, landed in 139 s): calc.py whole in triple quotes
    with its docstring's quotes lost, the same write again (already done), and a finish. The
    model added no test; the old ones pass. The first finish is refused once: the goal names
    test_calc.py, left as it was (run t); the same finish again lands calc.py alone."""
    finish = recorded("subtract_run_h.json")["calls"][2]["response"]
    repo, state = replay(
        tmp_path, server, "subtract_run_h.json", slice(0, 3), [finish], exit_code=0, stream=True
    )
    node = landed_node(repo, state, server, [], 4)
    told = server.requests[3].body["messages"][-1]["content"]
    assert "finish refused (this once): your goal names test_calc.py" in told
    assert node["files_changed"] == ["calc.py"]
    assert landed_file(repo, "calc.py").startswith('"""A tiny calculator."""\n')
    assert "def subtract(a, b):\n    return a - b" in landed_file(repo, "calc.py")
    assert server.streams_left() == 0


def test_a_recorded_task_written_at_the_plans_top_level_is_planned(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """make real-model 2026-12-04 (second session) run i, planner call 1: one task written at
    the plan's top level and again inside ``tasks``, with ``"model": ""``, ``"test_command":
    ""`` and ``"tasks": []`` in the task; 12 errors, three times over, and planning failed.
    The top-level copy is left out, the empty fields unset, each with a warning."""
    result = _planned_reply(tmp_path, server, "planner_task_at_top_run_i.txt")
    assert result.ok, result.message
    assert result.plan is not None
    (task,) = result.plan.tasks
    assert (task.task_id, task.write_scope) == ("add_subtract", ["calc.py", "test_calc.py"])
    assert (task.model, task.test_command) == (None, None)
    reshaped = [w for w in result.warnings if "top level repeated task 'add_subtract'" in w]
    assert len(reshaped) == 1
    assert any("task 'add_subtract' known_failures" in w for w in result.warnings)


def test_a_submission_that_is_one_task_is_the_plan_of_that_task() -> None:
    from anti_sprawl.planner.submission_repairs import reshaped_submission
    from anti_sprawl.planner.tools import submission_data

    task = {"task_id": "t", "goal": "g", "write_scope": ["a.py"], "model": ""}
    data, problems = reshaped_submission({"plan_id": "p", "requirement": "r", **task})
    assert data == {
        "plan_id": "p",
        "requirement": "r",
        "tasks": [{"task_id": "t", "goal": "g", "write_scope": ["a.py"], "model": None}],
    }
    assert [p.code for p in problems] == ["submission_reshaped"] * 2
    # a top-level field that is not a copy of a listed task is left for validation to name
    other = {"plan_id": "p", "name": "x", "tasks": [{"task_id": "t"}]}
    assert reshaped_submission(other) == (other, [])
    # ids of any type (a model's) are compared only as text, never hashed
    odd = {"plan_id": "p", "task_id": ["t"], "goal": "g", "tasks": [{"task_id": ["t"]}]}
    assert reshaped_submission(odd) == (odd, [])
    named = submission_data(
        {"tasks": [{"task_id": ["t"]}, {"name": "b"}]},
        requirement="r",
        plan_id="p",
        force_id=False,
        base=None,
    )
    assert named["tasks"][1]["task_id"] == "b"


def test_a_recorded_plan_with_triple_quotes_inside_a_string_is_planned(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """make real-model 2026-12-04 (second session) run j, planner call 1: a whole submit_plan
    whose requirement copied the repository map, ``\"\"\"A tiny calculator.\"\"\"`` and all,
    refused as "not valid JSON". Those quotes are escaped; the plan is judged on what it says:
    two tasks (the requirement is the user's own text, the model it named left out)."""
    result = _planned_reply(tmp_path, server, "planner_inner_quotes_run_j.txt")
    assert result.ok, result.message
    assert result.rounds == 1
    assert result.plan is not None
    assert [t.task_id for t in result.plan.tasks] == ["1", "2"]
    assert "Repository map" not in result.plan.requirement


def test_a_passing_change_the_model_never_claimed_lands_unless_it_imports_itself(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """subtract_run_k (make real-model 2026-12-04, second session, run k), attempts 1 and 2,
    calls 9-16. Attempt 1 appended subtract(), ``from calc import add`` and a wrong test
    function to calc.py, was told the tests pass, and wrote "I need to request the write
    scope" until it stalled: the tests pass, but calc.py imports itself, so it is not taken.
    Attempt 2 wrote a right calc.py from a file block and sent it twice more (stalled): the
    recorded run threw that away and failed; now it lands, marked as never claimed."""
    repo, state = replay(
        tmp_path, server, "subtract_run_k.json", slice(0, 8), exit_code=0, attempts=2
    )
    node = landed_node(repo, state, server, ["stalled"], 8)
    assert "4 replies in a row" in node["attempt_log"][0]["message"]
    assert "sent changes it had already made 3 times" in node["unclaimed"]
    calc = landed_file(repo, "calc.py")
    assert "def subtract(a, b):\n    return a - b" in calc
    assert "import" not in calc
    assert "test_" not in calc
    pr = (repo / ".anti-sprawl" / "runs" / state["run_id"] / "PR.md").read_text()
    assert "_The worker never called finish" in pr  # in the PR's words (markdown-escaped)
    assert "sent changes it had already made 3 times" in pr
    # the goal asks for a test in test_calc.py too: the reviewer is told it is not there
    assert "_Its goal names `test_calc.py`, which it did not change._" in pr
    out = tmp_path / "report.html"
    made = runner.invoke(app, ["report", state["run_id"], "--repo", str(repo), "-o", str(out)])
    assert made.exit_code == 0, made.output
    assert "<h3>No summary</h3><p>The worker never called finish (the model sent" in out.read_text()


def test_the_nudge_over_a_failing_change_carries_the_hints_a_test_run_does(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """subtract_run_m (make real-model 2026-12-05 run m), calls 9-13: subtract() appended to
    calc.py, a test of it appended to test_calc.py (importing only add, and expecting
    subtract(2, 3) == 5), a finish refused over the NameError, then an empty reply. The nudge
    after it showed the failure without the hint the finish's refusal had: now both have it.
    It also says the reply was empty and asks for the call as a JSON block (agent/worker.py,
    EMPTY_REPLY_PROMPT: the same prompt again was answered empty 8 times of 8)."""
    repo, state = replay(tmp_path, server, "subtract_run_m.json", slice(0, 5))
    refusal = finishes_refused(repo, state)[0]
    nudge = server.requests[4].body["messages"][-1]["content"]
    assert nudge.startswith(EMPTY_REPLY_PROMPT + "\n(changed so far: calc.py, test_calc.py)")
    for told in (refusal, nudge):
        assert (
            "hint: subtract is defined in calc.py; code in another file that uses it needs `from calc import subtract`"
            in told
        )


def test_a_recorded_read_of_the_repository_map_as_a_file_is_left_out(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """make real-model 2026-12-05 run o, planner call 7: one right task whose read_scope named
    ``repo/map/repomap`` (the map we showed it, taken for a file); three submissions failed on
    that entry alone. A planner's entry naming no file is left out, with a warning."""
    result = _planned_reply(tmp_path, server, "planner_missing_read_run_o.txt")
    assert result.ok, result.message
    assert result.plan is not None
    (task,) = result.plan.tasks
    assert (task.read_scope, task.write_scope) == ([], ["calc.py", "test_calc.py"])
    assert any("read_scope entry 'repo/map/repomap' names no file" in w for w in result.warnings)


def test_a_recorded_test_node_may_read_the_module_its_test_imports(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """make real-model 2026-12-05 run s, planner call 2: calc.py in one task, its test in a
    second whose read scope was test_calc.py alone. test_calc.py imports add() from calc.py,
    which the worker could not read: it never saw subtract() and finished twice over no
    change. The planner now adds the files defining names a task's files use."""
    result = _planned_reply(tmp_path, server, "planner_split_run_s.txt")
    assert result.ok, result.message
    code, test = result.plan.tasks
    assert (test.write_scope, test.read_scope) == (["test_calc.py"], ["test_calc.py", "calc.py"])
    assert code.read_scope == []
    assert "task 'task2' read_scope: added calc.py: its files use names defined there" in "\n".join(
        result.warnings
    )


def test_a_recorded_test_node_beside_the_code_it_tests_waits_for_it(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """make real-model 2026-12-05 run ak, planner call 7: task-1 adds subtract() to calc.py,
    task-2 (given test_calc.py, which its goal names) tests it, and neither depends on the
    other (its dependencies were "read_file ./calc.py"-like strings, left out). They ran side
    by side; task-2 never saw subtract(), defined its own in test_calc.py and tested that,
    and the run "succeeded". The test task now depends on the task writing the module its
    file imports, and may read that module."""
    result = _planned_reply(tmp_path, server, "planner_parallel_test_run_ak.txt")
    assert result.ok, result.message
    code, test = result.plan.tasks
    assert (code.task_id, code.dependencies) == ("task-1", [])
    assert (test.task_id, test.dependencies) == ("task-2", ["task-1"])
    assert "calc.py" in test.read_scope
    told = "\n".join(result.warnings)
    assert (
        "task 'task-2' dependencies: added 'task-1': its files use names defined in calc.py" in told
    )
    assert "neither depends on the other" not in told


def test_a_recorded_repair_of_one_task_keeps_the_tasks_it_left_out(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """make real-model 2026-12-05 run t, planner calls 1-3: tasks '0' (calc.py) and '1' (its
    test, with an empty write scope); told to fix '1', the model sent "the corrected task with
    ID 1" alone, twice, and planning failed: '1' depends on unknown '0'. A repair that re-sends
    only some tasks, depending on ones it left out, keeps the earlier submission's others."""
    replies = ["planner_partial_repair_run_t_1.txt", "planner_partial_repair_run_t_2.txt"]
    result = _planned_from(tmp_path, server, "planner_runaway_run_f.json", slice(0, 0), replies)
    assert result.ok, result.message
    code, test = result.plan.tasks
    assert (code.task_id, code.write_scope) == ("0", ["calc.py"])
    assert (test.task_id, test.dependencies, test.write_scope) == ("1", ["0"], ["calc.py"])
    kept = "the submission re-sent only some tasks: the earlier submission's '0' kept"
    assert kept in result.warnings
    # the plan writes no test_calc.py, which the requirement names: sent back once, then kept
    # it writes no test_calc.py, which the requirement names: sent back once (planner.py),
    # and the answer when no better plan comes
    assert result.rounds == 2
    assert "cannot meet the requirement" in server.requests[2].body["messages"][-1]["content"]


def test_only_a_repair_that_needs_the_tasks_it_left_out_keeps_them() -> None:
    """``with_earlier_tasks`` leaves every other submission as it was sent."""
    from anti_sprawl.planner.submission_repairs import with_earlier_tasks

    def task(task_id: str, *deps: str) -> dict[str, Any]:
        return {"task_id": task_id, "goal": "g", "dependencies": list(deps)}

    earlier = [task("a"), task("b", "a"), task("c")]
    fixed = {"plan_id": "p", "tasks": [task("b", "a")]}
    whole, problems = with_earlier_tasks(fixed, earlier)
    assert [t["task_id"] for t in whole["tasks"]] == ["a", "b", "c"]
    assert [p.code for p in problems] == ["submission_reshaped"]
    for sent in (
        {"plan_id": "p", "tasks": [task("b")]},  # a smaller plan that stands alone
        {"plan_id": "p", "tasks": [task("b", "z")]},  # a dependency nothing held: an error
        {"plan_id": "p", "tasks": [task("b", "a"), task("b", "a")]},  # a duplicate id
        {"plan_id": "p", "tasks": "b"},
    ):
        assert with_earlier_tasks(sent, earlier) == (sent, [])
    assert with_earlier_tasks(fixed, []) == (fixed, [])  # the first submission


def test_a_recorded_task_with_no_write_scope_writes_the_file_its_goal_names(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """make real-model 2026-12-05 run u, planner call 5: the test task's goal "Write a test
    for subtract(a, b) in test_calc.py", with test_calc.py in its read scope and an empty write
    scope (as in runs s and t); its repair drew empty replies only, and planning failed. A task
    with no write scope gets the files its goal names that no other task writes."""
    result = _planned_reply(tmp_path, server, "planner_empty_write_scope_run_u.txt")
    assert result.ok, result.message
    code, test = result.plan.tasks
    assert (code.write_scope, test.write_scope) == (["calc.py"], ["test_calc.py"])
    given = "task 'test-add-subtract' had no write_scope: given test_calc.py, which its goal names"
    assert given in result.warnings


def test_a_recorded_goal_naming_the_file_another_task_writes_gives_no_write_scope(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """make real-model 2026-12-05 run v, planner calls 1-2: the test task's goal "Write a test
    for the subtract function in calc.py" names the file the other task writes, as
    ``./calc.py``; that is not its file. Its empty write scope stays an error, which the model
    repaired (test_calc.py)."""
    replies = [
        "planner_goal_names_other_file_run_v_1.txt",
        "planner_goal_names_other_file_run_v_2.txt",
    ]
    result = _planned_from(tmp_path, server, "planner_runaway_run_f.json", slice(0, 0), replies)
    assert result.ok, result.message
    assert "empty_write_scope" in server.requests[1].body["messages"][-1]["content"]
    assert [t.write_scope for t in result.plan.tasks] == [["./calc.py"], ["./test_calc.py"]]
    assert not any("had no write_scope" in w for w in result.warnings)


def test_only_a_task_with_no_write_scope_is_given_what_its_goal_names() -> None:
    from anti_sprawl.planner.submission_repairs import reshaped_submission

    def task(task_id: str, goal: str, writes: list[str] | None) -> dict[str, Any]:
        return {"task_id": task_id, "goal": goal} | (
            {} if writes is None else {"write_scope": writes}
        )

    data = {
        "plan_id": "p",
        "tasks": [
            task("code", "Add subtract() to calc.py", ["calc.py"]),
            task("test", "Test calc.py's subtract() in tests/test_calc.py", []),
            task("again", "Also write tests/test_calc.py", None),  # already given to 'test'
            task("vague", "A test for it", []),
        ],
    }
    shaped, problems = reshaped_submission(data)
    writes = [t.get("write_scope") for t in shaped["tasks"]]
    assert writes == [["calc.py"], ["tests/test_calc.py"], None, []]
    assert [p.message for p in problems] == [
        "task 'test' had no write_scope: given tests/test_calc.py, which its goal names"
    ]
    assert data["tasks"][1]["write_scope"] == []  # the submission itself is left as it was


def test_a_recorded_base_the_planner_made_up_is_left_out(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """make real-model 2026-12-05 run y, planner call 3: ``"base": "repomap"``, the map we
    showed it taken for a commit; its repair chose ``"existing_commit_or_branch"``, the words
    of the error's advice. A base the model made up that names no commit gives way to the
    commit the planner looked at (HEAD), with a warning."""
    result = _planned_reply(tmp_path, server, "planner_invented_base_run_y.txt")
    assert result.ok, server.requests[-1].body["messages"][-1]["content"]
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path / "calc", text=True,
                          capture_output=True, check=True).stdout.strip()  # fmt: skip
    assert result.plan.base == head
    replaced = "the plan's base 'repomap' names no commit: replaced by the commit planned at"
    assert replaced in result.warnings


def test_a_recorded_plan_asking_fewer_attempts_than_the_default_gets_the_default(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """make real-model 2026-12-05 run aa, planner call 2: the plan in prose, then its whole
    submission with ``"max_attempts": 1`` and no word why; its test task finished over no
    change and had no second attempt. A planner may ask for more attempts, not fewer: the
    plan keeps the default, with a warning the user sees in review."""
    result = _planned_reply(tmp_path, server, "planner_fewer_attempts_run_aa.txt")
    assert result.ok, server.requests[-1].body["messages"][-1]["content"]
    assert [t.task_id for t in result.plan.tasks] == ["01-add-subtract", "02-write-test-subtract"]
    assert result.plan.max_attempts == DEFAULT_MAX_ATTEMPTS
    assert {result.plan.attempts_for(t) for t in result.plan.tasks} == {DEFAULT_MAX_ATTEMPTS}
    left_out = "the plan's max_attempts 1 left out: fewer attempts than the default (2)"
    assert any(w.startswith(left_out) for w in result.warnings), result.warnings


def test_a_planner_asking_more_attempts_keeps_them() -> None:
    from anti_sprawl.planner.submission_repairs import without_fewer_attempts

    task = {"task_id": "t", "max_attempts": 3}
    data, warnings = without_fewer_attempts({"max_attempts": 2, "tasks": [task, "junk"]})
    assert (data, warnings) == ({"max_attempts": 2, "tasks": [task, "junk"]}, [])
    data, warnings = without_fewer_attempts({"tasks": [{"task_id": "u", "max_attempts": 0}]})
    assert data == {"tasks": [{"task_id": "u"}]}
    assert [w.message for w in warnings] == [
        "task 'u' max_attempts 0 left out: fewer attempts than the default (2) are the "
        "user's to set"
    ]


def test_a_recorded_dependency_on_a_task_left_out_is_left_out(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """make real-model 2026-12-05 run ad, planner submission 1: task '2' depending on a task
    '1' it never wrote, twice; then the skeleton of a valid task, whose paths it copied as
    ``src/calc.py`` and ``tests/test_calc.py``, which do not exist, and planning failed. The
    dependency on no task is left out now, and the first submission is the plan (the
    skeleton's paths: tests/test_planner_sdk.py)."""
    result = _planned_reply(tmp_path, server, "planner_skeleton_paths_run_ad_1.txt")
    assert result.ok, server.requests[-1].body["messages"][-1]["content"]
    assert result.rounds == 1
    assert "task '2' dependency '1' names no task: left out" in result.warnings


def test_a_users_plan_keeps_its_read_of_a_missing_file_an_error(tmp_path: Path) -> None:
    """Only a planner's submission is mended: in a plan the user wrote it is a typo to fix."""
    run = recorded("planner_runaway_run_f.json")
    repo = recorded_repo(tmp_path, run)
    plan = tmp_path / "plan.yaml"
    task = {"task_id": "t", "name": "n", "goal": "g", "read_scope": ["nope.py"]}
    task |= {"write_scope": ["calc.py"], "token_budget": 10_000, "max_tool_calls": 5}
    plan.write_text(yaml.safe_dump({"plan_id": "p", "requirement": "r", "tasks": [task]}))
    result = runner.invoke(app, ["validate", str(plan), "--repo", str(repo)])
    assert result.exit_code == 1, result.output
    assert "read_scope_missing" in result.output


def test_an_empty_planner_reply_gets_its_own_nudge(tmp_path: Path, server: FakeLLMServer) -> None:
    """Run o, planner calls 11-13: the same nudge after an empty reply drew empty replies in
    0.1 s each (a cached prompt, one end-of-text token). An empty reply is told so, and asked
    for the call as a JSON block; a plan after it is taken."""
    from anti_sprawl.planner.planner import EMPTY_NUDGE, NUDGE

    server.enqueue(openai_completion(content="", finish_reason="stop"))
    result = _planned_reply(tmp_path, server, "planner_missing_read_run_o.txt")
    assert result.ok, result.message
    told = server.requests[1].body["messages"][-1]["content"]
    assert told == EMPTY_NUDGE != NUDGE


def test_a_reply_of_an_empty_code_block_is_an_empty_reply(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """subtract_run_r (make real-model 2026-12-05 run r), calls 6-10: a right calc.py, the
    same write again, then an empty code block three times, each told that its code named no
    file. It is an empty reply: told so, and the second in a row restarts the conversation
    from the brief. The attempt still stalls on the third (the same reply), over a change the
    tests pass on, so calc.py lands, never claimed."""
    repo, state = replay(tmp_path, server, "subtract_run_r.json", slice(0, 5), exit_code=0)
    node = landed_node(repo, state, server, [], 5)
    assert "the same reply 3 times" in node["unclaimed"]
    told = [r.body["messages"][-1]["content"] for r in server.requests[3:]]
    assert told[0].startswith(EMPTY_REPLY_PROMPT)
    assert told[1].startswith("# Where you are\n")
    assert "def subtract(a, b):\n    return a - b" in landed_file(repo, "calc.py")


def test_a_recorded_file_written_with_code_fences_inside_is_written_as_python(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """subtract_run_p (make real-model 2026-12-05 run p), call 1: calc.py written as a call in
    a ```json block, its value opened with triple quotes and closed with one, holding add()
    and subtract() each in a ```python block, its blank lines as ``\\n`` escapes. The call was
    cut at the first inner fence and calc.py became its docstring alone (69 characters). Read
    whole, the escapes read, the fence lines left out and the docstring quoted, calc.py parses
    with both functions, and the node lands on its finish."""
    finish = {"summary": "Added subtract()", "files": ["calc.py"]}
    then = [openai_completion(tool_calls=[openai_tool_call("c2", "finish", json.dumps(finish))])]
    # twice: the first is refused once, as it leaves test_calc.py, which the goal names, as is
    repo, state = replay(tmp_path, server, "subtract_run_p.json", slice(0, 1), then * 2, 0)
    landed_node(repo, state, server, [], 3)
    (wrote,) = [e["result"]["content"] for e in transcript(repo, state) if e["event"] == "tool"
                and e["call"]["name"] == "write_file"]  # fmt: skip
    assert "markdown code fences, which are not Python, so they were left out" in wrote
    calc = landed_file(repo, "calc.py")
    defined = [node.name for node in ast.parse(calc).body if isinstance(node, ast.FunctionDef)]
    assert defined == ["add", "subtract"]
    assert calc.startswith('"""A tiny calculator."""\n')
    assert "```" not in calc


def finishes(files: list[str]) -> dict[str, Any]:
    """A finish through the tools interface, naming ``files``."""
    finish = {"summary": "Done", "files": files}
    return openai_completion(tool_calls=[openai_tool_call("f", "finish", json.dumps(finish))])


@pytest.mark.parametrize("stream", [False, True])
def test_a_recorded_file_written_in_our_data_tag_is_the_file(
    tmp_path: Path, server: FakeLLMServer, stream: bool
) -> None:
    """subtract_run_ag (make real-model 2026-12-05 run ag), node 2's first reply: calc.py with
    add() and a new subtract(), in our data tag (``<data kind="file" source="calc.py" ...>``)
    inside a bare fence, the way its brief shows a file. It was cut away as the answer of a
    tool, the same empty reply came three times, the attempt stalled, and the next deleted
    calc.py. The tag now names the file: it is written, and the finish lands it."""
    repo, state = replay(
        tmp_path, server, "subtract_run_ag.json", slice(0, 1), [finishes(["calc.py"])], 0,
        stream=stream,
    )  # fmt: skip
    node = landed_node(repo, state, server, [], 2)
    assert node["files_changed"] == ["calc.py"]
    calc = landed_file(repo, "calc.py")
    assert "def add(a, b):\n    return a + b" in calc
    assert 'def subtract(a, b):\n    """Subtract b from a."""\n    return a - b' in calc
    assert "<data" not in calc
    assert "```" not in calc


def both_files_land(
    tmp_path: Path, server: FakeLLMServer, name: str, calls: slice, *, stream: bool = False
) -> Path:
    """The replay of ``name``'s ``calls`` then a finish lands calc.py with subtract() and
    test_calc.py with its test, as the recorded model wrote them (in our data tags); the
    repository."""
    then = [finishes(["calc.py", "test_calc.py"])]
    repo, state = replay(tmp_path, server, name, calls, then, 0, stream=stream)
    node = landed_node(repo, state, server, [], calls.stop - calls.start + 1)
    assert node["files_changed"] == ["calc.py", "test_calc.py"]
    assert "def subtract(a, b):\n    return a - b" in landed_file(repo, "calc.py")
    test = landed_file(repo, "test_calc.py")
    assert "def test_subtract():\n    assert subtract(5, 3) == 2" in test
    assert "<data" not in test
    return repo


def test_recorded_files_written_back_in_the_briefs_form_are_the_files(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """subtract_run_g, attempt 3, call 11 (make real-model 2026-12-04, second session, run g,
    call 21): the brief's "# Write-scope files" written back with calc.py and test_calc.py
    changed, each in our data tag, then the brief's failure note. Both files were right and
    neither was written (the reply was cut at the first tag, and the attempt failed
    no_changes). They are now both written, and land; the failure note's tag still ends the
    reply there."""
    both_files_land(tmp_path, server, "subtract_run_g.json", slice(10, 11))


def test_recorded_files_in_our_data_tag_under_headings_land(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """subtract_run_ah, calls 1-2 (make real-model 2026-12-05 run ah, at 0026a31): calc.py and
    test_calc.py, both right, each in our data tag after ``### `` on its line; then the same
    two again, and a third tag whose stream stopped half written. Neither was read as a file
    (the heading before the tag; the half tag judged a tool's answer), and the node landed
    calc.py alone, with no test. Both files are now written from the first reply; the second
    is the same files again, cut where its third tag begins; the finish lands both."""
    both_files_land(tmp_path, server, "subtract_run_ah.json", slice(0, 2), stream=True)
    again = [m["content"] for m in server.requests[2].body["messages"][-2:]]
    assert all("already done: this write_file of" in a for a in again)  # calc.py, test_calc.py


def test_the_schema_s_required_list_copied_into_a_plan_is_left_out(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """make real-model 2026-12-05 run ao, planner calls 1 and 2: a good plan (calc.py, then
    its test in test_calc.py) with the submit_plan schema's ``"required": ["plan_id",
    "tasks"]`` beside it, refused twice as an unknown field; the third submission left the
    test task out. That list is now left out, with a warning, and the plan is the answer."""
    result = _planned_reply(tmp_path, server, "planner_schema_required_run_ao_1.txt")
    assert result.ok, result.message
    assert [(t.task_id, t.write_scope) for t in result.plan.tasks] == [
        ("01", ["./calc.py"]),
        ("02", ["./test_calc.py"]),
    ]
    assert result.rounds == 1
    assert any("'required' (the tool schema's list of fields" in w for w in result.warnings)


def test_a_reply_that_only_copies_the_retry_note_is_an_empty_reply_and_leaves_no_trace(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """make real-model 2026-12-05 run ao, attempt 2: five replies began with the retry note
    copied word for word ("This is attempt 2 at this task. Attempt 1 failed; ..."), three of
    them nothing else. Each was answered as prose and kept in the conversation, where the next
    reply copied it again (agent/echoes.py: replayed against the model, 5 echoes of 6 so, and
    6 calls of 6 with the echoes taken out and the reply answered as an empty one). Now an
    echo is taken out of what the conversation keeps, a reply of nothing else is answered as
    an empty reply (two in a row restart the conversation), and calls after an echo run."""
    calls = [call["response"] for call in recorded("subtract_run_ao.json")["calls"]]
    # attempt 1 as recorded up to "No changes." (its next two replies, def subtract in a bare
    # block, now write calc.py: that reply again instead, so it still stalls), then attempt 2
    then = [calls[3], calls[3], *calls[6:15]]
    repo, state = replay(
        tmp_path, server, "subtract_run_ao.json", slice(0, 4), then=then, attempts=2
    )
    sent = server.requests
    note = "This is attempt 2 at this task."
    for request in sent:
        kept = [m for m in request.body["messages"] if m["role"] == "assistant"]
        assert not any(note in (m.get("content") or "") for m in kept)
    served = [*calls[:4], *then]
    after_echo_only = [
        sent[i + 1].body["messages"][-1]["content"]
        for i, response in enumerate(served)
        if i + 1 < len(sent) and _echo_only(response, note)
    ]
    # answered as an empty reply; the second in a row restarts the conversation (worker.py)
    assert [text.split("\n")[0][:30] for text in after_echo_only] == [
        EMPTY_REPLY_PROMPT[:30],
        EMPTY_REPLY_PROMPT[:30],
        RESTART_HEADER[:30],
    ]
    # the calls written after an echo ran (read_file, then edit_file of calc.py)
    ran = [e["call"]["name"] for e in transcript(repo, state, attempt=2) if e["event"] == "tool"]
    assert ran[:3] == ["run_tests", "read_file", "edit_file"]


def _echo_only(response: Any, note: str) -> bool:
    text = response["choices"][0]["message"].get("content") or ""
    return text.startswith(note) and "{" not in text and "<data" not in text
