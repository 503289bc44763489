"""Running cases end to end: fixture repo -> (planner) -> execute -> evidence -> checks.

Each case runs in its own temporary directory with a fresh provider wrapped in a recorder, so
what the metrics say comes from that run alone. A variant switches boundaries off through
``RunSettings.ablations`` and changes nothing else: same cases, same scripts.

Over 300 lines: one case's run (fixture, provider, recorder, executor, checks) reads top to
bottom here; its pieces are only ever used together.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..agent.budget import total_usage
from ..errors import AntiSprawlError, UsageError
from ..git.layout import StateLayout
from ..ids import PLANNER_TASK_ID
from ..plan.model import Plan
from ..planner.planner import plan_requirement
from ..providers.base import Provider, raw_request_tokens
from ..providers.scripted import Script, ScriptedProvider
from ..redact import Redactor, env_secrets
from ..run.ablations import ABLATIONS, Ablations
from ..run.dask_executor import DaskExecutor
from ..run.journal import RunState
from ..run.remote_settings import DaskSettings, ProviderSpec
from ..run.runner import ExecuteOptions, RunSettings, execute, resume
from ..sandbox.sandbox import SandboxPolicy
from .cases import Case
from .checks import Evidence, find_cross_task_leaks, find_leaks, out_of_scope, score
from .fixture import changed_files, make_fixture_repo
from .metrics import (
    CaseResult,
    SuiteResult,
    TaskMetrics,
    Tokens,
    VariantResult,
    aggregate,
    paired_input_ratio,
    ratio,
)
from .recorder import RecordedCall, RecordingProvider

__all__ = [
    "BASELINE",
    "EvalOptions",
    "ProviderFactory",
    "Variant",
    "run_case",
    "run_suite",
    "scripted_provider",
    "variants_for",
]

# (case, repository, case directory) -> the provider for one run of that case.
ProviderFactory = Callable[[Case, Path, Path], Provider]


@dataclass(frozen=True)
class Variant:
    """Baseline, or one boundary switched off."""

    name: str
    ablate: frozenset[str] = frozenset()


BASELINE = Variant("baseline")


def variants_for(ablate: Sequence[str]) -> list[Variant]:
    """Baseline first, then one variant per named ablation (``all`` names every one)."""
    names: list[str] = []
    for raw in ablate:
        for name in ABLATIONS if raw == "all" else (raw,):
            if name not in ABLATIONS:
                choices = ", ".join((*ABLATIONS, "all"))
                raise UsageError(f"unknown ablation {name!r} (choose from {choices})")
            if name not in names:
                names.append(name)
    return [BASELINE, *(Variant(f"-{n}", frozenset({n})) for n in names)]


def scripted_provider(case: Case, repo: Path, root: Path) -> Provider:
    """The case's own script, with its ``${EVAL_*}`` placeholders filled in."""
    return ScriptedProvider(Script.from_data(case.script_data(repo, root), source=str(case.script)))


@dataclass
class EvalOptions:
    """How cases are run; ``keep`` leaves each case's directory under that folder."""

    provider_factory: ProviderFactory = scripted_provider
    sandbox: SandboxPolicy = field(default_factory=SandboxPolicy)
    test_timeout: float = 120.0
    keep: Path | None = None
    on_case: Callable[[CaseResult], None] | None = None
    max_output_tokens: int | None = None  # None: the provider/model default
    # ``--executor dask``: the Dask scheduler the cases' nodes run on (None: here).
    dask_scheduler: str | None = None


@contextmanager
def _workdir(case: Case, variant: Variant, keep: Path | None) -> Iterator[Path]:
    prefix = f"anti-sprawl-eval-{variant.name.strip('-')}-{case.name}-"
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        yield Path(tempfile.mkdtemp(prefix=prefix, dir=keep)).resolve()
        return
    root = Path(tempfile.mkdtemp(prefix=prefix)).resolve()
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _command_env(case: Case) -> dict[str, str]:
    """The source the sandbox's allow-list picks a command's variables from: this process's,
    with the case's on top (canaries the run must not leak; docs/security.md P17).

    The case's variables never enter this process's own environment, so no program the
    orchestrator runs, nor how it runs, depends on them; nor do they choose the command's
    toolchain (``PATH``, ``$VIRTUAL_ENV``: sandbox/policy.py binds what they name).
    """
    # Our interpreter first, so `python` and `python -m pytest` in test commands resolve to
    # one that has pytest.
    path = f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    env = {**os.environ, **case.env, "PATH": path}
    env.pop("VIRTUAL_ENV", None)
    if "VIRTUAL_ENV" in os.environ:
        env["VIRTUAL_ENV"] = os.environ["VIRTUAL_ENV"]
    return env


def _plan(
    case: Case, repo: Path, manifests: Path, provider: Provider, max_output_tokens: int | None
) -> tuple[Plan | None, Tokens | None, str | None]:
    """(plan, planner tokens, error): the case's plan file, or what the planner made."""
    if not case.uses_planner:
        return case.load_plan(), None, None
    result = plan_requirement(
        case.requirement,
        repo,
        provider,
        manifest_dir=manifests,
        max_output_tokens=max_output_tokens,
    )
    tokens = result.usage
    if not result.ok or result.plan is None:
        return None, tokens, f"planner: {result.outcome}: {result.message}"
    return result.plan, tokens, None


def _task_metrics(
    plan: Plan | None, state: RunState | None, calls: list[RecordedCall], recount: bool
) -> list[TaskMetrics]:
    if plan is None or state is None:
        return []
    out = []
    for node in plan.tasks:
        record = state.tasks[node.task_id]
        mine = [c for c in calls if c.request.task_id == node.task_id]
        answered = [(c.request, c.usage) for c in mine if c.usage is not None]
        tries = record.attempt_log
        out.append(
            TaskMetrics(
                task_id=node.task_id,
                status=record.status,
                reason=record.reason,
                # every attempt's calls, as the provider saw them
                tokens=record.total_tokens if tries else record.tokens,
                provider_tokens=total_usage([u for _, u in answered]),
                recounted_input=sum(raw_request_tokens(r) for r, _ in answered)
                if recount
                else None,
                calls=sum(a.calls for a in tries) if tries else record.calls,
                recorded_calls=len(mine),
                first_call_input=answered[0][1].input_tokens if answered else None,
                call_inputs=[u.input_tokens for _, u in answered],
                tool_calls=sum(a.tool_calls for a in tries) if tries else record.tool_calls,
                violations=len(record.violations),
                attempts=max(1, record.attempts),
                first_attempt=bool(tries) and tries[0].outcome == "succeeded",
                empty_success=record.status == "succeeded"
                and not record.files_changed
                and node.expect_changes,
                unclaimed=bool(record.unclaimed),
            )
        )
    return out


@dataclass
class _Outcome:
    """What running one case produced, before scoring."""

    plan: Plan | None = None
    state: RunState | None = None
    error: str | None = None
    planner_tokens: Tokens | None = None


def _run(
    case: Case, variant: Variant, opts: EvalOptions, repo: Path, base: str, env: dict[str, str]
) -> tuple[_Outcome, RecordingProvider]:
    """Plan (file or planner) and execute ``case`` on ``repo``; the case's variables reach the
    redactor (its canaries) and the commands' environment, never this process's."""
    provider = RecordingProvider(opts.provider_factory(case, repo, repo.parent))
    redactor = Redactor(env_secrets(env))
    out = _Outcome()
    try:
        out.plan, out.planner_tokens, out.error = _plan(
            case, repo, repo.parent / "planner-manifests", provider, opts.max_output_tokens
        )
        if out.plan is not None:
            settings = RunSettings(
                jobs=case.jobs,
                branch=f"eval/{case.name}",
                base=base,
                sandbox=opts.sandbox,
                test_timeout=opts.test_timeout,
                command_env=env,
                ablations=Ablations.of(variant.ablate),
                max_output_tokens=opts.max_output_tokens,
            )
            with _executor(opts.dask_scheduler, provider.inner) as run_job:
                run_opts = ExecuteOptions(provider=provider, settings=settings, redactor=redactor)
                if run_job is not None:
                    run_opts = dataclasses.replace(run_opts, run_job=run_job)
                out.state = execute(out.plan, repo, run_opts)
            if case.resume is not None and out.state.status != "succeeded":
                # `resume RUN_ID --plan FILE`: the same provider goes on with its script
                edited = case.load_plan(case.resume)
                with _executor(opts.dask_scheduler, provider.inner) as run_job:
                    again = dataclasses.replace(run_opts, stop=threading.Event())
                    if run_job is not None:
                        again = dataclasses.replace(again, run_job=run_job)
                    out.state = resume(out.state.run_id, repo, again, edited, str(case.resume))
                out.plan = edited
    except AntiSprawlError as exc:
        out.error = f"{type(exc).__name__}: {exc}"
    return out, provider


@contextmanager
def _executor(scheduler: str | None, inner: Provider) -> Iterator[Any]:
    """The ``run_job`` of a case's run on Dask (None: here): the script travels, a live
    provider goes by name (its key comes from the workers' environment)."""
    if scheduler is None:
        yield None
        return
    script = inner.script if isinstance(inner, ScriptedProvider) else None
    spec = ProviderSpec(name=inner.name, model=inner.model, script=script)
    # A suite connects once per case, often on a loaded machine: give the handshake longer
    # than an interactive command's 10 s.
    settings = DaskSettings(scheduler=scheduler, provider=spec, connect_timeout=30.0)
    with DaskExecutor.connect(settings) as executor:
        yield executor.run_job


def _planner_seen(case: Case, calls: list[RecordedCall]) -> Tokens | None:
    if not case.uses_planner:
        return None
    usages = [c.usage for c in calls if c.request.task_id == PLANNER_TASK_ID]
    return total_usage([u for u in usages if u is not None])


def run_case(
    case: Case, variant: Variant = BASELINE, opts: EvalOptions | None = None
) -> CaseResult:
    """Run ``case`` once under ``variant`` in a fresh directory and score it."""
    opts = opts or EvalOptions()
    started = time.monotonic()
    with _workdir(case, variant, opts.keep) as root:
        repo = root / "repo"
        base = make_fixture_repo(case.fixture, repo, f"eval fixture: {case.name}")
        env = _command_env(case)
        run, provider = _run(case, variant, opts, repo, base, env)
        run_seconds = time.monotonic() - started
        calls = provider.calls
        scripted = isinstance(provider.inner, ScriptedProvider)
        tasks = _task_metrics(run.plan, run.state, calls, scripted)
        planner_seen = _planner_seen(case, calls)
        branch = f"eval/{case.name}"
        changed = changed_files(repo, base, branch)
        evidence = Evidence(
            case=case,
            root=root,
            repo=repo,
            base=base,
            branch=branch,
            plan=run.plan,
            state=run.state,
            error=run.error,
            calls=calls,
            changed=changed,
            tasks=tasks,
            planner_agree=run.planner_tokens == planner_seen,
            command_env=env,
            sandbox=opts.sandbox,
            test_timeout=opts.test_timeout,
            scan_dirs=[
                d for d in (StateLayout(repo).root, root / "planner-manifests") if d.is_dir()
            ],
        )
        out = out_of_scope(changed, run.plan, run.state)
        leaks = find_leaks(case.checks.must_not_contain, evidence)
        cross = find_cross_task_leaks(case.checks.must_not_reach, calls)
        checks = score(evidence, out, leaks, cross)
    return CaseResult(
        case=case.name,
        variant=variant.name,
        run_status=run.state.status if run.state else "error",
        error=run.error,
        run_id=run.state.run_id if run.state else None,
        passed=all(c.passed for c in checks),
        checks=checks,
        tasks=tasks,
        planner_tokens=run.planner_tokens,
        planner_provider_tokens=planner_seen,
        changed=changed,
        out_of_scope=out,
        leaks=leaks,
        cross_task_leaks=cross,
        run_seconds=round(run_seconds, 3),
        wall_seconds=round(time.monotonic() - started, 3),
    )


def run_suite(
    cases: Sequence[Case],
    variants: Sequence[Variant] = (BASELINE,),
    opts: EvalOptions | None = None,
) -> SuiteResult:
    """Every case under every variant (baseline first), with aggregates and the scoping ratio."""
    opts = opts or EvalOptions()
    results = []
    for variant in variants:
        done = []
        for case in cases:
            result = run_case(case, variant, opts)
            if opts.on_case:
                opts.on_case(result)
            done.append(result)
        results.append(
            VariantResult(
                name=variant.name,
                ablate=sorted(variant.ablate),
                cases=done,
                aggregate=aggregate(variant.name, done),
            )
        )
    by_name = {v.name: v for v in results}
    base, off = by_name.get(BASELINE.name), by_name.get("-scoping")
    if base is None or off is None:
        return SuiteResult(variants=results)
    paired, pairs = paired_input_ratio(base, off)
    return SuiteResult(
        variants=results,
        scoping_input_ratio=paired,
        scoping_paired_calls=pairs,
        scoping_first_call_ratio=ratio(
            off.aggregate.first_call_input, base.aggregate.first_call_input
        ),
    )
