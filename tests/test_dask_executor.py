"""--executor dask on real local Dask clusters: failures, refusals, heartbeats, what travels.

The central process is the real CLI; workers are a real ``LocalCluster`` (threads of this
process, or two worker processes). A killed worker is a real SIGKILL of a worker process.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from anti_sprawl.cli.app import app
from anti_sprawl.cli.executor import dask_settings
from anti_sprawl.git.transport import BundleChain, repo_identity
from anti_sprawl.plan.model import Plan
from anti_sprawl.providers.scripted import Script
from anti_sprawl.run.dask_executor import without_secrets
from anti_sprawl.run.heartbeat import Heartbeat, Watch
from anti_sprawl.run.node_job import NodeJob, NodePaths
from anti_sprawl.run.remote_node import RemoteJob, run_remote
from anti_sprawl.run.remote_settings import ProviderSpec
from anti_sprawl.run.result import TaskResult
from anti_sprawl.run.settings import RunSettings

from . import e2e_fixture as fx

runner = CliRunner()
KEY = "sk-ant-api03-CANARYKEY0123456789abcdefCANARYKEY"
# The CLI behind the test launcher, which installs the crash hook ANTI_SPRAWL_CRASH_AT names:
# inside a node run on a Dask worker process, the hook kills that worker process.
LAUNCHER = [sys.executable, str(Path(__file__).with_name("crash_launcher.py"))]

pytestmark = pytest.mark.usefixtures("python_on_path")


def _dask(cluster: Any) -> list[str]:
    return ["--executor", "dask", "--dask-scheduler", cluster.scheduler_address]


def _run(tmp_path: Path, plan: dict, script: dict, *extra: str) -> tuple[Path, Any]:
    repo = fx.make_repo(tmp_path)
    plan_path, script_path = fx.write_inputs(tmp_path, plan, script)
    args = ["execute", str(plan_path), "--repo", str(repo), "--script", str(script_path)]
    return repo, runner.invoke(app, [*args, "--json", *extra])


def _launch(
    tmp_path: Path, plan: dict, script: dict, crash: str, *extra: str
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """``execute`` through the test launcher, which kills its process (here: the Dask worker
    process running the node) at the crash point ``crash`` names."""
    repo = fx.make_repo(tmp_path)
    plan_path, script_path = fx.write_inputs(tmp_path, plan, script)
    args = ["execute", str(plan_path), "--repo", str(repo), "--script", str(script_path)]
    env = {**os.environ, "ANTI_SPRAWL_CRASH_AT": crash}
    done = subprocess.run(
        [*LAUNCHER, *args, *extra], env=env, capture_output=True, text=True, timeout=300
    )
    return repo, done


def _state(repo: Path) -> dict[str, Any]:
    (run_dir,) = (repo / ".anti-sprawl" / "runs").iterdir()
    data: dict[str, Any] = json.loads((run_dir / "run.json").read_text())
    return data


def test_a_killed_worker_fails_the_attempt_and_resume_lands_exactly_one_commit(
    tmp_path: Path, dask_processes: Any
) -> None:
    # The crash point, met inside node a on the worker, SIGKILLs that Dask worker process.
    crash = "before_commit:a"
    repo, done = _launch(tmp_path / "dask", fx.plan(), fx.script(), crash, *_dask(dask_processes))
    assert done.returncode == 1, done.stdout + done.stderr
    state = _state(repo)
    assert state["tasks"]["a"]["reason"] == "worker_lost"
    assert state["tasks"]["c"]["status"] == "skipped"
    assert fx.task_trailers(repo) == ["b"]
    script = tmp_path / "dask" / "script.yaml"
    args = ["resume", state["run_id"], "--repo", str(repo), "--script", str(script)]
    resumed = runner.invoke(app, [*args, *_dask(dask_processes)])
    assert resumed.exit_code == 0, resumed.output
    assert sorted(fx.task_trailers(repo)) == ["a", "b", "c"]  # each exactly once
    # the killed process's worktree was removed from the cache clone by a later job
    for folder in Path(os.environ["ANTI_SPRAWL_CACHE_DIR"]).glob("worktrees/*"):
        assert _alive(int(folder.name)) or not any(folder.iterdir()), folder
    local, ran = _run(tmp_path / "local", fx.plan(), fx.script())
    assert ran.exit_code == 0, ran.output
    assert fx.branch_tree(repo) == fx.branch_tree(local)


@pytest.mark.usefixtures("_dask_env")
def test_a_cluster_that_reschedules_a_dead_workers_task_does_not_run_the_attempt_twice(
    tmp_path: Path,
) -> None:
    import dask
    from distributed import LocalCluster

    # Dask's default: a task whose worker died is run again elsewhere, up to 3 times.
    with (
        dask.config.set({"distributed.scheduler.allowed-failures": 3}),
        LocalCluster(
            n_workers=2,
            processes=True,
            threads_per_worker=1,
            dashboard_address=":0",
            protocol="tcp",
            host="127.0.0.1",
        ) as cluster,
    ):
        crash = "before_commit:a"
        repo, done = _launch(tmp_path, fx.plan(), fx.script(), crash, *_dask(cluster))
    assert done.returncode == 1, done.stdout + done.stderr
    a = _state(repo)["tasks"]["a"]
    assert a["reason"] == "worker_lost", a
    assert "not run twice" in a["message"], a
    assert a["attempts"] == 1
    assert fx.task_trailers(repo) == ["b"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_secret_only_the_central_process_knows_is_refused_at_landing(
    tmp_path: Path, dask_processes: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The worker processes started before this variable existed: their own secret scan
    # cannot know the value, the central re-audit does.
    value = "zq-central-only-3f9a1c7e5b2d8046"
    monkeypatch.setenv("DEPLOY_TOKEN", value)
    script = fx.script(a=fx.worker_turns("pkg/a.py", f"A = '{value}'\n"))
    repo, result = _run(tmp_path, fx.plan(), script, *_dask(dask_processes))
    assert result.exit_code == 1, result.output
    a = _state(repo)["tasks"]["a"]
    assert a["reason"] == "refused"
    assert "secret" in a["message"]
    assert a["commit"] is None
    assert fx.task_trailers(repo) == ["b"]
    assert value not in fx.git(repo, "log", "-p", "--all")  # nowhere on a branch
    assert "quarantine" not in fx.git(repo, "for-each-ref")
    for path in (repo / ".anti-sprawl" / "runs").rglob("*"):
        if path.is_file():
            assert value not in path.read_text(errors="replace"), path


def test_same_branch_and_artifacts_on_the_in_process_cluster(
    tmp_path: Path, dask_inprocess: Any
) -> None:
    repo, result = _run(tmp_path / "d", fx.plan(), fx.script(), *_dask(dask_inprocess))
    assert result.exit_code == 0, result.output
    local, done = _run(tmp_path / "l", fx.plan(), fx.script())
    assert done.exit_code == 0, done.output
    assert fx.branch_tree(repo) == fx.branch_tree(local)
    assert fx.task_trailers(repo) == fx.task_trailers(local)
    run_dir = next((repo / ".anti-sprawl" / "runs").iterdir())
    for task in "abc":
        # manifests and transcript came back; test logs point at this machine's copy
        assert list((run_dir / "manifests" / task).glob("*.json"))
        assert (run_dir / "artifacts" / task / "transcript.jsonl").is_file()
        log = Path(json.loads(result.stdout)["tasks"][task]["tests"]["log"])
        assert log.is_file()
        assert log.is_relative_to(run_dir)
        stats = json.loads((run_dir / "artifacts" / task / "remote.json").read_text())
        assert stats["bytes_out"] > 0
    # the user's repository keeps no quarantine ref, the cache clone holds the bases
    assert "quarantine" not in fx.git(repo, "for-each-ref")


def test_usage_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    _, result = _run(tmp_path / "a", fx.plan(), fx.script(), "--executor", "dask")
    assert result.exit_code == 2
    assert "--dask-scheduler" in result.output
    # nothing listens there: one line, exit 2, and no run was started
    unreachable = ["--executor", "dask", "--dask-scheduler", "tcp://127.0.0.1:9"]
    repo, result = _run(tmp_path / "b", fx.plan(), fx.script(), *unreachable)
    assert result.exit_code == 2, result.output
    assert "cannot reach the Dask scheduler" in result.output
    assert "Traceback" not in result.output
    assert not (repo / ".anti-sprawl" / "runs").exists() or not any(
        (repo / ".anti-sprawl" / "runs").iterdir()
    )
    plan = fx.plan(test_command=["{checkout}/.venv/bin/python", "-c", "pass"])
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "tcp://127.0.0.1:9")
    _, result = _run(tmp_path / "c", plan, fx.script(), "--executor", "dask")
    assert result.exit_code == 2
    assert "{checkout}" in result.output
    assert "--executor local" in result.output


def test_without_dask_installed_the_executor_says_how_to_get_it(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path)
    plan_path, script_path = fx.write_inputs(tmp_path, fx.plan(), fx.script())
    argv = ["execute", str(plan_path), "--repo", str(repo), "--script", str(script_path)]
    argv += ["--executor", "dask", "--dask-scheduler", "tcp://127.0.0.1:9"]
    code = (
        "import sys; sys.modules['distributed'] = None\n"  # what an install without the extra sees
        "from anti_sprawl.cli.app import main\n"
        f"sys.argv = ['anti-sprawl', *{argv!r}]\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert "pip install 'anti-sprawl[dask]'" in done.stderr
    assert "Traceback" not in done.stderr


def test_keys_never_travel_in_the_job() -> None:
    env = {"ANTHROPIC_API_KEY": KEY, "OPENAI_API_KEY": KEY}
    settings, central = dask_settings(
        "tcp://x:1", provider=None, model=None, base_url=None, script=None, env=env
    )
    assert settings.provider.name == "anthropic"
    assert central.name == "anthropic"
    assert KEY.encode() not in pickle.dumps(settings.provider)
    # what commands may see travels; secret-looking variables do not
    sent = without_secrets({"PATH": "/usr/bin", "ANTHROPIC_API_KEY": KEY, "GH_TOKEN": KEY})
    assert sent == {"PATH": "/usr/bin"}


def test_the_heartbeat_stops_an_orphaned_watch(dask_inprocess: Any) -> None:
    from distributed import Client

    with Client(dask_inprocess.scheduler_address, set_as_default=False) as client:
        told, stalled = threading.Event(), threading.Event()
        beat = Heartbeat(client, "hb-test-told", interval=0.05)
        with Watch(client, "hb-test-told", timeout=5.0, stop=told) as watch:
            time.sleep(0.3)
            assert not told.is_set()
            beat.stop(tell=True)  # the run ended or was stopped: nodes stop at once
            assert told.wait(10)
        assert watch.why == "the central run stopped"
        beat = Heartbeat(client, "hb-test-stall", interval=0.05)
        with Watch(client, "hb-test-stall", timeout=0.5, stop=stalled) as watch:
            time.sleep(0.3)
            assert not stalled.is_set()
            beat.stop(tell=False)  # the central process died: nothing more is said
            assert stalled.wait(10)
        assert watch.why is not None
        assert "no heartbeat" in watch.why


def _job(
    tmp_path: Path, repo: Path, plan: dict, script: dict, task: str, **remote: Any
) -> tuple[RemoteJob, dict[str, bytes]]:
    """A RemoteJob for ``task`` as the central process would send it, with its bundles."""
    published: dict[str, bytes] = {}

    def publish(data: bytes) -> str:
        published[str(len(published))] = data
        return str(len(published) - 1)

    base = fx.git(repo, "rev-parse", "HEAD")
    parsed = Plan.model_validate(plan)
    node = parsed.task(task)
    record = TaskResult(task_id=task, name=node.name, token_budget=node.token_budget)
    record.start()
    here = tmp_path / "central"  # paths of the central machine: never used on the worker
    job = NodeJob(
        run_id="demo-run",
        plan=parsed.model_copy(update={"tasks": [node]}),
        record=record,
        base=base,
        model="scripted",
        price=None,
        settings=RunSettings(test_timeout=60),
        paths=NodePaths(repo=here, worktrees=here, artifacts=here, manifests=here),
        author=("Ada", "ada@example.org"),
    )
    spec = ProviderSpec(name="scripted", script=Script.from_data(script))
    chain = tuple(BundleChain(repo, publish).chain_for(base))
    wrapped = RemoteJob(
        job=job, repo_id=repo_identity(repo, base), bundles=chain, provider=spec, **remote
    )
    return wrapped, published


def test_what_a_worker_returns_holds_no_key_and_no_out_of_scope_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTI_SPRAWL_CACHE_DIR", str(tmp_path / "cache"))
    repo = fx.make_repo(tmp_path)
    (repo / "private").mkdir()
    (repo / "private" / "notes.txt").write_text("CANARY-OUT-7d1e\n")
    fx.git(repo, "add", "-A")
    fx.git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "notes")
    hostile = [
        {"tool": "read_file", "args": {"path": "private/notes.txt"}},
        {"tool": "write_file", "args": {"path": "private/notes.txt", "content": "x"}},
        {"tool": "run_tests", "args": {}},
        *fx.worker_turns("pkg/a.py", "A = 1\n"),
    ]
    plan = fx.plan(test_command=[sys.executable, "-c", "import os; print(sorted(os.environ))"])
    job, published = _job(tmp_path, repo, plan, fx.script(a=hostile), "a")
    env = {**os.environ, "ANTHROPIC_API_KEY": KEY, "SERVICE_TOKEN": KEY}
    result = run_remote(job, published.__getitem__, threading.Event(), env)
    outcome = result.outcome
    assert outcome.verdict == "succeeded", outcome.record.message
    assert {v.path for v in outcome.record.violations} == {"private/notes.txt"}
    # every byte the worker sends back, as Dask would pickle it
    returned = pickle.dumps(result)
    assert KEY.encode() not in returned
    assert b"CANARY-OUT" not in returned
    assert result.bundle is not None
    assert b"CANARY-OUT" not in result.bundle
    assert any(name.startswith("artifacts/a/transcript") for name in result.files)
    assert any(name.startswith("manifests/a/") for name in result.files)
    # the test command ran with the worker's environment, minus its secrets
    assert "SERVICE_TOKEN" not in b"".join(result.files.values()).decode()


def test_a_result_over_the_size_limit_is_refused_on_the_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTI_SPRAWL_CACHE_DIR", str(tmp_path / "cache"))
    repo = fx.make_repo(tmp_path)
    # a normal node's manifests alone are over a kilobyte
    job, published = _job(tmp_path, repo, fx.plan(), fx.script(), "a", max_result_bytes=1_000)
    result = run_remote(job, published.__getitem__, threading.Event(), dict(os.environ))
    assert result.outcome.verdict == "failed"
    assert result.outcome.record.reason == "refused"
    assert "over the limit of 1,000 bytes" in result.outcome.record.message
    assert result.bundle is None
    assert not result.files


def test_an_orphaned_node_stops_between_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTI_SPRAWL_CACHE_DIR", str(tmp_path / "cache"))
    repo = fx.make_repo(tmp_path)
    slow = [sys.executable, "-c", "import time; time.sleep(0.2)"]
    turns = [{"tool": "run_tests", "args": {}}] * 40 + fx.worker_turns("pkg/a.py", "A = 1\n")
    plan = fx.plan(test_command=slow)
    plan["tasks"][0]["max_tool_calls"] = 60
    job, published = _job(tmp_path, repo, plan, fx.script(a=turns), "a")
    stop = threading.Event()
    # What the heartbeat watch does when the central run's beats stop: set the node's stop.
    threading.Timer(1.0, stop.set).start()
    result = run_remote(job, published.__getitem__, stop, dict(os.environ))
    assert result.outcome.verdict == "failed"
    assert result.outcome.record.reason == "stopped"
    assert result.outcome.record.tool_calls < 40  # it did not play the rest of its script
    assert result.bundle is None
