"""The checks of a directory a command works in: its path is UTF-8, and git's reason when it
refuses the directory. ``run/preflight.py`` checks a run's repository with them (and
re-exports them); ``validate --repo`` and ``inspect`` check their directory with
``check_directory`` alone, which is why they live apart from the preflight's sandbox probes:
importing those cost ``validate --repo`` 0.02 s of start-up it never used (issue 29, item 3).
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import UsageError
from ..git.cmd import run_git

__all__ = ["check_directory", "check_utf8_path", "refusal"]


def check_directory(repo: Path) -> None:
    """A directory a plan is checked against (``validate --repo``, ``inspect``): it need not
    be a repository, but a UTF-8 path, and one git refuses (another user's) is named so."""
    check_utf8_path(repo)
    probe = run_git(["rev-parse", "--show-toplevel"], repo, check=False)
    if probe.returncode != 0 and b"not a git repository" not in probe.stderr:
        raise UsageError(refusal(repo, probe.stderr))


def check_utf8_path(repo: Path) -> None:
    """UsageError when the repository's path is not UTF-8: the journal, the manifests and the
    PR body are UTF-8 text that names it."""
    shown = os.fsencode(repo).decode("utf-8", "backslashreplace")
    if shown != str(repo):
        raise UsageError(
            f"the repository path {shown} is not valid UTF-8, and anti-sprawl records it in "
            "UTF-8 files: rename the directory (or its parent), or reach it through a symlink"
        )


def refusal(repo: Path, stderr: bytes) -> str:
    """Why git will not work in ``repo``, in one line: git's own reason (dubious ownership
    and its ``safe.directory`` fix, say), or "not a git repository"."""
    text = stderr.decode("utf-8", "replace")
    if "not a git repository" in text or not text.strip():
        return (
            f"not a git repository: {repo} (anti-sprawl works on a git repository's root: "
            "'git init' and commit first)"
        )
    lines = [ln.strip().removeprefix("fatal:").strip() for ln in text.splitlines()]
    said = ""
    for line in filter(None, lines):  # "...at '/x'; To add an exception ..., call: git config"
        said += ("" if not said else " " if said.endswith(":") else "; ") + line
    return f"git refuses {repo}: {said}"
