"""The file layer: the path firewall, confinement and fd-based reads and writes, scope globs, and
the repository listing. Imports only the top-level leaf modules.

Layers: tests/test_dependencies.py; docs/architecture.md, "Areas"."""
