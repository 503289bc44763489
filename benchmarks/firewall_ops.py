"""Worktree creation (full vs sparse) and firewall read checks on a generated 20k-file repo.

Prints figures measured in this run; asserts nothing about time (machines vary).
Run: ``.venv/bin/python benchmarks/firewall_ops.py [N_FILES]``.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from anti_sprawl.git.workspace import Workspace

PER_DIR = 100
ROUNDS = 3
FULL_ROUNDS = 1  # a full 20k-file checkout takes seconds on a slow disk
CHECK_SECONDS = 1.0
# A node-like scope: 20 files in two packages.
SCOPE = [f"pkg007/mod{i:03d}.py" for i in range(10)] + [f"pkg008/mod{i:03d}.py" for i in range(10)]
OUT_OF_SCOPE = ["pkg100/mod050.py", "pkg007/mod099.py", "pkg199/mod000.py", "README.md"]


def generate(root: Path, n_files: int) -> None:
    """A repo whose one commit holds ``n_files`` small modules in directories of 100.

    Built with ``git fast-import`` and no working files: only the worktrees are timed.
    """
    root.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
    stream = [b"commit refs/heads/main\n", b"committer b <b@b> 0 +0000\n", b"data 3\ngen\n"]
    for i in range(n_files):
        data = f"VALUE_{i} = {i}\n".encode()
        path = f"pkg{i // PER_DIR:03d}/mod{i % PER_DIR:03d}.py"
        stream.append(f"M 100644 inline {path}\ndata {len(data)}\n".encode() + data + b"\n")
    stream.append(b"M 100644 inline README.md\ndata 12\n# generated\n\n")
    subprocess.run(["git", "fast-import", "--quiet"], cwd=root, input=b"".join(stream), check=True)


def time_worktrees(repo: Path, sparse: list[str] | None, rounds: int) -> tuple[float, int]:
    """Median seconds to create a worktree (removal not counted) and files materialized."""
    times: list[float] = []
    files = 0
    for n in range(rounds):
        start = time.perf_counter()
        ws = Workspace.create(repo, repo / ".anti-sprawl/worktrees", f"b{n}", "HEAD", sparse=sparse)
        times.append(time.perf_counter() - start)
        files = sum(len(f) for _, _, f in os.walk(ws.path)) - 1  # minus the .git file
        ws.remove()
    return statistics.median(times), files


def rate(call: Callable[[str], object], paths: list[str], refused: type[BaseException]) -> float:
    """Calls per second of ``call`` cycling over ``paths`` for about CHECK_SECONDS."""
    count = 0
    start = time.perf_counter()
    while (elapsed := time.perf_counter() - start) < CHECK_SECONDS:
        for path in paths:
            with contextlib.suppress(refused):
                call(path)
            count += 1
    return count / elapsed


def bench_firewall(repo: Path) -> None:
    try:
        from anti_sprawl.fs.firewall import Firewall, FirewallError
    except ImportError:
        print("firewall: anti_sprawl.firewall.Firewall not available; skipped")
        return
    with Firewall(repo, read_scope=SCOPE, write_scope=SCOPE[:5]) as fw:
        inside = rate(fw.check_read, SCOPE, FirewallError)
        outside = rate(fw.check_read, OUT_OF_SCOPE, FirewallError)
        refused = len(fw.violations)
        print(f"firewall backend:               {fw.backend}")
    print(f"check_read in scope:            {inside:,.0f} calls/s")
    print(f"check_read out of scope (deny): {outside:,.0f} calls/s ({refused:,} refusals recorded)")


def main() -> None:
    n_files = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    with tempfile.TemporaryDirectory(prefix="anti-sprawl-bench-") as tmp:
        repo = Path(tmp) / "repo"
        start = time.perf_counter()
        generate(repo, n_files)
        print(f"repository: {n_files} files, generated in {time.perf_counter() - start:.1f}s")
        full, full_files = time_worktrees(repo, None, FULL_ROUNDS)
        sparse, sparse_files = time_worktrees(repo, SCOPE, ROUNDS)
        print(f"worktree full:   {full * 1000:8.1f} ms  ({full_files} files, {FULL_ROUNDS} round)")
        print(
            f"worktree sparse: {sparse * 1000:8.1f} ms  ({sparse_files} files, "
            f"{len(SCOPE)} entries, median of {ROUNDS})"
        )
        print(f"full / sparse:   {full / sparse:8.1f}x")
        bench_firewall(repo)


if __name__ == "__main__":
    main()
