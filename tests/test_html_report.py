"""``anti-sprawl report RUN``: the self-contained HTML report of a real run, checked in a real
headless Chromium (tests/chromium.py): drawn (a screenshot that is not blank), the DAG there
with its nodes coloured and the critical path marked, no console error, no request leaving
the page, a model's ``<script>`` and ``<img onerror>`` kept as text, and a secret of the
environment redacted. Also: what the file holds without a browser (the CSP, every node's
scopes, attempts, tokens, diff, tests, blocked write, failure note, manifests and exact
requests), ``pr`` writing it beside PR.md, and the command's usage errors.

The run is made with the scripted provider on tests/e2e_fixture.py's repository: ``a`` lands
after a write outside its scope is blocked, and its summary carries the payloads; ``b`` fails
its tests twice; ``c`` is skipped.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from anti_sprawl.cli.app import app
from anti_sprawl.context.manifest import load_manifests
from anti_sprawl.context.requests import load_request
from anti_sprawl.git.layout import StateLayout
from anti_sprawl.plan.model import Plan
from anti_sprawl.providers.scripted import Script, ScriptedProvider
from anti_sprawl.run.runner import ExecuteOptions, RunSettings, execute

from . import e2e_fixture as fx
from .chromium import Page, find_chromium, png_pixels, screenshot

runner = CliRunner()
SECRET = "hunter2-report-secret-value-0123456789"
PAYLOAD = (
    "<script>document.title='pwned-script'</script>"
    "<img src=x onerror=\"document.title='pwned-img'\"> "
    f"\"quoted' & {SECRET}"
)
FAILING = [
    sys.executable,
    "-c",
    "print('collected 2 items'); print('FAILED test_b.py::test_b - assert 2 == 3'); "
    "raise SystemExit(1)",
]
BROWSER = find_chromium()
needs_browser = pytest.mark.skipif(
    BROWSER is None,
    reason="no chromium on PATH: install the Debian 'chromium' package (make sandbox-tools)",
)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A finished run (a: landed with a blocked write, b: failed twice, c: skipped) and its
    report written by the CLI with ``SECRET`` in the environment."""
    root = tmp_path_factory.mktemp("report")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PATH", f"{Path(sys.executable).parent}:/usr/bin:/bin")
        repo = fx.make_repo(root)
        plan = fx.plan()
        plan["tasks"][1]["test_command"] = FAILING
        a_turns = [
            {"tool": "read_file", "args": {"path": "pkg/base.py"}},
            {"tool": "write_file", "args": {"path": "pkg/util.py", "content": "X = 1\n"}},
            {"tool": "write_file", "args": {"path": "pkg/a.py", "content": "A = 1\n"}},
            {"tool": "run_tests", "args": {}},
            {"tool": "finish", "args": {"summary": PAYLOAD, "interfaces": "pkg/a.py: A"}},
        ]
        b_turns = fx.worker_turns("pkg/b.py", "B = 2\n")
        plan_path, script = fx.write_inputs(root, plan, fx.script(a=a_turns, b=b_turns + b_turns))
        args = ["execute", str(plan_path), "--repo", str(repo), "--script", str(script)]
        done = runner.invoke(app, [*args, "--json", "--no-baseline"])
        run_id = json.loads(done.stdout)["run_id"]
        mp.setenv("REPORT_TEST_API_KEY", SECRET)
        out = root / "report.html"
        made = runner.invoke(app, ["report", run_id, "--repo", str(repo), "-o", str(out)])
        assert made.exit_code == 0, made.output
        yield {"repo": repo, "run_id": run_id, "out": out, "html": out.read_text(), "made": made}


def test_the_file_holds_every_node_and_nothing_live(run: dict[str, Any]) -> None:
    text = run["html"]
    assert run["made"].stdout.strip() == f"report: {run['out']}"
    csp = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', text)
    assert csp is not None
    assert "default-src 'none'" in csp.group(1)
    assert "script-src" not in csp.group(1)  # nothing may run: default-src 'none' covers it
    assert "<script" not in text.lower()
    assert not re.search(r"(src|href)=\"(https?:)?//", text)
    # the payload is text, quotes included; the secret is gone
    assert "&lt;script&gt;document.title=&#x27;pwned-script&#x27;&lt;/script&gt;" in text
    assert "&lt;img src=x onerror=&quot;document.title=&#x27;pwned-img&#x27;&quot;&gt;" in text
    assert SECRET not in text
    assert "[REDACTED" in text
    # per node: sections, scopes, attempts, the blocked write, tests, failure note, diff
    for task in ("a", "b", "c"):
        assert f'id="node-{task}"' in text
    section = {t: _section(text, t) for t in ("a", "b", "c")}
    assert "pkg/base.py" in section["a"]
    assert "pkg/a.py" in section["a"]
    assert "pkg/util.py" in section["a"]
    assert "Blocked (1)" in section["a"]
    assert '<span class="add">+A = 1</span>' in section["a"]
    assert "git show " in section["a"]
    assert "FAILED test_b.py::test_b - assert 2 == 3" in section["b"]
    assert "Failure note (what the next attempt was told)" in section["b"]
    assert section["b"].count("<td>failed</td>") == 2  # both attempts, with their reason
    assert "No change landed." in section["b"]
    assert "skipped" in section["c"]
    assert "Context manifests (0 calls)" in section["c"]
    # tokens per call against the cap, and the manifests with their exact requests
    assert '<svg class="chart"' in section["a"]
    assert "cap 40,000/call" in section["a"]
    assert section["a"].count('<rect class="bar"') == len(a_turns_calls(run))
    assert section["a"].count('<details class="manifest">') == len(a_turns_calls(run))
    assert section["a"].count("<summary>the exact request</summary>") == len(a_turns_calls(run))
    assert "&quot;role&quot;: &quot;user&quot;" in section["a"]


def a_turns_calls(run: dict[str, Any]) -> list[Path]:
    folder = run["repo"] / ".anti-sprawl" / "runs" / run["run_id"] / "manifests" / "a"
    return sorted(folder.glob("*.json"))


def _section(text: str, task: str) -> str:
    start = text.index(f'<section class="node" id="node-{task}">')
    return text[start : text.index("</section>", start)]


@needs_browser
def test_a_screenshot_is_not_blank(run: dict[str, Any], tmp_path: Path) -> None:
    assert BROWSER is not None
    png = tmp_path / "shot.png"
    screenshot(BROWSER, run["out"].as_uri(), png)
    width, height, rows = png_pixels(png.read_bytes())
    assert (width, height) == (1200, 900)
    pixels = {row[i : i + 3] for row in rows[::4] for i in range(0, len(row), 12)}
    assert len(pixels) > 20, f"{len(pixels)} colours: the page looks blank"
    white = sum(row.count(b"\xff\xff\xff") for row in rows[::4])
    assert white < width * len(rows[::4]) * 0.98


@pytest.fixture(scope="module")
def page(run: dict[str, Any]) -> Iterator[Page]:
    if BROWSER is None:
        pytest.skip("no chromium on PATH: install the Debian 'chromium' package")
    opened = Page(BROWSER)
    try:
        opened.open(run["out"].as_uri())
        yield opened
    finally:
        opened.close()


@needs_browser
def test_the_dag_is_drawn_and_the_payload_stays_text(page: Page) -> None:
    title = page.evaluate("document.title")
    assert title.startswith("anti-sprawl run demo-")
    nodes = page.evaluate(
        "[...document.querySelectorAll('#dag a.node')].map(n => [n.dataset.task, "
        "n.dataset.status, n.classList.contains('critical'), "
        "getComputedStyle(n.querySelector('rect')).fill])"
    )
    by_task = {task: (status, critical, fill) for task, status, critical, fill in nodes}
    assert {t: s for t, (s, _, _) in by_task.items()} == {
        "a": "succeeded",
        "b": "failed",
        "c": "skipped",
    }
    assert len({fill for _, _, fill in by_task.values()}) == 3  # one colour per status
    assert by_task["c"][1]  # the last node is on the critical path
    assert page.evaluate("document.querySelectorAll('#dag line.edge').length") == 2
    assert page.evaluate("document.querySelector('#dag').getBoundingClientRect().width") > 300
    # nothing the model wrote became an element, nothing it wrote ran
    assert page.evaluate("document.querySelectorAll('script, img, iframe, object').length") == 0
    assert page.evaluate("document.body.innerText").count("document.title='pwned-script'") == 1
    assert "<img src=x onerror=" in page.evaluate("document.body.innerText")


@needs_browser
def test_no_console_error_and_no_request_leaves_the_page(page: Page, run: dict[str, Any]) -> None:
    # open every <details> (the exact requests too): still nothing loads, nothing complains
    page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true); 1")
    page.evaluate("new Promise(r => setTimeout(r, 500))")
    errors = [
        (m, p)
        for m, p in page.events
        if m in ("Runtime.exceptionThrown", "Runtime.consoleAPICalled")
        or (m == "Log.entryAdded" and p["entry"]["level"] in ("error", "warning"))
    ]
    assert errors == []
    requests = [p["request"]["url"] for m, p in page.events if m == "Network.requestWillBeSent"]
    assert requests == [run["out"].as_uri()]


def test_pr_writes_the_report_beside_its_body(run: dict[str, Any], tmp_path: Path) -> None:
    repo, run_id = run["repo"], run["run_id"]
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    fx.git(repo, "remote", "add", "origin", str(remote))
    done = runner.invoke(app, ["pr", run_id, "--repo", str(repo), "--allow-partial", "--json"])
    assert done.exit_code == 0, done.output
    outcome = json.loads(done.stdout)
    run_dir = repo / ".anti-sprawl" / "runs" / run_id
    assert outcome["report"] == str(run_dir / "report.html")
    assert (run_dir / "report.html").read_text().startswith("<!DOCTYPE html>")
    body = (run_dir / "PR.md").read_text()
    assert f".anti-sprawl/runs/{run_id}/report.html" in body


def test_usage_errors_are_one_line(run: dict[str, Any], tmp_path: Path) -> None:
    repo = str(run["repo"])
    for args, said in (
        (["report", "no-such-run", "--repo", repo], "no run 'no-such-run'"),
        (["report", run["run_id"], "--repo", repo, "-o", str(tmp_path)], "must name a file"),
        (
            ["report", run["run_id"], "--repo", repo, "-o", str(tmp_path / "x" / "r.html")],
            "no such directory",
        ),
    ):
        done = runner.invoke(app, args)
        assert done.exit_code == 2, done.output
        assert said in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
        assert "Traceback" not in done.output


def test_each_kept_request_is_the_one_the_provider_got(tmp_path: Path) -> None:
    """What "the exact request" shows is what the provider was handed, call by call; the
    parts a conversation repeats are stored once."""
    repo = fx.make_repo(tmp_path)
    provider = ScriptedProvider(Script.from_data(fx.script()))
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    plan = Plan.model_validate(fx.plan())
    result = execute(plan, repo, ExecuteOptions(provider, RunSettings(command_env=env)))
    assert result.status == "succeeded"
    paths = StateLayout(repo).run(result.run_id)
    got = {r.call_id: r.model_dump(mode="json") for r in provider.requests if r.task_id == "a"}
    manifests = load_manifests(paths.manifests, "a")
    assert len(manifests) == len(got) > 2
    for m in manifests:
        kept = load_request(paths.artifacts, "a", m.n)
        assert kept is not None
        sent = got[m.call_id]
        assert kept == {k: sent[k] for k in kept}
        assert set(sent) - set(kept) == {"task_id"}
    parts = list((paths.artifacts / "a").glob("part-*.json"))
    messages = sum(len(r["messages"]) for r in got.values())
    assert len(parts) < messages  # call n+1 repeats call n's messages: stored once
    assert load_request(paths.artifacts, "a", 999) is None


def test_open_hands_the_file_to_the_browser_only_when_asked(
    run: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    said = tmp_path / "browser-args"
    fake = tmp_path / "fake-browser"
    fake.write_text(f'#!/bin/sh\necho "$@" >> {said}\n')
    fake.chmod(0o755)
    monkeypatch.setenv("BROWSER", str(fake))  # webbrowser runs $BROWSER first
    out = tmp_path / "r.html"
    args = ["report", run["run_id"], "--repo", str(run["repo"]), "-o", str(out)]
    assert runner.invoke(app, args).exit_code == 0
    assert not said.exists()
    done = runner.invoke(app, [*args, "--open", "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout) == {"run_id": run["run_id"], "report": str(out)}
    assert said.read_text().split() == [out.resolve().as_uri()]
