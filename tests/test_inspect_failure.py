"""``inspect RUN --task ID`` answers "why did it fail?" in one command, on a real run whose node
fails its tests twice: the failing attempt first (reason, test command and output tail, last
tool results, failure note, log paths that exist), then the earlier attempt; the manifests
behind ``--manifests``; every attempt's test logs kept apart (``tests-<attempt>-<n>.log``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from anti_sprawl.cli.app import app

from . import e2e_fixture as fx

pytestmark = pytest.mark.usefixtures("python_on_path")
runner = CliRunner()
FAILING = [
    sys.executable,
    "-c",
    "print('collected 2 items'); print('FAILED test_b.py::test_b - assert 2 == 3'); "
    "raise SystemExit(1)",
]


def test_inspect_shows_the_failing_attempt_first(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path)
    plan = fx.plan()
    plan["tasks"][1]["test_command"] = FAILING
    turns = fx.worker_turns("pkg/b.py", "B = 2\n")
    plan_path, script = fx.write_inputs(tmp_path, plan, fx.script(b=turns + turns))
    args = ["execute", str(plan_path), "--repo", str(repo), "--script", str(script), "--json"]
    # --no-baseline: the start commit fails the same test, which a baseline would excuse
    run_id = json.loads(runner.invoke(app, [*args, "--no-baseline"]).stdout)["run_id"]

    shown = runner.invoke(app, ["inspect", run_id, "--repo", str(repo), "--task", "b"])
    assert shown.exit_code == 0, shown.output
    text = shown.output
    assert text.startswith("b: failed (tests) after 2 attempts")
    at = text.index
    assert at("attempt 2: failed (tests)") < at("earlier: attempt 1: failed (tests)")
    assert "test command (exit 1): " in text
    assert "FAILED test_b.py::test_b - assert 2 == 3" in text
    assert "last tool results:" in text
    assert "run_tests" in text
    folder = repo / ".anti-sprawl" / "runs" / run_id / "artifacts" / "b"
    logs = [ln.split(": ", 1)[1] for ln in text.splitlines() if ln.startswith("  tests: ")]
    assert logs
    assert all(Path(p).is_file() for p in logs)
    assert all(Path(p).name.startswith("tests-2-") for p in logs)
    # both attempts' logs are there, apart
    names = sorted(p.name for p in folder.glob("tests-*.log"))
    assert {n.split("-")[1] for n in names} == {"1", "2"}, names
    assert (folder / "transcript.jsonl").is_file()
    assert (folder / "transcript-2.jsonl").is_file()
    assert "Context manifest" not in text
    assert "stable prefix" not in text

    # with no --task: the nodes that did not succeed, the failed one first
    every = runner.invoke(app, ["inspect", run_id, "--repo", str(repo)]).output
    heads = [ln.split(":")[0] for ln in every.splitlines() if not ln.startswith(" ")]
    assert heads == ["b", "c"]
    # the manifests, behind the flag the report names
    more = runner.invoke(
        app, ["inspect", run_id, "--repo", str(repo), "--task", "b", "--manifests"]
    )
    assert "stable prefix" in more.output
    as_json = json.loads(
        runner.invoke(app, ["inspect", run_id, "--repo", str(repo), "--task", "b", "--json"]).stdout
    )
    assert as_json[0]["attempt"]["attempt"] == 2
    assert as_json[0]["test_exit"] == 1
