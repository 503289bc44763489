"""Commands of the plan stage: ``plan`` (the planner writes a plan), ``validate``, ``show`` and
``schema`` (a person reads and checks it). The work is in cli/plan.py and the plan/ layer."""

from __future__ import annotations

import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import UsageError
from .environment import NoBaselineOpt
from .options import (
    BaseUrlOpt,
    JsonOpt,
    MaxOutOpt,
    ModelOpt,
    OtelOpt,
    PricesOpt,
    ProviderOpt,
    RepoOpt,
    RepoReq,
    RequestTimeoutOpt,
    ScriptOpt,
    build_provider,
    existing_dir,
    local_server,
    output_limit,
    price_table,
    repo_here,
    server_window,
)
from .output import handle_errors, print_json, stderr, stdout

__all__ = ["PlanFormat", "ShowFormat", "plan_cmd", "schema", "show", "validate"]


class PlanFormat(StrEnum):
    text = "text"
    json = "json"
    github_comment = "github-comment"  # the issue comment the GitHub Action posts (action.yml)


@handle_errors
def plan_cmd(
    requirement: Annotated[
        str,
        typer.Argument(metavar="REQUIREMENT", help="The requirement text, or @FILE to read it."),
    ],
    repo: RepoReq = None,
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
    test_command: Annotated[
        str | None,
        typer.Option(
            "--test-command",
            help="The plan's default test command when the planner gives none (default: "
            "test_command in a config file).",
        ),
    ] = None,
    provider: ProviderOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    request_timeout: RequestTimeoutOpt = None,
    script: ScriptOpt = None,
    prices: PricesOpt = None,
    fmt: Annotated[
        PlanFormat,
        typer.Option(
            "--format",
            help="Output: text, json (as --json) or github-comment (the plan's issue comment: "
            "mermaid DAG, scopes, estimate, the plan file and its sha256).",
        ),
    ] = PlanFormat.text,
    trigger_phrase: Annotated[
        str,
        typer.Option("--trigger-phrase", help="The comment command github-comment names."),
    ] = "/anti-sprawl",
    otel: OtelOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Plan a requirement: a read-only planner model proposes a validated DAG of scoped tasks."""
    from ..redact import Redactor, env_secrets
    from ..run.otel_export import checked, trace_config, traced_agent
    from ..views.terminal import inert_console
    from .plan import parse_models, run_plan_command

    def note(text: str) -> None:
        stderr().print(f"anti-sprawl: note: {text}", markup=False, soft_wrap=True)

    trace = checked(trace_config(otel, os.environ), note)
    comment = trigger_phrase if fmt is PlanFormat.github_comment else None
    as_json = as_json or fmt is not PlanFormat.text

    allowed = parse_models(models)
    chosen = build_provider(provider, model, base_url, script, request_timeout)
    table = price_table(prices, chosen, base_url)
    console = stdout() if not as_json else inert_console(stderr=True)
    with traced_agent(trace, Redactor(env_secrets(os.environ)), note, "planner"):
        code = run_plan_command(
            requirement,
            repo_here(repo),
            output,
            chosen,
            expand_read_scope=expand_read_scope,
            max_rounds=max_rounds,
            console=console,
            as_json=as_json,
            models=allowed,
            prices=table,
            max_output_tokens=output_limit(max_output_tokens, chosen, base_url),
            local_server=local_server(chosen, base_url),
            context_window=server_window(chosen, base_url),
            test_command=test_command,
            comment_trigger=comment,
        )
    if code:
        raise typer.Exit(code)


@handle_errors
def schema() -> None:
    """Print the JSON Schema of plan files."""
    from ..plan.model import Plan

    print_json(Plan.model_json_schema())


@handle_errors
def validate(
    plan_file: Annotated[Path, typer.Argument(metavar="PLAN", help="Plan file (YAML or JSON).")],
    repo: RepoOpt = None,
    no_baseline: NoBaselineOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Check a plan: ids, dependencies, cycles, scopes, budgets, unordered overlaps; with
    --repo, each test command once at the start commit (what it runs, whether it starts)."""
    from ..plan.model import load_plan_data
    from ..plan.validate import collector_paused
    from ..plan.validate import validate as run_validation
    from ..views.plan import render_report

    data = load_plan_data(plan_file)
    # The cycle collector stays paused from the plan's check to the printed report, not
    # only within the check and the first prompts (plan/validate.py): between them, the
    # imports --repo adds met a young generation holding everything the check had made
    # (every module's outline and references) and scanned it twice, 0.03-0.04 s of the
    # 1,000-node benchmark plan (issue 29, item 3). Nothing here makes cyclic garbage to
    # speak of; the collector is back on before the environment check.
    with collector_paused():
        report = run_validation(data, existing_dir(repo))
        fits: list[Any] = []
        commit: str | None = None
        if repo is not None and report.valid and report.plan is not None:
            from ..context.essentials import add_problems, first_prompts, start_commit

            commit = start_commit(repo, report.plan.base)
            fits = first_prompts(report.plan, repo, commit)
            report = add_problems(report, fits)
        if repo is not None:
            from ..outline.parsed import forget_parses

            # The parses (every module the plan names) served the reference checks and the
            # first prompts, and nothing after them: kept, they are about 30,000 objects
            # that each of the collections at exit walks again, 0.03-0.06 s of the 1,000-node
            # benchmark plan's 1.5 s (issue 29, item 3).
            forget_parses()
        if as_json:
            document = report.model_dump(mode="json")
            if fits:
                from ..context.essentials import first_prompt_rows

                document["first_prompts"] = first_prompt_rows(fits)
            print_json(document)
        else:
            render_report(report, stdout(), source=str(plan_file))
            if fits:
                from ..context.essentials import render_first_prompts

                render_first_prompts(fits, stdout(), commit)
    if not report.valid:
        raise typer.Exit(1)
    if repo is not None and commit is not None and report.plan is not None and not no_baseline:
        _check_environment(report.plan, repo, commit)


def _check_environment(plan: Any, repo: Path, commit: str) -> None:
    """``validate --repo``: which program each test command runs, and its baseline (exit 1
    when one cannot start), in the sandbox a run would use (bwrap; see ``execute``)."""
    if plan.test_command is None and not any(t.test_command for t in plan.tasks):
        # nothing to describe or run: the baseline, settings and sandbox modules are not even
        # loaded (0.05 s of validate --repo of a 1,000-node plan, issue 29, item 3)
        return
    from ..run.baseline import describe_commands
    from ..run.settings import RunSettings
    from ..sandbox.sandbox import probe_sandbox
    from .environment import check_test_commands, user_settings_env
    from .options import SandboxChoice, sandbox_policy

    policy = sandbox_policy(SandboxChoice.bwrap, None, None, False)
    settings = RunSettings(sandbox=policy, command_env=user_settings_env(policy))
    for line in describe_commands(plan, repo.resolve(), settings.command_env or {}):
        stderr().print(f"anti-sprawl: {line}", markup=False)
    if probe_sandbox(policy).layer is None:
        stderr().print(
            "anti-sprawl: note: no bwrap sandbox here, so the test commands were not run "
            "(execute checks them in the sandbox it uses)",
            markup=False,
        )
        return
    check_test_commands(plan, repo, settings, commit)


class ShowFormat(StrEnum):
    tree = "tree"
    mermaid = "mermaid"
    dot = "dot"
    json = "json"


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
    from ..views.terminal import inert

    result = run_validation(load_plan_data(plan_file))
    if result.plan is None or any(p.code in ("cycle", "unknown_dependency") for p in result.errors):
        first = result.errors[0].message if result.errors else "invalid plan"
        raise UsageError(f"cannot show {plan_file}: {first} (run 'anti-sprawl validate')")
    plan = result.plan
    if fmt is ShowFormat.tree:
        report.render_plan_tree(plan, stdout())
    elif fmt is ShowFormat.mermaid:
        sys.stdout.write(inert(report.plan_mermaid(plan)))
    elif fmt is ShowFormat.dot:
        sys.stdout.write(inert(report.plan_dot(plan)))
    else:
        sys.stdout.write(report.plan_json(plan))


# --- providers and runs ------------------------------------------------------------------
