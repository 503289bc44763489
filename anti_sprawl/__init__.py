"""anti-sprawl: run coding agents on a DAG of scoped subtasks.

The pipeline, in module order: ``plan`` (the data) -> ``planner`` -> ``scheduler`` ->
``workspace``/``firewall``/``sandbox`` -> ``context`` -> ``worker`` -> ``reducer`` -> ``report``.
"""

__version__ = "0.1.0"
