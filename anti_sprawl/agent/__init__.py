"""The agent loop the worker and the planner share: budgets, tools and their handlers, masking and
digests, artifacts, and the worker policy.

Layers: tests/test_dependencies.py; docs/architecture.md, "Areas"."""
