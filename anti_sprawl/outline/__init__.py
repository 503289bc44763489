"""How a file is shown to a model: outlines (Python, other languages, text), the regions that
matter to a goal, and the whole/outline/region views.

Layers: tests/test_dependencies.py; docs/architecture.md, "Areas"."""
