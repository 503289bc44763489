"""The workspace root held as an fd, and every check made on what the kernel actually opened.

A path is opened beneath the root (``safe_fs.open_beneath``), its real path is read back from
``/proc/self/fd`` and made relative to the real root, and both the requested and the real path
must pass the deny rules and the scope (docs/security.md P2, P4). Reads and writes then go through
that fd or a directory fd, so nothing can be swapped in between. Refusals are ``Refusal``s;
the ``Firewall`` turns them into recorded violations.
"""

from __future__ import annotations

import errno
import os
import stat
import weakref
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path
from typing import Literal

from ..errors import RunError
from . import safe_fs
from .deny_rules import DenyRules
from .path_rules import DirEntry, Reason, Refusal
from .scopes import Scope

__all__ = ["Confinement", "join", "refusal_from_os"]

_BINARY_PROBE = 8192
_BINARY_DETAIL = (
    "a binary or non-UTF-8 file: read_file, write_file and edit_file handle UTF-8 text only "
    "(delete_file and move_file still work)"
)
_RETRIES = 8
_ERRNO_REASONS: dict[int, tuple[Reason, str]] = {
    errno.ENOENT: ("not_found", "no such file or directory"),
    errno.ENOTDIR: ("not_found", "a parent is not a directory"),
    errno.EXDEV: ("symlink_escape", "a symlink leads outside the workspace"),
    errno.ELOOP: ("symlink_escape", "symlink loop or magic link"),
    errno.ENAMETOOLONG: ("name_too_long", "file name too long"),
    errno.EAGAIN: ("race", "the path kept changing during lookup"),
    errno.EISDIR: ("not_a_file", "is a directory"),
    errno.ENOTEMPTY: ("not_a_file", "is a directory"),
}


def refusal_from_os(exc: OSError) -> Refusal:
    """Translate a filesystem error met while serving a request into a refusal."""
    reason, detail = _ERRNO_REASONS.get(exc.errno or 0, ("io_error", exc.strerror or str(exc)))
    return Refusal(reason, detail)


def join(parent: str, name: str) -> str:
    """Join canonical relative paths, ``""`` being the root."""
    return f"{parent}/{name}" if parent else name


class Confinement:
    """A real workspace root with a node's scopes and deny rules, checked on real paths."""

    def __init__(
        self,
        root: Path,
        read_scope: Scope,
        write_scope: Scope,
        deny: DenyRules,
        *,
        max_read_bytes: int,
        use_openat2: bool,
        durable: bool = True,
    ):
        self.read_scope = read_scope
        self.write_scope = write_scope
        self.deny = deny
        self.max_read_bytes = max_read_bytes
        self.use_openat2 = use_openat2
        self.durable = durable
        try:
            # F31: the root may be reached through a symlink; judge against its real path.
            self.root = Path(root).resolve(strict=True)
            self.root_fd = os.open(self.root, safe_fs.OPEN_DIR)
        except OSError as exc:
            raise RunError(f"firewall: workspace root {root} is not a directory") from exc
        self._closer = weakref.finalize(self, os.close, self.root_fd)
        try:
            self._root_real = safe_fs.fd_path(self.root_fd)
        except OSError as exc:
            self.close()
            raise RunError("firewall: /proc/self/fd is unavailable; refusing to run") from exc
        self._root_prefix = self._root_real.rstrip("/") + "/"

    def close(self) -> None:
        self._closer()

    # -- resolution --------------------------------------------------------------------

    def open(self, parts: Sequence[str], flags: int = safe_fs.OPEN_PATH) -> int:
        try:
            return safe_fs.open_beneath(
                self.root_fd, "/".join(parts), flags, use_openat2=self.use_openat2
            )
        except OSError as exc:
            raise refusal_from_os(exc) from None

    def real(self, fd: int) -> str:
        """The canonical repo-relative path of an open fd; refuses anything outside the root."""
        real = safe_fs.fd_path(fd)
        if real == self._root_real:
            return ""
        if not real.startswith(self._root_prefix):
            raise Refusal("escape_root", "resolves outside the workspace")
        return real[len(self._root_prefix) :]

    def require(self, rel: str, *, write: bool) -> None:
        """Refuse unless the canonical ``rel`` may be read (or written)."""
        denied = self.deny.reason(rel)
        if denied:
            raise Refusal(denied, "never served, whatever the scope")
        if write and not self.write_scope.matches(rel):
            if self.read_scope.matches(rel):
                raise Refusal("not_writable_scope", f"{rel} is readable but not writable")
            raise Refusal("outside_scope", f"{rel} is outside the write scope")
        if not write and not self.read_scope.matches(rel):
            raise Refusal("outside_scope", f"{rel} is outside the read scope")

    def require_dir(self, rel: str, *, write: bool) -> None:
        """Refuse unless directory ``rel`` is in, or leads into, the read (write) scope."""
        denied = self.deny.reason(rel, True)
        if denied:
            raise Refusal(denied, "never served, whatever the scope")
        scope = self.write_scope if write else self.read_scope
        if not scope.may_contain(rel):
            raise Refusal("outside_scope", f"nothing below {rel or '.'} is in scope")

    def check_file_fd(self, fd: int, *, write: bool) -> tuple[str, os.stat_result]:
        """Canonical path and stat of an fd that must be an in-scope, singly linked file."""
        real = self.real(fd)
        self.require(real, write=write)
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise Refusal("not_a_file", "is a directory")
        if not stat.S_ISREG(st.st_mode):
            raise Refusal("special_file", "not a regular file (FIFO, socket or device)")
        if st.st_nlink > 1:
            raise Refusal("hardlink", f"has {st.st_nlink} hard links")
        if st.st_nlink == 0:
            raise Refusal("not_found", "was deleted")
        return real, st

    # -- reading -----------------------------------------------------------------------

    def open_file(self, parts: Sequence[str]) -> tuple[int, str, os.stat_result]:
        """An ``O_PATH`` fd on a file the node may read, its canonical path and stat."""
        self.require("/".join(parts), write=False)
        fd = self.open(parts)
        try:
            real, st = self.check_file_fd(fd, write=False)
            if st.st_size > self.max_read_bytes:
                raise Refusal("too_large", f"{st.st_size} bytes > cap {self.max_read_bytes}")
            return fd, real, st
        except BaseException:
            os.close(fd)
            raise

    def read(self, parts: Sequence[str]) -> str:
        fd, _, st = self.open_file(parts)
        try:
            return self.read_fd(fd, st)
        finally:
            os.close(fd)

    def read_fd(self, fd: int, st: os.stat_result) -> str:
        """The text behind a checked ``O_PATH`` fd: capped, UTF-8, no NUL in the first 8 KiB."""
        try:
            # Only a verified regular file gets a readable fd; O_NONBLOCK also rules out a hang.
            rfd = safe_fs.reopen(fd, os.O_RDONLY | os.O_NONBLOCK)
            try:
                again = os.fstat(rfd)
                if (again.st_dev, again.st_ino) != (st.st_dev, st.st_ino):
                    raise Refusal("race", "the file changed while it was opened")
                data = safe_fs.read_capped(rfd, self.max_read_bytes + 1)
            finally:
                os.close(rfd)
        except OSError as exc:
            raise refusal_from_os(exc) from None
        return self.decode(data)

    def decode(self, data: bytes) -> str:
        """A file's bytes as the text a read serves: capped, UTF-8, no NUL in the first 8 KiB."""
        if len(data) > self.max_read_bytes:
            raise Refusal("too_large", f"more than {self.max_read_bytes} bytes")
        if b"\x00" in data[:_BINARY_PROBE]:
            raise Refusal("binary", _BINARY_DETAIL)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise Refusal("binary", _BINARY_DETAIL) from None

    # -- directories -------------------------------------------------------------------

    def open_dir(self, parts: Sequence[str]) -> tuple[int, str]:
        """A readable fd on a directory the node may list, and its canonical path."""
        self.require_dir("/".join(parts), write=False)
        fd = self.open(parts)
        try:
            real = self.real(fd)
            self.require_dir(real, write=False)
            if not stat.S_ISDIR(os.fstat(fd).st_mode):
                raise Refusal("not_a_directory", "is not a directory")
            try:
                return safe_fs.reopen(fd, os.O_RDONLY | os.O_DIRECTORY), real
            except OSError as exc:
                raise refusal_from_os(exc) from None
        finally:
            os.close(fd)

    def entries(self, dir_fd: int, real: str) -> list[DirEntry]:
        """Visible entries of an open directory: in scope or leading into it, never denied."""
        out: list[DirEntry] = []
        with os.scandir(dir_fd) as it:
            for entry in it:
                rel = join(real, entry.name)
                try:
                    st = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                kind = _kind(st.st_mode)
                if not self.read_scope.matches(rel) and not (
                    kind in ("dir", "symlink") and self.read_scope.may_contain(rel)
                ):
                    continue
                # the deny rules last, for the few entries in scope: a directory a run fills
                # (one file a node) is mostly other nodes' files (issue 29)
                if self.deny.reason(rel) or self.deny.reason(rel, True):
                    continue
                out.append(DirEntry(name=entry.name, kind=kind, size=st.st_size))
        return sorted(out, key=lambda e: e.name)


def _kind(mode: int) -> Literal["file", "dir", "symlink", "other"]:
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISDIR(mode):
        return "dir"
    return "file" if stat.S_ISREG(mode) else "other"


def lstat_at(dir_fd: int, name: str) -> os.stat_result | None:
    """``lstat`` of ``name`` in ``dir_fd``, None when it does not exist."""
    with suppress(FileNotFoundError):
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    return None
