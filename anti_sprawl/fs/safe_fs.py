"""File-descriptor primitives the firewall stands on: open beneath a root, write by rename.

``open_beneath`` resolves a relative path under a directory fd and never leaves it: with
``openat2(2)`` (``RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS``) when the kernel has it, else by a
component walk with ``O_NOFOLLOW`` and ``dir_fd`` that expands symlinks itself under the same
rules (no absolute targets, no ``..`` above the root). The caller gets an fd, so nothing can be
swapped between the check and the use (docs/security.md P4). Errors are plain ``OSError``s.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import secrets
import stat
import threading

__all__ = [
    "OPEN_DIR",
    "OPEN_PATH",
    "fd_path",
    "open_beneath",
    "openat2_available",
    "rename_noreplace",
    "reopen",
    "replace_file",
]

OPEN_PATH = os.O_PATH | os.O_CLOEXEC
OPEN_DIR = OPEN_PATH | os.O_DIRECTORY
_SYS_OPENAT2 = 437  # the same number on every Linux architecture (unified syscall table)
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_BENEATH = 0x08
_MAX_SYMLINKS = 40  # the kernel's own limit
_RETRIES = 8  # openat2 answers EAGAIN when a concurrent rename made ".." unverifiable


class _OpenHow(ctypes.Structure):
    _fields_ = (
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    )


_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long
_RENAME_NOREPLACE = 1
_renameat2 = getattr(_libc, "renameat2", None)  # glibc >= 2.28
_probe_lock = threading.Lock()
_probed: list[bool] = []


def _openat2(dir_fd: int, path: str, flags: int, resolve: int) -> int:
    how = _OpenHow(flags, 0, resolve)
    fd = _syscall(
        ctypes.c_long(_SYS_OPENAT2),
        ctypes.c_int(dir_fd),
        ctypes.c_char_p(os.fsencode(path)),
        ctypes.byref(how),
        ctypes.c_size_t(ctypes.sizeof(how)),
    )
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), path)
    return int(fd)


def openat2_available() -> bool:
    """Whether this kernel (and seccomp profile) lets us call openat2; probed once."""
    with _probe_lock:
        if not _probed:
            try:
                os.close(_openat2(-100, "/", OPEN_PATH, 0))  # -100 is AT_FDCWD
                _probed.append(True)
            except OSError:  # ENOSYS on old kernels, EPERM under some seccomp profiles
                _probed.append(False)
        return _probed[0]


def open_beneath(root_fd: int, rel: str, flags: int, *, use_openat2: bool) -> int:
    """Open ``rel`` under ``root_fd``, following symlinks only while they stay beneath it.

    Escapes raise ``OSError(EXDEV)``, loops ``ELOOP``; ``rel == ""`` opens the root itself.
    """
    for _ in range(_RETRIES):
        try:
            if use_openat2:
                return _openat2(
                    root_fd, rel or ".", flags, _RESOLVE_BENEATH | _RESOLVE_NO_MAGICLINKS
                )
            return _walk(root_fd, rel, flags)
        except BlockingIOError:  # EAGAIN: a rename raced the lookup; a fresh lookup decides
            continue
    raise OSError(errno.EAGAIN, "path kept changing during lookup", rel)


def _walk(root_fd: int, rel: str, flags: int) -> int:
    """openat2's RESOLVE_BENEATH rule, done by hand one component at a time."""
    pending = [p for p in reversed(rel.split("/")) if p not in ("", ".")]
    stack = [os.dup(root_fd)]  # the real directories from the root down; ".." pops one
    links = 0
    try:
        while pending:
            name = pending.pop()
            if name == "..":
                if len(stack) == 1:
                    raise OSError(errno.EXDEV, "'..' leads above the root", rel)
                os.close(stack.pop())
                continue
            st = os.stat(name, dir_fd=stack[-1], follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                links += 1
                if links > _MAX_SYMLINKS:
                    raise OSError(errno.ELOOP, "too many levels of symbolic links", rel)
                target = os.readlink(name, dir_fd=stack[-1])
                if target.startswith("/"):
                    # RESOLVE_BENEATH refuses absolute targets even when they point inside.
                    raise OSError(errno.EXDEV, "absolute symlink", rel)
                pending.extend(p for p in reversed(target.split("/")) if p not in ("", "."))
                continue
            if not pending:
                fd = os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=stack[-1])
                if stat.S_ISLNK(os.fstat(fd).st_mode):  # swapped for a link since the lstat
                    os.close(fd)
                    raise BlockingIOError(errno.EAGAIN, "raced", rel)
                return fd
            stack.append(os.open(name, OPEN_DIR | os.O_NOFOLLOW, dir_fd=stack[-1]))
        # The path ended on a directory reached by ".." or a link to "."/"..".
        return os.open(".", flags | os.O_CLOEXEC, dir_fd=stack[-1])
    finally:
        for fd in stack:
            os.close(fd)


def read_capped(fd: int, limit: int) -> bytes:
    """Up to ``limit`` bytes from ``fd`` (callers pass cap + 1 to detect oversize files)."""
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        chunk = os.read(fd, min(1 << 20, limit - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def fd_path(fd: int) -> str:
    """The absolute real path the kernel holds for ``fd`` (symlinks already resolved)."""
    return os.readlink(f"/proc/self/fd/{fd}")


def reopen(fd: int, flags: int) -> int:
    """A new fd on the very inode ``fd`` (an ``O_PATH`` fd) refers to, with ``flags``."""
    return os.open(f"/proc/self/fd/{fd}", flags | os.O_CLOEXEC | os.O_NOCTTY)


def replace_file(
    parent_fd: int, name: str, data: bytes, mode: int | None, *, durable: bool = True
) -> None:
    """Write ``data`` to a fresh temp in ``parent_fd`` and rename it over ``name``.

    ``O_EXCL|O_NOFOLLOW`` means the temp is ours; rename replaces a symlink at ``name``
    instead of following it. ``mode`` None keeps the umask default of a new file; ``durable``
    fsyncs the data before the rename.
    """
    tmp = f".as-tmp-{secrets.token_hex(8)}"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, 0o666, dir_fd=parent_fd)
    try:
        try:
            if mode is not None:
                os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, name, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=parent_fd)
        raise


def rename_noreplace(src_dir_fd: int, src: str, dst_dir_fd: int, dst: str) -> None:
    """Rename ``src`` to ``dst`` (names in their directory fds), never over an existing entry.

    ``renameat2(RENAME_NOREPLACE)`` makes the no-overwrite check atomic; where libc or the
    filesystem lacks it, an ``lstat`` just before ``rename`` stands in (the caller holds
    the directory fds, so only a concurrent writer inside the workspace could race it).
    """
    if _renameat2 is not None:
        ret = _renameat2(
            ctypes.c_int(src_dir_fd),
            ctypes.c_char_p(os.fsencode(src)),
            ctypes.c_int(dst_dir_fd),
            ctypes.c_char_p(os.fsencode(dst)),
            ctypes.c_uint(_RENAME_NOREPLACE),
        )
        if ret == 0:
            return
        err = ctypes.get_errno()
        if err not in (errno.EINVAL, errno.ENOSYS) or _exists(dst_dir_fd, dst):
            raise OSError(err, os.strerror(err), dst)
    if _exists(dst_dir_fd, dst):
        raise FileExistsError(errno.EEXIST, "destination exists", dst)
    os.rename(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)


def _exists(dir_fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True
