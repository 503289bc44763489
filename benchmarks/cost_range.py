"""Does the estimate's range hold what a run really spends? The sample plan and the eval suite.

For every case of ``tasks/eval`` (the sample plan is its ``sample-event-bus`` case), the case
runs once with the scripted provider (baseline, kept on disk), then the estimate ``plan`` and
``execute --dry-run`` print is computed for the plan the run ended with, at the commit it
started from: per node, from the lean first call (built with the real assembler) to every
call at its per-call cap for every attempt. Printed per node: the range, what the run spent
over all its attempts, and whether the range contains it; nodes that never ran are listed
apart. Dollars use the bundled prices of one model (``--model``; the scripted provider itself
is free). Figures are measured in this run; nothing is asserted. Run:
``.venv/bin/python benchmarks/cost_range.py [--cases tasks/eval] [--model claude-sonnet-5-5]``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from anti_sprawl.eval import EvalOptions, load_cases, run_case
from anti_sprawl.planner.estimate import plan_estimate
from anti_sprawl.providers.limits import default_output_limit
from anti_sprawl.providers.prices import format_usd, load_prices
from anti_sprawl.run.journal import RunState


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=Path, default=Path("tasks/eval"))
    parser.add_argument("--model", default="claude-sonnet-5-5")
    args = parser.parse_args()
    prices = load_prices()
    provider = "openai" if args.model.startswith(("gpt", "o1", "o3", "o4")) else "anthropic"

    def output_limit(model: str) -> int:
        return default_output_limit(provider, model)

    print(f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.machine()}, {platform.node()}")
    print(f"dollars: {args.model} at {prices.described}")
    rows: list[tuple[str, str, int, int, int, bool, str]] = []
    never_ran: list[str] = []
    with tempfile.TemporaryDirectory(prefix="cost-range-") as tmp:
        for case in load_cases(args.cases):
            result = run_case(case, opts=EvalOptions(keep=Path(tmp) / case.name))
            if result.run_id is None:
                print(f"{case.name}: did not run ({result.error})")
                continue
            run_dir = next(Path(tmp, case.name).glob(f"*/repo/.anti-sprawl/runs/{result.run_id}"))
            state = RunState.model_validate(json.loads((run_dir / "run.json").read_text()))
            repo = run_dir.parents[2]
            est, _ = plan_estimate(
                state.plan, repo, state.base, lambda _: args.model, prices, output_limit
            )
            for node in est.tasks:
                record = state.tasks[node.task_id]
                spent = record.total_tokens.total or record.tokens.total
                if not record.attempts:
                    never_ran.append(f"{case.name}/{node.task_id} ({record.status})")
                    continue
                inside = node.low <= spent <= node.high
                dollars = f"{format_usd(node.usd_low)}..{format_usd(node.usd_high)}"
                rows.append(
                    (
                        f"{case.name}/{node.task_id}",
                        f"{record.status}, {record.attempts} attempt(s)",
                        node.low,
                        spent,
                        node.high,
                        inside,
                        dollars,
                    )
                )
    width = max(len(r[0]) for r in rows)
    print(f"{'node':<{width}}  {'low':>8}  {'spent':>8}  {'high':>10}  inside  dollars, outcome")
    for name, outcome, low, spent, high, inside, dollars in rows:
        mark = "yes" if inside else "NO"
        print(
            f"{name:<{width}}  {low:>8,}  {spent:>8,}  {high:>10,}  {mark:<6}  {dollars}, {outcome}"
        )
    held = sum(r[5] for r in rows)
    print(f"range contains the run's tokens for {held} of {len(rows)} nodes that ran")
    of_high = sorted(r[3] / r[4] for r in rows)
    of_low = sorted(r[3] / r[2] for r in rows if r[2])
    print(
        f"spent / high end: median {of_high[len(of_high) // 2]:.1%}, max {of_high[-1]:.1%}; "
        f"spent / low end: median {of_low[len(of_low) // 2]:.1f}x"
    )
    if never_ran:
        print(f"never ran (skipped or left pending): {', '.join(never_ran)}")
    return 0 if held == len(rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
