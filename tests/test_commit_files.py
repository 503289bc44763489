"""The start commit's scoped files (context/commit_files.py): the checkout's copy of a file is
taken only where it is the commit's blob, byte for byte; every other file comes from git."""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from anti_sprawl.context.commit_files import MAX_EXPORT_BYTES
from benchmarks._git_counter import counted_calls, counting_env

from .conftest import GIT_ENV

FILES = {
    "pkg/a.py": b"A = 1\n",
    "pkg/b.py": b"B = 2\n",
    "pkg/crlf.py": b"x = 1\r\ny = 2\r\n",
    "pkg/gone.py": b"G = 3\n",
    "pkg/link.py": b"L = 4\n",
    "pkg/fifo.py": b"F = 5\n",
    "pkg/same_size.py": b"S = 6\n",
    "pkg/empty.py": b"",
    "docs/readme.md": b"# readme\n",
}


def git(repo: Path, *args: str, data: bytes | None = None) -> bytes:
    env = {**os.environ, **GIT_ENV}
    return subprocess.run(
        ["git", *args], cwd=repo, input=data, env=env, check=True, capture_output=True
    ).stdout


def committed(tmp_path: Path, object_format: str) -> tuple[Path, str]:
    repo = tmp_path / "repo"
    for rel, data in FILES.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_bytes(data)
    git(tmp_path, "init", "-q", "-b", "main", f"--object-format={object_format}", str(repo))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "files")
    return repo, git(repo, "rev-parse", "HEAD").decode().strip()


def blobs(repo: Path, commit: str, paths: list[str]) -> dict[str, bytes]:
    return {p: git(repo, "cat-file", "blob", f"{commit}:{p}") for p in paths}


READ = """
import json, sys
from pathlib import Path
from anti_sprawl.context.commit_files import read_commit_files
from anti_sprawl.fs.scopes import Scope
files = read_commit_files(Path(sys.argv[1]), sys.argv[2], [Scope(sys.argv[3:])])
print(json.dumps({p: files.data(p).hex() for p in files.paths}))
"""


def read_counted(
    tmp_path: Path, repo: Path, commit: str, *entries: str
) -> tuple[dict[str, bytes], collections.Counter[str]]:
    """``read_commit_files`` in a process whose git is a counting one: the files' bytes, in
    listing order, and the git subcommands it ran."""
    log = tmp_path / "git.log"
    log.unlink(missing_ok=True)
    env = counting_env(tmp_path / "bin", log, os.environ)
    argv = [sys.executable, "-c", READ, str(repo), commit, *entries]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
    return {p: bytes.fromhex(h) for p, h in json.loads(done.stdout).items()}, counted_calls(log)


@pytest.mark.parametrize("object_format", ["sha1", "sha256"])
def test_a_clean_checkout_is_read_without_git_reading_the_blobs(
    tmp_path: Path, object_format: str
) -> None:
    """Every file of a clean checkout is its committed blob (its id, hashed as the repository
    hashes, is the listed one): it is read from the checkout, in the listing's order, and no
    ``cat-file`` runs (issue 29, item 3: that process was 0.06 s of validate --repo)."""
    repo, commit = committed(tmp_path, object_format)
    files, calls = read_counted(tmp_path, repo, commit, "pkg/", "docs/")
    assert files == blobs(repo, commit, sorted(FILES))
    assert list(files) == sorted(FILES)
    assert calls == {"ls-tree": 1}


def test_what_the_checkout_changed_comes_from_git(tmp_path: Path) -> None:
    """A changed file, one of the same size with other bytes, a deleted one, one replaced by
    a symlink to the same bytes, one with its line breaks converted and a FIFO (never a read
    that hangs): each is read from git, as committed (their sizes in one ``cat-file
    --batch-check``, their bytes in one ``cat-file --batch``); a file over the read cap is
    neither read nor matched, changed or not."""
    repo, commit = committed(tmp_path, "sha1")
    pkg = repo / "pkg"
    for name in ("big.py", "big_changed.py"):
        (pkg / name).write_bytes(b"#" * (MAX_EXPORT_BYTES + 1))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "big files")
    commit = git(repo, "rev-parse", "HEAD").decode().strip()
    (pkg / "big_changed.py").write_bytes(b"small now\n")
    (pkg / "a.py").write_bytes(b"A = 10\n")
    (pkg / "same_size.py").write_bytes(b"S = 7\n")
    (pkg / "gone.py").unlink()
    (pkg / "copy.py").write_bytes(FILES["pkg/link.py"])
    (pkg / "link.py").unlink()
    (pkg / "link.py").symlink_to("copy.py")
    (pkg / "crlf.py").write_bytes(b"x = 1\ny = 2\n")
    (pkg / "fifo.py").unlink()
    os.mkfifo(pkg / "fifo.py")
    files, calls = read_counted(tmp_path, repo, commit, "pkg/")
    committed_pkg = sorted(p for p in FILES if p.startswith("pkg/"))
    assert files == blobs(repo, commit, committed_pkg)
    assert list(files) == committed_pkg
    assert calls == {"ls-tree": 1, "cat-file": 2}
