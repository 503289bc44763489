"""The checks a run makes before it writes anything: the repository, the plan against it, the
base revision, the sandbox, prices for a dollar cap. Each failure is the user's to fix: a
``UsageError`` (one line, exit 2) and nothing started. ``execute``, ``resume`` and
``execute --dry-run`` share them (run/runner.py, cli/runs.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UsageError
from ..git.cmd import GitError, run_git
from ..plan.model import Plan
from ..plan.validate import validate
from ..sandbox.policy import SandboxPolicy
from ..sandbox.sandbox import SandboxInfo, probe_sandbox, umask_problem, unavailable_message
from .directory import check_directory, check_utf8_path, refusal

if TYPE_CHECKING:  # the run's machinery loads only when a run needs it (validate --repo: not)
    from .node import ExecuteOptions

__all__ = [
    "base_branch_of",
    "check_cost_cap",
    "check_directory",
    "check_plan",
    "check_repo",
    "check_utf8_path",
    "ready_sandbox",
    "resolve_base",
    "uncommitted_changes",
]


def _git_out(repo: Path, args: list[str]) -> str:
    return run_git(args, repo).stdout.decode("utf-8", "replace").strip()


def uncommitted_changes(repo: Path) -> int:
    """How many paths differ from HEAD in the user's checkout (not part of a run's base)."""
    out = run_git(["status", "--porcelain", "-z", "--untracked-files=all"], repo, check=False)
    return sum(1 for entry in out.stdout.split(b"\0") if entry[:2].strip())


def check_repo(repo: Path, *, need_commit: bool = True) -> Path:
    """The repository root for ``repo``; UsageError unless it is a git root (with a commit,
    unless ``need_commit`` is false: ``plan`` may plan a repository's first commit), at a path
    that is UTF-8 (the journal, the manifests and the PR body all name it)."""
    check_utf8_path(repo)
    if not repo.is_dir():
        raise UsageError(f"repository not found: {repo}")
    probe = run_git(["rev-parse", "--show-toplevel"], repo, check=False)
    if probe.returncode != 0:
        raise UsageError(refusal(repo, probe.stderr))
    top = Path(os.fsdecode(probe.stdout.strip())).resolve()
    check_utf8_path(top)  # a symlink's target is what git works in
    if top != repo.resolve():
        # Scopes are relative to the repository root; a subdirectory would shift every path.
        raise UsageError(f"{repo} is inside the repository {top}; pass the root with --repo {top}")
    if not need_commit:
        return top
    if run_git(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], top, check=False).returncode:
        raise UsageError(f"repository {top} has no commits yet; commit something first")
    return top


def resolve_base(repo: Path, ref: str) -> str:
    """The commit a run starts from (``--base``, default HEAD); UsageError if there is none."""
    try:
        return _git_out(repo, ["rev-parse", "--verify", f"{ref}^{{commit}}"])
    except GitError:
        raise UsageError(f"unknown base revision: {ref}") from None


def check_cost_cap(plan: Plan, opts: ExecuteOptions, max_cost: float | None) -> None:
    """A dollar cap needs a price for every model the plan's nodes use (UsageError if not)."""
    if max_cost is None:
        return
    models = [plan.model_for(t, opts.settings.model) or opts.provider.model for t in plan.tasks]
    missing = opts.settings.prices.unpriced(models)
    if missing:
        raise UsageError(
            f"--max-cost needs a price for every model, and {', '.join(missing)} has none: "
            "add it to a prices file (--prices FILE)"
        )


def check_plan(plan: Plan, repo: Path) -> None:
    """UsageError naming the first problem of ``plan`` against ``repo``."""
    report = validate(plan, repo)
    if not report.valid:
        first = report.errors[0].message
        raise UsageError(
            f"the plan is invalid against {repo}: {first} (run 'anti-sprawl validate')"
        )


def ready_sandbox(policy: SandboxPolicy) -> SandboxInfo:
    """The sandbox test commands will run in; UsageError when none works here, or when the
    umask would let the sandbox write files others can change."""
    sandbox = probe_sandbox(policy)
    if sandbox.layer is None:
        raise UsageError(unavailable_message(sandbox))
    if problem := umask_problem(sandbox):
        raise UsageError(problem)
    return sandbox


def base_branch_of(repo: Path, base_ref: str) -> str | None:
    """The branch a run starts from, when ``base_ref`` names one (``HEAD``: the checked-out
    branch; None when detached or a plain revision): where its pull request merges."""
    if base_ref == "HEAD":
        head = run_git(["symbolic-ref", "--quiet", "--short", "HEAD"], repo, check=False)
        return head.stdout.decode("utf-8", "replace").strip() or None
    is_branch = run_git(
        ["show-ref", "--verify", "--quiet", f"refs/heads/{base_ref}"], repo, check=False
    )
    return base_ref if is_branch.returncode == 0 else None
