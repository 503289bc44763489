"""Start-up stays light: ``--help`` and ``--version`` import no SDK, no pydantic, no rich, no
tokenizer (issue 29, item 4: each is imported by the command that needs it, cli/app.py), the
console script answers them before Typer loads with exactly Typer's text (cli/quick.py), and
finding the project's config root in a plain repository starts no git process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from anti_sprawl.cli.config import project_root

HEAVY = ("anthropic", "openai", "pydantic", "rich", "tiktoken")

_PROBE = """
import json, sys
sys.argv = ["anti-sprawl", *json.loads(sys.argv[1])]
from anti_sprawl.cli.quick import main
try:
    main()
except SystemExit:
    pass
sys.stderr.write(json.dumps(sorted(sys.modules)))
"""


def loaded_by(args: list[str], cwd: Path, columns: int = 100) -> tuple[str, set[str]]:
    """What the console script prints for ``args``, and the top-level modules it loaded."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        check=True,
        env={**os.environ, "COLUMNS": str(columns)},
    )
    return done.stdout, {name.split(".")[0] for name in json.loads(done.stderr)}


@pytest.mark.parametrize("args", [["--help"], ["--version"]])
def test_help_and_version_import_no_sdk_pydantic_rich_or_tokenizer(
    args: list[str], tmp_path: Path
) -> None:
    out, modules = loaded_by(args, tmp_path)
    assert "anti-sprawl" in out
    assert not modules & {*HEAVY, "typer"}, sorted(modules & {*HEAVY, "typer"})
    # A terminal narrower than Click's 80 columns: Typer renders --help, still without them.
    out, modules = loaded_by(args, tmp_path, columns=60)
    assert "anti-sprawl" in out
    assert ("typer" in modules) == (args == ["--help"])  # the probe sees what loads
    assert not modules & set(HEAVY), sorted(modules & set(HEAVY))


def test_the_quick_help_is_current_and_exactly_typers() -> None:
    """data/help.txt matches the command line's sources (else: python -m
    anti_sprawl.cli.quick --write-help) and is what Typer itself prints."""
    from anti_sprawl.cli.quick import quick_answer, snapshot

    quick = quick_answer(["--help"], {"COLUMNS": "120"}, "anti-sprawl")
    assert quick is not None, "stale data/help.txt: python -m anti_sprawl.cli.quick --write-help"
    assert quick == snapshot()
    script = Path(sys.executable).parent / "anti-sprawl"
    if script.exists():  # the installed console script, as a user runs it
        shown = subprocess.run([str(script), "--help"], capture_output=True, text=True)
        assert shown.returncode == 0
        assert shown.stdout == quick


def test_typer_answers_whatever_the_quick_path_cannot() -> None:
    from anti_sprawl.cli.quick import quick_answer

    assert quick_answer(["--help"], {"COLUMNS": "79"}, "anti-sprawl") is None  # narrower
    assert quick_answer(["--help"], {"COLUMNS": "100"}, "other-name") is None  # usage line
    completing = {"COLUMNS": "100", "_ANTI_SPRAWL_COMPLETE": "bash_source"}
    assert quick_answer(["--help"], completing, "anti-sprawl") is None
    assert quick_answer(["validate", "--help"], {"COLUMNS": "100"}, "anti-sprawl") is None
    assert quick_answer(["--version"], {}, "x") == "anti-sprawl 0.1.0\n"


def test_a_command_still_loads_what_it_needs(tmp_path: Path) -> None:
    """The probe can see an import: ``schema`` needs pydantic's models."""
    out, modules = loaded_by(["schema"], tmp_path)
    assert '"properties"' in out
    assert "pydantic" in modules


def test_the_project_root_is_found_without_git_where_git_would_find_it(
    tmp_path: Path,
    make_repo: Callable[[dict[str, str]], Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    repo = make_repo({"pkg/deep/m.py": "x = 1\n"})
    inside = repo / "pkg" / "deep"
    real = subprocess.run(
        ["git", "rev-parse", "--show-toplevel"], cwd=inside, capture_output=True, text=True
    ).stdout.strip()
    nowhere = tmp_path / "plain"
    nowhere.mkdir()
    log = tmp_path / "git-called"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "git").write_text(f'#!/bin/sh\necho "$@" >> {log}\nexit 1\n')
    (bin_dir / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    assert project_root([], inside) == Path(real)
    assert project_root([], nowhere) is None
    assert project_root(["validate", "--repo", str(repo)], nowhere) == repo
    assert not log.exists(), log.read_text()  # no git process for any of them
    monkeypatch.setenv("GIT_DIR", str(repo / ".git"))  # git's own discovery rules: ask git
    project_root([], nowhere)
    assert "rev-parse --show-toplevel" in log.read_text()
