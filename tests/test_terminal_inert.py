"""Terminal output is inert (issue 25, docs/security.md P18).

Every field a model, a repository, a test command or a plan file controls carries an OSC 52
clipboard write, a screen clear, a cursor move and their 8-bit C1 forms. Each command is run
the way a user runs it, on a real pseudo-terminal (a pty, not a pipe, so Rich draws its
terminal output: colours, the live table), and the bytes it writes are read back: the payload
shows up only in its visible form, never as a control sequence.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from anti_sprawl.views.terminal import inert

from . import e2e_fixture as fx
from .conftest import GIT_ENV

OSC52 = "\x1b]52;c;SElKQUNLRUQ=\x07"
PAY = f"{OSC52}\x1b[2J\x1b[1;1H\x9b6n\x9d0;owned\x9c\rX"
VISIBLE = "\\x1b]52;c;SElKQUNLRUQ="
FORBIDDEN = ("\x1b]52", "\x1b[2J", "\x1b[1;1H", "\x07", "\x9b", "\x9d", "\x9c", "\r\x58")


def in_pty(
    argv: list[str], cwd: Path, env: dict[str, str], timeout: float = 300
) -> tuple[int, str]:
    """Run ``argv`` with a pty as its terminal (250 columns); (exit code, what it wrote)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 60, 250, 0, 0))
    proc = subprocess.Popen(
        argv, cwd=cwd, env=env, stdin=slave, stdout=slave, stderr=slave, start_new_session=True
    )
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 1.0)
        if not ready:
            if proc.poll() is not None:
                break
            continue
        try:
            data = os.read(master, 1 << 16)
        except OSError:  # EIO: every writer closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    os.close(master)
    # the terminal turns "\n" into "\r\n": undo that, so a bare CR of the payload stands out
    return code, b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")


def assert_inert(output: str, *, shown: bool = True) -> None:
    for sequence in FORBIDDEN:
        assert sequence not in output, (sequence, output[-3000:])
    if shown:
        assert VISIBLE in output, output[-3000:]  # the field was printed, made visible


def test_inert_makes_every_control_visible() -> None:
    text = inert(f"ok\ttab\nline{PAY}\u202eevil\x7f")
    assert text == (
        "ok\ttab\nline\\x1b]52;c;SElKQUNLRUQ=\\x07\\x1b[2J\\x1b[1;1H\\x9b6n\\x9d0;owned\\x9cX"
        "\\u202eevil\\x7f"
    )
    assert not any((ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) < 0xA0 for c in text)


def _failing_test(text: str) -> list[str]:
    return [sys.executable, "-c", f"import sys; sys.stdout.write({text!r}); sys.exit(1)"]


def hostile_plan() -> dict[str, Any]:
    tasks = [
        fx.node("a", [], "pkg/a.py", "", name=f"A {PAY}", goal=f"goal {PAY}"),
        fx.node("b", [], "pkg/b.py", "", name=f"B {PAY}"),
        fx.node("c", ["a"], "pkg/c.py", "", name=f"C {PAY}"),
    ]
    # (no CR: the verdict shows the tail's last line, which would start after it)
    tasks[0]["test_command"] = _failing_test(f"tests failed {OSC52}\x1b[2J\x9b6n\x9d0;x\x9c\n")
    tasks[0]["max_attempts"] = 1
    return fx.plan(plan_id="demo", requirement=f"Add modules {PAY}", tasks=tasks)


def hostile_script(plan: dict[str, Any]) -> dict[str, Any]:
    finish = {"tool": "finish", "args": {"summary": f"did it {PAY}", "interfaces": PAY}}
    return {
        "plan": plan,
        "workers": {
            "a": [
                {"tool": "write_file", "args": {"path": "pkg/a.py", "content": "A = 1\n"}},
                finish,
            ],
            "b": [
                {"tool": "write_file", "args": {"path": f"pkg/{PAY}.py", "content": "x\n"}},
                {"tool": "write_file", "args": {"path": "pkg/b.py", "content": "B = 2\n"}},
                finish,
            ],
            "c": [finish],
        },
    }


class Hostile:
    """A repository, a hostile plan and script, and a CLI that runs on a pty in it."""

    def __init__(self, root: Path):
        self.root = root
        self.repo = fx.make_repo(root)
        (self.repo / "pkg" / f"{PAY}.txt").write_text("a file named by the repository\n")
        fx.git(self.repo, "add", "-A")
        subprocess.run(
            ["git", "commit", "-qm", f"add {PAY}"],
            cwd=self.repo,
            check=True,
            env={**os.environ, **GIT_ENV},
        )
        self.plan = hostile_plan()
        self.plan["tasks"][1]["read_scope"] = ["pkg/base.py", "pkg/*.txt"]
        self.plan_path, self.script_path = fx.write_inputs(
            root, self.plan, hostile_script(self.plan)
        )
        bad = hostile_plan()
        bad["tasks"][2]["dependencies"] = [f"x{PAY}"]
        self.bad_plan = root / "bad.yaml"
        self.bad_plan.write_text(yaml.safe_dump(bad))
        self.env = {
            **{k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "COLUMNS", "LINES")},
            **GIT_ENV,
            "TERM": "xterm-256color",
            "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        }
        self.run_id = ""

    def cli(self, *args: str) -> tuple[int, str]:
        return in_pty([sys.executable, "-m", "anti_sprawl", *args], self.root, self.env)

    def scripted(self, *args: str) -> tuple[int, str]:
        return self.cli(*args, "--repo", str(self.repo), "--script", str(self.script_path))


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Hostile:
    world = Hostile(tmp_path_factory.mktemp("inert"))
    code, output = world.scripted("execute", str(world.plan_path), "--jobs", "1")
    world.execute_output = output  # type: ignore[attr-defined]
    assert code == 1, output[-3000:]
    listing = subprocess.run(
        [sys.executable, "-m", "anti_sprawl", "status", "--repo", str(world.repo), "--json"],
        capture_output=True,
        text=True,
        env=world.env,
        check=True,
    )
    world.run_id = json.loads(listing.stdout)[0]["run_id"]
    return world


def test_execute_prints_names_tails_and_paths_inert(hostile: Hostile) -> None:
    output: str = hostile.execute_output  # type: ignore[attr-defined]
    assert_inert(output)
    assert "tests failed \\x1b]52" in output  # the failing test's output tail
    assert "pkg/\\x1b]52" in output  # the blocked path the model chose


@pytest.mark.parametrize(
    "command",
    [
        ["status"],
        ["status", "RUN"],
        ["inspect", "RUN"],
    ],
)
def test_run_views_print_inert(hostile: Hostile, command: list[str]) -> None:
    args = [hostile.run_id if a == "RUN" else a for a in command]
    code, output = hostile.cli(*args, "--repo", str(hostile.repo))
    assert code == 0, output[-3000:]
    assert_inert(output, shown=command != ["status"])  # the list shows no model text


def test_resume_prints_inert(hostile: Hostile) -> None:
    code, output = hostile.scripted("resume", hostile.run_id)
    assert code in (0, 1), output[-3000:]
    assert_inert(output)


def test_pr_prints_inert(hostile: Hostile) -> None:
    remote = hostile.root / "origin.git"
    if not remote.exists():
        subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
        fx.git(hostile.repo, "remote", "add", "origin", str(remote))
    code, output = hostile.cli("pr", hostile.run_id, "--repo", str(hostile.repo), "--allow-partial")
    assert code == 0, output[-3000:]
    assert_inert(output)


@pytest.mark.parametrize(
    "command",
    [
        ["show", "PLAN"],
        ["show", "PLAN", "--format", "mermaid"],
        ["show", "PLAN", "--format", "dot"],
        ["validate", "PLAN"],
        ["validate", "BAD"],  # the dependency name in the error
        ["show", "BAD"],  # one error line
    ],
)
def test_plan_views_and_validation_errors_print_inert(hostile: Hostile, command: list[str]) -> None:
    files = {"PLAN": str(hostile.plan_path), "BAD": str(hostile.bad_plan)}
    code, output = hostile.cli(*[files.get(a, a) for a in command])
    assert code in (0, 1, 2), output[-3000:]
    # a valid plan's line names only the file
    assert_inert(output, shown=command != ["validate", "PLAN"])


def test_the_planners_plan_prints_inert(hostile: Hostile) -> None:
    out = hostile.root / "planned.yaml"
    code, output = hostile.scripted("plan", f"Add modules {PAY}", "-o", str(out))
    assert code == 0, output[-3000:]
    assert_inert(output)


def test_an_error_line_prints_inert(hostile: Hostile) -> None:
    code, output = hostile.scripted("execute", str(hostile.bad_plan))
    assert code == 2
    assert len(output.strip().splitlines()) == 1
    assert_inert(output)


def test_eval_prints_a_failed_checks_test_output_inert(hostile: Hostile) -> None:
    case = hostile.root / "suite" / "case"
    for rel, text in fx.FILES.items():
        (case / "repo" / rel).parent.mkdir(parents=True, exist_ok=True)
        (case / "repo" / rel).write_text(text)
    plan = hostile_plan()
    plan["tasks"] = plan["tasks"][:1]
    script = hostile_script(plan)
    script["workers"] = {"a": script["workers"]["a"]}
    (case / "plan.yaml").write_text(yaml.safe_dump(plan))
    (case / "script.yaml").write_text(yaml.safe_dump(script))
    case_data = {
        "fixture": "repo",
        "plan": "plan.yaml",
        "script": "script.yaml",
        "requirement": "x",
        "checks": {"tests_pass": True, "test_command": plan["tasks"][0]["test_command"]},
    }
    (case / "case.yaml").write_text(yaml.safe_dump(case_data))
    code, output = hostile.cli("eval", str(case.parent))
    assert code == 1, output[-3000:]
    assert "tests_pass: exit 1: tests failed \\x1b]52" in output
    assert_inert(output)
