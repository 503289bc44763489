"""Fail before spending: every node's first prompt, built with the real assembler before any
node runs, against its per-call cap.

A node whose essentials (rules, tools, brief, upstream results, write-scope files in their
smallest forms) plus room for one more turn exceed its ``token_budget`` cannot start; found
mid-run, it fails after earlier nodes spent their tokens. ``first_prompts`` assembles each
node's lean first prompt from the files of the commit the run would start from (``HEAD`` or
the plan's base): the scope files of that commit are exported to a temporary directory
(secret names never, symlinks and submodules never) and read through a real ``Firewall``.
Upstream results do not exist yet: each dependency counts ``UPSTREAM_ALLOWANCE`` tokens.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import BaseModel
from rich.console import Console
from rich.table import Table

from ..errors import RunError
from ..fs.firewall import Firewall
from ..fs.repofiles import is_secret_path
from ..fs.scopes import Scope
from ..git.cmd import run_git
from ..plan.model import Plan, TaskNode
from ..plan.validate import Problem, Report
from ..providers.base import ModelRequest, UserMessage, request_text
from ..tables import print_table
from ..tokens import count_tokens
from .assemble import assemble_worker_prompt
from .manifest import FileChoice

__all__ = [
    "UPSTREAM_ALLOWANCE",
    "NodeFirstPrompt",
    "add_problems",
    "check_first_prompts",
    "first_prompts",
    "render_first_prompts",
    "scope_snapshot",
    "start_commit",
]

UPSTREAM_ALLOWANCE = 1_000  # tokens per dependency result: a typical finish summary
MAX_EXPORT_BYTES = 1_000_000  # the firewall's read cap: a larger blob would not be read anyway
MAX_EXPORT_TOTAL = 256 * 1024 * 1024


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
    listing = run_git(["ls-tree", "-r", "-z", "-l", "--full-tree", commit], repo).stdout
    wanted: list[tuple[str, str]] = []
    total = 0
    for record in filter(None, listing.split(b"\0")):
        meta, _, raw = record.partition(b"\t")
        mode, kind, sha, size = meta.decode().split()
        path = raw.decode("utf-8", "surrogateescape")
        parts = path.split("/")
        if kind != "blob" or mode not in ("100644", "100755") or size == "-":
            continue  # symlinks, submodules
        if any(p in ("", ".", "..") for p in parts) or is_secret_path(path):
            continue
        if int(size) > MAX_EXPORT_BYTES or not scope.matches(path):
            continue
        total += int(size)
        if total > MAX_EXPORT_TOTAL:
            break
        wanted.append((sha, path))
    with tempfile.TemporaryDirectory(prefix="anti-sprawl-snapshot-") as tmp:
        root = Path(tmp)
        if wanted:
            batch = "".join(f"{sha}\n" for sha, _ in wanted).encode()
            out = run_git(["cat-file", "--batch"], repo, input_bytes=batch).stdout
            pos = 0
            for _, path in wanted:
                header_end = out.index(b"\n", pos)
                length = int(out[pos:header_end].split()[2])
                data = out[header_end + 1 : header_end + 1 + length]
                pos = header_end + 1 + length + 1
                target = root / path
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
        yield root


def _first_call(system: object, tools: object, message: str) -> int:
    request = ModelRequest.model_validate(
        {"system": system, "tools": tools, "messages": [UserMessage(content=message)]}
    )
    return count_tokens(request_text(request))


def _one(plan: Plan, node: TaskNode, root: Path) -> NodeFirstPrompt:
    with Firewall(root, node.read_scope, node.write_scope, durable=False) as fw:
        prompt = assemble_worker_prompt(
            plan=plan,
            node=node,
            upstream=(),
            firewall=fw,
            upstream_allowance=UPSTREAM_ALLOWANCE * len(node.dependencies),
            check_fit=False,
        )
    e = prompt.essentials
    return NodeFirstPrompt(
        task_id=node.task_id,
        token_budget=node.token_budget,
        first_call=_first_call(prompt.system, prompt.tools, prompt.first_user_message)
        + UPSTREAM_ALLOWANCE * len(node.dependencies),
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


def render_first_prompts(fits: list[NodeFirstPrompt], console: Console, commit: str | None) -> None:
    """Per node: the lean first call, its essentials plus reserve, and the cap."""
    where = f"at {commit[:12]}" if commit else "in the working directory"
    table = Table(title=f"first prompts {where}", title_justify="left")
    for column in ("task", "first call", "essentials + reserve", "token_budget", "fits"):
        table.add_column(column, justify="left" if column in ("task", "fits") else "right")
    for f in fits:
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


def first_prompts(plan: Plan, repo: Path, commit: str | None) -> list[NodeFirstPrompt]:
    """Every node's lean first prompt at ``commit`` (None: the directory as it is)."""
    everything = Scope([e for t in plan.tasks for e in (*t.read_scope, *t.write_scope)])
    with scope_snapshot(repo, commit, everything) as root:
        return [_one(plan, node, root) for node in plan.tasks]


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
