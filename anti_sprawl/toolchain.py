"""Which trees a command's toolchain lives in, and which of them may be bound.

The sandbox binds the environment a command names, not the host: the prefix of the
executable ``argv0`` resolves to on the command's ``PATH`` (``/x/bin/tool`` gives ``/x``), a
virtualenv and the base interpreter its ``pyvenv.cfg`` names, and this process's own
interpreter and venv (``python``/``pytest`` resolve there). A candidate is refused when
binding it would expose more than a toolchain: ``/``, a home directory or anything above
one (a toolchain under ``$HOME`` is bound alone), a repository (it holds ``.git`` or
``.anti-sprawl``, or lies inside one), or a directory above the trees the command works on.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["acceptable_toolchain", "toolchain_trees"]


def _homes(extra: Sequence[Path]) -> list[Path]:
    homes = {Path("/root"), *(Path(os.path.realpath(h)) for h in extra)}
    with contextlib.suppress(KeyError):
        homes.add(Path(os.path.realpath(pwd.getpwuid(os.getuid()).pw_dir)))
    return sorted(homes)


def acceptable_toolchain(path: Path, homes: Sequence[Path], content: Sequence[Path]) -> bool:
    """A toolchain tree may be bound unless it is ``/``, a home or above one, a repository or
    holds one (``.git``/``.anti-sprawl`` inside), or lies above a tree the command works on."""
    if path == Path("/") or not path.is_dir():
        return False
    if any(home.is_relative_to(path) for home in _homes(homes)):
        return False
    if any(os.path.lexists(path / name) for name in (".git", ".anti-sprawl")):
        return False
    if any(part in (".git", ".anti-sprawl") for part in path.parts):
        return False
    return not any(c.is_relative_to(path) for c in content)


def _prefix_of(executable: Path) -> list[Path]:
    """The trees an executable needs: its prefix, and a venv's base interpreter prefix."""
    out: list[Path] = []
    where = executable.parent
    root = where.parent if where.name in ("bin", "sbin", "Scripts") else where
    out.append(root)
    cfg = root / "pyvenv.cfg"
    if cfg.is_file():
        for line in cfg.read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "home" and value.strip():
                base = Path(os.path.realpath(value.strip()))
                out.append(base.parent if base.name == "bin" else base)
    real = Path(os.path.realpath(executable))
    if real != executable:
        out += _prefix_of(real)
    return out


def toolchain_trees(argv0: str, env: Mapping[str, str]) -> list[Path]:
    """Candidate trees for ``argv0``: this interpreter's venv and prefix, $VIRTUAL_ENV, and
    the prefix (or venv plus base interpreter) of the executable ``argv0`` resolves to."""
    candidates = [Path(sys.prefix), Path(os.path.realpath(sys.base_prefix))]
    candidates += _prefix_of(Path(sys.executable))
    if env.get("VIRTUAL_ENV"):
        candidates.append(Path(env["VIRTUAL_ENV"]))
    found = shutil.which(argv0, path=env.get("PATH")) if "/" not in argv0 else argv0
    if found and os.path.isabs(found):
        candidates += _prefix_of(Path(os.path.normpath(found)))
    return [Path(os.path.realpath(c)) for c in candidates if c.is_absolute()]
