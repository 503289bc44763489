"""What the sandbox costs per command: start-up, the secret-mask walk, and deny-rule matching.

Prints figures and ratios measured in this run; asserts nothing about time (machines vary).
Run: ``.venv/bin/python benchmarks/sandbox_overhead.py [N_FILES]``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pathspec
from _harness import PER_DIR, median_seconds, n_files_arg, write_files

from anti_sprawl.fs.deny_rules import DEFAULT_ALLOW, DEFAULT_DENY, DenyRules
from anti_sprawl.sandbox.policy import mask_below
from anti_sprawl.sandbox.sandbox import SandboxPolicy, probe_sandbox, run_command


def tree(root: Path, n_files: int) -> list[str]:
    """``n_files`` small files in directories of 100, plus a few catalogue names to mask."""
    rels = [f"pkg{i // PER_DIR:03d}/sub/mod{i % PER_DIR:03d}.py" for i in range(n_files)]
    rels += ["config/.env", "deploy/prod.tfvars", "keys/release.asc"]
    write_files(root, rels)
    return rels


def old_style_match(rels: list[str]) -> None:
    """The pre-0.2 matcher: pathspec trying each pattern on every leading part of a path."""
    spec = pathspec.PathSpec.from_lines("gitignore", [p.lower() for p in DEFAULT_DENY])
    for rel in rels:
        parts = rel.split("/")
        for i in range(1, len(parts) + 1):
            spec.match_file("/".join(parts[:i]) + ("/" if i < len(parts) else ""))


def main() -> None:
    n_files = n_files_arg(20_000)
    with tempfile.TemporaryDirectory(prefix="bench-sandbox-") as tmp:
        root = Path(tmp, "wt")
        root.mkdir(mode=0o755)
        rels = tree(root, n_files)
        walk = median_seconds(lambda: mask_below(root), 3)
        print(
            f"mask walk over {n_files:,} files: {walk * 1000:.0f} ms ({len(mask_below(root))} masked)"
        )
        rules = DenyRules(DEFAULT_DENY, DEFAULT_ALLOW)
        new = median_seconds(
            lambda: [rules.reason(r) for r in rels] and rules.reason.cache_clear(), 3
        )  # type: ignore[func-returns-value]
        sample = rels[:2000]
        old = median_seconds(lambda: old_style_match(sample), 1) * len(rels) / len(sample)
        print(f"deny rules on {len(rels):,} paths: {new * 1000:.0f} ms (pathspec per pattern: "
              f"{old * 1000:.0f} ms, {old / new:.0f}x slower)")  # fmt: skip
        small = Path(tmp, "small")
        small.mkdir(mode=0o755)
        (small / "f.txt").write_text("x\n")
        policy = SandboxPolicy()
        if probe_sandbox(policy).layer != "bwrap":
            print("bwrap does not work here: start-up not measured")
            return
        unsafe = SandboxPolicy(layers=(), allow_unsandboxed=True)
        bare = median_seconds(lambda: run_command(["true"], small, timeout=30, policy=unsafe))
        boxed = median_seconds(lambda: run_command(["true"], small, timeout=30, policy=policy))
        big = median_seconds(lambda: run_command(["true"], root, timeout=60, policy=policy), 3)
        print(f"'true' unsandboxed: {bare * 1000:.0f} ms; in the bwrap view: {boxed * 1000:.0f} ms "
              f"({boxed / bare:.1f}x); in a {n_files:,}-file worktree: {big * 1000:.0f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
