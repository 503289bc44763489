"""Running a plan: the scheduler, a node's job and lifecycle, attempts, the journal, results and
the run-level caps.

Layers: tests/test_dependencies.py; docs/architecture.md, "Areas"."""
