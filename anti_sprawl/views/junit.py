"""A run's node verdicts as JUnit XML, the format CI dashboards (GitHub, GitLab, Jenkins) read.

One ``testsuite`` per run, one ``testcase`` per node of the plan: a failed node has a
``failure`` (its reason as the type, the reason and message as the message, its test output's
tail as the text), a skipped or unfinished node a ``skipped``. XML 1.0 cannot hold most control
characters, so they are dropped; ElementTree escapes the rest. All text passes the redactor.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from datetime import datetime

from ..redact import Redactor
from ..run.journal import RunState
from ..run.result import TaskResult
from .run import status_of

__all__ = ["junit_xml"]

_NOT_XML = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _clean(value: str, redact: Redactor) -> str:
    return _NOT_XML.sub("", redact(value))


def _seconds(r: TaskResult) -> float:
    if not r.started_at or not r.finished_at:
        return 0.0
    try:
        took = datetime.fromisoformat(r.finished_at) - datetime.fromisoformat(r.started_at)
    except ValueError:
        return 0.0
    return max(0.0, took.total_seconds())


def junit_xml(state: RunState, redact: Redactor) -> str:
    """The JUnit XML document of ``state``'s node verdicts."""
    suite = ET.Element("testsuite", name=_clean(state.plan_id, redact))
    counts = {"tests": 0, "failures": 0, "skipped": 0}
    total = 0.0
    props = ET.SubElement(suite, "properties")
    for name, value in (
        ("run_id", state.run_id),
        ("status", state.status),
        ("branch", state.branch),
    ):
        ET.SubElement(props, "property", name=name, value=_clean(value, redact))
    for task in state.plan.tasks:
        r = state.tasks.get(task.task_id) or TaskResult(task_id=task.task_id)
        took = _seconds(r)
        total += took
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"anti-sprawl.{_clean(state.plan_id, redact)}",
            name=_clean(task.task_id, redact),
            time=f"{took:.3f}",
        )
        counts["tests"] += 1
        if r.status == "failed":
            counts["failures"] += 1
            reason = r.reason or "error"
            failure = ET.SubElement(
                case, "failure", type=reason, message=_clean(f"{reason}: {r.message}", redact)
            )
            failure.text = _clean(r.tests.tail if r.tests else r.message, redact)
        elif r.status != "succeeded":
            counts["skipped"] += 1
            why = r.message or status_of(r)
            ET.SubElement(case, "skipped", message=_clean(why, redact))
    suite.set("tests", str(counts["tests"]))
    suite.set("failures", str(counts["failures"]))
    suite.set("errors", "0")
    suite.set("skipped", str(counts["skipped"]))
    suite.set("time", f"{total:.3f}")
    suite.set("timestamp", state.created_at)
    root = ET.Element("testsuites", name="anti-sprawl")
    for key in ("tests", "failures", "errors", "skipped", "time"):
        root.set(key, suite.get(key, "0"))
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
