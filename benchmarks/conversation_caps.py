"""Long conversations under the per-call cap: how big each call gets, and what a node spends.

A scripted worker makes ``--calls`` varied tool calls (reads of ~2k-token files, searches,
whole-file rewrites, test runs, listings) and finishes, on a generated repository, through
the real loop, firewall and scripted provider. For each per-call cap it prints: whether the
node finished, the largest request actually sent (input + output cap, our exact count) as a
share of the cap, the total spent, the total as a share of ``cap × calls`` (the bound), how
many observations were masked and how many times the conversation was digested; and, for
comparison, what the same calls would cost if nothing were ever masked (every call re-sends
the whole conversation). Figures are measured in the run; nothing is asserted. Run:
``.venv/bin/python benchmarks/conversation_caps.py [--calls 40]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from anti_sprawl.agent.artifacts import ArtifactStore
from anti_sprawl.agent.worker import TestOutcome, WorkerContext, WorkerLimits, run_worker
from anti_sprawl.context.sections import DATA_POLICY, RULES
from anti_sprawl.fs.firewall import Firewall
from anti_sprawl.providers.base import SystemBlock, raw_request_tokens
from anti_sprawl.providers.scripted import Script, ScriptedProvider

CAPS = (8_000, 16_000, 32_000, 64_000)


def make_repo(root: Path) -> Path:
    repo = root / "repo"
    (repo / "pkg").mkdir(parents=True)
    for n in range(8):
        lines = [f'"""Module {n}: generated for the benchmark."""', ""]
        for k in range(60):
            lines += [f"def f{n}_{k}(x: int) -> int:", f"    return x * {k} + {n}  # step {k}", ""]
        (repo / "pkg" / f"m{n}.py").write_text("\n".join(lines) + "\n")
    (repo / "pkg" / "target.py").write_text("VALUE = 0\n")
    return repo


def turns(calls: int) -> list[Any]:
    out: list[Any] = []
    for i in range(calls - 1):
        kind = i % 5
        if kind in (0, 1):
            out.append({"tool": "read_file", "args": {"path": f"pkg/m{i % 8}.py"}})
        elif kind == 2:
            out.append(
                {"tool": "grep", "args": {"pattern": f"return x \\* {i % 60} ", "path": "pkg"}}
            )
        elif kind == 3:
            body = "".join(f"VALUE_{k} = {k * i}  # revision {i}\n" for k in range(80))
            out.append({"tool": "write_file", "args": {"path": "pkg/target.py", "content": body}})
        else:
            out.append({"tool": "run_tests", "args": {}})
    return [*out, {"tool": "finish", "args": {"summary": "done"}}]


def run_one(root: Path, cap: int, calls: int) -> dict[str, Any]:
    repo = make_repo(root / str(cap))
    tail = "\n".join(f"tests/test_pkg.py::test_{i} PASSED" for i in range(60))
    outcome = TestOutcome(command=["pytest", "-q"], exit_code=0, tail=tail)
    provider = ScriptedProvider(Script.from_data({"workers": {"n": turns(calls)}}))
    with Firewall(repo, ["pkg/**"], ["pkg/target.py"]) as fw:
        ctx = WorkerContext(
            task_id="n",
            provider=provider,
            firewall=fw,
            system=[SystemBlock(text=RULES), SystemBlock(text=DATA_POLICY, cache=True)],
            first_message="Rewrite pkg/target.py as the modules require.",
            limits=WorkerLimits(token_budget=cap, max_tool_calls=calls + 5),
            artifacts=ArtifactStore(root / str(cap) / "artifacts"),
            run_tests=lambda args: outcome,
        )
        result = run_worker(ctx)
    sizes = [raw_request_tokens(r) + r.max_output_tokens for r in provider.requests]
    return {
        "cap": cap,
        "status": f"{result.status} ({result.reason})",
        "calls": result.calls,
        "largest": max(sizes) / cap,
        "total": result.usage.total,
        "bound": result.usage.total / (cap * max(1, result.calls)),
        "masked": result.masked,
        "digests": result.digests,
    }


def unmasked_total(root: Path, calls: int) -> int:
    """What the calls cost if every call re-sent the whole conversation (a huge cap)."""
    return int(run_one(root / "unmasked", 10_000_000, calls)["total"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=40, help="Model calls in the conversation.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        never = unmasked_total(root, args.calls)
        print(f"{args.calls} scripted calls; never masked, they would cost {never:,} tokens")
        print(
            f"{'cap':>8} {'outcome':<22} {'calls':>5} {'largest/cap':>11} {'total':>9} "
            f"{'total/(cap*calls)':>17} {'vs never':>8} {'masked':>6} {'digests':>7}"
        )
        for cap in CAPS:
            r = run_one(root, cap, args.calls)
            print(
                f"{cap:>8,} {r['status']:<22} {r['calls']:>5} {r['largest']:>11.2f} "
                f"{r['total']:>9,} {r['bound']:>17.2f} {r['total'] / never:>8.2f} "
                f"{r['masked']:>6} {r['digests']:>7}"
            )


if __name__ == "__main__":
    main()
