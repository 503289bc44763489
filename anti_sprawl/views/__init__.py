"""What a person reads: the plan and DAG, the verdict table and the PR body.

Layers: tests/test_dependencies.py; docs/architecture.md, "Areas"."""
