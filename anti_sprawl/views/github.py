"""GitHub's own surfaces for a plan and a run: the issue comment a reviewer approves, the job's
step summary and its ``::error`` annotations.

The plan comment is *sticky*: one comment per issue, found again by the hidden ``STICKY``
marker and edited in place (cli/github.py). It carries the plan file itself, base64 in an HTML
comment (base64 has no ``--``, so it cannot end the comment), and the sha256 of those bytes in
a second marker: ``/anti-sprawl approve`` runs exactly the plan that was shown, and
``execute --plan-sha256`` refuses any other (cli/ci.py).

Everything a model, a plan or a repository wrote is made inert for Markdown (views/markdown.py)
and, in workflow commands, escaped by GitHub's rules (``%``, CR and LF in data; also ``:`` and
``,`` in properties) with ``::`` broken up, so no text can start a command of its own.
"""

from __future__ import annotations

import base64
import binascii
import re
from pathlib import PurePosixPath

from ..plan.graph import plan_layers
from ..plan.model import Plan
from ..planner.estimate import Estimate
from ..providers.prices import format_usd
from ..run.journal import RunState
from ..run.result import TaskResult
from .markdown import code, fence_for, text
from .plan import plan_mermaid
from .run import status_of, totals_line

__all__ = [
    "STICKY",
    "error_annotations",
    "escape_data",
    "escape_property",
    "plan_comment",
    "plan_in_comment",
    "result_comment",
    "step_summary",
]

STICKY = "<!-- anti-sprawl:sticky -->"
_HASH = re.compile(r"<!-- anti-sprawl:plan sha256=([0-9a-f]{64}) -->")
_PAYLOAD = re.compile(r"<!-- anti-sprawl:plan-file ([A-Za-z0-9+/=]*) -->")
# C0 controls but tab, LF and CR (escaped instead), and DEL: nothing a log line needs.
_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _table_row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _scopes(entries: list[str]) -> str:
    return "<br>".join(code(e) for e in entries) if entries else "-"


def _estimate_lines(est: Estimate | None) -> list[str]:
    if est is None:
        return []
    lines = [
        "### Estimated cost",
        "",
        _table_row(["task", "model", "tokens", "dollars", "tries"]),
        _table_row(["---", "---", "---:", "---:", "---:"]),
    ]
    for t in est.tasks:
        usd = "-" if t.usd_high is None else f"{format_usd(t.usd_low)}..{format_usd(t.usd_high)}"
        lines.append(
            _table_row(
                [code(t.task_id), code(t.model), f"{t.low:,}..{t.high:,}", usd, str(t.attempts)]
            )
        )
    usd_total = f", {format_usd(est.usd_low)} to {format_usd(est.usd_high)}" if est.usd_high else ""
    lines += ["", f"**Total**: {est.low:,} to {est.high:,} tokens{usd_total}."]
    if est.unpriced:
        lines.append(f"No price (tokens only): {', '.join(code(m) for m in est.unpriced)}.")
    if est.critical_path:
        chain = " → ".join(code(t) for t in est.critical_path)
        lines.append(f"Critical path: {chain} ({est.critical_calls:,} model calls at most).")
    return [*lines, ""]


def plan_comment(
    plan: Plan,
    plan_bytes: bytes,
    sha256: str,
    est: Estimate | None,
    trigger: str = "/anti-sprawl",
) -> str:
    """The sticky comment of a planned issue: the DAG as mermaid, the scopes, the estimate,
    how to approve, and the plan file itself (hidden) with its hash."""
    mermaid = plan_mermaid(plan)
    fence = fence_for(mermaid)
    layers = {t.task_id: i for i, layer in enumerate(plan_layers(plan)) for t in layer}
    lines = [
        STICKY,
        f"## anti-sprawl plan {code(plan.plan_id)}",
        "",
        f"{len(plan.tasks)} task(s) in {len(set(layers.values()))} layer(s). Plan sha256: "
        f"`{sha256}`.",
        "",
        f"{fence}mermaid",
        mermaid.rstrip("\n"),
        fence,
        "",
        "### Scopes",
        "",
        _table_row(["task", "layer", "after", "writes", "reads", "budget"]),
        _table_row(["---", "---:", "---", "---", "---", "---:"]),
    ]
    for t in plan.tasks:
        after = ", ".join(code(d) for d in t.dependencies) or "-"
        budget = f"{t.token_budget:,} tokens, {t.max_tool_calls} tool calls"
        lines.append(
            _table_row(
                [
                    f"{code(t.task_id)} {text(t.name)}",
                    str(layers.get(t.task_id, 0)),
                    after,
                    _scopes(t.write_scope),
                    _scopes(t.read_scope),
                    budget,
                ]
            )
        )
    lines += ["", *_estimate_lines(est)]
    lines += [
        "### Next",
        "",
        f"- `{trigger} approve {sha256[:12]}` (write access): run exactly this plan and open "
        "its pull request (a draft when a node fails).",
        f"- `{trigger} plan`: plan again. `{trigger} cancel`: drop this plan.",
        "",
        f"<!-- anti-sprawl:plan sha256={sha256} -->",
        f"<!-- anti-sprawl:plan-file {base64.b64encode(plan_bytes).decode('ascii')} -->",
    ]
    return "\n".join(lines) + "\n"


def plan_in_comment(body: str) -> tuple[str, bytes] | None:
    """(sha256 the comment states, the plan file's bytes) from a sticky comment, else None."""
    stated, payload = _HASH.search(body), _PAYLOAD.search(body)
    if stated is None or payload is None:
        return None
    try:
        data = base64.b64decode(payload.group(1), validate=True)
    except binascii.Error:
        return None
    return stated.group(1), data


def result_comment(headline: str, details: list[str]) -> str:
    """A sticky comment that holds no plan (cancelled, refused, done): nothing to approve."""
    lines = [STICKY, f"## anti-sprawl: {text(headline)}", ""]
    lines += [f"- {text(d)}" for d in details]
    return "\n".join(lines) + "\n"


# --- workflow commands -------------------------------------------------------------------


def _one_line(value: str) -> str:
    # "::" anywhere could read as a command once a line is split; break it up.
    return _CONTROLS.sub("", value).replace("::", ": :")


def escape_data(value: str) -> str:
    """A workflow command's message: ``%``, CR and LF escaped (GitHub's toolkit rules)."""
    return _one_line(value).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: str) -> str:
    """A workflow command's property value: as ``escape_data``, and ``:`` and ``,`` too."""
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


def _located(r: TaskResult, write_scope: list[str]) -> str | None:
    """A repository path the failure is about: a blocked write, a changed file, a scope file."""
    for candidate in [
        *(v.path for v in r.violations),
        *r.files_changed,
        *write_scope,
    ]:
        path = PurePosixPath(candidate)
        plain = not any(c in candidate for c in "*?[")  # a glob is no file
        if candidate and plain and not path.is_absolute() and ".." not in path.parts:
            return candidate
    return None


def error_annotations(state: RunState) -> list[str]:
    """One ``::error`` line per failed node (``::warning`` per skipped or unfinished one)."""
    out: list[str] = []
    for task in state.plan.tasks:
        r = state.tasks.get(task.task_id)
        if r is None or r.status == "succeeded":
            continue
        status = status_of(r)
        kind = "error" if r.status == "failed" else "warning"
        where = _located(r, list(task.write_scope))
        props = f"file={escape_property(where)}," if where else ""
        props += f"title={escape_property(f'anti-sprawl node {task.task_id} {status}')}"
        why = f"{r.reason}: {r.message}" if r.reason else (r.message or status)
        out.append(f"::{kind} {props}::{escape_data(why)}")
    return out


def step_summary(state: RunState, pr_url: str | None = None) -> str:
    """The job's summary: the verdict, the nodes table, the PR."""
    lines = [
        f"## anti-sprawl run {code(state.run_id)}: {text(state.status)}",
        "",
        text(totals_line(state)),
        "",
        _table_row(["task", "status", "reason", "tokens", "blocked writes"]),
        _table_row(["---", "---", "---", "---:", "---:"]),
    ]
    for task in state.plan.tasks:
        r = state.tasks.get(task.task_id)
        if r is None:
            continue
        why = text(f"{r.reason}: {r.message}"[:300]) if r.reason else "-"
        lines.append(
            _table_row(
                [
                    code(r.task_id),
                    status_of(r),
                    why,
                    f"{r.total_tokens.total:,}",
                    str(len(r.violations)),
                ]
            )
        )
    lines.append("")
    lines.append(f"Branch: {code(state.branch)}")
    if pr_url:
        lines.append(f"Pull request: {text(pr_url)}")
    return "\n".join(lines) + "\n"
