"""The plan: its data model, validation (acyclic, scopes, unordered writes) and graph algorithms.

Layers: tests/test_dependencies.py; docs/architecture.md, "Areas"."""
