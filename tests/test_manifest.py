"""Context manifests: atomic save, ordered load, validation, and the inspect rendering."""

from __future__ import annotations

import hashlib
import json
from io import StringIO
from pathlib import Path

import pytest
from pydantic import ValidationError
from rich.console import Console

from anti_sprawl.context.manifest import (
    ContextItem,
    ContextManifest,
    DroppedItem,
    load_manifests,
    render_manifests,
    save_manifest,
)
from anti_sprawl.errors import UsageError


def _item(item_id: str, kind: str, source: str, text: str, **kw: object) -> ContextItem:
    return ContextItem.model_validate(
        {
            "item_id": item_id,
            "kind": kind,
            "source": source,
            "trust": kw.pop("trust", "untrusted"),
            "tokens": len(text.split()),
            "sha256": hashlib.sha256(text.encode()).hexdigest(),
            **kw,
        }
    )


def _manifest(task_id: str, n: int, *, hidden: int = 0) -> ContextManifest:
    items = [
        _item("rules", "instruction", "anti-sprawl", "be good " * 10, trust="trusted"),
        _item("brief", "task", task_id, "do the thing", trust="trusted"),
        _item(f"file:{task_id}.py", "file", f"src/{task_id}.py", "x = 1 " * 7, hidden_chars=hidden),
    ]
    return ContextManifest(
        call_id=f"{task_id}-call-{n}",
        task_id=task_id,
        n=n,
        items=items,
        dropped=[
            DroppedItem(
                item_id="file:big.py",
                kind="file",
                source="src/big.py",
                tokens=9000,
                reason="over_budget",
            )
        ],
        total_tokens=sum(i.tokens for i in items),
        stable_prefix_bytes=1234,
        stable_prefix_sha256="ab" * 32,
    )


def test_save_writes_task_call_path_and_roundtrips(tmp_path: Path) -> None:
    m = _manifest("t1", 0)
    path = save_manifest(tmp_path, m)  # a run's RunPaths.manifests, or the planner's
    assert path == tmp_path / "t1" / "0.json"
    assert json.loads(path.read_text())["task_id"] == "t1"
    assert load_manifests(tmp_path) == [m]
    # No temp files left behind by the atomic write.
    assert sorted(p.name for p in path.parent.iterdir()) == ["0.json"]


def test_load_orders_numerically_and_filters_by_task(tmp_path: Path) -> None:
    for task_id, n in [("b", 10), ("a", 2), ("b", 2), ("b", 0), ("a", 0)]:
        save_manifest(tmp_path, _manifest(task_id, n))
    (tmp_path / "b" / "notes.json").write_text("{}")  # not a call index: ignored
    got = [(m.task_id, m.n) for m in load_manifests(tmp_path)]
    assert got == [("a", 0), ("a", 2), ("b", 0), ("b", 2), ("b", 10)]
    assert [m.n for m in load_manifests(tmp_path, "b")] == [0, 2, 10]
    assert load_manifests(tmp_path, "missing") == []
    assert load_manifests(tmp_path / "nothing-here") == []


def test_corrupt_manifest_is_a_one_line_usage_error(tmp_path: Path) -> None:
    path = save_manifest(tmp_path, _manifest("t1", 0))
    path.write_text('{"call_id": "x"')
    with pytest.raises(UsageError, match=r"cannot read manifest .*0\.json"):
        load_manifests(tmp_path)


def test_models_reject_bad_values() -> None:
    with pytest.raises(ValidationError):
        _item("x", "transcript", "a", "b")  # not a known kind
    with pytest.raises(ValidationError):
        ContextItem(item_id="x", kind="file", source="a", trust="trusted", tokens=1, sha256="no")
    with pytest.raises(ValidationError):
        _manifest("../escape", 0)  # task ids never contain path separators


def test_render_shows_items_tokens_drops_and_summary() -> None:
    buf = StringIO()
    console = Console(file=buf, width=100, color_system=None)
    render_manifests(
        [_manifest("t1", 0), _manifest("t1", 1, hidden=3), _manifest("t2", 0)], console
    )
    out = buf.getvalue()
    assert "t1 · call 0 · t1-call-0" in out
    assert "t2 · call 0 · t2-call-0" in out
    lines = out.splitlines()
    file_row = next(line for line in lines if "src/t1.py" in line and "hidden" in line)
    assert "3 hidden chars" in file_row
    assert "untrusted" in file_row
    drop_row = next(line for line in lines if "src/big.py" in line)
    assert "9,000" in drop_row
    assert "dropped: over_budget" in drop_row
    assert "3 items · 44 tokens · 1 dropped · stable prefix 1,234 bytes sha256 abababababab" in out
    summary = lines[lines.index(next(x for x in lines if "tokens per task" in x)) :]
    t1_row = next(line for line in summary if line.strip("│ ").startswith("t1"))
    assert t1_row.split("│")[2].strip() == "2"  # calls
    assert t1_row.split("│")[3].strip() == "88"  # input tokens over both calls
    assert t1_row.split("│")[5].strip() == "3"  # hidden chars


def test_render_empty() -> None:
    buf = StringIO()
    render_manifests([], Console(file=buf, width=100))
    assert buf.getvalue().strip() == "no manifests recorded"


def test_render_notes_each_files_form_and_reason() -> None:
    from anti_sprawl.context.manifest import FileChoice

    m = _manifest("t1", 0)
    m.items.append(_item("region:src/core.py", "region", "src/core.py", "outline and regions"))
    m.choices = [
        FileChoice(path="src/t1.py", scope="write", form="whole", reason="fits", tokens=7,
                   whole_tokens=7),
        FileChoice(path="src/core.py", scope="write", form="region", reason="too_large",
                   tokens=3, whole_tokens=24_000, outline="signatures",
                   regions=[(10, 19), (40, 44)]),
    ]  # fmt: skip
    buf = StringIO()
    render_manifests([m], Console(file=buf, width=160, color_system=None))
    lines = buf.getvalue().splitlines()
    assert "whole: fits" in next(line for line in lines if "src/t1.py" in line)
    core = next(line for line in lines if "src/core.py" in line)
    assert "region (signatures outline): too_large, 2 regions, 15 lines" in core
    # manifests written before choices existed still load
    old = m.model_dump(mode="json")
    del old["choices"]
    assert ContextManifest.model_validate(old).choices == []
