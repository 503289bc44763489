"""The test launcher: the ``anti-sprawl`` CLI with a crash hook, for the crash-safety tests.

``python tests/crash_launcher.py execute ...`` runs ``anti-sprawl execute ...``. With
``ANTI_SPRAWL_CRASH_AT=point[:task]`` in its environment, the process kills itself (SIGKILL,
nothing cleaned up) when the run reaches that point (``anti_sprawl.settings.CRASH_POINTS``), for
that task or for any. Only this launcher reads the variable; the tool itself never does.
With ``--executor dask`` the hook travels with each node's job: a point inside a node (all but
``between_attempts`` and ``after_commit_before_journal``) kills the Dask worker process there.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable

from anti_sprawl.cli.app import main
from anti_sprawl.run.settings import CRASH_POINTS

VARIABLE = "ANTI_SPRAWL_CRASH_AT"


def crash_at(spec: str) -> Callable[[str, str], None]:
    """The hook that kills this process at ``point[:task]``."""
    point, _, task = spec.partition(":")
    if point not in CRASH_POINTS:
        raise SystemExit(f"{VARIABLE}: unknown crash point {point!r} (see settings.CRASH_POINTS)")

    def crash(at: str, task_id: str) -> None:
        if at == point and (not task or task == task_id):
            os.kill(os.getpid(), signal.SIGKILL)

    return crash


if __name__ == "__main__":
    spec = os.environ.get(VARIABLE)
    sys.argv[0] = "anti-sprawl"
    main(crash=crash_at(spec) if spec else None)
