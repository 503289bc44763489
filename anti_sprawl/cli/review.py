"""Commands that look at runs: ``status`` (runs and their nodes), ``inspect`` (what each model
call saw), ``pr`` (push a run's branch and open its pull request; the work is in cli/pr.py) and
``eval`` (the evaluation suite; anti_sprawl/eval/)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import UsageError
from .ci import JunitOpt, SarifOpt, write_ci_reports
from .options import (
    BaseUrlOpt,
    DaskSchedulerOpt,
    ExecutorChoice,
    ExecutorOpt,
    JsonOpt,
    MaxOutOpt,
    ModelOpt,
    ProviderOpt,
    RepoReq,
    RequestTimeoutOpt,
    UnsafeOpt,
    existing_dir,
    repo_here,
)
from .output import handle_errors, print_json, stdout

__all__ = ["cancel", "clean", "eval_cmd", "inspect", "pr_cmd", "status"]


@handle_errors
def status(
    run_id: Annotated[str | None, typer.Argument(metavar="RUN_ID")] = None,
    repo: RepoReq = None,
    plan: Annotated[
        bool,
        typer.Option(
            "--plan",
            help="Print the run's revised plan: its plan with the scopes it granted added, "
            "and what was added (needs RUN_ID).",
        ),
    ] = False,
    sarif: SarifOpt = None,
    junit: JunitOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List runs, or show one run's nodes."""
    from ..run.journal import Journal, list_runs
    from ..run.liveness import as_seen
    from ..run.preflight import check_repo
    from ..views.run import render_runs, render_verdict

    repo = check_repo(repo_here(repo))
    if run_id is None and (sarif or junit):
        raise UsageError(
            "--sarif and --junit need a RUN_ID (anti-sprawl status RUN_ID --sarif FILE)"
        )
    if run_id is None:
        if plan:
            raise UsageError("status --plan needs a RUN_ID")
        runs = [as_seen(repo, s) for s in list_runs(repo)]
        if as_json:
            print_json(
                [
                    {
                        "run_id": s.run_id,
                        "plan_id": s.plan_id,
                        "status": s.status,
                        "branch": s.branch,
                        "created_at": s.created_at,
                        "tokens": s.tokens.total,
                        "cost_usd": s.cost_usd,
                    }
                    for s in runs
                ]
            )
        else:
            render_runs(runs, stdout())
        return
    state = as_seen(repo, Journal.load(repo, run_id).state)
    write_ci_reports(state, sarif, junit)
    if plan:
        _revised_plan(state, as_json)
        return
    if as_json:
        sys.stdout.write(state.model_dump_json(indent=2) + "\n")
    else:
        render_verdict(state, stdout())


def _revised_plan(state: Any, as_json: bool) -> None:
    """``status RUN --plan``: the plan the run ended with (run/scope_grants.py)."""
    from ..plan.model import dump_plan
    from ..run.revised_plan import revised_header, revised_plan
    from ..views.scope_grants import scope_lines
    from ..views.terminal import inert

    grants = {t: r.scope_grants for t, r in state.tasks.items()}
    revised, added = revised_plan(state.plan, grants)
    if as_json:
        data = {"plan": revised.model_dump(mode="json", exclude_none=True), "added": added}
        print_json({**data, "requests": scope_lines(state)})
        return
    header = revised_header(state.run_id, added) if added else "The run granted no scope."
    for line in [*header.splitlines(), *(f"  {r}" for r in scope_lines(state))]:
        sys.stdout.write(f"# {inert(line)}\n")
    sys.stdout.write(dump_plan(revised))


@handle_errors
def inspect(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID")],
    repo: RepoReq = None,
    task: Annotated[str | None, typer.Option("--task", help="Only this task.")] = None,
    manifests: Annotated[
        bool,
        typer.Option(
            "--manifests",
            help="Show the context manifests instead: what each model call saw, from where, "
            "how many tokens.",
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Why a node failed: its failing attempt first (reason, test output, last tool results,
    failure note, log paths), for --task or every node that did not succeed."""
    from ..context.manifest import load_manifests, render_manifests
    from ..run.journal import Journal
    from ..views.failure import node_reports, render_reports
    from ..views.plain import MANY_CALLS, render_manifest_lines
    from ..views.run import verdict_words

    journal = Journal.load(existing_dir(repo_here(repo)) or Path(), run_id)
    state = journal.state
    if task is not None and task not in state.tasks:
        raise UsageError(f"run {run_id} has no task {task!r}")
    if manifests:
        found = load_manifests(journal.paths.manifests, task)
        if as_json:
            print_json([m.model_dump(mode="json") for m in found])
        elif len(found) > MANY_CALLS:  # a Rich table per call would take minutes (views/plain.py)
            render_manifest_lines(found, stdout())
        else:
            render_manifests(found, stdout())
        return
    reports = node_reports(state, journal.paths, task, verdict_words(state))
    if as_json:
        print_json([r.model_dump(mode="json") for r in reports])
    else:
        render_reports(reports, state, stdout())


@handle_errors
def cancel(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID")],
    repo: RepoReq = None,
) -> None:
    """Stop a running run from another terminal, as Ctrl-C in its own would (resume finishes it)."""
    from ..run.cancel import cancel_run
    from ..run.journal import Journal
    from ..run.preflight import check_repo

    root = check_repo(repo_here(repo))
    Journal.load(root, run_id)  # an unknown run is named as such
    pid = cancel_run(root, run_id)
    stdout().print(
        f"asked run {run_id} (process {pid}) to stop: no node starts, running ones wind down",
        markup=False,
        soft_wrap=True,
    )


@handle_errors
def clean(
    repo: RepoReq = None,
    older_than: Annotated[
        str,
        typer.Option(
            "--older-than",
            metavar="AGE",
            help="Only runs finished this long ago: 30m, 12h, 7d, 2w.",
        ),
    ] = "7d",
    runs: Annotated[
        bool, typer.Option("--runs", help="Only the run data (.anti-sprawl/runs/).")
    ] = False,
    branches: Annotated[
        bool, typer.Option("--branches", help="Only the anti-sprawl/* branches of finished runs.")
    ] = False,
    everything: Annotated[
        bool,
        typer.Option("--all", help="Run data, run branches and leftover worktrees (the default)."),
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List what would go; remove nothing.")
    ] = False,
) -> None:
    """Remove what finished runs left: run data, their anti-sprawl/* branches (never yours),
    leftover worktrees; --dry-run lists them first."""
    from ..run.clean import clean as run_clean
    from ..run.clean import parse_age
    from ..run.preflight import check_repo

    age = parse_age(older_than)
    both = everything or not (runs or branches)
    root = check_repo(repo_here(repo))
    done = run_clean(root, age, runs=runs or both, branches=branches or both, dry_run=dry_run)
    verb = "would remove" if dry_run else "removed"
    say = stdout().print
    for path in done.runs:
        say(f"{verb} run data {path}", markup=False, soft_wrap=True)
    for name in done.branches:
        say(f"{verb} branch {name}", markup=False, soft_wrap=True)
    for path in done.worktrees:
        say(f"{verb} leftover worktree {path}", markup=False, soft_wrap=True)
    if not (done.runs or done.branches or done.worktrees):
        say(f"nothing to clean (finished runs older than {older_than})", markup=False)


@handle_errors
def pr_cmd(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID")],
    repo: RepoReq = None,
    remote: Annotated[
        str, typer.Option("--remote", help="Remote to push the run branch to.")
    ] = "origin",
    base_branch: Annotated[
        str | None,
        typer.Option(
            "--base-branch", help="Branch the PR merges into (default: where the run started)."
        ),
    ] = None,
    open_pr: Annotated[
        bool, typer.Option("--open", help="Open the PR with gh when installed and logged in.")
    ] = False,
    allow_partial: Annotated[
        bool,
        typer.Option("--allow-partial", help="Push a run that did not succeed (body says why)."),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Push a run's branch, then open its pull request with gh or print how to."""
    from .pr import PrOptions, publish, render_outcome

    opts = PrOptions(
        env=dict(os.environ),
        remote=remote,
        base_branch=base_branch,
        open=open_pr,
        allow_partial=allow_partial,
    )
    outcome = publish(repo_here(repo), run_id, opts)
    if as_json:
        print_json(outcome.model_dump(mode="json"))
    else:
        render_outcome(outcome, stdout())
    if open_pr and not outcome.opened:
        raise typer.Exit(1)  # asked to open one, and none was: a script must see it


@handle_errors
def eval_cmd(
    cases_dir: Annotated[Path, typer.Argument(metavar="DIR", help="Folder of evaluation cases.")],
    ablate: Annotated[
        list[str] | None,
        typer.Option(
            "--ablate",
            help="firewall | clean-slate | scoping | scope-requests | integration | all (repeatable).",
        ),
    ] = None,
    case: Annotated[
        list[str] | None, typer.Option("--case", help="Only these cases (repeatable).")
    ] = None,
    report: Annotated[
        Path | None, typer.Option("--report", help="Write a markdown report here.")
    ] = None,
    keep: Annotated[
        Path | None, typer.Option("--keep", help="Keep each case's repository here.")
    ] = None,
    max_output_tokens: MaxOutOpt = None,
    provider: ProviderOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    request_timeout: RequestTimeoutOpt = None,
    allow_unsandboxed: UnsafeOpt = False,
    executor: ExecutorOpt = ExecutorChoice.local,
    dask_scheduler: DaskSchedulerOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run the evaluation suite: success, tokens, violations; ablations switch one boundary off."""
    from ..eval.cli import run_eval_command
    from .executor import NEEDS_SCHEDULER

    if executor is ExecutorChoice.dask and not dask_scheduler:
        raise UsageError(NEEDS_SCHEDULER)

    code = run_eval_command(
        cases_dir,
        provider=provider,
        model=model,
        base_url=base_url,
        request_timeout=request_timeout,
        ablate=ablate or (),
        only=case or (),
        as_json=as_json,
        report=report,
        allow_unsandboxed=allow_unsandboxed,
        keep=keep,
        console=stdout(),
        dask_scheduler=dask_scheduler if executor is ExecutorChoice.dask else None,
        max_output_tokens=max_output_tokens,
    )
    if code:
        raise typer.Exit(code)
