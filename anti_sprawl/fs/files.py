"""Writing the tool's own files: whole-file atomic replacement, so a reader never sees half.

The fs layer's helper for everything anti-sprawl writes outside a worktree (the journal,
manifests, artifacts, plan files, PR bodies, sandbox logs). Reading files the *user* names
is :mod:`.userdata`; reading and writing *repository* files is the firewall's job.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["atomic_write_text"]


def atomic_write_text(path: Path, text: str, *, durable: bool = True) -> None:
    """Write via a temp file in the same directory plus rename, so readers never see half.

    ``durable`` fsyncs the data before the rename. Without it the write is still whole or
    absent after a kill (the rename is atomic); only a power loss may lose the newest ones:
    for what a run writes many times a node and a reader can do without (a call's manifest
    and exact request, a node's artifacts). An fsync costs ~0.5 ms of CPU and ~5 ms of wall
    time on the shared benchmark VM (docs/development.md, ``per_node.py``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
