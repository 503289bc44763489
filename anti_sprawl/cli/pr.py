"""``anti-sprawl pr``: push a run's branch, then open its pull request with ``gh`` or say how.

The PR body (``PR.md`` in the run dir) is rewritten from the journal. The branch is pushed by
ref name, ``git push <remote> refs/heads/B:refs/heads/B`` through ``git.cmd.run_git``
(hooks off): no checkout and no upstream setting, so the user's branch, index, working tree
and config stay as they were. ``gh`` is optional: without it (or without a login) the exact
command is printed for the user to run.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field
from rich.console import Console

from ..errors import RunError, UsageError
from ..fs.files import atomic_write_text
from ..git.cmd import run_git
from ..hints import command
from ..redact import Redactor, env_secrets
from ..run.journal import Journal, RepoLock, RunState
from ..views.html_report import write_report
from ..views.pr_body import pr_body, pr_title

__all__ = [
    "PrOptions",
    "PrOutcome",
    "base_branch_of",
    "gh_command",
    "pr_title",
    "publish",
    "push_branch",
    "render_outcome",
]

GH_TIMEOUT = 120.0
_RUN_BRANCH_PREFIX = "anti-sprawl/"


@dataclass
class PrOptions:
    """Settings for one ``pr`` call, resolved by the CLI (``env`` is the process environment)."""

    env: Mapping[str, str]
    remote: str = "origin"
    base_branch: str | None = None
    open: bool = False
    allow_partial: bool = False


class PrOutcome(BaseModel):
    """What ``pr`` did; the non-excluded fields are the ``--json`` document."""

    run_id: str
    branch: str
    remote: str
    pushed: bool
    pr_body: str
    report: str = Field(default="", description="The HTML run report written beside PR.md.")
    opened: bool
    command: list[str] = Field(description="The gh command that opened the PR, or opens it.")
    tip: str = Field(default="", exclude=True)
    base_branch: str | None = Field(default=None, exclude=True)
    gh_argv: list[str] = Field(default_factory=list, exclude=True)
    url: str | None = Field(default=None, exclude=True)
    gh_problem: str | None = Field(default=None, exclude=True)


def _git_text(repo: Path, args: list[str]) -> str:
    return run_git(args, repo).stdout.decode("utf-8", "surrogateescape").strip()


def _repo_root(repo: Path) -> Path:
    if not repo.is_dir():
        raise UsageError(f"repository not found: {repo}")
    probe = run_git(["rev-parse", "--show-toplevel"], repo, check=False)
    if probe.returncode != 0:
        raise UsageError(f"not a git repository: {repo}")
    return Path(probe.stdout.decode("utf-8", "surrogateescape").strip()).resolve()


def _check_remote(repo: Path, remote: str) -> None:
    remotes = _git_text(repo, ["remote"]).split()
    if remote in remotes:
        return
    known = ", ".join(remotes) if remotes else "none; add one with 'git remote add NAME URL'"
    raise UsageError(f"no remote {remote!r} in {repo} (remotes: {known}); pass --remote NAME")


def _check_status(repo: Path, state: RunState, allow_partial: bool) -> None:
    if state.status == "succeeded":
        return
    if not allow_partial:
        raise RunError(
            f"run {state.run_id} did not succeed (status: {state.status}); pass "
            "--allow-partial to push what landed, or finish it first: "
            + command("resume", state.run_id, repo=repo)
        )
    if state.status == "running":
        # Running in the journal means live or crashed: only push what a dead run left behind.
        lock = RepoLock(repo)
        lock.acquire(state.run_id)
        lock.release()


def base_branch_of(repo: Path, base: str, exclude: str) -> str | None:
    """The local branch the run's base commit came from, else the current branch, else None.

    Preference: a branch still pointing at ``base`` (the current one if several), the current
    branch if it contains ``base``, the only branch that contains it, the current branch.
    Run branches (``anti-sprawl/...``) and ``exclude`` never count.
    """
    current = run_git(["symbolic-ref", "--quiet", "--short", "HEAD"], repo, check=False)
    head = current.stdout.decode("utf-8", "surrogateescape").strip() or None
    fmt = "--format=%(refname:short) %(objectname)"
    listing = run_git(["for-each-ref", fmt, "--contains", base, "refs/heads/"], repo, check=False)
    tips: dict[str, str] = {}
    for line in listing.stdout.decode("utf-8", "surrogateescape").splitlines():
        name, _, sha = line.rpartition(" ")
        if name and name != exclude and not name.startswith(_RUN_BRANCH_PREFIX):
            tips[name] = sha
    at_base = [name for name, sha in tips.items() if sha == base]
    if head in at_base or (head in tips and len(at_base) != 1):
        return head
    if len(at_base) == 1:
        return at_base[0]
    if len(tips) == 1:
        return next(iter(tips))
    return head


def gh_command(
    branch: str, base_branch: str | None, title: str, body: Path, *, draft: bool = False
) -> list[str]:
    """``gh pr create`` argv; without a base branch gh uses the repository's default. A run
    that did not succeed opens as a draft."""
    argv = ["gh", "pr", "create", "--head", branch]
    if base_branch:
        argv += ["--base", base_branch]
    if draft:
        argv.append("--draft")
    return [*argv, "--title", title, "--body-file", str(body)]


def push_branch(repo: Path, remote: str, branch: str, env: Mapping[str, str]) -> None:
    """Push ``refs/heads/<branch>`` to the same name on ``remote``; RunError with git's lines."""
    config = []
    # run_git drops GIT_* variables; keep the user's own ssh choice for this one push.
    ssh = env.get("GIT_SSH_COMMAND") or env.get("GIT_SSH")
    if ssh:
        config.append(f"core.sshCommand={ssh}")
    refspec = f"refs/heads/{branch}:refs/heads/{branch}"
    proc = run_git(["push", remote, refspec], repo, config=config, check=False)
    if proc.returncode != 0:
        err = [ln.strip() for ln in proc.stderr.decode("utf-8", "replace").splitlines()]
        lines = [ln for ln in err if ln and not ln.startswith("hint:")]
        # git's verdicts ("! [rejected] ...", "fatal: ...") say more than its closing advice.
        verdicts = [ln for ln in lines if ln.startswith(("!", "fatal:", "error:"))]
        tail = " / ".join(verdicts[:3] or lines[-3:]) or f"exit {proc.returncode}"
        raise RunError(f"pushing {branch} to {remote} failed: {tail}")


def _gh_ready(env: Mapping[str, str], repo: Path) -> tuple[str | None, str | None]:
    """(gh path, None) when gh can open a PR here, else (None, why not)."""
    gh = shutil.which("gh", path=env.get("PATH", ""))
    if gh is None:
        return None, "gh (the GitHub CLI) is not installed"
    try:
        auth = subprocess.run(
            [gh, "auth", "status"],
            cwd=repo,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"gh auth status did not answer ({type(exc).__name__})"
    if auth.returncode != 0:
        return None, "gh is not logged in ('gh auth login')"
    return gh, None


def _run_gh(gh: str, argv: list[str], repo: Path, env: Mapping[str, str]) -> str | None:
    """Run ``gh pr create``; returns the PR URL gh printed."""
    try:
        proc = subprocess.run(
            [gh, *argv[1:]],
            cwd=repo,
            env={**env, "GH_PROMPT_DISABLED": "1"},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=GH_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RunError(f"the branch is pushed, but gh pr create failed: {exc}") from exc
    if proc.returncode != 0:
        err = [ln.strip() for ln in proc.stderr.decode("utf-8", "replace").splitlines()]
        tail = " / ".join([ln for ln in err if ln][-2:]) or f"exit {proc.returncode}"
        raise RunError(f"the branch is pushed, but gh pr create failed: {tail}")
    out = [ln.strip() for ln in proc.stdout.decode("utf-8", "replace").splitlines() if ln.strip()]
    return out[-1] if out else None


def _shown_path(path: Path, repo: Path) -> str:
    """``path`` as the PR body names it: relative to the repository (no home directory)."""
    try:
        return path.relative_to(repo).as_posix()
    except ValueError:
        return str(path)


def publish(repo: Path, run_id: str, opts: PrOptions) -> PrOutcome:
    """Rewrite PR.md, push the run branch to ``opts.remote`` and, with ``open``, open the PR."""
    repo = _repo_root(repo)
    journal = Journal.load(repo, run_id)
    state = journal.state
    _check_remote(repo, opts.remote)
    _check_status(repo, state, opts.allow_partial)
    tip = run_git(
        ["rev-parse", "--verify", "--quiet", f"refs/heads/{state.branch}^{{commit}}"],
        repo,
        check=False,
    )
    if tip.returncode != 0:
        raise UsageError(f"the run branch {state.branch!r} no longer exists in {repo}")
    body_path = journal.paths.pr_body
    # Everything pr writes or sends passes the redactor, as the commits did.
    redactor = Redactor(env_secrets(opts.env))
    report = write_report(state, journal.paths, repo, redactor, journal.paths.report)
    atomic_write_text(body_path, pr_body(state, redactor, _shown_path(report, repo)))
    push_branch(repo, opts.remote, state.branch, opts.env)
    base = opts.base_branch or state.base_branch or base_branch_of(repo, state.base, state.branch)
    title = redactor(pr_title(state.plan.requirement, state.plan_id))
    draft = state.status != "succeeded"
    argv = gh_command(state.branch, base, title, body_path, draft=draft)
    outcome = PrOutcome(
        run_id=run_id,
        branch=state.branch,
        remote=opts.remote,
        pushed=True,
        pr_body=str(body_path),
        report=str(report),
        opened=False,
        command=argv,
        tip=tip.stdout.decode().strip(),
        base_branch=base,
        gh_argv=argv,
    )
    if opts.open:
        gh, outcome.gh_problem = _gh_ready(opts.env, repo)
        if gh is not None:
            outcome.url = _run_gh(gh, argv, repo, opts.env)
            outcome.opened = True
    return outcome


def render_outcome(outcome: PrOutcome, console: Console) -> None:
    """Plain lines for people: what was pushed, where the body is, the PR or how to open it."""
    say = console.print
    say(f"pushed {outcome.branch} ({outcome.tip[:12]}) to {outcome.remote}", markup=False)
    say(f"PR body: {outcome.pr_body}", markup=False, soft_wrap=True)  # one piece to copy
    if outcome.report:
        say(f"run report: {outcome.report}", markup=False, soft_wrap=True)
    if outcome.opened:
        say(f"opened pull request: {outcome.url or '(gh printed no URL)'}", markup=False)
        return
    if outcome.gh_problem:
        say(f"not opening the pull request: {outcome.gh_problem}", markup=False)
    say("open the pull request with:", markup=False)
    say(f"  {shlex.join(outcome.gh_argv)}", markup=False, soft_wrap=True)
    into = outcome.base_branch or "the default branch"
    say(
        f"on other hosts (GitLab, Gitea, Bitbucket...): open a pull/merge request from "
        f"{outcome.branch} into {into} and paste the PR body.",
        markup=False,
    )
