"""The GitHub Action's one step (action.yml): read the event, then plan, approve or cancel.

``/anti-sprawl plan`` (or the trigger label) plans the issue and posts the plan as the issue's
sticky comment (views/github.py; found again by its hidden marker, by the workflow's own bot
login only: anyone can write a comment with the marker in it). ``/anti-sprawl approve [HASH]``
from a user with write access (the collaborator permission API, not the comment's
``author_association``, which also says CONTRIBUTOR for strangers) takes the plan file out of
that comment, checks its bytes against the sha256 the comment showed (and the approver's HASH
prefix), runs ``execute --plan-sha256`` on exactly those bytes, writes the step summary and the
``::error`` annotations, and opens the PR (a draft when a node failed; cli/pr.py).
``/anti-sprawl cancel`` replaces the plan with a note, so nothing is left to approve (the
workflow's ``concurrency`` group stops a run in progress: docs/github-action.md).

The work is done by the real CLI in a child process (``python -m anti_sprawl``), so the tests
run exactly what the action runs. Between ``::stop-commands::`` markers the child's output is
never read as workflow commands: a model's text in the progress lines cannot set an output or
mask a value. The API key is in this process's environment for the provider only; test and
setup commands get the user's ``PATH`` and the allowed names alone (sandbox/user_env.py).
"""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import RunError, UsageError
from ..fs.files import atomic_write_text
from ..run.journal import Journal
from ..views.github import (
    STICKY,
    error_annotations,
    plan_in_comment,
    result_comment,
    step_summary,
)
from .ci import plan_sha256
from .pr import PrOptions, publish

__all__ = ["ActionInputs", "Command", "parse_command", "run_event", "write_outputs"]

WRITE_PERMISSIONS = frozenset({"admin", "maintain", "write"})
GH_TIMEOUT = 120.0
COMMENT_LIMIT = 65_536  # GitHub's limit on a comment's body


@dataclass
class ActionInputs:
    """The action's inputs (action.yml), as the step passes them."""

    repo: Path
    work_dir: Path
    repository: str = ""
    provider: str | None = None
    model: str | None = None
    base_url: str | None = None
    script: Path | None = None
    max_usd: float | None = None
    base_branch: str | None = None
    branch_prefix: str = "anti-sprawl/issue-"
    trigger_phrase: str = "/anti-sprawl"
    label_trigger: str = "anti-sprawl"
    bot_login: str = "github-actions[bot]"
    remote: str = "origin"
    extra: list[str] = field(default_factory=list)


@dataclass
class Command:
    """What the event asks for: ``plan``, ``approve`` or ``cancel``, on issue ``number``."""

    word: str
    number: int
    actor: str = ""
    args: list[str] = field(default_factory=list)
    title: str = ""
    body: str = ""


def parse_command(
    event_name: str, event: Mapping[str, Any], inputs: ActionInputs
) -> Command | None:
    """The command an ``issues`` or ``issue_comment`` event carries, else None."""
    issue = event.get("issue")
    if not isinstance(issue, dict) or issue.get("pull_request"):
        return None
    number = issue.get("number")
    if not isinstance(number, int):
        return None
    title, body = str(issue.get("title") or ""), str(issue.get("body") or "")
    if event_name == "issues":
        label = event.get("label") or {}
        if event.get("action") == "labeled" and label.get("name") == inputs.label_trigger:
            actor = str((event.get("sender") or {}).get("login") or "")
            return Command("plan", number, actor, [], title, body)
        return None
    if event_name != "issue_comment" or event.get("action") != "created":
        return None
    comment = event.get("comment") or {}
    first = str(comment.get("body") or "").strip().partition("\n")[0].split()
    if len(first) < 2 or first[0] != inputs.trigger_phrase:
        return None
    word = first[1].lower()
    if word not in ("plan", "approve", "cancel"):
        return None
    actor = str((comment.get("user") or {}).get("login") or "")
    return Command(word, number, actor, first[2:], title, body)


# --- gh --------------------------------------------------------------------------------


def _gh_path(env: Mapping[str, str]) -> str | None:
    return shutil.which("gh", path=env.get("PATH", ""))


def _gh(env: Mapping[str, str], args: Sequence[str], payload: dict[str, Any] | None = None) -> str:
    gh = _gh_path(env)
    if gh is None:
        raise UsageError("gh (the GitHub CLI) is not on PATH; the action needs it")
    try:
        proc = subprocess.run(
            [gh, *args],
            env={**env, "GH_PROMPT_DISABLED": "1"},
            input=json.dumps(payload).encode() if payload is not None else None,
            stdin=None if payload is not None else subprocess.DEVNULL,
            capture_output=True,
            timeout=GH_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RunError(f"gh {args[0]} failed: {exc}") from exc
    if proc.returncode != 0:
        err = [
            ln.strip() for ln in proc.stderr.decode("utf-8", "replace").splitlines() if ln.strip()
        ]
        raise RunError(f"gh {' '.join(args[:3])} failed: {' / '.join(err[-2:]) or proc.returncode}")
    return proc.stdout.decode("utf-8", "replace")


def _sticky(env: Mapping[str, str], inputs: ActionInputs, number: int) -> tuple[int, str] | None:
    """(id, body) of the issue's sticky comment written by the workflow's bot, else None."""
    out = _gh(
        env,
        [
            "api",
            "--paginate",
            f"repos/{inputs.repository}/issues/{number}/comments",
            "--jq",
            ".[] | {id: .id, user: .user.login, body: .body}",
        ],
    )
    for line in out.splitlines():
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            continue
        if item.get("user") == inputs.bot_login and STICKY in str(item.get("body") or ""):
            return int(item["id"]), str(item["body"])
    return None


def _post(env: Mapping[str, str], inputs: ActionInputs, number: int, body: str) -> None:
    """Edit the sticky comment in place, or create it; without gh, write it to a file."""
    atomic_write_text(inputs.work_dir / "comment.md", body)
    if _gh_path(env) is None:
        _say(f"gh is not on PATH: the comment is in {inputs.work_dir / 'comment.md'}")
        return
    found = _sticky(env, inputs, number)
    if found is not None:
        path = f"repos/{inputs.repository}/issues/comments/{found[0]}"
        _gh(env, ["api", "-X", "PATCH", path, "--input", "-"], {"body": body})
    else:
        path = f"repos/{inputs.repository}/issues/{number}/comments"
        _gh(env, ["api", "-X", "POST", path, "--input", "-"], {"body": body})


def _check_writer(env: Mapping[str, str], inputs: ActionInputs, login: str) -> None:
    if not login:
        raise UsageError("the comment has no author")
    path = f"repos/{inputs.repository}/collaborators/{login}/permission"
    permission = _gh(env, ["api", path, "--jq", ".permission"]).strip()
    if permission not in WRITE_PERMISSIONS:
        raise UsageError(f"{login} has {permission or 'no'} access; approving needs write access")


# --- the steps ---------------------------------------------------------------------------


def _say(line: str) -> None:
    sys.stderr.write(f"anti-sprawl: {line}\n")
    sys.stderr.flush()


def _cli(
    inputs: ActionInputs, args: list[str], env: Mapping[str, str]
) -> subprocess.CompletedProcess[bytes]:
    """The real CLI in a child, its output kept out of the workflow-command parser."""
    token = secrets.token_hex(16)
    sys.stdout.write(f"::stop-commands::{token}\n")
    sys.stdout.flush()
    try:
        return subprocess.run(
            [sys.executable, "-m", "anti_sprawl", *args],
            cwd=inputs.repo,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            check=False,
        )
    finally:
        sys.stdout.write(f"::{token}::\n")
        sys.stdout.flush()


def _provider_args(inputs: ActionInputs) -> list[str]:
    args: list[str] = []
    for flag, value in (
        ("--provider", inputs.provider),
        ("--model", inputs.model),
        ("--base-url", inputs.base_url),
        ("--script", str(inputs.script) if inputs.script else None),
    ):
        if value:
            args += [flag, value]
    return args


def _plan(cmd: Command, inputs: ActionInputs, env: Mapping[str, str]) -> dict[str, str]:
    # Planning spends money too: only writers may ask for it (without gh nothing is posted,
    # so nothing can be checked either: a local rehearsal of the step).
    if _gh_path(env) is not None:
        _check_writer(env, inputs, cmd.actor)
    requirement = inputs.work_dir / "requirement.md"
    atomic_write_text(requirement, f"{cmd.title}\n\n{cmd.body}\n")
    plan_file = inputs.work_dir / f"plan-issue-{cmd.number}.yaml"
    args = ["plan", f"@{requirement}", "--repo", str(inputs.repo), "-o", str(plan_file)]
    args += ["--format", "github-comment", "--trigger-phrase", inputs.trigger_phrase]
    proc = _cli(inputs, [*args, *_provider_args(inputs), *inputs.extra], env)
    body = proc.stdout.decode("utf-8", "replace")
    if proc.returncode == 2 or STICKY not in body:
        body = result_comment("planning refused", ["the plan command stopped; see the job's log"])
    too_large = len(body) > COMMENT_LIMIT
    if too_large:
        why = f"the plan's comment has {len(body):,} characters; GitHub holds {COMMENT_LIMIT:,}"
        body = result_comment("the plan is too large for a comment", [why])
    _post(env, inputs, cmd.number, body)
    if proc.returncode != 0:
        raise RunError(f"planning failed (exit {proc.returncode})")
    if too_large:
        raise RunError("the plan is too large for a comment; split the issue")
    return {"plan-file": str(plan_file)}


def _approved_plan(cmd: Command, inputs: ActionInputs, env: Mapping[str, str]) -> tuple[str, Path]:
    """The sha256 and file of the plan the sticky comment shows, checked."""
    found = _sticky(env, inputs, cmd.number)
    pinned = plan_in_comment(found[1]) if found is not None else None
    if pinned is None:
        raise UsageError(
            f"issue {cmd.number} has no plan to approve; comment '{inputs.trigger_phrase} plan'"
        )
    stated, data = pinned
    if cmd.args and not stated.startswith(cmd.args[0].lower()):
        raise UsageError(
            f"the approval names plan {cmd.args[0][:64]!r}, but the comment shows {stated[:12]}"
        )
    if plan_sha256(data) != stated:
        raise UsageError(
            f"the plan in the comment no longer hashes to {stated[:12]} (edited); plan again"
        )
    plan_file = inputs.work_dir / f"plan-issue-{cmd.number}.yaml"
    plan_file.parent.mkdir(parents=True, exist_ok=True)
    plan_file.write_bytes(data)
    return stated, plan_file


def _approve(cmd: Command, inputs: ActionInputs, env: Mapping[str, str]) -> dict[str, str]:
    _check_writer(env, inputs, cmd.actor)
    stated, plan_file = _approved_plan(cmd, inputs, env)
    return execute_approved(inputs, env, plan_file, stated, cmd.number, cmd.actor)


def _planned_base(plan_file: Path) -> str | None:
    """The plan's ``base`` (the commit ``plan`` saw), if it records one."""
    try:
        data = yaml.safe_load(plan_file.read_bytes())
    except yaml.YAMLError:
        return None
    base = data.get("base") if isinstance(data, dict) else None
    return base if isinstance(base, str) and base else None


def execute_approved(
    inputs: ActionInputs,
    env: Mapping[str, str],
    plan_file: Path,
    sha256: str,
    number: int,
    actor: str = "",
) -> dict[str, str]:
    """Run the approved plan by its hash, report it, open its PR: the action's outputs."""
    branch = f"{inputs.branch_prefix}{number}"
    sarif, junit = inputs.work_dir / "anti-sprawl.sarif", inputs.work_dir / "junit.xml"
    args = ["execute", str(plan_file), "--repo", str(inputs.repo), "--plan-sha256", sha256]
    args += ["--branch", branch, "--sarif", str(sarif), "--junit", str(junit), "--json"]
    if inputs.max_usd is not None:
        args += ["--max-cost", str(inputs.max_usd)]
    start = _planned_base(plan_file) or inputs.base_branch
    if start:  # the commit the plan was made against: the approved plan, at its own start
        args += ["--base", start]
    proc = _cli(inputs, [*args, *_provider_args(inputs), *inputs.extra], env)
    if proc.returncode not in (0, 1):
        raise UsageError(f"execute refused the plan (exit {proc.returncode}); see the line above")
    try:
        run_id = str(json.loads(proc.stdout)["run_id"])
    except (ValueError, KeyError, TypeError) as exc:
        raise RunError("execute printed no run document") from exc
    state = Journal.load(inputs.repo, run_id).state
    failed = [t for t, r in state.tasks.items() if r.status != "succeeded"]
    outcome = publish(
        inputs.repo,
        run_id,
        PrOptions(
            env=env,
            remote=inputs.remote,
            base_branch=inputs.base_branch,
            open=True,
            allow_partial=True,
        ),
    )
    url = outcome.url or ""
    report(state, url, env)
    who = f" approved by {actor}" if actor else ""
    details = [
        f"plan sha256 {sha256}{who}",
        f"run {run_id}: {state.status}; nodes not succeeded: {len(failed)}",
        f"branch {state.branch}",
        f"pull request: {url}"
        if url
        else f"pull request not opened: {outcome.gh_problem or 'gh gave no URL'}",
    ]
    _post(env, inputs, number, result_comment(f"ran the plan: {state.status}", details))
    return {
        "plan-file": str(plan_file),
        "branch-name": state.branch,
        "pr-url": url,
        "cost-usd": f"{state.cost_usd:.6f}",
        "nodes-failed": str(len(failed)),
        "run-id": run_id,
        "status": state.status,
        "sarif-file": str(sarif),
        "junit-file": str(junit),
    }


def report(state: Any, pr_url: str, env: Mapping[str, str]) -> None:
    """The ``::error`` lines on stdout and the verdict in ``$GITHUB_STEP_SUMMARY``."""
    for line in error_annotations(state):
        sys.stdout.write(line + "\n")
    sys.stdout.flush()
    summary = step_summary(state, pr_url or None)
    target = env.get("GITHUB_STEP_SUMMARY")
    if target:
        with Path(target).open("a", encoding="utf-8") as fh:
            fh.write(summary)
    else:
        sys.stdout.write(summary)


def _cancel(cmd: Command, inputs: ActionInputs, env: Mapping[str, str]) -> dict[str, str]:
    _check_writer(env, inputs, cmd.actor)
    _post(env, inputs, cmd.number, result_comment(f"plan cancelled by {cmd.actor}", []))
    return {}


def write_outputs(outputs: Mapping[str, str], env: Mapping[str, str]) -> None:
    """``name=value`` lines for ``$GITHUB_OUTPUT`` (values on one line)."""
    target = env.get("GITHUB_OUTPUT")
    lines = "".join(f"{k}={' '.join(str(v).split())}\n" for k, v in outputs.items())
    if target:
        with Path(target).open("a", encoding="utf-8") as fh:
            fh.write(lines)


def run_event(
    event_name: str, event_path: Path, inputs: ActionInputs, env: Mapping[str, str]
) -> dict[str, str]:
    """Do what the event asks; the action's outputs (also written to ``$GITHUB_OUTPUT``)."""
    try:
        event = json.loads(event_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read the event {event_path}: {exc}") from exc
    cmd = parse_command(event_name, event if isinstance(event, dict) else {}, inputs)
    inputs.work_dir.mkdir(parents=True, exist_ok=True)
    if cmd is None:
        outputs = {"command": "none"}
    else:
        steps = {"plan": _plan, "approve": _approve, "cancel": _cancel}
        outputs = {"command": cmd.word, **steps[cmd.word](cmd, inputs, env)}
    write_outputs(outputs, env)
    return outputs
