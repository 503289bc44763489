"""The planner: a read-only model that turns a requirement into a validated plan, with the
repository map and scope assistance.

Layers: tests/test_dependencies.py; docs/architecture.md, "Areas"."""
