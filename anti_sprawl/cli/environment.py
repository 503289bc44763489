"""The test environment check the CLI makes before a run spends anything (issue 24).

``execute``, ``execute --dry-run``, ``resume`` and ``validate --repo`` run each distinct test
command once at the start commit (run/baseline.py; ``resume`` finds it cached) and print one
line per command on stderr (a passing one on a dry run only): passes,
fails with N failures (a warning; nodes are then judged on what they change), or cannot
start (exit 1 before any model call, with a hint). ``--no-baseline`` skips it.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Annotated, Any

import typer

from .output import stderr

__all__ = ["IntegrationOpt", "NoBaselineOpt", "check_test_commands", "user_settings_env"]

NoBaselineOpt = Annotated[
    bool,
    typer.Option(
        "--no-baseline",
        help="Do not run the test commands once at the start commit before the run (they "
        "are then judged by exit code alone).",
    ),
]


IntegrationOpt = Annotated[
    bool,
    typer.Option(
        "--integration/--no-integration",
        help="After the last node lands, run the plan's integration_command (default: its "
        "test_command) on the branch tip; when it fails, bisect to the node that broke it "
        "and retry that node (default: on; resume keeps the run's choice).",
    ),
]


def user_settings_env(policy: Any) -> dict[str, str]:
    """The user's environment for commands, taken now (sandbox/user_env.py)."""
    from ..sandbox.user_env import user_command_env

    return user_command_env(os.environ, policy.env_allow)


def check_test_commands(
    plan: Any, repo: Path, settings: Any, commit: str, *, show_passing: bool = True
) -> Any:
    """Run the baselines, print their lines (a passing one only with ``show_passing``: a run
    says what is wrong, a dry run says everything), refuse when a command cannot start; the
    settings with the known failures nodes are not judged on."""
    from ..redact import Redactor, env_secrets
    from ..run.baseline import (
        check_baselines,
        known_failures,
        plan_test_commands,
        refuse_unstartable,
    )
    from ..run.preflight import ready_sandbox

    if not plan_test_commands(plan):
        return settings
    ready_sandbox(settings.sandbox)
    root = repo.resolve()
    redactor = Redactor(env_secrets(os.environ))
    # The user's environment here, also when nodes run on Dask workers (command_env None).
    here = settings
    if here.command_env is None:
        here = dataclasses.replace(settings, command_env=user_settings_env(settings.sandbox))
    baselines = check_baselines(plan, root, commit, here, redactor)
    marked = frozenset(plan.known_failures)
    for baseline in baselines:
        if baseline.status == "fails" or (baseline.status == "passes" and show_passing):
            stderr().print(f"anti-sprawl: {baseline.line(marked)}", markup=False)
    refuse_unstartable(baselines)
    return dataclasses.replace(settings, known_failures=known_failures(baselines, plan))
