"""GitPython against the one git runner (``git.cmd.run_git``) for the inspection anti-sprawl does.

Why GitPython is not a dependency (docs/reference.md, "Dependencies"): on the repository reads the tool
makes (remotes for ``pr``, the current branch, the user's identity, the run branch's commits and trailers, whether
the checkout is dirty) it is slower or unsafe, and its import alone costs more than every
saving. This script shows it, in one run, on a generated repository: 300 commits of history,
a run branch of 30 node commits with trailers, a remote, and two safety probes:

* a repository whose ``core.fsmonitor`` names a command (configuration that runs code, P7 in
  docs/security.md): does a dirty check run it?
* ``GIT_DIR``/``GIT_WORK_TREE`` inherited from a calling git hook, naming another repository:
  which repository does the dirty check look at?

GitPython is not installed by ``make setup``; ``pip install gitpython`` to rerun this. Without
it the script says so and exits 0.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from anti_sprawl.git.branch import TRAILER_RUN, TRAILER_TASK, RunBranch
from anti_sprawl.git.cmd import run_git, user_identity
from anti_sprawl.run.preflight import uncommitted_changes

RUN = "r1"
BRANCH = "anti-sprawl/bench"


def make_repo(root: Path, history: int = 300, nodes: int = 30) -> Path:
    repo = root / "repo"
    repo.mkdir()
    run_git(["init", "-q", "-b", "main"], repo)
    (repo / "f.txt").write_text("x\n")
    run_git(["add", "f.txt"], repo)
    for i in range(history):
        run_git(["commit", "-q", "--allow-empty", "-m", f"history {i}"], repo)
    run_git(["remote", "add", "origin", str(root / "nowhere.git")], repo)
    run_git(["config", "user.name", "Bench User"], repo)
    run_git(["config", "user.email", "bench@example.com"], repo)
    run_git(["branch", BRANCH], repo)
    worktree = root / "wt"
    run_git(["worktree", "add", "-q", str(worktree), BRANCH], repo)
    for i in range(nodes):
        message = f"node {i}\n\n{TRAILER_RUN}: {RUN}\n{TRAILER_TASK}: t{i}\n"
        run_git(["commit", "-q", "--allow-empty", "-m", message], worktree)
    run_git(["worktree", "remove", "--force", str(worktree)], repo)
    return repo


def best(fn: Callable[[], object], repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def import_cost() -> tuple[float, float]:
    """Best wall time of a fresh interpreter that imports nothing vs one that imports git."""

    def run(code: str) -> float:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        return time.perf_counter() - start

    bare, with_git = [], []
    for _ in range(5):
        bare.append(run("pass"))
        with_git.append(run("import git"))
    return min(bare), min(with_git)


@contextmanager
def environment(**values: str) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


class GitPythonReads:
    """The same reads through GitPython, on one repository and run branch."""

    def __init__(self, git: Any, repo: Path, base: str):
        self.git, self.repo, self.base = git, repo, base

    def remotes(self) -> list[str]:
        with self.git.Repo(self.repo) as r:
            return [remote.name for remote in r.remotes]

    def branch(self) -> str:
        with self.git.Repo(self.repo) as r:
            return str(r.active_branch.name)

    def identity(self) -> tuple[str, str]:
        with self.git.Repo(self.repo) as r:
            config = r.config_reader()
            return str(config.get_value("user", "name")), str(config.get_value("user", "email"))

    def landed(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        with self.git.Repo(self.repo) as r:
            for commit in r.iter_commits(f"{self.base}..refs/heads/{BRANCH}"):
                trailers = commit.trailers_dict
                if trailers.get(TRAILER_RUN) == [RUN]:
                    for task in trailers.get(TRAILER_TASK, []):
                        counts[task] = counts.get(task, 0) + 1
        return counts

    def dirty(self) -> bool:
        with self.git.Repo(self.repo) as r:
            return bool(r.is_dirty(untracked_files=True))


def ours_remotes(repo: Path) -> list[str]:
    return run_git(["remote"], repo).stdout.decode().split()


def ours_branch(repo: Path) -> str:
    return run_git(["symbolic-ref", "--short", "HEAD"], repo).stdout.decode().strip()


def check_same_answers(gp: GitPythonReads, repo: Path, branch: RunBranch) -> None:
    assert gp.remotes() == ours_remotes(repo) == ["origin"]
    assert gp.branch() == ours_branch(repo) == "main"
    assert gp.identity() == user_identity(repo) == ("Bench User", "bench@example.com")
    assert gp.landed() == branch.landed_tasks()
    assert len(branch.landed_tasks()) == 30
    assert gp.dirty() is False
    assert uncommitted_changes(repo) == 0


def print_times(gp: GitPythonReads, repo: Path, branch: RunBranch) -> None:
    bare, with_git = import_cost()
    print(f"import git: {(with_git - bare) * 1000:.0f} ms over a bare interpreter")
    print(f"{'inspection':44} {'run_git':>9} {'GitPython':>10} {'ratio':>7}")
    rows: list[tuple[str, Callable[[], object], Callable[[], object]]] = [
        ("remotes (pr)", lambda: ours_remotes(repo), gp.remotes),
        ("current branch", lambda: ours_branch(repo), gp.branch),
        ("user identity (commit author)", lambda: user_identity(repo), gp.identity),
        ("run branch trailers (30 of 330 commits)", branch.landed_tasks, gp.landed),
        ("dirty check", lambda: uncommitted_changes(repo), gp.dirty),
    ]
    for label, ours, theirs in rows:
        t_ours, t_theirs = best(ours), best(theirs)
        print(
            f"{label:44} {t_ours * 1000:7.1f}ms {t_theirs * 1000:8.1f}ms {t_theirs / t_ours:6.2f}x"
        )


def probe_fsmonitor(gp: GitPythonReads, root: Path, repo: Path) -> None:
    """Probe 1: configuration that runs code."""
    marker = root / "fsmonitor-ran"
    run_git(["config", "core.fsmonitor", f"touch {marker}; false"], repo)
    (repo / "f.txt").write_text("changed\n")
    uncommitted_changes(repo)
    ours_ran = marker.exists()
    marker.unlink(missing_ok=True)
    gp.dirty()
    theirs_ran = marker.exists()
    run_git(["config", "--unset", "core.fsmonitor"], repo)
    run_git(["checkout", "--", "f.txt"], repo)
    print(
        f"core.fsmonitor command run by a dirty check: run_git {ours_ran}, GitPython {theirs_ran}"
    )


def probe_inherited_git_dir(gp: GitPythonReads, root: Path, repo: Path) -> None:
    """Probe 2: GIT_DIR / GIT_WORK_TREE inherited from a calling hook."""
    other = root / "other"
    other.mkdir()
    run_git(["init", "-q"], other)
    (other / "stray.txt").write_text("not in repo\n")
    with environment(GIT_DIR=str(other / ".git"), GIT_WORK_TREE=str(other)):
        ours_dirty = uncommitted_changes(repo) > 0
        theirs_dirty = gp.dirty()
    print(
        f"clean repo reported dirty under another repo's GIT_DIR: run_git {ours_dirty}, "
        f"GitPython {theirs_dirty}"
    )


def main() -> None:
    try:
        import git
    except ImportError:
        print("GitPython is not installed (it is not a dependency): pip install gitpython")
        return

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        repo = make_repo(root)
        base = run_git(["rev-parse", "main"], repo).stdout.decode().strip()
        branch = RunBranch(repo, BRANCH, RUN)
        gp = GitPythonReads(git, repo, base)
        check_same_answers(gp, repo, branch)
        print_times(gp, repo, branch)
        probe_fsmonitor(gp, root, repo)
        probe_inherited_git_dir(gp, root, repo)


if __name__ == "__main__":
    main()
