"""Resource limits as a command meets them: which one ended it, and writable-tree hand-over.

The kernel reports a limit only as an errno (``ENOMEM``, ``EAGAIN``, ``EFBIG``, ``ENOSPC``) or
a signal, so ``limit_hit`` names the limit from the exit status and what the command printed,
and says so with "probably": a test that prints "MemoryError" on its own would be misread,
never a limit that was really hit and printed its usual message. Timeouts and the output cap
are known for certain. ``handed_over`` lends writable trees to the sandbox uid while a root-run
bubblewrap command uses them, and takes them back afterwards with set-id bits dropped.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from .policy import ResourceLimits
from .process import Ended

__all__ = ["LimitHit", "handed_over", "limit_hit"]

LimitHit = Literal["timeout", "output", "memory", "processes", "file_size", "tmp"]
_SIGXFSZ = 25
# What a command prints when a limit stops it.
_MARKERS: tuple[tuple[LimitHit, tuple[str, ...]], ...] = (
    ("file_size", ("File size limit exceeded", "File too large")),
    ("tmp", ("No space left on device",)),
    ("memory", ("MemoryError", "Cannot allocate memory", "std::bad_alloc", "out of memory")),
    (
        "processes",
        ("fork: retry", "fork: Resource temporarily unavailable", "Cannot fork",
         "can't start new thread", "BlockingIOError: [Errno 11]",
         "Resource temporarily unavailable"),
    ),
)  # fmt: skip


def limit_hit(
    code: int, ended: Ended, output: str, limits: ResourceLimits, timeout: float
) -> tuple[LimitHit | None, str]:
    """Which limit (probably) ended the command, and a sentence the model and verdict show."""
    if ended == "output":
        return "output", f"ended by the sandbox: more than {limits.output_bytes} bytes of output"
    found: LimitHit | None = None
    if code in (-_SIGXFSZ, 128 + _SIGXFSZ):
        found = "file_size"
    if code != 0 or ended == "timeout":
        for kind, markers in _MARKERS:
            if found is None and any(m in output for m in markers):
                found = kind
    what = {
        "file_size": f"file-size limit ({limits.file_size_bytes} bytes)",
        "tmp": f"/tmp limit ({limits.tmp_bytes} bytes, {limits.tmp_inodes} files)",
        "memory": f"memory limit ({limits.memory_bytes} bytes of address space)",
        "processes": f"process limit ({limits.processes} processes)",
    }
    if ended == "timeout":
        held = f"; it was probably held at the sandbox's {what[found]}" if found else ""
        return found or "timeout", f"ended by the sandbox: timed out after {timeout:g} s{held}"
    if found is None:
        return None, ""
    return found, f"probably stopped by the sandbox's {what[found]}"


@contextmanager
def handed_over(paths: Sequence[Path], uid: int, layer: str) -> Iterator[None]:
    """Writable trees belong to the sandbox uid while a root-run bwrap command uses them."""
    if layer != "bwrap" or os.geteuid() != 0 or not paths:
        yield
        return
    owners = [(p, os.lstat(p).st_uid, os.lstat(p).st_gid) for p in paths]
    for path, _, _ in owners:
        _chown_tree(path, uid, uid)
    try:
        yield
    finally:
        for path, owner, group in owners:
            _chown_tree(path, owner, group)


def _chown_tree(root: Path, uid: int, gid: int) -> None:
    """``lchown`` everything below ``root`` (links never followed), dropping set-id bits."""
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath, name)
            os.lchown(path, uid, gid)
            st = path.lstat()
            if not path.is_symlink() and st.st_mode & 0o6000:
                path.chmod(st.st_mode & 0o1777)
    os.lchown(root, uid, gid)
