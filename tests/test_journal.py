"""The run journal on disk: a snapshot plus an append-only event log (run/journal_log.py).

Each test writes through the real ``Journal`` into a temporary run directory and reads back
with ``read_state`` (what ``status``, ``inspect`` and ``resume`` use): appends, compaction,
a torn last line, a crash between a snapshot and the log's truncation, damage, concurrent
writers, and the bytes one change costs, whatever the size of the plan.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from anti_sprawl.errors import UsageError
from anti_sprawl.git.layout import RunPaths
from anti_sprawl.plan.model import Plan
from anti_sprawl.providers.base import Usage
from anti_sprawl.run import journal_log
from anti_sprawl.run.journal import Journal, RunState, read_state
from anti_sprawl.run.result import TaskResult

from .conftest import node, plan_data


def _state(n: int) -> RunState:
    plan = Plan.model_validate(
        plan_data(*(node(f"t{i:05d}", write_scope=[f"m/t{i:05d}.py"]) for i in range(n)))
    )
    return RunState(
        run_id="r1",
        plan_id=plan.plan_id,
        repo="/x",
        base="0" * 40,
        branch="anti-sprawl/demo",
        plan=plan,
        tasks={t.task_id: TaskResult(task_id=t.task_id, name=t.name) for t in plan.tasks},
    )


def _journal(tmp_path: Path, n: int = 3) -> Journal:
    journal = Journal(RunPaths(tmp_path / "run"), _state(n))
    journal.save()
    return journal


def _progress(record: TaskResult, step: int) -> None:
    """One of a node's journal changes: started, some tokens, landed."""
    if step == 0:
        record.start("m")
    elif step == 1:
        record.tokens = Usage(input_tokens=1000, output_tokens=10)
    else:
        record.land("c" * 40)


def test_a_change_appends_one_line_and_leaves_the_snapshot(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    snapshot = journal.path.read_bytes()
    record = journal.state.tasks["t00001"]
    record.start("m")
    journal.update(record)
    journal.state.tokens = Usage(input_tokens=7)
    journal.checkpoint()
    assert journal.path.read_bytes() == snapshot
    lines = journal.paths.events.read_text().splitlines()
    assert [sorted(json.loads(line)) for line in lines] == [["seq", "task"], ["run", "seq"]]
    state, _ = read_state(journal.paths)
    assert state.tasks["t00001"].status == "running"
    assert state.tokens.input_tokens == 7
    assert state.seq == 2
    assert "plan" not in json.loads(lines[1])["run"]


def test_save_folds_the_log_into_the_snapshot(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    record = journal.state.tasks["t00000"]
    record.start("m")
    journal.update(record)
    journal.save()
    assert journal.paths.events.read_bytes() == b""
    on_disk = json.loads(journal.path.read_text())
    assert on_disk["tasks"]["t00000"]["status"] == "running"
    assert on_disk["seq"] == 1
    assert read_state(journal.paths)[0] == journal.state


def test_the_log_is_compacted_once_it_outgrows_the_snapshot(tmp_path: Path) -> None:
    journal = _journal(tmp_path, n=2)
    record = journal.state.tasks["t00000"]
    record.start("m")
    saves = 0
    for i in range(2000):
        record.tokens = Usage(input_tokens=i)
        before = journal.paths.events.stat().st_size if journal.paths.events.exists() else 0
        journal.update(record)
        saves += journal.paths.events.stat().st_size < before
        assert journal.paths.events.stat().st_size < journal_log.COMPACT_MIN + 4096
    assert saves >= 1
    state, _ = read_state(journal.paths)
    assert state.tasks["t00000"].tokens.input_tokens == 1999
    assert state == journal.state


@pytest.mark.parametrize("cut", [1, 20, -1])
def test_a_torn_last_line_is_ignored_and_cut_before_the_next_write(
    tmp_path: Path, cut: int
) -> None:
    journal = _journal(tmp_path)
    record = journal.state.tasks["t00000"]
    record.start("m")
    journal.update(record)
    whole = journal.paths.events.read_bytes()
    record.land("c" * 40)
    journal.update(record)
    torn = journal.paths.events.read_bytes()[: len(whole) + (cut % (len(whole) - 1))]
    journal.paths.events.write_bytes(torn)  # what a kill -9 mid-write leaves
    journal.close()
    state, good = read_state(journal.paths)
    assert state.tasks["t00000"].status == "running"
    assert good == len(whole)
    # The next process (resume) appends after the last whole line, never after the torn one.
    again = Journal(journal.paths, state, log_bytes=good)
    state.tasks["t00000"].land("d" * 40)
    again.update(state.tasks["t00000"])
    assert again.write_error is None
    lines = journal.paths.events.read_bytes().split(b"\n")
    assert lines[-1] == b""
    assert all(json.loads(line) for line in lines[:-1])
    assert read_state(journal.paths)[0].tasks["t00000"].commit == "d" * 40


def test_a_crash_between_snapshot_and_truncation_replays_nothing_twice(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    record = journal.state.tasks["t00002"]
    record.start("m")
    journal.update(record)
    record.land("c" * 40)
    journal.update(record)
    old_log = journal.paths.events.read_bytes()
    journal.save()
    journal.paths.events.write_bytes(old_log)  # the truncation never happened
    state, _ = read_state(journal.paths)
    assert state == journal.state
    assert state.tasks["t00002"].status == "succeeded"


def test_a_damaged_line_before_the_last_is_one_clear_error(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    for tid in ("t00000", "t00001"):
        journal.state.tasks[tid].start("m")
        journal.update(journal.state.tasks[tid])
    first, second, _ = journal.paths.events.read_bytes().split(b"\n")
    journal.paths.events.write_bytes(first[:10] + b"\n" + second + b"\n")
    with pytest.raises(UsageError, match=r"events.jsonl is damaged: line 1 of events.jsonl"):
        read_state(journal.paths)
    journal.paths.events.write_bytes(second + b"\n")  # event 1 lost: never silently skipped
    with pytest.raises(UsageError, match=r"event 1 is missing \(found 2\)"):
        read_state(journal.paths)


def test_concurrent_writers_lose_no_change(tmp_path: Path) -> None:
    journal = _journal(tmp_path, n=16)
    tids = sorted(journal.state.tasks)
    tokens_lock = threading.Lock()  # as the node runner's _charged holds around its update

    def work(tid: str) -> None:
        record = journal.state.tasks[tid]
        for step in range(3):
            _progress(record, step)
            journal.update(record)
            with tokens_lock:
                spent = journal.state.tokens.input_tokens + 1
                journal.state.tokens = Usage(input_tokens=spent)
                journal.checkpoint()

    threads = [threading.Thread(target=work, args=(tid,)) for tid in tids]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    state, _ = read_state(journal.paths)
    assert state.seq == journal.state.seq == 6 * len(tids)
    assert {r.status for r in state.tasks.values()} == {"succeeded"}
    assert state.tokens.input_tokens == 3 * len(tids)


def _bytes_per_node(tmp_path: Path, n: int) -> tuple[int, float]:
    """(bytes of one task change, journal bytes per node over a whole run of ``n`` nodes)."""
    journal = Journal(RunPaths(tmp_path / f"run{n}"), _state(n))
    journal.save()
    one = 0
    for i, tid in enumerate(sorted(journal.state.tasks)):
        record = journal.state.tasks[tid]
        for step in range(3):
            _progress(record, step)
            before = journal.bytes_written
            journal.update(record)
            if i == 0 and step == 0:
                one = journal.bytes_written - before
    journal.state.status = "succeeded"
    journal.save()
    return one, journal.bytes_written / n


def test_a_change_costs_the_same_bytes_whatever_the_plan_size(tmp_path: Path) -> None:
    small_one, small_per_node = _bytes_per_node(tmp_path, 20)
    big_one, big_per_node = _bytes_per_node(tmp_path, 2000)
    assert small_one == big_one < 1000  # one record's line, not the plan's
    assert big_per_node / small_per_node < 1.3  # snapshots and compactions included


def test_a_failed_append_is_cut_off_and_the_next_write_is_a_snapshot(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    errors: list[str] = []
    journal.on_write_error = lambda exc: errors.append(str(exc))
    journal.paths.events.mkdir()  # the first append cannot open it, as a full disk would refuse
    record = journal.state.tasks["t00000"]
    record.start("m")
    journal.update(record)
    assert len(errors) == 1
    assert "cannot write the run journal" in errors[0]
    assert json.loads(journal.path.read_text())["tasks"]["t00000"]["status"] == "pending"
    journal.paths.events.rmdir()
    record.tokens = Usage(input_tokens=5)
    journal.update(record)  # writable again: the change the log missed is in a snapshot
    assert json.loads(journal.path.read_text())["tasks"]["t00000"]["status"] == "running"
    assert read_state(journal.paths)[0] == journal.state


def test_a_version_1_snapshot_reads_and_is_written_back_as_version_2(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    data = json.loads(journal.path.read_text())
    assert data["version"] == 2
    data["version"] = 1  # as 0.2 wrote it: no seq, no log
    del data["seq"]
    journal.path.write_text(json.dumps(data))
    state, _ = read_state(journal.paths)
    assert (state.version, state.seq) == (1, 0)
    again = Journal(journal.paths, state)
    again.save()
    assert json.loads(journal.path.read_text())["version"] == 2
    data["version"] = 3
    journal.path.write_text(json.dumps(data))
    with pytest.raises(UsageError, match=r"written by a newer anti-sprawl \(v3\)"):
        read_state(journal.paths)
