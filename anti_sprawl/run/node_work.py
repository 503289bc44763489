"""The node's work: ``run_node_job(job, env)`` runs one attempt in four phases.

    prepare   a fresh worktree at ``job.base``, the firewall, the plan's setup command, the
              clean-slate prompt and the node's test runner
    work      the worker loop under the node's caps (agent/worker.py)
    verify    the audit (nothing outside the write scope survives), an empty diff failing the
              attempt (``no_changes``), the final test run, the secret scan of what would be
              committed
    commit    one commit with the run's trailers, authored by the user

node_job.py states the contract (the job in, the outcome out, what stays central).
"""

from __future__ import annotations

import contextlib
import dataclasses
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import tracing
from ..agent.artifacts import ArtifactStore
from ..agent.change_tools import copies_in_place_of_tests
from ..agent.worker import TestOutcome, WorkerContext, WorkerLimits, WorkerResult, run_worker
from ..context.assemble import AssembledPrompt, assemble_worker_prompt, manifest_for_request
from ..context.guidance import guidance_budget, guidance_paths, read_guidance, with_guidance
from ..context.lean import lean_target
from ..context.manifest import save_manifest
from ..context.requests import save_request
from ..errors import RunError, StorageError, at_boundary
from ..fs.firewall import DEFAULT_DENY, Firewall
from ..fs.path_rules import Violation
from ..fs.scopes import is_glob, normalize_entry
from ..git.audit import Change, audit, changes
from ..git.cmd import run_git
from ..git.secret_scan import message_secret, staged_secrets
from ..git.substance import edited_texts, goal_allows_removal, only_removes
from ..git.workspace import ChangeFacts, Workspace, commit, stage
from ..lifecycle import NodeVerdict
from ..outline.pyfacts import is_test_module
from ..plan.intent_checks import goal_files
from ..providers.base import ModelRequest, Usage
from ..providers.scripted import ScriptedProvider
from .ablations import NodeScopes
from .commit_text import commit_text
from .failure_note import with_failure_note
from .node_commands import TestRunner, run_setup_command
from .node_job import NodeEnv, NodeJob, NodeOutcome
from .result import TaskResult, reduce
from .scope_grants import ScopePolicy, granted_writes
from .settings import LiveStep

__all__ = ["record_failure", "run_node_job"]


def run_node_job(job: NodeJob, env: NodeEnv) -> NodeOutcome:
    """Run one attempt of one node: prepare, work, verify, commit (see the module docstring)."""
    return _Attempt(job, env).run()


class _Attempt:
    """One attempt's state as it goes through the phases."""

    def __init__(self, job: NodeJob, env: NodeEnv):
        self.job, self.env = job, env
        self.record = job.record.model_copy(deep=True)
        self.artifacts = ArtifactStore(job.paths.artifacts)
        self.worker: WorkerResult | None = None
        self.changed: list[str] = []
        self.manifests: list[Path] = []
        self.tests: TestRunner | None = None
        self.commit: str | None = None
        self.staged: ChangeFacts | None = None
        self.live = LiveStep(task_id=job.task_id, step="starting")
        self.scope: ScopePolicy | None = None
        self.record.scope_grants = []  # this attempt's requests (a retry asks again)

    def crash(self, point: str) -> None:
        if self.env.crash is not None:
            self.env.crash(point, self.job.task_id)

    def run(self) -> NodeOutcome:
        record = self.record
        try:
            verdict = self._in_worktree()
        except Exception as exc:
            record_failure(record, exc, self.artifacts)
            verdict = "failed"
        if self.scope is not None:  # granted or refused, the record keeps every request
            record.scope_grants = list(self.scope.log)
        return NodeOutcome(
            verdict=verdict,
            record=record,
            commit=self.commit if verdict == "succeeded" else None,
            worker=self.worker,
            changed=tuple(self.changed),
            manifests=tuple(self.manifests),
            logs=tuple(self.artifacts.written),
            test_runs=self.tests.runs if self.tests else 0,
        )

    def _in_worktree(self) -> NodeVerdict:
        job, node, ablations = self.job, self.job.node, self.job.settings.ablations
        scopes = ablations.scopes(node)
        sparse = None
        if job.settings.sparse:
            sparse = [*scopes.read, *scopes.write, *_root_files(job.paths.repo, job.base)]
        pool = self.env.worktrees
        lease: contextlib.AbstractContextManager[Workspace]
        if pool is None:
            name = f"{job.run_id}-{node.task_id}-{job.attempt}"
            paths = job.paths
            lease = Workspace.create(paths.repo, paths.worktrees, name, job.base, sparse=sparse)
        else:
            lease = pool.lease(job.base, sparse)
        with (
            lease as ws,
            Firewall(
                ws.path,
                scopes.read,
                scopes.write,
                deny=DEFAULT_DENY if scopes.deny is None else scopes.deny,
                redact=self.env.redactor,
                durable=False,  # the commit is the record; a crash discards the worktree
            ) as firewall,
        ):
            prepared = self._prepare(ws, scopes)
            if prepared is None:
                return "failed"
            setup_violations, prompt, tests = prepared
            self.scope = ScopePolicy(
                mode=ablations.scope_requests(job.settings.scope_requests),
                node=node,
                neighbours=job.neighbours,
                ws=ws,
                firewall=firewall,
                ledger=self.env.grants,
                ask=self.env.ask_scope,
            )
            result = self._work(ws, firewall, prompt, tests)
            self.record.scope_grants = list(self.scope.log)
            verified = self._verify(ws, firewall, result, setup_violations, tests)
            if verified is None:
                return "failed"
            return self._commit(ws, result, *verified)

    # -- prepare ---------------------------------------------------------------------------

    def _prepare(
        self, ws: Workspace, scopes: NodeScopes
    ) -> tuple[list[Violation], AssembledPrompt, Callable[..., TestOutcome] | None] | None:
        """The setup command, the first prompt and the test runner; None when setup failed."""
        job = self.job
        setup_violations = run_setup_command(
            job, ws, self.record, self.artifacts, self.env.redactor
        )
        if setup_violations is None:
            return None
        ablations, node = job.settings.ablations, job.node
        budget = ablations.prompt_budget(
            lean_target(node.token_budget, job.settings.context_budget),
            job.settings.context_window,
        )
        # A firewall of its own: refusals while building the prompt (a binary file in a
        # read-scope directory) are not the worker's violations.
        with Firewall(ws.path, scopes.read, scopes.write, redact=self.env.redactor) as fw:
            prompt = assemble_worker_prompt(
                plan=job.plan,
                node=ablations.prompt_node(node, scopes),
                upstream=list(job.upstream),
                firewall=fw,
                context_budget=budget,
                memory=list(job.memory),
                eager_reads=ablations.eager_reads,
            )
        guidance = guidance_paths(ws.path, node.write_scope)  # AGENTS.md & co, untrusted
        prompt = with_guidance(prompt, read_guidance(ws.path, guidance, guidance_budget(budget)))
        if job.history:
            prompt = prompt.model_copy(
                update={"first_user_message": job.history + prompt.first_user_message}
            )
        if job.note is not None:
            prompt = with_failure_note(prompt, job.note, job.attempt)
        argv = job.plan.test_command_for(node)
        if argv:
            self.tests = TestRunner(job, ws, argv, self.artifacts, self.env.redactor)
        return setup_violations, prompt, self.tests

    # -- work ------------------------------------------------------------------------------

    def _work(
        self,
        ws: Workspace,
        firewall: Firewall,
        prompt: AssembledPrompt,
        tests: Callable[..., TestOutcome] | None,
    ) -> WorkerResult:
        job, env, node = self.job, self.env, self.job.node
        max_output = job.settings.output_limit(env.provider.name, job.model)
        scripted = env.provider.name == ScriptedProvider.name  # also when wrapped
        seen: list[Change] = []  # the worktree's changes as changed_files last read them

        def read(found: list[Change]) -> list[Change]:
            seen[:] = found
            return found

        ctx = WorkerContext(
            task_id=node.task_id,
            provider=env.provider,
            firewall=firewall,
            system=prompt.system,
            first_message=prompt.first_user_message,
            limits=WorkerLimits(
                token_budget=node.token_budget,
                max_tool_calls=node.max_tool_calls,
                max_output_tokens=max_output,
            ),
            artifacts=self.artifacts,
            counter=env.counter,
            run_tests=tests,
            run_budget=env.run_budget,
            on_request=self._manifest_hook(prompt),
            on_tool=self._tool_hook,
            on_charged=self._charged_hook,
            stop=env.stop,
            redact=env.redactor,
            model=job.model,
            price=job.price,
            attempt=job.attempt,
            changed_files=lambda: [change.path for change in read(changes(ws))],
            # judged on what the finish just read (agent/worker.py asks changed_files first)
            hollow_changes=lambda paths: [
                c.path for c in seen if c.path in paths and only_removes(ws, [c])
            ],
            request_scope=self.scope,
            check_tests_at_finish=not scripted,
            goal_files=() if scripted else tuple(goal_files(node)),
            goal_allows_removal=goal_allows_removal(node.goal),
        )
        result = self.worker = run_worker(ctx)
        return result

    def _live(self, step: str, **change: Any) -> None:
        """Report where the attempt is to the live view (NodeEnv.on_live), if one listens."""
        self.live = dataclasses.replace(self.live, step=step, **change)
        if self.env.on_live is not None:
            self.env.on_live(self.live)

    def _tool_hook(self, name: str) -> None:
        self._live(f"tool {name}", tool_calls=self.live.tool_calls + 1)
        if name == "write_file":
            self.crash("mid_write")

    def _charged_hook(self, spent: Usage, cost: float) -> None:
        self._live("tools", tokens=spent.total, cost_usd=cost)

    def _manifest_hook(self, prompt: AssembledPrompt) -> Callable[[ModelRequest, int], None]:
        job, record = self.job, self.record

        def hook(request: ModelRequest, n: int) -> None:
            self._live("model call", calls=n)
            if n > 1:
                self.crash("after_llm_response")
            manifest = manifest_for_request(
                prompt, request, n=job.first_call + n, attempt=job.attempt
            )
            if self.scope is not None and self.scope.log:
                manifest = manifest.model_copy(update={"scope_grants": list(self.scope.log)})
            path = save_manifest(job.paths.manifests, self.env.redactor.model(manifest))
            # the exact request, for the HTML report's "exact request" (context/requests.py)
            save_request(
                job.paths.artifacts, manifest.task_id, manifest.n, request, self.env.redactor
            )
            self.manifests.append(path)
            tracing.annotate_call(tracing.manifest_attributes(path, job.paths.manifests))
            for item in manifest.items:
                if item.hidden_chars:
                    record.hidden_chars[item.source] = item.hidden_chars

        return hook

    # -- verify ----------------------------------------------------------------------------

    def _verify(
        self,
        ws: Workspace,
        firewall: Firewall,
        result: WorkerResult,
        setup_violations: list[Violation],
        tests: Callable[..., TestOutcome] | None,
    ) -> tuple[list[Violation], TestOutcome | None] | None:
        """The audit, the final tests and the secret scan: the violations and the final test
        run to record, or None when the attempt failed (the record says why)."""
        job, record = self.job, self.record
        self.crash("before_audit")
        # The plan's write scope plus exactly the writes granted in this attempt.
        granted = granted_writes(self.record.scope_grants)
        checked = audit(ws, [*job.settings.ablations.audit_scope(job.node), *granted])
        self.changed = [c.path for c in checked.kept]
        violations = [*setup_violations, *checked.violations]
        if result.status == "succeeded" and not self.changed and job.node.expect_changes:
            # A finish over an empty diff is not done work, whatever its summary says.
            reduce(record, result, ws, job.base, None, violations, None)
            record.fail("no_changes", no_changes_message(job.node.goal))
            return None
        if (
            result.status == "succeeded"
            and job.node.expect_changes
            and not goal_allows_removal(job.node.goal)
            and only_removes(ws, checked.kept)
        ):
            # Text only taken away or re-spaced, under a goal that asks for more: a recorded
            # real-model false success (git/substance.py).
            reduce(record, result, ws, job.base, None, violations, None)
            record.fail("no_changes", removal_only_message(job.node.goal))
            return None
        copied = self._copies_only(ws, firewall, checked.kept, result)
        if copied:
            # Code copied into a test module, and no test: a recorded real-model false success.
            reduce(record, result, ws, job.base, None, violations, None)
            record.fail("no_changes", copies_only_message(copied, job.node.goal))
            return None
        final = tests() if tests and result.status == "succeeded" else None
        if result.status != "succeeded" or (final is not None and not final.passed):
            reduce(record, result, ws, job.base, None, violations, final)
            if result.failure is not None:
                record.fail(result.failure, result.message)
            else:
                assert final is not None
                limit = f"; {final.limit}" if final.limit else ""
                record.fail(
                    "tests", f"tests failed after the audit (exit code {final.exit_code}{limit})"
                )
            return None
        # ChangeFacts once: the scan, the message's stat, the commit and the record all read this.
        self.staged = stage(ws)
        leaked = staged_secrets(ws, self.env.redactor, self.staged)
        if leaked:
            reduce(record, result, ws, job.base, None, violations, final)
            record.fail(
                "secret", f"the change adds what looks like a secret ({leaked}); not committed"
            )
            return None
        return violations, final

    # -- commit ----------------------------------------------------------------------------

    def _commit(
        self,
        ws: Workspace,
        result: WorkerResult,
        violations: list[Violation],
        final: TestOutcome | None,
    ) -> NodeVerdict:
        job, node = self.job, self.job.node
        self.crash("before_commit")
        summary = result.finish.summary if result.finish else ""
        # The summary is the model's text, shown as the worker's claim after what git itself
        # says changed (run/commit_text.py).
        message, trailers = commit_text(
            job,
            summary,
            result.usage,
            self.env.redactor,
            changed=staged_stat(ws, self.staged),
            grants=self.record.scope_grants,
            unclaimed=result.unclaimed,
        )
        if kind := message_secret(self.env.redactor, message, trailers, job.author):
            reduce(self.record, result, ws, job.base, None, violations, final)
            self.record.fail("secret", f"the commit's metadata holds what looks like a {kind}")
            return "failed"
        # A verify-only node (expect_changes: false) that changed nothing still leaves its one
        # commit: git records what is done.
        sha = commit(ws, message, trailers, author=job.author, allow_empty=True, staged=self.staged)
        if sha is None:
            raise RunError(f"git made no commit for task {node.task_id!r}")
        reduce(self.record, result, ws, job.base, sha, violations, final, self.staged)
        # The commit outlives the worktree; the central process lands it in the run's order.
        self.commit = sha
        return "succeeded"

    def _copies_only(
        self, ws: Workspace, firewall: Firewall, kept: list[Change], result: WorkerResult
    ) -> str:
        """``copies_in_place_of_tests`` of a finished node's whole change, against the Python
        files its scopes name one by one; "" when the change holds more, or is not judged."""
        node = self.job.node
        if result.status != "succeeded" or not node.expect_changes:
            return ""
        if not kept or not all(c.path.endswith(".py") and is_test_module(c.path) for c in kept):
            return ""  # the common case decided without reading a file
        texts = edited_texts(ws, kept)
        if texts is None:
            return ""
        named = {normalize_entry(e) for e in [*node.read_scope, *node.write_scope]}
        modules = {
            p: text
            for p in sorted(named)
            if p.endswith(".py") and not is_glob(p) and (text := firewall.current_text(p))
        }
        return copies_in_place_of_tests(texts, modules)


def no_changes_message(goal: str) -> str:
    """What a node that changed nothing is told (its retry starts with it)."""
    return (
        "you changed no file, so nothing was committed; the goal asks for: "
        f"{goal.strip()[:500]}. Make the change with write_file or edit_file inside your "
        "write scope, then call finish (a plan marks a verify-only node expect_changes: false)"
    )


def copies_only_message(copied: str, goal: str) -> str:
    """What a node whose change only copied code into a test module is told."""
    return (
        f"your change adds no test: {copied}, word for word, a copy of the code and not a test "
        f"of it; the goal asks for: {goal.strip()[:500]}. Import what the test needs from its "
        "module, write a test_ function that asserts what it returns, then call finish"
    )


def removal_only_message(goal: str) -> str:
    """What a node whose change only deleted text or changed whitespace is told."""
    return (
        "your change only deleted text or changed whitespace in files that already existed; "
        f"it adds nothing the goal asks for: {goal.strip()[:500]}. Keep the existing code and "
        "add the new code with write_file (the whole file, old and new parts) or edit_file, "
        "then call finish (a plan marks a verify-only node expect_changes: false)"
    )


def staged_stat(ws: Workspace, staged: ChangeFacts | None = None) -> str:
    """``git diff --stat`` of everything the commit will hold: ``staged``'s, else staged now
    as ``commit`` does."""
    if staged is not None:
        return staged.stat_text or " (no file changed)"
    ws.git(["add", "-A"] if ws.sparse is None else ["add", "-A", "--sparse"])
    stat = ws.git(["diff", "--cached", "--stat=72", "--no-ext-diff", "--no-color"]).stdout
    return stat.decode("utf-8", "replace").rstrip() or " (no file changed)"


def record_failure(record: TaskResult, exc: Exception, artifacts: ArtifactStore) -> None:
    """Fail ``record`` for an exception: a ``RunError`` is the node's ``error``; anything else
    (a full disk, a bug) is ``storage`` or ``internal``, with the traceback kept as an artifact
    beside the transcript. A node is never left running, and the run goes on or stops cleanly."""
    if isinstance(exc, RunError) and not isinstance(exc, StorageError):
        record.fail("error", str(exc))
        return
    error = at_boundary(exc)
    record.fail("storage" if isinstance(error, StorageError) else "internal", str(error))
    with contextlib.suppress(OSError):
        text = "".join(traceback.format_exception(exc))
        artifacts.put(record.task_id, "error.txt", text)


def _root_files(repo: Path, commit: str) -> list[str]:
    """Files (not directories) at the top of ``commit``'s tree: configs tests tend to need."""
    out = run_git(["ls-tree", "-z", "--full-tree", commit], repo).stdout.decode("utf-8", "replace")
    files = []
    for entry in filter(None, out.split("\0")):
        meta, _, name = entry.partition("\t")
        if meta.split()[1] == "blob":
            files.append(name)
    return files
