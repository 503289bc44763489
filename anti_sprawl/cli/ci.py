"""What ``execute`` and ``status`` offer CI: a plan pinned by its hash, SARIF and JUnit files.

``--plan-sha256 HEX`` makes ``execute`` run only the plan file whose bytes hash to HEX: the
GitHub Action (cli/github.py) approves a plan by the hash its comment showed, so an edit made
after the approval is refused (exit 2, one line) before anything runs. ``--sarif FILE`` and
``--junit FILE`` write the run's refusals (views/sarif.py) and node verdicts (views/junit.py)
when the run ends, whatever its verdict.

The options are imported by the command modules at start-up, so the writers are imported only
when a file is asked for (``anti-sprawl --help`` stays fast).
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import UsageError

__all__ = [
    "JunitOpt",
    "PlanSha256Opt",
    "SarifOpt",
    "check_plan_sha256",
    "plan_sha256",
    "write_ci_reports",
]

PlanSha256Opt = Annotated[
    str | None,
    typer.Option(
        "--plan-sha256",
        metavar="HEX",
        help="Run the plan only if its file's sha256 is HEX (a plan approved by its hash).",
    ),
]
SarifOpt = Annotated[
    Path | None,
    typer.Option(
        "--sarif",
        metavar="FILE",
        help="Write SARIF 2.1.0 of blocked writes, audit reverts and refused secrets here.",
    ),
]
JunitOpt = Annotated[
    Path | None,
    typer.Option("--junit", metavar="FILE", help="Write JUnit XML of the node verdicts here."),
]
_HEX = re.compile(r"[0-9a-f]{64}")


def plan_sha256(data: bytes) -> str:
    """The hash a plan is approved by: sha256 of the plan file's bytes, lowercase hex."""
    return hashlib.sha256(data).hexdigest()


def check_plan_sha256(plan_file: Path, expected: str | None) -> None:
    """UsageError unless ``plan_file``'s bytes hash to ``expected`` (None: no check)."""
    if expected is None:
        return
    want = expected.strip().lower()
    if not _HEX.fullmatch(want):
        raise UsageError("--plan-sha256 needs the 64 hex digits of a sha256")
    try:
        data = plan_file.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read the plan file {plan_file}: {exc.strerror}") from exc
    got = plan_sha256(data)
    if got != want:
        raise UsageError(
            f"the plan file {plan_file} has sha256 {got[:12]}…, not the approved "
            f"{want[:12]}…: it changed since it was approved; nothing was run"
        )


def write_ci_reports(state: Any, sarif: Path | None, junit: Path | None) -> None:
    """Write the SARIF and JUnit files asked for (a write failure is a UsageError)."""
    if sarif is None and junit is None:
        return
    from ..fs.files import atomic_write_text
    from ..redact import Redactor, env_secrets
    from ..views.junit import junit_xml
    from ..views.sarif import sarif_text

    redact = Redactor(env_secrets(os.environ))
    for path, render in ((sarif, sarif_text), (junit, junit_xml)):
        if path is None:
            continue
        try:
            atomic_write_text(path, render(state, redact))
        except OSError as exc:
            raise UsageError(f"cannot write {path}: {exc.strerror}") from exc
