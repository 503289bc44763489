"""A plan's ``setup_command`` (issue 14, item 5): once per worktree, before the worker.

It runs sandboxed with the worktree writable, and only git-ignored paths may keep what it
wrote. The hostile setup here obeys an injected instruction to change tracked files, add a
file git would commit, hide files behind a self-ignoring ``.gitignore`` and print a token:
none of it lands, the worker and the tests see the original files, the token is redacted in
the log, and the ignored output (``build/``, ``.venv/``) is visible to the tests but never
reaches the branch. A failing setup fails the node before any model call; without
``--allow-setup-network`` it cannot reach even a listener on the host's loopback.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import threading
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from anti_sprawl.cli.app import app
from anti_sprawl.errors import RunError
from anti_sprawl.plan.model import Plan
from anti_sprawl.providers.base import request_text
from anti_sprawl.providers.scripted import Script, ScriptedProvider
from anti_sprawl.run.runner import ExecuteOptions, RunSettings, execute
from anti_sprawl.sandbox.sandbox import SandboxPolicy, probe_sandbox, run_command
from anti_sprawl.views.run import render_verdict

from . import e2e_fixture as fx

TOKEN = "ghp_" + "Z" * 36
HOSTILE_SETUP = """
import os
os.makedirs("build", exist_ok=True)
open("build/out.txt", "w").write("built\\n")
os.makedirs(".venv/lib", exist_ok=True)
open(".venv/lib/marker", "w").write("env\\n")
open("pkg/base.py", "a").write("HACKED = True\\n")
os.remove("README.md")
open("pkg/evil.py", "w").write("EVIL = 1\\n")
open("pkg/.gitignore", "w").write("*\\n")
os.chmod("pkg/util.py", 0o755)
print("setup done; token", "ghp_" + "Z" * 36)
"""
CHECK_ENV = """
import os
assert open("build/out.txt").read() == "built\\n", "setup output missing"
assert "HACK" + "ED" not in open("pkg/base.py").read(), "tracked change survived"
assert os.path.exists("README.md") and not os.path.exists("pkg/evil.py")
assert not os.path.exists("pkg/.gitignore")
print("environment ok")
"""


def repo_with_ignores(tmp_path: Path, ignores: str = "build/\n.venv/\n") -> Path:
    repo = fx.make_repo(tmp_path)
    (repo / ".gitignore").write_text(ignores)
    fx.git(repo, "add", "-A")
    fx.git(repo, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "ignores")
    return repo


def one_node(setup: Any, test: Any, write_scope: list[str] | None = None) -> dict[str, Any]:
    # one attempt: the script has one attempt's turns, and a retry would run setup again
    data = fx.plan(test_command=test, setup_command=setup, max_attempts=1)
    data["tasks"] = [fx.node("a", [], "pkg/a.py", "A = 1\n")]
    if write_scope is not None:
        data["tasks"][0]["write_scope"] = write_scope
    return data


def run(
    repo: Path, plan: dict[str, Any], policy: SandboxPolicy | None = None, branch: str | None = None
) -> Any:
    script = fx.script(a=fx.worker_turns("pkg/a.py", "A = 1\n"))
    provider = ScriptedProvider(Script.from_data(script))
    settings = RunSettings(sandbox=policy or SandboxPolicy(), jobs=1, branch=branch)
    opts = ExecuteOptions(provider, settings)
    return execute(Plan.model_validate(plan), repo, opts), provider


def tree_with_modes(repo: Path, ref: str) -> dict[str, tuple[str, str]]:
    out = fx.git(repo, "ls-tree", "-r", ref)
    return {line.split("\t")[1]: (line.split()[0], line.split()[2]) for line in out.splitlines()}


def test_setup_may_write_only_ignored_paths_and_nothing_it_writes_lands(tmp_path: Path) -> None:
    repo = repo_with_ignores(tmp_path)
    before = fx.checkout_fingerprint(repo)
    plan = one_node(
        [sys.executable, "-c", HOSTILE_SETUP], [sys.executable, "-c", CHECK_ENV], ["pkg/"]
    )
    state, provider = run(repo, plan)
    record = state.tasks["a"]
    assert state.status == "succeeded", record.message
    assert record.setup is not None
    assert record.setup.passed
    assert record.tests is not None
    assert "environment ok" in Path(record.tests.log).read_text()

    main, branch = tree_with_modes(repo, "main"), tree_with_modes(repo, "anti-sprawl/demo")
    assert set(branch) == {*main, "pkg/a.py"}  # no evil.py, build/, .venv/, pkg/.gitignore
    assert all(branch[path] == main[path] for path in main)  # blobs and modes untouched
    assert record.files_changed == ["pkg/a.py"]
    blocked = {v.path for v in record.violations if v.reason == "setup_not_ignored"}
    assert blocked == {"pkg/base.py", "README.md", "pkg/evil.py", "pkg/.gitignore", "pkg/util.py"}

    # The worker read the original file: setup's change was put back before any model call.
    seen = "\n".join(request_text(r) for r in provider.requests)
    assert "def base()" in seen
    assert "HACKED" not in seen
    log = Path(record.setup.log or "")
    assert log.parent.name == "a"
    assert log.name == "setup-1.log"
    assert "setup done" in log.read_text()
    assert TOKEN not in log.read_text()
    run_dir = repo / ".anti-sprawl" / "runs" / state.run_id
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert TOKEN not in path.read_text(errors="replace"), path
    assert fx.checkout_fingerprint(repo) == before
    assert not list((repo / ".anti-sprawl" / "worktrees").iterdir())


FAILING_SETUP = """
import sys
for i in range(1, 11):
    print("setup line", i)
print("leaking", "ghp_" + "Z" * 36)  # built at run time: the plan itself holds no token
sys.exit(3)
"""


def test_a_failing_setup_fails_the_node_before_any_model_call(tmp_path: Path) -> None:
    repo = repo_with_ignores(tmp_path)
    plan = one_node([sys.executable, "-c", FAILING_SETUP], fx.TEST_CMD)
    plan["tasks"].append(fx.node("b", ["a"], "pkg/b.py", "B = 2\n"))
    state, provider = run(repo, plan)
    record = state.tasks["a"]
    assert state.status == "failed"
    assert record.status == "failed"
    assert record.reason == "setup"
    assert record.message.startswith("setup_command failed (exit code 3); last lines:")
    assert "setup line 10" in record.message
    assert "setup line 5" not in record.message
    assert TOKEN not in record.message
    assert "[REDACTED" in record.message
    assert state.tasks["b"].status == "skipped"
    assert provider.requests == []  # no tokens spent on a node whose environment is broken
    assert record.setup is not None
    assert record.setup.exit_code == 3
    out = StringIO()
    render_verdict(state, Console(file=out, width=200))
    assert "failed a (setup)" in out.getvalue()
    assert "setup line 10" in out.getvalue()
    run_json = (repo / ".anti-sprawl" / "runs" / state.run_id / "run.json").read_text()
    assert TOKEN not in run_json
    assert json.loads(run_json)["tasks"]["a"]["reason"] == "setup"


class Listener:
    """A TCP listener on the host's loopback that records what reaches it."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.received: list[bytes] = []
        self.sock.settimeout(0.2)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(5)
                self.received.append(conn.recv(100))

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.sock.close()


def connect(port: int, *, expect: str) -> list[str]:
    code = (
        "import socket, sys\n"
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=5).sendall(b'{expect}')\n"
        "except OSError as exc:\n"
        "    print('no network:', exc); sys.exit(7)\n"
        f"print('reached the host: {expect}')\n"
    )
    return [sys.executable, "-c", code]


@pytest.fixture
def listener() -> Any:
    srv = Listener()
    yield srv
    srv.close()


def test_setup_has_no_network_without_the_flag(tmp_path: Path, listener: Listener) -> None:
    repo = repo_with_ignores(tmp_path)
    state, _ = run(repo, one_node(connect(listener.port, expect="setup"), fx.TEST_CMD))
    record = state.tasks["a"]
    assert record.reason == "setup"
    assert "exit code 7" in record.message
    assert "no network" in record.message
    assert listener.received == []


def test_allow_setup_network_reaches_the_host_for_setup_only(
    tmp_path: Path, listener: Listener
) -> None:
    repo = repo_with_ignores(tmp_path)
    plan = one_node(connect(listener.port, expect="setup"), connect(listener.port, expect="tests"))
    state, _ = run(repo, plan, SandboxPolicy(setup_network=True))
    record = state.tasks["a"]
    assert record.setup is not None, record.message
    assert record.setup.passed, record.message
    assert listener.received == [b"setup"]  # the test command stayed offline
    assert record.reason == "tests"
    assert record.tests is not None
    assert record.tests.exit_code == 7
    assert "setup_command may use the network" in state.sandbox


def test_the_cli_flag_and_its_refusal_with_landlock(tmp_path: Path) -> None:
    runner = CliRunner()
    help_text = runner.invoke(app, ["execute", "--help"], terminal_width=200).output
    assert "--allow-setup-network" in help_text
    repo = repo_with_ignores(tmp_path)
    plan_path, script_path = fx.write_inputs(tmp_path, one_node(["true"], fx.TEST_CMD), fx.script())
    args = ["execute", str(plan_path), "--repo", str(repo), "--script", str(script_path)]
    done = runner.invoke(app, [*args, "--allow-setup-network", "--sandbox", "landlock"])
    assert done.exit_code == 2
    assert "--allow-setup-network needs --sandbox bwrap" in done.output
    assert not (repo / ".anti-sprawl" / "runs").exists()


def test_landlock_refuses_a_writable_tree_with_masked_secrets(tmp_path: Path) -> None:
    policy = SandboxPolicy(layers=("landlock",))
    if probe_sandbox(policy).layer != "landlock":
        pytest.skip("Landlock is not available here")
    work = tmp_path / "w"
    work.mkdir(mode=0o755)
    (work / "ok.txt").write_text("fine\n")
    assert run_command(["true"], work, timeout=30, writable=[work], policy=policy).exit_code == 0
    (work / "prod.env").write_text("SECRET=1\n")
    with pytest.raises(RunError, match="cannot hide"):
        run_command(["true"], work, timeout=30, writable=[work], policy=policy)
    with pytest.raises(RunError, match="no network mode"):
        run_command(["true"], work, timeout=30, policy=policy, network=True)


# --- Node: npm ci --offline from the user's npm cache, bound read-only --------------------

NPM = shutil.which("npm")
NODE_TEST = (
    "const test = require('node:test');\nconst assert = require('node:assert');\n"
    "const dep = require('tiny-dep');\n"
    "test('value', () => { assert.strictEqual(dep.value, 42); });\n"
)


def npm_project(tmp_path: Path) -> tuple[Path, Path]:
    """A repository whose lockfile pins a registry package, and an npm cache that holds it
    (filled offline with ``npm cache add`` from a local tarball, as ``npm ci`` would have)."""
    assert NPM is not None
    src = tmp_path / "tiny-dep"
    src.mkdir()
    (src / "package.json").write_text('{"name": "tiny-dep", "version": "1.0.0"}\n')
    (src / "index.js").write_text("module.exports = { value: 42 };\n")
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "npm_config_update_notifier": "false"}
    packed = subprocess.run(
        [NPM, "pack", "--json", str(src)], cwd=tmp_path, env=env, capture_output=True, check=True
    )
    info = json.loads(packed.stdout)[0]
    cache = tmp_path / "npm-cache"
    subprocess.run(
        [NPM, "cache", "add", str(tmp_path / info["filename"]), "--cache", str(cache)],
        env=env,
        capture_output=True,
        check=True,
    )
    repo = repo_with_ignores(tmp_path, "node_modules/\n")
    (repo / "package.json").write_text(
        json.dumps(
            {
                "name": "proj",
                "version": "1.0.0",
                "private": True,
                "scripts": {"test": "node --test"},
                "dependencies": {"tiny-dep": "^1.0.0"},
            }
        )
    )
    url = "https://registry.npmjs.org/tiny-dep/-/tiny-dep-1.0.0.tgz"
    lock = {
        "name": "proj",
        "version": "1.0.0",
        "lockfileVersion": 3,
        "requires": True,
        "packages": {
            "": {"name": "proj", "version": "1.0.0", "dependencies": {"tiny-dep": "^1.0.0"}},
            "node_modules/tiny-dep": {
                "version": "1.0.0",
                "resolved": url,
                "integrity": info["integrity"],
            },
        },
    }
    (repo / "package-lock.json").write_text(json.dumps(lock, indent=2))
    (repo / "test").mkdir()
    (repo / "test" / "value.test.js").write_text(NODE_TEST)
    fx.git(repo, "add", "-A")
    fx.git(repo, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "node project")
    subprocess.run(["chmod", "-R", "a+rX", str(cache)], check=True)
    return repo, cache


@pytest.mark.skipif(NPM is None, reason="npm is not installed")
def test_npm_ci_offline_from_the_users_cache(tmp_path: Path) -> None:
    repo, cache = npm_project(tmp_path)
    setup = ["npm", "ci", "--offline", "--no-audit", "--no-fund", "--cache", str(cache)]
    setup += ["--logs-dir", "/tmp/npm-logs"]
    plan = one_node(setup, ["npm", "test"], ["pkg/"])

    # The cache is outside the view until the user allows it: npm says it is not cached.
    state, _ = run(repo, plan)
    assert state.tasks["a"].reason == "setup", state.tasks["a"].message
    assert "ENOTCACHED" in Path(state.tasks["a"].setup.log).read_text()

    allowed = SandboxPolicy(allow_paths=(cache / "_cacache",))  # as the README says
    state, _ = run(repo, plan, allowed, branch="with-cache")
    record = state.tasks["a"]
    assert state.status == "succeeded", record.message
    assert "# pass 1" in Path(record.tests.log).read_text()
    assert not any(p.startswith("node_modules") for p in fx.branch_tree(repo, "with-cache"))
    assert not record.violations  # npm ci leaves tracked files alone


@pytest.mark.skipif(NPM is None, reason="npm is not installed")
def test_the_checkouts_node_modules_through_node_path(tmp_path: Path) -> None:
    """No setup at all: the tests require packages from the user's installed node_modules."""
    repo = repo_with_ignores(tmp_path, "node_modules/\n")
    (repo / "test").mkdir()
    (repo / "test" / "value.test.js").write_text(NODE_TEST)
    fx.git(repo, "add", "-A")
    fx.git(repo, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "node tests")
    dep = repo / "node_modules" / "tiny-dep"
    dep.mkdir(parents=True)
    (dep / "package.json").write_text('{"name": "tiny-dep", "version": "1.0.0"}\n')
    (dep / "index.js").write_text("module.exports = { value: 42 };\n")
    plan = one_node(None, ["env", "NODE_PATH={checkout}/node_modules", "node", "--test"])
    state, _ = run(repo, plan)
    record = state.tasks["a"]
    assert state.status == "succeeded", record.message
    assert "# pass 1" in Path(record.tests.log).read_text()
    plan = one_node(None, ["node", "--test"])  # without the checkout: the module is missing
    state, _ = run(repo, plan, branch="without")
    assert state.tasks["a"].reason == "tests"
    assert "Cannot find module 'tiny-dep'" in Path(state.tasks["a"].tests.log).read_text()


SETUP_FROM_CHECKOUT = """
import shutil, sys
checkout = sys.argv[1]
shutil.copytree(checkout + "/localdata", "build/localdata")
try:
    open(checkout + "/pwned.txt", "w").write("x")
    print("wrote into the checkout")
except OSError as exc:
    print("checkout is read-only:", type(exc).__name__)
"""


def test_a_setup_naming_the_checkout_reads_it_but_cannot_write_it(tmp_path: Path) -> None:
    repo = repo_with_ignores(tmp_path, "build/\nlocaldata/\n")
    (repo / "localdata").mkdir()
    (repo / "localdata" / "fixture.txt").write_text("from the user's checkout\n")
    before = fx.checkout_fingerprint(repo)
    check = "assert open('build/localdata/fixture.txt').read().startswith('from the user')"
    setup = [sys.executable, "-c", SETUP_FROM_CHECKOUT, "{checkout}"]
    state, _ = run(repo, one_node(setup, [sys.executable, "-c", check]))
    record = state.tasks["a"]
    assert state.status == "succeeded", record.message
    assert "checkout is read-only" in Path(record.setup.log).read_text()
    assert not (repo / "pwned.txt").exists()
    assert fx.checkout_fingerprint(repo) == before
    assert not any(p.startswith(("build", "localdata")) for p in fx.branch_tree(repo))
