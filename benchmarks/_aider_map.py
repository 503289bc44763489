"""Aider's repository map on one tree, for ``repomap_history.py`` (run in Aider's own venv).

Not a benchmark itself (``make bench`` skips ``_*.py``) and it imports nothing of ours but the
offline token counter (``anti_sprawl/tokens.py``, stdlib and tiktoken only): it runs under the
Python of a separate virtual environment with ``aider-chat`` installed
(``python -m venv /tmp/aider && /tmp/aider/bin/pip install aider-chat``), reads one JSON
request on stdin (``root``, ``files``, ``message``, ``budgets``) and writes one JSON answer:
the files in Aider's rank order, the map text at each budget and the seconds each took.
Fairness: no chat files (as our planner map has none) with ``map_mul_no_files=1``, so the
budget is the budget; mentioned identifiers and file names from the message the way Aider's
coder finds them; a cold tag cache (a fresh tree per commit); tokens counted with cl100k, as
ours are.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

from aider.repomap import RepoMap

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from anti_sprawl.tokens import count_tokens


class _Model:
    def token_count(self, text: str) -> int:
        return count_tokens(text)


class _Quiet:
    """The parts of Aider's InputOutput the repository map calls."""

    def read_text(self, fname: str) -> str | None:
        try:
            return Path(fname).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None

    def tool_output(self, *args: object, **kwargs: object) -> None:
        pass

    tool_warning = tool_error = tool_output


def main() -> None:
    request = json.load(sys.stdin)
    root = Path(request["root"])
    files = [str(root / f) for f in request["files"]]
    message = request["message"]
    idents = set(re.split(r"\W+", message)) - {""}  # Coder.get_ident_mentions
    words = set(re.split(r"[\s,;:'\"`()]+", message))
    fnames = {
        f for f in request["files"] if f in words or (Path(f).name in words and "." in Path(f).name)
    }  # Coder.get_file_mentions, roughly: full paths and unique-looking base names
    answer: dict[str, object] = {"maps": {}, "seconds": {}}
    for budget in request["budgets"]:
        repo_map = RepoMap(map_tokens=budget, root=str(root), main_model=_Model(), io=_Quiet(),
                           map_mul_no_files=1, refresh="always")  # fmt: skip
        start = time.perf_counter()
        text = repo_map.get_repo_map([], files, fnames, idents) or ""
        answer["seconds"][str(budget)] = time.perf_counter() - start  # type: ignore[index]
        answer["maps"][str(budget)] = text  # type: ignore[index]
        if "ranked" not in answer:
            tags = repo_map.get_ranked_tags([], files, fnames, idents)
            order: dict[str, None] = {}
            for tag in tags:
                order.setdefault(tag[0] if len(tag) == 1 else tag.rel_fname, None)
            answer["ranked"] = [str(Path(f)) for f in order]
    json.dump(answer, sys.stdout)


if __name__ == "__main__":
    main()
