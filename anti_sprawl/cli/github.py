"""``anti-sprawl github ...``: the commands the GitHub Action (action.yml) runs.

``github event`` is the action's step: it reads ``$GITHUB_EVENT_PATH`` and plans, approves or
cancels (cli/github_flow.py). ``github summary RUN`` prints a run's ``::error`` annotations and
appends its verdict to ``$GITHUB_STEP_SUMMARY`` (stdout when unset), for workflows that call
``execute`` themselves. Parsing only here; imports are deferred so ``--help`` stays fast.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from .options import BaseUrlOpt, ModelOpt, ProviderOpt, RepoReq, ScriptOpt, repo_here
from .output import handle_errors

__all__ = ["app"]

app = typer.Typer(
    name="github",
    help="The GitHub Action's steps: plan, approve and cancel from issue comments; summaries.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


def _env_path(name: str) -> Path | None:
    value = os.environ.get(name)
    return Path(value) if value else None


@app.command("event")
@handle_errors
def event(
    repo: RepoReq = None,
    event_name: Annotated[
        str | None,
        typer.Option("--event-name", help="The event's name (default $GITHUB_EVENT_NAME)."),
    ] = None,
    event_path: Annotated[
        Path | None,
        typer.Option("--event-path", help="The event's JSON (default $GITHUB_EVENT_PATH)."),
    ] = None,
    repository: Annotated[
        str | None,
        typer.Option("--repository", help="OWNER/NAME (default $GITHUB_REPOSITORY)."),
    ] = None,
    work_dir: Annotated[
        Path | None,
        typer.Option("--work-dir", help="Plan, comment and report files (default $RUNNER_TEMP)."),
    ] = None,
    provider: ProviderOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    script: ScriptOpt = None,
    max_usd: Annotated[
        float | None, typer.Option("--max-usd", min=0.0, help="The run's cap in US dollars.")
    ] = None,
    base_branch: Annotated[
        str | None,
        typer.Option("--base-branch", help="Branch the run starts from and the PR targets."),
    ] = None,
    branch_prefix: Annotated[
        str, typer.Option("--branch-prefix", help="The run branch is PREFIX<issue number>.")
    ] = "anti-sprawl/issue-",
    trigger_phrase: Annotated[
        str, typer.Option("--trigger-phrase", help="The comment command's first word.")
    ] = "/anti-sprawl",
    label_trigger: Annotated[
        str, typer.Option("--label-trigger", help="The label that plans an issue.")
    ] = "anti-sprawl",
    bot_login: Annotated[
        str,
        typer.Option("--bot-login", help="Who writes the sticky comment (the token's login)."),
    ] = "github-actions[bot]",
) -> None:
    """Plan, approve or cancel, as the GitHub event asks (the action's one step)."""
    from ..errors import UsageError
    from .github_flow import ActionInputs, run_event

    name = event_name or os.environ.get("GITHUB_EVENT_NAME")
    path = event_path or _env_path("GITHUB_EVENT_PATH")
    if not name or path is None:
        raise UsageError("no event: pass --event-name and --event-path (or run in GitHub Actions)")
    inputs = ActionInputs(
        repo=repo_here(repo).resolve(),
        work_dir=(work_dir or Path(os.environ.get("RUNNER_TEMP") or ".") / "anti-sprawl").resolve(),
        repository=repository or os.environ.get("GITHUB_REPOSITORY", ""),
        provider=provider,
        model=model,
        base_url=base_url,
        script=script.resolve() if script else None,
        max_usd=max_usd,
        base_branch=base_branch,
        branch_prefix=branch_prefix,
        trigger_phrase=trigger_phrase,
        label_trigger=label_trigger,
        bot_login=bot_login,
    )
    outputs = run_event(name, path, inputs, dict(os.environ))
    if outputs.get("status", "succeeded") != "succeeded":
        raise typer.Exit(1)


@app.command("summary")
@handle_errors
def summary(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID")],
    repo: RepoReq = None,
    pr_url: Annotated[str | None, typer.Option("--pr-url", help="The run's pull request.")] = None,
) -> None:
    """Print a run's ::error annotations; its verdict goes to $GITHUB_STEP_SUMMARY."""
    from ..run.journal import Journal
    from ..run.preflight import check_repo
    from .github_flow import report

    root = check_repo(repo_here(repo))
    report(Journal.load(root, run_id).state, pr_url or "", dict(os.environ))
