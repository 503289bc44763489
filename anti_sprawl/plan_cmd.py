"""``anti-sprawl plan``: run the planner, show the DAG and its cost, write the plan file.

Exit codes: 0 a valid plan was written; 1 planning failed (still invalid after the repair
limit, token budget spent, provider failure), with every error listed. A missing requirement
file or repository is a ``UsageError`` (exit 2, raised to the CLI).
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from .errors import UsageError
from .essentials import first_prompts, start_commit
from .internal_state import ensure_state_dir
from .plan import read_user_file, save_plan
from .planner import PlannerResult, plan_requirement
from .providers.base import Provider
from .report import render_plan_tree
from .scope_assist import CostEstimate, cost_estimate
from .workspace import ensure_excluded

__all__ = ["default_plan_path", "read_requirement", "run_plan_command"]


def read_requirement(requirement: str) -> str:
    """The requirement text; ``@FILE`` reads it from FILE (relative to the current directory)."""
    if requirement.startswith("@"):
        text = read_user_file(Path(requirement[1:]), "requirement")
    else:
        text = requirement
    if not text.strip():
        raise UsageError("the requirement is empty")
    return text


def default_plan_path(repo: Path, plan_id: str) -> Path:
    """Where a plan goes without ``-o``: ``<repo>/.anti-sprawl/plans/<plan_id>.yaml``."""
    return ensure_state_dir(repo) / "plans" / f"{plan_id}.yaml"


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
    max_output_tokens: int | None = None,
) -> int:
    """Plan ``requirement`` for ``repo``, print the result, write the plan file; the exit code."""
    text = read_requirement(requirement)
    if not repo.exists():
        raise UsageError(f"repository not found: {repo}")
    if not repo.is_dir():
        raise UsageError(f"--repo must be a directory: {repo}")
    if (repo / ".git").exists():
        ensure_excluded(repo)  # planner manifests and default plan files never show in git
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    manifest_dir = ensure_state_dir(repo) / "planner" / stamp / "manifests"
    result = plan_requirement(
        text,
        repo,
        provider,
        max_rounds=max_rounds,
        expand_read_scope=expand_read_scope,
        manifest_dir=manifest_dir,
        max_output_tokens=max_output_tokens,
    )
    plan_file: Path | None = None
    cost = _cost(result, repo)
    if result.plan is not None:
        if not as_json:
            _show(result, console, cost)
        plan_file = output if output is not None else default_plan_path(repo, result.plan.plan_id)
        try:
            save_plan(result.plan, plan_file)
        except OSError as exc:
            raise UsageError(f"cannot write the plan file {plan_file}: {exc.strerror}") from exc
    if as_json:
        _print_json(_json_document(result, plan_file, cost))
    elif plan_file is not None:
        console.print(f"plan written to {escape(str(plan_file))}", soft_wrap=True)
    else:
        _show_failure(result, console)
    return 0 if result.ok else 1


def _cost(result: PlannerResult, repo: Path) -> CostEstimate | None:
    """The plan's cost range, its low end from the real lean first prompts (None: no plan)."""
    if result.plan is None:
        return None
    commit = start_commit(repo, result.plan.base)
    fits = first_prompts(result.plan, repo, commit)
    return cost_estimate(result.plan, {f.task_id: f.first_call for f in fits})


def _show(result: PlannerResult, console: Console, cost: CostEstimate | None) -> None:
    assert result.plan is not None
    render_plan_tree(result.plan, console)
    for warning in result.warnings:
        console.print(f"[yellow]warning[/]: {escape(warning)}", soft_wrap=True)
    u = result.usage
    console.print(
        f"planner: {result.rounds} submission(s), {result.requests} model call(s), "
        f"{result.tool_calls} tool call(s), {u.input_tokens:,} input + {u.output_tokens:,} "
        "output tokens",
        soft_wrap=True,
    )
    if cost is None:
        return
    console.print(
        f"estimated cost: [bold]{cost.low:,}[/] to [bold]{cost.high:,}[/] tokens: from the "
        "lean first calls to every call at its cap (token_budget × (max_tool_calls + 2))",
        soft_wrap=True,
    )
    for t in cost.tasks:
        console.print(f"  {escape(t.task_id)}: {t.low:,} to {t.high:,}", soft_wrap=True)


def _show_failure(result: PlannerResult, console: Console) -> None:
    errors = result.report.errors
    reason = result.message or "no valid plan"
    console.print(
        f"[red]planning failed[/]: {escape(reason)}; {len(errors)} error(s)", soft_wrap=True
    )
    for p in errors:
        console.print(f"  [red]error[/] \\[{escape(p.code)}] {escape(p.message)}", soft_wrap=True)


def _json_document(
    result: PlannerResult, plan_file: Path | None, cost: CostEstimate | None
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


def _print_json(data: dict[str, Any]) -> None:
    # --json: the one document on stdout (people's output went to stderr), never wrapped
    sys.stdout.write(json.dumps(data, indent=2) + "\n")
    sys.stdout.flush()
