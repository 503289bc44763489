"""Replay script.yaml on a copy of sandbox/ the way the workers would, and check the result.

For every node, in dependency order: apply its write_file/edit_file calls (an edit's ``old``
must match exactly once), skip writes outside the node's write_scope (the firewall would block
them), run the plan's test command at each ``run_tests`` and after the node. Also checks the
plan itself (plan.yaml == the script's plan, acyclic, parallel nodes write disjoint scopes,
readers depend on writers), that reads stay in scope, tool-call caps and a rough token
estimate against each node's budget. Exit status 0 when everything holds.

Usage: python tasks/sample/check_script.py [--keep DIR]  (from anywhere). Needs pyyaml and
pytest, and uses anti_sprawl.fs.scopes / .plan / .tokens from this repository. --keep copies the
final tree to DIR for inspection.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SANDBOX = REPO / "sandbox"
sys.path.insert(0, str(REPO))

from anti_sprawl.plan.model import Plan, command_argv  # noqa: E402
from anti_sprawl.fs.scopes import Scope, may_overlap  # noqa: E402
from anti_sprawl.tokens import count_tokens  # noqa: E402
from anti_sprawl.plan.validate import validate  # noqa: E402

WRITE_TOOLS = {"write_file", "edit_file"}
KNOWN_TOOLS = {"read_file", "list_dir", "grep", "write_file", "edit_file", "run_tests", "finish"}
# What a worker's prompt holds besides the brief, upstream summaries and scoped files (system
# rules, tool schemas): a deliberately generous guess, since the estimate only guards budgets.
BASE_PROMPT_TOKENS = 2500
RUN_TESTS_OBSERVATION_TOKENS = 300
EXPECTED_BLOCKED = [("service", "edit_file", "orders/util/legacy_helpers.py")]


class CheckFailed(Exception):
    """A check did not hold."""


def fail(message: str) -> None:
    raise CheckFailed(message)


def load() -> tuple[Plan, dict[str, list[Any]]]:
    plan_data = yaml.safe_load((HERE / "plan.yaml").read_text(encoding="utf-8"))
    script = yaml.safe_load((HERE / "script.yaml").read_text(encoding="utf-8"))
    if script.get("plan") != plan_data:
        fail("script.yaml's plan differs from plan.yaml")
    plan = Plan.model_validate(plan_data)
    workers = script.get("workers") or {}
    ids = [t.task_id for t in plan.tasks]
    if sorted(workers) != sorted(ids):
        fail(f"workers {sorted(workers)} do not match plan tasks {sorted(ids)}")
    return plan, workers


def topological_order(plan: Plan) -> list[str]:
    ids = [t.task_id for t in plan.tasks]
    if len(set(ids)) != len(ids):
        fail("duplicate task ids")
    done: list[str] = []
    pending = list(plan.tasks)
    while pending:
        ready = [t for t in pending if all(d in done for d in t.dependencies)]
        if not ready:
            fail(f"cycle or unknown dependency among {[t.task_id for t in pending]}")
        for node in ready:
            done.append(node.task_id)
            pending.remove(node)
    return done


def ancestors(plan: Plan) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for task_id in topological_order(plan):
        node = plan.task(task_id)
        out[task_id] = set(node.dependencies).union(*(out[d] for d in node.dependencies))
    return out


def check_dag(plan: Plan) -> list[tuple[str, str]]:
    """Scope rules between nodes; returns the pairs that may run in parallel."""
    anc = ancestors(plan)
    parallel: list[tuple[str, str]] = []
    for a in plan.tasks:
        for b in plan.tasks:
            if a.task_id >= b.task_id:
                continue
            ordered = a.task_id in anc[b.task_id] or b.task_id in anc[a.task_id]
            if not ordered:
                parallel.append((a.task_id, b.task_id))
                for wa in a.write_scope:
                    for wb in b.write_scope:
                        if may_overlap(wa, wb):
                            fail(f"parallel nodes {a.task_id}/{b.task_id} both write {wa} ~ {wb}")
    for reader in plan.tasks:
        for writer in plan.tasks:
            if reader is writer or writer.task_id in anc[reader.task_id]:
                continue
            for r in reader.read_scope:
                for w in writer.write_scope:
                    if may_overlap(r, w):
                        fail(
                            f"{reader.task_id} reads {r}, which {writer.task_id} writes ({w}), "
                            f"but does not depend on it"
                        )
    if not parallel:
        fail("no two nodes can run in parallel")
    return parallel


def check_with_validator(plan_data: dict[str, Any], plan: Plan) -> None:
    """anti-sprawl's own validator: structurally valid, and repo-aware against sandbox/.

    A read-scope entry that does not exist yet is accepted when an ancestor node's write scope
    creates it (the validator may not know that yet); every other problem fails the check.
    """
    report = validate(plan_data)
    if not report.valid:
        fail(f"anti_sprawl.plan.validate: {[e.message for e in report.errors]}")
    anc = ancestors(plan)
    for problem in validate(plan_data, repo=SANDBOX).errors:
        created_upstream = problem.code == "read_scope_missing" and all(
            any(
                may_overlap(path, w)
                for a in anc[problem.tasks[0]]
                for w in plan.task(a).write_scope
            )
            for path in problem.paths
        )
        if not created_upstream:
            fail(f"anti_sprawl.plan.validate --repo sandbox: {problem.message}")
        print(f"  note: validator: {problem.message} (created by an upstream node)")


def test_argv(plan: Plan, task_id: str) -> list[str]:
    argv = plan.test_command_for(plan.task(task_id)) or command_argv("python -m pytest -q")
    assert argv is not None
    if argv[0] in ("python", "python3"):
        argv = [sys.executable, *argv[1:]]
    return argv


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def run_tests(work: Path, argv: list[str], label: str) -> str:
    before = snapshot(work)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    proc = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=300)
    tail = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or [""]
    if proc.returncode != 0:
        print(proc.stdout[-4000:], proc.stderr[-2000:], sep="\n")
        fail(f"tests failed {label} (exit {proc.returncode})")
    if snapshot(work) != before:
        fail(f"the test run {label} wrote files into the checkout")
    if (work / ".pytest_cache").exists():
        fail("a .pytest_cache appeared")
    return tail[0]


def turn_calls(turn: Any) -> list[dict[str, Any]]:
    if isinstance(turn, list):
        calls = turn
    elif isinstance(turn, dict) and "text" in turn:
        return []
    else:
        calls = [turn]
    for call in calls:
        if not isinstance(call, dict) or call.get("tool") not in KNOWN_TOOLS:
            fail(f"bad tool call {call!r}")
    return calls


def readable(path: Path, rel: str) -> str:
    if not path.is_file():
        fail(f"read of missing file {rel}")
    return path.read_text(encoding="utf-8")


def grep_hits(work: Path, scope: Scope, pattern: str, path: str | None) -> list[str]:
    regex = re.compile(pattern)
    base = work / path if path else work
    files = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file())
    hits = []
    for f in files:
        rel = f.relative_to(work).as_posix()
        if not scope.matches(rel) or "__pycache__" in rel:
            continue
        for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            if regex.search(line):
                hits.append(f"{rel}:{n}: {line}")
    return hits


def replay_node(
    plan: Plan, task_id: str, turns: list[Any], work: Path, summaries: dict[str, str]
) -> tuple[list[tuple[str, str, str]], int]:
    """Apply one worker's turns to ``work``; returns (blocked writes, estimated tokens)."""
    node = plan.task(task_id)
    write = Scope(node.write_scope)
    read = Scope(node.read_scope).union(write)
    argv = test_argv(plan, task_id)
    blocked: list[tuple[str, str, str]] = []
    tool_calls = 0
    history = BASE_PROMPT_TOKENS + count_tokens(node.goal)
    history += sum(count_tokens(summaries[d]) for d in node.dependencies)
    # Upper bound for the prompt's file sections: every scoped file in full (write-scope files
    # always are; read-scope files are packed as outlines or whole ones within a budget).
    history += sum(count_tokens(t.decode()) for p, t in snapshot(work).items() if read.matches(p))
    spent = 0
    before = snapshot(work)
    if not turns or not isinstance(turns[-1], dict) or turns[-1].get("tool") != "finish":
        fail(f"{task_id}: the script must end with a single finish call")
    for number, turn in enumerate(turns, 1):
        output = count_tokens(yaml.safe_dump(turn, allow_unicode=True))
        spent += history + output  # one model call: the whole history in, this turn out
        history += output
        for call in turn_calls(turn):
            tool_calls += 1
            name, args = call["tool"], call.get("args") or {}
            where = f"{task_id} turn {number} {name}"
            observation = "ok"
            rel = args.get("path")
            if name in WRITE_TOOLS and not write.matches(rel):
                if name == "edit_file" and (work / rel).is_file():
                    # realism: the blocked edit would have applied had it been allowed
                    if (work / rel).read_text(encoding="utf-8").count(args["old"]) != 1:
                        fail(f"{where}: blocked edit's old text does not match {rel} once")
                blocked.append((task_id, name, rel))
                observation = f"error: {rel} is outside this task's write scope"
            elif name == "read_file":
                if not read.matches(rel):
                    fail(f"{where}: read of {rel} is outside the read scope")
                observation = readable(work / rel, rel)
            elif name == "list_dir":
                if not (work / rel).is_dir() or not read.may_contain(rel):
                    fail(f"{where}: cannot list {rel}")
                observation = "\n".join(sorted(p.name for p in (work / rel).iterdir()))
            elif name == "grep":
                if args.get("path") and not (read.matches(rel) or read.may_contain(rel)):
                    fail(f"{where}: grep path {rel} is outside the read scope")
                hits = grep_hits(work, read, args["pattern"], rel)
                if not hits:
                    fail(f"{where}: grep {args['pattern']!r} finds nothing in scope")
                observation = "\n".join(hits)
            elif name == "write_file":
                (work / rel).parent.mkdir(parents=True, exist_ok=True)
                (work / rel).write_text(args["content"], encoding="utf-8")
            elif name == "edit_file":
                text = readable(work / rel, rel)
                count = text.count(args["old"])
                if count != 1:
                    fail(f"{where}: old text matches {count} times in {rel}, not once")
                (work / rel).write_text(text.replace(args["old"], args["new"]), encoding="utf-8")
            elif name == "run_tests":
                tail = run_tests(work, argv, f"at {where}")
                observation = "x" * 4 * RUN_TESTS_OBSERVATION_TOKENS
                print(f"    run_tests: {tail}")
            elif name == "finish":
                if number != len(turns) or not str(args.get("summary", "")).strip():
                    fail(f"{where}: finish must be last and carry a summary")
                summaries[task_id] = "\n".join(
                    str(args.get(k, "")) for k in ("summary", "notes", "interfaces")
                )
            history += count_tokens(observation)
    if tool_calls > node.max_tool_calls:
        fail(f"{task_id}: {tool_calls} tool calls > max_tool_calls {node.max_tool_calls}")
    after = snapshot(work)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    outside = [p for p in changed if not write.matches(p)]
    if outside:
        fail(f"{task_id}: changed files outside its write scope: {outside}")
    tail = run_tests(work, argv, f"after node {task_id}")
    print(
        f"  {task_id}: {tool_calls}/{node.max_tool_calls} tool calls, "
        f"~{spent:,}/{node.token_budget:,} tokens (estimate), changed {changed}; tests: {tail}"
    )
    if spent > node.token_budget:
        fail(f"{task_id}: estimated {spent} tokens exceed the budget {node.token_budget}")
    return blocked, spent


def main() -> int:
    try:
        plan, workers = load()
        order = topological_order(plan)
        parallel = check_dag(plan)
        print(f"plan {plan.plan_id}: order {order}; parallel pairs {parallel}")
        check_with_validator(yaml.safe_load((HERE / "plan.yaml").read_text("utf-8")), plan)
        with tempfile.TemporaryDirectory(prefix="anti-sprawl-sample-") as tmp:
            work = Path(tmp) / "sandbox"
            shutil.copytree(SANDBOX, work, ignore=shutil.ignore_patterns("__pycache__"))
            original = snapshot(work)
            print(f"  base: tests: {run_tests(work, test_argv(plan, order[0]), 'on the base')}")
            blocked: list[tuple[str, str, str]] = []
            summaries: dict[str, str] = {}
            for task_id in order:
                node_blocked, _ = replay_node(plan, task_id, workers[task_id], work, summaries)
                blocked += node_blocked
            if blocked != EXPECTED_BLOCKED:
                fail(f"blocked writes {blocked}, expected {EXPECTED_BLOCKED}")
            for _, _, rel in blocked:
                if snapshot(work).get(rel) != original.get(rel):
                    fail(f"blocked file {rel} changed")
            print(f"  end: tests: {run_tests(work, test_argv(plan, order[-1]), 'at the end')}")
            print(f"  blocked as expected, file unchanged: {blocked}")
            if len(sys.argv) == 3 and sys.argv[1] == "--keep":
                shutil.copytree(work, sys.argv[2])
    except CheckFailed as exc:
        print(f"FAIL: {exc}", file=sys.stderr)
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
