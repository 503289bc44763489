"""The evaluation report: Rich tables for people, markdown for a file, JSON via the models.

Per variant, one row per case; with ablations, a comparison in the shape of the seeds' table
(rows are metrics, columns are baseline and each boundary switched off) and the input-token
ratio of scoping off against the baseline.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Console
from rich.table import Table

from ..tables import print_table
from .metrics import Aggregate, CaseResult, SuiteResult, VariantResult

__all__ = ["comparison_rows", "markdown_report", "render_suite"]


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _rate(done: int, total: int) -> str:
    return f"{done}/{total} ({done / total:.0%})" if total else "-"


def _per_task(a: Aggregate) -> str:
    r = a.tokens_per_succeeded_task
    return "-" if r is None else f"{r.input:,.0f} / {r.output:,.0f} / {r.cached:,.0f}"


_ROWS: list[tuple[str, Callable[[Aggregate], str]]] = [
    ("success rate (cases passing every check)", lambda a: _rate(a.passed, a.cases)),
    ("task completion rate (final)", lambda a: _rate(a.tasks_succeeded, a.tasks)),
    ("tasks done on the first attempt", lambda a: _rate(a.tasks_first_attempt, a.tasks)),
    ("tasks retried (attempts in all)", lambda a: f"{a.retried} ({a.attempts})"),
    ("tokens per task (tasks that ran)", lambda a: _num(a.tokens_per_task)),
    ("tokens per succeeded task (in / out / cached)", _per_task),
    ("input tokens per call", lambda a: _num(a.input_per_call)),
    ("first-call prompt tokens per task", lambda a: _num(a.first_call_input)),
    ("tool calls", lambda a: f"{a.tool_calls:,}"),
    ("violations blocked", lambda a: f"{a.violations:,}"),
    ("out-of-scope changes landed", lambda a: f"{a.out_of_scope:,}"),
    ("canary leaks", lambda a: f"{a.leaks:,}"),
    ("cross-task context leaks", lambda a: f"{a.cross_task_leaks:,}"),
    ("tokens agree (journal = provider)", lambda a: "yes" if a.tokens_agree else "NO"),
    ("wall time", lambda a: f"{a.wall_seconds:.1f} s"),
]


def comparison_rows(suite: SuiteResult) -> list[tuple[str, list[str]]]:
    """(metric, one formatted value per variant) in the report's order."""
    aggs = [v.aggregate for v in suite.variants]
    return [(label, [fmt(a) for a in aggs]) for label, fmt in _ROWS]


def _ratio_lines(suite: SuiteResult) -> list[str]:
    lines = []
    if suite.scoping_input_ratio is not None:
        lines.append(
            f"input tokens, -scoping / baseline, over the {suite.scoping_paired_calls} model "
            f"calls both made: {suite.scoping_input_ratio}x"
        )
    if suite.scoping_first_call_ratio is not None:
        lines.append(
            f"first-call prompt tokens, -scoping / baseline: {suite.scoping_first_call_ratio}x"
        )
    return lines


def _case_cells(r: CaseResult) -> list[str]:
    t = r.tokens
    ok = sum(task.status == "succeeded" for task in r.tasks)
    failed = ", ".join(c.name for c in r.failed_checks)
    return [
        r.case,
        "pass" if r.passed else f"FAIL: {failed}",
        r.run_status,
        f"{ok}/{len(r.tasks)}",
        f"{sum(task.first_attempt for task in r.tasks)}/{len(r.tasks)}",
        f"{t.input_tokens:,}",
        f"{t.output_tokens:,}",
        f"{t.cache_read_tokens:,}",
        f"{sum(task.calls for task in r.tasks)}",
        f"{sum(task.tool_calls for task in r.tasks)}",
        f"{sum(task.violations for task in r.tasks)}",
        f"{len(r.out_of_scope)}",
        f"{len({leak.needle for leak in r.leaks})}",
        "yes" if r.tokens_agree else "NO",
        f"{r.wall_seconds:.1f}",
    ]


_CASE_HEADERS = [
    "case",
    "verdict",
    "run",
    "tasks ok",
    "1st try",
    "input",
    "output",
    "cached",
    "calls",
    "tools",
    "blocked",
    "out-of-scope",
    "leaks",
    "agree",
    "s",
]


def _variant_table(variant: VariantResult) -> Table:
    table = Table(title=f"eval: {variant.name}", title_justify="left")
    for header in _CASE_HEADERS:
        numeric = header not in ("case", "verdict", "run", "agree")
        table.add_column(header, justify="right" if numeric else "left", overflow="fold")
    for result in variant.cases:
        table.add_row(*_case_cells(result), style=None if result.passed else "red")
    return table


def _failures(variant: VariantResult) -> list[str]:
    lines = []
    for r in variant.cases:
        for c in r.failed_checks:
            lines.append(f"{variant.name} / {r.case} / {c.name}: {c.detail}")
    return lines


def _planner_lines(variant: VariantResult) -> list[str]:
    lines = []
    for r in variant.cases:
        if r.planner_tokens is not None:
            t = r.planner_tokens
            lines.append(
                f"{variant.name} / {r.case}: planner {t.input_tokens:,} input / {t.output_tokens:,} output "
                f"tokens (not in the task figures)"
            )
    return lines


def render_suite(suite: SuiteResult, console: Console) -> None:
    """Per-variant case tables, failed checks, and the comparison when there are ablations."""
    for variant in suite.variants:
        # case names are never broken: one block per case when the table cannot fit
        print_table(console, _variant_table(variant), {"case", "run"})
        for line in [*_planner_lines(variant), *_failures(variant)]:
            console.print(f"  {line}", markup=False, highlight=False)
    if len(suite.variants) > 1:
        table = Table(title="baseline vs ablations", title_justify="left")
        table.add_column("metric")
        for variant in suite.variants:
            table.add_column(variant.name, justify="right")
        for label, values in comparison_rows(suite):
            table.add_row(label, *values)
        print_table(console, table, {"metric"})
        for line in _ratio_lines(suite):
            console.print(line, markup=False, highlight=False)
    base = suite.baseline.aggregate
    console.print(
        f"baseline: {base.passed}/{base.cases} cases passed, "
        f"{base.out_of_scope} out-of-scope changes landed, {base.leaks} canary leaks",
        markup=False,
        highlight=False,
    )


def _md_row(cells: list[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def markdown_report(suite: SuiteResult) -> str:
    """The whole report as markdown (case tables, comparison, failed checks)."""
    out = ["# anti-sprawl evaluation", ""]
    if len(suite.variants) > 1:
        out += ["## Baseline vs ablations", ""]
        out.append(_md_row(["metric", *(v.name for v in suite.variants)]))
        out.append(_md_row(["---"] * (len(suite.variants) + 1)))
        out += [_md_row([label, *values]) for label, values in comparison_rows(suite)]
        out += ["", *(f"- {line}" for line in _ratio_lines(suite)), ""]
    for variant in suite.variants:
        out += [f"## Cases: {variant.name}", ""]
        out.append(_md_row(_CASE_HEADERS))
        out.append(_md_row(["---"] * len(_CASE_HEADERS)))
        out += [_md_row(_case_cells(r)) for r in variant.cases]
        out += [f"- {line}" for line in _planner_lines(variant)]
        failures = _failures(variant)
        if failures:
            out += ["", "Failed checks:", "", *(f"- {line}" for line in failures)]
        out.append("")
    return "\n".join(out)
