"""Views of a run: live progress, the end-of-run verdict and the status list (the PR body,
built from the same words, is views/pr_body.py)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table

from ..hints import command
from ..providers.prices import format_usd
from ..run.journal import RunState
from ..run.result import TaskResult
from ..run.settings import LiveStep
from ..tables import print_table
from .live import live_line, live_table
from .plain import LARGE, columns, plain, print_lines, wrapped

__all__ = [
    "Progress",
    "render_runs",
    "render_verdict",
    "status_of",
    "totals_line",
    "verdict_words",
]

_STYLE = {
    "succeeded": "green",
    "failed": "red",
    "skipped": "yellow",
    "running": "cyan",
    "pending": "dim",
    "interrupted": "yellow",
}


def status_of(r: TaskResult) -> str:
    """The node's status as people read it: a pending node that was started and stopped (Ctrl-C,
    a signal, a run cap) is ``interrupted``, never ``failed``."""
    if r.status == "pending" and r.attempts and r.message.startswith("interrupted"):
        return "interrupted"
    return str(r.status)


def verdict_words(state: RunState) -> dict[str, tuple[str, str]]:
    """Each node's (status, verdict text) as the views say them."""
    return {tid: (status_of(r), _verdict_text(r)) for tid, r in state.tasks.items()}


def _fresh(r: TaskResult) -> str:
    return f"; a fresh allowance, {r.earlier_attempts} used before" if r.earlier_attempts else ""


def _verdict_text(r: TaskResult) -> str:
    tries = f" after {r.counted} attempts" if r.counted > 1 else ""
    if r.status == "failed":
        return f"failed ({r.reason or 'error'}){tries}: {r.message}".strip()
    if r.status == "skipped":
        return f"skipped: {r.skipped_because} failed"
    if r.status == "running" and (r.counted or r.earlier_attempts):
        return f"running (attempt {r.counted + 1} of {r.max_attempts}{_fresh(r)})"
    text = status_of(r)
    if text == "interrupted":
        return r.message
    if r.status == "succeeded" and r.counted > 1:
        text += f" on attempt {r.counted}"
    if r.status == "succeeded" and r.violations:
        # Its in-scope work landed, but it also tried something it was not allowed to do
        # (a prompt injection, scope creep): say so next to the success, not only in a count.
        text += f", {len(r.violations)} blocked"
    return text


def _hint(label: str, command_line: str) -> list[tuple[str, bool]]:
    """A label, then the command on a line of its own, never wrapped: it runs as printed."""
    return [(label, False), (f"  {escape(command_line)}", True)]


def _resume_hint(state: RunState) -> str:
    return command("resume", state.run_id, repo=state.repo)


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


_NODE_COLUMNS = ("task", "status", "tokens (cap/call)", "calls", "blocked", "tests")


def _row(r: TaskResult) -> tuple[str, str, str, str, str, str]:
    """A node's cells in the verdict table (plain text)."""
    tests = "-" if r.tests is None else ("passed" if r.tests.passed else "failed")
    calls = f"{r.tool_calls}/{r.max_tool_calls}"
    return r.task_id, status_of(r), _tokens_cell(r), calls, str(len(r.violations)), tests


def _table(state: RunState, *, title: str) -> Table:
    """One row per node with short cells, so the table fits 80 columns; reasons go below."""
    table = Table(title=title, expand=False)
    table.add_column("task", overflow="fold")
    table.add_column("status", no_wrap=True)
    table.add_column("tokens (cap/call)", no_wrap=True, justify="right")
    table.add_column("calls", no_wrap=True, justify="right")
    table.add_column("blocked", no_wrap=True, justify="right")
    table.add_column("tests", no_wrap=True)
    for task in state.plan.tasks:
        task_id, status, tokens, calls, blocked, tests = _row(state.tasks[task.task_id])
        style = _STYLE.get(status, "")
        table.add_row(escape(task_id), f"[{style}]{status}[/]", tokens, calls, blocked, tests)
    return table


def _spend_line(r: TaskResult) -> str:
    """A node's model, dollars and cache share (below the table: model names are long)."""
    cached = f", {_share(r.cache_share)} of input cached" if r.cache_share is not None else ""
    tries = f", {r.counted} attempts" if r.counted > 1 else ""
    return f"{r.task_id}: {r.model or '-'}, {format_usd(r.cost_usd)}{cached}{tries}"


def _node_tokens(r: TaskResult) -> int:
    """Every attempt's tokens (journals before retries only have the last attempt's)."""
    return r.total_tokens.total or r.tokens.total


def _last_output_line(r: TaskResult) -> str:
    lines = [ln.strip() for ln in (r.tests.tail if r.tests else "").splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _details(r: TaskResult) -> list[str]:
    """What the table's short status leaves out, one line each (Rich markup escaped)."""
    out: list[str] = []
    tid = escape(r.task_id)
    if r.status == "failed":
        out.append(f"[red]failed[/] {tid} ({escape(r.reason or 'error')}): {escape(r.message)}")
        if r.tests is not None and not r.tests.passed and (last := _last_output_line(r)):
            out.append(f"  last test output: {escape(last)}")
    elif r.status == "skipped":
        out.append(f"[yellow]skipped[/] {tid}: {escape(str(r.skipped_because))} failed")
    if r.truncated_responses:
        n = r.truncated_responses
        out.append(
            f"[yellow]cut[/] {tid}: {n} response{'s' if n != 1 else ''} cut at the output limit "
            "(tool call lost; the worker was told to write in parts)"
        )
    for v in r.violations:
        out.append(f"[yellow]blocked[/] {tid}: {v.op} {escape(v.path)} ({escape(v.reason)})")
    for source, count in sorted(r.hidden_chars.items()):
        out.append(f"[yellow]hidden characters[/] {tid}: {count} in {escape(source)}")
    return out


def _tokens_cell(r: TaskResult) -> str:
    """A node's tokens over all its calls and attempts, and its per-call cap."""
    return f"{_node_tokens(r):,} ({r.token_budget:,}/call)"


def totals_line(state: RunState) -> str:
    """The run's counts, tokens, dollars and blocked writes in one line."""
    tasks = list(state.tasks.values())
    words = ("succeeded", "failed", "skipped", "interrupted")
    counts = {s: sum(1 for t in tasks if status_of(t) == s) for s in words}
    # The run's own total counts every attempt of every node; older journals only have the
    # nodes' last attempts.
    run = state.tokens
    tokens = run.total or sum(_node_tokens(t) for t in tasks)
    cached = run.cache_read_tokens if run.total else sum(t.tokens.cache_read_tokens for t in tasks)
    share = f", {_share(state.cache_share)} of input" if state.cache_share is not None else ""
    cap = f" of --max-tokens {state.max_tokens:,}" if state.max_tokens else ""
    violations = sum(len(t.violations) for t in tasks)
    retried = sum(1 for t in tasks if t.counted + t.earlier_attempts > 1)
    retries = f"; {retried} retried" if retried else ""
    cut = sum(t.truncated_responses for t in tasks)
    return (
        f"{counts['succeeded']} succeeded, {counts['failed']} failed, {counts['skipped']} skipped"
        + (f", {counts['interrupted']} interrupted" if counts["interrupted"] else "")
        + f"{retries}; {tokens:,} tokens{cap} ({cached:,} cache reads{share}); {_cost(state)}; "
        f"{violations} violations blocked"
        + (f"; {cut} response{'s' if cut != 1 else ''} cut at the output limit" if cut else "")
    )


def _cost(state: RunState) -> str:
    """The run's dollars, its cap, and which models are not in them."""
    cap = f" of --max-cost {format_usd(state.max_cost)}" if state.max_cost is not None else ""
    # only nodes that made calls: a skipped or pending node has no dollars, priced or not
    tasks = state.tasks.values()
    unpriced = sorted({t.model for t in tasks if t.cost_usd is None and t.model and t.attempts})
    missing = f" (not priced: {', '.join(unpriced)})" if unpriced else ""
    return f"{format_usd(state.cost_usd)}{cap}{missing}"


def _verdict_notes(state: RunState) -> list[tuple[str, bool]]:
    """The lines under the verdict table as (line, soft_wrap): prose wraps at the terminal's
    width; names and commands do not."""
    notes = [(totals_line(state), False)]
    if state.integration is not None and state.integration.has_command:  # run/integration.py
        notes.append((escape(state.integration.line()), True))
    if state.status == "interrupted" and state.stopped_by:
        # A bare resume after a stop at a cap gets the same allowance again (cli/launch.py).
        notes.append((f"interrupted: {escape(state.stopped_by)}", False))
        notes += _hint("to finish it:", _resume_hint(state))
    failed = [t.task_id for t in state.plan.tasks if state.tasks[t.task_id].status == "failed"]
    if failed:
        why = command("inspect", state.run_id, "--task", failed[0], repo=state.repo)
        notes += _hint(f"why {escape(failed[0])} failed:", why)
        notes += _hint("to try again:", _resume_hint(state))
    if state.prices and state.cost_usd:
        notes.append((f"dollars at {escape(state.prices)}", True))
    notes.append((f"branch: {state.branch}", True))
    if state.branch_order:  # its commits as they landed, not in the plan's order (rare)
        notes.append((f"branch order: {escape(state.branch_order)}", True))
    return notes


def render_verdict(state: RunState, console: Console) -> None:
    """The end-of-run table: per node succeeded / failed (why) / skipped (because of which).
    Past ``plain.LARGE`` nodes, in plain columns printed at once (views/plain.py says why)."""
    title = f"run {state.run_id}: {state.status}"
    notes = _verdict_notes(state)
    records = [state.tasks[t.task_id] for t in state.plan.tasks]
    if len(records) > LARGE:
        lines = [title, *columns(_NODE_COLUMNS, map(_row, records), right={2, 3, 4})]
        lines += [plain(note) for note, _ in notes]
        for r in records:
            if r.attempts:
                lines.append(f"  {_spend_line(r)}")
            lines += [f"  {plain(line)}" for line in _details(r)]
        print_lines(console, lines)
        return
    print_table(console, _table(state, title=title), {"task"})
    for note, soft in notes:
        console.print(note, soft_wrap=soft)
    for r in records:
        if r.attempts:
            console.print(Padding(escape(_spend_line(r)), (0, 0, 0, 2), expand=False))
        for line in _details(r):
            console.print(Padding(line, (0, 0, 0, 2), expand=False))


class Progress:
    """Live node table on a terminal (up to ``plain.LARGE`` nodes); one plain line per state
    change otherwise."""

    def __init__(self, console: Console):
        self.console = console
        self._lock = threading.Lock()
        self._live: Live | None = None
        self._state: RunState | None = None
        self._shown: dict[str, str] = {}  # task -> the status last printed
        self._steps: dict[str, tuple[LiveStep, float]] = {}  # task -> (step, its start)

    def _view(self, state: RunState) -> Table:
        now = time.monotonic()
        return live_table(state, {t: (s, now - t0) for t, (s, t0) in self._steps.items()})

    def start(self, state: RunState) -> None:
        self._state = state
        # A live table of a big run would be laid out again at every refresh: plain lines then.
        if self.console.is_terminal and len(state.plan.tasks) <= LARGE:
            self._live = Live(self._view(state), console=self.console, refresh_per_second=4)
            self._live.start()

    def step(self, step: LiveStep) -> None:
        """A running node made a model call or a tool call: its live spend."""
        with self._lock:
            started = self._steps.get(step.task_id, (step, time.monotonic()))[1]
            if step.step == "model call" and step.calls <= 1:
                started = time.monotonic()  # a new attempt
            self._steps[step.task_id] = (step, started)
            if self._state is None:
                return
            if self._live is not None:  # drawn now: a fast node's calls each get a frame
                self._live.update(self._view(self._state), refresh=True)
                return
            record = self._state.tasks[step.task_id]
            line = live_line(record, step, time.monotonic() - started)
            print_lines(self.console, wrapped(line, self.console.width))

    def event(self, record: TaskResult) -> None:
        with self._lock:
            if self._live is not None and self._state is not None:
                self._live.update(self._view(self._state))
                return
            shown = status_of(record)
            if self._shown.get(record.task_id) == shown:
                return  # journal updates within one status (timestamps) print nothing
            self._shown[record.task_id] = shown
            line = f"{record.task_id}: {_verdict_text(record)}"
            if record.status in ("succeeded", "failed"):
                cost = f", {format_usd(record.cost_usd)}" if record.cost_usd is not None else ""
                model = f", {record.model}" if record.model else ""
                line += (
                    f" [{_tokens_cell(record)} tokens{cost}, {record.tool_calls} tool calls{model}]"
                )
            print_lines(self.console, wrapped(line, self.console.width))

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """The live table stopped while the user answers a question (``--scope-requests ask``)."""
        with self._lock:
            if self._live is not None:
                self._live.stop()
            try:
                yield
            finally:
                if self._live is not None:
                    self._live.start()

    def stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None


def render_runs(runs: list[RunState], console: Console) -> None:
    """The runs of a repository; run ids and branches are never shortened or broken (inspect,
    resume and pr take them): a table when they fit the console, else one block per run."""
    rows = []
    for s in runs:
        done = sum(1 for t in s.tasks.values() if t.status == "succeeded")
        created = s.created_at.replace("T", " ")[:16]
        rows.append((s.run_id, s.status, s.branch, f"{done}/{len(s.tasks)}", created))
    heads = ("run", "status", "branch", "tasks", "created")
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(heads)]
    if sum(widths) + 3 * len(widths) + 1 > console.width:  # the table's cells and borders
        console.print("runs", markup=False)
        for run_id, status, branch, tasks, created in rows:
            console.print(f"{run_id}", markup=False, soft_wrap=True)
            console.print(f"  {status}, {tasks} tasks, created {created}", markup=False)
            console.print(f"  branch: {branch}", markup=False, soft_wrap=True)
        return
    table = Table(title="runs")
    for head in heads:
        table.add_column(head, no_wrap=True)
    for row in rows:
        table.add_row(*(escape(cell) for cell in row))
    console.print(table)
