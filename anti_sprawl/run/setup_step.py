"""The setup step: a plan's ``setup_command``, run once in each node's fresh worktree before
the worker (``npm ci --offline``, ``python -m venv .venv && ...``, ``make build``).

Why it may write, and why nothing it writes lands:

* It runs in the same sandbox as test commands (allow-list view, resource limits, time limit,
  no network unless the user passed ``--allow-setup-network``), except that the worktree is
  bound **writable**: installers need to create ``node_modules/``, ``.venv/``, ``build/``.
  Secret and internal paths inside the worktree stay masked (a read-only ``/dev/null`` or an
  empty tmpfs over them), so it can neither read nor replace them.
* Afterwards only **git-ignored** paths may differ from ``HEAD``: every tracked or
  non-ignored change (a modified, deleted or re-moded tracked file, a new file git would
  commit) is put back by the audit with an empty write scope and recorded as a
  ``setup_not_ignored`` violation; the node goes on. A new ignore or attributes file that
  hides itself (``.gitignore`` holding ``*``) would silently change what the worker's commit
  contains, so any ignored ``.gitignore``/``.gitattributes`` it left outside an ignored
  directory is removed first (and recorded) — then the audit runs on the original rules.
* Ignored paths never land: the audit lists changes with ``git status`` (ignored files are
  not listed) and the commit stages with ``git add -A`` (which skips them).

Its output goes to a redacted artifact log (``artifacts/<task>/setup-<attempt>.log``); the
model never sees it. A failing setup fails the node with reason ``setup`` and the last lines
of its output in the message, before any model call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from pydantic import BaseModel, Field

from ..agent.worker import TestOutcome
from ..fs.firewall import Violation
from ..git.audit import audit
from ..git.workspace import Workspace
from ..sandbox.command_template import bind_command
from ..sandbox.sandbox import SandboxPolicy, run_command

__all__ = ["IGNORE_RULE_FILES", "SetupResult", "failure_message", "run_setup"]

IGNORE_RULE_FILES = (".gitignore", ".gitattributes")
TAIL_LINES = 40
MESSAGE_LINES = 5


class SetupResult(BaseModel):
    """The setup command's outcome and what it tried to change outside ignored paths."""

    outcome: TestOutcome
    violations: list[Violation] = Field(default_factory=list)


def _rogue_rule_files(ws: Workspace) -> list[str]:
    """Ignored ignore/attributes files outside ignored directories: new rules git would read."""
    out = ws.git(
        ["ls-files", "--others", "--ignored", "--exclude-standard", "--directory", "-z"]
    ).stdout.decode("utf-8", "surrogateescape")
    return [
        entry
        for entry in out.split("\0")
        if entry and not entry.endswith("/") and entry.rsplit("/", 1)[-1] in IGNORE_RULE_FILES
    ]


def _keep_only_ignored(ws: Workspace) -> list[Violation]:
    """Put back every change the setup made outside ignored paths; one violation each."""
    found: list[Violation] = []
    for rel in _rogue_rule_files(ws):
        target = ws.path / rel
        if target.is_symlink() or target.is_file():
            target.unlink()
        found.append(
            Violation(op="command", path=rel, reason="setup_not_ignored", detail="ignore rules")
        )
    checked = audit(ws, [])
    for v in checked.violations:
        found.append(
            Violation(op="command", path=v.path, reason="setup_not_ignored", detail=v.detail)
        )
    return found


def failure_message(outcome: TestOutcome) -> str:
    """What the verdict says about a failed setup: exit status, limit, last output lines."""
    status = f"exit code {outcome.exit_code}"
    if outcome.limit:  # a timeout always has one: "ended by the sandbox: timed out after N s"
        status = outcome.limit if outcome.timed_out else f"{status}; {outcome.limit}"
    lines = [line[:200] for line in outcome.tail.strip().splitlines()[-MESSAGE_LINES:]]
    shown = "\n".join(lines) if lines else "(no output)"
    return f"setup_command failed ({status}); last lines:\n{shown}"


def run_setup(
    ws: Workspace,
    argv: list[str],
    *,
    checkout: Path,
    policy: SandboxPolicy,
    timeout: float,
    log: Path,
    env: Mapping[str, str] | None = None,
    redact: Callable[[str], str] = str,
) -> SetupResult:
    """Run the setup command in ``ws`` (writable), then keep only what it wrote in ignored paths."""
    command = bind_command(argv, checkout, ws.path)
    log.parent.mkdir(parents=True, exist_ok=True)
    res = run_command(
        command.argv,
        ws.path,
        timeout=timeout,
        writable=[ws.path],
        readable=command.readable,
        unscanned=command.unscanned,
        policy=policy,
        log_path=log,
        env=env,
        redact=redact,
        network=policy.setup_network,
    )
    outcome = TestOutcome(
        command=command.argv,
        exit_code=res.exit_code,
        timed_out=res.timed_out,
        limit=res.limit_detail,
        tail="\n".join(res.output.splitlines()[-TAIL_LINES:]),
        log=str(log),
        layer=res.layer,
    )
    return SetupResult(outcome=outcome, violations=_keep_only_ignored(ws))
