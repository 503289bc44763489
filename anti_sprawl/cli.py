"""The ``anti-sprawl`` command line: parsing and wiring only.

Exit codes: 0 success, 1 the work failed (invalid plan, a node failed), 2 usage or input
error. A user's mistake prints one line on stderr and never a traceback. ``--json`` prints
exactly one JSON document on stdout.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, ParamSpec, TypeVar

import typer
from rich.console import Console

from .errors import AntiSprawlError, UsageError

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


def _stdout() -> Console:
    return Console(highlight=False)


def _stderr() -> Console:
    return Console(stderr=True, soft_wrap=True, highlight=False)


def handle_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn our errors into one line on stderr and the matching exit code."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except AntiSprawlError as exc:
            message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            _stderr().print(f"anti-sprawl: error: {message}", markup=False)
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            _stderr().print("anti-sprawl: interrupted", markup=False)
            raise typer.Exit(130) from None

    return wrapper


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
    from .plan import Plan

    _print_json(Plan.model_json_schema())


@app.command()
@handle_errors
def validate(
    plan_file: Annotated[Path, typer.Argument(metavar="PLAN", help="Plan file (YAML or JSON).")],
    repo: RepoOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Check a plan: ids, dependencies, cycles, scopes, budgets, unordered overlaps."""
    from .plan import load_plan_data
    from .report import render_report
    from .validate import validate as run_validation

    data = load_plan_data(plan_file)
    report = run_validation(data, _existing_dir(repo))
    if as_json:
        _print_json(report.model_dump(mode="json"))
    else:
        render_report(report, _stdout(), source=str(plan_file))
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
    from . import report
    from .plan import load_plan_data
    from .validate import validate as run_validation

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


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
