"""What a fresh checkout of a worktree's index is, and whether a tree on disk is exactly that.

The worktree pool (git/worktree_pool.py) hands a finished node's worktree to the next node
only when, after ``git reset --hard``, the tree is what ``Workspace.create`` would check out:
each tracked path with its type and the mode a checkout under the umask gives, and nothing git
itself cannot see or undo (a ``.git`` below the top, a fifo, a socket, a second hard link, an
extended attribute, an immutable or append-only flag, another owner). The index is read from
its file, not asked of git (issue 29: a node's git processes): only what a plain full checkout
writes, index versions 2 and 3 with every entry at stage 0 and no assume-unchanged,
skip-worktree or intent-to-add flag. Anything else (version 4's compressed paths, a sparse
index's directory entries, a conflict, a file cut short) reads as None, and the pool makes a
fresh worktree instead (Documentation/gitformat-index.txt in git's sources has the format).
"""

from __future__ import annotations

import os
import stat
import struct
from collections.abc import Mapping
from pathlib import Path

from ..fs.placement import inode_flags

__all__ = ["FILE_MODES", "GITLINK", "SYMLINK", "index_entries", "plain_file_holds", "survey"]

FILE_MODES = (0o100644, 0o100755)
SYMLINK = 0o120000
GITLINK = 0o160000
_STAGE_OR_VALID = 0x8000 | 0x3000  # assume-valid, merge stage
_EXTENDED = 0x4000  # a second flags word follows (version 3): skip-worktree, intent-to-add
_STATS = 40  # ctime, mtime (seconds, nanoseconds), dev, ino, mode, uid, gid, size
_IMMUTABLE_OR_APPEND = 0x10 | 0x20  # FS_IMMUTABLE_FL, FS_APPEND_FL


def index_entries(index: Path, oid_bytes: int) -> dict[str, int] | None:
    """``{path: mode}`` of every entry in ``index`` (object ids of ``oid_bytes`` bytes: 20 for
    SHA-1, 32 for SHA-256); None for anything but a plain checkout's index, or no file."""
    try:
        data = index.read_bytes()
    except OSError:
        return None
    if len(data) < 12 or data[:4] != b"DIRC":
        return None
    version, count = struct.unpack_from(">II", data, 4)
    if version not in (2, 3):
        return None
    entries: dict[str, int] = {}
    pos, fixed = 12, _STATS + oid_bytes + 2
    try:
        for _ in range(count):
            mode = struct.unpack_from(">I", data, pos + 24)[0]
            flags = struct.unpack_from(">H", data, pos + _STATS + oid_bytes)[0]
            name_at = pos + fixed
            if flags & _STAGE_OR_VALID or mode not in (*FILE_MODES, SYMLINK, GITLINK):
                return None
            if flags & _EXTENDED:
                if version < 3 or struct.unpack_from(">H", data, name_at)[0]:
                    return None
                name_at += 2
            end = data.index(b"\0", name_at)
            entries[data[name_at:end].decode("utf-8", "surrogateescape")] = mode
            # Each entry is NUL-padded to a multiple of 8 bytes, with at least one NUL.
            pos += (end - pos + 8) & ~7
    except (struct.error, ValueError):  # a file cut short
        return None
    return entries if len(entries) == count else None


def plain_file_holds(path: Path, content: bytes) -> bool:
    """Whether ``path`` is a regular file (not a link) holding exactly ``content``."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return False
        return path.read_bytes() == content
    except OSError:
        return False


def survey(
    root: Path, files: Mapping[str, int], pointer: bytes, umask: int
) -> tuple[list[str], str | None]:
    """Compare the tree at ``root`` with its index ``files`` (``{path: mode}``) and its
    ``.git`` file with ``pointer``: the untracked entries (directories not entered), and why
    the tree is not what a checkout under ``umask`` makes, or None."""
    want = _Checkout(files, pointer, umask)
    extra: list[str] = []
    found = 0
    why = _inode_odd(str(root), os.lstat(root), want.dir_perm, True)
    stack = [""]
    while stack and why is None:
        rel = stack.pop()
        try:
            with os.scandir(root / rel) as listing:
                entries = [(e.name, e.path, e.stat(follow_symlinks=False)) for e in listing]
        except OSError as exc:
            return extra, f"cannot list {rel or '.'}: {exc}"
        if rel in want.gitlinks and entries:
            return extra, f"{rel}: a submodule's directory is not empty"
        for name, full, st in entries:
            path = f"{rel}/{name}" if rel else name
            seen, why = want.judge(path, name, full, st)
            if why:
                return extra, why
            if seen == "untracked":
                extra.append(path)
            elif seen in ("directory", "submodule"):
                stack.append(path)  # a submodule's must be empty, as a checkout leaves it
            found += seen in ("tracked", "submodule")
    if why is None and found != len(files):
        why = f"{len(files) - found} tracked paths missing"
    return extra, why


class _Checkout:
    """What a checkout of an index makes: each entry's type and mode, the directories."""

    def __init__(self, files: Mapping[str, int], pointer: bytes, umask: int):
        self.files, self.pointer = files, pointer
        self.dirs, self.gitlinks = {""}, {p for p, m in files.items() if m == GITLINK}
        for path in files:
            parts = path.split("/")
            self.dirs.update("/".join(parts[:i]) for i in range(1, len(parts)))
        self.dir_perm = 0o777 & ~umask
        self.file_perm = {0o100644: 0o666 & ~umask, 0o100755: 0o777 & ~umask}

    def judge(self, path: str, name: str, full: str, st: os.stat_result) -> tuple[str, str | None]:
        """What one entry is (``tracked``, ``submodule``, ``directory``, ``untracked``, or
        ``pointer``), and why it is not as a checkout makes it, or None."""
        want, kind = self.files.get(path), stat.S_IFMT(st.st_mode)
        if path == ".git":
            same = kind == stat.S_IFREG and plain_file_holds(Path(full), self.pointer)
            why = None if same else ".git: not the pointer git wrote"
            return "pointer", why or _inode_odd(full, st, self.file_perm[0o100644], False)
        if name in (".git", ".gitattributes"):
            return "", f"{path}: a {name} below the top"
        if want is None and kind in (stat.S_IFREG, stat.S_IFLNK):
            return "untracked", None
        if kind == stat.S_IFDIR and want in (None, GITLINK):
            if want is None and path not in self.dirs:
                return "untracked", None
            seen = "directory" if want is None else "submodule"
            return seen, _inode_odd(full, st, self.dir_perm, True)
        if kind == stat.S_IFREG and want in FILE_MODES and st.st_nlink == 1:
            return "tracked", _inode_odd(full, st, self.file_perm[want], False)
        if kind == stat.S_IFLNK and want == SYMLINK and st.st_uid == os.geteuid():
            return "tracked", None
        # a fifo, socket or device (git neither lists nor removes them), or a type or link
        # count a checkout never makes
        return "", f"{path}: not as a checkout makes it (mode {st.st_mode:o})"


def _inode_odd(path: str, st: os.stat_result, perm: int, directory: bool) -> str | None:
    """Why one file or directory differs from a fresh checkout's beyond its content."""
    if st.st_uid != os.geteuid():
        return f"{path}: owned by uid {st.st_uid}"
    if stat.S_IMODE(st.st_mode) != perm:
        return f"{path}: mode {stat.S_IMODE(st.st_mode):o}, a checkout's is {perm:o}"
    try:
        names = [n for n in os.listxattr(path, follow_symlinks=False) if n != "security.selinux"]
    except OSError:
        names = []  # a file system without extended attributes
    if names:
        return f"{path}: extended attributes {names}"
    flags = inode_flags(path, directory=directory)
    if flags is None or flags & _IMMUTABLE_OR_APPEND:
        return f"{path}: immutable, append-only or unreadable"
    return None
