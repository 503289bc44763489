"""Commands that run a plan: ``execute`` and ``resume``, with live progress, the PR body and the
verdict (or ``--json``)."""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from .ci import JunitOpt, PlanSha256Opt, SarifOpt, check_plan_sha256, write_ci_reports
from .environment import IntegrationOpt, NoBaselineOpt, check_test_commands
from .options import (
    BaseUrlOpt,
    DaskSchedulerOpt,
    ExecutorChoice,
    ExecutorOpt,
    JobsOpt,
    JsonOpt,
    LeanCeilingOpt,
    MaxCostOpt,
    MaxOutOpt,
    MaxTokensOpt,
    ModelOpt,
    OtelOpt,
    PricesOpt,
    ProviderOpt,
    RepoReq,
    RequestTimeoutOpt,
    SandboxAllowOpt,
    SandboxChoice,
    SandboxLimitOpt,
    SandboxOpt,
    ScriptOpt,
    SetupNetworkOpt,
    UnsafeOpt,
    build_provider,
    local_server,
    plan_for,
    price_table,
    repo_here,
    sandbox_policy,
    served_window,
    warn_unpriced,
)
from .output import handle_errors, print_json, stderr, stdout
from .scope_requests import ScopeRequestsChoice, ScopeRequestsOpt

__all__ = ["execute", "resume", "set_crash_hook"]


# The test launcher's crash hook (tests/crash_launcher.py passes it to ``main``); never set by
# the console script, and no environment variable sets it.
_crash_hook: Callable[[str, str], None] | None = None


def set_crash_hook(crash: Callable[[str, str], None] | None) -> None:
    """Called by ``app.main`` only (the launcher passes ``crash``; the console script never)."""
    global _crash_hook
    _crash_hook = crash


def _prepare(
    provider: str | None,
    model: str | None,
    base_url: str | None,
    script: Path | None,
    prices: Path | None,
    policy: Any,
    executor: ExecutorChoice,
    scheduler: str | None,
    request_timeout: float | None = None,
    **fields: Any,
) -> tuple[Any, Any, Any]:
    """The provider, the frozen RunSettings of ``execute``/``resume`` from their flags, and
    the Dask settings (None: nodes run here; with Dask the provider is named, not built)."""
    from ..run.settings import RunSettings
    from .environment import user_settings_env
    from .executor import choose

    local = functools.partial(build_provider, provider, model, base_url, script, request_timeout)
    mine: dict[str, Any] = {"provider": provider, "model": model, "base_url": base_url}
    mine.update(script=script, timeout=request_timeout)
    remote, chosen = choose(executor is ExecutorChoice.dask, scheduler, local, **mine)
    settings = RunSettings(
        sandbox=policy,
        model=model,
        prices=price_table(prices, chosen, base_url),
        local_server=local_server(chosen, base_url),
        request_timeout=request_timeout,
        # Commands run what the user's PATH names now, not this process's venv; on a Dask
        # worker, that worker's own environment (run/remote_node.py).
        command_env=user_settings_env(policy) if remote is None else None,
        **fields,
    )
    return chosen, settings, remote


def _run_and_report(
    start: Callable[[Any], Any],
    provider: Any,
    settings: Any,
    as_json: bool,
    run_job: Callable[..., Any] | None = None,
    reports: tuple[Path | None, Path | None] = (None, None),
    trace: Any = None,
) -> None:
    """Run ``start(options)`` with live progress, the PR body and the verdict (or --json);
    ``reports`` are the ``--sarif`` and ``--junit`` files (cli/ci.py)."""
    from ..redact import Redactor, env_secrets
    from ..run.node import ExecuteOptions
    from ..run.settings import RunHooks
    from ..views.pr_body import write_pr_body
    from ..views.run import Progress, render_verdict
    from ..views.terminal import inert_console
    from .scope_requests import asker

    console = stdout() if not as_json else inert_console(stderr=True)
    progress = Progress(console)
    written: list[Path] = []

    redactor = Redactor(env_secrets(os.environ))

    def pr_body(state: Any, paths: Any) -> None:
        write_pr_body(state, paths.pr_body, redactor)
        written.append(paths.pr_body)

    hooks = RunHooks(
        on_start=progress.start,
        on_event=progress.event,
        on_live=progress.step,
        on_finish=pr_body,
        crash=_crash_hook,
        ask_scope=asker(settings.scope_requests, progress.paused),
    )
    opts = ExecuteOptions(
        provider=provider,
        settings=settings,
        hooks=hooks,
        redactor=redactor,
    )
    if run_job is not None:  # --executor dask
        opts = dataclasses.replace(opts, run_job=run_job)
    try:
        _start_tracing(trace)
        state = start(opts)
    finally:
        progress.stop()
        _stop_tracing()
    write_ci_reports(state, *reports)
    if as_json:
        sys.stdout.write(state.model_dump_json(indent=2) + "\n")
    else:
        render_verdict(state, console)
        for path in written:
            console.print(f"PR body: {path}", soft_wrap=True)
        console.print(f"run id: {state.run_id}", soft_wrap=True)
    if state.status != "succeeded":
        raise typer.Exit(1)


def _check_tracing(flag: bool) -> Any:
    """Whether this run traces (``--otel`` or the OTLP environment: run/otel_export.py), checked
    before anything starts: a missing extra is a usage error with ``--otel``, a note without."""
    from ..run.otel_export import checked, trace_config

    return checked(trace_config(flag, os.environ), _note)


def _note(text: str) -> None:
    stderr().print(f"anti-sprawl: note: {text}", markup=False, soft_wrap=True)


def _start_tracing(config: Any) -> None:
    from ..redact import Redactor, env_secrets
    from ..run.otel_export import start

    if config is not None:
        start(config, Redactor(env_secrets(os.environ)), _note)


def _stop_tracing() -> None:
    from ..run.otel_export import shutdown

    shutdown()


@handle_errors
def execute(
    plan_file: Annotated[Path, typer.Argument(metavar="PLAN", help="Plan file (YAML or JSON).")],
    repo: RepoReq = None,
    branch: Annotated[str | None, typer.Option("--branch", help="Result branch name.")] = None,
    base: Annotated[
        str | None, typer.Option("--base", help="Start from this revision (default HEAD).")
    ] = None,
    jobs: JobsOpt = 2,
    sparse: Annotated[
        bool,
        typer.Option(
            "--sparse", help="Check out only each node's scopes and root files (large repos)."
        ),
    ] = False,
    max_tokens: MaxTokensOpt = None,
    max_cost: MaxCostOpt = None,
    max_output_tokens: MaxOutOpt = None,
    lean_ceiling: LeanCeilingOpt = None,
    provider: ProviderOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    request_timeout: RequestTimeoutOpt = None,
    script: ScriptOpt = None,
    prices: PricesOpt = None,
    sandbox: SandboxOpt = SandboxChoice.bwrap,
    sandbox_allow: SandboxAllowOpt = None,
    sandbox_limit: SandboxLimitOpt = None,
    allow_unsandboxed: UnsafeOpt = False,
    allow_setup_network: SetupNetworkOpt = False,
    executor: ExecutorOpt = ExecutorChoice.local,
    dask_scheduler: DaskSchedulerOpt = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Check the plan and print its estimated cost per node and in total (tokens "
            "and dollars), and which program each test command runs; run no node.",
        ),
    ] = False,
    no_baseline: NoBaselineOpt = False,
    scope_requests: ScopeRequestsOpt = ScopeRequestsChoice.auto,
    plan_sha256: PlanSha256Opt = None,
    sarif: SarifOpt = None,
    junit: JunitOpt = None,
    otel: OtelOpt = False,
    integration: IntegrationOpt = True,
    as_json: JsonOpt = False,
) -> None:
    """Run a plan: one worktree, firewall and commit per node; leaves a branch and a PR body."""
    given = dict(locals())  # the options as given, recorded for resume (cli/launch.py)
    check_plan_sha256(plan_file, plan_sha256)  # before anything reads the plan
    from ..run.preflight import resolve_base, uncommitted_changes
    from ..run.runner import execute as run_execute
    from .executor import executor_for
    from .launch import record
    from .scope_requests import resolve

    repo = repo_here(repo)
    plan = plan_for(plan_file, repo, allow_setup_network)
    policy = sandbox_policy(
        sandbox, sandbox_allow, sandbox_limit, allow_unsandboxed, allow_setup_network
    )
    chosen, settings, remote = _prepare(
        provider,
        model,
        base_url,
        script,
        prices,
        policy,
        executor,
        dask_scheduler,
        request_timeout,
        jobs=jobs,
        branch=branch,
        base=base,
        sparse=sparse,
        max_tokens=max_tokens,
        max_cost=max_cost,
        max_output_tokens=max_output_tokens,
        context_budget=lean_ceiling,
        scope_requests=resolve(scope_requests),
        integration=integration,
    )
    launch = record(given, provider=chosen.name, base_url=getattr(chosen, "base_url", None))
    settings = dataclasses.replace(settings, launch=launch)
    warn_unpriced(settings.prices, [plan.model_for(t, model) or chosen.model for t in plan.tasks])
    window = served_window(plan, chosen, base_url)
    if window is not None:  # the lean first prompts are sized to what the server holds
        settings = dataclasses.replace(settings, context_window=window)
    start = None if no_baseline else resolve_base(repo, base or "HEAD")
    if dry_run:
        if start is not None:  # a command that cannot start is refused here, as by a run
            settings = check_test_commands(plan, repo, settings, start)
        _dry_run(plan, repo, chosen, settings, as_json)
        return
    trace = _check_tracing(otel)
    pending = uncommitted_changes(repo)
    if pending and base is None:
        stderr().print(
            f"anti-sprawl: note: {pending} uncommitted change(s) in {repo} are not part of the "
            "run; it starts from HEAD",
            markup=False,
        )
    with executor_for(remote, plan, repo) as run_job:
        if start is not None:  # after the usage checks, before any model call
            settings = check_test_commands(plan, repo, settings, start, show_passing=False)
        _run_and_report(
            lambda o: run_execute(plan, repo, o),
            chosen,
            settings,
            as_json,
            run_job,
            (sarif, junit),
            trace=trace,
        )


def _dry_run(plan: Any, repo: Path, provider: Any, settings: Any, as_json: bool) -> None:
    """``execute --dry-run``: the checks a run makes before its first node, and the estimate;
    exit 1 when a node could not start (as ``execute`` would), 0 otherwise."""
    from ..planner.estimate import dry_run, render_dry_run
    from ..run.baseline import describe_commands
    from ..run.history import used_share
    from ..run.node import ExecuteOptions
    from ..run.preflight import check_cost_cap, resolve_base

    check_cost_cap(plan, ExecuteOptions(provider, settings), settings.max_cost)
    result = dry_run(
        plan,
        repo,
        resolve_base(repo, settings.base or "HEAD"),
        lambda t: plan.model_for(t, settings.model) or provider.model,
        settings.prices,
        lambda model: settings.output_limit(provider.name, model),
        max_tokens=settings.max_tokens,
        max_cost=settings.max_cost,
        history=used_share(repo),
    )
    env = settings.command_env or {}
    commands = describe_commands(plan, repo.resolve(), env)
    if as_json:
        print_json({**result.model_dump(mode="json"), "test_commands": commands})
    else:
        render_dry_run(result, stdout())
        for line in commands:
            stdout().print(line, markup=False, soft_wrap=True)
    if not result.ok:
        raise typer.Exit(1)


@handle_errors
def resume(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID")],
    repo: RepoReq = None,
    plan_file: Annotated[
        Path | None,
        typer.Option(
            "--plan",
            help="An edited plan: nodes that did not succeed may get new budgets, goals and "
            "scopes; succeeded nodes must keep their id, scopes and dependencies.",
        ),
    ] = None,
    max_tokens: Annotated[
        int | None,
        typer.Option(
            "--max-tokens",
            min=1,
            help="New run-wide token cap (default: the run's own; after a stop at the cap, "
            "the same allowance again).",
        ),
    ] = None,
    max_cost: Annotated[
        float | None,
        typer.Option(
            "--max-cost",
            min=0.0,
            help="New run-wide cap in US dollars (default: the run's own; after a stop at the "
            "cap, the same allowance again).",
        ),
    ] = None,
    jobs: JobsOpt = 2,
    max_output_tokens: MaxOutOpt = None,
    lean_ceiling: LeanCeilingOpt = None,
    provider: ProviderOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    request_timeout: RequestTimeoutOpt = None,
    script: ScriptOpt = None,
    prices: PricesOpt = None,
    sandbox: SandboxOpt = SandboxChoice.bwrap,
    sandbox_allow: SandboxAllowOpt = None,
    sandbox_limit: SandboxLimitOpt = None,
    allow_unsandboxed: UnsafeOpt = False,
    allow_setup_network: SetupNetworkOpt = False,
    executor: ExecutorOpt = ExecutorChoice.local,
    dask_scheduler: DaskSchedulerOpt = None,
    scope_requests: ScopeRequestsOpt = ScopeRequestsChoice.auto,
    otel: OtelOpt = False,
    integration: IntegrationOpt = True,
    as_json: JsonOpt = False,
) -> None:
    """Continue an interrupted run with the options it was started with (flags override);
    nodes already on the branch are never redone."""
    given = {name: value for name, value in locals().items() if name != "ctx"}
    from ..run.journal import Journal
    from ..run.preflight import check_repo
    from .launch import endpoint_notes, reuse, session_caps

    if base_url is not None:  # a bad flag is named before the run is looked up
        from ..providers import check_base_url

        check_base_url(base_url, "--base-url")
    root = check_repo(repo_here(repo))
    state = Journal.load(root, run_id).state
    args = reuse(ctx, state.launch, given)
    # Recorded as this session's options: the caps as given, else the allowance first given.
    options = {**args, "max_tokens": max_tokens, "max_cost": max_cost}
    for cap in ("max_tokens", "max_cost"):
        if options[cap] is None:
            options[cap] = state.launch.get(cap)
    args["max_tokens"], args["max_cost"], capped = session_caps(state, max_tokens, max_cost)
    # Resumed nodes are judged against the run's own baseline (cached per command and commit).
    args["baseline_at"] = None if state.launch.get("no_baseline") else state.base
    for note in [*endpoint_notes(state.launch, args), *capped]:
        stderr().print(f"anti-sprawl: note: {note}", markup=False)
    _resume({**args, "repo": root}, options)


def _resume(args: dict[str, Any], options: dict[str, Any]) -> None:
    """``resume`` once its options are settled (the run's own, then the flags); ``options``
    is what the journal records of them for the next resume."""
    from ..run.runner import resume as run_resume
    from .executor import executor_for, journal_plan
    from .launch import record
    from .scope_requests import resolve

    repo, run_id, plan_file = args["repo"], args["run_id"], args["plan_file"]
    plan = plan_for(plan_file, repo, args["allow_setup_network"]) if plan_file is not None else None
    policy = sandbox_policy(
        args["sandbox"],
        args["sandbox_allow"],
        args["sandbox_limit"],
        args["allow_unsandboxed"],
        args["allow_setup_network"],
    )
    chosen, settings, remote = _prepare(
        args["provider"],
        args["model"],
        args["base_url"],
        args["script"],
        args["prices"],
        policy,
        args["executor"],
        args["dask_scheduler"],
        args["request_timeout"],
        jobs=args["jobs"],
        max_tokens=args["max_tokens"],
        max_cost=args["max_cost"],
        max_output_tokens=args["max_output_tokens"],
        context_budget=args["lean_ceiling"],
        scope_requests=resolve(args["scope_requests"]),
        integration=args["integration"],
    )
    if plan is not None:
        served_window(plan, chosen, args["base_url"])
    judged = plan if plan is not None else journal_plan(repo, run_id)
    launch = record(options, provider=chosen.name, base_url=getattr(chosen, "base_url", None))
    settings = dataclasses.replace(settings, launch=launch)
    source = str(plan_file) if plan_file is not None else ""
    known = plan if plan is not None or remote is None else judged
    trace = _check_tracing(args["otel"])
    with executor_for(remote, known, repo) as run_job:
        if args.get("baseline_at") and judged is not None:  # before any model call, as execute
            settings = check_test_commands(
                judged, repo, settings, args["baseline_at"], show_passing=False
            )
        _run_and_report(
            lambda o: run_resume(run_id, repo, o, plan, source),
            chosen,
            settings,
            args["as_json"],
            run_job,
            trace=trace,
        )
