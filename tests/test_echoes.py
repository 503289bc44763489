"""agent/echoes.py: our own prose copied back is taken out of a reply; files are not."""

from __future__ import annotations

from anti_sprawl.agent.echoes import our_lines, without_echo
from anti_sprawl.trust import wrap_data

CALC = '"""A tiny calculator, with a long first line."""\n\n\ndef add(a, b):\n    return a + b\n'
FIRST = (
    "# Brief: node 01: add_subtract\nYour goal:\nImplement the subtract function in calc.py.\n"
    + wrap_data("file", "calc.py", CALC)
    + "\n# Previous attempt\nThis is attempt 2 at this task. Attempt 1 failed.\n"
    + "- why it failed: stalled\n"
)


def test_a_reply_of_our_prose_alone_is_nothing_and_a_file_written_back_is_kept() -> None:
    ours = our_lines([FIRST])
    echo = "This is attempt 2 at this task. Attempt 1 failed.\n- why it failed: stalled\n"
    assert without_echo(echo, ours).strip() == ""
    # a call after the echo stays; the file's own lines (in a data block) are never ours
    call = '```json\n{"name": "read_file", "arguments": {"path": "calc.py"}}\n```'
    assert without_echo(echo + call, ours) == call
    written = f"calc.py\n```python\n{CALC}```"
    assert without_echo(written, ours) == written
    assert '"""A tiny calculator, with a long first line."""' not in ours
    # short lines say too little to be an echo
    assert "Your goal:" not in ours
