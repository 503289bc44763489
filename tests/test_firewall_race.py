"""Check-then-use races (docs/security.md F26, F27, P4) against a real concurrent swapper.

A separate process (true parallelism, no GIL) keeps swapping a path between a real entry
inside the workspace and a symlink to the outside directory, either atomically
(``renameat2(RENAME_EXCHANGE)``) or in steps that leave the name briefly missing. Meanwhile
the firewall reads, writes, lists and searches through that path in a loop. The outside
directory must never gain a file or change, and no canary byte may ever come back.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from anti_sprawl.fs.firewall import FirewallError
from tests.fw_layout import BACKENDS, CANARIES, Layout, backend_flag, build

ITERATIONS = 2000
SIDE_ITERATIONS = 300  # for the secondary operations, to keep the file fast

SWAPPER = r"""
import ctypes, os, sys
a, b, mode = sys.argv[1], sys.argv[2], sys.argv[3]
libc = ctypes.CDLL(None, use_errno=True)
if mode == "exchange":
    # RENAME_EXCHANGE = 2; check once that this filesystem supports it.
    if libc.renameat2(-100, os.fsencode(a), -100, os.fsencode(b), 2) != 0:
        sys.exit("renameat2: " + os.strerror(ctypes.get_errno()))
print("ready", flush=True)
while True:
    os.sched_yield()  # let the firewall's thread in between swaps on a busy machine
    if mode == "exchange":
        libc.renameat2(-100, os.fsencode(a), -100, os.fsencode(b), 2)
        continue
    # b is the symlink target; a is briefly missing, then a link out, then itself again.
    for step in (
        lambda: os.rename(a, a + ".aside"),
        lambda: os.symlink(b, a),
        lambda: os.unlink(a),
        lambda: os.rename(a + ".aside", a),
    ):
        try:
            step()
        except OSError:
            pass
"""


@pytest.fixture(params=BACKENDS)
def lay(request: pytest.FixtureRequest, tmp_path: Path) -> Layout:
    return build(tmp_path, use_openat2=backend_flag(request.param))


@contextmanager
def swapping(a: Path, b: Path | str, mode: str) -> Iterator[subprocess.Popen[str]]:
    """Run the swapper on ``a``/``b`` for the duration of the block."""
    proc = subprocess.Popen(
        [sys.executable, "-c", SWAPPER, str(a), str(b), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if line.strip() != "ready":
            _, err = proc.communicate()
            pytest.skip(f"swapper could not start: {err.strip()}")
        yield proc
        assert proc.poll() is None, "the swapper stopped early; the race was not exercised"
    finally:
        proc.kill()
        proc.communicate()


def _hammer(call: Callable[[int], object], n: int = ITERATIONS) -> tuple[list[object], int]:
    results: list[object] = []
    refusals: list[FirewallError] = []
    for i in range(n):
        try:
            results.append(call(i))
        except FirewallError as exc:
            refusals.append(exc)
    for refusal in refusals:  # a refusal never quotes what it refused to show
        assert not any(c in str(refusal) for c in CANARIES)
    return results, len(refusals)


def _no_canary(results: list[object]) -> None:
    for result in results:
        assert not any(c in str(result) for c in CANARIES), result


@pytest.mark.parametrize("mode", ["exchange", "steps"])
def test_f26_directory_swapped_for_a_link_while_writing(lay: Layout, mode: str) -> None:
    d = lay.repo / "src/app/d"
    d.mkdir()
    (d / "f").write_text("start\n")
    if mode == "exchange":
        other: Path | str = lay.repo / "src/app/d_swap"
        os.symlink(lay.outside, other)
    else:
        other = str(lay.outside)
    lay.seal()
    fw = lay.firewall(durable=False)
    with swapping(d, other, mode):
        written, refused = _hammer(lambda i: fw.write_text("src/app/d/f", f"{i}\n"))
        listed, _ = _hammer(lambda i: [e.name for e in fw.list_dir("src/app/d")], SIDE_ITERATIONS)
        found, _ = _hammer(lambda i: fw.grep(".", "src/app/d"), SIDE_ITERATIONS)
    lay.assert_outside_unchanged()
    assert written
    if mode == "exchange":  # in steps, a missing "d" is legitimately re-created in scope
        assert refused, "the swapped-in link should have been refused at least once"
    for names in listed:
        assert isinstance(names, list)
        assert not {"secret", "victim"} & set(names)
    _no_canary(found)


@pytest.mark.parametrize("mode", ["exchange", "steps"])
def test_f27_file_swapped_for_a_link_while_reading(lay: Layout, mode: str) -> None:
    r = lay.repo / "src/app/r.txt"
    r.write_text("SAFE\n")
    if mode == "exchange":
        other: Path | str = lay.repo / "src/app/r_swap"
        os.symlink(lay.outside / "secret", other)
    else:
        other = str(lay.outside / "secret")
    lay.seal()
    fw = lay.firewall(durable=False)
    with swapping(r, other, mode):
        texts, refused = _hammer(lambda i: fw.read_text("src/app/r.txt"))
        _hammer(lambda i: fw.write_text("src/app/r.txt", "SAFE\n"), SIDE_ITERATIONS)
    assert set(texts) <= {"SAFE\n"}
    assert refused
    lay.assert_outside_unchanged()


def test_f27_parent_directory_swapped_while_reading(lay: Layout) -> None:
    rd = lay.repo / "docs/rd"
    rd.mkdir()
    (rd / "secret").write_text("SAFE\n")
    os.symlink(lay.outside, lay.repo / "docs/rd_swap")
    lay.seal()
    fw = lay.firewall()
    with swapping(rd, lay.repo / "docs/rd_swap", "exchange"):
        texts, refused = _hammer(lambda i: fw.read_text("docs/rd/secret"))
        checked, _ = _hammer(lambda i: fw.check_read("docs/rd/secret"), SIDE_ITERATIONS)
    assert set(texts) <= {"SAFE\n"}
    assert refused
    assert set(checked) <= {"docs/rd/secret", "docs/rd_swap/secret"}
    lay.assert_outside_unchanged()
