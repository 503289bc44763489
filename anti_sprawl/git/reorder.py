"""The run branch's node commits put in a given order, in a constant number of git processes.

Nodes land as they finish (run/scheduler.py), so the branch's history follows the order they
happened to finish in. ``reorder`` rewrites it into the order the caller gives (the plan's
topological order, run/branch_order.py), so the branch, and which commit the integration
check's bisection blames, are the same however the nodes' timings fell. Commits already in
place (the longest prefix in order) are kept as they are; each later one becomes a commit
with the same change (its diff against its parent), tree entries set in the new order, the
same message, author and committer, on the commit before it in the new order.

Two nodes can change places only when no path was changed by both (the DAG orders any two
that write the same file, and their order is kept): checked on the diffs before anything is
written, and the new tip's tree must equal the old tip's. Anything else leaves the branch as
it is (``OrderKept``, with why).

Processes, whatever the number of commits: ``log`` (which node each commit is), then only
when the order is off ``cat-file --batch`` (the commits), ``diff-tree --stdin`` (their changes),
one ``fast-import`` (the new commits, onto a scratch ref), ``rev-parse`` (the new tree) and one
``update-ref --stdin`` transaction that moves the branch by compare-and-swap and deletes the
scratch ref. Until that last step the branch is untouched: a crash before it loses nothing
(the scratch ref is overwritten by the next reorder).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import RunError
from .branch import RunBranch
from .cmd import run_git
from .replay import NodeCommit, node_commits

__all__ = ["OrderKept", "Reordered", "reorder", "scratch_ref"]

_ZERO_MODE = b"000000"
# Headers a commit may have for fast-import to make the same commit with new parents and tree
# (a signature, a message encoding or a merge tag could not be carried over).
_PLAIN_HEADERS = (b"tree", b"parent", b"author", b"committer")


class OrderKept(RunError):
    """The branch cannot be put in the order asked for; it is left as it is."""


@dataclass(frozen=True)
class Reordered:
    """The branch after ``reorder``: its tip, and task -> its commit there (moved ones only)."""

    tip: str
    moved: dict[str, str] = field(default_factory=dict)


@dataclass
class _Commit:
    sha: str
    task_id: str
    tree: bytes = b""
    author: bytes = b""
    committer: bytes = b""
    message: bytes = b""
    deleted: list[bytes] = field(default_factory=list)
    set: list[tuple[bytes, bytes, bytes]] = field(default_factory=list)  # (mode, blob, path)

    @property
    def paths(self) -> list[bytes]:
        return [*self.deleted, *(path for _, _, path in self.set)]


def scratch_ref(branch: str) -> str:
    """Where ``fast-import`` writes the reordered commits of branch ``branch`` before it is
    moved (a kill in between leaves it: the next reorder or ``clean`` deletes it)."""
    return f"refs/anti-sprawl/reorder/{branch}"


def reorder(
    branch: RunBranch,
    base: str,
    order: Sequence[str],
    before_move: Callable[[], None] | None = None,
) -> Reordered:
    """Put ``branch``'s commits after ``base`` (one per node, first-parent) in ``order`` (task
    ids; every node on the branch must be in it). ``before_move`` is called once the new
    commits exist, before the branch moves (the crash tests' point). Raises ``OrderKept``
    when the commits cannot trade places, ``GitError``/``BranchCheckedOut`` as moving does;
    in every case the branch is left as it was."""
    repo = branch.repo
    tip = branch.tip()
    commits = node_commits(repo, base, tip, branch.run_id)
    rank = {task: i for i, task in enumerate(order)}
    tasks = [c.task_id for c in commits]
    strangers = [c.sha[:12] for c in commits if c.task_id not in rank]
    if strangers:
        raise OrderKept(f"commit {strangers[0]} is not one node's of this run")
    if len(set(tasks)) != len(tasks):
        raise OrderKept("a node has more than one commit on the branch")
    wanted = sorted(commits, key=lambda c: rank[c.task_id])
    pairs = enumerate(zip(commits, wanted, strict=True))
    start = next((i for i, (a, b) in pairs if a != b), len(commits))
    if start == len(commits):
        return Reordered(tip)
    onto = commits[start - 1].sha if start else base
    rest = _read(repo, commits[start:])
    _check_disjoint(rest, [rest[c.sha] for c in wanted[start:]])
    new_tip, moved = _write(
        repo, scratch_ref(branch.name), onto, [rest[c.sha] for c in wanted[start:]]
    )
    old_tree = rest[commits[-1].sha].tree.decode()
    new_tree = _text(run_git(["rev-parse", f"{new_tip}^{{tree}}"], repo).stdout)
    if new_tree != old_tree:
        run_git(["update-ref", "-d", scratch_ref(branch.name), new_tip], repo, check=False)
        raise OrderKept(
            f"the reordered tip's tree {new_tree[:12]} is not the tip's {old_tree[:12]}"
        )
    if before_move is not None:
        before_move()
    branch.move(new_tip, tip, scratch=scratch_ref(branch.name))
    return Reordered(new_tip, moved)


def _text(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape").strip()


def _read(repo: Path, commits: Sequence[NodeCommit]) -> dict[str, _Commit]:
    """Each commit's headers, message and change against its parent: two processes."""
    found = {c.sha: _Commit(c.sha, c.task_id) for c in commits}
    shas = "".join(f"{c.sha}\n" for c in commits).encode()
    out = run_git(["cat-file", "--batch"], repo, input_bytes=shas).stdout
    at = 0
    for commit in commits:
        try:
            header_end = out.index(b"\n", at)
            sha, kind, size = out[at:header_end].split(b" ")
            end = header_end + 1 + int(size)
        except ValueError:
            raise OrderKept(f"cat-file did not return commit {commit.sha[:12]}") from None
        if sha.decode() != commit.sha or kind != b"commit":
            raise OrderKept(f"git returned {kind.decode()} {sha.decode()[:12]} for a commit")
        _parse_commit(found[commit.sha], out[header_end + 1 : end])
        at = end + 1
    diff = run_git(
        ["diff-tree", "--stdin", "--always", "-r", "-z", "--no-renames", "--no-ext-diff"],
        repo,
        input_bytes=shas,
    ).stdout
    current: _Commit | None = None
    fields = diff.split(b"\0")
    i = 0
    while i < len(fields):
        item = fields[i]
        if item.startswith(b":"):
            if current is None or i + 1 >= len(fields):
                raise OrderKept("diff-tree output not understood")
            _, new_mode, _, blob, status = item[1:].split(b" ")
            path = fields[i + 1]
            if new_mode == _ZERO_MODE or status == b"D":
                current.deleted.append(path)
            else:
                current.set.append((new_mode, blob, path))
            i += 2
        else:
            if item:
                current = found.get(item.decode())
                if current is None:
                    raise OrderKept(f"diff-tree named {item.decode()[:12]}, not a branch commit")
            i += 1
    return found


def _parse_commit(commit: _Commit, body: bytes) -> None:
    headers, sep, message = body.partition(b"\n\n")
    if not sep:
        raise OrderKept(f"commit {commit.sha[:12]} has no message")
    parents = 0
    for line in headers.split(b"\n"):
        key, _, value = line.partition(b" ")
        if key not in _PLAIN_HEADERS:
            raise OrderKept(f"commit {commit.sha[:12]} carries a {key.decode()!r} header")
        if key == b"tree":
            commit.tree = value
        elif key == b"parent":
            parents += 1
        elif key == b"author":
            commit.author = value
        else:
            commit.committer = value
    if parents != 1:
        raise OrderKept(f"commit {commit.sha[:12]} has {parents} parents")
    commit.message = message


def _check_disjoint(old: dict[str, _Commit], new: list[_Commit]) -> None:
    """Every path is changed by the same commits in the same order before and after: then
    each commit's change, and the final tree, are what they were."""
    before: dict[bytes, list[str]] = {}
    for commit in old.values():  # the branch's order (dicts keep insertion order)
        for path in commit.paths:
            before.setdefault(path, []).append(commit.task_id)
    after: dict[bytes, list[str]] = {}
    for commit in new:
        for path in commit.paths:
            after.setdefault(path, []).append(commit.task_id)
    for path, tasks in before.items():
        if after[path] != tasks:
            shown = path.decode("utf-8", "replace")
            raise OrderKept(f"{' and '.join(tasks)} both changed {shown}, in the other order")


def _quoted(path: bytes) -> bytes:
    """A path in fast-import's C-style quotes (any path may be written so)."""
    out = bytearray(b'"')
    for byte in path:
        if byte in (0x22, 0x5C):
            out += b"\\" + bytes([byte])
        elif byte < 0x20 or byte >= 0x7F:
            out += b"\\%03o" % byte
        else:
            out.append(byte)
    return bytes(out + b'"')


def _write(repo: Path, ref: str, onto: str, commits: list[_Commit]) -> tuple[str, dict[str, str]]:
    """The commits, in this order, on ``onto``, written by one ``fast-import`` to ``ref``:
    (the last one's id, task -> its new commit)."""
    stream = bytearray()
    for mark, commit in enumerate(commits, start=1):
        stream += f"commit {ref}\nmark :{mark}\n".encode()
        stream += b"author " + commit.author + b"\ncommitter " + commit.committer + b"\n"
        stream += b"data %d\n" % len(commit.message) + commit.message + b"\n"
        stream += f"from {onto}\n".encode() if mark == 1 else f"from :{mark - 1}\n".encode()
        for path in commit.deleted:  # deletions first: a file may become a directory
            stream += b"D " + _quoted(path) + b"\n"
        for mode, blob, path in commit.set:
            stream += b"M " + mode + b" " + blob + b" " + _quoted(path) + b"\n"
        stream += b"\n"
    stream += b"done\n"
    with tempfile.TemporaryDirectory(prefix="anti-sprawl-reorder-") as tmp:
        marks = Path(tmp) / "marks"
        run_git(
            [
                "fast-import",
                "--quiet",
                "--done",
                "--force",
                "--date-format=raw",
                f"--export-marks={marks}",
            ],
            repo,
            input_bytes=bytes(stream),
        )
        by_mark = dict(line.split(" ", 1) for line in marks.read_text().split("\n") if line)
    moved = {c.task_id: by_mark[f":{i}"].strip() for i, c in enumerate(commits, start=1)}
    return moved[commits[-1].task_id], moved
