"""Deletes and moves inside a write scope: judged on real paths, by directory fd, no overwrite.

Rules (docs/reference.md, "Worker tools"): both ends of a move and every file a delete or move
touches must be writable; a directory goes only when every file below it is, and never when it
is the root of a write-scope entry (``src/app`` for ``src/app/``) or holds one. No symlink may
be crossed on the way to either path (the real path must be the path asked for), a symlink is
deleted as a link and never moved (its target would change meaning), a moved directory may hold
no symlinks, and a move never replaces an existing entry (``renameat2(RENAME_NOREPLACE)``).
Everything happens through directory fds opened beneath the root, so a swapped-in symlink is
never followed; the post-node audit reverts whatever still slips through.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence

from . import safe_fs
from .confinement import Confinement, join, lstat_at, refusal_from_os
from .path_rules import Refusal
from .scoped_write import open_parent

__all__ = ["delete_path", "move_path"]

_MAX_DEPTH = 64
_MAX_FILES = 10_000
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def delete_path(c: Confinement, parts: Sequence[str]) -> list[str]:
    """Delete the file, symlink or directory at ``parts``; the canonical paths removed."""
    _precheck(c, "/".join(parts))
    fd = _exact_parent(c, parts)
    try:
        name, rel = parts[-1], "/".join(parts)
        st = lstat_at(fd, name)
        if st is None:
            raise Refusal("not_found", "no such file or directory")
        if not stat.S_ISDIR(st.st_mode):
            c.require(rel, write=True)
            _unlink(fd, name)
            return [rel]
        _check_not_root(c, rel)
        c.require_dir(rel, write=True)
        dfd = _open_dir(fd, name, rel, c)
        try:
            entries = _inventory(c, dfd, rel, links_ok=True)
            _remove_tree(dfd)
        except OSError as exc:
            raise refusal_from_os(exc) from None
        finally:
            os.close(dfd)
        try:
            os.rmdir(name, dir_fd=fd)
        except OSError as exc:
            raise refusal_from_os(exc) from None
        return [e for e, _ in entries]
    finally:
        os.close(fd)


def move_path(c: Confinement, src: Sequence[str], dst: Sequence[str]) -> list[tuple[str, str]]:
    """Rename ``src`` to ``dst`` (which must not exist); the (old, new) file paths moved."""
    src_rel, dst_rel = "/".join(src), "/".join(dst)
    _precheck(c, src_rel)
    sfd = _exact_parent(c, src)
    try:
        st = lstat_at(sfd, src[-1])
        if st is None:
            raise Refusal("not_found", "no such file or directory")
        is_dir = stat.S_ISDIR(st.st_mode)
        files = _movable(c, sfd, src, st)
        if dst_rel == src_rel or dst_rel.startswith(src_rel + "/"):
            raise Refusal("bad_path", "the destination is the source or lies inside it")
        _precheck(c, dst_rel)
        moves = [(f, dst_rel + f[len(src_rel) :]) for f in files]
        for _, new in moves:
            c.require(new, write=True)
        if is_dir:
            c.require_dir(dst_rel, write=True)
        dfd = _exact_parent(c, dst, create=True)
        try:
            if lstat_at(dfd, dst[-1]) is not None:
                raise Refusal("exists", f"{dst_rel} exists; delete it first to replace it")
            try:
                safe_fs.rename_noreplace(sfd, src[-1], dfd, dst[-1])
            except FileExistsError:
                raise Refusal("exists", f"{dst_rel} exists; delete it first") from None
            except OSError as exc:
                raise refusal_from_os(exc) from None
        finally:
            os.close(dfd)
        return moves
    finally:
        os.close(sfd)


def _movable(c: Confinement, parent: int, parts: Sequence[str], st: os.stat_result) -> list[str]:
    """The files a move of ``parts`` would carry, each checked; refuses links and specials."""
    rel = "/".join(parts)
    if stat.S_ISLNK(st.st_mode):
        raise Refusal("symlink_path", "a symlink is never moved (its target would change)")
    if stat.S_ISDIR(st.st_mode):
        _check_not_root(c, rel)
        c.require_dir(rel, write=True)
        dfd = _open_dir(parent, parts[-1], rel, c)
        try:
            return [f for f, _ in _inventory(c, dfd, rel, links_ok=False)]
        finally:
            os.close(dfd)
    if not stat.S_ISREG(st.st_mode):
        raise Refusal("special_file", "not a regular file (FIFO, socket or device)")
    if st.st_nlink > 1:
        raise Refusal("hardlink", f"has {st.st_nlink} hard links")
    c.require(rel, write=True)
    return [rel]


def _precheck(c: Confinement, rel: str) -> None:
    """Refuse early, with the clearest reason, a path that can be neither file nor directory."""
    try:
        c.require(rel, write=True)
    except Refusal as refusal:
        try:
            c.require_dir(rel, write=True)  # a directory leading into the scope may still go
        except Refusal:
            raise refusal from None


def _exact_parent(c: Confinement, parts: Sequence[str], *, create: bool = False) -> int:
    """An fd on the parent of ``parts``, reached without any symlink (created if asked)."""
    lexical = "/".join(parts[:-1])
    fd, real = open_parent(c, parts[:-1], create=False)
    if fd is None:
        if real != lexical:
            raise Refusal("symlink_path", f"{lexical} goes through a symlink to {real}")
        if not create:
            raise Refusal("not_found", f"no directory {lexical}")
        fd, real = open_parent(c, parts[:-1], create=True)
        assert fd is not None  # create=True always yields an fd
    if real != lexical:
        os.close(fd)
        raise Refusal("symlink_path", f"{lexical} goes through a symlink to {real or '.'}")
    return fd


def _check_not_root(c: Confinement, rel: str) -> None:
    """Refuse a directory that is (or holds) the root of a directory or glob scope entry."""
    for root in c.write_scope.roots():
        if root == rel or root.startswith(rel + "/"):
            raise Refusal("scope_root", f"{rel} is the root of write-scope entry {root}/")


def _open_dir(parent: int, name: str, rel: str, c: Confinement) -> int:
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
    except OSError as exc:
        raise refusal_from_os(exc) from None
    if c.real(fd) != rel:
        os.close(fd)
        raise Refusal("race", "the directory changed while it was opened")
    return fd


def _inventory(
    c: Confinement, dir_fd: int, rel: str, *, links_ok: bool, depth: int = 0
) -> list[tuple[str, int]]:
    """Every non-directory below ``dir_fd`` with its mode; refuses anything not writable."""
    if depth > _MAX_DEPTH:
        raise Refusal("too_large", f"more than {_MAX_DEPTH} directory levels")
    out: list[tuple[str, int]] = []
    with os.scandir(dir_fd) as it:
        entries = sorted(it, key=lambda e: e.name)
    for entry in entries:
        path = join(rel, entry.name)
        mode = entry.stat(follow_symlinks=False).st_mode
        if stat.S_ISDIR(mode):
            c.require_dir(path, write=True)
            sub = _open_dir(dir_fd, entry.name, path, c)
            try:
                out += _inventory(c, sub, path, links_ok=links_ok, depth=depth + 1)
            finally:
                os.close(sub)
        else:
            if stat.S_ISLNK(mode) and not links_ok:
                raise Refusal(
                    "symlink_path", f"{path} is a symlink; a moved directory may hold none"
                )
            c.require(path, write=True)
            out.append((path, mode))
        if len(out) > _MAX_FILES:
            raise Refusal("too_large", f"more than {_MAX_FILES} files")
    return out


def _remove_tree(dir_fd: int) -> None:
    """Empty the directory behind ``dir_fd`` without following any symlink."""
    with os.scandir(dir_fd) as it:
        entries = list(it)
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            sub = os.open(entry.name, _DIR_FLAGS, dir_fd=dir_fd)
            try:
                _remove_tree(sub)
            finally:
                os.close(sub)
            os.rmdir(entry.name, dir_fd=dir_fd)
        else:
            os.unlink(entry.name, dir_fd=dir_fd)


def _unlink(dir_fd: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except OSError as exc:
        raise refusal_from_os(exc) from None
