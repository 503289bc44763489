"""``anti-sprawl eval DIR``: load the cases, run baseline and ablations, report.

Exit status: 0 when every baseline case passes, 1 when one does not (ablations are expected
to fail checks: that is what they measure); a bad case or flag raises ``UsageError`` (2).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from ..errors import UsageError
from ..fs.files import atomic_write_text
from ..providers import select_provider
from ..providers.base import Provider
from ..providers.limits import default_output_limit
from ..sandbox.sandbox import SandboxPolicy
from ..views.terminal import inert_console
from .cases import Case, load_cases
from .metrics import CaseResult
from .report import markdown_report, render_suite
from .runner import EvalOptions, ProviderFactory, run_suite, scripted_provider, variants_for

__all__ = ["run_eval_command"]


def _factory(
    cases: Sequence[Case],
    provider: str | None,
    model: str | None,
    base_url: str | None,
    timeout: float | None = None,
) -> ProviderFactory:
    live = (provider is not None and provider.strip().lower() != "scripted") or bool(base_url)
    if not live:
        if base_url or (provider is None and model):
            raise UsageError("--model/--base-url need a live --provider")
        missing = [c.name for c in cases if c.script is None]
        if missing:
            raise UsageError(f"case(s) without a script for the scripted provider: {missing}")
        return scripted_provider
    # One live provider for every case; each run wraps it in its own recorder.
    chosen = select_provider(
        provider=provider,
        model=model,
        base_url=base_url,
        script=None,
        env=os.environ,
        timeout=timeout,
    )

    def live_provider(case: Case, repo: Path, root: Path) -> Provider:
        return chosen

    return live_provider


def run_eval_command(
    cases_dir: Path,
    *,
    provider: str | None = None,
    model: str | None = None,
    base_url: str | None = None,
    request_timeout: float | None = None,
    ablate: Sequence[str] = (),
    only: Sequence[str] = (),
    as_json: bool = False,
    report: Path | None = None,
    allow_unsandboxed: bool = False,
    keep: Path | None = None,
    console: Console | None = None,
    dask_scheduler: str | None = None,
    max_output_tokens: int | None = None,
) -> int:
    """Run the suite in ``cases_dir``; print a table (or one JSON document); 0/1 as above.

    ``only`` restricts to the named cases; ``keep`` leaves every case's directory there.
    """
    console = console or inert_console()
    if max_output_tokens is None and base_url and provider in (None, "openai"):
        # an OpenAI-compatible local server: 4,096 unless the model is one the table knows
        max_output_tokens = default_output_limit("openai", model or "", local_server=True)
    cases = load_cases(cases_dir, list(only) or None)
    variants = variants_for(ablate)
    factory = _factory(cases, provider, model, base_url, request_timeout)
    progress = inert_console(stderr=True) if as_json else console
    total = len(cases) * len(variants)
    finished: list[CaseResult] = []

    def on_case(result: CaseResult) -> None:
        finished.append(result)
        verdict = "pass" if result.passed else "FAIL"
        progress.print(
            f"[{len(finished)}/{total}] {result.variant} {result.case}: {verdict} "
            f"({result.wall_seconds:.1f} s)",
            markup=False,
        )

    opts = EvalOptions(
        provider_factory=factory,
        sandbox=SandboxPolicy(allow_unsandboxed=allow_unsandboxed),
        keep=keep,
        on_case=on_case,
        dask_scheduler=dask_scheduler,
        max_output_tokens=max_output_tokens,
    )
    suite = run_suite(cases, variants, opts)
    if report is not None:
        atomic_write_text(report, markdown_report(suite))
    if as_json:
        data = suite.model_dump(mode="json")
        console.file.write(json.dumps(data, indent=2) + "\n")
        console.file.flush()
    else:
        render_suite(suite, console)
        if report is not None:
            console.print(f"report: {report}", markup=False)
    return 0 if all(r.passed for r in suite.baseline.cases) else 1
