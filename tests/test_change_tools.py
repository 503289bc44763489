"""delete_file, move_file, write_file(append) and file fidelity through the worker loop.

The scripted provider plays the model (an attacker where the test says so) on real files
behind the real firewall; every check reads the filesystem or the recorded requests.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from anti_sprawl.agent import change_tools
from anti_sprawl.agent.artifacts import ArtifactStore
from anti_sprawl.agent.nudges import WRITTEN_PROMPT
from anti_sprawl.agent.tools import WORKER_TOOLS, WriteFileArgs
from anti_sprawl.agent.worker import WorkerContext, WorkerLimits, WorkerResult, run_worker
from anti_sprawl.fs.firewall import Firewall
from anti_sprawl.providers.base import SystemBlock, ToolResultMessage
from anti_sprawl.providers.scripted import Script, ScriptedProvider
from anti_sprawl.providers.text_calls import recover_text_calls
from anti_sprawl.tokens import count_tokens

FINISH = {"tool": "finish", "args": {"summary": "done"}}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    for rel, text in {
        "app/a.py": "A = 1\n",
        "app/b.py": "B = 2\n",
        "app/old/x.py": "X = 1\n",
        "app/old/y.py": "Y = 1\n",
        "lib/keep.py": "KEEP = 1\n",
    }.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "victim").write_text("CANARY-VICTIM\n")
    return repo


@pytest.fixture
def firewall(root: Path) -> Iterator[Firewall]:
    with Firewall(root, ["lib/**"], ["app/**"]) as fw:
        yield fw


def run(
    root: Path, firewall: Firewall, turns: list[Any], *, budget: int = 200_000
) -> tuple[WorkerResult, ScriptedProvider]:
    provider = ScriptedProvider(Script.from_data({"workers": {"t1": turns}}))
    ctx = WorkerContext(
        task_id="t1",
        provider=provider,
        firewall=firewall,
        system=[SystemBlock(text="You are a worker.", cache=True)],
        first_message="Reorganise app/.",
        limits=WorkerLimits(token_budget=budget, max_tool_calls=40, max_output_tokens=32_000),
        artifacts=ArtifactStore(root.parent / "artifacts"),
    )
    return run_worker(ctx), provider


def observations(provider: ScriptedProvider) -> list[str]:
    last = provider.requests[-1]
    return [r.content for m in last.messages if isinstance(m, ToolResultMessage) for r in m.results]


def test_tool_table_has_whole_change_tools() -> None:
    names = {t.name for t in WORKER_TOOLS}
    assert {"delete_file", "move_file", "write_file", "run_tests"} <= names
    write = next(t for t in WORKER_TOOLS if t.name == "write_file")
    assert write.parameters["properties"]["append"]["type"] == "boolean"
    run_tests = next(t for t in WORKER_TOOLS if t.name == "run_tests")
    assert run_tests.parameters["properties"]["args"]["type"] == "array"


def test_delete_and_move_through_the_loop(root: Path, firewall: Firewall) -> None:
    (root / "app/c.py").write_text("C = 3\n")
    (root / "app/d.py").write_text("D = 4\n")
    turns = [
        {"tool": "delete_file", "args": {"path": "app/b.py"}},
        {"tool": "move_file", "args": {"source": "app/a.py", "destination": "app/new/a.py"}},
        {"tool": "move_file", "args": {"source": "app/old", "destination": "app/renamed"}},
        {"tool": "delete_file", "args": {"path": "./app/c.py"}},  # run ag, call 15
        {"tool": "move_file", "args": {"source": "./app/d.py", "destination": "app/e.py"}},
        FINISH,
    ]
    result, provider = run(root, firewall, turns)
    assert result.status == "succeeded", result.message
    assert not (root / "app/b.py").exists()
    assert (root / "app/new/a.py").read_text() == "A = 1\n"
    assert sorted(p.name for p in (root / "app/renamed").iterdir()) == ["x.py", "y.py"]
    assert not (root / "app/old").exists()
    seen = "\n".join(observations(provider))
    assert "deleted app/b.py" in seen
    assert "moved app/a.py -> app/new/a.py" in seen
    assert "moved directory app/old -> app/renamed (2 files)" in seen
    assert "deleted app/c.py" in seen  # a file, not "deleted directory ./app/c.py"
    assert "moved app/d.py -> app/e.py" in seen
    assert result.violations == []
    assert result.tool_errors == []


def test_hostile_deletes_and_moves_are_refused_and_recorded(root: Path, firewall: Firewall) -> None:
    os.symlink(str(root.parent / "outside"), root / "app/out")
    os.symlink("../lib", root / "app/lib")
    turns = [
        [
            {"tool": "delete_file", "args": {"path": "lib/keep.py"}},
            {"tool": "delete_file", "args": {"path": ".git"}},
            {"tool": "delete_file", "args": {"path": "app/out/victim"}},
            {"tool": "delete_file", "args": {"path": "app/lib/keep.py"}},
            {"tool": "delete_file", "args": {"path": "app"}},
        ],
        [
            {"tool": "move_file", "args": {"source": "app/a.py", "destination": "lib/a.py"}},
            {"tool": "move_file", "args": {"source": "lib/keep.py", "destination": "app/k.py"}},
            {"tool": "move_file", "args": {"source": "app/a.py", "destination": "app/b.py"}},
            {"tool": "move_file", "args": {"source": "app/a.py", "destination": ".git/a.py"}},
            {"tool": "move_file", "args": {"source": "app/a.py", "destination": "app/out/a"}},
            {"tool": "move_file", "args": {"source": "app/a.py", "destination": "app/lib/a"}},
        ],
        FINISH,
    ]
    result, provider = run(root, firewall, turns)
    assert result.status == "succeeded"
    assert len(result.violations) == 11
    assert {v.op for v in result.violations} == {"delete", "move"}
    # nothing moved, nothing deleted, nothing created anywhere
    assert (root / "lib/keep.py").read_text() == "KEEP = 1\n"
    assert (root / "app/a.py").read_text() == "A = 1\n"
    assert (root / "app/b.py").read_text() == "B = 2\n"
    assert (root.parent / "outside" / "victim").read_text() == "CANARY-VICTIM\n"
    assert sorted(p.name for p in (root.parent / "outside").iterdir()) == ["victim"]
    assert not (root / ".git").exists()
    assert not (root / "lib/a.py").exists()
    errors = [o for o in observations(provider) if "blocked by the scope firewall" in o]
    assert len(errors) == 11


def test_append_builds_a_file_larger_than_one_response(root: Path, firewall: Firewall) -> None:
    lines = [f"VALUE_{i:05d} = {i} * 3  # a line of a generated module\n" for i in range(2400)]
    whole = "".join(lines)
    assert count_tokens(whole) > 20_000
    parts = ["".join(lines[i : i + 300]) for i in range(0, len(lines), 300)]
    turns: list[Any] = [{"tool": "write_file", "args": {"path": "app/big.py", "content": parts[0]}}]
    turns += [
        {"tool": "write_file", "args": {"path": "app/big.py", "content": p, "append": True}}
        for p in parts[1:]
    ]
    result, _ = run(root, firewall, [*turns, FINISH], budget=2_000_000)
    assert result.status == "succeeded", result.message
    assert (root / "app/big.py").read_text() == whole


def test_crlf_missing_final_newline_and_mode_survive(root: Path, firewall: Firewall) -> None:
    crlf = root / "app/win.txt"
    crlf.write_bytes(b"one\r\ntwo\r\nthree\r\n")
    bare = root / "app/bare.txt"
    bare.write_bytes(b"alpha\nbeta")
    script = root / "app/run.sh"
    script.write_bytes(b"#!/bin/sh\necho hi\n")
    script.chmod(0o755)
    turns = [
        [
            {"tool": "read_file", "args": {"path": "app/win.txt"}},
            {"tool": "read_file", "args": {"path": "app/win.txt", "start_line": 2, "end_line": 3}},
            {"tool": "edit_file", "args": {"path": "app/win.txt", "old": "two\n", "new": "2\n"}},
            {"tool": "write_file", "args": {"path": "app/bare.txt", "content": "alpha\ngamma\n"}},
            {"tool": "edit_file", "args": {"path": "app/run.sh", "old": "hi", "new": "bye"}},
        ],
        {"tool": "write_file", "args": {"path": "app/win.txt", "content": "x\ny\n"}},
        {"tool": "write_file", "args": {"path": "app/win.txt", "content": "z\n", "append": True}},
        {"tool": "write_file", "args": {"path": "app/run.sh", "content": "#!/bin/sh\nexit 0\n"}},
        FINISH,
    ]
    result, provider = run(root, firewall, turns)
    assert result.status == "succeeded", result.message
    first = provider.requests[1]
    shown = [
        r.content for m in first.messages if isinstance(m, ToolResultMessage) for r in m.results
    ]
    assert "one\ntwo\nthree\n" in shown[0]
    assert "\r" not in shown[0]  # the model sees \n
    # a ranged read numbers the same lines (CRLF counts as one line break)
    assert "app/win.txt lines 2-3 of 3\n2\ttwo\n3\tthree\n</data>" in shown[1]
    assert crlf.read_bytes() == b"x\r\ny\r\nz\r\n"
    assert bare.read_bytes() == b"alpha\ngamma"
    assert script.read_bytes() == b"#!/bin/sh\nexit 0\n"
    assert script.stat().st_mode & 0o777 == 0o755
    seen = "\n".join(observations(provider))
    assert "kept the file's CRLF line endings" in seen
    assert "no newline at end of file" in seen


def test_binary_and_non_utf8_files_refused_for_text_tools_but_move_and_delete(
    root: Path, firewall: Firewall
) -> None:
    (root / "app/logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (root / "app/latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    turns = [
        [
            {"tool": "read_file", "args": {"path": "app/logo.png"}},
            {"tool": "read_file", "args": {"path": "app/logo.png", "start_line": 1, "end_line": 1}},
            {"tool": "write_file", "args": {"path": "app/logo.png", "content": "x"}},
            {"tool": "edit_file", "args": {"path": "app/latin1.txt", "old": "caf", "new": "t"}},
            {
                "tool": "write_file",
                "args": {"path": "app/latin1.txt", "content": "x", "append": True},
            },
        ],
        [
            {"tool": "move_file", "args": {"source": "app/logo.png", "destination": "app/i.png"}},
            {"tool": "delete_file", "args": {"path": "app/latin1.txt"}},
        ],
        FINISH,
    ]
    result, provider = run(root, firewall, turns)
    assert result.status == "succeeded"
    refusals = [o for o in observations(provider) if "binary or non-UTF-8" in o]
    assert len(refusals) == 5
    assert "delete_file and move_file still work" in refusals[0]
    assert (root / "app/i.png").read_bytes() == b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
    assert not (root / "app/latin1.txt").exists()


def test_run_tests_arguments_are_validated(root: Path, firewall: Firewall) -> None:
    bad = [
        {"args": ["tests/a.py\x00--evil"]},
        {"args": ["x" * 1001]},
        {"args": [str(i) for i in range(33)]},
        {"args": "tests/a.py"},
        {"args": ["-q"], "type": "object"},  # make real-model 2026-12-05 run ai, call 20
    ]
    turns = [[{"tool": "run_tests", "args": a} for a in bad], FINISH]
    result, _ = run(root, firewall, turns)
    assert len(result.tool_errors) == 5
    assert all("invalid arguments for run_tests" in e for e in result.tool_errors)
    assert "run_tests takes only" not in result.tool_errors[0]
    assert result.tool_errors[4].endswith(
        "type: Extra inputs are not permitted. run_tests takes only: args; call it again with "
        "just those"
    )


def test_a_rewrite_that_drops_definitions_says_which(root: Path, firewall: Firewall) -> None:
    """A small model rewrote calc.py with only the function it added, dropping add()
    (tests/fixtures/real_model/subtract_run8.json): the observation names what is gone."""
    (root / "app/calc.py").write_text(
        "def add(a, b):\n    return a + b\n\n\nclass Calc:\n    pass\n"
    )
    turns = [
        {"tool": "write_file", "args": {"path": "app/calc.py", "content": "def sub(a, b):\n"}},
        {"tool": "write_file", "args": {"path": "app/new.py", "content": "def f():\n"}},
        {"tool": "write_file", "args": {"path": "app/a.py", "content": "A = 2\n"}},
        FINISH,
    ]
    result, provider = run(root, firewall, turns)
    assert result.status == "succeeded", result.message
    dropped, created, plain = observations(provider)
    assert "it no longer defines `add`, `Calc`;" in dropped
    assert "note:" not in created  # a new file replaced nothing
    assert "note:" not in plain  # nothing defined before, nothing lost
    assert result.violations == []  # reading what a write replaces is no violation


def test_a_write_that_changes_nothing_or_appends_a_restated_file_says_so(
    root: Path, firewall: Firewall
) -> None:
    """make real-model 2026-12-03: a small model sent calc.py back as it was (call 13), and
    appended a restated calc.py, add() and all, to itself (calls 1 and 3). The restated file
    is written whole (indentation and blank lines aside, it starts with the old file); an
    append that defines a name again the same way is kept, with a note, and one that defines
    it differently (run 7, call 1: add() returning a - b) is refused, the file untouched."""
    calc = '"""Calc."""\n\n\ndef add(a, b):\n    return a + b\n'
    (root / "app/calc.py").write_text(calc)
    restated = '"""\nCalc."""\n\ndef add(a, b):\n  return a + b\n\ndef sub(a, b):\n  return a - b\n'
    again = "\n\ndef add(a, b):\n    return a + b  # the same\n"
    changed = "\n\ndef add(a, b):\n    return a - b\n"
    turns = [
        {"tool": "write_file", "args": {"path": "app/calc.py", "content": calc}},
        {"tool": "write_file", "args": {"path": "app/calc.py", "content": restated, "append": True}},
        {"tool": "write_file", "args": {"path": "app/calc.py", "content": changed, "append": True}},
        {"tool": "write_file", "args": {"path": "app/calc.py", "content": again, "append": True}},
        {"tool": "write_file", "args": {"path": "app/calc.py", "content": "X = 1\n", "append": True}},
        {"tool": "write_file", "args": {"path": "app/a.py", "content": "A = 10\n", "append": True}},
        FINISH,
    ]  # fmt: skip
    result, provider = run(root, firewall, turns)
    assert result.status == "succeeded", result.message
    same, whole, refused, doubled, plain, longer = observations(provider)
    assert "\nnote: this is the file as it was: nothing changed\n" in same
    assert (
        "not appended: app/calc.py already defines `add`, and this text defines it again "
        in refused
    )
    assert "wrote app/calc.py" in whole
    assert "written as the new whole file" in whole
    assert "already defined `add`, `sub`" not in doubled
    assert "already defined `add`, and the appended text defines it again" in doubled
    assert "note:" not in plain
    assert (root / "app/calc.py").read_text() == restated + again + "X = 1\n"
    assert "appended to app/a.py" in longer  # "A = 1" is not all of the line "A = 10"
    assert (root / "app/a.py").read_text() == "A = 1\nA = 10\n"


def test_a_whole_file_from_prose_that_only_adds_definitions_is_added_to_the_file(
    root: Path, firewall: Firewall
) -> None:
    """make real-model 2026-12-03 run 4, call 16: ``# calc.py`` and a block with subtract()
    alone, read as a write of calc.py that would drop add(). Read from prose, a file that keeps
    none of the old definitions and only brings new ones is added after them; a tool call
    (the model chose write_file) and a file that keeps one of them are written as sent."""
    calc = "def add(a, b):\n    return a + b\n"
    sub = "def sub(a, b):\n    return a - b\n"
    for name in ("calc.py", "tool.py", "kept.py"):
        (root / "app" / name).write_text(calc)
    turns = [
        {"text": f"```python\n# app/calc.py\n{sub}```"},
        {"tool": "write_file", "args": {"path": "app/tool.py", "content": sub}},
        {"text": f"app/kept.py\n```python\n{calc}\n\n{sub}```"},
        FINISH,
    ]
    result, provider = run(root, firewall, turns)
    assert result.status == "succeeded", result.message
    added, replaced, rewritten = observations(provider)
    assert "appended to app/calc.py" in added
    assert "keeps none of the file's definitions (`add`)" in added
    assert "the file now defines `add`, `sub`" in added
    assert "delete" not in added  # run ag deleted calc.py when told how to replace it
    assert (root / "app/calc.py").read_text() == calc + sub
    assert "no longer defines `add`" in replaced
    assert (root / "app/tool.py").read_text() == sub
    assert "wrote app/kept.py" in rewritten
    assert (root / "app/kept.py").read_text() == f"{calc}\n\n{sub}"


def test_a_write_from_prose_sent_again_after_its_file_changed_is_run_again(
    root: Path, firewall: Firewall
) -> None:
    """make real-model 2026-12-05 run ag, calls 13-16: calc.py's new subtract() written from
    prose (added after add()), calc.py deleted, and the same write sent again, which was
    answered "already done", so the node went on without calc.py. A change of the same path
    in between makes the write new: it runs. With nothing in between it is still a repeat."""
    (root / "app/calc.py").write_text("def add(a, b):\n    return a + b\n")
    sub = "app/calc.py\n```python\ndef sub(a, b):\n    return a - b\n```"
    turns = [
        {"text": sub},
        {"tool": "delete_file", "args": {"path": "./app/calc.py"}},
        {"text": sub},
        {"text": sub},
        FINISH,
    ]
    result, provider = run(root, firewall, turns)
    assert result.status == "succeeded", result.message
    assert [o.split("\n")[1] for o in observations(provider)] == [
        "appended to app/calc.py (32 chars)",
        "deleted app/calc.py",
        "wrote app/calc.py (32 chars)",
    ]
    assert provider.requests[-1].messages[-1].content == WRITTEN_PROMPT  # the last one
    assert (root / "app/calc.py").read_text() == "def sub(a, b):\n    return a - b\n"


def test_a_first_line_only_valid_as_a_docstring_becomes_one_when_read_from_prose(
    root: Path, firewall: Firewall
) -> None:
    """make real-model 2026-12-03 runs 3 and 5: calc.py sent with its docstring's quotes lost
    in the triple quotes around the value, so its first line is bare text. Read from the
    model's prose, it is written as a docstring when that (and only that) makes the file
    valid Python; a tool call, other files and valid code are written as sent."""
    body = "A tiny calculator.\n\n\ndef add(a, b):\n    return a + b\n"
    turns = [
        {"text": f"app/calc.py\n```python\n{body}```"},
        {"tool": "write_file", "args": {"path": "app/tool.py", "content": body}},
        {"text": f"app/notes.md\n```\n{body}```"},
        FINISH,
    ]
    result, provider = run(root, firewall, turns)
    assert result.status == "succeeded", result.message
    repaired, as_sent, prose = observations(provider)
    assert "only valid as a docstring" in repaired
    assert (root / "app/calc.py").read_text() == f'"""A tiny calculator."""\n{body[19:]}'
    assert "docstring" not in as_sent + prose
    assert (root / "app/tool.py").read_text() == body
    assert (root / "app/notes.md").read_text() == body


def test_a_stray_triple_quote_line_is_dropped_when_read_from_prose(
    root: Path, firewall: Firewall
) -> None:
    """make real-model 2026-12-03 run 9, calls 1 and 3: calc.py read from a call in text as
    its docstring less the opening quotes, then a line of triple quotes alone (which opens a
    string never closed), then the code. Read from text, the docstring gets its quotes and the
    stray line goes, since only that makes the file parse; a tool call is written as sent."""
    body = 'A tiny calculator."""\n"""\ndef add(a, b):\n    return a + b\n'
    turns = [
        {"text": f"app/calc.py\n```python\n{body}```"},
        {"tool": "write_file", "args": {"path": "app/tool.py", "content": body}},
        FINISH,
    ]
    result, provider = run(root, firewall, turns)
    assert result.status == "succeeded", result.message
    repaired, as_sent = observations(provider)
    assert "only valid as a docstring" in repaired
    assert "a line holding only triple quotes, which left the file invalid, was dropped" in repaired
    assert (root / "app/calc.py").read_text() == (
        '"""A tiny calculator."""\ndef add(a, b):\n    return a + b\n'
    )
    assert "triple quotes" not in as_sent
    assert (root / "app/tool.py").read_text() == body


def test_only_the_stray_triple_quote_line_is_dropped(root: Path, firewall: Firewall) -> None:
    """The line after the docstring goes; the lines that close the module's own docstrings
    further down stay (a real module has many: dask/array/core.py, 6,278 lines)."""
    body = 'def f():\n    """\n    Doc.\n    """\n    return 1\n'
    turns = [{"text": f'app/m.py\n```python\nModule."""\n"""\n{body}```'}, FINISH]
    result, _ = run(root, firewall, turns)
    assert result.status == "succeeded", result.message
    assert (root / "app/m.py").read_text() == f'"""Module."""\n{body}'


def written(firewall: Firewall, path: str, content: str, *, from_text: bool = True) -> str:
    """The observation of a write_file of ``content`` to ``path``, read from the model's text
    (providers/text_calls.py) unless ``from_text`` is False."""
    args = WriteFileArgs(path=path, content=content)
    return change_tools.write_file(firewall, args, from_text=from_text)


def test_code_fence_lines_inside_a_python_file_are_left_out_when_read_from_text(
    root: Path, firewall: Firewall
) -> None:
    """make real-model 2026-12-05 run p, worker call 1: calc.py written with add() and
    subtract() each in its own ```python block, which made it invalid Python. Read from text,
    it is written without the fence lines when that (and only that) makes it parse; a file that
    parses as sent (a fence inside a string), a file that is not Python, a file still invalid
    without them, and a tool call are written as sent."""
    fenced = "X = 1\n\n```python\ndef add(a, b):\n    return a + b\n```\n\n```py \nY = 2\n  ```\n"
    repaired = written(firewall, "app/calc.py", fenced)
    assert repaired.endswith(
        "\nnote: the text held markdown code fences, which are not Python, so they were left out"
    )
    assert (root / "app/calc.py").read_text() == (
        "X = 1\n\ndef add(a, b):\n    return a + b\n\nY = 2\n"
    )
    in_a_string = 'DOC = """\n```python\nx = 1\n```\n"""\n'
    still_broken = "```python\ndef add(a, b)\n    return a + b\n```\n\n```\nx = 1\n```\n"
    for path, content, from_text in [
        ("app/doc.py", in_a_string, True),
        ("app/notes.md", fenced, True),
        ("app/broken.py", still_broken, True),
        ("app/tool.py", fenced, False),
    ]:
        assert "note:" not in written(firewall, path, content, from_text=from_text), path
        assert (root / path).read_text() == content


def test_a_first_line_indented_alone_is_dedented_when_only_that_makes_python(
    root: Path, firewall: Firewall
) -> None:
    """make real-model 2026-12-05 run v, worker calls 1-3: calc.py written three times from
    text with its docstring indented and nothing else, an IndentationError the tests stopped
    at. Read from text, the first line's indent goes when that makes it parse; a first line
    indented in a file that parses, or one that stays broken, is written as sent."""
    sent = '\n    """A tiny calculator."""\n\n\ndef add(a, b):\n    return a + b\n'
    repaired = written(firewall, "app/calc.py", sent)
    assert repaired.endswith(
        "note: its first line was indented and the next ones were not, so its indent was removed"
    )
    assert (root / "app/calc.py").read_text() == sent.replace('    "', '"', 1)
    parses = "    # a comment\nX = 1\n"
    broken = "    X = 1\ndef add(a, b)\n"
    for path, content in [("app/ok.py", parses), ("app/broken.py", broken)]:
        assert "note:" not in written(firewall, path, content), path
        assert (root / path).read_text() == content


def test_a_fence_closed_with_four_backticks_is_a_fence(root: Path, firewall: Firewall) -> None:
    """make real-model 2026-12-05 run x, calls 4 and 8: calc.py and test_calc.py written from
    text inside ```` ```python ```` ... ````` ```` `````, a fence closed with four backticks,
    which was written into both files; the tests stopped at collection."""
    calc = "```python\n# A tiny calculator.\n\ndef add(a, b):\n    return a + b\n\n"
    calc += "def subtract(a, b):\n    return a - b\n````\n"
    assert "the code fence around it was dropped" in written(firewall, "app/calc.py", calc)
    assert (root / "app/calc.py").read_text() == calc.split("\n", 1)[1].removesuffix("````\n")
    inner = "X = 1\n````python\nY = 2\n````\n"
    assert "markdown code fences" in written(firewall, "app/inner.py", inner)
    assert (root / "app/inner.py").read_text() == "X = 1\nY = 2\n"


def test_line_breaks_written_as_escapes_are_read_when_only_that_makes_python(
    root: Path, firewall: Firewall
) -> None:
    """Run p's calc.py had its blank lines as ``\\n`` escapes beside real line breaks, too few
    for the text-call reader to read them (providers/text_calls.py). Read from text, a Python
    file that parses only with them read as line breaks gets them so; an invalid one whose
    escape is a string's own (``print("a\\nb")``) is left as it was."""
    escaped = "X = 1\\n\\ndef add(a, b):\n    return a + b\n"
    repaired = written(firewall, "app/calc.py", escaped)
    assert "its line breaks were written as \\n escapes, which were read as line breaks" in repaired
    assert (root / "app/calc.py").read_text() == "X = 1\n\ndef add(a, b):\n    return a + b\n"
    own = 'print("a\\nb")\nif True\n    pass\n'
    assert "note:" not in written(firewall, "app/own.py", own)
    assert (root / "app/own.py").read_text() == own


@pytest.mark.parametrize(
    ("path", "text", "noted"),
    [
        ("app/calc.py", '"""A tiny calculator."""\n\nfrom app.calc import add, sub\n', True),
        ("app/a.py", "import app.a\n\nA = 1\n", True),
        ("app/json.py", "import json\n", False),
        ("app/__init__.py", "from app import a\n", False),
        ("app/calc.py", "from app.calcs import add\n", False),
    ],
)
def test_a_module_that_imports_itself_is_noted(
    root: Path, firewall: Firewall, path: str, text: str, noted: bool
) -> None:
    """make real-model 2026-12-04, second session, run i call 6: calc.py written with
    ``from calc import add, subtract``; its tests then failed on the circular import, and
    the model set out to move subtract() to a new module."""
    turns = [{"tool": "write_file", "args": {"path": path, "content": text}}, FINISH]
    result, provider = run(root, firewall, turns)
    assert result.status == "succeeded", result.message
    (written,) = observations(provider)
    assert ("imports itself" in written) is noted


def test_a_test_module_holding_a_copy_of_the_code_under_test_is_found() -> None:
    """``copied_into_tests``, the unclaimed-landing gate of agent/worker.py (run o): a test
    module's top-level definition that a changed module which is no test also defines."""
    from anti_sprawl.agent.change_tools import copied_into_tests

    code = "def add(a, b):\n    return a + b\n\n\ndef subtract(a, b):\n    return a - b\n"
    copy = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
    copy += "def subtract(a, b):\n    return a - b\n"
    found = copied_into_tests({"calc.py": code, "test_calc.py": copy})
    assert found == "test_calc.py defines `subtract`, as calc.py does"
    assert copied_into_tests({"calc.py": code, "tests/calc_check.py": copy})  # a tests/ dir
    good = "from calc import subtract\n\n\ndef test_subtract():\n    assert subtract(3, 2) == 1\n"
    assert copied_into_tests({"calc.py": code, "test_calc.py": good}) == ""
    # a test named like the code (test_*) and a helper of its own are no copy
    helper = good + "\n\ndef make_pair():\n    return 3, 2\n"
    assert copied_into_tests({"calc.py": code, "test_calc.py": helper}) == ""
    # the same name in two modules that are no tests, or in a test alone, is not this
    assert copied_into_tests({"calc.py": code, "more.py": code}) == ""
    assert copied_into_tests({"test_calc.py": copy}) == ""
    # a test helper named as code the change touches is no copy (this repository's history:
    # tests/test_no_changes.py's execute() beside anti_sprawl/cli/runs.py's)
    helper_named_alike = good + "\n\ndef subtract(a, b):\n    return calc_subtract(a, b)\n"
    assert copied_into_tests({"calc.py": code, "test_calc.py": helper_named_alike}) == ""


# make real-model 2026-12-05 run ap, call 5, verbatim (its path moved under app/): the whole file
# as Python strings joined with +, the docstring a triple-quoted string that starts with a line
# break, sent with append: true
RUN_AP_5 = (
    '```json\n{\n    "name": "write_file",\n    "arguments": {\n        "path": "app/calc.py",\n'
    '        "content": """\nA tiny calculator."""\n        + "\\n\\n"\n'
    '        + "def add(a, b):\\n"\n        + "    return a + b\\n"\n        + "\\n"\n'
    '        + "def subtract(a, b):\\n"\n        + "    return a - b\\n",\n'
    '        "append": true\n    }\n}\n```'
)


def test_a_restated_file_whose_docstring_lost_its_quotes_after_a_blank_line_is_the_file(
    root: Path, firewall: Firewall
) -> None:
    """Run ap's first call: calc.py restated with subtract(), its docstring's value starting
    with a line break, so the file's first line was blank and the next bare text. Appended as
    sent, calc.py held add() twice and a line of prose, and the tests stopped at collection.
    The first line that is not blank now gets the docstring's quotes, and the file, restated
    whole, is written as the new file."""
    (root / "app/calc.py").write_text(
        '"""A tiny calculator."""\n\n\ndef add(a, b):\n    return a + b\n'
    )
    (call,) = recover_text_calls(RUN_AP_5, WORKER_TOOLS)
    done = change_tools.write_file(firewall, WriteFileArgs(**call.arguments), from_text=True)
    assert done.startswith("wrote app/calc.py")
    assert "only valid as a docstring" in done
    assert "began with the whole file as it was" in done
    assert (root / "app/calc.py").read_text() == (
        '\n"""A tiny calculator."""\n\ndef add(a, b):\n    return a + b\n\n'
        "def subtract(a, b):\n    return a - b\n"
    )
