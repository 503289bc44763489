"""``anti-sprawl plan``: run the planner, show the DAG and its cost, write the plan file.

Exit codes: 0 a valid plan was written; 1 planning failed (still invalid after the repair
limit, token budget spent, provider failure), with every error listed. A missing requirement
file or repository is a ``UsageError`` (exit 2, raised to the CLI).
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from ..context.essentials import start_commit
from ..errors import UsageError
from ..fs.userdata import read_user_file
from ..git.layout import StateLayout
from ..git.workspace import ensure_excluded
from ..plan.model import save_plan
from ..planner.estimate import Estimate, plan_estimate, render_estimate
from ..planner.planner import PlannerResult, plan_requirement
from ..planner.submission_repairs import with_users_test_command
from ..providers.base import Provider
from ..providers.limits import default_output_limit
from ..providers.prices import PriceTable, call_cost, format_usd
from ..run.history import used_share
from ..run.preflight import check_repo
from ..views.github import plan_comment, result_comment
from ..views.plan import render_plan_tree
from .ci import plan_sha256

__all__ = [
    "default_plan_path",
    "next_command",
    "parse_models",
    "read_requirement",
    "review_header",
    "run_plan_command",
]


def read_requirement(requirement: str) -> str:
    """The requirement text; ``@FILE`` reads it from FILE (relative to the current directory)."""
    if requirement.startswith("@"):
        text = read_user_file(Path(requirement[1:]), "requirement")
    else:
        text = requirement
    if not text.strip():
        raise UsageError("the requirement is empty")
    return text


def parse_models(text: str | None) -> list[str]:
    """``--models a,b,c``: the names, in order, each once; a bad name is a UsageError."""
    names: list[str] = []
    for raw in (text or "").split(","):
        name = raw.strip()
        if not name:
            continue
        if any(c.isspace() for c in name) or len(name) > 200:
            raise UsageError(f"--models: {name[:60]!r} is not a model name")
        if name not in names:
            names.append(name)
    if text is not None and not names:
        raise UsageError("--models needs at least one model name (a,b,c)")
    return names


def default_plan_path(repo: Path, plan_id: str) -> Path:
    """Where a plan goes without ``-o``: ``<repo>/.anti-sprawl/plans/<plan_id>.yaml``."""
    return StateLayout.ensured(repo).plan_file(plan_id)


def run_plan_command(
    requirement: str,
    repo: Path,
    output: Path | None,
    provider: Provider,
    *,
    expand_read_scope: bool,
    max_rounds: int,
    console: Console,
    as_json: bool,
    models: Sequence[str] = (),
    prices: PriceTable | None = None,
    max_output_tokens: int | None = None,
    local_server: bool = False,
    context_window: tuple[int, str] | None = None,
    test_command: str | None = None,
    comment_trigger: str | None = None,
) -> int:
    """Plan ``requirement`` for ``repo``, print the result, write the plan file; the exit code.
    With ``comment_trigger`` (and ``as_json``), stdout gets the GitHub issue comment of the
    plan instead of the JSON document (views/github.py)."""
    text = read_requirement(requirement)
    if not repo.exists():
        raise UsageError(f"repository not found: {repo}")
    if not repo.is_dir():
        raise UsageError(f"--repo must be a directory: {repo}")
    # As careful as execute, before any model call and before anything is written: a plan's
    # scopes are relative to the repository root, and its state lives there.
    check_repo(repo, need_commit=False)
    ensure_excluded(repo)  # planner manifests and default plan files never show in git
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    manifest_dir = StateLayout.ensured(repo).planner_manifests(stamp)
    result = plan_requirement(
        text,
        repo,
        provider,
        max_rounds=max_rounds,
        expand_read_scope=expand_read_scope,
        manifest_dir=manifest_dir,
        models=models,
        max_output_tokens=max_output_tokens,
        lean=local_server,
        context_window=context_window,
    )
    if result.plan is not None and test_command:  # --test-command, or the config's
        plan, replaced = with_users_test_command(result.plan, test_command)
        result = result.model_copy(update={"plan": plan, "warnings": [*result.warnings, *replaced]})
    plan_file: Path | None = None
    table = prices or PriceTable({})
    cost = _cost(result, repo, provider, table, local_server)
    if result.plan is not None:
        if not as_json:
            _show(result, console, cost, provider, table)
        plan_file = output if output is not None else default_plan_path(repo, result.plan.plan_id)
        try:
            save_plan(result.plan, plan_file, review_header(result.plan.plan_id, plan_file, repo))
        except OSError as exc:
            raise UsageError(f"cannot write the plan file {plan_file}: {exc.strerror}") from exc
    if as_json:
        doc = _json_document(result, plan_file, cost)
        doc["next_command"] = next_command(plan_file, repo) if plan_file is not None else None
        if comment_trigger is not None:
            sys.stdout.write(_comment(result, plan_file, cost, comment_trigger))
            sys.stdout.flush()
        else:
            _print_json(doc)
    elif plan_file is not None:
        console.print(f"plan written to {escape(str(plan_file))}", soft_wrap=True)
        console.print(
            f"review it, then run: {escape(next_command(plan_file, repo))}", soft_wrap=True
        )
    else:
        _show_failure(result, console)
    return 0 if result.ok else 1


def next_command(plan_file: Path, repo: Path) -> str:
    """The command to run after reviewing a plan: the dry run, which spends nothing."""
    return shlex.join(["anti-sprawl", "execute", str(plan_file), "--repo", str(repo), "--dry-run"])


def review_header(plan_id: str, plan_file: Path, repo: Path) -> str:
    """The comment a written plan starts with: what to review, the exact next command."""
    return (
        f"Plan '{plan_id}', written by 'anti-sprawl plan'. Review it before running it:\n"
        "- each task's goal (what its worker is told), write_scope (the only files it may\n"
        "  change) and read_scope; dependencies (what runs first);\n"
        "- token_budget (per model call) and max_tool_calls; test_command (what decides\n"
        "  that a task succeeded: it runs in a sandbox, on your PATH).\n"
        "Edit freely; then check the plan and its cost, which spends nothing:\n"
        f"  {next_command(plan_file, repo)}\n"
        "and run it without --dry-run."
    )


def _cost(
    result: PlannerResult, repo: Path, provider: Provider, prices: PriceTable, local_server: bool
) -> Estimate | None:
    """The plan's cost range in tokens and dollars, its low end from the real lean first
    prompts (None: no plan). Nodes without a model use the plan's default or this provider's;
    each call's output is capped at its model's default limit (providers/limits.py)."""
    plan = result.plan
    if plan is None:
        return None
    commit = start_commit(repo, plan.base)
    est, _ = plan_estimate(
        plan,
        repo,
        commit,
        lambda n: plan.model_for(n) or provider.model,
        prices,
        lambda m: default_output_limit(provider.name, m, local_server=local_server),
        used_share(repo),
    )
    return est


def _show(
    result: PlannerResult,
    console: Console,
    cost: Estimate | None,
    provider: Provider,
    prices: PriceTable,
) -> None:
    assert result.plan is not None
    render_plan_tree(result.plan, console)
    for warning in result.warnings:
        console.print(f"[yellow]warning[/]: {escape(warning)}")
    u = result.usage
    price = prices.price_for(provider.model)
    spent = f", {format_usd(call_cost(u, price))}" if price is not None else ""
    console.print(
        f"planner: {result.rounds} submission(s), {result.requests} model call(s), "
        f"{result.tool_calls} tool call(s), {u.input_tokens:,} input + {u.output_tokens:,} "
        f"output tokens{spent}",
    )
    if cost is not None:
        render_estimate(cost, console)


def _show_failure(result: PlannerResult, console: Console) -> None:
    errors = result.report.errors
    reason = result.message or "no valid plan"
    console.print(f"[red]planning failed[/]: {escape(reason)}; {len(errors)} error(s)")
    for p in errors:
        console.print(f"  [red]error[/] \\[{escape(p.code)}] {escape(p.message)}")


def _json_document(
    result: PlannerResult, plan_file: Path | None, cost: Estimate | None
) -> dict[str, Any]:
    return {
        "plan_file": str(plan_file) if plan_file is not None else None,
        "plan": result.plan.model_dump(mode="json", exclude_none=True) if result.plan else None,
        "warnings": list(result.warnings),
        "estimated_tokens": result.estimated_tokens,
        "estimated_cost": cost.model_dump(mode="json") if cost is not None else None,
        "valid": result.ok,
        "errors": [p.model_dump(mode="json") for p in result.report.errors],
    }


def _comment(
    result: PlannerResult, plan_file: Path | None, cost: Estimate | None, trigger: str
) -> str:
    """``plan --format github-comment``: the plan's sticky comment, or why there is none."""
    if result.plan is None or plan_file is None:
        errors = [f"[{p.code}] {p.message}" for p in result.report.errors]
        return result_comment(f"planning failed: {result.message or 'no valid plan'}", errors)
    data = plan_file.read_bytes()
    return plan_comment(result.plan, data, plan_sha256(data), cost, trigger)


def _print_json(data: dict[str, Any]) -> None:
    # --json: the one document on stdout (people's output went to stderr), never wrapped
    sys.stdout.write(json.dumps(data, indent=2) + "\n")
    sys.stdout.flush()
