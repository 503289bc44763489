"""No change, no success: a node whose diff is empty fails ``no_changes`` and is retried, told.

What a real small model did (issue 23): asked to add ``subtract()``, it ran the old tests and
called ``finish`` with "Added subtract ... Tests passed", and anti-sprawl used to land an empty
commit with that claim as its body. Through the real CLI and the real OpenAI SDK against the
local fake server, on real git repositories.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from anti_sprawl.agent.nudges import TEXT_TURN_LIMIT
from anti_sprawl.cli.app import app

from . import e2e_fixture as fx
from .fake_llm_server import FakeLLMServer, openai_completion, openai_tool_call

runner = CliRunner()
pytestmark = pytest.mark.usefixtures("python_on_path")
CLAIM = "Added subtract(a, b). Tests passed."


def plan(**node: Any) -> dict[str, Any]:
    a = fx.node("a", [], "pkg/a.py", "", **node)
    return {
        "plan_id": "demo",
        "requirement": "Add A",
        "test_command": [sys.executable, "-c", "print('ok')"],
        "tasks": [a],
    }


def turn(n: int, name: str, args: dict[str, Any]) -> dict[str, Any]:
    call = openai_tool_call(f"call_{n}", name, json.dumps(args))
    return openai_completion(tool_calls=[call], finish_reason="tool_calls")


def serve(server: FakeLLMServer, *calls: tuple[str, dict[str, Any]]) -> None:
    """Each ``(tool, arguments)`` as one response holding that call, in order."""
    for n, (name, args) in enumerate(calls):
        server.enqueue(turn(n, name, args))


def answer(server: FakeLLMServer, request: int) -> str:
    """What the tool call before request ``request`` was answered (the last message)."""
    last = server.requests[request].body["messages"][-1]
    assert last["role"] == "tool"
    return str(last["content"])


def execute(
    tmp_path: Path,
    server: FakeLLMServer,
    data: dict[str, Any],
    *extra: str,
    env: dict[str, str] | None = None,
) -> tuple[Path, Any]:
    """``execute --json`` of ``data`` on a fresh repository, served by ``server``."""
    repo = fx.make_repo(tmp_path)
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(data))
    args = ["execute", str(path), "--repo", str(repo), "--json", *extra]
    args += ["--provider", "openai", "--base-url", server.url, "--model", "local-test"]
    return repo, runner.invoke(app, args, env=env)


def test_a_finish_over_an_empty_diff_fails_no_changes_and_the_retry_is_told(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    for n, (name, args) in enumerate(
        [
            ("run_tests", {}),
            ("finish", {"summary": CLAIM}),  # refused once: the goal names pkg/a.py
            ("finish", {"summary": CLAIM}),
            ("write_file", {"path": "pkg/a.py", "content": "A = 1\n"}),
            ("finish", {"summary": "Wrote pkg/a.py.", "files": ["pkg/a.py"]}),
        ]
    ):
        server.enqueue(turn(n, name, args))
    repo, result = execute(tmp_path, server, plan())
    assert result.exit_code == 0, result.output
    a = json.loads(result.stdout)["tasks"]["a"]
    first, second = a["attempt_log"]
    assert (first["outcome"], first["reason"]) == ("failed", "no_changes")
    assert first["note"]["reason"] == "no_changes"
    assert "you changed no file" in first["note"]["message"]
    # the retry's first message says what was wrong and what the goal asks for
    refused = answer(server, 2)
    assert refused.startswith("ERROR: finish refused (this once): you changed no file, and your")
    retry = server.requests[3].body["messages"]
    told = next(m["content"] for m in retry if m["role"] == "user")
    assert "why it failed: no_changes" in told
    assert "you changed no file" in told
    assert "Create pkg/a.py" in told
    # not the false claim itself: a small model copied it as its next reply (run m)
    assert CLAIM not in told
    assert first["note"]["summary"] == ""
    assert second["outcome"] == "succeeded"
    # one commit, with git's own stat before the worker's claim, labelled as a claim
    assert fx.task_trailers(repo) == ["a"]
    body = fx.git(repo, "log", "-1", "--format=%B", "anti-sprawl/demo")
    stat, claim = body.index("pkg/a.py | 1 +"), body.index("its claim, not checked")
    assert stat < claim
    pr = next((repo / ".anti-sprawl" / "runs").glob("*/PR.md")).read_text()
    # the PR shows what git says changed beside the worker's words, marked as its own
    assert "Changed (git): 1 files changed" in pr
    assert "The workers' own words, not checked by anti-sprawl" in pr
    assert "Wrote pkg/a.py." in pr
    assert "which it did not change" not in pr  # its goal names pkg/a.py, which it changed


def test_a_node_that_only_ever_claims_fails_with_no_empty_commit(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    for n in range(4):  # each attempt's first finish over no change is refused once
        server.enqueue(turn(n, "finish", {"summary": CLAIM}))
    repo, result = execute(tmp_path, server, plan())
    assert result.exit_code == 1, result.output
    a = json.loads(result.stdout)["tasks"]["a"]
    assert (a["status"], a["reason"], a["attempts"]) == ("failed", "no_changes", 2)
    assert fx.task_trailers(repo) == []


def test_a_verify_only_node_may_change_nothing(tmp_path: Path, server: FakeLLMServer) -> None:
    server.enqueue(turn(0, "run_tests", {}))
    server.enqueue(turn(1, "finish", {"summary": "The tests pass; nothing to change."}))
    repo, result = execute(tmp_path, server, plan(expect_changes=False))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["tasks"]["a"]["attempts"] == 1
    assert fx.task_trailers(repo) == ["a"]
    assert "(no file changed)" in fx.git(repo, "log", "-1", "--format=%B", "anti-sprawl/demo")


def test_a_finish_naming_files_outside_the_diff_is_refused(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    serve(
        server,
        ("write_file", {"path": "pkg/a.py", "content": "A = 1\n"}),
        ("finish", {"summary": CLAIM, "files": ["pkg/a.py", "pkg/b.py"]}),
        ("finish", {"summary": "Wrote pkg/a.py.", "files": ["./pkg/a.py"]}),
    )
    _, result = execute(tmp_path, server, plan())
    assert result.exit_code == 0, result.output
    refused = answer(server, 2)
    assert "finish refused: it names pkg/b.py" in refused
    assert "your changes touch pkg/a.py" in refused
    a = json.loads(result.stdout)["tasks"]["a"]
    assert (a["attempts"], a["summary"]["summary"]) == (1, "Wrote pkg/a.py.")


UTIL = (
    "def helper() -> int:\n    '''Two.'''\n\n    return 2\n\n\ndef other() -> int:\n    return 3\n"
)


def util_plan(goal: str) -> dict[str, Any]:
    node = fx.node("a", [], "pkg/util.py", "", goal=goal, read_scope=["pkg/util.py"])
    return {**plan(), "tasks": [node]}


def execute_on_util(
    tmp_path: Path, server: FakeLLMServer, goal: str, rewrites: list[str]
) -> tuple[Path, dict[str, Any]]:
    """Each rewrite of pkg/util.py (which starts as UTIL) is one attempt: write, finish."""
    for n, text in enumerate(rewrites):
        server.enqueue(turn(2 * n, "write_file", {"path": "pkg/util.py", "content": text}))
        server.enqueue(turn(2 * n + 1, "finish", {"summary": CLAIM, "files": ["pkg/util.py"]}))
    repo = fx.make_repo(tmp_path, {**fx.FILES, "pkg/util.py": UTIL})
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(util_plan(goal)))
    args = ["execute", str(path), "--repo", str(repo), "--json", "--provider", "openai"]
    args += ["--base-url", server.url, "--model", "local-test"]
    result = runner.invoke(app, args)
    return repo, {"exit": result.exit_code, **json.loads(result.stdout)["tasks"]["a"]}


def test_a_change_that_only_removes_text_fails_no_changes_and_the_retry_is_told(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """What the real model did in run 5 (tests/fixtures/real_model/subtract_run10.json): the
    file rewritten with its docstring and a function gone, re-indented, under a claim."""
    stripped = "def helper()->int:\n  return 2\ndef other() -> int: return 3"
    added = UTIL + "\n\ndef subtract(a: int, b: int) -> int:\n    return a - b\n"
    repo, a = execute_on_util(tmp_path, server, "Add subtract(a, b) to util.py", [stripped, added])
    assert a["exit"] == 0
    first, second = a["attempt_log"]
    assert (first["outcome"], first["reason"]) == ("failed", "no_changes")
    assert "only deleted text or changed whitespace" in first["note"]["message"]
    retry = server.requests[2].body["messages"]
    told = next(m["content"] for m in retry if m["role"] == "user")
    assert "only deleted text or changed whitespace" in told
    assert second["outcome"] == "succeeded"
    assert fx.task_trailers(repo) == ["a"]


def test_a_goal_that_asks_for_a_removal_may_only_remove(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    kept = "def helper() -> int:\n    '''Two.'''\n\n    return 2\n"
    repo, a = execute_on_util(tmp_path, server, "Remove the unused other() from util.py", [kept])
    assert (a["exit"], a["status"], a["attempts"]) == (0, "succeeded", 1)
    assert fx.git(repo, "show", "anti-sprawl/demo:pkg/util.py") + "\n" == kept


@pytest.mark.parametrize(
    ("goal", "refused"),
    [("Add subtract(a, b) to pkg/util.py", True), ("Remove pkg/util.py", False)],
)
def test_a_finish_that_deleted_a_file_the_goal_names_is_refused_once(
    tmp_path: Path, server: FakeLLMServer, goal: str, refused: bool
) -> None:
    """make real-model 2026-12-05 run ag, node 2: told how to replace calc.py by deleting it,
    the model deleted the file its goal was to add subtract() to, and finished. Under a goal
    that does not ask to remove it, the first such finish is refused, saying so; the file
    written again whole, the next finish lands. A goal that asks for the removal finishes."""
    added = UTIL + "\n\ndef subtract(a: int, b: int) -> int:\n    return a - b\n"
    calls = [("delete_file", {"path": "pkg/util.py"}), ("finish", {"summary": CLAIM})]
    if refused:
        calls += [("write_file", {"path": "pkg/util.py", "content": added}), calls[1]]
    serve(server, *calls)
    repo = fx.make_repo(tmp_path, {**fx.FILES, "pkg/util.py": UTIL})
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(util_plan(goal)))
    args = ["execute", str(path), "--repo", str(repo), "--json", "--provider", "openai"]
    result = runner.invoke(app, [*args, "--base-url", server.url, "--model", "local-test"])
    assert result.exit_code == 0, result.output
    assert len(server.requests) == len(calls)  # the removal's finish was its last call
    if refused:
        told = answer(server, 2)
        assert told.startswith("ERROR: finish refused (this once): you deleted pkg/util.py, ")
        assert fx.git(repo, "show", "anti-sprawl/demo:pkg/util.py") + "\n" == added
    else:
        assert "pkg/util.py" not in fx.git(repo, "ls-tree", "-r", "--name-only", "anti-sprawl/demo")


def test_a_finish_that_only_respaced_a_file_the_goal_names_is_refused_once(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """make real-model 2026-12-05 run al, attempt 2: calc.py right, test_calc.py written again
    as it was with one more blank line, and a finish; the node landed with no test of
    subtract(). A goal-named file whose change only removes text or changes whitespace is
    left as it was, for the first finish; the test then written, the next finish lands."""
    test = "from pkg.util import helper\n\n\ndef test_helper():\n    assert helper() == 2\n"
    added = UTIL + "\n\ndef subtract(a: int, b: int) -> int:\n    return a - b\n"
    tested = test + "\n\ndef test_subtract():\n    assert subtract(3, 1) == 2\n"
    serve(
        server,
        ("write_file", {"path": "pkg/util.py", "content": added}),
        (
            "write_file",
            {"path": "tests/test_util.py", "content": test.replace("\n\n", "\n\n\n", 1)},
        ),
        ("finish", {"summary": CLAIM}),
        ("write_file", {"path": "tests/test_util.py", "content": tested}),
        ("finish", {"summary": CLAIM}),
    )
    repo = fx.make_repo(tmp_path, {**fx.FILES, "pkg/util.py": UTIL, "tests/test_util.py": test})
    goal = "Add subtract(a, b) to pkg/util.py and a test for it in tests/test_util.py"
    node = fx.node("a", [], "pkg/util.py", "", goal=goal)
    node["write_scope"] = ["pkg/util.py", "tests/test_util.py"]
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump({**plan(), "tasks": [node]}))
    args = ["execute", str(path), "--repo", str(repo), "--json", "--provider", "openai"]
    result = runner.invoke(app, [*args, "--base-url", server.url, "--model", "local-test"])
    assert result.exit_code == 0, result.output
    assert answer(server, 3).startswith(
        "ERROR: finish refused (this once): your goal names tests/test_util.py, in your write "
        "scope, and your changes leave it as it was (or only remove text or change its "
        "whitespace)."
    )
    assert fx.git(repo, "show", "anti-sprawl/demo:tests/test_util.py") + "\n" == tested


def test_a_reordering_is_a_change(tmp_path: Path, server: FakeLLMServer) -> None:
    swapped = "def other() -> int:\n    return 3\n\n\ndef helper() -> int:\n    return 2\n"
    _, a = execute_on_util(tmp_path, server, "Put other() first in util.py", [swapped])
    assert (a["exit"], a["status"], a["attempts"]) == (0, "succeeded", 1)


def test_a_nudge_after_a_text_only_turn_says_which_files_are_changed_and_which_not(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """make real-model 2026-12-03, calls 6-9: a refused finish answered with apologies until
    the attempt stalled. The nudge after a text-only turn states the worktree's progress."""
    server.enqueue(openai_completion(content="I will add A first."))
    server.enqueue(turn(1, "write_file", {"path": "pkg/a.py", "content": "A = 1\n"}))
    server.enqueue(turn(2, "finish", {"summary": CLAIM, "files": ["pkg/a.py", "pkg/b.py"]}))
    server.enqueue(openai_completion(content="I apologize for the confusion."))
    server.enqueue(turn(4, "write_file", {"path": "pkg/b.py", "content": "B = 2\n"}))
    server.enqueue(turn(5, "finish", {"summary": "A and B.", "files": ["pkg/a.py", "pkg/b.py"]}))
    two_files = {**fx.node("a", [], "pkg/a.py", ""), "write_scope": ["pkg/a.py", "pkg/b.py"]}
    _, result = execute(tmp_path, server, {**plan(), "tasks": [two_files]})
    assert result.exit_code == 0, result.output
    first, later = (server.requests[n].body["messages"][-1] for n in (1, 4))
    assert first["role"] == "user"
    assert "(you have changed no file yet)" in first["content"]
    assert "(changed so far: pkg/a.py; not changed yet: pkg/b.py)" in later["content"]
    assert json.loads(result.stdout)["tasks"]["a"]["files_changed"] == ["pkg/a.py", "pkg/b.py"]


def checks_a_plan(**node: Any) -> dict[str, Any]:
    """A node whose test command fails while pkg/a.py holds ``A = 0``."""
    check = "import pathlib, sys; sys.exit('A = 0' in pathlib.Path('pkg/a.py').read_text())"
    return {**plan(**node), "test_command": [sys.executable, "-c", check]}


def test_a_finish_over_failing_tests_is_refused_with_the_failure_and_the_fix_lands(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """make real-model 2026-12-03 run 3: a small model wrote subtract() right and a wrong
    test, finished without running the tests, and lost the attempt. The finish runs the
    whole test command first; a failure comes back to the model, which fixes it in the same
    attempt."""
    serve(
        server,
        ("write_file", {"path": "pkg/a.py", "content": "A = 0\n"}),
        ("finish", {"summary": CLAIM, "files": ["pkg/a.py"]}),
        ("write_file", {"path": "pkg/a.py", "content": "A = 1\n"}),
        ("finish", {"summary": "A is 1.", "files": ["pkg/a.py"]}),
    )
    repo, result = execute(tmp_path, server, checks_a_plan())
    assert result.exit_code == 0, result.output
    refused = answer(server, 2)
    assert "finish refused: the whole test command ran first, and it fails" in refused
    assert "tests failed (exit code 1)" in refused
    a = json.loads(result.stdout)["tasks"]["a"]
    assert (a["status"], a["attempts"], a["summary"]["summary"]) == ("succeeded", 1, "A is 1.")
    assert fx.git(repo, "show", f"{a['commit']}:pkg/a.py") == "A = 1"


def test_a_finish_is_taken_after_its_refusals_and_a_passing_run_is_not_repeated(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """A model that will not fix its work finishes on its third try and the attempt fails its
    tests, as before; a finish right after a whole passing run runs nothing more."""
    serve(
        server,
        ("write_file", {"path": "pkg/a.py", "content": "A = 0\n"}),
        *[("finish", {"summary": CLAIM})] * 3,
    )
    _, result = execute(tmp_path, server, checks_a_plan(max_attempts=1))
    assert result.exit_code == 1, result.output
    a = json.loads(result.stdout)["tasks"]["a"]
    assert (a["status"], a["reason"]) == ("failed", "tests")
    assert len(server.requests) == 4  # two refusals, then the finish was taken

    server.clear()
    serve(
        server,
        ("write_file", {"path": "pkg/a.py", "content": "A = 1\n"}),
        ("run_tests", {}),
        ("finish", {"summary": "A is 1."}),
    )
    (tmp_path / "second").mkdir()
    repo, result = execute(tmp_path / "second", server, checks_a_plan())
    assert result.exit_code == 0, result.output
    artifacts = repo / ".anti-sprawl" / "runs" / json.loads(result.stdout)["run_id"] / "artifacts"
    logs = sorted(p.name for p in (artifacts / "a").glob("tests-*.log"))
    assert logs == ["tests-1-1.log", "tests-1-2.log"]  # its own run, the final one: none between


def test_a_text_only_turn_over_a_change_is_answered_with_the_tests_verdict(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """make real-model 2026-12-03 run 5, calls 11-14: right files written from prose, then a
    summary in prose instead of a finish, until the attempt stalled. After a text-only turn
    over a change the model is told what the whole test command says (its output as data),
    once per state of the files; the finish after it runs nothing again."""
    server.enqueue(turn(0, "write_file", {"path": "pkg/a.py", "content": "A = 0\n"}))
    server.enqueue(openai_completion(content="**Summary**: A is set."))
    server.enqueue(turn(2, "write_file", {"path": "pkg/a.py", "content": "A = 1\n"}))
    server.enqueue(openai_completion(content="The task is now complete."))
    server.enqueue(turn(4, "finish", {"summary": "A is 1."}))
    repo, result = execute(tmp_path, server, checks_a_plan())
    assert result.exit_code == 0, result.output
    failing = server.requests[2].body["messages"][-1]["content"]
    passing = server.requests[4].body["messages"][-1]["content"]
    assert "(changed so far: pkg/a.py)" in failing
    assert "The whole test command fails (exit code 1) with your changes" in failing
    assert '<data kind="observation" source="run_tests" trust="untrusted">' in failing
    assert "passes with your changes: if the goal is met, call finish" in passing
    run_id = json.loads(result.stdout)["run_id"]
    logs = sorted((repo / ".anti-sprawl" / "runs" / run_id / "artifacts" / "a").glob("tests-*"))
    assert [p.name for p in logs] == ["tests-1-1.log", "tests-1-2.log", "tests-1-3.log"]


def talk(server: FakeLLMServer, replies: int) -> None:
    """``replies`` differing replies without a tool call: the attempt stalls after the last."""
    for n in range(replies):
        server.enqueue(openai_completion(content=f"I will now request the write scope ({n})."))


@pytest.mark.parametrize(
    ("content", "exit_code", "outcome"),
    [
        ("A = 1\n", 0, ("succeeded", None)),  # passes: taken, unclaimed
        ("A = 0\n", 1, ("failed", "stalled")),  # fails: thrown away, as ever
    ],
)
def test_a_change_the_model_never_claims_is_taken_only_when_the_tests_pass(
    tmp_path: Path,
    server: FakeLLMServer,
    content: str,
    exit_code: int,
    outcome: tuple[str, str | None],
) -> None:
    """make real-model 2026-12-04, run k: a right, passing change, then replies without a
    tool call until the attempt stalled, and the change was thrown away. A change in scope
    that the whole test command passes on lands without a finish, marked as never claimed."""
    serve(server, ("write_file", {"path": "pkg/a.py", "content": content}))
    talk(server, TEXT_TURN_LIMIT)
    repo, result = execute(tmp_path, server, checks_a_plan(max_attempts=1))
    assert result.exit_code == exit_code, result.output
    a = json.loads(result.stdout)["tasks"]["a"]
    assert (a["status"], a["reason"]) == outcome
    assert len(server.requests) == 1 + TEXT_TURN_LIMIT
    if exit_code:
        assert a["unclaimed"] == ""
        assert fx.task_trailers(repo) == []
        return
    assert (
        a["unclaimed"]
        == f"the model sent {TEXT_TURN_LIMIT} replies in a row without calling a tool"
    )
    assert a["summary"] is None
    body = fx.git(repo, "log", "-1", "--format=%B", "anti-sprawl/demo")
    assert "pkg/a.py | 1 +" in body
    assert "The worker never called finish (the model sent 4 replies" in body


def test_a_change_the_model_never_claims_is_not_taken_without_a_test_command(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """Without a test command nothing says the change is right: the attempt fails stalled."""
    serve(server, ("write_file", {"path": "pkg/a.py", "content": "A = 1\n"}))
    talk(server, TEXT_TURN_LIMIT)
    data = {**plan(max_attempts=1)}
    del data["test_command"]
    repo, result = execute(tmp_path, server, data)
    assert result.exit_code == 1, result.output
    a = json.loads(result.stdout)["tasks"]["a"]
    assert (a["status"], a["reason"]) == ("failed", "stalled")
    assert fx.task_trailers(repo) == []


def test_a_passing_change_lands_when_the_model_runs_out_of_tool_calls(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """The tool-call cap reached over a passing change (the model ran the tests over and
    over instead of finishing): the change is taken, as after a stall."""
    serve(
        server,
        ("write_file", {"path": "pkg/a.py", "content": "A = 1\n"}),
        ("run_tests", {}),
        ("run_tests", {}),
    )
    repo, result = execute(tmp_path, server, checks_a_plan(max_attempts=1, max_tool_calls=2))
    assert result.exit_code == 0, result.output
    a = json.loads(result.stdout)["tasks"]["a"]
    assert a["unclaimed"] == "tool-call cap of 2 reached"
    assert fx.task_trailers(repo) == ["a"]


CALC = "def add(a, b):\n    return a + b\n\n\ndef subtract(a, b):\n    return a - b\n"
TEST_CALC = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"


def test_a_change_that_only_copies_code_into_a_test_module_fails_no_changes(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """make real-model 2026-12-05: run an's test node run again against the served model
    (calc.py already has subtract()), its calls as recovered from its text: calc.py's
    subtract() appended to test_calc.py word for word, a finish (refused once for the copy),
    run_tests with args pytest does not take, a finish again. It landed with no test of
    subtract(). Now that attempt fails ``no_changes``, told why; the retry's test lands."""
    copy = "\ndef subtract(a, b):\n    return a - b\n    "
    claim = "Added a test for the `subtract` function in `test_calc.py`."
    real_test = TEST_CALC + "\n\ndef test_subtract():\n    from calc import subtract\n\n"
    real_test += "    assert subtract(5, 3) == 2\n"
    serve(
        server,
        ("write_file", {"path": "./test_calc.py", "content": copy, "append": True}),
        ("finish", {"summary": claim, "files": ["./test_calc.py"]}),
        ("run_tests", {"args": ["--testfile", "./test_calc.py", "--testid", "test_subtract"]}),
        ("finish", {"summary": claim, "files": ["./test_calc.py"]}),
        ("write_file", {"path": "test_calc.py", "content": real_test}),
        ("finish", {"summary": claim, "files": ["test_calc.py"]}),
    )
    node = fx.node("a", [], "test_calc.py", "", read_scope=["calc.py"])
    node["goal"] = "Add a test for the `subtract` function in `test_calc.py`."
    data = {**plan(), "tasks": [node]}
    data["test_command"] = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    repo = fx.make_repo(tmp_path, {"calc.py": CALC, "test_calc.py": TEST_CALC})
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(data))
    args = ["execute", str(path), "--repo", str(repo), "--json", "--provider", "openai"]
    result = runner.invoke(app, [*args, "--base-url", server.url, "--model", "local-test"])
    assert result.exit_code == 0, result.output
    a = json.loads(result.stdout)["tasks"]["a"]
    first, second = a["attempt_log"]
    assert (first["outcome"], first["reason"]) == ("failed", "no_changes")
    assert first["note"]["message"].startswith(
        "your change adds no test: test_calc.py defines `subtract`, as calc.py does"
    )
    assert answer(server, 2).startswith("ERROR: finish refused (this once): test_calc.py")
    retry = server.requests[4].body["messages"]
    told = next(m["content"] for m in retry if m["role"] == "user")
    assert "why it failed: no_changes" in told
    assert "your change adds no test" in told
    assert second["outcome"] == "succeeded"
    landed = fx.git(repo, "show", "anti-sprawl/demo:test_calc.py")
    assert "def test_subtract" in landed
    assert "def subtract" not in landed
