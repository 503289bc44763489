"""What a remote attempt sent back, made this run's: its record, its files, its commit.

The central half of ``--executor dask`` (dask_executor.py) trusts nothing a worker returns:

- the record keeps what the central process decides (the node's identity, attempt numbering,
  the model, totals over attempts) from the job it sent; the rest is the worker's;
- manifests and artifacts are written only under the node's own folders of the run
  (``manifests/<task>/``, ``artifacts/<task>/``), by names checked here, redacted again with
  this process's secrets; test and setup log paths are moved from the worker's staging
  directory to the run's;
- a commit that passed the re-audit (``git/landing_audit.py``) is rebuilt on the job's base
  with a message written here, and its diff is recomputed from the user's repository.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path, PurePosixPath

from ..fs.files import atomic_write_text
from ..git.landing_audit import Received, ResultRefused, rebuild
from ..git.layout import RunPaths
from ..git.secret_scan import message_secret
from ..git.workspace import diff, diffstat
from ..redact import Redactor
from .commit_text import commit_text
from .node_job import NodeJob, NodeOutcome
from .result import MAX_DIFF_CHARS, TaskResult

__all__ = ["rebuild_commit", "refused", "store_files", "taken_record"]

# A worker's staging directory is laid out as a run's (``RunPaths``): file names are relative
# to it.
_STAGE = RunPaths(Path())
# What the central process decides about a node's record; everything else is the worker's.
_CENTRAL_FIELDS = frozenset(
    {
        "task_id",
        "name",
        "status",
        "reason",
        "message",
        "commit",
        "attempts",
        "max_attempts",
        "attempt_log",
        "started_at",
        "finished_at",
        "token_budget",
        "max_tool_calls",
        "model",
        "total_tokens",
        "cost_usd",
        "diff",
        "diffstat",
        "files_changed",
    }
)


def taken_record(job: NodeJob, got: NodeOutcome) -> TaskResult:
    """The node's record after the remote attempt: the job's, with the worker's findings."""
    record = job.record.model_copy(deep=True)
    for name in type(record).model_fields:
        if name not in _CENTRAL_FIELDS:
            setattr(record, name, getattr(got.record, name))
    if got.verdict != "succeeded":
        failed = got.record
        record.fail(failed.reason or "error", failed.message or "the remote attempt failed")
    return record


def refused(outcome: NodeOutcome, why: str) -> NodeOutcome:
    """``outcome`` failed for what the central re-audit refused (nothing of it lands)."""
    record = outcome.record.model_copy(deep=True)
    record.fail("refused", why)
    return dataclasses.replace(outcome, verdict="failed", record=record, commit=None)


def _safe_name(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "_.-" else "_" for ch in name)


def store_files(
    job: NodeJob, files: dict[str, bytes], staging: str, record: TaskResult, redactor: Redactor
) -> tuple[tuple[Path, ...], tuple[str, ...]]:
    """Write the worker's files into the run's directories; (manifests, ``artifact://`` refs).

    Only ``<kind>/<task>/<name>`` of this node: never a path of the worker's choosing.
    """
    folder = _safe_name(job.task_id)
    artifacts, manifests_dir = _STAGE.artifacts.name, _STAGE.manifests.name
    roots = {artifacts: job.paths.artifacts, manifests_dir: job.paths.manifests}
    manifests: list[Path] = []
    logs: list[str] = []
    for rel, data in sorted(files.items()):
        parts = PurePosixPath(rel).parts
        if (
            len(parts) != 3
            or parts[0] not in roots
            or parts[1] != folder
            or _safe_name(parts[2]) != parts[2]
            or parts[2].startswith(".")
        ):
            continue
        path = roots[parts[0]] / folder / parts[2]
        # Manifests and artifacts, as a local node writes them: no fsync (fs/files.py).
        atomic_write_text(path, redactor(data.decode("utf-8", "replace")), durable=False)
        if parts[0] == manifests_dir:
            manifests.append(path)
        else:
            logs.append(f"artifact://{folder}/{parts[2]}")
    for outcome in (record.tests, record.setup):
        if outcome is not None and outcome.log:
            outcome.log = _relocate(outcome.log, staging, job.paths.artifacts)
    return tuple(manifests), tuple(logs)


def _relocate(path: str, staging: str, artifacts: Path) -> str:
    """A log path on the worker (under its staging directory) as the run's copy, or ""."""
    prefix = f"{staging.rstrip('/')}/{_STAGE.artifacts.name}/"
    if staging and path.startswith(prefix):
        rel = PurePosixPath(path[len(prefix) :])
        if len(rel.parts) == 2 and ".." not in rel.parts:
            return str(artifacts / rel)
    return ""


def rebuild_commit(
    job: NodeJob, sha: str | Received, record: TaskResult, redactor: Redactor
) -> str:
    """The audited tree of ``sha`` as this run's commit on ``job.base`` (our message and
    trailers, the user as author, as a local node's); ``record`` gets its diff (read again
    unless ``sha`` is what ``receive_checked`` returned: the rebuilt commit has its tree)."""
    node, repo = job.node, job.paths.repo
    got = sha if isinstance(sha, Received) else None
    summary = record.summary.summary if record.summary else ""
    message, trailers = commit_text(
        job,
        summary,
        record.tokens,
        redactor,
        grants=record.scope_grants,
        unclaimed=record.unclaimed,
    )
    if kind := message_secret(redactor, message, trailers, job.author):
        raise ResultRefused(f"the commit's metadata holds what looks like a {kind}")
    new = rebuild(
        repo,
        got.commit if got else str(sha),
        job.base,
        message,
        trailers,
        run_id=job.run_id,
        task_id=node.task_id,
        author=job.author,
        tree=got.tree if got else None,
    )
    stat = got.change.stat if got else diffstat(repo, job.base, new)
    record.commit, record.diffstat = new, stat
    record.files_changed = [f.path for f in stat.files]
    text = got.change.patch if got else diff(repo, job.base, new, record.files_changed)
    truncated = text[:MAX_DIFF_CHARS] + "\n[diff truncated]\n"
    record.diff = text if len(text) <= MAX_DIFF_CHARS else truncated
    return new
