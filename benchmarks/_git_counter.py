"""A counting ``git``: how many git processes a run starts, and which subcommands.

The orchestrator finds git once, on the ``PATH`` it started with (anti_sprawl/host_tools.py),
so a small script named ``git`` placed first there is the git every call of a run uses: it
appends its argv to a log and execs the real one. ``benchmarks/per_node.py`` and
``tests/test_git_processes.py`` both count with it (the test imports it as
``benchmarks._git_counter``, the benchmark as ``_git_counter``, like ``_harness``); not a
benchmark itself (``make bench`` skips ``_*.py``).
"""

from __future__ import annotations

import collections
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

LOG_VAR = "ANTI_SPRAWL_COUNTED_GIT_LOG"  # not GIT_*: the orchestrator drops those (git/cmd.py)
_WRAPPER = """#!/bin/sh
printf '%s\\n' "$*" >> "${ANTI_SPRAWL_COUNTED_GIT_LOG}"
exec REAL_GIT "$@"
"""


def counting_env(bindir: Path, log: Path, env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with a counting ``git`` (written into ``bindir``) first on ``PATH``, logging
    each call's argv to ``log``."""
    real = shutil.which("git")
    assert real is not None, "git is not on PATH"
    bindir.mkdir(parents=True, exist_ok=True)
    script = bindir / "git"
    script.write_text(_WRAPPER.replace("REAL_GIT", real))
    script.chmod(0o755)
    return {**env, "PATH": f"{bindir}{os.pathsep}{env['PATH']}", LOG_VAR: str(log)}


def subcommand(line: str) -> str:
    """``worktree add`` from ``-c k=v ... --git-dir=X --work-tree=Y worktree add ...``."""
    words = line.split(" ")
    i = 0
    while i < len(words) and words[i].startswith("-"):
        i += 2 if words[i] in ("-c", "-C") else 1
    rest = words[i : i + 2]
    return " ".join(rest) if rest[:1] in (["worktree"], ["diff"]) else " ".join(rest[:1])


def counted_calls(log: Path) -> collections.Counter[str]:
    """The subcommands the counting ``git`` logged to ``log``, with how often each ran."""
    return collections.Counter(subcommand(line) for line in log.read_text().splitlines())
