"""The command sandbox, run for real: read-only tree, no network, scrubbed env, no survivors."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from anti_sprawl.git.audit import audit
from anti_sprawl.git.workspace import Workspace, commit
from anti_sprawl.sandbox.sandbox import (
    SandboxLayer,
    SandboxPolicy,
    SandboxUnavailable,
    probe_sandbox,
    run_command,
)

CANARIES = {
    "ANTHROPIC_API_KEY": "CANARY-KEY",
    "OPENAI_API_KEY": "CANARY-OPENAI",
    "GITHUB_TOKEN": "CANARY-GH",
    "AWS_SECRET_ACCESS_KEY": "CANARY-AWS",
    "MY_PASSWORD": "CANARY-PW",
}


@pytest.fixture(params=["bwrap", "landlock"])
def policy(request: pytest.FixtureRequest) -> SandboxPolicy:
    """One policy per layer that works on this machine; the others skip, saying why."""
    layer: SandboxLayer = request.param
    pol = SandboxPolicy(layers=(layer,))
    info = probe_sandbox(pol)
    if info.layer != layer:
        pytest.skip(f"no sandbox layer: {layer}: {info.tried.get(layer)}")
    return pol


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "f.txt").write_text("original\n")
    return root


def sh(script: str) -> list[str]:
    return ["sh", "-c", script]


def test_the_tree_is_read_only(policy: SandboxPolicy, project: Path) -> None:
    script = "echo evil > f.txt; echo evil > new.txt; rm -f f.txt; echo ok > /dev/null && echo dn"
    result = run_command(sh(script), project, timeout=30, policy=policy)
    assert (project / "f.txt").read_text() == "original\n"
    assert sorted(p.name for p in project.iterdir()) == ["f.txt"]
    assert result.layer == policy.layers[0]
    assert "dn" in result.output  # /dev/null stays writable


def test_remount_read_write_fails_inside(policy: SandboxPolicy, project: Path) -> None:
    if shutil.which("mount") is None:
        pytest.skip("no mount binary to try the remount with")
    script = "mount -o remount,bind,rw / ; echo rc=$?; touch f.txt 2>/dev/null; echo touch=$?; chmod +x f.txt; echo chmod=$?"
    result = run_command(sh(script), project, timeout=30, policy=policy)
    assert "rc=0" not in result.output
    assert "touch=1" in result.output
    assert "chmod=1" in result.output
    assert (project / "f.txt").read_text() == "original\n"
    assert not os.access(project / "f.txt", os.X_OK)


def test_no_network_to_a_local_listener(policy: SandboxPolicy, project: Path) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        code = (
            "import socket\ntry:\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=5)\n"
            "    print('CONNECTED')\n"
            "except OSError as exc:\n    print('BLOCKED', exc)\n"
        )
        result = run_command([sys.executable, "-c", code], project, timeout=30, policy=policy)
        assert "BLOCKED" in result.output
        assert "CONNECTED" not in result.output
        listener.settimeout(0)
        with pytest.raises(BlockingIOError):
            listener.accept()


def test_environment_is_an_allow_list(
    policy: SandboxPolicy, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in CANARIES.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("HARMLESS_SETTING", "passed-through")
    monkeypatch.setenv("UNLISTED_SETTING", "not-passed")
    pol = policy.model_copy(update={"env_allow": ("GITHUB_TOKEN", "HARMLESS_SETTING")})
    log = tmp_path / "logs" / "env.log"
    result = run_command(["env"], project, timeout=30, policy=pol, log_path=log)
    assert result.exit_code == 0
    for text in (result.output, log.read_text()):
        for key, value in CANARIES.items():
            assert value not in text
            assert f"{key}=" not in text
        assert "HARMLESS_SETTING=passed-through" in text
        assert "UNLISTED_SETTING" not in text
        assert "PYTHONHASHSEED=0" in text
        assert "LC_ALL=C.UTF-8" in text


def test_orchestrator_process_is_not_visible(policy: SandboxPolicy, project: Path) -> None:
    result = run_command(
        ["cat", f"/proc/{os.getpid()}/environ"], project, timeout=30, policy=policy
    )
    assert result.exit_code != 0
    assert "PATH=" not in result.output


def test_host_secrets_are_hidden(policy: SandboxPolicy, project: Path) -> None:
    if not Path("/etc/shadow").exists():
        pytest.skip("no /etc/shadow on this machine")
    result = run_command(["cat", "/etc/shadow"], project, timeout=30, policy=policy)
    assert "root:" not in result.output


def test_tmp_is_private(policy: SandboxPolicy, project: Path) -> None:
    marker = Path("/tmp") / f"anti-sprawl-marker-{uuid.uuid4().hex}"
    script = f'echo inside > "$TMPDIR/t" && cat "$TMPDIR/t"; echo leak > {marker}; echo "$TMPDIR"'
    result = run_command(sh(script), project, timeout=30, policy=policy)
    assert "inside" in result.output
    assert not marker.exists()
    tmpdir = Path(result.output.strip().splitlines()[-1])
    assert tmpdir == Path("/tmp") or not tmpdir.exists()  # a landlock private dir is deleted


def _alive(tag: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if tag.encode() in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def test_timeout_kills_the_command_and_its_children(policy: SandboxPolicy, project: Path) -> None:
    tag = str(4000 + os.getpid() % 1000)
    script = f"sleep {tag}1 & sleep {tag}2 & echo started; wait"
    result = run_command(sh(script), project, timeout=1, policy=policy)
    assert result.timed_out
    assert result.exit_code != 0
    assert "started" in result.output
    # SIGKILL is delivered at once; give the kernel a moment to tear the processes down.
    for _ in range(100):
        if not _alive(f"sleep {tag}"):
            break
        time.sleep(0.05)
    assert _alive(f"sleep {tag}") == []


def test_huge_output_is_truncated_and_logged(
    policy: SandboxPolicy, project: Path, tmp_path: Path
) -> None:
    code = "print('START'); print('x' * 2_000_000); print('END')"
    log = tmp_path / "out.log"
    pol = policy.model_copy(update={"output_limit": 4096})
    result = run_command(
        [sys.executable, "-c", code], project, timeout=60, policy=pol, log_path=log
    )
    assert result.exit_code == 0
    assert result.truncated
    assert result.output.startswith("START\n")
    assert result.output.endswith("END\n")
    assert "bytes omitted; full output in" in result.output
    assert len(result.output) < 4096 + 200
    assert result.output_bytes == log.stat().st_size == len("START\n") + 2_000_001 + len("END\n")
    assert result.log_path == str(log)


def test_pytest_runs_inside(policy: SandboxPolicy, tmp_path: Path) -> None:
    proj = tmp_path / "tiny"
    proj.mkdir()
    (proj / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (proj / "test_calc.py").write_text(
        "from calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    result = run_command(argv, proj, timeout=120, policy=policy)
    assert result.exit_code == 0, result.output
    assert "1 passed" in result.output
    (proj / "test_calc.py").write_text("def test_bad():\n    assert False\n")
    failed = run_command(argv, proj, timeout=120, policy=policy)
    assert failed.exit_code == 1
    assert "1 failed" in failed.output
    assert sorted(p.name for p in proj.iterdir()) == ["calc.py", "test_calc.py"]


def test_refuses_without_a_layer_unless_explicitly_unsafe(project: Path) -> None:
    with pytest.raises(SandboxUnavailable, match="refusing to run"):
        run_command(["true"], project, timeout=10, policy=SandboxPolicy(layers=()))
    unsafe = SandboxPolicy(layers=(), allow_unsandboxed=True)
    assert probe_sandbox(unsafe).layer == "none"
    result = run_command(["echo", "hi"], project, timeout=10, policy=unsafe)
    assert (result.layer, result.exit_code, result.output) == ("none", 0, "hi\n")


def test_a_rogue_command_cannot_land_anything_outside_the_write_scope(
    policy: SandboxPolicy, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    files = {"README.md": "r\n", "src/app/x.py": "x\n", "src/lib/z.py": "z\n", "docs/a.md": "a\n"}
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    cfg = ["-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    subprocess.run(["git", *cfg, "-C", str(repo), "add", "-A"], check=True)
    subprocess.run(["git", *cfg, "-C", str(repo), "commit", "-qm", "init"], check=True)
    with Workspace.create(repo, repo / ".anti-sprawl/worktrees", "rogue", "HEAD") as ws:
        script = (
            "echo pwned > README.md; echo new > docs/new.md; mkdir -p evil && echo e > evil/e;"
            " rm src/lib/z.py; echo kept > src/app/x.py"
        )
        result = run_command(sh(script), ws.path, timeout=30, policy=policy, writable=[ws.path])
        assert result.exit_code == 0, result.output
        outcome = audit(ws, ["src/app/"])
        assert {v.path for v in outcome.violations} == {
            "README.md",
            "docs/new.md",
            "evil/e",
            "src/lib/z.py",
        }
        sha = commit(ws, "rogue node", {"Anti-Sprawl-Task": "rogue"})
        assert sha is not None
        tree = subprocess.run(
            ["git", "-C", str(repo), "ls-tree", "-r", "--name-only", sha],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        assert sorted(tree) == sorted(files)

        def show(rel: str) -> str:
            return subprocess.run(
                ["git", "-C", str(repo), "show", f"{sha}:{rel}"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout

        assert show("README.md") == "r\n"
        assert show("src/lib/z.py") == "z\n"
        assert show("src/app/x.py") == "kept\n"
