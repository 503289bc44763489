"""The plan commands through the real CLI (CliRunner), exit codes and --json shapes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from anti_sprawl.cli.app import app

from .conftest import node, plan_data

runner = CliRunner()
SAMPLE_PLAN = Path(__file__).parent.parent / "tasks" / "sample" / "plan.yaml"


def write(tmp_path: Path, data: object, name: str = "plan.yaml") -> Path:
    path = tmp_path / name
    text = json.dumps(data) if name.endswith(".json") else yaml.safe_dump(data)
    path.write_text(text)
    return path


def test_validate_valid_plan(tmp_path: Path) -> None:
    path = write(tmp_path, plan_data(node("a"), node("b", dependencies=["a"])))
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    assert "valid" in result.output


def test_validate_json_shape(tmp_path: Path) -> None:
    path = write(tmp_path, plan_data(node("a", dependencies=["a"])), "plan.json")
    result = runner.invoke(app, ["validate", str(path), "--json"])
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert set(doc) == {"valid", "errors", "warnings"}
    assert doc["valid"] is False
    assert set(doc["errors"][0]) == {"code", "message", "tasks", "paths"}


def test_validate_gives_back_the_cycle_collector(tmp_path: Path) -> None:
    """The command pauses the collector from the check to the printed report (cli/plans.py)
    and turns it back on, whether the plan is valid, invalid or its --repo is missing."""
    import gc

    good = write(tmp_path, plan_data(node("a")), "good.yaml")
    bad = write(tmp_path, plan_data(node("a", dependencies=["a"])), "bad.yaml")
    for args, code in [
        ([str(good), "--json"], 0),
        ([str(bad)], 1),
        ([str(good), "--repo", str(tmp_path / "missing")], 2),
    ]:
        assert gc.isenabled()
        assert runner.invoke(app, ["validate", *args]).exit_code == code
        assert gc.isenabled()


@pytest.mark.parametrize(
    "content",
    ["{{{ not yaml", "- just\n- a list\n", "", "\x00\x01binary", "plan_id: [unclosed"],
)
def test_validate_garbage_is_exit_2_without_traceback(tmp_path: Path, content: str) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text(content)
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.output.count("\n") <= 2


def test_validate_missing_file_and_bad_repo(tmp_path: Path) -> None:
    result = runner.invoke(app, ["validate", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 2
    assert "not found" in result.output
    path = write(tmp_path, plan_data(node("a")))
    result = runner.invoke(app, ["validate", str(path), "--repo", str(tmp_path / "missing")])
    assert result.exit_code == 2
    assert "repository not found" in result.output


def test_schema_is_json_schema() -> None:
    result = runner.invoke(app, ["schema"])
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert "tasks" in doc["properties"]
    assert "TaskNode" in doc["$defs"]


def test_show_formats(tmp_path: Path) -> None:
    data = plan_data(
        node("a"), node("b"), node("c", dependencies=["a", "b"], write_scope=["src/c.py"])
    )
    path = write(tmp_path, data)
    tree = runner.invoke(app, ["show", str(path)])
    assert tree.exit_code == 0
    assert "layer 0 (2 parallel)" in tree.output
    assert "layer 1 (1 single)" in tree.output
    mermaid = runner.invoke(app, ["show", str(path), "--format", "mermaid"])
    assert mermaid.stdout.startswith("flowchart TD")
    assert "n_a --> n_c" in mermaid.stdout
    dot = runner.invoke(app, ["show", str(path), "--format", "dot"])
    assert '"a" -> "c";' in dot.stdout
    js = json.loads(runner.invoke(app, ["show", str(path), "--format", "json"]).stdout)
    assert js["layers"] == [["a", "b"], ["c"]]


def test_show_refuses_cyclic_plan(tmp_path: Path) -> None:
    path = write(tmp_path, plan_data(node("a", dependencies=["b"]), node("b", dependencies=["a"])))
    result = runner.invoke(app, ["show", str(path)])
    assert result.exit_code == 2
    assert "cycle" in result.output


def test_mermaid_escapes_labels(tmp_path: Path) -> None:
    path = write(tmp_path, plan_data(node("a", name='say "hi" <b>')))
    out = runner.invoke(app, ["show", str(path), "-f", "mermaid"]).stdout
    assert '"hi"' not in out
    assert "#quot;hi#quot;" in out


@pytest.mark.skipif(not SAMPLE_PLAN.exists(), reason="sample plan not written yet")
def test_sample_plan_validates_against_sandbox() -> None:
    sandbox = SAMPLE_PLAN.parent.parent.parent / "sandbox"
    result = runner.invoke(app, ["validate", str(SAMPLE_PLAN), "--repo", str(sandbox)])
    assert result.exit_code == 0, result.output
