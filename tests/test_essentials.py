"""Fail before spending: validate --repo and execute check every node's first prompt first."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from anti_sprawl.cli.app import app
from anti_sprawl.context.essentials import first_prompts, scope_snapshot, start_commit
from anti_sprawl.fs.scopes import Scope
from anti_sprawl.plan.model import Plan

from . import e2e_fixture as fx
from .conftest import GIT_ENV
from .test_file_views import big_module

runner = CliRunner()


pytestmark = pytest.mark.usefixtures("python_on_path")


def commit_all(repo: Path, message: str) -> None:
    env = {**os.environ, **GIT_ENV}
    for args in (["add", "-A"], ["commit", "-q", "-m", message]):
        subprocess.run(["git", *args], cwd=repo, check=True, env=env)


def big_repo(tmp_path: Path) -> Path:
    repo = fx.make_repo(tmp_path)
    (repo / "pkg" / "core.py").write_text(big_module())
    (repo / "pkg" / "huge.py").write_text(big_module() * 4)  # a 12,000-line module
    (repo / ".env").write_text("API_KEY=CANARY-ENV\n")
    commit_all(repo, "big modules")
    return repo


def plan_data() -> dict[str, object]:
    data = fx.plan()
    tasks = data["tasks"]
    assert isinstance(tasks, list)
    tasks[0].update(write_scope=["pkg/core.py"], token_budget=24_000)  # fits, as outline + regions
    tasks[1].update(write_scope=["pkg/huge.py"], token_budget=8_000)  # cannot start
    tasks[2].update(read_scope=["pkg/", ".env"], token_budget=12_000)
    return data


def test_validate_repo_names_the_node_that_cannot_fit_and_the_budget_that_would(
    tmp_path: Path,
) -> None:
    repo = big_repo(tmp_path)
    plan_path, _ = fx.write_inputs(tmp_path, plan_data(), {"workers": {}})
    result = runner.invoke(app, ["validate", str(plan_path), "--repo", str(repo)])
    assert result.exit_code == 1, result.output
    assert "essentials_over_budget" in result.output
    out = " ".join(result.output.split())
    assert "node b: its essential first prompt needs" in out
    assert "over its token_budget of 8,000; the smallest budget that fits is" in out
    assert "node a:" not in out
    assert "node c:" not in out
    as_json = runner.invoke(app, ["validate", str(plan_path), "--repo", str(repo), "--json"])
    assert as_json.exit_code == 1
    doc = json.loads(as_json.stdout)
    [problem] = [p for p in doc["errors"] if p["code"] == "essentials_over_budget"]
    assert problem["tasks"] == ["b"]
    assert problem["paths"] == ["pkg/huge.py"]
    needed = int(problem["message"].split("fits is ")[1].split(" ")[0].replace(",", ""))
    # Raising b's budget to what the message says makes the plan valid.
    fixed = plan_data()
    fixed["tasks"][1]["token_budget"] = needed  # type: ignore[index]
    plan_path.write_text(yaml.safe_dump(fixed))
    ok = runner.invoke(app, ["validate", str(plan_path), "--repo", str(repo)])
    assert ok.exit_code == 0, ok.output
    assert "first prompts at" in ok.output
    # Without --repo there is nothing to measure: structural checks only.
    plan_path.write_text(yaml.safe_dump(plan_data()))
    assert runner.invoke(app, ["validate", str(plan_path)]).exit_code == 0


def test_first_prompts_read_the_commit_not_the_working_tree_and_never_secrets(
    tmp_path: Path,
) -> None:
    repo = big_repo(tmp_path)
    head = start_commit(repo, None)
    assert head == fx.git(repo, "rev-parse", "HEAD")
    (repo / "pkg" / "huge.py").write_text("H = 1\n")  # uncommitted: not what a run starts from
    plan = Plan.model_validate(plan_data())
    fits = {f.task_id: f for f in first_prompts(plan, repo, head)}
    assert not fits["b"].fits
    assert fits["a"].fits
    assert fits["c"].fits
    assert fits["b"].smallest_budget > 8_000
    assert all(f.first_call > 0 for f in fits.values())
    # The working directory as it is (no commit) sees the small file.
    assert {f.task_id for f in first_prompts(plan, repo, None) if not f.fits} == set()
    # .env is committed and in c's read scope, yet never exported nor shown.
    assert all(".env" not in c.path for f in fits.values() for c in f.files)
    with scope_snapshot(repo, head, Scope(["pkg/", ".env", "README.md"])) as snap:
        exported = sorted(p.relative_to(snap).as_posix() for p in snap.rglob("*") if p.is_file())
        assert ".env" not in exported
        assert "README.md" in exported
        assert (snap / "pkg" / "huge.py").stat().st_size > 100_000
    # A base the repository does not have falls back to HEAD; a subdirectory has no commit.
    assert start_commit(repo, "no-such-ref") == head
    assert start_commit(repo / "pkg", None) is None


def test_execute_refuses_before_any_node_starts(tmp_path: Path) -> None:
    repo = big_repo(tmp_path)
    before = fx.checkout_fingerprint(repo)
    script = fx.script()
    plan_path, script_path = fx.write_inputs(tmp_path, plan_data(), script)
    args = ["execute", str(plan_path), "--repo", str(repo), "--script", str(script_path)]
    result = runner.invoke(app, args)
    assert result.exit_code == 1
    assert "the plan cannot start: node b: its essential first prompt needs" in result.stderr
    assert "Traceback" not in result.output
    # Nothing ran: no run, no manifest, no branch; the checkout is untouched.
    assert not (repo / ".anti-sprawl" / "runs").exists()
    assert "anti-sprawl/demo" not in fx.git(repo, "branch", "--list")
    assert fx.checkout_fingerprint(repo) == before


def test_a_node_on_a_25k_token_module_completes_under_a_24k_cap(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path)
    text = big_module()
    (repo / "pkg" / "core.py").write_text(text)
    commit_all(repo, "a 3,000-line module")
    lines = text.splitlines()
    target = lines.index("    def step_7_3(self, record: dict, limit: int = 3) -> list:") + 1
    old = "            value = record.get('k3', index) * 8\n"
    data = fx.plan()
    data["tasks"] = [
        fx.node(
            "a",
            [],
            "pkg/core.py",
            "",
            goal="Make Handler7.step_7_3 treat None as 0.",
            read_scope=["pkg/base.py"],
            token_budget=24_000,
            max_tool_calls=8,
        )
    ]
    turns = [
        {
            "tool": "read_file",
            "args": {"path": "pkg/core.py", "start_line": target, "end_line": target + 8},
        },
        {
            "tool": "edit_file",
            "args": {"path": "pkg/core.py", "old": old, "new": old.replace("* 8", "* 8 or 0")},
        },
        {"tool": "run_tests", "args": {}},
        {
            "tool": "read_file",
            "args": {"path": "pkg/core.py", "start_line": target, "end_line": target + 8},
        },
        {"tool": "run_tests", "args": {}},
        {"tool": "finish", "args": {"summary": "step_7_3 treats None as 0"}},
    ]
    plan_path, script_path = fx.write_inputs(tmp_path, data, {"workers": {"a": turns}})
    args = ["execute", str(plan_path), "--repo", str(repo), "--script", str(script_path), "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    state = json.loads(result.stdout)
    assert state["tasks"]["a"]["status"] == "succeeded"
    assert "* 8 or 0" in fx.git(repo, "show", "anti-sprawl/demo:pkg/core.py")
    manifests = sorted(
        (repo / ".anti-sprawl" / "runs" / state["run_id"] / "manifests" / "a").glob("*.json")
    )
    assert len(manifests) >= 6
    docs = [json.loads(p.read_text()) for p in manifests]
    assert all(d["total_tokens"] <= 24_000 for d in docs)
    [core] = [c for c in docs[0]["choices"] if c["path"] == "pkg/core.py"]
    assert core["form"] == "region"
    assert core["whole_tokens"] > 24_000


def test_the_shared_start_view_gives_every_node_the_prompt_its_own_firewall_gives(
    tmp_path: Path,
) -> None:
    """Issue 29 item 3: one view of the commit for all nodes, read from git into memory, gives
    the same prompts as one firewall per node over the exported files (files, forms, refusals,
    essentials), and the split first-call count is exact."""
    from anti_sprawl.context.assemble import assemble_worker_prompt
    from anti_sprawl.context.commit_files import read_commit_files
    from anti_sprawl.context.essentials import _first_call
    from anti_sprawl.context.start_view import StartView
    from anti_sprawl.fs.firewall import Firewall
    from anti_sprawl.providers.base import ModelRequest, UserMessage, request_text
    from anti_sprawl.tokens import count_tokens

    repo = big_repo(tmp_path)
    (repo / "pkg" / "blob.bin").write_bytes(b"\x00\x01binary\x00" * 50)  # refused: unreadable
    (repo / "pkg" / "latin.py").write_bytes("X = 'caf\xe9'\n".encode("latin-1"))  # unreadable
    (repo / "pkg" / "crlf.py").write_bytes(b"import os\r\n\r\ndef f(x):\r\n    return x\r\n")
    (repo / "pkg" / "back\\slash.py").write_text("Y = 2\n")  # a name no read serves: denied
    (repo / "pkg" / "server.key").write_text("KEY\n")  # a denied name: never listed
    commit_all(repo, "files a read refuses or reshapes")
    plan = Plan.model_validate(plan_data())
    head = start_commit(repo, None)
    assert head is not None
    scopes = [Scope([*t.read_scope, *t.write_scope]) for t in plan.tasks]
    everything = Scope([e for t in plan.tasks for e in (*t.read_scope, *t.write_scope)])
    heads: dict[str, tuple[str, int]] = {}
    files = read_commit_files(repo, head, scopes)
    assert "pkg/blob.bin" in files.paths
    with StartView(files) as view, scope_snapshot(repo, head, everything) as root:
        for node in plan.tasks:
            # a node's files: those its scope matched when the commit was read, less what a
            # listing hides, exactly what testing every listed file with the scope gives
            scope = Scope([*node.read_scope, *node.write_scope])
            assert scope.entries in files.matches
            listed = [p for p in view._index.files if scope.matches(p)]
            assert view._matching(scope) == listed
            shared = assemble_worker_prompt(
                plan=plan, node=node, upstream=(), view=view, check_fit=False
            )
            with Firewall(root, node.read_scope, node.write_scope, durable=False) as fw:
                own = assemble_worker_prompt(
                    plan=plan, node=node, upstream=(), firewall=fw, check_fit=False
                )
            assert shared.first_user_message == own.first_user_message
            assert shared.choices == own.choices
            assert shared.dropped == own.dropped
            assert shared.essentials == own.essentials
            assert shared.manifest_items == own.manifest_items
            split = _first_call(shared, heads)
            whole = count_tokens(
                request_text(
                    ModelRequest(
                        system=shared.system,
                        tools=shared.tools,
                        messages=[UserMessage(content=shared.first_user_message)],
                    )
                )
            )
            assert split == whole == _first_call(shared)
        assert heads, "the head count was cached (the split applied)"
        assert not any(view.root.iterdir()), "the view wrote nothing to disk"
    reasons = {c.path: c.reason for c in own.choices}
    assert reasons["pkg/blob.bin"] == "unreadable"
    assert reasons["pkg/latin.py"] == "unreadable"
    assert reasons["pkg/back\\slash.py"] == "denied"
    assert "pkg/server.key" not in reasons
    assert "pkg/crlf.py" in reasons
    assert "\r" not in own.first_user_message


def chain_plan(tmp_path: Path, n: int) -> tuple[Path, Path, dict[str, str]]:
    """A repository of ``n`` modules and a plan whose node ``i`` writes module ``i`` and
    reads ``shared/`` and module ``i - 1`` (texts no earlier test parsed: the parse cache
    lives as long as the process)."""
    stamp = tmp_path.name
    files = {"shared/base.py": f'"""{stamp}"""\n\n\ndef helper(x):\n    return x + 1\n'}
    for i in range(n):
        files[f"pkg/mod_{i}.py"] = (
            f'"""{stamp} {i}"""\nfrom shared.base import helper\n\n\n'
            f"class C{i}:\n    def m(self, a):\n        return helper(a) + {i}\n"
        )
    repo = fx.make_repo(tmp_path, files)
    tasks = [
        fx.node(
            f"t{i}",
            [f"t{i - 1}"] if i else [],
            f"pkg/mod_{i}.py",
            "",
            read_scope=["shared/", *([f"pkg/mod_{i - 1}.py"] if i else [])],
        )
        for i in range(n)
    ]
    plan_path, _ = fx.write_inputs(tmp_path, fx.plan(tasks=tasks), {"workers": {}})
    return repo, plan_path, files


def test_a_plan_of_many_nodes_parses_each_python_file_once(tmp_path: Path) -> None:
    """Issue 29 item 3: validate --repo parses each module once for its reference warnings
    and for every node's outline, references and imports (``outline.parsed``'s count)."""
    from anti_sprawl.outline.parsed import parse_count

    repo, plan_path, files = chain_plan(tmp_path, 30)
    before = parse_count()
    args = ["validate", str(plan_path), "--repo", str(repo), "--no-baseline"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "first prompts at" in result.output
    assert parse_count() - before == len(files)  # 31 modules for 30 nodes, each parsed once


def test_a_large_plan_tables_the_nodes_nearest_their_budget_and_json_lists_all(
    tmp_path: Path,
) -> None:
    """Past ``TABLE_ROWS`` nodes the first-prompt table shows every node that cannot start
    and then the tightest, one line says how many more fit, and --json lists every node."""
    from anti_sprawl.context.essentials import TABLE_ROWS

    n = TABLE_ROWS + 5
    repo, plan_path, _ = chain_plan(tmp_path, n)
    data = yaml.safe_load(plan_path.read_text())
    data["tasks"][7]["token_budget"] = 1_000  # cannot start
    data["tasks"][9]["token_budget"] = 9_000  # fits, with the least room of those that do
    plan_path.write_text(yaml.safe_dump(data))
    args = ["validate", str(plan_path), "--repo", str(repo), "--no-baseline"]
    result = runner.invoke(app, [*args], env={"COLUMNS": "120"})
    assert result.exit_code == 1, result.output
    rows = [line.split("│")[1].strip() for line in result.output.splitlines() if "│ t" in line]
    assert len(rows) == TABLE_ROWS
    assert rows == sorted(rows, key=lambda task: int(task[1:]))  # in plan order
    assert {"t7", "t9"} <= set(rows)
    assert f"the {TABLE_ROWS} of {n} nodes nearest their budget" in result.output
    assert f"{n - TABLE_ROWS} more nodes fit, each with at least" in result.output
    doc = json.loads(runner.invoke(app, [*args, "--json"]).stdout)
    listed = {row["task_id"]: row for row in doc["first_prompts"]}
    assert len(listed) == n
    assert (listed["t7"]["fits"], listed["t9"]["fits"]) == (False, True)
    assert listed["t7"]["smallest_budget"] > 1_000
    assert listed["t9"]["token_budget"] == 9_000
    assert sum(not row["fits"] for row in listed.values()) == 1


def test_pieces_joined_across_an_unsafe_boundary_are_counted_exactly() -> None:
    """The first call's split count (issue 29, item 3): an item followed by a section header
    (which opens with a blank line) is counted as the item's own count less its last lines'
    plus those lines with the header (itself split at its first safe join); exact on real
    blocks, briefs, every header and headers whose first safe join comes late or never."""
    from anti_sprawl.context.essentials import _run_tokens
    from anti_sprawl.context.sections import SECTION_HEADERS, render_brief
    from anti_sprawl.tokens import count_tokens
    from anti_sprawl.trust import wrap_data

    root = Path(__file__).resolve().parent.parent
    sources = sorted((root / "anti_sprawl" / "context").glob("*.py"))
    plan = Plan.model_validate(plan_data())
    firsts = [wrap_data("file", p.name, p.read_text()) for p in sources]
    firsts += [render_brief(plan, t) for t in plan.tasks]
    firsts += ["no newline at all", "ends with spaces   \n", "é\n\nü  \n", "a\n b\n\tc\n"]
    headers = [*SECTION_HEADERS.values(), "\n", "  x\n", "\n\nX y\n", "x.\n é\n", "a\n"]
    headers += ["\n# h\n  indented\n\tz\nZ\n", "\n\n\n\n\nlate\n", "1\n2\n3\n4\n5\n"]
    for first in firsts:
        for header in headers:
            run = [(first, count_tokens(first)), (header, count_tokens(header))]
            assert _run_tokens(run) == count_tokens(first + header), (first[-40:], header)


def test_the_start_view_shows_the_files_a_listing_shows() -> None:
    """The start view judges each directory once and each name by itself (issue 29, item 3):
    it keeps exactly the paths no prefix of which the deny rules refuse, as a file or as a
    directory, on names built from secret, internal and ordinary parts."""
    import itertools

    from anti_sprawl.context.start_view import _visible
    from anti_sprawl.fs.deny_rules import DEFAULT_ALLOW, DEFAULT_DENY, DenyRules

    parts = [".env", ".git", ".gitmodules", "id_rsa", ".ssh", "A.PEM", ".env.example", "a", "b.py"]
    paths = ["/".join(p) for n in (1, 2, 3) for p in itertools.product(parts, repeat=n)]
    rules = DenyRules(DEFAULT_DENY, DEFAULT_ALLOW)

    def listed(path: str) -> bool:
        prefixes = ["/".join(path.split("/")[:i]) for i in range(1, path.count("/") + 2)]
        return not any(rules.reason(p) or rules.reason(p, True) for p in prefixes)

    shown = _visible(paths, DenyRules(DEFAULT_DENY, DEFAULT_ALLOW))
    assert shown == [p for p in paths if listed(p)]
    assert {"a/b.py", ".env.example"} <= set(shown)
    assert "a/.ssh/b.py" not in shown


SAMPLE_DIR = Path(__file__).resolve().parent.parent / "tasks"


def _benchmark_shaped(root: Path, n: int) -> tuple[Path, Plan]:
    """A repository and plan shaped as benchmarks/cli_scale.py's: node ``i`` writes its module
    and test and reads ``shared/`` and its dependencies' modules, which use a shared helper."""
    helpers = "".join(
        f"def helper_{k}(x):\n    '''Add {k}.'''\n    return x + {k}\n\n" for k in range(40)
    )
    files = {"shared/base.py": helpers}
    for i in range(n):
        body = "".join(
            f"class C{k}:\n    def m(self, a):\n        return helper_1(a) + {k} * {i}\n\n"
            for k in range(3 + i % 4)
        )
        files[f"pkg{i % 5}/mod_{i}.py"] = f"from shared.base import helper_1\n\n{body}"
    tasks = []
    for i in range(n):
        deps = [f"t{d}" for d in sorted({i // 2, i // 3}) if d < i]
        tasks.append(
            {
                "task_id": f"t{i}",
                "name": f"node {i}",
                "goal": "generated",
                "dependencies": deps,
                "read_scope": ["shared/", *(f"pkg{int(d[1:]) % 5}/mod_{d[1:]}.py" for d in deps)],
                "write_scope": [f"pkg{i % 5}/mod_{i}.py", f"tests/pkg{i % 5}/test_mod_{i}.py"],
                "token_budget": 40_000,
            }
        )
    plan = {"plan_id": "bench", "requirement": "benchmark", "tasks": tasks}
    return fx.make_repo(root, files), Plan.model_validate(plan)


@pytest.mark.parametrize("shape", ["sample", "benchmark"])
def test_each_first_call_counted_by_pieces_is_its_whole_requests_count(
    tmp_path: Path, shape: str
) -> None:
    """What ``validate --repo`` reports against each budget is exact on real assembled
    prompts: the sample plan over the sample repository (tasks/sample, tasks/eval), and a
    plan shaped as the benchmark's. Every node's first call, counted by pieces
    (``essentials._first_call``, ``tokens.count_joined``: a piece's count kept by content),
    and every item of its prompt are what encoding the whole text afresh gives."""
    import shutil

    from anti_sprawl.context.commit_files import read_commit_files
    from anti_sprawl.context.essentials import UPSTREAM_ALLOWANCE, first_prompt
    from anti_sprawl.context.start_view import StartView
    from anti_sprawl.providers.base import ModelRequest, UserMessage, request_text
    from anti_sprawl.tokens import _encoding

    if shape == "sample":
        repo = tmp_path / "repo"
        shutil.copytree(SAMPLE_DIR / "eval" / "sample-event-bus" / "repo", repo)
        subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
        commit_all(repo, "the sample repository")
        plan = Plan.model_validate(
            yaml.safe_load((SAMPLE_DIR / "sample" / "plan.yaml").read_text())
        )
    else:
        repo, plan = _benchmark_shaped(tmp_path, 30)
    commit = start_commit(repo, None)
    assert commit is not None
    rows = {f.task_id: f for f in first_prompts(plan, repo, commit)}
    scopes = [Scope([*t.read_scope, *t.write_scope]) for t in plan.tasks]
    encode = _encoding().encode_ordinary
    shown = 0
    with StartView(read_commit_files(repo, commit, scopes)) as view:
        for node in plan.tasks:
            allowance = UPSTREAM_ALLOWANCE * len(node.dependencies)
            prompt = first_prompt(plan, node, repo, view)
            message = UserMessage(content=prompt.first_user_message)
            request = ModelRequest(system=prompt.system, tools=prompt.tools, messages=[message])
            assert rows[node.task_id].first_call == len(encode(request_text(request))) + allowance
            for text, item in zip(prompt.item_texts, prompt.manifest_items, strict=True):
                assert item.tokens == len(encode(text)), (node.task_id, item.item_id)
            shown += sum(c.form != "dropped" for c in prompt.choices)
    assert shown >= len(plan.tasks), "the prompts hold the repository's files"
