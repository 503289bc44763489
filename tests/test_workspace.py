"""Worktrees, the post-node audit, commits and stale locks, on real temporary git repos."""

from __future__ import annotations

import array
import fcntl
import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from anti_sprawl.errors import RunError
from anti_sprawl.fs.placement import spread_subdirectories
from anti_sprawl.git.audit import audit, changes
from anti_sprawl.git.locks import clean_stale_locks
from anti_sprawl.git.workspace import (
    Workspace,
    change_between,
    commit,
    diff,
    diffstat,
    ensure_excluded,
    remove_stale_worktrees,
    stage,
)

FILES = {
    "README.md": "# demo\n",
    ".gitignore": "*.log\n",
    "src/app/x.py": "X = 1\n",
    "src/app/y.py": "Y = 2\n",
    "src/lib/z.py": "Z = 3\n",
    "docs/a.md": "A\n",
    "docs/b.md": "B\n",
    "run.sh": "#!/bin/sh\necho hi\n",
}
TRAILERS = {"Anti-Sprawl-Run": "r1", "Anti-Sprawl-Task": "t1"}


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}
    cfg = ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "core.hooksPath=/dev/null"]
    proc = subprocess.run(
        ["git", *cfg, *args], cwd=repo, env=env, capture_output=True, text=True, check=True
    )
    return proc.stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "run.sh").chmod(0o755)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "init")
    return root


def make_ws(repo: Path, name: str = "n1", **kw: object) -> Workspace:
    return Workspace.create(repo, repo / ".anti-sprawl" / "worktrees", name, "HEAD", **kw)  # type: ignore[arg-type]


def snapshot(repo: Path) -> dict[str, object]:
    """Everything of the user's checkout that must never change."""
    files: dict[str, str] = {}
    for dirpath, dirs, names in os.walk(repo):
        dirs[:] = [d for d in dirs if d not in (".git", ".anti-sprawl")]
        for name in names:
            p = Path(dirpath, name)
            data = os.readlink(p).encode() if p.is_symlink() else p.read_bytes()
            mode = p.lstat().st_mode
            files[p.relative_to(repo).as_posix()] = hashlib.sha256(data).hexdigest() + oct(mode)
    return {
        "status": git(repo, "status", "--porcelain=v1", "--untracked-files=all"),
        "head": git(repo, "rev-parse", "HEAD"),
        "branch": git(repo, "symbolic-ref", "HEAD"),
        "index": (repo / ".git" / "index").read_bytes(),
        "config": (repo / ".git" / "config").read_bytes(),
        "files": files,
    }


def test_worktree_never_touches_the_users_checkout(repo: Path) -> None:
    (repo / "README.md").write_text("user edit, unstaged\n")
    (repo / "docs/a.md").write_text("user edit, staged\n")
    git(repo, "add", "docs/a.md")
    (repo / "scratch.txt").write_text("untracked\n")
    ensure_excluded(repo)
    before = snapshot(repo)
    with make_ws(repo) as ws:
        assert ws.path.is_relative_to(repo / ".anti-sprawl" / "worktrees")
        assert (ws.path / "README.md").read_text() == FILES["README.md"]
        (ws.path / "src/app/x.py").write_text("X = 10\n")
        sha = commit(ws, "change x", TRAILERS)
        assert sha is not None
        assert ws.head == sha
        assert snapshot(repo) == before
    assert snapshot(repo) == before
    assert not ws.path.exists()
    assert "anti-sprawl/wt" not in git(repo, "branch", "--list")
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1


def test_worktrees_are_spread_over_the_disk_where_the_file_system_can(
    repo: Path, tmp_path: Path
) -> None:
    """ext4's top-directory hint on the worktrees folder (fs/placement.py); a file system
    without it, or a path that is no directory, is left alone without an error."""
    assert not spread_subdirectories(tmp_path / "missing")
    probe = tmp_path / "probe"
    probe.mkdir()
    if not spread_subdirectories(probe):
        pytest.skip("this file system has no top-directory hint")
    with make_ws(repo) as ws:
        flags = array.array("i", [0])
        fd = os.open(ws.path.parent, os.O_RDONLY)
        try:
            fcntl.ioctl(fd, 0x80086601, flags, True)  # FS_IOC_GETFLAGS
        finally:
            os.close(fd)
        assert flags[0] & 0x00020000  # FS_TOPDIR_FL


def _half_done_then(ws: Workspace, exc: BaseException) -> None:
    with ws:
        (ws.path / "src/app/x.py").write_text("half done\n")
        raise exc


def test_context_manager_removes_on_failure_and_interrupt(repo: Path) -> None:
    for exc in (ValueError("boom"), KeyboardInterrupt()):
        ws = make_ws(repo)
        with pytest.raises(type(exc)):
            _half_done_then(ws, exc)
        assert not ws.path.exists()
        assert "anti-sprawl/wt/n1" not in git(repo, "branch", "--list")


def test_remove_is_idempotent_and_recovers_after_a_crash(repo: Path) -> None:
    ws = make_ws(repo)
    (ws.path / "src/app/new.py").write_text("uncommitted work of a killed attempt\n")
    # A crash leaves the worktree and its branch; creating the same name again replaces them.
    again = make_ws(repo)
    assert not (again.path / "src/app/new.py").exists()
    assert changes(again) == []
    again.remove()
    again.remove()
    # A worktree whose directory vanished is still registered until removed.
    third = make_ws(repo, "n3")
    subprocess.run(["rm", "-rf", str(third.path)], check=True)
    third.remove()
    assert "n3" not in git(repo, "worktree", "list")
    assert "anti-sprawl/wt/n3" not in git(repo, "branch", "--list")


def test_create_at_an_older_commit_and_bad_names(repo: Path) -> None:
    first = git(repo, "rev-parse", "HEAD").strip()
    (repo / "docs/a.md").write_text("A2\n")
    git(repo, "commit", "-qam", "second")
    with Workspace.create(repo, repo / ".anti-sprawl" / "worktrees", "old", first) as ws:
        assert ws.head == first == ws.base
        assert (ws.path / "docs/a.md").read_text() == "A\n"
    for bad in ("../x", "a/b", "", "-rf", "x.lock", "a..b"):
        with pytest.raises(RunError):
            make_ws(repo, bad)
    with pytest.raises(RunError):
        Workspace.create(repo, repo / ".anti-sprawl" / "worktrees", "n", "no-such-rev")


def test_sparse_checkout_materializes_only_the_scope(repo: Path) -> None:
    config = (repo / ".git" / "config").read_bytes()
    with make_ws(repo, sparse=["src/app/", "README.md"]) as ws:
        present = {
            p.relative_to(ws.path).as_posix()
            for p in ws.path.rglob("*")
            if p.is_file() and ".git" not in p.parts
        }
        assert present == {"README.md", "src/app/x.py", "src/app/y.py"}
        assert changes(ws) == []
        (ws.path / "src/app/x.py").write_text("X = 5\n")
        (ws.path / "src/app/new.py").write_text("N = 1\n")
        (ws.path / "docs").mkdir()
        (ws.path / "docs/rogue.md").write_text("outside\n")
        (ws.path / "docs/a.md").write_text("overwrites a file that was never checked out\n")
        result = audit(ws, ["src/app/"])
        assert sorted(v.path for v in result.violations) == ["docs/a.md", "docs/rogue.md"]
        sha = commit(ws, "sparse change", TRAILERS)
        assert sha is not None
        tree = git(repo, "ls-tree", "-r", "--name-only", sha).split()
        # Files that were never checked out are still in the commit, unchanged.
        assert set(tree) == {*FILES, "src/app/new.py"}
        assert git(repo, "show", f"{sha}:docs/a.md") == "A\n"
    assert (repo / ".git" / "config").read_bytes() == config


def test_changes_reports_each_kind(repo: Path) -> None:
    with make_ws(repo) as ws:
        (ws.path / "src/app/x.py").write_text("changed\n")
        (ws.path / "docs/a.md").unlink()
        (ws.path / "docs/b.md").unlink()
        (ws.path / "docs/b.md").symlink_to("a.md")
        (ws.path / "src/lib/z.py").chmod(0o755)
        (ws.path / "new dir").mkdir()
        (ws.path / "new dir/ünï code.txt").write_text("n\n")
        (ws.path / "debug.log").write_text("ignored by .gitignore\n")
        by_path = {c.path: c for c in changes(ws)}
        assert {p: c.kind for p, c in by_path.items()} == {
            "src/app/x.py": "modified",
            "docs/a.md": "deleted",
            "docs/b.md": "typechange",
            "src/lib/z.py": "modified",
            "new dir/ünï code.txt": "added",
        }
        assert by_path["src/lib/z.py"].mode_changed
        assert (by_path["src/lib/z.py"].old_mode, by_path["src/lib/z.py"].new_mode) == (
            "100644",
            "100755",
        )
        assert by_path["docs/b.md"].is_symlink
        assert not by_path["src/app/x.py"].mode_changed


def head_bytes(repo: Path, rel: str) -> bytes:
    return subprocess.run(
        ["git", "show", f"HEAD:{rel}"], cwd=repo, capture_output=True, check=True
    ).stdout


def test_audit_reverts_everything_outside_the_write_scope(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("CANARY-OUT\n")
    with make_ws(repo) as ws:
        w = ws.path
        # inside the write scope: kept
        (w / "src/app/x.py").write_text("X = 2\n")
        (w / "src/app/new.py").write_text("N = 1\n")
        (w / "src/app/y.py").unlink()
        (w / "src/app/ok_link").symlink_to("x.py")
        # outside: reverted
        (w / "README.md").write_text("hijacked\n")
        (w / "docs/a.md").unlink()
        (w / "docs/new.md").write_text("new\n")
        (w / "junk/deep").mkdir(parents=True)
        (w / "junk/deep/f.txt").write_text("f\n")
        (w / "src/lib/z.py").chmod(0o755)
        (w / "run.sh").chmod(0o644)
        (w / "docs/b.md").unlink()
        (w / "docs/b.md").symlink_to(outside / "secret")
        (w / "weird\nname $(touch pwned).txt").write_text("w\n")
        # inside the scope but never allowed: secrets and escaping symlinks
        (w / "src/app/.env").write_text("KEY=1\n")
        (w / "src/app/up").symlink_to("../../README.md")
        (w / "src/app/abs").symlink_to(outside / "secret")
        result = audit(ws, ["src/app/"])
        reasons = {(v.path, v.reason) for v in result.violations}
        assert reasons == {
            ("README.md", "outside_write_scope"),
            ("docs/a.md", "outside_write_scope"),
            ("docs/new.md", "outside_write_scope"),
            ("junk/deep/f.txt", "outside_write_scope"),
            ("src/lib/z.py", "outside_write_scope"),
            ("run.sh", "outside_write_scope"),
            ("docs/b.md", "outside_write_scope"),
            ("weird\nname $(touch pwned).txt", "outside_write_scope"),
            ("src/app/.env", "outside_write_scope"),
            ("src/app/up", "symlink"),
            ("src/app/abs", "symlink"),
        }
        assert all(v.op == "audit" for v in result.violations)
        details = {v.path: v.detail for v in result.violations}
        assert details["docs/a.md"] == "deleted"
        assert details["docs/new.md"] == "added"
        assert details["docs/b.md"] == "typechange"
        for rel in ("README.md", "docs/a.md", "docs/b.md", "src/lib/z.py", "run.sh"):
            assert not (w / rel).is_symlink()
            assert (w / rel).read_bytes() == head_bytes(repo, rel)
        assert not os.access(w / "src/lib/z.py", os.X_OK)
        assert os.access(w / "run.sh", os.X_OK)
        for rel in ("docs/new.md", "junk", "src/app/.env", "src/app/up", "src/app/abs"):
            assert not os.path.lexists(w / rel)
        assert not list(w.glob("weird*"))
        assert (outside / "secret").read_text() == "CANARY-OUT\n"
        kept = {c.path: c.kind for c in changes(ws)}
        assert kept == {
            "src/app/x.py": "modified",
            "src/app/new.py": "added",
            "src/app/y.py": "deleted",
            "src/app/ok_link": "added",
        }
        assert {c.path for c in result.kept} == set(kept)
        sha = commit(ws, "node t1", TRAILERS)
        assert sha is not None
        files = set(git(repo, "ls-tree", "-r", "--name-only", sha).split("\n")) - {""}
        assert files == (set(FILES) - {"src/app/y.py"}) | {"src/app/new.py", "src/app/ok_link"}


def test_audit_keeps_renames_in_scope_and_reverts_the_half_outside(repo: Path) -> None:
    with make_ws(repo) as ws:
        w = ws.path
        (w / "src/app/sub").mkdir()
        (w / "src/app/x.py").rename(w / "src/app/sub/x2.py")  # inside: a rename git sees
        (w / "src/lib/z.py").rename(w / "src/app/z.py")  # from outside: source restored
        (w / "src/app/y.py").rename(w / "docs/y.md")  # to outside: the copy is removed
        result = audit(ws, ["src/app/"])
        assert {(v.path, v.detail) for v in result.violations} == {
            ("src/lib/z.py", "deleted"),
            ("docs/y.md", "added"),
        }
        assert (w / "src/lib/z.py").read_bytes() == head_bytes(repo, "src/lib/z.py")
        assert not (w / "docs/y.md").exists()
        sha = commit(ws, "node t1", TRAILERS)
        assert sha is not None
        status = git(repo, "diff", "-M", "--name-status", "HEAD", sha).split("\n")
        assert sorted(filter(None, status)) == [
            "A\tsrc/app/z.py",
            "D\tsrc/app/y.py",
            "R100\tsrc/app/x.py\tsrc/app/sub/x2.py",
        ]


def test_audit_repeats_until_a_reverted_gitignore_reveals_nothing(repo: Path) -> None:
    with make_ws(repo) as ws:
        # Hide a new file behind an edited .gitignore (itself outside the scope).
        (ws.path / ".gitignore").write_text("*.log\nsmuggled.txt\n")
        (ws.path / "smuggled.txt").write_text("out of scope\n")
        result = audit(ws, ["src/app/"])
        assert {v.path for v in result.violations} == {".gitignore", "smuggled.txt"}
        assert not (ws.path / "smuggled.txt").exists()
        assert commit(ws, "nothing", TRAILERS) is None


def test_audit_restores_a_directory_replaced_by_a_symlink(repo: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "a.md").write_text("not ours\n")
    with make_ws(repo) as ws:
        subprocess.run(["rm", "-rf", str(ws.path / "docs")], check=True)
        (ws.path / "docs").symlink_to(target)
        result = audit(ws, ["src/app/"])
        assert {v.path for v in result.violations} == {"docs", "docs/a.md", "docs/b.md"}
        assert (ws.path / "docs").is_dir()
        assert not (ws.path / "docs").is_symlink()
        assert (ws.path / "docs/a.md").read_text() == "A\n"
        assert (target / "a.md").read_text() == "not ours\n"
        assert changes(ws) == []


def test_commit_trailers_identity_and_no_hooks(repo: Path, tmp_path: Path) -> None:
    marker = tmp_path / "hook-ran"
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    git(repo, "config", "core.hooksPath", str(repo / ".git" / "hooks"))
    with make_ws(repo) as ws:
        assert commit(ws, "nothing to do", TRAILERS) is None
        (ws.path / "src/app/x.py").write_text("X = 3\n")
        sha = commit(ws, "# Set X to 3", TRAILERS)
        assert sha is not None
        log = git(repo, "log", "-1", "--format=%an <%ae>%n%B", sha)
        assert log.startswith("anti-sprawl <anti-sprawl@localhost>\n# Set X to 3\n\n")
        assert "Anti-Sprawl-Run: r1\nAnti-Sprawl-Task: t1" in log
        trailer = git(repo, "log", "-1", "--format=%(trailers:key=Anti-Sprawl-Task,valueonly)", sha)
        assert trailer.strip() == "t1"
        for bad in ({"Bad Key": "v"}, {"K": "two\nlines"}, {"K": " "}):
            with pytest.raises(RunError):
                commit(ws, "x", bad)
        with pytest.raises(RunError):
            commit(ws, "   ", TRAILERS)
    assert not marker.exists()


def test_diff_and_diffstat(repo: Path) -> None:
    with make_ws(repo) as ws:
        base = ws.head
        (ws.path / "src/app/x.py").write_text("X = 1\nX2 = 2\n")
        (ws.path / "src/app/y.py").unlink()
        (ws.path / "src/app/bin.dat").write_bytes(b"\0\1\2")
        head = commit(ws, "c", TRAILERS)
        assert head is not None
        text = diff(ws, base, head)
        assert "+X2 = 2" in text
        assert "-Y = 2" in text
        only_x = diff(ws, base, head, ["src/app/x.py"])
        assert "+X2 = 2" in only_x
        assert "y.py" not in only_x
        stat = diffstat(ws, base, head)
        by_path = {f.path: (f.added, f.deleted) for f in stat.files}
        assert by_path == {
            "src/app/x.py": (1, 0),
            "src/app/y.py": (0, 1),
            "src/app/bin.dat": (None, None),
        }
        assert (stat.insertions, stat.deletions) == (1, 1)
        assert stat.summary == "3 files changed, 1 insertions(+), 1 deletions(-)"
        assert diffstat(repo, base, head, ["docs/a.md"]).files == []


def test_ensure_excluded_is_idempotent(repo: Path) -> None:
    exclude = repo / ".git" / "info" / "exclude"
    exclude.write_text("# no newline at end")
    ensure_excluded(repo)
    ensure_excluded(repo)
    assert exclude.read_text() == "# no newline at end\n/.anti-sprawl/\n"
    (repo / ".anti-sprawl" / "runs").mkdir(parents=True)
    (repo / ".anti-sprawl" / "runs" / "run.json").write_text("{}")
    assert git(repo, "status", "--porcelain") == ""


def test_clean_stale_locks_refuses_while_git_runs(repo: Path) -> None:
    ws = make_ws(repo)
    locks = [
        repo / ".git" / "index.lock",
        repo / ".git" / "refs" / "heads" / "main.lock",
        ws.admin_dir / "index.lock",
    ]
    for lock in locks:
        lock.write_text("")
    holder = subprocess.Popen(
        ["git", "cat-file", "--batch"], cwd=ws.path, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        with pytest.raises(RunError, match=str(holder.pid)):
            clean_stale_locks(repo)
        assert all(lock.exists() for lock in locks)
    finally:
        holder.kill()
        holder.wait()
        assert holder.stdin is not None
        assert holder.stdout is not None
        holder.stdin.close()
        holder.stdout.close()
    assert sorted(clean_stale_locks(repo)) == sorted(locks)
    assert not any(lock.exists() for lock in locks)
    assert clean_stale_locks(repo) == []
    ws.remove()


def test_audit_removes_a_nested_repository_even_inside_the_scope(repo: Path) -> None:
    with make_ws(repo) as ws:
        nested = ws.path / "src/app/vendored"
        nested.mkdir()
        git(nested, "init", "-q")
        (nested / "f.py").write_text("F = 1\n")
        git(nested, "add", "f.py")
        git(nested, "commit", "-qm", "inner")
        result = audit(ws, ["src/app/"])
        assert [(v.path, v.reason) for v in result.violations] == [
            ("src/app/vendored", "embedded_repository")
        ]
        assert not nested.exists()
        assert commit(ws, "nothing", TRAILERS) is None


def test_parallel_workspaces_commit_independently(repo: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    def node(i: int) -> tuple[str, str | None]:
        with make_ws(repo, f"p{i}") as ws:
            (ws.path / f"src/app/n{i}.py").write_text(f"N = {i}\n")
            audit(ws, [f"src/app/n{i}.py"])
            return ws.base, commit(ws, f"node {i}", {"Anti-Sprawl-Task": f"p{i}"})

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(node, range(4)))
    for i, (base, sha) in enumerate(results):
        assert sha is not None
        assert git(repo, "rev-parse", f"{sha}^").strip() == base
        assert git(repo, "show", f"{sha}:src/app/n{i}.py") == f"N = {i}\n"
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert "anti-sprawl/wt" not in git(repo, "branch", "--list")


def test_remove_stale_worktrees_after_a_crashed_run(repo: Path) -> None:
    wt_dir = repo / ".anti-sprawl" / "worktrees"
    first, second = make_ws(repo, "s1"), make_ws(repo, "s2")
    (second.path / "src/app/x.py").write_text("uncommitted\n")
    git(repo, "branch", "anti-sprawl/wt/orphan")
    assert sorted(remove_stale_worktrees(repo, wt_dir)) == sorted([first.path, second.path])
    assert list(wt_dir.iterdir()) == []
    assert git(repo, "branch", "--list", "anti-sprawl/*") == ""
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert remove_stale_worktrees(repo, wt_dir) == []


def test_remove_stale_worktrees_after_a_kill_inside_git_worktree_add(repo: Path) -> None:
    """A kill inside `git worktree add` can leave a registered worktree whose HEAD points at
    nothing (seen in the chaos test; worktrees are detached, so no branch names it); the next
    cleanup of that run removes it."""
    wt_dir = repo / ".anti-sprawl" / "worktrees"
    half, other = make_ws(repo, "run1-c-1"), make_ws(repo, "run2-c-1")
    (half.admin_dir / "HEAD").write_text("0" * 40 + "\n")  # what the kill left: no commit
    broken = subprocess.run(["git", "fsck", "--no-progress"], cwd=repo, capture_output=True)
    assert broken.returncode != 0  # the state the chaos test found

    assert remove_stale_worktrees(repo, wt_dir, "run1") == [half.path]
    assert not half.path.exists()
    assert other.path.is_dir()  # another run's worktree is not this cleanup's
    fsck = subprocess.run(["git", "fsck", "--no-progress"], cwd=repo, capture_output=True)
    assert fsck.returncode == 0, fsck.stderr


def test_one_staged_diff_gives_what_the_separate_reads_give(repo: Path) -> None:
    """``stage`` reads the raw entries, the numbers, the stat and the patch from one diff; the
    commit holds exactly what was staged, and a diff between commits reads the same facts."""
    ws = make_ws(repo)
    (ws.path / "src/app/x.py").write_text("X = 10\nX2 = 11\n")
    (ws.path / "src/app/y.py").unlink()
    (ws.path / "src/app/new name\twith tab.py").write_text("N = 1\n")
    (ws.path / "src/app/blob.bin").write_bytes(b"\0\1\2binary")
    (ws.path / "run.sh").chmod(0o644)
    staged = stage(ws)
    raw = git(ws.path, "diff", "--cached", "--raw", "-z", "--no-renames", "--no-abbrev")
    assert staged.raw.decode() == raw
    numstat = git(ws.path, "diff", "--cached", "--numstat", "-z", "--no-renames")
    want = {}
    for record in filter(None, numstat.split("\0")):
        added, deleted, path = record.split("\t", 2)
        want[path] = (
            None if added == "-" else int(added),
            None if deleted == "-" else int(deleted),
        )
    assert {f.path: (f.added, f.deleted) for f in staged.stat.files} == want
    assert len(want) == 5
    assert want["src/app/blob.bin"] == (None, None)
    assert (
        staged.stat_text == git(ws.path, "diff", "--cached", "--stat=72", "--no-renames").rstrip()
    )
    assert staged.patch == git(ws.path, "diff", "--cached", "--no-renames")
    sha = commit(ws, "Change things", TRAILERS, allow_empty=True, staged=staged)
    assert sha is not None
    assert sha == git(ws.path, "rev-parse", "HEAD").strip()
    between = change_between(repo, ws.base, sha)
    assert (between.raw, between.stat, between.patch) == (staged.raw, staged.stat, staged.patch)
    ws.remove()
