"""What the command line costs at scale, as ratios measured in one run (issue 29, items 3 and 4,
and the ``inspect`` goal): each pair timed here, on this machine, in this same run.

1. ``validate --repo`` vs plain ``validate`` of one 1,000-node plan (validate_scale.py's random
   DAG: each node writes its own module and test, reads ``shared/`` and its dependencies'
   modules) on a repository holding those modules: the --repo run assembles every node's first
   prompt at HEAD (context/start_view.py). Target: at most 3x.
2. ``anti-sprawl --help`` and ``--version`` vs ``python -c pass``. Target: at most 3x.
3. ``inspect`` vs ``status`` of a finished 320-node run (long_run.py's scaled_views: a real
   20-node scripted run with no test command, its records and manifests copied to 320 nodes).
   Target: at most 3x.

Every command is the real CLI in a fresh interpreter; CPU seconds (user + system of the
child) are the figure that counts on a shared machine, wall seconds are shown too; the fastest
of several rounds is kept, the two commands of a pair in alternate rounds (so both see the
same load). The children run with their bytecode cached, as an installed package has it
(``pip install`` compiles it; a checkout writes it on its first run): a
``PYTHONDONTWRITEBYTECODE`` in the environment made every round compile every module of ours
from source, a cost no user pays that weighed on the plain command's side of each ratio more
than on the other's. The cache is a temporary ``PYTHONPYCACHEPREFIX``, written by one
unmeasured round of each command. Prints figures; asserts nothing about time.
Run: ``.venv/bin/python benchmarks/cli_scale.py [--nodes 1000] [--run-nodes 320]``.
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from long_run import scaled_views
from validate_scale import make_plan

IDENT = ["-c", "user.name=bench", "-c", "user.email=bench@localhost"]
SCRIPT = Path(sys.executable).parent / "anti-sprawl"


def child_env(cache: Path) -> dict[str, str]:
    """The environment with bytecode cached under ``cache`` (see the module docstring)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPYCACHEPREFIX": str(cache)}


ENV = dict(os.environ)  # main() sets the cached-bytecode environment


def once(argv: list[str], ok: tuple[int, ...] = (0,)) -> tuple[float, float]:
    """Wall and CPU seconds of one fresh process running ``argv``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900, env=ENV)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in ok:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr[-800:]}")
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def timed(argv: list[str], rounds: int, ok: tuple[int, ...] = (0,)) -> tuple[float, float]:
    """Fastest wall and CPU seconds of ``argv`` over ``rounds`` fresh processes."""
    return pair_timed([(argv, rounds)], ok)[0]


def pair_timed(
    commands: list[tuple[list[str], int]], ok: tuple[int, ...] = (0,)
) -> list[tuple[float, float]]:
    """Fastest wall and CPU seconds of each ``(argv, rounds)``, the commands run in alternate
    rounds after one unmeasured round each (it writes their bytecode)."""
    best = [(float("inf"), float("inf")) for _ in commands]
    for argv, _ in commands:
        once(argv, ok)
    for i in range(max(rounds for _, rounds in commands)):
        for k, (argv, rounds) in enumerate(commands):
            if i < rounds:
                wall, cpu = once(argv, ok)
                best[k] = (min(best[k][0], wall), min(best[k][1], cpu))
    return best


def scope_repo(root: Path, n: int) -> tuple[Path, Path]:
    """A repository with every module the ``n``-node plan names, and the plan file."""
    repo = root / "repo"
    (repo / "shared").mkdir(parents=True)
    helpers = "".join(
        f"def helper_{k}(x):\n    '''Add {k}.'''\n    return x + {k}\n\n" for k in range(40)
    )
    (repo / "shared" / "base.py").write_text(helpers)
    for i in range(n):
        module = repo / f"pkg{i % 50}" / f"mod_{i}.py"
        module.parent.mkdir(exist_ok=True)
        classes = "".join(
            f"class C{k}:\n    def m(self, a):\n        return helper_1(a) + {k}\n\n"
            for k in range(10)
        )
        module.write_text(f"from shared.base import helper_1\n\n{classes}")
        tests = repo / "tests" / f"pkg{i % 50}"
        tests.mkdir(parents=True, exist_ok=True)
        (tests / "__init__.py").write_text("")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], [*IDENT, "commit", "-qm", "base"]):
        subprocess.run(["git", *args], cwd=repo, check=True)
    plan = root / "plan.json"
    plan.write_text(json.dumps(make_plan(n)[0]))
    return repo, plan


def ratio(line: str, a: tuple[float, float], b: tuple[float, float], target: float) -> None:
    cpu, wall = a[1] / b[1], a[0] / b[0]
    verdict = "met" if cpu <= target else "NOT met"
    print(
        f"{line:44} {a[1]:7.2f} / {b[1]:7.2f} s CPU = {cpu:5.2f}x  "
        f"(wall {a[0]:6.2f} / {b[0]:6.2f} s = {wall:5.2f}x)  target <= {target:g}x: {verdict}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=1000, help="nodes of the validated plan")
    ap.add_argument("--run-nodes", type=int, default=320, help="nodes of the inspected run")
    args = ap.parse_args()
    cli = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "anti_sprawl"]
    print(f"(machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; fastest of rounds)")
    pycache = tempfile.TemporaryDirectory(prefix="cli-scale-pycache-")
    ENV.clear()
    ENV.update(child_env(Path(pycache.name)))
    with tempfile.TemporaryDirectory(prefix="cli-scale-") as tmp:
        repo, plan = scope_repo(Path(tmp), args.nodes)
        plain, with_repo = pair_timed(
            [
                ([*cli, "validate", str(plan)], 3),
                ([*cli, "validate", str(plan), "--repo", str(repo)], 2),
            ]
        )
        ratio(f"validate --repo vs validate, {args.nodes:,} nodes", with_repo, plain, 3)
    bare = timed([sys.executable, "-c", "pass"], 10)
    ratio("--help vs python -c pass", timed([*cli, "--help"], 10), bare, 3)
    ratio("--version vs python -c pass", timed([*cli, "--version"], 10), bare, 3)
    with tempfile.TemporaryDirectory(prefix="cli-scale-run-") as tmp:
        views = scaled_views(args.run_nodes, Path(tmp))
    ratio(
        f"inspect vs status, {args.run_nodes}-node run",
        tuple(views["inspect_s"]),  # type: ignore[arg-type]
        tuple(views["status_s"]),  # type: ignore[arg-type]
        3,
    )


if __name__ == "__main__":
    main()
