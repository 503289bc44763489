"""A node's first prompt: lean assembly under a budget, sections, memory, packing, manifests, and
the essentials check.

Layers: tests/test_dependencies.py; docs/architecture.md, "Areas"."""
