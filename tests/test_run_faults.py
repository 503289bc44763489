"""One run per repository, a checked-out branch never moved, damaged journals: via the CLI.

Each test drives the real CLI (a subprocess where a run must be in flight) and checks the exit
code, the one line on stderr, the journal, the branch and the user's checkout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from . import e2e_fixture as fx

CLI = [sys.executable, "-m", "anti_sprawl"]
# The CLI behind the test launcher, which installs the crash hook ANTI_SPRAWL_CRASH_AT names.
LAUNCHER = [sys.executable, str(Path(__file__).with_name("crash_launcher.py"))]
# Long enough for a loaded machine to start the next command while a run is in flight (two
# seconds were not, at a load average of 4-5 on 2 cores: the run ended first).
SLOW = [sys.executable, "-c", "import time; time.sleep(5)"]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}"
    env.pop("ANTI_SPRAWL_CRASH_AT", None)
    return env


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], env=_env(), capture_output=True, text=True, timeout=300, cwd=cwd
    )


def one_line(proc: subprocess.CompletedProcess[str], code: int) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*CLI, *args], env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def wait_for(predicate: Any, proc: subprocess.Popen[str], what: str) -> None:
    deadline = time.monotonic() + 120
    while not predicate():
        assert proc.poll() is None, f"the run ended before {what}: {proc.communicate()}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def run_ids(repo: Path) -> list[str]:
    runs = repo / ".anti-sprawl" / "runs"
    return sorted(p.name for p in runs.iterdir()) if runs.is_dir() else []


def journal(repo: Path, run_id: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        (repo / ".anti-sprawl" / "runs" / run_id / "run.json").read_text()
    )
    return data


def slow_inputs(tmp_path: Path) -> tuple[Path, Path, Path]:
    """The demo repository with node a's tests slow: a run stays in flight for a few seconds."""
    repo = fx.make_repo(tmp_path)
    data = fx.plan()
    data["tasks"][0]["test_command"] = SLOW
    plan, script = fx.write_inputs(tmp_path, data, fx.script())
    return repo, plan, script


# --- one run per repository ----------------------------------------------------------------


def test_linked_worktree_shares_the_run_lock(tmp_path: Path) -> None:
    repo, plan, script = slow_inputs(tmp_path)
    linked = tmp_path / "linked"
    fx.git(repo, "worktree", "add", "-q", "-b", "other", str(linked))
    first = start("execute", str(plan), "--repo", str(repo), "--script", str(script), "-j", "1")
    lock = repo / ".git" / "anti-sprawl-run.flock"
    wait_for(
        lambda: f'"pid": {first.pid}' in (lock.read_text() if lock.exists() else ""),
        first,
        "the first run to take the lock",
    )
    second = cli("execute", str(plan), "--repo", str(linked), "--script", str(script))
    line = one_line(second, 2)
    assert "another anti-sprawl run is active in this repository" in line, line
    assert f"pid {first.pid}, in {repo}" in line, line
    out, err = first.communicate(timeout=300)
    assert first.returncode == 0, out + err
    assert run_ids(linked) == []  # the refused run left nothing behind
    # Afterwards the linked worktree may run, but never onto the branch the first run owns.
    again = cli("execute", str(plan), "--repo", str(linked), "--script", str(script))
    assert "already exists and belongs to run" in one_line(again, 2)
    assert sorted(fx.task_trailers(repo)) == ["a", "b", "c"]


# --- a checked-out branch is never moved -------------------------------------------------------


def test_execute_refuses_a_branch_checked_out_anywhere(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path)
    plan, script = fx.write_inputs(tmp_path, fx.plan(), fx.script())
    before = fx.checkout_fingerprint(repo)
    main_tip = fx.git(repo, "rev-parse", "main")
    line = one_line(
        cli("execute", str(plan), "--repo", str(repo), "--script", str(script), "--branch", "main"),
        2,
    )
    assert f"branch 'main' is checked out in {repo}" in line, line
    assert "--branch NAME" in line, line
    linked = tmp_path / "linked"
    fx.git(repo, "worktree", "add", "-q", "-b", "anti-sprawl/demo", str(linked))
    line = one_line(cli("execute", str(plan), "--repo", str(repo), "--script", str(script)), 2)
    assert f"branch 'anti-sprawl/demo' is checked out in {linked}" in line, line
    assert fx.git(repo, "rev-parse", "main") == main_tip
    assert fx.git(repo, "rev-parse", "anti-sprawl/demo") == main_tip
    assert fx.git(linked, "status", "--porcelain") == ""
    assert run_ids(repo) == []
    assert fx.checkout_fingerprint(repo) == before


def test_checking_out_the_run_branch_mid_run_stops_it_cleanly(tmp_path: Path) -> None:
    repo, plan, script = slow_inputs(tmp_path)
    base = fx.git(repo, "rev-parse", "HEAD")
    proc = start("execute", str(plan), "--repo", str(repo), "--script", str(script), "-j", "1")
    runs = repo / ".anti-sprawl" / "runs"
    wait_for(lambda: list(runs.glob("*/manifests/a/*.json")), proc, "node a to start")
    fx.git(repo, "switch", "-q", "anti-sprawl/demo")  # the user looks at the run branch
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 2, out + err
    assert "Traceback" not in out + err, err
    assert len(err.strip().splitlines()) == 1, err
    (run_id,) = run_ids(repo)
    assert f"branch 'anti-sprawl/demo' is checked out in {repo}" in err
    assert "the run stopped before landing a" in err
    assert f"to finish the run: anti-sprawl resume {run_id} --repo {repo}" in err
    # Nothing moved underneath the user: same commit, clean status, no staged deletions.
    assert fx.git(repo, "rev-parse", "anti-sprawl/demo") == base
    assert fx.git(repo, "rev-parse", "HEAD") == base
    assert fx.git(repo, "status", "--porcelain", "--untracked-files=all") == ""
    state = journal(repo, run_id)
    assert state["status"] == "interrupted"
    assert {t["status"] for t in state["tasks"].values()} == {"pending"}
    # resume refuses while the branch is still checked out, then finishes once it is not
    line = one_line(cli("resume", run_id, "--repo", str(repo), "--script", str(script)), 2)
    assert "checked out in" in line, line
    fx.git(repo, "switch", "-q", "main")
    done = cli("resume", run_id, "--repo", str(repo), "--script", str(script))
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(fx.task_trailers(repo)) == ["a", "b", "c"]
    assert fx.git(repo, "status", "--porcelain") == ""


# --- damaged journals --------------------------------------------------------------------


def _damage(path: Path, kind: str) -> None:
    original = path.read_bytes()
    if kind == "not_utf8":
        path.write_bytes(b"\xff\xfe" + original)
        return
    if kind == "directory":
        path.unlink()
        path.mkdir()
        return
    data = json.loads(original)
    if kind == "task_missing":
        del data["tasks"]["b"]
    elif kind == "unknown_dependency":
        data["plan"]["tasks"][2]["dependencies"].append("ghost")
    elif kind == "cycle":
        data["plan"]["tasks"][0]["dependencies"] = ["c"]
    elif kind == "wrong_type":
        data["tasks"]["a"]["status"] = 5
    path.write_text(json.dumps(data))


@pytest.mark.parametrize(
    ("kind", "needle"),
    [
        ("not_utf8", "is damaged: not UTF-8 text"),
        ("directory", "is unreadable: Is a directory"),
        ("task_missing", "is damaged: task 'b' of the plan has no record"),
        ("unknown_dependency", "is damaged: task 'c' depends on unknown task 'ghost'"),
        ("cycle", "is damaged: dependency cycle"),
        ("wrong_type", "is damaged: Input should be"),
    ],
)
def test_damaged_journal_is_one_line_from_every_command(
    tmp_path: Path, kind: str, needle: str
) -> None:
    repo = fx.make_repo(tmp_path)
    plan, script = fx.write_inputs(tmp_path, fx.plan(), fx.script())
    crashed = subprocess.run(
        [*LAUNCHER, "execute", str(plan), "--repo", str(repo), "--script", str(script)],
        env={**_env(), "ANTI_SPRAWL_CRASH_AT": "before_commit:c"},
        capture_output=True,
        timeout=300,
    )
    assert crashed.returncode < 0
    (run_id,) = run_ids(repo)
    path = repo / ".anti-sprawl" / "runs" / run_id / "run.json"
    _damage(path, kind)
    tip = fx.git(repo, "rev-parse", "anti-sprawl/demo")
    for args in (
        ["status", run_id, "--repo", str(repo)],
        ["status", run_id, "--repo", str(repo), "--json"],
        ["inspect", run_id, "--repo", str(repo)],
        ["resume", run_id, "--repo", str(repo), "--script", str(script)],
    ):
        line = one_line(cli(*args), 2)
        assert f"run journal {path} {needle}" in line, (args, line)
    listing = cli("status", "--repo", str(repo), "--json")
    assert listing.returncode == 0
    assert "Traceback" not in listing.stderr
    assert fx.git(repo, "rev-parse", "anti-sprawl/demo") == tip  # resume changed nothing
    assert sorted(fx.task_trailers(repo)) == ["a", "b"]
