"""A reader that goes away does not change the verdict (``status RUN | head -1``).

Exit 1 means "the work failed": a closed stdout (EPIPE) must never turn a succeeded run or a
``status`` into one. Real pipes whose reading end is closed before the command writes, and a
real ``| head -1``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from . import e2e_fixture as fx

CLI = [sys.executable, "-m", "anti_sprawl"]


def _closed_stdout(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the CLI with stdout a pipe nobody reads any more."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [*CLI, *args], stdout=write, stderr=subprocess.PIPE, text=True, timeout=300
        )
    finally:
        os.close(write)


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, dict[str, str]]:
    """A run that succeeded, executed with its stdout closed from the start."""
    root = tmp_path_factory.mktemp("closed")
    repo = fx.make_repo(root)
    before = fx.checkout_fingerprint(repo)
    plan, script = fx.write_inputs(root, fx.plan(), fx.script())
    done = _closed_stdout("execute", str(plan), "--repo", str(repo), "--script", str(script))
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    (run_id,) = [p.name for p in (repo / ".anti-sprawl" / "runs").iterdir()]
    return repo, run_id, before


def test_execute_with_a_closed_stdout_still_succeeds(
    finished: tuple[Path, str, dict[str, str]],
) -> None:
    repo, run_id, before = finished
    state = json.loads((repo / ".anti-sprawl" / "runs" / run_id / "run.json").read_text())
    assert state["status"] == "succeeded"
    assert sorted(fx.task_trailers(repo)) == ["a", "b", "c"]
    fx.git(repo, "fsck", "--strict")
    assert fx.checkout_fingerprint(repo) == before


@pytest.mark.parametrize("extra", [[], ["--json"], ["RUN"], ["RUN", "--json"]])
def test_status_into_a_closed_pipe_exits_0(
    finished: tuple[Path, str, dict[str, str]], extra: list[str]
) -> None:
    repo, run_id, _ = finished
    args = [run_id if a == "RUN" else a for a in extra]
    shown = _closed_stdout("status", *args, "--repo", str(repo))
    assert (shown.returncode, shown.stderr) == (0, "")


def test_status_piped_into_head_exits_0(finished: tuple[Path, str, dict[str, str]]) -> None:
    repo, run_id, before = finished
    shown = subprocess.run(
        [*CLI, "status", run_id, "--repo", str(repo)], stdout=subprocess.PIPE, text=True
    )
    assert shown.returncode == 0
    status = [*CLI, "status", run_id, "--repo", str(repo)]
    piped = subprocess.run(
        ["bash", "-c", 'set -o pipefail; "$@" | head -1', "-", *status],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert piped.returncode in (0, 141), piped.stderr  # 141: killed by SIGPIPE, never 1
    assert piped.stdout == shown.stdout.splitlines(keepends=True)[0]
    assert "Traceback" not in piped.stderr
    assert fx.checkout_fingerprint(repo) == before
