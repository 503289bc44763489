"""The commands the tool suggests (``resume``, ``inspect``, ``pr``), spelled so they run as printed.

Every hint names the run and the repository and quotes what needs quoting (``shlex``), and is
printed at the end of its line, unwrapped: copied whole, it runs (tests/test_hints.py runs each
hint the CLI prints).
"""

from __future__ import annotations

import shlex
from pathlib import Path

__all__ = ["command"]


def command(name: str, *args: str | Path, repo: Path | str | None = None) -> str:
    """``anti-sprawl NAME ARGS... [--repo REPO]``, quoted for a POSIX shell."""
    words = [name, *(str(a) for a in args)]
    if repo is not None:
        words += ["--repo", str(repo)]
    return "anti-sprawl " + shlex.join(words)
