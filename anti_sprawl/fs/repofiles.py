"""Which files of a repository the map may name, and reading them safely.

Listing uses ``git ls-files`` in a git work tree (so ``.gitignore`` and ``info/exclude`` hold),
else a walk that honours the root ``.gitignore``. Directory symlinks are never followed.
Secret files are dropped by name before anything else sees them, and a symlink is kept only
when its real target is a non-secret regular file inside the root (docs/security.md P2, P11, SL-1).
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path
from typing import NamedTuple

import pathspec

from ..errors import UsageError
from ..host_tools import host_tool
from . import safe_fs
from .deny_rules import DEFAULT_ALLOW, DEFAULT_DENY, DenyRules
from .scopes import ALWAYS_DENIED_DIRS

__all__ = [
    "BINARY_PROBE",
    "MAX_READ_BYTES",
    "SKIP_DIRS",
    "FileListing",
    "RepoReader",
    "is_secret_path",
    "list_repo_files",
    "read_source",
]

MAX_READ_BYTES = 512 * 1024
BINARY_PROBE = 8192
SKIP_DIRS = frozenset({*ALWAYS_DENIED_DIRS, "node_modules", ".venv", "__pycache__"})
_GIT_TIMEOUT = 120
# docs/security.md SL-1, plus the firewall's extra key and credential files; case-insensitive (P6).
# The firewall's own deny rules: one list of secret names for the whole tool.
_DENY = DenyRules(DEFAULT_DENY, DEFAULT_ALLOW)


class FileListing(NamedTuple):
    """Repo-relative POSIX paths, sorted; ``truncated`` when ``max_files`` cut the listing."""

    files: list[str]
    truncated: bool


def is_secret_path(relpath: str) -> bool:
    """True for paths that must never be read or named (``.env*``, keys, credentials, .git)."""
    rel = "/".join(p for p in relpath.split("/") if p)
    return _DENY.reason(rel) is not None


class RepoReader:
    """Lists and reads files below one repository root, never leaving it.

    It caches, for one map build, which directories are real (no symlink on the way from the
    root), so each file costs one ``lstat``; symlinks take the slow path through ``realpath``.
    The threat is repository content (static links), not a concurrent attacker: the final open
    still refuses a link (``O_NOFOLLOW``) and anything that is not a regular file.
    """

    def __init__(self, root: Path):
        self.root = root.resolve()
        self._prefix = str(self.root).rstrip("/") + "/"
        self._real_dirs: dict[str, bool] = {"": True}

    def list_files(self, *, max_files: int) -> FileListing:
        """Files the map may show: not ignored, not secret, no symlink leaving the root."""
        if os.path.lexists(self._prefix + ".git"):
            candidates = sorted(set(_git_files(self.root)))
        else:
            candidates = _walk(self, max_files + 1)
        kept: list[str] = []
        for rel in candidates:
            if _listable(rel) and self.real_file(rel) is not None:
                kept.append(rel)
                if len(kept) > max_files:
                    return FileListing(kept[:max_files], True)
        return FileListing(kept, False)

    def read(self, relpath: str, *, max_bytes: int = MAX_READ_BYTES) -> str | None:
        """Text of a file, or None if it is secret, binary, too large or leaves the root."""
        if not _listable(relpath):
            return None
        real = self.real_file(relpath)
        if real is None:
            return None
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(real, flags)
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            # a hard link may alias a file outside the repo (docs/security.md SL-10)
            if not stat.S_ISREG(st.st_mode) or st.st_size > max_bytes or st.st_nlink > 1:
                return None
            data = safe_fs.read_capped(fd, max_bytes + 1)
        finally:
            os.close(fd)
        if len(data) > max_bytes or b"\x00" in data[:BINARY_PROBE]:
            return None
        return data.decode("utf-8", errors="replace")

    def real_file(self, rel: str) -> str | None:
        """Absolute real path of ``rel`` if it is a non-secret regular file inside the root."""
        path = self._prefix + rel
        try:
            st = os.lstat(path)
        except OSError:
            return None
        if self._real_dir(rel.rpartition("/")[0]):
            if stat.S_ISREG(st.st_mode):
                return path
            if not stat.S_ISLNK(st.st_mode):
                return None
        real = os.path.realpath(path)
        if not real.startswith(self._prefix):  # the prefix ends in "/": whole components
            return None
        if not _listable(real[len(self._prefix) :]):
            return None
        try:
            return real if stat.S_ISREG(os.lstat(real).st_mode) else None
        except OSError:
            return None

    def _real_dir(self, rel_dir: str) -> bool:
        pending: list[str] = []
        while rel_dir not in self._real_dirs:
            pending.append(rel_dir)
            rel_dir = rel_dir.rpartition("/")[0]
        known = self._real_dirs[rel_dir]
        for directory in reversed(pending):  # from the root down
            if known:
                try:
                    known = stat.S_ISDIR(os.lstat(self._prefix + directory).st_mode)
                except OSError:
                    known = False
            self._real_dirs[directory] = known
        return known


def list_repo_files(root: Path, *, max_files: int) -> FileListing:
    """Files the map may show under ``root`` (see ``RepoReader.list_files``)."""
    return RepoReader(root).list_files(max_files=max_files)


def read_source(root: Path, relpath: str, *, max_bytes: int = MAX_READ_BYTES) -> str | None:
    """Text of one file under ``root`` (see ``RepoReader.read``)."""
    return RepoReader(root).read(relpath, max_bytes=max_bytes)


def _listable(rel: str) -> bool:
    parts = rel.split("/")
    if any(p.lower() in SKIP_DIRS for p in parts[:-1]) or any(p in ("", ".", "..") for p in parts):
        return False
    return not is_secret_path(rel)


def _git_files(real_root: Path) -> list[str]:
    git = host_tool("git")
    if git is None:
        raise UsageError("git not found on PATH")
    argv = [
        git,
        "-c",
        "core.fsmonitor=false",
        "-c",
        "core.hooksPath=/dev/null",
        "-C",
        str(real_root),
        "ls-files",
        "-co",
        "--exclude-standard",
        "-z",
    ]
    # GIT_DIR and friends in our environment would point git at some other repository.
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            env=env,
            timeout=_GIT_TIMEOUT,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"cannot list files of {real_root} with git: {exc}") from exc
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise UsageError(f"git ls-files failed in {real_root}: {message[0] if message else ''}")
    names: list[str] = []
    for raw in done.stdout.split(b"\x00"):
        if raw:
            try:
                names.append(raw.decode("utf-8"))
            except UnicodeDecodeError:
                continue  # a name we could not show or pass on faithfully
    return names


def _walk(reader: RepoReader, limit: int) -> list[str]:
    ignored = _root_gitignore(reader)
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(reader.root, followlinks=False):
        rel_dir = Path(dirpath).relative_to(reader.root).as_posix()
        prefix = "" if rel_dir == "." else rel_dir + "/"
        dirnames[:] = sorted(
            d
            for d in dirnames
            if d.lower() not in SKIP_DIRS
            and not is_secret_path(prefix + d)
            and not (ignored is not None and ignored.match_file(prefix + d + "/"))
        )
        for name in sorted(filenames):
            rel = prefix + name
            if ignored is not None and ignored.match_file(rel):
                continue
            found.append(rel)
        if len(found) >= limit:
            break
    return sorted(found)


def _root_gitignore(reader: RepoReader) -> pathspec.GitIgnoreSpec | None:
    text = reader.read(".gitignore")
    if not text:
        return None
    return pathspec.GitIgnoreSpec.from_lines(text.splitlines())
