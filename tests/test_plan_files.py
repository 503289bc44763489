"""Plan files a person edits by hand (issue 24, item 4): YAML errors point at file:line:column
and show the line; schema errors name the task and field as written, with "did you mean";
a written plan starts with what to review and the exact command to run next."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import yaml
from typer.testing import CliRunner

from anti_sprawl.cli.app import app

from . import e2e_fixture as fx

runner = CliRunner()

BROKEN_YAML = """\
plan_id: p
requirement: r
tasks:
  - task_id: a
    name: Add a: the module
    goal: g
"""

NEAR_MISSES = """\
plan_id: p
requirement: r
tasks:
  - task_id: docs
    name: Docs
    goal: Write the docs
    write_scope: [docs/]
  - task_id: api
    name: API
    goal: Add the API
    write_scope: [pkg/api.py]
    depends_on: [docs]
    token_budget: 40k
  - task_id: cli
    name: CLI
    goal: Add the CLI
    write_scope: [pkg/cli.py]
    dependencies: [doc]
"""


def test_a_yaml_error_names_file_line_column_and_shows_the_line(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path)
    before = fx.checkout_fingerprint(repo)
    path = tmp_path / "plan.yaml"
    path.write_text(BROKEN_YAML)
    expected = (
        f"anti-sprawl: error: cannot parse plan file {path}:5:16: mapping values are not "
        "allowed in this context; line 5 reads: '    name: Add a: the module'"
    )
    for args in (["validate", str(path)], ["execute", str(path), "--repo", str(repo)]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2
        assert result.stderr.strip() == expected
    assert fx.checkout_fingerprint(repo) == before
    assert not (repo / ".anti-sprawl").exists()


def test_schema_errors_name_the_task_and_field_with_did_you_mean(tmp_path: Path) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text(NEAR_MISSES)
    result = runner.invoke(app, ["validate", str(path), "--json"])
    assert result.exit_code == 1
    messages = sorted(e["message"] for e in json.loads(result.stdout)["errors"])
    assert messages == [
        "task 'api' field 'token_budget': '40k' is not an integer (did you mean 40000?)",
        "task 'api': unknown field 'depends_on' (did you mean 'dependencies'?)",
    ]
    fixed = NEAR_MISSES.replace("depends_on", "dependencies").replace("40k", "40000")
    path.write_text(fixed)
    result = runner.invoke(app, ["validate", str(path), "--json"])
    errors = json.loads(result.stdout)["errors"]
    assert [e["message"] for e in errors] == [
        "task 'cli' depends on unknown task 'doc' (did you mean 'docs'?)"
    ]
    assert errors[0]["tasks"] == ["cli", "doc"]


def test_a_written_plan_says_what_to_review_and_the_next_command(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path)
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({"plan": fx.plan()}))
    target = tmp_path / "out plan.yaml"  # a space: the printed command quotes it
    args = ["plan", "Add modules", "--repo", str(repo), "--script", str(script), "-o", str(target)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    command = shlex.join(["anti-sprawl", "execute", str(target), "--repo", str(repo), "--dry-run"])
    assert f"review it, then run: {command}" in " ".join(result.stdout.split())
    text = target.read_text()
    head = [line for line in text.splitlines() if line.startswith("#")]
    assert head[0] == "# Plan 'demo', written by 'anti-sprawl plan'. Review it before running it:"
    assert f"#   {command}" in head
    assert any("write_scope (the only files it may" in line for line in head)
    assert yaml.safe_load(text)["plan_id"] == "demo"  # still a plan file
    # The printed command is the one to run: it works as written (with a provider for it).
    dry = runner.invoke(app, [*shlex.split(command)[1:], "--script", str(script)])
    assert dry.exit_code == 0, dry.output
    as_json = runner.invoke(app, [*args, "--json"])
    assert json.loads(as_json.stdout)["next_command"] == command
