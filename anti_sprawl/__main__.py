"""``python -m anti_sprawl``: the command line (anti_sprawl/cli/app.py)."""

from .cli.app import main

if __name__ == "__main__":
    main()
