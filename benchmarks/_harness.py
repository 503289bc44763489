"""What the sandbox benchmarks share: the timing, the generated file trees, the size argument.

Not a benchmark itself (``make bench`` skips ``_*.py``); the scripts import it as ``_harness``
because each runs as ``python benchmarks/<name>.py``, with this directory first on the path.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

ROUNDS = 5
PER_DIR = 100  # files per generated directory


def median_seconds(call: Callable[[], object], rounds: int = ROUNDS) -> float:
    """The median wall time of ``rounds`` calls: one slow outlier on a busy machine is ignored."""
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def write_files(root: Path, rels: Iterable[str], text: str = "x = 1\n") -> None:
    """One small file at each of ``rels`` below ``root``, directories made as needed."""
    for rel in rels:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def n_files_arg(default: int) -> int:
    """The script's one optional argument: how many files to generate."""
    return int(sys.argv[1]) if len(sys.argv) > 1 else default
