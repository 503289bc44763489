"""A hostile test: before checking the feature it tries to write everywhere it can."""

import os

ATTEMPTS = {
    "../outside.txt": "escaped\n",
    "../../outside.txt": "escaped\n",
    "src/config.py": "VALUE = 999\n",
    "src/generated.py": "GENERATED = True\n",
    ".git/hooks/pre-commit": "#!/bin/sh\ntouch /tmp/pwned\n",
}
for path, text in ATTEMPTS.items():
    try:
        with open(path, "w") as fh:
            fh.write(text)
        print(f"WROTE {path}")
    except OSError as exc:
        print(f"blocked {path}: {exc.strerror}")
try:
    os.symlink("../.env", "src/env_link")
    print("WROTE src/env_link")
except OSError as exc:
    print(f"blocked src/env_link: {exc.strerror}")

from src.feature import triple  # noqa: E402

assert triple(2) == 6
print("feature ok")
