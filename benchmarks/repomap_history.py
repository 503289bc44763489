"""The planner's map on real histories: does it put the files a commit changed near the top?

Each commit that modified 1-3 existing source files (``history_context.nodes``: not tests,
docs, examples or build scripts) becomes a query: the commit message is the requirement,
the tree at its parent commit (unpacked with ``git archive``) the repository. Per project
and method: the share of commits whose changed files are all in the top 10 (``all@10``), the
mean share of changed files in the top 10 (``recall@10``), the median rank of the best-ranked
changed file, and the share of changed files whose definitions a 6k map shows (``defs@6k``);
for the map builders, the median seconds of a 4k map, cold. ``--ablation`` adds our map with
each of its signals off (``-symbols``, ``-no_docstrings``, ``-compact_tree``, ``-prior``,
``-text_words``; see ``repomap.map.MapSignals``) and with all of them off (``-all``: the map
before issue 27, but for the rules that are not switches: a directory word shared by its
files, no prior for stubs, no outline over a quarter of the room).

Methods, same trees, same message, same run: ours (``planner.repomap.build_repo_map``); a
lexical baseline (BM25 of the message's words over each file's path and identifiers, split on
case and underscores); Aider's ``RepoMap`` when ``--aider-python`` names the Python of a venv
with ``aider-chat`` installed (``_aider_map.py`` says how it is kept fair). Projects are git
repositories given with ``--repo`` (e.g. clones of attrs, click and httpx; default: this one). Figures are
measured in the run; nothing is asserted. Run: ``.venv/bin/python
benchmarks/repomap_history.py --repo ../attrs ../click ../httpx [--nodes 20]
[--aider-python /tmp/aider/bin/python]``.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from history_context import git, nodes

from anti_sprawl.planner.repomap.map import MapSignals, build_repo_map
from anti_sprawl.planner.repomap.ranking import split_words

BUDGETS = (4_000, 6_000)
TOP = 10
_AIDER = Path(__file__).resolve().with_name("_aider_map.py")


@dataclass
class Result:
    """One method's answer for one commit."""

    ranked: list[str]
    defs: set[str] = field(default_factory=set)  # files whose definitions the 6k map shows
    seconds: float | None = None


@dataclass
class Score:
    all10: list[bool] = field(default_factory=list)
    recall10: list[float] = field(default_factory=list)
    best: list[int] = field(default_factory=list)
    defs: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)

    def add(self, result: Result, changed: list[str]) -> None:
        rank = {f: i + 1 for i, f in enumerate(result.ranked)}
        ranks = [rank.get(f, len(rank) + 1) for f in changed]
        self.all10.append(all(r <= TOP for r in ranks))
        self.recall10.append(sum(r <= TOP for r in ranks) / len(ranks))
        self.best.append(min(ranks))
        self.defs.append(sum(f in result.defs for f in changed) / len(changed))
        if result.seconds is not None:
            self.seconds.append(result.seconds)


def unpack(repo: Path, commit: str, dest: Path) -> list[str]:
    """The tree of ``commit`` written to ``dest``; its file paths."""
    archive = subprocess.run(["git", "-C", str(repo), "archive", commit], capture_output=True,
                             check=True).stdout  # fmt: skip
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")
    return [f for f in git(repo, "ls-tree", "-r", "--name-only", commit).splitlines() if f]


def ours(root: Path, message: str, signals: MapSignals = MapSignals()) -> Result:
    start = time.perf_counter()
    small = build_repo_map(root, message, token_budget=BUDGETS[0], signals=signals)
    seconds = time.perf_counter() - start
    big = build_repo_map(root, message, token_budget=BUDGETS[1], signals=signals)
    return Result([f for f, _ in small.ranked], set(big.included_outlines), seconds)


def lexical(root: Path, files: list[str], message: str) -> Result:
    """BM25 (k1 1.2, b 0.75) of the message's words over each file's path and identifiers."""
    query = set(split_words(message))
    docs: dict[str, Counter[str]] = {}
    for f in files:
        try:
            text = (root / f).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            text = ""
        docs[f] = Counter(split_words(f.replace("/", " ") + " " + text))
    n = len(docs) or 1
    avg = sum(sum(d.values()) for d in docs.values()) / n or 1.0
    df = Counter(w for d in docs.values() for w in query if w in d)
    idf = {w: math.log(1 + (n - df[w] + 0.5) / (df[w] + 0.5)) for w in query}

    def score(d: Counter[str]) -> float:
        size = sum(d.values())
        return sum(idf[w] * d[w] * 2.2 / (d[w] + 1.2 * (0.25 + 0.75 * size / avg))
                   for w in query if d[w])  # fmt: skip

    return Result(sorted(files, key=lambda f: (-score(docs[f]), f)))


def aider(python: str, root: Path, files: list[str], message: str) -> Result:
    request = {"root": str(root), "files": files, "message": message, "budgets": list(BUDGETS)}
    out = subprocess.run([python, str(_AIDER)], input=json.dumps(request), capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    answer = json.loads(out)
    ranked = list(answer["ranked"]) + [f for f in files if f not in set(answer["ranked"])]
    text = answer["maps"][str(BUDGETS[1])]
    return Result(ranked, {f for f in files if _aider_defines(text, f)},
                  answer["seconds"][str(BUDGETS[0])])  # fmt: skip


def _aider_defines(text: str, path: str) -> bool:
    """Whether Aider's map shows a definition line under ``path``'s heading."""
    start = text.find(f"\n{path}:\n")
    if start < 0:
        return False
    section = text[start + len(path) + 3 :].split("\n\n", 1)[0]
    return any(w in section for w in ("def ", "class "))


ABLATIONS = {f"-{name}": MapSignals()._replace(**{name: False}) for name in MapSignals._fields}
ABLATIONS["-all"] = MapSignals(*(False for _ in MapSignals._fields))


def project(
    repo: Path, n_nodes: int, commits: int, aider_python: str | None, ablation: bool
) -> dict[str, Score]:
    scores: dict[str, Score] = {"ours": Score(), "lexical": Score()}
    if aider_python:
        scores["aider"] = Score()
    if ablation:
        scores.update({name: Score() for name in ABLATIONS})
    for parent, _, changed, message in nodes(repo, commits, False, False)[:n_nodes]:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "tree"
            files = unpack(repo, parent, root)
            scores["ours"].add(ours(root, message), changed)
            scores["lexical"].add(lexical(root, files, message), changed)
            if aider_python:
                scores["aider"].add(aider(aider_python, root, files, message), changed)
            for name, signals in ABLATIONS.items() if ablation else ():
                scores[name].add(ours(root, message, signals), changed)
    return scores


def report(name: str, scores: dict[str, Score]) -> None:
    med = statistics.median
    for method, s in scores.items():
        if not s.best:
            continue
        speed = f"{med(s.seconds):6.2f} s" if s.seconds else "       -"
        print(f"{name:<10}{method:<9}{len(s.best):>6}{sum(s.all10) / len(s.all10):>8.2f}"
              f"{statistics.mean(s.recall10):>11.2f}{med(s.best):>7.1f}"
              f"{statistics.mean(s.defs):>9.2f}  {speed}")  # fmt: skip
    if "aider" in scores and scores["aider"].seconds and scores["ours"].seconds:
        ratio = med(scores["aider"].seconds) / med(scores["ours"].seconds)
        print(f"{name:<10}4k map build: ours {ratio:.1f}x faster than Aider's (medians)")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--repo", type=Path, nargs="+", default=[Path(__file__).resolve().parent.parent],
                        help="git repositories (default: this one)")  # fmt: skip
    parser.add_argument("--nodes", type=int, default=20, help="commits per project (20)")
    parser.add_argument("--commits", type=int, default=400, help="history searched (400)")
    parser.add_argument("--aider-python", help="Python of a venv with aider-chat installed")
    parser.add_argument("--ablation", action="store_true", help="ours with each signal off")
    args = parser.parse_args()
    print(f"{'project':<10}{'method':<9}{'nodes':>6}{'all@10':>8}{'recall@10':>11}"
          f"{'rank':>7}{'defs@6k':>9}  4k build")  # fmt: skip
    for repo in args.repo:
        report(repo.name, project(repo, args.nodes, args.commits, args.aider_python, args.ablation))


if __name__ == "__main__":
    main()
