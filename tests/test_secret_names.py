"""No secret reaches the branch by any part of a commit (issue 25, docs/security.md P19).

A worker obeying an injection names files after a ``ghp_`` token and after the value of a
secret environment variable; the scan reads blob contents, every path component of what is
added (a rename is a delete and an add), symlink targets and the commit's metadata, locally
before the commit and centrally when a Dask worker's commit lands.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from anti_sprawl.git.landing_audit import ResultRefused, receive_checked
from anti_sprawl.git.secret_scan import message_secret, staged_secrets
from anti_sprawl.git.transport import make_bundle
from anti_sprawl.git.workspace import Workspace
from anti_sprawl.plan.model import Plan
from anti_sprawl.providers.redacting import RedactingProvider
from anti_sprawl.providers.scripted import Script, ScriptedProvider
from anti_sprawl.redact import Redactor, env_secrets
from anti_sprawl.run.node import ExecuteOptions
from anti_sprawl.run.runner import execute
from anti_sprawl.run.settings import RunSettings

from . import e2e_fixture as fx
from .test_landing_audit import _commit, _git, _refused, repos  # noqa: F401 (a fixture)

GH = "ghp_" + "Zq9" * 12  # a token shape
VALUE = "svc-value-7e1d9a40c3b2"  # the value of a secret-looking variable of the orchestrator
ENV = {"MY_SERVICE_TOKEN": VALUE}


def _write(path: str) -> dict[str, object]:
    return {"tool": "write_file", "args": {"path": path, "content": "X = 1\n"}}


def test_files_named_after_secrets_never_land(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path)
    plan = fx.plan(
        tasks=[
            fx.node("a", [], "pkg/", "", read_scope=[]),
            fx.node("b", [], "docs/", "", read_scope=[]),
            fx.node("c", [], "README.md", "", read_scope=[]),
        ]
    )
    finish = {"tool": "finish", "args": {"summary": "done"}}
    script = fx.script(
        a=[_write(f"pkg/{GH}.py"), finish],  # a token as a file name
        b=[_write(f"docs/{VALUE}/notes.md"), finish],  # a variable's value as a folder
        c=[_write("README.md"), finish],
    )
    redactor = Redactor(env_secrets(ENV))
    provider = ScriptedProvider(Script.from_data(script))
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    opts = ExecuteOptions(
        RedactingProvider(provider, redactor), RunSettings(command_env=env), redactor=redactor
    )
    state = execute(Plan.model_validate(plan), repo, opts)
    for task in ("a", "b"):
        record = state.tasks[task]
        assert (record.status, record.reason) == ("failed", "secret"), record
        assert "in the name" in record.message
    assert "github-token in the name pkg/[REDACTED:github-token].py" in state.tasks["a"].message
    assert "env in the name docs/[REDACTED:env]/notes.md" in state.tasks["b"].message
    assert state.tasks["c"].status == "succeeded"
    assert sorted(fx.task_trailers(repo)) == ["c"]
    names = fx.git(repo, "log", "--all", "--name-only", "--format=%B")
    assert GH not in names
    assert VALUE not in names
    for path in (repo / ".anti-sprawl").rglob("*"):
        assert GH not in path.name
        assert VALUE not in path.name
        if path.is_file():
            assert GH.encode() not in path.read_bytes(), path
            assert VALUE.encode() not in path.read_bytes(), path


def test_the_name_scan_covers_renames_symlinks_and_spares_what_was_there(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path)
    (repo / "pkg" / GH).mkdir()
    (repo / "pkg" / GH / "old.py").write_text("OLD = 1\n")
    fx.git(repo, "add", "-A")
    fx.git(repo, "-c", "user.name=t", "-c", "user.email=t@l", "commit", "-qm", "a folder")
    redactor = Redactor(env_secrets(ENV))
    with Workspace.create(repo, repo / ".anti-sprawl" / "worktrees", "scan", "HEAD") as ws:
        # a new file in a folder the base already had: not the node's doing
        (ws.path / "pkg" / GH / "new.py").write_text("NEW = 1\n")
        assert staged_secrets(ws, redactor) == ""
        # a rename into a secret name
        (ws.path / "pkg" / "util.py").rename(ws.path / "pkg" / f"{VALUE}.py")
        assert staged_secrets(ws, redactor) == "env in the name pkg/[REDACTED:env].py"
        (ws.path / "pkg" / f"{VALUE}.py").rename(ws.path / "pkg" / "util.py")
        # a symlink whose target names a token
        (ws.path / "pkg" / "link").symlink_to(f"../{GH}")
        assert staged_secrets(ws, redactor) == "github-token in pkg/link"


def test_commit_metadata_is_scanned() -> None:
    redactor = Redactor(env_secrets(ENV))
    assert message_secret(redactor, "Add a", {"Anti-Sprawl-Task": "a"}, ("u", "u@x")) == ""
    assert message_secret(redactor, "Add a", {"Anti-Sprawl-Task": GH}, None) == "github-token"
    assert message_secret(redactor, "Add a", {}, (VALUE, "u@x")) == "env"


@pytest.mark.parametrize("path", [f"pkg/{GH}.py", f"pkg/{GH}/a.py"], ids=["file", "folder"])
def test_the_central_re_audit_refuses_secret_names(repos: tuple, path: str) -> None:  # noqa: F811
    repo, worker, base = repos
    sha = _commit(worker, {path: "X = 1\n"})
    _refused(repo, make_bundle(worker, sha, [base])[0], base, "in the name", scope=["pkg/"])


def test_the_central_re_audit_refuses_a_secret_symlink_target(repos: tuple) -> None:  # noqa: F811
    repo, worker, base = repos
    (worker / "pkg" / "link").symlink_to(f"{GH}.py")
    _git(worker, "add", "-A")
    _git(worker, "commit", "-q", "-m", "link")
    sha = _git(worker, "rev-parse", "HEAD")
    _refused(repo, make_bundle(worker, sha, [base])[0], base, "github-token in pkg/link", ["pkg/"])


def test_the_central_re_audit_knows_the_central_variables(repos: tuple) -> None:  # noqa: F811
    repo, worker, base = repos
    sha = _commit(worker, {f"pkg/{VALUE}.py": "X = 1\n"})
    bundle = make_bundle(worker, sha, [base])[0]
    redactor = Redactor(env_secrets(ENV))
    with pytest.raises(ResultRefused, match="env in the name"):
        receive_checked(
            repo,
            bundle,
            base=base,
            write_scope=["pkg/"],
            redactor=redactor,
        )
    assert (
        "quarantine"
        not in subprocess.run(
            ["git", "-C", str(repo), "for-each-ref"], capture_output=True, text=True, check=True
        ).stdout
    )
