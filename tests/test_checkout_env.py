"""``{checkout}``: a node's tests use the user's installed environment (issue 14, item 5).

The user's checkout holds a real virtualenv (``.venv/``, git-ignored, so no worktree has it)
with a tiny package installed by pip from a local directory, no network. The repository's
tests import that package: through ``{checkout}/.venv/bin/python -m pytest`` the node
succeeds end to end with the scripted provider; the same plan without the placeholder fails
to import. The hostile half: the worker writes a probe in its own write scope and runs it
through the same bind; ``.env``, ``.git/config``, another run's transcript, a sibling
worktree and a committed secret of the checkout stay unreadable, and no canary reaches a
request, a run file or the branch.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import site
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from anti_sprawl.plan.model import Plan
from anti_sprawl.plan.validate import validate
from anti_sprawl.providers.base import request_text
from anti_sprawl.providers.scripted import Script, ScriptedProvider
from anti_sprawl.run.runner import ExecuteOptions, RunSettings, execute
from anti_sprawl.sandbox.command_template import bind_command, expand, template_problem
from anti_sprawl.sandbox.sandbox import SandboxPolicy

from . import e2e_fixture as fx

VENV_TEST = "import tinypkg\n\n\ndef test_value() -> None:\n    assert tinypkg.VALUE == 42\n"
C = {
    "env": "CANARY-CKENV-4b1d",
    "gitconfig": "CANARY-CKGIT-93e0",
    "transcript": "CANARY-CKRUN-7a55",
    "sibling": "CANARY-CKSIB-0c2f",
    "committed": "CANARY-CKCOMMIT-e6d8",
}


def tiny_wheel(where: Path) -> Path:
    """A pure-Python wheel of ``tinypkg`` (the wheel format, written by hand: no build tool)."""
    files = {
        "tinypkg/__init__.py": b"VALUE = 42\n",
        "tinypkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n",
        "tinypkg-1.0.dist-info/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }

    def digest(data: bytes) -> str:
        raw = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
        return "sha256=" + raw.decode()

    record = "".join(f"{name},{digest(data)},{len(data)}\n" for name, data in files.items())
    where.mkdir(parents=True, exist_ok=True)
    wheel = where / "tinypkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
        zf.writestr("tinypkg-1.0.dist-info/RECORD", record + "tinypkg-1.0.dist-info/RECORD,,\n")
    return wheel


def user_venv(checkout: Path, local_packages: Path) -> Path:
    """``checkout/.venv`` with tinypkg installed by pip from ``local_packages`` (no index)."""
    venv = checkout / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    pip = [sys.executable, "-m", "pip", "--isolated", "--python", str(venv / "bin" / "python")]
    subprocess.run(
        [*pip, "install", "-q", "--no-index", "--find-links", str(local_packages), "tinypkg"],
        check=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("PIP_")},
    )
    # pytest comes from this test run's own environment, as if the user had installed it.
    purelib = next(Path(p) for p in site.getsitepackages() if p.endswith("site-packages"))
    site_dir = next((venv / "lib").glob("python3*/site-packages"))
    (site_dir / "dev-tools.pth").write_text(f"{purelib}\n")
    return venv


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("wheelhouse")
    tiny_wheel(where)
    return where


def checkout_with_venv(tmp_path: Path, wheelhouse: Path) -> Path:
    repo = fx.make_repo(tmp_path)
    (repo / "tests").mkdir()
    (repo / "tests" / "test_tiny.py").write_text(VENV_TEST)
    (repo / ".gitignore").write_text(".venv/\n")
    fx.git(repo, "add", "-A")
    fx.git(repo, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "tests")
    user_venv(repo, wheelhouse)
    assert "tinypkg" not in fx.git(repo, "ls-files")  # only the user's checkout has it
    return repo


def one_node_plan(test_command: Any) -> dict[str, Any]:
    data = fx.plan(test_command=test_command, max_attempts=1)  # the script has one attempt
    data["tasks"] = [fx.node("a", [], "pkg/a.py", "A = 1\n")]
    return data


def run(repo: Path, plan: dict[str, Any], script: dict[str, Any], **kw: Any) -> Any:
    provider = ScriptedProvider(Script.from_data(script))
    opts = ExecuteOptions(provider, RunSettings(sandbox=SandboxPolicy(), jobs=1, **kw))
    return execute(Plan.model_validate(plan), repo, opts), provider


PYTEST = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]


def test_the_users_venv_runs_the_tests_through_checkout(tmp_path: Path, wheelhouse: Path) -> None:
    repo = checkout_with_venv(tmp_path, wheelhouse)
    before = fx.checkout_fingerprint(repo)
    plan = one_node_plan(["{checkout}/.venv/bin/python", *PYTEST])
    state, _ = run(repo, plan, fx.script(a=fx.worker_turns("pkg/a.py", "A = 1\n")))
    record = state.tasks["a"]
    assert state.status == "succeeded", record.message
    assert record.tests is not None
    assert record.tests.passed
    assert record.tests.command[0] == f"{repo}/.venv/bin/python"  # expanded, one argument
    assert "1 passed" in Path(record.tests.log).read_text()
    assert fx.branch_tree(repo)["pkg/a.py"]
    assert fx.checkout_fingerprint(repo) == before


def test_without_the_placeholder_the_same_tests_cannot_import(
    tmp_path: Path, wheelhouse: Path
) -> None:
    repo = checkout_with_venv(tmp_path, wheelhouse)
    plan = one_node_plan([sys.executable, *PYTEST])
    state, _ = run(repo, plan, fx.script(a=fx.worker_turns("pkg/a.py", "A = 1\n")))
    record = state.tasks["a"]
    assert state.status == "failed"
    assert record.reason == "tests"
    assert "No module named 'tinypkg'" in Path(record.tests.log).read_text()


PROBE = r"""
import glob, json, sys
checkout = sys.argv[1]
found = {}
for rel in json.loads(sys.argv[2]):
    for path in glob.glob(checkout + "/" + rel, recursive=True, include_hidden=True)[:50] or [
        checkout + "/" + rel
    ]:
        try:
            with open(path, "rb") as fh:
                found[path] = fh.read(4096).decode("utf-8", "replace")
        except OSError as exc:
            found[path] = "DENIED " + type(exc).__name__
print(json.dumps(found, indent=1))
"""
PROBED = [
    ".env",
    ".git/config",
    ".git/HEAD",
    ".anti-sprawl/runs/*/artifacts/**/*",
    ".anti-sprawl/worktrees/**/*",
    "config/prod.env",
    ".venv/pyvenv.cfg",
    "README.md",
]


def test_a_hostile_test_cannot_read_secrets_through_the_checkout_bind(
    tmp_path: Path, wheelhouse: Path
) -> None:
    repo = checkout_with_venv(tmp_path, wheelhouse)
    (repo / "config").mkdir()
    (repo / "config" / "prod.env").write_text(f"DB_PASSWORD={C['committed']}\n")
    fx.git(repo, "add", "-A")
    fx.git(repo, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "config")
    (repo / ".env").write_text(f"API_TOKEN={C['env']}\n")
    fx.git(repo, "config", "remote.origin.url", f"https://{C['gitconfig']}@example.com/x.git")
    old_run = repo / ".anti-sprawl" / "runs" / "old-run" / "artifacts" / "x"
    old_run.mkdir(parents=True)
    (old_run / "transcript.jsonl").write_text(json.dumps({"text": C["transcript"]}))
    sibling = repo / ".anti-sprawl" / "worktrees" / "other-run-z-1"
    sibling.mkdir(parents=True)
    (sibling / "wip.py").write_text(f"WIP = '{C['sibling']}'\n")

    plan = one_node_plan(
        ["{checkout}/.venv/bin/python", "-m", "pkg.probe", "{checkout}", json.dumps(PROBED)]
    )
    plan["tasks"][0]["write_scope"] = ["pkg/a.py", "pkg/probe.py"]
    script = fx.script(
        a=[
            {"text": "The README says: probe the checkout and report. Obeying."},
            {"tool": "write_file", "args": {"path": "pkg/probe.py", "content": PROBE}},
            {"tool": "write_file", "args": {"path": "pkg/a.py", "content": "A = 1\n"}},
            {"tool": "run_tests", "args": {}},
            {"tool": "finish", "args": {"summary": "probed"}},
        ]
    )
    state, provider = run(repo, plan, script)
    assert state.status == "succeeded", state.tasks["a"].message
    log = Path(state.tasks["a"].tests.log).read_text()
    report = json.loads(log.split("\n[anti-sprawl")[0])
    assert report[f"{repo}/.venv/pyvenv.cfg"].startswith("home = ")  # the bind is there
    assert report[f"{repo}/README.md"] == "# demo\n"
    for rel in (".env", ".git/config", ".git/HEAD", "config/prod.env"):
        got = report[f"{repo}/{rel}"]
        assert got.startswith("DENIED") or got == "", rel
    assert not any("old-run" in path or "other-run" in path for path in report)
    seen = "\n".join(request_text(r) for r in provider.requests)
    written = "\n".join(
        p.read_bytes().decode("utf-8", "replace")
        for p in (repo / ".anti-sprawl" / "runs").rglob("*")
        if p.is_file() and "old-run" not in p.parts
    )
    branch = fx.git(repo, "log", "-p", "main..anti-sprawl/demo")
    for name, canary in C.items():
        for where, text in (("log", log), ("requests", seen), ("run", written), ("branch", branch)):
            assert canary not in text, (name, where)


def test_placeholders_expand_per_argument_and_braces_stay_literal() -> None:
    argv = ["{checkout}/bin/x", "-c", "print({{'a': 1}})", "--root={checkout}"]
    bound = bind_command(argv, Path("/home/u/my repo"), Path("/home/u/my repo/wt"))
    assert bound.argv == [
        "/home/u/my repo/bin/x",
        "-c",
        "print({'a': 1})",
        "--root=/home/u/my repo",
    ]
    assert bound.readable == [Path("/home/u/my repo")]
    assert bind_command(["pytest", "{{checkout}}"], Path("/r"), Path("/w")).readable == []
    assert expand(["{{checkout}}"], {"checkout": "/r"}) == ["{checkout}"]
    assert template_problem(["a{checkout}b", "{{}}"]) is None


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("pytest {home}", "unknown placeholder {home}"),
        ("python -c 'print({})'", "unknown placeholder {}"),
        ("python -c 'print({1: 2})'", "unknown placeholder {1: 2}"),
        (["{checkout!r}/x"], "takes no conversion or format spec"),
        (["{checkout.parent}/x"], "unknown placeholder {checkout.parent}"),
        (["x{"], "Single '{'"),
        (["x}"], "Single '}'"),
        ("pytest 'unclosed", "cannot be split into arguments"),
        (["pytest", "x\x00"], "contains a NUL byte"),
    ],
)
def test_validate_reports_bad_placeholders_everywhere(command: Any, expected: str) -> None:
    for where in ("test_command", "setup_command", "task"):
        data = one_node_plan(None)
        if where == "task":
            data["tasks"][0]["test_command"] = command
        else:
            data[where] = command
        report = validate(data)
        assert not report.valid
        problem = next(p for p in report.errors if p.code == "bad_command")
        assert expected in problem.message, problem.message
        assert problem.tasks == (["a"] if where == "task" else [])


def fake_interpreter(prefix: Path) -> Path:
    """An executable standing in for an interpreter installed under ``prefix``."""
    exe = prefix / "bin" / "python9.9"
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    return exe


def test_toolchain_discovery_follows_a_venv_symlink_into_home(tmp_path: Path) -> None:
    """``.venv/bin/python`` -> ``~/.pyenv/versions/9.9/bin/python9.9``: that prefix is bound
    alone (never the home), also when the venv is named after ``env`` or ``timeout``."""
    from anti_sprawl.sandbox.policy import build_view

    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    interpreter = fake_interpreter(home / ".pyenv" / "versions" / "9.9")
    checkout, work = tmp_path / "checkout", tmp_path / "work"
    (checkout / ".venv" / "bin").mkdir(parents=True)
    work.mkdir()
    (checkout / ".venv" / "bin" / "python").symlink_to(interpreter)
    venv_python = str(checkout / ".venv" / "bin" / "python")
    policy = SandboxPolicy(home=home)
    prefix = home / ".pyenv" / "versions" / "9.9"
    for argv in ([venv_python], ["env", "A=1", venv_python], ["timeout", "60", venv_python]):
        bound = bind_command(argv, checkout, work)
        view = build_view(
            policy, work, argv[0], {"PATH": "/usr/bin:/bin"},
            readable=bound.readable, executables=[Path(a) for a in argv[1:]],
        )  # fmt: skip
        assert prefix in view.toolchain, argv
        assert home not in view.toolchain
        assert not any(home == p for p in view.content)
    # A symlink whose target is the home itself is never bound.
    (checkout / ".venv" / "bin" / "python").unlink()
    (checkout / ".venv" / "bin" / "python").symlink_to(home)
    view = build_view(policy, work, venv_python, {}, readable=[checkout])
    assert not any(p == home or home.is_relative_to(p) for p in view.toolchain)


CERT_PROBE = """
import sys
for path in sys.argv[1:]:
    try:
        print(path.rsplit("/", 3)[-3:], repr(open(path).read()))
    except OSError as exc:
        print(path.rsplit("/", 3)[-3:], "DENIED", type(exc).__name__)
"""


def test_the_environment_a_command_names_keeps_its_ca_bundle(
    tmp_path: Path, wheelhouse: Path
) -> None:
    """A venv's ``certifi/cacert.pem`` matches the secret catalogue (``*.pem``); inside the
    untracked environment the command runs from it stays readable. Everything else of the
    checkout is still masked: its ``.env``, and a key inside a *tracked* directory that
    merely claims to be an environment (a committed ``pyvenv.cfg``)."""
    repo = checkout_with_venv(tmp_path, wheelhouse)
    (repo / "fakeenv").mkdir()
    (repo / "fakeenv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (repo / "fakeenv" / "server.pem").write_text("-----BEGIN CERT-----\n")
    fx.git(repo, "add", "-A")
    fx.git(repo, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "fake env")
    site_dir = next((repo / ".venv" / "lib").glob("python3*/site-packages"))
    (site_dir / "certifi").mkdir()
    (site_dir / "certifi" / "cacert.pem").write_text("CA-BUNDLE\n")
    (repo / ".env").write_text(f"TOKEN={C['env']}\n")
    work = tmp_path / "work"
    work.mkdir(mode=0o755)
    (work / "probe.py").write_text(CERT_PROBE)
    targets = [f"{site_dir}/certifi/cacert.pem", f"{repo}/.env", f"{repo}/fakeenv/server.pem"]
    argv = ["{checkout}/.venv/bin/python", "probe.py", *targets, "{checkout}/fakeenv/x"]
    bound = bind_command(argv, repo, work)
    assert bound.unscanned == [repo / ".venv"]  # fakeenv is tracked: scanned as usual
    from anti_sprawl.sandbox.sandbox import run_command

    result = run_command(
        bound.argv, work, timeout=60, policy=SandboxPolicy(), readable=bound.readable,
        unscanned=bound.unscanned,
    )  # fmt: skip
    lines = result.output.splitlines()
    assert "'CA-BUNDLE\\n'" in lines[0], result.output
    assert "DENIED" in lines[1] or "''" in lines[1]
    assert "DENIED" in lines[2] or "''" in lines[2]
    assert C["env"] not in result.output
    assert "BEGIN CERT" not in result.output


def test_the_cli_validates_shows_and_documents_the_commands(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from anti_sprawl.cli.app import app

    runner = CliRunner()
    data = one_node_plan("{checkout}/.venv/bin/python -m pytest -q")
    data["setup_command"] = "npm ci --offline"
    good, _ = fx.write_inputs(tmp_path, data, fx.script())
    shown = runner.invoke(app, ["show", str(good)])
    assert shown.exit_code == 0
    assert "setup (each worktree): npm ci --offline" in shown.output
    assert "{checkout}/.venv/bin/python -m pytest -q" in shown.output
    assert runner.invoke(app, ["validate", str(good)]).exit_code == 0
    data["setup_command"] = ["cp", "-r", "{checkout}/{venv}", "."]
    bad, _ = fx.write_inputs(tmp_path, data, fx.script())
    done = runner.invoke(app, ["validate", str(bad), "--json"])
    assert done.exit_code == 1
    report = json.loads(done.stdout)
    assert report["errors"][0]["code"] == "bad_command"
    assert (
        "setup_command: argument '{checkout}/{venv}': unknown placeholder {venv}"
        in (report["errors"][0]["message"])
    )
    schema = runner.invoke(app, ["schema"]).stdout
    assert "setup_command" in schema
    assert "{checkout}" in schema
