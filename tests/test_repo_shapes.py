"""Repositories of unusual shapes: SHA-256 object ids, another user's, a non-UTF-8 path.

Each either works end to end (one commit per node, also after a crash and ``resume``; git fsck
clean; the user's checkout untouched) or is refused up front with one line and exit 2, before
anything is written.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from . import e2e_fixture as fx
from .conftest import GIT_ENV

CLI = [sys.executable, "-m", "anti_sprawl"]
LAUNCHER = [sys.executable, str(Path(__file__).parent / "crash_launcher.py")]
OTHER_UID = 12345


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTI_SPRAWL_CRASH")}
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}"
    return env | extra


def _cli(*args: str, launcher: bool = False, **env: str) -> subprocess.CompletedProcess[str]:
    argv = [*(LAUNCHER if launcher else CLI), *args]
    return subprocess.run(argv, env=_env(**env), capture_output=True, text=True, timeout=600)


def _refused(done: subprocess.CompletedProcess[str], *words: str) -> str:
    """The one line of a refusal (exit 2, no traceback), which says ``words``."""
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    *notes, line = done.stderr.strip().splitlines()
    assert all(n.startswith("anti-sprawl: warning: no price") for n in notes), notes
    assert line.startswith("anti-sprawl: error: ")
    for word in words:
        assert word in line, line
    return line


def _sha256_repo(root: Path) -> Path:
    repo = root / "repo"
    for rel, text in fx.FILES.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    env = {**os.environ, **GIT_ENV}
    init = ["init", "-q", "-b", "main", "--object-format=sha256"]
    for args in (init, ["add", "-A"], ["commit", "-q", "-m", "initial"]):
        subprocess.run(["git", *args], cwd=repo, check=True, env=env)
    return repo


def test_a_sha256_repository_runs_end_to_end_and_resumes(tmp_path: Path) -> None:
    repo = _sha256_repo(tmp_path)
    assert len(fx.git(repo, "rev-parse", "HEAD")) == 64
    before = fx.checkout_fingerprint(repo)
    plan, script = fx.write_inputs(tmp_path, fx.plan(), fx.script())
    args = ["execute", str(plan), "--repo", str(repo), "--script", str(script)]
    crashed = _cli(*args, launcher=True, ANTI_SPRAWL_CRASH_AT="before_commit:c")
    assert crashed.returncode == -9, crashed.stderr
    (run_id,) = [p.name for p in (repo / ".anti-sprawl" / "runs").iterdir()]
    resumed = _cli("resume", run_id, "--repo", str(repo), "--script", str(script))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert sorted(fx.task_trailers(repo)) == ["a", "b", "c"]
    assert all(len(sha) == 64 for sha in fx.git(repo, "rev-list", "anti-sprawl/demo").split())
    fx.git(repo, "fsck", "--strict")
    assert fx.checkout_fingerprint(repo) == before


def test_dask_refuses_a_sha256_repository_up_front(tmp_path: Path) -> None:
    repo = _sha256_repo(tmp_path)
    plan, _ = fx.write_inputs(tmp_path, fx.plan(), fx.script())
    args = ["execute", str(plan), "--repo", str(repo), "--provider", "openai", "--model", "m"]
    # No cluster at that address: the refusal comes before any connection is tried.
    done = _cli(*args, "--executor", "dask", "--dask-scheduler", "tcp://127.0.0.1:9")
    _refused(done, "sha256", "--executor local")
    assert not (repo / ".anti-sprawl").exists()
    assert fx.git(repo, "branch", "--list", "anti-sprawl/*") == ""


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")
def test_another_users_repository_is_refused_with_gits_own_reason(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path)
    before = fx.checkout_fingerprint(repo)
    plan, script = fx.write_inputs(tmp_path, fx.plan(), fx.script())
    os.chown(repo, OTHER_UID, OTHER_UID)
    try:
        for args in (
            ["execute", str(plan), "--repo", str(repo), "--script", str(script)],
            ["status", "--repo", str(repo)],
            ["validate", str(plan), "--repo", str(repo)],
        ):
            line = _refused(_cli(*args), "dubious ownership", "safe.directory")
            assert "not a git repository" not in line
    finally:
        os.chown(repo, 0, 0)
    assert not (repo / ".anti-sprawl").exists()
    assert fx.checkout_fingerprint(repo) == before
    done = _cli("execute", str(plan), "--repo", str(repo), "--script", str(script))
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(fx.task_trailers(repo)) == ["a", "b", "c"]
    fx.git(repo, "fsck", "--strict")


def test_a_non_utf8_repository_path_is_one_line(tmp_path: Path) -> None:
    where = tmp_path / os.fsdecode(b"caf\xe9")
    where.mkdir()
    repo = fx.make_repo(where)
    before = fx.checkout_fingerprint(repo)
    plan, script = fx.write_inputs(tmp_path, fx.plan(), fx.script())
    for args in (
        ["execute", str(plan), "--repo", str(repo), "--script", str(script)],
        ["status", "--repo", str(repo)],
        ["validate", str(plan), "--repo", str(repo)],
    ):
        _refused(_cli(*args), "not valid UTF-8")
    assert not (repo / ".anti-sprawl").exists()
    assert fx.checkout_fingerprint(repo) == before
    fx.git(repo, "fsck", "--strict")


def test_a_repository_due_for_gc_gets_none_from_the_runs_commits(tmp_path: Path) -> None:
    """A background ``git gc --auto`` (due once ~6,700 loose objects are written: a 3,000-node
    run) locks files in the worktree admin dirs the run is deleting, and a node failed
    ``storage`` for it (issue 22). The run's git commands never start one: here gc is due at
    once (``gc.auto=1`` and two loose objects in ``objects/17``) and would run in the
    foreground, yet every node lands and nothing is packed."""
    repo = fx.make_repo(tmp_path)
    env = {**os.environ, **GIT_ENV}
    for key, value in (("gc.auto", "1"), ("gc.autoDetach", "false")):
        subprocess.run(["git", "config", key, value], cwd=repo, check=True, env=env)
    blobs, n = tmp_path / "blobs", 0
    blobs.mkdir()
    while len(list((repo / ".git" / "objects" / "17").glob("*"))) < 2:
        paths = []
        for _ in range(200):
            n += 1
            (blobs / str(n)).write_text(f"loose {n}\n")
            paths.append(str(blobs / str(n)))
        hashed = "\n".join(paths) + "\n"
        cmd = ["git", "hash-object", "-w", "--stdin-paths"]
        subprocess.run(cmd, cwd=repo, input=hashed, text=True, check=True, capture_output=True)
    plan_path, script_path = fx.write_inputs(tmp_path, fx.plan(), fx.script())
    done = _cli("execute", str(plan_path), "--repo", str(repo), "--script", str(script_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(fx.task_trailers(repo)) == ["a", "b", "c"]
    counts = subprocess.run(
        ["git", "count-objects", "-v"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout
    assert "packs: 0" in counts.splitlines(), counts
