"""A run's refusals as SARIF 2.1.0, for code scanning (GitHub's "Security" tab and others).

Three rules, read from the journal (run/journal.py ``RunState``): ``AS-SCOPE-WRITE``, a write,
delete or move the path firewall refused (fs/firewall.py records a ``Violation`` per refusal);
``AS-AUDIT-REVERT``, a change found in the worktree after the worker and reverted by the audit
(git/audit.py, ``op="audit"``); ``AS-SECRET``, a change or commit refused because it adds what
looks like a secret (run/node_work.py fails the node with reason ``secret``, its message naming
``<kind> in <path>``; every attempt's record keeps it, run/failure_note.py ``AttemptRecord``).

A location is given only for a path inside the repository (relative, no ``..``); a secret in a
commit's metadata has none. All text passes the run's redactor first.
"""

from __future__ import annotations

import json
import re
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import quote

from .. import __version__
from ..redact import Redactor
from ..run.journal import RunState

__all__ = ["RULES", "SARIF_SCHEMA", "sarif_log", "sarif_text"]

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
INFO_URI = "https://github.com/anti-sprawl/anti-sprawl"
# id -> (name, short description, level)
RULES: dict[str, tuple[str, str, str]] = {
    "AS-SCOPE-WRITE": (
        "BlockedWrite",
        "A worker tried to write, delete or move a file outside its node's write scope; the "
        "path firewall refused it.",
        "error",
    ),
    "AS-AUDIT-REVERT": (
        "AuditRevert",
        "A change outside the node's write scope was found in its worktree after the worker "
        "(a test or setup command, a symlink, a nested repository) and reverted.",
        "warning",
    ),
    "AS-SECRET": (
        "RefusedSecret",
        "A node's change or commit added what looks like a secret; it was not committed.",
        "error",
    ),
}
_WRITE_OPS = frozenset({"write", "delete", "move", "command"})
# run/node_work.py: "the change adds what looks like a secret (<kind> in <path>); ..." and
# git/secret_scan.py's "<kind> in the name <path>".
_SECRET_PATH = re.compile(r"\(([^()]*?) in (?:the name )?(.+)\)(?:; not committed)?$")


def _in_repo(path: str) -> str | None:
    p = PurePosixPath(path)
    if not path or p.is_absolute() or ".." in p.parts or "\\" in path:
        return None
    return quote(str(p), safe="/")


def _result(rule: str, message: str, path: str | None, props: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = {
        "ruleId": rule,
        "ruleIndex": list(RULES).index(rule),
        "level": RULES[rule][2],
        "message": {"text": message},
        "properties": props,
    }
    uri = _in_repo(path) if path else None
    if uri is not None:
        result["locations"] = [
            {"physicalLocation": {"artifactLocation": {"uri": uri, "uriBaseId": "%SRCROOT%"}}}
        ]
    return result


def _secret_messages(state: RunState, task_id: str) -> list[str]:
    r = state.tasks[task_id]
    found = [a.message for a in r.attempt_log if a.reason == "secret"]
    if r.reason == "secret" or (r.reason == "refused" and "secret" in r.message):
        found.append(r.message)
    return list(dict.fromkeys(m for m in found if m))


def _results(state: RunState, redact: Redactor) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    for task in state.plan.tasks:
        r = state.tasks.get(task.task_id)
        if r is None:
            continue
        base = {"task_id": task.task_id, "run_id": state.run_id}
        seen: set[tuple[str, str, str]] = set()
        for v in r.violations:
            if (v.op, v.path, v.reason) in seen:
                continue
            seen.add((v.op, v.path, v.reason))
            rule = "AS-AUDIT-REVERT" if v.op == "audit" else "AS-SCOPE-WRITE"
            if v.op != "audit" and v.op not in _WRITE_OPS:
                continue  # a refused read is not a blocked write
            path = redact(v.path)
            detail = f" ({redact(v.detail)})" if v.detail else ""
            verb = "reverted" if v.op == "audit" else "refused"
            msg = f"task {task.task_id}: {v.op} {path!r} {verb}: {v.reason}{detail}"
            results.append(_result(rule, msg, path, {**base, "op": v.op, "reason": v.reason}))
        for message in _secret_messages(state, task.task_id):
            text = redact(message)
            match = _SECRET_PATH.search(text)
            where = match.group(2) if match else None
            results.append(
                _result(
                    "AS-SECRET", f"task {task.task_id}: {text}", where, {**base, "reason": "secret"}
                )
            )
    return results


def sarif_log(state: RunState, redact: Redactor) -> dict[str, Any]:
    """The SARIF 2.1.0 log of one run: one ``run``, the three rules, one result a refusal."""
    rules = [
        {
            "id": rule,
            "name": name,
            "shortDescription": {"text": short},
            "fullDescription": {"text": short},
            "defaultConfiguration": {"level": level},
            "helpUri": f"{INFO_URI}/blob/main/docs/security.md",
        }
        for rule, (name, short, level) in RULES.items()
    ]
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "anti-sprawl",
                        "version": __version__,
                        "informationUri": INFO_URI,
                        "rules": rules,
                    }
                },
                "automationDetails": {"id": f"anti-sprawl/{state.plan_id}/{state.run_id}"},
                "originalUriBaseIds": {"%SRCROOT%": {"description": {"text": "The repository."}}},
                "results": _results(state, redact),
                "properties": {"status": state.status, "branch": state.branch, "base": state.base},
            }
        ],
    }


def sarif_text(state: RunState, redact: Redactor) -> str:
    return json.dumps(sarif_log(state, redact), indent=2) + "\n"
