"""Fail before spending: every node's first prompt, built with the real assembler before any
node runs, against its per-call cap.

A node whose essentials (rules, tools, brief, upstream results, write-scope files in their
smallest forms) plus room for one more turn exceed its ``token_budget`` cannot start; found
mid-run, it fails after earlier nodes spent their tokens. ``first_prompts`` assembles each
node's lean first prompt from the files of the commit the run would start from (``HEAD`` or
the plan's base): the scope files of that commit are read from git (secret names never,
symlinks and submodules never, context/commit_files.py) and each checked as a real
``Firewall`` checks a file it reads (context/start_view.py).
Upstream results do not exist yet: each dependency counts ``UPSTREAM_ALLOWANCE`` tokens.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from pydantic import BaseModel
from rich.console import Console
from rich.table import Table

from ..errors import RunError
from ..fs.firewall import Firewall
from ..fs.scopes import Scope
from ..git.cmd import run_git
from ..plan.model import Plan, TaskNode
from ..plan.validate import Problem, Report, collector_paused
from ..providers.base import ModelRequest, UserMessage, request_text
from ..tables import print_table
from ..tokens import count_tokens, joins_safely
from .assemble import AssembledPrompt, assemble_worker_prompt
from .commit_files import read_commit_files
from .manifest import FileChoice
from .start_view import StartView

__all__ = [
    "TABLE_ROWS",
    "UPSTREAM_ALLOWANCE",
    "NodeFirstPrompt",
    "add_problems",
    "check_first_prompts",
    "first_prompt",
    "first_prompt_rows",
    "first_prompts",
    "render_first_prompts",
    "scope_snapshot",
    "start_commit",
]

UPSTREAM_ALLOWANCE = 1_000  # tokens per dependency result: a typical finish summary


class NodeFirstPrompt(BaseModel):
    """One node's lean first call and whether its essentials fit its cap."""

    task_id: str
    token_budget: int
    # tokens of the first request (system, tools, first user message), upstream results
    # counted at their allowance
    first_call: int
    essentials: int
    reserve: int
    fits: bool
    smallest_budget: int
    message: str = ""
    files: list[FileChoice]


@contextmanager
def scope_snapshot(repo: Path, commit: str | None, scope: Scope) -> Iterator[Path]:
    """A directory holding the files ``scope`` matches: ``commit``'s (exported from git into a
    temporary directory) or, with no commit, the repository directory itself."""
    if commit is None:
        yield repo
        return
    with tempfile.TemporaryDirectory(prefix="anti-sprawl-snapshot-") as tmp:
        read_commit_files(repo, commit, [scope]).export(Path(tmp))
        yield Path(tmp)


def _first_call(prompt: AssembledPrompt, heads: dict[str, tuple[str, int]] | None = None) -> int:
    """Tokens of ``prompt``'s first request, exactly ``count_tokens(request_text(...))``.

    With ``heads`` (a cache shared by the nodes of one plan: stable prefix -> the request text
    before the message and its count), counted in pieces where that cannot change the count:
    what precedes the message (system and tools, the same for every node) once, and the
    message as the sum of its items' counts (``manifest_items``, counted when they were
    assembled). A piece boundary is safe when no token can span it (``tokens.joins_safely``:
    a newline before it, a visible ASCII character after it). Pieces with an
    unsafe boundary between them are counted together (a section header opening with a blank
    line joins the item before it), from the first one's last safe split (``_run_tokens``)."""
    message = prompt.first_user_message
    if heads is not None and prompt.stable_prefix in heads:
        # request_text joins system, tools and message with newlines: the same system and
        # tools (the stable prefix says which) give the same head before the message.
        head, head_tokens = heads[prompt.stable_prefix]
        text = head + message
    else:
        request = ModelRequest.model_validate(
            {
                "system": prompt.system,
                "tools": prompt.tools,
                "messages": [UserMessage(content=message)],
            }
        )
        text = request_text(request)
        head, head_tokens = text[: len(text) - len(message)], -1
    pieces = [
        (t, item.tokens)
        for t, item, section in zip(
            prompt.item_texts, prompt.manifest_items, prompt.item_sections, strict=True
        )
        if section != "stable"
    ]
    if heads is None or not text.endswith(message) or "".join(t for t, _ in pieces) != message:
        return count_tokens(text)
    if not pieces or not joins_safely(head, pieces[0][0]):
        return count_tokens(text)
    runs: list[list[tuple[str, int]]] = []  # pieces between safe boundaries
    for piece in pieces:
        if runs and not joins_safely(runs[-1][-1][0], piece[0]):
            runs[-1].append(piece)
        else:
            runs.append([piece])
    if head_tokens < 0:
        head_tokens = count_tokens(head)
        heads[prompt.stable_prefix] = (head, head_tokens)
    total = head_tokens
    for run in runs:
        total += run[0][1] if len(run) == 1 else _run_tokens(run)
    return total


def _run_tokens(run: list[tuple[str, int]]) -> int:
    """Tokens of pieces joined across unsafe boundaries, exactly: the first piece's own count
    up to its last safe split (its count less its tail's), plus its tail and the rest counted
    together. The rest is short (a section header after an item), so a node's distinct
    brief or a shared file block is not encoded again for every node (issue 29, item 3)."""
    first, first_tokens = run[0]
    rest = "".join(t for t, _ in run[1:])
    cut = _last_safe_cut(first)
    if cut is None:
        return count_tokens(first + rest)
    tail = first[cut:]
    # The rest (a section header) is split at its own first safe join too: only the tail and
    # the header's first line are encoded per node, the header's body is the same for all.
    split = _first_safe_cut(rest)
    if split is None:
        return first_tokens - count_tokens(tail) + count_tokens(tail + rest)
    joined = count_tokens(tail + rest[:split]) + count_tokens(rest[split:])
    return first_tokens - count_tokens(tail) + joined


def _first_safe_cut(text: str, tries: int = 4) -> int | None:
    """The start of one of ``text``'s first lines (after its first) where splitting it is safe
    (``joins_safely``), looking at most ``tries`` lines ahead; None when none is."""
    start = 0
    for _ in range(tries):
        newline = text.find("\n", start)
        if newline < 0 or newline + 1 >= len(text):
            return None
        # joins_safely reads the two characters before a join and the one after it
        if newline >= 1 and joins_safely(text[newline - 1 : newline + 1], text[newline + 1]):
            return newline + 1
        start = newline + 1
    return None


def _last_safe_cut(text: str, tries: int = 8) -> int | None:
    """The start of one of ``text``'s last lines where splitting it is safe (``joins_safely``),
    looking back over at most ``tries`` lines; None when none is."""
    end = len(text) - 1  # a cut leaves a non-empty tail
    for _ in range(tries):
        newline = text.rfind("\n", 0, end)
        if newline < 0:
            return None
        if joins_safely(text[: newline + 1], text[newline + 1 :]):
            return newline + 1
        end = newline
    return None


def first_prompt(
    plan: Plan, node: TaskNode, root: Path, view: StartView | None = None
) -> AssembledPrompt:
    """``node``'s first prompt as its run would start it, from ``view`` (the start commit's
    files) or else from the files under ``root``; its upstream is an allowance per dependency
    (``UPSTREAM_ALLOWANCE``), not text."""
    with ExitStack() as files:
        fw = None
        if view is None:
            fw = files.enter_context(
                Firewall(root, node.read_scope, node.write_scope, durable=False)
            )
        return assemble_worker_prompt(
            plan=plan,
            node=node,
            upstream=(),
            firewall=fw,
            view=view,
            upstream_allowance=UPSTREAM_ALLOWANCE * len(node.dependencies),
            check_fit=False,
        )


def _one(
    plan: Plan,
    node: TaskNode,
    root: Path,
    view: StartView | None = None,
    heads: dict[str, tuple[str, int]] | None = None,
) -> NodeFirstPrompt:
    allowance = UPSTREAM_ALLOWANCE * len(node.dependencies)
    prompt = first_prompt(plan, node, root, view)
    e = prompt.essentials
    return NodeFirstPrompt(
        task_id=node.task_id,
        token_budget=node.token_budget,
        first_call=_first_call(prompt, heads) + allowance,
        essentials=e.tokens,
        reserve=e.reserve,
        fits=e.fits,
        smallest_budget=e.smallest_budget,
        message="" if e.fits else e.message(),
        files=list(prompt.choices),
    )


def start_commit(repo: Path, base: str | None) -> str | None:
    """The commit a run of a plan would start from: its ``base`` when the repository has it,
    else ``HEAD``; None when ``repo`` is not the root of a git repository with a commit."""
    top = run_git(["rev-parse", "--show-toplevel"], repo, check=False)
    if top.returncode != 0 or Path(top.stdout.decode().strip()).resolve() != repo.resolve():
        return None  # not a repository root: scopes are relative to the directory given
    for rev in (base, "HEAD"):
        if rev is None:
            continue
        probe = run_git(
            ["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], repo, check=False
        )
        if probe.returncode == 0:
            return probe.stdout.decode().strip()
    return None


# Rows the first-prompt table shows; beyond it, the nodes nearest their budget. A 1,000-row
# table scrolled every problem off the screen and was a sixth of validate --repo's time (issue
# 29, item 3); ``validate --repo --json`` lists every node (``first_prompt_rows``).
TABLE_ROWS = 40


def _headroom(f: NodeFirstPrompt) -> int:
    return f.token_budget - (f.essentials + f.reserve)


def render_first_prompts(fits: list[NodeFirstPrompt], console: Console, commit: str | None) -> None:
    """Per node: the lean first call, its essentials plus reserve, and the cap; of a plan
    with more than ``TABLE_ROWS`` nodes, every node that does not fit and then those with the
    least headroom, in plan order, and one line for the rest."""
    where = f"at {commit[:12]}" if commit else "in the working directory"
    shown = fits
    keep: set[int] = set()
    if len(fits) > TABLE_ROWS:
        bad = [f for f in fits if not f.fits]
        tightest = sorted((f for f in fits if f.fits), key=_headroom)
        keep = {id(f) for f in [*bad, *tightest[: max(TABLE_ROWS - len(bad), 0)]]}
        shown = [f for f in fits if id(f) in keep]
        where += f": the {len(shown):,} of {len(fits):,} nodes nearest their budget"
    table = Table(title=f"first prompts {where}", title_justify="left")
    for column in ("task", "first call", "essentials + reserve", "token_budget", "fits"):
        table.add_column(column, justify="left" if column in ("task", "fits") else "right")
    for f in shown:
        verdict = "yes" if f.fits else f"no: needs {f.smallest_budget:,}"
        table.add_row(
            f.task_id,
            f"{f.first_call:,}",
            f"{f.essentials + f.reserve:,}",
            f"{f.token_budget:,}",
            verdict,
            style=None if f.fits else "red",
        )
    print_table(console, table, {"task"})
    rest = [f for f in fits if id(f) not in keep] if keep else []
    if rest:
        least = min(map(_headroom, rest))
        console.print(
            f"{len(rest):,} more nodes fit, each with at least {least:,} tokens to spare "
            "(--json lists every node)",
            markup=False,
            highlight=False,
        )


def first_prompt_rows(fits: list[NodeFirstPrompt]) -> list[dict[str, object]]:
    """Every node's row of the first-prompt table, for ``validate --repo --json``."""
    return [
        {
            "task_id": f.task_id,
            "first_call": f.first_call,
            "essentials": f.essentials,
            "reserve": f.reserve,
            "token_budget": f.token_budget,
            "fits": f.fits,
            "smallest_budget": f.smallest_budget,
        }
        for f in fits
    ]


def first_prompts(plan: Plan, repo: Path, commit: str | None) -> list[NodeFirstPrompt]:
    """Every node's lean first prompt at ``commit`` (None: the directory as it is, each node
    through its own firewall). At a commit every node reads one shared ``StartView``."""
    with collector_paused():  # many small acyclic objects: as in validate (a tenth less)
        return _first_prompts(plan, repo, commit)


def _first_prompts(plan: Plan, repo: Path, commit: str | None) -> list[NodeFirstPrompt]:
    if commit is None:
        everything = Scope([e for t in plan.tasks for e in (*t.read_scope, *t.write_scope)])
        with scope_snapshot(repo, None, everything) as root:
            return [_one(plan, node, root) for node in plan.tasks]
    scopes: dict[tuple[str, ...], Scope] = {}
    for t in plan.tasks:
        entries = (*t.read_scope, *t.write_scope)
        if entries not in scopes:
            scopes[entries] = Scope(entries)
    heads: dict[str, tuple[str, int]] = {}
    with StartView(read_commit_files(repo, commit, list(scopes.values()))) as view:
        return [_one(plan, node, view.root, view, heads) for node in plan.tasks]


def add_problems(report: Report, fits: list[NodeFirstPrompt]) -> Report:
    """``report`` with one error per node whose essentials do not fit its token_budget."""
    problems = [
        Problem(
            code="essentials_over_budget",
            message=f.message,
            tasks=[f.task_id],
            paths=[c.path for c in f.files if c.scope == "write" and c.form != "dropped"],
        )
        for f in fits
        if not f.fits
    ]
    if not problems:
        return report
    return report.model_copy(update={"valid": False, "errors": [*report.errors, *problems]})


def check_first_prompts(plan: Plan, repo: Path, commit: str) -> None:
    """RunError (one line naming every node that cannot start) unless all essentials fit."""
    bad = [f for f in first_prompts(plan, repo, commit) if not f.fits]
    if bad:
        first = bad[0].message
        more = f"; and {len(bad) - 1} more node(s)" if len(bad) > 1 else ""
        raise RunError(
            f"the plan cannot start: {first}{more} (see 'anti-sprawl validate PLAN --repo')"
        )
