"""One node's life: fresh worktree -> firewall -> clean-slate prompt -> worker -> audit ->
final tests -> secret scan -> commit with trailers -> landing on the run branch.

``NodeRunner`` holds what the nodes of one run share (journal, branch, options, artifacts,
memory) and is what the scheduler calls for each ready node.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .artifacts import ArtifactStore
from .audit import audit
from .branch import TRAILER_RUN, TRAILER_TASK, TRAILER_TOKENS, BranchCheckedOut, RunBranch
from .budget import RunBudget
from .command_template import bind_command
from .context import AssembledPrompt, assemble_worker_prompt, manifest_for_request
from .errors import AntiSprawlError, RunError, StorageError, at_boundary
from .firewall import DEFAULT_DENY, Firewall
from .gitcmd import run_git, user_identity
from .journal import Journal, RunState, state_dir
from .lean import lean_target
from .manifest import save_manifest
from .memory import load_memory
from .path_rules import Violation
from .plan import TaskNode, command_argv
from .providers.base import ModelRequest, Provider, Usage
from .providers.limits import default_output_limit
from .redact import Redactor
from .reducer import TaskResult, now, reduce, upstream_summary
from .sandbox import SandboxPolicy, run_command
from .scheduler import NodeOutcome
from .secret_scan import staged_secrets
from .setup_step import failure_message, run_setup
from .tokens import TokenCounter
from .worker import TestOutcome, WorkerContext, WorkerLimits, run_worker
from .workspace import Workspace, commit

__all__ = ["ABLATIONS", "CRASH_POINTS", "ExecuteOptions", "NodeRunner"]

# Named points where a test can SIGKILL the process (ANTI_SPRAWL_CRASH_AT=point[:task]).
CRASH_POINTS = (
    "after_llm_response",
    "mid_write",
    "before_audit",
    "before_commit",
    "after_commit_before_journal",
)


@dataclass
class ExecuteOptions:
    """Settings for one execute/resume, resolved once by the CLI."""

    provider: Provider
    jobs: int = 1
    branch: str | None = None
    base: str | None = None
    sandbox: SandboxPolicy = field(default_factory=SandboxPolicy)
    test_timeout: float = 600.0
    # Ceiling of the lean first prompt; a node's target is min(this, 40% of its token_budget).
    context_budget: int | None = None  # default: lean.LEAN_CEILING (16k)
    crash_at: str | None = None
    on_event: Callable[[TaskResult], None] | None = None
    on_start: Callable[[RunState], None] | None = None
    stop: threading.Event = field(default_factory=threading.Event)
    # After a stop (Ctrl-C), how long running nodes get to wind down before they are abandoned.
    stop_grace: float = 5.0
    command_env: dict[str, str] | None = None
    # Evaluation ablations, each switching one boundary off (never for real work):
    #   firewall:    tool scope checks and the post-node audit off (.git stays protected)
    #   clean-slate: each worker also gets the transcripts of the nodes that ran before it
    #   scoping:     read scope = the whole repository, packed to the context window
    ablate: frozenset[str] = frozenset()
    # Check out only each node's scopes plus the repository's root-level files: much faster
    # on large repositories, for test commands that need nothing else.
    sparse: bool = False
    redactor: Redactor = field(default_factory=Redactor)
    context_window: int = 200_000
    # Output cap of one model response; None: the provider/model default (providers/limits.py).
    max_output_tokens: int | None = None
    # Run-wide token cap over every model call (``--max-tokens``); on resume, None keeps the
    # cap the run was started with.
    max_tokens: int | None = None


ABLATIONS = ("firewall", "clean-slate", "scoping")


def _maybe_crash(opts: ExecuteOptions, point: str, task_id: str) -> None:
    if not opts.crash_at:
        return
    name, _, task = opts.crash_at.partition(":")
    if name == point and (not task or task == task_id):
        os.kill(os.getpid(), signal.SIGKILL)


class NodeRunner:
    """The shared state of one execute/resume while nodes run."""

    def __init__(self, repo: Path, journal: Journal, branch: RunBranch, opts: ExecuteOptions):
        self.repo = repo
        self.journal = journal
        self.branch = branch
        self.opts = opts
        self.plan = journal.state.plan
        # Until the first reported usage calibrates it, assume a real model's tokenizer counts
        # a quarter more than ours: budget checks stop early rather than overrun.
        exact = opts.provider.name == "scripted"
        self.counter = TokenCounter(ratio=1.0 if exact else 1.25)
        self.artifacts = ArtifactStore(journal.run_dir / "artifacts")
        self.worktrees = state_dir(repo) / "worktrees"
        self.memory = load_memory(state_dir(repo) / "memory.yaml")
        self.author = user_identity(repo)  # commits are the user's; trailers name the tool
        self.max_output_tokens = opts.max_output_tokens or default_output_limit(
            opts.provider.name, opts.provider.model
        )
        self._committed: dict[str, str] = {}  # task -> its commit, waiting to land
        # Why the run stopped early, when not by Ctrl-C (a full disk, a checked-out branch).
        self.stop_error: AntiSprawlError | None = None
        self._active = 0
        self._active_lock = threading.Lock()
        journal.on_write_error = self.stop_run
        self._tokens_lock = threading.Lock()
        state = journal.state
        self.run_budget = RunBudget(
            state.max_tokens,
            state.tokens,
            on_charge=self._charged,
            on_exhausted=self._exhausted,
        )

    def _charged(self, spent: Usage) -> None:
        """After every model call: the run's total is on disk before the next one."""
        with self._tokens_lock:
            self.journal.state.tokens = self.run_budget.spent
            self.journal.checkpoint()

    def _exhausted(self, why: str) -> None:
        """The run cap refused a call: start nothing more; the run ends interrupted."""
        self.journal.state.stopped_by = why
        self.opts.stop.set()

    def stop_run(self, error: AntiSprawlError) -> None:
        """Stop handing out nodes (running ones wind down); the first reason is reported."""
        if self.stop_error is None:
            self.stop_error = error
        self.opts.stop.set()

    def _emit(self, record: TaskResult) -> None:
        if self.journal.closed:
            return  # the run is over: an abandoned node thread neither writes nor reports
        # Every way out (run.json, result.json, PR.md, the verdict, --json, downstream
        # prompts) reads this record: redact it in place, once, before anything sees it.
        clean = self.opts.redactor.model(record)
        for name in type(record).model_fields:
            setattr(record, name, getattr(clean, name))
        self.journal.update(record)
        if self.opts.on_event:
            self.opts.on_event(record)

    def skip(self, task_id: str, because: str) -> None:
        record = self.journal.state.tasks[task_id]
        record.status, record.skipped_because = "skipped", because
        record.reason = "dependency_failed"
        record.message = f"skipped because {because} failed"
        self._emit(record)

    @property
    def active_nodes(self) -> int:
        """Node threads inside ``run_node`` right now (after a stop: ones stuck in a call)."""
        with self._active_lock:
            return self._active

    def run_node(self, task_id: str) -> NodeOutcome:
        # Counted before the stop check: once the run sees no active node after a stop, any
        # thread that enters later sees the stop and returns without touching anything.
        with self._active_lock:
            self._active += 1
        try:
            if self.opts.stop.is_set():
                return "failed"  # handed out just before a stop: never started, stays pending
            return self._run_node(task_id)
        finally:
            with self._active_lock:
                self._active -= 1

    def _run_node(self, task_id: str) -> NodeOutcome:
        node = self.plan.task(task_id)
        record = self.journal.state.tasks[task_id]
        record.status, record.started_at, record.finished_at = "running", now(), None
        record.attempts += 1
        record.reason, record.message = None, ""
        self._emit(record)
        try:
            outcome = self._run_in_worktree(node, record)
        except RunError as exc:
            record.status, record.reason, record.message = "failed", "error", str(exc)
            outcome = "failed"
        except Exception as exc:
            # A node is never left `running`: a full disk or a bug fails this node, with the
            # traceback kept beside its transcript, and the run goes on or stops cleanly.
            error = at_boundary(exc)
            reason = "storage" if isinstance(error, StorageError) else "internal"
            record.status, record.reason, record.message = "failed", reason, str(error)
            with contextlib.suppress(OSError):
                self.artifacts.put(task_id, "error.txt", "".join(traceback.format_exception(exc)))
            outcome = "failed"
        record.finished_at = now()
        self._emit(record)
        return outcome

    def _run_in_worktree(self, node: TaskNode, record: TaskResult) -> NodeOutcome:
        tip = self.branch.tip()
        name = f"{self.journal.state.run_id}-{node.task_id}-{record.attempts}"
        ablate = self.opts.ablate
        read_scope, write_scope = list(node.read_scope), list(node.write_scope)
        deny: tuple[str, ...] | None = None
        if "scoping" in ablate:
            read_scope = ["**"]
        if "firewall" in ablate:
            read_scope, write_scope, deny = ["**"], ["**"], ()
        sparse = (
            [*read_scope, *write_scope, *_root_files(self.repo, tip)] if self.opts.sparse else None
        )
        with (
            Workspace.create(self.repo, self.worktrees, name, tip, sparse=sparse) as ws,
            Firewall(
                ws.path,
                read_scope,
                write_scope,
                deny=DEFAULT_DENY if deny is None else deny,
                redact=self.opts.redactor,
            ) as firewall,
        ):
            prepared = self._prepare(node, ws, record)
            if prepared is None:
                return "failed"
            upstream = [upstream_summary(self.journal.state.tasks[d]) for d in node.dependencies]
            budget = lean_target(node.token_budget, self.opts.context_budget)
            prompt_node = node
            if "scoping" in ablate:
                budget = self.opts.context_window
                prompt_node = node.model_copy(update={"read_scope": read_scope})
            # A firewall of its own: refusals while building the prompt (a binary file in
            # a read-scope directory) are not the worker's violations.
            with Firewall(
                ws.path, read_scope, write_scope, redact=self.opts.redactor
            ) as prompt_firewall:
                prompt = assemble_worker_prompt(
                    plan=self.plan,
                    node=prompt_node,
                    upstream=upstream,
                    firewall=prompt_firewall,
                    context_budget=budget,
                    memory=self.memory,
                    eager_reads="scoping" in ablate,
                )
            if "clean-slate" in ablate:
                prompt = self._with_foreign_transcripts(prompt, node.task_id)
            argv = self.plan.test_command_for(node)
            tests = self._test_runner(node, ws, argv) if argv else None
            ctx = WorkerContext(
                task_id=node.task_id,
                provider=self.opts.provider,
                firewall=firewall,
                system=prompt.system,
                first_message=prompt.first_user_message,
                limits=WorkerLimits(
                    token_budget=node.token_budget,
                    max_tool_calls=node.max_tool_calls,
                    max_output_tokens=self.max_output_tokens,
                ),
                artifacts=self.artifacts,
                counter=self.counter,
                run_tests=tests,
                run_budget=self.run_budget,
                on_request=self._manifest_hook(prompt, node.task_id),
                on_tool=lambda name: _maybe_crash(
                    self.opts, "mid_write" if name == "write_file" else "", node.task_id
                ),
                stop=self.opts.stop,
                redact=self.opts.redactor,
            )
            result = run_worker(ctx)
            _maybe_crash(self.opts, "before_audit", node.task_id)
            checked = audit(ws, ["**"] if "firewall" in ablate else node.write_scope)
            violations = [*prepared, *checked.violations]
            final_tests = tests() if tests and result.status == "succeeded" else None
            if result.status != "succeeded" or (final_tests and not final_tests.passed):
                reduce(record, result, ws, tip, None, violations, final_tests)
                record.status = "failed"
                if result.status != "succeeded":
                    record.reason, record.message = result.reason, result.message
                else:
                    code = final_tests.exit_code if final_tests else None
                    record.reason = "tests"
                    limit = f"; {final_tests.limit}" if final_tests and final_tests.limit else ""
                    record.message = f"tests failed after the audit (exit code {code}{limit})"
                return "failed"
            leaked = staged_secrets(ws, self.opts.redactor)
            if leaked:
                reduce(record, result, ws, tip, None, violations, final_tests)
                record.status, record.reason = "failed", "secret"
                record.message = (
                    f"the change adds what looks like a secret ({leaked}); not committed"
                )
                return "failed"
            _maybe_crash(self.opts, "before_commit", node.task_id)
            summary = result.finish.summary if result.finish else ""
            trailers = {
                TRAILER_RUN: self.journal.state.run_id,
                TRAILER_TASK: node.task_id,
                TRAILER_TOKENS: f"{result.usage.total} (cap {node.token_budget} per call)",
            }
            # The summary is the model's text: a token it copied must not reach the branch.
            message = self.opts.redactor(f"{node.name}\n\n{summary}")
            # A node that changed nothing still leaves its one commit: git records what is done.
            sha = commit(ws, message, trailers, author=self.author, allow_empty=True)
            assert sha is not None
            reduce(record, result, ws, tip, sha, violations, final_tests)
            # The commit outlives the worktree; `land` puts it on the run branch in order.
            self._committed[node.task_id] = sha
            return "succeeded"

    def land(self, task_id: str) -> NodeOutcome:
        """Replay the node's commit onto the run branch (called in the run's fixed order)."""
        record = self.journal.state.tasks[task_id]
        sha = self._committed.pop(task_id)
        record.status = "succeeded"
        # Kept beside the commit so a crash between landing and the journal loses nothing.
        clean = self.opts.redactor.model(record)
        try:
            self.artifacts.put(task_id, "result.json", clean.model_dump_json(indent=1))
        except OSError as exc:
            record.status, record.reason = "failed", "storage"
            record.message = f"not landed: cannot keep its result ({at_boundary(exc)})"
            self._emit(record)
            return "failed"
        try:
            record.commit = self.branch.land(sha, task_id)
        except BranchCheckedOut as exc:
            # Not this node's fault: the run stops; the node is left for `resume` to redo.
            self.stop_run(exc)
            record.status, record.commit = "pending", None
            return "failed"
        except RunError as exc:
            record.status, record.reason, record.message = "failed", "landing", str(exc)
            record.commit = None
            self._emit(record)
            return "failed"
        _maybe_crash(self.opts, "after_commit_before_journal", task_id)
        self._emit(record)
        return "succeeded"

    def _prepare(self, node: TaskNode, ws: Workspace, record: TaskResult) -> list[Violation] | None:
        """The plan's setup_command in the fresh worktree (setup_step.py): the violations it
        caused, or None when it failed (``record`` then says why; no model call is made)."""
        argv = command_argv(self.plan.setup_command)
        if not argv:
            return []
        log = self.artifacts.root / node.task_id / f"setup-{record.attempts}.log"
        try:
            done = run_setup(
                ws,
                argv,
                checkout=self.repo,
                policy=self.opts.sandbox,
                timeout=self.opts.test_timeout,
                log=log,
                env=self.opts.command_env,
                redact=self.opts.redactor,
            )
        except RunError as exc:
            record.status, record.reason, record.message = "failed", "setup", str(exc)
            return None
        record.setup = done.outcome
        if not done.outcome.passed:
            record.violations = done.violations
            record.status, record.reason = "failed", "setup"
            record.message = failure_message(done.outcome)
            return None
        return done.violations

    def _with_foreign_transcripts(self, prompt: AssembledPrompt, task_id: str) -> AssembledPrompt:
        """Ablation: the polluted context a shared chat history would give this worker."""
        texts = []
        for other, record in self.journal.state.tasks.items():
            if other != task_id and record.transcript and record.status in ("succeeded", "failed"):
                path = self.artifacts.path(record.transcript)
                if path.exists():
                    texts.append(f"## transcript of {other}\n{path.read_text(encoding='utf-8')}")
        if not texts:
            return prompt
        history = "Earlier work in this session:\n" + "\n\n".join(texts) + "\n\n"
        return prompt.model_copy(update={"first_user_message": history + prompt.first_user_message})

    def _test_runner(
        self, node: TaskNode, ws: Workspace, argv: list[str]
    ) -> Callable[..., TestOutcome]:
        counter = iter(range(1, 10_000))
        # {checkout} names the user's checkout, bound read-only (command_template.py).
        bound = bind_command(argv, self.repo, ws.path)

        def run(extra: Sequence[str] = ()) -> TestOutcome:
            """The test command, plus the worker's extra arguments (the final check has none)."""
            command = [*bound.argv, *extra]
            log = self.artifacts.root / node.task_id / f"tests-{next(counter)}.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            res = run_command(
                command,
                ws.path,
                timeout=self.opts.test_timeout,
                readable=bound.readable,
                unscanned=bound.unscanned,
                policy=self.opts.sandbox,
                log_path=log,
                env=self.opts.command_env,
                redact=self.opts.redactor,
            )
            tail = "\n".join(res.output.splitlines()[-40:])
            return TestOutcome(
                command=command,
                exit_code=res.exit_code,
                timed_out=res.timed_out,
                limit=res.limit_detail,
                tail=tail,
                log=str(log),
                layer=res.layer,
            )

        return run

    def _manifest_hook(
        self, prompt: AssembledPrompt, task_id: str
    ) -> Callable[[ModelRequest, int], None]:
        def hook(request: ModelRequest, n: int) -> None:
            if n > 1:
                _maybe_crash(self.opts, "after_llm_response", task_id)
            manifest = manifest_for_request(prompt, request, n=n)
            save_manifest(self.journal.run_dir, self.opts.redactor.model(manifest))
            record = self.journal.state.tasks[task_id]
            for item in manifest.items:
                if item.hidden_chars:
                    record.hidden_chars[item.source] = item.hidden_chars

        return hook


def _root_files(repo: Path, commit: str) -> list[str]:
    """Files (not directories) at the top of ``commit``'s tree: configs tests tend to need."""
    out = run_git(["ls-tree", "-z", "--full-tree", commit], repo).stdout.decode("utf-8", "replace")
    files = []
    for record in filter(None, out.split("\0")):
        meta, _, name = record.partition("\t")
        if meta.split()[1] == "blob":
            files.append(name)
    return files
