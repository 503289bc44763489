"""How ``show`` and ``validate`` scale with the input: requirement size and node count.

Each case writes a plan file, then times what the CLI command does with it, in process:
read and parse the file (with its limits), validate, render (the layered tree for ``show``,
the report for ``validate``) into an in-memory console. Two sizes per dimension, ten times
apart: 1 MB vs 10 MB of requirement (one long line, the worst case for rendering), 10k vs
100k nodes. "growth" is the time ratio divided by the size ratio: 1.0 is linear, 10 would
be quadratic. Before the clipping in ``views/plan.py``, ``show`` on a 10 MB requirement took
minutes (quadratic); the command line here prints what this machine measures now.
"""

from __future__ import annotations

import io
import json
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console

from anti_sprawl.plan.model import load_plan_data
from anti_sprawl.plan.validate import validate
from anti_sprawl.views.plan import render_plan_tree, render_report


def requirement_plan(megabytes: int) -> dict[str, Any]:
    words = megabytes * 1024 * 1024 // 5
    task = {"task_id": "a", "name": "one node", "goal": "g", "write_scope": ["x.py"]}
    return {"plan_id": "req", "requirement": "word " * words, "tasks": [task]}


def node_plan(n: int, seed: int = 7) -> dict[str, Any]:
    """A random DAG: each node writes its own module, reads its dependencies' modules."""
    rng = random.Random(seed)
    tasks = []
    for i in range(n):
        deps = sorted({f"t{rng.randrange(i)}" for _ in range(min(i, rng.randint(0, 3)))})
        tasks.append(
            {
                "task_id": f"t{i}",
                "name": f"node {i}",
                "goal": "generated",
                "dependencies": deps,
                "read_scope": ["shared/", *(f"pkg{int(d[1:]) % 50}/mod_{d[1:]}.py" for d in deps)],
                "write_scope": [f"pkg{i % 50}/mod_{i}.py"],
            }
        )
    return {"plan_id": f"n{n}", "requirement": "benchmark", "tasks": tasks}


def show(path: Path) -> None:
    report = validate(load_plan_data(path))
    assert report.plan is not None, report.errors[:3]
    assert report.valid, report.errors[:3]
    render_plan_tree(report.plan, Console(file=io.StringIO(), width=100))


def check(path: Path) -> None:
    report = validate(load_plan_data(path))
    assert report.valid, report.errors[:3]
    render_report(report, Console(file=io.StringIO(), width=100), source=str(path))


def timed(fn: Callable[[Path], None], path: Path) -> float:
    start = time.perf_counter()
    fn(path)
    return time.perf_counter() - start


def compare(label: str, small: dict[str, Any], large: dict[str, Any], ratio: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for name, data in (("small", small), ("large", large)):
            path = Path(tmp) / f"{name}.json"
            path.write_text(json.dumps(data))
            paths.append(path)
        sizes = [p.stat().st_size / 1e6 for p in paths]
        for command, fn in (("show", show), ("validate", check)):
            t_small, t_large = (timed(fn, p) for p in paths)
            growth = (t_large / t_small) / ratio
            print(
                f"{command:8} {label}: {t_small:7.2f} s ({sizes[0]:5.1f} MB file) -> "
                f"{t_large:7.2f} s ({sizes[1]:5.1f} MB); growth {growth:.2f} (1.0 = linear)"
            )


def main() -> None:
    compare("requirement 1 MB -> 10 MB", requirement_plan(1), requirement_plan(10), 10)
    compare("10k -> 100k nodes        ", node_plan(10_000), node_plan(100_000), 10)


if __name__ == "__main__":
    main()
