"""One agent loop: the worker and the planner check arguments, refuse and observe alike.

The same hostile tool calls go to a worker and to the planner on one repository; what comes
back to the model must be the same text, because one dispatch produced both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from anti_sprawl.agent.artifacts import ArtifactStore
from anti_sprawl.agent.worker import WorkerContext, WorkerLimits, run_worker
from anti_sprawl.fs.firewall import Firewall
from anti_sprawl.ids import PLANNER_TASK_ID
from anti_sprawl.planner.planner import plan_requirement
from anti_sprawl.providers.base import SystemBlock, ToolResultMessage
from anti_sprawl.providers.scripted import Script, ScriptedProvider

from .conftest import node, plan_data

CANARY = "CANARY-LOOP-51c2"
FILES = {
    "app/__init__.py": "",
    "app/core.py": "def run():\n    return 1\n",
    ".env": f"TOKEN={CANARY}\n",
}
HOSTILE = [
    {"tool": "read_file", "args": {"path": ".env"}},
    {"tool": "read_file", "args": {"path": "../outside.txt"}},
    {"tool": "read_file", "args": {"path": "app/core.py", "cwd": "/"}},
    {"tool": "read_file", "args": {}},
    {"tool": "frobnicate", "args": {}},
]
GOOD = plan_data(node("core", write_scope=["app/core.py"]), plan_id="demo")


def results(request: Any) -> list[str]:
    last = request.messages[-1]
    assert isinstance(last, ToolResultMessage)
    return [r.content for r in last.results]


def test_worker_and_planner_answer_hostile_calls_with_the_same_words(
    tmp_path: Path, make_repo: Any
) -> None:
    repo = make_repo(FILES)
    (tmp_path / "outside.txt").write_text("CANARY-OUT\n")
    planner_provider = ScriptedProvider(
        Script.from_data({"planner": [HOSTILE, {"tool": "submit_plan", "args": GOOD}]})
    )
    planned = plan_requirement("Tidy run()", repo, planner_provider)
    assert planned.ok
    planner_said = results(planner_provider.requests_for(PLANNER_TASK_ID)[1])

    worker_provider = ScriptedProvider(
        Script.from_data(
            {"workers": {"w": [HOSTILE, {"tool": "finish", "args": {"summary": "x"}}]}}
        )
    )
    with Firewall(repo, ["**"], []) as fw:
        ctx = WorkerContext(
            task_id="w",
            provider=worker_provider,
            firewall=fw,
            system=[SystemBlock(text="You are a worker.")],
            first_message="Tidy run().",
            limits=WorkerLimits(token_budget=20_000, max_tool_calls=10),
            artifacts=ArtifactStore(tmp_path / "artifacts"),
        )
        worked = run_worker(ctx)
    assert worked.status == "succeeded", worked.message
    worker_said = results(worker_provider.requests[1])

    # the unknown tool lists each side's own tools; every other answer is word for word equal
    assert planner_said[:4] == worker_said[:4]
    assert planner_said[0].startswith("error: blocked by the scope firewall: read '.env'")
    assert "escape_root" in planner_said[1]
    assert "invalid arguments for read_file" in planner_said[2]
    assert "cwd" in planner_said[2]
    assert "invalid arguments for read_file: path" in planner_said[3]
    assert planner_said[4].startswith("error: unknown tool 'frobnicate'; available tools: ")
    assert "submit_plan" in planner_said[4]
    assert "submit_plan" not in worker_said[4]
    for text in [*planner_said, *worker_said]:
        assert CANARY not in text
        assert "CANARY-OUT" not in text
    # both sides recorded the refused reads as violations of the model
    assert {v.reason for v in planned.violations} >= {"denied_secret", "escape_root"}
    assert {v.reason for v in worked.violations} >= {"denied_secret", "escape_root"}
