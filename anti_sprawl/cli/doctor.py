"""``anti-sprawl doctor``: what would stop a run here, one line each, before anything is spent.

git and its version, the identity commits get, the sandbox layer (and why not), model keys
(present or not, never printed), the provider reachable (a models list: no tokens), the
repository, the plan's test commands at the start commit (run/baseline.py) and disk space.
Each line starts ``ok``, ``note`` (worth knowing) or ``problem`` (a run would stop); the exit
code is 1 when there is a problem, 0 otherwise.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from .options import BaseUrlOpt, ModelOpt, ProviderOpt, ScriptOpt
from .output import handle_errors, stdout

__all__ = ["InitScope", "doctor", "init"]

Level = Literal["ok", "note", "problem"]
Check = tuple[Level, str, str]
MIN_FREE_BYTES = 1 << 30  # worktrees, logs and transcripts of a run
_REACH_TIMEOUT = 10.0
_KEYS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")
_BASELINE_LEVEL: dict[str, Level] = {"passes": "ok", "fails": "note", "cannot_start": "problem"}


def _git() -> Check:
    git = shutil.which("git")
    if git is None:
        return "problem", "git", "not found on PATH: install git"
    done = subprocess.run([git, "--version"], capture_output=True, text=True, check=False)
    return "ok", "git", f"{done.stdout.strip()} ({git})"


def _identity(repo: Path | None) -> Check:
    from ..git.cmd import DEFAULT_IDENTITY, user_identity

    name, email = user_identity(repo or Path.cwd())
    if (name, email) == DEFAULT_IDENTITY:
        return "note", "identity", "no git user.name/user.email: commits are authored anti-sprawl"
    return "ok", "identity", f"commits are authored {name} <{email}>"


def _sandbox() -> Check:
    from ..sandbox.sandbox import probe_sandbox, unavailable_message
    from .options import SandboxChoice, sandbox_policy

    info = probe_sandbox(sandbox_policy(SandboxChoice.bwrap, None, None, False))
    if info.layer is None:
        return "problem", "sandbox", unavailable_message(info)
    return "ok", "sandbox", info.detail


def _keys() -> Check:
    present = [k for k in _KEYS if os.environ.get(k)]
    if not present:
        return "note", "keys", "neither ANTHROPIC_API_KEY nor OPENAI_API_KEY is set"
    return "ok", "keys", f"{', '.join(present)} set (values never printed)"


def _reach(provider: Any, base_url: str | None) -> Check:
    """A models list (no tokens spent): the server answers, and takes the key."""
    if provider.name == "scripted":
        return "ok", "provider", "scripted (offline): nothing to reach"
    if provider.name == "anthropic":
        url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or "https://api.anthropic.com"
        key = os.environ.get("ANTHROPIC_API_KEY", "")
        headers = {"x-api-key": key, "anthropic-version": "2023-06-01"}
        models = f"{url.rstrip('/')}/v1/models"
    else:
        url = base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
        key = os.environ.get("OPENAI_API_KEY", "")
        headers = {"authorization": f"Bearer {key}"} if key else {}
        models = f"{url.rstrip('/')}/models"
    where = f"{provider.name} at {url}"
    import urllib.error  # here, not at the top: --help never needs http (tests/test_cli_startup.py)
    import urllib.request

    try:
        with urllib.request.urlopen(
            urllib.request.Request(models, headers=headers), timeout=_REACH_TIMEOUT
        ) as answer:
            status = answer.status
    except urllib.error.HTTPError as exc:
        status = exc.code
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return "problem", "provider", f"{where} is not reachable: {reason}"
    if status in (401, 403):
        return "problem", "provider", f"{where} refuses the key (HTTP {status})"
    return "ok", "provider", f"{where} answers (HTTP {status}); model {provider.model}"


def _provider(
    provider: str | None, model: str | None, base_url: str | None, script: Path | None
) -> Check:
    from ..errors import UsageError
    from .options import build_provider

    try:
        chosen = build_provider(provider, model, base_url, script)
    except UsageError as exc:
        return "problem", "provider", str(exc)
    return _reach(chosen, base_url)


def _repository(repo: Path) -> Check:
    from ..errors import UsageError
    from ..run.preflight import check_repo

    try:
        top = check_repo(repo)
    except UsageError as exc:
        return "problem", "repository", str(exc)
    return "ok", "repository", str(top)


def _tests(repo: Path, plan_file: Path) -> list[Check]:
    from ..errors import AntiSprawlError
    from ..redact import Redactor, env_secrets
    from ..run.baseline import check_baselines, describe_commands
    from ..run.preflight import resolve_base
    from ..run.settings import RunSettings
    from .environment import user_settings_env
    from .options import SandboxChoice, plan_for, sandbox_policy

    try:
        plan = plan_for(plan_file, repo)
        policy = sandbox_policy(SandboxChoice.bwrap, None, None, False)
        settings = RunSettings(sandbox=policy, command_env=user_settings_env(policy))
        out: list[Check] = [
            ("ok", "tests", line)
            for line in describe_commands(plan, repo.resolve(), settings.command_env or {})
        ]
        redact = Redactor(env_secrets(os.environ))  # test output may echo the environment
        start = resolve_base(repo, "HEAD")
        for b in check_baselines(plan, repo.resolve(), start, settings, redact):
            out.append((_BASELINE_LEVEL[b.status], "tests", b.line(plan.known_failures)))
    except AntiSprawlError as exc:
        return [("problem", "tests", str(exc).splitlines()[0])]
    return out


def _config(repo: Path | None) -> list[Check]:
    from .config import config_lines, project_root

    root = project_root(["--repo", str(repo)] if repo else [], Path.cwd())
    return [("ok", "config", line) for line in config_lines(os.environ, root)]


def _disk(where: Path) -> Check:
    free = shutil.disk_usage(where).free
    text = f"{free / (1 << 30):.1f} GiB free at {where}"
    return ("ok" if free >= MIN_FREE_BYTES else "problem"), "disk", text


@handle_errors
def doctor(
    repo: Annotated[
        Path | None, typer.Option("--repo", help="The repository you will run on.")
    ] = None,
    plan_file: Annotated[
        Path | None,
        typer.Option("--plan", help="A plan whose test commands to check at HEAD (needs --repo)."),
    ] = None,
    provider: ProviderOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    script: ScriptOpt = None,
) -> None:
    """Check what a run needs here, one line each: git, identity, sandbox, keys, config (each
    value and its file), provider, repository, the plan's test commands, disk; exit 1 when
    something would stop a run."""
    checks: list[Callable[[], Check | list[Check]]] = [
        _git,
        lambda: _identity(repo),
        _sandbox,
        _keys,
        lambda: _config(repo),
        lambda: _provider(provider, model, base_url, script),
    ]
    if repo is not None:
        checks.append(lambda: _repository(repo))
        if plan_file is not None:
            checks.append(lambda: _tests(repo, plan_file))
    checks.append(lambda: _disk(repo if repo is not None and repo.is_dir() else Path.cwd()))
    console = stdout()
    problems = 0
    for check in checks:
        found = check()
        for status, what, text in found if isinstance(found, list) else [found]:
            problems += status == "problem"
            console.print(f"{status:<8} {what:<11} {text}", markup=False, soft_wrap=True)
    if problems:
        raise typer.Exit(1)


class InitScope(StrEnum):
    project = "project"
    pyproject = "pyproject"
    user = "user"


@handle_errors
def init(
    repo: Annotated[
        Path, typer.Option("--repo", help="The repository the project config is for.")
    ] = Path(),
    scope: Annotated[
        InitScope,
        typer.Option(
            "--scope",
            help="project: .anti-sprawl.toml at the repository root; pyproject: a "
            "[tool.anti-sprawl] table in its pyproject.toml; user: "
            "$XDG_CONFIG_HOME/anti-sprawl/config.toml for every repository.",
        ),
    ] = InitScope.project,
) -> None:
    """Write a commented config file (provider, model, base URL, timeout, test command, jobs,
    caps): flags still override it; 'doctor' shows where each value came from."""
    from .config import write_config

    root = repo
    if scope is not InitScope.user:
        from ..run.preflight import check_repo

        root = check_repo(repo, need_commit=False)
    target = write_config(root, scope=scope.value, environ=os.environ)
    stdout().print(f"wrote {target}: uncomment what you want to set", markup=False)
