"""The transcript is JSON Lines, appended as events happen; a kill leaves a readable prefix."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from anti_sprawl.agent.artifacts import ArtifactStore, read_json_lines
from anti_sprawl.agent.loop import TRANSCRIPT, Transcript
from anti_sprawl.redact import Redactor

TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"  # a GitHub token's shape


def test_each_event_is_one_appended_line_and_earlier_lines_never_change(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "artifacts")
    transcript = Transcript(store, "a", Redactor())
    sizes: list[bytes] = []
    for i in range(5):
        transcript.log({"event": "response", "n": i, "text": f"step {i} copied {TOKEN}"})
        assert transcript.ref == f"artifact://a/{TRANSCRIPT}"
        sizes.append(store.path(transcript.ref).read_bytes())
    for before, after in itertools.pairwise(sizes):
        assert after.startswith(before)
        assert after.count(b"\n") == before.count(b"\n") + 1
    path = store.path(f"artifact://a/{TRANSCRIPT}")
    events = read_json_lines(path)
    assert [e["n"] for e in events] == [0, 1, 2, 3, 4]
    assert TOKEN not in path.read_text()
    assert "[REDACTED:" in events[0]["text"]
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    # a new conversation of the same node (a rerun) starts its transcript over
    Transcript(store, "a").log({"event": "start"})
    assert read_json_lines(path) == [{"event": "start"}]


def test_a_cut_last_line_leaves_every_complete_event_readable(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "artifacts")
    transcript = Transcript(store, "a")
    for i in range(3):
        transcript.log({"event": "tool", "n": i})
    path = store.path(f"artifact://a/{TRANSCRIPT}")
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"event": "tool", "n": 3, "out')  # what a kill mid-write leaves
    assert [e["n"] for e in read_json_lines(path)] == [0, 1, 2]


_WRITER = """
import sys
from pathlib import Path
from anti_sprawl.agent.artifacts import ArtifactStore
from anti_sprawl.agent.loop import Transcript
t = Transcript(ArtifactStore(Path(sys.argv[1])), "a")
n = 0
while True:
    t.log({"event": "tool", "n": n, "output": "x" * 200_000})
    n += 1
"""


def test_killing_a_process_mid_transcript_leaves_a_readable_prefix(tmp_path: Path) -> None:
    root = tmp_path / "artifacts"
    path = root / "a" / TRANSCRIPT
    for attempt in range(3):
        proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(root)])
        deadline = time.monotonic() + 60
        while (
            not path.exists() or path.stat().st_size < 2_000_000
        ) and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        data = path.read_bytes()
        events = read_json_lines(path)
        # every complete line is an event, in order; a cut last line (if any) is left out
        assert len(events) == data.count(b"\n") >= 10, attempt
        assert [e["n"] for e in events] == list(range(len(events)))
        assert all(len(e["output"]) == 200_000 for e in events)
        if not data.endswith(b"\n"):
            tail = data.rsplit(b"\n", 1)[-1]
            assert tail
            assert not _parses(tail)


def _parses(raw: bytes) -> bool:
    try:
        json.loads(raw)
    except ValueError:
        return False
    return True
