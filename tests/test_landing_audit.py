"""The central re-audit of a node commit that came back from a Dask worker, fed hostile bundles.

The "worker" here is a clone of the repository where the attacker commits whatever it likes
and bundles it the way a worker does (``transport.make_bundle``). Nothing it sends may reach a
branch unless it is one in-scope, secret-free commit on the node's base.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from anti_sprawl.git.landing_audit import QUARANTINE_PREFIX, ResultRefused, rebuild, receive_checked
from anti_sprawl.git.transport import (
    BundleChain,
    CacheRepo,
    make_bundle,
    parse_header,
    repo_identity,
)
from anti_sprawl.redact import Redactor

from . import e2e_fixture as fx
from .conftest import GIT_ENV

RUN, TASK = "demo-run", "a"


def _git(repo: Path, *args: str, stdin: bytes | None = None) -> str:
    env = {**GIT_ENV, "PATH": "/usr/bin:/bin", "HOME": str(repo.parent)}
    out = subprocess.run(
        ["git", *args], cwd=repo, env=env, input=stdin, capture_output=True, check=True
    )
    return out.stdout.decode().strip()


@pytest.fixture
def repos(tmp_path: Path) -> tuple[Path, Path, str]:
    """(the user's repository, the attacker's clone, the node's base)."""
    repo = fx.make_repo(tmp_path)
    worker = tmp_path / "worker"
    subprocess.run(["git", "clone", "-q", str(repo), str(worker)], check=True)
    return repo, worker, _git(repo, "rev-parse", "HEAD")


def _commit(worker: Path, files: dict[str, str], message: str = "work") -> str:
    for rel, text in files.items():
        path = worker / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    _git(worker, "add", "-A")
    _git(worker, "commit", "-q", "--allow-empty", "-m", message)
    return _git(worker, "rev-parse", "HEAD")


def _receive(repo: Path, bundle: bytes, base: str, scope: list[str] | None = None) -> str:
    return receive_checked(
        repo,
        bundle,
        base=base,
        write_scope=scope or ["pkg/a.py"],
        redactor=Redactor(["central-only-value-0123456789"]),
    ).commit


def _refused(
    repo: Path, bundle: bytes, base: str, why: str, scope: list[str] | None = None
) -> None:
    branches = _git(repo, "for-each-ref")
    with pytest.raises(ResultRefused, match=why):
        _receive(repo, bundle, base, scope)
    assert _git(repo, "for-each-ref") == branches  # no quarantine ref, no branch moved
    assert QUARANTINE_PREFIX not in _git(repo, "for-each-ref")


def test_an_in_scope_commit_is_accepted_and_rebuilt_with_our_message(repos: tuple) -> None:
    repo, worker, base = repos
    sha = _commit(worker, {"pkg/a.py": "A = 1\n"}, "Anti-Sprawl-Task: b\n\nclaims another node")
    got = _receive(repo, make_bundle(worker, sha, [base])[0], base)
    assert got == sha
    new = rebuild(repo, got, base, "Write a", {"Anti-Sprawl-Task": TASK}, run_id=RUN, task_id=TASK)
    assert _git(repo, "rev-parse", f"{new}^") == base
    assert _git(repo, "log", "-1", "--format=%B", new) == "Write a\n\nAnti-Sprawl-Task: a"
    assert _git(repo, "rev-parse", f"{new}^{{tree}}") == _git(repo, "rev-parse", f"{sha}^{{tree}}")


def test_an_out_of_scope_change_is_refused(repos: tuple) -> None:
    repo, worker, base = repos
    sha = _commit(worker, {"pkg/a.py": "A = 1\n", "pkg/util.py": "def helper(): return 3\n"})
    _refused(repo, make_bundle(worker, sha, [base])[0], base, "pkg/util.py")


@pytest.mark.parametrize(
    "change",
    [
        ["rm", "-q", "README.md"],
        ["update-index", "--chmod=+x", "README.md"],
        ["mv", "README.md", "pkg/a.py"],
    ],
    ids=["delete", "mode", "rename"],
)
def test_deletes_modes_and_renames_out_of_scope_are_refused(repos: tuple, change: list) -> None:
    repo, worker, base = repos
    _git(worker, *change)
    _git(worker, "commit", "-q", "-m", "tamper")
    sha = _git(worker, "rev-parse", "HEAD")
    _refused(repo, make_bundle(worker, sha, [base])[0], base, "README.md")


def test_a_secret_known_only_to_the_central_process_is_refused(repos: tuple) -> None:
    repo, worker, base = repos
    sha = _commit(worker, {"pkg/a.py": "TOKEN = 'central-only-value-0123456789'\n"})
    _refused(repo, make_bundle(worker, sha, [base])[0], base, "secret")


def test_a_secret_shape_is_refused(repos: tuple) -> None:
    repo, worker, base = repos
    sha = _commit(worker, {"pkg/a.py": "KEY = 'AKIAIOSFODNN7EXAMPLE'\n"})
    _refused(repo, make_bundle(worker, sha, [base])[0], base, "aws-access-key in pkg/a.py")


def test_two_commits_are_refused(repos: tuple) -> None:
    repo, worker, base = repos
    _commit(worker, {"pkg/a.py": "A = 0\n"})
    sha = _commit(worker, {"pkg/a.py": "A = 1\n"})
    _refused(repo, make_bundle(worker, sha, [base])[0], base, "parents")


def test_a_commit_on_another_parent_is_refused(repos: tuple) -> None:
    repo, worker, _ = repos
    first = _commit(worker, {"README.md": "# changed\n"})  # a commit the central never saw
    _git(repo, "fetch", "-q", str(worker), f"{first}:refs/heads/elsewhere")
    sha = _commit(worker, {"pkg/a.py": "A = 1\n"})
    base = _git(repo, "rev-parse", "main")
    # Bundled against the commit it really sits on: it needs a prerequisite besides the base.
    _refused(repo, make_bundle(worker, sha, [first])[0], base, "other than the node's base")
    # Bundled against the base: the parent check catches it.
    _refused(repo, make_bundle(worker, sha, [base])[0], base, "parents")


@pytest.mark.parametrize("target", ["../README.md", "/etc/passwd", "../../outside"])
def test_a_symlink_out_of_scope_is_refused(repos: tuple, target: str) -> None:
    repo, worker, base = repos
    (worker / "pkg" / "a.py").symlink_to(target)
    _git(worker, "add", "-A")
    _git(worker, "commit", "-q", "-m", "link")
    sha = _git(worker, "rev-parse", "HEAD")
    _refused(repo, make_bundle(worker, sha, [base])[0], base, "symlink")


@pytest.mark.parametrize("path", [".gitmodules", "keys/id_rsa", ".env", ".anti-sprawl/x"])
def test_internal_and_secret_names_are_refused_even_in_scope(repos: tuple, path: str) -> None:
    repo, worker, base = repos
    blob = _git(worker, "hash-object", "-w", "--stdin", stdin=b"x\n")
    _git(worker, "update-index", "--add", "--cacheinfo", f"100644,{blob},{path}")
    _git(worker, "commit", "-q", "-m", "internal")
    sha = _git(worker, "rev-parse", "HEAD")
    _refused(repo, make_bundle(worker, sha, [base])[0], base, "outside", scope=["**"])


def test_a_nested_repository_is_refused(repos: tuple) -> None:
    repo, worker, base = repos
    _git(worker, "update-index", "--add", "--cacheinfo", f"160000,{base},pkg/a.py")
    _git(worker, "commit", "-q", "-m", "gitlink")
    sha = _git(worker, "rev-parse", "HEAD")
    _refused(repo, make_bundle(worker, sha, [base])[0], base, "nested repository")


def test_bundles_that_are_not_one_ref_or_not_bundles_are_refused(repos: tuple) -> None:
    repo, worker, base = repos
    sha = _commit(worker, {"pkg/a.py": "A = 1\n"})
    data = make_bundle(worker, sha, [base])[0]
    end = data.index(b"\n\n")
    two_refs = data[:end] + f"\n{sha} refs/heads/main".encode() + data[end:]
    _refused(repo, two_refs, base, "one ref")
    with pytest.raises(Exception, match="bundle"):
        _receive(repo, b"PK\x03\x04 not a bundle", base)
    corrupt = data[: len(data) - 30] + b"\0" * 30
    _refused(repo, corrupt, base, "unpack")


def test_a_malformed_object_is_refused(repos: tuple) -> None:
    """git's object checks run on what comes back: a commit with a malformed date, on the base
    and changing nothing, which a ``git fetch`` of the bundle accepted (git 2.39 runs its
    ``index-pack`` without ``--strict`` whatever ``fetch.fsckObjects`` says)."""
    repo, worker, base = repos
    tree = _git(worker, "rev-parse", f"{base}^{{tree}}")
    text = f"tree {tree}\nparent {base}\nauthor a <a@b> notadate\ncommitter c <c@d> 1 +0000\n\nx\n"
    hashed = ["hash-object", "-t", "commit", "-w", "--literally", "--stdin"]
    sha = _git(worker, *hashed, stdin=text.encode())
    _refused(repo, make_bundle(worker, sha, [base])[0], base, "unpack")


def test_bundle_chain_sends_each_tip_once_and_a_cache_clone_fetches_only_what_it_lacks(
    repos: tuple, tmp_path: Path
) -> None:
    repo, worker, base = repos
    published: dict[str, bytes] = {}

    def publish(data: bytes) -> str:
        published[f"k{len(published)}"] = data
        return f"k{len(published) - 1}"

    chain = BundleChain(repo, publish)
    first = chain.chain_for(base)
    assert chain.chain_for(base) == first
    assert len(published) == 1
    assert parse_header(published["k0"]).prerequisites == ()
    tip = _commit(worker, {"pkg/a.py": "A = 1\n"})
    _git(repo, "fetch", "-q", str(worker), f"{tip}:refs/heads/run")
    second = chain.chain_for(tip)
    assert [b.tip for b in second] == [base, tip]
    assert second[-1].prerequisites == (base,)  # an increment: base is not sent again
    fetched: list[str] = []

    def fetch(key: str) -> bytes:
        fetched.append(key)
        return published[key]

    cache = CacheRepo(tmp_path / "cache", repo_identity(repo, base))
    assert cache.materialize(first, fetch) == first[0].size
    assert cache.materialize(second, fetch) == second[-1].size  # only the increment
    assert fetched == ["k0", "k1"]
    assert cache.materialize(second, fetch) == 0
    assert fetched == ["k0", "k1"]
    fresh = CacheRepo(tmp_path / "other", repo_identity(repo, base))
    assert fresh.materialize(second, fetch) == first[0].size + second[-1].size
    result = fresh.bundle_commit(tip, base)
    assert parse_header(result).prerequisites == (base,)


def test_a_node_starts_from_the_newest_bundled_tip_that_holds_its_dependencies(
    repos: tuple,
) -> None:
    """Issue 29: a remote node whose dependencies an earlier bundle holds starts from that
    bundle's tip (no new bundle for every landing); else from the tip asked for."""
    repo, worker, base = repos
    published: list[bytes] = []

    def publish(data: bytes) -> str:
        published.append(data)
        return f"k{len(published) - 1}"

    chain = BundleChain(repo, publish)
    assert chain.chain_from(base, ())[0] == base  # nothing bundled yet: the tip itself
    a = _commit(worker, {"pkg/a.py": "A = 1\n"})
    b = _commit(worker, {"pkg/b.py": "B = 1\n"})
    _git(repo, "fetch", "-q", str(worker), f"{b}:refs/heads/run")
    assert chain.chain_from(a, ())[0] == base  # no dependency: base's bundle will do
    assert chain.chain_from(a, (a,))[0] == a  # a dependency landed as a: bundled now
    c = _commit(worker, {"pkg/c.py": "C = 1\n"})
    _git(repo, "fetch", "-q", str(worker), f"{c}:refs/heads/run")
    made = len(published)
    # no dependency, or only a: a's bundle will do, whatever the tip is now
    assert chain.chain_from(c, ()) == (a, chain.chain_for(a))
    assert chain.chain_from(c, (a,))[0] == a
    assert chain.chain_from(c, (base,))[0] == a
    assert len(published) == made  # no bundle made for those
    # b is in no bundle yet: the node starts from the tip asked for, bundled now
    start, bundles = chain.chain_from(c, (a, b))
    assert start == c
    assert [x.tip for x in bundles] == [base, a, c]
    assert len(published) == made + 1
    # a commit not on the line (another history), or no needs given: the tip asked for
    stranger = _commit(worker, {"pkg/d.py": "D = 1\n"})
    assert chain.chain_from(b, (stranger,))[0] == b
    assert chain.chain_from(c, None)[0] == c
