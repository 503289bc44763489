"""Replaying real commits through ``execute``: a history builder and an obedient worker.

``build_history`` makes a repository whose commits add, modify, delete and rename files and
directories (CRLF files, files without a final newline, executables, binaries).
``replay_inputs`` turns each commit into one node whose scripted worker performs exactly that
commit with the worker tools, as a model that obeys the brief would: ``move_file`` for a
rename (one call for a whole directory), ``delete_file`` for a deletion (one call for a whole
directory), ``write_file`` for new content. Where the firewall's fidelity rules would keep a
convention the commit changes (CRLF to LF, adding a final newline), the worker deletes the file
and writes it anew, as the README documents.
"""

from __future__ import annotations

import os
import subprocess
from itertools import pairwise
from pathlib import Path, PurePosixPath
from typing import Any

from .conftest import GIT_ENV

# A step: path -> new text/bytes, None to delete; ("mv", old, new) renames; ("chmod", p, mode).
Step = dict[str, Any]


def git(repo: Path, *args: str, binary: bool = False) -> Any:
    proc = subprocess.run(
        ["git", "-c", "core.hooksPath=/dev/null", *args],
        cwd=repo,
        env={**os.environ, **GIT_ENV},
        capture_output=True,
        check=True,
    )
    return proc.stdout if binary else proc.stdout.decode().strip()


def build_history(repo: Path, steps: list[tuple[str, Step, list[tuple[str, str]]]]) -> list[str]:
    """Commit each step (message, files, renames); returns the commit ids, oldest first."""
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    commits = []
    for message, files, renames in steps:
        for old, new in renames:
            (repo / new).parent.mkdir(parents=True, exist_ok=True)
            git(repo, "mv", old, new)
        for rel, value in files.items():
            path = repo / rel
            if value is None:
                git(repo, "rm", "-q", "-r", rel)
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(value, tuple):  # (content, mode)
                value, mode = value
            else:
                mode = None
            if isinstance(value, str):
                value = value.encode()
            path.write_bytes(value)
            if mode is not None:
                path.chmod(mode)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", message)
        commits.append(git(repo, "rev-parse", "HEAD"))
    return commits


def _tree_files(repo: Path, commit: str) -> dict[str, str]:
    out = git(repo, "ls-tree", "-r", "-z", commit, binary=True).decode()
    files = {}
    for record in filter(None, out.split("\0")):
        meta, name = record.split("\t", 1)
        files[name] = meta.split()[0]
    return files


def _blob(repo: Path, commit: str, path: str) -> bytes:
    data: bytes = git(repo, "show", f"{commit}:{path}", binary=True)
    return data


def _name_status(repo: Path, parent: str, commit: str) -> list[list[str]]:
    out = git(repo, "diff", "-M", "--name-status", "-z", parent, commit, binary=True).decode()
    fields = out.split("\0")
    entries, i = [], 0
    while i < len(fields) - 1:
        status = fields[i]
        width = 3 if status[0] in "RC" else 2
        entries.append(fields[i : i + width])
        i += width
    return entries


def _dir_of_group(paths: list[str], tree: dict[str, str]) -> str | None:
    """The shallowest directory all of whose files in ``tree`` are exactly ``paths``."""
    for parent in sorted({str(PurePosixPath(p).parent) for p in paths}, key=len):
        candidates = [parent]
        candidates += [str(a) for a in PurePosixPath(parent).parents if str(a) != "."]
        for d in sorted(candidates, key=len):
            under = {f for f in tree if f.startswith(d + "/")}
            if under and under == set(paths):
                return d
    return None


def commit_turns(repo: Path, parent: str, commit: str) -> tuple[list[Any], list[str]]:
    """The tool calls that perform ``commit`` on top of ``parent``, and the paths they touch."""
    before, after = _tree_files(repo, parent), _tree_files(repo, commit)
    entries = _name_status(repo, parent, commit)
    renames = [e for e in entries if e[0].startswith("R")]
    deletes = [e[1] for e in entries if e[0] == "D"]
    calls = _rename_calls(repo, parent, commit, renames, before, after)
    calls += _delete_calls(deletes, before, after)
    touched = [path for _, old, new in renames for path in (old, new)] + deletes
    for entry in entries:
        status, path = entry[0], entry[-1]
        if status == "A":
            calls += _write(repo, commit, path, None, None, after[path])
        elif status == "M":
            calls += _write(
                repo, commit, path, _blob(repo, parent, path), before[path], after[path]
            )
        elif status not in ("D",) and not status.startswith("R"):
            raise ValueError(f"replay cannot express {status} {path}")
        if status in ("A", "M"):
            touched.append(path)
    return calls, sorted(set(touched))


def _rename_calls(
    repo: Path,
    parent: str,
    commit: str,
    renames: list[list[str]],
    before: dict[str, str],
    after: dict[str, str],
) -> list[Any]:
    """Moves (one per directory moved whole, else one per file), then the edits of the renamed
    files whose content changed too."""
    calls: list[Any] = []
    pure = [(old, new) for s, old, new in renames if s == "R100"]
    moved_dir = _directory_move(pure, before)
    if moved_dir is not None:
        calls.append({"tool": "move_file", "args": moved_dir})
    handled = {old for old, _ in pure} if moved_dir is not None else set()
    for status, old, new in renames:
        if old not in handled:
            calls.append({"tool": "move_file", "args": {"source": old, "destination": new}})
        if status != "R100":
            calls += _write(repo, commit, new, _blob(repo, parent, old), before[old], after[new])
    return calls


def _directory_move(pure: list[tuple[str, str]], before: dict[str, str]) -> dict[str, str] | None:
    """The move_file arguments when every file of one directory moved under one new name."""
    olds = [old for old, _ in pure]
    src_dir = _dir_of_group(olds, before) if olds else None
    if src_dir is None:
        return None
    news = {new for _, new in pure}
    dst_dir = os.path.commonpath(list(news)) if len(news) > 1 else None
    if dst_dir and all(new == dst_dir + old[len(src_dir) :] for old, new in pure):
        return {"source": src_dir, "destination": dst_dir}
    return None


def _delete_calls(deletes: list[str], before: dict[str, str], after: dict[str, str]) -> list[Any]:
    """One delete of a directory that went whole, else one delete per file."""
    gone = _dir_of_group(deletes, before) if len(deletes) > 1 else None
    if gone is not None and not any(f.startswith(gone + "/") for f in after):
        return [{"tool": "delete_file", "args": {"path": gone + "/"}}]
    return [{"tool": "delete_file", "args": {"path": p}} for p in deletes]


def _write(
    repo: Path, commit: str, path: str, old: bytes | None, old_mode: str | None, new_mode: str
) -> list[Any]:
    new = _blob(repo, commit, path).decode("utf-8")  # binaries can only be moved or deleted
    if old is None:
        if new_mode != "100644":
            raise ValueError(f"replay cannot create {path} with mode {new_mode}")
        return [{"tool": "write_file", "args": {"path": path, "content": new}}]
    if old_mode != new_mode:
        raise ValueError(f"replay cannot change the mode of {path}")
    before = old.decode("utf-8")
    if _crlf(before) == _crlf(new) and _final(before) == _final(new):
        # What a model writes: \n line breaks and a final newline. The firewall's documented
        # rules (README "File fidelity") must turn that back into the exact new bytes.
        text = new.replace("\r\n", "\n") if _crlf(new) else new
        return [
            {
                "tool": "write_file",
                "args": {"path": path, "content": text + "\n" * (not _final(new))},
            }
        ]
    if new_mode != "100644":
        raise ValueError(f"replay cannot change the conventions of executable {path}")
    # The commit changes a convention the firewall keeps: write the file anew.
    return [
        {"tool": "delete_file", "args": {"path": path}},
        {"tool": "write_file", "args": {"path": path, "content": new}},
    ]


def _crlf(text: str) -> bool:
    return "\n" in text and text.count("\r\n") == text.count("\n")


def _final(text: str) -> bool:
    return text.endswith("\n") or not text


def _scope_entry(path: str, base_dirs: set[str]) -> str:
    """``path``, or the first directory on its way that the base lacks (as ``dir/``).

    Plan validation wants a new file's directory to exist in the checkout; a directory entry
    whose parent exists covers everything created below it.
    """
    parts = path.split("/")
    for k in range(1, len(parts)):
        prefix = "/".join(parts[:k])
        if prefix not in base_dirs:
            return prefix + "/"
    return path


def replay_inputs(repo: Path, commits: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A plan (one node per commit after the first, in a chain) and the script replaying it.

    Validate it against a checkout of the first commit (scopes are checked on disk).
    """
    base_dirs = {str(d) for f in _tree_files(repo, commits[0]) for d in PurePosixPath(f).parents}
    tasks, workers = [], {}
    for i, (parent, commit) in enumerate(pairwise(commits), start=1):
        calls, touched = commit_turns(repo, parent, commit)
        touched = sorted({_scope_entry(p, base_dirs) for p in touched})
        task_id = f"c{i}"
        tasks.append(
            {
                "task_id": task_id,
                "name": git(repo, "log", "-1", "--format=%s", commit),
                "goal": f"Perform commit {commit[:12]}",
                "dependencies": [f"c{i - 1}"] if i > 1 else [],
                "read_scope": [],
                "write_scope": touched,
                "token_budget": 200_000,
                "max_tool_calls": len(calls) + 2,
            }
        )
        workers[task_id] = [*calls, {"tool": "finish", "args": {"summary": f"replayed {i}"}}]
    plan = {"plan_id": "replay", "requirement": "Replay the history", "tasks": tasks}
    return plan, {"workers": workers}
