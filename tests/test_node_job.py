"""A node's work as a function of plain data: ``NodeJob`` in, ``NodeOutcome`` out.

The job runs on its own (no journal, no lock, no run branch), crosses a process boundary as a
pickle, carries no secret, and a run whose every job goes through pickle leaves the same branch
as one whose jobs do not: the seam an executor (issue 17) plugs into.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from anti_sprawl.errors import InternalError
from anti_sprawl.plan.model import Plan
from anti_sprawl.providers.scripted import Script, ScriptedProvider
from anti_sprawl.redact import Redactor, env_secrets
from anti_sprawl.run.ablations import Ablations
from anti_sprawl.run.node_job import NodeEnv, NodeJob, NodeOutcome, NodePaths
from anti_sprawl.run.node_work import run_node_job
from anti_sprawl.run.result import TaskResult
from anti_sprawl.run.runner import ExecuteOptions, RunSettings, execute

from . import e2e_fixture as fx

ENV = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
SECRET = "sk-ant-job-secret-0123456789abcdefghijkl"


def job_for(
    tmp_path: Path, repo: Path, task: str = "a", plan_data: dict[str, Any] | None = None
) -> NodeJob:
    plan = Plan.model_validate(plan_data or fx.plan())
    node = plan.task(task)
    record = TaskResult(task_id=task, name=node.name, token_budget=node.token_budget)
    record.start()
    stage = tmp_path / "stage"
    return NodeJob(
        run_id="r1",
        plan=plan.model_copy(update={"tasks": [node]}),
        record=record,
        base=fx.git(repo, "rev-parse", "HEAD"),
        model="scripted",
        price=None,
        settings=RunSettings(command_env=ENV),
        paths=NodePaths(
            repo=repo,
            worktrees=tmp_path / "wt",
            artifacts=stage / "artifacts",
            manifests=stage / "manifests",
        ),
        author=("Ada", "ada@example.org"),
    )


def run_in_thread(job: NodeJob, env: NodeEnv) -> NodeOutcome:
    """As the local executor does: the job in a thread of its own."""
    out: list[NodeOutcome] = []
    thread = threading.Thread(target=lambda: out.append(run_node_job(job, env)))
    thread.start()
    thread.join()
    return out[0]


def scripted(**workers: list[Any]) -> ScriptedProvider:
    return ScriptedProvider(Script.from_data(fx.script(**workers)))


def test_a_job_runs_alone_and_leaves_only_its_commit_and_its_files(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path)
    before = fx.checkout_fingerprint(repo)
    job = pickle.loads(pickle.dumps(job_for(tmp_path, repo)))  # plain data: it travels
    outcome = run_in_thread(job, NodeEnv(provider=scripted()))
    assert outcome.verdict == "succeeded", outcome.record.message
    assert outcome.record.status == "running"  # landing is the central process's
    sha = outcome.commit
    assert sha is not None
    assert outcome.record.commit == sha
    assert fx.git(repo, "rev-parse", f"{sha}^") == job.base  # one commit on the base
    assert fx.git(repo, "show", f"{sha}:pkg/a.py") == "A = 1"
    assert "Anti-Sprawl-Task: a" in fx.git(repo, "log", "-1", "--format=%B", sha)
    assert fx.git(repo, "log", "-1", "--format=%an <%ae>", sha) == "Ada <ada@example.org>"
    # Nothing central: no run branch, no journal, no state directory; the checkout as it was.
    assert fx.git(repo, "for-each-ref", "--format=%(refname)", "refs/heads/anti-sprawl/") == ""
    assert not (repo / ".anti-sprawl").exists()
    assert fx.checkout_fingerprint(repo) == before
    assert not any((tmp_path / "wt").iterdir())  # its worktree is gone
    # What it wrote is under the job's paths and listed in the outcome.
    stage = tmp_path / "stage"
    assert outcome.manifests
    assert all(p.is_relative_to(stage / "manifests") for p in outcome.manifests)
    assert sorted(p.name for p in outcome.manifests) == [f"{n}.json" for n in (1, 2, 3, 4)]
    assert "artifact://a/transcript.jsonl" in outcome.logs
    assert "artifact://a/tests-1-1.log" in outcome.logs
    assert outcome.test_runs == 2
    for ref in outcome.logs:
        assert (stage / "artifacts" / ref.removeprefix("artifact://")).is_file(), ref
    assert pickle.loads(pickle.dumps(outcome)).record == outcome.record  # it travels back


def test_a_failing_job_returns_failed_and_never_raises(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path)
    turns = fx.worker_turns("pkg/a.py", "raise SystemExit(3)\n")
    plan = fx.plan(test_command=[sys.executable, "-c", "import pkg.a"])
    job = job_for(tmp_path, repo, plan_data=plan)
    outcome = run_in_thread(job, NodeEnv(provider=scripted(a=turns)))
    assert outcome.verdict == "failed"
    assert outcome.commit is None
    assert (outcome.record.status, outcome.record.reason) == ("failed", "tests")
    assert outcome.changed == ("pkg/a.py",)  # the audit kept it; nothing was committed
    assert outcome.worker is not None
    assert outcome.worker.status == "succeeded"


def test_a_job_that_cannot_start_fails_with_the_reason(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path)
    job = job_for(tmp_path, repo)
    broken = dataclasses.replace(job, base="0" * 40)  # no such commit
    outcome = run_in_thread(broken, NodeEnv(provider=scripted()))
    assert (outcome.verdict, outcome.record.reason) == ("failed", "error")
    # A full id goes to `git worktree add` as it is (git/workspace.py): git's refusal is the reason.
    assert "git worktree add" in outcome.record.message
    assert "0" * 40 in outcome.record.message
    assert outcome.manifests == ()


def test_the_job_holds_no_secret_the_env_holds_the_redactor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    repo = fx.make_repo(tmp_path)
    redactor = Redactor(env_secrets(os.environ))
    job = job_for(tmp_path, repo)
    assert SECRET.encode() not in pickle.dumps(job)
    assert SECRET.encode() in pickle.dumps(redactor)  # so the redactor never goes in a job
    copied = pickle.loads(pickle.dumps(redactor))  # a copy drops the lock and kept results
    assert copied(f"the key is {SECRET}") == "the key is [REDACTED:env]"
    leaky = fx.worker_turns("pkg/a.py", "A = 1\n")
    leaky[-1] = {"tool": "finish", "args": {"summary": f"key {SECRET}"}}
    outcome = run_in_thread(job, NodeEnv(provider=scripted(a=leaky), redactor=redactor))
    assert outcome.verdict == "succeeded"
    message = fx.git(repo, "log", "-1", "--format=%B", outcome.commit or "")
    assert SECRET not in message
    assert "[REDACTED:" in message


def test_a_run_whose_jobs_travel_as_pickles_lands_the_same_branch(tmp_path: Path) -> None:
    """The executor seam: ``run_job`` sees every job and outcome; pickling both on the way
    (what a remote executor does) changes nothing in the branch."""
    seen: list[str] = []

    def travelling(job: NodeJob, env: NodeEnv) -> NodeOutcome:
        seen.append(job.task_id)
        outcome = run_node_job(pickle.loads(pickle.dumps(job)), env)
        return pickle.loads(pickle.dumps(outcome))

    trees = []
    for name, run_job in (("local", run_node_job), ("pickled", travelling)):
        repo = fx.make_repo(tmp_path / name)
        opts = ExecuteOptions(scripted(), RunSettings(command_env=ENV, jobs=2), run_job=run_job)
        state = execute(Plan.model_validate(fx.plan()), repo, opts)
        assert state.status == "succeeded", {t: r.message for t, r in state.tasks.items()}
        assert sorted(fx.task_trailers(repo)) == ["a", "b", "c"]
        trees.append(fx.branch_tree(repo))
    assert trees[0] == trees[1]
    assert sorted(seen) == ["a", "b", "c"]


def test_ablations_are_one_policy() -> None:
    plan = Plan.model_validate(fx.plan())
    node = plan.task("a")
    none = Ablations()
    assert none.scopes(node).read == node.read_scope
    assert none.scopes(node).deny is None
    assert none.audit_scope(node) == node.write_scope
    assert not none.eager_reads
    wide = Ablations.of(["scoping"])
    assert wide.scopes(node).read == ["**"]
    assert wide.scopes(node).write == node.write_scope
    assert wide.prompt_budget(16_000, 200_000) == 200_000
    assert wide.eager_reads
    open_ = Ablations.of(["firewall"])
    assert open_.scopes(node).deny == ()
    assert open_.audit_scope(node) == ["**"]
    with pytest.raises(Exception, match="unknown ablation 'nope'"):
        Ablations.of(["nope"])


def test_status_changes_only_through_the_transitions() -> None:
    record = TaskResult(task_id="t")
    with pytest.raises(InternalError, match="cannot land a pending node"):
        record.land("abc")
    record.start()
    assert (record.status, record.attempts) == ("running", 1)
    record.fail("tests", "exit 1")
    with pytest.raises(InternalError, match="cannot skip a failed node"):
        record.skip("x")
    record.start()  # a retry
    record.land("abc")
    assert (record.status, record.commit, record.reason) == ("succeeded", "abc", None)
    with pytest.raises(InternalError):
        record.start()
    other = TaskResult(task_id="u")
    other.skip("t")
    assert (other.status, other.reason) == ("skipped", "dependency_failed")
    other.interrupt("interrupted: Ctrl-C")
    assert (other.status, other.skipped_because) == ("pending", None)


def test_the_crash_point_variable_is_read_only_by_the_test_launcher() -> None:
    package = Path(__file__).parents[1] / "anti_sprawl"
    readers = [p for p in package.rglob("*.py") if "ANTI_SPRAWL_CRASH_AT" in p.read_text()]
    assert readers == []
    launcher = Path(__file__).with_name("crash_launcher.py")
    done = subprocess.run(
        [sys.executable, str(launcher), "--version"],
        env={**os.environ, "ANTI_SPRAWL_CRASH_AT": "no_such_point"},
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0
    assert "unknown crash point 'no_such_point'" in done.stderr
