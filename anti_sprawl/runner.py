"""``execute`` and ``resume``: one node's life, from worktree to landed commit, and the run.

A node: fresh worktree at the run branch's tip -> firewall on its scopes -> clean-slate prompt
-> worker loop -> audit (out-of-scope changes reverted) -> final test run -> commit with
trailers -> land on the run branch -> ``TaskResult`` in the journal. The journal is written
after every state change; git decides what is done.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .artifacts import ArtifactStore
from .audit import audit
from .branch import TRAILER_RUN, TRAILER_TASK, TRAILER_TOKENS, RunBranch
from .context import AssembledPrompt, assemble_worker_prompt, manifest_for_request
from .errors import RunError, UsageError
from .firewall import DEFAULT_DENY, Firewall
from .gitcmd import GitError, run_git
from .gitlocks import clean_stale_locks
from .journal import Journal, RepoLock, RunState, new_run_id, state_dir
from .manifest import save_manifest
from .memory import load_memory
from .plan import Plan, TaskNode
from .providers.base import ModelRequest, Provider
from .redact import Redactor
from .reducer import TaskResult, now, reduce, upstream_summary
from .sandbox import SandboxPolicy, probe_sandbox, run_command
from .scheduler import NodeOutcome, run_dag
from .tokens import TokenCounter
from .validate import validate
from .worker import TestOutcome, WorkerContext, WorkerLimits, run_worker
from .workspace import Workspace, commit, ensure_excluded, remove_stale_worktrees

__all__ = ["ABLATIONS", "CRASH_POINTS", "ExecuteOptions", "execute", "resume"]

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
    context_budget: int | None = None  # default: a third of each node's token budget
    crash_at: str | None = None
    on_event: Callable[[TaskResult], None] | None = None
    on_start: Callable[[RunState], None] | None = None
    stop: threading.Event = field(default_factory=threading.Event)
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


ABLATIONS = ("firewall", "clean-slate", "scoping")


def _maybe_crash(opts: ExecuteOptions, point: str, task_id: str) -> None:
    if not opts.crash_at:
        return
    name, _, task = opts.crash_at.partition(":")
    if name == point and (not task or task == task_id):
        os.kill(os.getpid(), signal.SIGKILL)


def _git_out(repo: Path, args: list[str]) -> str:
    return run_git(args, repo).stdout.decode("utf-8", "replace").strip()


def _check_repo(repo: Path) -> Path:
    if not repo.is_dir():
        raise UsageError(f"repository not found: {repo}")
    probe = run_git(["rev-parse", "--show-toplevel"], repo, check=False)
    if probe.returncode != 0:
        raise UsageError(f"not a git repository: {repo}")
    top = Path(probe.stdout.decode().strip()).resolve()
    if run_git(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], top, check=False).returncode:
        raise UsageError(f"repository {top} has no commits yet; commit something first")
    return top


class _Run:
    """The shared state of one execute/resume while nodes run."""

    def __init__(self, repo: Path, journal: Journal, branch: RunBranch, opts: ExecuteOptions):
        self.repo = repo
        self.journal = journal
        self.branch = branch
        self.opts = opts
        self.plan = journal.state.plan
        self.counter = TokenCounter()
        self.artifacts = ArtifactStore(journal.run_dir / "artifacts")
        self.worktrees = state_dir(repo) / "worktrees"
        self.memory = load_memory(state_dir(repo) / "memory.yaml")

    def _emit(self, record: TaskResult) -> None:
        self.journal.update(record)
        if self.opts.on_event:
            self.opts.on_event(record)

    def skip(self, task_id: str, because: str) -> None:
        record = self.journal.state.tasks[task_id]
        record.status, record.skipped_because = "skipped", because
        record.reason = "dependency_failed"
        record.message = f"skipped because {because} failed"
        self._emit(record)

    def run_node(self, task_id: str) -> NodeOutcome:
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
                ws.path, read_scope, write_scope, deny=DEFAULT_DENY if deny is None else deny
            ) as firewall,
        ):
            upstream = [upstream_summary(self.journal.state.tasks[d]) for d in node.dependencies]
            budget = self.opts.context_budget or max(2000, node.token_budget // 3)
            prompt_node = node
            if "scoping" in ablate:
                budget = self.opts.context_window
                prompt_node = node.model_copy(update={"read_scope": read_scope})
            # A firewall of its own: refusals while building the prompt (a binary file in
            # a read-scope directory) are not the worker's violations.
            with Firewall(ws.path, read_scope, write_scope) as prompt_firewall:
                prompt = assemble_worker_prompt(
                    plan=self.plan,
                    node=prompt_node,
                    upstream=upstream,
                    firewall=prompt_firewall,
                    context_budget=budget,
                    memory=self.memory,
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
                    token_budget=node.token_budget, max_tool_calls=node.max_tool_calls
                ),
                artifacts=self.artifacts,
                counter=self.counter,
                run_tests=tests,
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
            final_tests = tests() if tests and result.status == "succeeded" else None
            if result.status != "succeeded" or (final_tests and not final_tests.passed):
                reduce(record, result, ws, tip, None, checked.violations, final_tests)
                record.status = "failed"
                if result.status != "succeeded":
                    record.reason, record.message = result.reason, result.message
                else:
                    code = final_tests.exit_code if final_tests else None
                    record.reason = "tests"
                    record.message = f"tests failed after the audit (exit code {code})"
                return "failed"
            leaked = _added_secrets(ws, self.opts.redactor)
            if leaked:
                reduce(record, result, ws, tip, None, checked.violations, final_tests)
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
                TRAILER_TOKENS: f"{result.usage.total}/{node.token_budget}",
            }
            message = f"{node.name}\n\n{summary}"
            sha = commit(ws, message, trailers) or _empty_commit(ws, message, trailers)
            reduce(record, result, ws, tip, sha, checked.violations, final_tests)
            record.status = "succeeded"
            # Kept beside the commit so a crash between landing and the journal loses nothing.
            self.artifacts.put(node.task_id, "result.json", record.model_dump_json(indent=1))
            record.commit = self.branch.land(sha, node.task_id)
            _maybe_crash(self.opts, "after_commit_before_journal", node.task_id)
            return "succeeded"

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
    ) -> Callable[[], TestOutcome]:
        counter = iter(range(1, 10_000))

        def run() -> TestOutcome:
            log = self.artifacts.root / node.task_id / f"tests-{next(counter)}.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            res = run_command(
                argv,
                ws.path,
                timeout=self.opts.test_timeout,
                policy=self.opts.sandbox,
                readable=[self.repo],
                log_path=log,
                env=self.opts.command_env,
            )
            tail = "\n".join(res.output.splitlines()[-40:])
            return TestOutcome(
                command=list(argv),
                exit_code=res.exit_code,
                timed_out=res.timed_out,
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
            save_manifest(self.journal.run_dir, manifest)
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


def _added_secrets(ws: Workspace, redactor: Redactor) -> str:
    """Orchestrator-side pre-commit scan (never repo hooks): secrets in the lines a node adds."""
    ws.git(["add", "-A", *(["--sparse"] if ws.sparse is not None else [])])
    diff = ws.git(["diff", "--cached", "--no-ext-diff", "--no-textconv", "-U0", "--no-color"])
    path = ""
    for line in diff.stdout.decode("utf-8", "replace").splitlines():
        if line.startswith("+++ "):
            path = line[6:] if line.startswith("+++ b/") else line[4:]
        elif line.startswith("+") and redactor(line) != line:
            kind = redactor(line).split("[REDACTED:", 1)[1].split("]", 1)[0]
            return f"{kind} in {path}"
    return ""


def _empty_commit(ws: Workspace, message: str, trailers: dict[str, str]) -> str:
    """A node that changed nothing still leaves its one commit: git is the record of done."""
    from .workspace import compose_message

    ws.git(
        ["commit", "--quiet", "--allow-empty", "--no-verify", "-F", "-"],
        input_bytes=compose_message(message, trailers).encode("utf-8"),
    )
    return ws.head


def _recover(saved: Path, record: TaskResult) -> TaskResult:
    """A node whose commit landed but whose journal entry was lost: rebuild its record."""
    try:
        recovered = TaskResult.model_validate_json(saved.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        recovered = record.model_copy()
        recovered.message = "recovered from the run branch (details lost)"
    recovered.status, recovered.finished_at = "succeeded", recovered.finished_at or now()
    return recovered


def _finish(run: _Run, lock: RepoLock) -> RunState:
    state = run.journal.state
    statuses = {t.status for t in state.tasks.values()}
    if run.opts.stop.is_set() and statuses != {"succeeded"}:
        # Interrupted: whatever did not land is left for `resume`, not reported as failed.
        state.status = "interrupted"
        for record in state.tasks.values():
            if record.status != "succeeded":
                record.status, record.skipped_because = "pending", None
                record.reason, record.message = None, "interrupted"
    else:
        state.status = "succeeded" if statuses == {"succeeded"} else "failed"
    run.journal.save()
    if state.status != "interrupted":
        from .run_report import write_pr_body

        write_pr_body(state, run.journal.run_dir / "PR.md")
    return state


def _drive(run: _Run, lock: RepoLock, already: list[str]) -> RunState:
    plan = run.plan
    deps = {t.task_id: list(t.dependencies) for t in plan.tasks}
    if run.opts.on_start:
        run.opts.on_start(run.journal.state)
    try:
        run_dag(
            deps,
            run.run_node,
            jobs=run.opts.jobs,
            already_succeeded=already,
            on_skip=run.skip,
            stop=run.opts.stop,
        )
    finally:
        remove_stale_worktrees(run.repo, run.worktrees)
        state = _finish(run, lock)
        lock.release()
    return state


def execute(plan: Plan, repo: Path, opts: ExecuteOptions) -> RunState:
    """Run ``plan`` against ``repo``; returns the final run state (see ``state.status``)."""
    repo = _check_repo(repo)
    report = validate(plan, repo)
    if not report.valid:
        first = report.errors[0].message
        raise UsageError(
            f"the plan is invalid against {repo}: {first} (run 'anti-sprawl validate')"
        )
    base_ref = opts.base or "HEAD"
    try:
        base = _git_out(repo, ["rev-parse", "--verify", f"{base_ref}^{{commit}}"])
    except GitError:
        raise UsageError(f"unknown base revision: {base_ref}") from None
    if probe_sandbox(opts.sandbox).layer is None:
        raise UsageError("no sandbox layer works here for test commands (install bubblewrap)")
    if base_ref == "HEAD":
        head = run_git(["symbolic-ref", "--quiet", "--short", "HEAD"], repo, check=False)
        base_branch = head.stdout.decode("utf-8", "replace").strip() or None
    else:
        is_branch = run_git(
            ["show-ref", "--verify", "--quiet", f"refs/heads/{base_ref}"], repo, check=False
        )
        base_branch = base_ref if is_branch.returncode == 0 else None
    run_id = new_run_id(plan.plan_id)
    lock = RepoLock(repo)
    lock.acquire(run_id)
    try:
        ensure_excluded(repo)
        branch = RunBranch(repo, opts.branch or f"anti-sprawl/{plan.plan_id}", run_id)
        from .branch import check_branch_name

        check_branch_name(repo, branch.name)
        branch.create(base)
        state = RunState(
            run_id=run_id,
            plan_id=plan.plan_id,
            repo=str(repo),
            base=base,
            base_branch=base_branch,
            branch=branch.name,
            jobs=opts.jobs,
            provider=opts.provider.name,
            model=opts.provider.model,
            sandbox=probe_sandbox(opts.sandbox).detail,
            plan=plan,
            tasks={
                t.task_id: TaskResult(
                    task_id=t.task_id,
                    name=t.name,
                    token_budget=t.token_budget,
                    max_tool_calls=t.max_tool_calls,
                )
                for t in plan.tasks
            },
        )
        journal = Journal(state_dir(repo) / "runs" / run_id, state)
        journal.save()
    except BaseException:
        lock.release()
        raise
    return _drive(_Run(repo, journal, branch, opts), lock, [])


def resume(run_id: str, repo: Path, opts: ExecuteOptions) -> RunState:
    """Continue an interrupted or failed run: git first, then only what is left."""
    repo = _check_repo(repo)
    journal = Journal.load(repo, run_id)
    lock = RepoLock(repo)
    lock.acquire(run_id)
    try:
        clean_stale_locks(repo)
        state = journal.state
        branch = RunBranch(repo, state.branch, run_id)
        if not branch.exists():
            branch.create(state.base)
        worktrees = state_dir(repo) / "worktrees"
        remove_stale_worktrees(repo, worktrees)
        landed = branch.landed_tasks()
        already: list[str] = []
        artifacts = journal.run_dir / "artifacts"
        for tid, record in state.tasks.items():
            if landed.get(tid):
                if record.status != "succeeded":
                    state.tasks[tid] = _recover(artifacts / tid / "result.json", record)
                    state.tasks[tid].commit = branch.task_commit(tid)
                already.append(tid)
            else:
                record.status, record.skipped_because = "pending", None
        state.status = "running"
        journal.save()
    except BaseException:
        lock.release()
        raise
    opts.jobs = opts.jobs or state.jobs
    return _drive(_Run(repo, journal, branch, opts), lock, already)
