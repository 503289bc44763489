"""A full disk under the run directory: a real, small tmpfs in a private mount namespace.

``unshare --mount`` (as root) gives the test its own mount table, where a 64 KiB tmpfs is
mounted over ``.anti-sprawl/runs`` and filled up with ``dd``, either before the run
(the first journal write fails) or while node ``a`` runs (a later one does). The CLI runs
inside that namespace; the shell script around it keeps its exit code, output and run data
(copied back to the real directory, as a user would find it after freeing space).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from . import e2e_fixture as fx

CLI = [sys.executable, "-m", "anti_sprawl"]
# No user namespace: in one, the sandbox could not switch test commands to its own uid.
UNSHARE = ["unshare", "--mount", "--propagation", "private"]


def _namespaces_work() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        [*UNSHARE, "sh", "-c", "mount -t tmpfs -o size=4k tmpfs /mnt"], capture_output=True
    )
    return probe.returncode == 0


pytestmark = pytest.mark.skipif(
    not _namespaces_work(), reason="needs root and a mount namespace to mount a small tmpfs"
)

FIRST_SAVE = """
mount -t tmpfs -o size=64k tmpfs "$RUNS"
mkdir "$RUNS/filler"  # a directory: git.layout refuses a plain file among the runs
dd if=/dev/zero of="$RUNS/filler/zeros" bs=4096 2>/dev/null
"$PY" -m anti_sprawl execute "$PLAN" --repo "$REPO" --script "$SCRIPT" \
    >"$OUT/stdout" 2>"$OUT/stderr"
echo $? >"$OUT/rc"
ls -A "$RUNS" >"$OUT/ls"
"""

MID_RUN = """
mount -t tmpfs -o size=64k tmpfs "$RUNS"
"$PY" -m anti_sprawl execute "$PLAN" --repo "$REPO" --script "$SCRIPT" -j 1 \
    >"$OUT/stdout" 2>"$OUT/stderr" &
pid=$!
while ! ls "$RUNS"/*/manifests/a/1.json >/dev/null 2>&1; do
    kill -0 $pid 2>/dev/null || break
    sleep 0.02
done
mkdir "$RUNS/filler"
dd if=/dev/zero of="$RUNS/filler/zeros" bs=4096 2>/dev/null
wait $pid
echo $? >"$OUT/rc"
rm -rf "$RUNS/filler"
mkdir "$OUT/runs" && cp -a "$RUNS/." "$OUT/runs/"
"""


def _in_namespace(script: str, repo: Path, plan: Path, run_script: Path, out: Path) -> None:
    runs = repo / ".anti-sprawl" / "runs"
    runs.mkdir(parents=True)  # the mount point; excluded as an earlier run would have done
    with (repo / ".git" / "info" / "exclude").open("a") as fh:
        fh.write("/.anti-sprawl/\n")
    out.mkdir()
    env = dict(os.environ)
    env.pop("ANTI_SPRAWL_CRASH_AT", None)
    env.update(
        PY=sys.executable,
        RUNS=str(runs),
        PLAN=str(plan),
        SCRIPT=str(run_script),
        REPO=str(repo),
        OUT=str(out),
        PATH=f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}",
    )
    subprocess.run([*UNSHARE, "sh", "-c", script], env=env, check=True, timeout=300)


def _stderr_line(out: Path) -> str:
    err = (out / "stderr").read_text()
    assert "Traceback" not in err + (out / "stdout").read_text()
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_full_disk_at_the_first_journal_write_starts_nothing(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path)
    plan, script = fx.write_inputs(tmp_path, fx.plan(), fx.script())
    before = fx.checkout_fingerprint(repo)
    out = tmp_path / "out"
    _in_namespace(FIRST_SAVE, repo, plan, script, out)
    assert (out / "rc").read_text().strip() == "1"
    line = _stderr_line(out)
    assert line.startswith("anti-sprawl: error: cannot write the run journal "), line
    assert line.endswith("run.json: No space left on device; nothing was started"), line
    assert (out / "ls").read_text().split() == ["filler"]  # no half-made run directory
    assert fx.git(repo, "branch", "--list", "anti-sprawl/*") == ""
    assert fx.checkout_fingerprint(repo) == before
    # with room again, the same execute simply works
    done = subprocess.run(
        [*CLI, "execute", str(plan), "--repo", str(repo), "--script", str(script)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_full_disk_mid_run_keeps_the_previous_journal_and_resumes(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path)
    data = fx.plan()
    data["tasks"][0]["test_command"] = [sys.executable, "-c", "import time; time.sleep(1)"]
    plan, script = fx.write_inputs(tmp_path, data, fx.script())
    before = fx.checkout_fingerprint(repo)
    out = tmp_path / "out"
    _in_namespace(MID_RUN, repo, plan, script, out)
    assert (out / "rc").read_text().strip() == "1"
    line = _stderr_line(out)
    (run_id,) = [p.name for p in (out / "runs").iterdir()]
    assert "cannot write the run journal" in line, line
    assert "No space left on device" in line, line
    assert line.endswith(f"to finish the run: anti-sprawl resume {run_id} --repo {repo}"), line
    # The journal on the full disk is the last one written before it filled: whole JSON.
    state = json.loads((out / "runs" / run_id / "run.json").read_text())
    assert state["run_id"] == run_id
    assert state["status"] == "running"
    assert fx.task_trailers(repo) == []
    assert fx.checkout_fingerprint(repo) == before
    # Space is back (the run data is where the user would find it): resume finishes the run.
    shutil.copytree(out / "runs", repo / ".anti-sprawl" / "runs", dirs_exist_ok=True)
    done = subprocess.run(
        [*CLI, "resume", run_id, "--repo", str(repo), "--script", str(script)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(fx.task_trailers(repo)) == ["a", "b", "c"]
    fsck = subprocess.run(["git", "fsck", "--no-progress"], cwd=repo, capture_output=True)
    assert fsck.returncode == 0
