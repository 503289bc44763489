"""``anti-sprawl report RUN [-o FILE] [--open]``: write the run's self-contained HTML report
(views/html_report.py), by default beside its PR body in the run's directory; ``--open``
shows it in the default browser (``webbrowser``, only when asked). Parsing and wiring only;
the heavy modules are imported inside the command, so ``--help`` stays fast."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from ..errors import UsageError
from .options import JsonOpt, RepoReq, existing_dir, repo_here
from .output import handle_errors, print_json, stdout

__all__ = ["report"]


@handle_errors
def report(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID")],
    repo: RepoReq = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "-o", "--output", metavar="FILE", help="Write it here (default: the run's report.html)."
        ),
    ] = None,
    open_it: Annotated[
        bool, typer.Option("--open", help="Open it in the default web browser.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Write one self-contained HTML file of a run: the DAG, and per node its scopes, attempts,
    tokens, dollars, diff, tests, blocked writes and each model call's manifest."""
    from ..redact import Redactor, env_secrets
    from ..run.journal import Journal
    from ..views.html_report import write_report

    root = existing_dir(repo_here(repo)) or Path()
    journal = Journal.load(root, run_id)
    out = output if output is not None else journal.paths.report
    if out.is_dir():
        raise UsageError(f"-o must name a file, not a directory: {out}")
    if not out.parent.is_dir():
        raise UsageError(f"no such directory for -o: {out.parent}")
    # The same redactor as the PR body (cli/pr.py): the run's secrets never reach the file.
    redactor = Redactor(env_secrets(os.environ))
    written = write_report(journal.state, journal.paths, root, redactor, out)
    if as_json:
        print_json({"run_id": run_id, "report": str(written)})
    else:
        stdout().print(f"report: {written}", markup=False, soft_wrap=True)
    if open_it:
        import webbrowser

        webbrowser.open(written.resolve().as_uri())
