"""The PR body a reviewer merges, rendered the way GitHub would (markdown-it, HTML allowed):
what changed and how it was tested first, bookkeeping folded in ``<details>``; model text
inert (no HTML, image, link, mention or closing keyword; no way to close its block) and the
body, the gh title and the journal's plan copy redacted like the commits."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt
from typer.testing import CliRunner

from anti_sprawl.cli.app import app

from . import e2e_fixture as fx
from .test_pr import bare_remote, executed, pr_md

pytestmark = pytest.mark.usefixtures("python_on_path")
runner = CliRunner()
SECRET = "s3cr3t-value-0123456789-abcdef"
GHP = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
HOSTILE_SUMMARY = "done. Fixes #1, thanks @octocat <!--"
HOSTILE_INTERFACES = "X = 1\n```\n![beacon](https://evil.invalid/b.png)\n<img src=x>\n"


def tokens(body: str) -> list[Any]:
    """Every token of the body as GitHub's renderer sees it, inline children included."""
    out = []
    for token in MarkdownIt("commonmark").enable("table").parse(body):
        out.append(token)
        out += token.children or []
    return out


def rendered(body: str) -> str:
    return str(MarkdownIt("commonmark").enable("table").render(body))


def test_a_full_runs_body_leads_with_what_a_reviewer_needs(tmp_path: Path) -> None:
    repo, run_id, status = executed(tmp_path)
    assert status == "succeeded"
    body = pr_md(repo, run_id).read_text()
    heads = [ln for ln in body.splitlines() if ln.startswith("#")]
    assert heads[0] == "# Add modules a, b and c"
    assert heads[1:3] == ["## How it was tested", "## Nodes"]
    assert body.index("## How it was tested") < body.index("<details>")
    tested = body.split("## How it was tested")[1].split("## Nodes")[0]
    # the integrated branch (run/integration.py), then each of the three nodes
    assert tested.count("**passed**") == 4
    assert "- Integration on the final branch at" in tested
    assert "- Baseline: " in tested
    assert "import pkg.base" in tested
    assert "| node | status | files changed | tests |" in body
    assert "not checked by anti-sprawl" in body  # summaries are the worker's claim
    details = body.split("<details>")[1]
    assert "$" in details
    assert "Sandbox:" in details
    assert "```mermaid" in details
    assert "Sandbox:" not in body.split("<details>")[0]


def test_a_partial_run_opens_as_a_draft(tmp_path: Path) -> None:
    unfinished = [{"tool": "read_file", "args": {"path": "pkg/base.py"}}]
    repo, run_id, status = executed(tmp_path, script=fx.script(a=unfinished))
    assert status == "failed"
    bare_remote(tmp_path, repo)
    doc = json.loads(
        runner.invoke(app, ["pr", run_id, "--repo", str(repo), "--allow-partial", "--json"]).stdout
    )
    assert "--draft" in doc["command"]
    assert "> **Partial run (failed)**" in pr_md(repo, run_id).read_text()


def test_model_text_is_inert_and_every_part_is_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEPLOY_TOKEN", SECRET)
    plan = fx.plan()
    plan["tasks"][0]["name"] = f"Write a {SECRET}"
    plan["tasks"][1]["goal"] = f"use {GHP}"
    turns_a = fx.worker_turns("pkg/a.py", "A = 1\n")
    turns_a[-1] = {
        "tool": "finish",
        "args": {"summary": HOSTILE_SUMMARY, "interfaces": HOSTILE_INTERFACES},
    }
    turns_b = fx.worker_turns("pkg/b.py", "B = 2\n")
    turns_b.insert(0, {"tool": "write_file", "args": {"path": "pkg/base.py", "content": "x"}})
    repo, run_id, status = executed(tmp_path, plan, fx.script(a=turns_a, b=turns_b))
    assert status == "succeeded"
    bare_remote(tmp_path, repo)
    doc = json.loads(runner.invoke(app, ["pr", run_id, "--repo", str(repo), "--json"]).stdout)
    body = pr_md(repo, run_id).read_text()
    journal = (repo / ".anti-sprawl" / "runs" / run_id / "run.json").read_text()
    for text in (body, journal, " ".join(doc["command"])):
        assert SECRET not in text
        assert GHP not in text
    kinds = {t.type for t in tokens(body)}
    assert not kinds & {"image", "link_open"}, kinds
    raw = [t.content.strip() for t in tokens(body) if t.type.startswith("html")]
    ours = "<details>\n<summary>Run bookkeeping: tokens, dollars, sandbox, DAG</summary>"
    assert raw == [ours, "</details>"], raw  # only the tool's own fold
    html = rendered(body)
    # the tool's own sections render whatever a summary holds: b's Blocked list, every heading
    assert "<p>Blocked:</p>" in html
    assert html.count("<h3>") == 3
    assert "<h2>Nodes</h2>" in html
    assert "<table>" in html
    assert "@octocat" not in body
    assert "#1," not in body
    assert "evil.invalid" in body  # shown, as text: never loaded


def test_commit_bodies_wrap_at_72_and_count_tokens_like_the_verdict(tmp_path: Path) -> None:
    long = " ".join(["the worker wrote a rather long summary line"] * 5)
    turns = fx.worker_turns("pkg/a.py", "A = 1\n")
    turns[-1] = {"tool": "finish", "args": {"summary": long, "interfaces": "A"}}
    repo, run_id, status = executed(tmp_path, script=fx.script(a=turns))
    assert status == "succeeded"
    state = json.loads((repo / ".anti-sprawl" / "runs" / run_id / "run.json").read_text())
    sha = state["tasks"]["a"]["commit"]
    message = fx.git(repo, "log", "-1", "--format=%B", sha)
    body = [ln for ln in message.splitlines() if not ln.startswith("Anti-Sprawl-")]
    assert all(len(line) <= 72 for line in body), message  # trailers stay one line each
    # git's stat first, then the summary, as the worker's claim (run/commit_text.py)
    assert message.split("\n\n")[1].startswith("Changed (git diff --stat):\n pkg/a.py | 1 +")
    claim = message.split("(its claim, not checked):\n", 1)[1]
    assert " ".join(claim.split()).startswith(long)
    tokens = state["tasks"]["a"]["total_tokens"]
    total = tokens["input_tokens"] + tokens["output_tokens"]
    assert f"Anti-Sprawl-Tokens: {total} over every attempt (attempt 1 of 2;" in message
