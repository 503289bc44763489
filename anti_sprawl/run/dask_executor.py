"""``--executor dask``: node attempts run on a Dask cluster; the journal, lock, branch and
landing stay in ``node.NodeRunner``.

``DaskExecutor.run_job`` is an ``ExecuteOptions.run_job`` (node.py): the runner hands it a
``NodeJob`` as it would ``run_node_job``, and gets a ``NodeOutcome`` back. In between, it
bundles the job's base (once per run-branch tip, ``git/transport.py``), sends a ``RemoteJob``
(``remote_node.py``) with ``retries=0`` and ``pure=False``, and waits. What comes back is checked
before it counts: a result over the size limit is refused; the commit is fetched into a
quarantine ref and re-audited (``git/landing_audit.py``: one commit on the base, every path in
the write scope, no secret the central process knows), then rebuilt with a message written
here; manifests and artifacts are written only under the node's own folders of the run,
redacted again. ``NodeRunner`` then journals the outcome and lands the commit as it would a
local attempt's (at once; run/branch_order.py puts the branch in the plan's fixed order): the
branch, its trailers and ``resume`` are the same whichever executor ran the node.

Failure semantics: Dask retries nothing; a worker that dies mid-node fails the attempt
(``worker_lost``): the scheduler reports ``KilledWorker``, or, on a cluster that re-runs the
task elsewhere, the re-run finds its one-use claim (a Dask ``Queue`` holding one token) taken
and gives up at once. The run's heartbeat (``heartbeat.py``) stops orphaned remote nodes. A
lost scheduler is one ``ExecutorLost`` for the run (``scheduler_loss.py``), never a node's.

Over 300 lines: the central half of a remote attempt (send, wait, check, store) is one
sequence whose checks must all run before ``NodeRunner`` sees the outcome; the worker half
is remote_node.py, the rebuild and file store remote_result.py.
"""

from __future__ import annotations

import dataclasses
import json
import secrets
import threading
import time
from concurrent.futures import CancelledError
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ..agent.artifacts import ArtifactStore
from ..agent.budget import RunBudget
from ..errors import ExecutorLost, UsageError
from ..git.landing_audit import ResultRefused, clear_quarantine, receive_checked
from ..git.transport import BundleChain, repo_identity
from ..plan.model import Plan, command_argv
from ..providers.prices import format_usd
from ..providers.scripted import Script
from ..redact import is_secret_name
from ..sandbox.command_template import uses
from .heartbeat import Heartbeat
from .node_job import NodeEnv, NodeJob, NodeOutcome
from .otel_remote import trace_link
from .remote_node import RemoteCallSink, RemoteJob, RemoteOutcome, dask_task, lost, too_big
from .remote_result import rebuild_commit, refused, store_files, taken_record
from .remote_settings import DaskSettings, ProviderSpec
from .scheduler_loss import one_line_logs, scheduler_gone, scheduler_lost
from .scope_grants import confirmed, granted_writes

if TYPE_CHECKING:
    from distributed import Client

__all__ = ["INSTALL_HINT", "DaskExecutor", "check_plan", "without_secrets"]

INSTALL_HINT = "--executor dask needs Dask: pip install 'anti-sprawl[dask]'"
CHECKOUT_REFUSED = (
    "{checkout} names a checkout on this machine, which Dask workers do not have: "
    "run this plan with --executor local"
)


def check_plan(plan: Plan) -> None:
    """UsageError when ``plan`` cannot run on Dask workers (a command binds ``{checkout}``)."""
    if _uses_checkout(plan):
        raise UsageError(CHECKOUT_REFUSED)


def _uses_checkout(plan: Plan) -> bool:
    commands = [plan.setup_command, plan.test_command, *(t.test_command for t in plan.tasks)]
    return any(uses(command_argv(c) or [], "checkout") for c in commands)


class DaskExecutor:
    """Runs a run's node attempts on the Dask cluster ``settings.scheduler`` names; one
    execute/resume each. Open it with ``connect``; ``close`` (or ``with``) lets go."""

    def __init__(self, settings: DaskSettings, client: Client):
        self.settings = settings
        self.client = client
        self.token = secrets.token_hex(4)
        self.heartbeat = Heartbeat(
            client, f"anti-sprawl-heartbeat-{self.token}", settings.heartbeat_interval
        )
        self._lock = threading.Lock()
        self._chains: dict[Path, tuple[str, BundleChain]] = {}  # repo -> (identity, chain)
        self._runs: set[tuple[Path, str]] = set()  # (repo, run id) with quarantine refs
        self._held: list[tuple[Any, Any]] = []  # futures and variables of published bundles
        self._positions: dict[str, int] = {}  # task -> scripted turns used so far
        self._reserved, self._reserved_cost = 0, 0.0
        self.lost: ExecutorLost | None = None  # set once the scheduler is found gone

    @classmethod
    def connect(cls, settings: DaskSettings) -> DaskExecutor:
        """The executor on a freshly opened client; UsageError when Dask is missing or the
        scheduler cannot be reached (one line, exit 2, nothing started)."""
        try:
            from distributed import Client
        except ImportError:
            raise UsageError(INSTALL_HINT) from None
        one_line_logs()
        try:
            client = Client(
                settings.scheduler, timeout=settings.connect_timeout, set_as_default=False
            )
        except (OSError, TimeoutError, ValueError) as exc:
            why = str(exc) or type(exc).__name__
            raise UsageError(
                f"cannot reach the Dask scheduler at {settings.scheduler!r}: {why}"
            ) from None
        return cls(settings, client)

    def __enter__(self) -> DaskExecutor:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Tell remote nodes the run is over, drop quarantine refs and what was published."""
        self.heartbeat.stop(tell=True)
        for repo, run_id in self._runs:
            clear_quarantine(repo, run_id)
        try:
            for future, variable in self._held:
                variable.delete()
                future.release()
            self.client.close()
        except Exception:  # the cluster is gone already: nothing of ours is left on it
            return
        finally:
            self._held.clear()

    # -- one attempt -----------------------------------------------------------------------

    def run_job(self, job: NodeJob, env: NodeEnv) -> NodeOutcome:
        """Run ``job`` on a Dask worker; the outcome, checked (see the module docstring).
        ``ExecutorLost`` once the scheduler is gone (scheduler_loss.py), for this job and
        every later one."""
        if self.lost is not None:
            raise self.lost
        try:
            return self._run_job(job, env)
        except Exception as exc:
            if not scheduler_gone(self.client, self.settings.scheduler):
                raise
            self.lost = self.lost or scheduler_lost(self.settings.scheduler, exc)
            raise self.lost from exc

    def _run_job(self, job: NodeJob, env: NodeEnv) -> NodeOutcome:
        if _uses_checkout(job.plan):
            record = job.record.model_copy(deep=True)
            record.fail("error", CHECKOUT_REFUSED)
            return NodeOutcome(verdict="failed", record=record, commit=None)
        from distributed import KilledWorker, Queue

        started = time.monotonic()
        remote = self._remote_job(job, env)
        asked, job = job.base, dataclasses.replace(job, base=remote.job.base)
        submitted = started
        try:
            claim = f"anti-sprawl-claim-{self.token}-{job.task_id}-{job.attempt}"
            Queue(claim, client=self.client).put(1)
            future = self.client.submit(
                dask_task,
                remote,
                claim,
                env.crash,  # the test launcher's: inside a node it kills the worker process
                key=claim.replace("claim", "node"),
                pure=False,
                retries=0,
            )
            submitted = time.monotonic()
            result = self._wait(future, env)
        except KilledWorker:
            result = lost(job, "the Dask worker running this node died")
        except (CancelledError, OSError) as exc:
            if scheduler_gone(self.client, self.settings.scheduler):
                raise  # not this node's worker: the whole cluster (run_job)
            result = lost(job, f"the Dask cluster lost the node ({type(exc).__name__}: {exc})")
        finally:
            self._release(remote)
        returned = time.monotonic()
        outcome = self._apply(job, env, remote, result)
        if job.base != asked:  # started from an earlier bundled tip: landing replays from it
            outcome = dataclasses.replace(outcome, base=job.base)
        central = {
            # bundling the tip (once per tip) and handing the job to the scheduler
            "dispatch": submitted - started,
            # scheduling, transfers and the worker's own overhead around the node
            "transit": max(0.0, returned - submitted - sum(result.seconds.values())),
            # the size check, fetch into quarantine, re-audit, rebuild, files
            "landing_checks": time.monotonic() - returned,
        }
        stats = {
            "worker": result.worker,
            "bytes_in": result.bytes_in,
            "bytes_out": result.bytes_out,
            "seconds": {**result.seconds, **central},
            "stopped": result.stopped,
        }
        ArtifactStore(job.paths.artifacts).put(job.task_id, "remote.json", json.dumps(stats))
        return outcome

    def _remote_job(self, job: NodeJob, env: NodeEnv) -> RemoteJob:
        repo = job.paths.repo
        with self._lock:
            if repo not in self._chains:
                self._chains[repo] = (
                    repo_identity(repo, job.base),
                    BundleChain(repo, self._publish),
                )
            if (repo, job.run_id) not in self._runs:
                clear_quarantine(repo, job.run_id)  # left by a central process that died
                self._runs.add((repo, job.run_id))
        identity, chain = self._chains[repo]
        tokens, cost = self._allowance(env.run_budget, job.settings.jobs)
        settings = job.settings
        portable = dataclasses.replace(
            job,
            settings=dataclasses.replace(
                settings, command_env=without_secrets(settings.command_env)
            ),
        )
        # An already bundled tip holding the node's dependencies, if there is one (transport.py)
        base, bundles = chain.chain_from(job.base, job.needs)
        portable = dataclasses.replace(portable, base=base)
        return RemoteJob(
            job=portable,
            repo_id=identity,
            bundles=tuple(bundles),
            provider=self._provider_for(job.task_id),
            script_position=self._positions.get(job.task_id, 0),
            token_allowance=tokens,
            cost_allowance=cost,
            record_calls=isinstance(env.provider, RemoteCallSink),
            heartbeat=self.heartbeat.name,
            heartbeat_timeout=self.settings.heartbeat_timeout,
            max_result_bytes=self.settings.max_result_bytes,
            trace=trace_link(),  # the attempt's span (W3C traceparent): the node joins it
        )

    def _publish(self, data: bytes) -> str:
        """Put a bundle's bytes on the cluster once, under a name every worker can look up."""
        from distributed import Variable

        future = self.client.scatter(data, hash=False)
        name = f"anti-sprawl-bundle-{self.token}-{len(self._held)}"
        variable = Variable(name, client=self.client)
        variable.set(future)
        self._held.append((future, variable))
        return name

    def _provider_for(self, task_id: str) -> ProviderSpec:
        """The provider spec a job carries: a script travels with only this node's turns."""
        spec = self.settings.provider
        if spec.script is None:
            return spec
        mine = Script(workers={task_id: spec.script.turns_for(task_id)})
        return spec.model_copy(update={"script": mine})

    def _allowance(self, budget: RunBudget | None, jobs: int) -> tuple[int | None, float | None]:
        """This attempt's share of what is left of ``--max-tokens`` and ``--max-cost``: an
        equal share per job slot, so the shares of the nodes in flight never add up past a cap."""
        if budget is None:
            return None, None
        slots = max(1, jobs)
        with self._lock:
            tokens = cost = None
            if budget.limit is not None:
                tokens = max(0, budget.limit - budget.spent.total - self._reserved) // slots
                self._reserved += tokens
            if budget.max_cost is not None:
                cost = max(0.0, budget.max_cost - budget.spent_cost - self._reserved_cost) / slots
                self._reserved_cost += cost
            return tokens, cost

    def _release(self, remote: RemoteJob) -> None:
        with self._lock:
            self._reserved -= remote.token_allowance or 0
            self._reserved_cost -= remote.cost_allowance or 0.0

    def _wait(self, future: Any, env: NodeEnv) -> RemoteOutcome:
        """The job's outcome; a stop tells every remote node through the heartbeat, then waits
        for them to wind down (the scheduler's grace period abandons a node that does not)."""
        done = threading.Event()
        future.add_done_callback(lambda _: done.set())
        # Not ``future.result(timeout=...)``: when that timeout cancels the wait inside Dask,
        # its ``sync`` can fail with UnboundLocalError instead of TimeoutError.
        while not done.wait(0.5):
            if env.stop.is_set():
                self.heartbeat.stop(tell=True)
        result: RemoteOutcome = future.result()
        return result

    def _apply(
        self, job: NodeJob, env: NodeEnv, remote: RemoteJob, result: RemoteOutcome
    ) -> NodeOutcome:
        """The worker's outcome as this run's: checked, its files stored, its commit rebuilt."""
        if result.bytes_out > remote.max_result_bytes:
            result = too_big(remote, result.bytes_out)
        got = result.outcome
        record = taken_record(job, got)
        manifests, logs = store_files(job, result.files, result.staging, record, env.redactor)
        self._positions[job.task_id] = result.script_position
        if isinstance(env.provider, RemoteCallSink):
            for call in result.calls:
                env.provider.add_remote(call.request, call.usage, call.error)
        budget = env.run_budget
        if budget is not None:
            cost = got.worker.cost_usd if got.worker else None
            budget.settle(0, record.tokens, cost or 0.0)
            if result.budget_exhausted:
                # As when a local call is refused: nothing more starts, the run ends interrupted.
                reason, why = _cap_reached(budget)
                budget.exhaust(reason, f"{why}; node {job.task_id}'s share ran out")
        # The worker's grants as this process judges them (run/scope_grants.py).
        record.scope_grants = confirmed(job.neighbours, record.scope_grants)
        done = dataclasses.replace(got, record=record, commit=None, manifests=manifests, logs=logs)
        if got.verdict != "succeeded":
            return dataclasses.replace(done, verdict="failed")
        try:
            if result.bundle is None:
                raise ResultRefused("the worker reported success but sent no commit")
            received = receive_checked(
                job.paths.repo,
                result.bundle,
                base=job.base,
                write_scope=[
                    *job.settings.ablations.audit_scope(job.node),
                    *granted_writes(record.scope_grants),
                ],
                redactor=env.redactor,
            )
            commit = rebuild_commit(job, received, record, env.redactor)
        except ResultRefused as exc:
            return refused(done, str(exc))
        return dataclasses.replace(done, commit=commit)


def without_secrets(env: Any) -> dict[str, str] | None:
    """Command variables fit to travel: none whose name looks secret (the sandbox would not
    pass those to a command anyway, and keys stay on the machine that has them)."""
    if env is None:
        return None
    return {k: v for k, v in env.items() if not is_secret_name(k)}


def _cap_reached(budget: RunBudget) -> tuple[Any, str]:
    """Which run cap a remote node's share of it ran out of, with what the run spent."""
    if budget.limit is not None:
        return "max_tokens", (
            f"the run's token cap (--max-tokens {budget.limit:,}) is reached: "
            f"{budget.spent.total:,} tokens spent"
        )
    return "max_cost", (
        f"the run's cost cap (--max-cost {format_usd(budget.max_cost)}) is reached: "
        f"{format_usd(budget.spent_cost)} spent"
    )
