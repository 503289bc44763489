"""A stand-in for ``gh`` with the state of one GitHub issue, for the GitHub Action's tests.

Installed as an executable ``gh`` on PATH (``install``), it appends each call's argv (JSON, one
line) to ``calls.jsonl`` and answers the calls cli/github_flow.py and cli/pr.py make: the
issue's comments (kept in ``comments.json``: list, create, edit), a collaborator's permission
(``permissions.json``), ``auth status`` and ``pr create`` (prints a PR URL).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

BOT = "github-actions[bot]"
PR_URL = "https://github.example/o/r/pull/7"


def install(bindir: Path, state: Path, permissions: dict[str, str]) -> None:
    """Write ``bindir/gh`` (this file run by this interpreter) and its state in ``state``."""
    state.mkdir(parents=True, exist_ok=True)
    (state / "comments.json").write_text("[]")
    (state / "permissions.json").write_text(json.dumps(permissions))
    gh = bindir / "gh"
    gh.write_text(f"#!/bin/sh\nexec '{sys.executable}' '{Path(__file__)}' '{state}' \"$@\"\n")
    gh.chmod(0o755)


def calls(state: Path) -> list[list[str]]:
    path = state / "calls.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def comments(state: Path) -> list[dict[str, Any]]:
    return list(json.loads((state / "comments.json").read_text()))


def set_comments(state: Path, items: list[dict[str, Any]]) -> None:
    (state / "comments.json").write_text(json.dumps(items))


def _api(state: Path, args: list[str]) -> int:
    method = args[args.index("-X") + 1] if "-X" in args else "GET"
    path = next(a for a in args if a.startswith("repos/"))
    items = comments(state)
    if path.endswith("/permission"):
        login = path.split("/")[-2]
        print(json.loads((state / "permissions.json").read_text()).get(login, "none"))
        return 0
    if method == "GET" and path.endswith("/comments"):
        for item in items:  # what `--jq '.[] | {id, user, body}'` prints: one object a line
            print(json.dumps({"id": item["id"], "user": item["user"], "body": item["body"]}))
        return 0
    body = json.loads(sys.stdin.read())["body"]
    if method == "POST":
        items.append({"id": 100 + len(items), "user": BOT, "body": body})
    elif method == "PATCH":
        wanted = int(path.rsplit("/", 1)[1])
        for item in items:
            if item["id"] == wanted:
                item["body"] = body
    set_comments(state, items)
    print("{}")
    return 0


def main(argv: list[str]) -> int:
    state, args = Path(argv[0]), argv[1:]
    with (state / "calls.jsonl").open("a") as fh:
        fh.write(json.dumps(args) + "\n")
    if args[:2] == ["auth", "status"]:
        return 0
    if args[:2] == ["pr", "create"]:
        print(PR_URL)
        return 0
    if args[:1] == ["api"]:
        return _api(state, args[1:])
    print(f"fake gh: unknown call {args}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
