"""First-call context on real histories: the lean prompt vs. full text, and what it covers.

Replays the history of git repositories (``--repo PATH ... --commits N [--nodes N]``;
default: this repository; e.g. clones of attrs, click and httpx, or the ``fetch``ed mirrors). Each commit that modifies 1-3 existing Python source files (not tests, docs,
examples or build scripts, unless ``--include-tests``) becomes one node:
``write_scope`` = those files, ``read_scope`` = their direct in-repo imports (as ``plan
--expand-read-scope`` adds them), goal = the commit message. The node's first request is
assembled at the parent commit with the real assembler (``essentials.scope_snapshot`` + a
``Firewall`` + ``assemble_worker_prompt``), and compared, in tokens of a whole first request
(same rules, tools and brief), with: the write files alone, the write files plus their
direct imports in full (one hop), and the transitive import closure in full (crawl).

**Coverage**: of the project names the commit's added lines use that are defined in another
source module (classes, functions, methods, module-level names at the parent commit; not
names the changed file binds itself, nor ones only tests or examples define), the share
whose defining module appears in the first call (whole, outline or region), the share whose
signature line is in its text (a def/class header with parameters, or an assignment: a
names-only outline does not count), and the share for one hop (defining module among the
write files and their direct imports). A summary line per repository closes the run.

``--sdists A.tar.gz B.tar.gz ...`` first builds a history from consecutive releases (one
commit each, in the order given) in a temporary directory; a release touches many files, so
``--split`` (the default with ``--sdists``) makes one node per modified file. ``--module PATH``
also checks that a node writing PATH (e.g. a 3,000-line module) starts under ``--module-cap``.
Figures are measured in the run; nothing is asserted. Run:
``.venv/bin/python benchmarks/history_context.py [--repo DIR] [--commits N]``.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import datetime
import io
import keyword
import os
import platform
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import tokenize
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from anti_sprawl.context.assemble import AssembledPrompt, assemble_worker_prompt
from anti_sprawl.context.essentials import scope_snapshot
from anti_sprawl.context.sections import SECTION_HEADERS, render_brief
from anti_sprawl.errors import RunError
from anti_sprawl.fs.firewall import Firewall
from anti_sprawl.fs.scopes import Scope
from anti_sprawl.git.cmd import run_git
from anti_sprawl.outline.pyfacts import python_imports
from anti_sprawl.plan.model import Plan, TaskNode
from anti_sprawl.planner.assist import expand_read_scopes
from anti_sprawl.planner.repomap.ranking import module_index
from anti_sprawl.providers.base import ModelRequest, UserMessage, request_text
from anti_sprawl.tokens import count_tokens
from anti_sprawl.trust import wrap_data

ROOT = Path(__file__).resolve().parent.parent
CAP = 40_000  # the node's per-call cap for the main comparison
CAPS = (24_000, 2_000_000)  # first call also measured at these caps ("whatever the cap")
AMBIGUOUS = 3
_SKIP = set(dir(builtins)) | set(keyword.kwlist) | {"self", "cls"}


def git(repo: Path, *args: str) -> str:
    return run_git(list(args), repo).stdout.decode("utf-8", "replace")


class Tree:
    """The Python files of one commit: texts, module index, imports, definitions (cached)."""

    def __init__(self, repo: Path, commit: str, blobs: dict[str, str]):
        self.repo, self.commit = repo, commit
        listing = git(repo, "ls-tree", "-r", "-z", "--full-tree", commit)
        self.sha: dict[str, str] = {}
        for rec in filter(None, listing.split("\0")):
            meta, _, path = rec.partition("\t")
            mode, kind, sha = meta.split()
            if kind == "blob" and mode.startswith("100") and path.endswith(".py"):
                self.sha[path] = sha
        self.files = sorted(self.sha)
        self.index = module_index(self.files)
        self._blobs = blobs
        missing = [s for s in set(self.sha.values()) if s not in blobs]
        if missing:
            out = run_git(
                ["cat-file", "--batch"], repo, input_bytes="\n".join(missing).encode() + b"\n"
            ).stdout
            pos = 0
            for sha in missing:
                end = out.index(b"\n", pos)
                size = int(out[pos:end].split()[2])
                blobs[sha] = out[end + 1 : end + 1 + size].decode("utf-8", "replace")
                pos = end + 2 + size

    def text(self, path: str) -> str | None:
        sha = self.sha.get(path)
        return self._blobs.get(sha) if sha else None

    def deps(self, path: str) -> list[str]:
        text = self.text(path)
        out: dict[str, None] = {}
        for name in python_imports(text, path) if text else []:
            found = self.index.get(name, [])
            if 0 < len(found) <= AMBIGUOUS:
                out.update(dict.fromkeys(f for f in found if f != path))
        return list(out)

    def closure(self, seeds: list[str]) -> list[str]:
        seen = dict.fromkeys(seeds)
        queue = list(seeds)
        for path in queue:
            for dep in self.deps(path):
                if dep not in seen:
                    seen[dep] = None
                    queue.append(dep)
        return queue

    def definitions(self) -> dict[str, set[str]]:
        """name -> modules defining it (classes, functions, methods, module-level names)."""
        if not hasattr(self, "_defs"):
            defs: dict[str, set[str]] = {}
            for path in self.files:
                if not is_source(path, include_tests=False):
                    continue  # a name only tests or examples define is not the project's API
                for name in _defined(self.text(path) or ""):
                    defs.setdefault(name, set()).add(path)
            self._defs = defs
        return self._defs


def _defined(source: str) -> set[str]:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return {n for n in names if not (n.startswith("__") and n.endswith("__"))}


def _bound(source: str) -> set[str]:
    """Names a module binds itself anywhere (assignments, parameters, loop targets, defs)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return set()
    names = _defined(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return names


def signature_shown(name: str, text: str) -> bool:
    """Whether ``text`` has ``name``'s signature line: a def or class header with its
    parameters or bases, or an assignment / annotated name (a names-only outline does not)."""
    return bool(
        re.search(
            rf"(?:def|class)\s+{re.escape(name)}\s*[(\[:]|^[\s\d:]*{re.escape(name)}\s*[:=]",
            text,
            re.M,
        )
    )


@dataclass
class Row:
    label: str
    first: int
    write: int
    one_hop: int
    crawl: int
    names: int
    lean_cov: int
    sig_cov: int
    hop_cov: int
    at_caps: dict[int, int]
    started: bool


def first_request(prompt: AssembledPrompt, user: str) -> int:
    req = ModelRequest(
        system=prompt.system, tools=prompt.tools, messages=[UserMessage(content=user)]
    )
    return count_tokens(request_text(req))


def assemble(plan: Plan, node: TaskNode, root: Path) -> AssembledPrompt:
    with Firewall(root, node.read_scope, node.write_scope, durable=False) as fw:
        return assemble_worker_prompt(
            plan=plan, node=node, upstream=(), firewall=fw, check_fit=False
        )


def measure(repo: Path, tree: Tree, child: str, files: list[str], goal: str, label: str) -> Row:
    node = TaskNode(task_id="n1", name=f"Change {', '.join(files)}", goal=goal, write_scope=files,
                    token_budget=CAP, max_tool_calls=20)  # fmt: skip
    plan = Plan(plan_id="history", requirement=goal.splitlines()[0][:200], tasks=[node])
    plan, _ = expand_read_scopes(plan, tree.files, tree.text)
    node = plan.tasks[0]
    imports = list(dict.fromkeys(d for f in files for d in tree.deps(f)))
    scope = Scope([*node.read_scope, *node.write_scope])
    at_caps: dict[int, int] = {}
    with scope_snapshot(repo, tree.commit, scope) as root:
        prompt = assemble(plan, node, root)
        for cap in CAPS:
            other = node.model_copy(update={"token_budget": cap})
            at_caps[cap] = _first(plan, other, root)
    head = first_request(prompt, render_brief(plan, node) + SECTION_HEADERS["files"])

    def whole(paths: list[str]) -> int:
        return sum(count_tokens(wrap_data("file", p, tree.text(p) or "")) for p in paths)

    shown = {c.path for c in prompt.choices if c.form != "dropped"}
    added = _added_names(repo, tree.commit, child, files)
    defs = tree.definitions()
    local = {n for f in files for n in _defined(tree.text(f) or "")}
    local |= {n for f in files for n in _bound(git(repo, "show", f"{child}:{f}"))}
    used = {n for n in added if n in defs and n not in local and n not in _SKIP}
    hop = set(files) | set(imports)
    if os.environ.get("HISTORY_MISSED"):
        for n in sorted(used):
            if not defs[n] & shown:
                print(f"  missed {label}: {n} in {sorted(defs[n])[:3]}")
    return Row(
        label=label,
        first=first_request(prompt, prompt.first_user_message),
        write=head + whole(files),
        one_hop=head + whole([*files, *imports]),
        crawl=head + whole(tree.closure(list(files))),
        names=len(used),
        lean_cov=sum(1 for n in used if defs[n] & shown),
        sig_cov=sum(1 for n in used if signature_shown(n, prompt.first_user_message)),
        hop_cov=sum(1 for n in used if defs[n] & hop),
        at_caps=at_caps,
        started=prompt.essentials.fits,
    )


def _first(plan: Plan, node: TaskNode, root: Path) -> int:
    p = assemble(plan.model_copy(update={"tasks": [node]}), node, root)
    return first_request(p, p.first_user_message)


def _added_names(repo: Path, parent: str, child: str, files: list[str]) -> set[str]:
    """Names in the code of the lines the commit added (comments and strings left out: a
    word in a docstring is not a use)."""
    names: set[str] = set()
    for path in files:
        diff = git(repo, "diff", "--no-ext-diff", "--no-textconv", "-U0", parent, child, "--", path)
        added: set[int] = set()
        for m in _HUNK.finditer(diff):
            start, count = int(m.group(1)), int(m.group(2) or 1)
            added.update(range(start, start + count))
        source = git(repo, "show", f"{child}:{path}")
        try:
            tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
        except (tokenize.TokenError, SyntaxError):
            continue
        names.update(t.string for t in tokens if t.type == tokenize.NAME and t.start[0] in added)
    return names


_HUNK = re.compile(r"^@@ -\S+ \+(\d+)(?:,(\d+))? @@", re.M)
_NOT_SOURCE_DIRS = {"tests", "test", "testing", "docs", "doc", "examples", "benchmarks"}
_NOT_SOURCE_FILES = {"setup.py", "conf.py", "noxfile.py", "conftest.py", "tasks.py"}


def is_source(path: str, include_tests: bool) -> bool:
    """A Python module of the project itself: not a test, doc, example or build script."""
    if not path.endswith(".py"):
        return False
    if include_tests:
        return True
    parts = path.split("/")
    name = parts[-1]
    return not (
        set(parts[:-1]) & _NOT_SOURCE_DIRS
        or any("example" in part or "test" in part for part in parts[:-1])
        or name in _NOT_SOURCE_FILES
        or name.startswith("test_")
        or name.endswith("_test.py")
    )


def nodes(
    repo: Path, n_commits: int, split: bool, include_tests: bool
) -> list[tuple[str, str, list[str], str]]:
    """(parent, commit, modified source files, message) per qualifying commit, newest first."""
    out: list[tuple[str, str, list[str], str]] = []
    for commit in git(
        repo, "rev-list", "--first-parent", f"--max-count={n_commits}", "HEAD"
    ).split():
        parents = git(repo, "rev-list", "--parents", "-n", "1", commit).split()[1:]
        if len(parents) != 1:
            continue
        status = git(repo, "diff", "--name-status", "--no-renames", parents[0], commit)
        modified = [
            line.split("\t")[1]
            for line in status.splitlines()
            if line.startswith("M\t") and is_source(line.split("\t")[1], include_tests)
        ]
        message = git(repo, "log", "-1", "--format=%B", commit).strip()[:2000]
        if 1 <= len(modified) <= 3:
            out.append((parents[0], commit, modified, message))
        elif split:
            out += [(parents[0], commit, [m], f"{message}\n\nChange {m}.") for m in modified]
    return out


def build_history(sdists: list[Path], dest: Path) -> Path:
    """A repository with one commit per release, in the order given (nothing downloaded)."""
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@x"}  # fmt: skip
    subprocess.run(["git", "init", "-q", str(dest)], check=True, env=env)
    for sdist in sdists:
        for child in dest.iterdir():
            if child.name != ".git":
                subprocess.run(["rm", "-rf", str(child)], check=True)
        with tarfile.open(sdist) as tar:
            for member in tar.getmembers():
                parts = member.name.split("/", 1)
                if len(parts) < 2 or not parts[1] or not (member.isfile() or member.isdir()):
                    continue
                member.name = parts[1]
                tar.extract(member, dest, filter="data")
        subprocess.run(["git", "-C", str(dest), "add", "-A"], check=True, env=env)
        subprocess.run(
            ["git", "-C", str(dest), "commit", "-q", "-m", sdist.name], check=True, env=env
        )
    return dest


def module_check(repo: Path, path: str, cap: int) -> None:
    """Does a node that writes ``path`` (and reads its imports) start under ``cap``?"""
    head = git(repo, "rev-parse", "HEAD").strip()
    tree = Tree(repo, head, {})
    node = TaskNode(task_id="big", name=f"Change {path}", goal=f"Fix a bug in {path}.",
                    write_scope=[path], token_budget=cap, max_tool_calls=8)  # fmt: skip
    plan, _ = expand_read_scopes(
        Plan(plan_id="m", requirement="Fix a bug.", tasks=[node]), tree.files, tree.text
    )
    node = plan.tasks[0]
    with scope_snapshot(repo, head, Scope([*node.read_scope, *node.write_scope])) as root:
        try:
            with Firewall(root, node.read_scope, node.write_scope, durable=False) as fw:
                p = assemble_worker_prompt(plan=plan, node=node, upstream=(), firewall=fw)
        except RunError as exc:
            print(f"module {path}: does NOT start under {cap:,}: {exc}")
            return
    [c] = [c for c in p.choices if c.path == path]
    lines = len((tree.text(path) or "").splitlines())
    print(
        f"module {path} ({lines:,} lines, {c.whole_tokens:,} tokens whole): starts under {cap:,}; "
        f"first call {first_request(p, p.first_user_message):,} tokens; shown as {c.form} "
        f"({c.outline} outline, {len(c.regions)} regions); essentials {p.essentials.tokens:,} "
        f"+ {p.essentials.reserve:,} reserve; {len(node.read_scope)} imports read"
    )


def report(rows: list[Row]) -> None:
    print(f"{'node':<34}{'first':>7}{'write':>8}{'1-hop':>8}{'crawl':>8}{'f/1hop':>7}"
          f"{'names':>6}{'lean':>5}{'1hop':>5}" + "".join(f"{'@' + str(c // 1000) + 'k':>8}" for c in CAPS))  # fmt: skip
    for r in rows:
        print(f"{r.label[:33]:<34}{r.first:>7,}{r.write:>8,}{r.one_hop:>8,}{r.crawl:>8,}"
              f"{r.first / r.one_hop:>7.2f}{r.names:>6}{r.lean_cov:>5}{r.hop_cov:>5}"
              + "".join(f"{r.at_caps[c]:>8,}" for c in CAPS))  # fmt: skip
    med = statistics.median
    print(
        f"{'median':<34}{med(r.first for r in rows):>7,.0f}{med(r.write for r in rows):>8,.0f}"
        f"{med(r.one_hop for r in rows):>8,.0f}{med(r.crawl for r in rows):>8,.0f}"
        f"{med(r.first / r.one_hop for r in rows):>7.2f}"
    )
    names = sum(r.names for r in rows)
    lean = sum(r.lean_cov for r in rows) / names if names else 1.0
    hop = sum(r.hop_cov for r in rows) / names if names else 1.0
    print(f"nodes: {len(rows)}; median first call / median one-hop: "
          f"{med(r.first for r in rows) / med(r.one_hop for r in rows):.2f} (target <= 0.5); "
          f"median of per-node ratios {med(r.first / r.one_hop for r in rows):.2f}")  # fmt: skip
    sig = sum(r.sig_cov for r in rows) / names if names else 1.0
    print(f"coverage of {names} project names used by added lines: defining module shown "
          f"{lean:.1%}, signature in the text {sig:.1%}, one hop {hop:.1%} (targets >= 80%)")  # fmt: skip
    for cap in (CAP, *CAPS):
        values = [r.first if cap == CAP else r.at_caps[cap] for r in rows]
        share = sum(v <= 25_000 for v in values) / len(values)
        print(f"cap {cap:>9,}: first call <= 25k for {share:.0%} of nodes (target >= 90%); "
              f"max {max(values):,}")  # fmt: skip
    print(f"essentials fit the {CAP:,} cap: {sum(r.started for r in rows)}/{len(rows)} nodes")


def summary(results: list[tuple[str, list[Row]]]) -> None:
    """One line per project: the issue 27 goals side by side."""
    print(f"\n{'project':<24}{'nodes':>6}{'median first':>13}{'<=25k':>7}{'names':>6}"
          f"{'module shown':>13}{'signature':>10}{'one hop':>8}")  # fmt: skip
    for name, rows in results:
        if not rows:
            continue
        names = sum(r.names for r in rows) or 1
        print(f"{name[:23]:<24}{len(rows):>6}{statistics.median(r.first for r in rows):>13,.0f}"
              f"{sum(r.first <= 25_000 for r in rows) / len(rows):>7.0%}"
              f"{sum(r.names for r in rows):>6}{sum(r.lean_cov for r in rows) / names:>13.2f}"
              f"{sum(r.sig_cov for r in rows) / names:>10.2f}"
              f"{sum(r.hop_cov for r in rows) / names:>8.2f}")  # fmt: skip


def replay(repo: Path, args: argparse.Namespace) -> list[Row]:
    """The rows of ``repo``'s first ``--nodes`` qualifying nodes."""
    split = args.split or bool(args.sdists)
    blobs: dict[str, str] = {}
    trees: dict[str, Tree] = {}
    rows: list[Row] = []
    for parent, child, files, message in nodes(repo, args.commits, split, args.include_tests):
        if args.nodes is not None and len(rows) >= args.nodes:
            break
        tree = trees.get(parent) or trees.setdefault(parent, Tree(repo, parent, blobs))
        label = f"{child[:8]} {files[0].rsplit('/', 1)[-1]}" + (
            f" +{len(files) - 1}" if len(files) > 1 else ""
        )
        rows.append(measure(repo, tree, child, files, message, label))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--repo", type=Path, nargs="+", default=[ROOT],
                        help="git repositories (default: this one)")  # fmt: skip
    parser.add_argument("--commits", type=int, default=60, help="commits to replay (60)")
    parser.add_argument("--nodes", type=int, help="stop after this many nodes per repository")
    parser.add_argument(
        "--sdists", type=Path, nargs="+", help="build a history from these releases"
    )
    parser.add_argument("--split", action="store_true", help="one node per file of big commits")
    parser.add_argument("--include-tests", action="store_true", help="tests count as sources")
    parser.add_argument("--module", help="also check a node writing this repo-relative file")
    parser.add_argument("--module-cap", type=int, default=24_000, help="its cap (24,000)")
    args = parser.parse_args()
    print(f"{datetime.date.today()} · {platform.platform()} · Python {platform.python_version()} "
          f"· {os.cpu_count()} CPUs")  # fmt: skip
    results: list[tuple[str, list[Row]]] = []
    with tempfile.TemporaryDirectory() as tmp:
        repos = [build_history(args.sdists, Path(tmp) / "history")] if args.sdists else args.repo
        for repo in repos:
            rows = replay(repo, args)
            name = ", ".join(s.name for s in args.sdists) if args.sdists else repo.name
            print(f"== {name}")
            if rows:
                report(rows)
            else:
                print("no commit modifies 1-3 existing Python files")
            results.append((name, rows))
            if args.module:
                module_check(repo, args.module, args.module_cap)
    summary(results)


if __name__ == "__main__":
    main()
