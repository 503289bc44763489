"""``anti-sprawl report RUN``: the whole run as one self-contained static HTML file.

A reviewer opens it from disk or a CI artifact, offline: the CSS and the DAG (inline SVG,
views/html_dag.py) are in the file, there is no script at all, and a strict
Content-Security-Policy (``default-src 'none'``: no script, no fetch, no frame; inline styles
only; images from ``data:`` only) means that even a tag slipping through could neither run nor
load anything. Nothing slips through by design: every text a model, a plan, a test command
or the repository wrote passes ``_t`` (the run's redactor, then ``html.escape`` with quotes,
so it is inert in element and attribute contexts alike), and the finished document passes the
redactor once more, like the PR body (views/pr_body.py). The data comes from
views/report_data.py, the records ``status``, ``inspect`` and ``pr`` read.

Layout: the run's header and totals, the DAG, a table of nodes, then per node its goal,
scopes and grants, the worker's summary (its own words), attempts, tokens per call against
the per-call cap (a small SVG bar chart), dollars, tests and their output tail, blocked
writes, the failure note, the last tool results, the diff, and each model call's context
manifest with the exact request behind a ``<details>``.
"""

from __future__ import annotations

import html
import shlex
from collections.abc import Callable
from pathlib import Path

from ..context.manifest import ContextManifest
from ..fs.files import atomic_write_text
from ..git.layout import RunPaths
from ..providers.prices import format_usd
from ..redact import Redactor
from ..run.commit_text import unclaimed_text
from ..run.failure_note import AttemptRecord
from ..run.journal import RunState
from .html_dag import STATUS_COLOURS, dag_svg, run_critical_path
from .report_data import CallUse, NodeData, as_text, collect, request_of
from .run import totals_line

__all__ = ["CSP", "report_html", "write_report"]

CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; "
    "form-action 'none'"
)
CHART_W, CHART_H = 560, 90

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1100px;padding:16px;color:#222}
h1{font-size:22px}h2{font-size:18px;border-top:1px solid #ccc;padding-top:12px;margin-top:28px}
h3{font-size:15px;margin:16px 0 6px}
pre{background:#f6f6f6;padding:8px;overflow:auto;white-space:pre-wrap;word-break:break-word}
table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid #ddd;padding:3px 7px;
text-align:left;vertical-align:top}th{background:#f0f0f0}
.status{display:inline-block;padding:1px 8px;border-radius:9px;font-weight:600}
.claim{border-left:4px solid #bbb;padding-left:10px;color:#444}
.untrusted{color:#9a5b00}.trusted{color:#1d6b2f}.dropped{color:#888}
.dag{overflow:auto;border:1px solid #ddd;padding:4px;background:#fcfcfc}
#dag .node rect{stroke:#555;stroke-width:1}#dag .node.critical rect{stroke:#000;stroke-width:3}
#dag .edge{stroke:#888;stroke-width:1.2}#dag .edge.critical{stroke:#000;stroke-width:2.6}
#dag text{font:12px system-ui,sans-serif;fill:#111}#dag .tid{font-weight:700}
.chart .cap{stroke:#c00;stroke-dasharray:4 3}.chart .bar{fill:#4a7fb5}.chart text{font:11px sans-serif}
.diff .add{color:#116329;background:#e6ffec}.diff .del{color:#82071e;background:#ffebe9}
.diff .hunk{color:#0550ae}
.legend span{margin-right:10px}
"""


def _t(redact: Callable[[str], str], text: object) -> str:
    """Untrusted text, redacted and made inert for an element or a quoted attribute."""
    return html.escape(redact(str(text)), quote=True)


def anchor(task_id: str) -> str:
    return f"node-{task_id}"


class _Page:
    """The document, built as a list of fragments (linear in the run's size)."""

    def __init__(self, redact: Callable[[str], str]):
        self.redact = redact
        self.parts: list[str] = []

    def t(self, text: object) -> str:
        return _t(self.redact, text)

    def add(self, *fragments: str) -> None:
        self.parts.extend(fragments)

    def pre(self, text: str, cls: str = "") -> None:
        attr = f' class="{cls}"' if cls else ""
        self.add(f"<pre{attr}>{self.t(text)}</pre>")

    def table(
        self, heads: list[str], rows: list[list[str]], row_cls: list[str] | None = None
    ) -> None:
        """A table of already-escaped cells."""
        self.add("<table><tr>", *(f"<th>{h}</th>" for h in heads), "</tr>")
        for i, row in enumerate(rows):
            cls = f' class="{row_cls[i]}"' if row_cls and row_cls[i] else ""
            self.add(f"<tr{cls}>", *(f"<td>{c}</td>" for c in row), "</tr>")
        self.add("</table>")


def _badge(status: str) -> str:
    colour = STATUS_COLOURS.get(status, STATUS_COLOURS["pending"])
    return f'<span class="status" style="background:{colour}">{html.escape(status)}</span>'


def _chart(calls: list[CallUse], cap: int) -> str:
    """One bar per model call (input + output tokens), the per-call cap as a dashed line."""
    top = max([cap, *(c.total for c in calls)]) or 1
    step = CHART_W / max(1, len(calls))
    bars = []
    for i, c in enumerate(calls):
        h = round(c.total / top * (CHART_H - 14))
        x, w = round(i * step) + 1, max(1, round(step) - 2)
        tip = (
            f"attempt {c.attempt}, call {c.call}: {c.input_tokens:,} in + {c.output_tokens:,} out"
            f" = {c.total:,} of {cap:,}"
        )
        bars.append(
            f'<rect class="bar" x="{x}" y="{CHART_H - h}" width="{w}" height="{h}">'
            f"<title>{html.escape(tip)}</title></rect>"
        )
        if step >= 44:  # room for the figure above the bar
            bars.append(f'<text x="{x + 2}" y="{CHART_H - h - 3}">{c.total:,}</text>')
    cap_y = CHART_H - round(cap / top * (CHART_H - 14))
    return (
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{CHART_W}" '
        f'height="{CHART_H}" role="img" aria-label="tokens per call against the cap">'
        f'{"".join(bars)}<line class="cap" x1="0" x2="{CHART_W}" y1="{cap_y}" y2="{cap_y}"/>'
        f'<text x="4" y="{max(10, cap_y - 3)}">cap {cap:,}/call</text></svg>'
    )


def _attempt_row(p: _Page, a: AttemptRecord) -> list[str]:
    return [
        str(a.attempt),
        p.t(a.outcome),
        p.t(a.reason or ""),
        p.t(a.message),
        p.t(a.model or "-"),
        f"{a.tokens.total:,}",
        p.t(format_usd(a.cost_usd)),
        str(a.calls),
        str(a.tool_calls),
    ]


def _diff(p: _Page, d: NodeData) -> None:
    if not d.diff:
        p.add("<p>No change landed.</p>")
        return
    lines = []
    for line in d.diff.splitlines():
        cls = ""
        if line.startswith("+") and not line.startswith("+++"):
            cls = "add"
        elif line.startswith("-") and not line.startswith("---"):
            cls = "del"
        elif line.startswith("@@"):
            cls = "hunk"
        text = p.t(line)
        lines.append(f'<span class="{cls}">{text}</span>' if cls else text)
    p.add(
        f"<details><summary>diff ({p.t(d.diff_source)}, {len(d.diff.splitlines()):,} lines)"
        f'</summary><pre class="diff">',
        "\n".join(lines),
        "</pre></details>",
    )


def _manifest(p: _Page, paths: RunPaths, m: ContextManifest) -> None:
    untrusted = sum(i.tokens for i in m.items if i.trust == "untrusted")
    p.add(
        f'<details class="manifest"><summary>call {m.n} · attempt {m.attempt} · '
        f"{p.t(m.call_id)} · {p.t(m.model or '-')} · {len(m.items)} items, "
        f"{m.total_tokens:,} tokens ({untrusted:,} untrusted), {len(m.dropped)} dropped</summary>"
    )
    rows = [
        [
            str(i),
            p.t(it.kind),
            p.t(it.source),
            f'<span class="{it.trust}">{it.trust}</span>',
            f"{it.tokens:,}",
            f"{it.hidden_chars} hidden chars" if it.hidden_chars else "",
        ]
        for i, it in enumerate(m.items)
    ]
    classes = [""] * len(rows)
    for dropped in m.dropped:
        rows.append(
            [
                "-",
                p.t(dropped.kind),
                p.t(dropped.source),
                "",
                f"{dropped.tokens:,}",
                f"dropped: {p.t(dropped.reason)}",
            ]
        )
        classes.append("dropped")
    p.table(["#", "kind", "from", "trust", "tokens", "note"], rows, classes)
    if m.choices:
        p.table(
            ["file", "scope", "form", "why", "tokens", "whole"],
            [
                [
                    p.t(c.path),
                    c.scope,
                    p.t(c.form),
                    p.t(c.reason),
                    f"{c.tokens:,}",
                    f"{c.whole_tokens:,}",
                ]
                for c in m.choices
            ],
        )
    request = request_of(paths, m)
    if request is None:
        p.add("<p>The exact request was not kept for this call.</p>")
    else:
        p.add("<details><summary>the exact request</summary>")
        p.pre(request)
        p.add("</details>")
    p.add("</details>")


def _evidence(p: _Page, d: NodeData) -> None:
    """Tests, blocked writes, the failure note and the last tool results."""
    r, rep = d.record, d.report
    tests = r.tests
    if tests is not None:
        verdict = "passed" if tests.passed else ("timed out" if tests.timed_out else "failed")
        p.add(
            f"<h3>Tests: {verdict} (exit {p.t(tests.exit_code)})</h3>"
            f"<p><code>{p.t(shlex.join(tests.command))}</code></p>"
        )
        if tests.tail:
            p.pre(tests.tail)
    elif rep.test_command:
        p.add(
            f"<h3>Tests of the failing attempt</h3><p><code>{p.t(shlex.join(rep.test_command))}</code></p>"
        )
        if rep.test_tail:
            p.pre(rep.test_tail)
    if r.violations:
        p.add(f"<h3>Blocked ({len(r.violations)})</h3>")
        p.table(
            ["op", "path", "reason", "detail"],
            [[p.t(v.op), p.t(v.path), p.t(v.reason), p.t(v.detail)] for v in r.violations],
        )
    if rep.note:
        p.add("<h3>Failure note (what the next attempt was told)</h3>")
        p.pre(rep.note)
    if rep.tool_results:
        p.add("<h3>Last tool results</h3>")
        for result in rep.tool_results:
            p.pre(result)


def _node(p: _Page, paths: RunPaths, d: NodeData) -> None:
    node, r = d.node, d.record
    p.add(
        f'<section class="node" id="{p.t(anchor(node.task_id))}">'
        f"<h2>{p.t(node.task_id)}: {p.t(node.name)} {_badge(d.status)}</h2>"
        f"<p>{p.t(d.verdict)}</p><h3>Goal</h3>"
    )
    p.pre(node.goal)
    p.add("<h3>Scopes</h3>")
    p.table(
        ["read", "write"],
        [
            [
                "<br>".join(map(p.t, node.read_scope)) or "-",
                "<br>".join(map(p.t, node.write_scope)) or "-",
            ]
        ],
    )
    if d.grants:
        p.add("<p>Granted during the run:</p><ul>")
        p.add(*(f"<li>{p.t(as_text(g))}</li>" for g in d.grants), "</ul>")
    if r.summary is not None:
        p.add('<h3>What the worker says it did (its words, not checked)</h3><div class="claim">')
        p.pre(r.summary.summary)
        if r.summary.interfaces.strip():
            p.add("<p>Interfaces:</p>")
            p.pre(r.summary.interfaces)
        p.add("</div>")
    elif r.unclaimed:
        p.add(f"<h3>No summary</h3><p>{p.t(unclaimed_text(r.unclaimed))}</p>")
    spend = (
        f"{(r.total_tokens.total or r.tokens.total):,} tokens ({r.token_budget:,}/call cap), "
        f"{p.t(format_usd(r.cost_usd))}, {r.tool_calls}/{r.max_tool_calls} tool calls, "
        f"model {p.t(r.model or '-')}"
    )
    p.add(f"<h3>Spend</h3><p>{spend}</p>")
    if d.calls:
        p.add(_chart(d.calls, r.token_budget))
    if r.attempt_log:
        p.add("<h3>Attempts</h3>")
        heads = ["#", "outcome", "reason", "message", "model", "tokens", "cost", "calls", "tools"]
        p.table(heads, [_attempt_row(p, a) for a in r.attempt_log])
    _evidence(p, d)
    p.add("<h3>Diff</h3>")
    _diff(p, d)
    p.add(f"<h3>Context manifests ({len(d.manifests)} calls)</h3>")
    for m in d.manifests:
        _manifest(p, paths, m)
    p.add("</section>")


def report_html(state: RunState, paths: RunPaths, repo: Path, redactor: Redactor) -> str:
    """The report of ``state`` as one HTML document (redacted, every outside text escaped)."""
    nodes = collect(state, paths, repo)
    p = _Page(redactor)
    title = f"anti-sprawl run {state.run_id}"
    p.add(
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{p.t(title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>{p.t(title)} {_badge(state.status)}</h1>"
    )
    p.table(
        ["plan", "branch", "base", "created", "provider / model", "sandbox"],
        [
            [
                p.t(state.plan_id),
                p.t(state.branch),
                p.t(state.base[:12]),
                p.t(state.created_at),
                p.t(f"{state.provider} / {state.model}"),
                p.t(state.sandbox or "n/a"),
            ]
        ],
    )
    p.add(f"<p>{p.t(totals_line(state))}</p><h3>Requirement</h3>")
    p.pre(state.plan.requirement)
    critical = run_critical_path(state.plan, state.tasks)
    statuses = {d.node.task_id: d.status for d in nodes}
    legend = "".join(f"<span>{_badge(s)}</span>" for s in STATUS_COLOURS)
    p.add(
        "<h2>Task graph</h2>"
        f'<p class="legend">{legend} bold outline: the critical path '
        f"({p.t(' → '.join(critical))})</p>"
        f'<div class="dag">{dag_svg(state.plan, statuses, critical, anchor)}</div>'
    )
    p.add("<h2>Nodes</h2>")
    p.table(
        ["node", "status", "tokens (cap/call)", "cost", "blocked", "tests"],
        [
            [
                f'<a href="#{p.t(anchor(d.node.task_id))}">{p.t(d.node.task_id)}</a>',
                _badge(d.status),
                f"{(d.record.total_tokens.total or d.record.tokens.total):,} ({d.record.token_budget:,})",
                p.t(format_usd(d.record.cost_usd)),
                str(len(d.record.violations)),
                "-"
                if d.record.tests is None
                else ("passed" if d.record.tests.passed else "failed"),
            ]
            for d in nodes
        ],
    )
    for d in nodes:
        _node(p, paths, d)
    p.add("</body></html>\n")
    return redactor("".join(p.parts))


def write_report(
    state: RunState, paths: RunPaths, repo: Path, redactor: Redactor, out: Path
) -> Path:
    """Write the report to ``out`` (atomically); returns the path written."""
    atomic_write_text(out, report_html(state, paths, repo, redactor))
    return out
