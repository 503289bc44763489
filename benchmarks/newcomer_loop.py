"""The newcomer loop of issue 24 on a real project: how long until a node runs its tests right.

Give it a git checkout of a real project (e.g. an sdist unpacked and committed: attrs, with
its src layout and its real suite) and the test command a planner would write. It runs
``execute --dry-run`` with that command, follows the one command the baseline check suggests
(``try test_command: '...'``) until the baseline no longer refuses, then runs one scripted
node that adds a module and a test and runs the suite. It prints the time of each step and
the model tokens spent before the environment problem was reported (the target is 0: the
scripted node is the only model traffic, and it starts only after the checks pass).

    python benchmarks/newcomer_loop.py CHECKOUT --package attr [--tests tests] \
        [--command "python -m pytest -q"]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

_TRY = re.compile(r"try test_command: '([^']+)'")


def _plan(command: str, package: str, tests: str) -> dict[str, Any]:
    return {
        "plan_id": f"newcomer-{int(time.time())}",
        "requirement": f"Add {package}._newcomer.hello() and a test for it",
        "test_command": command,
        "max_attempts": 1,
        "tasks": [
            {
                "task_id": "hello",
                "name": "Add hello",
                "goal": "Add hello() returning 'hi', and its test",
                "write_scope": [f"src/{package}/_newcomer.py", f"{tests}/test_newcomer.py"],
                "token_budget": 40_000,
                "max_tool_calls": 10,
            }
        ],
    }


def _script(package: str, tests: str) -> dict[str, Any]:
    test = f"from {package}._newcomer import hello\n\n\ndef test_hello():\n    assert hello() == 'hi'\n"
    turns = [
        {
            "tool": "write_file",
            "args": {
                "path": f"src/{package}/_newcomer.py",
                "content": "def hello() -> str:\n    return 'hi'\n",
            },
        },
        {"tool": "write_file", "args": {"path": f"{tests}/test_newcomer.py", "content": test}},
        {"tool": "run_tests", "args": {"args": [f"{tests}/test_newcomer.py"]}},
        {"tool": "finish", "args": {"summary": "added hello"}},
    ]
    return {"workers": {"hello": turns}}


def _run(args: list[str]) -> tuple[subprocess.CompletedProcess[str], float]:
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "anti_sprawl", *args], capture_output=True, text=True, check=False
    )
    return done, time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("checkout", type=Path)
    parser.add_argument("--package", required=True)
    parser.add_argument("--tests", default="tests")
    parser.add_argument("--command", default="python -m pytest -q")
    ns = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="newcomer-"))
    script = work / "script.yaml"
    script.write_text(yaml.safe_dump(_script(ns.package, ns.tests)))
    command, total = ns.command, 0.0
    for step in range(1, 5):
        plan = work / "plan.yaml"
        plan.write_text(yaml.safe_dump(_plan(command, ns.package, ns.tests)))
        base = ["execute", str(plan), "--repo", str(ns.checkout), "--script", str(script)]
        done, seconds = _run([*base, "--dry-run"])
        total += seconds
        print(f"step {step}: dry run of {command!r}: exit {done.returncode} in {seconds:.1f} s")
        suggested = _TRY.search(done.stderr)
        if done.returncode == 0:
            break
        if suggested is None:
            print(done.stderr.strip()[:600])
            return
        command = suggested.group(1)
    done, seconds = _run([*base, "--json"])
    total += seconds
    state = json.loads(done.stdout)
    node = state["tasks"]["hello"]
    tokens = state["tokens"]["input_tokens"] + state["tokens"]["output_tokens"]
    print(
        f"run: {node['status']} in {seconds:.1f} s; its tests exited {node['tests']['exit_code']} "
        f"with {len(node['tests']['known_failures'])} pre-existing failure(s) excused"
    )
    print(f"model tokens before the environment was right: 0; in the node: {tokens:,}")
    print(f"time to the first node running its tests correctly: {total:.1f} s")


if __name__ == "__main__":
    main()
