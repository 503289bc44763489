"""`make demo`: the whole story offline, on a copy of the sample repository.

1. copy sandbox/ into a fresh git repository in a temporary folder;
2. `anti-sprawl plan` the sample requirement (scripted planner);
3. `anti-sprawl execute` the plan with the scripted provider (one worker also tries to
   "tidy up" a file outside its write scope: the firewall blocks it and the verdict shows it);
4. print the branch log and the PR body, and run the sample's tests on the result branch.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "tasks" / "sample"
BIN = Path(sys.executable).parent


def step(title: str) -> None:
    print(f"\n\033[1m== {title}\033[0m" if sys.stdout.isatty() else f"\n== {title}", flush=True)


def run(args: list[str], cwd: Path, env: dict[str, str], check: bool = True) -> int:
    print("$ " + " ".join(str(a) for a in args), flush=True)
    return subprocess.run(args, cwd=cwd, env=env, check=check).returncode


def git(repo: Path, *args: str) -> str:
    out = subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True)
    return out.stdout.strip()


def main() -> int:
    env = dict(os.environ)
    # Test commands run `python -m pytest`: make it this environment's Python.
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}"
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTI_SPRAWL_CRASH_AT"):
        env.pop(key, None)
    work = Path(tempfile.mkdtemp(prefix="anti-sprawl-demo-"))
    repo = work / "orders"
    step(f"sample repository: {repo}")
    shutil.copytree(ROOT / "sandbox", repo)
    identity = ["-c", "user.name=demo", "-c", "user.email=demo@localhost"]
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(
        ["git", *identity, "commit", "-q", "-m", "Sample orders service"], cwd=repo, check=True
    )

    cli = [str(BIN / "anti-sprawl")]
    script = SAMPLE / "script.yaml"
    requirement = (SAMPLE / "requirement.md").read_text(encoding="utf-8").strip()
    plan = work / "plan.yaml"

    step("plan: requirement -> validated DAG (scripted planner)")
    run(
        [
            *cli,
            "plan",
            requirement,
            "--repo",
            str(repo),
            "--provider",
            "scripted",
            "--script",
            str(script),
            "-o",
            str(plan),
        ],
        work,
        env,
    )

    step("execute: parallel workers, each in its own worktree behind the firewall")
    code = run(
        [
            *cli,
            "execute",
            str(plan),
            "--repo",
            str(repo),
            "--provider",
            "scripted",
            "--script",
            str(script),
            "--jobs",
            "2",
        ],
        work,
        env,
        check=False,
    )
    branches = git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/anti-sprawl/")
    branch = branches.splitlines()[0] if branches else ""
    if code != 0 or not branch:
        print("demo: execute did not succeed", file=sys.stderr)
        return 1

    step(f"the result branch {branch} (one commit per node)")
    print(
        git(
            repo,
            "log",
            "--format=%h %s%n    %(trailers:key=Anti-Sprawl-Task,key=Anti-Sprawl-Tokens,separator=%x2C )",
            f"main..{branch}",
        )
    )
    print(git(repo, "diff", "--stat", f"main...{branch}"))

    step("PR body")
    run_id = git(
        repo, "log", "-1", "--format=%(trailers:key=Anti-Sprawl-Run,valueonly)", branch
    ).strip()
    print((repo / ".anti-sprawl" / "runs" / run_id / "PR.md").read_text(encoding="utf-8"))

    step("the sample's tests on the result branch")
    check = work / "result"
    git(repo, "worktree", "add", "-q", "--detach", str(check), branch)
    code = run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], check, env, check=False
    )
    git(repo, "worktree", "remove", "--force", str(check))
    print(
        f"\nuser's branch untouched: {git(repo, 'branch', '--show-current')} at {git(repo, 'rev-parse', '--short', 'HEAD')}"
    )
    print(f"inspect it yourself: cd {repo} && git log {branch}")
    return code


if __name__ == "__main__":
    sys.exit(main())
