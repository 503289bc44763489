"""What the worker tells a model that did not call a tool, and the limits on such turns.

Each text and number here was measured against a real small model (Qwen2.5-Coder-1.5B under
llama.cpp, ``make real-model``; docs/local-models.md keeps the runs and the experiments), the
comment above it says how; ``agent/worker.py`` is the policy that uses them.
"""

from __future__ import annotations

__all__ = [
    "CONTINUE_PROMPT",
    "EMPTY_REPLY_PROMPT",
    "FAILING_FINISH_REFUSALS",
    "RESTART_FILE_CHARS",
    "RESTART_LAST_LINE",
    "SAME_REPLY_LIMIT",
    "TAIL_IN_NUDGE",
    "TEXT_TURN_LIMIT",
    "UNCLAIMED_ENDINGS",
    "WHOLE_FILE_HINT",
    "WRITTEN_PROMPT",
]

CONTINUE_PROMPT = "Continue with your tools; call `finish` when the task is done."
# Told after a turn without a tool call: small models write code correctly in a fenced block
# and badly inside a JSON string (recorded: "\\n" for line breaks, add() dropped,
# tests/fixtures/real_model/subtract_run6.json), so that form is offered (agent/file_blocks.py).
WHOLE_FILE_HINT = (
    "To change a file without a tool call, write its path on a line of its own, then its "
    "complete new content in a fenced code block: it is written for you."
)
# After an empty reply. The same prompt again got an empty reply again: after one, the next
# was empty in 10 of 25 recorded turns of Qwen2.5-Coder-1.5B (make real-model runs a-l), and
# such runs ended their attempts (three of the same reply). Replayed against the real model
# (request l/029, temperature 0.8, alternated 8 times): the same prompt again got 8 empty
# replies of 8; this one got 3 calls (write_file, finish, run_tests) and 5 empty replies.
EMPTY_REPLY_PROMPT = (
    "Your reply was empty, so nothing was done. Send your next step now as one tool call, "
    'written as a JSON object in a ```json block: {"name": "<tool>", "arguments": {...}}.'
)
# After a second reply in a row that is empty or only our data tag's attributes written back
# (a trap the same conversation does not leave) the conversation restarts from the brief,
# followed by where the attempt stands (the files it changed, as they are now, and the tests'
# verdict). Measured against the served model (docs/local-models.md): on run x's second empty
# reply, the same conversation got 4 empty replies of 4, the restart as built 6 calls of 6;
# on run z's echoes, the same conversation 8 echoes of 10 (a nudge naming the echo did not
# help), the restart 6 calls of 6. Each such reply still counts toward a stall (``_stalled``).
RESTART_LAST_LINE = "Now reply with your next tool call."
RESTART_FILE_CHARS = 12_000  # the changed files shown whole after a restart, at most
# After a prose reply whose whole files were written (agent/file_blocks.py) comes again.
WRITTEN_PROMPT = (
    "The files in your reply are already written, as shown. Call `run_tests` to check them, "
    "then call `finish` with a summary; do not send the files again."
)
# The same reply this many times, with no tool call between, ends the attempt as ``stalled``:
# recorded from Qwen2.5-Coder-1.5B (tests/fixtures/real_model/stalled_run4.json), which wrote
# one summary ten times over, each call a minute on a CPU, until its call cap; and alternating
# between two echoed replies (subtract_run11.json, calls 5-10) until the cap.
SAME_REPLY_LIMIT = 3
# This many replies in a row without a tool call, however they differ, end the attempt as
# ``stalled`` too: in every recorded run of Qwen2.5-Coder-1.5B (tests/fixtures/real_model/ and
# make real-model 2026-12-03 run 7), three text-only turns in a row were never followed by a
# tool call in the same attempt; run 7 sent seven differing replies (finish's arguments as
# Python assignments, without the summary) over a failing test until the attempt's token cap,
# a minute of CPU each. A new attempt starts clean, with a note saying why.
TEXT_TURN_LIMIT = 4
# A finish while the node's tests fail is refused this many times per attempt, the failure
# shown, before it is taken (and the attempt fails on the final run): recorded from
# Qwen2.5-Coder-1.5B (make real-model 2026-12-03 run 3, attempt 1), which wrote subtract()
# right and a test asserting subtract(2, 3) == 5, finished without running the tests, and lost
# the attempt; a new attempt re-reads a 2.5k-token first prompt, two minutes on a CPU.
FAILING_FINISH_REFUSALS = 2
TAIL_IN_NUDGE = 12  # last lines of a failing run told after a text-only turn
# Endings where the model only failed to stop. Over a change that passes the whole test
# command, the change is taken without a finish (``WorkerResult.unclaimed`` says so): recorded
# from Qwen2.5-Coder-1.5B (tests/fixtures/real_model/subtract_run_k.json), which made calc.py
# right, was told the tests pass, and wrote "I need to request the write scope" four times
# until the attempt stalled; its next attempt wrote the same right file and stalled again.
# The final audit (run/node_work.py) still runs the tests again and checks the diff.
UNCLAIMED_ENDINGS = frozenset({"stalled", "calls", "tool_calls"})
