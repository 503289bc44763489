"""Test commands run the user's environment (sandbox/user_env.py): their PATH, not our venv;
caches in a private /tmp; the project's venv offered, not guessed (issue 24, item 1)."""

from __future__ import annotations

import os
import py_compile
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from anti_sprawl.cli.app import app
from anti_sprawl.sandbox.policy import SandboxPolicy
from anti_sprawl.sandbox.sandbox import run_command
from anti_sprawl.sandbox.user_env import user_command_env

from . import e2e_fixture as fx

runner = CliRunner()
SYSTEM_PATH = "/usr/bin:/bin"
PREFIX = "import sys; print('prefix', sys.prefix)"


def _read_only_work(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    (work / "m.py").write_text("def f(x: int) -> int:\n    return x + 1\n")
    return work


def test_python_is_the_one_on_the_users_path_not_anti_sprawls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not Path("/usr/bin/python3").exists():
        pytest.skip("needs a system python3")
    work = _read_only_work(tmp_path)
    monkeypatch.setenv("PATH", SYSTEM_PATH)
    env = user_command_env(os.environ)
    res = run_command(["python3", "-c", PREFIX], work, timeout=60, policy=SandboxPolicy(), env=env)
    assert res.exit_code == 0, res.output
    assert f"prefix {sys.prefix}\n" not in res.output
    assert "prefix /usr" in res.output
    # The user who puts this venv first on PATH gets it: their choice, not ours.
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{SYSTEM_PATH}")
    env = user_command_env(os.environ)
    res = run_command(["python3", "-c", PREFIX], work, timeout=60, policy=SandboxPolicy(), env=env)
    assert f"prefix {sys.prefix}" in res.output


def test_tools_that_write_caches_get_a_private_writable_cache_and_home(tmp_path: Path) -> None:
    work = _read_only_work(tmp_path)
    script = (
        "import os, pathlib\n"
        "for name in ('XDG_CACHE_HOME', 'MYPY_CACHE_DIR', 'RUFF_CACHE_DIR', "
        "'HYPOTHESIS_STORAGE_DIRECTORY', 'HOME'):\n"
        "    d = pathlib.Path(os.environ[name]); d.mkdir(parents=True, exist_ok=True)\n"
        "    (d / 'cache').write_text('x'); print('wrote', name, d)\n"
        "try:\n    open('here', 'w')\nexcept OSError as e:\n    print('worktree', e.errno)\n"
    )
    res = run_command([sys.executable, "-c", script], work, timeout=60, policy=SandboxPolicy())
    assert res.exit_code == 0, res.output
    assert res.output.count("wrote ") == 5
    assert "wrote MYPY_CACHE_DIR /tmp/" in res.output
    assert "worktree 30" in res.output  # EROFS: the worktree stays read-only
    # mypy itself, which failed with an INTERNAL ERROR on its unwritable .mypy_cache
    mypy = Path(sys.executable).parent / "mypy"
    res = run_command([str(mypy), "m.py"], work, timeout=300, policy=SandboxPolicy())
    assert res.exit_code == 0, res.output
    assert "Success" in res.output
    assert "INTERNAL ERROR" not in res.output
    assert sorted(p.name for p in work.iterdir()) == ["m.py"]


def test_hypothesis_keeps_its_database_in_the_private_cache(tmp_path: Path) -> None:
    """attrs 26.1.0's suite under ``-W error``: hypothesis warned that its database in the
    read-only worktree was unusable, and 29 tests that pass by hand failed."""
    work = _read_only_work(tmp_path)
    (work / "test_h.py").write_text(
        "from hypothesis import given, strategies as st\n\n\n"
        "@given(st.integers())\ndef test_f(x):\n    assert x + 1 > x\n"
    )
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error"]
    res = run_command([*argv, "test_h.py"], work, timeout=300, policy=SandboxPolicy())
    assert res.exit_code == 0, res.output
    assert "1 passed" in res.output
    assert sorted(p.name for p in work.iterdir()) == ["m.py", "test_h.py"]


def test_dry_run_says_which_python_runs_and_offers_the_project_venv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = fx.make_repo(tmp_path)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(repo / ".venv")], check=True)
    monkeypatch.setenv("PATH", SYSTEM_PATH)
    plan_path, script_path = fx.write_inputs(
        tmp_path, fx.plan(test_command="python3 -m pytest -q"), fx.script()
    )
    args = ["execute", str(plan_path), "--repo", str(repo), "--script", str(script_path)]
    python3 = Path(subprocess.check_output(["sh", "-c", "command -v python3"], text=True).strip())
    # The system python3 has no pytest: the baseline says so, naming it and offering the venv
    refused = runner.invoke(app, [*args, "--dry-run"])
    assert refused.exit_code == 1
    err = " ".join(refused.stderr.split())
    assert f"cannot start: No module named 'pytest' (python3 -m pytest -> {python3}" in err
    assert "try test_command: '{checkout}/.venv/bin/python3 -m pytest -q'" in err
    result = runner.invoke(app, [*args, "--dry-run", "--no-baseline"])
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert f"test command 'python3 -m pytest -q' runs python3 -m pytest -> {python3}" in out
    assert "the checkout has a virtualenv .venv/" in out
    assert "test_command: '{checkout}/.venv/bin/python3 -m pytest -q'" in out
    assert fx.git(repo, "branch", "--list", "anti-sprawl/*") == ""  # nothing was run
    # The plan naming the venv: it says so, and offers nothing more.
    named = fx.plan(test_command="{checkout}/.venv/bin/python -m pytest -q")
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump(named))
    result = runner.invoke(app, [*args, "--dry-run", "--no-baseline"])
    out = " ".join(result.output.split())
    assert f"-> {repo.resolve()}/.venv/bin/python" in out
    assert "the checkout has a virtualenv" not in out


def test_python_reads_the_bytecode_an_install_left(tmp_path: Path) -> None:
    """Python in the sandbox uses the ``__pycache__`` it finds and writes none: with a
    ``PYTHONPYCACHEPREFIX`` in the fresh private /tmp it ignored them and compiled every module
    it imported on every run (click's tests/test_basic.py: 1.0 s a run, 0.48 s without).
    Shown by a module whose source changed after it was compiled, keeping its size and mtime:
    only a read of the bytecode prints the old text."""
    work = _read_only_work(tmp_path)
    module = work / "stale.py"
    module.write_text("print('from the bytecode')\n")
    py_compile.compile(str(module), doraise=True)
    stat = module.stat()
    module.write_text("print('from the sources!')\n")  # the same size
    os.utime(module, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    res = run_command(
        [sys.executable, "-c", "import stale"], work, timeout=60, policy=SandboxPolicy()
    )
    assert res.exit_code == 0, res.output
    assert "from the bytecode" in res.output
    cached = sorted(p.name for p in (work / "__pycache__").iterdir())
    assert cached == [f"stale.{sys.implementation.cache_tag}.pyc"]  # nothing written besides
