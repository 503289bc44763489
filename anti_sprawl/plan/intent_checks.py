"""Checks that a plan can do what it is asked and run where it is meant to (issue 23).

A small model's plan can be valid and still unable to meet its requirement: the requirement
says ``test_calc.py`` and no node may write it. Two more slips that validation used to let
through: a ``base`` that names no commit (the plan's cost and first prompts were then
measured at ``HEAD`` without a word), and a ``setup_command`` that needs the network when
the run will not give it any (it fails in every node's worktree, after the model was paid).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path

from ..fs.scopes import Scope, entry_problem, normalize_entry
from ..git.cmd import run_git
from .model import Plan, TaskNode
from .report import Problem, problem

__all__ = [
    "base_problem",
    "goal_files",
    "named_paths",
    "network_setup_warning",
    "requirement_path_warnings",
    "written_paths",
]

# A path the requirement names: has a slash or a file extension, like calc.py or src/app/.
_PATH = re.compile(r"(?<![\w./@:-])((?:[\w.-]+/)*[\w-]+\.[A-Za-z][\w]{0,7})(?![\w/(-])")
# Words that start a setup command which downloads: installs that are not told --offline.
_NETWORK = (
    ("pip", "install"),
    ("pip3", "install"),
    ("uv", "sync"),
    ("uv", "pip"),
    ("poetry", "install"),
    ("npm", "install"),
    ("npm", "ci"),
    ("npm", "i"),
    ("yarn",),
    ("pnpm", "install"),
    ("cargo", "fetch"),
    ("cargo", "build"),
    ("go", "mod"),
    ("bundle", "install"),
    ("apt-get",),
    ("curl",),
    ("wget",),
    ("git", "clone"),
)
_OFFLINE = ("--offline", "--no-index", "--frozen-offline", "--prefer-offline")


def named_paths(text: str) -> list[str]:
    """The file paths ``text`` names (``calc.py``, ``src/app/views.py``), once each, in order,
    in the form a diff names them (``./calc.py`` as ``calc.py``)."""
    found = (
        normalize_entry(path)
        for path in _PATH.findall(text)
        if path.lower() not in ("e.g", "i.e") and not path.startswith(("http", "www."))
    )
    return list(dict.fromkeys(found))


def goal_files(task: TaskNode) -> list[str]:
    """The files in ``task``'s write scope its goal names by path; none for a task that may
    change nothing. The worker's finish refuses once to leave one unchanged (agent/worker.py
    ``goal_files``), and the PR names those a landed node left unchanged (views/pr_body.py)."""
    return written_paths(task.goal, task) if task.expect_changes else []


def written_paths(text: str, task: TaskNode) -> list[str]:
    """The files ``text`` names by path that ``task``'s write scope holds (its goal's, above;
    an upstream summary's, run/result.py)."""
    scope = Scope(e for e in task.write_scope if entry_problem(e) is None)
    return [p for p in named_paths(text) if scope.matches(p)]


def requirement_path_warnings(plan: Plan) -> Iterator[Problem]:
    """One warning per file the requirement names that no node may write."""
    # entries with problems are reported by validate itself; they admit nothing here
    scopes = [Scope(e for e in t.write_scope if entry_problem(e) is None) for t in plan.tasks]
    for path in named_paths(plan.requirement):
        if not any(scope.matches(path) for scope in scopes):
            yield problem(
                "requirement_path_unwritten",
                f"the requirement names {path}, which is in no task's write_scope: no task "
                "can change it (add it to the write_scope of the task that does that part)",
                paths=[path],
            )


def base_problem(plan: Plan, repo: Path) -> Problem | None:
    """An error when the plan's ``base`` names no commit of ``repo``."""
    if plan.base is None:
        return None
    probe = run_git(
        ["rev-parse", "--verify", "--quiet", f"{plan.base}^{{commit}}"], repo, check=False
    )
    if probe.returncode == 0:
        return None
    return problem(
        "base_unresolved",
        f"the plan's base {plan.base!r} is not a commit of this repository (set base to an "
        "existing commit or branch, or remove it to start from HEAD)",
    )


def network_setup_warning(plan: Plan, allow_network: bool) -> Problem | None:
    """A warning when ``setup_command`` looks like it downloads and the run gives it no
    network (``--allow-setup-network``)."""
    command = plan.setup_command
    if allow_network or not command:
        return None
    try:
        argv = shlex.split(command) if isinstance(command, str) else list(command)
    except ValueError:
        return None
    words = [Path(argv[0]).name, *argv[1:]] if argv else []
    if any(flag in words for flag in _OFFLINE):
        return None
    for start in _NETWORK:
        if tuple(words[: len(start)]) == start:
            return problem(
                "setup_needs_network",
                f"setup_command {' '.join(argv)!r} looks like it needs the network, which it "
                "gets only with --allow-setup-network (make it work offline, e.g. npm ci "
                "--offline, or pass the flag)",
            )
    return None
