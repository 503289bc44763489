"""Where the file system puts what the tool creates and deletes by the thousand: worktrees.

ext4 places a new directory in its parent's block group (the Orlov allocator), and a new file
in its directory's group. Without a journal (common on VM disks, this project's benchmark
machine included) it also skips, for a minute or more, every inode freed recently
(``recently_deleted`` in ext4's ``find_inode_bit``), and each new inode is looked for from the
start of the group. A run checks out a worktree per node and deletes it after: with every
worktree in one group, each new file scans past all the files the run deleted in the last
minutes. ``perf`` of a local 100-node run (2026-12-05) put ext4's inode search
(``find_get_block_common``, ``recently_deleted``, ``find_inode_bit``, ``ext4_get_group_desc``)
at 21% of the machine's samples, most of it in git processes: 6,100 of the run's 9,700 new
inodes were files git checked out into worktrees.

``FS_TOPDIR_FL`` (``chattr +T``) on the directory that holds the worktrees asks ext4 to place
each new subdirectory as it would a top-level one: in a group of its own choosing across the
disk, so a worktree's files meet only that group's deletions (git/workspace.py: create and
remove a 60-file worktree, 32 -> 12.5 ms). It is a placement hint: what is stored, its
permissions and its contents do not change. File systems without the flag (tmpfs, btrfs, xfs
refuse it) are left alone. The same flags word says whether a file is immutable or append-only
(``inode_flags``), which a worktree handed to another node must not be (git/worktree_pool.py).
"""

from __future__ import annotations

import array
import contextlib
import errno
import fcntl
import os
from pathlib import Path

__all__ = ["inode_flags", "spread_subdirectories"]

# <linux/fs.h>: _IOR('f', 1, long) and _IOW('f', 2, long); the kernel reads and writes an int.
_FS_IOC_GETFLAGS = 0x80086601
_FS_IOC_SETFLAGS = 0x40086602
_FS_TOPDIR_FL = 0x00020000
_NO_FLAGS = {errno.ENOTTY, errno.EOPNOTSUPP, errno.EINVAL}  # a file system without them


def inode_flags(path: str | Path, *, directory: bool = False) -> int | None:
    """The inode flags of ``path`` (``chattr``'s: immutable 0x10, append-only 0x20, ...), 0 on
    a file system without them; None when it cannot be opened (links are not followed).
    git/worktree_pool.py asks it of every entry of a worktree it hands to another node."""
    mode = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(path, mode | (os.O_DIRECTORY if directory else 0))
    except OSError:
        return None
    try:
        flags = array.array("i", [0])
        fcntl.ioctl(fd, _FS_IOC_GETFLAGS, flags, True)
        return flags[0]
    except OSError as exc:
        return 0 if exc.errno in _NO_FLAGS else None
    finally:
        os.close(fd)


def spread_subdirectories(directory: Path) -> bool:
    """Ask the file system to spread ``directory``'s new subdirectories over the disk (ext4's
    top-directory hint); whether the hint is set. Never raises: a file system without it,
    or a directory we may not change, keeps the default placement."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        flags = array.array("i", [0])
        fcntl.ioctl(fd, _FS_IOC_GETFLAGS, flags, True)
        if not flags[0] & _FS_TOPDIR_FL:
            flags[0] |= _FS_TOPDIR_FL
            fcntl.ioctl(fd, _FS_IOC_SETFLAGS, flags, True)
        return True
    except OSError:  # ENOTTY, EOPNOTSUPP, EPERM...: the default placement stays
        return False
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
