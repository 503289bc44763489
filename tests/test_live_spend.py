"""Live spend through the real CLI: in a pseudo-terminal the live table shows a running node's
tokens rising call by call (not 0 until it ends); piped, one line per step."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

from . import e2e_fixture as fx

pytestmark = pytest.mark.usefixtures("python_on_path")
CLI = [sys.executable, "-m", "anti_sprawl"]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
SLOW_TESTS = [sys.executable, "-c", "import time; time.sleep(0.5)"]


def one_node(tmp_path: Path) -> tuple[Path, list[str]]:
    repo = fx.make_repo(tmp_path)
    plan = fx.plan(test_command=SLOW_TESTS)
    plan["tasks"] = plan["tasks"][:1]
    plan_path, script = fx.write_inputs(tmp_path, plan, fx.script())
    return repo, ["execute", str(plan_path), "--repo", str(repo), "--script", str(script)]


def env() -> dict[str, str]:
    out = dict(os.environ)
    out["PATH"] = f"{Path(sys.executable).parent}:{out.get('PATH', '/usr/bin:/bin')}"
    out.update({"COLUMNS": "100", "LINES": "40", "TERM": "xterm-256color"})
    return out


def test_a_terminal_shows_a_running_nodes_tokens_rising(tmp_path: Path) -> None:
    _, args = one_node(tmp_path)
    main, child = pty.openpty()
    proc = subprocess.Popen([*CLI, *args], stdin=child, stdout=child, stderr=child, env=env())
    os.close(child)
    chunks = []
    while True:
        try:
            data = os.read(main, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    assert proc.wait(timeout=300) == 0
    screen = ANSI.sub("", b"".join(chunks).decode("utf-8", "replace"))
    running = re.findall(r"│ a\s+│ running\s+│\s+([\d,]+) \(40,000/call\)", screen)
    seen = [int(v.replace(",", "")) for v in running]
    assert len(set(seen)) >= 3, screen[-3000:]  # several calls' worth, while it ran
    assert seen == sorted(seen)  # only ever rising
    assert seen[0] < seen[-1]
    assert "tool run_tests" in screen or "tool write_file" in screen


def test_a_pipe_gets_one_line_per_step(tmp_path: Path) -> None:
    _, args = one_node(tmp_path)
    done = subprocess.run([*CLI, *args], env=env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    step = re.compile(r"^a: [^;]+; ([\d,]+) tokens \(40,000/call\), call \d+, \d+/10 tool calls")
    found = [step.match(ln) for ln in done.stdout.splitlines()]
    tokens = [int(m.group(1).replace(",", "")) for m in found if m]
    steps = tokens
    assert len(steps) >= 4
    assert tokens == sorted(tokens)
    assert tokens[-1] > 0
    assert "\x1b" not in done.stdout
