"""The ``anti-sprawl`` command line: parsing and wiring only.

Exit codes: 0 success, 1 the work failed (invalid plan, a node failed), 2 usage or input
error. A user's mistake prints one line on stderr and never a traceback. ``--json`` prints
exactly one JSON document on stdout.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import sys
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, ParamSpec, TypeVar

import typer
from rich.console import Console
from typer.core import TyperCommand

from ..errors import InternalError, Interrupted, UsageError, at_boundary

__all__ = ["app", "main"]

app = typer.Typer(
    name="anti-sprawl",
    help="Run coding agents on a DAG of scoped subtasks: clean-slate prompts, a path firewall, "
    "hard token and tool-call budgets.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,  # never print locals: we hold API keys
    rich_markup_mode=None,
)

P = ParamSpec("P")
R = TypeVar("R")


class _Command(TyperCommand):
    """Usage lines say ``PLAN`` and ``[RUN_ID]``, not Typer's ``{PLAN}`` for required ones."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = super().collect_usage_pieces(ctx)
        return [p[1:-1] if p.startswith("{") and p.endswith("}") else p for p in pieces]


def _version(value: bool) -> None:
    if value:
        from .. import __version__

        sys.stdout.write(f"anti-sprawl {__version__}\n")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", is_eager=True, callback=_version, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Run coding agents on a DAG of scoped subtasks: clean-slate prompts, a path firewall,
    hard token and tool-call budgets."""


def _stdout() -> Console:
    return Console(highlight=False)


def _stderr() -> Console:
    return Console(stderr=True, soft_wrap=True, highlight=False)


def handle_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """The error boundary: one line on stderr and the matching exit code, never a traceback.

    Our own errors carry their exit code; anything else is mapped by ``errors.at_boundary``
    (an OSError such as a full disk, a bug). Typer's own exits pass through untouched.
    """

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, typer.TyperException):
            raise
        except KeyboardInterrupt:
            _stderr().print("anti-sprawl: interrupted", markup=False)
            raise typer.Exit(130) from None
        except Exception as exc:
            error = at_boundary(exc)
            if isinstance(error, InternalError) and os.environ.get("ANTI_SPRAWL_DEBUG"):
                raise
            text = str(error).strip()
            message = _redact(text.splitlines()[0] if text else type(error).__name__)
            prefix = "" if isinstance(error, Interrupted) else "error: "
            _stderr().print(f"anti-sprawl: {prefix}{message}", markup=False)
            raise typer.Exit(error.exit_code) from None

    return wrapper


def _redact(text: str) -> str:
    """Secret values of this environment never reach the terminal, even inside an error."""
    from ..redact import Redactor, env_secrets

    return Redactor(env_secrets(os.environ))(text)


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    sys.stdout.flush()


def _existing_dir(repo: Path | None) -> Path | None:
    if repo is None:
        return None
    if not repo.exists():
        raise UsageError(f"repository not found: {repo}")
    if not repo.is_dir():
        raise UsageError(f"--repo must be a directory: {repo}")
    return repo


JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
RepoOpt = Annotated[
    Path | None, typer.Option("--repo", help="Repository the plan is for (enables path checks).")
]


@app.command()
@handle_errors
def schema() -> None:
    """Print the JSON Schema of plan files."""
    from ..plan.model import Plan

    _print_json(Plan.model_json_schema())


@app.command()
@handle_errors
def validate(
    plan_file: Annotated[Path, typer.Argument(metavar="PLAN", help="Plan file (YAML or JSON).")],
    repo: RepoOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Check a plan: ids, dependencies, cycles, scopes, budgets, unordered overlaps."""
    from ..plan.model import load_plan_data
    from ..plan.validate import validate as run_validation
    from ..views.plan import render_report

    data = load_plan_data(plan_file)
    report = run_validation(data, _existing_dir(repo))
    fits: list[Any] = []
    commit: str | None = None
    if repo is not None and report.valid and report.plan is not None:
        from ..context.essentials import add_problems, first_prompts, start_commit

        commit = start_commit(repo, report.plan.base)
        fits = first_prompts(report.plan, repo, commit)
        report = add_problems(report, fits)
    if as_json:
        _print_json(report.model_dump(mode="json"))
    else:
        render_report(report, _stdout(), source=str(plan_file))
        if fits:
            from ..context.essentials import render_first_prompts

            render_first_prompts(fits, _stdout(), commit)
    if not report.valid:
        raise typer.Exit(1)


class ShowFormat(StrEnum):
    tree = "tree"
    mermaid = "mermaid"
    dot = "dot"
    json = "json"


@app.command()
@handle_errors
def show(
    plan_file: Annotated[Path, typer.Argument(metavar="PLAN", help="Plan file (YAML or JSON).")],
    fmt: Annotated[
        ShowFormat, typer.Option("--format", "-f", help="Output format.")
    ] = ShowFormat.tree,
) -> None:
    """Show the DAG in layers (what can run in parallel) with scopes and budgets."""
    from ..plan.model import load_plan_data
    from ..plan.validate import validate as run_validation
    from ..views import plan as report

    result = run_validation(load_plan_data(plan_file))
    if result.plan is None or any(p.code in ("cycle", "unknown_dependency") for p in result.errors):
        first = result.errors[0].message if result.errors else "invalid plan"
        raise UsageError(f"cannot show {plan_file}: {first} (run 'anti-sprawl validate')")
    plan = result.plan
    if fmt is ShowFormat.tree:
        report.render_plan_tree(plan, _stdout())
    elif fmt is ShowFormat.mermaid:
        sys.stdout.write(report.plan_mermaid(plan))
    elif fmt is ShowFormat.dot:
        sys.stdout.write(report.plan_dot(plan))
    else:
        sys.stdout.write(report.plan_json(plan))


# --- providers and runs ------------------------------------------------------------------

ProviderOpt = Annotated[
    str | None,
    typer.Option("--provider", help="anthropic | openai | scripted (default: from env)."),
]
ModelOpt = Annotated[str | None, typer.Option("--model", help="Model name.")]
BaseUrlOpt = Annotated[
    str | None, typer.Option("--base-url", help="OpenAI-compatible server URL (Ollama, vLLM, ...).")
]
ScriptOpt = Annotated[
    Path | None, typer.Option("--script", help="Script file for the scripted (offline) provider.")
]
RepoReq = Annotated[Path, typer.Option("--repo", help="The git repository to work on.")]
LeanCeilingOpt = Annotated[
    int | None,
    typer.Option(
        "--lean-ceiling",
        min=1_000,
        help="Ceiling of a node's lean first prompt, in tokens (default 16,000); a node's "
        "target is the smaller of this and 40% of its token_budget.",
    ),
]
MaxOutOpt = Annotated[
    int | None,
    typer.Option(
        "--max-output-tokens",
        min=256,
        help="Output cap of one model response (default: the model's own limit; 4096 for an "
        "unknown model on a --base-url server).",
    ),
]
JobsOpt = Annotated[int, typer.Option("--jobs", "-j", min=1, max=64, help="Nodes run at once.")]
MaxTokensOpt = Annotated[
    int | None,
    typer.Option(
        "--max-tokens",
        min=1,
        help="Run-wide cap on tokens over every model call; the call that could cross it is "
        "not made and the run ends interrupted (resume with a higher cap to finish).",
    ),
]


class ExecutorChoice(StrEnum):
    local = "local"
    dask = "dask"


ExecutorOpt = Annotated[
    ExecutorChoice,
    typer.Option(
        "--executor",
        help="Where nodes run: local (threads here) or dask (a Dask cluster; the journal, "
        "branch and landing stay here).",
    ),
]
DaskSchedulerOpt = Annotated[
    str | None,
    typer.Option(
        "--dask-scheduler",
        envvar="DASK_SCHEDULER_ADDRESS",
        metavar="ADDRESS",
        help="The Dask scheduler for --executor dask, e.g. tcp://10.0.0.5:8786.",
    ),
]
MaxCostOpt = Annotated[
    float | None,
    typer.Option(
        "--max-cost",
        min=0.0,
        help="Run-wide cap in US dollars at the models' prices; the call that could cross it "
        "is not made and the run ends interrupted (resume with a higher cap to finish).",
    ),
]
PricesOpt = Annotated[
    Path | None,
    typer.Option(
        "--prices",
        help="YAML/JSON prices per model (dollars per million tokens) over the bundled table "
        "(default: $XDG_CONFIG_HOME/anti-sprawl/prices.yaml when it exists).",
    ),
]
UnsafeOpt = Annotated[
    bool,
    typer.Option(
        "--allow-unsandboxed",
        help="Run test commands without an OS sandbox when none works here (unsafe).",
    ),
]


class SandboxChoice(StrEnum):
    bwrap = "bwrap"
    landlock = "landlock"


SandboxOpt = Annotated[
    SandboxChoice,
    typer.Option(
        "--sandbox",
        help="OS sandbox for test commands: bwrap, or landlock (weaker: opt-in only).",
    ),
]
SandboxAllowOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--sandbox-allow",
        help="Extra read-only path test commands may see (repeatable); secrets stay masked.",
    ),
]
SetupNetworkOpt = Annotated[
    bool,
    typer.Option(
        "--allow-setup-network",
        help="Let the plan's setup_command use the network (e.g. npm ci); test commands never can.",
    ),
]
SandboxLimitOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--sandbox-limit",
        help="NAME=VALUE resource limit for test commands (repeatable): processes, memory, "
        "file-size, tmp, output; e.g. memory=2G.",
    ),
]


def _sandbox_policy(
    layer: SandboxChoice,
    allow: list[Path] | None,
    limits: list[str] | None,
    allow_unsandboxed: bool,
    setup_network: bool = False,
) -> Any:
    """The one SandboxPolicy of a run, from the flags and this process's $HOME."""
    import os

    from pydantic import ValidationError

    from ..sandbox.policy import ResourceLimits, SandboxPolicy, parse_limit

    fields = dict(parse_limit(text) for text in limits or ())
    try:
        resources = ResourceLimits(**fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise UsageError(f"--sandbox-limit {first['loc'][0]}: {first['msg']}") from None
    if setup_network and layer is not SandboxChoice.bwrap:
        raise UsageError(
            "--allow-setup-network needs --sandbox bwrap (Landlock has no network mode)"
        )
    home = os.environ.get("HOME")
    return SandboxPolicy(
        allow_unsandboxed=allow_unsandboxed,
        layers=(layer.value,),
        allow_paths=tuple(p.absolute() for p in allow or ()),
        home=Path(home) if home else None,
        limits=resources,
        setup_network=setup_network,
    )


def _prices(prices: Path | None, provider: Any, base_url: str | None) -> Any:
    """The price table of a command: the bundled one, the user's config file, ``--prices``.

    The environment is read here, once: the config directory ($XDG_CONFIG_HOME, else
    ~/.config) and whether the provider talks to a local server (zero unless priced).
    """
    import os

    from ..providers.prices import load_prices

    if prices is None:
        home = os.environ.get("HOME")
        config = os.environ.get("XDG_CONFIG_HOME") or (f"{home}/.config" if home else None)
        found = Path(config) / "anti-sprawl" / "prices.yaml" if config else None
        prices = found if found is not None and found.is_file() else None
    env_url = {"anthropic": "ANTHROPIC_BASE_URL", "openai": "OPENAI_BASE_URL"}.get(provider.name)
    local = (
        provider.name == "scripted" or bool(base_url) or bool(env_url and os.environ.get(env_url))
    )
    return load_prices(prices, local=local)


def _warn_unpriced(table: Any, models: list[str]) -> None:
    """One warning per model the table cannot price: its cost is reported in tokens only."""
    for name in table.unpriced(models):
        _stderr().print(
            f"anti-sprawl: warning: no price for model {name}: its cost is shown in tokens "
            "only (add it to a prices file: --prices FILE)",
            markup=False,
        )


def _provider(
    provider: str | None, model: str | None, base_url: str | None, script: Path | None
) -> Any:
    from ..providers import select_provider
    from ..providers.redacting import RedactingProvider
    from ..redact import Redactor, env_secrets

    chosen = select_provider(
        provider=provider, model=model, base_url=base_url, script=script, env=os.environ
    )
    # Every request is scrubbed of the secret values this process can see before it leaves.
    return RedactingProvider(chosen, Redactor(env_secrets(os.environ)))


def _local_server(provider: Any, base_url: str | None) -> bool:
    """The OpenAI provider behind a ``--base-url`` server: unknown models get a small output cap."""
    return provider.name == "openai" and bool(base_url or os.environ.get("OPENAI_BASE_URL"))


def _output_limit(flag: int | None, provider: Any, base_url: str | None) -> int:
    """``--max-output-tokens``, else the default for the chosen model (providers/limits.py)."""
    from ..providers.limits import default_output_limit

    if flag is not None:
        return flag
    local = _local_server(provider, base_url)
    return default_output_limit(provider.name, provider.model, local_server=local)


# The test launcher's crash hook (tests/crash_launcher.py passes it to ``main``); never set by
# the console script, and no environment variable sets it.
_crash_hook: Callable[[str, str], None] | None = None


def _run_and_report(
    start: Callable[[Any], Any],
    provider: Any,
    settings: Any,
    as_json: bool,
    run_job: Callable[..., Any] | None = None,
) -> None:
    """Run ``start(options)`` with live progress, the PR body and the verdict (or --json)."""
    from ..redact import Redactor, env_secrets
    from ..run.node import ExecuteOptions
    from ..run.settings import RunHooks
    from ..views.run import Progress, render_verdict, write_pr_body

    console = _stdout() if not as_json else Console(stderr=True, highlight=False)
    progress = Progress(console)
    written: list[Path] = []

    def pr_body(state: Any, paths: Any) -> None:
        write_pr_body(state, paths.pr_body)
        written.append(paths.pr_body)

    hooks = RunHooks(
        on_start=progress.start, on_event=progress.event, on_finish=pr_body, crash=_crash_hook
    )
    opts = ExecuteOptions(
        provider=provider,
        settings=settings,
        hooks=hooks,
        redactor=Redactor(env_secrets(os.environ)),
    )
    if run_job is not None:  # --executor dask
        opts = dataclasses.replace(opts, run_job=run_job)
    try:
        state = start(opts)
    finally:
        progress.stop()
    if as_json:
        sys.stdout.write(state.model_dump_json(indent=2) + "\n")
    else:
        render_verdict(state, console)
        for path in written:
            console.print(f"PR body: {path}", soft_wrap=True)
        console.print(f"run id: {state.run_id}", soft_wrap=True)
    if state.status != "succeeded":
        raise typer.Exit(1)


@app.command("plan")
@handle_errors
def plan_cmd(
    requirement: Annotated[
        str,
        typer.Argument(metavar="REQUIREMENT", help="The requirement text, or @FILE to read it."),
    ],
    repo: RepoReq,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", help="Plan file to write (default under .anti-sprawl/plans/)."
        ),
    ] = None,
    expand_read_scope: Annotated[
        bool,
        typer.Option(
            "--expand-read-scope", help="Add write-scope files' direct imports to read scopes."
        ),
    ] = False,
    max_rounds: Annotated[
        int, typer.Option("--max-rounds", min=1, max=10, help="Repair rounds.")
    ] = 3,
    models: Annotated[
        str | None,
        typer.Option(
            "--models",
            help="Comma-separated models the planner may give tasks (cheap ones for mechanical "
            "work, strong ones for design); the first is the plan's default.",
        ),
    ] = None,
    max_output_tokens: MaxOutOpt = None,
    provider: ProviderOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    script: ScriptOpt = None,
    prices: PricesOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Plan a requirement: a read-only planner model proposes a validated DAG of scoped tasks."""
    from .plan import parse_models, run_plan_command

    allowed = parse_models(models)
    chosen = _provider(provider, model, base_url, script)
    table = _prices(prices, chosen, base_url)
    console = _stdout() if not as_json else Console(stderr=True, highlight=False)
    code = run_plan_command(
        requirement,
        repo,
        output,
        chosen,
        expand_read_scope=expand_read_scope,
        max_rounds=max_rounds,
        console=console,
        as_json=as_json,
        models=allowed,
        prices=table,
        max_output_tokens=_output_limit(max_output_tokens, chosen, base_url),
        local_server=_local_server(chosen, base_url),
    )
    if code:
        raise typer.Exit(code)


@app.command()
@handle_errors
def execute(
    plan_file: Annotated[Path, typer.Argument(metavar="PLAN", help="Plan file (YAML or JSON).")],
    repo: RepoReq,
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
            "and dollars); run nothing.",
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Run a plan: one worktree, firewall and commit per node; leaves a branch and a PR body."""
    from ..run.runner import execute as run_execute
    from ..run.runner import uncommitted_changes
    from ..run.settings import RunSettings
    from .executor import choose, executor_for

    plan = _plan_for(plan_file, repo)
    policy = _sandbox_policy(
        sandbox, sandbox_allow, sandbox_limit, allow_unsandboxed, allow_setup_network
    )
    local = functools.partial(_provider, provider, model, base_url, script)
    mine = {"provider": provider, "model": model, "base_url": base_url, "script": script}
    remote, chosen = choose(executor is ExecutorChoice.dask, dask_scheduler, local, **mine)
    table = _prices(prices, chosen, base_url)
    settings = RunSettings(
        jobs=jobs,
        branch=branch,
        base=base,
        sandbox=policy,
        sparse=sparse,
        max_tokens=max_tokens,
        max_cost=max_cost,
        model=model,
        prices=table,
        max_output_tokens=max_output_tokens,
        context_budget=lean_ceiling,
        local_server=_local_server(chosen, base_url),
    )
    _warn_unpriced(table, [plan.model_for(t, model) or chosen.model for t in plan.tasks])
    if dry_run:
        _dry_run(plan, repo, chosen, settings, as_json)
        return
    pending = uncommitted_changes(repo)
    if pending and base is None:
        _stderr().print(
            f"anti-sprawl: note: {pending} uncommitted change(s) in {repo} are not part of the "
            "run; it starts from HEAD",
            markup=False,
        )
    with executor_for(remote, plan) as run_job:
        _run_and_report(lambda o: run_execute(plan, repo, o), chosen, settings, as_json, run_job)


def _dry_run(plan: Any, repo: Path, provider: Any, settings: Any, as_json: bool) -> None:
    """``execute --dry-run``: the checks a run makes before its first node, and the estimate;
    exit 1 when a node could not start (as ``execute`` would), 0 otherwise."""
    from ..planner.estimate import dry_run, render_dry_run
    from ..run.node import ExecuteOptions
    from ..run.runner import check_cost_cap, resolve_base

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
    )
    if as_json:
        _print_json(result.model_dump(mode="json"))
    else:
        render_dry_run(result, _stdout())
    if not result.ok:
        raise typer.Exit(1)


@app.command()
@handle_errors
def resume(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID")],
    repo: RepoReq,
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
            "--max-tokens", min=1, help="New run-wide token cap (default: the run's own)."
        ),
    ] = None,
    max_cost: Annotated[
        float | None,
        typer.Option(
            "--max-cost", min=0.0, help="New run-wide cap in US dollars (default: the run's own)."
        ),
    ] = None,
    jobs: JobsOpt = 2,
    max_output_tokens: MaxOutOpt = None,
    lean_ceiling: LeanCeilingOpt = None,
    provider: ProviderOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    script: ScriptOpt = None,
    prices: PricesOpt = None,
    sandbox: SandboxOpt = SandboxChoice.bwrap,
    sandbox_allow: SandboxAllowOpt = None,
    sandbox_limit: SandboxLimitOpt = None,
    allow_unsandboxed: UnsafeOpt = False,
    allow_setup_network: SetupNetworkOpt = False,
    executor: ExecutorOpt = ExecutorChoice.local,
    dask_scheduler: DaskSchedulerOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Continue an interrupted run; nodes already on the branch are never redone."""
    from ..run.runner import resume as run_resume
    from ..run.settings import RunSettings
    from .executor import choose, executor_for, journal_plan

    plan = _plan_for(plan_file, repo) if plan_file is not None else None
    policy = _sandbox_policy(
        sandbox, sandbox_allow, sandbox_limit, allow_unsandboxed, allow_setup_network
    )
    local = functools.partial(_provider, provider, model, base_url, script)
    mine = {"provider": provider, "model": model, "base_url": base_url, "script": script}
    remote, chosen = choose(executor is ExecutorChoice.dask, dask_scheduler, local, **mine)
    settings = RunSettings(
        jobs=jobs,
        sandbox=policy,
        max_tokens=max_tokens,
        max_cost=max_cost,
        model=model,
        prices=_prices(prices, chosen, base_url),
        max_output_tokens=max_output_tokens,
        context_budget=lean_ceiling,
        local_server=_local_server(chosen, base_url),
    )
    source = str(plan_file) if plan_file is not None else ""
    known = plan if plan is not None or remote is None else journal_plan(repo, run_id)
    with executor_for(remote, known) as run_job:
        _run_and_report(
            lambda o: run_resume(run_id, repo, o, plan, source), chosen, settings, as_json, run_job
        )


def _plan_for(plan_file: Path, repo: Path) -> Any:
    """A plan file validated against ``repo``; an invalid one is the user's mistake (exit 2)."""
    from ..plan.model import load_plan_data
    from ..plan.validate import validate as run_validation
    from ..run.runner import check_repo

    check_repo(repo)
    report = run_validation(load_plan_data(plan_file), _existing_dir(repo))
    if report.plan is None or not report.valid:
        first = report.errors[0].message if report.errors else "invalid plan"
        raise UsageError(f"{plan_file} is not a valid plan: {first} (see 'anti-sprawl validate')")
    return report.plan


@app.command()
@handle_errors
def status(
    run_id: Annotated[str | None, typer.Argument(metavar="RUN_ID")] = None,
    repo: RepoReq = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """List runs, or show one run's nodes."""
    from ..run.journal import Journal, list_runs
    from ..run.runner import check_repo
    from ..views.run import render_runs, render_verdict

    repo = check_repo(repo)
    if run_id is None:
        runs = list_runs(repo)
        if as_json:
            _print_json(
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
            render_runs(runs, _stdout())
        return
    state = Journal.load(repo, run_id).state
    if as_json:
        sys.stdout.write(state.model_dump_json(indent=2) + "\n")
    else:
        render_verdict(state, _stdout())


@app.command()
@handle_errors
def inspect(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID")],
    repo: RepoReq = Path("."),
    task: Annotated[str | None, typer.Option("--task", help="Only this task's calls.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Show the context manifests: what each model call saw, from where, how many tokens."""
    from ..context.manifest import load_manifests, render_manifests
    from ..run.journal import Journal

    journal = Journal.load(_existing_dir(repo) or Path("."), run_id)
    if task is not None and task not in journal.state.tasks:
        raise UsageError(f"run {run_id} has no task {task!r}")
    manifests = load_manifests(journal.paths.manifests, task)
    if as_json:
        _print_json([m.model_dump(mode="json") for m in manifests])
    else:
        render_manifests(manifests, _stdout())


@app.command("pr")
@handle_errors
def pr_cmd(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID")],
    repo: RepoReq,
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
    outcome = publish(_existing_dir(repo) or repo, run_id, opts)
    if as_json:
        _print_json(outcome.model_dump(mode="json"))
    else:
        render_outcome(outcome, _stdout())


@app.command("eval")
@handle_errors
def eval_cmd(
    cases_dir: Annotated[Path, typer.Argument(metavar="DIR", help="Folder of evaluation cases.")],
    ablate: Annotated[
        list[str] | None,
        typer.Option("--ablate", help="firewall | clean-slate | scoping | all (repeatable)."),
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
        ablate=ablate or (),
        only=case or (),
        as_json=as_json,
        report=report,
        allow_unsandboxed=allow_unsandboxed,
        keep=keep,
        console=_stdout(),
        dask_scheduler=dask_scheduler if executor is ExecutorChoice.dask else None,
        max_output_tokens=max_output_tokens,
    )
    if code:
        raise typer.Exit(code)


for _info in app.registered_commands:
    if _info.cls in (None, TyperCommand):
        _info.cls = _Command  # every command, without repeating cls= on each


def main(crash: Callable[[str, str], None] | None = None) -> None:
    """Console-script entry point. ``crash`` is for the test launcher only: it is called at
    each of the run's crash points (settings.CRASH_POINTS) and may kill the process there."""
    global _crash_hook
    _crash_hook = crash
    app()


if __name__ == "__main__":
    main()
