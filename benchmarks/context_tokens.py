"""First-call context tokens: anti-sprawl's scoped prompt vs. an agent that crawls imports.

For each node, **scoped** is the first request anti-sprawl really builds
(``assemble_worker_prompt`` through the node's ``Firewall``: system + tools + first user
message, counted over ``request_text``). **baseline** is what an unbounded agent would send
first: the same system rules, tool schemas and brief, plus the node's scope files and the
transitive closure of their in-repo imports, every file whole. Repositories: the sample
(``sandbox/`` with ``tasks/sample/plan.yaml``), a generated layered repository in a temp dir,
and any ``--repo`` (e.g. the standard library, see ``--help``). Figures are measured in the
run; nothing is asserted. Run: ``.venv/bin/python benchmarks/context_tokens.py``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import sysconfig
import tempfile
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from anti_sprawl.context.assemble import AssembledPrompt, assemble_worker_prompt
from anti_sprawl.context.lean import lean_target
from anti_sprawl.context.sections import SECTION_HEADERS, render_brief
from anti_sprawl.errors import RunError
from anti_sprawl.fs.firewall import Firewall
from anti_sprawl.fs.repofiles import RepoReader
from anti_sprawl.fs.scopes import Scope
from anti_sprawl.outline.pyfacts import python_imports
from anti_sprawl.plan.model import Plan, TaskNode, load_plan_data
from anti_sprawl.planner.assist import default_budgets, expand_read_scopes
from anti_sprawl.planner.repomap.ranking import module_index
from anti_sprawl.providers.base import ModelRequest, UserMessage, request_text
from anti_sprawl.tokens import count_tokens
from anti_sprawl.trust import wrap_data

ROOT = Path(__file__).resolve().parent.parent
NODE_BUDGET = 40_000  # a typical node's per-call cap; its lean first prompt aims at 12k
WINDOW = 200_000  # a large model context window, where a real crawler would have to stop
MAX_FILES = 50_000
MAX_READ = 1_000_000  # the firewall's default read cap
AMBIGUOUS = 3  # as the planner: a module name found in more places than this is not followed
SEEDS_REDUCTION = 85  # anti-sprawl-context-boundaries.zh: 148,000 -> 21,500 tokens per task
DOMAINS = [
    "orders",
    "billing",
    "inventory",
    "shipping",
    "catalog",
    "customers",
    "payments",
    "pricing",
    "promotions",
    "returns",
    "reviews",
    "search",
    "notifications",
    "accounts",
    "analytics",
    "fulfillment",
    "loyalty",
    "subscriptions",
    "tax",
    "warehouse",
]
LAYERS = ("api", "services", "domain", "repositories", "adapters")  # each imports the next
NOUNS = [
    "order",
    "item",
    "invoice",
    "payment",
    "customer",
    "address",
    "cart",
    "shipment",
    "refund",
    "coupon",
    "stock",
    "price",
    "report",
    "account",
    "session",
    "token",
    "event",
    "rule",
    "batch",
]


class Repo:
    """A repository's files, module index and per-file caches (text, imports, block tokens)."""

    def __init__(self, root: Path, *, skip_installed: bool = False):
        self.root = root
        self.reader = RepoReader(root)
        files = self.reader.list_files(max_files=MAX_FILES).files
        if skip_installed:  # third-party packages installed under a stdlib are not its code
            files = [f for f in files if not {"site-packages", "dist-packages"} & set(f.split("/"))]
        self.files = files
        self.index = module_index(files)
        self._text: dict[str, str | None] = {}
        self._deps: dict[str, list[str]] = {}
        self._tokens: dict[str, int] = {}

    def text(self, path: str) -> str | None:
        if path not in self._text:
            self._text[path] = self.reader.read(path, max_bytes=MAX_READ)
        return self._text[path]

    def deps(self, path: str) -> list[str]:
        """In-repo files ``path`` imports directly (names resolving to 1..3 files)."""
        if path not in self._deps:
            text = self.text(path) if path.endswith(".py") else None
            out: dict[str, None] = {}
            for name in python_imports(text, path) if text else []:
                found = self.index.get(name, [])
                if 0 < len(found) <= AMBIGUOUS:
                    out.update(dict.fromkeys(f for f in found if f != path))
            self._deps[path] = list(out)
        return self._deps[path]

    def closure(self, seeds: Iterable[str]) -> tuple[list[str], int]:
        """``seeds`` plus everything they import, transitively; and the deepest hop taken."""
        depth = {s: 0 for s in seeds if self.text(s) is not None}
        queue = list(depth)
        for path in queue:  # breadth-first: the list grows while we walk it
            for dep in self.deps(path):
                if dep not in depth and self.text(dep) is not None:
                    depth[dep] = depth[path] + 1
                    queue.append(dep)
        return queue, max(depth.values(), default=0)

    def block_tokens(self, path: str) -> int:
        """Tokens of ``path`` as a whole-file data block, the form the prompt uses."""
        if path not in self._tokens:
            self._tokens[path] = count_tokens(wrap_data("file", path, self.text(path) or ""))
        return self._tokens[path]

    def scope_files(self, entries: list[str]) -> list[str]:
        scope = Scope(entries)
        return [f for f in self.files if scope.matches(f)]


@dataclass
class Row:
    """One node's measurement."""

    label: str  # task id, and for synthetic nodes the first write file
    write: int
    read: int
    whole: int
    outline: int
    dropped: int
    scoped: int
    baseline: int
    crawled: int
    depth: int
    drop_reasons: Counter[str]
    raised: bool  # cap raised to the planner's default (the essentials did not fit)

    @property
    def reduction(self) -> float:
        return 1 - self.scoped / self.baseline

    @property
    def capped_reduction(self) -> float:
        """Against a crawler that stops when its context window is full."""
        return 1 - self.scoped / min(self.baseline, WINDOW)


def first_request_tokens(prompt: AssembledPrompt, user: str) -> int:
    """Tokens of a first call with ``prompt``'s system blocks and tools and ``user`` as text."""
    request = ModelRequest(
        system=prompt.system, tools=prompt.tools, messages=[UserMessage(content=user)]
    )
    return count_tokens(request_text(request))


def measure(
    repo: Repo, plan: Plan, node: TaskNode, budget: int, label: str, raised: bool = False
) -> Row:
    """Assemble ``node``'s real first prompt and its crawling baseline; count both."""
    with Firewall(repo.root, node.read_scope, node.write_scope) as firewall:
        prompt = assemble_worker_prompt(
            plan=plan, node=node, upstream=[], firewall=firewall, context_budget=budget
        )
    scoped = first_request_tokens(prompt, prompt.first_user_message)
    items = list(zip(prompt.manifest_items, prompt.item_sections, strict=True))
    whole = {i.source for i, s in items if s == "stubs" and i.kind == "file"}
    outline = {i.source for i, s in items if s == "stubs" and i.kind in ("stub", "region")}
    dropped = {d.source for d in prompt.dropped if d.kind in ("file", "stub")} - whole - outline
    reasons = Counter[str](d.reason for d in prompt.dropped if d.source in dropped)
    write_files = repo.scope_files(node.write_scope)
    seeds = sorted({*write_files, *repo.scope_files(node.read_scope)})
    crawled, depth = repo.closure(seeds)
    head = render_brief(plan, node) + SECTION_HEADERS["files"]
    baseline = first_request_tokens(prompt, head) + sum(repo.block_tokens(f) for f in crawled)
    return Row(
        label,
        len([f for f in write_files if repo.text(f) is not None]),
        len(whole | outline | dropped),
        len(whole),
        len(outline),
        len(dropped),
        scoped,
        baseline,
        len(crawled),
        depth,
        reasons,
        raised,
    )


def synthetic_rows(repo: Repo, n_nodes: int, seed: int, label: str) -> list[Row]:
    """``n_nodes`` nodes: 1-3 modules of one directory written, their direct imports read."""
    rng = random.Random(seed)
    modules = [f for f in repo.files if f.endswith(".py") and (repo.text(f) or "").strip()]
    if not modules:
        raise SystemExit(f"{repo.root}: no non-empty Python modules")
    rows: list[Row] = []
    for n in range(n_nodes):
        first = rng.choice(modules)
        directory = first.rpartition("/")[0]
        siblings = [m for m in modules if m.rpartition("/")[0] == directory and m != first]
        write = [first, *rng.sample(siblings, min(len(siblings), rng.randint(0, 2)))]
        node = TaskNode(
            task_id=f"n{n:02d}",
            name=f"Change {first}",
            goal=f"Update {', '.join(write)} for the new requirement; keep their interfaces.",
            write_scope=write,
            token_budget=NODE_BUDGET,
        )
        plan = Plan(plan_id=label, requirement="A change confined to a few modules.", tasks=[node])
        plan, _ = expand_read_scopes(plan, repo.files, repo.text)  # one hop, as the planner
        node = plan.tasks[0]
        try:
            budget = lean_target(NODE_BUDGET)
            rows.append(measure(repo, plan, node, budget, f"{node.task_id} {first}"))
        except RunError:  # even the smallest essentials exceed the cap: the planner budgets more
            plan = default_budgets(plan, {node.task_id: {"token_budget"}}, repo.files, repo.text)
            node = plan.tasks[0]
            budget = lean_target(node.token_budget)
            rows.append(measure(repo, plan, node, budget, f"{node.task_id}* {first}", True))
    return rows


def sample_rows() -> tuple[Repo, list[Row]]:
    """Each node of the sample plan on ``sandbox/``, at the runner's lean target."""
    repo = Repo(ROOT / "sandbox")
    plan = Plan.model_validate(load_plan_data(ROOT / "tasks" / "sample" / "plan.yaml"))
    rows = [measure(repo, plan, t, lean_target(t.token_budget), t.task_id) for t in plan.tasks]
    return repo, rows


def generate(root: Path, n_modules: int, seed: int) -> None:
    """A layered shop: per domain api -> services -> domain -> repositories -> adapters -> core.

    Each module imports 2-3 modules of the next layer of its domain, sometimes (1 in 5) one of
    the next layer of another domain, and often a ``core`` module; ``core`` modules import
    earlier ``core`` modules, so import chains run 5-6 levels and more.
    """
    rng = random.Random(seed)
    n_core = max(10, n_modules // 20)
    per_layer = max(1, (n_modules - n_core) // (len(DOMAINS) * len(LAYERS)))
    names = [f"{NOUNS[i % len(NOUNS)]}{i // len(NOUNS) or ''}" for i in range(per_layer)]
    core = [f"shop.core.{NOUNS[i % len(NOUNS)]}_{i}" for i in range(n_core)]
    for i, mod in enumerate(core):
        write_module(root, mod, rng.sample(core[:i], min(i, rng.randint(0, 2))), rng)
    for d in DOMAINS:
        for li, layer in enumerate(LAYERS):
            for name in names:
                deps: list[str] = []
                if li + 1 < len(LAYERS):
                    below = LAYERS[li + 1]
                    picked = rng.sample(names, min(rng.randint(2, 3), len(names)))
                    deps += [f"shop.{d}.{below}.{x}" for x in picked]
                    if rng.random() < 0.2:
                        deps.append(f"shop.{rng.choice(DOMAINS)}.{below}.{rng.choice(names)}")
                if rng.random() < 0.5 or li + 1 == len(LAYERS):
                    deps.append(rng.choice(core))
                write_module(root, f"shop.{d}.{layer}.{name}", sorted(set(deps)), rng)
    for package in {p.parent for p in root.rglob("*.py")}:
        while package != root and not (package / "__init__.py").exists():
            (package / "__init__.py").write_text("")  # empty, as most are
            package = package.parent


def class_name(module: str) -> str:
    return "".join(w.capitalize() for w in module.rsplit(".", 2)[-2:]).replace("_", "")


def write_module(root: Path, module: str, deps: list[str], rng: random.Random) -> None:
    """A plausible module: imports, a dataclass, classes whose methods use the imports."""
    cls = class_name(module)
    lines = [f'"""{cls}: {module.rsplit(".", 1)[-1]} handling."""', ""]
    lines += ["from __future__ import annotations", "", "import logging"]
    lines += ["from dataclasses import dataclass, field", ""]
    lines += [f"from {d} import {class_name(d)}" for d in deps]
    lines += ["", "log = logging.getLogger(__name__)", "", "", "@dataclass", f"class {cls}Record:"]
    lines += [f'    """A {cls} row as stored."""', "", "    key: str", "    amount: int = 0"]
    lines += ["    tags: list[str] = field(default_factory=list)", ""]
    for c in range(rng.randint(1, 3)):
        lines += ["", f"class {cls}{'Handler' if c else ''}{c or ''}:"]
        lines += [f'    """Coordinates {cls.lower()} work for its callers."""', ""]
        args = ", ".join(f"{d.rsplit('.', 1)[-1]}: {class_name(d)}" for d in deps)
        lines += [f"    def __init__(self{', ' if args else ''}{args}) -> None:"]
        lines += [f"        self._{d.rsplit('.', 1)[-1]} = {d.rsplit('.', 1)[-1]}" for d in deps]
        lines += ["        self._seen: dict[str, int] = {}", ""]
        for m in range(rng.randint(2, 7)):
            dep = deps[m % len(deps)].rsplit(".", 1)[-1] if deps else "seen"
            lines += [
                f"    def step_{m}(self, record: {cls}Record, limit: int = {m + 3}) -> list[str]:",
                f'        """Apply step {m} to ``record``; at most ``limit`` results."""',
                "        results: list[str] = []",
                "        for index in range(limit):",
                f"            value = getattr(self._{dep}, 'lookup', lambda k: None)(record.key)",
                "            if value is None:",
                f'                log.debug("no {dep} for %s at %d", record.key, index)',
                "                continue",
                "            self._seen[record.key] = self._seen.get(record.key, 0) + 1",
                "            results.append(f'{record.key}:{index}:{value}')",
                "        return results",
                "",
            ]
    path = root / (module.replace(".", "/") + ".py")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines).rstrip() + "\n")


def report(label: str, repo: Repo, rows: list[Row], seconds: float) -> None:
    """Print one repository's table and summary."""
    py = sum(f.endswith(".py") for f in repo.files)
    print(f"\n== {label}: {repo.root} ({len(repo.files):,} files, {py:,} Python)")
    print(
        f"{'node':<30}{'write':>6}{'read':>5}{'whole':>6}{'outl':>5}{'drop':>5}"
        f"{'scoped':>8}{'baseline':>10}{'crawl':>6}{'depth':>6}{'reduct.':>8}"
    )
    for r in rows:
        name = r.label if len(r.label) <= 29 else r.label[:12] + "…" + r.label[-16:]
        print(
            f"{name:<30}{r.write:>6}{r.read:>5}{r.whole:>6}{r.outline:>5}{r.dropped:>5}"
            f"{r.scoped:>8,}{r.baseline:>10,}{r.crawled:>6}{r.depth:>6}{r.reduction:>8.1%}"
        )
    reductions = [r.reduction for r in rows]
    scoped = statistics.mean(r.scoped for r in rows)
    baseline = statistics.mean(r.baseline for r in rows)
    overall = 1 - scoped / baseline
    capped = 1 - scoped / statistics.mean(min(r.baseline, WINDOW) for r in rows)
    print(
        f"{'median over nodes':<52}{statistics.median(r.scoped for r in rows):>8,.0f}"
        f"{statistics.median(r.baseline for r in rows):>10,.0f}{'':>12}"
        f"{statistics.median(reductions):>8.1%}"
    )
    print(
        f"{'mean over nodes (reduction of the means)':<52}{scoped:>8,.0f}{baseline:>10,.0f}"
        f"{'':>12}{overall:>8.1%}"
    )
    reasons = sum((r.drop_reasons for r in rows), Counter[str]())
    why = ", ".join(f"{n} {reason}" for reason, n in sorted(reasons.items()))
    print(
        f"read-scope files: {sum(r.whole for r in rows)} whole, "
        f"{sum(r.outline for r in rows)} as outlines, {sum(r.dropped for r in rows)} dropped"
        + (f" ({why})" if why else "")
    )
    print(
        f"per-node reduction: mean {statistics.mean(reductions):.1%}, "
        f"min {min(reductions):.1%}, max {max(reductions):.1%}; "
        f"with the crawl capped at a {WINDOW:,}-token window: {capped:.1%}; {seconds:.1f} s"
    )
    if any(r.raised for r in rows):
        print("* essentials exceed the cap: budget = the planner's default")
    print(f"{label}: reduction: {overall:.1%} (seeds report {SEEDS_REDUCTION}%)")


def main() -> None:
    stdlib = sysconfig.get_paths()["stdlib"]
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        epilog=(
            "reduction = 1 - scoped/baseline; the final line per repo uses mean tokens (as the "
            f"seeds do). Try --repo {stdlib} (this Python's standard library source, Lib/)."
        ),
    )
    parser.add_argument("--repo", type=Path, action="append", default=[], help="also measure DIR")
    parser.add_argument("--nodes", type=int, default=20, help="synthetic nodes per repo (20)")
    parser.add_argument("--modules", type=int, default=2000, help="generated modules (2000)")
    parser.add_argument("--seed", type=int, default=7, help="random seed (7)")
    args = parser.parse_args()
    if args.nodes < 1:
        parser.error("--nodes must be at least 1")
    for d in args.repo:
        if not d.is_dir():
            parser.error(f"--repo {d}: not a directory")
    print("scoped = first request of assemble_worker_prompt; baseline = crawl of imports, whole")
    start = time.perf_counter()
    repo, rows = sample_rows()
    report("sample", repo, rows, time.perf_counter() - start)
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        generate(Path(tmp), args.modules, args.seed)
        repo = Repo(Path(tmp))
        rows = synthetic_rows(repo, args.nodes, args.seed, "generated")
        report("generated", repo, rows, time.perf_counter() - start)
    for d in args.repo:
        start = time.perf_counter()
        repo = Repo(d.resolve(), skip_installed=True)
        rows = synthetic_rows(repo, args.nodes, args.seed, "repo")
        report(d.name or str(d), repo, rows, time.perf_counter() - start)


if __name__ == "__main__":
    main()
