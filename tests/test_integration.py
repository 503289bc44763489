"""The integrated branch verified as a whole (run/integration.py), through the real CLI.

A semantic conflict between two parallel nodes (tests/conflict_fixture.py) passes every
node's own tests and fails the integrated branch: the check catches it, bisection names the
culprit, the branch is rebuilt without it and its descendant, and its retry (told why) lands.
Also: a kill -9 mid-rebuild then ``resume`` converges; ``--no-integration`` skips the check;
failures already there at the start commit do not count; with no attempt left the run fails
``integration`` and keeps the last branch that passed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from anti_sprawl.run.bisect import first_failing

from . import conflict_fixture as cf
from . import e2e_fixture as fx

CLI = [sys.executable, str(Path(__file__).with_name("crash_launcher.py"))]


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}"
    env.pop("ANTI_SPRAWL_CRASH_AT", None)
    return {**env, **extra}


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], env=_env(**env), capture_output=True, text=True, timeout=600
    )


def _execute(
    tmp: Path, plan: dict[str, Any], script: dict[str, Any], *extra: str, **env: str
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    repo = tmp / "repo"
    if not repo.exists():
        cf.make_repo(tmp)
    plan_path, script_path = fx.write_inputs(tmp, plan, script)
    args = ["execute", str(plan_path), "--repo", str(repo), "--script", str(script_path)]
    return repo, _cli(*args, "--jobs", "2", *extra, **env)


def _state(repo: Path) -> dict[str, Any]:
    (run,) = (repo / ".anti-sprawl" / "runs").iterdir()
    done: dict[str, Any] = json.loads((run / "run.json").read_text())
    return done


def _commits(repo: Path, base: str = "main") -> list[str]:
    """Node trailers of the run branch's commits after ``base``, oldest first."""
    text = fx.git(
        repo,
        "log",
        "--reverse",
        "--format=%(trailers:key=Anti-Sprawl-Task,valueonly)",
        f"{base}..{cf.BRANCH}",
    )
    return [line.strip() for line in text.splitlines() if line.strip()]


def _suite_at(repo: Path, ref: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    """The whole suite on a fresh checkout of ``ref`` (not the tool's: git and pytest)."""
    where = tmp / f"check-{ref.replace('/', '-')}"
    fx.git(repo, "worktree", "add", "--detach", str(where), ref)
    return subprocess.run(cf.PYTEST, cwd=where, capture_output=True, text=True, timeout=300)


def test_bisect_probes_log2_commits() -> None:
    for count in (1, 2, 3, 8, 13):
        for culprit in range(count):
            probes: list[int] = []

            def fails(i: int, culprit: int = culprit, probes: list[int] = probes) -> bool:
                probes.append(i)
                return i >= culprit

            assert first_failing(count, fails) == culprit
            assert count - 1 not in probes  # the tip is known to fail
            assert len(probes) <= max(0, (count - 1).bit_length())


def test_semantic_conflict_is_caught_bisected_and_fixed_on_retry(tmp_path: Path) -> None:
    repo, done = _execute(tmp_path, cf.plan(), cf.script())
    assert done.returncode == 0, done.stdout + done.stderr
    state = _state(repo)
    integration = state["integration"]
    assert integration["status"] == "passed", integration
    assert integration["culprits"] == ["b"]  # bisection: a passes, a+b fails
    # the tip, bisection's probes (at most log2 of 4 commits), the tip after the retry
    assert integration["runs"] <= 1 + 2 + 1
    b = state["tasks"]["b"]
    assert [a["outcome"] for a in b["attempt_log"]] == ["failed", "succeeded"]
    first = b["attempt_log"][0]
    assert first["reason"] == "integration"
    assert "tests/test_calc.py" in first["note"]["test_tail"] + first["note"]["message"]
    c = state["tasks"]["c"]
    assert c["attempts"] == 2  # its commit was on b's: run and landed again,
    assert c["counted"] == 1  # on a fresh allowance (it did nothing wrong)
    assert state["tasks"]["d"]["attempts"] == 1  # unordered with b: re-landed, not re-run
    # one commit per node on the final branch, and the suite passes there
    assert sorted(_commits(repo)) == ["a", "b", "c", "d"]
    assert _suite_at(repo, cf.BRANCH, tmp_path).returncode == 0
    # the retry was told why: its first prompt carries the note, whose tail is the failure
    assert "cannot import name 'helper'" in first["note"]["test_tail"]
    run_dir = next((repo / ".anti-sprawl" / "runs").iterdir())
    retry_calls = [
        json.loads(p.read_text()) for p in sorted((run_dir / "manifests" / "b").glob("*.json"))
    ]
    retry_first = next(m for m in retry_calls if m["attempt"] == 2)
    assert [i["kind"] for i in retry_first["items"]].count("failure_note") == 1
    assert "integration: " in done.stdout
    assert "passed on the branch tip" in done.stdout
    pr = next((repo / ".anti-sprawl" / "runs").rglob("PR.md")).read_text()
    assert "Integration on the final branch" in pr
    assert "**passed**" in pr
    assert "Baseline:" in pr
    assert "Bisection" in pr


def _only(*tasks: str, **overrides: Any) -> dict[str, Any]:
    data = cf.plan(**overrides)
    data["tasks"] = [t for t in data["tasks"] if t["task_id"] in tasks]
    return data


def test_no_integration_skips_the_check(tmp_path: Path) -> None:
    repo, done = _execute(
        tmp_path, _only("a", "b"), cf.script(b=cf.b_first(), c_runs=0), "--no-integration"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    state = _state(repo)
    assert state["integration"]["status"] == "skipped"
    assert state["integration"]["reason"] == "--no-integration"
    assert state["integration"]["runs"] == 0
    assert not (next((repo / ".anti-sprawl" / "runs").iterdir()) / "integration").exists()
    assert state["launch"]["integration"] is False  # a bare resume keeps the choice
    assert "integration: not run (--no-integration)" in done.stdout
    # what the check would have caught: the integrated branch is broken
    assert _suite_at(repo, cf.BRANCH, tmp_path).returncode != 0


def test_failures_already_at_the_start_commit_do_not_count(tmp_path: Path) -> None:
    old = "def test_old():\n    assert False, 'broken before the run'\n"
    cf.make_repo(tmp_path, {**cf.FILES, "tests/test_old.py": old})
    plan = _only("a", integration_command=None, test_command=cf.PYTEST)
    plan["tasks"][0]["test_command"] = None  # the plan's: the whole suite, failing at base
    repo, done = _execute(tmp_path, plan, cf.script(c_runs=0))
    assert done.returncode == 0, done.stdout + done.stderr
    integration = _state(repo)["integration"]
    assert integration["status"] == "passed", integration
    assert integration["command"] == cf.PYTEST  # the default: the plan's test_command
    assert integration["last"]["known_failures"] == 1
    assert integration["last"]["new_failures"] == []
    assert integration["runs"] == 1
    assert integration["culprits"] == []
    assert "1 failure(s), ignored" in integration["baseline"]
    assert "1 known failure(s) ignored" in done.stdout


def test_attempts_exhausted_fail_the_run_and_keep_the_last_passing_branch(
    tmp_path: Path,
) -> None:
    plan = cf.plan(max_attempts=1)
    repo, done = _execute(tmp_path, plan, cf.script(b=cf.b_first(), c_runs=1))
    assert done.returncode == 1, done.stdout + done.stderr
    state = _state(repo)
    assert state["status"] == "failed"
    b = state["tasks"]["b"]
    assert (b["status"], b["reason"]) == ("failed", "integration")
    assert "tests/test_calc.py" in b["message"]
    assert state["tasks"]["c"]["status"] == "skipped"
    assert state["tasks"]["c"]["skipped_because"] == "b"
    integration = state["integration"]
    assert integration["status"] == "failed"
    assert integration["culprits"] == ["b"]
    assert integration["last"]["passed"]  # the branch kept passed
    assert "no attempt left" in integration["reason"]
    assert "b broke the integrated branch (tests/test_calc.py)" in integration["reason"]
    # the branch kept: b and its descendant taken off, d re-landed after a
    assert _commits(repo) == ["a", "d"]
    assert integration["last"]["commit"] == fx.git(repo, "rev-parse", cf.BRANCH)
    assert _suite_at(repo, cf.BRANCH, tmp_path).returncode == 0
    assert "integration: failed: b broke the integrated branch" in done.stdout
    assert "the last that passed" in done.stdout


def _resumed_with_b_fixed(tmp_path: Path, repo: Path) -> dict[str, Any]:
    """The state after ``resume`` of the killed run, the model answering b's retry with the fix
    (a new process serves a script from its start)."""
    run_id = _state(repo)["run_id"]
    again = tmp_path / "again.yaml"
    again.write_text(json.dumps({"workers": {"b": cf.b_fixed()}}))
    resumed = _cli("resume", run_id, "--repo", str(repo), "--script", str(again))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    return _state(repo)


@pytest.mark.parametrize("point", ["mid_rebuild:b", "after_rebuild:b"])
def test_kill_during_the_rebuild_then_resume_converges(tmp_path: Path, point: str) -> None:
    plan = _only("a", "b", "d")
    repo, crashed = _execute(tmp_path, plan, cf.script(c_runs=0), ANTI_SPRAWL_CRASH_AT=point)
    assert crashed.returncode == -signal.SIGKILL, crashed.stdout + crashed.stderr
    state = _resumed_with_b_fixed(tmp_path, repo)
    assert state["status"] == "succeeded"
    assert state["integration"]["status"] == "passed"
    assert "b" in state["integration"]["culprits"]
    assert sorted(_commits(repo)) == ["a", "b", "d"]  # each node exactly once
    assert fx.git(repo, "show", f"{cf.BRANCH}:lib/util.py") + "\n" == cf.UTIL_ALIASED
    for tid, record in state["tasks"].items():  # the journal names the rebuilt commits
        assert record["commit"] == fx.git(
            repo, "log", "-1", "--format=%H", f"--grep=Anti-Sprawl-Task: {tid}", cf.BRANCH
        )
    fsck = subprocess.run(["git", "fsck", "--no-progress"], cwd=repo, capture_output=True)
    assert fsck.returncode == 0
    assert not list((repo / ".anti-sprawl" / "worktrees").glob("*"))
    assert _suite_at(repo, cf.BRANCH, tmp_path).returncode == 0


def _slow(plan: dict[str, Any], task: str) -> dict[str, Any]:
    """``plan`` with ``task``'s tests run after a pause: it finishes after its neighbours."""
    node = next(t for t in plan["tasks"] if t["task_id"] == task)
    tests = node["test_command"][-1]
    args = ["-q", "-p", "no:cacheprovider", tests]
    pause = f"import sys, time, pytest; time.sleep(2); sys.exit(pytest.main({args!r}))"
    node["test_command"] = [sys.executable, "-c", pause]
    return plan


def _finished_first(state: dict[str, Any], one: str, other: str) -> bool:
    """Whether ``one``'s first attempt finished before ``other``'s."""
    first = {t: state["tasks"][t]["attempt_log"][0]["finished_at"] for t in (one, other)}
    return bool(first[one] < first[other])


def test_branch_and_blame_are_the_same_whichever_node_finishes_first(tmp_path: Path) -> None:
    """The same plan twice, a's tests slow in one run and b's in the other: the nodes land
    in different orders, yet the branch is put in the plan's order before the check, so
    bisection blames b both times and both runs end with the same branch order."""
    seen = []
    for slow in ("a", "b"):
        root = tmp_path / slow
        root.mkdir()
        repo, done = _execute(root, _slow(cf.plan(), slow), cf.script())
        assert done.returncode == 0, done.stdout + done.stderr
        state = _state(repo)
        fast = "b" if slow == "a" else "a"
        assert _finished_first(state, fast, slow)  # the timing did differ between the runs
        integration = state["integration"]
        assert state["branch_order"] == ""  # put in order, nothing left as it landed
        seen.append((integration["culprits"], _commits(repo), integration["status"]))
    assert seen[0] == seen[1] == (["b"], ["a", "b", "c", "d"], "passed")


def test_kill_mid_reorder_then_resume_converges(tmp_path: Path) -> None:
    """b lands before a (a's tests are slow); the run is killed once the reordered commits
    exist but before the branch moves: the branch is as it landed, and resume finishes with
    each node once, in the plan's order."""
    plan = _slow(_only("a", "b", "d"), "a")
    repo, crashed = _execute(
        tmp_path, plan, cf.script(c_runs=0), ANTI_SPRAWL_CRASH_AT="mid_reorder"
    )
    assert crashed.returncode == -signal.SIGKILL, crashed.stdout + crashed.stderr
    assert _commits(repo)[-1] == "a"  # killed before the move: still in landing order
    state = _resumed_with_b_fixed(tmp_path, repo)
    assert state["status"] == "succeeded"
    assert state["integration"]["culprits"] == ["b"]
    assert _commits(repo) == ["a", "b", "d"]
    for tid, record in state["tasks"].items():  # the journal names the reordered commits
        assert record["commit"] == fx.git(
            repo, "log", "-1", "--format=%H", f"--grep=Anti-Sprawl-Task: {tid}", cf.BRANCH
        )
    assert fx.git(repo, "for-each-ref", "refs/anti-sprawl/reorder") == ""
    fsck = subprocess.run(["git", "fsck", "--no-progress"], cwd=repo, capture_output=True)
    assert fsck.returncode == 0
    assert _suite_at(repo, cf.BRANCH, tmp_path).returncode == 0
