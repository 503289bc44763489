"""The command line: typer commands and their options; the only layer that prints and exits.

Layers: tests/test_dependencies.py; docs/architecture.md, "Areas"."""
