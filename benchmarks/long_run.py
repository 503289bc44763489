"""Long runs: does recording a node cost the same at node 3,000 as at node 3? (issue 22, item 9)

For each size (default 100, 1,000 and 3,000) a plan of that many independent nodes, each
writing one file, runs with the scripted provider and no test command at ``--jobs 8``, in a
child process of its own (so its peak RSS is its own). Worktrees are sparse (``--sparse``: a
node checks out its scope only), so what is measured is the orchestration (journal, scheduler,
landing), not the checkout of the files the earlier nodes added: with full checkouts a node's
cost grows with the tree (measured here: 40 nodes over a 3,000-file tree took ~10 s a node in
full checkouts, ~1.1 s sparse). ``--full-checkout`` measures that instead. Printed per size: wall time, seconds
per node, peak RSS, the size of ``.anti-sprawl/``, the bytes the journal wrote per node
(``Journal.bytes_written_total``: snapshots and appended events, counted as written), the
CPU seconds per node (the run's process and the git processes it ran: on a shared machine the
wall time also counts the waits for other work), and
the wall and CPU time of ``status RUN``, ``status RUN --json`` and ``inspect RUN`` (the real
CLI, a fresh interpreter each, the fastest of 3), then
the ratios of the largest size to the smallest. Every node must land exactly once (one commit
with its task trailer on the run branch).

Where the files go matters to git, not to the orchestration: by default every node's file is
in ``mod/``, so each node's commit and each landing write a ``mod/`` tree of all the files so
far and every worktree's index holds them all (git's work per node grows with the plan:
measured with the git columns, 0.041 s of git CPU a node at 100 nodes, 0.053 s at 1,000).
``--per-dir 100`` puts 100 files in a directory (``mod/dKK/``), as a real tree would.

Prints figures measured in this run; asserts nothing about time (machines vary).
Run: ``.venv/bin/python benchmarks/long_run.py [--sizes 100,1000,3000] [--jobs 8]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from anti_sprawl.git.layout import StateLayout
from anti_sprawl.plan.model import Plan
from anti_sprawl.providers.scripted import Script, ScriptedProvider
from anti_sprawl.run.journal import Journal, read_state
from anti_sprawl.run.runner import ExecuteOptions, RunSettings, execute

CLI = [sys.executable, "-m", "anti_sprawl"]
IDENT = ["-c", "user.name=bench", "-c", "user.email=bench@localhost"]
ROUNDS = 3


def inputs(n: int, per_dir: int = 0) -> tuple[Plan, Script]:
    """``n`` independent nodes, each writing ``mod/nNNNN.py`` in two scripted turns (with
    ``per_dir``, ``mod/dKK/nNNNN.py``: that many files a directory)."""
    tasks, workers = [], {}
    for i in range(n):
        where = f"mod/d{i // per_dir:02d}" if per_dir else "mod"
        tid, path = f"n{i:04d}", f"{where}/n{i:04d}.py"
        tasks.append(
            {
                "task_id": tid,
                "name": f"Write {path}",
                "goal": f"Create {path} with one constant",
                "dependencies": [],
                "read_scope": [],
                "write_scope": [path],
                "token_budget": 20_000,
                "max_tool_calls": 4,
            }
        )
        workers[tid] = [
            {"tool": "write_file", "args": {"path": path, "content": f"N = {i}\n"}},
            {"tool": "finish", "args": {"summary": f"created {path}"}},
        ]
    plan = Plan.model_validate(
        {"plan_id": f"long{n}", "requirement": "Many modules", "tasks": tasks}
    )
    return plan, Script.from_data({"workers": workers})


def make_repo(root: Path, plan: Plan) -> Path:
    """A repository with the directories the plan's nodes write in (a package each)."""
    repo = root / "repo"
    for where in {Path(path).parent for node in plan.tasks for path in node.write_scope}:
        (repo / where).mkdir(parents=True, exist_ok=True)
        (repo / where / "__init__.py").write_text("")
    (repo / "README.md").write_text("# long run\n")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], [*IDENT, "commit", "-qm", "base"]):
        subprocess.run(["git", *args], cwd=repo, check=True)
    return repo


def tree_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def one_run(n: int, jobs: int, root: Path, sparse: bool, per_dir: int = 0) -> dict[str, Any]:
    """The child: one run of ``n`` nodes; its figures as a dict."""
    plan, script = inputs(n, per_dir)
    repo = make_repo(root, plan)
    opts = ExecuteOptions(ScriptedProvider(script), RunSettings(jobs=jobs, sparse=sparse))
    before = Journal.bytes_written_total
    start = time.perf_counter()
    state = execute(plan, repo, opts)
    wall = time.perf_counter() - start
    trailers = subprocess.run(
        ["git", "log", "--format=%(trailers:key=Anti-Sprawl-Task,valueonly)", state.branch],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    counts = Counter(trailers)
    own = resource.getrusage(resource.RUSAGE_SELF)
    git = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "n": n,
        "repo": str(repo),
        "run_id": state.run_id,
        "status": state.status,
        "landed_once": sorted(counts) == sorted(t.task_id for t in plan.tasks)
        and set(counts.values()) == {1},
        "wall": wall,
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "state_mb": tree_bytes(repo / ".anti-sprawl") / 1e6,
        "journal_bytes": Journal.bytes_written_total - before,
        "cpu_python": own.ru_utime + own.ru_stime,
        "cpu_git": git.ru_utime + git.ru_stime,
        # What did not succeed, and why: the run's directory is gone when the table prints.
        "not_succeeded": [
            f"{r.task_id}: {r.status} ({r.reason}): {r.message[:300]}"
            for r in state.tasks.values()
            if r.status != "succeeded"
        ][:5],
    }


def timed_cli(*args: str) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of one CLI command in a fresh interpreter: on a
    shared machine the CPU time is what the command costs, the wall time what it waited too."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=600)
    took = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return took, cpu


def measure(n: int, jobs: int, root: Path, full: bool, per_dir: int) -> dict[str, Any]:
    args = ["--child", str(n), "--jobs", str(jobs), "--root", str(root), "--per-dir", str(per_dir)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    child = subprocess.run(
        [sys.executable, __file__, *args, *(["--full-checkout"] if full else [])],
        capture_output=True,
        text=True,
        check=False,
    )
    if child.returncode != 0:
        raise SystemExit(f"the {n}-node run failed:\n{child.stderr[-3000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    out: dict[str, Any] = json.loads(child.stdout.strip().splitlines()[-1])
    # The run's process and every git process it waited for (setup and the landing check
    # included): on a shared machine, what the run cost rather than how long it waited.
    out["cpu"] = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    time_views(out)
    return out


def time_views(out: dict[str, Any]) -> None:
    """``status``, ``status --json`` and ``inspect`` of the run ``out`` names, into ``out``:
    3 rounds each, the fastest kept (a fresh interpreter on a loaded machine waits at random)."""
    for key, extra in (("status_s", ()), ("status_json_s", ("--json",)), ("inspect_s", ())):
        command = "inspect" if key == "inspect_s" else "status"
        cli_args = (command, out["run_id"], "--repo", out["repo"], *extra)
        out[key] = min(timed_cli(*cli_args) for _ in range(ROUNDS))


def scaled_views(n: int, root: Path) -> dict[str, Any]:
    """A finished ``n``-node run directory built from a real 20-node run, for timing the views
    when the ``n``-node run itself takes longer than the machine allows: each node's record
    and manifests are a real node's, with the id changed; the journal is written by
    ``Journal.save``. Nothing is landed, so this times ``status`` and ``inspect`` only."""
    small = one_run(20, 8, root, sparse=True)
    repo, real_id = Path(small["repo"]), small["run_id"]
    layout = StateLayout.checked(repo)
    real, _ = read_state(layout.run(real_id))
    plan, _ = inputs(n)
    models = list(real.tasks.values())
    tasks = {}
    for i, node in enumerate(plan.tasks):
        model = models[i % len(models)]
        tasks[node.task_id] = model.model_copy(update={"task_id": node.task_id, "name": node.name})
    run_id = f"scaled{n}"
    state = real.model_copy(update={"run_id": run_id, "plan": plan, "tasks": tasks, "seq": 0})
    paths = layout.run(run_id)
    Journal(paths, state).save()
    for i, node in enumerate(plan.tasks):
        source = layout.run(real_id).manifests / models[i % len(models)].task_id
        (paths.manifests / node.task_id).mkdir(parents=True)
        for call in source.glob("*.json"):
            data = json.loads(call.read_text())
            data["task_id"], data["call_id"] = node.task_id, f"{node.task_id}-{data['n']}"
            (paths.manifests / node.task_id / call.name).write_text(json.dumps(data))
    out = {"n": n, "repo": str(repo), "run_id": run_id}
    time_views(out)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="100,1000,3000", help="comma-separated node counts")
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--full-checkout", action="store_true", help="nodes check out the whole tree")
    ap.add_argument(
        "--views-of",
        type=int,
        help="only time status/inspect of a finished run this big, "
        "built from a real 20-node run's records and manifests (see scaled_views)",
    )
    ap.add_argument(
        "--per-dir",
        type=int,
        default=0,
        help="files per directory (mod/dKK/); 0: every file in mod/, whose tree git then "
        "rewrites whole at every commit (see the module docstring)",
    )
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        sparse = not args.full_checkout
        print(json.dumps(one_run(args.child, args.jobs, args.root, sparse, args.per_dir)))
        return
    if args.views_of is not None:
        with tempfile.TemporaryDirectory(prefix="long-run-") as tmp:
            r = scaled_views(args.views_of, Path(tmp))
        print(
            f"views of a {args.views_of}-node run (wall/CPU s): status {_pair(r['status_s'])}, "
            f"status --json {_pair(r['status_json_s'])}, inspect {_pair(r['inspect_s'])} "
            "(target: under 2 s)"
        )
        return
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    checkout = "full checkouts" if args.full_checkout else "sparse worktrees"
    checkout += f", {args.per_dir} files a directory" if args.per_dir else ", one directory"
    print(
        f"== {', '.join(map(str, sizes))} independent scripted nodes, --jobs {args.jobs}, {checkout}"
    )
    print(f"   (machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f})")
    header = (
        f"{'nodes':>6} {'wall s':>8} {'s/node':>7} {'CPU s/node':>10} {'(py+git)':>13} {'RSS MB':>7} {'state MB':>9} "
        f"{'journal B/node':>15} {'status s':>11} {'--json s':>11} {'inspect s':>11}  landed once"
    )
    print("   (status, status --json, inspect: wall/CPU seconds, each a fresh interpreter;")
    print("    CPU s/node: the run's process and its git processes, split python+git)")
    print(header)
    rows = []
    with tempfile.TemporaryDirectory(prefix="long-run-") as tmp:
        for n in sizes:
            root = Path(tmp) / str(n)
            root.mkdir()
            r = measure(n, args.jobs, root, args.full_checkout, args.per_dir)
            r["per_node"], r["journal_per_node"] = r["wall"] / n, r["journal_bytes"] / n
            r["cpu_per_node"] = r["cpu"] / n
            rows.append(r)
            print(
                f"{n:>6} {r['wall']:>8.1f} {r['per_node']:>7.3f} {r['cpu_per_node']:>10.3f} "
                f"({r['cpu_python'] / n:.3f}+{r['cpu_git'] / n:.3f}) {r['rss_mb']:>7.0f} "
                f"{r['state_mb']:>9.1f} {r['journal_per_node']:>15,.0f} {_pair(r['status_s'])} "
                f"{_pair(r['status_json_s'])} {_pair(r['inspect_s'])}  "
                f"{'yes' if r['landed_once'] else 'NO'} ({r['status']})",
                flush=True,
            )
            for line in r["not_succeeded"]:
                print(f"       {line}", flush=True)
    if len(rows) > 1:
        small, big = rows[0], rows[-1]
        print(
            f"{big['n']} vs {small['n']} nodes: seconds per node x"
            f"{big['per_node'] / small['per_node']:.2f} (CPU seconds per node x"
            f"{big['cpu_per_node'] / small['cpu_per_node']:.2f}), journal bytes per node x"
            f"{big['journal_per_node'] / small['journal_per_node']:.2f} (target: within 1.3x); "
            f"status {_pair(big['status_s'])} s, inspect {_pair(big['inspect_s'])} s "
            f"(wall/CPU) at {big['n']} nodes (target: under 2 s)"
        )


def _pair(times: tuple[float, float]) -> str:
    return f"{times[0]:5.2f}/{times[1]:5.2f}"


if __name__ == "__main__":
    main()
