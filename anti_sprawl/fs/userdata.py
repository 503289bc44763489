"""Files the user names on the command line (plan, ``--script``, ``@requirement``), read safely.

They are untrusted input, so reading and parsing have explicit limits, each named in the
one-line error that enforces it: at most ``MAX_USER_FILE_BYTES`` read (an endless
``/dev/zero`` stops there), mappings and lists nested at most ``MAX_NESTING`` deep (a plan
nested 10,000 deep is refused before Python's recursion limit is reached), integers of at most
``MAX_INT_DIGITS`` digits (Python's integer-string limit never fires), and no duplicate keys
(YAML and JSON would silently keep the last one). Every problem is a ``UsageError``.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from ..errors import UsageError
from .safe_fs import read_capped

__all__ = [
    "MAX_INT_DIGITS",
    "MAX_NESTING",
    "MAX_USER_FILE_BYTES",
    "load_document",
    "parse_document",
    "read_user_file",
]

MAX_USER_FILE_BYTES = 64 * 1024 * 1024
MAX_NESTING = 64
MAX_INT_DIGITS = 20

_INT_LIMIT = f"integers are limited to {MAX_INT_DIGITS} digits"
_DEPTH_LIMIT = f"nesting is limited to {MAX_NESTING} levels"


class _Limit(Exception):
    """A parser limit was hit; the message says which (turned into a UsageError by callers)."""


def read_user_file(path: Path, what: str) -> str:
    """The text of a file the user named; any problem is a one-line UsageError.

    Regular files larger than the limit are refused from their size; anything else (a pipe,
    a device such as ``/dev/zero``) is read up to the limit and refused beyond it.
    """
    limit = MAX_USER_FILE_BYTES
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOCTTY)
    except FileNotFoundError:
        raise UsageError(f"{what} file not found: {path}") from None
    except OSError as exc:
        raise UsageError(f"cannot read {what} file {path}: {exc.strerror}") from exc
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise UsageError(f"{what} path is a directory: {path}")
        if stat.S_ISREG(st.st_mode) and st.st_size > limit:
            raise UsageError(f"{what} file {path} is larger than the {_mib(limit)} limit")
        data = read_capped(fd, limit + 1)
    except OSError as exc:
        raise UsageError(f"cannot read {what} file {path}: {exc.strerror}") from exc
    finally:
        os.close(fd)
    if len(data) > limit:
        raise UsageError(f"{what} file {path} is larger than the {_mib(limit)} limit")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{what} file {path} is not UTF-8 text (byte {exc.start})") from None


def _mib(n: int) -> str:
    return f"{n // (1024 * 1024)} MiB"


def load_document(path: Path, what: str) -> Any:
    """Read and parse a YAML or JSON file (JSON when the suffix is ``.json``)."""
    text = read_user_file(path, what)
    return parse_document(
        text,
        json_format=path.suffix.lower() == ".json",
        source=f"{what} file {path}",
        location=str(path),
    )


def parse_document(text: str, *, json_format: bool, source: str, location: str = "") -> Any:
    """Parse ``text`` under the module's limits; ``source`` names it in error messages, and a
    syntax error gives ``location:line:column`` (``location``: the file's path) and the line."""
    try:
        data = _parse_json(text) if json_format else _parse_yaml(text)
        _check_depth(data)
    except _Limit as exc:
        raise UsageError(f"cannot load {source}: {exc}") from None
    except RecursionError:
        # The pure-Python YAML fallback and the json module recurse per level; either way the
        # document is deeper than we accept.
        raise UsageError(f"cannot load {source}: {_DEPTH_LIMIT}") from None
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if "maximum nesting depth" in str(exc):
            first = _DEPTH_LIMIT  # libyaml's own guard, at 1000 levels
        where = None if first == _DEPTH_LIMIT else _located(exc, text)
        if where is None:
            raise UsageError(f"cannot parse {source}: {first}") from exc
        at = f"{source}:{where}" if location else f"{source} at line {where}"
        raise UsageError(f"cannot parse {at}") from exc
    return data


def _located(exc: Exception, text: str) -> str | None:
    """``line:column: problem; line N reads: '...'``, for a person fixing the file by hand."""
    if isinstance(exc, json.JSONDecodeError):
        line, column, problem = exc.lineno, exc.colno, exc.msg
    else:
        mark = getattr(exc, "problem_mark", None)
        if mark is None:
            return None
        line, column = mark.line + 1, mark.column + 1
        problem = getattr(exc, "problem", None) or type(exc).__name__
        context = getattr(exc, "context", None)
        problem = f"{problem} ({context})" if context else problem
    lines = text.splitlines()
    shown = lines[line - 1].rstrip()[:160] if 0 < line <= len(lines) else ""
    read = f"; line {line} reads: {shown!r}" if shown.strip() else ""
    return f"{line}:{column}: {problem}{read}"


# --- JSON ---------------------------------------------------------------------------------


def _json_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _Limit(f"an integer has {len(text.lstrip('-'))} digits; {_INT_LIMIT}")
    return int(text)


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Limit(f"duplicate key {key!r}")
        out[key] = value
    return out


def _parse_json(text: str) -> Any:
    return json.loads(text, parse_int=_json_int, object_pairs_hook=_json_object)


# --- YAML ---------------------------------------------------------------------------------

_Base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when installed: faster


class _StrictLoader(_Base):  # type: ignore[misc]
    """SafeLoader that refuses duplicate keys and oversized integers."""


def _construct_int(loader: Any, node: yaml.ScalarNode) -> Any:
    digits = sum(ch.isalnum() for ch in str(node.value))
    if digits > MAX_INT_DIGITS:
        line = node.start_mark.line + 1
        raise _Limit(f"an integer on line {line} has {digits} digits; {_INT_LIMIT}")
    return yaml.SafeLoader.construct_yaml_int(loader, node)


def _construct_mapping(loader: Any, node: yaml.MappingNode) -> Any:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
            continue  # merge keys may legitimately be overridden; complex keys are rare
        key = loader.construct_object(key_node)
        if key in seen:
            line = key_node.start_mark.line + 1
            raise _Limit(f"duplicate key {key!r} on line {line}")
        seen.add(key)
    return yaml.SafeLoader.construct_yaml_map(loader, node)


_StrictLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)
_StrictLoader.add_constructor("tag:yaml.org,2002:map", _construct_mapping)


def _parse_yaml(text: str) -> Any:
    return yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass: no arbitrary tags


def _check_depth(data: Any) -> None:
    """Refuse containers nested more than MAX_NESTING deep (iterative: no recursion).

    YAML aliases can share one container many times (billion laughs) or even contain
    themselves: each container is visited once.
    """
    stack: list[tuple[Any, int]] = [(data, 1)]
    visited: set[int] = set()
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list) and id(value) not in visited:
            visited.add(id(value))
            if depth > MAX_NESTING:
                raise _Limit(_DEPTH_LIMIT)
            children: Iterator[Any] = iter(value.values() if isinstance(value, dict) else value)
            stack.extend((child, depth + 1) for child in children)
