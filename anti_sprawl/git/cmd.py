"""Running git safely: argv lists, no hooks, no repo-configured code, no prompts.

Every call goes through :func:`run_git`, which pins the options that stop a repository
(or a worker that wrote into it) from running code in the orchestrator (docs/security.md, P7):
hooks go to ``/dev/null``, fsmonitor and signing are off, pathspecs are literal, and
``GIT_*`` variables inherited from a calling hook cannot redirect us. Diff callers add
``--no-ext-diff --no-textconv`` so repo attributes cannot name a program to run. git itself is
the one on the start-up ``PATH``, by absolute path (host_tools.py), whatever the environment
says later. A command that tripped over another process's half-made worktree admin dir is run
again, briefly (admin.py), before its error counts.
"""

from __future__ import annotations

import functools
import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..errors import RunError
from ..host_tools import STARTUP_PATH, host_tool
from .admin import RETRY_DELAYS, is_transient

__all__ = [
    "DEFAULT_IDENTITY",
    "GitError",
    "common_dir",
    "common_dir_once",
    "git_dir",
    "git_env",
    "git_program",
    "run_git",
    "user_identity",
]

DEFAULT_IDENTITY = ("anti-sprawl", "anti-sprawl@localhost")

_SAFE_CONFIG = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.untrackedCache=false",
    "commit.gpgsign=false",
    "tag.gpgsign=false",
    "core.pager=cat",
    "protocol.ext.allow=never",
    "advice.updateSparsePath=false",
    "advice.detachedHead=false",
    # No automatic gc or maintenance from our commits: a background `gc --auto` (due once a
    # long run has written ~6,700 loose objects) locks files in the worktree admin dirs the run
    # is deleting, and the deletion fails (issue 22: 1 node of 3,000 failed `storage`, "Directory
    # not empty: .git/worktrees/<node>").
    "gc.auto=0",
    "maintenance.auto=false",
)


class GitError(RunError):
    """A git command failed; carries the argv tail and stderr for the report."""

    def __init__(self, args: Sequence[str], returncode: int, stderr: str):
        tail = stderr.strip().splitlines()[-3:]
        super().__init__(f"git {' '.join(args[:3])} failed ({returncode}): {' / '.join(tail)}")
        self.args_ = tuple(args)
        self.returncode = returncode
        self.stderr = stderr


def git_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for git: inherited minus ``GIT_*``, plus non-interactive settings."""
    src = os.environ if base is None else base
    env = {k: v for k, v in src.items() if not k.startswith("GIT_")}
    env.update(
        GIT_TERMINAL_PROMPT="0",
        GIT_LITERAL_PATHSPECS="1",
        GIT_PAGER="cat",
        GIT_EDITOR="true",
        LC_ALL="C",
        LANGUAGE="C",
    )
    return env


def git_program() -> str:
    """The absolute path of the host's git, found once on the start-up ``PATH``."""
    found = host_tool("git")
    if found is None:
        raise RunError(f"git not found on PATH ({STARTUP_PATH})")
    return found


def run_git(
    args: Sequence[str],
    cwd: Path,
    *,
    config: Sequence[str] = (),
    identity: tuple[str, str] | None = DEFAULT_IDENTITY,
    input_bytes: bytes | None = None,
    check: bool = True,
    author: tuple[str, str, str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run ``git <args>`` in ``cwd`` with the safe options; raise GitError when ``check`` fails.

    ``identity`` is the committer (and default author); None leaves git's own configuration.
    ``author`` (name, email, date or "") sets the author of a commit this call creates.
    """
    argv = [git_program()]
    names = [f"user.name={identity[0]}", f"user.email={identity[1]}"] if identity else []
    for item in (*_SAFE_CONFIG, *names, *config):
        argv += ["-c", item]
    argv += list(args)
    env = git_env() | _author_env(author)
    for delay in (*RETRY_DELAYS, None):
        try:
            proc = subprocess.run(
                argv,
                cwd=cwd,
                env=env,
                input=input_bytes,
                stdin=None if input_bytes is not None else subprocess.DEVNULL,
                capture_output=True,
                check=False,
            )
        except OSError as exc:
            raise RunError(f"cannot run git in {cwd}: {exc}") from exc
        # git dies on such an error while reading, before it changed anything: safe to rerun.
        if proc.returncode == 0 or delay is None or not is_transient(_text(proc.stderr)):
            break
        time.sleep(delay)
    if check and proc.returncode != 0:
        raise GitError(args, proc.returncode, proc.stderr.decode("utf-8", "replace"))
    return proc


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def _author_env(author: tuple[str, str, str] | None) -> dict[str, str]:
    if author is None:
        return {}
    env = {"GIT_AUTHOR_NAME": author[0], "GIT_AUTHOR_EMAIL": author[1]}
    if author[2]:
        env["GIT_AUTHOR_DATE"] = author[2]
    return env


def user_identity(repo: Path) -> tuple[str, str]:
    """The user's ``user.name``/``user.email`` as git sees them in ``repo`` (repo, global and
    system configuration); ``DEFAULT_IDENTITY``'s value for whichever is unset."""
    found = []
    for key, fallback in zip(("user.name", "user.email"), DEFAULT_IDENTITY, strict=True):
        proc = run_git(["config", "--get", key], repo, identity=None, check=False)
        value = proc.stdout.decode("utf-8", "replace").strip()
        found.append(value if proc.returncode == 0 and value else fallback)
    return found[0], found[1]


def _rev_parse_path(repo: Path, flag: str) -> Path:
    out = run_git(["rev-parse", flag], repo).stdout.decode("utf-8", "surrogateescape").strip()
    path = Path(out)
    return path if path.is_absolute() else (repo / path).resolve()


def git_dir(repo: Path) -> Path:
    """The absolute git directory of ``repo`` (a worktree's own admin dir for a worktree)."""
    return _rev_parse_path(repo, "--absolute-git-dir")


def common_dir(repo: Path) -> Path:
    """The absolute shared git directory (``<main>/.git`` even when ``repo`` is a worktree)."""
    return _rev_parse_path(repo, "--git-common-dir")


@functools.cache
def common_dir_once(repo: Path) -> Path:
    """``common_dir(repo)`` asked of git once per process: a repository's shared git
    directory does not move while it runs (worktree.py and branch.py read files below it)."""
    return common_dir(repo)
