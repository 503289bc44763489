"""Real commits replayed through ``execute``: adds, edits, deletions and renames land exactly.

Each commit of a small history becomes one node whose obedient scripted worker performs it
with the worker tools (``tests/replay.py``). The run branch must then hold, commit for commit,
the very trees of the real history (every blob and mode, nothing else), and git must see the
renames as renames.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from anti_sprawl.cli.app import app

from .replay import build_history, git, replay_inputs

runner = CliRunner()
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x01"

HISTORY = [
    (
        "initial",
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "def a():\n    return 1\n",
            "pkg/b.py": "B = 2\n",
            "pkg/c.py": "".join(f"C{i} = {i}\n" for i in range(30)),
            "pkg/old.py": "OLD = 1\n",
            "pkg/legacy/one.py": "ONE = 1\n",
            "pkg/legacy/deep/two.py": "TWO = 2\n",
            "pkg/tmp/scratch.txt": "scratch\n",
            "pkg/tmp/more.txt": "more\n",
            "docs/win.txt": "line one\r\nline two\r\n",
            "docs/bare.txt": "no final newline",
            "bin/run.sh": ("#!/bin/sh\necho one\n", 0o755),
            "assets/logo.png": PNG,
            "assets/unused.png": PNG + b"x",
            "README.md": "# history\n",
        },
        [],
    ),
    (
        "add, modify, delete",
        {
            "pkg/new.py": "NEW = 1\n",
            "pkg/a.py": "def a():\n    return 2\n",
            "pkg/old.py": None,
        },
        [],
    ),
    (
        "rename files, one with an edit",
        {"pkg/c2.py": "".join(f"C{i} = {i}\n" for i in range(30)) + "C30 = 30\n"},
        [("pkg/b.py", "pkg/sub/b.py"), ("pkg/c.py", "pkg/c2.py")],
    ),
    (
        "rename a directory, delete another",
        {"pkg/tmp": None},
        [("pkg/legacy", "pkg/modern")],
    ),
    (
        "edit CRLF, bare and executable files; move and delete binaries",
        {
            "docs/win.txt": "line one\r\nline 2\r\nline three\r\n",
            "docs/bare.txt": "still no final newline",
            "bin/run.sh": ("#!/bin/sh\necho two\n", 0o755),
            "assets/unused.png": None,
        },
        [("assets/logo.png", "assets/img/logo.png")],
    ),
    (
        "change conventions on purpose",
        {"docs/win.txt": "now LF\n", "docs/bare.txt": "gains a final newline\n"},
        [],
    ),
]


def test_replayed_history_lands_exactly(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    commits = build_history(repo, HISTORY)
    plan, script = replay_inputs(repo, commits)
    calls = [c for turns in script["workers"].values() for c in turns]
    tools = {c["tool"] for c in calls}
    assert {"move_file", "delete_file", "write_file"} <= tools
    # whole directories go in one call each
    assert {"tool": "move_file", "args": {"source": "pkg/legacy", "destination": "pkg/modern"}} in (
        calls
    )
    assert {"tool": "delete_file", "args": {"path": "pkg/tmp/"}} in calls
    plan_path, script_path = tmp_path / "plan.yaml", tmp_path / "script.yaml"
    plan_path.write_text(yaml.safe_dump(plan))
    script_path.write_text(yaml.safe_dump(script))
    git(repo, "checkout", "-q", "-b", "start", commits[0])  # scopes are validated on disk
    args = ["execute", str(plan_path), "--repo", str(repo)]
    result = runner.invoke(app, [*args, "--script", str(script_path), "--json"])
    assert result.exit_code == 0, result.output
    state = json.loads(result.stdout)
    assert all(not t["violations"] for t in state["tasks"].values())
    branch = state["branch"]
    landed = git(repo, "rev-list", "--reverse", f"{commits[0]}..{branch}").split()
    assert len(landed) == len(commits) - 1
    for real, ours in zip(commits[1:], landed, strict=True):
        # the same tree: every path, blob and mode of the real commit, and nothing else
        assert git(repo, "rev-parse", f"{ours}^{{tree}}") == git(
            repo, "rev-parse", f"{real}^{{tree}}"
        ), git(repo, "diff", "--stat", real, ours)
        # git sees the same renames
        assert git(repo, "diff", "-M", "--name-status", f"{ours}^", ours) == git(
            repo, "diff", "-M", "--name-status", f"{real}^", real
        )
    renames = git(repo, "diff", "-M", "--name-status", f"{landed[2]}^", landed[2])
    assert "R100\tpkg/legacy/one.py\tpkg/modern/one.py" in renames
    assert git(repo, "ls-tree", landed[3], "bin/run.sh").startswith("100755")
