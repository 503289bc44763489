"""The denser planner map (issue 27 item 3): each signal of ``repomap.map.MapSignals`` on a
real temporary repository, compared with the same map with that signal off."""

from __future__ import annotations

from pathlib import Path

from anti_sprawl.planner.repomap.map import MapSignals, build_repo_map
from anti_sprawl.planner.repomap.ranking import defining_files, relevance, requirement_terms
from anti_sprawl.tokens import count_tokens

from .test_repomap import MANY, ORDERS, make_repo

OFF = MapSignals(*(False for _ in MapSignals._fields))


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


def test_words_only_a_files_code_uses_rank_it(tmp_path: Path) -> None:
    # "zstd" is no file name and no defined name: only decoders.py's code says it
    files = {
        **ORDERS,
        "net/decoders.py": "import zstd_lib\n\n\nclass Decoder:\n    def run(self):\n"
        "        return zstd_lib.decompress(self.data)\n",
        "net/encoders.py": "class Encoder:\n    def run(self):\n        return b''\n",
    }
    root = make_repo(tmp_path, files, use_git=False)

    def rank(signals: MapSignals) -> int:
        ranked = build_repo_map(root, "Handle empty zstd responses", token_budget=1_000,
                                signals=signals).ranked  # fmt: skip
        return [f for f, _ in ranked].index("net/decoders.py")

    assert rank(MapSignals()) == 0
    assert rank(MapSignals(text_words=False)) > 0


def test_a_directory_word_is_shared_by_the_files_under_it() -> None:
    terms = requirement_terms("docs: fix markup")
    code = {f"lib/m{i}.py": ["render_markup" if i == 0 else f"a{i}"] for i in range(20)}

    def asset_score(n_assets: int) -> float:
        assets = [f"docs/_static/logo{i}.svg" for i in range(n_assets)]
        return relevance([*code, *assets], code, terms)["docs/_static/logo0.svg"]

    # 30 images matching "docs" only by their directory weigh less each than one would,
    # and each less than the module whose definitions say "markup"
    scores = relevance([*code, *(f"docs/_static/logo{i}.svg" for i in range(30))], code, terms)
    assert asset_score(30) < asset_score(1) / 4
    assert scores["docs/_static/logo0.svg"] < scores["lib/m0.py"] / 4


def test_stubs_get_no_prior_of_their_own(tmp_path: Path) -> None:
    # a .pyi declaring many names is not where a vague change goes: its module is
    stub = "".join(f"def f{i}(x: int) -> int: ...\n" for i in range(40))
    code = "".join(f"def f{i}(x):\n    return x\n" for i in range(8))
    files = {"pkg/__init__.pyi": stub, "pkg/core.py": code, "pkg/__init__.py": ""}
    root = make_repo(tmp_path, files, use_git=False)
    ranked = [f for f, _ in build_repo_map(root, "update", token_budget=1_000).ranked]
    assert ranked.index("pkg/core.py") < ranked.index("pkg/__init__.pyi")
