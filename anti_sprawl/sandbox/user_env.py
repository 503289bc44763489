"""The user's environment for test and setup commands, stated rather than guessed.

A test command runs the programs the user's ``PATH`` names, as it was when the command
(``execute``, ``validate``, ``doctor``) started: never anti-sprawl's own interpreter or
virtualenv unless the user's ``PATH`` puts it first or the command names it. (Before issue 24
the sandbox put this process's venv first, so ``python -m pytest`` silently ran anti-sprawl's
Python, which knows nothing of the user's project.) ``describe_program`` says which
executable a command will run, for ``--dry-run`` and the baseline check
(run/baseline.py); ``project_venvs`` finds a ``.venv``/``venv`` in the checkout so the user
can be told how to use it (``{checkout}/.venv/bin/python``, sandbox/command_template.py) —
it is offered, never switched to silently.

The worktree is read-only to test commands, so tools that keep a cache in the project
(mypy's ``.mypy_cache``, ruff's ``.ruff_cache``, hypothesis's database) are pointed at the
sandbox's private ``/tmp`` by ``cache_env``: a fresh, writable cache and home per command.
Python writes no bytecode there (``PYTHONDONTWRITEBYTECODE``, sandbox/sandbox.py) and reads
the ``__pycache__`` an install left: a ``PYTHONPYCACHEPREFIX`` in the fresh ``/tmp`` made it
ignore those and compile every module it imported on every run (``pytest --version`` 0.16 s
to 0.62 s; click's tests/test_basic.py 1.0 s to 0.48 s a run in the sandbox).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel

__all__ = [
    "CACHE_VARIABLES",
    "VENV_NAMES",
    "ProgramInfo",
    "cache_env",
    "describe_program",
    "project_venvs",
    "shim_target",
    "user_command_env",
    "venv_command",
    "venv_offer",
]

# Where each tool's cache goes, under the command's private home (``/tmp`` in bwrap).
CACHE_VARIABLES = {
    "XDG_CACHE_HOME": ".cache",
    "MYPY_CACHE_DIR": ".cache/mypy",
    "RUFF_CACHE_DIR": ".cache/ruff",
    # hypothesis keeps its example database in the working directory, read-only in the
    # sandbox: its warning failed suites run with -W error (attrs 26.1.0, issue 24's checks)
    "HYPOTHESIS_STORAGE_DIRECTORY": ".cache/hypothesis",
}
# Directory names a project virtualenv is found under, in the order they are offered.
VENV_NAMES = (".venv", "venv", ".env", "env")
_PASSED_THROUGH = ("PATH", "VIRTUAL_ENV")


def cache_env(home: str) -> dict[str, str]:
    """The cache variables of a command whose private home is ``home``."""
    return {name: f"{home}/{rel}" for name, rel in CACHE_VARIABLES.items()}


def user_command_env(environ: Mapping[str, str], allow: Sequence[str] = ()) -> dict[str, str]:
    """What of the user's environment a command's allow-list may draw on, taken once when
    the command starts: ``PATH``, ``VIRTUAL_ENV`` and the ``--sandbox-env`` names (the
    sandbox still refuses secret-looking ones, sandbox/sandbox.py ``sandbox_env``)."""
    names = (*_PASSED_THROUGH, *allow)
    return {name: environ[name] for name in names if name in environ}


class ProgramInfo(BaseModel):
    """Which executable a command runs, found the way the sandbox will find it."""

    program: str  # argv[0] as written (after {checkout} expansion)
    resolved: str | None  # the file it resolves to on PATH; None: not found
    module: str | None = None  # ``python -m MODULE``: the module it runs

    def describe(self) -> str:
        """``python -> /usr/bin/python3 (-m pytest)``, or that it is not on PATH."""
        if self.resolved is None:
            relative = "/" in self.program and not self.program.startswith("/")
            return f"{self.program}: not found {'in the worktree' if relative else 'on PATH'}"
        real = os.path.realpath(self.resolved)
        shown = self.resolved if real == self.resolved else f"{self.resolved} ({real})"
        module = f" -m {self.module}" if self.module else ""
        return f"{self.program}{module} -> {shown}"


def _module_of(argv: Sequence[str]) -> str | None:
    for i, arg in enumerate(argv[1:-1], start=1):
        if arg == "-m":
            return argv[i + 1]
        if not arg.startswith("-"):
            return None
    return None


def describe_program(argv: Sequence[str], env: Mapping[str, str], cwd: Path) -> ProgramInfo:
    """The executable ``argv`` starts, on ``env``'s ``PATH`` (``env VAR=x prog`` looks
    through ``env`` to ``prog``); relative paths with a ``/`` are against ``cwd``."""
    args = list(argv)
    if args and Path(args[0]).name == "env":
        rest = [a for a in args[1:] if "=" not in a and not a.startswith("-")]
        args = args[args.index(rest[0]) :] if rest else args
    program = args[0] if args else ""
    if "/" in program:
        path = Path(program) if program.startswith("/") else cwd / program
        found = str(path) if path.is_file() and os.access(path, os.X_OK) else None
    else:
        found = shutil.which(program, path=env.get("PATH", "")) if program else None
    return ProgramInfo(program=program, resolved=found, module=_module_of(args))


def project_venvs(checkout: Path) -> list[str]:
    """Virtualenvs at the top of the user's checkout (``.venv``, ``venv``...) with a Python."""
    return [
        name
        for name in VENV_NAMES
        if (checkout / name / "pyvenv.cfg").is_file() and (checkout / name / "bin/python").exists()
    ]


def venv_command(argv: Sequence[str], checkout: Path, env: Sequence[str] = ()) -> str | None:
    """The command run with the checkout's virtualenv (``env``: ``NAME=value`` words to set,
    e.g. ``PYTHONPATH=src``), when it does not already name one; None without a venv."""
    venvs = project_venvs(checkout)
    if not venvs or any(f"{{checkout}}/{name}" in arg for arg in argv for name in venvs):
        return None
    args = list(argv)
    assignments = list(env)
    if args and Path(args[0]).name == "env":
        args.pop(0)
        while args and "=" in args[0] and not args[0].startswith("-"):
            word = args.pop(0)
            assignments = [a for a in assignments if a.split("=")[0] != word.split("=")[0]]
            assignments.insert(0, word)
    program = Path(args[0]).name if args else "python"
    rest = args[1:] if args else ["-m", "pytest"]
    if not program.startswith("python") and not (checkout / venvs[0] / "bin" / program).exists():
        program, rest = "python", ["-m", "pytest"]
    lead = ["env", *assignments] if assignments else []
    return " ".join([*lead, f"{{checkout}}/{venvs[0]}/bin/{program}", *rest])


def venv_offer(argv: Sequence[str], checkout: Path, env: Sequence[str] = ()) -> str | None:
    """How to use the checkout's virtualenv, when the command does not already name one."""
    command = venv_command(argv, checkout, env)
    if command is None:
        return None
    return (
        f"the checkout has a virtualenv {project_venvs(checkout)[0]}/: to run the tests with "
        f"it, write test_command: '{command}' (anti-sprawl never switches to it on its own)"
    )


def shim_target(shim: Path, cwd: Path) -> str | None:
    """The interpreter a pyenv shim picks in ``cwd`` (``pyenv which``): shims are shell
    scripts that call pyenv, which the sandbox does not bind, so the command must name it."""
    pyenv = shim.parent.parent / "bin" / "pyenv"
    if not pyenv.is_file():
        return None
    try:
        done = subprocess.run(
            [str(pyenv), "which", shim.name], cwd=cwd, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = done.stdout.strip()
    return found if done.returncode == 0 and found.startswith("/") else None
