"""The evaluation suite: cases, end-to-end runs with ablations, metrics and reports.

cases.py     case.yaml -> Case (fixture, plan or planner, script, env, checks)
fixture.py   the fixture as a fresh git repo; the result branch's diff, log, checkout
recorder.py  RecordingProvider: every request and the usage reported for it
runner.py    run_case / run_suite over variants (baseline, -firewall, ...)
checks.py    evidence from git, the run directory and the requests -> CheckOutcome
metrics.py   CaseResult, Aggregate, SuiteResult
report.py    Rich tables, markdown
cli.py       run_eval_command (``anti-sprawl eval``)
"""

from __future__ import annotations

from .cases import Case, Checks, TaskExpectation, load_case, load_cases
from .metrics import Aggregate, CaseResult, CheckOutcome, SuiteResult, TaskMetrics, Tokens
from .runner import BASELINE, EvalOptions, Variant, run_case, run_suite, variants_for

__all__ = [
    "BASELINE",
    "Aggregate",
    "Case",
    "CaseResult",
    "CheckOutcome",
    "Checks",
    "EvalOptions",
    "SuiteResult",
    "TaskExpectation",
    "TaskMetrics",
    "Tokens",
    "Variant",
    "load_case",
    "load_cases",
    "run_case",
    "run_suite",
    "variants_for",
]
