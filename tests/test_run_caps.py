"""Run-level caps and edited plans on resume, through the real CLI on real git repositories.

- ``execute --max-tokens N`` stops before the model call that could push the run past N; the
  run ends ``interrupted`` and ``resume --max-tokens M`` (M > N) finishes it.
- ``resume RUN_ID --plan FILE`` runs an edited plan: a node that failed for its budget
  completes with a raised one; a change to a node already on the branch is refused (exit 2).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from anti_sprawl.cli.app import app

from . import e2e_fixture as fx

runner = CliRunner()
BIG = "pkg/data.txt"


pytestmark = pytest.mark.usefixtures("python_on_path")


def cli(*args: str) -> Any:
    return runner.invoke(app, list(args))


def run_json(result: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def manifests(repo: Path, run_id: str, task: str) -> list[dict[str, Any]]:
    folder = repo / ".anti-sprawl" / "runs" / run_id / "manifests" / task
    files = sorted(folder.glob("*.json"), key=lambda p: int(p.stem))
    return [json.loads(p.read_text()) for p in files]


# --- --max-tokens ------------------------------------------------------------------------


def test_max_tokens_stops_before_the_crossing_call_and_resume_finishes(
    tmp_path: Path, executor_args: list[str]
) -> None:
    # what an uncapped run spends, measured once on a twin repository
    twin = fx.make_repo(tmp_path / "twin")
    plan_path, script_path = fx.write_inputs(tmp_path, fx.plan(), fx.script())
    base = ["--script", str(script_path), "--json", "--jobs", "1"]
    full = run_json(cli("execute", str(plan_path), "--repo", str(twin), *base))
    assert full["status"] == "succeeded"
    per_node = {t: full["tasks"][t]["tokens"] for t in "abc"}
    total = lambda u: u["input_tokens"] + u["output_tokens"]  # noqa: E731
    assert full["tokens"]["input_tokens"] == sum(u["input_tokens"] for u in per_node.values())
    # a cap that lets node a finish and stops b halfway
    cap = total(per_node["a"]) + total(per_node["b"]) // 2

    repo = fx.make_repo(tmp_path / "real")
    # On Dask, one job at a time gets all that is left of the cap: the same stop as here.
    base += executor_args
    capped = cli("execute", str(plan_path), "--repo", str(repo), *base, "--max-tokens", str(cap))
    assert capped.exit_code == 1, capped.output
    state = run_json(capped)
    assert state["status"] == "interrupted"
    assert state["max_tokens"] == cap
    assert {t: r["status"] for t, r in state["tasks"].items()} == {
        "a": "succeeded",
        "b": "pending",
        "c": "pending",
    }
    assert "--max-tokens" in state["stopped_by"]
    assert "--max-tokens" in state["tasks"]["b"]["message"]
    spent = total(state["tokens"])
    assert spent <= cap
    # b's calls before the refusal; the refused one would have been at least as big as the
    # last one made, plus the least output: over what was left
    calls_b = manifests(repo, state["run_id"], "b")
    assert 0 < len(calls_b) < full["tasks"]["b"]["calls"]
    assert spent + calls_b[-1]["total_tokens"] + 64 > cap
    assert fx.task_trailers(repo) == ["a"]

    resumed = cli(
        "resume",
        state["run_id"],
        "--repo",
        str(repo),
        "--script",
        str(script_path),
        "--json",
        "--max-tokens",
        str(cap * 10),
        *executor_args,
    )
    assert resumed.exit_code == 0, resumed.output
    final = run_json(resumed)
    assert final["status"] == "succeeded"
    assert final["max_tokens"] == cap * 10
    assert final["stopped_by"] is None
    assert sorted(fx.task_trailers(repo)) == ["a", "b", "c"]
    # the run's total counts every call of both sessions, the refused b attempt included
    assert total(final["tokens"]) == spent + total(per_node["b"]) + total(per_node["c"])


def test_a_plain_resume_after_a_cap_stop_gets_the_same_allowance_again(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path)
    plan_path, script_path = fx.write_inputs(tmp_path, fx.plan(), fx.script())
    args = ["--repo", str(repo), "--script", str(script_path), "--json"]
    first = run_json(cli("execute", str(plan_path), *args, "--max-tokens", "6000"))
    assert first["status"] == "interrupted"
    spent = first["tokens"]["input_tokens"] + first["tokens"]["output_tokens"]
    verdict = cli("status", first["run_id"], "--repo", str(repo))
    assert "6,000" in verdict.output
    assert f"to finish it:\n  anti-sprawl resume {first['run_id']} --repo {repo}\n" in (
        verdict.output
    )
    # nothing but the run id: the run's script, and 6,000 tokens more, said so on stderr
    again = cli("resume", first["run_id"], "--repo", str(repo), "--json")
    assert "this session may spend 6,000 more tokens" in again.stderr
    state = run_json(again)
    assert state["max_tokens"] == spent + 6_000
    assert state["tokens"]["input_tokens"] + state["tokens"]["output_tokens"] > spent
    # a cap given on the command line is the cap
    third = cli("resume", first["run_id"], "--repo", str(repo), "--max-tokens", "1", "--json")
    assert run_json(third)["max_tokens"] == 1
    assert "more tokens" not in third.stderr


def test_max_tokens_must_be_positive(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path)
    plan_path, _ = fx.write_inputs(tmp_path, fx.plan(), fx.script())
    bad = cli("execute", str(plan_path), "--repo", str(repo), "--max-tokens", "0")
    assert bad.exit_code == 2
    assert "Traceback" not in bad.output


# --- resume --plan -----------------------------------------------------------------------


def repo_with_big_file(root: Path) -> Path:
    repo = fx.make_repo(root)
    # just under the size at which an observation is cut: each read comes back whole
    rows = (f"{i:04d} alpha {i * 7919 % 10007} beta {i * 104729 % 997} gamma\n" for i in range(200))
    (repo / BIG).write_text("".join(rows)[:5_900])
    fx.git(repo, "add", BIG)
    fx.git(repo, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "-m", "data")
    return repo


def budget_plan(b_budget: int) -> dict[str, Any]:
    plan = fx.plan()
    b = plan["tasks"][1]
    b["read_scope"] = ["pkg/base.py", BIG]
    b["token_budget"] = b_budget
    b["max_attempts"] = 1  # a retry would continue the script and pass without the raise
    return plan


def budget_script() -> dict[str, Any]:
    # b reads the big file four times in one turn: the next call must carry all four
    reads = [{"tool": "read_file", "args": {"path": BIG}}] * 4
    return fx.script(b=[reads, *fx.worker_turns("pkg/b.py", "B = 2\n")[1:]])


def test_resume_with_a_raised_budget_completes_a_node_that_failed_for_it(
    tmp_path: Path, executor_args: list[str]
) -> None:
    repo = repo_with_big_file(tmp_path)
    plan_path, script_path = fx.write_inputs(tmp_path, budget_plan(5_000), budget_script())
    args = ["--repo", str(repo), "--script", str(script_path), "--json", *executor_args]
    first = run_json(cli("execute", str(plan_path), *args))
    assert first["status"] == "failed"
    assert (first["tasks"]["b"]["status"], first["tasks"]["b"]["reason"]) == ("failed", "budget")
    assert first["tasks"]["c"]["status"] == "skipped"
    landed_a = fx.git(repo, "rev-parse", "anti-sprawl/demo")

    edited = tmp_path / "edited.yaml"
    edited.write_text(yaml.safe_dump(budget_plan(40_000)))
    resumed = cli("resume", first["run_id"], *args, "--plan", str(edited))
    assert resumed.exit_code == 0, resumed.output
    final = run_json(resumed)
    assert final["status"] == "succeeded"
    assert final["tasks"]["b"]["token_budget"] == 40_000
    assert final["plan"]["tasks"][1]["token_budget"] == 40_000
    # the edit is in the journal, with the plan it replaced
    [revision] = final["revisions"]
    assert revision["changed"] == ["b"]
    assert revision["source"] == str(edited)
    assert revision["previous"]["tasks"][1]["token_budget"] == 5_000
    # a was not redone: its commit is still the first on the branch
    assert fx.task_trailers(repo).count("a") == 1
    assert fx.git(repo, "merge-base", "--is-ancestor", landed_a, "anti-sprawl/demo") == ""
    assert sorted(fx.task_trailers(repo)) == ["a", "b", "c"]


@pytest.mark.parametrize(
    ("edit", "what"),
    [
        (lambda a: a.update(write_scope=["pkg/a.py", "pkg/extra.py"]), "write_scope"),
        (lambda a: a.update(read_scope=["pkg/base.py", "README.md"]), "read_scope"),
        (lambda a: a.update(dependencies=["b"]), "dependencies"),
        (lambda a: a.update(task_id="a2"), "must keep it"),
    ],
)
def test_resume_refuses_a_change_to_a_succeeded_node(tmp_path: Path, edit: Any, what: str) -> None:
    repo = repo_with_big_file(tmp_path)
    plan_path, script_path = fx.write_inputs(tmp_path, budget_plan(5_000), budget_script())
    args = ["--repo", str(repo), "--script", str(script_path)]
    first = run_json(cli("execute", str(plan_path), *args, "--json"))
    journal = repo / ".anti-sprawl" / "runs" / first["run_id"] / "run.json"
    before = journal.read_bytes()
    plan = budget_plan(40_000)
    edit(plan["tasks"][0])
    if plan["tasks"][0]["task_id"] == "a2":
        plan["tasks"][2]["dependencies"] = ["a2", "b"]
    edited = tmp_path / "edited.yaml"
    edited.write_text(yaml.safe_dump(plan))
    refused = cli("resume", first["run_id"], *args, "--plan", str(edited))
    assert refused.exit_code == 2, refused.output
    assert "Traceback" not in refused.output
    assert "'a'" in refused.output
    assert what in refused.output
    assert journal.read_bytes() == before  # nothing recorded, nothing run
    assert fx.task_trailers(repo) == ["a"]


def test_resume_refuses_an_invalid_or_foreign_plan(tmp_path: Path) -> None:
    repo = repo_with_big_file(tmp_path)
    plan_path, script_path = fx.write_inputs(tmp_path, budget_plan(5_000), budget_script())
    args = ["--repo", str(repo), "--script", str(script_path)]
    first = run_json(cli("execute", str(plan_path), *args, "--json"))
    cyclic = budget_plan(40_000)
    cyclic["tasks"][1]["dependencies"] = ["c"]
    (tmp_path / "cyclic.yaml").write_text(yaml.safe_dump(cyclic))
    bad = cli("resume", first["run_id"], *args, "--plan", str(tmp_path / "cyclic.yaml"))
    assert bad.exit_code == 2
    assert "not a valid plan" in bad.output
    other = {**budget_plan(40_000), "plan_id": "other"}
    (tmp_path / "other.yaml").write_text(yaml.safe_dump(other))
    foreign = cli("resume", first["run_id"], *args, "--plan", str(tmp_path / "other.yaml"))
    assert foreign.exit_code == 2
    assert "'other'" in foreign.output


def test_a_journal_with_the_old_token_names_still_loads(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path)
    plan_path, script_path = fx.write_inputs(tmp_path, fx.plan(), fx.script())
    args = ["--repo", str(repo), "--script", str(script_path), "--json"]
    state = run_json(cli("execute", str(plan_path), *args))
    journal = repo / ".anti-sprawl" / "runs" / state["run_id"] / "run.json"
    data = json.loads(journal.read_text())
    for record in data["tasks"].values():  # as 0.1 wrote them
        t = record["tokens"]
        record["tokens"] = {
            "input": t["input_tokens"],
            "output": t["output_tokens"],
            "cache_read": t["cache_read_tokens"],
            "cache_write": t["cache_write_tokens"],
        }
    for key in ("tokens", "max_tokens", "stopped_by", "revisions"):
        del data[key]
    journal.write_text(json.dumps(data))
    shown = cli("status", state["run_id"], "--repo", str(repo), "--json")
    assert shown.exit_code == 0, shown.output
    assert run_json(shown)["tasks"]["a"]["tokens"] == state["tasks"]["a"]["tokens"]
