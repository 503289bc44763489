"""The words of a node's life, in one leaf module every layer can import.

A node's ``TaskResult`` (run/result.py) moves between statuses only through its transition
methods, ``start``, ``fail``, ``skip``, ``interrupt``, ``land``, ``revoke`` and ``recover``, so
each rule lives in one place::

    pending ──start──> running ──land──> succeeded
       ^                  │
       │                  └──fail──> failed ──start──> running    (a retry)
       ├──skip──> skipped                                          (a dependency failed)
       └──interrupt── running / failed / skipped                   (the run stopped: resumable)
                      succeeded        (its dependency was revoked: it runs again)
    succeeded ──revoke──> failed     (the integration check bisected the branch to it)
    any ──recover──> succeeded       (resume: the node's commit is on the run branch)

``FailReason`` is the one vocabulary of why a node failed: the worker's own endings (a cap,
the provider, the script, a stop) and what the node's other phases decide (setup, tests, the
secret scan, landing, an error).
"""

from __future__ import annotations

from typing import Literal

__all__ = ["FailReason", "NodeFailure", "NodeStatus", "NodeVerdict", "WorkerFailure"]

# Where a node stands in a run: the scheduler's status and the journal's.
NodeStatus = Literal["pending", "running", "succeeded", "failed", "skipped"]
# What running (or landing) one node came to.
NodeVerdict = Literal["succeeded", "failed"]
# Why the worker loop stopped without a finish (agent/worker.py).
WorkerFailure = Literal[
    "budget",
    "max_tokens",
    "max_cost",
    "calls",
    "tool_calls",
    "stalled",
    "script",
    "provider",
    "stopped",
]
# Why the node failed in a phase around the worker (run/node_job.py, run/node.py), or on its
# way back from a remote executor (run/dask_executor.py: the worker died, or the central
# re-audit refused what it returned), or after it landed (run/integration.py: the integrated
# branch fails from this node's commit on).
NodeFailure = Literal[
    "setup",
    "no_changes",
    "tests",
    "secret",
    "landing",
    "error",
    "storage",
    "internal",
    "dependency_failed",
    "worker_lost",
    "refused",
    "integration",
]
FailReason = WorkerFailure | NodeFailure
