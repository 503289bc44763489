"""Redaction on every way out, and the staged-blob pre-commit scan (issue 11, items 7, 8, 11).

The attacker is the model: its test prints tokens it assembles at run time (so no source file
holds them), its ``finish`` summary and notes carry a token and the user's API key, and it
writes secrets behind a NUL byte. The checks read every file under ``.anti-sprawl``, the whole
branch history, the CLI's stdout/stderr (verdict and ``--json``) and every recorded request.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from anti_sprawl.git.secret_scan import staged_secrets
from anti_sprawl.git.workspace import Workspace
from anti_sprawl.plan.model import Plan
from anti_sprawl.providers.base import request_text
from anti_sprawl.providers.redacting import RedactingProvider
from anti_sprawl.providers.scripted import Script, ScriptedProvider
from anti_sprawl.redact import Redactor
from anti_sprawl.run.runner import ExecuteOptions, RunSettings, execute

from . import e2e_fixture as fx

KEY = "CANARY-KEY-88d1f0c2e4"  # the user's API key, as the CLI's environment holds it
GH = "ghp_" + "Zq9" * 12  # a token shape
AWS = "AKIA" + "QWERTYUIOPASDFGH"
# The hostile test module builds the tokens at run time, so its source holds none of them.
LEAKY_MODULE = (
    "print('token:', 'gh' + 'p_' + 'Zq9' * 12)\n"
    "print('aws:', 'AK' + 'IA' + 'QWERTYUIOPASDFGH')\n"
    "A = 1\n"
)


def cli(tmp_path: Path, repo: Path, plan: dict[str, Any], script: dict[str, Any], *extra: str):
    plan_path, script_path = fx.write_inputs(tmp_path, plan, script)
    env = dict(
        os.environ, ANTHROPIC_API_KEY=KEY, PATH=f"{Path(sys.executable).parent}:/usr/bin:/bin"
    )
    args = [sys.executable, "-m", "anti_sprawl", "execute", str(plan_path), "--repo", str(repo)]
    return subprocess.run(
        [*args, "--script", str(script_path), *extra], env=env, capture_output=True, text=True
    )


def leaks(repo: Path, needles: list[str], *texts: str) -> list[str]:
    """Where any needle occurs: CLI output, files under .anti-sprawl, all of git's history."""
    found = []
    for needle in needles:
        for i, text in enumerate(texts):
            if needle in text:
                found.append(f"{needle} in output {i}")
        for path in (repo / ".anti-sprawl").rglob("*"):
            if path.is_file() and needle.encode() in path.read_bytes():
                found.append(f"{needle} in {path.relative_to(repo)}")
        if needle in fx.git(repo, "log", "-p", "--all", "--format=%H%n%B"):
            found.append(f"{needle} in git history")
    return found


def test_test_logs_summaries_and_commit_messages_are_redacted(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path)
    plan = fx.plan()
    plan["tasks"][0]["test_command"] = [sys.executable, "-c", "import pkg.a"]
    finish = {
        "summary": f"created pkg/a.py; the deploy token is {GH}",
        "notes": f"the orchestrator key is {KEY}",
        "interfaces": f"AWS={AWS}",
    }
    turns = fx.worker_turns("pkg/a.py", LEAKY_MODULE)
    turns[-1] = {"tool": "finish", "args": finish}
    done = cli(tmp_path, repo, plan, fx.script(a=turns), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    state = json.loads(done.stdout)
    record = state["tasks"]["a"]
    assert "[REDACTED:github-token]" in record["summary"]["summary"]
    assert "[REDACTED:env]" in record["summary"]["notes"]
    assert "[REDACTED:github-token]" in record["tests"]["tail"]
    log = Path(record["tests"]["log"])
    assert log.is_file()
    assert "[REDACTED:aws-access-key]" in log.read_text()
    message = fx.git(repo, "log", "-1", "--format=%B", "--grep=Anti-Sprawl-Task: a", "--all")
    assert "[REDACTED:github-token]" in message
    verdict = cli(tmp_path / "again", fx.make_repo(tmp_path / "again"), plan, fx.script(a=turns))
    assert verdict.returncode == 0, verdict.stdout + verdict.stderr
    assert leaks(repo, [GH, KEY, AWS], done.stdout, done.stderr) == []
    assert leaks(tmp_path / "again" / "repo", [GH, KEY, AWS], verdict.stdout, verdict.stderr) == []


def test_a_failed_node_keeps_no_secret_either(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path)
    plan = fx.plan()
    plan["tasks"][0]["test_command"] = [sys.executable, "-c", "import pkg.a; raise SystemExit(1)"]
    turns = fx.worker_turns("pkg/a.py", LEAKY_MODULE)
    turns[-1] = {"tool": "finish", "args": {"summary": f"it is broken, see {GH}"}}
    done = cli(tmp_path, repo, plan, fx.script(a=turns))
    assert done.returncode == 1
    assert "failed (tests)" in done.stdout
    assert leaks(repo, [GH, KEY, AWS], done.stdout, done.stderr) == []
    pr = next((repo / ".anti-sprawl" / "runs").glob("*/PR.md")).read_text()
    assert "[REDACTED:github-token]" in pr or GH not in pr


@pytest.mark.parametrize(
    "content",
    [
        f"A = 1\n# \x00 binary from here\nkey = '{AWS}'\n",
        "A = 1\n#" + "".join(f"{c}\x00" for c in AWS) + "\n",  # UTF-16LE-looking text
    ],
    ids=["nul-byte", "utf16"],
)
def test_a_nul_byte_does_not_hide_a_secret_from_the_commit_scan(
    tmp_path: Path, content: str
) -> None:
    repo = fx.make_repo(tmp_path)
    provider = ScriptedProvider(Script.from_data(fx.script(a=fx.worker_turns("pkg/a.py", content))))
    redactor = Redactor([KEY])
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    opts = ExecuteOptions(
        RedactingProvider(provider, redactor), RunSettings(command_env=env), redactor=redactor
    )
    state = execute(Plan.model_validate(fx.plan()), repo, opts)
    record = state.tasks["a"]
    assert (record.status, record.reason) == ("failed", "secret")
    assert "aws-access-key in pkg/a.py" in record.message
    assert state.tasks["c"].status == "skipped"
    assert sorted(fx.task_trailers(repo)) == ["b"]
    history = subprocess.run(
        ["git", "-C", str(repo), "log", "-p", "--all", "--binary"], capture_output=True, check=True
    ).stdout
    assert AWS.encode() not in history
    assert AWS.encode("utf-16-le") not in history
    for path in (repo / ".anti-sprawl").rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert AWS.encode() not in data, path
    sent = "\n".join(request_text(r) for r in provider.requests)
    assert AWS not in sent


def test_a_secret_already_in_the_file_is_not_blamed_on_the_node(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path)
    (repo / "pkg" / "settings.py").write_text(f"KEY = '{AWS}'\n")
    fx.git(repo, "add", "-A")
    fx.git(repo, "-c", "user.name=t", "-c", "user.email=t@l", "commit", "-qm", "settings")
    redactor = Redactor()
    with Workspace.create(repo, repo / ".anti-sprawl" / "worktrees", "scan", "HEAD") as ws:
        (ws.path / "pkg" / "settings.py").write_text(f"KEY = '{AWS}'\nDEBUG = False\n")
        assert staged_secrets(ws, redactor) == ""
        (ws.path / "pkg" / "new.bin").write_bytes(b"\x00\x01" + GH.encode() + b"\xff")
        assert staged_secrets(ws, redactor) == "github-token in pkg/new.bin"


def test_redacting_a_record_never_fails_on_a_length_limit() -> None:
    from anti_sprawl.agent.tools import FinishArgs
    from anti_sprawl.fs.firewall import Violation
    from anti_sprawl.run.result import TaskResult

    short_key = "k3y-9z8y"  # 8 characters; its placeholder is longer
    record = TaskResult(
        task_id="a",
        summary=FinishArgs(summary="x" * 3990 + " " + short_key),
        violations=[Violation(op="read", path=GH, reason="outside_scope")],
    )
    clean = Redactor([short_key]).model(record)
    assert clean.summary is not None
    assert clean.summary.summary.endswith("[REDACTED:env]")
    assert clean.violations[0].path == "[REDACTED:github-token]"
    assert record.summary is not None
    assert record.summary.summary.endswith(short_key)  # a copy
