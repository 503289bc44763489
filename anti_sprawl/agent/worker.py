"""The worker: one node's policy over the agent loop (``agent/loop.py``), with hard caps.

Every file operation goes through the node's ``Firewall``; ``run_tests`` goes through the
sandboxed runner the orchestrator hands in. Caps:

- ``token_budget`` is the **per-call** cap: no model call carries more than this many tokens,
  its input plus the output it may produce. Older observations are masked and then digested
  (``agent/digest.py``) to keep each call under it; the node fails only when even the essentials
  (first prompt, digest, latest turn) do not fit.
- ``max_tool_calls`` caps tool calls; model calls are capped at ``max_tool_calls + 2``
  (``CALL_SLACK``: text-only turns count too), so a node spends at most about
  ``token_budget × (max_tool_calls + 2)`` tokens.
- A shared ``RunBudget`` (``execute --max-tokens``) refuses the call that could push the run
  past its total.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..fs.firewall import Firewall, Violation
from ..fs.scope_grant import ScopeGrant
from ..fs.scopes import is_glob, normalize_entry
from ..ids import FINISH_TOOL
from ..lifecycle import WorkerFailure
from ..providers.base import (
    ModelRequest,
    ModelResponse,
    Provider,
    SystemBlock,
    ToolCall,
    Usage,
    UserMessage,
)
from ..providers.limits import cut_message
from ..providers.prices import Price
from ..providers.text_calls import echoes_data_label, is_blank, text_call_nudge
from ..tokens import TokenCounter
from ..trust import wrap_data
from .artifacts import ArtifactStore, Observer
from .budget import Budget, RunBudget
from .change_tools import copied_into_tests, import_of_itself
from .digest import RESTART_HEADER, Compactor
from .dispatch import Ending, Handler, ToolOutcome
from .echoes import our_lines, without_echo
from .file_blocks import has_unlabelled_code, whole_file_blocks
from .handlers import read_handlers, tool_table, write_handlers
from .limits import CALL_SLACK, WorkerLimits
from .loop import TRANSCRIPT, Loop, Transcript
from .nudges import (
    CONTINUE_PROMPT,
    EMPTY_REPLY_PROMPT,
    FAILING_FINISH_REFUSALS,
    RESTART_FILE_CHARS,
    RESTART_LAST_LINE,
    SAME_REPLY_LIMIT,
    TAIL_IN_NUDGE,
    TEXT_TURN_LIMIT,
    UNCLAIMED_ENDINGS,
    WHOLE_FILE_HINT,
    WRITTEN_PROMPT,
)
from .test_hints import import_hints
from .tools import FinishArgs, RequestScopeArgs

__all__ = [
    "CALL_SLACK",
    "CONTINUE_PROMPT",
    "TestOutcome",
    "WorkerContext",
    "WorkerLimits",
    "WorkerResult",
    "run_worker",
]

# How the loop ended: a finish, or one of the worker's failures (lifecycle.FailReason).
Reason = Literal["finished"] | WorkerFailure
_CHANGING_TOOLS = frozenset({"write_file", "edit_file", "delete_file", "move_file"})


class TestOutcome(BaseModel):
    """One run of the node's test command."""

    __test__ = False  # not a pytest test class

    command: list[str]
    exit_code: int | None
    timed_out: bool = False
    tail: str = ""
    log: str | None = None
    layer: str = ""
    limit: str = ""  # which sandbox limit (probably) ended the run, in words; "" for none
    # Failed only with tests that fail at the start commit too (run/baseline.py): a pass.
    known_failures: list[str] = Field(default_factory=list)
    # The worker's arguments were the test command itself, so the whole command ran alone.
    restated: bool = False

    @property
    def passed(self) -> bool:
        return (self.exit_code == 0 or bool(self.known_failures)) and not self.timed_out


class WorkerResult(BaseModel):
    """What the loop produced; the reducer turns it (plus the worktree) into a TaskResult."""

    task_id: str
    status: Literal["succeeded", "failed"]
    reason: Reason
    message: str = ""
    finish: FinishArgs | None = None
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float | None = Field(default=None, description="None when the model is unpriced.")
    calls: int = 0
    tool_calls: int = 0
    violations: list[Violation] = Field(default_factory=list)
    tool_errors: list[str] = Field(default_factory=list)
    tests: TestOutcome | None = None
    transcript: str | None = None
    truncated: int = Field(default=0, description="Responses cut at the output limit.")
    masked: int = Field(default=0, description="Observations masked to references.")

    @property
    def failure(self) -> WorkerFailure | None:
        """Why the loop stopped without a finish (None when it finished)."""
        return None if self.reason == "finished" else self.reason

    digests: int = Field(default=0, description="Times the conversation was digested.")
    unclaimed: str = Field(
        default="",
        description="Why the model never called finish, when its change was taken anyway "
        "because it passes the whole test command (UNCLAIMED_ENDINGS); empty otherwise.",
    )


@dataclass
class WorkerContext:
    """Everything one worker run needs; built by the scheduler from the plan and the run."""

    task_id: str
    provider: Provider
    firewall: Firewall
    system: list[SystemBlock]
    first_message: str
    limits: WorkerLimits
    artifacts: ArtifactStore
    counter: TokenCounter = field(default_factory=TokenCounter)
    # the node's test command with extra arguments appended (none: the whole command)
    run_tests: Callable[[Sequence[str]], TestOutcome] | None = None
    run_budget: RunBudget | None = None
    on_request: Callable[[ModelRequest, int], None] | None = None
    on_tool: Callable[[str], None] | None = None  # after each executed tool call (crash tests)
    on_charged: Callable[[Usage, float], None] | None = None  # after each call (live views)
    redact: Callable[[str], str] = str  # scrubs secrets from observations (see redact.py)
    stop: threading.Event = field(default_factory=threading.Event)
    model: str | None = None  # the node's model (None: the provider's default)
    price: Price | None = None  # its prices (None: unpriced, tokens only)
    attempt: int = 1  # the node's attempt: later ones keep their own transcript and call ids
    # The paths the worktree changes now (a finish naming others is refused); None: unchecked.
    changed_files: Callable[[], list[str]] | None = None
    # ``request_scope``: the run's decision on each path (run/scope_grants.py), which also
    # widens the firewall for what it grants; None: scope requests are off (every one refused).
    request_scope: Callable[[RequestScopeArgs], list[ScopeGrant]] | None = None
    # A finish while the whole test command fails is refused (FAILING_FINISH_REFUSALS times)
    # with the failure shown. Off for a script: its next turn is fixed, a refusal changes nothing.
    check_tests_at_finish: bool = True
    # Files in the write scope that the node's goal names by path: the first finish that
    # leaves one unchanged is refused, saying so (make real-model 2026-12-05 run t: a finish
    # over calc.py alone, "and a test for it in test_calc.py" never written). Empty for a script.
    goal_files: tuple[str, ...] = ()
    # Whether the goal asks for something a deletion can do (git/substance.goal_allows_removal);
    # if not, the first finish that deletes a file the goal names, or only removes text or
    # changes whitespace in it (``hollow_changes``: those of the given changed paths), is
    # refused too. ``hollow_changes`` judges the changes the last ``changed_files`` call read.
    goal_allows_removal: bool = True
    hollow_changes: Callable[[Sequence[str]], list[str]] | None = None


def run_worker(ctx: WorkerContext) -> WorkerResult:
    """Run the tool loop until ``finish``, a cap, a provider failure or a stop request."""
    return _Worker(ctx).run()


class _Worker:
    """The worker policy: its tools, its caps, and how it keeps calls under the cap."""

    def __init__(self, ctx: WorkerContext):
        self.ctx = ctx
        limits = ctx.limits
        self.tool_calls = 0
        self.truncated = 0
        # each text reply since the last tool call, and how often it was sent
        self._replies: collections.Counter[str] = collections.Counter()
        # a prose reply whose files were written -> (their paths, the call it came in)
        self._written_replies: dict[str, tuple[set[str], int]] = {}
        self.tool_errors: list[str] = []
        self.tests: TestOutcome | None = None
        self._checked: TestOutcome | None = None  # a whole run since the last change to files
        self._failing_finishes = 0
        self._told_goal_files = False
        self._told_copied = False
        self._stuck_before = False  # whether the last reply was empty or an echo (see _restart)
        self._from_text = False  # whether the call running now was read from prose
        # (tool, arguments) run from prose -> (the paths it touched, the call it came in)
        self._text_changes: dict[tuple[str, str], tuple[set[str], int]] = {}
        self._repeat_turns: set[int] = set()  # turns that only repeated changes already run
        changing = write_handlers(ctx.firewall, lambda: self._from_text)
        handlers = {
            **read_handlers(ctx.firewall, limits.observation_chars),
            **{name: self._once_from_text(name, run) for name, run in changing.items()},
            "run_tests": self._run_tests,
            "request_scope": self._request_scope,
            FINISH_TOOL: self._finish,
        }
        self.loop = Loop(
            task_id=ctx.task_id,
            provider=ctx.provider,
            system=ctx.system,
            tools=tool_table(handlers),
            budget=Budget(
                per_call=limits.token_budget,
                max_output=limits.max_output_tokens,
                keep_free=limits.output_reserve,
                min_output=limits.min_output_tokens,
                counter=ctx.counter,
                run=ctx.run_budget,
                price=ctx.price,
            ),
            max_calls=limits.max_calls,
            observer=Observer(ctx.task_id, limits.observation_chars, ctx.artifacts, ctx.redact),
            messages=[UserMessage(content=ctx.first_message)],
            stop=ctx.stop,
            on_request=ctx.on_request,
            on_charged=ctx.on_charged,
            transcript=Transcript(
                ctx.artifacts,
                ctx.task_id,
                ctx.redact,
                TRANSCRIPT if ctx.attempt == 1 else f"transcript-{ctx.attempt}.jsonl",
            ),
            model=ctx.model,
            call_prefix=None if ctx.attempt == 1 else f"{ctx.task_id}.attempt{ctx.attempt}",
        )
        self.compactor = Compactor(self.loop, ctx.artifacts)
        self._ours = our_lines([ctx.first_message])  # the brief's and a retry note's prose

    def run(self) -> WorkerResult:
        ending = self.loop.run(self)
        ctx, loop = self.ctx, self.loop
        finished = ending.reason == "finished"
        message = ending.message
        unclaimed = ""
        if ending.reason in UNCLAIMED_ENDINGS and self._passing_change():
            finished, unclaimed = True, message
        if ending.reason == "budget":
            message = (
                f"{message}; raise the node's token_budget (resume --plan) or keep its turns "
                "smaller (fewer tool calls at once, smaller reads)"
            )
        elif ending.reason == "calls":
            message = (
                f"{message} (max_tool_calls {ctx.limits.max_tool_calls} + {CALL_SLACK}; "
                "turns without a tool call count too)"
            )
        return WorkerResult(
            task_id=ctx.task_id,
            status="succeeded" if finished else "failed",
            reason="finished" if finished else ending.reason,
            message="" if finished else message,
            finish=ending.value if ending.reason == "finished" else None,
            usage=loop.budget.spent,
            cost_usd=loop.budget.spent_cost if ctx.price is not None else None,
            calls=loop.calls,
            tool_calls=self.tool_calls,
            violations=list(ctx.firewall.violations),
            tool_errors=self.tool_errors,
            truncated=self.truncated,
            tests=self.tests,
            transcript=loop.transcript.ref if loop.transcript else None,
            masked=len(self.compactor.masked),
            digests=self.compactor.digests,
            unclaimed=unclaimed,
        )

    def _changed_texts(self, changed: Iterable[str]) -> dict[str, str]:
        """The texts of the ``changed`` files in the write scope, as they are now."""
        fw = self.ctx.firewall
        return {p: fw.current_text(p) or "" for p in changed if fw.write_scope.matches(p)}

    def _copied_code(self, changed: dict[str, str]) -> str:
        """``copied_into_tests`` over the changed files and the Python files the read scope
        names one by one: the code a test should import may be another node's (make
        real-model 2026-12-05 run ac: the test node, reading the calc.py its dependency
        wrote, appended a copy of ``subtract()`` to test_calc.py and finished)."""
        fw = self.ctx.firewall
        named = [e for e in fw.read_scope.entries if e.endswith(".py") and not is_glob(e)]
        read = {p: fw.current_text(p) for p in named if p not in changed}
        return copied_into_tests({**{p: t for p, t in read.items() if t is not None}, **changed})

    def _passing_change(self) -> bool:
        """Whether the worktree changes a file in the write scope, no changed module imports
        itself (a defect its write was told of, which a test need not reach: run k's attempt
        1 appended ``from calc import add`` and a wrong test function to calc.py, and the
        tests passed), no changed test module holds a copy of the code it should test
        (``copied_into_tests``: run o), and the whole test command passes on it."""
        if self.ctx.changed_files is None:
            return False
        changed = self._changed_texts(self.ctx.changed_files())
        if (
            not changed
            or any(import_of_itself(p, text) for p, text in changed.items())
            or self._copied_code(changed)
        ):
            return False
        run = self._whole_run()
        return run is not None and run.passed

    # -- the policy ----------------------------------------------------------------------

    def shown(self, text: str) -> str:
        return without_echo(text, self._ours)

    def text_turn(self, response: ModelResponse) -> str | Ending | list[ToolCall]:
        raw = response.text.strip()
        writes = self._whole_files(raw)  # read from the reply as it came
        # a reply that only copies our own prose back (agent/echoes.py) said nothing
        reply = self.shown(response.text).strip()
        # (a reply cut where it began to write a tool's answer is blank too: its own nudge)
        blank = is_blank(reply) and not response.text_call_problem
        stuck = blank or echoes_data_label(reply)
        stuck_before, self._stuck_before = self._stuck_before, stuck
        if writes:
            return writes
        self.compactor.text_turn()
        stalled = self._stalled(reply)
        if stalled is not None:
            return stalled
        if raw in self._written_replies:
            return WRITTEN_PROMPT
        if has_unlabelled_code(reply):
            scope = ", ".join(self.ctx.firewall.write_scope.entries)
            return (
                "Your reply showed code in a fenced block, but the line before it does not name "
                f"a file you may write ({scope}), so nothing was written. {WHOLE_FILE_HINT}"
                f"{self._progress()}"
            )
        if stuck and stuck_before:
            return self._restart()
        if response.text_call_problem:
            nudge = text_call_nudge(response.text_call_problem, self.loop.specs)
            return f"{nudge} {WHOLE_FILE_HINT}{self._progress()}"
        if is_blank(reply):
            return EMPTY_REPLY_PROMPT + self._progress()
        return f"{CONTINUE_PROMPT} {WHOLE_FILE_HINT}{self._progress()}"

    def _restart(self) -> str:
        """The conversation dropped after the brief, and what to say next: where the attempt
        stands (``RESTART_LAST_LINE``'s comment says why)."""
        self.compactor.restart()
        fw = self.ctx.firewall
        changed = sorted(set(self.ctx.changed_files())) if self.ctx.changed_files else []
        texts = {p: fw.current_text(p) for p in changed if fw.write_scope.matches(p)}
        kept = {p: t for p, t in texts.items() if t is not None}
        # a file the attempt deleted (make real-model 2026-12-05 run ag: calc.py gone, and
        # the restart said it was "changed on disk"; the model's next edit found no file)
        gone = [p for p in texts if p not in kept]
        removed = "Your earlier turns in this attempt were removed: the last ones called no tool."
        if not changed:
            standing = f"{removed} You have changed no file yet."
        elif kept and sum(len(t) for t in kept.values()) <= RESTART_FILE_CHARS:
            shown = "".join(wrap_data("file", p, self.ctx.redact(t)) for p, t in kept.items())
            standing = f"{removed} They changed {', '.join(kept)}, which are now:\n{shown}"
        elif kept:
            standing = (
                f"{removed} They changed {', '.join(kept)}, which are changed on disk "
                "(read_file shows them)."
            )
        else:
            standing = removed
        if gone:
            standing += (
                f"\nThey deleted {', '.join(gone)}: it is gone now (write_file creates a file "
                "again, whole)."
            )
        checked = self._checked_now() if changed else ""  # the old files' verdict says nothing
        state = f"{RESTART_HEADER}\n{standing}{checked}".rstrip("\n")
        text = f"{state}\n\n{RESTART_LAST_LINE}"
        self.loop.log({"event": "restart", "message": text})
        return text

    def _progress(self) -> str:
        """Which write-scope files the worktree changes so far, and which it does not yet.

        A small model told its finish named a file it had not changed explained the refusal
        back to us four times instead of writing the file (make real-model 2026-12-03, calls
        6-9); the state, said plainly after each text-only turn, is the next step. Entries
        with a wildcard are not listed as unchanged (they name no one file)."""
        if self.ctx.changed_files is None:
            return ""
        changed = sorted(set(self.ctx.changed_files()))
        if not changed:
            return "\n(you have changed no file yet)"
        pending = [
            entry
            for entry in self.ctx.firewall.write_scope.entries
            if not any(c in entry for c in "*?[")
            and not any(
                p == entry.rstrip("/") or p.startswith(entry.rstrip("/") + "/") for p in changed
            )
        ]
        todo = f"; not changed yet: {', '.join(pending)}" if pending else ""
        return f"\n(changed so far: {', '.join(changed)}{todo}){self._checked_now()}"

    def _checked_now(self) -> str:
        """The whole test command's verdict on the worktree as it is, after a text-only turn
        over a change (one run per state of the files): recorded from Qwen2.5-Coder-1.5B (make
        real-model 2026-12-03 run 5, calls 11-14), which wrote a right calc.py and a right
        test in prose, then a summary in prose instead of a finish, then echoes of our tags
        until the attempt stalled and the work was thrown away."""
        run = self._whole_run()
        if run is None:
            return ""
        if run.passed:
            return "\nThe whole test command passes with your changes: if the goal is met, call finish."
        tail = "\n".join(run.tail.strip().splitlines()[-TAIL_IN_NUDGE:]) + self._hints(run.tail)
        shown = wrap_data("observation", "run_tests", self.ctx.redact(tail))  # its output: data
        how = "timed out" if run.timed_out else f"fails (exit code {run.exit_code})"
        return f"\nThe whole test command {how} with your changes; its last lines:\n{shown}"

    def _whole_files(self, reply: str) -> list[ToolCall]:
        """``write_file`` calls for the whole files a prose reply shows (agent/file_blocks.py),
        once per reply: the same reply again is a repeat, not new work."""
        if reply in self._written_replies or ("```" not in reply and "<data" not in reply):
            return []
        may_write = self.ctx.firewall.write_scope.matches
        blocks = whole_file_blocks(reply, may_write, self._scope_files())
        if not blocks:
            return []
        self._written_replies[reply] = ({path for path, _ in blocks}, self.loop.calls)
        return [
            ToolCall(
                id=f"call_file_{self.loop.calls}_{n}",  # ids any provider accepts
                name="write_file",
                arguments={"path": path, "content": content},
                from_text=True,
            )
            for n, (path, content) in enumerate(blocks, 1)
        ]

    def _scope_files(self) -> dict[str, str]:
        """The texts of the files the write scope names one by one (not its directories or
        globs), as they are now, "" for one that does not exist: what an unlabelled block may
        restate (agent/file_blocks.py)."""
        fw = self.ctx.firewall
        named = [e for e in fw.write_scope.entries if not e.endswith("/") and not is_glob(e)]
        return {path: fw.current_text(path) or "" for path in named}

    def _stalled(self, reply: str) -> Ending | None:
        """Count one reply without a tool call; the ending when the attempt has stalled."""
        self._replies[reply] += 1
        if self._replies[reply] >= SAME_REPLY_LIMIT:
            return Ending(
                "stalled",
                f"the model sent the same reply {self._replies[reply]} times without calling a tool "
                "in between",
            )
        in_a_row = sum(self._replies.values())
        if in_a_row >= TEXT_TURN_LIMIT:
            return Ending(
                "stalled", f"the model sent {in_a_row} replies in a row without calling a tool"
            )
        return None

    def cut_turn(self, max_output_tokens: int, text: str) -> str | Ending:
        """A response cut at the output limit: its tool call is lost; say so, and how to go on.
        It is a reply without a tool call, counted as one (make real-model 2026-12-05 run y:
        ``obj['test_calc.py']`` over and over, stopped as repeating six times running)."""
        self.truncated += 1
        self._stuck_before = False
        self.compactor.text_turn()
        stalled = self._stalled(text.strip())
        return stalled if stalled is not None else cut_message(max_output_tokens, text)

    def before_tool(self, call: ToolCall) -> Ending | None:
        self._replies.clear()  # a tool call breaks a run of replies
        self._stuck_before = False
        self._from_text = call.from_text
        if self.tool_calls >= self.ctx.limits.max_tool_calls:
            return Ending(
                "tool_calls", f"tool-call cap of {self.ctx.limits.max_tool_calls} reached"
            )
        self.tool_calls += 1
        return None

    def after_tool(self, call: ToolCall, outcome: ToolOutcome | None) -> Ending | None:
        if outcome is None:
            kept = self.loop.observer.kept.get(call.id)
            text = kept.text.removeprefix("error: ") if kept else "refused"
            self.tool_errors.append(f"{call.name}: {text}")
        changed = call.name in _CHANGING_TOOLS and outcome is not None
        if changed and self.loop.calls not in self._repeat_turns:  # not an "already done"
            self._checked = None
        self.compactor.record(call, outcome)
        if self.ctx.on_tool:
            self.ctx.on_tool(call.name)
        if len(self._repeat_turns) >= SAME_REPLY_LIMIT - 1:  # the reply that made them too
            return Ending(
                "stalled",
                f"the model sent changes it had already made {len(self._repeat_turns) + 1} "
                "times without another change in between",
            )
        return None

    def compactions(self) -> list[Callable[[], bool]]:
        return self.compactor.compactions()

    def compact_early(self) -> int:
        """Mask old observations once the input needs ``mask_ratio`` of the cap."""
        return int(self.ctx.limits.token_budget * self.ctx.limits.mask_ratio)

    def explain(self) -> str:
        return self.compactor.explain()

    def _once_from_text(self, name: str, handler: Handler) -> Handler:
        """``handler``, run once per attempt for each change read from the model's prose: the
        same recovered call again is a repeat (recorded: make real-model 2026-12-03 run 8,
        calls 1, 3, 4, 6 and 7, one reply holding two write_file calls, sent five times), and
        run again it would not be the same change (a definition added after the file's own,
        then the file written whole as that definition alone). A change of the same path in
        between makes it new again: run ag (make real-model 2026-12-05, calls 13-16) wrote
        calc.py, deleted it, and sent the same write again, which was called done, so the node
        went on without calc.py."""

        def run(args: Any) -> ToolOutcome:
            key = (name, args.model_dump_json())
            if self._from_text and key in self._text_changes:
                self._repeat_turns.add(self.loop.calls)
                done = f"already done: this {name} of {_target(args)} came in an earlier reply"
                return ToolOutcome(f"{done} and was run then; nothing changed now", summary=done)
            outcome = handler(args)
            self._repeat_turns.clear()  # a change ran: the model is not repeating itself
            touched = _paths(args)
            self._forget_changes_of(touched)
            if self._from_text:  # a refused change may be sent again
                self._text_changes[key] = (touched, self.loop.calls)
            return outcome

        return run

    def _forget_changes_of(self, touched: set[str]) -> None:
        """Earlier replies' changes of the ``touched`` paths are no longer what those files
        hold: sent again, they are new changes (the same reply's other changes stay
        remembered: run again, a definition added after a file's own would be added twice)."""
        now = self.loop.calls
        self._text_changes = {
            k: v for k, v in self._text_changes.items() if v[1] == now or not v[0] & touched
        }
        self._written_replies = {
            r: v for r, v in self._written_replies.items() if v[1] == now or not v[0] & touched
        }

    # -- the worker's own tools ----------------------------------------------------------

    def _run_tests(self, args: Any) -> ToolOutcome:
        if self.ctx.run_tests is None:
            return ToolOutcome("this task has no test command", status="error")
        run = self.ctx.run_tests(args.args)
        self.tests = run
        if not args.args or run.restated:
            self._checked = run
        return self._tests_outcome(run)

    def _tests_outcome(self, run: TestOutcome) -> ToolOutcome:
        verdict = "passed" if run.passed else ("timed out" if run.timed_out else "failed")
        if _ran_no_test(run):
            verdict = "ran none"
        if run.known_failures:
            count = len(run.known_failures)
            verdict += f" apart from {count} failure(s) that fail before this task too"
        limit = f"; {run.limit}" if run.limit else ""
        head = f"tests {verdict} (exit code {run.exit_code}{limit}): {' '.join(run.command)}"
        status = "ok" if run.passed else "failed"
        text = f"{head}\n{run.tail}"
        if run.restated:
            text += "\nnote: your args were the test command itself, so it ran once, whole"
        if _ran_no_test(run):
            text += f"\nnote: {NO_TEST_RAN}"
        if not run.passed:
            text += self._hints(run.tail)
        return ToolOutcome(text, status=status, summary=head)

    def _hints(self, tail: str) -> str:
        """The hints (agent/test_hints.py) under a failing run's output, each on its own line."""
        fw = self.ctx.firewall
        hints = import_hints(tail, fw.write_scope.entries, fw.current_text)
        return "".join(f"\n{hint}" for hint in hints)

    def _request_scope(self, args: Any) -> ToolOutcome:
        """One line per path: granted, or why not; the worker may then finish with what it has."""
        assert isinstance(args, RequestScopeArgs)
        if self.ctx.request_scope is None:
            return ToolOutcome(
                "scope requests are off for this run; finish with what you have",
                status="error",
                wrap=False,
            )
        decided = self.ctx.request_scope(args)
        lines = [
            f"{'granted' if d.granted else 'refused'}: {d.mode} {d.path!r}: {d.why}"
            for d in decided
        ]
        if decided and all(d.already for d in decided):
            # make real-model 2026-12-05 run ab: the same request for calc.py, in scope from
            # the start, four times between empty replies; and after a restart (run x's
            # replay against the served model) 5 of 6 first calls asked for files in scope
            lines.append(
                "Nothing was needed: you may already change these files. Change them now: "
                "write_file with the whole new content, or edit_file."
                if args.mode == "write"
                else "Nothing was needed: you may already read these files (read_file)."
            )
        granted = sum(d.granted for d in decided)
        status = "ok" if granted else "error"
        summary = f"{granted} of {len(decided)} {args.mode} request(s) granted"
        return ToolOutcome("\n".join(lines), status=status, summary=summary, wrap=False)

    def _finish(self, args: Any) -> ToolOutcome:
        """Finish, unless it names files the worktree does not change (a claim we can check),
        or (once) leaves alone a file its goal names.

        Over an empty diff a finish is refused once when the goal names a file in the write
        scope, then taken: the attempt fails ``no_changes`` (run/node_work.py), whose retry note
        says so, instead of a loop of refusals. The one refusal is cheaper than a new attempt
        and was measured to help: run aa's test node ran the old tests and finished over no
        change; asked again with this refusal, the served model answered with a write or an
        edit of test_calc.py 2 times in 6, and with none in 6 when told only that its finish
        named files it had not changed (docs/local-models.md, run aa)."""
        assert isinstance(args, FinishArgs)
        # asked of git only when something reads it: a claim to check, or the tests to run
        gated = self.ctx.check_tests_at_finish and self.ctx.run_tests is not None
        asked = bool(args.files) or gated or bool(self.ctx.goal_files)
        wanted = self.ctx.changed_files is not None and asked
        changed = set(self.ctx.changed_files()) if self.ctx.changed_files and wanted else set()
        if args.files and changed:
            claimed = [f for f in args.files if f.strip().removeprefix("./") not in changed]
            if claimed:
                actual = ", ".join(sorted(changed)) or "no file"
                return ToolOutcome(
                    f"finish refused: it names {', '.join(claimed)}, but your changes touch "
                    f"{actual}. Make those changes first, or name only the files you changed.",
                    status="error",
                    wrap=False,
                )
        refused = self._goal_files_refusal(changed)
        if refused is not None:
            return refused
        # (off for a script, as the test check is: its next turn is fixed)
        asks = bool(changed) and self.ctx.check_tests_at_finish and not self._told_copied
        copied = self._copied_code(self._changed_texts(changed)) if asks else ""
        if copied:
            self._told_copied = True
            return ToolOutcome(
                f"finish refused (this once): {copied}, word for word: a copy of the code, not "
                "a test of it. Import what the test needs from its module and assert what it "
                "returns, then call finish.",
                status="error",
                wrap=False,
            )
        # over an empty diff (or none known) the tests say nothing new: no_changes decides
        failing = self._failing_tests() if changed else None
        if failing is not None:
            outcome = self._tests_outcome(failing)
            return ToolOutcome(
                "finish refused: the whole test command ran first, and it fails with your "
                f"changes. Fix that, then call finish again.\n{outcome.text}",
                status="failed",
                summary=f"finish refused: {outcome.summary}",
            )
        return ToolOutcome("finished", wrap=False, ending=Ending("finished", value=args))

    def _goal_files_refusal(self, changed: set[str]) -> ToolOutcome | None:
        """The first finish that leaves a file the goal names as it was, or deletes one the
        goal does not ask to remove, refused, saying so; None otherwise or after that once.
        (Run ag, node 2: told how to replace calc.py by deleting it, the model deleted it and
        landed tests that defined add() and subtract() themselves.)"""
        if self._told_goal_files:
            return None
        untouched = [p for p in self.ctx.goal_files if p not in changed]
        deleted: list[str] = []
        if not self.ctx.goal_allows_removal:
            touched = [p for p in self.ctx.goal_files if p in changed]
            deleted = [p for p in touched if self.ctx.firewall.current_text(p) is None]
            kept = [p for p in touched if p not in deleted]
            if kept and self.ctx.hollow_changes is not None:  # git asked only then
                # run al: test_calc.py written again with one more blank line, as its test
                untouched += self.ctx.hollow_changes(kept)
        if not untouched and not deleted:
            return None
        self._told_goal_files = True
        named = ", ".join(untouched)
        if deleted:
            gone = ", ".join(deleted)
            text = (
                f"finish refused (this once): you deleted {gone}, which your goal names and "
                "does not ask to remove. Write it again whole (write_file: what it held, with "
                "your change), then call finish."
            )
        elif changed:
            text = (
                f"finish refused (this once): your goal names {named}, in your write scope, "
                "and your changes leave it as it was (or only remove text or change its "
                "whitespace). If the goal needs a change there, make it now; if not, call "
                "finish again."
            )
        else:
            text = (
                f"finish refused (this once): you changed no file, and your goal names "
                f"{named}, in your write scope. Make the change there now (write_file or "
                "edit_file), then call finish."
            )
        return ToolOutcome(text, status="error", wrap=False)

    def _failing_tests(self) -> TestOutcome | None:
        """The node's whole test command on the worktree as it is, when no whole run since the
        last change to a file passed and it fails now (refused ``FAILING_FINISH_REFUSALS``
        times per attempt, then the finish is taken and the final run decides)."""
        if self._failing_finishes >= FAILING_FINISH_REFUSALS:
            return None
        run = self._whole_run()
        if run is None or run.passed:
            return None
        self._failing_finishes += 1
        return run

    def _whole_run(self) -> TestOutcome | None:
        """The whole test command on the files as they are: the last whole run when no file
        changed since, else a new one; None when the node's tests are not checked here."""
        if self.ctx.run_tests is None or not self.ctx.check_tests_at_finish:
            return None
        if self._checked is None:
            self._checked = self.tests = self.ctx.run_tests(())
        return self._checked


# pytest's exit code 5: nothing was collected, or the args deselected every test. Told as
# "tests failed", the test node of make real-model 2026-12-05 run an (`-k subtract` before any
# test of subtract existed) read it as its code failing and gave up ("I cannot provide a
# solution for the test failures").
NO_TEST_RAN = (
    "pytest found no test to run: no test matches your args (it may not exist yet), "
    "or none was collected"
)


def _ran_no_test(run: TestOutcome) -> bool:
    """Whether ``run`` was pytest's and ran no test (exit code 5), rather than a failure."""
    return run.exit_code == 5 and not run.timed_out and any("pytest" in p for p in run.command)


def _target(args: Any) -> str:
    """The path a change tool's arguments name (``move_file``: its source)."""
    return str(getattr(args, "path", None) or getattr(args, "source", ""))


def _paths(args: Any) -> set[str]:
    """Every path a change tool's arguments name, as the worktree knows it ("./calc.py" is
    calc.py)."""
    named = (getattr(args, key, None) for key in ("path", "source", "destination"))
    return {normalize_entry(str(p)) for p in named if p}
