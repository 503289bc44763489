"""The paths and modes in a worktree's git index, read from the file itself.

The worktree pool (git/worktree_pool.py) compares a worktree it hands to the next node with
that worktree's index, entry by entry, after ``git reset --hard``: what git would need a
process for (``ls-files``) is a few lines of reading here (issue 29: a node's git processes).
Only what a plain full checkout writes is read: index versions 2 and 3 with every entry at
stage 0 and no assume-unchanged, skip-worktree or intent-to-add flag. Anything else (version
4's compressed paths, a sparse index's directory entries, a conflict, a cut-short file) reads
as None, and the caller makes a fresh worktree instead (Documentation/gitformat-index.txt in
git's sources describes the format).
"""

from __future__ import annotations

import struct
from pathlib import Path

__all__ = ["FILE_MODES", "GITLINK", "SYMLINK", "index_entries"]

FILE_MODES = (0o100644, 0o100755)
SYMLINK = 0o120000
GITLINK = 0o160000
_STAGE_OR_VALID = 0x8000 | 0x3000  # assume-valid, merge stage
_EXTENDED = 0x4000  # a second flags word follows (version 3): skip-worktree, intent-to-add
_STATS = 40  # ctime, mtime (seconds, nanoseconds), dev, ino, mode, uid, gid, size


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
