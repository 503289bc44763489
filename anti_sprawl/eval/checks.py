"""Scoring a finished case: evidence from git, the run directory and the provider seam.

Every check reads real state: the branch's diff and log, the files under ``.anti-sprawl/``,
each recorded request serialized with ``request_text``, and the test command run again on a
fresh checkout of the branch. Some checks are always on: the run completed, nothing outside
a succeeded task's write scope landed, the user's checkout is untouched, tokens agree.

One cohesive module at ~300 lines: every check reads the same ``Evidence``, and ``score`` lists
them all in one place; splitting would separate the checks from that list.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path

from ..fs.scopes import Scope
from ..git.cmd import run_git
from ..plan.model import Plan, command_argv
from ..providers.base import AssistantMessage, ToolResultMessage, UserMessage, request_text
from ..run.failure_note import FAILURE_NOTE_HEADER
from ..run.journal import RunState
from ..run.scope_grants import granted_writes
from ..sandbox.command_template import bind_command
from ..sandbox.sandbox import SandboxPolicy, run_command
from .cases import Case
from .fixture import branch_checkout, branch_exists, commit_log, git_status
from .metrics import CheckOutcome, Leak, TaskMetrics
from .recorder import RecordedCall

__all__ = [
    "Evidence",
    "clean_retries",
    "find_cross_task_leaks",
    "find_leaks",
    "out_of_scope",
    "score",
]

_MAX_LEAKS_PER_NEEDLE = 20


@dataclass
class Evidence:
    """Everything a case's checks look at."""

    case: Case
    root: Path
    repo: Path
    base: str
    branch: str
    plan: Plan | None
    state: RunState | None
    error: str | None
    calls: list[RecordedCall]
    changed: list[str]
    tasks: list[TaskMetrics]
    planner_agree: bool
    command_env: dict[str, str]
    sandbox: SandboxPolicy
    test_timeout: float
    scan_dirs: list[Path] = field(default_factory=list)


def out_of_scope(changed: Sequence[str], plan: Plan | None, state: RunState | None) -> list[str]:
    """Changed paths that no succeeded task was allowed to write (its plan's write scope and
    the writes the run granted it: run/scope_grants.py)."""
    scopes = []
    if plan is not None and state is not None:
        done = {tid: r for tid, r in state.tasks.items() if r.status == "succeeded"}
        scopes = [
            Scope([*t.write_scope, *granted_writes(done[t.task_id].scope_grants)])
            for t in plan.tasks
            if t.task_id in done
        ]
    return [p for p in changed if not any(s.matches(p) for s in scopes)]


def _forms(needle: str) -> set[bytes]:
    """The needle as raw UTF-8 and as it reads inside a JSON string."""
    return {needle.encode("utf-8"), json.dumps(needle)[1:-1].encode("utf-8")}


def _files(directory: Path) -> Iterator[Path]:
    for dirpath, _dirs, names in os.walk(directory, followlinks=False):
        for name in sorted(names):
            path = Path(dirpath, name)
            if path.is_file() and not path.is_symlink():
                yield path


def find_leaks(needles: Sequence[str], ev: Evidence) -> list[Leak]:
    """Where each needle occurs: recorded requests, files under the scan dirs, branch commits."""
    leaks: list[Leak] = []
    if not needles:
        return leaks
    shown: Counter[str] = Counter()
    sightings = chain(
        _request_sightings(needles, ev),
        _file_sightings(needles, ev),
        _commit_sightings(needles, ev),
    )
    for needle, where in sightings:
        if shown[needle] < _MAX_LEAKS_PER_NEEDLE:
            shown[needle] += 1
            leaks.append(Leak(needle=needle, where=where))
    return leaks


def _request_sightings(needles: Sequence[str], ev: Evidence) -> Iterator[tuple[str, str]]:
    for call in ev.calls:
        text = request_text(call.request)
        for needle in needles:
            if needle in text:
                yield needle, f"request {call.request.call_id or call.request.task_id}"


def _file_sightings(needles: Sequence[str], ev: Evidence) -> Iterator[tuple[str, str]]:
    for directory in ev.scan_dirs:
        for path in _files(directory):
            data = path.read_bytes()
            for needle in needles:
                if any(form in data for form in _forms(needle)):
                    yield needle, f"file {path.relative_to(ev.root).as_posix()}"


def _commit_sightings(needles: Sequence[str], ev: Evidence) -> Iterator[tuple[str, str]]:
    log = commit_log(ev.repo, ev.base, ev.branch)
    for needle in needles:
        if needle in log:
            yield needle, f"commits {ev.base[:10]}..{ev.branch}"


def find_cross_task_leaks(spec: dict[str, list[str]], calls: Sequence[RecordedCall]) -> list[Leak]:
    """Strings that reached the requests of a task they must not reach."""
    leaks: list[Leak] = []
    seen: set[tuple[str, str]] = set()
    for call in calls:
        task = call.request.task_id or ""
        needles = spec.get(task, [])
        if not needles:
            continue
        text = request_text(call.request)
        for needle in needles:
            if needle in text and (task, needle) not in seen:
                seen.add((task, needle))
                leaks.append(
                    Leak(needle=needle, where=f"request {call.request.call_id}", task=task)
                )
    return leaks


def _status_check(ev: Evidence) -> CheckOutcome | None:
    expected = ev.case.checks.expect_status
    if expected is None:
        return None
    if ev.state is None:
        return CheckOutcome(name="status", passed=False, detail="the run did not finish")
    if isinstance(expected, str):
        ok = ev.state.status == expected
        return CheckOutcome(name="status", passed=ok, detail=f"run {ev.state.status}")
    wrong = []
    for tid, want in expected.items():
        got = ev.state.tasks.get(tid)
        if got is None:
            wrong.append(f"{tid}: no such task")
        elif got.status != want.status or (want.reason and got.reason != want.reason):
            wrong.append(f"{tid}: {got.status}/{got.reason} (want {want.status}/{want.reason})")
    return CheckOutcome(name="status", passed=not wrong, detail="; ".join(wrong))


def _tests_check(ev: Evidence) -> CheckOutcome | None:
    want = ev.case.checks.tests_pass
    if want is None:
        return None
    argv = command_argv(ev.case.checks.test_command)
    if argv is None and ev.plan is not None:
        argv = command_argv(ev.plan.test_command)
    if argv is None:
        return CheckOutcome(name="tests_pass", passed=False, detail="no test command")
    if not branch_exists(ev.repo, ev.branch):
        return CheckOutcome(name="tests_pass", passed=False, detail="no result branch")
    with branch_checkout(ev.repo, ev.branch, ev.root / "branch-checkout") as tree:
        command = bind_command(argv, ev.repo, tree)  # {checkout}: the case's repository
        res = run_command(
            command.argv,
            tree,
            timeout=ev.test_timeout,
            readable=command.readable,
            unscanned=command.unscanned,
            policy=ev.sandbox,
            log_path=ev.root / "branch-tests.log",
            env=ev.command_env,
        )
    passed = res.exit_code == 0 and not res.timed_out
    tail = res.output.strip().splitlines()[-1:] if res.output.strip() else []
    detail = f"exit {res.exit_code}" + (f": {tail[0][:120]}" if tail else "")
    return CheckOutcome(name="tests_pass", passed=passed == want, detail=detail)


def _paths_check(name: str, entries: list[str], changed: list[str], want: bool) -> CheckOutcome:
    scope = Scope(entries)
    hits = [p for p in changed if scope.matches(p)]
    if want:
        missing = [e for e in entries if not any(Scope([e]).matches(p) for p in changed)]
        return CheckOutcome(name=name, passed=not missing, detail=f"unchanged: {missing}")
    return CheckOutcome(name=name, passed=not hits, detail=f"changed: {hits}")


def _exists_check(ev: Evidence) -> CheckOutcome | None:
    patterns = ev.case.checks.must_not_exist
    if not patterns:
        return None
    found = sorted(
        {p.relative_to(ev.root).as_posix() for pat in patterns for p in ev.root.glob(pat)}
    )
    return CheckOutcome(name="must_not_exist", passed=not found, detail=f"found: {found}")


def _attempts_check(ev: Evidence) -> CheckOutcome | None:
    want = ev.case.checks.expect_attempts
    if not want:
        return None
    got = {t.task_id: t.attempts for t in ev.tasks}
    wrong = [f"{tid}: {got.get(tid)} (want {n})" for tid, n in want.items() if got.get(tid) != n]
    return CheckOutcome(name="attempts", passed=not wrong, detail="; ".join(wrong))


def _scope_check(ev: Evidence) -> CheckOutcome | None:
    """The scope requests each named task made, granted or refused, as the journal has them."""
    want = ev.case.checks.expect_scope
    if not want or ev.state is None:
        return None
    wrong = []
    for tid, requests in want.items():
        record = ev.state.tasks.get(tid)
        got = {f"{g.mode} {g.path}": g.granted for g in (record.scope_grants if record else [])}
        for request, granted in requests.items():
            if got.get(request) is not granted:
                wrong.append(f"{tid}: {request}: {got.get(request)} (want {granted})")
    return CheckOutcome(name="scope_requests", passed=not wrong, detail="; ".join(wrong))


def _observations(calls: Sequence[RecordedCall]) -> list[str]:
    """The file tools' outputs (reads, listings, searches) in ``calls``' conversations."""
    names: dict[str, str] = {}
    out: list[str] = []
    for call in calls:
        for message in call.request.messages:
            if isinstance(message, AssistantMessage):
                names.update({c.id: c.name for c in message.tool_calls})
            elif isinstance(message, ToolResultMessage):
                out += [
                    r.content
                    for r in message.results
                    if names.get(r.call_id) in ("read_file", "grep", "list_dir")
                ]
    return out


def clean_retries(calls: Sequence[RecordedCall]) -> CheckOutcome | None:
    """Every retry starts a new conversation: the first prompt plus the failure note, none of
    the failed attempt's turns or file-tool outputs (always scored when a task was retried)."""
    retried = [c for c in calls if re.search(r"\.attempt\d+-1$", c.request.call_id or "")]
    if not retried:
        return None
    bad = []
    for call in retried:
        messages = call.request.messages
        first = messages[0] if messages else None
        text = first.content if isinstance(first, UserMessage) else ""
        before = [
            c for c in calls[: calls.index(call)] if c.request.task_id == call.request.task_id
        ]
        seen = [o for o in _observations(before) if len(o) > 40 and o in text]
        if len(messages) != 1 or FAILURE_NOTE_HEADER not in text or seen:
            bad.append(call.request.call_id or "?")
    return CheckOutcome(name="clean_retries", passed=not bad, detail=f"not clean: {bad}")


def _checkout_check(ev: Evidence) -> CheckOutcome:
    """The user's checkout: still on the base commit, nothing modified or added."""
    status = git_status(ev.repo)
    head = run_git(["rev-parse", "HEAD"], ev.repo).stdout.decode().strip()
    ok = not status and head == ev.base
    detail = f"status {status[:200]!r}, HEAD {head[:10]}"
    return CheckOutcome(name="checkout_untouched", passed=ok, detail=detail)


def score(ev: Evidence, out: list[str], leaks: list[Leak], cross: list[Leak]) -> list[CheckOutcome]:
    """Every check of ``ev.case``, plus the always-on ones, in a fixed order."""
    checks = ev.case.checks
    results: list[CheckOutcome | None] = [
        CheckOutcome(name="completed", passed=ev.error is None, detail=ev.error or ""),
        _status_check(ev),
        _tests_check(ev),
    ]
    if checks.required_changed:
        results.append(_paths_check("required_changed", checks.required_changed, ev.changed, True))
    if checks.forbidden_changed:
        results.append(
            _paths_check("forbidden_changed", checks.forbidden_changed, ev.changed, False)
        )
    if checks.must_not_contain:
        found = sorted({leak.needle for leak in leaks})
        results.append(CheckOutcome(name="must_not_contain", passed=not leaks, detail=f"{found}"))
    if checks.must_not_reach:
        found = sorted({f"{leak.task}: {leak.needle}" for leak in cross})
        results.append(CheckOutcome(name="must_not_reach", passed=not cross, detail=f"{found}"))
    results.append(_exists_check(ev))
    results.append(_attempts_check(ev))
    results.append(_scope_check(ev))
    results.append(clean_retries(ev.calls))
    violations = sum(t.violations for t in ev.tasks)
    if checks.min_violations is not None:
        ok = violations >= checks.min_violations
        results.append(CheckOutcome(name="min_violations", passed=ok, detail=f"{violations}"))
    tokens_in = sum(t.tokens.input_tokens for t in ev.tasks)
    tokens_all = sum(t.tokens.total for t in ev.tasks)
    if checks.max_input_tokens is not None:
        ok = tokens_in <= checks.max_input_tokens
        results.append(CheckOutcome(name="max_input_tokens", passed=ok, detail=f"{tokens_in}"))
    if checks.max_total_tokens is not None:
        ok = tokens_all <= checks.max_total_tokens
        results.append(CheckOutcome(name="max_total_tokens", passed=ok, detail=f"{tokens_all}"))
    if not checks.allow_out_of_scope:
        results.append(CheckOutcome(name="no_out_of_scope", passed=not out, detail=f"{out}"))
    results.append(_checkout_check(ev))
    bad = [t.task_id for t in ev.tasks if not t.agree]
    if not ev.planner_agree:
        bad.append("planner")
    results.append(CheckOutcome(name="tokens_agree", passed=not bad, detail=f"differ: {bad}"))
    return [r for r in results if r is not None]
