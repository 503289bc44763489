"""The ``anti-sprawl`` command line: the Typer app and its commands, parsing and wiring only.

The commands live by stage: cli/plans.py (plan, validate, show, schema), cli/runs.py (execute,
resume), cli/review.py (status, inspect, pr, eval); their shared options and builders are in
cli/options.py, the error boundary and printing in cli/output.py.

Exit codes: 0 success, 1 the work failed (invalid plan, a node failed), 2 usage or input
error. A user's mistake prints one line on stderr and never a traceback. ``--json`` prints
exactly one JSON document on stdout.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer
from typer.core import TyperCommand, TyperGroup

from . import doctor, github, plans, report, review, runs
from .output import guard_output

__all__ = ["app", "main"]


class _Group(TyperGroup):
    """Keeps the command line's words, so config files can be found from ``--repo``."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        ctx.meta["anti_sprawl.argv"] = list(args)
        return super().parse_args(ctx, args)


app = typer.Typer(
    cls=_Group,
    name="anti-sprawl",
    help="Run coding agents on a DAG of scoped subtasks: clean-slate prompts, a path firewall, "
    "hard token and tool-call budgets.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion SHELL
    pretty_exceptions_enable=False,  # never print locals: we hold API keys
    rich_markup_mode=None,
)


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
    ctx: typer.Context,
    version: Annotated[
        bool,
        typer.Option(
            "--version", is_eager=True, callback=_version, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Run coding agents on a DAG of scoped subtasks: clean-slate prompts, a path firewall,
    hard token and tool-call budgets."""
    _apply_config(ctx)


def _apply_config(ctx: typer.Context) -> None:
    """Config files become each command's defaults (cli/config.py); a bad file is one line."""
    from pathlib import Path

    from ..errors import UsageError
    from .config import default_map, load_config, project_root
    from .output import stderr

    group = ctx.command
    commands = getattr(group, "commands", {})
    argv = ctx.meta.get("anti_sprawl.argv", [])
    try:
        loaded = load_config(os.environ, project_root(argv, Path.cwd()))
    except UsageError as exc:
        stderr().print(f"anti-sprawl: error: {exc}", markup=False)
        raise typer.Exit(2) from None
    for note in loaded.ignored:
        stderr().print(f"anti-sprawl: note: {note}", markup=False, soft_wrap=True)
    params = {name: [p.name for p in cmd.params if p.name] for name, cmd in commands.items()}
    ctx.default_map = default_map(loaded, params)
    for name, values in ctx.default_map.items():
        said = ", ".join(f"{key} from {loaded.sources[key]}" for key in values)
        commands[name].epilog = f"Defaults set by config files: {said}."


# In the order of the pipeline (``anti-sprawl --help`` lists them so).
_COMMANDS: tuple[tuple[str, Callable[..., None]], ...] = (
    ("schema", plans.schema),
    ("validate", plans.validate),
    ("show", plans.show),
    ("plan", plans.plan_cmd),
    ("execute", runs.execute),
    ("resume", runs.resume),
    ("status", review.status),
    ("inspect", review.inspect),
    ("cancel", review.cancel),
    ("clean", review.clean),
    ("pr", review.pr_cmd),
    ("report", report.report),
    ("eval", review.eval_cmd),
    ("init", doctor.init),
    ("doctor", doctor.doctor),
)
for _name, _fn in _COMMANDS:
    app.command(_name, cls=_Command)(_fn)
app.add_typer(github.app, name="github")  # the GitHub Action's steps (cli/github.py)


def main(crash: Callable[[str, str], None] | None = None) -> None:
    """Console-script entry point. ``crash`` is for the test launcher only: it is called at
    each of the run's crash points (settings.CRASH_POINTS) and may kill the process there."""
    runs.set_crash_hook(crash)
    guard_output()  # a closed stdout (`| head -1`, a closed terminal) never changes the verdict
    app()


if __name__ == "__main__":
    main()
