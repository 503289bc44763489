"""Writes inside a write scope: parents created one checked step at a time, temp + rename.

The parent directory is opened beneath the root and judged on its real path; missing parents
are made with ``mkdir(dir_fd=...)`` only where the write scope may hold files, and a dangling
symlink in their place is refused (F25). The file itself is written to an ``O_EXCL`` temp and
renamed over the name, which replaces a symlink instead of following it (P3). An existing
symlink is written through only when its real target is a writable file (F22, F23).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from contextlib import suppress

from . import safe_fs
from .confinement import Confinement, join, lstat_at, refusal_from_os
from .path_rules import Refusal

__all__ = ["open_parent", "plan_write", "write_file"]

_RETRIES = 8


def write_file(c: Confinement, parts: Sequence[str], data: bytes, *, via_link: bool = False) -> str:
    """Replace (or create) the file at ``parts`` with ``data``; returns its canonical path."""
    c.require("/".join(parts), write=True)
    parent_fd, parent_rel = open_parent(c, parts[:-1], create=True)
    assert parent_fd is not None  # create=True always yields an fd
    try:
        name = parts[-1]
        rel = join(parent_rel, name)
        c.require(rel, write=True)
        st = lstat_at(parent_fd, name)
        if st is not None and stat.S_ISLNK(st.st_mode):
            if via_link:
                raise Refusal("race", "the symlink's target changed during the write")
            return write_file(c, _link_target(c, parts), data, via_link=True)
        try:
            safe_fs.replace_file(parent_fd, name, data, _existing_mode(st), durable=c.durable)
        except OSError as exc:
            raise refusal_from_os(exc) from None
        _verify_after(c, parent_fd, parent_rel, name)
        return rel
    finally:
        os.close(parent_fd)


def plan_write(c: Confinement, parts: Sequence[str]) -> str:
    """The canonical path ``write_file`` would write, checked without changing anything."""
    c.require("/".join(parts), write=True)
    parent_fd, parent_rel = open_parent(c, parts[:-1], create=False)
    rel = join(parent_rel, parts[-1])
    c.require(rel, write=True)
    if parent_fd is None:
        return rel
    try:
        st = lstat_at(parent_fd, parts[-1])
        if st is not None and stat.S_ISLNK(st.st_mode):
            return "/".join(_link_target(c, parts))
        _existing_mode(st)
        return rel
    finally:
        os.close(parent_fd)


def _existing_mode(st: os.stat_result | None) -> int | None:
    """The permission bits to keep for an existing file, None for a new one."""
    if st is None:
        return None
    if stat.S_ISDIR(st.st_mode):
        raise Refusal("not_a_file", "is a directory")
    if not stat.S_ISREG(st.st_mode):
        raise Refusal("special_file", "not a regular file (FIFO, socket or device)")
    if st.st_nlink > 1:
        raise Refusal("hardlink", f"has {st.st_nlink} hard links")
    return st.st_mode & 0o777


def _link_target(c: Confinement, parts: Sequence[str]) -> tuple[str, ...]:
    """The real path behind an existing symlink, when it is a file the node may write."""
    try:
        fd = safe_fs.open_beneath(
            c.root_fd, "/".join(parts), safe_fs.OPEN_PATH, use_openat2=c.use_openat2
        )
    except FileNotFoundError:
        raise Refusal("symlink_escape", "dangling symlink; nothing is created through it") from None
    except OSError as exc:
        raise refusal_from_os(exc) from None
    try:
        real, _ = c.check_file_fd(fd, write=True)
        return tuple(real.split("/"))
    finally:
        os.close(fd)


def open_parent(c: Confinement, parts: Sequence[str], *, create: bool) -> tuple[int | None, str]:
    """An fd on the real parent directory and its canonical path, creating it if asked.

    With ``create=False`` a missing parent gives ``(None, would-be path)``.
    """
    for _ in range(len(parts) + _RETRIES):
        fd, k = _deepest_existing(c, parts)
        keep = False
        try:
            rel = c.real(fd)
            if k == len(parts):
                c.require_dir(rel, write=True)
                keep = True
                return fd, rel
            name = parts[k]
            st = lstat_at(fd, name)
            if st is not None and stat.S_ISLNK(st.st_mode):
                raise Refusal("symlink_escape", f"{join(rel, name)} is a dangling symlink")
            if st is not None:
                continue  # appeared since the lookup: look again
            if not create:
                for more in parts[k:]:
                    rel = join(rel, more)
                    c.require_dir(rel, write=True)
                return None, rel
            c.require_dir(join(rel, name), write=True)
            with suppress(FileExistsError):
                os.mkdir(name, 0o777, dir_fd=fd)
        except OSError as exc:
            raise refusal_from_os(exc) from None
        finally:
            if not keep:
                os.close(fd)
    raise Refusal("race", "the parent directories kept changing")


def _deepest_existing(c: Confinement, parts: Sequence[str]) -> tuple[int, int]:
    """An fd on the longest existing prefix of ``parts`` (resolved beneath the root)."""
    for k in range(len(parts), -1, -1):
        try:
            return (
                safe_fs.open_beneath(
                    c.root_fd, "/".join(parts[:k]), safe_fs.OPEN_DIR, use_openat2=c.use_openat2
                ),
                k,
            )
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise refusal_from_os(exc) from None
    raise Refusal("not_found", "the workspace root is gone")


def _verify_after(c: Confinement, parent_fd: int, parent_rel: str, name: str) -> None:
    """Undo the write if the parent directory was moved out of scope while we wrote."""
    try:
        now = c.real(parent_fd)
        if now != parent_rel:
            c.require(join(now, name), write=True)
    except Refusal:
        with suppress(FileNotFoundError):
            os.unlink(name, dir_fd=parent_fd)
        raise Refusal("race", "the directory moved out of scope during the write; undone") from None
