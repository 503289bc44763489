"""Placeholders in plan commands: ``{checkout}`` is the user's checkout, bound read-only.

A node's worktree is a fresh checkout of a commit: it has none of the user's untracked
environment (``.venv/``, ``node_modules/``, built extensions). A ``test_command`` or
``setup_command`` may therefore name the user's checkout as ``{checkout}`` (e.g.
``{checkout}/.venv/bin/python -m pytest -q``); the placeholder is replaced by the repository
root given to ``execute``, and only then is that checkout bound into the command's sandbox,
read-only and masked like every content tree (``.git``, ``.anti-sprawl`` and secret files
stay hidden; docs/security.md).

The syntax is Python's format-string syntax restricted to known names: ``{{`` and ``}}`` are
literal braces, any other ``{name}`` (or a conversion, format spec, attribute or index) is an
error that ``validate`` reports before a run starts. Placeholders are expanded per argument,
after a string command has been split, so a checkout path with spaces stays one argument and
is never re-parsed.

An environment the command runs from (``{checkout}/.venv``, ``NODE_PATH={checkout}/
node_modules``, or one a setup command made in the worktree) is bound without scanning it
for secret names when git tracks nothing inside it: no committed file can hide there, and a
virtualenv's CA bundle (``certifi/cacert.pem``) would otherwise be masked as a key file.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from ..errors import UsageError
from ..git.cmd import run_git
from .toolchain import environment_root, named_paths

__all__ = [
    "PLACEHOLDERS",
    "BoundCommand",
    "bind_command",
    "environments",
    "expand",
    "template_problem",
    "uses",
]

PLACEHOLDERS = ("checkout",)
_FORMATTER = string.Formatter()


def _parse(arg: str) -> list[tuple[str, str | None, str]]:
    """``(literal, field name or None, field as written)``; ValueError on unbalanced braces."""
    out: list[tuple[str, str | None, str]] = []
    for literal, name, spec, conversion in _FORMATTER.parse(arg):
        written = ""
        if name is not None:
            written = "{" + name + (f"!{conversion}" if conversion else "")
            written += (f":{spec}" if spec else "") + "}"
        out.append((literal, name, written))
    return out


def template_problem(argv: Sequence[str]) -> str | None:
    """Why ``argv`` is not a valid command template, or None (braces, unknown names)."""
    known = ", ".join(f"{{{n}}}" for n in PLACEHOLDERS)
    hint = "write a literal brace as '{{' or '}}'"
    for arg in argv:
        try:
            fields = _parse(arg)
        except ValueError as exc:
            return f"argument {arg!r}: {exc} ({hint})"
        for _, name, written in fields:
            if name is None:
                continue
            if name not in PLACEHOLDERS:
                return f"argument {arg!r}: unknown placeholder {written} (known: {known}; {hint})"
            if written != "{" + name + "}":
                return f"argument {arg!r}: {written} takes no conversion or format spec ({hint})"
    return None


def uses(argv: Sequence[str], name: str) -> bool:
    """Whether any argument of a valid template names placeholder ``name``."""
    return any(field == name for arg in argv for _, field, _ in _parse(arg))


def expand(argv: Sequence[str], values: Mapping[str, str]) -> list[str]:
    """``argv`` with each placeholder replaced by its value and ``{{``/``}}`` made single."""
    out: list[str] = []
    for arg in argv:
        parts: list[str] = []
        for literal, name, _ in _parse(arg):
            parts.append(literal)
            if name is not None:
                parts.append(values[name])
        out.append("".join(parts))
    return out


class BoundCommand(BaseModel):
    """A command ready to run: placeholders expanded, plus the trees it needs bound."""

    model_config = ConfigDict(frozen=True)

    argv: list[str]
    readable: list[Path]
    unscanned: list[Path]


def _tracks_nothing_in(tree: Path, directory: Path) -> bool:
    rel = directory.relative_to(tree).as_posix()
    listed = run_git(["ls-files", "-z", "--", rel], tree, check=False)
    return listed.returncode == 0 and not listed.stdout


def environments(argv: Sequence[str], trees: Sequence[Path], cwd: Path) -> list[Path]:
    """Untracked environment directories inside ``trees`` that ``argv`` names (unscanned)."""
    found: list[Path] = []
    # Deepest tree first: a worktree inside the checkout is judged by its own index.
    ordered = sorted(trees, key=lambda t: len(t.parts), reverse=True)
    for path in named_paths(argv, cwd):
        tree = next((t for t in ordered if path.is_relative_to(t)), None)
        if tree is None or (root := environment_root(path, tree)) is None or root in found:
            continue
        if _tracks_nothing_in(tree, root):
            found.append(root)
    return found


def bind_command(argv: Sequence[str], checkout: Path, workdir: Path) -> BoundCommand:
    """Expand ``{checkout}`` to ``checkout`` for a command run in ``workdir``; the checkout
    is bound only when it is named."""
    problem = template_problem(argv)
    if problem:
        raise UsageError(f"bad command {list(argv)!r}: {problem}")
    named = uses(argv, "checkout")
    expanded = expand(argv, {"checkout": str(checkout)})
    trees = [checkout, workdir] if named else [workdir]
    return BoundCommand(
        argv=expanded,
        readable=[checkout] if named else [],
        unscanned=environments(expanded, trees, workdir),
    )
