"""Resource limits on every sandboxed command, and the opt-in Landlock layer (issue 11, 12, 14).

A runaway test or a worker-written fork bomb must not take the machine down: under low test
limits each hog is stopped, nothing survives the run, and the reason reaches both the model's
observation and the verdict. Landlock is never chosen silently; when chosen it blocks UDP and
``setsid`` escapes, and the run report says what it still does not block.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from anti_sprawl.cli.app import app
from anti_sprawl.errors import UsageError
from anti_sprawl.sandbox.bwrap import entry_argv
from anti_sprawl.sandbox.policy import ResourceLimits, parse_limit
from anti_sprawl.sandbox.sandbox import (
    SandboxPolicy,
    SandboxUnavailable,
    probe_sandbox,
    run_command,
)

from . import e2e_fixture as fx

LOW = ResourceLimits(
    processes=48,
    memory_bytes=384 << 20,
    file_size_bytes=8 << 20,
    tmp_bytes=16 << 20,
    output_bytes=1 << 20,
)


@pytest.fixture(params=["bwrap", "landlock"])
def policy(request: pytest.FixtureRequest) -> SandboxPolicy:
    pol = SandboxPolicy(layers=(request.param,), limits=LOW)
    info = probe_sandbox(pol)
    if info.layer != request.param:
        pytest.skip(f"{request.param} does not work here: {info.tried}")
    return pol


@pytest.fixture
def work(tmp_path: Path) -> Path:
    where = tmp_path / "work"
    where.mkdir(mode=0o755)
    return where


def py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_a_memory_hog_is_stopped_and_named(policy: SandboxPolicy, work: Path) -> None:
    result = run_command(py("b = bytearray(2 << 30); print('ALLOCATED')"), work, timeout=60,
                         policy=policy)  # fmt: skip
    assert "ALLOCATED" not in result.output
    assert result.exit_code != 0
    assert result.limit == "memory"
    assert "memory limit" in result.output  # what the model sees


def test_a_big_file_is_stopped_and_named(policy: SandboxPolicy, work: Path) -> None:
    code = "import os\nwith open(os.environ['TMPDIR'] + '/big', 'wb') as f:\n f.write(b'x' * (12 << 20))"
    result = run_command(py(code), work, timeout=60, policy=policy)
    assert result.exit_code != 0
    assert result.limit == "file_size", result.output
    assert "file-size limit" in result.output


def test_a_full_tmp_is_stopped_and_named(work: Path) -> None:
    pol = SandboxPolicy(limits=LOW.model_copy(update={"file_size_bytes": 1 << 30}))
    if probe_sandbox(pol).layer != "bwrap":
        pytest.skip("the /tmp size cap needs bubblewrap's private /tmp")
    code = "with open('/tmp/fill', 'wb') as f:\n for _ in range(64): f.write(b'x' * (1 << 20))"
    result = run_command(py(code), work, timeout=60, policy=pol)
    assert result.limit == "tmp", result.output
    assert "/tmp limit" in result.output


def test_a_tmp_full_of_empty_files_is_stopped_and_named(work: Path) -> None:
    # 200,000 empty files cost no bytes against tmp=1G but pin kernel memory: the private
    # /tmp also caps its inodes, one per 16 KiB of its size (65,536 at the default 1 GiB).
    pol = SandboxPolicy()
    if probe_sandbox(pol).layer != "bwrap" or os.geteuid() != 0:
        pytest.skip("the /tmp inode cap needs bubblewrap run as root")
    assert pol.limits.tmp_inodes == 65_536
    code = (
        "import os\nmade = 0\ntry:\n for i in range(200_000):\n"
        "  os.close(os.open(f'/tmp/f{i}', os.O_CREAT | os.O_WRONLY)); made += 1\n"
        "finally:\n print('made', made)"
    )
    result = run_command(py(code), work, timeout=300, policy=pol)
    assert result.limit == "tmp", result.output
    assert "/tmp limit (1073741824 bytes, 65536 files)" in result.output
    made = int(result.output.split("made ")[1].split()[0])
    assert 60_000 < made < 65_536
    # the cap follows the size, or is named on its own
    assert ResourceLimits(tmp_bytes=256 << 20).tmp_inodes == 16_384
    assert ResourceLimits(tmp_files=100_000).tmp_inodes == 100_000
    assert parse_limit("tmp-files=5000") == ("tmp_files", 5000)
    with pytest.raises(UsageError):
        parse_limit("tmp-files=5K")


def test_runaway_output_ends_the_command(policy: SandboxPolicy, work: Path, tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    code = "import sys\nwhile True: sys.stdout.write('y' * 65536)"
    result = run_command(py(code), work, timeout=120, policy=policy, log_path=log)
    assert result.limit == "output"
    assert not result.timed_out
    assert log.stat().st_size == LOW.output_bytes  # the log stops at the cap
    assert "bytes of output" in result.output


def _sandbox_procs(uid: int) -> int:
    count = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    count += 1
            except OSError:
                continue
    return count


def test_a_fork_bomb_is_bounded_and_leaves_nothing(work: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("counts the sandbox uid's processes on the host (needs the root path)")
    pol = SandboxPolicy(limits=LOW)
    if probe_sandbox(pol).layer != "bwrap":
        pytest.skip("needs bubblewrap")
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _sandbox_procs(pol.sandbox_uid))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        bomb = "bomb() { bomb | bomb & }; bomb; sleep 30"
        result = run_command(["sh", "-c", bomb], work, timeout=6, policy=pol)
    finally:
        done.set()
        sampler.join()
    assert result.timed_out
    assert result.limit == "processes", result.output
    assert "process limit (48 processes)" in result.output
    assert peak[0] <= LOW.processes + 2  # + the entry shim's exec race
    for _ in range(100):
        if _sandbox_procs(pol.sandbox_uid) == 0:
            break
        time.sleep(0.05)
    assert _sandbox_procs(pol.sandbox_uid) == 0


def test_the_entry_shim_sets_every_limit_and_no_new_privs() -> None:
    # The unprivileged user-namespace path of the shim (no uid drop, no /tmp remount), run
    # directly: a root test machine never takes it inside bwrap, and its config is parsed
    # from words, so each limit must arrive as the number it was given.
    code = (
        "import resource; print([resource.getrlimit(getattr(resource, n)) for n in "
        "('RLIMIT_NPROC', 'RLIMIT_AS', 'RLIMIT_FSIZE', 'RLIMIT_CORE')]); "
        "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('NoNewPrivs')])"
    )
    done = subprocess.run(entry_argv(py(code), LOW, None), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    limits = [LOW.processes, LOW.memory_bytes, LOW.file_size_bytes, 0]
    assert done.stdout.splitlines() == [str([(n, n) for n in limits]), "['1']"]


def test_the_limit_reaches_the_model_and_the_verdict(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path)
    plan = fx.plan()
    plan["tasks"][0]["test_command"] = [sys.executable, "-c", "bytearray(3 << 30)"]
    plan_path, script_path = fx.write_inputs(tmp_path, plan, fx.script())
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:/usr/bin:/bin")
    args = [sys.executable, "-m", "anti_sprawl", "execute", str(plan_path), "--repo", str(repo)]
    args += ["--script", str(script_path), "--sandbox-limit", "memory=256M"]
    done = subprocess.run(args, env=env, capture_output=True, text=True)
    assert done.returncode == 1
    assert "memory limit" in done.stdout  # the verdict row says why
    transcript = next((repo / ".anti-sprawl" / "runs").glob("*/artifacts/a/transcript.jsonl"))
    assert "memory limit (268435456 bytes" in transcript.read_text()  # the observation
    run = json.loads(next((repo / ".anti-sprawl" / "runs").glob("*/run.json")).read_text())
    assert "256 MiB address space" in run["sandbox"]


def test_limit_flags_are_checked(tmp_path: Path) -> None:
    assert parse_limit("memory=2G") == ("memory_bytes", 2 << 30)
    assert parse_limit("processes=256") == ("processes", 256)
    for bad in ("memory", "speed=1", "processes=2k", "memory=lots"):
        with pytest.raises(UsageError):
            parse_limit(bad)
    plan_path, script_path = fx.write_inputs(tmp_path, fx.plan(), fx.script())
    repo = fx.make_repo(tmp_path)
    result = CliRunner().invoke(
        app,
        ["execute", str(plan_path), "--repo", str(repo), "--script", str(script_path),
         "--sandbox-limit", "processes=2"],
    )  # fmt: skip
    assert result.exit_code == 2
    assert "--sandbox-limit processes" in result.output
    assert "Traceback" not in result.output


# -- Landlock: opt-in only, and what it blocks ------------------------------------------------


def test_no_silent_fallback_to_landlock(work: Path) -> None:
    assert SandboxPolicy().layers == ("bwrap",)
    broken = SandboxPolicy(bwrap_binary="/nonexistent/bwrap")
    info = probe_sandbox(broken)
    assert info.layer is None
    assert "landlock" not in info.tried
    with pytest.raises(SandboxUnavailable, match="install bubblewrap"):
        run_command(["true"], work, timeout=10, policy=broken)


def test_execute_refuses_with_the_install_hint_when_bwrap_is_missing(tmp_path: Path) -> None:
    from anti_sprawl.plan.model import Plan
    from anti_sprawl.providers.scripted import Script, ScriptedProvider
    from anti_sprawl.run.runner import ExecuteOptions, RunSettings, execute

    repo = fx.make_repo(tmp_path)
    provider = ScriptedProvider(Script.from_data(fx.script()))
    opts = ExecuteOptions(provider, RunSettings(sandbox=SandboxPolicy(bwrap_binary="/nope/bwrap")))
    with pytest.raises(UsageError, match="apt-get install bubblewrap"):
        execute(Plan.model_validate(fx.plan()), repo, opts)
    assert provider.requests == []
    assert "anti-sprawl/demo" not in fx.git(repo, "branch", "--list")


@pytest.fixture
def landlock() -> SandboxPolicy:
    pol = SandboxPolicy(layers=("landlock",))
    if probe_sandbox(pol).layer != "landlock":
        pytest.skip("Landlock does not work here")
    return pol


def test_landlock_blocks_udp_to_the_host(landlock: SandboxPolicy, work: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.settimeout(0.5)
        port = listener.getsockname()[1]
        code = (
            "import socket\n"
            "for fam, addr in ((socket.AF_INET, '127.0.0.1'), (socket.AF_INET6, '::1')):\n"
            "    try:\n"
            "        s = socket.socket(fam, socket.SOCK_DGRAM)\n"
            f"        s.sendto(b'LEAK', (addr, {port}))\n"
            "        print('SENT', fam)\n"
            "    except OSError as exc:\n"
            "        print('BLOCKED', exc.errno)\n"
        )
        result = run_command(py(code), work, timeout=30, policy=landlock)
        assert "SENT" not in result.output
        assert result.output.count("BLOCKED 13") == 2
        with pytest.raises(TimeoutError):
            listener.recvfrom(16)


def test_landlock_leaves_no_setsid_survivors(landlock: SandboxPolicy, work: Path) -> None:
    tag = f"{7000 + os.getpid() % 1000}"
    code = (
        "import os, subprocess\n"
        "try:\n    os.setsid(); print('NEW SESSION')\nexcept OSError as e: print('setsid', e.errno)\n"
        "try:\n    os.setpgid(0, 0); print('NEW GROUP')\nexcept OSError as e: print('setpgid', e.errno)\n"
        f"subprocess.Popen(['setsid', '-f', 'sleep', '{tag}1'])\n"
        f"subprocess.Popen(['sleep', '{tag}2'], start_new_session=True)\n"
        "print('started')\n"
    )
    result = run_command(py(code), work, timeout=20, policy=landlock)
    assert "NEW SESSION" not in result.output
    assert "NEW GROUP" not in result.output
    assert "setsid 1" in result.output
    assert "setpgid 1" in result.output
    time.sleep(0.2)
    alive = subprocess.run(["pgrep", "-f", f"sleep {tag}"], capture_output=True, text=True)
    assert alive.stdout.strip() == "", "a process escaped the run's process group"


def test_the_run_report_says_what_landlock_does_not_block(tmp_path: Path) -> None:
    if probe_sandbox(SandboxPolicy(layers=("landlock",))).layer != "landlock":
        pytest.skip("Landlock does not work here")
    repo = fx.make_repo(tmp_path)
    plan_path, script_path = fx.write_inputs(tmp_path, fx.plan(), fx.script())
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:/usr/bin:/bin")
    args = [sys.executable, "-m", "anti_sprawl", "execute", str(plan_path), "--repo", str(repo)]
    args += ["--script", str(script_path), "--sandbox", "landlock", "--json"]
    done = subprocess.run(args, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    sandbox = json.loads(done.stdout)["sandbox"]
    assert sandbox.startswith("landlock")
    assert "weaker" in sandbox
    assert "pathname unix sockets" in sandbox
    assert "process-count limit" in sandbox
    pr = next((repo / ".anti-sprawl" / "runs").glob("*/PR.md")).read_text()
    assert "pathname unix sockets" in pr
