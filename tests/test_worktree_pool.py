"""A worktree handed from one node to the next (git/worktree_pool.py), on real git repos.

The promise: the next node sees exactly what a fresh ``Workspace.create`` at its base makes
(every path, type, mode and content; git's own view; the admin dir), or gets a fresh one.
Each case leaves what a node's commands could leave (the setup command has the worktree
writable; a root or unsandboxed one can do more) and compares the next node's tree with a
fresh checkout of the same commit. Leftovers that ``reset --hard`` and ``clean -ffdx`` undo are
undone in the handed-on tree; leftovers they cannot undo, or that git does not even see,
make the pool delete the tree and make a fresh one (its ``refusals`` say why).
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from anti_sprawl.git.fresh_tree import index_entries
from anti_sprawl.git.workspace import Workspace, remove_stale_worktrees
from anti_sprawl.git.worktree_pool import WorktreePool
from anti_sprawl.plan.model import Plan
from anti_sprawl.providers.scripted import Script, ScriptedProvider
from anti_sprawl.run.runner import ExecuteOptions, RunSettings, execute
from anti_sprawl.sandbox.sandbox import SandboxPolicy

from . import e2e_fixture as fx

FILES = {
    "README.md": "# demo\n",
    ".gitignore": "build/\n__pycache__/\n*.pyc\nvendor/\n",
    "pkg/__init__.py": "",
    "pkg/a.py": "A = 1\n",
    "pkg/deep/c.py": "C = 3\n",
    "run.sh": "#!/bin/sh\necho hi\n",
}


def git(repo: Path, *args: str) -> str:
    cfg = ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "core.hooksPath=/dev/null"]
    proc = subprocess.run(["git", *cfg, *args], cwd=repo, capture_output=True, check=True)
    return proc.stdout.decode()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "run.sh").chmod(0o755)
    (root / "link").symlink_to("pkg/a.py")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "one")
    (root / "pkg" / "a.py").write_text("A = 2\n")
    (root / "pkg" / "b.py").write_text("B = 1\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "two")
    return root


def commits(repo: Path) -> tuple[str, str]:
    return git(repo, "rev-parse", "HEAD~1").strip(), git(repo, "rev-parse", "HEAD").strip()


def tree(root: Path) -> dict[str, tuple[str, int, str]]:
    """Every entry below ``root``: its type, permission bits, and content or link target
    (the ``.git`` pointer's content differs by worktree name: git's view is compared apart)."""
    found: dict[str, tuple[str, int, str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            full = Path(dirpath, name)
            rel, st = full.relative_to(root).as_posix(), full.lstat()
            if stat.S_ISLNK(st.st_mode):
                found[rel] = ("link", 0, os.readlink(full))
            elif stat.S_ISREG(st.st_mode):
                text = "pointer" if rel == ".git" else full.read_text()
                found[rel] = ("file", stat.S_IMODE(st.st_mode), text)
            else:
                kind = "dir" if stat.S_ISDIR(st.st_mode) else "other"
                found[rel] = (kind, stat.S_IMODE(st.st_mode), "")
    return found


def git_view(ws: Workspace) -> tuple[str, str, str]:
    status = ["status", "--porcelain=v2", "-z", "--ignored=matching", "--untracked-files=all"]
    return (
        ws.git(status).stdout.decode(),
        ws.git(["ls-files", "-s", "-z"]).stdout.decode(),
        ws.head,
    )


def assert_fresh(ws: Workspace, repo: Path, base: str) -> None:
    """``ws`` is what a fresh worktree of ``base`` is: files, modes, git's view, admin dir."""
    with Workspace.create(repo, repo / ".anti-sprawl" / "fresh", "fresh", base) as fresh:
        assert tree(ws.path) == tree(fresh.path)
        assert git_view(ws) == git_view(fresh)
        assert ws.head == base
        assert (ws.path / ".git").read_text() == f"gitdir: {ws.admin_dir}\n"
        assert (ws.admin_dir / "ORIG_HEAD").read_text() == f"{base}\n"
        left = {p.name for p in ws.admin_dir.iterdir()} - {
            p.name for p in fresh.admin_dir.iterdir()
        }
        assert left == set()


@pytest.fixture
def pool(repo: Path) -> Iterator[WorktreePool]:
    pool = WorktreePool(repo, repo / ".anti-sprawl" / "worktrees", "run1")
    yield pool
    pool.close()


def test_a_used_worktree_is_brought_to_the_next_base_exactly(
    repo: Path, pool: WorktreePool
) -> None:
    one, two = commits(repo)
    ws = pool.take(one)
    p = ws.path
    (p / "pkg" / "a.py").write_text("changed\n")  # a tracked file changed, one deleted
    (p / "README.md").unlink()
    (p / "run.sh").chmod(0o644)  # the exec bit git tracks
    (p / "pkg" / "new.py").write_text("N = 1\n")  # the node's file, committed below
    git(p, "add", "-A")
    git(p, "commit", "-q", "-m", "the node's commit")
    (p / "untracked.txt").write_text("u\n")
    (p / "build").mkdir()
    (p / "build" / "out.bin").write_text("o\n")
    (p / "pkg" / "__pycache__").mkdir()
    (p / "pkg" / "__pycache__" / "a.cpython-311.pyc").write_text("pyc\n")
    (p / "vendor" / "nested").mkdir(parents=True)  # a nested repository in an ignored dir
    git(p / "vendor" / "nested", "init", "-q")
    (p / "extra").mkdir()
    (p / "extra" / "inner").mkdir()  # empty directories
    (p / "pkg" / "stray").symlink_to("/etc/passwd")
    os.link(p / "pkg" / "a.py", p / "pkg" / "hardlink.py")  # a second name, untracked
    pool.give_back(ws)
    again = pool.take(two)
    assert (again.path, pool.reused, pool.refusals) == (p, 1, [])
    assert_fresh(again, repo, two)
    pool.give_back(again)
    back = pool.take(one)  # and back to an older base
    assert (back.path, pool.reused) == (p, 2)
    assert_fresh(back, repo, one)


def _fifo(p: Path) -> None:
    os.mkfifo(p / "pkg" / "fifo")


def _socket(p: Path) -> None:
    short = Path(tempfile.mkdtemp())  # a socket's path has at most 107 bytes
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(short / "s"))
    try:
        (short / "s").rename(p / "pkg" / "sock")
    except OSError as exc:
        pytest.skip(f"cannot move a socket into the worktree: {exc}")
    finally:
        shutil.rmtree(short, ignore_errors=True)


def _nested_git_dir(p: Path) -> None:
    git(p / "pkg", "init", "-q")  # pkg/.git inside a tracked directory: git never looks in


def _nested_git_file(p: Path) -> None:
    (p / "pkg" / "deep" / ".git").write_text("gitdir: /elsewhere\n")


def _pointer(p: Path) -> None:
    (p / ".git").write_text((p / ".git").read_text().replace("\n", "x\n"))


def _pointer_dir(p: Path) -> None:
    (p / ".git").unlink()
    (p / ".git").mkdir()


def _dir_mode(p: Path) -> None:
    (p / "pkg" / "deep").chmod(0o700)


def _dir_no_x(p: Path) -> None:
    (p / "pkg" / "deep").chmod(0o644)


def _dir_000(p: Path) -> None:
    (p / "pkg" / "deep").chmod(0)


def _file_mode(p: Path) -> None:
    (p / "pkg" / "deep" / "c.py").chmod(0o600)  # git tracks only the exec bit


def _unreadable(p: Path) -> None:
    (p / "README.md").chmod(0)


def _setgid_dir(p: Path) -> None:
    (p / "pkg").chmod(0o2755)


def _outside_link(p: Path) -> None:
    os.link(p / "pkg" / "deep" / "c.py", p.parent / "outside-name")  # a second name git cannot see


def _attributes(p: Path) -> None:
    (p / "build").mkdir()
    (p / "build" / ".gitattributes").write_text("* text eol=crlf\n")


def _admin_extra(name: str) -> Callable[[Path], None]:
    def leave(p: Path) -> None:
        admin = Path((p / ".git").read_text().split(": ", 1)[1].strip())
        (admin / name).parent.mkdir(exist_ok=True)
        (admin / name).write_text("/*\n" if "sparse" in name else "x\n")

    return leave


def _xattr(p: Path) -> None:
    try:
        os.setxattr(p / "pkg" / "deep" / "c.py", "user.note", b"left")
    except OSError as exc:
        pytest.skip(f"no user extended attributes here: {exc}")


def _owner(p: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("chown to another uid needs root")
    os.lchown(p / "pkg" / "deep", 65534, 65534)  # a directory: git looks at files only


def _chattr(flag: str, rel: str) -> Callable[[Path], None]:
    def leave(p: Path) -> None:
        target = p / rel
        if not target.exists():
            target.write_text("x\n")
        proc = subprocess.run(["chattr", flag, str(target)], capture_output=True, check=False)
        if proc.returncode != 0:
            pytest.skip(f"chattr {flag} unsupported here: {proc.stderr.decode().strip()}")

    return leave


REFUSED = {
    "fifo": _fifo,
    "socket": _socket,
    "a .git dir in a tracked dir": _nested_git_dir,
    "a .git file in a tracked dir": _nested_git_file,
    "a changed .git pointer": _pointer,
    "a .git dir for the pointer": _pointer_dir,
    "a directory chmod 700": _dir_mode,
    "a directory without x": _dir_no_x,
    "a directory chmod 000": _dir_000,
    "a file chmod 600": _file_mode,
    "an unreadable file": _unreadable,
    "a setgid directory": _setgid_dir,
    "a hard link from outside": _outside_link,
    "an attributes file": _attributes,
    "config.worktree": _admin_extra("config.worktree"),
    "info/sparse-checkout": _admin_extra("info/sparse-checkout"),
    "a locked worktree": _admin_extra("locked"),
    "hooks": _admin_extra("hooks"),
    "an extended attribute": _xattr,
    "another owner": _owner,
    "an immutable tracked file": _chattr("+i", "pkg/deep/c.py"),
    "an append-only tracked file": _chattr("+a", "pkg/deep/c.py"),
    "an immutable file the reset rewrites": _chattr("+i", "pkg/a.py"),
    "an immutable untracked file": _chattr("+i", "build-left.txt"),
}


def _undo(root: Path) -> None:
    """Let pytest delete what a case left (an immutable file, a closed directory)."""
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            full = Path(dirpath, name)
            if not full.is_symlink():
                subprocess.run(["chattr", "-i", "-a", str(full)], capture_output=True, check=False)
                if full.is_dir():
                    full.chmod(0o755)
                    _undo(full)


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_what_cleaning_cannot_undo_gets_a_fresh_worktree(
    repo: Path, pool: WorktreePool, case: str
) -> None:
    one, two = commits(repo)
    ws = pool.take(one)
    try:
        REFUSED[case](ws.path)
        pool.give_back(ws)
        again = pool.take(two)
        assert (pool.reused, pool.fresh, len(pool.refusals)) == (0, 2, 1), pool.refusals
        assert_fresh(again, repo, two)
        pool.give_back(again)
    finally:
        _undo(repo / ".anti-sprawl")
    pool.close()
    remove_stale_worktrees(repo, repo / ".anti-sprawl" / "worktrees", "run1")
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1


def test_a_slot_is_one_nodes_at_a_time(repo: Path, pool: WorktreePool) -> None:
    one, two = commits(repo)
    held: set[Path] = set()
    lock, clashes = threading.Lock(), []

    def node(i: int) -> None:
        for k in range(6):
            with pool.lease(one if (i + k) % 2 else two) as ws:
                with lock:
                    clashes.extend([ws.path] if ws.path in held else [])
                    held.add(ws.path)
                (ws.path / "pkg" / f"n{i}-{k}.py").write_text("x\n")
                with lock:
                    held.discard(ws.path)

    threads = [threading.Thread(target=node, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert clashes == []
    assert (pool.reused + pool.fresh, pool.refusals) == (24, [])
    assert pool.fresh <= 4  # one a thread at most
    pool.close()
    assert not list((repo / ".anti-sprawl" / "worktrees").iterdir())
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1


def test_a_worktree_given_back_after_close_is_deleted(repo: Path, pool: WorktreePool) -> None:
    one, _ = commits(repo)
    ws = pool.take(one)
    pool.close()  # the run winds up while a node still runs
    pool.give_back(ws)
    assert (ws.path.exists(), ws.admin_dir.exists()) == (False, False)


def test_sparse_worktrees_are_never_handed_on(repo: Path, pool: WorktreePool) -> None:
    one, two = commits(repo)
    ws = pool.take(one, sparse=["pkg/a.py"])
    pool.give_back(ws)
    assert not ws.path.exists()
    pool.give_back(pool.take(two, sparse=["pkg/b.py"]))
    assert (pool.reused, pool.fresh) == (0, 2)


def test_a_repository_that_converts_on_checkout_never_hands_a_worktree_on(
    repo: Path, pool: WorktreePool
) -> None:
    one, two = commits(repo)
    git(repo, "config", "core.autocrlf", "true")
    pool.give_back(pool.take(one))
    pool.give_back(pool.take(two))
    assert (pool.reused, pool.fresh) == (0, 2)


def test_the_index_is_read_as_git_lists_it(repo: Path) -> None:
    listed = git(repo, "ls-files", "-s", "-z").split("\0")
    modes = {line.split("\t", 1)[1]: int(line.split()[0], 8) for line in listed if line}
    assert index_entries(repo / ".git" / "index", 20) == modes
    git(repo, "update-index", "--skip-worktree", "README.md")  # version 3, an extended flag
    assert index_entries(repo / ".git" / "index", 20) is None


# A setup command (the worktree writable, in the real sandbox) that prints the tree it was
# given, then leaves what a build leaves: ignored output, bytecode, a nested repository, a
# fifo, a symlink and empty directories in ignored places; "hostile" adds a fifo git never sees
# in a tracked directory, which no reset or clean removes.
LISTING_SETUP = """
import os, stat, sys
print("CWD", os.path.basename(os.getcwd()), os.stat("pkg/base.py").st_ino)
for dirpath, dirnames, filenames in os.walk("."):
    for name in sorted(dirnames + filenames):
        path = os.path.join(dirpath, name)
        st = os.lstat(path)
        body = ""
        if stat.S_ISREG(st.st_mode):
            body = open(path, "rb").read().hex()
        elif stat.S_ISLNK(st.st_mode):
            body = os.readlink(path)
        print("TREE", path, oct(st.st_mode), body)
os.makedirs("build/deep", exist_ok=True)
open("build/deep/out.o", "w").write("o")
os.makedirs("pkg/__pycache__", exist_ok=True)
open("pkg/__pycache__/base.cpython-311.pyc", "w").write("c")
os.makedirs("vendor/nested/.git", exist_ok=True)
open("vendor/nested/.git/HEAD", "w").write("ref: refs/heads/main\\n")
os.mkfifo("build/fifo")
os.symlink("/etc/passwd", "build/link")
os.makedirs("build/empty/dir")
if sys.argv[1:] == ["hostile"]:
    os.mkfifo("pkg/fifo")
"""


WRITTEN = b"X = 1\n"


@pytest.mark.parametrize("hostile", [False, True])
def test_the_next_node_of_a_run_sees_the_tree_a_fresh_worktree_shows(
    tmp_path: Path, hostile: bool
) -> None:
    repo = fx.make_repo(tmp_path)
    (repo / ".gitignore").write_text("build/\n__pycache__/\nvendor/\n")
    (repo / "listing.py").write_text(LISTING_SETUP)
    fx.git(repo, "add", "-A")
    fx.git(repo, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "ignores")
    setup = [sys.executable, "listing.py", *(["hostile"] if hostile else [])]
    data = fx.plan(setup_command=setup, test_command=None, max_attempts=1)
    data["tasks"] = [fx.node("a", [], "pkg/a.py", ""), fx.node("b", ["a"], "pkg/b.py", "")]
    turns = {
        t: [s for s in fx.worker_turns(f"pkg/{t}.py", WRITTEN.decode()) if s["tool"] != "run_tests"]
        for t in ("a", "b")
    }
    provider = ScriptedProvider(Script.from_data(fx.script(**turns)))
    opts = ExecuteOptions(provider, RunSettings(sandbox=SandboxPolicy(), jobs=1))
    state = execute(Plan.model_validate(data), repo, opts)
    assert state.status == "succeeded", {t: r.message for t, r in state.tasks.items()}
    seen = {}
    for task in ("a", "b"):
        record = state.tasks[task]
        assert record.setup is not None
        log = Path(record.setup.log or "").read_text().splitlines()
        cwd = next(line.split()[1:] for line in log if line.startswith("CWD"))
        seen[task] = (cwd, {line for line in log if line.startswith("TREE")})
    (slot_a, inode_a), tree_a = seen["a"]
    (slot_b, inode_b), tree_b = seen["b"]
    assert slot_a == slot_b == f"{state.run_id}-w0"  # one slot, named after no node
    # b's base is a's commit: a fresh worktree of it is a's tree plus pkg/a.py, nothing else.
    assert tree_b == tree_a | {f"TREE ./pkg/a.py 0o100644 {WRITTEN.hex()}"}
    if not hostile:
        assert inode_a == inode_b  # handed on, not checked out again
    assert not list((repo / ".anti-sprawl" / "worktrees").iterdir())
