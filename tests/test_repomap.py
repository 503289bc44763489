"""Repository map: listing, secrets, symlinks, ranking and the exact token budget."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anti_sprawl.errors import UsageError
from anti_sprawl.fs.repofiles import FileListing, is_secret_path, list_repo_files, read_source
from anti_sprawl.planner.repomap.map import RepoMap, build_repo_map
from anti_sprawl.planner.repomap.ranking import (
    build_import_graph,
    module_index,
    personalized_pagerank,
    requirement_terms,
    split_words,
)
from anti_sprawl.tokens import count_tokens

CANARY = "CANARY-SECRET-7f3a"

ORDERS = {
    "orders/__init__.py": "",
    "orders/service.py": (
        '"""Order use cases."""\n'
        "from orders.events import OrderCreated\n\n\n"
        "def create_order(customer: str, qty: int = 1) -> OrderCreated:\n"
        "    return OrderCreated(customer)\n"
    ),
    "orders/events.py": '"""Events."""\n\n\nclass OrderCreated:\n    """Fact."""\n',
    "api/views.py": "from orders.service import create_order\n\n\ndef post(req): ...\n",
    "billing/ledger.py": "from billing.report import render\n\n\nclass LedgerEntry: ...\n",
    "billing/report.py": "def render(rows: list[str]) -> str: ...\n",
    "billing/tax.py": "from billing.ledger import LedgerEntry\n\n\ndef vat(x: int) -> int: ...\n",
    "utils/strings.py": "def slug(text: str) -> str: ...\n",
    "README.md": "# demo\n",
}


def write_tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@e", "-c", "commit.gpgsign=false", *args],
        cwd=root,
        check=True,
        capture_output=True,
    )


def make_repo(tmp_path: Path, files: dict[str, str], *, use_git: bool) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    write_tree(root, files)
    if use_git:
        git(root, "init", "-q")
        git(root, "add", "-A")
        git(root, "commit", "-qm", "init")
    return root


def names(ranked: list[tuple[str, float]]) -> list[str]:
    return [f for f, _ in ranked]


@pytest.mark.parametrize("use_git", [True, False])
def test_named_file_first_then_its_importer_and_import(tmp_path: Path, use_git: bool) -> None:
    root = make_repo(tmp_path, ORDERS, use_git=use_git)
    repo_map = build_repo_map(root, "Refactor orders/service.py", token_budget=2000)
    order = names(repo_map.ranked)
    assert order[0] == "orders/service.py"
    assert set(order[1:3]) == {"orders/events.py", "api/views.py"}
    assert sorted(order) == sorted(repo_map.files)
    assert repo_map.included_outlines[0] == "orders/service.py"


def test_named_file_neighbours_beat_a_common_word(tmp_path: Path) -> None:
    noise = {f"noise/n{i}.py": f"class Handler{i}: ...\n" for i in range(300)}
    root = make_repo(tmp_path, {**ORDERS, **noise}, use_git=False)
    repo_map = build_repo_map(root, "Refactor orders/service.py handler code", token_budget=500)
    order = names(repo_map.ranked)
    assert order[0] == "orders/service.py"
    assert set(order[1:3]) == {"orders/events.py", "api/views.py"}
    last_noise = max(order.index(f) for f in noise)  # they match "handler"...
    assert last_noise < order.index("utils/strings.py")  # ...so they beat unrelated files


def test_explicit_mention_beats_word_matches(tmp_path: Path) -> None:
    root = make_repo(tmp_path, ORDERS, use_git=True)
    repo_map = build_repo_map(
        root, "Use the ledger report LedgerEntry totals in strings.py", token_budget=2000
    )
    order = names(repo_map.ranked)
    assert order[0] == "utils/strings.py"
    assert order[1] == "billing/ledger.py"  # defines LedgerEntry, matches "ledger"


def test_symbol_and_word_relevance_without_paths(tmp_path: Path) -> None:
    root = make_repo(tmp_path, ORDERS, use_git=True)
    order = names(build_repo_map(root, "Emit OrderCreated from somewhere", token_budget=500).ranked)
    assert order[0] == "orders/events.py"
    order = names(build_repo_map(root, "compute VAT differently", token_budget=500).ranked)
    assert order[0] == "billing/tax.py"
    order = names(build_repo_map(root, "tidy up billing/ please", token_budget=500).ranked)
    assert set(order[:3]) == {"billing/ledger.py", "billing/report.py", "billing/tax.py"}


def test_module_mention_and_untracked_files(tmp_path: Path) -> None:
    root = make_repo(tmp_path, ORDERS, use_git=True)
    write_tree(root, {"orders/fresh.py": "def new_thing(): ...\n"})  # untracked, not ignored
    repo_map = build_repo_map(root, "look at orders.fresh please", token_budget=800)
    assert names(repo_map.ranked)[0] == "orders/fresh.py"
    assert "def new_thing(): ..." in repo_map.text


BUDGETS = [0, 3, 10, 25, 60, 150, 400, 1000, 3000, 20000]


MANY = dict(ORDERS)
for _i in range(120):  # enough directories and files that the tree must collapse
    MANY[f"pkg{_i % 12}/mod_{_i}.py"] = (
        f"from pkg{(_i + 1) % 12}.mod_{(_i + 1) % 120} import thing\n\n\n"
        f"class Thing{_i}:\n    def method_{_i}(self, value: int = {_i}) -> int: ...\n"
    )


@pytest.fixture(scope="module")
def many_files_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_repo(tmp_path_factory.mktemp("many"), MANY, use_git=True)


@pytest.mark.parametrize("budget", BUDGETS)
def test_map_fits_the_budget_exactly(many_files_repo: Path, budget: int) -> None:
    repo_map = build_repo_map(many_files_repo, "change Thing7 in pkg7", token_budget=budget)
    assert repo_map.tokens == count_tokens(repo_map.text)
    assert repo_map.tokens <= budget
    if budget >= 60:
        assert repo_map.text.startswith("# Repository map (129 files)")
    if budget >= 400:
        assert repo_map.included_outlines[0] == "pkg7/mod_7.py"
    if 400 <= budget <= 1000:
        assert repo_map.omitted > 0  # the tree had to collapse
    if budget == 20000:
        assert repo_map.omitted == 0
        # every module but the empty orders/__init__.py
        python_files = [f for f in MANY if f.endswith(".py")]
        assert len(repo_map.included_outlines) == len(python_files) - 1
    for path in repo_map.included_outlines:
        assert f"### {path}\n" in repo_map.text


@settings(max_examples=25, deadline=None)
@given(
    budget=st.integers(min_value=0, max_value=4000), word=st.sampled_from(["Thing3", "ledger", ""])
)
def test_map_budget_property(many_files_repo: Path, budget: int, word: str) -> None:
    repo_map = build_repo_map(many_files_repo, f"change {word}", token_budget=budget)
    assert repo_map.tokens == count_tokens(repo_map.text) <= budget
    assert all(f"### {path}\n" in repo_map.text for path in repo_map.included_outlines)


def test_an_oversized_outline_is_cut_not_dropped(tmp_path: Path) -> None:
    huge = "".join(f"def handler_{i}(event: dict[str, int]) -> None: ...\n" for i in range(400))
    root = make_repo(tmp_path, {**ORDERS, "orders/huge.py": huge}, use_git=True)
    repo_map = build_repo_map(root, "split orders/huge.py", token_budget=900)
    assert repo_map.included_outlines[0] == "orders/huge.py"
    assert "def handler_0(event: dict[str, int]) -> None: ..." in repo_map.text
    assert "... (outline cut to fit the budget)" in repo_map.text
    assert "handler_399" not in repo_map.text
    assert repo_map.tokens <= 900
    assert RepoMap.model_validate_json(repo_map.model_dump_json()) == repo_map


def test_collapsed_directory_keeps_its_best_ranked_files(tmp_path: Path) -> None:
    files = {f"big/f{i:02}.txt": "x\n" for i in range(60)}
    files.update({"other/a.txt": "x\n", "other/b.txt": "x\n"})
    root = make_repo(tmp_path, files, use_git=False)
    repo_map = build_repo_map(root, "look at big/f42.txt", token_budget=80)
    big_line = next(line for line in repo_map.text.splitlines() if line.startswith("big/: "))
    assert "f42.txt" in big_line.split()
    assert big_line.endswith(" more")
    assert "other/: a.txt b.txt" in repo_map.text
    shown = len(big_line.split()) - 3  # label, "+N", "more"
    assert repo_map.omitted == 60 - shown > 0
    assert repo_map.tokens <= 80


def test_tree_truncation_reports_hidden_files(tmp_path: Path) -> None:
    files = {f"d{i:03}/f{i}.txt": "x\n" for i in range(300)}
    root = make_repo(tmp_path, files, use_git=False)
    repo_map = build_repo_map(root, "look at d007", token_budget=120)
    assert repo_map.tokens <= 120
    assert "more files in" in repo_map.text
    assert "d007/: f7.txt" in repo_map.text  # the relevant directory survives the cut
    assert repo_map.omitted == 300 - repo_map.text.count(".txt")


SECRETS = {
    ".env": f"KEY={CANARY}\n",
    ".ENV.local": f"KEY={CANARY}\n",
    "config/.env.production": f"KEY={CANARY}\n",
    "certs/server.PEM": f"{CANARY}\n",
    "keys/api.key": f"{CANARY}\n",
    "home/id_rsa": f"{CANARY}\n",
    "home/id_ed25519.pub": f"{CANARY}\n",
    ".npmrc": f"//registry/:_authToken={CANARY}\n",
    ".netrc": f"machine x password {CANARY}\n",
    ".aws/credentials": f"aws_secret_access_key={CANARY}\n",
    "infra/prod.tfstate": f'{{"secret": "{CANARY}"}}\n',
    ".env.example": "KEY=put-yours-here\n",
    "app.py": "def main() -> None: ...\n",
}


@pytest.mark.parametrize("use_git", [True, False])
def test_secret_files_never_listed_or_read(tmp_path: Path, use_git: bool) -> None:
    root = make_repo(tmp_path, SECRETS, use_git=use_git)  # committed, so git lists them
    repo_map = build_repo_map(
        root, "read .env and server.pem and id_rsa and credentials", token_budget=5000
    )
    assert repo_map.files == [".env.example", "app.py"]
    assert sorted(names(repo_map.ranked)) == [".env.example", "app.py"]
    assert CANARY not in repo_map.text
    words = set(repo_map.text.split())
    for rel in SECRETS:
        if rel not in (".env.example", "app.py"):
            assert rel.rsplit("/", 1)[-1] not in words
            assert rel.split("/", 1)[0] + "/:" not in words  # no directory line for it
            assert read_source(root, rel) is None


@pytest.mark.parametrize(
    "path",
    [
        ".env",
        ".Env.local",
        "a/.env/x.py",
        ".aws/credentials",
        "x.tfstate",
        "y.TFSTATE.backup",
        "id_rsa.pub",
        "k.pem",
        "cert.P12",
        ".git-credentials",
    ],
)
def test_is_secret_path(path: str) -> None:
    assert is_secret_path(path)


@pytest.mark.parametrize("path", [".env.example", "envoy.py", "keys.py", "aws/credentials.py"])
def test_is_not_secret_path(path: str) -> None:
    assert not is_secret_path(path)


@pytest.mark.parametrize("use_git", [True, False])
def test_gitignored_and_tool_dirs_are_skipped(tmp_path: Path, use_git: bool) -> None:
    files = {
        ".gitignore": "build/\n*.log\n",
        "build/generated.py": "def generated_marker(): ...\n",
        "debug.log": "log line\n",
        "node_modules/lib/index.js": "function nodeModulesMarker() {}\n",
        ".venv/lib/site.py": "def venv_marker(): ...\n",
        "src/__pycache__/m.py": "def pycache_marker(): ...\n",
        "src/main.py": "def real(): ...\n",
    }
    root = make_repo(tmp_path, files, use_git=use_git)
    if use_git:  # tool directories that .gitignore does not cover, left untracked
        write_tree(root, {"node_modules/lib/index.js": "function nodeModulesMarker() {}\n"})
    repo_map = build_repo_map(root, "generated marker venv", token_budget=5000)
    assert repo_map.files == [".gitignore", "src/main.py"]
    for marker in ("generated", "debug.log", "nodeModules", "venv_marker", "pycache", "build/"):
        assert marker not in repo_map.text


@pytest.mark.parametrize("use_git", [True, False])
def test_symlinks_out_of_the_repo_are_not_followed(tmp_path: Path, use_git: bool) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text(f"def leaked_{CANARY.replace('-', '_')}(): ...\n")
    (outside / "sub").mkdir()
    (outside / "sub" / "deep.py").write_text("def deep_leak(): ...\n")
    root = make_repo(tmp_path, {"real.py": "def real_fn(): ...\n", ".env": CANARY}, use_git=False)
    os.symlink(outside / "secret.py", root / "link.py")
    os.symlink(outside, root / "linkdir")
    os.symlink("real.py", root / "alias.py")
    os.symlink("../.env", root / "env_alias.txt")  # inside, but the target is a secret
    os.symlink(root / "missing.py", root / "dangling.py")
    if use_git:
        git(root, "init", "-q")
        git(root, "add", "-A")
        git(root, "commit", "-qm", "links")
    repo_map = build_repo_map(root, "leaked secret deep link real", token_budget=5000)
    assert repo_map.files == ["alias.py", "real.py"]
    assert "leaked" not in repo_map.text
    assert "deep_leak" not in repo_map.text
    assert CANARY.replace("-", "_") not in repo_map.text
    assert "def real_fn(): ..." in repo_map.text
    assert read_source(root, "link.py") is None
    assert read_source(root, "env_alias.txt") is None


def test_binary_and_oversized_files_are_listed_but_not_outlined(tmp_path: Path) -> None:
    files = {
        "big.py": "def big_marker(): ...\n" + "x = 1\n" * 100_000,
        "blob.py": "def blob_marker(): ...\n\x00\n",
        "ok.py": "def ok_marker(): ...\n",
    }
    root = make_repo(tmp_path, files, use_git=True)
    repo_map = build_repo_map(root, "big blob ok marker", token_budget=5000)
    assert repo_map.files == ["big.py", "blob.py", "ok.py"]
    assert repo_map.included_outlines == ["ok.py"]
    assert "big_marker" not in repo_map.text
    assert "blob_marker" not in repo_map.text


def test_max_files_caps_the_listing(tmp_path: Path) -> None:
    root = make_repo(tmp_path, {f"f{i:02}.txt": "x" for i in range(30)}, use_git=True)
    repo_map = build_repo_map(root, "anything", token_budget=1000, max_files=10)
    assert len(repo_map.files) == 10
    assert "listing capped" in repo_map.text


def test_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not a directory"):
        build_repo_map(tmp_path / "missing", "x", token_budget=100)
    with pytest.raises(ValueError, match="token_budget"):
        build_repo_map(tmp_path, "x", token_budget=-1)


def test_import_graph_resolves_src_layout_and_relative_imports() -> None:
    imports = {
        "src/pkg/__init__.py": [],
        "src/pkg/a.py": ["pkg.b", "pkg.b.thing", "src.pkg", "src.pkg.c", "os"],
        "src/pkg/b.py": [],
        "src/pkg/c.py": ["pkg"],
        "tests/test_a.py": ["pkg.a", "pkg.a.f"],
    }
    index = module_index(imports)
    assert index["pkg.a"] == ["src/pkg/a.py"]
    graph = build_import_graph(imports, index)
    assert set(graph["src/pkg/a.py"]) == {
        "src/pkg/b.py",
        "src/pkg/__init__.py",
        "src/pkg/c.py",
    }
    assert set(graph["tests/test_a.py"]) == {"src/pkg/a.py"}
    assert set(graph["src/pkg/c.py"]) == {"src/pkg/__init__.py"}


def test_personalized_pagerank_favours_seed_and_neighbours() -> None:
    imports = {"a.py": ["b"], "b.py": ["c"], "c.py": ["d"], "d.py": [], "z.py": []}
    graph = build_import_graph(imports, module_index(imports))
    ranks = personalized_pagerank(graph, {"b.py": 1.0})
    assert abs(sum(ranks.values()) - 1.0) < 1e-6
    assert ranks["b.py"] > ranks["c.py"] > ranks["d.py"] > ranks["z.py"] == 0.0
    assert ranks["b.py"] > ranks["a.py"] > ranks["d.py"]
    uniform = personalized_pagerank(graph, {})
    assert uniform["z.py"] > 0
    assert uniform["c.py"] > uniform["z.py"]  # imported modules gain


def test_requirement_terms_split_identifiers_and_paths() -> None:
    terms = requirement_terms(
        "Move OrderCreatedEvent publishing out of orders/service.py, see api/."
    )
    assert {"order", "created", "event", "publishing", "service"} <= terms.words
    assert "ordercreatedevent" in terms.identifiers
    assert terms.mentions == ("orders/service.py", "api/")
    assert split_words("parse_HTTPResponse2") == ["parse", "http", "response"]


def test_a_listing_made_by_the_caller_is_the_one_the_map_uses(tmp_path: Path) -> None:
    # The planner lists the repository once, for the map and for scope assistance.
    root = make_repo(tmp_path, ORDERS, use_git=True)
    listing = list_repo_files(root, max_files=1000)
    same = build_repo_map(root, "Refactor orders/service.py", token_budget=2000, listing=listing)
    assert same == build_repo_map(root, "Refactor orders/service.py", token_budget=2000)
    # what the listing leaves out, the map never names, even though the file is on disk
    without = FileListing([f for f in listing.files if f != "billing/tax.py"], truncated=False)
    repo_map = build_repo_map(
        root, "compute VAT in billing/tax.py", token_budget=2000, listing=without
    )
    assert "billing/tax.py" not in repo_map.files
    assert "tax.py" not in repo_map.text
    # and a longer listing is cut to the map's own limit, which says so
    cut = build_repo_map(root, "anything", token_budget=2000, max_files=3, listing=listing)
    assert cut.files == listing.files[:3]
    assert "listing capped" in cut.text
    assert "listing capped" not in same.text
