"""Scale check for the repository map: a generated 20k-file repository, git and plain.

Prints the map build time and files per second; asserts nothing about time (machines vary).
Run: ``.venv/bin/python benchmarks/repomap_scale.py [N_FILES]``.
"""

from __future__ import annotations

import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from anti_sprawl.repomap import build_repo_map

PACKAGES = 400
REQUIREMENT = (
    "Make pkg17/mod_3.py publish OrderCreated events instead of calling Handler42 directly"
)


def generate(root: Path, n_files: int) -> None:
    """Mostly small Python modules importing a few others; some docs and JS files."""
    rng = random.Random(7)
    per_package = max(n_files // PACKAGES, 1)
    written = 0
    for p in range(PACKAGES):
        package = root / "src" / f"pkg{p}"
        package.mkdir(parents=True)
        (package / "__init__.py").write_text(f'"""Package {p}."""\n')
        written += 1
        for m in range(per_package - 1):
            if written >= n_files:
                return
            if m % 20 == 19:
                (package / f"page_{m}.md").write_text(f"# Notes {p}/{m}\n")
            elif m % 20 == 18:
                (package / f"widget_{m}.js").write_text(
                    f"export function render{m}(props) {{\n  return props;\n}}\n"
                )
            else:
                imports = "\n".join(
                    f"from pkg{rng.randrange(PACKAGES)}.mod_{rng.randrange(per_package - 1)}"
                    f" import Handler{rng.randrange(100)}"
                    for _ in range(3)
                )
                (package / f"mod_{m}.py").write_text(
                    f'"""Module {p}.{m}."""\n{imports}\n\n\n'
                    f"class Handler{m}:\n"
                    f'    """Handles things."""\n\n'
                    f"    def handle(self, event: dict[str, int], retries: int = 3) -> bool:\n"
                    f"        return bool(event) and retries > {m}\n\n\n"
                    f"def helper_{m}(x: int) -> int:\n    return x * {m}\n"
                )
            written += 1


def git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=b", "-c", "user.email=b@e", "-c", "commit.gpgsign=false", *args],
        cwd=root,
        check=True,
        capture_output=True,
    )


def measure(root: Path, label: str) -> None:
    for budget in (4_000, 32_000):
        start = time.perf_counter()
        repo_map = build_repo_map(root, REQUIREMENT, token_budget=budget)
        elapsed = time.perf_counter() - start
        print(
            f"{label:5} budget={budget:6}: {len(repo_map.files)} files in {elapsed:.2f} s "
            f"({len(repo_map.files) / elapsed:,.0f} files/s), {repo_map.tokens} tokens, "
            f"{len(repo_map.included_outlines)} outlines, {repo_map.omitted} files not named, "
            f"top: {repo_map.ranked[0][0]}"
        )


def main() -> None:
    n_files = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "repo"
        start = time.perf_counter()
        generate(root, n_files)
        print(f"generated {n_files} files in {time.perf_counter() - start:.1f} s")
        measure(root, "plain")
        git(root, "init", "-q")
        git(root, "add", "-A")
        git(root, "commit", "-qm", "generated")
        measure(root, "git")


if __name__ == "__main__":
    main()
