"""How plan validation scales: plans of 1k and 10k nodes, time and its growth ratio.

Each generated node writes its own module and test, reads its dependencies' modules plus a
shared read-only package, and depends on up to three earlier nodes (a random DAG). Validation
should grow near-linearly with nodes + edges: the ratio of times should be close to the ratio
of sizes (10x), far from the 100x a naive all-pairs overlap check would give.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from anti_sprawl.validate import validate


def make_plan(n: int, seed: int = 7) -> tuple[dict[str, Any], int]:
    rng = random.Random(seed)
    tasks: list[dict[str, Any]] = []
    edges = 0
    for i in range(n):
        deps = sorted({f"t{rng.randrange(i)}" for _ in range(min(i, rng.randint(0, 3)))})
        edges += len(deps)
        pkg = f"pkg{i % 50}"
        tasks.append(
            {
                "task_id": f"t{i}",
                "name": f"node {i}",
                "goal": "generated",
                "dependencies": deps,
                "read_scope": ["shared/", *(f"pkg{int(d[1:]) % 50}/mod_{d[1:]}.py" for d in deps)],
                "write_scope": [f"{pkg}/mod_{i}.py", f"tests/{pkg}/test_mod_{i}.py"],
                "token_budget": 40_000,
                "max_tool_calls": 20,
            }
        )
    return {"plan_id": f"bench{n}", "requirement": "benchmark", "tasks": tasks}, edges


def measure(n: int, repeats: int = 3) -> tuple[float, int]:
    plan, edges = make_plan(n)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        report = validate(plan)
        best = min(best, time.perf_counter() - start)
        assert report.valid, report.errors[:3]
    return best, n + edges


def main() -> None:
    small_t, small_size = measure(1_000)
    large_t, large_size = measure(10_000)
    print(f"1k nodes:  {small_t * 1000:8.1f} ms  (nodes+edges = {small_size:,})")
    print(f"10k nodes: {large_t * 1000:8.1f} ms  (nodes+edges = {large_size:,})")
    size_ratio = large_size / small_size
    time_ratio = large_t / small_t
    print(f"size ratio {size_ratio:.1f}x, time ratio {time_ratio:.1f}x")
    print(
        f"growth relative to linear: {time_ratio / size_ratio:.2f} (1.0 = linear; ~10 = quadratic)"
    )


if __name__ == "__main__":
    main()
