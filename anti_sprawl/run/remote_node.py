"""One node attempt on a Dask worker: a ``RemoteJob`` in, a ``RemoteOutcome`` out.

The central process (``dask_executor.py``) wraps the attempt's ``NodeJob`` (node_job.py: plain,
frozen data) with what the worker needs to reach its base: which git bundles make it up
(``git/transport.py``) and which provider to build, by name. Never a key: the worker builds
its ``NodeEnv`` here, from its own environment: the provider (``ANTHROPIC_API_KEY``,
``OPENAI_API_KEY``, ... as the CLI reads them), the redactor (the worker's secret values), a
run budget holding this attempt's share of the run's caps, and the stop event its heartbeat
watch sets.

``run_remote`` brings the worker's cache clone up to the node's base, then runs the very same
``run_node_job`` as a local run (worktree, firewall, clean-slate prompt, worker loop, audit,
final tests, secret scan, commit) against the cache clone, with ``NodePaths`` pointing the
manifests and artifacts at a staging directory. What comes back is the ``NodeOutcome``, the
commit as a one-commit bundle, and the staged manifests, transcript and logs, all redacted
with the worker's secrets (and again centrally, with the central process's). The journal,
the lock, the run branch and landing never leave the central process.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from pydantic import BaseModel

from ..agent.budget import RunBudget
from ..git.layout import RunPaths
from ..git.transport import BundleRef, CacheRepo
from ..git.workspace import remove_stale_worktrees
from ..providers import ModelRequest, ModelResponse, Provider, ScriptedProvider, select_provider
from ..providers.base import Usage
from ..providers.redacting import RedactingProvider
from ..redact import Redactor, env_secrets
from ..tokens import TokenCounter
from .heartbeat import Watch
from .node_job import NodeEnv, NodeJob, NodeOutcome, NodePaths
from .node_work import run_node_job
from .otel_remote import TraceLink, worker_tracing
from .remote_settings import ProviderSpec

__all__ = [
    "RemoteCall",
    "RemoteCallSink",
    "RemoteJob",
    "RemoteOutcome",
    "cache_root",
    "dask_task",
    "lost",
    "run_remote",
    "too_big",
]


@runtime_checkable
class RemoteCallSink(Protocol):
    """A central provider that wants the calls remote nodes made (the evaluation's recorder)."""

    def add_remote(self, request: ModelRequest, usage: Usage | None, error: str | None) -> None:
        """Record one call a remote node made."""


class RemoteCall(BaseModel):
    """One model call a remote node made, sent back when the central provider records calls
    (the evaluation scores what crossed the provider seam)."""

    request: ModelRequest
    usage: Usage | None = None
    error: str | None = None


class _Recorder:
    """Keeps every call of the provider it wraps, as the evaluation's recorder does."""

    def __init__(self, inner: Provider):
        self.inner, self.name, self.model = inner, inner.name, inner.model
        self.calls: list[RemoteCall] = []
        self._lock = threading.Lock()

    def complete(self, request: ModelRequest) -> ModelResponse:
        try:
            response = self.inner.complete(request)
        except Exception as exc:
            with self._lock:
                self.calls.append(RemoteCall(request=request, error=f"{type(exc).__name__}: {exc}"))
            raise
        with self._lock:
            self.calls.append(RemoteCall(request=request, usage=response.usage))
        return response


@dataclass(frozen=True)
class RemoteJob:
    """What travels to the worker for one attempt: plain data, picklable, no secrets."""

    job: NodeJob  # its paths are the central machine's: replaced on the worker
    repo_id: str  # the cache clone's name (transport.repo_identity)
    bundles: tuple[BundleRef, ...]  # every bundle the base may need, oldest first
    provider: ProviderSpec
    script_position: int = 0  # the scripted provider: turns earlier attempts used
    token_allowance: int | None = None  # this attempt's share of --max-tokens
    cost_allowance: float | None = None  # ... and of --max-cost
    record_calls: bool = False  # send back every model call (the evaluation's recorder)
    heartbeat: str = ""  # the Dask Variable the central run beats
    heartbeat_timeout: float = 30.0
    max_result_bytes: int = 64 * 1024 * 1024
    trace: TraceLink | None = None  # the run's attempt span: this node's spans join its trace


@dataclass(frozen=True)
class RemoteOutcome:
    """What one remote attempt returns; the central process trusts none of it blindly."""

    outcome: NodeOutcome  # paths in it are the worker's staging directory
    bundle: bytes | None = None  # the commit, whose only prerequisite is the job's base
    files: dict[str, bytes] = field(default_factory=dict)  # "artifacts/<task>/<name>", ...
    staging: str = ""  # the staging root the outcome's paths start with
    budget_exhausted: bool = False  # the share of a run cap ran out
    calls: tuple[RemoteCall, ...] = ()
    script_position: int = 0
    worker: str = ""  # the worker's host name
    bytes_in: int = 0  # bundle bytes the worker fetched for this attempt
    seconds: dict[str, float] = field(default_factory=dict)
    stopped: str | None = None  # why the heartbeat watch stopped the node, if it did

    @property
    def bytes_out(self) -> int:
        return len(self.bundle or b"") + sum(map(len, self.files.values()))


def cache_root(env: Mapping[str, str]) -> Path:
    """Where a worker keeps its cache clones: ``ANTI_SPRAWL_CACHE_DIR`` or the user cache."""
    if env.get("ANTI_SPRAWL_CACHE_DIR"):
        return Path(env["ANTI_SPRAWL_CACHE_DIR"])
    base = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or "/tmp") / ".cache")
    return Path(base) / "anti-sprawl" / "workers"


def _provider(spec: ProviderSpec, env: Mapping[str, str]) -> Provider:
    if spec.name == "scripted" and spec.script is not None:
        return ScriptedProvider(spec.script, model=spec.model or "scripted")
    return select_provider(
        provider=spec.name,
        model=spec.model,
        base_url=spec.base_url,
        script=None,
        env=env,
        timeout=spec.timeout,
    )


def run_remote(
    remote: RemoteJob,
    fetch: Callable[[str], bytes],
    stop: threading.Event,
    env: Mapping[str, str],
    crash: Callable[[str, str], None] | None = None,
) -> RemoteOutcome:
    """Run ``remote`` on this machine (a Dask worker calls this); never raises for the node's
    failures (``run_node_job`` fails the attempt instead)."""
    clock = time.monotonic()
    job = remote.job
    cache = CacheRepo(cache_root(env), remote.repo_id)
    bytes_in = cache.materialize(remote.bundles, fetch)
    _remove_dead_worktrees(cache)
    fetched = time.monotonic()
    redactor = Redactor(env_secrets(env))
    provider = _provider(remote.provider, env)
    scripted = provider if isinstance(provider, ScriptedProvider) else None
    if scripted is not None:
        scripted.seek(job.task_id, remote.script_position)
    recorder = _Recorder(provider) if remote.record_calls else None
    caps = (remote.token_allowance, remote.cost_allowance)
    budget = RunBudget(caps[0], max_cost=caps[1]) if caps != (None, None) else None
    node_env = NodeEnv(
        provider=RedactingProvider(recorder or provider, redactor),
        redactor=redactor,
        stop=stop,
        counter=TokenCounter(ratio=1.0 if scripted else 1.25),
        run_budget=budget,
        crash=crash,
    )
    with tempfile.TemporaryDirectory(prefix="anti-sprawl-node-") as tmp:
        stage = RunPaths(Path(tmp))  # laid out as a run's directory
        home = env.get("HOME")
        sandbox = job.settings.sandbox.model_copy(update={"home": Path(home) if home else None})
        local = dataclasses.replace(
            job,
            settings=dataclasses.replace(job.settings, sandbox=sandbox),
            paths=NodePaths(
                repo=cache.path,
                # each worker process its own folder: a killed one's is found and removed
                worktrees=cache.worktrees / str(os.getpid()),
                artifacts=stage.artifacts,
                manifests=stage.manifests,
            ),
        )
        with worker_tracing(remote.trace, env, redactor):
            outcome = run_node_job(local, node_env)
        ran = time.monotonic()
        outcome = dataclasses.replace(
            outcome,
            record=redactor.model(outcome.record),
            worker=redactor.model(outcome.worker) if outcome.worker else None,
        )
        bundle = cache.bundle_commit(outcome.commit, job.base) if outcome.commit else None
        files = _collect(stage, redactor)
        result = RemoteOutcome(
            outcome=outcome,
            bundle=bundle,
            files=files,
            staging=str(stage.root),
            budget_exhausted=budget is not None and budget.exhausted is not None,
            calls=tuple(recorder.calls) if recorder else (),
            script_position=scripted.position(job.task_id) if scripted else 0,
            worker=socket.gethostname(),
            bytes_in=bytes_in,
            seconds={
                "bundle_in": fetched - clock,
                "node": ran - fetched,
                "bundle_out": time.monotonic() - ran,
            },
        )
    if result.bytes_out > remote.max_result_bytes:
        return too_big(remote, result.bytes_out)
    return result


def too_big(remote: RemoteJob, size: int) -> RemoteOutcome:
    """A failed outcome in place of a result over ``max_result_bytes`` (nothing of it sent)."""
    record = remote.job.record.model_copy(deep=True)
    record.fail(
        "refused",
        f"the node's result is {size:,} bytes, over the limit of "
        f"{remote.max_result_bytes:,} bytes a worker may send back",
    )
    return RemoteOutcome(outcome=NodeOutcome(verdict="failed", record=record, commit=None))


def _remove_dead_worktrees(cache: CacheRepo) -> None:
    """Worktrees that a worker process killed mid-node left in the cache clone (each process
    keeps its own under ``worktrees/<pid>``): removed once that process is gone."""
    if not cache.worktrees.is_dir():
        return
    for folder in cache.worktrees.iterdir():
        if not folder.name.isdigit() or folder.is_symlink():
            continue
        try:
            os.kill(int(folder.name), 0)
            continue  # alive (or another user's): not ours to clean
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        remove_stale_worktrees(cache.path, folder)
        with contextlib.suppress(OSError):
            folder.rmdir()


def _collect(stage: RunPaths, redactor: Redactor) -> dict[str, bytes]:
    """The attempt's manifests and artifacts by path relative to ``stage``, redacted again."""
    files: dict[str, bytes] = {}
    for folder in (stage.artifacts, stage.manifests):
        if not folder.is_dir():
            continue
        for path in sorted(folder.rglob("*")):
            if path.is_file() and not path.is_symlink():
                text = path.read_bytes().decode("utf-8", "replace")
                files[path.relative_to(stage.root).as_posix()] = redactor(text).encode("utf-8")
    return files


def lost(job: NodeJob, why: str) -> RemoteOutcome:
    """A failed outcome for an attempt whose worker died (``worker_lost``)."""
    record = job.record.model_copy(deep=True)
    record.fail("worker_lost", why)
    return RemoteOutcome(outcome=NodeOutcome(verdict="failed", record=record, commit=None))


def dask_task(
    remote: RemoteJob, claim: str, crash: Callable[[str, str], None] | None
) -> RemoteOutcome:
    """Runs on a Dask worker: claim the attempt, watch the heartbeat, run the job."""
    from distributed import Queue, Variable, get_client

    client = get_client()
    try:
        Queue(claim, client=client).get(timeout=10)
    except TimeoutError:
        return lost(remote.job, "the worker that first ran this attempt died; it is not run twice")
    stop = threading.Event()

    def fetch(name: str) -> bytes:
        data: bytes = Variable(name, client=client).get(timeout=60).result()
        return data

    watch = Watch(client, remote.heartbeat, remote.heartbeat_timeout, stop)
    try:
        with watch:
            # The worker's own environment: its keys, its cache directory, its $HOME.
            result = run_remote(remote, fetch, stop, dict(os.environ), crash)
    except Exception as exc:  # nothing raised crosses the wire: it may not unpickle there
        record = remote.job.record.model_copy(deep=True)
        record.fail("error", f"on the Dask worker: {type(exc).__name__}: {exc}")
        return RemoteOutcome(outcome=NodeOutcome(verdict="failed", record=record, commit=None))
    return dataclasses.replace(result, stopped=watch.why)
