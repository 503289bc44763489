"""The git layer: the one git runner, worktrees, the audit of a node's change, the run branch,
locks, the `.anti-sprawl/` layout and the pre-commit secret scan.

Layers: tests/test_dependencies.py; docs/architecture.md, "Areas"."""
