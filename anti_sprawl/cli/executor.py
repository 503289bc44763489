"""``--executor local|dask`` and ``--dask-scheduler`` (options in app.py): where the nodes of
execute/resume run.

``local`` runs each node in a thread of this process. ``dask`` sends each node attempt to a
Dask cluster (run/dask_executor.py); the journal, lock, run branch and landing stay here. The
provider is then named, not built: calls are made on the workers with the workers' keys, so
this process needs none (``RemoteProvider`` only tells the run the provider's name and model).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ..errors import AntiSprawlError, RunError, UsageError
from ..git.transport import check_object_format
from ..plan.model import Plan
from ..providers import (
    DEFAULT_ANTHROPIC_MODEL,
    DEFAULT_OPENAI_MODEL,
    PROVIDER_NAMES,
    ModelRequest,
    ModelResponse,
    Provider,
    ScriptedProvider,
    check_base_url,
    select_provider,
)
from ..run.dask_executor import DaskExecutor, check_plan
from ..run.journal import Journal
from ..run.node_job import NodeEnv, NodeJob, NodeOutcome
from ..run.preflight import check_repo
from ..run.remote_settings import DaskSettings, ProviderSpec

__all__ = [
    "NEEDS_SCHEDULER",
    "RemoteProvider",
    "choose",
    "dask_settings",
    "executor_for",
    "journal_plan",
]


NEEDS_SCHEDULER = "--executor dask needs --dask-scheduler ADDRESS (or DASK_SCHEDULER_ADDRESS)"


class RemoteProvider:
    """The central process's provider under ``--executor dask``: it names the model the
    workers call; calls are made there, with the workers' keys, never here."""

    def __init__(self, name: str, model: str):
        self.name = name
        self.model = model

    def complete(self, request: ModelRequest) -> ModelResponse:
        raise RunError("with --executor dask, model calls are made on the Dask workers")


def dask_settings(
    scheduler: str | None,
    *,
    provider: str | None,
    model: str | None,
    base_url: str | None,
    script: Path | None,
    env: Mapping[str, str],
    timeout: float | None = None,
) -> tuple[DaskSettings, Provider]:
    """(DaskSettings, the central provider) for ``--executor dask``.

    The provider is resolved by name as ``select_provider`` would, without needing a key
    here: the workers bring their own.
    """
    if not scheduler:
        raise UsageError(NEEDS_SCHEDULER)
    if base_url:
        check_base_url(base_url, "--base-url")
    name = provider.strip().lower() if provider else _guessed(script, base_url, env)
    if name == "scripted":
        central = select_provider(
            provider=name, model=model, base_url=base_url, script=script, env=env
        )
        assert isinstance(central, ScriptedProvider)
        spec = ProviderSpec(name=name, model=model, script=central.script)
        return DaskSettings(scheduler=scheduler, provider=spec), central
    if name not in PROVIDER_NAMES:
        raise UsageError(f"unknown provider {provider!r} (choose {', '.join(PROVIDER_NAMES)})")
    if script is not None:
        raise UsageError("--script is only used with --provider scripted")
    default = DEFAULT_ANTHROPIC_MODEL if name == "anthropic" else DEFAULT_OPENAI_MODEL
    spec = ProviderSpec(name=name, model=model, base_url=base_url, timeout=timeout)
    return DaskSettings(scheduler=scheduler, provider=spec), RemoteProvider(name, model or default)


def _guessed(script: Path | None, base_url: str | None, env: Mapping[str, str]) -> str:
    """The provider ``select_provider`` would pick without ``--provider``, keys unneeded."""
    if script is not None:
        return "scripted"
    if base_url:
        return "openai"
    if env.get("ANTHROPIC_API_KEY"):
        return "anthropic"
    if env.get("OPENAI_API_KEY") or env.get("OPENAI_BASE_URL"):
        return "openai"
    raise UsageError(
        "--executor dask: name the workers' provider with --provider anthropic|openai "
        "(their keys come from the workers' environment)"
    )


def choose(
    dask: bool, scheduler: str | None, local: Callable[[], Provider], **provider: Any
) -> tuple[DaskSettings | None, Provider]:
    """(DaskSettings or None, the run's provider): ``local()`` builds this process's."""
    if not dask:
        return None, local()
    return dask_settings(scheduler, env=os.environ, **provider)


RunJob = Callable[[NodeJob, NodeEnv], NodeOutcome]


@contextlib.contextmanager
def executor_for(
    remote: DaskSettings | None, plan: Plan | None, repo: Path
) -> Iterator[RunJob | None]:
    """The ``run_job`` of the run (None: the local default), open for the ``with`` block.

    ``plan`` (the run's plan, if known) and ``repo`` are checked first: a plan Dask workers
    cannot run, a repository its bundles cannot carry (SHA-256), or a cluster that cannot be
    reached, is exit 2 before anything is written.
    """
    if remote is None:
        yield None
        return
    if plan is not None:
        check_plan(plan)
    check_object_format(check_repo(repo))
    with DaskExecutor.connect(remote) as executor:
        yield executor.run_job


def journal_plan(repo: Path, run_id: str) -> Plan | None:
    """The plan a run was started with, or None when it cannot be read (``resume`` says why)."""
    try:
        return Journal.load(check_repo(repo), run_id).state.plan
    except (AntiSprawlError, OSError, ValueError):
        return None
