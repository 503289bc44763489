"""Scope requests (issue 28, item 3) through the real CLI on real git repositories.

A scripted worker calls ``request_scope``; the run grants a read of a file the repository map
lists and a write no unordered node touches, and refuses secrets, ignored and internal files,
an overlap with an unordered node (naming it), a fourth grant, and every hostile spelling
(``..``, absolute, globs, directories, symlinks). Whatever was refused or never asked for,
neither ``run_tests`` nor the audit lets a change outside the plan's write scope plus the
granted writes onto the branch. Every decision is in the journal (``scope_grants``), the
manifests, the commit trailers, the PR body and the revised plan.
"""

from __future__ import annotations

import json
import os
import pickle
import pty
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from anti_sprawl.cli.app import app
from anti_sprawl.cli.scope_requests import ScopeRequestsChoice
from anti_sprawl.fs.scope_grant import ScopeGrant, requested_path
from anti_sprawl.plan.graph import Ordering, dependency_edges
from anti_sprawl.plan.model import Plan
from anti_sprawl.run.ablations import Ablations
from anti_sprawl.run.scope_grants import (
    SCOPE_REQUESTS,
    Neighbour,
    Neighbours,
    confirmed,
    granted_writes,
    unordered_with,
)

from . import e2e_fixture as fx

runner = CliRunner()
pytestmark = pytest.mark.usefixtures("python_on_path")

BRANCH = "anti-sprawl/demo"
UTIL = "def helper() -> int:\n    return 3\n"


def cli(*args: str) -> Any:
    return runner.invoke(app, list(args))


def make_repo(tmp_path: Path) -> Path:
    """The e2e repository plus a secret, an ignored file and a symlink."""
    repo = fx.make_repo(tmp_path)
    (repo / ".gitignore").write_text("build/\n")
    (repo / ".env").write_text("API_TOKEN=not-for-models\n")
    (repo / "pkg" / "shared.py").write_text("SHARED = 1\n")
    (repo / "pkg" / "other.py").write_text("OTHER = 1\n")
    os.symlink("base.py", repo / "pkg" / "link.py")
    fx.git(repo, "add", "-A")
    fx.git(repo, "-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "-qm", "more")
    (repo / "build").mkdir()
    (repo / "build" / "out.txt").write_text("built\n")  # ignored, never committed
    return repo


def ask(paths: list[str], mode: str = "read") -> dict[str, Any]:
    return {"tool": "request_scope", "args": {"paths": paths, "mode": mode, "reason": "needed"}}


def finish(*files: str) -> dict[str, Any]:
    return {"tool": "finish", "args": {"summary": "done", "files": list(files)}}


def execute(tmp_path: Path, repo: Path, plan: dict[str, Any], script: dict[str, Any], *extra: str):
    plan_path, script_path = fx.write_inputs(tmp_path, plan, script)
    args = ["execute", str(plan_path), "--repo", str(repo), "--script", str(script_path)]
    result = cli(*args, "--json", "--jobs", "1", *extra)
    return result, json.loads(result.stdout)


def run_dir(repo: Path, state: dict[str, Any]) -> Path:
    return repo / ".anti-sprawl" / "runs" / state["run_id"]


def decisions(state: dict[str, Any], task: str) -> dict[str, dict[str, Any]]:
    return {f"{g['mode']} {g['path']}": g for g in state["tasks"][task]["scope_grants"]}


def trailers(repo: Path, key: str) -> list[str]:
    text = fx.git(repo, "log", f"--format=%(trailers:key={key},valueonly)", BRANCH)
    return [line.strip() for line in text.splitlines() if line.strip()]


def changed_by(repo: Path, task: str) -> set[str]:
    log = fx.git(repo, "log", "--format=%H %(trailers:key=Anti-Sprawl-Task,valueonly)", BRANCH)
    sha = next(line.split()[0] for line in log.splitlines() if line.split()[1:] == [task])
    return set(fx.git(repo, "show", "--name-only", "--format=", sha).split())


# --- granted -------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["local", "dask-inprocess", "dask-processes"])
def test_a_read_and_a_write_are_granted_landed_and_on_the_record(
    tmp_path: Path, where: str, request: pytest.FixtureRequest
) -> None:
    repo = make_repo(tmp_path)
    extra: list[str] = []
    if where != "local":
        cluster = request.getfixturevalue(where.replace("-", "_"))
        extra = ["--executor", "dask", "--dask-scheduler", cluster.scheduler_address]
    turns = [
        ask(["pkg/util.py"]),
        {"tool": "read_file", "args": {"path": "pkg/util.py"}},
        ask(["pkg/util.py"], "write"),
        {"tool": "write_file", "args": {"path": "pkg/util.py", "content": UTIL}},
        {"tool": "write_file", "args": {"path": "pkg/a.py", "content": "A = 1\n"}},
        finish("pkg/a.py", "pkg/util.py"),
    ]
    result, state = execute(tmp_path, repo, fx.plan(), fx.script(a=turns), *extra)
    assert result.exit_code == 0, result.output
    assert state["status"] == "succeeded"
    # landed: the granted file is changed on the branch, in a's commit
    assert fx.git(repo, "show", f"{BRANCH}:pkg/util.py") == UTIL.strip()
    assert changed_by(repo, "a") == {"pkg/a.py", "pkg/util.py"}
    # the journal, one clear field per task
    got = decisions(state, "a")
    assert set(got) == {"read pkg/util.py", "write pkg/util.py"}
    assert all(g["granted"] and g["reason"] == "needed" for g in got.values())
    assert "no task unordered" in got["write pkg/util.py"]["why"]
    assert state["tasks"]["a"]["violations"] == []
    # the trailers
    assert trailers(repo, "Anti-Sprawl-Scope-Granted") == ["read pkg/util.py", "write pkg/util.py"]
    # the manifests of the calls after the grants list them
    folder = run_dir(repo, state) / "manifests" / "a"
    last = max(folder.glob("*.json"), key=lambda p: int(p.stem))
    assert {g["path"] for g in json.loads(last.read_text())["scope_grants"]} == {"pkg/util.py"}
    # the PR body
    body = (run_dir(repo, state) / "PR.md").read_text()
    assert "## Scope requests" in body
    assert "**granted** write `pkg/util.py`" in body
    # the revised plan beside the journal: valid, with the grants in a's scopes
    revised = run_dir(repo, state) / "plan.revised.yaml"
    text = revised.read_text()
    assert "added task 'a': write pkg/util.py" in text
    a = next(t for t in yaml.safe_load(text)["tasks"] if t["task_id"] == "a")
    assert "pkg/util.py" in a["write_scope"]
    assert "pkg/util.py" in a["read_scope"]
    assert cli("validate", str(revised), "--repo", str(repo)).exit_code == 0
    shown = cli("status", state["run_id"], "--repo", str(repo), "--plan", "--json")
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["added"] == [
        "task 'a': read pkg/util.py",
        "task 'a': write pkg/util.py",
    ]
    # the revised plan is one resume accepts: a's scopes are the ones its commit was built with
    again = cli("resume", state["run_id"], "--repo", str(repo), "--plan", str(revised), "--json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["status"] == "succeeded"


# --- refused -------------------------------------------------------------------------------

HOSTILE = {
    ".env": "a secret file is never in scope",
    "build/out.txt": "an ignored file (.gitignore) is never in scope",
    ".git/config": "never in scope",
    ".anti-sprawl/runs": "never in scope",
    "pkg/../.env": "'..' segment escapes the repository",
    "../outside.py": "'..' segment escapes the repository",
    "/etc/passwd": "absolute paths are never granted",
    "pkg/*.py": "globs are never granted",
    "**": "globs are never granted",
    "pkg/": "directories are never granted",
    "pkg": "not a regular file",
    "pkg/link.py": "a symlink is never granted",
}


def test_refusals_the_limit_and_no_widening_of_the_audit_or_run_tests(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    plan = fx.plan()
    # the test command itself tries to change a file no one was granted
    plan["tasks"][0]["test_command"] = [
        sys.executable,
        "-c",
        "import contextlib\nwith contextlib.suppress(OSError):\n"
        "    open('pkg/other.py', 'w').write('HACKED = 1\\n')",
    ]
    turns = [
        ask(list(HOSTILE)[:8]),
        ask(list(HOSTILE)[8:]),
        ask(["pkg/b.py"], "write"),  # node b writes it and nothing orders a and b
        ask(["pkg/base.py"]),  # already readable: answered, not counted
        ask(["README.md", "pkg/__init__.py", "pkg/shared.py", "pkg/other.py"]),  # 4th: limit
        {"tool": "write_file", "args": {"path": "pkg/b.py", "content": "B = 9\n"}},
        {"tool": "write_file", "args": {"path": "pkg/other.py", "content": "X = 1\n"}},
        {"tool": "write_file", "args": {"path": "pkg/a.py", "content": "A = 1\n"}},
        {"tool": "run_tests", "args": {"args": []}},
        finish("pkg/a.py"),
    ]
    result, state = execute(tmp_path, repo, plan, fx.script(a=turns))
    assert result.exit_code == 0, result.output
    got = decisions(state, "a")
    for path, why in HOSTILE.items():
        entry = next(g for g in got.values() if g["path"] in (path, path.rstrip("/")))
        assert not entry["granted"], path
        assert why in entry["why"], (path, entry)
    overlap = got["write pkg/b.py"]
    assert not overlap["granted"]
    assert "task 'b' writes 'pkg/b.py'" in overlap["why"]
    assert "read pkg/base.py" not in got  # already in scope: not a grant
    granted = sorted(k for k, g in got.items() if g["granted"])
    assert granted == ["read README.md", "read pkg/__init__.py", "read pkg/shared.py"]
    assert "limit of 3 grants" in got["read pkg/other.py"]["why"]
    # the refused write is a blocked violation, as without scope requests
    blocked = {(v["op"], v["path"]) for v in state["tasks"]["a"]["violations"]}
    assert {("write", "pkg/b.py"), ("write", "pkg/other.py")} <= blocked
    # nothing outside the plan's write scope reached the branch: not the tests' write either
    assert changed_by(repo, "a") == {"pkg/a.py"}
    assert fx.git(repo, "show", f"{BRANCH}:pkg/other.py") == "OTHER = 1"
    assert fx.git(repo, "show", f"{BRANCH}:pkg/b.py") == "B = 2"
    assert trailers(repo, "Anti-Sprawl-Scope-Granted") == [
        "read README.md",
        "read pkg/__init__.py",
        "read pkg/shared.py",
    ]
    assert "write pkg/b.py" in trailers(repo, "Anti-Sprawl-Scope-Refused")
    assert "refused write `pkg/b.py`" in (run_dir(repo, state) / "PR.md").read_text()
    # the secret's value went nowhere
    assert "not-for-models" not in (run_dir(repo, state) / "run.json").read_text()


def test_a_write_refused_for_a_granted_read_of_an_unordered_node(tmp_path: Path) -> None:
    """a and b are unordered; a (first, with one job) is granted a read of pkg/shared.py, so
    b's later write of it is refused, naming a."""
    repo = make_repo(tmp_path)
    plan = fx.plan()
    plan["tasks"] = [t for t in plan["tasks"] if t["task_id"] != "c"]
    plan["tasks"][1]["dependencies"] = []
    script = fx.script(
        a=[ask(["pkg/shared.py"]), *fx.worker_turns("pkg/a.py", "A = 1\n")],
        b=[ask(["pkg/shared.py"], "write"), *fx.worker_turns("pkg/b.py", "B = 2\n")],
    )
    result, state = execute(tmp_path, repo, plan, script)
    assert result.exit_code == 0, result.output
    a, b = decisions(state, "a")["read pkg/shared.py"], decisions(state, "b")
    assert a["granted"]  # reads are granted: the map lists the file
    write = b["write pkg/shared.py"]
    assert not write["granted"]
    assert "task 'a' reads 'pkg/shared.py'" in write["why"]


# --- never, ask --------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["never", "ask"])
def test_never_and_ask_without_a_terminal_refuse_all_and_are_recorded(
    tmp_path: Path, mode: str
) -> None:
    repo = make_repo(tmp_path)
    turns = [ask(["pkg/util.py"]), ask(["pkg/util.py"], "write"), *finish_after_write()]
    result, state = execute(tmp_path, repo, fx.plan(), fx.script(a=turns), "--scope-requests", mode)
    assert result.exit_code == 0, result.output
    got = decisions(state, "a")
    assert set(got) == {"read pkg/util.py", "write pkg/util.py"}
    assert not any(g["granted"] for g in got.values())
    assert all("--scope-requests never" in g["why"] for g in got.values())
    if mode == "ask":
        assert "needs a terminal" in result.stderr
    # the choice as given is the run's launch setting: resume reuses it
    launch = json.loads((run_dir(repo, state) / "run.json").read_text())["launch"]
    assert launch["scope_requests"] == mode
    assert trailers(repo, "Anti-Sprawl-Scope-Granted") == []


def finish_after_write() -> list[dict[str, Any]]:
    return [
        {"tool": "write_file", "args": {"path": "pkg/a.py", "content": "A = 1\n"}},
        finish("pkg/a.py"),
    ]


def test_resume_reuses_the_recorded_choice(tmp_path: Path) -> None:
    """A run started with ``never`` and interrupted at its token cap resumes with ``never``."""
    repo = make_repo(tmp_path)
    script = fx.script(b=[ask(["pkg/util.py"]), *fx.worker_turns("pkg/b.py", "B = 2\n")])
    plan_path, script_path = fx.write_inputs(tmp_path, fx.plan(), script)
    base = ["--repo", str(repo), "--script", str(script_path), "--json", "--jobs", "1"]
    first = cli("execute", str(plan_path), *base, "--scope-requests", "never", "--max-tokens", "1")
    state = json.loads(first.stdout)
    assert state["status"] == "interrupted", first.output
    done = cli("resume", state["run_id"], *base[:4], "--json", "--max-tokens", "10000000")
    final = json.loads(done.stdout)
    assert final["status"] == "succeeded", done.output
    (request,) = final["tasks"]["b"]["scope_grants"]
    assert not request["granted"]
    assert "--scope-requests never" in request["why"]


# --- the pieces ----------------------------------------------------------------------------


def test_the_cli_choices_are_the_policy_modes_and_the_ablation_turns_requests_off() -> None:
    assert tuple(c.value for c in ScopeRequestsChoice) == SCOPE_REQUESTS
    assert Ablations.of(["scope-requests"]).scope_requests("auto") == "never"
    assert Ablations().scope_requests("ask") == "ask"


@pytest.mark.parametrize(
    "raw",
    ["a/../../b", "./../x", "/abs", "~/x", "a\\b", "C:/x", "x\x00y", "a/*", "a/?", "a/[b]", ""],
)
def test_requested_paths_that_could_widen_a_scope_are_never_grantable(raw: str) -> None:
    _, problem = requested_path(raw)
    assert problem is not None


def test_a_plain_path_is_canonical() -> None:
    assert requested_path("./pkg//util.py") == ("pkg/util.py", None)


def test_ask_on_a_terminal_puts_each_request_to_the_user(tmp_path: Path) -> None:
    """``ask`` with a terminal: the user says yes to the write and no to the read."""
    repo = make_repo(tmp_path)
    turns = [
        ask(["pkg/util.py"], "write"),
        ask(["README.md"]),
        {"tool": "write_file", "args": {"path": "pkg/util.py", "content": UTIL}},
        *finish_after_write(),
    ]
    plan_path, script_path = fx.write_inputs(tmp_path, fx.plan(), fx.script(a=turns))
    argv = [sys.executable, "-m", "anti_sprawl", "execute", str(plan_path), "--repo", str(repo)]
    argv += ["--script", str(script_path), "--jobs", "1", "--scope-requests", "ask"]
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:/usr/bin:/bin", COLUMNS="120")
    main, child = pty.openpty()
    proc = subprocess.Popen(argv, stdin=child, stdout=child, stderr=child, env=env)
    os.close(child)
    seen, answers = b"", [b"y\n", b"n\n"]
    while True:
        ready, _, _ = select.select([main], [], [], 120)
        if not ready:
            proc.kill()
            pytest.fail(f"no output for 120 s: {seen[-2000:]!r}")
        try:
            chunk = os.read(main, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
        if seen.count(b"Grant it?") > 2 - len(answers):
            os.write(main, answers.pop(0))
    os.close(main)
    assert proc.wait(timeout=120) == 0, seen[-3000:]
    (journal,) = (repo / ".anti-sprawl" / "runs").glob("*/run.json")
    state = json.loads(journal.read_text())
    got = decisions(state, "a")
    assert got["write pkg/util.py"]["granted"]
    assert got["write pkg/util.py"]["why"].startswith("asked and granted")
    assert not got["read README.md"]["granted"]
    assert got["read README.md"]["why"] == "the user refused it"
    assert b"task 'a' asks to write 'pkg/util.py' (needed). Grant it?" in seen
    assert changed_by(repo, "a") == {"pkg/a.py", "pkg/util.py"}


def test_a_remote_workers_claimed_grants_are_judged_again_by_the_run() -> None:
    """What the central process keeps of a Dask worker's ``scope_grants`` before its re-audit:
    a claimed write that overlaps an unordered node, names a secret, an internal file or a
    glob, or exceeds the limit becomes a refusal; the rest stays granted."""
    b = Neighbour("b", read=("docs/",), write=("pkg/b.py",))

    def claim(path: str, mode: str = "write") -> ScopeGrant:
        return ScopeGrant(mode=mode, path=path, granted=True, why="granted")  # type: ignore[arg-type]

    claims = [
        claim("pkg/util.py"),
        claim("pkg/b.py"),
        claim("docs/x.md"),
        claim(".env"),
        claim(".git/config"),
        claim("pkg/*"),
        claim("./pkg/u2.py"),
        claim("README.md", "read"),
        claim("pkg/u3.py"),
        claim("pkg/u4.py"),
        claim("pkg/u5.py"),
    ]
    judged = {(g.mode, g.path): g for g in confirmed([b], claims)}
    kept = sorted(p for (m, p), g in judged.items() if g.granted and m == "write")
    assert kept == ["pkg/u3.py", "pkg/util.py"]  # with the read, three grants
    assert "task 'b' writes 'pkg/b.py'" in judged[("write", "pkg/b.py")].why
    assert "task 'b' reads 'docs/'" in judged[("write", "docs/x.md")].why
    assert "secret" in judged[("write", ".env")].why
    assert "limit of 3" in judged[("write", "pkg/u4.py")].why
    assert "limit of 3" in judged[("write", "pkg/u5.py")].why
    assert not judged[("write", "./pkg/u2.py")].granted  # not the canonical path it claims
    assert judged[("read", "README.md")].granted
    assert granted_writes(judged.values()) == kept_in_order(claims, kept)


def test_a_jobs_neighbours_are_the_unordered_nodes_with_the_grants_known_when_it_was_built() -> (
    None
):
    """``Neighbours`` (what a job carries, computed when a write request reads it) is what
    ``unordered_with`` gives, with the grants recorded when the job was built, and a Dask job
    pickles it as that tuple."""
    plan = Plan.model_validate(
        {
            "plan_id": "p",
            "requirement": "r",
            "tasks": [
                {"task_id": "a", "name": "a", "goal": "g", "write_scope": ["pkg/a.py"]},
                {"task_id": "b", "name": "b", "goal": "g", "write_scope": ["pkg/b.py"]},
                {
                    "task_id": "c",
                    "name": "c",
                    "goal": "g",
                    "dependencies": ["a"],
                    "read_scope": ["docs/"],
                    "write_scope": ["pkg/c.py"],
                },
            ],
        }
    )
    grant = ScopeGrant(mode="write", path="pkg/util.py", granted=True, why="granted")
    granted = {"b": [grant]}
    ordering = Ordering(dependency_edges(plan))
    lazy = Neighbours(plan, "c", granted, ordering)
    granted["b"] = []  # recorded after the job was built: not this job's business
    want = unordered_with(plan, "c", {"b": [grant]}, ordering)
    assert [n.task_id for n in want] == ["b"]  # a is c's dependency
    assert want[0].write == ("pkg/b.py", "pkg/util.py")
    assert tuple(lazy) == want
    assert len(lazy) == 1
    assert lazy[0] == want[0]
    assert pickle.loads(pickle.dumps(lazy)) == want
    assert "task 'b' writes 'pkg/util.py'" in confirmed(lazy, [grant])[0].why


def kept_in_order(claims: list[ScopeGrant], kept: list[str]) -> list[str]:
    return [g.path for g in claims if g.path in kept]


def test_a_request_for_paths_already_in_scope_says_to_go_ahead(tmp_path: Path) -> None:
    """make real-model 2026-12-05 run ab: the same write request for calc.py, in the node's
    write scope from the start, answered "granted: already in your write scope" four times
    between empty replies. Nothing was needed; the answer now says what to do instead."""
    repo = make_repo(tmp_path)
    turns = [
        ask(["pkg/a.py"], "write"),
        ask(["pkg/base.py"]),
        ask(["pkg/a.py", "README.md"]),  # one of them new: no such line
        {"tool": "write_file", "args": {"path": "pkg/a.py", "content": "A = 1\n"}},
        finish("pkg/a.py"),
    ]
    result, state = execute(tmp_path, repo, fx.plan(), fx.script(a=turns))
    assert result.exit_code == 0, result.output
    lines = (run_dir(repo, state) / "artifacts" / "a" / "transcript.jsonl").read_text()
    answers = [
        e["result"]["content"]
        for e in map(json.loads, lines.splitlines())
        if e["event"] == "tool" and e["call"]["name"] == "request_scope"
    ]
    assert answers[0].endswith(
        "Change them now: write_file with the whole new content, or edit_file."
    )
    assert answers[1].endswith("Nothing was needed: you may already read these files (read_file).")
    assert "Nothing was needed" not in answers[2]
    assert "read pkg/a.py" not in decisions(state, "a")  # answered, never recorded
