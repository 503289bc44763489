"""What a setup command and a ``{checkout}`` environment cost per node.

Measured in one run on a real git worktree of ``N_FILES`` tracked files (default 5,000):

* a no-op test command (read-only worktree) against a no-op ``setup_command`` (writable
  worktree lent to the sandbox uid and taken back, then the ignored-paths-only audit);
* the secret-mask walk over a checkout holding an untracked ``.venv`` of ``N_FILES`` files,
  scanned against left unscanned (what ``{checkout}/.venv/bin/python`` gets).

Prints figures and ratios; asserts nothing about time (machines vary).
Run: ``.venv/bin/python benchmarks/setup_overhead.py [N_FILES]``.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from _harness import PER_DIR, median_seconds, n_files_arg, write_files

from anti_sprawl.git.workspace import Workspace
from anti_sprawl.run.setup_step import run_setup
from anti_sprawl.sandbox.policy import mask_below
from anti_sprawl.sandbox.sandbox import SandboxPolicy, probe_sandbox, run_command


def files(root: Path, prefix: str, n_files: int) -> None:
    rels = (f"{prefix}/d{i // PER_DIR:03d}/m{i % PER_DIR:03d}.py" for i in range(n_files))
    write_files(root, rels)


def git(repo: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x"}
    env.update(GIT_COMMITTER_NAME="b", GIT_COMMITTER_EMAIL="b@x")
    subprocess.run(["git", *args], cwd=repo, check=True, env=env, capture_output=True)


def main() -> None:
    n_files = n_files_arg(5_000)
    policy = SandboxPolicy()
    if probe_sandbox(policy).layer != "bwrap":
        print("bubblewrap is not available here: nothing measured")
        return
    with tempfile.TemporaryDirectory(prefix="bench-setup-") as tmp:
        repo = Path(tmp, "repo")
        repo.mkdir(mode=0o755)
        files(repo, "src", n_files)
        (repo / ".gitignore").write_text(".venv/\n")
        git(repo, "init", "-q", "-b", "main")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "bench")
        venv = repo / ".venv"
        files(venv, "lib/site-packages", n_files)
        (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
        (venv / "lib/site-packages/certifi").mkdir()
        (venv / "lib/site-packages/certifi/cacert.pem").write_text("CA\n")
        log = Path(tmp, "setup.log")
        with Workspace.create(repo, Path(tmp, "worktrees"), "bench", "HEAD") as ws:
            plain = median_seconds(
                lambda: run_command(["true"], ws.path, timeout=60, policy=policy)
            )
            setup = median_seconds(
                lambda: run_setup(ws, ["true"], checkout=repo, policy=policy, timeout=60, log=log)
            )
        scanned = median_seconds(lambda: mask_below(repo), 3)
        unscanned = median_seconds(lambda: mask_below(repo, [venv]), 3)
    print(f"worktree of {n_files:,} tracked files; checkout .venv of {n_files:,} files")
    print(f"no-op test command:   {plain * 1000:8.1f} ms")
    print(f"no-op setup command:  {setup * 1000:8.1f} ms  ({setup / plain:.1f}x the test command)")
    print(f"mask walk, .venv scanned:   {scanned * 1000:8.1f} ms")
    print(
        f"mask walk, .venv unscanned: {unscanned * 1000:8.1f} ms  ({scanned / unscanned:.1f}x less)"
    )


if __name__ == "__main__":
    main()
