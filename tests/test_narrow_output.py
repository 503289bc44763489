"""Every command at 80 columns, through a pipe (issue 26, item 5).

The real CLI in a subprocess with stdout and stderr pipes and ``COLUMNS=80``, on one run made
with long task ids, a long branch and long paths (one node succeeds, one fails its tests, one is
skipped, one write is blocked). Each output keeps within the width, except lines that must stay
whole to be copied or grepped (a suggested command, a path, a URL, a one-line error, a doctor
check); the run id, the branch, the task ids
and the paths appear whole, never broken mid-name; and nothing a terminal would interpret
(escape sequences, carriage returns) reaches a pipe.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from . import e2e_fixture as fx

CLI = [sys.executable, "-m", "anti_sprawl"]
WIDTH = 80
BRANCH = "anti-sprawl/narrow-terminals-keep-branch-names-whole"
FIRST = "write-the-subscriber-registry-module"
SECOND = "write-the-dispatcher-that-fails-tests"
THIRD = "document-the-dispatcher-after-both"
LONG = "pkg/subscriber_registry_with_a_long_name.py"
FAILING = "pkg/dispatcher_with_a_rather_long_module_name.py"
DOCS = "pkg/dispatcher_notes_written_after_both.md"
# lines that are copied whole: commands, paths and URLs may be longer than the terminal
WHOLE = re.compile(
    r"^\s*(anti-sprawl |anti-sprawl: (error|note|warning): |\$ |PR body: |git |/)|https?://|(^|\s)/\S+"
    # doctor's checks are one line each, for grep (docs/reference.md)
    r"|^(ok|note|problem) +\w+ +"
)
GUIDES = " │├└─"
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x9b]")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("LINES", "NO_COLOR", "TERM")}
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}"
    env["COLUMNS"] = str(WIDTH)
    return env


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], env=_env(), capture_output=True, text=True, timeout=300, cwd=cwd
    )


def _plan() -> dict[str, object]:
    fails = [sys.executable, "-c", "import os, sys; sys.exit(1 if os.path.exists(%r) else 0)"]
    fails[-1] = fails[-1] % FAILING
    return fx.plan(
        plan_id="narrow",
        max_attempts=1,
        tasks=[
            fx.node(FIRST, [], LONG, "R = 1\n"),
            fx.node(SECOND, [], FAILING, "D = 1\n", test_command=fails),
            fx.node(THIRD, [FIRST, SECOND], DOCS, "notes\n"),
        ],
    )


def _script() -> dict[str, object]:
    blocked = {"tool": "write_file", "args": {"path": "pkg/util.py", "content": "x = 0\n"}}
    return fx.script(
        **{
            FIRST: [blocked, *fx.worker_turns(LONG, "R = 1\n")],
            SECOND: fx.worker_turns(FAILING, "D = 1\n"),
        }
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """A finished run: (repository, its plan file, the run id) and execute's own output."""
    root = tmp_path_factory.mktemp("narrow")
    repo = fx.make_repo(root)
    plan_path, script_path = fx.write_inputs(root, _plan(), _script())
    (root / "planner.yaml").write_text(
        yaml.safe_dump({"planner": [{"tool": "submit_plan", "args": _plan()}]})
    )
    executed = cli(
        "execute", str(plan_path), "--script", str(script_path), "--branch", BRANCH, cwd=repo
    )
    assert executed.returncode == 1, executed.stdout + executed.stderr
    (root / "execute.out").write_text(executed.stdout + executed.stderr)
    run_id = next(
        ln.removeprefix("run id: ")
        for ln in executed.stdout.splitlines()
        if ln.startswith("run id: ")
    )
    return repo, plan_path, run_id


def _commands(repo: Path, plan_path: Path, run_id: str) -> dict[str, list[str]]:
    planner = plan_path.parent / "planner.yaml"
    out = plan_path.parent / "narrow-planned.yaml"
    return {
        "help": ["--help"],
        "version": ["--version"],
        "validate": ["validate", str(plan_path), "--repo", str(repo)],
        "show": ["show", str(plan_path)],
        "plan": ["plan", "Add the event bus modules", "--script", str(planner), "-o", str(out)],
        "dry-run": ["execute", str(plan_path), "--script", str(planner), "--dry-run"],
        "status": ["status"],
        "status-run": ["status", run_id],
        "inspect": ["inspect", run_id],
        "inspect-task": ["inspect", run_id, "--task", SECOND],
        "inspect-manifests": ["inspect", run_id, "--task", FIRST, "--manifests"],
        "pr": ["pr", run_id],
        "clean": ["clean", "--dry-run", "--all"],
        "doctor": ["doctor"],
        "cancel": ["cancel", run_id],
        "resume": ["resume", run_id, "--script", str(planner)],
        "eval": ["eval", str(Path(__file__).resolve().parents[1] / "tasks" / "eval-real-model")],
    }


def _check_width(name: str, text: str) -> None:
    """Within the width, but for lines copied whole (stderr's one-line errors, commands,
    paths) and a line holding one token too long for it (breaking it would split a name)."""
    for line in text.splitlines():
        if len(line) > WIDTH and not WHOLE.search(line):
            assert " " not in line.lstrip(GUIDES), f"{name}: {len(line)} columns: {line!r}"


def test_every_command_keeps_to_80_columns_in_a_pipe(run: tuple[Path, Path, str]) -> None:
    repo, plan_path, run_id = run
    outputs = {"execute": (plan_path.parent / "execute.out").read_text()}
    for name, args in _commands(repo, plan_path, run_id).items():
        proc = cli(*args, cwd=repo)
        text = proc.stdout + proc.stderr
        assert "Traceback" not in text, (name, text)
        assert proc.returncode in (0, 1, 2), (name, proc.returncode, text)
        outputs[name] = text
    for subcommand in ("plan", "execute", "resume", "status", "inspect", "pr", "clean", "doctor"):
        proc = cli(subcommand, "--help", cwd=repo)
        assert proc.returncode == 0, proc.stderr
        outputs[f"{subcommand} --help"] = proc.stdout
    for name, text in outputs.items():
        assert text.strip(), f"{name} printed nothing"
        assert not CONTROL.search(text.replace("\t", " ")), (name, text)
        _check_width(name, text)
    # names are whole where they are shown: ids, the branch, the paths
    for name in ("execute", "status-run"):
        for task in (FIRST, SECOND, THIRD):
            assert task in outputs[name], (name, task, outputs[name])
    assert SECOND in outputs["inspect"]  # what failed, and what it took down
    assert THIRD in outputs["inspect"]
    assert run_id in outputs["status"]
    assert BRANCH in outputs["status-run"] or BRANCH in outputs["execute"]
    assert FAILING in outputs["inspect-task"]
    assert "pkg/util.py" in outputs["status-run"] + outputs["inspect"]  # the blocked write
    # the eval table's case names, and its "yes", are not folded down a squeezed column
    lines = outputs["eval"].splitlines()
    assert any(line.strip() == "real-model-whole-files" for line in lines), outputs["eval"]
    assert "agree: yes" in outputs["eval"]
    for name in ("validate", "show", "dry-run"):
        for task in (FIRST, SECOND, THIRD):
            assert task in outputs[name], (name, task, outputs[name])
