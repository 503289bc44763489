"""Scale check for the repository map: a generated repository (git and plain) or a real one.

Prints the map build time and files per second; asserts nothing about time (machines vary).
Run: ``.venv/bin/python benchmarks/repomap_scale.py [N_FILES]`` (generated, default 20,000),
or ``--repo DIR [--requirement TEXT]`` for a real repository, e.g. Django's source:
``pip download --no-deps --no-binary :all: 'django==4.2.*' -d /tmp/dj`` and unpack it.
``--profile`` prints where the time goes (cProfile, top functions by cumulative time).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from anti_sprawl.planner.repomap.map import build_repo_map

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


def measure(root: Path, label: str, requirement: str = REQUIREMENT) -> None:
    for budget in (4_000, 32_000):
        start = time.perf_counter()
        repo_map = build_repo_map(root, requirement, token_budget=budget)
        elapsed = time.perf_counter() - start
        print(
            f"{label:5} budget={budget:6}: {len(repo_map.files)} files in {elapsed:.2f} s "
            f"({len(repo_map.files) / elapsed:,.0f} files/s), {repo_map.tokens} tokens, "
            f"{len(repo_map.included_outlines)} outlines, {repo_map.omitted} files not named, "
            f"top: {repo_map.ranked[0][0]}"
        )


def profile(root: Path, requirement: str) -> None:
    profiler = cProfile.Profile()
    profiler.enable()
    build_repo_map(root, requirement, token_budget=4_000)
    profiler.disable()
    print("profile (budget=4000), top 15 by cumulative time:")
    pstats.Stats(profiler, stream=sys.stdout).sort_stats("cumulative").print_stats(15)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n_files", nargs="?", type=int, default=20_000)
    parser.add_argument("--repo", type=Path, help="measure this repository instead")
    parser.add_argument("--requirement", default=None, help="requirement to rank for")
    parser.add_argument("--profile", action="store_true", help="print a cProfile summary")
    args = parser.parse_args()
    if args.repo is not None:
        root = args.repo.resolve()
        requirement = args.requirement or "Fix how the ORM compiles queries with annotations"
        label = "git" if (root / ".git").exists() else "plain"
        print(f"repository {root}")
        build_repo_map(root, requirement, token_budget=4_000)  # warm the page cache
        measure(root, label, requirement)
        if args.profile:
            profile(root, requirement)
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "repo"
        start = time.perf_counter()
        generate(root, args.n_files)
        print(f"generated {args.n_files} files in {time.perf_counter() - start:.1f} s")
        measure(root, "plain")
        git(root, "init", "-q")
        git(root, "add", "-A")
        git(root, "commit", "-qm", "generated")
        measure(root, "git")
        if args.profile:
            profile(root, args.requirement or REQUIREMENT)


if __name__ == "__main__":
    main()
