"""The command sandbox: the policy of what a test command may see, bubblewrap and Landlock layers,
limits, toolchain binding and command placeholders.

Layers: tests/test_dependencies.py; docs/architecture.md, "Areas"."""
