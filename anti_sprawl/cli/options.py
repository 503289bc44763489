"""Options shared by several commands, and what they build: the sandbox policy, the provider,
the price table, a model's output cap, a validated plan.

The heavy modules are imported inside the builders, so ``anti-sprawl --help`` stays fast.
"""

from __future__ import annotations

import os
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import UsageError
from .output import stderr


def existing_dir(repo: Path | None) -> Path | None:
    if repo is None:
        return None
    if not repo.exists():
        raise UsageError(f"repository not found: {repo}")
    if not repo.is_dir():
        raise UsageError(f"--repo must be a directory: {repo}")
    from ..run.directory import check_directory

    check_directory(repo)
    return repo


def repo_here(repo: Path | None) -> Path:
    """``--repo``, else the root of the git repository containing the current directory."""
    if repo is not None:
        return repo
    from ..git.cmd import run_git

    probe = run_git(["rev-parse", "--show-toplevel"], Path.cwd(), check=False)
    if probe.returncode != 0:
        raise UsageError("not inside a git repository: pass --repo PATH")
    return Path(probe.stdout.decode("utf-8", "surrogateescape").strip())


JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
RepoOpt = Annotated[
    Path | None, typer.Option("--repo", help="Repository the plan is for (enables path checks).")
]


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
RepoReq = Annotated[
    Path | None,
    typer.Option(
        "--repo",
        help="The git repository to work on (default: the one containing the current directory).",
    ),
]
LeanCeilingOpt = Annotated[
    int | None,
    typer.Option(
        "--lean-ceiling",
        min=1_000,
        help="Ceiling of a node's lean first prompt, in tokens (default 12,000); a node's "
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
RequestTimeoutOpt = Annotated[
    float | None,
    typer.Option(
        "--request-timeout",
        envvar="ANTI_SPRAWL_REQUEST_TIMEOUT",
        min=1.0,
        metavar="SECONDS",
        help="Overall deadline of one model call, from the request to the last byte of its "
        "answer (default: 120 s for hosted APIs, widened for long answers; 900 s for a "
        "--base-url server, whose CPU may take minutes to read a prompt). A call past it is "
        "abandoned and retried as a timeout.",
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
OtelOpt = Annotated[
    bool,
    typer.Option(
        "--otel",
        help="Export OpenTelemetry traces (GenAI spans) over OTLP; on by itself when "
        "OTEL_EXPORTER_OTLP_ENDPOINT is set. Needs anti-sprawl[otel].",
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


def sandbox_policy(
    layer: SandboxChoice,
    allow: list[Path] | None,
    limits: list[str] | None,
    allow_unsandboxed: bool,
    setup_network: bool = False,
) -> Any:
    """The one SandboxPolicy of a run, from the flags and this process's $HOME."""
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


def price_table(prices: Path | None, provider: Any, base_url: str | None) -> Any:
    """The price table of a command: the bundled one, the user's config file, ``--prices``.

    The environment is read here, once: the config directory ($XDG_CONFIG_HOME, else
    ~/.config) and whether the provider talks to a local server (zero unless priced).
    """
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


def warn_unpriced(table: Any, models: list[str]) -> None:
    """One warning per model the table cannot price: its cost is reported in tokens only."""
    for name in table.unpriced(models):
        stderr().print(
            f"anti-sprawl: warning: no price for model {name}: its cost is shown in tokens "
            "only (add it to a prices file: --prices FILE)",
            markup=False,
        )


def build_provider(
    provider: str | None,
    model: str | None,
    base_url: str | None,
    script: Path | None,
    timeout: float | None = None,
) -> Any:
    from ..providers import select_provider
    from ..providers.redacting import RedactingProvider
    from ..redact import Redactor, env_secrets

    chosen = select_provider(
        provider=provider,
        model=model,
        base_url=base_url,
        script=script,
        env=os.environ,
        timeout=timeout,
    )
    # Every request is scrubbed of the secret values this process can see before it leaves.
    return RedactingProvider(chosen, Redactor(env_secrets(os.environ)))


def local_server(provider: Any, base_url: str | None) -> bool:
    """The OpenAI provider behind a ``--base-url`` server: unknown models get a small output cap."""
    return provider.name == "openai" and bool(base_url or os.environ.get("OPENAI_BASE_URL"))


def server_window(provider: Any, base_url: str | None) -> tuple[int, str] | None:
    """(tokens, where it was read) of the context window a ``--base-url`` server says it
    serves the model with; None for a hosted API or a server that does not say."""
    from ..providers.server_info import served_context_window

    url = base_url or os.environ.get("OPENAI_BASE_URL")
    if not local_server(provider, base_url) or not url:
        return None
    window = served_context_window(url, provider.model)
    return (window.tokens, window.source) if window is not None else None


def served_window(plan: Any, provider: Any, base_url: str | None) -> int | None:
    """The context window a ``--base-url`` server says it serves (None: it does not say); a
    node whose ``token_budget`` is above it is the user's mistake (exit 2), with the numbers."""
    found = server_window(provider, base_url)
    if found is None:
        return None
    tokens, source = found
    for task in plan.tasks:
        if task.token_budget > tokens:
            raise UsageError(
                f"task {task.task_id!r}: token_budget {task.token_budget:,} is above the "
                f"server's context window of {tokens:,} tokens ({source}); "
                f"lower it to at most {tokens:,}, or serve the model with a larger window"
            )
    return tokens


def output_limit(flag: int | None, provider: Any, base_url: str | None) -> int:
    """``--max-output-tokens``, else the default for the chosen model (providers/limits.py)."""
    from ..providers.limits import default_output_limit

    if flag is not None:
        return flag
    local = local_server(provider, base_url)
    return default_output_limit(provider.name, provider.model, local_server=local)


def plan_for(plan_file: Path, repo: Path, setup_network: bool = False) -> Any:
    """A plan file validated against ``repo``; an invalid one is the user's mistake (exit 2).
    Warnings that the run would come to regret (a file the requirement names that no node may
    write, a setup command that needs the network) are printed on stderr."""
    from ..plan.model import load_plan_data
    from ..plan.validate import validate as run_validation
    from ..run.preflight import check_repo

    check_repo(repo)
    report = run_validation(
        load_plan_data(plan_file), existing_dir(repo), setup_network=setup_network
    )
    for warning in report.warnings:
        if warning.code in ("requirement_path_unwritten", "setup_needs_network"):
            stderr().print(f"anti-sprawl: warning: {warning.message}", markup=False)
    if report.plan is None or not report.valid:
        first = report.errors[0].message if report.errors else "invalid plan"
        raise UsageError(f"{plan_file} is not a valid plan: {first} (see 'anti-sprawl validate')")
    return report.plan
