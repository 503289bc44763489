"""The programs the orchestrator itself runs on the host (git, bwrap), found once, by absolute path.

A name looked up on ``PATH`` at each call lets whatever changes the process environment later
decide which program runs as the user, outside every sandbox: an eval case's ``PATH`` once made
a fixture's ``bin/git`` the orchestrator's git (issue 25, docs/security.md P17). So the search
path is the one this process started with, taken when this module is first imported, and only
its absolute entries count (an empty or relative entry would search the working directory,
which may be a repository). A name that already holds a ``/`` is used as given, if it exists.
"""

from __future__ import annotations

import functools
import os
import shutil
from pathlib import Path

__all__ = ["STARTUP_PATH", "host_tool"]

STARTUP_PATH = os.pathsep.join(
    entry
    for entry in os.environ.get("PATH", os.defpath).split(os.pathsep)
    if Path(entry).is_absolute()
)


@functools.cache
def host_tool(name: str) -> str | None:
    """The absolute path of the program ``name`` on the start-up ``PATH`` (None: not there)."""
    found = shutil.which(name, path=STARTUP_PATH)  # a name with a "/" is only checked
    return str(Path(found).absolute()) if found else None
