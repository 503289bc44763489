"""anti-sprawl: run coding agents on a DAG of scoped subtasks.

The pipeline, in package order: ``plan`` (the data) -> ``planner`` -> ``run`` (scheduler, node) ->
``git``/``fs``/``sandbox`` (worktree, firewall, OS sandbox) -> ``context`` -> ``agent`` (the worker)
-> ``run.result`` -> ``views``; docs/architecture.md, "Areas", lists each package's modules.
"""

__version__ = "0.1.0"
