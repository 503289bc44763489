"""The denser planner map (issue 27 item 3): each signal of ``repomap.map.MapSignals`` on a
real temporary repository, compared with the same map with that signal off."""

from __future__ import annotations

from pathlib import Path

from anti_sprawl.planner.repomap.map import MapSignals, build_repo_map
from anti_sprawl.planner.repomap.ranking import defining_files
from anti_sprawl.tokens import count_tokens

from .test_repomap import MANY, ORDERS, make_repo

OFF = MapSignals(symbols=False, no_docstrings=False, compact_tree=False, prior=False)


def test_files_defining_a_named_code_identifier_rank_first(tmp_path: Path) -> None:
    root = make_repo(tmp_path, ORDERS, use_git=False)
    requirement = "billing ledger report: `slug` keeps dots"

    def top(signals: MapSignals) -> list[str]:
        return [
            f
            for f, _ in build_repo_map(
                root, requirement, token_budget=2_000, signals=signals
            ).ranked
        ]

    # the path words point at billing/; the identifier at the one file that defines it
    assert top(MapSignals())[0] == "utils/strings.py"
    assert top(OFF)[:2] == ["billing/ledger.py", "billing/report.py"]
    # plain words are not identifiers: "render" alone names nothing; `render` does
    symbols = {"billing/report.py": ["render"], "a.py": ["render_all"]}
    assert defining_files("render the rows", symbols) == []
    assert defining_files("fix `render`", symbols) == ["billing/report.py"]
    assert defining_files("fix render_all", symbols) == ["a.py"]


def test_outlines_leave_docstrings_out_but_the_modules_first_line(tmp_path: Path) -> None:
    root = make_repo(tmp_path, ORDERS, use_git=False)
    dense = build_repo_map(root, "OrderCreated events", token_budget=3_000).text
    assert '"""Events."""' in dense  # what the module is for
    assert '"""Fact."""' not in dense  # a class docstring
    full = build_repo_map(root, "OrderCreated events", token_budget=3_000, signals=OFF).text
    assert '"""Fact."""' in full


def test_a_compact_tree_leaves_the_budget_to_definitions(tmp_path: Path) -> None:
    root = make_repo(tmp_path, MANY, use_git=False)
    dense = build_repo_map(root, "change Thing7 in pkg7", token_budget=1_500)
    wide = build_repo_map(
        root, "change Thing7 in pkg7", token_budget=1_500, signals=MapSignals(compact_tree=False)
    )
    tree = dense.text.split("## Outlines")[0]
    assert count_tokens(tree) <= 0.4 * 1_500
    assert len(dense.included_outlines) > len(wide.included_outlines)
    assert dense.omitted > wide.omitted  # fewer tree lines


def test_a_requirement_that_says_little_ranks_defining_modules_over_other_files(
    tmp_path: Path,
) -> None:
    files = {**ORDERS, "docs/index.md": "# docs\n", "tests/test_service.py": "def test_a(): ...\n"}
    root = make_repo(tmp_path, files, use_git=False)
    ranked = [f for f, _ in build_repo_map(root, "update", token_budget=1_000).ranked]
    assert ranked.index("orders/service.py") < ranked.index("docs/index.md")
    assert ranked.index("billing/tax.py") < ranked.index("tests/test_service.py")
