"""The repository map: files, imports and names ranked for the planner's first look.

Layers: tests/test_dependencies.py; docs/architecture.md, "Areas"."""
