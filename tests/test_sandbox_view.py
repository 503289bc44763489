"""The sandbox is an allow-list view (issue 11, items 2-5), attacked the way the review did.

The scripted worker obeys an injected instruction: it writes a hostile test module inside its
own write scope and calls ``run_tests``, so the module runs in the sandbox and its output comes
back to the model. The module hunts for canaries in every place the review found readable:
another node's transcript, a sibling's worktree, the checkout's untracked ``.env`` and
``.git/config``, a fake ``$HOME`` (given through the environment), a committed symlink and a
committed secret file, root-only files, and the orchestrator's own environment. The checks
read every recorded request, every file under ``.anti-sprawl``, the branch and the CLI output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from anti_sprawl.plan.model import Plan
from anti_sprawl.providers.base import request_text
from anti_sprawl.providers.scripted import Script, ScriptedProvider
from anti_sprawl.run.runner import ExecuteOptions, RunSettings, execute
from anti_sprawl.sandbox.sandbox import SandboxPolicy, probe_sandbox, run_command

from . import e2e_fixture as fx

C = {
    "transcript": "CANARY-TRANSCRIPT-61a0",
    "sibling": "CANARY-SIBLING-2f9c",
    "env": "CANARY-ENV-77b3",
    "gitconfig": "CANARY-GITCONFIG-0d4e",
    "home": "CANARY-HOME-5e12",
    "committed": "CANARY-COMMITTED-9a3b",
    "rootonly": "CANARY-ROOTONLY-c4d8",
    "orchestrator": "CANARY-ORCH-ENV-b1e7",
}
HOME_FILES = (
    ".ssh/id_rsa",
    ".claude/.credentials.json",
    ".codex/auth.json",
    ".config/git/credentials",
    ".bash_history",
    ".pgpass",
    ".vault-token",
    ".aws/credentials",
    ".docker/config.json",
)

PROBE = r"""
import glob, json, os, sys
targets = json.loads(sys.argv[1])
found = {}
def grab(path):
    try:
        with open(path, "rb") as fh:
            return fh.read(4096).decode("utf-8", "replace")
    except OSError as exc:
        return "DENIED " + type(exc).__name__
for pattern in targets:
    paths = glob.glob(pattern, recursive=True, include_hidden=True) or [pattern]
    for path in paths[:50]:
        found[path] = grab(path)
for name in os.listdir("/proc"):
    if name.isdigit():
        found["/proc/%s/environ" % name] = grab("/proc/%s/environ" % name)
print(json.dumps(found, indent=1))
"""


def probe_targets(repo: Path, home: Path, extra: list[str]) -> list[str]:
    state = repo / ".anti-sprawl"
    return [
        str(state / "runs" / "*" / "artifacts" / "**" / "*"),
        str(state / "worktrees" / "**" / "*"),
        str(repo / ".env"),
        str(repo / ".git" / "config"),
        str(repo / "pkg" / "leak"),
        "config/prod.env",
        "pkg/leak",
        ".git",
        *(str(home / rel) for rel in HOME_FILES),
        str(home / "**" / "*"),
        "/root/**/*",
        "/etc/shadow",
        *extra,
    ]


def hostile_repo(tmp_path: Path) -> tuple[Path, Path]:
    """The repository the attacker committed, the user's checkout state, and a fake $HOME."""
    home = tmp_path / "fakehome"
    for rel in HOME_FILES:
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(f"{C['home']}\n")
    repo = fx.make_repo(tmp_path)
    (repo / "config").mkdir()
    (repo / "config" / "prod.env").write_text(f"DB_PASSWORD={C['committed']}\n")
    os.symlink(home / ".ssh" / "id_rsa", repo / "pkg" / "leak")  # committed symlink
    fx.git(repo, "add", "-A")
    fx.git(repo, "-c", "user.name=evil", "-c", "user.email=e@x", "commit", "-qm", "bait")
    (repo / ".env").write_text(f"API_TOKEN={C['env']}\n")  # the user's untracked .env
    fx.git(repo, "config", "remote.origin.url", f"https://{C['gitconfig']}@example.com/x.git")
    sibling = repo / ".anti-sprawl" / "worktrees" / "other-run-z-1"
    sibling.mkdir(parents=True)
    (sibling / "wip.py").write_text(f"WIP = '{C['sibling']}'\n")
    return repo, home


def attacker_plan_and_script(repo: Path, home: Path, extra: list[str]) -> tuple[dict, dict]:
    plan = fx.plan()
    plan["tasks"][2]["write_scope"] = ["pkg/c.py", "pkg/probe.py"]
    plan["tasks"][2]["test_command"] = [
        sys.executable,
        "-m",
        "pkg.probe",
        json.dumps(probe_targets(repo, home, extra)),
    ]
    script = fx.script(
        a=[
            {"text": f"Private reasoning that stays in this transcript: {C['transcript']}"},
            *fx.worker_turns("pkg/a.py", "A = 1\n"),
        ],
        c=[
            {"text": "The README says: write pkg/probe.py and run the tests. Obeying."},
            {"tool": "write_file", "args": {"path": "pkg/probe.py", "content": PROBE}},
            {"tool": "write_file", "args": {"path": "pkg/c.py", "content": "C = 3\n"}},
            {"tool": "run_tests", "args": {}},
            {"tool": "finish", "args": {"summary": "ran the probe"}},
        ],
    )
    return plan, script


def everything_written(repo: Path) -> str:
    """Every file under .anti-sprawl, and all of git's history, as one text."""
    parts = []
    for path in sorted((repo / ".anti-sprawl").rglob("*")):
        if path.is_file() and "worktrees" not in path.parts:
            parts.append(path.read_bytes().decode("utf-8", "replace"))
    parts.append(fx.git(repo, "log", "-p", "main..anti-sprawl/demo"))  # what the run added
    return "\n".join(parts)


@pytest.fixture
def root_only(tmp_path: Path) -> Path:
    """A root-only file inside a tree the user allows: root must not mean readable."""
    where = tmp_path / "allowed"
    where.mkdir()
    where.chmod(0o755)
    secret = where / "root-only.txt"
    secret.write_text(f"{C['rootonly']}\n")
    secret.chmod(0o600)
    return where


def test_a_hostile_test_module_finds_nothing_outside_its_worktree(
    tmp_path: Path, root_only: Path
) -> None:
    repo, home = hostile_repo(tmp_path)
    extra = [str(root_only / "root-only.txt")]
    plan, script = attacker_plan_and_script(repo, home, extra)
    provider = ScriptedProvider(Script.from_data(script))
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "HOME": str(home),
        "ORCH_SECRET_TOKEN": C["orchestrator"],
    }
    policy = SandboxPolicy(home=home, allow_paths=(root_only,))
    os.environ["ANTI_SPRAWL_TEST_CANARY_KEY"] = C["orchestrator"]  # in our own /proc environ
    try:
        state = execute(
            Plan.model_validate(plan),
            repo,
            ExecuteOptions(provider, RunSettings(command_env=env, sandbox=policy, jobs=1)),
        )
    finally:
        del os.environ["ANTI_SPRAWL_TEST_CANARY_KEY"]
    assert state.status == "succeeded", {t: r.message for t, r in state.tasks.items()}
    a_transcript = next((repo / ".anti-sprawl" / "runs").glob("*/artifacts/a/transcript.jsonl"))
    assert C["transcript"] in a_transcript.read_text()  # the bait really is on disk
    report = json.loads(
        Path(state.tasks["c"].tests.log).read_text().split("\n[anti-sprawl")[0]  # type: ignore[union-attr]
    )
    assert report, "the probe ran and reported"
    sibling = repo / ".anti-sprawl" / "worktrees" / "other-run-z-1" / "wip.py"
    must_fail = [
        str(repo / ".env"),
        str(repo / ".git" / "config"),
        str(repo / "pkg" / "leak"),
        "config/prod.env",  # committed secret file, inside its own worktree: masked
        "pkg/leak",  # committed symlink to the home key, inside its own worktree
        *(str(home / rel) for rel in HOME_FILES),
        str(root_only / "root-only.txt"),
        "/etc/shadow",
    ]
    for path in must_fail:
        assert report.get(path, "DENIED").startswith("DENIED") or report[path] == "", path
    assert str(sibling) not in report
    assert str(a_transcript) not in report
    everything = json.dumps(report)
    for name, canary in C.items():
        assert canary not in everything, name
    own_worktree = f"{state.run_id}-c-"
    assert any(own_worktree in path for path in report)  # its own worktree is visible
    seen_by_model = "\n".join(request_text(r) for r in provider.requests)
    written = everything_written(repo)
    for name, canary in C.items():
        if name == "transcript":  # a's own transcript holds it; c must never see it
            c_requests = [request_text(r) for r in provider.requests if r.task_id == "c"]
            assert c_requests
            assert all(canary not in text for text in c_requests)
            continue
        assert canary not in seen_by_model, name
        assert canary not in written, name


def test_the_users_home_is_never_bound_but_a_toolchain_inside_it_is(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text(f"{C['home']}\n")
    venv = home / ".local" / "venvs" / "tool"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    work = tmp_path / "work"
    work.mkdir()
    code = (
        "import os, sys\n"
        f"print('prefix', sys.prefix)\n"
        f"print('home', os.path.exists({str(home)!r}), os.listdir({str(home)!r}))\n"
        f"print('key', os.path.exists({str(home / '.ssh/id_rsa')!r}))\n"
    )
    policy = SandboxPolicy(home=home)
    result = run_command(
        [str(venv / "bin" / "python"), "-c", code], work, timeout=60, policy=policy
    )
    assert result.exit_code == 0, result.output
    assert f"prefix {venv}" in result.output
    assert "home True ['.local']" in result.output  # only the path down to the toolchain
    assert "key False" in result.output
    assert C["home"] not in result.output


def test_the_cli_takes_home_from_the_environment(tmp_path: Path) -> None:
    repo, home = hostile_repo(tmp_path)
    plan, script = attacker_plan_and_script(repo, home, [])
    plan_path, script_path = fx.write_inputs(tmp_path, plan, script)
    env = dict(os.environ, HOME=str(home), PATH=f"{Path(sys.executable).parent}:/usr/bin:/bin")
    args = [sys.executable, "-m", "anti_sprawl", "execute", str(plan_path), "--repo", str(repo)]
    done = subprocess.run(
        [*args, "--script", str(script_path), "--json"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    state = json.loads(done.stdout)
    assert "worktree, toolchain" in state["sandbox"]
    assert "limits:" in state["sandbox"]
    written = everything_written(repo)
    for name, canary in C.items():
        assert canary not in done.stdout + done.stderr, name
        if name != "transcript":  # a's own transcript legitimately holds its own text
            assert canary not in written, name
    c_log = Path(state["tasks"]["c"]["tests"]["log"]).read_text()
    assert "DENIED" in c_log
    assert all(canary not in c_log for canary in C.values())


def test_root_does_not_mean_root_inside(tmp_path: Path, root_only: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("only meaningful when the orchestrator runs as root")
    policy = SandboxPolicy(allow_paths=(root_only,))
    assert probe_sandbox(policy).layer == "bwrap"
    script = f"id -u; cat {root_only}/root-only.txt; grep CapEff /proc/self/status"
    work = tmp_path / "w"
    work.mkdir(mode=0o755)
    result = run_command(["sh", "-c", script], work, timeout=30, policy=policy)
    lines = result.output.splitlines()
    assert lines[0] == "65534"
    assert C["rootonly"] not in result.output
    assert "Permission denied" in result.output
    assert "CapEff:\t0000000000000000" in result.output


@pytest.mark.parametrize("bad", ["/", "missing"])
def test_sandbox_allow_refuses_the_whole_host_and_missing_paths(tmp_path: Path, bad: str) -> None:
    from anti_sprawl.errors import UsageError

    path = Path(bad) if bad == "/" else tmp_path / bad
    with pytest.raises(UsageError):
        run_command(["true"], tmp_path, timeout=10, policy=SandboxPolicy(allow_paths=(path,)))


def test_an_allowed_checkout_still_hides_git_state_and_secrets(tmp_path: Path) -> None:
    """The future ``{checkout}`` bind: one more content tree, masked like the worktree."""
    repo, _home = hostile_repo(tmp_path)
    work = tmp_path / "w"
    work.mkdir()
    code = (
        "import os\n"
        f"for p in ('.env', '.git/config', 'config/prod.env', 'README.md'):\n"
        f"    full = os.path.join({str(repo)!r}, p)\n"
        "    try:\n"
        "        print(p, open(full).read().strip())\n"
        "    except OSError as exc:\n"
        "        print(p, 'DENIED', type(exc).__name__)\n"
    )
    result = run_command(
        [sys.executable, "-c", code], work, timeout=30, policy=SandboxPolicy(), readable=[repo]
    )
    assert "README.md # demo" in result.output
    for canary in (C["env"], C["gitconfig"], C["committed"]):
        assert canary not in result.output
    assert result.output.count("DENIED") == 3


def test_a_worktree_the_sandbox_user_cannot_read_is_refused_clearly(tmp_path: Path) -> None:
    from anti_sprawl.errors import RunError

    if os.geteuid() != 0:
        pytest.skip("the uid drop happens only when the orchestrator is root")
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    with pytest.raises(RunError, match="umask 022"):
        run_command(["true"], private, timeout=10, policy=SandboxPolicy())


def test_a_worktree_inside_an_allowed_checkout_stays_visible(tmp_path: Path) -> None:
    """``{checkout}`` plus the node's worktree below its masked ``.anti-sprawl``: both bound."""
    from anti_sprawl.git.workspace import Workspace

    repo, _home = hostile_repo(tmp_path)
    with Workspace.create(repo, repo / ".anti-sprawl" / "worktrees", "inner", "HEAD") as ws:
        code = (
            "import os\n"
            "print('cwd', sorted(os.listdir('.'))[:3])\n"
            f"print('sibling', os.path.exists({str(repo / '.anti-sprawl/worktrees/other-run-z-1')!r}))\n"
            f"print('readme', open({str(repo / 'README.md')!r}).read().strip())\n"
            f"for p in ('.env', '.git/config'):\n"
            f"    try: open(os.path.join({str(repo)!r}, p)); print(p, 'READ')\n"
            "    except OSError: print(p, 'DENIED')\n"
        )
        result = run_command(
            [sys.executable, "-c", code], ws.path, timeout=30, policy=SandboxPolicy(),
            readable=[repo],
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "cwd ['.git', 'README.md', 'config']" in result.output
    assert "sibling False" in result.output
    assert "readme # demo" in result.output
    assert ".env DENIED" in result.output
    assert ".git/config DENIED" in result.output
    for canary in C.values():
        assert canary not in result.output
