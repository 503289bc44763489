"""Outlines of non-Python sources: tree-sitter when a grammar is installed, else regexes.

tree-sitter is optional and never a dependency: ``tree_sitter`` and a grammar package such as
``tree_sitter_javascript`` are imported lazily, on first use, and only if the user installed
them (we never use a grammar bundle that downloads at run time). Without them a line-based
regex outline keeps the definition-looking lines; it is cheap and good enough for a map.
"""

from __future__ import annotations

import importlib
import re
from functools import cache
from pathlib import PurePosixPath
from typing import Any, NamedTuple

__all__ = [
    "MAX_OUTLINE_LINES",
    "OutlineLine",
    "language_for",
    "outline_other",
    "outline_other_lines",
]


class OutlineLine(NamedTuple):
    """One outline line and the source it stands for (1-based lines; 0: no source line)."""

    line: int
    end: int  # last source line of the definition's body
    depth: int
    kind: str  # doc | import | decorator | class | def | name | heading | other
    name: str  # the defined name, "" when the line defines none
    text: str  # the outline text, indented


MAX_OUTLINE_LINES = 400
_LINE_LIMIT = 160

_EXTENSIONS = {
    ".js": "javascript",
    ".jsx": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".cs": "c_sharp",
}

# language -> (grammar module, function returning the language capsule)
_GRAMMARS = {
    "javascript": ("tree_sitter_javascript", "language"),
    "typescript": ("tree_sitter_typescript", "language_typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx"),
    "go": ("tree_sitter_go", "language"),
    "rust": ("tree_sitter_rust", "language"),
    "java": ("tree_sitter_java", "language"),
    "c_sharp": ("tree_sitter_c_sharp", "language"),
}

_DEFINITIONS = frozenset(
    {
        # javascript / typescript
        "function_declaration",
        "generator_function_declaration",
        "class_declaration",
        "abstract_class_declaration",
        "method_definition",
        "interface_declaration",
        "type_alias_declaration",
        "enum_declaration",
        "function_signature",
        "method_signature",
        "abstract_method_signature",
        # go
        "method_declaration",
        "type_declaration",
        # rust
        "function_item",
        "function_signature_item",
        "struct_item",
        "enum_item",
        "trait_item",
        "impl_item",
        "mod_item",
        "type_item",
        # java / c#
        "record_declaration",
        "struct_declaration",
        "constructor_declaration",
    }
)
_TOP_ONLY = frozenset({"lexical_declaration", "variable_declaration", "const_item", "static_item"})
_LEAVES = ("function", "method", "constructor")  # never descend into their bodies

_JS = [
    r"(export\s+)?(default\s+)?(async\s+)?function\b\*?\s*\w*\s*\(",
    r"(export\s+)?(default\s+)?(abstract\s+)?class\s+\w+",
    r"export\s+(const|let|var|interface|type|enum|default)\b",
    r"(declare\s+)?(interface|type|enum)\s+\w+",
    r"(const|let|var)\s+\w+\s*=\s*(async\s*)?(\([^)]*\)|\w+)\s*=>",
    r"\s+(static\s+|async\s+|get\s+|set\s+|public\s+|private\s+|protected\s+|readonly\s+)*"
    r"(?!(if|for|while|switch|catch|return|function)\b)#?\w+\s*\([^)]*\)\s*(:\s*[^={]+)?\{.*$",
]
_PATTERNS = {
    "javascript": _JS,
    "typescript": _JS,
    "tsx": _JS,
    "go": [r"func\s", r"type\s+\w+"],
    "rust": [
        r"\s*(pub(\([^)]*\))?\s+)?(default\s+)?(async\s+)?(const\s+)?(unsafe\s+)?"
        r"(extern\s+\"[^\"]*\"\s+)?fn\s+\w+",
        r"\s*(pub(\([^)]*\))?\s+)?(struct|enum|trait|type|mod|union)\s+\w+",
        r"\s*(unsafe\s+)?impl\b",
    ],
    "java": [
        r"\s*((public|private|protected|internal|static|final|abstract|sealed|partial|readonly|"
        r"non-sealed)\s+)*(class|interface|enum|record|struct|@interface)\s+\w+",
        r"\s*((public|private|protected|internal|static|final|abstract|override|virtual|async|"
        r"synchronized|native|default|extern|unsafe|new)\s+)+[\w<>\[\],.? ]+?\s*\w+\s*\([^;]*$",
    ],
}
_PATTERNS["c_sharp"] = _PATTERNS["java"]


def language_for(path: str) -> str | None:
    """The language we can outline for ``path``, from its extension, or None."""
    return _EXTENSIONS.get(PurePosixPath(path).suffix.lower())


def outline_other(language: str, text: str) -> str | None:
    """Outline of a non-Python source: tree-sitter if its grammar is importable, else regexes."""
    lines = outline_other_lines(language, text)
    return None if lines is None else "\n".join(entry.text for entry in lines)


def outline_other_lines(language: str, text: str) -> list[OutlineLine] | None:
    """``outline_other`` as numbered entries."""
    parser = _parser(language)
    if parser is not None:
        try:
            return _tree_sitter_outline(parser, text.encode("utf-8", "replace"))
        except (AttributeError, TypeError, ValueError):
            pass  # an unexpected binding version: the regex outline still works
    return _regex_outline(language, text)


@cache
def _parser(language: str) -> Any | None:
    grammar = _GRAMMARS.get(language)
    if grammar is None:
        return None
    try:
        tree_sitter = importlib.import_module("tree_sitter")
        module = importlib.import_module(grammar[0])
        return tree_sitter.Parser(tree_sitter.Language(getattr(module, grammar[1])()))
    except (ImportError, AttributeError, TypeError, ValueError):
        return None  # not installed, or a binding API older than 0.22


def _tree_sitter_outline(parser: Any, source: bytes) -> list[OutlineLine]:
    lines: list[OutlineLine] = []

    def visit(node: Any, depth: int, prefix: str = "") -> None:
        for child in node.named_children:
            if len(lines) >= MAX_OUTLINE_LINES:
                return
            kind = child.type
            if kind in _DEFINITIONS or (depth == 0 and kind in _TOP_ONLY):
                name_node = child.child_by_field_name("name")
                name = (
                    source[name_node.start_byte : name_node.end_byte].decode("utf-8", "replace")
                    if name_node is not None
                    else ""
                )
                lines.append(
                    OutlineLine(
                        child.start_point[0] + 1,
                        child.end_point[0] + 1,
                        depth,
                        "def",
                        name,
                        "  " * depth + prefix + _header(child, source),
                    )
                )
                if not any(leaf in kind for leaf in _LEAVES) and kind not in _TOP_ONLY:
                    visit(child, depth + 1)
            elif kind == "export_statement":
                # keep ``export`` / ``export default`` in front of the declaration it wraps
                declaration = child.child_by_field_name("declaration")
                start = declaration.start_byte if declaration is not None else child.end_byte
                keyword = source[child.start_byte : start].decode("utf-8", "replace")
                visit(child, depth, " ".join(keyword.split()) + " ")
            elif not any(leaf in kind for leaf in _LEAVES):
                visit(child, depth)

    visit(parser.parse(source).root_node, 0)
    return lines


def _header(node: Any, source: bytes) -> str:
    body = node.child_by_field_name("body")
    end = body.start_byte if body is not None else node.end_byte
    text = source[node.start_byte : end].decode("utf-8", "replace")
    if body is None:
        text = text.splitlines()[0] if text else ""
    return _shorten(" ".join(text.split()).rstrip("{ "))


_NAMED = re.compile(
    r"\b(?:function\*?|class|interface|type|enum|struct|trait|fn|func|mod|record|const|let|var)"
    r"\s+(?:\([^)]*\)\s*)?([A-Za-z_$][\w$]*)"
)
_CALLED = re.compile(r"([A-Za-z_$][\w$]*)\s*\(")


def _regex_outline(language: str, text: str) -> list[OutlineLine] | None:
    patterns = _compiled(language)
    if patterns is None:
        return None
    kept: list[OutlineLine] = []
    for number, line in enumerate(text.splitlines(), 1):
        if patterns.match(line):
            found = _NAMED.search(line) or _CALLED.search(line)
            name = found.group(1) if found else ""
            depth = (len(line) - len(line.lstrip())) // 2
            shown = _shorten(line.rstrip().rstrip("{").rstrip())
            kept.append(OutlineLine(number, number, depth, "def", name, shown))
            if len(kept) >= MAX_OUTLINE_LINES:
                break
    return kept


@cache
def _compiled(language: str) -> re.Pattern[str] | None:
    patterns = _PATTERNS.get(language)
    if patterns is None:
        return None
    return re.compile("|".join(f"(?:{p})" for p in patterns))


def _shorten(line: str) -> str:
    return line if len(line) <= _LINE_LIMIT else line[: _LINE_LIMIT - 3] + "..."
