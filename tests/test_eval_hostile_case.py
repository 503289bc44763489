"""A hostile eval case directory cannot run code on the host (issue 25, docs/security.md P17).

The case sets every variable that would choose or configure the orchestrator's programs
(``PATH``, ``HOME``, ``XDG_CONFIG_HOME``, ``GIT_*``, ``PYTHONPATH``, ``BASH_ENV``, ``LD_PRELOAD``)
to files of its own directory; each of those files, when run or loaded, appends its name to a
marker file outside the case. The suite is run the way a user runs it (``anti-sprawl eval`` in a
subprocess): the marker never appears, the case still runs to its verdict, and under ``strace``
no ``execve`` names a program in the case directory. Paths a case names (fixture, plan, script,
resume) stay inside its directory: ``..``, absolute paths and symlinks are one line, exit 2.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from anti_sprawl.errors import UsageError
from anti_sprawl.eval import load_case, load_cases

# Every program the orchestrator (or a library it uses) might start by name.
PROGRAMS = ("git", "bwrap", "python", "python3", "sh", "bash", "env", "gh", "ssh", "cat", "less")

PLAN = {
    "plan_id": "bump",
    "requirement": "Bump the version.",
    "test_command": "python -m tests.check",
    "tasks": [
        {
            "task_id": "bump",
            "name": "Bump the version",
            "goal": "Set VERSION = 2 in app/main.py.",
            "read_scope": ["tests/check.py"],
            "write_scope": ["app/main.py"],
            "token_budget": 20000,
            "max_tool_calls": 6,
        }
    ],
}
SCRIPT = {
    "workers": {
        "bump": [
            {"tool": "write_file", "args": {"path": "app/main.py", "content": "VERSION = 2\n"}},
            {"tool": "run_tests", "args": {}},
            {"tool": "finish", "args": {"summary": "VERSION is 2."}},
        ]
    }
}


def _marker_script(marker: Path, name: str) -> str:
    return f'#!/bin/sh\necho "{name} $0 $*" >> {marker}\nexit 1\n'


def _evil_library(case: Path, marker: Path) -> Path | None:
    """A shared object whose constructor writes the marker (None without a C compiler)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    source = case / "evil.c"
    source.write_text(
        "#include <stdio.h>\n"
        "__attribute__((constructor)) static void hit(void) {\n"
        f'  FILE *f = fopen("{marker}", "a"); if (f) {{ fputs("LD_PRELOAD\\n", f); fclose(f); }}\n'
        "}\n"
    )
    lib = case / "evil.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(source)], check=True)
    return lib


def hostile_case(root: Path, marker: Path) -> Path:
    """A case directory whose fixture and variables try every way to run host code."""
    case = root / "hostile"
    repo = case / "repo"
    for rel, text in {
        "app/__init__.py": "",
        "app/main.py": "VERSION = 1\n",
        "tests/__init__.py": "",
        "tests/check.py": "from app.main import VERSION\nassert VERSION == 2\n",
        # a filter the hostile global config defines: `git add` would run it
        ".gitattributes": "* filter=evil diff=evil\n",
    }.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    bins = [repo / "bin", case / "bin"]
    for directory in bins:
        directory.mkdir()
        for name in PROGRAMS:
            tool = directory / name
            tool.write_text(_marker_script(marker, name))
            tool.chmod(0o755)
    hook = case / "bin" / "hook"
    hook.write_text(_marker_script(marker, "git-config"))
    hook.chmod(0o755)
    gitconfig = (
        f"[core]\n\tfsmonitor = {hook}\n\tpager = {hook}\n\tsshCommand = {hook}\n"
        f"\teditor = {hook}\n\thooksPath = {case / 'hooks'}\n"
        f'[filter "evil"]\n\tclean = {hook}\n\tsmudge = {hook}\n'
        f'[diff "evil"]\n\ttextconv = {hook}\n\tcommand = {hook}\n'
        f"[alias]\n\tadd = !{hook}\n"
    )
    home = case / "home"
    (home / ".config" / "git").mkdir(parents=True)
    (home / ".gitconfig").write_text(gitconfig)
    (home / ".config" / "git" / "config").write_text(gitconfig)
    (case / "hooks").mkdir()
    for name in ("pre-commit", "post-commit", "post-checkout", "reference-transaction"):
        (case / "hooks" / name).write_text(_marker_script(marker, name))
        (case / "hooks" / name).chmod(0o755)
    (case / "py").mkdir()
    (case / "py" / "sitecustomize.py").write_text(
        f"open({str(marker)!r}, 'a').write('sitecustomize\\n')\n"
    )
    (case / "bashenv").write_text(f"echo BASH_ENV >> {marker}\n")
    path = ":".join(str(d) for d in bins) + ":/usr/bin:/bin"
    env = {
        "PATH": path,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "GIT_CONFIG_GLOBAL": str(home / ".gitconfig"),
        "GIT_CONFIG_SYSTEM": str(home / ".gitconfig"),
        "GIT_EXEC_PATH": str(case / "bin"),
        "GIT_SSH_COMMAND": str(hook),
        "GIT_PAGER": str(hook),
        "PYTHONPATH": str(case / "py"),
        "PYTHONSTARTUP": str(case / "py" / "sitecustomize.py"),
        "BASH_ENV": str(case / "bashenv"),
        "ENV": str(case / "bashenv"),
        "VIRTUAL_ENV": str(case),
    }
    if (lib := _evil_library(case, marker)) is not None:
        env["LD_PRELOAD"] = str(lib)
    (case / "plan.yaml").write_text(yaml.safe_dump(PLAN))
    (case / "script.yaml").write_text(yaml.safe_dump(SCRIPT))
    case_yaml = {
        "name": "hostile",
        "fixture": "repo",
        "requirement": "Bump the version.",
        "plan": "plan.yaml",
        "script": "script.yaml",
        "env": env,
        "checks": {
            "tests_pass": True,
            "expect_status": "succeeded",
            "required_changed": ["app/main.py"],
        },
    }
    (case / "case.yaml").write_text(yaml.safe_dump(case_yaml))
    return case


def _eval_argv(case: Path) -> list[str]:
    return [sys.executable, "-m", "anti_sprawl", "eval", str(case), "--json"]


def _strip_secrets() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC", "OPENAI"))}


def test_a_hostile_case_directory_runs_no_code_on_the_host(tmp_path: Path) -> None:
    marker = tmp_path / "ran-from-the-case-directory.log"
    case = hostile_case(tmp_path, marker)
    work = tmp_path / "cwd"
    work.mkdir()
    done = subprocess.run(
        _eval_argv(case), cwd=work, env=_strip_secrets(), capture_output=True, text=True
    )
    assert not marker.exists(), marker.read_text()
    assert done.returncode == 0, done.stderr[-2000:]
    (result,) = json.loads(done.stdout)["variants"][0]["cases"]
    assert result["passed"], result["checks"]
    assert result["run_status"] == "succeeded"


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace for the process tree")
def test_no_program_of_the_case_directory_is_started(tmp_path: Path) -> None:
    marker = tmp_path / "ran-from-the-case-directory.log"
    case = hostile_case(tmp_path, marker)
    trace = tmp_path / "execve.trace"
    argv = ["strace", "-f", "-qq", "-e", "trace=execve", "-o", str(trace), *_eval_argv(case)]
    done = subprocess.run(argv, cwd=tmp_path, env=_strip_secrets(), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    started = [line for line in trace.read_text().splitlines() if "execve(" in line]
    assert any("/git" in line for line in started)  # the trace saw the host's own git
    from_case = [line for line in started if f'execve("{case}' in line]
    assert from_case == []
    assert not marker.exists()


def _case_with(tmp_path: Path, **changes: object) -> Path:
    case = hostile_case(tmp_path, tmp_path / "marker")
    data = yaml.safe_load((case / "case.yaml").read_text())
    data.pop("env")
    data.update(changes)
    (case / "case.yaml").write_text(yaml.safe_dump(data))
    return case


@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [
        ("fixture", "../outside", r"'\.\.'"),
        ("fixture", "/etc", "absolute"),
        ("plan", "sub/../plan.yaml", r"'\.\.'"),
        ("script", "/tmp/script.yaml", "absolute"),
        ("resume", "../plan.yaml", r"'\.\.'"),
    ],
)
def test_case_paths_outside_the_case_directory_are_refused(
    tmp_path: Path, key: str, value: str, problem: str
) -> None:
    case = _case_with(tmp_path, **{key: value})
    (tmp_path / "outside").mkdir()
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump(PLAN))
    with pytest.raises(UsageError, match=problem):
        load_case(case / "case.yaml")


def test_symlinked_case_paths_are_refused(tmp_path: Path) -> None:
    case = _case_with(tmp_path)
    outside = tmp_path / "elsewhere"
    shutil.copytree(case / "repo", outside)
    (case / "linked").symlink_to(outside, target_is_directory=True)
    (case / "plan-link.yaml").symlink_to(case / "plan.yaml")
    (case / "sub").mkdir()
    (case / "sub" / "up").symlink_to(case, target_is_directory=True)
    for key, value in [
        ("fixture", "linked"),  # a symlink to a folder outside
        ("plan", "plan-link.yaml"),  # a symlink even inside
        ("script", "sub/up/script.yaml"),  # through a symlinked folder
    ]:
        data = yaml.safe_load((case / "case.yaml").read_text())
        data[key] = value
        (case / "case.yaml").write_text(yaml.safe_dump(data))
        with pytest.raises(UsageError, match="symlink"):
            load_case(case / "case.yaml")
        data[key] = {"fixture": "repo", "plan": "plan.yaml", "script": "script.yaml"}[key]
        (case / "case.yaml").write_text(yaml.safe_dump(data))
    load_case(case / "case.yaml")  # the case itself is fine


def test_a_symlinked_case_file_or_folder_is_refused(tmp_path: Path) -> None:
    case = _case_with(tmp_path)
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "linked").symlink_to(case, target_is_directory=True)
    with pytest.raises(UsageError, match="symlink"):
        load_cases(suite)
    (suite / "linked").unlink()
    (suite / "own").mkdir()
    (suite / "own" / "case.yaml").symlink_to(case / "case.yaml")
    with pytest.raises(UsageError, match="symlink"):
        load_cases(suite)


def test_an_escaping_case_path_is_one_line_and_exit_2(tmp_path: Path) -> None:
    case = _case_with(tmp_path, fixture="../../")
    done = subprocess.run(_eval_argv(case), capture_output=True, text=True, env=_strip_secrets())
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert "fixture" in lines[0]
    assert "inside the case" in lines[0]


def test_a_fifo_in_the_fixture_is_refused_not_read(tmp_path: Path) -> None:
    case = _case_with(tmp_path)
    os.mkfifo(case / "repo" / "app" / "pipe")
    done = subprocess.run(
        _eval_argv(case), capture_output=True, text=True, env=_strip_secrets(), timeout=120
    )
    assert done.returncode == 2
    assert "not a regular file" in done.stderr
