"""Tool calls written as text (issue 23): each shape a small local model sends becomes a call.

Qwen2.5-Coder under llama.cpp never emits tool-call tags, so its call comes back as the
message's content: a bare JSON object, a fenced block, ``<tool_call>`` tags or doubled braces.
Through the real CLI and the real OpenAI SDK against the local fake server.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from anti_sprawl.agent.tools import WORKER_TOOLS
from anti_sprawl.planner.prompt import planner_tools
from anti_sprawl.providers.text_calls import recover_text_calls, text_call_problem

from . import e2e_fixture as fx
from .fake_llm_server import FakeLLMServer, openai_completion
from .test_no_changes import execute, plan

FIXTURES = Path(__file__).parent / "fixtures" / "real_model"

pytestmark = pytest.mark.usefixtures("python_on_path")
WRITE = {"path": "pkg/a.py", "content": "A = 1\n"}
SHAPES = {
    "bare": json.dumps({"name": "write_file", "arguments": WRITE}),
    "fenced": "```json\n" + json.dumps({"name": "write_file", "arguments": WRITE}) + "\n```",
    "tagged": "<tool_call>\n"
    + json.dumps({"name": "write_file", "arguments": WRITE})
    + "\n</tool_call>",
    "doubled": "{" + json.dumps({"name": "write_file", "arguments": WRITE}) + "}",
    "arguments only": json.dumps(WRITE),
    "arguments as a string": json.dumps({"name": "write_file", "arguments": json.dumps(WRITE)}),
    # recorded from Qwen2.5-Coder-1.5B (tests/fixtures/real_model/): Python's triple quotes
    # inside the JSON, and a closing fence without its opening one
    "triple-quoted": '```json\n{"name": "write_file", "arguments": {"path": "pkg/a.py", '
    '"content": """A = 1\n"""}}\n```',
    "closing fence only": json.dumps({"name": "write_file", "arguments": WRITE}) + "\n```",
    "triple-quoted with a line continuation": '{"name": "write_file", "arguments": '
    '{"path": "pkg/a.py", "content": """\\\nA = 1\n"""}}',
    # subtract_run6: one whole call, then a fenced block restating its arguments as Python
    "followed by commentary": json.dumps({"name": "write_file", "arguments": WRITE})
    + '\n```\nobj[\'arguments\'] = {\n    "path": "pkg/a.py"\n}\n```',
    # run w: the info string on the line after a bare fence
    "fenced, json on its own line": "```\njson\n"
    + json.dumps({"name": "write_file", "arguments": WRITE})
    + "\n```",
    "function tag": '<function name="write_file" arguments=\'' + json.dumps(WRITE) + "'/>",
    "function tag in tools": '<tools>\n  <function name="write_file" arguments=\''
    + json.dumps(WRITE)
    + "'></function>\n</tools>",
    "fenced, followed by commentary": "```json\n"
    + json.dumps({"name": "write_file", "arguments": WRITE})
    + "\n```\nThis writes the file.",
}

# make real-model 2026-12-03 run 1, call 3 verbatim: a docstring inside triple-quoted content,
# which the old repair retried until RecursionError failed the node as an internal error
RECORDED_DOCSTRING_IN_TRIPLE_QUOTES = '```json\n{\n  "name": "write_file",\n  "arguments": {\n    "path": "calc.py",\n    "content": """A tiny calculator."""\\n\\n\\n\\ndef add(a, b):\\n    return a + b\\n""",\n    "append": true\n  }\n}\n```'


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_each_shape_becomes_one_call(shape: str) -> None:
    (call,) = recover_text_calls(SHAPES[shape], WORKER_TOOLS)
    assert (call.name, call.arguments, call.from_text) == ("write_file", WRITE, True)


# make real-model 2026-12-03 run 2, verbatim: calls 1 and 17 (the second call of 17 forgot the
# comma after its content)
RECORDED_DOCSTRING_ON_ITS_OWN_LINES = '```json\n{\n  "name": "write_file",\n  "arguments": {\n    "path": "calc.py",\n    "content": """\nA tiny calculator."""\n\n\ndef add(a, b):\n    return a + b\n\ndef subtract(a, b):\n    return a - b\n    """\n    , \n    "append": true\n  }\n}\n```'
RECORDED_COMMA_FORGOTTEN = '```json\n{\n  "name": "write_file",\n  "arguments": {\n    "path": "test_calc.py",\n    "content": """\\\nfrom calc import add, subtract\n\n\ndef test_subtract():\n    assert subtract(2, 3) == -1\n"""\n    "append": false\n  }\n}\n```'


@pytest.mark.parametrize(
    ("text", "arguments"),
    [
        (
            RECORDED_DOCSTRING_IN_TRIPLE_QUOTES,
            {
                "path": "calc.py",
                "content": '"""A tiny calculator."""\n\n\n\ndef add(a, b):\n    return a + b\n',
                "append": True,
            },
        ),
        (
            RECORDED_DOCSTRING_ON_ITS_OWN_LINES,
            {
                "path": "calc.py",
                "content": '"""\nA tiny calculator."""\n\n\ndef add(a, b):\n    return a + b\n\n'
                "def subtract(a, b):\n    return a - b\n    ",
                "append": True,
            },
        ),
        (
            RECORDED_COMMA_FORGOTTEN,
            {
                "path": "test_calc.py",
                "content": "from calc import add, subtract\n\n\ndef test_subtract():\n"
                "    assert subtract(2, 3) == -1\n",
                "append": False,
            },
        ),
    ],
)
def test_triple_quoted_content_keeps_its_docstrings(text: str, arguments: dict[str, Any]) -> None:
    """The value ends at the triple quotes the JSON goes on after, not at a docstring's; a
    docstring whose opening quotes were taken as the value's gets them back."""
    (call,) = recover_text_calls(text, WORKER_TOOLS)
    assert (call.name, call.arguments) == ("write_file", arguments)


# make real-model 2026-12-03 run 9 (tests/fixtures/real_model/subtract_run13.json), call 5
# verbatim: the value opened with triple quotes ends at our data blocks' echoed closing tag
RECORDED_ECHOED_DATA_TAG = '```json\n{\n  "name": "write_file",\n  "arguments": {\n    "path": "test_calc.py",\n    "content": """from calc import add, subtract\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\ndef test_subtract():\n    assert subtract(5, 3) == 2\n</data>\n```'


def test_a_value_that_ends_at_an_echoed_data_tag_closes_there() -> None:
    """The file ends where the model echoed ``</data>``, the objects left open are closed; a
    tag with more text after it than the JSON's and the fence's ends, or one inside a value
    that does close, is not such an end."""
    (call,) = recover_text_calls(RECORDED_ECHOED_DATA_TAG, WORKER_TOOLS)
    assert call.name == "write_file"
    assert call.arguments == {
        "path": "test_calc.py",
        "content": "from calc import add, subtract\n\n\ndef test_add():\n    assert add(2, 3)"
        " == 5\n\n\ndef test_subtract():\n    assert subtract(5, 3) == 2\n",
    }
    closed = RECORDED_ECHOED_DATA_TAG.replace("</data>\n```", '</data>\n"""}}\n```')
    (call,) = recover_text_calls(closed, WORKER_TOOLS)
    assert call.arguments["content"].endswith("== 2\n</data>\n")
    followed = RECORDED_ECHOED_DATA_TAG.replace("</data>", "</data>\nThen run the tests.")
    assert recover_text_calls(followed, WORKER_TOOLS) == []
    in_a_list = RECORDED_ECHOED_DATA_TAG.replace('"arguments": {', '"arguments": [')
    assert recover_text_calls(in_a_list, WORKER_TOOLS) == []


# make real-model 2026-12-03 run 3, call 6: a whole test file in a JSON string escaped twice
# (``\\\\n``), so one line of ``\\n``; then commentary in a fenced block
RECORDED_ESCAPED_TWICE = '{"name": "write_file", "arguments": {"path": "test_calc.py", "content": "from calc import add\\\\n\\\\ndef test_add():\\\\n    assert add(2, 3) == 5\\\\n\\\\ndef test_subtract():\\\\n    assert subtract(2, 3) == -1\\\\n\\\\ndef test_subtract_neg():\\\\n    assert subtract(3, 2) == 1\\\\n\\\\ndef test_subtract_neg2():\\\\n    assert subtract(2, 2) == 0\\\\n\\\\ndef test_subtract_float():\\\\n    assert subtract(2.5, 1) == 1.5", "append": true}}\n```\nobj[\'summary\'] = f"Added the `subtract` function and a test in `test_calc.py` to `calc.py` and `test_calc.py`, and ran the tests to ensure they passed."\nobj[\'notes\'] = "Note: this replaced the whole file, and it no longer defines `add`; if that was not meant, write the file again with them, or add to a file with append: true or edit_file"\nobj[\'interfaces\'] = "None"\nobj[\'files\'] = ["calc.py", "test_calc.py"]\n```'
# the same run, call 5: calc.py in triple quotes, three of its line breaks real, the rest ``\\n``
RECORDED_MOSTLY_ESCAPED = '```json\n{\n  "name": "write_file",\n  "arguments": {\n    "path": "calc.py",\n    "content": """A tiny calculator.\\n\\ndef add(a, b):\\n    return a + b\\n\\ndef subtract(a, b):\\n    return a - b\\n\\nif __name__ == \'__main__\':\\n    import sys\\n    if len(sys.argv) != 3:\\n        print(\'Usage: python calc.py <operation> <operand1> <operand2>\')\n        sys.exit(1)\\n    operation = sys.argv[1]\\n    operand1 = float(sys.argv[2])\\n    operand2 = float(sys.argv[3])\\n    if operation == \'add\':\\n        print(f\'{add(operand1, operand2)}\')\n    elif operation == \'subtract\':\\n        print(f\'{subtract(operand1, operand2)}\')\\n    else:\\n        print(\'Unsupported operation\')\n    """\n  }\n}\n```'


def test_content_written_with_escaped_line_breaks_gets_its_lines() -> None:
    (call,) = recover_text_calls(RECORDED_ESCAPED_TWICE, WORKER_TOOLS)
    assert call.name == "write_file"
    assert call.arguments["append"] is True
    content = call.arguments["content"]
    assert content.startswith("from calc import add\n\ndef test_add():\n    assert add(2, 3)")
    assert "\\n" not in content
    assert content.count("\n") == 15
    (call,) = recover_text_calls(RECORDED_MOSTLY_ESCAPED, WORKER_TOOLS)
    lines = call.arguments["content"].splitlines()
    assert lines[:3] == ["A tiny calculator.", "", "def add(a, b):"]
    assert "        sys.exit(1)" in lines
    assert "\\n" not in call.arguments["content"]
    # one escape in a line of code is the code's own
    one = '{"name": "write_file", "arguments": {"path": "a.py", "content": "print(\'a\\\\nb\')"}}'
    (call,) = recover_text_calls(one, WORKER_TOOLS)
    assert call.arguments["content"] == "print('a\\nb')"


# make real-model 2026-12-03 run 3, call 18 verbatim: numbered steps, each call in an
# indented ```json block
RECORDED_STEPS_IN_PROSE = 'To replace the whole `test_calc.py` file with the new code, delete the existing file and create a new one with the updated content. Here’s how you can do it:\n\n1. **Delete the existing `test_calc.py` file**:\n   ```json\n   {"name": "delete_file", "arguments": {"path": "test_calc.py"}}\n   ```\n\n2. **Create a new `test_calc.py` file** with the updated content:\n   ```json\n   {"name": "write_file", "arguments": {"path": "test_calc.py", "content": "\\ndef test_add():\\n    assert add(2, 3) == 5\\n\\n\\ndef test_subtract():\\n    assert subtract(2, 3) == -1\\n", "append": false}}\n   ```\n\nThis will ensure that the `test_calc.py` file is completely replaced with the new code without the need for append.'


# make real-model 2026-12-03 run 8, call 1 verbatim: a finish-like summary in sections, the
# paths as a JSON array, then "Tool Calls": one write_file per file, each in its own block
RECORDED_SECTIONS_WITH_CALLS = '### Node: Subtract\n\n#### Summary\n- Add a new function `subtract(a, b)` to `calc.py`.\n- Add a test case for `subtract(a, b)` in `test_calc.py`.\n\n#### Notes\n- The `subtract` function should return `a - b`.\n- The test case `test_add()` should verify that `subtract` correctly computes the difference between two numbers.\n\n#### Interfaces\n- `calc.py`: The new function `subtract(a, b)`.\n- `test_calc.py`: The new test case `test_add()`.\n\n#### Files\n```json\n[\n    "calc.py",\n    "test_calc.py"\n]\n```\n\n#### Tool Calls\n- **Write file**: Write the content of `subtract(a, b)` in `calc.py`.\n  ```json\n  {\n    "name": "write_file",\n    "arguments": {\n      "path": "calc.py",\n      "content": "def subtract(a, b):\\n    return a - b\\n",\n      "append": false\n    }\n  }\n  ```\n- **Write file**: Write the content of the test case `test_add()` in `test_calc.py`.\n  ```json\n  {\n    "name": "write_file",\n    "arguments": {\n      "path": "test_calc.py",\n      "content": "from calc import add\\n\\ndef test_add():\\n    assert add(2, 3) == 5\\n",\n      "append": false\n    }\n  }\n  ```'


def test_calls_written_as_steps_in_prose_are_the_calls() -> None:
    calls = recover_text_calls(RECORDED_STEPS_IN_PROSE, WORKER_TOOLS)
    assert [(c.name, c.arguments["path"]) for c in calls] == [
        ("delete_file", "test_calc.py"),
        ("write_file", "test_calc.py"),
    ]
    assert all(c.from_text for c in calls)
    calls = recover_text_calls(RECORDED_SECTIONS_WITH_CALLS, WORKER_TOOLS)
    assert [(c.name, c.arguments["path"]) for c in calls] == [
        ("write_file", "calc.py"),
        ("write_file", "test_calc.py"),
    ]
    assert calls[0].arguments["content"] == "def subtract(a, b):\n    return a - b\n"
    step = '{"name": "read_file", "arguments": {"path": "a.py"}}'
    other = '{"name": "read_file", "arguments": {"path": "b.py"}}'
    assert (
        len(
            recover_text_calls(
                f"Read both:\n```json\n{step}\n```\nand\n```json\n{other}\n```", WORKER_TOOLS
            )
        )
        == 2
    )
    for prose in (
        f"First:\n```json\n{step}\n```\nor else:\n```json\n{step}\n```",  # one tool twice
        f"Read it:\n```json\n{step}\n```\nthen\n```python\nx = 1\n```",  # code besides
        'Files:\n```json\n["a.py"]\n```',  # data only, no call
    ):
        assert recover_text_calls(prose, WORKER_TOOLS) == []


# make real-model 2026-12-03 run 5, call 1 verbatim: a tool the model made up ("add_file")
# with write_file's arguments
RECORDED_MADE_UP_TOOL = '```json\n{\n  "name": "add_file",\n  "arguments": {\n    "path": "calc.py",\n    "content": """A tiny calculator.\n\ndef add(a, b):\n    return a + b\n\ndef subtract(a, b):\n    return a - b\n"""\n  }\n}\n```'


def test_a_made_up_tool_with_one_tools_arguments_is_that_tool() -> None:
    (call,) = recover_text_calls(RECORDED_MADE_UP_TOOL, WORKER_TOOLS)
    assert (call.name, call.arguments["path"]) == ("write_file", "calc.py")
    assert "def subtract(a, b):" in call.arguments["content"]
    # a path alone is read_file's, delete_file's and list_dir's: no one tool
    text = '{"name": "remove_file", "arguments": {"path": "calc.py"}}'
    assert recover_text_calls(text, WORKER_TOOLS) == []
    assert "remove_file, which is not a tool here" in str(text_call_problem(text, WORKER_TOOLS))


# make real-model 2026-12-03 run 7, call 3 verbatim: finish's arguments as assignments to
# one dictionary's keys; and call 5, the same without the summary finish requires
RECORDED_ASSIGNMENTS = "```\nobj['summary'] = \"Added the subtract function to calc.py and a test for it in test_calc.py.\"\nobj['files'] = ['calc.py', 'test_calc.py']\nobj['notes'] = \"The file already defined `add`, and the appended text defines it again; to replace the whole file, write it without append.\"\nobj['interfaces'] = \"The task depends on the existing add function in calc.py and the test for it in test_calc.py.\"\n```"
RECORDED_ASSIGNMENTS_NO_SUMMARY = "```\nobj['files'] = ['calc.py', 'test_calc.py']\nobj['notes'] = \"The test for subtract failed due to an assertion error, which was caused by the subtract function not returning the expected result.\"\nobj['interfaces'] = \"The task depends on the existing add function in calc.py and the test for it in test_calc.py.\"\n```"


def test_arguments_written_as_assignments_to_one_dictionary_are_a_call() -> None:
    (call,) = recover_text_calls(RECORDED_ASSIGNMENTS, WORKER_TOOLS)
    assert call.name == "finish"
    assert call.from_text
    assert call.arguments["files"] == ["calc.py", "test_calc.py"]
    assert call.arguments["summary"].startswith("Added the subtract function")
    assert recover_text_calls('obj["summary"] = f"done"', WORKER_TOOLS)[0].arguments == {
        "summary": "done"
    }
    for text in (
        RECORDED_ASSIGNMENTS_NO_SUMMARY,  # no tool's required keys
        "obj['summary'] = 'a'\nother['files'] = []",  # two dictionaries
        "obj['summary'] = 'a'\nobj['summary'] = 'b'",  # a key set twice
        "obj['summary'] = f'{name}'",  # an f-string with a field is code
        "obj['summary'] = done()",  # not a literal
        "obj['summary'] = 'a'\nprint(obj)",  # a line that is not an assignment
    ):
        assert recover_text_calls(text, WORKER_TOOLS) == [], text


def test_our_data_tags_attributes_written_back_are_an_echo_not_a_call() -> None:
    from anti_sprawl.providers.text_calls import echoes_data_label

    run_z = '```json\n{\n  "kind": "file",\n  "source": "calc.py",\n  "trust": "untrusted"\n}\n```'
    assert echoes_data_label(run_z)
    assert recover_text_calls(run_z, WORKER_TOOLS) == []
    assert not echoes_data_label(SHAPES["fenced"])
    assert not echoes_data_label('{"source": "calc.py"}')  # no kind: not our label
    assert not echoes_data_label(run_z.replace('"trust"', '"path"'))
    assert not echoes_data_label("")


# An experiment's reply (make real-model 2026-12-05: run x's request 13, its conversation
# restarted from the brief as agent/worker.py now does), verbatim.
RECORDED_FUNCTION_TAG = "<tools>\n  <function name=\"run_tests\" arguments='[]'/>\n</tools>"


def test_a_call_written_as_a_function_tag_is_that_call() -> None:
    (call,) = recover_text_calls(RECORDED_FUNCTION_TAG, WORKER_TOOLS)
    assert (call.name, call.arguments, call.from_text) == ("run_tests", {"args": []}, True)
    two = RECORDED_FUNCTION_TAG.replace("</tools>", RECORDED_FUNCTION_TAG[8:-8] + "</tools>")
    assert [c.name for c in recover_text_calls(two, WORKER_TOOLS)] == ["run_tests"] * 2
    # the same experiments: JSON calls one per line inside <tools>
    listed = "<tools>\n" + json.dumps({"name": "write_file", "arguments": WRITE})
    listed += '\n{"name": "run_tests", "arguments": {"args": []}}\n</tools>'
    assert [c.name for c in recover_text_calls(listed, WORKER_TOOLS)] == ["write_file", "run_tests"]
    prose = RECORDED_FUNCTION_TAG + "\nThis runs the tests."
    assert recover_text_calls(prose, WORKER_TOOLS) == []
    assert text_call_problem(prose, WORKER_TOOLS) == "it held a tool call mixed with other text"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("I will now call write_file with the new content.", None),
        ('Sure: {"name": "write_file", "arguments": {}} and then tests', "mixed with other text"),
        ('{"name": "write_file", "arguments": {"path": ', "not valid JSON"),
        ('{"name": "make_coffee", "arguments": {}}', "make_coffee, which is not a tool here"),
        # triple quotes that never close: nothing to repair, and no endless retry
        (
            '{"name": "write_file", "arguments": {"path": "a.py", "content": """x = 1}}',
            "not valid JSON",
        ),
    ],
)
def test_what_is_not_a_call_is_left_as_text_and_said_why(text: str, problem: str | None) -> None:
    specs = WORKER_TOOLS
    assert recover_text_calls(text, specs) == []
    found = text_call_problem(text, specs)
    assert found == problem if problem is None else problem in (found or "")


def content(text: str) -> dict[str, Any]:
    return openai_completion(content=text, finish_reason="stop")


def test_a_run_of_text_calls_lands_and_the_manifest_says_they_were_recovered(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    server.enqueue(content('{"name": "write_file", "arguments": {"path": "pkg/a.py", '))
    server.enqueue(content(SHAPES["tagged"]))
    server.enqueue(content('```json\n{"name": "finish", "arguments": {"summary": "A = 1"}}\n```'))
    repo, result = execute(tmp_path, server, plan())
    assert result.exit_code == 0, result.output
    assert fx.git(repo, "show", "anti-sprawl/demo:pkg/a.py") == "A = 1"
    # the broken first call was answered with what was wrong and the tools' names
    nudge = server.requests[1].body["messages"][-1]
    assert nudge["role"] == "user"
    assert "held a tool call as text (its tool call was not valid JSON)" in nudge["content"]
    assert "write_file" in nudge["content"]
    # the recovered call went back to the server as a real tool call, answered by a result
    third = server.requests[2].body["messages"]
    assert third[-2]["tool_calls"][0]["function"]["name"] == "write_file"
    assert third[-1]["role"] == "tool"
    run_dir = next((repo / ".anti-sprawl" / "runs").iterdir())
    manifest = json.loads((run_dir / "manifests" / "a" / "3.json").read_text())
    sources = [item["source"] for item in manifest["items"]]
    assert "assistant (tool call recovered from text)" in sources
    transcript = (run_dir / "artifacts" / "a" / "transcript.jsonl").read_text()
    assert '"from_text": true' in transcript


def test_fenced_calls_one_after_another_are_each_a_call() -> None:
    """Recorded (make real-model, 2026-12-02): a write with triple-quoted content and then
    run_tests, each in its own ```json block, nothing else in the reply."""
    text = (
        '```json\n{\n    "name": "write_file",\n    "arguments": {\n        "path": "pkg/a.py",\n'
        '        "content": """\nA = 1\n""",\n        "append": false\n    }\n}\n```\n'
        '```json\n{\n    "name": "run_tests",\n    "arguments": {\n        "args": []\n    }\n}\n```'
    )
    calls = recover_text_calls(text, WORKER_TOOLS)
    assert [(c.name, c.arguments) for c in calls] == [
        ("write_file", {"path": "pkg/a.py", "content": "\nA = 1\n", "append": False}),
        ("run_tests", {"args": []}),
    ]
    assert text_call_problem(text + "\nand more", WORKER_TOOLS) is not None


def test_json_with_comments_is_read_and_a_double_slash_in_a_string_kept() -> None:
    text = (
        '{"name": "write_file", // the tool\n'
        ' "arguments": {"path": "a.md", "content": "see http://x.org // not a comment"}}'
    )
    (call,) = recover_text_calls(text, WORKER_TOOLS)
    assert call.arguments["content"] == "see http://x.org // not a comment"
    # a file's own // lines, in a triple-quoted value, are its text
    js = '{"name": "write_file", "arguments": {"path": "a.js", "content": """// header\nlet x = 1;\n"""}}'
    (call,) = recover_text_calls(js, WORKER_TOOLS)
    assert call.arguments["content"].startswith("// header\n")


def test_a_call_written_as_a_python_dict_is_read() -> None:
    """make real-model 2026-12-04 run d, planner call 6: the whole submit_plan with None, True
    and trailing commas, which no JSON repair reads. It is read as a Python literal (parsed,
    never run); a literal that is not a dict, or code, is not a call."""
    text = (FIXTURES / "planner_python_literals_run_d.txt").read_text()
    (call,) = recover_text_calls(text, planner_tools(lean=True))
    assert call.name == "submit_plan"
    assert call.arguments["test_command"] is None
    assert [t["task_id"] for t in call.arguments["tasks"]] == ["task_1", "task_2"]
    assert call.arguments["tasks"][0]["expect_changes"] is True
    assert (
        recover_text_calls("{'name': 'finish', 'arguments': __import__('os')}", WORKER_TOOLS) == []
    )
    assert recover_text_calls("{1, 2}", WORKER_TOOLS) == []


# make real-model 2026-12-04 run d, call 12 verbatim: the content as Python strings joined with +
RECORDED_JOINED_STRINGS = '```json\n{\n  "name": "write_file",\n  "arguments": {\n    "path": "calc.py",\n    "content": """A tiny calculator."""\n    + "\\n\\n"\n    + "def add(a, b):\\n"\n    + "    return a + b",\n    "append": true\n  }\n}\n```'


def test_a_value_written_as_strings_joined_with_plus_is_their_text() -> None:
    (call,) = recover_text_calls(RECORDED_JOINED_STRINGS, WORKER_TOOLS)
    assert call.arguments == {
        "path": "calc.py",
        "content": "A tiny calculator.\n\ndef add(a, b):\n    return a + b",
        "append": True,
    }
    # only strings are joined: a name, a call or a number in the sum is not a literal
    for value in ('"a" + x', '"a" + f()', '"a" + 1'):
        text = '{"name": "finish", "arguments": {"summary": ' + value + "}}"
        assert recover_text_calls(text, WORKER_TOOLS) == []


def test_a_call_short_of_its_last_braces_is_closed() -> None:
    """make real-model 2026-12-04 (second session) run h, planner call 6: a whole submit_plan
    one closing brace short, refused as "not valid JSON". The braces it left open are closed;
    a value cut inside a string is not a call."""
    text = (FIXTURES / "planner_missing_brace_run_h.txt").read_text()
    assert text.endswith("}]}")
    (call,) = recover_text_calls(text, planner_tools(lean=True))
    assert call.name == "submit_plan"
    assert [t["task_id"] for t in call.arguments["tasks"]] == ["subtract", "test_add"]
    cut = '{"name": "write_file", "arguments": {"path": "a.py", "content": "def f(): '
    assert recover_text_calls(cut, WORKER_TOOLS) == []
    assert text_call_problem(cut, WORKER_TOOLS) == "its tool call was not valid JSON"


def test_a_call_with_line_breaks_in_its_strings_and_a_note_for_its_last_member_runs() -> None:
    """make real-model 2026-12-05 run ag, test node calls 44, 46 and 48: write_file with
    test_calc.py's lines broken for real inside the JSON string, and then, where the next
    member would be, a string with no key (the change described). Refused three times as
    "not valid JSON"; now the call, without the note. A string inside another is never taken
    for such a member, and one before other members is not left out."""
    text = (FIXTURES / "write_file_keyless_note_run_ag.txt").read_text()
    (call,) = recover_text_calls(text, WORKER_TOOLS)
    assert (call.name, sorted(call.arguments)) == ("write_file", ["content", "path"])
    assert call.arguments["content"].startswith("import pytest\n\ndef add(a, b):\n")
    assert call.arguments["content"].endswith("assert subtract(3, 2) == 1")
    inner = '{"name": "finish", "arguments": {"summary": "said \\", \\"x\\"}"}}'
    assert recover_text_calls(inner, WORKER_TOOLS)[0].arguments == {"summary": 'said ", "x"}'}
    between = '{"name": "finish", "arguments": {"summary": "a", "b", "notes": "c"}}'
    assert recover_text_calls(between, WORKER_TOOLS) == []  # only a last member is left out


def test_a_file_whose_triple_quotes_close_after_its_docstring_runs_to_the_fence() -> None:
    """make real-model 2026-12-04 (second session) run j, worker call 11: the value's triple
    quotes hold calc.py's docstring, then the rest of the file follows them, then the fence,
    then notes; the JSON never closes. The file runs to the fence, its docstring kept."""
    fixture = json.loads((FIXTURES / "subtract_run_j.json").read_text())
    text = fixture["calls"][0]["response"]["choices"][0]["message"]["content"]
    (call,) = recover_text_calls(text, WORKER_TOOLS)
    assert call.name == "write_file"
    assert call.arguments["content"] == (
        '"""A tiny calculator."""\n\n\ndef add(a, b):\n    return a + b\n\n\n'
        "def subtract(a, b):\n    return a - b"
    )
    # a block that closes its objects is not taken to run to the end
    closed = (
        '```json\n{"name": "write_file", "arguments": {"path": "a.py", "content": """x""" x}}\n```'
    )
    assert recover_text_calls(closed, WORKER_TOOLS) == []


def test_absurd_nesting_is_no_call_and_no_crash() -> None:
    """A hostile reply nested 200,000 deep: JSON's decoder gives up with RecursionError,
    which must end as "not a call", never a traceback (found in review, 2026-12-04)."""
    nested = '{"name": "write_file", "arguments": ' + "[" * 200_000
    assert recover_text_calls(nested, WORKER_TOOLS) == []
    assert text_call_problem(nested, WORKER_TOOLS) == "its tool call was not valid JSON"


def test_a_list_written_as_the_arguments_of_a_tool_that_takes_one_list_is_that_list() -> None:
    """make real-model 2026-12-04 run l, calls 16-24: run_tests' arguments written as the list
    its one parameter takes, four times over, each answered that it matched no tool."""
    text = '```json\n{\n    "name": "run_tests",\n    "arguments": ["-q", "test_calc.py"]\n}\n```'
    (call,) = recover_text_calls(text, WORKER_TOOLS)
    assert (call.name, call.arguments) == ("run_tests", {"args": ["-q", "test_calc.py"]})
    # a tool whose arguments are several: a list is no call of it
    listed = '{"name": "write_file", "arguments": ["calc.py", "x = 1"]}'
    assert recover_text_calls(listed, WORKER_TOOLS) == []


def test_empty_code_fences_alone_are_no_call() -> None:
    """make real-model 2026-12-05 run r: "```\\n```" three times, answered as a call mixed
    with text; it is an empty reply (agent/worker.py answers it so)."""
    assert text_call_problem("```\n```", WORKER_TOOLS) is None
    # a block with anything in it is still judged as a call
    assert text_call_problem('```json\n{"x": 1\n```', WORKER_TOOLS) is not None


def test_a_call_whose_file_holds_code_fences_is_read_whole() -> None:
    """make real-model 2026-12-05 run p, worker call 1 (subtract_run_p.json): a write_file whose
    calc.py held add() and subtract() each in a ```python block, the value opened with triple
    quotes and closed with one. It was cut at the first inner fence (69 characters written: the
    docstring); it is one call with the whole file, fences and all (agent/change_tools.py drops
    them when that makes the file Python)."""
    fixture = json.loads((FIXTURES / "subtract_run_p.json").read_text())
    text = fixture["calls"][0]["response"]["choices"][0]["message"]["content"]
    (call,) = recover_text_calls(text, WORKER_TOOLS)
    assert (call.name, call.arguments["path"], call.arguments["append"]) == (
        "write_file",
        "./calc.py",
        False,
    )
    assert "def add(a, b):\n    return a + b\n```" in call.arguments["content"]
    assert call.arguments["content"].endswith("def subtract(a, b):\n    return a - b\n```\\n\\n")
    # its line breaks all real: each fence a line of its own inside the block, which closes at
    # the fence after which its object is whole
    lines = text.replace("\\n", "\n")
    whole = (
        "A tiny calculator.\n\n```python\ndef add(a, b):\n    return a + b\n```\n\n"
        "```python\ndef subtract(a, b):\n    return a - b\n```\n\n"
    )
    (call,) = recover_text_calls(lines, WORKER_TOOLS)
    assert call.arguments["content"] == whole
    (call,) = recover_text_calls(lines + "\nThis writes calc.py.", WORKER_TOOLS)
    assert call.arguments["content"] == whole
    # a block after it is a call of its own
    tests = '```json\n{"name": "run_tests", "arguments": {"args": []}}\n```'
    calls = recover_text_calls(f"{lines}\n{tests}", WORKER_TOOLS)
    assert [(c.name, c.arguments.get("content")) for c in calls] == [
        ("write_file", whole),
        ("run_tests", None),
    ]


def test_a_block_cut_at_its_first_fence_swallows_no_later_block() -> None:
    """A block whose object is whole at no fence closes at its first, as before: the block
    after it stays a block of its own (here named as the call that was not valid JSON)."""
    cut = '```json\n{"name": "write_file", "arguments": {"path": "a.py", "content": "x\n```'
    tests = '```json\n{"name": "run_tests", "arguments": {"args": []}}\n```'
    assert recover_text_calls(f"{cut}\n{tests}", WORKER_TOOLS) == []
    problem = text_call_problem(f"{cut}\n{tests}", WORKER_TOOLS)
    assert problem == "of its 2 tool calls, the 1st (write_file) was not valid JSON"


def test_a_value_opened_with_triple_quotes_may_close_with_one() -> None:
    """Run p's value closed with ``",`` and the next key: the value ends at the first lone
    quote after which the rest is JSON, not at a quote of the file's own."""
    text = (
        '{"name": "write_file", "arguments": {"path": "a.py", "content": """print("a", b)\n",\n'
        '    "append": true}}'
    )
    (call,) = recover_text_calls(text, WORKER_TOOLS)
    assert call.arguments == {"path": "a.py", "content": 'print("a", b)\n', "append": True}


def test_a_command_line_of_a_tool_that_takes_a_list_of_strings_is_its_call() -> None:
    """make real-model 2026-12-05 run ai, calls 25 and 28: ``run_tests -q`` alone in a fence
    (then a stray fence line), answered that the block named no file. A reply that is one
    such line is the call, its words split as a shell would; a tool taking anything else
    (a path, a file's text), a line in prose, or a line beside another call is not."""
    recorded = "```\nrun_tests -q\n```\n```\n"
    ((name, arguments),) = [
        (c.name, c.arguments) for c in recover_text_calls(recorded, WORKER_TOOLS)
    ]
    assert (name, arguments) == ("run_tests", {"args": ["-q"]})
    quoted = recover_text_calls("run_tests tests/a.py -k 'x and y'", WORKER_TOOLS)
    assert quoted[0].arguments == {"args": ["tests/a.py", "-k", "x and y"]}
    assert recover_text_calls("read_file calc.py", WORKER_TOOLS) == []
    assert recover_text_calls("Now run_tests -q", WORKER_TOOLS) == []
    assert recover_text_calls("run_tests -k 'unclosed", WORKER_TOOLS) == []
    finish = '{"name": "finish", "arguments": {"summary": "x"}}'
    assert recover_text_calls(f"{recorded}```\n{finish}", WORKER_TOOLS) == []
