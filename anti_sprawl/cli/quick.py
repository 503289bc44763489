"""The console script's entry: ``--version`` and ``--help`` answered before Typer loads.

``import typer`` alone costs about 3x ``python -c pass`` (benchmarks/cli_scale.py), so no
import diet of our own modules brings ``anti-sprawl --help`` within issue 29's 3x goal. The two
answers that need nothing of the command line are given here: ``--version`` from the package,
``--help`` from ``data/help.txt``, which is Typer's own rendering of the top-level help
(``snapshot``, at the 80-column width Click uses on any terminal at least that wide) stamped
with a fingerprint of the command-line sources (``cli/*.py``). A changed command, option or
docstring changes the fingerprint, and then, as for a narrower terminal, shell completion or
any other argument, Typer answers (``cli/app.py``): the text printed is always Typer's.
tests/test_cli_startup.py checks that the stored text is current and identical to Typer's.
Refresh it after changing the command line: ``python -m anti_sprawl.cli.quick --write-help``.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Callable, Mapping, Sequence

__all__ = ["HELP_FILE", "fingerprint", "main", "quick_answer", "snapshot"]

_CLI_DIR = os.path.dirname(os.path.abspath(__file__))
HELP_FILE = os.path.join(os.path.dirname(_CLI_DIR), "data", "help.txt")
_WIDTH = 80  # Click's default max width: every terminal this wide renders the same text


def fingerprint() -> str:
    """SHA-256 over the command line's sources, the ones that shape ``--help``."""
    digest = hashlib.sha256()
    for name in sorted(os.listdir(_CLI_DIR)):
        if name.endswith(".py"):
            digest.update(name.encode() + b"\0")
            with open(os.path.join(_CLI_DIR, name), "rb") as f:
                digest.update(f.read() + b"\0")
    return digest.hexdigest()


def _columns(environ: Mapping[str, str]) -> int:
    """The terminal width the way ``shutil.get_terminal_size`` finds it (COLUMNS first)."""
    try:
        columns = int(environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns > 0:
        return columns
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        return 80


def _program() -> str:
    """The name Click puts in the usage line: the script's (``python -m`` never gets here)."""
    return os.path.basename(sys.argv[0]) if sys.argv else ""


def quick_answer(argv: Sequence[str], environ: Mapping[str, str], program: str) -> str | None:
    """What ``anti-sprawl`` prints for ``argv`` without Typer, or None: Typer must answer
    (``program``: the name it runs under, which the usage line shows)."""
    if any(key.endswith("_COMPLETE") for key in environ):  # shell completion: Typer's
        return None
    if list(argv) == ["--version"]:
        from .. import __version__

        return f"anti-sprawl {__version__}\n"
    if list(argv) != ["--help"] or _columns(environ) < _WIDTH or program != "anti-sprawl":
        return None
    try:
        with open(HELP_FILE, encoding="utf-8") as f:
            stamp, _, text = f.read().partition("\n")
    except OSError:
        return None
    return text if stamp == f"fingerprint {fingerprint()}" else None


def main(crash: Callable[[str, str], None] | None = None) -> None:
    """Console-script entry point: the quick answers, else the full command line."""
    if crash is None:
        text = quick_answer(sys.argv[1:], os.environ, _program())
        if text is not None:
            sys.stdout.write(text)
            sys.stdout.flush()
            return
    from .app import main as full

    full(crash)


def snapshot() -> str:
    """Typer's top-level ``--help`` at ``_WIDTH`` columns (what ``data/help.txt`` holds),
    from a fresh process named ``anti-sprawl`` as the console script is (Click names the
    program in the usage line after ``argv[0]``)."""
    import subprocess

    code = "import sys; sys.argv[0] = 'anti-sprawl'; from anti_sprawl.cli.app import main; main()"
    done = subprocess.run(
        [sys.executable, "-c", code, "--help"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "COLUMNS": str(_WIDTH)},
    )
    return done.stdout


if __name__ == "__main__":
    if sys.argv[1:] == ["--write-help"]:
        with open(HELP_FILE, "w", encoding="utf-8") as out:
            out.write(f"fingerprint {fingerprint()}\n{snapshot()}")
        print(f"wrote {HELP_FILE}")
    else:
        sys.exit("usage: python -m anti_sprawl.cli.quick --write-help")
