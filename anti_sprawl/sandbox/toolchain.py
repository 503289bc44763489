"""Which trees a command's toolchain lives in, and which of them may be bound.

The sandbox binds the environment a command names, not the host: the prefix of the
executable ``argv0`` resolves to on the command's ``PATH`` (``/x/bin/tool`` gives ``/x``), a
virtualenv and the base interpreter its ``pyvenv.cfg`` names, and this process's own
interpreter and venv (``python``/``pytest`` resolve there). A candidate is refused when
binding it would expose more than a toolchain: ``/``, a home directory or anything above
one (a toolchain under ``$HOME`` is bound alone), a repository (it holds ``.git`` or
``.anti-sprawl``, or lies inside one), or a directory above the trees the command works on.

Executables named later in the command count too (``env X=1 /venv/bin/python``,
``timeout 60 {checkout}/.venv/bin/pytest``), and a venv's ``bin/python`` symlink is followed
to the interpreter it points to (often under ``$HOME``, e.g. ``~/.pyenv/versions/3.11.7``).
``environment_root`` finds the environment directory (a virtualenv, conda env or
``node_modules``) a path the command names lies in, so the caller can leave it unscanned.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..fs.scopes import ALWAYS_DENIED_DIRS

__all__ = [
    "ENVIRONMENT_MARKERS",
    "acceptable_toolchain",
    "environment_root",
    "named_paths",
    "toolchain_trees",
]

# A directory holding one of these is an installed environment (virtualenv, conda env).
ENVIRONMENT_MARKERS = ("pyvenv.cfg", "conda-meta")


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
    if any(os.path.lexists(path / name) for name in ALWAYS_DENIED_DIRS):
        return False
    if any(part in ALWAYS_DENIED_DIRS for part in path.parts):
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


def named_paths(args: Sequence[str], cwd: Path) -> list[Path]:
    """Paths the arguments name: absolute ones, relative ones with a ``/`` (against ``cwd``),
    and the values of ``NAME=path`` assignments (``env NODE_PATH=/x/node_modules ...``)."""
    out: list[Path] = []
    for arg in args:
        _, eq, value = arg.partition("=")
        for text in (arg, value) if eq else (arg,):
            if text.startswith("/") or ("/" in text and not text.startswith("-")):
                out.append(Path(os.path.normpath(cwd / text)))
    return out


def environment_root(path: Path, tree: Path) -> Path | None:
    """The outermost environment directory below ``tree`` that ``path`` lies in (a directory
    holding ``pyvenv.cfg`` or ``conda-meta``, or named ``node_modules``), if any."""
    if not path.is_relative_to(tree) or path == tree:
        return None
    rel = path.relative_to(tree).parts
    here = tree
    for part in rel:
        here = here / part
        if here.is_symlink() or not here.is_dir():
            return None
        if part == "node_modules" or any((here / m).exists() for m in ENVIRONMENT_MARKERS):
            return here
    return None


def toolchain_trees(
    argv0: str, env: Mapping[str, str], executables: Sequence[Path] = ()
) -> list[Path]:
    """Candidate trees for ``argv0``: this interpreter's venv and prefix, $VIRTUAL_ENV, the
    prefix (or venv plus base interpreter) of the executable ``argv0`` resolves to, and the
    same for each other executable the command names."""
    candidates = [Path(sys.prefix), Path(os.path.realpath(sys.base_prefix))]
    candidates += _prefix_of(Path(sys.executable))
    if env.get("VIRTUAL_ENV"):
        candidates.append(Path(env["VIRTUAL_ENV"]))
    found = shutil.which(argv0, path=env.get("PATH")) if "/" not in argv0 else argv0
    if found and Path(found).is_absolute():
        candidates += _prefix_of(Path(os.path.normpath(found)))
    for exe in executables:
        if exe.is_absolute() and exe.is_file() and os.access(exe, os.X_OK):
            candidates += _prefix_of(exe)
    return [Path(os.path.realpath(c)) for c in candidates if c.is_absolute()]
