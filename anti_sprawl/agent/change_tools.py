"""The worker's tools that change files: write (or append), delete and move.

Each handler takes the node's ``Firewall`` and the validated arguments and returns the
observation text for the model; refusals propagate as ``FirewallError`` (recorded by the
firewall as violations) and other mistakes as ``EditError``, which the worker loop turns into
error observations. Nothing here chooses a boundary: the firewall holds the node's scopes.
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Mapping

from ..fs.firewall import EditError, Firewall
from ..fs.scopes import normalize_entry
from ..outline.pyfacts import is_test_module
from ..redact import PLACEHOLDER
from .tools import MoveFileArgs, PathArgs, WriteFileArgs

__all__ = [
    "copied_into_tests",
    "copies_in_place_of_tests",
    "delete_file",
    "import_of_itself",
    "move_file",
    "parses",
    "refuse_placeholder",
    "top_level_names",
    "write_file",
]

_LISTED = 20


def refuse_placeholder(text: str) -> None:
    """The model saw a redacted secret; writing the placeholder back would destroy it."""
    if PLACEHOLDER in text:
        raise EditError(
            "the new text contains a [REDACTED:...] placeholder; edit around the secret "
            "with edit_file instead of rewriting it"
        )


def write_file(fw: Firewall, args: WriteFileArgs, *, from_text: bool = False) -> str:
    """Create, replace or extend one file.

    ``from_text``: the call was read from a model's prose (providers/text_calls.py,
    agent/file_blocks.py), whose whole-file write of only new definitions is an addition."""
    done = _write(fw, args, from_text)
    return done + _self_import_note(args.path, fw.current_text(args.path) or "")


def _write(fw: Firewall, args: WriteFileArgs, from_text: bool) -> str:
    refuse_placeholder(args.content)
    repaired = _quotes_repaired(args.path, args.content) if from_text else None
    if repaired is not None:
        args = args.model_copy(update={"content": repaired[0]})
    before = fw.current_text(args.path)
    restated = args.append and _restates(before or "", args.content)
    if args.append and not restated:
        _refuse_changed_redefinition(args.path, before or "", args.content)
    added = from_text and not args.append and _only_adds(before or "", args.content)
    append = (args.append and not restated) or added
    kept = fw.write_text(args.path, args.content, append=append)
    verb = "appended to" if append else "wrote"
    note = f"; {kept}" if kept else ""
    done = f"{verb} {args.path} ({len(args.content)} chars{note})"
    if repaired is not None:
        done += f"\nnote: {repaired[1]}"
    if added:
        # What the file holds now, and no way out: told "to replace the whole file, delete it
        # first", run ag's model deleted calc.py, which held add() and its new subtract()
        # (make real-model 2026-12-05, calls 14-15; a small model follows any instruction).
        kept_names = _names(top_level_names(before or ""))
        now = _names(top_level_names(fw.current_text(args.path) or ""))
        return done + (
            f"\nnote: the text keeps none of the file's definitions ({kept_names}) and only "
            f"defines new ones, so it was added after them, not written over them: the file "
            f"now defines {now}"
        )
    if restated:
        done += (
            "\nnote: the text began with the whole file as it was, so it was written as the "
            "new whole file, not added after the old one"
        )
    if append:
        return done + _redefined_note(before or "", args.content)
    if before == args.content:
        # a small model sent back the file as it was, as its "change" (make real-model
        # 2026-12-03, call 13)
        return done + "\nnote: this is the file as it was: nothing changed"
    gone = [n for n in top_level_names(before or "") if n not in top_level_names(args.content)]
    if gone:
        # a small model rewrote calc.py with only the function it added, dropping add()
        # (recorded: tests/fixtures/real_model/subtract_run6.json, subtract_run8.json)
        done += (
            f"\nnote: this replaced the whole file, and it no longer defines {_names(gone)}; "
            "if that was not meant, write the file again with them, or add to a file with "
            "append: true or edit_file"
        )
    return done


def _quotes_repaired(path: str, content: str) -> tuple[str, str] | None:
    """``content`` repaired, and what was done, when the Python file is not valid as written
    and is with that; None otherwise. Only parsed, never run.

    The text first as it is, then with its ``\\n`` escapes read as line breaks, then without a
    code fence around all of it (run g, call 24: ``"content": "```python\\ndef subtract..."``),
    then without the code fences inside it, then dedented (run g, calls 11-12: the file's lines
    indented to the level of the JSON around its triple quotes, all of them or all after the
    first; 2026-12-05 run v, calls 1-3: the first alone, the docstring); each then with its triple quotes repaired (``_docstring_repaired``). Recorded from
    Qwen2.5-Coder-1.5B, make real-model 2026-12-04 (second session) run g, and 2026-12-05 run p
    (``_reshaped``)."""
    if not path.endswith(".py") or parses(content):
        return None
    for text, done in _reshaped(content):
        if text != content and parses(text):
            return text, done
        repaired = _docstring_repaired(text)
        if repaired is not None:
            return repaired[0], "; ".join(d for d in (done, repaired[1]) if d)
    return None


# A line that is only a markdown code fence, bare or labelled as Python.
# Three backticks or more: run x closed its fences with four.
_FENCE_LINE = re.compile(r"^\s*`{3,}(?:python|py)?\s*$", re.I)

_FENCE_AROUND = "the code fence around it was dropped"
_FENCES_INSIDE = "the text held markdown code fences, which are not Python, so they were left out"
_INDENTED = "its lines were indented, so the indent common to them was removed"
_FIRST_INDENTED = (
    "its first line was indented and the next ones were not, so its indent was removed"
)


def _reshaped(content: str) -> list[tuple[str, str]]:
    """``content`` as written, with escaped line breaks read, unfenced, without fence lines and
    dedented, with what each change was.

    Run p, worker call 1: calc.py as ``A tiny calculator.\\n\\n```python``, add() and
    subtract() each in its own ```python block, the blank lines between written as ``\\n``
    escapes and the other line breaks real: it parses only with three repairs together (the
    escapes, the fence lines, the docstring's quotes)."""
    shapes = [(content, "")]
    if "\\n" in content:
        read = "its line breaks were written as \\n escapes, which were read as line breaks"
        shapes.append((content.replace("\\n", "\n"), read))
    for text, done in list(shapes):
        lines = text.strip("\n").split("\n")
        closed = len(lines) >= 2 and re.fullmatch("`{3,}", lines[-1].strip()) is not None
        if closed and lines[0].lstrip().startswith("```"):
            shapes.append(("\n".join(lines[1:-1]) + "\n", _and(done, _FENCE_AROUND)))
    for text, done in list(shapes):
        unfenced = "\n".join(line for line in text.split("\n") if not _FENCE_LINE.match(line))
        if all(unfenced != shape for shape, _ in shapes):
            shapes.append((unfenced, _and(done, _FENCES_INSIDE)))
    for text, done in list(shapes):
        lines = text.split("\n")
        first = next((i for i, line in enumerate(lines) if line.strip()), 0)
        tail = textwrap.dedent("\n".join(lines[first + 1 :]))
        head = "\n".join([*lines[:first], lines[first].lstrip(), *lines[first + 1 :]])
        for dedented, what in (
            (textwrap.dedent(text), _INDENTED),
            ("\n".join([*lines[: first + 1], tail]), _INDENTED),
            (head, _FIRST_INDENTED),
        ):
            if dedented != text:
                shapes.append((dedented, _and(done, what)))
    return shapes


def _and(done: str, what: str) -> str:
    """``what`` was done after ``done`` (nothing, when empty)."""
    return f"{done}; {what}" if done else what


def _docstring_repaired(content: str) -> tuple[str, str] | None:
    """``content`` with its triple quotes repaired when that makes it parse. Two repairs,
    tried alone and together: the first line in triple quotes, when it is bare text (a
    docstring whose quotes merged with the triple quotes around the value; recorded from
    Qwen2.5-Coder-1.5B, make real-model 2026-12-03 runs 3 and 5: a calc.py whose first line is
    ``A tiny calculator.``, the old file's docstring, or run 9: ``A tiny calculator.`` with
    its closing quotes); and lines holding nothing but triple quotes dropped (run 9, calls 1
    and 3: one such line after that docstring, which opened a string never closed). The first
    line is the first that is not blank (run ap, call 5: the docstring written as a triple-quoted
    Python string in the JSON, whose value starts with a line break)."""
    lead = len(content) - len(content.lstrip("\n"))
    first, newline, rest = content[lead:].partition("\n")
    starts: list[tuple[str, str]] = [(content, "")]
    bare = first.strip()
    if bare and bare[:1] not in "\"'#":
        quoted = f'"""{bare}' if bare.endswith('"""') else f'"""{bare}"""'
        starts.append(
            (
                f"{content[:lead]}{quoted}{newline}{rest}",
                "its first line was only valid as a docstring, so it was written as one "
                "(in triple quotes)",
            )
        )
    gone = "a line holding only triple quotes, which left the file invalid, was dropped"
    for text, done in starts:
        if text != content and parses(text):
            return text, done
        # the first such line only: later ones close the file's own docstrings (a 6,278-line
        # dask/array/core.py lost them all, and did not parse)
        lines = text.split("\n")
        stray = next((i for i, line in enumerate(lines) if line.strip() in ('"""', "'''")), None)
        if stray is not None:
            kept = "\n".join(lines[:stray] + lines[stray + 1 :])
            if parses(kept):
                return kept, f"{done}; {gone}" if done else gone
    return None


def parses(source: str) -> bool:
    """Whether ``source`` is valid Python (only parsed, never run)."""
    try:
        ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def _restates(before: str, appended: str) -> bool:
    """Whether ``appended`` starts with all of ``before`` (whitespace aside): a whole new file
    sent with append: true (make real-model 2026-12-03, calls 1 and 3: calc.py restated, with
    subtract() after add(), and appended to itself, which defined add() twice)."""
    old = "".join(before.split())
    if not old:
        return False
    seen = ""
    for line in appended.splitlines():  # the old file must end where a line of the new ends
        seen += "".join(line.split())
        if len(seen) >= len(old):
            return seen == old
    return False


def _only_adds(before: str, content: str) -> bool:
    """Whether ``content`` defines only names ``before`` does not, and ``before`` defines
    some: a small model's "whole file" that is just the function it added (recorded five
    times from Qwen2.5-Coder-1.5B, e.g. tests/fixtures/real_model/subtract_run8.json and make
    real-model 2026-12-03 run 4, call 16: ``# calc.py`` then subtract() alone, add() gone)."""
    old, new = set(top_level_names(before)), set(top_level_names(content))
    return bool(old) and bool(new) and not old & new


def _refuse_changed_redefinition(path: str, before: str, appended: str) -> None:
    """EditError when text appended to a Python module defines again, differently, a name the
    module already defines at top level: the later definition would silently replace the
    earlier one (make real-model 2026-12-03 run 7, call 1: ``def add(a, b): return a - b``
    appended to calc.py, which broke add() and its test). The same definition again is
    harmless and kept (subtract_run12.json: test_add() restated before test_subtract())."""
    if not path.endswith((".py", ".pyi")):
        return
    old, new = _top_level_definitions(before), _top_level_definitions(appended)
    changed = [name for name, tree in new.items() if name in old and old[name] != tree]
    if changed:
        raise EditError(
            f"not appended: {path} already defines {_names(changed)}, and this text defines "
            "it again differently, which would replace it; to change it use edit_file (or "
            "write the whole file), and to add new code append only the new definitions"
        )


def _top_level_definitions(source: str) -> dict[str, str]:
    """Each top-level function and class of a Python module, as its AST dump (layout and
    comments aside); {} when the text does not parse on its own."""
    return {node.name: ast.dump(node) for node in _definition_nodes(source)}


_Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def _definition_nodes(source: str) -> list[_Definition]:
    """The top-level functions and classes of the Python ``source``; none when it does not
    parse on its own."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    return [node for node in tree.body if isinstance(node, _Definition)]


def _self_import_note(path: str, text: str) -> str:
    """A note when a Python module imports itself (make real-model 2026-12-04, second
    session, run i call 6: calc.py written with ``from calc import add, subtract``; the tests
    failed on the circular import and the model set out to move subtract() to a new module)."""
    line = import_of_itself(path, text)
    if not line:
        return ""
    return (
        f"\nnote: {path} imports itself (`{line}`), which fails as a circular import: "
        "the module's own names need no import"
    )


def import_of_itself(path: str, text: str) -> str:
    """The statement by which the Python module at ``path`` imports itself, or ""."""
    if not path.endswith(".py") or path.endswith("__init__.py"):
        return ""
    dotted = path.removesuffix(".py").replace("/", ".")

    def itself(module: str) -> bool:
        # a top-level file by its name; a nested one by a package path its path ends with
        # (``src/pkg/mod.py`` as ``pkg.mod``), never by its name alone (``pkg/json.py``
        # importing the standard library's json)
        return module == dotted or ("." in module and dotted.endswith("." + module))

    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ""
    for node in tree.body:
        modules = (
            [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
            if isinstance(node, ast.ImportFrom) and node.level == 0
            else []
        )
        if any(itself(m) for m in modules):
            return ast.get_source_segment(text, node) or "import"
    return ""


def copied_into_tests(texts: dict[str, str]) -> str:
    """Where a test module among ``texts`` (path -> changed text) defines, at its top level, a
    function or class that a changed module that is no test defines word for word: a copy of
    the code under test, which the test module then holds instead of a test of it (make
    real-model 2026-12-05 run o: test_calc.py got `def subtract(a, b)` beside calc.py's, and
    no test). The same name alone is no copy: across this repository's last 313 commits with
    Python changes, 16 had a test helper named as code they changed (``execute``, ``main``,
    ``make_repo``), none a copy. One line saying so, or ""."""
    defined: dict[str, tuple[str, str]] = {}  # the definition's source -> (name, path)
    for path, text in texts.items():
        if path.endswith(".py") and not is_test_module(path):
            defined.update({src: (name, path) for name, src in _definitions(text)})
    for path, text in texts.items():
        if path.endswith(".py") and is_test_module(path):
            copied = [defined[src] for _, src in _definitions(text) if src in defined]
            if copied:
                names = [name for name, _ in copied]
                return f"{path} defines {_names(names)}, as {copied[0][1]} does"
    return ""


def copies_in_place_of_tests(
    changes: Mapping[str, tuple[str, str]], modules: Mapping[str, str]
) -> str:
    """Where a whole change (path -> (old text, new text)) holds copies of code instead of
    tests: every changed file a Python test module, none adding or changing a top-level test
    (``test_*`` or ``Test*``), and one of them defining word for word what a module of
    ``modules`` (path -> text) defines (``copied_into_tests``). One line saying so, or ""; a
    change with anything more is judged by its tests. Recorded, the test node of make
    real-model 2026-12-05 (a run of run an's, exp17): test_calc.py got calc.py's subtract()
    appended, the finish was refused once for it, and the second finish landed it with no test.
    """
    if not changes or not all(p.endswith(".py") and is_test_module(p) for p in changes):
        return ""
    if any(_tests_in(new) - _tests_in(old) for old, new in changes.values()):
        return ""
    return copied_into_tests({**modules, **{p: new for p, (_, new) in changes.items()}})


def _tests_in(text: str) -> set[str]:
    """The sources of the top-level tests (``test_*`` functions, ``Test*`` classes) of the
    Python ``text``; none when it does not parse."""
    return {
        ast.get_source_segment(text, node) or node.name
        for node in _definition_nodes(text)
        if node.name.lower().startswith("test")
    }


def _definitions(text: str) -> list[tuple[str, str]]:
    """(name, source) of each top-level function and class of the Python ``text``, but tests;
    none when it does not parse."""
    return [
        (node.name, ast.get_source_segment(text, node) or "")
        for node in _definition_nodes(text)
        if not node.name.startswith("test")
    ]


def _redefined_note(before: str, appended: str) -> str:
    """A note when appended text defines again what the file already defines: a whole new
    file sent with append: true (make real-model 2026-12-03, call 1: calc.py restated with
    add() and appended to itself)."""
    defined = set(top_level_names(before))
    again = [n for n in top_level_names(appended) if n in defined]
    if not again:
        return ""
    return (
        f"\nnote: the file already defined {_names(again)}, and the appended text defines "
        "it again; to replace the whole file, write it without append"
    )


# A definition at the start of a line: Python, JavaScript/TypeScript, Go, Rust, Ruby.
_DEFINITION = re.compile(
    r"^(?:export\s+)?(?:async\s+)?(?:def|class|function|func|fn|pub\s+fn)\s+([A-Za-z_]\w*)",
    re.M,
)


def top_level_names(text: str) -> list[str]:
    """The names ``text`` defines at the top level (functions and classes, several languages)."""
    return list(dict.fromkeys(_DEFINITION.findall(text)))


def _names(names: list[str]) -> str:
    shown = ", ".join(f"`{n}`" for n in names[:_LISTED])
    return shown + (f" and {len(names) - _LISTED} more" if len(names) > _LISTED else "")


def delete_file(fw: Firewall, args: PathArgs) -> str:
    """Delete one file or symlink, or a directory with every file below it."""
    removed = fw.delete(args.path)
    # ("./calc.py" is the file calc.py, not a directory: run ag, call 15)
    if removed == [normalize_entry(args.path)]:
        return f"deleted {removed[0]}"
    shown = "\n".join(f"  {p}" for p in removed[:_LISTED])
    more = f"\n  ... and {len(removed) - _LISTED} more" if len(removed) > _LISTED else ""
    return f"deleted directory {args.path} ({len(removed)} files)\n{shown}{more}".rstrip()


def move_file(fw: Firewall, args: MoveFileArgs) -> str:
    """Move (rename) one file or directory; the destination must not exist."""
    moved = fw.move(args.source, args.destination)
    if len(moved) == 1 and moved[0][0] == normalize_entry(args.source):
        return f"moved {moved[0][0]} -> {moved[0][1]}"
    shown = "\n".join(f"  {old} -> {new}" for old, new in moved[:_LISTED])
    more = f"\n  ... and {len(moved) - _LISTED} more" if len(moved) > _LISTED else ""
    head = f"moved directory {args.source} -> {args.destination} ({len(moved)} files)"
    return f"{head}\n{shown}{more}".rstrip()
