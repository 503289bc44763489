"""Identifiers more than one layer must agree on, in a leaf module that imports nothing of ours.

The planner and the scripted provider (its test double) both speak of the planner's
conversation and its ``submit_plan`` tool; the plan, the manifests and the journal all
validate task ids the same way; the firewall, the sandbox and the run all name the tool's own
state directory. Keeping them here lets each side import the name without
importing the other.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import StringConstraints

__all__ = ["FINISH_TOOL", "PLANNER_TASK_ID", "STATE_DIR_NAME", "SUBMIT_PLAN_TOOL", "TaskId"]

# A task or plan id: it names branches, trailers and files, so it is kept short and plain.
TaskId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]
# The task id of the planner's own model calls (no plan task may take it: it fails TaskId).
PLANNER_TASK_ID = "__planner__"
# The planner's last tool, and a worker's.
SUBMIT_PLAN_TOOL = "submit_plan"
FINISH_TOOL = "finish"
# The tool's own directory in a repository (its layout: git.layout.StateLayout); every
# tree a model or a command can see denies it.
STATE_DIR_NAME = ".anti-sprawl"
