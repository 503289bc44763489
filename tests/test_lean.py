"""The lean first prompt on real temporary repositories, read through the real firewall."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from anti_sprawl.context.assemble import AssembledPrompt, assemble_worker_prompt
from anti_sprawl.context.lean import LEAN_CEILING, file_stem, lean_target
from anti_sprawl.fs.firewall import Firewall
from anti_sprawl.plan.model import Plan, TaskNode
from anti_sprawl.providers.base import ModelRequest, UserMessage, request_text
from anti_sprawl.tokens import count_tokens

from .test_file_views import big_module


def module(name: str, n_funcs: int) -> str:
    """A mid-sized module: documented functions with bodies (outline << whole)."""
    out = [f'"""The {name} module."""', "", "import os", ""]
    for i in range(n_funcs):
        out += [
            "",
            f"def {name}_op_{i}(path: str, depth: int = {i}) -> list[str]:",
            f'    """Operation {i} of {name}."""',
            "    found = []",
            "    for root, dirs, files in os.walk(path):",
            "        if len(found) > depth:",
            "            break",
            f"        found.extend(f for f in files if f.endswith('.{name}'))",
            "    return found",
        ]
    return "\n".join(out) + "\n"


def make_repo(root: Path, progress_funcs: int = 60) -> Path:
    """A package whose ``progress.py`` imports fourteen sibling modules, rich-style."""
    pkg = root / "pkg"
    pkg.mkdir(parents=True)
    names = [f"mod{i:02d}" for i in range(14)]
    for name in names:
        (pkg / f"{name}.py").write_text(module(name, 25))
    imports = "".join(f"from pkg.{n} import {n}_op_0\n" for n in names)
    (pkg / "progress.py").write_text(imports + module("progress", progress_funcs))
    (pkg / "core.py").write_text(big_module())
    return root


def node(
    write: str, token_budget: int, goal: str = "Make progress_op_3 skip hidden files."
) -> TaskNode:
    return TaskNode(
        task_id="n1",
        name="Change one module",
        goal=goal,
        read_scope=[f"pkg/mod{i:02d}.py" for i in range(14)],
        write_scope=[write],
        token_budget=token_budget,
        max_tool_calls=12,
    )


def assemble(root: Path, n: TaskNode) -> AssembledPrompt:
    plan = Plan(plan_id="p", requirement="Keep the package tidy.", tasks=[n])
    with Firewall(root, n.read_scope, n.write_scope) as fw:
        return assemble_worker_prompt(plan=plan, node=n, upstream=(), firewall=fw)


def first_call_tokens(p: AssembledPrompt) -> int:
    request = ModelRequest(
        system=p.system, tools=p.tools, messages=[UserMessage(content=p.first_user_message)]
    )
    return count_tokens(request_text(request))


def test_lean_target_is_the_smaller_of_12k_and_40_percent_of_the_cap() -> None:
    assert lean_target(24_000) == 9_600
    assert lean_target(40_000) == LEAN_CEILING == 12_000 == lean_target(2_000_000)
    assert lean_target(100_000, ceiling=8_000) == 8_000


def test_a_bigger_cap_never_makes_a_bigger_first_prompt(tmp_path: Path) -> None:
    root = make_repo(tmp_path)
    at_40k = assemble(root, node("pkg/progress.py", 40_000))
    at_2m = assemble(root, node("pkg/progress.py", 2_000_000))
    # The same files in the same forms: only the brief's statement of the cap differs.
    assert at_2m.first_user_message.replace("2,000,000", "40,000") == at_40k.first_user_message
    digits = count_tokens("2,000,000") - count_tokens("40,000")
    assert first_call_tokens(at_2m) - digits <= first_call_tokens(at_40k) <= LEAN_CEILING
    assert at_2m.choices == at_40k.choices


def test_every_read_scope_module_gets_at_least_its_outline(tmp_path: Path) -> None:
    root = make_repo(tmp_path)
    for cap in (24_000, 40_000, 200_000):
        p = assemble(root, node("pkg/progress.py", cap))
        reads = [c for c in p.choices if c.scope == "read"]
        assert len(reads) == 14
        assert all(c.form == "outline" and c.reason == "interface" for c in reads), reads
        assert all(f"stub:{c.path}" in {i.item_id for i in p.manifest_items} for c in reads)
        assert p.dropped == []
        assert first_call_tokens(p) <= lean_target(cap)
    # Outlines shrink before anything is dropped; with room they are richer.
    rank = {"names": 0, "signatures": 1, "full": 2}
    roomy = assemble(root, node("pkg/progress.py", 200_000))
    tight = assemble(root, node("pkg/progress.py", 24_000))
    rich = {c.path: rank[c.outline or ""] for c in roomy.choices if c.scope == "read"}
    lean = {c.path: rank[c.outline or ""] for c in tight.choices if c.scope == "read"}
    assert all(rich[path] >= lean[path] for path in rich)
    assert rich != lean
    assert max(lean.values()) < 2
    assert sum(rich.values()) > sum(lean.values())  # at 12k, some reach their signatures


def test_a_read_module_the_goal_names_goes_in_whole_when_small(tmp_path: Path) -> None:
    root = make_repo(tmp_path, progress_funcs=10)  # room left under the 12k target
    (root / "pkg" / "mod03.py").write_text(module("mod03", 3))
    p = assemble(root, node("pkg/progress.py", 40_000, goal="Call mod03_op_1 from progress_op_3."))
    chosen = {c.path: (c.form, c.reason) for c in p.choices}
    assert chosen["pkg/mod03.py"] == ("whole", "relevant")
    assert chosen["pkg/mod04.py"] == ("outline", "interface")


def test_a_3000_line_write_file_is_outline_plus_regions_and_starts_under_24k(
    tmp_path: Path,
) -> None:
    root = make_repo(tmp_path)
    goal = "Make Handler7.step_7_3 skip negative values."
    p = assemble(root, node("pkg/core.py", 24_000, goal=goal))
    [core] = [c for c in p.choices if c.path == "pkg/core.py"]
    assert (core.form, core.reason) == ("region", "too_large")
    assert core.outline in ("full", "signatures", "names")
    assert core.regions
    assert core.whole_tokens > 20_000
    assert core.tokens < 9_600
    assert p.essentials.fits
    assert p.essentials.cap == 24_000
    assert first_call_tokens(p) <= lean_target(24_000)
    text = p.item_texts[[i.item_id for i in p.manifest_items].index("region:pkg/core.py")]
    lines = big_module().splitlines()
    target = lines.index("    def step_7_3(self, record: dict, limit: int = 3) -> list:") + 1
    assert f"{target}\t    def step_7_3(self, record: dict, limit: int = 3) -> list:" in text
    assert any(a <= target <= b for a, b in core.regions)
    # A bigger cap buys more of the file, never the whole: the target caps it at 12k.
    roomy = assemble(root, node("pkg/core.py", 2_000_000, goal=goal))
    [big] = [c for c in roomy.choices if c.path == "pkg/core.py"]
    assert big.form == "region"
    assert core.tokens <= big.tokens < LEAN_CEILING


def test_a_files_stem_is_the_one_pathlib_gives() -> None:
    paths = ["a/b.py", "b.py", "pkg/.hidden", "pkg/x.", "pkg/archive.tar.gz", "Makefile", "a.b/c"]
    for path in paths:
        assert file_stem(path) == PurePosixPath(path).stem, path
